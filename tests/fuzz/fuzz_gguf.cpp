// libFuzzer: a GGUF file through the real GGUF reader (gguf_file.h read_gguf_file, with and
// without its summary limits) and the --inspect path, then every tensor up to 1 MiB decoded.
#include "fuzz_common.h"

#include "formats/gguf/gguf_file.h"

using namespace leapconv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() >= 4) std::memcpy(bytes.data(), "GGUF", 4);
  MemorySource src("fuzz.gguf", bytes);
  try {
    read_gguf_file(src);
  } catch (const ConvertError&) {
  }
  try {
    GgufReadOptions ro;
    ro.max_array_elements = 16;
    ro.require_trailing_padding = false;
    read_gguf_file(src, ro);
    const InspectedFile info = inspect_file(src);
    int64_t budget = 1 << 20;
    for (const PlanItem& it : info.items) {
      if (it.size.total() > budget) continue;
      budget -= it.size.total();
      read_tensor_f32(src, it);
    }
  } catch (const ConvertError&) {
  }
  return 0;
}
