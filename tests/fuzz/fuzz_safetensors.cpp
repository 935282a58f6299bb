// libFuzzer: a safetensors shard. The header is parsed and validated; when it passes, every
// small tensor is converted to f32, the shard is opened as a checkpoint and planned into
// GGUF-lite, and a small plan is run and read back: the writer must never write a file its own
// reader rejects.
#include "fuzz_common.h"

#include "formats/gguf_lite.h"

using namespace leapconv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  try {
    MemorySource src("fuzz.safetensors", bytes);
    const SafetensorsHeader h = read_safetensors_header(src);
    for (const TensorInfo& t : h.tensors) {
      if (t.nbytes() > (1 << 16)) continue;
      std::vector<uint8_t> raw(size_t(t.nbytes()));
      if (!raw.empty()) src.read_at(t.begin, raw.data(), raw.size());
      std::vector<float> out(size_t(t.numel()));
      if (!out.empty()) decode_to_f32(t.dtype, raw.data(), out.size(), out.data());
    }
    CheckpointFiles f;
    f.label = "fuzz";
    f.shards.push_back(std::make_unique<MemorySource>("fuzz.safetensors", std::move(bytes)));
    const Checkpoint ck = open_checkpoint(std::move(f));
    for (QType scheme : {QType::Q8Channel, QType::Q4Group64}) {
      ConvertOptions o;
      o.format = "gguf-lite";
      o.gguf.default_scheme = scheme;
      const PlannedConversion pc = plan_conversion(ck, o);
      if (pc.plan.total_bytes() > (1 << 20)) continue;
      std::vector<uint8_t> file;
      try {
        file = fuzz::convert(ck, o);
      } catch (const ConvertError&) {
        continue;  // NaN in the data, a value too large for the type: refused, fine
      }
      MemorySource written("written.gguf-lite", file);
      read_gguf_lite(written);  // a ConvertError here is a finding: rethrown below
    }
  } catch (const ConvertError& e) {
    if (std::string(e.file()) == "written.gguf-lite") __builtin_trap();  // the reader rejects what the writer wrote
  }
  return 0;
}
