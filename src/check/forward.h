// A small reference forward pass (f32 weights, f64 accumulation), for checking that a written
// file means the same model as its source: Llama (RMSNorm, SwiGLU, GQA, RoPE in HF's
// rotate-half or LEAP's interleaved layout) and GPT-2 (HF GPT2LMHeadModel: LayerNorm, GELU,
// learned positions, Conv1D weights stored [in, out]). Clear rather than fast.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "check/leap_w8a8.h"

namespace leapconv {

// Where the forward pass gets its weights from, one tensor (or a few rows) at a time.
class ModelWeights {
 public:
  virtual ~ModelWeights() = default;
  virtual std::vector<float> tensor(const std::string& name) = 0;
  // rows [r0, r1) of a 2-D tensor (embeddings and classifiers are read this way, not whole)
  virtual std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1) = 0;
  // Rows [r0, r1) as LEAP v2's int8 groups, as stored, with the scales of every group from the
  // 16-value block holding the first element to the one holding the last (all that the W8A8
  // mode looks at). Only weights read from such a file have them; the default throws.
  virtual Int8Rows int8_rows(const std::string& name, int64_t r0, int64_t r1);
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

struct ForwardTrace {
  std::vector<std::vector<float>> layers;  // hidden state [T x dim] after each layer run
  std::vector<float> logits;               // [T x vocab], only when every layer ran
  bool has_logits = false;
};

// Runs the first max_layers layers (all when max_layers >= n_layers, and then the logits).
ForwardTrace llama_forward(const LlamaSpec& s, ModelWeights& w, const std::vector<int32_t>& tokens,
                           int64_t max_layers);
ForwardTrace gpt2_forward(const Gpt2Spec& s, ModelWeights& w, const std::vector<int32_t>& tokens,
                          int64_t max_layers);

}  // namespace leapconv
