// A tiny Llama forward pass, written in the test, run two ways: Hugging Face semantics
// (rotate-half RoPE) on the generator's source weights, and LEAP/llama.cpp semantics
// (interleaved RoPE) on the weights read back from the LEAP v1 file. They must agree, and the
// interleaved forward on unpermuted weights must not (so the check can fail).
#include <gtest/gtest.h>

#include <cmath>

#include "leap_reader.h"
#include "test_support.h"

namespace {

enum class Rope { RotateHalf, Interleaved };

struct Layer {
  std::vector<float> attn_norm, ffn_norm, wq, wk, wv, wo, w1, w2, w3;
};
struct Model {
  int64_t dim = 0, hidden = 0, heads = 0, kv_heads = 0, vocab = 0;
  double eps = 1e-5, theta = 10000.0;
  std::vector<float> emb, norm, output;  // output empty: tied to emb
  std::vector<Layer> layers;
};

std::vector<double> matvec(const std::vector<float>& w, int64_t out, int64_t in, const std::vector<double>& x) {
  EXPECT_EQ(w.size(), size_t(out * in));
  std::vector<double> y(static_cast<size_t>(out), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    double acc = 0.0;
    for (int64_t i = 0; i < in; ++i) acc += double(w[size_t(o * in + i)]) * x[size_t(i)];
    y[size_t(o)] = acc;
  }
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<float>& w, double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * double(w[i]);
  return y;
}

void rope(double* v, int64_t hd, int64_t pos, double theta, Rope mode) {
  for (int64_t i = 0; i < hd / 2; ++i) {
    const double freq = std::pow(theta, -2.0 * double(i) / double(hd));
    const double a = double(pos) * freq, c = std::cos(a), s = std::sin(a);
    double& x0 = mode == Rope::RotateHalf ? v[i] : v[2 * i];
    double& x1 = mode == Rope::RotateHalf ? v[i + hd / 2] : v[2 * i + 1];
    const double a0 = x0, a1 = x1;
    x0 = a0 * c - a1 * s;
    x1 = a0 * s + a1 * c;
  }
}

// Logits for every position, [T, vocab].
std::vector<std::vector<double>> forward(const Model& m, const std::vector<int>& tokens, Rope mode) {
  const int64_t D = m.dim, hd = D / m.heads, KV = m.kv_heads * hd, T = int64_t(tokens.size());
  const int64_t group = m.heads / m.kv_heads;
  std::vector<std::vector<double>> x(static_cast<size_t>(T), std::vector<double>(static_cast<size_t>(D)));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < D; ++i) x[size_t(t)][size_t(i)] = m.emb[size_t(tokens[size_t(t)] * D + i)];
  for (const Layer& L : m.layers) {
    const size_t nT = static_cast<size_t>(T);
    std::vector<std::vector<double>> q(nT), k(nT), v(nT);
    for (int64_t t = 0; t < T; ++t) {
      const auto xn = rmsnorm(x[size_t(t)], L.attn_norm, m.eps);
      q[size_t(t)] = matvec(L.wq, D, D, xn);
      k[size_t(t)] = matvec(L.wk, KV, D, xn);
      v[size_t(t)] = matvec(L.wv, KV, D, xn);
      for (int64_t h = 0; h < m.heads; ++h) rope(q[size_t(t)].data() + h * hd, hd, t, m.theta, mode);
      for (int64_t h = 0; h < m.kv_heads; ++h) rope(k[size_t(t)].data() + h * hd, hd, t, m.theta, mode);
    }
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> att(static_cast<size_t>(D), 0.0);
      for (int64_t h = 0; h < m.heads; ++h) {
        const int64_t kh = h / group;
        std::vector<double> sc(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int64_t u = 0; u <= t; ++u) {  // causal: positions 0..t
          double d = 0.0;
          for (int64_t i = 0; i < hd; ++i) d += q[size_t(t)][size_t(h * hd + i)] * k[size_t(u)][size_t(kh * hd + i)];
          sc[size_t(u)] = d / std::sqrt(double(hd));
          mx = std::max(mx, sc[size_t(u)]);
        }
        double sum = 0.0;
        for (double& s : sc) sum += (s = std::exp(s - mx));
        for (int64_t u = 0; u <= t; ++u)
          for (int64_t i = 0; i < hd; ++i)
            att[size_t(h * hd + i)] += sc[size_t(u)] / sum * v[size_t(u)][size_t(kh * hd + i)];
      }
      const auto o = matvec(L.wo, D, D, att);
      for (int64_t i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
      const auto xn = rmsnorm(x[size_t(t)], L.ffn_norm, m.eps);
      const auto g = matvec(L.w1, m.hidden, D, xn), u = matvec(L.w3, m.hidden, D, xn);
      std::vector<double> hbuf(static_cast<size_t>(m.hidden));
      for (int64_t i = 0; i < m.hidden; ++i)
        hbuf[size_t(i)] = g[size_t(i)] / (1.0 + std::exp(-g[size_t(i)])) * u[size_t(i)];  // SwiGLU
      const auto d = matvec(L.w2, D, m.hidden, hbuf);
      for (int64_t i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += d[size_t(i)];
    }
  }
  std::vector<std::vector<double>> logits;
  for (int64_t t = 0; t < T; ++t)
    logits.push_back(matvec(m.output.empty() ? m.emb : m.output, m.vocab, D, rmsnorm(x[size_t(t)], m.norm, m.eps)));
  return logits;
}

double max_diff(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  double m = 0.0;
  for (size_t t = 0; t < a.size(); ++t)
    for (size_t i = 0; i < a[t].size(); ++i) m = std::max(m, std::fabs(a[t][i] - b[t][i]));
  return m;
}

class Forward : public tsup::TempDirTest, public ::testing::WithParamInterface<bool> {};

TEST_P(Forward, LeapV1MatchesHuggingFaceSemantics) {
  const bool tied = GetParam();
  gen::Spec s;
  s.dim = 64;
  s.heads = 4;
  s.kv_heads = 2;  // GQA
  s.hidden = 96;
  s.layers = 2;
  s.vocab = 96;
  s.tied = tied;
  s.rope_theta = 10000.0;
  s.dtype = "bf16";
  s.seed = 11;
  const auto src = gen::write_checkpoint(path("model"), s);
  const auto r = tsup::run_cli({path("out.bin"), "--meta-llama", path("model"), "--quiet"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.describe();

  const nlohmann::json cfg = nlohmann::json::parse(tsup::slurp_text(path("model/config.json")));
  Model hf;
  hf.dim = cfg.at("hidden_size");
  hf.hidden = cfg.at("intermediate_size");
  hf.heads = cfg.at("num_attention_heads");
  hf.kv_heads = cfg.at("num_key_value_heads");
  hf.vocab = cfg.at("vocab_size");
  hf.eps = cfg.at("rms_norm_eps");
  hf.theta = cfg.at("rope_theta");
  ASSERT_EQ(hf.theta, 10000.0);
  const int64_t n_layers = cfg.at("num_hidden_layers");
  auto S = [&](const std::string& n) { return tsup::find_tensor(src, n).values; };
  hf.emb = S("model.embed_tokens.weight");
  hf.norm = S("model.norm.weight");
  if (!tied) hf.output = S("lm_head.weight");
  for (int64_t l = 0; l < n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    hf.layers.push_back({S(p + "input_layernorm.weight"), S(p + "post_attention_layernorm.weight"),
                         S(p + "self_attn.q_proj.weight"), S(p + "self_attn.k_proj.weight"),
                         S(p + "self_attn.v_proj.weight"), S(p + "self_attn.o_proj.weight"),
                         S(p + "mlp.gate_proj.weight"), S(p + "mlp.down_proj.weight"), S(p + "mlp.up_proj.weight")});
  }

  // The same model from the LEAP file, read by the test's reader (names are LEAP's).
  const tleap::File f = tleap::read_leap(path("out.bin"), src, s, 1, 0);
  ASSERT_EQ(f.end, f.bytes.size());
  auto Lw = [&](const std::string& n) -> const std::vector<float>& {
    for (const auto& it : f.items)
      if (it.e.leap == n) return it.f32;
    throw std::runtime_error("no LEAP tensor " + n);
  };
  Model leap = hf;
  leap.dim = f.h.dim;
  leap.hidden = f.h.hidden_dim;
  leap.heads = f.h.n_heads;
  leap.kv_heads = f.h.n_kv_heads;
  leap.vocab = std::abs(f.h.vocab_size);
  leap.emb = Lw("tok_embeddings");
  leap.norm = Lw("norm");
  leap.output = f.h.shared ? std::vector<float>{} : Lw("output");
  ASSERT_EQ(f.h.shared != 0, tied);
  for (int64_t l = 0; l < f.h.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    leap.layers[size_t(l)] = {Lw(p + "attention_norm"), Lw(p + "ffn_norm"), Lw(p + "wq"), Lw(p + "wk"),
                              Lw(p + "wv"),            Lw(p + "wo"),       Lw(p + "w1"), Lw(p + "w2"),
                              Lw(p + "w3")};
  }

  const std::vector<int> tokens = {3, 17, 42, 5, 88};
  const auto ref = forward(hf, tokens, Rope::RotateHalf);
  const auto got = forward(leap, tokens, Rope::Interleaved);
  double scale = 0.0;
  for (const auto& row : ref)
    for (double v : row) scale = std::max(scale, std::fabs(v));
  ASSERT_GT(scale, 1e-2) << "logits too small for the comparison to mean anything";
  RecordProperty("max_diff_leap", std::to_string(max_diff(ref, got)));
  EXPECT_LT(max_diff(ref, got), 1e-4);

  // Sensitivity: interleaved RoPE on the unpermuted HF weights is a different model.
  const auto wrong = forward(hf, tokens, Rope::Interleaved);
  RecordProperty("max_diff_unpermuted", std::to_string(max_diff(ref, wrong)));
  RecordProperty("max_logit", std::to_string(scale));
  EXPECT_GT(max_diff(ref, wrong), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(TiedAndUntied, Forward, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "tied" : "untied"; });

}  // namespace
