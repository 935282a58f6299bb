// libFuzzer: the checkpoint's JSON files. The first byte picks the file the rest of the input
// replaces in a small generated checkpoint (config.json, params.json, the shard index, a
// --schemes rules file, tokenizer_config.json / generation_config.json as side files; the
// config.json of a mixture of experts: gpt-oss's MXFP4 experts, Qwen2-MoE's stacked ones; the
// config.json of a quantized checkpoint, FP8 in blocks, GPTQ, compressed-tensors int4 with zero
// points; or their shards; a LoRA adapter's adapter_config.json or its adapter_model.safetensors,
// written as a GGUF adapter and merged into the small Llama; first bytes 240 to 243: an NVFP4
// checkpoint's config.json, shard or hf_quant_config.json (ModelOpt), or shard (compressed-tensors);
// 244, 245: a BitNet checkpoint's config.json or shard);
// the checkpoint is then opened and planned into every format, and a quantized one converted (its
// weights decoded with their scales, or NVFP4's repacked).
#include "fuzz_common.h"

using namespace leapconv;

namespace {
const fuzz::CheckpointBytes& bytes2() {
  static const fuzz::CheckpointBytes b = fuzz::make_checkpoint_bytes(2);
  return b;
}
const fuzz::CheckpointBytes& moe(bool gpt_oss) {
  static const fuzz::CheckpointBytes g = fuzz::make_checkpoint_bytes(1, "gpt-oss"), q = fuzz::make_checkpoint_bytes(1, "qwen2moe");
  return gpt_oss ? g : q;
}
// 0 FP8 in blocks, 1 GPTQ 4-bit (act-order), 2 compressed-tensors int4 with zero points
const fuzz::CheckpointBytes& quantized(int kind) {
  static const fuzz::CheckpointBytes k[3] = {fuzz::make_checkpoint_bytes(1, "", "fp8-block"), fuzz::make_checkpoint_bytes(1, "", "gptq4"),
                                             fuzz::make_checkpoint_bytes(1, "", "ct-int4-zp")};
  return k[kind];
}
// The adapter's config (14) or its shard (15) replaced: open it, plan and write the GGUF adapter,
// and merge it into the small Llama (a full conversion).
int adapter_case(int mode, const uint8_t* data, size_t size) {
  static const fuzz::CheckpointBytes a = fuzz::make_adapter_bytes(), base = fuzz::make_checkpoint_bytes(1);
  try {
    CheckpointFiles f = fuzz::files_of(a);
    if (mode == 14) f.adapter_config_json = std::string(reinterpret_cast<const char*>(data), size);
    else f.shards[0] = std::make_unique<MemorySource>("adapter_model.safetensors", std::vector<uint8_t>(data, data + size));
    Checkpoint adapter = open_checkpoint(std::move(f));
    ConvertOptions o;
    o.format = "gguf";
    o.gguf.default_scheme = QType::F16;
    o.gguf_file_type = -1;  // (the default scheme's file type)
    const PlannedConversion pc = plan_conversion(adapter, o);
    if (pc.plan.total_bytes() < (1 << 20)) fuzz::convert(adapter, o);
    Checkpoint model = open_checkpoint(fuzz::files_of(base));
    merge_lora(model, std::move(adapter));
    o.gguf_file_type = -1;
    o.gguf.default_scheme = QType::Q8_0;
    o.vocab.allow_no_vocab = true;
    fuzz::convert(model, o);
  } catch (const ConvertError&) {
  }
  return 0;
}

// NVFP4 and BitNet (first byte 240 + k): 0 ModelOpt's config.json, 1 its shard, 2 its
// hf_quant_config.json, 3 compressed-tensors' shard, 4 BitNet's config.json, 5 its shard replaced;
// opened, planned as GGUF F16 and converted.
int nvfp4_case(int k, const uint8_t* data, size_t size) {
  static const fuzz::CheckpointBytes m = fuzz::make_checkpoint_bytes(1, "", "modelopt-nvfp4", 64),
                                     c = fuzz::make_checkpoint_bytes(1, "", "ct-nvfp4", 64),
                                     b = fuzz::make_checkpoint_bytes(1, "", "bitnet");
  try {
    CheckpointFiles f = fuzz::files_of(k >= 4 ? b : k == 3 ? c : m);
    const std::string text(reinterpret_cast<const char*>(data), size);
    if (k == 0 || k == 4) f.config_json = text;
    if (k == 1 || k == 3 || k == 5) f.shards[0] = std::make_unique<MemorySource>("model.safetensors", std::vector<uint8_t>(data, data + size));
    if (k == 2) f.side_files[0].bytes = text;
    const Checkpoint ck = open_checkpoint(std::move(f));
    ConvertOptions o;
    o.format = "gguf";
    o.gguf.default_scheme = QType::F16;
    o.gguf_file_type = -1;
    o.vocab.allow_no_vocab = true;
    const PlannedConversion pc = plan_conversion(ck, o);
    if (pc.plan.total_bytes() < (1 << 20)) fuzz::convert(ck, o);
  } catch (const ConvertError&) {
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] >= 240) return nvfp4_case((data[0] - 240) % 6, data + 1, size - 1);
  const int mode = data[0] % 16;
  if (mode >= 14) return adapter_case(mode, data + 1, size - 1);
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    CheckpointFiles f = fuzz::files_of(mode >= 8 ? quantized((mode - 8) % 3) : mode >= 6 ? moe(mode == 6) : bytes2());
    std::vector<SchemeRule> rules_gguf, rules_lite;
    switch (mode) {
      case 0: f.config_json = text; break;
      case 1: f.config_json.reset(); f.params_json = text; break;
      case 2: f.index_json = text; break;
      case 3:
        rules_gguf = format_rules(*find_format("gguf"), "rules.json", text);
        rules_lite = format_rules(*find_format("gguf-lite"), "rules.json", text);
        break;
      case 4: f.side_files.push_back({"tokenizer_config.json", text}); break;
      case 5: f.side_files.push_back({"generation_config.json", text}); break;
      case 6: case 7: case 8: case 9: case 10: f.config_json = text; break;
      case 11: case 12: case 13:  // a quantized checkpoint's shard
        f.shards[0] = std::make_unique<MemorySource>("model.safetensors", std::vector<uint8_t>(data + 1, data + size));
        break;
    }
    const Checkpoint ck = open_checkpoint(std::move(f));
    for (auto [name, o] : fuzz::conversions()) {
      if (name != "leap-v1" && name != "leap-v2" && name != "gguf-lite-q4" && name != "gguf-q8_0" &&
          !(mode >= 6 && name == "gguf-f16"))
        continue;
      if (o.format == "gguf") o.gguf.rules = rules_gguf;
      if (o.format == "gguf-lite") o.gguf.rules = rules_lite;
      try {
        const PlannedConversion pc = plan_conversion(ck, o);
        if (mode >= 8 && name == "gguf-q8_0" && pc.plan.total_bytes() < (1 << 20)) fuzz::convert(ck, o);
      } catch (const ConvertError&) {
      }
    }
  } catch (const ConvertError&) {
  }
  return 0;
}
