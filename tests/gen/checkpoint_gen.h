// Writes small (or, for benchmarks, large) checkpoints in the real Hugging Face layout:
// config.json and/or params.json, one or more *.safetensors shards in F32, F16 or BF16, and
// model.safetensors.index.json when sharded. Values are chosen to be exactly representable in
// the shard dtype, so tests know every stored value without trusting the converter's decoders.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gen {

struct Spec {
  // "llama" (LlamaForCausalLM), "gpt2" (GPT2LMHeadModel), "qwen2" (Qwen2ForCausalLM), "qwen3"
  // (Qwen3ForCausalLM), "phi3" (Phi3ForCausalLM), "gemma2" (Gemma2ForCausalLM), "gemma"
  // (GemmaForCausalLM), "gemma3" (Gemma3ForCausalLM), "gemma4" (Gemma4ForCausalLM), "smollm3" (SmolLM3ForCausalLM), "granite"
  // (GraniteForCausalLM), "olmo2" (Olmo2ForCausalLM), "glm4" (Glm4ForCausalLM), "bitnet" (BitnetForCausalLM, 1bitLLM's layout); mixtures of experts:
  // "mixtral" (MixtralForCausalLM), "qwen2moe" (Qwen2MoeForCausalLM), "qwen3moe"
  // (Qwen3MoeForCausalLM), "olmoe" (OlmoeForCausalLM), "gpt-oss" (GptOssForCausalLM: MXFP4 experts)
  std::string arch = "llama";
  // Mixtures of experts: experts per layer, used per token, one expert's width (0: hidden),
  // the shared expert's width (Qwen2-MoE; 0: hidden).
  int64_t experts = 8, experts_used = 2, expert_hidden = 0, shared_hidden = 0;
  int64_t dim = 64, hidden = 160, layers = 2, heads = 4, kv_heads = 2, vocab = 96, seq_len = 128;
  int64_t head_dim = 0;        // 0: dim / heads (Qwen3 and Gemma 2 state it in config.json)
  // merged into config.json (RFC 7386), after the family's own keys: {"sliding_window": 4}
  std::string config_patch;
  std::string dtype = "bf16";  // f32 | f16 | bf16
  int shards = 1;
  bool tied = false;          // no lm_head; tie_word_embeddings = true (Gemma 2 and GPT-2: always tied)
  // GPT-2 as openai-community/gpt2's own model.safetensors has it: the headless GPT2Model's names
  // (wte.weight, h.0.ln_1.weight, ..., ln_f.weight: no "transformer.") and, per layer, the causal
  // mask buffers older transformers saved (h.N.attn.bias [1, 1, n, n], h.N.attn.masked_bias []).
  bool headless = false;
  // Gemma 3 / 4 as Gemma3ForConditionalGeneration / Gemma4ForConditionalGeneration save them:
  // config.json's text_config, the language model under model.language_model., a vision tower
  // and projector (Gemma 4: and an audio tower) beside it.
  bool vision = false;
  // Gemma 4's mixture with one tensor per expert (experts.E.gate_proj / up_proj / down_proj.weight),
  // as ModelOpt saves its NVFP4 checkpoints, instead of the fused experts.gate_up_proj / down_proj.
  bool unfused_experts = false;
  // Weight matrices and embeddings drawn as transformers' _init_weights draws them: normal with
  // std initializer_range (0.02), GPT-2's c_proj with 0.02 / sqrt(2 n_layer); then rounded to
  // the dtype. (Norms and biases keep their spread, so that a wrong one shows.) Off: values of
  // up to 2^-3 on the dtype's grid.
  bool hf_init = false;
  bool config_json = true;
  bool params_json = false;
  double rope_theta = 500000.0;
  uint64_t seed = 1;
  bool keep_values = true;    // false for benchmark-sized checkpoints
};

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // exactly what the shard stores, as f32 (empty if !keep_values)
};

// Writes the checkpoint into dir (created if missing); returns its tensors in file order.
std::vector<Tensor> write_checkpoint(const std::string& dir, const Spec& spec);

// Quantized checkpoints as quantization tools save them (llama.cpp's dequant_model reads them):
// the linear layers' 2-D weights (attention and MLP projections, experts; not embeddings, the
// LM head, norms or routers) re-encoded with their scale tensors, config.json given its
// quantization_config; every other tensor as it was. `kind`:
//   fp8-block        quant_method fp8, weight_block_size [block, block] (DeepSeek V3, Qwen3-FP8):
//                    F8_E4M3, *.weight_scale_inv F32 [ceil(R / block), ceil(C / block)]
//   fp8-tensor       quant_method fp8, no blocks: one F32 weight_scale_inv, an .activation_scale beside it
//   ct-fp8-channel   compressed-tensors float-quantized, channel: F8_E4M3, .weight_scale BF16 [R, 1]
//   ct-fp8-block     compressed-tensors float-quantized, block [block, block]: .weight_scale F32
//   ct-int8-channel  compressed-tensors int-quantized, channel: I8, .weight_scale F32 [R, 1]
//   modelopt-fp8     modelopt FP8: F8_E4M3, one F32 .weight_scale, .input_scale beside it
//   gptq4, gptq2     gptq (AutoGPTQ, checkpoint_format gptq: zero points stored minus one), 4 / 2 bits,
//                    groups of `block` input columns in a shuffled order (desc_act: g_idx), F16 scales
//   gptq8-v2         the same, 8 bits, checkpoint_format gptq_v2
//   ct-int4-group    compressed-tensors pack-quantized, int4 symmetric, groups of `block`, BF16 scales
//   ct-int4-zp       the same, asymmetric: weight_zero_point packed along the rows
//   ct-int8-group    the same as ct-int4-group with 8 bits
//   modelopt-nvfp4   NVIDIA ModelOpt NVFP4 (quant_algo NVFP4, hf_quant_config.json beside config.json):
//                    U8 weight [R, C / 2] (two E2M1 values a byte), F8_E4M3 weight_scale [R, C / 16],
//                    F32 weight_scale_2 and input_scale (scalars)
//   modelopt-nvfp4-hf  the same with hf_quant_config.json only (no quantization_config in config.json)
//   ct-nvfp4         compressed-tensors nvfp4-pack-quantized: weight_packed, weight_scale,
//                    weight_global_scale (1 / scale_2) and input_global_scale
// Rewrites dir's shards in place (values read back from them). Writes, in ref_dir, the same
// checkpoint as the converter decodes it: one F32 shard of every tensor's decoded value
// (float(code) x float(scale), in f32, decoded here from the bit fields), no quantization_config,
// the other files copied (ref_dir "": none). Returns how many weights it quantized.
int quantize_checkpoint(const std::string& dir, const std::string& kind, int64_t block, const std::string& ref_dir);

// A PEFT LoRA adapter of the checkpoint in base_dir, as peft's save_pretrained writes it:
// adapter_config.json (peft_type LORA, r, lora_alpha, target_modules, base_model_name_or_path =
// base_dir) and adapter_model.safetensors (base_model.model.<module>.lora_A.weight [r, in] and
// .lora_B.weight [out, r], in `dtype`, for every 2-D weight of the base whose module name ends in
// a target). When merged_dir is given, it gets the base merged with it as F32: W + (alpha / r) x
// (B A), B A summed over r in f32 in order, the other files of base_dir copied. Returns how many
// modules it adapts.
struct LoraSpec {
  int64_t r = 8;
  double alpha = 16;
  std::vector<std::string> targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  std::string dtype = "bf16";  // f32 | bf16
  uint64_t seed = 3;
};
int write_lora_adapter(const std::string& base_dir, const std::string& dir, const LoraSpec& spec, const std::string& merged_dir = "");

// Lower-level helpers the tests use to build bad inputs.
struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
std::string safetensors_header_json(const std::vector<RawTensor>& tensors);
void write_safetensors(const std::string& path, const std::vector<RawTensor>& tensors);
std::vector<uint8_t> read_file(const std::string& path);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);
void write_text(const std::string& path, const std::string& text);

}  // namespace gen
