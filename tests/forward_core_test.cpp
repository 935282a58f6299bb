// The reference forward pass in src/forward.*: RoPE layouts agree after the permutation, GQA
// and both classifiers run, and GPT-2 matches a tiny case worked out by hand below.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "check/forward.h"
#include "plan/plan.h"

using namespace leapconv;

namespace {

class MapWeights : public ModelWeights {
 public:
  std::map<std::string, std::vector<float>> t;
  std::map<std::string, int64_t> cols;
  std::vector<float> tensor(const std::string& n) override { return t.at(n); }
  std::vector<float> rows(const std::string& n, int64_t r0, int64_t r1) override {
    const auto& v = t.at(n);
    const int64_t c = cols.at(n);
    return std::vector<float>(v.begin() + r0 * c, v.begin() + r1 * c);
  }
  void add(const std::string& n, int64_t r, int64_t c, std::mt19937& g, float amp, float base = 0) {
    std::uniform_real_distribution<float> d(-amp, amp);
    std::vector<float> v(size_t(r * c));
    for (float& x : v) x = base + d(g);
    t[n] = v;
    cols[n] = c;
  }
};

LlamaSpec small_llama(bool shared) {
  LlamaSpec s;
  s.dim = 32; s.hidden = 48; s.n_layers = 2; s.n_heads = 4; s.n_kv_heads = 2; s.vocab = 40;
  s.rope_theta = 500000.0; s.shared_classifier = shared;
  return s;
}

MapWeights random_llama(const LlamaSpec& s, uint32_t seed) {
  std::mt19937 g(seed);
  MapWeights w;
  const int64_t kv = s.n_kv_heads * (s.dim / s.n_heads);
  w.add("tok_embeddings", s.vocab, s.dim, g, 0.5f);
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    w.add(p + "attention_norm", 1, s.dim, g, 0.1f, 1.0f);
    w.add(p + "ffn_norm", 1, s.dim, g, 0.1f, 1.0f);
    w.add(p + "wq", s.dim, s.dim, g, 0.3f);
    w.add(p + "wk", kv, s.dim, g, 0.3f);
    w.add(p + "wv", kv, s.dim, g, 0.3f);
    w.add(p + "wo", s.dim, s.dim, g, 0.3f);
    w.add(p + "w1", s.hidden, s.dim, g, 0.3f);
    w.add(p + "w2", s.dim, s.hidden, g, 0.3f);
    w.add(p + "w3", s.hidden, s.dim, g, 0.3f);
  }
  w.add("norm", 1, s.dim, g, 0.1f, 1.0f);
  if (!s.shared_classifier) w.add("output", s.vocab, s.dim, g, 0.5f);
  return w;
}

// rows permuted the way the converter writes wq / wk (SPEC.md): rows viewed as
// [heads, 2, hd/2, cols] with the middle two axes swapped, [heads, hd/2, 2, cols]
std::vector<float> permute(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t heads) {
  std::vector<float> out(w.size());
  const int64_t hd = rows / heads, half = hd / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::copy_n(w.begin() + (h * hd + j * half + i) * cols, cols, out.begin() + (h * hd + i * 2 + j) * cols);
  return out;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST(ForwardCore, InterleavedRopeOnPermutedWeightsEqualsRotateHalf) {
  for (bool shared : {true, false}) {
    const LlamaSpec s = small_llama(shared);
    MapWeights hf = random_llama(s, 3);
    MapWeights leap = hf;
    const int64_t kv = s.n_kv_heads * (s.dim / s.n_heads);
    for (int l = 0; l < s.n_layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      leap.t[p + "wq"] = permute(hf.t[p + "wq"], s.dim, s.dim, s.n_heads);
      leap.t[p + "wk"] = permute(hf.t[p + "wk"], kv, s.dim, s.n_kv_heads);
    }
    const std::vector<int32_t> tokens = {3, 17, 0, 39, 8};
    const ForwardTrace a = llama_forward(s, hf, tokens, 99);
    LlamaSpec si = s;
    si.interleaved_rope = true;
    const ForwardTrace b = llama_forward(si, leap, tokens, 99);
    ASSERT_TRUE(a.has_logits && b.has_logits);
    ASSERT_EQ(a.layers.size(), 2u);
    for (size_t l = 0; l < a.layers.size(); ++l) EXPECT_LT(max_diff(a.layers[l], b.layers[l]), 1e-5f);
    EXPECT_LT(max_diff(a.logits, b.logits), 1e-5f);
    // and the check can fail: interleaved RoPE on the unpermuted weights is a different model
    const ForwardTrace c = llama_forward(si, hf, tokens, 99);
    EXPECT_GT(max_diff(a.logits, c.logits), 1e-2f);
  }
}

TEST(ForwardCore, LayerBudgetStopsEarlyWithoutLogits) {
  const LlamaSpec s = small_llama(true);
  MapWeights w = random_llama(s, 4);
  const ForwardTrace t = llama_forward(s, w, {1, 2}, 1);
  EXPECT_EQ(t.layers.size(), 1u);
  EXPECT_FALSE(t.has_logits);
  EXPECT_EQ(t.layers[0].size(), size_t(2 * s.dim));
}

// GPT-2, one layer, d = 2, one head, vocab 2, one token at position 0, worked by hand:
//   x   = wte[1] + wpe[0] = [1, 0] + [0, -1] = [1, -1]
//   LN(x) (w = 1, b = 0): mean 0, var 1 -> h = [1, -1] / sqrt(1 + eps) = [a, -a], a = 1/sqrt(1+eps)
//   c_attn: q = k = 0, v = h (one position: softmax = 1, attention output = v = h)
//   c_proj = identity, bias 0  -> x = [1 + a, -1 - a]
//   LN2 -> [b, -b], b = (1 + a) / sqrt((1 + a)^2 + eps); c_fc: z = [b, -b, 0, ...] (the weight
//   puts h into the first two of 8 outputs); gelu_new(z); c_proj(mlp) sums the 8 gelus into
//   output 0 and adds bias [0.25, 0]:  x = [1 + a + gelu(b) + gelu(-b) + 0.25, -1 - a]
//   LN_f (w = 1, b = 0) of x, then logits = wte . LN_f(x)
TEST(ForwardCore, Gpt2MatchesAHandWorkedTinyCase) {
  const double eps = 1e-5, a = 1.0 / std::sqrt(1.0 + eps);
  auto gelu = [](double z) { return 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z))); };
  MapWeights w;
  auto set = [&](const std::string& n, int64_t c, std::vector<float> v) { w.t[n] = v; w.cols[n] = c; };
  set("transformer.wte.weight", 2, {0.5f, 2.0f, 1.0f, 0.0f});
  set("transformer.wpe.weight", 2, {0.0f, -1.0f, 3.0f, 3.0f});
  const std::string p = "transformer.h.0.";
  set(p + "ln_1.weight", 2, {1, 1});
  set(p + "ln_1.bias", 2, {0, 0});
  // [in=2, out=6]: columns 0-1 q, 2-3 k, 4-5 v; v = h
  set(p + "attn.c_attn.weight", 6, {0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1});
  set(p + "attn.c_attn.bias", 6, {0, 0, 0, 0, 0, 0});
  set(p + "attn.c_proj.weight", 2, {1, 0, 0, 1});
  set(p + "attn.c_proj.bias", 2, {0, 0});
  set(p + "ln_2.weight", 2, {1, 1});
  set(p + "ln_2.bias", 2, {0, 0});
  std::vector<float> fc(16, 0.0f);
  fc[0] = 1;      // z0 = h0
  fc[8 + 1] = 1;  // z1 = h1
  set(p + "mlp.c_fc.weight", 8, fc);
  set(p + "mlp.c_fc.bias", 8, std::vector<float>(8, 0.0f));
  std::vector<float> proj(16, 0.0f);
  for (int i = 0; i < 8; ++i) proj[size_t(i * 2)] = 1;  // every gelu output into output 0
  set(p + "mlp.c_proj.weight", 2, proj);
  set(p + "mlp.c_proj.bias", 2, {0.25f, 0});
  set("transformer.ln_f.weight", 2, {1, 1});
  set("transformer.ln_f.bias", 2, {0, 0});

  Gpt2Spec s;
  s.dim = 2; s.n_layers = 1; s.n_heads = 1; s.vocab = 2; s.n_positions = 2; s.eps = eps;
  const ForwardTrace t = gpt2_forward(s, w, {1}, 99);
  const double b = (1 + a) / std::sqrt((1 + a) * (1 + a) + eps);
  const double x0 = 1 + a + gelu(b) + gelu(-b) + 0.25, x1 = -1 - a;
  ASSERT_EQ(t.layers.size(), 1u);
  EXPECT_NEAR(t.layers[0][0], x0, 1e-6);
  EXPECT_NEAR(t.layers[0][1], x1, 1e-6);
  const double mean = (x0 + x1) / 2, var = ((x0 - mean) * (x0 - mean) + (x1 - mean) * (x1 - mean)) / 2;
  const double n0 = (x0 - mean) / std::sqrt(var + eps), n1 = (x1 - mean) / std::sqrt(var + eps);
  ASSERT_TRUE(t.has_logits);
  EXPECT_NEAR(t.logits[0], 0.5 * n0 + 2.0 * n1, 1e-5);
  EXPECT_NEAR(t.logits[1], 1.0 * n0 + 0.0 * n1, 1e-5);
}
