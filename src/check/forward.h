// A small reference forward pass (f32 weights, f64 accumulation), for checking that a written
// file means the same model as its source: Llama (RMSNorm, SwiGLU, GQA, RoPE in HF's
// rotate-half or LEAP's interleaved layout), GPT-2 (HF GPT2LMHeadModel: LayerNorm, GELU,
// learned positions, Conv1D weights stored [in, out]) and every family of the architecture table
// as its GGUF file holds it (decoder_forward).
// Clear rather than fast.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "check/leap_w8a8.h"

namespace leapconv {

struct ArchFamily;
class GgufMetadata;

// Where the forward pass gets its weights from, one tensor (or a few rows) at a time.
class ModelWeights {
 public:
  virtual ~ModelWeights() = default;
  virtual std::vector<float> tensor(const std::string& name) = 0;
  // Whether there is such a tensor (Gemma 4's full layers may have no attn_v); the default: yes.
  virtual bool has(const std::string& name) { (void)name; return true; }
  // rows [r0, r1) of a 2-D tensor (embeddings and classifiers are read this way, not whole)
  virtual std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1) = 0;
  // Rows [r0, r1) as LEAP v2's int8 groups, as stored, with the scales of every group from the
  // 16-value block holding the first element to the one holding the last (all that the W8A8
  // mode looks at). Only weights read from such a file have them; the default throws.
  virtual Int8Rows int8_rows(const std::string& name, int64_t r0, int64_t r1);
};

// NVFP4's per-tensor factors, as llama.cpp applies them (build_lora_mm: the matmul's result times
// `<stem>.scale`; experts: times their own of `<stem>.scale` [experts]): the weights read through
// `inner`, `<stem>.weight` times the factor in `factors` (one value, or one per expert of a
// stacked [experts, rows, cols] tensor, read whole). Weights without one come as they are, and so
// do those whose `.scale` is a role of `family` (Gemma 4's router.scale and per_expert_scale: the
// forward pass reads them where the family's graph applies them).
class FactorScaledWeights : public ModelWeights {
 public:
  FactorScaledWeights(std::shared_ptr<ModelWeights> inner, std::map<std::string, std::vector<float>> factors,
                      const ArchFamily* family = nullptr)
      : inner_(std::move(inner)), factors_(std::move(factors)), family_(family) {}
  std::vector<float> tensor(const std::string& name) override;
  bool has(const std::string& name) override { return inner_->has(name); }
  std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1) override;
  Int8Rows int8_rows(const std::string& name, int64_t r0, int64_t r1) override { return inner_->int8_rows(name, r0, r1); }
  // The `.scale` tensors among a file's computed or stored tensors (none: no wrapping needed).
  static bool any(const std::map<std::string, std::vector<float>>& factors);

 private:
  const std::vector<float>* factor(const std::string& name) const;
  std::shared_ptr<ModelWeights> inner_;
  std::map<std::string, std::vector<float>> factors_;
  const ArchFamily* family_;
};

struct LlamaSpec {
  int64_t dim = 0, hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab = 0;
  double eps = 1e-5, rope_theta = 10000.0;
  bool shared_classifier = true;
  bool interleaved_rope = false;  // false: HF rotate-half pairs (i, i + hd/2); true: (2i, 2i+1)
  std::vector<float> rope_freq_factors;  // hd/2 divisors of the rotary frequencies (rope_freqs), or empty
  // LEAP's W8A8 (leap_w8a8.h): every matmul multiplies the int8 groups of the weights
  // (int8_rows) by the activation quantized to int8 in groups, as LEAP's engine runs a
  // version-2 file, and the embeddings are dequantized as it does. Norms, RoPE, attention and
  // the activations between matmuls stay the reference's.
  bool w8a8 = false;
};
// Weight names are LEAP's: tok_embeddings, layers.L.{attention_norm,wq,wk,wv,wo,ffn_norm,w1,w2,w3},
// norm, output.

struct Gpt2Spec {
  int64_t dim = 0, n_layers = 0, n_heads = 0, vocab = 0, n_positions = 0;
  int64_t ffn = 0;  // n_inner; 0 = 4 x dim
  double eps = 1e-5;
};
// Weight names are HF's: transformer.{wte,wpe,h.L.*,ln_f}.

// Any family of the architecture table as llama.cpp runs its GGUF file: the family's compute
// row (norm, activation, gating, RoPE layout, embedding scale, sliding-window pattern) and which
// roles it has (biases, per-head q/k norms, fused qkv or gate+up, post-norms, learned positions).
// Weights are read under their GGUF names, as the file holds them ([out, in] rows first).
// One layer's sizes where a file varies them (Gemma 4: its sliding and full layers' heads, kv
// heads, rotary dimensions and MLP widths; the last layers reading an earlier layer's keys and
// values).
struct DecoderLayer {
  bool sliding = false;
  int64_t head_dim = 0, n_kv_heads = 0, ffn = 0, n_rot = 0;
  int64_t kv_from = -1;  // the layer whose keys and values it attends to; -1: its own
};

struct DecoderSpec {
  const ArchFamily* family = nullptr;
  int64_t dim = 0, ffn = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, vocab = 0;
  int64_t n_rot = 0;         // rotary dimensions of every q/k head (Phi-3's partial rotary: < head_dim)
  int64_t n_positions = 0;   // rows of position_embd (learned positions)
  double eps = 1e-5;         // of the RMS or layer norm
  double rope_theta = 10000.0;
  double rope_freq_scale = 1.0;           // linear rope scaling: positions times this
  std::vector<float> rope_freq_factors;   // n_rot/2 divisors of the rotary frequencies (rope_freqs), or empty
  double rope_attn_factor = 1.0;          // cos and sin times this: q.k times its square (Phi-3's longrope)
  // YaRN as llama.cpp runs it (ggml's rope_yarn): pair i's angle blends the interpolated (times
  // rope_freq_scale) and the original one by a ramp over [yarn_corr[0], yarn_corr[1]] (whole
  // dimensions, from the original context and betas 32 and 1), cos and sin times yarn_mscale.
  bool yarn = false;
  double yarn_corr[2] = {0, 0};
  double yarn_mscale = 1.0;
  double rope_theta_swa = 10000.0;        // the sliding layers' base (Gemma 3: its own; else rope_theta)
  double rope_freq_scale_swa = 1.0;       // the sliding layers' scaling (Gemma 2: the full layers')
  int no_rope_period = 0;                 // layer l runs without RoPE when (l + 1) % period == 0 (SmolLM3)
  double embedding_scale = 1.0;           // the embeddings times this (Granite; Gemma: sqrt(hidden) besides)
  double residual_scale = 1.0;            // each branch's output times this before its residual add (Granite)
  double logit_scale = 1.0;               // the logits divided by this (Granite)
  bool tied = true;          // no output.weight: the embeddings classify
  double query_scale = 0;    // scores are q.k times this; 0: 1/sqrt(head_dim)
  double attn_softcap = 0;   // scores become c tanh(scores / c) (Gemma 2); 0: none
  double final_softcap = 0;  // the same for the logits
  int64_t sliding_window = 0;  // the sliding layers (family's swa_period) see this many positions back
  std::string not_run;       // what of the file this pass does not compute (yarn rope scaling), "" = all
  // GELU as llama.cpp's CPU backend computes it: input and value rounded to f16 (its lookup
  // table), a relative error of ~1e-3 that shows in log p at ~1e-3 (GPT-2, Gemma 2); for
  // comparing with llama.cpp only (verify and the reference use the exact tanh form).
  bool ggml_gelu = false;
  // The experts' inputs (each MLP's input and its activation) rounded to Q8_0 blocks first, as
  // llama.cpp's CPU backend multiplies MXFP4 weights (its vec_dot_type; for comparing with
  // llama.cpp only: the file's MXFP4 experts, gpt-oss).
  bool q8_expert_inputs = false;
  // With ggml_gelu: every GELU input times (1 + this) before the f16 table, a few float ulps, to
  // measure how far the pass moves when llama.cpp's own float roundings move them (tests only).
  float gelu_jitter = 0;
  // Per layer, where the file varies the sizes (Gemma 4); empty: every layer has the sizes above,
  // sliding by the family's period.
  std::vector<DecoderLayer> layers;
  int64_t per_layer_input = 0;  // Gemma 4's per-layer input width (embedding_length_per_layer_input)
  // A mixture of experts (expert_count > 0): every layer's MLP is expert_used_count of expert_count
  // experts (ffn_{gate,up,down}_exps, [experts x expert_ffn x dim]) chosen by the router
  // (ffn_gate_inp), as the family's compute row says (ArchCompute::moe_norm_weights), plus the
  // shared expert of shexp_ffn where the file has one.
  int64_t n_expert = 0, n_expert_used = 0, expert_ffn = 0, shexp_ffn = 0;
};

// The file's tensors computed from the config, by GGUF name: rope_freqs.weight (Llama 3.1),
// rope_factors_long.weight and rope_factors_short.weight (Phi-3's longrope).
using ComputedTensors = std::map<std::string, std::vector<float>>;

// The family of a GGUF file: general.architecture's row, the one with a router where the file has
// experts (llama: Llama or Mixtral; gemma4: dense or its mixture); null when none.
const ArchFamily* gguf_family(const GgufMetadata& kv);

// The spec llama.cpp reads from a GGUF file's `<arch>.*` keys for the family general.architecture
// names (defaults as llama.cpp's loader has them). vocab: rows of token_embd; has_output: the
// file has output.weight. n_ctx: llama.cpp's context per sequence (its n_ctx_seq, a multiple of
// 256), which picks longrope's long factors when longer than the original context; 0: the short
// ones, as Hugging Face runs sequences up to the original context. Throws ConvertError naming a
// missing key or an architecture the table does not have.
DecoderSpec gguf_decoder_spec(const GgufMetadata& kv, int64_t vocab, bool has_output,
                              const ComputedTensors& computed = {}, int64_t n_ctx = 0);

struct ForwardTrace {
  std::vector<std::vector<float>> layers;  // hidden state [T x dim] after each layer run
  std::vector<float> logits;               // [T x vocab], only when every layer ran
  bool has_logits = false;
  // A mixture's closest call: the smallest gap, over every token and layer, between the router
  // logits of the last expert chosen and the first left out (a gap near 0 is a near tie that
  // another implementation's rounding could break the other way); infinity without experts.
  double router_margin = INFINITY;
};

// Runs the first max_layers layers (all when max_layers >= n_layers, and then the logits).
ForwardTrace llama_forward(const LlamaSpec& s, ModelWeights& w, const std::vector<int32_t>& tokens,
                           int64_t max_layers);
ForwardTrace gpt2_forward(const Gpt2Spec& s, ModelWeights& w, const std::vector<int32_t>& tokens,
                          int64_t max_layers);
ForwardTrace decoder_forward(const DecoderSpec& s, ModelWeights& w, const std::vector<int32_t>& tokens,
                             int64_t max_layers);

}  // namespace leapconv
