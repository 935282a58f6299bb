#include "check/forward.h"

#include <algorithm>
#include <cmath>

#include "arch/arch_table.h"
#include "core/error.h"
#include "core/f16.h"
#include "container/gguf_file.h"
#include "quant/quant_types.h"

namespace leapconv {

namespace {

using Vec = std::vector<float>;

// y[o] = sum_i W[o, i] x[i] for W stored [out, in] (nn.Linear).
Vec matvec(const Vec& W, const float* x, int64_t out, int64_t in) {
  Vec y(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    double acc = 0;
    const float* row = W.data() + o * in;
    for (int64_t i = 0; i < in; ++i) acc += double(row[i]) * x[i];
    y[size_t(o)] = float(acc);
  }
  return y;
}

// y[o] = sum_i x[i] W[i, o] + b[o] for W stored [in, out] (GPT-2's Conv1D).
Vec conv1d(const Vec& W, const Vec& b, const float* x, int64_t in, int64_t out) {
  std::vector<double> acc(size_t(out), 0.0);
  for (int64_t i = 0; i < in; ++i) {
    const float* row = W.data() + i * out;
    for (int64_t o = 0; o < out; ++o) acc[size_t(o)] += double(x[i]) * row[o];
  }
  Vec y(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) y[size_t(o)] = float(acc[size_t(o)] + b[size_t(o)]);
  return y;
}

Vec rmsnorm(const float* x, const Vec& w, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / double(n) + eps);
  Vec y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[size_t(i)] = float(x[i] * inv * w[size_t(i)]);
  return y;
}

Vec layernorm(const float* x, const Vec& w, const Vec& b, int64_t n, double eps) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= double(n);
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  const double inv = 1.0 / std::sqrt(var / double(n) + eps);
  Vec y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[size_t(i)] = float((x[i] - mean) * inv * w[size_t(i)] + b[size_t(i)]);
  return y;
}

// Rotates one head's vector in place at position pos.
// factors: one per pair (Llama 3.1's rope_freqs: the frequency is divided by it), or null.
void rope(float* v, int64_t hd, int64_t pos, double theta, bool interleaved, const float* factors) {
  for (int64_t i = 0; i < hd / 2; ++i) {
    const double freq = std::pow(theta, -2.0 * double(i) / double(hd)) / (factors ? double(factors[i]) : 1.0);
    const double c = std::cos(double(pos) * freq), s = std::sin(double(pos) * freq);
    const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + hd / 2;
    const double x0 = v[a], x1 = v[b];
    v[a] = float(x0 * c - x1 * s);
    v[b] = float(x0 * s + x1 * c);
  }
}

// The same at a fractional position (linear rope scaling), rotating the first n_rot values of
// the head: pairs (2i, 2i+1) when interleaved, else (i, i + n_rot/2) (NEOX, rotate-half).
void rope_at(float* v, int64_t n_rot, double pos, double theta, bool interleaved, const float* factors) {
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double freq = std::pow(theta, -2.0 * double(i) / double(n_rot)) / (factors ? double(factors[i]) : 1.0);
    const double c = std::cos(pos * freq), s = std::sin(pos * freq);
    const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + n_rot / 2;
    const double x0 = v[a], x1 = v[b];
    v[a] = float(x0 * c - x1 * s);
    v[b] = float(x0 * s + x1 * c);
  }
}

// YaRN (ggml's rope_yarn, ext_factor 1): pair i's angle at position pos is the interpolated one
// (pos * freq_scale * theta^(-2i/n_rot)) blended toward the original by the ramp over [lo, hi].
void rope_yarn_at(float* v, int64_t n_rot, double pos, double theta, double freq_scale, const double corr[2],
                  double mscale, bool interleaved) {
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double extrap = pos * std::pow(theta, -2.0 * double(i) / double(n_rot)), interp = freq_scale * extrap;
    const double y = (double(i) - corr[0]) / std::max(0.001, corr[1] - corr[0]);
    const double mix = 1 - std::min(1.0, std::max(0.0, y));
    const double angle = interp * (1 - mix) + extrap * mix;
    const double c = std::cos(angle) * mscale, s = std::sin(angle) * mscale;
    const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + n_rot / 2;
    const double x0 = v[a], x1 = v[b];
    v[a] = float(x0 * c - x1 * s);
    v[b] = float(x0 * s + x1 * c);
  }
}

// Causal multi-head attention over T positions; k/v heads shared by groups of q heads (GQA).
// q: [T, n_heads*hd], k, v: [T, n_kv*hd]; returns [T, n_heads*hd].
Vec attention(const std::vector<Vec>& q, const std::vector<Vec>& k, const std::vector<Vec>& v,
              int64_t n_heads, int64_t n_kv, int64_t hd) {
  const int64_t T = int64_t(q.size());
  Vec out(size_t(T * n_heads * hd), 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t kvh = h / (n_heads / n_kv);
      std::vector<double> score(size_t(t + 1));
      double mx = -1e300;
      for (int64_t u = 0; u <= t; ++u) {
        double d = 0;
        for (int64_t i = 0; i < hd; ++i) d += double(q[size_t(t)][size_t(h * hd + i)]) * k[size_t(u)][size_t(kvh * hd + i)];
        score[size_t(u)] = d / std::sqrt(double(hd));
        mx = std::max(mx, score[size_t(u)]);
      }
      double sum = 0;
      for (double& s : score) sum += (s = std::exp(s - mx));
      for (int64_t i = 0; i < hd; ++i) {
        double acc = 0;
        for (int64_t u = 0; u <= t; ++u) acc += score[size_t(u)] / sum * v[size_t(u)][size_t(kvh * hd + i)];
        out[size_t(t * n_heads * hd + h * hd + i)] = float(acc);
      }
    }
  return out;
}

// The general form: scores q.k * scale, soft-capped (cap > 0), and a query at t sees keys
// u > t - window only (window > 0); sinks (gpt-oss: one logit per head, or null) join each
// softmax as a position with no value.
Vec attention_ex(const std::vector<Vec>& q, const std::vector<Vec>& k, const std::vector<Vec>& v, int64_t n_heads,
                 int64_t n_kv, int64_t hd, double scale, double cap, int64_t window, const float* sinks = nullptr) {
  const int64_t T = int64_t(q.size());
  Vec out(size_t(T * n_heads * hd), 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t kvh = h / (n_heads / n_kv), u0 = window > 0 ? std::max<int64_t>(0, t - window + 1) : 0;
      std::vector<double> score(size_t(t + 1 - u0));
      double mx = -1e300;
      for (int64_t u = u0; u <= t; ++u) {
        double d = 0;
        for (int64_t i = 0; i < hd; ++i) d += double(q[size_t(t)][size_t(h * hd + i)]) * k[size_t(u)][size_t(kvh * hd + i)];
        d *= scale;
        if (cap > 0) d = cap * std::tanh(d / cap);
        score[size_t(u - u0)] = d;
        mx = std::max(mx, d);
      }
      if (sinks) mx = std::max(mx, double(sinks[h]));
      double sum = sinks ? std::exp(double(sinks[h]) - mx) : 0;
      for (double& x : score) sum += (x = std::exp(x - mx));
      for (int64_t i = 0; i < hd; ++i) {
        double acc = 0;
        for (int64_t u = u0; u <= t; ++u) acc += score[size_t(u - u0)] / sum * v[size_t(u)][size_t(kvh * hd + i)];
        out[size_t(t * n_heads * hd + h * hd + i)] = float(acc);
      }
    }
  return out;
}

// GELU as ggml's CPU backend computes it (GGML_GELU_FP16, ggml-cpu/vec.h): the input rounded to
// f16 and looked up in a table of the f16-rounded f32 formula; 0 below -10, x above 10.
double ggml_cpu_gelu(float x) {
  if (x <= -10.0f) return 0.0;
  if (x >= 10.0f) return x;
  const float h = f16_to_f32(f32_to_f16(x));
  const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, coef_a = 0.044715f;
  const float g = 0.5f * h * (1.0f + std::tanh(sqrt_2_over_pi * h * (1.0f + coef_a * h * h)));
  return f16_to_f32(f32_to_f16(g));
}

double activation(Activation a, double z, bool ggml_gelu, float jitter = 0) {
  if (a == Activation::Silu) return z / (1.0 + std::exp(-z));
  if (ggml_gelu) return ggml_cpu_gelu(float(z) * (1.0f + jitter));
  return 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));  // GELU, tanh form
}

// y = W x (+ b)
Vec linear(const Vec& W, const Vec* b, const float* x, int64_t out, int64_t in) {
  Vec y = matvec(W, x, out, in);
  if (b)
    for (int64_t o = 0; o < out; ++o) y[size_t(o)] = float(double(y[size_t(o)]) + (*b)[size_t(o)]);
  return y;
}

// A weight matrix [out, in] of the forward pass: f32 (the reference), or LEAP's int8 groups
// multiplied by the int8-quantized activation as LEAP's engine does (W8A8).
class Matrix {
 public:
  Matrix(ModelWeights& w, const std::string& name, int64_t out, int64_t in, bool w8a8) : out_(out), in_(in), w8a8_(w8a8) {
    if (w8a8) q_ = w.int8_rows(name, 0, out);
    else f32_ = w.tensor(name);
  }
  Vec operator()(const float* x) const {
    if (!w8a8_) return matvec(f32_, x, out_, in_);
    Vec y(static_cast<size_t>(out_));
    leap_matmul(leap_quantize(x, in_, q_.group_size), q_, y.data());
    return y;
  }

 private:
  int64_t out_, in_;
  bool w8a8_;
  Vec f32_;
  Int8Rows q_;
};

// logits[t, r] = dot(W[r], x[t]) with W read in blocks of rows, never whole.
Vec classify(ModelWeights& w, const std::string& name, const std::vector<Vec>& x, int64_t vocab, int64_t dim,
             bool w8a8 = false) {
  const int64_t T = int64_t(x.size());
  Vec logits(static_cast<size_t>(T * vocab));
  std::vector<Int8Activation> xq;  // W8A8: the engine quantizes the normed state once
  for (int64_t r0 = 0; r0 < vocab; r0 += 512) {
    const int64_t r1 = std::min(vocab, r0 + 512);
    if (w8a8) {
      const Int8Rows W = w.int8_rows(name, r0, r1);
      for (int64_t t = 0; t < T; ++t) {
        if (xq.size() <= size_t(t)) xq.push_back(leap_quantize(x[size_t(t)].data(), dim, W.group_size));
        leap_matmul(xq[size_t(t)], W, logits.data() + t * vocab + r0);
      }
      continue;
    }
    const Vec W = w.rows(name, r0, r1);
    for (int64_t t = 0; t < T; ++t) {
      const Vec y = matvec(W, x[size_t(t)].data(), r1 - r0, dim);
      std::copy(y.begin(), y.end(), logits.begin() + t * vocab + r0);
    }
  }
  return logits;
}

// One token's embedding: the row, or in W8A8 the int8 row dequantized as LEAP's engine does.
Vec embedding(ModelWeights& w, const std::string& name, int32_t token, int64_t dim, bool w8a8) {
  if (!w8a8) return w.rows(name, token, token + 1);
  const Int8Rows r = w.int8_rows(name, token, token + 1);
  Vec e(static_cast<size_t>(dim));
  for (int64_t c = 0; c < dim; ++c) e[size_t(c)] = leap_dequantize(r, token, c);
  return e;
}

Vec flatten(const std::vector<Vec>& rows) {
  Vec out;
  for (const Vec& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

void check_tokens(const std::vector<int32_t>& tokens, int64_t vocab) {
  for (int32_t t : tokens)
    if (t < 0 || t >= vocab) throw ConvertError("token " + std::to_string(t) + " outside the vocabulary");
}

// Weight names come from the architecture table: LEAP's for Llama, Hugging Face's for GPT-2.
std::string llama_name(const char* role, int64_t l = 0) { return role_name(role_of(llama_family(), role).leap, l); }
std::string gpt2_name(const char* role, int64_t l = 0) {
  static const ArchFamily& f = *find_family_by_name("gpt2");
  return role_name(role_of(f, role).hf, l);
}

}  // namespace

bool FactorScaledWeights::any(const std::map<std::string, std::vector<float>>& factors) {
  for (const auto& [name, v] : factors)
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".scale") == 0) return true;
  return false;
}

const std::vector<float>* FactorScaledWeights::factor(const std::string& name) const {
  if (name.size() < 7 || name.compare(name.size() - 7, 7, ".weight")) return nullptr;
  const std::string scale = name.substr(0, name.size() - 7) + ".scale";
  auto it = factors_.find(scale);
  if (it == factors_.end() || it->second.empty()) return nullptr;
  if (family_)
    for (const TensorRole& r : family_->roles)
      if (r.gguf && match_role_name(r.gguf, scale) >= 0) return nullptr;  // the family's own tensor
  return &it->second;
}

std::vector<float> FactorScaledWeights::tensor(const std::string& name) {
  std::vector<float> w = inner_->tensor(name);
  if (const std::vector<float>* f = factor(name)) {
    const size_t per = w.size() / f->size();  // (experts: each one's values, in order)
    if (per * f->size() != w.size()) throw ConvertError("", name, "has " + std::to_string(w.size()) + " values: not " +
                                                                      std::to_string(f->size()) + " experts' worth for its .scale");
    for (size_t i = 0; i < w.size(); ++i) w[i] *= (*f)[i / per];
  }
  return w;
}

std::vector<float> FactorScaledWeights::rows(const std::string& name, int64_t r0, int64_t r1) {
  std::vector<float> w = inner_->rows(name, r0, r1);
  if (const std::vector<float>* f = factor(name)) {
    if (f->size() != 1) throw ConvertError("", name, "internal: rows of a tensor with a .scale per expert");
    for (float& x : w) x *= (*f)[0];
  }
  return w;
}

Int8Rows ModelWeights::int8_rows(const std::string& name, int64_t, int64_t) {
  throw ConvertError("", name, "has no int8 groups (only a LEAP version 2 file's weights do)");
}

ForwardTrace llama_forward(const LlamaSpec& s, ModelWeights& w, const std::vector<int32_t>& tokens,
                           int64_t max_layers) {
  check_tokens(tokens, s.vocab);
  const int64_t T = int64_t(tokens.size()), D = s.dim, hd = D / s.n_heads, KV = s.n_kv_heads * hd;
  std::vector<Vec> x;
  for (int32_t t : tokens) x.push_back(embedding(w, llama_name("token_embd"), t, D, s.w8a8));
  ForwardTrace tr;
  const int64_t L = std::min(max_layers, s.n_layers);
  for (int64_t l = 0; l < L; ++l) {
    auto W = [&](const char* role) { return w.tensor(llama_name(role, l)); };
    auto M = [&](const char* role, int64_t out, int64_t in) { return Matrix(w, llama_name(role, l), out, in, s.w8a8); };
    const Vec an = W("attn_norm");
    const Matrix wq = M("attn_q", D, D), wk = M("attn_k", KV, D), wv = M("attn_v", KV, D), wo = M("attn_output", D, D);
    std::vector<Vec> q, k, v;
    for (int64_t t = 0; t < T; ++t) {
      const Vec h = rmsnorm(x[size_t(t)].data(), an, D, s.eps);
      q.push_back(wq(h.data()));
      k.push_back(wk(h.data()));
      v.push_back(wv(h.data()));
      const float* factors = s.rope_freq_factors.empty() ? nullptr : s.rope_freq_factors.data();
      for (int64_t hh = 0; hh < s.n_heads; ++hh)
        rope(q.back().data() + hh * hd, hd, t, s.rope_theta, s.interleaved_rope, factors);
      for (int64_t hh = 0; hh < s.n_kv_heads; ++hh)
        rope(k.back().data() + hh * hd, hd, t, s.rope_theta, s.interleaved_rope, factors);
    }
    const Vec att = attention(q, k, v, s.n_heads, s.n_kv_heads, hd);
    for (int64_t t = 0; t < T; ++t) {
      const Vec o = wo(att.data() + t * D);
      for (int64_t i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
    }
    const Vec fn = W("ffn_norm");
    const Matrix w1 = M("ffn_gate", s.hidden, D), w2 = M("ffn_down", D, s.hidden), w3 = M("ffn_up", s.hidden, D);
    for (int64_t t = 0; t < T; ++t) {
      const Vec h = rmsnorm(x[size_t(t)].data(), fn, D, s.eps);
      Vec g = w1(h.data());
      const Vec u = w3(h.data());
      for (int64_t i = 0; i < s.hidden; ++i) {
        const double a = g[size_t(i)];
        g[size_t(i)] = float(a / (1.0 + std::exp(-a)) * u[size_t(i)]);  // SiLU(gate) * up
      }
      const Vec d = w2(g.data());
      for (int64_t i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += d[size_t(i)];
    }
    tr.layers.push_back(flatten(x));
  }
  if (L == s.n_layers) {
    const Vec nw = w.tensor(llama_name("output_norm"));
    for (Vec& xt : x) xt = rmsnorm(xt.data(), nw, D, s.eps);
    tr.logits = classify(w, llama_name(s.shared_classifier ? "token_embd" : "output"), x, s.vocab, D, s.w8a8);
    tr.has_logits = true;
  }
  return tr;
}

ForwardTrace gpt2_forward(const Gpt2Spec& s, ModelWeights& w, const std::vector<int32_t>& tokens,
                          int64_t max_layers) {
  check_tokens(tokens, s.vocab);
  const int64_t T = int64_t(tokens.size()), D = s.dim, hd = D / s.n_heads, F = s.ffn > 0 ? s.ffn : 4 * D;
  if (T > s.n_positions) throw ConvertError("token sequence longer than n_positions");
  std::vector<Vec> x;
  for (int64_t t = 0; t < T; ++t) {
    Vec e = w.rows(gpt2_name("token_embd"), tokens[size_t(t)], tokens[size_t(t)] + 1);
    const Vec p = w.rows(gpt2_name("position_embd"), t, t + 1);
    for (int64_t i = 0; i < D; ++i) e[size_t(i)] += p[size_t(i)];
    x.push_back(std::move(e));
  }
  ForwardTrace tr;
  const int64_t L = std::min(max_layers, s.n_layers);
  for (int64_t l = 0; l < L; ++l) {
    auto W = [&](const char* role) { return w.tensor(gpt2_name(role, l)); };
    const Vec l1w = W("attn_norm"), l1b = W("attn_norm_b"), aw = W("attn_qkv"), ab = W("attn_qkv_b"),
              pw = W("attn_output"), pb = W("attn_output_b");
    std::vector<Vec> q, k, v;
    for (int64_t t = 0; t < T; ++t) {
      const Vec h = layernorm(x[size_t(t)].data(), l1w, l1b, D, s.eps);
      const Vec qkv = conv1d(aw, ab, h.data(), D, 3 * D);
      q.emplace_back(qkv.begin(), qkv.begin() + D);
      k.emplace_back(qkv.begin() + D, qkv.begin() + 2 * D);
      v.emplace_back(qkv.begin() + 2 * D, qkv.end());
    }
    const Vec att = attention(q, k, v, s.n_heads, s.n_heads, hd);
    for (int64_t t = 0; t < T; ++t) {
      const Vec o = conv1d(pw, pb, att.data() + t * D, D, D);
      for (int64_t i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
    }
    const Vec l2w = W("ffn_norm"), l2b = W("ffn_norm_b"), fw = W("ffn_up"), fb = W("ffn_up_b"),
              mw = W("ffn_down"), mb = W("ffn_down_b");
    for (int64_t t = 0; t < T; ++t) {
      const Vec h = layernorm(x[size_t(t)].data(), l2w, l2b, D, s.eps);
      Vec f = conv1d(fw, fb, h.data(), D, F);
      for (float& a : f) {  // GPT-2's "gelu_new" (tanh approximation)
        const double z = a;
        a = float(0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z))));
      }
      const Vec o = conv1d(mw, mb, f.data(), F, D);
      for (int64_t i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
    }
    tr.layers.push_back(flatten(x));
  }
  if (L == s.n_layers) {
    const Vec fw = w.tensor(gpt2_name("output_norm")), fb = w.tensor(gpt2_name("output_norm_b"));
    for (Vec& xt : x) xt = layernorm(xt.data(), fw, fb, D, s.eps);
    tr.logits = classify(w, gpt2_name("token_embd"), x, s.vocab, D);  // tied to the embeddings
    tr.has_logits = true;
  }
  return tr;
}

// A key llama.cpp reads with get_key_or_arr: one number for every layer, or an INT32 array of
// one per layer; fallback when absent (-1: required, the error naming the key).
static std::vector<int64_t> per_layer_u32(const GgufMetadata& kv, const std::string& key, int64_t n_layers,
                                          int64_t fallback) {
  if (!kv.has(key) && fallback < 0) kv.get_u32(key);  // throws, naming the key
  std::vector<int64_t> v(size_t(std::max<int64_t>(n_layers, 1)), fallback);
  if (!kv.has(key)) return v;
  if (!kv.at(key).is_array()) {
    std::fill(v.begin(), v.end(), int64_t(kv.get_u32(key)));
    return v;
  }
  const std::vector<int32_t> arr = kv.get_i32_array(key);
  if (int64_t(arr.size()) != n_layers) throw ConvertError("", key, "must list block_count numbers");
  for (size_t l = 0; l < arr.size(); ++l) v[l] = arr[l];
  return v;
}

// Gemma 4's layers as llama.cpp reads them: which slide (attention.sliding_window_pattern, one
// flag per layer or one for all), the sliding layers' own head size and rotary dimensions
// (*_swa keys), kv heads and MLP widths per layer (an array or one number), and the shared KV
// layers at the end: a sliding one reads the keys and values of the layer two before the first
// shared one, a full one those of the layer just before it (llama_model's reuse rule).
static void gguf_layers(const GgufMetadata& kv, const std::string& a, DecoderSpec& s) {
  auto per_layer = [&](const std::string& key, int64_t fallback) { return per_layer_u32(kv, key, s.n_layers, fallback); };
  const std::string pattern_key = a + "attention.sliding_window_pattern";
  std::vector<bool> sliding(size_t(s.n_layers), kv.has(pattern_key) && !kv.at(pattern_key).is_array() && kv.get_bool(pattern_key));
  if (kv.has(pattern_key) && kv.at(pattern_key).is_array()) {
    sliding = kv.get_array<bool>(pattern_key);
    if (int64_t(sliding.size()) != s.n_layers) throw ConvertError("", pattern_key, "must list block_count flags");
  }
  s.sliding_window = kv.get_u32(a + "attention.sliding_window");
  const int64_t hd_swa = kv.has(a + "attention.key_length_swa") ? kv.get_u32(a + "attention.key_length_swa") : s.head_dim;
  if (kv.has(a + "attention.value_length_swa") && kv.get_u32(a + "attention.value_length_swa") != hd_swa)
    throw UnsupportedError("", a + "attention.value_length_swa", "differs from the key length: not run by this pass");
  const int64_t rot_swa = kv.has(a + "rope.dimension_count_swa") ? kv.get_u32(a + "rope.dimension_count_swa") : s.n_rot;
  const std::vector<int64_t> kv_heads = per_layer(a + "attention.head_count_kv", s.n_heads),
                             ffn = per_layer(a + "feed_forward_length", -1);
  const int64_t shared = kv.has(a + "attention.shared_kv_layers") ? kv.get_u32(a + "attention.shared_kv_layers") : 0;
  const int64_t first_shared = s.n_layers - shared;
  if (shared > 0 && first_shared < 2) throw ConvertError("", a + "attention.shared_kv_layers", "leaves fewer than 2 layers of their own");
  s.layers.clear();
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const bool swa = sliding[size_t(l)];
    DecoderLayer y{swa, swa ? hd_swa : s.head_dim, kv_heads[size_t(l)], ffn[size_t(l)], swa ? rot_swa : s.n_rot, -1};
    if (l >= first_shared) y.kv_from = first_shared - (swa ? 2 : 1);
    if (y.n_kv_heads <= 0 || s.n_heads % y.n_kv_heads)
      throw ConvertError("", a + "attention.head_count_kv", "layer " + std::to_string(l) + ": must divide the head count");
    s.layers.push_back(y);
  }
  s.per_layer_input = kv.has(a + "embedding_length_per_layer_input") ? kv.get_u32(a + "embedding_length_per_layer_input") : 0;
}

const ArchFamily* gguf_family(const GgufMetadata& kv) {
  const std::string arch = kv.get_string("general.architecture");
  return find_family_by_name(arch, kv.has(arch + ".expert_count") && kv.get_u32(arch + ".expert_count") > 0);
}

DecoderSpec gguf_decoder_spec(const GgufMetadata& kv, int64_t vocab, bool has_output, const ComputedTensors& computed,
                              int64_t n_ctx) {
  const std::string arch = kv.get_string("general.architecture");
  DecoderSpec s;
  s.family = gguf_family(kv);
  if (!s.family) throw UnsupportedError("", "general.architecture", "'" + arch + "' is not a family this pass runs");
  const ArchCompute& cp = s.family->compute;
  const std::string a = arch + ".";
  auto u32_or = [&](const std::string& k, int64_t fallback) { return kv.has(a + k) ? int64_t(kv.get_u32(a + k)) : fallback; };
  auto f32_or = [&](const std::string& k, double fallback) { return kv.has(a + k) ? double(kv.get_f32(a + k)) : fallback; };
  s.dim = kv.get_u32(a + "embedding_length");
  s.n_layers = kv.get_u32(a + "block_count");
  s.n_heads = kv.get_u32(a + "attention.head_count");
  // a number, or one per layer (Gemma 4: gguf_layers reads them all): layer 0's
  s.n_kv_heads = per_layer_u32(kv, a + "attention.head_count_kv", s.n_layers, s.n_heads)[0];
  s.ffn = per_layer_u32(kv, a + "feed_forward_length", s.n_layers, -1)[0];
  if (s.n_heads <= 0 || s.n_kv_heads <= 0 || s.n_heads % s.n_kv_heads)
    throw ConvertError("", a + "attention.head_count_kv", "must divide the head count");
  s.head_dim = u32_or("attention.key_length", s.dim / s.n_heads);
  if (u32_or("attention.value_length", s.head_dim) != s.head_dim)
    throw UnsupportedError("", a + "attention.value_length", "differs from the key length: not run by this pass");
  s.n_rot = cp.rope == RopeKind::None ? 0 : u32_or("rope.dimension_count", s.head_dim);
  s.n_positions = u32_or("context_length", 0);
  s.vocab = vocab;
  s.eps = cp.norm == NormKind::Rms ? double(kv.get_f32(a + "attention.layer_norm_rms_epsilon"))
                                   : double(kv.get_f32(a + "attention.layer_norm_epsilon"));
  s.rope_theta = f32_or("rope.freq_base", 10000.0);
  if (kv.has(a + "rope.scaling.type")) {
    const std::string type = kv.get_string(a + "rope.scaling.type");
    if (type == "linear") {
      const float factor = float(f32_or("rope.scaling.factor", 0.0));
      s.rope_freq_scale = factor == 0.0f ? 1.0 : double(1.0f / factor);  // as llama.cpp's loader
    } else if (type == "yarn") {  // llama_context's YaRN: ext_factor 1, its attn_factor, betas 32 and 1 (hparams' own)
      const float factor = float(f32_or("rope.scaling.factor", 0.0));
      const float fs = factor == 0.0f ? 1.0f : 1.0f / factor, f = 1.0f / fs;
      const float attn = f <= 1.0f ? 1.0f : (0.1f * std::log(f) + 1.0f) * (1.0f / (1.0f + 0.1f * std::log(f)));
      s.yarn = true;
      s.rope_freq_scale = fs;
      s.yarn_mscale = double(attn * (1.0f + 0.1f * std::log(1.0f / fs)));
      const int64_t n_rot = cp.rope == RopeKind::None ? 0 : u32_or("rope.dimension_count", s.head_dim);
      const float orig = float(u32_or("rope.scaling.original_context_length", u32_or("context_length", 0)));
      const float base = float(s.rope_theta);
      auto corr = [&](float beta) { return float(n_rot) * std::log(orig / (beta * 2 * float(M_PI))) / (2 * std::log(base)); };
      s.yarn_corr[0] = std::max(0.0f, std::floor(corr(32.0f)));
      s.yarn_corr[1] = std::min(float(n_rot - 1), std::ceil(corr(1.0f)));
    } else if (type != "none") {
      s.not_run = "rope scaling '" + type + "'";
    }
  }
  auto tensor = [&](const char* name) {
    auto it = computed.find(name);
    return it == computed.end() ? std::vector<float>() : it->second;
  };
  s.rope_freq_factors = tensor("rope_freqs.weight");
  if (computed.count("rope_factors_long.weight")) {  // longrope: chosen by the context (llama_model::get_rope_factors)
    const int64_t orig = u32_or("rope.scaling.original_context_length", s.n_positions);
    s.rope_freq_factors = tensor(n_ctx > orig ? "rope_factors_long.weight" : "rope_factors_short.weight");
  }
  if (!s.rope_freq_factors.empty() && int64_t(s.rope_freq_factors.size()) * 2 < s.n_rot)
    throw ConvertError("", "rope factors", "fewer than rope.dimension_count / 2");
  s.rope_attn_factor = f32_or("rope.scaling.attn_factor", 1.0);
  s.rope_theta_swa = f32_or("rope.freq_base_swa", cp.swa_base_default > 0 ? cp.swa_base_default : s.rope_theta);
  s.rope_freq_scale_swa = cp.swa_rope_scaled ? s.rope_freq_scale : 1.0;
  s.no_rope_period = cp.no_rope_period;
  s.tied = !has_output;
  s.query_scale = f32_or("attention.scale", 0.0);
  if (s.query_scale == 0)
    s.query_scale = 1.0 / std::sqrt(double(s.n_layers == cp.query_scale_hidden_layers ? s.dim / s.n_heads : s.head_dim));
  s.embedding_scale = f32_or("embedding_scale", 1.0);
  s.residual_scale = f32_or("residual_scale", 1.0);
  s.logit_scale = f32_or("logit_scale", 1.0);
  s.attn_softcap = f32_or("attn_logit_softcapping", 0.0);
  s.final_softcap = f32_or("final_logit_softcapping", cp.default_final_softcap);
  if (cp.swa_period > 0) s.sliding_window = u32_or("attention.sliding_window", cp.default_window);
  if (cp.unscaled_queries) s.query_scale = 1.0;
  s.n_expert = u32_or("expert_count", 0);
  if (s.n_expert > 0) {
    s.n_expert_used = u32_or("expert_used_count", 0);
    if (s.n_expert_used < 1 || s.n_expert_used > s.n_expert)
      throw ConvertError("", a + "expert_used_count", "must be 1 to expert_count");
    s.expert_ffn = u32_or("expert_feed_forward_length", s.ffn);
    s.shexp_ffn = u32_or("expert_shared_feed_forward_length", 0);
  }
  if (cp.swa_from_pattern_key) gguf_layers(kv, a, s);
  return s;
}

// Layer l's sizes: the spec's own per-layer row, else the common sizes (sliding by the period).
static DecoderLayer layer_of(const DecoderSpec& s, int64_t l) {
  if (!s.layers.empty()) return s.layers[size_t(l)];
  const ArchCompute& cp = s.family->compute;
  const bool sliding = cp.swa_period > 0 && s.sliding_window > 0 && l % cp.swa_period < cp.swa_period - 1;
  return {sliding, s.head_dim, s.n_kv_heads, s.ffn, s.n_rot, -1};
}

// A mixture-of-experts MLP as llama.cpp's build_moe_ffn runs it for one token: the router's
// logits over the experts (ffn_gate_inp [E x D]) of its input r, their softmax, the top k of it,
// those weights divided by their sum where the family renormalises, then sum_i w_i down_i(act(gate_i
// h) * up_i h) (times the expert's own scale where the family has one: Gemma 4's per_expert_scale);
// plus the shared expert (Qwen2-MoE) times sigmoid(ffn_gate_inp_shexp . h). Gate and up are
// separate tensors, or one fused tensor (Gemma 4: [E x 2F x D], each expert's gate rows, then its
// up rows). Experts are read whole ([E x F x D]: small models).
class Mixture {
 public:
  Mixture(const DecoderSpec& s, ModelWeights& w, int64_t l) : s_(s), f_(*s.family) {
    auto name = [&](const char* role) { return role_name(role_of(f_, role).gguf, l); };
    const int64_t D = s.dim, E = s.n_expert, F = s.expert_ffn, S = s.shexp_ffn;
    router_ = w.tensor(name("ffn_gate_inp"));
    // (Gemma 4: fused as it ships; separate where merged from NVFP4 experts)
    fused_ = find_role(f_, "ffn_gate_up_exps") && w.has(name("ffn_gate_up_exps"));
    if (fused_) {
      gate_ = w.tensor(name("ffn_gate_up_exps"));
    } else {
      gate_ = w.tensor(name("ffn_gate_exps"));
      up_ = w.tensor(name("ffn_up_exps"));
    }
    down_ = w.tensor(name("ffn_down_exps"));
    if (int64_t(router_.size()) != E * D || int64_t(gate_.size()) != (fused_ ? 2 : 1) * E * F * D ||
        (!fused_ && int64_t(up_.size()) != E * F * D) || int64_t(down_.size()) != E * D * F)
      throw ConvertError("", name(fused_ ? "ffn_gate_up_exps" : "ffn_gate_exps"),
                         "sizes contradict expert_count and expert_feed_forward_length");
    // gpt-oss's biases: the router's [E], the experts' [E x F] (gate, up) and [E x D] (down);
    // Gemma 4's scale of each expert's output [E]
    auto own = [&](const char* role, int64_t n) {
      if (!find_role(f_, role)) return Vec();
      Vec b = w.tensor(name(role));
      if (int64_t(b.size()) != n) throw ConvertError("", name(role), "has " + std::to_string(b.size()) + " values, not " + std::to_string(n));
      return b;
    };
    router_b_ = own("ffn_gate_inp_b", E), gate_b_ = own("ffn_gate_exps_b", E * F), up_b_ = own("ffn_up_exps_b", E * F);
    down_b_ = own("ffn_down_exps_b", E * D), down_s_ = own("ffn_down_exps_s", E);
    shared_ = S > 0 && find_role(f_, "ffn_gate_shexp") && w.has(name("ffn_gate_shexp"));
    if (shared_) {
      sg_ = w.tensor(name("ffn_gate_shexp")), su_ = w.tensor(name("ffn_up_shexp"));
      sd_ = w.tensor(name("ffn_down_shexp")), sgate_ = w.tensor(name("ffn_gate_inp_shexp"));
    }
  }

  // The mixture's output for one token: h the experts' input, r the router's ([D] each).
  std::vector<double> operator()(const Vec& h, const Vec& r, double& margin) const {
    const int64_t D = s_.dim, E = s_.n_expert, K = s_.n_expert_used, F = s_.expert_ffn;
    const ArchCompute& cp = f_.compute;
    std::vector<double> logit(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      double z = 0;
      for (int64_t j = 0; j < D; ++j) z += double(router_[size_t(e * D + j)]) * r[size_t(j)];
      logit[size_t(e)] = z + (router_b_.empty() ? 0.0 : double(router_b_[size_t(e)]));
    }
    std::vector<int64_t> order(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) order[size_t(e)] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logit[size_t(a)] > logit[size_t(b)]; });
    if (K < E) margin = std::min(margin, logit[size_t(order[size_t(K - 1)])] - logit[size_t(order[size_t(K)])]);
    // the softmax over every expert (gpt-oss: over the chosen ones only), then renormalised or not
    const double top = logit[size_t(order[0])];
    double all = 0, chosen = 0;
    for (int64_t e = 0; e < (cp.moe_softmax_chosen ? K : E); ++e)
      all += std::exp(logit[size_t(cp.moe_softmax_chosen ? order[size_t(e)] : e)] - top);
    for (int64_t i = 0; i < K; ++i) chosen += std::exp(logit[size_t(order[size_t(i)])] - top) / all;
    std::vector<double> out(static_cast<size_t>(D), 0.0);
    for (int64_t i = 0; i < K; ++i) {
      const int64_t e = order[size_t(i)];
      const double p = std::exp(logit[size_t(e)] - top) / all;
      const float* g = gate_.data() + e * (fused_ ? 2 : 1) * F * D;
      mlp(h.data(), g, fused_ ? g + F * D : up_.data() + e * F * D, down_.data() + e * D * F, F,
          cp.moe_norm_weights ? p / chosen : p, down_s_.empty() ? 1.0f : down_s_[size_t(e)], out,
          gate_b_.empty() ? nullptr : gate_b_.data() + e * F, up_b_.empty() ? nullptr : up_b_.data() + e * F,
          down_b_.empty() ? nullptr : down_b_.data() + e * D);
    }
    if (shared_) {
      double g = 0;
      for (int64_t j = 0; j < D; ++j) g += double(sgate_[size_t(j)]) * h[size_t(j)];
      mlp(h.data(), sg_.data(), su_.data(), sd_.data(), s_.shexp_ffn, 1.0 / (1.0 + std::exp(-g)), 1.0f, out);
    }
    return out;
  }

 private:
  // x through Q8_0 blocks and back (q8_expert_inputs), where its length is whole blocks
  std::vector<float> q8(std::vector<float> x) const {
    const QuantType& t = quant_type(QType::Q8_0);
    if (!s_.q8_expert_inputs || x.size() % size_t(t.block_values)) return x;
    std::vector<uint8_t> b(size_t(t.bytes_of(1, int64_t(x.size()), 0).total()));
    uint8_t* region[kMaxRegions] = {b.data()};
    t.encode(x.data(), 1, int64_t(x.size()), t.block_values, region);
    const uint8_t* in[kMaxRegions] = {b.data()};
    t.decode(in, 1, int64_t(x.size()), t.block_values, x.data());
    return x;
  }
  // A gated MLP of width n from weights at gate_w / up_w ([n x D]) and down_w ([D x n]), with
  // biases where given (null: none): its output times `scale` (as a float, as ggml multiplies),
  // added times c. (gpt-oss: its clamped SwiGLU; Gemma 4: GeGLU.)
  void mlp(const float* h_in, const float* gate_w, const float* up_w, const float* down_w, int64_t n, double c, float scale,
           std::vector<double>& out, const float* gb = nullptr, const float* ub = nullptr, const float* db = nullptr) const {
    const int64_t D = s_.dim;
    const std::vector<float> hq = q8(std::vector<float>(h_in, h_in + D));
    const float* h = hq.data();
    std::vector<float> a(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      double g = gb ? gb[i] : 0, u = ub ? ub[i] : 0;
      for (int64_t j = 0; j < D; ++j) g += double(gate_w[i * D + j]) * h[j], u += double(up_w[i * D + j]) * h[j];
      g = double(float(g)), u = double(float(u));
      if (f_.compute.moe_swiglu_oai) {
        const double x = std::min(g, 7.0), y = std::min(7.0, std::max(-7.0, u));
        a[size_t(i)] = float(x / (1.0 + std::exp(-1.702 * x)) * (y + 1));
      } else {
        a[size_t(i)] = float(activation(f_.compute.act, g, s_.ggml_gelu, s_.gelu_jitter) * u);
      }
    }
    a = q8(std::move(a));
    for (int64_t o = 0; o < D; ++o) {
      double d = db ? db[o] : 0;
      for (int64_t i = 0; i < n; ++i) d += double(down_w[o * n + i]) * double(a[size_t(i)]);
      out[size_t(o)] += c * double(float(d) * scale);
    }
  }

  const DecoderSpec& s_;
  const ArchFamily& f_;
  bool fused_ = false, shared_ = false;
  Vec router_, gate_, up_, down_, router_b_, gate_b_, up_b_, down_b_, down_s_, sg_, su_, sd_, sgate_;
};

// A layer whose MLP is a mixture (the families but Gemma 4), added to x: per token
// h = RMSNorm(x) (norm: ffn_norm), which both the router and the experts read.
static void moe_layer(const DecoderSpec& s, ModelWeights& w, int64_t l, std::vector<Vec>& x, const Vec& norm,
                      double& margin) {
  const Mixture mix(s, w, l);
  for (Vec& xt : x) {
    const Vec h = rmsnorm(xt.data(), norm, s.dim, s.eps);
    const std::vector<double> out = mix(h, h, margin);
    for (int64_t o = 0; o < s.dim; ++o) xt[size_t(o)] += float(out[size_t(o)]);
  }
}

// Gemma 4's mixture beside its dense MLP, per token of x (the attention's output): the experts
// read RMSNorm(x) (pre_ffw_norm_2), the router RMSNorm(x) without a weight times hidden^-1/2
// times ffn_gate_inp.scale; the mixture's output RMS-normed (post_ffw_norm_2).
static std::vector<Vec> gemma4_mixture(const DecoderSpec& s, ModelWeights& w, int64_t l, const std::vector<Vec>& x,
                                       double& margin) {
  const ArchFamily& f = *s.family;
  auto tensor = [&](const char* role) { return w.tensor(role_name(role_of(f, role).gguf, l)); };
  const int64_t D = s.dim;
  const Vec pre = tensor("ffn_pre_norm_2"), post = tensor("ffn_post_norm_2"), scale = tensor("ffn_gate_inp_s");
  if (int64_t(scale.size()) != D) throw ConvertError("", role_name(role_of(f, "ffn_gate_inp_s").gguf, l), "needs one value per hidden unit");
  const Vec ones(size_t(D), 1.0f);
  const Mixture mix(s, w, l);
  std::vector<Vec> out;
  for (const Vec& xt : x) {
    Vec r = rmsnorm(xt.data(), ones, D, s.eps);
    for (int64_t j = 0; j < D; ++j) r[size_t(j)] = float(double(r[size_t(j)]) / std::sqrt(double(D))) * scale[size_t(j)];
    const std::vector<double> m = mix(rmsnorm(xt.data(), pre, D, s.eps), r, margin);
    const Vec mf(m.begin(), m.end());
    out.push_back(rmsnorm(mf.data(), post, D, s.eps));
  }
  return out;
}

ForwardTrace decoder_forward(const DecoderSpec& s, ModelWeights& w, const std::vector<int32_t>& tokens,
                             int64_t max_layers) {
  const ArchFamily& f = *s.family;
  const ArchCompute& cp = f.compute;
  check_tokens(tokens, s.vocab);
  const int64_t T = int64_t(tokens.size()), D = s.dim;
  auto has = [&](const std::string& role) { return find_role(f, role.c_str()) != nullptr; };
  auto name = [&](const std::string& role, int64_t l) { return role_name(role_of(f, role.c_str()).gguf, l); };
  auto opt = [&](const std::string& role, int64_t l) { return has(role) ? w.tensor(name(role, l)) : Vec(); };
  struct Norm {
    Vec w, b;
  };
  auto load_norm = [&](const std::string& role, int64_t l) {  // none where the family has none (OLMo 2)
    if (!has(role)) return Norm{};
    return Norm{w.tensor(name(role, l)), cp.norm == NormKind::Layer ? w.tensor(name(role + "_b", l)) : Vec()};
  };
  auto apply = [&](const float* x, const Norm& n, int64_t len) {
    if (n.w.empty()) return Vec(x, x + len);
    return cp.norm == NormKind::Layer ? layernorm(x, n.w, n.b, len, s.eps) : rmsnorm(x, n.w, len, s.eps);
  };
  auto bias = [](const Vec& b) { return b.empty() ? nullptr : &b; };
  if (!s.layers.empty() && int64_t(s.layers.size()) != s.n_layers) throw ConvertError("internal: a layer row per layer");
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const DecoderLayer y = layer_of(s, l);
    if (cp.rope != RopeKind::None && (y.n_rot <= 0 || y.n_rot % 2 || y.n_rot > y.head_dim))
      throw ConvertError("", "rope.dimension_count", "must be even and at most the head size");
    if (y.n_kv_heads <= 0 || s.n_heads % y.n_kv_heads) throw ConvertError("the kv heads must divide the heads");
    if (y.kv_from >= 0) {
      const DecoderLayer donor = layer_of(s, y.kv_from);
      if (y.kv_from >= l || donor.kv_from >= 0 || donor.head_dim != y.head_dim || donor.n_kv_heads != y.n_kv_heads)
        throw ConvertError("", "attention.shared_kv_layers",
                           "layer " + std::to_string(l) + " would read the keys of layer " + std::to_string(y.kv_from) +
                               ", which has other sizes");
    }
  }
  if (cp.rope == RopeKind::None && T > s.n_positions) throw ConvertError("token sequence longer than the context");

  std::vector<Vec> x;
  for (int64_t t = 0; t < T; ++t) {
    Vec e = w.rows(name("token_embd", 0), tokens[size_t(t)], tokens[size_t(t)] + 1);
    if (cp.scale_embeddings)
      for (float& v : e) v = float(double(v) * std::sqrt(double(D)));
    if (s.embedding_scale != 1.0)
      for (float& v : e) v = float(double(v) * s.embedding_scale);
    if (cp.rope == RopeKind::None) {  // learned positions
      const Vec p = w.rows(name("position_embd", 0), t, t + 1);
      for (int64_t i = 0; i < D; ++i) e[size_t(i)] += p[size_t(i)];
    }
    x.push_back(std::move(e));
  }
  // Gemma 4's per-layer inputs, per token [layers x P]: its row of per_layer_token_embd times
  // sqrt(P), plus the embedding projected (per_layer_model_proj, times 1/sqrt(hidden)) and
  // RMS-normed per layer (per_layer_proj_norm), the sum times 1/sqrt(2).
  const int64_t P = s.per_layer_input;
  std::vector<Vec> per_layer;
  if (P > 0) {
    const Vec pw = w.tensor(name("per_layer_model_proj", 0)), pn = w.tensor(name("per_layer_proj_norm", 0));
    for (int64_t t = 0; t < T; ++t) {
      const Vec tok = w.rows(name("per_layer_token_embd", 0), tokens[size_t(t)], tokens[size_t(t)] + 1);
      const Vec proj = matvec(pw, x[size_t(t)].data(), s.n_layers * P, D);
      Vec in(size_t(s.n_layers * P));
      for (int64_t l = 0; l < s.n_layers; ++l) {
        Vec scaled(proj.begin() + l * P, proj.begin() + (l + 1) * P);
        for (float& v : scaled) v = float(double(v) / std::sqrt(double(D)));
        const Vec normed = rmsnorm(scaled.data(), pn, P, s.eps);
        for (int64_t i = 0; i < P; ++i)
          in[size_t(l * P + i)] = float((double(normed[size_t(i)]) + double(tok[size_t(l * P + i)]) * std::sqrt(double(P))) /
                                        std::sqrt(2.0));
      }
      per_layer.push_back(std::move(in));
    }
  }
  ForwardTrace tr;
  std::map<int64_t, std::pair<std::vector<Vec>, std::vector<Vec>>> kv_of;  // the keys and values other layers read
  const int64_t L = std::min(max_layers, s.n_layers);
  for (int64_t l = 0; l < L; ++l) {
    const DecoderLayer y = layer_of(s, l);
    const int64_t hd = y.head_dim, Q = s.n_heads * hd, KV = y.n_kv_heads * hd, F = y.ffn;
    const bool sliding = y.sliding;
    const bool rotary = cp.rope != RopeKind::None && !(s.no_rope_period > 0 && (l + 1) % s.no_rope_period == 0);
    const double theta = sliding ? s.rope_theta_swa : s.rope_theta;
    const double pos_scale = sliding ? s.rope_freq_scale_swa : s.rope_freq_scale;
    const float* factors = s.rope_freq_factors.empty() || (cp.rope_freqs_full_layers_only && sliding)
                               ? nullptr : s.rope_freq_factors.data();
    const double scale = s.query_scale > 0 ? s.query_scale : 1.0 / std::sqrt(double(hd));
    const bool own_kv = y.kv_from < 0;
    const Norm an = load_norm("attn_norm", l);
    const bool fused = has("attn_qkv");
    const Vec wqkv = fused ? w.tensor(name("attn_qkv", l)) : Vec(), bqkv = fused ? opt("attn_qkv_b", l) : Vec();
    const Vec wq = fused ? Vec() : w.tensor(name("attn_q", l)), bq = fused ? Vec() : opt("attn_q_b", l);
    const Vec wk = fused || !own_kv ? Vec() : w.tensor(name("attn_k", l)), bk = fused || !own_kv ? Vec() : opt("attn_k_b", l);
    // Gemma 4's full layers may have no attn_v: the keys (before their norm) are the values
    const bool k_is_v = !fused && own_kv && !w.has(name("attn_v", l));
    const Vec wv = fused || !own_kv || k_is_v ? Vec() : w.tensor(name("attn_v", l));
    const Vec bv = fused || !own_kv ? Vec() : opt("attn_v_b", l);
    const Vec qn = opt("attn_q_norm", l), kn = own_kv ? opt("attn_k_norm", l) : Vec();
    const Vec wo = w.tensor(name("attn_output", l)), bo = opt("attn_output_b", l);
    std::vector<Vec> q, k, v;
    for (int64_t t = 0; t < T; ++t) {
      const Vec h = apply(x[size_t(t)].data(), an, D);
      if (fused) {
        const Vec qkv = linear(wqkv, bias(bqkv), h.data(), Q + 2 * KV, D);
        q.emplace_back(qkv.begin(), qkv.begin() + Q);
        k.emplace_back(qkv.begin() + Q, qkv.begin() + Q + KV);
        v.emplace_back(qkv.begin() + Q + KV, qkv.end());
      } else {
        q.push_back(linear(wq, bias(bq), h.data(), Q, D));
        if (own_kv) {
          k.push_back(linear(wk, bias(bk), h.data(), KV, D));
          v.push_back(k_is_v ? k.back() : linear(wv, bias(bv), h.data(), KV, D));
        }
      }
      auto per_head = [&](Vec& z, int64_t heads, const Vec& norm_w) {
        if (!norm_w.empty() && int64_t(norm_w.size()) == heads * hd && heads > 1)  // OLMo 2: the whole projection
          z = rmsnorm(z.data(), norm_w, heads * hd, s.eps);
        for (int64_t hh = 0; hh < heads; ++hh) {
          float* head = z.data() + hh * hd;
          if (!norm_w.empty() && int64_t(norm_w.size()) == hd) {  // Qwen3, Gemma 3: RMSNorm of the head, then RoPE
            const Vec n = rmsnorm(head, norm_w, hd, s.eps);
            std::copy(n.begin(), n.end(), head);
          }
          if (rotary && s.yarn) {
            rope_yarn_at(head, y.n_rot, double(t), theta, pos_scale, s.yarn_corr, s.yarn_mscale, cp.rope == RopeKind::Interleaved);
          } else if (rotary) {
            rope_at(head, y.n_rot, double(t) * pos_scale, theta, cp.rope == RopeKind::Interleaved, factors);
            for (int64_t i = 0; s.rope_attn_factor != 1.0 && i < y.n_rot; ++i)  // longrope: cos and sin scaled
              head[i] = float(double(head[i]) * s.rope_attn_factor);
          }
        }
      };
      per_head(q.back(), s.n_heads, qn);
      if (!own_kv) continue;
      per_head(k.back(), y.n_kv_heads, kn);
      if (cp.v_norm) {  // Gemma 4: each value head RMS-normed, without a weight
        const Vec ones(size_t(hd), 1.0f);
        for (int64_t hh = 0; hh < y.n_kv_heads; ++hh) {
          const Vec n = rmsnorm(v.back().data() + hh * hd, ones, hd, s.eps);
          std::copy(n.begin(), n.end(), v.back().begin() + hh * hd);
        }
      }
    }
    if (own_kv) kv_of[l] = {std::move(k), std::move(v)};
    const auto& [keys, values] = kv_of.at(own_kv ? l : y.kv_from);
    const Vec sinks = opt("attn_sinks", l);
    if (!sinks.empty() && int64_t(sinks.size()) != s.n_heads) throw ConvertError("", name("attn_sinks", l), "needs one value per head");
    const Vec att = attention_ex(q, keys, values, s.n_heads, y.n_kv_heads, hd, scale, s.attn_softcap,
                                 sliding ? s.sliding_window : 0, sinks.empty() ? nullptr : sinks.data());
    const Vec apn = opt("attn_post_norm", l);
    const Vec asn = opt("attn_sub_norm", l);  // BitNet: the attention's output normed before wo
    for (int64_t t = 0; t < T; ++t) {
      const Vec sub = asn.empty() ? Vec() : rmsnorm(att.data() + t * Q, asn, Q, s.eps);
      Vec o = linear(wo, bias(bo), asn.empty() ? att.data() + t * Q : sub.data(), D, Q);
      if (!apn.empty()) o = rmsnorm(o.data(), apn, D, s.eps);
      for (int64_t i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += float(double(o[size_t(i)]) * s.residual_scale);
    }
    const bool beside = s.n_expert > 0 && has("ffn_post_norm_1");  // Gemma 4: a dense MLP and a mixture
    if (s.n_expert > 0 && !beside) {
      moe_layer(s, w, l, x, load_norm("ffn_norm", l).w, tr.router_margin);
      tr.layers.push_back(flatten(x));
      continue;
    }
    const std::vector<Vec> mixed = beside ? gemma4_mixture(s, w, l, x, tr.router_margin) : std::vector<Vec>();
    const Vec mlp_post = beside ? w.tensor(name("ffn_post_norm_1", l)) : Vec();
    const Norm fn = load_norm("ffn_norm", l);
    const bool split_gate = has("ffn_gate");  // else gated: ffn_up holds gate, then up (Phi-3)
    const Vec wg = split_gate ? w.tensor(name("ffn_gate", l)) : Vec();
    const Vec wu = w.tensor(name("ffn_up", l)), bu = opt("ffn_up_b", l);
    const Vec wd = w.tensor(name("ffn_down", l)), bd = opt("ffn_down_b", l);
    const Vec fpn = opt("ffn_post_norm", l);
    const Vec fsn = opt("ffn_sub_norm", l);  // BitNet: act(gate) * up normed before down
    for (int64_t t = 0; t < T; ++t) {
      const Vec h = apply(x[size_t(t)].data(), fn, D);
      Vec a(static_cast<size_t>(F));
      if (cp.gated) {
        const Vec up = linear(wu, bias(bu), h.data(), split_gate ? F : 2 * F, D);
        const Vec gate = split_gate ? matvec(wg, h.data(), F, D) : Vec(up.begin(), up.begin() + F);
        const float* u = split_gate ? up.data() : up.data() + F;
        for (int64_t i = 0; i < F; ++i) a[size_t(i)] = float(activation(cp.act, gate[size_t(i)], s.ggml_gelu, s.gelu_jitter) * u[i]);
      } else {
        const Vec up = linear(wu, bias(bu), h.data(), F, D);
        for (int64_t i = 0; i < F; ++i) a[size_t(i)] = float(activation(cp.act, up[size_t(i)], s.ggml_gelu, s.gelu_jitter));
      }
      if (!fsn.empty()) a = rmsnorm(a.data(), fsn, F, s.eps);
      Vec d = linear(wd, bias(bd), a.data(), D, F);
      if (beside) {  // the dense MLP's output normed, plus the mixture's, then both normed
        d = rmsnorm(d.data(), mlp_post, D, s.eps);
        for (int64_t i = 0; i < D; ++i) d[size_t(i)] += mixed[size_t(t)][size_t(i)];
      }
      if (!fpn.empty()) d = rmsnorm(d.data(), fpn, D, s.eps);
      for (int64_t i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += float(double(d[size_t(i)]) * s.residual_scale);
    }
    if (P > 0) {  // Gemma 4: the layer's input gated by GELU(inp_gate x), projected back, normed, added
      const Vec gw = w.tensor(name("inp_gate", l)), pw = w.tensor(name("proj", l)), pn = w.tensor(name("post_norm", l));
      for (int64_t t = 0; t < T; ++t) {
        Vec g = matvec(gw, x[size_t(t)].data(), P, D);
        for (int64_t i = 0; i < P; ++i)
          g[size_t(i)] = float(activation(Activation::GeluTanh, g[size_t(i)], s.ggml_gelu, s.gelu_jitter) * per_layer[size_t(t)][size_t(l * P + i)]);
        const Vec o = rmsnorm(matvec(pw, g.data(), D, P).data(), pn, D, s.eps);
        for (int64_t i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
      }
    }
    if (has("layer_output_scale") && w.has(name("layer_output_scale", l))) {  // Gemma 4: the whole state scaled
      const double c = w.tensor(name("layer_output_scale", l)).at(0);
      for (Vec& xt : x)
        for (float& v : xt) v = float(double(v) * c);
    }
    tr.layers.push_back(flatten(x));
  }
  if (L == s.n_layers) {
    const Norm on = load_norm("output_norm", 0);
    for (Vec& xt : x) xt = apply(xt.data(), on, D);
    tr.logits = classify(w, name(s.tied ? "token_embd" : "output", 0), x, s.vocab, D);
    if (s.logit_scale != 1.0)
      for (float& z : tr.logits) z = float(double(z) / s.logit_scale);
    if (s.final_softcap > 0)
      for (float& z : tr.logits) z = float(s.final_softcap * std::tanh(double(z) / s.final_softcap));
    tr.has_logits = true;
  }
  return tr;
}

}  // namespace leapconv
