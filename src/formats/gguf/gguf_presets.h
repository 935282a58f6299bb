// llama-quantize's per-tensor type choices for its file types (Q4_K_M and friends), as
// llama.cpp's src/llama-quant.cpp makes them when it quantizes an F16/BF16 GGUF without an
// importance matrix and without --pure: which tensors it quantizes at all, the mixture rules
// (output and tied embeddings, attn_v and ffn_down getting more bits in some layers, the GQA and
// 70B adjustments) and the fallbacks for rows a type's blocks do not divide. Dense models only
// (the Falcon branches do not apply to the families this project writes); mixtures of experts
// with their rules (8 experts: attn_v and attn_k Q8_0, attn_output Q5_K; ffn_down by the layer
// its name says; routers never quantized; stacked experts quantized row by row like any 2-D
// tensor of experts x rows rows).
#pragma once
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "quant/quant_types.h"

namespace leapconv {

// LLAMA_FTYPE_MOSTLY_* values of the file types this module knows.
enum LlamaFtype : uint32_t {
  kFtypeQ4_0 = 2, kFtypeQ4_1 = 3, kFtypeQ8_0 = 7, kFtypeQ5_0 = 8, kFtypeQ5_1 = 9,
  kFtypeQ2_K = 10, kFtypeQ3_K_S = 11, kFtypeQ3_K_M = 12, kFtypeQ3_K_L = 13, kFtypeQ4_K_S = 14,
  kFtypeQ4_K_M = 15, kFtypeQ5_K_S = 16, kFtypeQ5_K_M = 17, kFtypeQ6_K = 18, kFtypeIQ2_XXS = 19, kFtypeIQ2_XS = 20,
  kFtypeQ2_K_S = 21, kFtypeIQ3_XS = 22, kFtypeIQ3_XXS = 23, kFtypeIQ1_S = 24, kFtypeIQ4_NL = 25, kFtypeIQ3_S = 26,
  kFtypeIQ3_M = 27, kFtypeIQ2_S = 28, kFtypeIQ2_M = 29, kFtypeIQ4_XS = 30, kFtypeIQ1_M = 31, kFtypeTQ1_0 = 36,
  kFtypeTQ2_0 = 37, kFtypeMxfp4Moe = 38, kFtypeQ1_0 = 40, kFtypeQ2_0 = 41,
};

// What llama-quantize knows of the model when it chooses.
struct QuantizeModel {
  int64_t n_layers = 0, n_head = 0, n_head_kv = 0;
  bool has_output = true;  // an output.weight tensor (false: tied, token_embd takes output's rule)
  bool is_70b = false;     // llama.cpp's LLM_TYPE_70B (Llama: 80 layers with GQA)
  int64_t n_attention_wv = 0;  // attn_v tensors, 0: one per layer (Gemma 4's shared and keys-as-values layers have none)
  int64_t n_expert = 0;        // expert_count (0: dense)
  bool has_imatrix = false;    // --imatrix given (some rules differ with one)
};

// The tensor, by its GGUF name; layer = its blk index (-1 for none); ncols = ne[0].
struct QuantizeTensor {
  std::string name;
  int64_t layer = -1;
  int64_t n_dims = 2;
  int64_t ncols = 0;
  int64_t ne2 = 1;            // its third ggml dimension (a mixture's stacked experts: > 1)
};

// llama-quantize's per-tensor options (tools/quantize/quantize.cpp), as llama_tensor_get_type
// applies them: the two type options first, then --tensor-type patterns (types quantized files
// only), then the mixture unless --pure, then the fallback.
struct QuantizeOptions {
  bool pure = false;                     // --pure: no mixture rules (the fallbacks still apply)
  bool leave_output = false;             // --leave-output-tensor: output.weight is not quantized
  std::optional<QType> output_type;      // --output-tensor-type (and tied token_embd, by the mixture)
  std::optional<QType> token_embd_type;  // --token-embedding-type
  struct TensorType {
    std::string pattern;  // lowercased, as quantize.cpp's parse_tensor_type keeps it
    std::regex re;        // searched in the tensor's name (std::regex_search); the first that matches wins
    QType type;
  };
  std::vector<TensorType> tensor_types;  // --tensor-type PATTERN=TYPE, --tensor-type-file
  std::vector<int> prune_layers;         // --prune-layers L0,L1,...: sorted, without repeats
  bool any() const {
    return pure || leave_output || output_type || token_embd_type || !tensor_types.empty() || !prune_layers.empty();
  }
};

// tensor_type_fallback: the type for rows of ncols values when t's blocks do not divide them
// (Q2_K, Q3_K, TQ1_0, TQ2_0, Q2_0 -> Q4_0; Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0; IQ4_XS and
// the codebook types IQ1_S .. IQ3_S -> IQ4_NL; then F16 if that does not fit either); t itself when they do. llama-quantize has none
// for Q1_0 (128-value blocks): ConvertError naming `name`.
QType llama_quantize_fallback(QType t, int64_t ncols, const std::string& name = "");

// tensor_requires_imatrix: llama-quantize refuses to write this tensor in `type` without importance
// weights (IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_M, IQ1_S; Q2_K in a Q2_K_S file); token_embd
// and output never.
bool llama_quantize_requires_imatrix(const std::string& name, QType type, uint32_t ftype);
// Whether llama-quantize refuses file type `ftype` (default type `base`) without an importance
// matrix on a usual dense model (Llama-3-8B's shape: 32 layers, 4 query heads per KV head): some
// tensor its mixture chooses needs one. A menu fact (the page disables these presets until an
// imatrix is in use); the plan still asks per tensor of the real model.
bool llama_quantize_ftype_needs_imatrix(uint32_t ftype, QType base);

// A --schemes glob (* any run, ? one character, first match wins, the whole name) as a
// --tensor-type pattern (a regular expression llama-quantize searches in the name, lowercased):
// anchored at both ends, '.' escaped, * and ? as .* and . ("blk.*.ffn_down.weight" ->
// "^blk\..*\.ffn_down\.weight$"). Globs hold letters, digits, . _ - * ? (the page's rule
// check); any other character is escaped.
std::string tensor_type_pattern(const std::string& glob);

// llama-quantize's running counts (quantize_state_impl's i_attention_wv, i_ffn_down): attn_v and
// ffn_down tensors that went through the mixture so far, in its tensor order. A tensor a
// --tensor-type pattern or --pure decides is not counted, so the ones after it shift (a dense
// model's ffn_down rules go by this count, not by the layer in the name).
struct QuantizeCounters {
  int64_t attention_wv = 0, ffn_down = 0, ffn_gate = 0, ffn_up = 0;
};
// attn_v, and what llama-quantize counts with it (fused attn_qkv, MLA's attn_kv_b): n_attention_wv.
bool llama_quantize_counts_as_attn_v(const std::string& name);

// Why a tensor got another type than the file type's own.
struct QuantizeNotes {
  std::string mixture;   // a mixture rule chose it ("Q4_K -> Q6_K (llama-quantize's mixture)")
  std::string fallback;  // its rows do not fit the blocks ("Q4_K -> Q5_0 (rows of 96 ...)")
};

// The type llama-quantize writes for this tensor, quantizing to file type `ftype` whose default
// type is `base`; `keep` is the tensor's type in the F16/BF16 input (returned for tensors it does
// not quantize: 1-D, norms, output.weight under --leave-output-tensor).
// Call it for every tensor in llama-quantize's order with the same `counters`.
QType llama_quantize_type(uint32_t ftype, QType base, QType keep, const QuantizeModel& m, const QuantizeTensor& t,
                          QuantizeCounters& counters, QuantizeNotes* notes, const QuantizeOptions& opt = {});

}  // namespace leapconv
