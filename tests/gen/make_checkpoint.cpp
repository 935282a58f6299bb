// make_checkpoint: writes a generated checkpoint for demos, Node/browser tests and benchmarks.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "checkpoint_gen.h"

static const char* kUsage =
    "usage: make_checkpoint <dir> [--preset tiny|tinyllama|minigpt] [--arch llama|gpt2|qwen2|qwen3|phi3|gemma2|gemma|gemma3|gemma4|smollm3|granite|olmo2|glm4|bitnet|mixtral|qwen2moe|qwen3moe|olmoe|gpt-oss]\n"
    "       [--experts N] [--experts-used N] [--expert-hidden N] [--shared-hidden N]\n"
    "       [--dim N] [--hidden N] [--layers N] [--heads N] [--kv-heads N] [--head-dim N] [--vocab N] [--seq-len N]\n"
    "       [--rope-theta X] [--config JSON (merged into config.json)]\n"
    "       [--dtype bf16|f16|f32] [--shards N] [--tied] [--headless] [--vision] [--unfused-experts] [--hf-init] [--params-json] [--no-config] [--seed N]\n"
    "       [--quant fp8-block|fp8-tensor|ct-fp8-channel|ct-fp8-block|ct-int8-channel|modelopt-fp8|gptq4|gptq2|gptq8-v2|ct-int4-group|ct-int4-zp|ct-int8-group|modelopt-nvfp4|modelopt-nvfp4-hf|ct-nvfp4|bitnet [--quant-block N]\n"
    "        [--quant-ref DIR (the checkpoint as the converter decodes it, F32; default <dir>-decoded)]]\n"
    "   or: make_checkpoint <adapter_dir> --lora-base <base_dir> [--lora-r N] [--lora-alpha X] [--lora-dtype bf16|f32]\n"
    "       [--lora-targets q_proj,k_proj,...] [--lora-merged DIR (the base merged with it, F32)] [--seed N]\n";

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') { std::fputs(kUsage, stderr); return 2; }
  gen::Spec s;
  s.keep_values = false;
  std::string quant, quant_ref = std::string(argv[1]) + "-decoded";
  int64_t quant_block = 32;
  std::string lora_base, lora_merged;
  gen::LoraSpec lora;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto num = [&]() -> int64_t {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return std::atoll(argv[++i]);
    };
    if (a == "--preset") {
      std::string p = i + 1 < argc ? argv[++i] : "";
      if (p == "tinyllama") {  // TinyLlama-1.1B's shapes
        s.dim = 2048; s.hidden = 5632; s.layers = 22; s.heads = 32; s.kv_heads = 4; s.vocab = 32000; s.seq_len = 2048;
        s.shards = 2; s.rope_theta = 10000.0;
      } else if (p == "minigpt") {  // the lab's MiniGPT size
        s.arch = "gpt2"; s.dim = 384; s.layers = 6; s.heads = 6; s.vocab = 4096; s.seq_len = 256; s.dtype = "f32";
      } else if (p != "tiny") { std::fprintf(stderr, "unknown preset %s\n", p.c_str()); return 2; }
    } else if (a == "--arch") s.arch = i + 1 < argc ? argv[++i] : "";
    else if (a == "--dim") s.dim = num();
    else if (a == "--hidden") s.hidden = num();
    else if (a == "--layers") s.layers = num();
    else if (a == "--heads") s.heads = num();
    else if (a == "--kv-heads") s.kv_heads = num();
    else if (a == "--head-dim") s.head_dim = num();
    else if (a == "--rope-theta") s.rope_theta = i + 1 < argc ? std::atof(argv[++i]) : 0.0;
    else if (a == "--config") s.config_patch = i + 1 < argc ? argv[++i] : "";
    else if (a == "--vocab") s.vocab = num();
    else if (a == "--experts") s.experts = num();
    else if (a == "--experts-used") s.experts_used = num();
    else if (a == "--expert-hidden") s.expert_hidden = num();
    else if (a == "--shared-hidden") s.shared_hidden = num();
    else if (a == "--seq-len") s.seq_len = num();
    else if (a == "--dtype") s.dtype = i + 1 < argc ? argv[++i] : "";
    else if (a == "--shards") s.shards = int(num());
    else if (a == "--seed") s.seed = uint64_t(num());
    else if (a == "--tied") s.tied = true;
    else if (a == "--headless") s.headless = true;  // GPT-2 as openai-community/gpt2 saves it
    else if (a == "--vision") s.vision = true;      // Gemma3ForConditionalGeneration's layout
    else if (a == "--unfused-experts") s.unfused_experts = true;  // Gemma 4: one tensor per expert (ModelOpt's NVFP4)
    else if (a == "--hf-init") s.hf_init = true;    // weights as transformers initialises them
    else if (a == "--params-json") s.params_json = true;
    else if (a == "--no-config") s.config_json = false;
    else if (a == "--quant") quant = i + 1 < argc ? argv[++i] : "";
    else if (a == "--quant-block") quant_block = num();
    else if (a == "--quant-ref") quant_ref = i + 1 < argc ? argv[++i] : "";
    else if (a == "--lora-base") lora_base = i + 1 < argc ? argv[++i] : "";
    else if (a == "--lora-merged") lora_merged = i + 1 < argc ? argv[++i] : "";
    else if (a == "--lora-r") lora.r = num();
    else if (a == "--lora-alpha") lora.alpha = i + 1 < argc ? std::atof(argv[++i]) : 0.0;
    else if (a == "--lora-dtype") lora.dtype = i + 1 < argc ? argv[++i] : "";
    else if (a == "--lora-targets") {
      lora.targets.clear();
      std::string list = i + 1 < argc ? argv[++i] : "";
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) lora.targets.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    }
    else { std::fprintf(stderr, "unknown option %s\n%s", a.c_str(), kUsage); return 2; }
  }
  if (s.dtype != "bf16" && s.dtype != "f16" && s.dtype != "f32") { std::fputs("--dtype: bf16, f16 or f32\n", stderr); return 2; }
  try {
    if (!lora_base.empty()) {
      lora.seed = s.seed;
      gen::write_lora_adapter(lora_base, argv[1], lora, lora_merged);
      std::printf("%s\n", argv[1]);
      return 0;
    }
    gen::write_checkpoint(argv[1], s);
    if (!quant.empty()) gen::quantize_checkpoint(argv[1], quant, quant_block, quant_ref);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::printf("%s\n", argv[1]);
  return 0;
}
