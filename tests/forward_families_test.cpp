// decoder_forward (src/check/forward.h), the reference forward pass of every family as its GGUF
// file holds it, held to cases computed without it:
//  - an independent Hugging Face-style pass written here from transformers' modeling code
//    (rotate-half RoPE on the checkpoint's own rows, Qwen2's biases, Qwen3's per-head norms,
//    Phi-3's fused qkv / gate_up and partial rotary, Gemma 2's (1 + w) norms, embedding scale,
//    post-norms, soft-caps and alternating sliding window), run on the generator's tensors and
//    config.json, against decoder_forward on the CLI's F32 GGUF of the same checkpoint (so the
//    names, transforms and keys of the conversion are checked with it);
//  - GPT-2: the existing gpt2_forward (HF names, Conv1D [in, out] rows) on the checkpoint against
//    decoder_forward on the GGUF's transposed weights;
//    The same pass runs Gemma (1), Gemma 3 (q/k norms, five local layers with their own RoPE base
//    and one global with linear scaling), SmolLM3 (NoPE layers), Granite (multipliers), OLMo 2
//    (norms after attention and MLP, whole-projection q/k norms), GLM-4 (interleaved partial
//    rotary, post norms, fused gate_up) and Phi-3's longrope (short factors, attention factor);
//  - cases worked out by hand: Gemma 2's embedding scale, final norm and final soft-cap; its
//    sliding window against full attention; Qwen2's v bias; Qwen3's q/k norms making the
//    attention blind to the scale of q and k; Granite's multipliers; SmolLM3's NoPE layer;
//    longrope's factors and attention factor; Gemma 4's per-layer input and layer scale, and its
//    shared KV layer reading its donor's keys and values. (Gemma 4 also against the Hugging
//    Face-style pass: E2B's layout and 31B's.)
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "arch/arch_table.h"
#include "check/forward.h"
#include "container/gguf_file.h"
#include "formats/gguf/gguf_format.h"
#include "quant/codec.h"
#include "test_support.h"

using namespace leapconv;
using json = nlohmann::json;

namespace {

using Vd = std::vector<double>;

// ---- an independent pass in the style of transformers' modeling_*.py ----

struct HfModel {
  std::string arch;
  json cfg;
  std::map<std::string, const gen::Tensor*> t;
  const gen::Tensor& get(const std::string& n) const {
    auto it = t.find(n);
    if (it == t.end()) throw std::runtime_error("no tensor " + n);
    return *it->second;
  }
  bool has(const std::string& n) const { return t.count(n) > 0; }
  double num(const char* k, double fallback) const {
    return cfg.contains(k) && cfg[k].is_number() ? cfg[k].get<double>() : fallback;
  }
};

// nn.Linear: y = x W^T + b, W [out, in]
Vd linear_(const gen::Tensor& W, const Vd& x, const gen::Tensor* b = nullptr) {
  const int64_t out = W.shape[0], in = W.shape[1];
  Vd y(size_t(out), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    double acc = b ? b->values[size_t(o)] : 0.0;
    for (int64_t i = 0; i < in; ++i) acc += double(W.values[size_t(o * in + i)]) * x[size_t(i)];
    y[size_t(o)] = acc;
  }
  return y;
}

// LlamaRMSNorm / Qwen3RMSNorm (x * w) and Gemma2RMSNorm (x * (1 + w))
Vd rms(const Vd& x, const std::vector<float>& w, double eps, bool one_plus) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vd y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * ((one_plus ? 1.0 : 0.0) + w[i]);
  return y;
}

// apply_rotary_pos_emb on the first `rot` dims of one head: q * cos + rotate_half(q) * sin,
// emb = cat(freqs, freqs), rotate_half(x) = cat(-x2, x1); pos fractional under linear scaling
// (position / factor)
void hf_rope_at(double* q, int64_t rot, double pos, double theta) {
  Vd out(static_cast<size_t>(rot));
  for (int64_t d = 0; d < rot; ++d) {
    const int64_t j = d % (rot / 2);
    const double inv_freq = 1.0 / std::pow(theta, double(2 * j) / double(rot));
    const double c = std::cos(pos * inv_freq), s = std::sin(pos * inv_freq);
    const double rh = d < rot / 2 ? -q[d + rot / 2] : q[d - rot / 2];
    out[size_t(d)] = q[d] * c + rh * s;
  }
  std::copy(out.begin(), out.end(), q);
}
void hf_rope(double* q, int64_t rot, int64_t pos, double theta) { hf_rope_at(q, rot, double(pos), theta); }

double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }

// GLM's apply_rotary_pos_emb on the first `rot` dims of one head: interleaved pairs (2i, 2i+1),
// cos / sin repeat_interleave'd, rotate_half_llm(x) = stack(-x[1::2], x[0::2]).flatten()
void hf_rope_interleaved(double* q, int64_t rot, int64_t pos, double theta) {
  for (int64_t i = 0; i < rot / 2; ++i) {
    const double inv_freq = 1.0 / std::pow(theta, double(2 * i) / double(rot));
    const double c = std::cos(double(pos) * inv_freq), s = std::sin(double(pos) * inv_freq);
    const double a = q[2 * i], b = q[2 * i + 1];
    q[2 * i] = a * c - b * s;
    q[2 * i + 1] = b * c + a * s;
  }
}

// Phi-3's longrope (Phi3RotaryEmbedding with _compute_longrope_parameters): inv_freq divided by
// the short factors (sequence within the original context) and cos / sin times the attention factor
void hf_rope_longrope(double* q, int64_t rot, int64_t pos, double theta, const std::vector<double>& ext, double attn) {
  Vd out(static_cast<size_t>(rot));
  for (int64_t d = 0; d < rot; ++d) {
    const int64_t j = d % (rot / 2);
    const double inv_freq = 1.0 / (ext[size_t(j)] * std::pow(theta, double(2 * j) / double(rot)));
    const double c = std::cos(double(pos) * inv_freq) * attn, s = std::sin(double(pos) * inv_freq) * attn;
    const double rh = d < rot / 2 ? -q[d + rot / 2] : q[d - rot / 2];
    out[size_t(d)] = q[d] * c + rh * s;
  }
  std::copy(out.begin(), out.end(), q);
}

// logits [T][V] of a checkpoint of a decoder family as transformers computes it
// (modeling_{llama,qwen2,qwen3,phi3,gemma,gemma2,gemma3,smollm3,granite,olmo2,glm4}.py)
std::vector<Vd> hf_forward(const HfModel& m, const std::vector<int32_t>& tokens) {
  const json& c = m.cfg;
  const std::string& a = m.arch;
  const bool gemma2 = a == "gemma2", gemma3 = a == "gemma3", gemma1 = a == "gemma";
  const bool gemma = gemma1 || gemma2 || gemma3;       // (1 + w) norms, sqrt(D) embeddings, GeGLU
  const bool post_norms = gemma2 || gemma3;            // sandwich norms around attention and MLP
  const bool phi3 = a == "phi3", qwen3 = a == "qwen3", olmo2 = a == "olmo2", glm4 = a == "glm4";
  const bool granite = a == "granite", smollm3 = a == "smollm3";
  const int64_t D = c["hidden_size"], H = c["num_attention_heads"], KVH = c["num_key_value_heads"];
  const int64_t L = c["num_hidden_layers"];
  const int64_t hd = c.contains("head_dim") && c["head_dim"].is_number() ? c["head_dim"].get<int64_t>() : D / H;
  const double eps = m.num("rms_norm_eps", 1e-6), theta = m.num("rope_theta", 10000.0);
  const int64_t rot = phi3 || glm4 ? int64_t(hd * m.num("partial_rotary_factor", glm4 ? 0.5 : 1.0)) : hd;
  double scale = post_norms ? 1.0 / std::sqrt(m.num("query_pre_attn_scalar", double(hd))) : 1.0 / std::sqrt(double(hd));
  if (granite) scale = m.num("attention_multiplier", 1.0);
  const double attn_cap = gemma2 ? m.num("attn_logit_softcapping", 0) : 0;
  const double final_cap = post_norms ? m.num("final_logit_softcapping", 0) : 0;
  const double residual = granite ? m.num("residual_multiplier", 1.0) : 1.0;
  const int64_t window = post_norms ? int64_t(m.num("sliding_window", 0)) : 0;
  // Gemma 3's local layers: base rope_local_base_freq, unscaled; global ones: rope_theta with linear scaling
  double linear = 1.0;
  if (gemma3 && c.contains("rope_scaling") && c["rope_scaling"].is_object()) linear = c["rope_scaling"]["factor"].get<double>();
  std::vector<double> ext;
  double attn_factor = 1.0;
  if (phi3 && c.contains("rope_scaling") && c["rope_scaling"].is_object()) {
    for (const json& x : c["rope_scaling"]["short_factor"]) ext.push_back(x.get<double>());  // the sequence is short
    const double f = m.num("max_position_embeddings", 0) / m.num("original_max_position_embeddings", 0);
    attn_factor = std::sqrt(1 + std::log(f) / std::log(m.num("original_max_position_embeddings", 0)));
  }
  auto rope = [&](double* x, int64_t l, int64_t pos) {
    if (smollm3 && c["no_rope_layers"][size_t(l)].get<int>() == 0) return;  // a NoPE layer
    if (glm4) return hf_rope_interleaved(x, rot, pos, theta);
    if (!ext.empty()) return hf_rope_longrope(x, rot, pos, theta, ext, attn_factor);
    if (gemma3) {
      const bool sliding = (l + 1) % 6 != 0;
      return sliding ? hf_rope(x, rot, pos, m.num("rope_local_base_freq", 10000.0))
                     : hf_rope_at(x, rot, double(pos) / linear, theta);
    }
    hf_rope(x, rot, pos, theta);
  };
  const gen::Tensor& E = m.get("model.embed_tokens.weight");
  const int64_t T = int64_t(tokens.size());
  std::vector<Vd> h(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    h[size_t(t)].assign(E.values.begin() + tokens[size_t(t)] * D, E.values.begin() + (tokens[size_t(t)] + 1) * D);
    for (double& v : h[size_t(t)]) v *= gemma ? std::sqrt(double(D)) : granite ? m.num("embedding_multiplier", 1.0) : 1.0;
  }
  auto P = [](int64_t l) { return "model.layers." + std::to_string(l) + "."; };
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = P(l);
    std::vector<Vd> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      const Vd x = olmo2 ? h[size_t(t)] : rms(h[size_t(t)], m.get(p + "input_layernorm.weight").values, eps, gemma);
      if (phi3) {
        const Vd qkv = linear_(m.get(p + "self_attn.qkv_proj.weight"), x);
        q[size_t(t)].assign(qkv.begin(), qkv.begin() + H * hd);
        k[size_t(t)].assign(qkv.begin() + H * hd, qkv.begin() + (H + KVH) * hd);
        v[size_t(t)].assign(qkv.begin() + (H + KVH) * hd, qkv.end());
      } else {
        auto bias = [&](const char* n) { return m.has(p + n) ? &m.get(p + n) : nullptr; };
        q[size_t(t)] = linear_(m.get(p + "self_attn.q_proj.weight"), x, bias("self_attn.q_proj.bias"));
        k[size_t(t)] = linear_(m.get(p + "self_attn.k_proj.weight"), x, bias("self_attn.k_proj.bias"));
        v[size_t(t)] = linear_(m.get(p + "self_attn.v_proj.weight"), x, bias("self_attn.v_proj.bias"));
      }
      if (olmo2) {  // Olmo2Attention: RMSNorm over the whole q and k projections
        q[size_t(t)] = rms(q[size_t(t)], m.get(p + "self_attn.q_norm.weight").values, eps, false);
        k[size_t(t)] = rms(k[size_t(t)], m.get(p + "self_attn.k_norm.weight").values, eps, false);
      }
      for (int64_t hh = 0; hh < H; ++hh) {
        double* qh = q[size_t(t)].data() + hh * hd;
        if (qwen3 || gemma3) {
          const Vd n = rms(Vd(qh, qh + hd), m.get(p + "self_attn.q_norm.weight").values, eps, gemma3);
          std::copy(n.begin(), n.end(), qh);
        }
        rope(qh, l, t);
      }
      for (int64_t hh = 0; hh < KVH; ++hh) {
        double* kh = k[size_t(t)].data() + hh * hd;
        if (qwen3 || gemma3) {
          const Vd n = rms(Vd(kh, kh + hd), m.get(p + "self_attn.k_norm.weight").values, eps, gemma3);
          std::copy(n.begin(), n.end(), kh);
        }
        rope(kh, l, t);
      }
    }
    // Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2); Gemma 3: five local, one global
    const bool sliding = (gemma2 && l % 2 == 0) || (gemma3 && (l + 1) % 6 != 0);
    for (int64_t t = 0; t < T; ++t) {
      Vd att(size_t(H * hd), 0.0);
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t g = hh / (H / KVH);  // repeat_kv
        Vd w(size_t(T), -INFINITY);
        double mx = -INFINITY;
        for (int64_t u = 0; u <= t; ++u) {
          if (sliding && t - u >= window) continue;  // the sliding-window causal mask
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += q[size_t(t)][size_t(hh * hd + i)] * k[size_t(u)][size_t(g * hd + i)];
          d *= scale;
          if (attn_cap > 0) d = std::tanh(d / attn_cap) * attn_cap;
          w[size_t(u)] = d;
          mx = std::max(mx, d);
        }
        double sum = 0;
        for (double& x : w) sum += (x = std::isinf(x) ? 0.0 : std::exp(x - mx));
        for (int64_t u = 0; u <= t; ++u)
          for (int64_t i = 0; i < hd; ++i) att[size_t(hh * hd + i)] += w[size_t(u)] / sum * v[size_t(u)][size_t(g * hd + i)];
      }
      Vd o = linear_(m.get(p + "self_attn.o_proj.weight"), att);
      if (post_norms || olmo2) o = rms(o, m.get(p + "post_attention_layernorm.weight").values, eps, post_norms);
      if (glm4) o = rms(o, m.get(p + "post_self_attn_layernorm.weight").values, eps, false);
      for (int64_t i = 0; i < D; ++i) h[size_t(t)][size_t(i)] += o[size_t(i)] * residual;
      const Vd x = olmo2 ? h[size_t(t)]
                         : rms(h[size_t(t)], m.get(p + (post_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight")).values,
                               eps, gemma);
      Vd gate, up;
      if (phi3 || glm4) {
        const Vd gu = linear_(m.get(p + "mlp.gate_up_proj.weight"), x);  // gate, up = chunk(2)
        gate.assign(gu.begin(), gu.begin() + int64_t(gu.size()) / 2);
        up.assign(gu.begin() + int64_t(gu.size()) / 2, gu.end());
      } else {
        gate = linear_(m.get(p + "mlp.gate_proj.weight"), x);
        up = linear_(m.get(p + "mlp.up_proj.weight"), x);
      }
      for (size_t i = 0; i < up.size(); ++i) up[i] *= gemma ? gelu_tanh(gate[i]) : silu(gate[i]);
      Vd d = linear_(m.get(p + "mlp.down_proj.weight"), up);
      if (post_norms || olmo2) d = rms(d, m.get(p + "post_feedforward_layernorm.weight").values, eps, post_norms);
      if (glm4) d = rms(d, m.get(p + "post_mlp_layernorm.weight").values, eps, false);
      for (int64_t i = 0; i < D; ++i) h[size_t(t)][size_t(i)] += d[size_t(i)] * residual;
    }
  }
  const bool tied = c.value("tie_word_embeddings", false) || gemma1 || gemma2;
  const gen::Tensor& head = tied ? E : m.get("lm_head.weight");
  std::vector<Vd> logits;
  for (int64_t t = 0; t < T; ++t) {
    Vd z = linear_(head, rms(h[size_t(t)], m.get("model.norm.weight").values, eps, gemma));
    if (final_cap > 0)
      for (double& x : z) x = std::tanh(x / final_cap) * final_cap;
    if (granite)
      for (double& x : z) x /= m.num("logits_scaling", 1.0);
    logits.push_back(std::move(z));
  }
  return logits;
}

// Gemma 4's text model as transformers computes it (modeling_gemma4.py, 5.5.2 and later): RMSNorm
// weights applied as w; per-layer inputs; q/k norms, values RMS-normed without a weight, queries
// unscaled; sliding layers' RoPE over head_dim with rope_theta 10000, full layers' "proportional"
// RoPE (inv_freq over global_head_dim for the first partial_rotary_factor x head / 2 pairs, 0 for
// the rest); a full layer's keys as its values under attention_k_eq_v; the shared KV layers
// reading the last unshared layer of their type; layer_scalar on the whole state; final soft-cap.
std::vector<Vd> hf_gemma4_forward(const HfModel& m, const std::vector<int32_t>& tokens) {
  const json& c = m.cfg.contains("text_config") ? m.cfg["text_config"] : m.cfg;
  const std::string pre = m.cfg.contains("text_config") ? "model.language_model." : "model.";
  const int64_t D = c["hidden_size"], H = c["num_attention_heads"], L = c["num_hidden_layers"], T = int64_t(tokens.size());
  const int64_t P = c["hidden_size_per_layer_input"], shared = c["num_kv_shared_layers"], first_shared = L - shared;
  const double eps = c["rms_norm_eps"], cap = c["final_logit_softcapping"];
  const int64_t window = c["sliding_window"];
  const bool k_eq_v = c["attention_k_eq_v"];
  const json& rp = c["rope_parameters"];
  auto is_sliding = [&](int64_t l) { return c["layer_types"][size_t(l)] == "sliding_attention"; };
  auto head_dim = [&](int64_t l) {
    if (is_sliding(l)) return c["head_dim"].get<int64_t>();
    if (c.contains("global_head_dim") && c["global_head_dim"].is_number()) return c["global_head_dim"].get<int64_t>();
    for (const auto& [idx, lc] : c["per_layer_config"].items())
      if (std::stoll(idx) == l) return lc["head_dim"].get<int64_t>();
    throw std::runtime_error("no head_dim for layer " + std::to_string(l));
  };
  auto kv_heads = [&](int64_t l) {  // a full layer's own only where its keys are its values
    const json& g = c["num_global_key_value_heads"];
    if (is_sliding(l) || !k_eq_v) return c["num_key_value_heads"].get<int64_t>();
    if (g.is_number()) return g.get<int64_t>();
    for (const auto& [idx, lc] : c["per_layer_config"].items())
      if (std::stoll(idx) == l && lc.contains("num_key_value_heads")) return lc["num_key_value_heads"].get<int64_t>();
    return c["num_key_value_heads"].get<int64_t>();
  };
  auto rope = [&](double* x, int64_t l, int64_t pos) {  // rotate_half over the whole head, cos / sin from inv_freq
    const int64_t hd = head_dim(l);
    const json& r = is_sliding(l) ? rp["sliding_attention"] : rp["full_attention"];
    const double theta = r["rope_theta"];
    const int64_t angles = is_sliding(l) ? hd / 2 : int64_t(r["partial_rotary_factor"].get<double>() * double(hd) / 2);
    Vd out(static_cast<size_t>(hd));
    for (int64_t d = 0; d < hd; ++d) {
      const int64_t j = d % (hd / 2);
      const double inv_freq = j < angles ? 1.0 / std::pow(theta, double(2 * j) / double(hd)) : 0.0;
      const double cs = std::cos(double(pos) * inv_freq), sn = std::sin(double(pos) * inv_freq);
      const double rh = d < hd / 2 ? -x[d + hd / 2] : x[d - hd / 2];
      out[size_t(d)] = x[d] * cs + rh * sn;
    }
    std::copy(out.begin(), out.end(), x);
  };
  const std::vector<float> none;
  auto norm = [&](const Vd& x, const std::string& n) { return rms(x, m.get(n).values, eps, false); };
  auto bare_norm = [&](const Vd& x) {  // with_scale=False
    return rms(x, std::vector<float>(x.size(), 1.0f), eps, false);
  };
  const gen::Tensor& E = m.get(pre + "embed_tokens.weight");
  std::vector<Vd> h(static_cast<size_t>(T)), ple(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    h[size_t(t)].assign(E.values.begin() + tokens[size_t(t)] * D, E.values.begin() + (tokens[size_t(t)] + 1) * D);
    for (double& v : h[size_t(t)]) v *= std::sqrt(double(D));
    if (P == 0) continue;
    const gen::Tensor& PE = m.get(pre + "embed_tokens_per_layer.weight");
    const Vd proj = linear_(m.get(pre + "per_layer_model_projection.weight"), h[size_t(t)]);
    ple[size_t(t)].resize(size_t(L * P));
    for (int64_t l = 0; l < L; ++l) {
      Vd part(proj.begin() + l * P, proj.begin() + (l + 1) * P);
      for (double& v : part) v /= std::sqrt(double(D));
      part = norm(part, pre + "per_layer_projection_norm.weight");
      for (int64_t i = 0; i < P; ++i)
        ple[size_t(t)][size_t(l * P + i)] =
            (part[size_t(i)] + double(PE.values[size_t(tokens[size_t(t)] * L * P + l * P + i)]) * std::sqrt(double(P))) /
            std::sqrt(2.0);
    }
  }
  std::map<int64_t, std::pair<std::vector<Vd>, std::vector<Vd>>> kv_of;
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = pre + "layers." + std::to_string(l) + ".";
    const int64_t hd = head_dim(l), KVH = kv_heads(l);
    std::vector<Vd> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      const Vd x = norm(h[size_t(t)], p + "input_layernorm.weight");
      q[size_t(t)] = linear_(m.get(p + "self_attn.q_proj.weight"), x);
      for (int64_t hh = 0; hh < H; ++hh) {
        double* qh = q[size_t(t)].data() + hh * hd;
        const Vd n = norm(Vd(qh, qh + hd), p + "self_attn.q_norm.weight");
        std::copy(n.begin(), n.end(), qh);
        rope(qh, l, t);
      }
      if (l >= first_shared) continue;
      k[size_t(t)] = linear_(m.get(p + "self_attn.k_proj.weight"), x);
      v[size_t(t)] = !is_sliding(l) && k_eq_v ? k[size_t(t)] : linear_(m.get(p + "self_attn.v_proj.weight"), x);
      for (int64_t hh = 0; hh < KVH; ++hh) {
        double* kh = k[size_t(t)].data() + hh * hd;
        const Vd n = norm(Vd(kh, kh + hd), p + "self_attn.k_norm.weight");
        std::copy(n.begin(), n.end(), kh);
        rope(kh, l, t);
        double* vh = v[size_t(t)].data() + hh * hd;
        const Vd nv = bare_norm(Vd(vh, vh + hd));
        std::copy(nv.begin(), nv.end(), vh);
      }
    }
    if (l < first_shared) {
      kv_of[l] = {k, v};
    } else {  // the last unshared layer of this layer's type
      int64_t donor = first_shared - 1;
      while (is_sliding(donor) != is_sliding(l)) --donor;
      k = kv_of.at(donor).first;
      v = kv_of.at(donor).second;
    }
    for (int64_t t = 0; t < T; ++t) {
      Vd att(size_t(H * hd), 0.0);
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t g = hh / (H / KVH);
        Vd w(size_t(T), -INFINITY);
        double mx = -INFINITY;
        for (int64_t u = 0; u <= t; ++u) {
          if (is_sliding(l) && t - u >= window) continue;
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += q[size_t(t)][size_t(hh * hd + i)] * k[size_t(u)][size_t(g * hd + i)];
          w[size_t(u)] = d;  // scaling 1.0
          mx = std::max(mx, d);
        }
        double sum = 0;
        for (double& x : w) sum += (x = std::isinf(x) ? 0.0 : std::exp(x - mx));
        for (int64_t u = 0; u <= t; ++u)
          for (int64_t i = 0; i < hd; ++i) att[size_t(hh * hd + i)] += w[size_t(u)] / sum * v[size_t(u)][size_t(g * hd + i)];
      }
      const Vd o = norm(linear_(m.get(p + "self_attn.o_proj.weight"), att), p + "post_attention_layernorm.weight");
      for (int64_t i = 0; i < D; ++i) h[size_t(t)][size_t(i)] += o[size_t(i)];
      const Vd x = norm(h[size_t(t)], p + "pre_feedforward_layernorm.weight");
      const Vd gate = linear_(m.get(p + "mlp.gate_proj.weight"), x);
      Vd up = linear_(m.get(p + "mlp.up_proj.weight"), x);
      for (size_t i = 0; i < up.size(); ++i) up[i] *= gelu_tanh(gate[i]);
      const Vd d = norm(linear_(m.get(p + "mlp.down_proj.weight"), up), p + "post_feedforward_layernorm.weight");
      for (int64_t i = 0; i < D; ++i) h[size_t(t)][size_t(i)] += d[size_t(i)];
      if (P > 0) {
        Vd g = linear_(m.get(p + "per_layer_input_gate.weight"), h[size_t(t)]);
        for (int64_t i = 0; i < P; ++i) g[size_t(i)] = gelu_tanh(g[size_t(i)]) * ple[size_t(t)][size_t(l * P + i)];
        const Vd e = norm(linear_(m.get(p + "per_layer_projection.weight"), g), p + "post_per_layer_input_norm.weight");
        for (int64_t i = 0; i < D; ++i) h[size_t(t)][size_t(i)] += e[size_t(i)];
      }
      for (double& x : h[size_t(t)]) x *= double(m.get(p + "layer_scalar").values[0]);
    }
  }
  const bool tied = m.cfg.value("tie_word_embeddings", true);
  const gen::Tensor& head = tied ? E : m.get("lm_head.weight");
  std::vector<Vd> logits;
  for (int64_t t = 0; t < T; ++t) {
    Vd z = linear_(head, norm(h[size_t(t)], pre + "norm.weight"));
    for (double& x : z) x = std::tanh(x / cap) * cap;
    logits.push_back(std::move(z));
  }
  return logits;
}

// ---- the GGUF file's weights, for decoder_forward ----

class GgufWeightsIn : public ModelWeights {
 public:
  explicit GgufWeightsIn(const std::string& path) : src_(path, gen::read_file(path)), info_(inspect_gguf(src_)) {
    file_ = read_gguf_file(src_, GgufReadOptions{16, true});
    for (const PlanItem& it : info_.items) items_[it.name] = &it;
  }
  std::vector<float> tensor(const std::string& n) override { return read_tensor_f32(src_, get(n)); }
  std::vector<float> rows(const std::string& n, int64_t r0, int64_t r1) override {
    return read_rows_f32(src_, get(n), r0, r1);
  }
  bool has(const std::string& n) override { return items_.count(n) > 0; }
  const GgufMetadata& kv() const { return file_.kv; }
  // the file's computed tensors (longrope's factors) as llama.cpp reads them, at context n_ctx
  DecoderSpec spec(int64_t n_ctx = 0) {
    ComputedTensors computed;
    for (const char* n : {"rope_factors_long.weight", "rope_factors_short.weight", "rope_freqs.weight"})
      if (has(n)) computed[n] = tensor(n);
    return gguf_decoder_spec(file_.kv, get("token_embd.weight").shape[0], has("output.weight"), computed, n_ctx);
  }

 private:
  const PlanItem& get(const std::string& n) {
    auto it = items_.find(n);
    if (it == items_.end()) throw ConvertError("", n, "not in the file");
    return *it->second;
  }
  MemorySource src_;
  InspectedFile info_;
  GgufFile file_;
  std::map<std::string, const PlanItem*> items_;
};

// Weights in memory under GGUF names, for the hand-worked cases.
class MapWeights : public ModelWeights {
 public:
  std::map<std::string, std::vector<float>> t;
  std::map<std::string, int64_t> cols;
  std::vector<float> tensor(const std::string& n) override { return t.at(n); }
  bool has(const std::string& n) override { return t.count(n) > 0; }
  std::vector<float> rows(const std::string& n, int64_t r0, int64_t r1) override {
    const auto& v = t.at(n);
    const int64_t c = cols.at(n);
    return std::vector<float>(v.begin() + r0 * c, v.begin() + r1 * c);
  }
  void set(const std::string& n, int64_t r, int64_t c, std::vector<float> v) {
    v.resize(size_t(r * c), 0.0f);
    t[n] = std::move(v);
    cols[n] = c;
  }
};

class ForwardFamilies : public tsup::TempDirTest {
 protected:
  // A generated checkpoint of `arch`, converted to an F32 GGUF by the CLI (no vocabulary: it is
  // never loaded in llama.cpp here).
  std::string convert(gen::Spec s, std::vector<gen::Tensor>* tensors) {
    s.dtype = "f32";
    const std::string ck = path("ck_" + s.arch), out = path(s.arch + ".gguf");
    *tensors = gen::write_checkpoint(ck, s);
    const auto r = tsup::run_cli({out, "--model", ck, "--outtype", "F32", "--no-vocab", "--quiet"}, dir);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return out;
  }
  static HfModel hf_model(const gen::Spec& s, const std::vector<gen::Tensor>& ts, const std::string& ck) {
    HfModel m;
    m.arch = s.arch;
    m.cfg = json::parse(tsup::slurp_text(ck + "/config.json"));
    for (const gen::Tensor& t : ts) m.t[t.name] = &t;
    return m;
  }
};

const std::vector<int32_t> kTokens = {1, 7, 42, 3, 80, 5, 11, 2, 63, 17, 9};

double max_logit_diff(const std::vector<Vd>& want, const std::vector<float>& got, int64_t vocab, double* scale) {
  double m = 0;
  *scale = 0;
  for (size_t t = 0; t < want.size(); ++t)
    for (int64_t v = 0; v < vocab; ++v) {
      m = std::max(m, std::fabs(want[t][size_t(v)] - got[t * size_t(vocab) + size_t(v)]));
      *scale = std::max(*scale, std::fabs(want[t][size_t(v)]));
    }
  return m;
}

}  // namespace

TEST_F(ForwardFamilies, EveryFamilysGgufRunsAsTransformersComputesTheCheckpoint) {
  struct Case {
    const char* arch;
    int64_t head_dim;
    bool tied;
    const char* patch;
    int64_t layers = 3;
  };
  const Case cases[] = {
      {"llama", 0, false, ""},
      {"qwen2", 0, false, ""},
      {"qwen2", 0, true, ""},
      {"qwen3", 32, true, ""},  // head_dim 32 with hidden 64 and 4 heads: q is 128 wide
      {"phi3", 0, false, R"({"partial_rotary_factor": 0.5})"},
      {"gemma2", 32, true, R"({"sliding_window": 4, "attn_logit_softcapping": 0.5, "final_logit_softcapping": 3.0})"},
      {"gemma", 32, true, ""},
      // five local layers (base 10000, window 4) and a global one (base 1e4 here too, linear x8)
      {"gemma3", 32, false, R"({"sliding_window": 4, "rope_scaling": {"rope_type": "linear", "factor": 8.0}})", 6},
      {"gemma3", 0, true, R"({"sliding_window": 3, "rope_local_base_freq": 100.0})", 6},
      {"smollm3", 0, false, "", 4},  // layer 3 without RoPE
      {"granite", 0, false, ""},
      {"granite", 0, true, ""},
      {"olmo2", 0, false, ""},
      {"glm4", 0, false, ""},
      {"glm4", 0, true, ""},
      // longrope, a sequence within the original context: the short factors and the attention factor
      {"phi3", 0, false, R"({"partial_rotary_factor": 0.5, "original_max_position_embeddings": 4096,
          "max_position_embeddings": 131072, "rope_scaling": {"type": "longrope", "long_factor": [1, 3, 9, 20],
          "short_factor": [1.0, 1.5, 2.0, 4.0]}})"},
      // Gemma 4 as E2B: sliding (head 16) and full (head 32, a quarter rotated) layers, per-layer
      // inputs, the last two layers reading layers 2 and 3's keys and values with double-wide MLPs;
      // a window of 3 < the tokens
      {"gemma4", 16, false, R"({"sliding_window": 3, "final_logit_softcapping": 5.0})", 6},
      // as 31B: full layers' keys as their values (one kv head there), no per-layer inputs, no
      // sharing; the head size of the full layers from per_layer_config (transformers 5.15's form)
      {"gemma4", 16, true, R"({"sliding_window": 4, "attention_k_eq_v": true, "num_global_key_value_heads": 1,
          "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0, "use_double_wide_mlp": false,
          "global_head_dim": null, "per_layer_config": {"01": {"head_dim": 24, "num_key_value_heads": 1},
          "03": {"head_dim": 24, "num_key_value_heads": 1}, "05": {"head_dim": 24, "num_key_value_heads": 1}}})", 6},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.arch) + (c.tied ? " tied" : ""));
    gen::Spec s;
    s.arch = c.arch;
    s.dim = 64; s.hidden = 96; s.layers = c.layers; s.heads = 4; s.kv_heads = 2; s.vocab = 96; s.seq_len = 64;
    s.head_dim = c.head_dim;
    s.tied = c.tied;
    s.rope_theta = 10000.0;
    s.config_patch = c.patch;
    std::vector<gen::Tensor> ts;
    const std::string file = convert(s, &ts);
    if (HasFailure()) return;
    const HfModel hf = hf_model(s, ts, path("ck_" + s.arch));
    const std::vector<Vd> want = s.arch == "gemma4" ? hf_gemma4_forward(hf, kTokens) : hf_forward(hf, kTokens);
    GgufWeightsIn w(file);
    const DecoderSpec spec = w.spec();
    EXPECT_EQ(std::string(spec.family->name), c.arch);
    EXPECT_TRUE(spec.not_run.empty());
    EXPECT_EQ(spec.tied, c.tied || s.arch == "gemma2" || s.arch == "gemma");
    if (s.arch == "gemma4") EXPECT_EQ(spec.layers.size(), 6u);
    const ForwardTrace got = decoder_forward(spec, w, kTokens, 99);
    ASSERT_TRUE(got.has_logits);
    double scale = 0;
    const double d = max_logit_diff(want, got.logits, s.vocab, &scale);
    EXPECT_LE(d, 1e-5 * std::max(1.0, scale)) << "logits up to " << scale;  // measured: 1-3e-7
    EXPECT_GT(scale, 0.05);  // the logits are not all ~0 (the comparison means something)
  }
}

TEST_F(ForwardFamilies, WhatMakesEachFamilyMattersInTheComparison) {
  // The same Qwen3 weights run as Qwen2 (no q/k norms), Gemma 2 without its window or soft-caps,
  // Phi-3 with full rotary: the logits move well beyond the tolerance above, so the comparison
  // would have caught a pass that dropped them.
  gen::Spec s;
  s.dim = 64; s.hidden = 96; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.vocab = 96; s.seq_len = 64;
  s.rope_theta = 10000.0;
  auto logits = [&](GgufWeightsIn& w, DecoderSpec spec) { return decoder_forward(spec, w, kTokens, 99).logits; };
  auto diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
    return m;
  };
  std::vector<gen::Tensor> ts;
  {
    s.arch = "gemma2"; s.head_dim = 32;
    s.config_patch = R"({"sliding_window": 3, "attn_logit_softcapping": 0.3, "final_logit_softcapping": 2.0})";
    GgufWeightsIn w(convert(s, &ts));
    const DecoderSpec spec = w.spec();
    EXPECT_EQ(spec.sliding_window, 3);
    EXPECT_FLOAT_EQ(float(spec.attn_softcap), 0.3f);
    EXPECT_FLOAT_EQ(float(spec.final_softcap), 2.0f);
    const std::vector<float> base = logits(w, spec);
    DecoderSpec no_window = spec, no_cap = spec, no_final = spec;
    no_window.sliding_window = 0;
    no_cap.attn_softcap = 0;
    no_final.final_softcap = 0;
    EXPECT_GT(diff(base, logits(w, no_window)), 1e-3);
    EXPECT_GT(diff(base, logits(w, no_cap)), 1e-3);
    EXPECT_GT(diff(base, logits(w, no_final)), 1e-2);
  }
  {
    s.arch = "phi3"; s.head_dim = 0;
    s.config_patch = R"({"partial_rotary_factor": 0.5})";
    GgufWeightsIn w(convert(s, &ts));
    const DecoderSpec spec = w.spec();
    EXPECT_EQ(spec.n_rot, 8);  // int(0.5 * 64) // 4
    DecoderSpec full = spec;
    full.n_rot = spec.head_dim;
    EXPECT_GT(diff(logits(w, spec), logits(w, full)), 1e-3);
  }
  {  // Gemma 4 without its per-layer inputs, with the shared layers reading the wrong donors
    s.arch = "gemma4"; s.head_dim = 16; s.layers = 6;
    s.config_patch = R"({"sliding_window": 3})";
    GgufWeightsIn w(convert(s, &ts));
    const DecoderSpec spec = w.spec();
    EXPECT_EQ(spec.per_layer_input, 8);
    EXPECT_EQ(spec.layers[4].kv_from, 2);
    EXPECT_EQ(spec.layers[5].kv_from, 3);
    EXPECT_EQ(spec.layers[5].head_dim, 32);
    DecoderSpec no_ple = spec, other_donor = spec;
    no_ple.per_layer_input = 0;
    other_donor.layers[4].kv_from = 0;  // sliding too, same sizes
    const std::vector<float> base = logits(w, spec);
    EXPECT_GT(diff(base, logits(w, no_ple)), 1e-3);
    EXPECT_GT(diff(base, logits(w, other_donor)), 1e-3);
  }
}

TEST_F(ForwardFamilies, Gpt2GgufRunsAsGpt2ForwardOnTheCheckpoint) {
  gen::Spec s;
  s.arch = "gpt2";
  s.dim = 64; s.layers = 2; s.heads = 4; s.vocab = 96; s.seq_len = 32;
  std::vector<gen::Tensor> ts;
  const std::string file = convert(s, &ts);
  // gpt2_forward reads the checkpoint's own tensors (HF names, Conv1D [in, out])
  MapWeights hf;
  for (const gen::Tensor& t : ts) hf.set(t.name, t.shape[0], t.shape.size() > 1 ? t.shape[1] : 1, t.values);
  Gpt2Spec g;
  g.dim = 64; g.n_layers = 2; g.n_heads = 4; g.vocab = 96; g.n_positions = 32; g.eps = 1e-5;
  const ForwardTrace want = gpt2_forward(g, hf, kTokens, 99);
  GgufWeightsIn w(file);
  const DecoderSpec spec = w.spec();
  EXPECT_EQ(spec.n_rot, 0);
  EXPECT_EQ(spec.n_positions, 32);
  const ForwardTrace got = decoder_forward(spec, w, kTokens, 99);
  ASSERT_EQ(want.logits.size(), got.logits.size());
  double m = 0, scale = 0;
  for (size_t i = 0; i < got.logits.size(); ++i) {
    m = std::max(m, double(std::fabs(want.logits[i] - got.logits[i])));
    scale = std::max(scale, double(std::fabs(want.logits[i])));
  }
  EXPECT_LE(m, 1e-5 * std::max(1.0, scale));
  EXPECT_GT(scale, 0.05);
}

// ---- worked by hand ----

namespace {

DecoderSpec tiny(const char* family, int64_t dim, int64_t head_dim, int64_t vocab) {
  DecoderSpec s;
  s.family = find_family_by_name(family);
  s.dim = dim; s.ffn = 1; s.n_layers = 1; s.n_heads = 1; s.n_kv_heads = 1; s.head_dim = head_dim; s.n_rot = head_dim;
  s.vocab = vocab; s.eps = 1e-12; s.rope_theta = 10000.0; s.tied = true;
  return s;
}

// Every weight of one layer zero but the norms (ones); the caller sets the rest.
MapWeights zero_layer(const DecoderSpec& s) {
  MapWeights w;
  const int64_t D = s.dim, hd = s.head_dim;
  for (const TensorRole& r : s.family->roles) {
    const std::string n = role_name(r.gguf, 0);
    const int64_t rows = r.shape.empty() ? 1 : r.shape[0] == Dim::Vocab ? s.vocab
                       : r.shape[0] == Dim::Q ? hd : r.shape[0] == Dim::Kv ? hd : r.shape[0] == Dim::Ffn ? 1
                       : r.shape[0] == Dim::HeadDim ? hd : D;
    const int64_t cols = r.shape.size() < 2 ? 1 : r.shape[1] == Dim::Q ? hd : r.shape[1] == Dim::Ffn ? 1 : D;
    w.set(n, rows, cols, std::vector<float>(size_t(rows * cols), r.norm ? 1.0f : 0.0f));
  }
  return w;
}

}  // namespace

TEST(ForwardHand, Gemma2ScalesTheEmbeddingsNormsAndSoftCapsTheLogits) {
  // hidden 2, embeddings (3, 4) and (1, 0), every layer weight zero: the layer adds nothing
  // (its post-norms of zero vectors are zero), the state is (3, 4) sqrt(2), its RMS 5, the final
  // norm gives (3, 4) sqrt(2) / 5, the logits are (25, 3) sqrt(2) / 5 = (5 sqrt 2, 0.6 sqrt 2),
  // and the final soft-cap of 2 makes them 2 tanh(logit / 2).
  DecoderSpec s = tiny("gemma2", 2, 2, 2);
  s.final_softcap = 2.0;
  s.attn_softcap = 50.0;
  MapWeights w = zero_layer(s);
  w.set("token_embd.weight", 2, 2, {3, 4, 1, 0});
  const ForwardTrace tr = decoder_forward(s, w, {0}, 1);
  ASSERT_TRUE(tr.has_logits);
  EXPECT_NEAR(tr.layers[0][0], 3 * std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(tr.layers[0][1], 4 * std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(tr.logits[0], 2 * std::tanh(5 * std::sqrt(2.0) / 2), 1e-6);
  EXPECT_NEAR(tr.logits[1], 2 * std::tanh(0.6 * std::sqrt(2.0) / 2), 1e-6);
  s.final_softcap = 0;
  EXPECT_NEAR(decoder_forward(s, w, {0}, 1).logits[0], 5 * std::sqrt(2.0), 1e-5);
}

TEST(ForwardHand, Gemma2SlidingWindowSeesTheLastPositionsOnly) {
  // hidden 2, one head of 2; q = k = 0, so every visible position weighs the same; v = h, o =
  // att. Embeddings (1,1), (1,-1), (-1,1) over sqrt(2): scaled by sqrt(2) they have RMS 1, the
  // attention norm keeps them. Window 2 (layer 0 slides): position 2 sees positions 1 and 2, their
  // mean is (0, 0), its post-norm 0, so it stays (-1, 1); position 1 sees (1,1) and (1,-1): mean
  // (1, 0), post-norm (sqrt 2, 0), so (1 + sqrt 2, -1). Full attention: position 2's mean is
  // (1/3, 1/3), normed (1, 1), so (0, 2).
  DecoderSpec s = tiny("gemma2", 2, 2, 3);
  s.sliding_window = 2;
  MapWeights w = zero_layer(s);
  const float r = float(1 / std::sqrt(2.0));
  w.set("token_embd.weight", 3, 2, {r, r, r, -r, -r, r});
  w.set("blk.0.attn_v.weight", 2, 2, {1, 0, 0, 1});
  w.set("blk.0.attn_output.weight", 2, 2, {1, 0, 0, 1});
  const std::vector<float> x = decoder_forward(s, w, {0, 1, 2}, 1).layers[0];
  const double want[] = {2, 2, 1 + std::sqrt(2.0), -1, -1, 1};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(x[size_t(i)], want[i], 1e-5) << i;
  s.sliding_window = 0;
  const std::vector<float> full = decoder_forward(s, w, {0, 1, 2}, 1).layers[0];
  EXPECT_NEAR(full[4], 0.0, 1e-5);
  EXPECT_NEAR(full[5], 2.0, 1e-5);
}

TEST(ForwardHand, Qwen2AddsTheVBias) {
  // q, k, v weights zero, v bias (0.5, -0.25): every position attends to v = the bias, o = att
  // adds it to the embedding; the MLP adds nothing.
  DecoderSpec s = tiny("qwen2", 2, 2, 2);
  MapWeights w = zero_layer(s);
  w.set("token_embd.weight", 2, 2, {0.25f, 2, -1, 0.5f});
  w.set("blk.0.attn_v.bias", 2, 1, {0.5f, -0.25f});
  w.set("blk.0.attn_q.bias", 2, 1, {3, 1});  // q and k biases alone leave the weights uniform
  w.set("blk.0.attn_k.bias", 2, 1, {1, 2});
  w.set("blk.0.attn_output.weight", 2, 2, {1, 0, 0, 1});
  const std::vector<float> x = decoder_forward(s, w, {0, 1}, 1).layers[0];
  const float want[] = {0.75f, 1.75f, -0.5f, 0.25f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(x[size_t(i)], want[i], 1e-6) << i;
}

TEST(ForwardHand, Qwen3sHeadNormsMakeAttentionBlindToTheScaleOfQAndK) {
  // Scaling wq and wk by 7 changes nothing with Qwen3's per-head RMSNorm (up to its eps), and
  // everything without it (the same weights run as Qwen2).
  DecoderSpec s = tiny("qwen3", 4, 4, 5);
  s.n_heads = 1; s.ffn = 1; s.eps = 1e-6;
  MapWeights w = zero_layer(s);
  std::mt19937 g(3);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> e(20), q(16), k(16), v(16);
  for (float& x : e) x = d(g);
  for (float& x : q) x = d(g);
  for (float& x : k) x = d(g);
  for (float& x : v) x = d(g);
  w.set("token_embd.weight", 5, 4, e);
  w.set("blk.0.attn_v.weight", 4, 4, v);
  w.set("blk.0.attn_output.weight", 4, 4, v);
  auto run = [&](float scale, const char* fam) {
    DecoderSpec f = s;
    f.family = find_family_by_name(fam);
    std::vector<float> qs = q, ks = k;
    for (float& x : qs) x *= scale;
    for (float& x : ks) x *= scale;
    w.set("blk.0.attn_q.weight", 4, 4, qs);
    w.set("blk.0.attn_k.weight", 4, 4, ks);
    if (std::string(fam) == "qwen2")
      for (const char* b : {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias"}) w.set(b, 4, 1, {});
    return decoder_forward(f, w, {0, 1, 2, 3, 4}, 1).layers[0];
  };
  const std::vector<float> a = run(1, "qwen3"), b = run(7, "qwen3"), c = run(1, "qwen2"), d7 = run(7, "qwen2");
  double same = 0, moved = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    same = std::max(same, double(std::fabs(a[i] - b[i])));
    moved = std::max(moved, double(std::fabs(c[i] - d7[i])));
  }
  EXPECT_LE(same, 1e-5);
  EXPECT_GT(moved, 1e-2);
}

TEST(ForwardHand, GraniteScalesTheEmbeddingsEachResidualBranchAndTheLogits) {
  // hidden 2, one token, embedding (3, 4) times 2: h = (6, 8), RMS 5 sqrt 2, normed
  // (0.6, 0.8) sqrt 2. q = k = 0, v = o = identity: attention gives the normed h, added at
  // residual scale 0.5: (6, 8) + 0.5 (0.6, 0.8) sqrt 2. The MLP adds nothing. The final norm
  // gives (0.6, 0.8) sqrt 2 again; the tied rows (3, 4), (1, 0) make (5, 0.6) sqrt 2, over 4.
  DecoderSpec s = tiny("granite", 2, 2, 2);
  s.embedding_scale = 2.0;
  s.residual_scale = 0.5;
  s.logit_scale = 4.0;
  MapWeights w = zero_layer(s);
  w.set("token_embd.weight", 2, 2, {3, 4, 1, 0});
  w.set("blk.0.attn_v.weight", 2, 2, {1, 0, 0, 1});
  w.set("blk.0.attn_output.weight", 2, 2, {1, 0, 0, 1});
  const ForwardTrace tr = decoder_forward(s, w, {0}, 1);
  ASSERT_TRUE(tr.has_logits);
  const double r2 = std::sqrt(2.0);
  EXPECT_NEAR(tr.layers[0][0], 6 + 0.5 * 0.6 * r2, 1e-5);
  EXPECT_NEAR(tr.layers[0][1], 8 + 0.5 * 0.8 * r2, 1e-5);
  EXPECT_NEAR(tr.logits[0], 5 * r2 / 4, 1e-5);
  EXPECT_NEAR(tr.logits[1], 0.6 * r2 / 4, 1e-5);
}

TEST(ForwardHand, SmolLM3sNoRopeLayerScoresTheTokensAlone) {
  // hidden 2, one head of 2, q = k = v = o = identity, the MLP zero. Tokens a = (1, 0) and
  // b = (0, 1), normed to (sqrt 2, 0) and (0, sqrt 2). At position 1 (b), without RoPE the
  // scores are (q.k) / sqrt 2 = 0 for a and sqrt 2 for b; with RoPE (interleaved pair, angle =
  // position in radians) q_b = k_b = (-sqrt 2 sin 1, sqrt 2 cos 1), k_a = (sqrt 2, 0): scores
  // -sqrt 2 sin 1 and sqrt 2. The output is b + w_a (sqrt 2, 0) + w_b (0, sqrt 2).
  DecoderSpec s = tiny("smollm3", 2, 2, 2);
  MapWeights w = zero_layer(s);
  w.set("token_embd.weight", 2, 2, {1, 0, 0, 1});
  for (const char* n : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight"})
    w.set(n, 2, 2, {1, 0, 0, 1});
  const double r2 = std::sqrt(2.0);
  auto expect = [&](const std::vector<float>& x, double score_a, double score_b) {
    const double wa = std::exp(score_a) / (std::exp(score_a) + std::exp(score_b)), wb = 1 - wa;
    EXPECT_NEAR(x[2], wa * r2, 1e-5);
    EXPECT_NEAR(x[3], 1 + wb * r2, 1e-5);
  };
  s.no_rope_period = 1;  // (l + 1) % 1 == 0: layer 0 runs without RoPE
  expect(decoder_forward(s, w, {0, 1}, 1).layers[0], 0.0, r2);
  s.no_rope_period = 4;  // layer 0 rotates
  expect(decoder_forward(s, w, {0, 1}, 1).layers[0], -r2 * std::sin(1.0), r2);
}

TEST(ForwardHand, LongropeDividesTheFrequenciesByItsFactorsAndScalesTheScores) {
  // Phi-3, hidden 2, one head of 2 (one rotated pair, frequency 1 / factor), q = k = v = o =
  // identity. Tokens a = (1, 0), b = (0, 1) normed as above; at position p the pair turns by p / f
  // radians and cos, sin are times the attention factor m: q_b = k_b = m R(1/f) (0, sqrt 2),
  // k_a = m (sqrt 2, 0), so the scores are q_b.k_a / sqrt 2 = -2 m^2 sin(1/f) / sqrt 2 and
  // q_b.k_b / sqrt 2 = 2 m^2 / sqrt 2.
  DecoderSpec s = tiny("phi3", 2, 2, 2);
  MapWeights w = zero_layer(s);
  w.set("token_embd.weight", 2, 2, {1, 0, 0, 1});
  w.set("blk.0.attn_qkv.weight", 6, 2, {1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1});
  w.set("blk.0.attn_output.weight", 2, 2, {1, 0, 0, 1});
  const double r2 = std::sqrt(2.0);
  for (const auto& [f, m] : {std::pair{1.0, 1.0}, std::pair{4.0, 1.0}, std::pair{4.0, 1.2}}) {
    s.rope_freq_factors = {float(f)};
    s.rope_attn_factor = m;
    const std::vector<float> x = decoder_forward(s, w, {0, 1}, 1).layers[0];
    const double sa = -2 * m * m * std::sin(1 / f) / r2, sb = 2 * m * m / r2;
    const double wa = std::exp(sa) / (std::exp(sa) + std::exp(sb)), wb = 1 - wa;
    EXPECT_NEAR(x[2], wa * r2, 1e-5) << f << " " << m;
    EXPECT_NEAR(x[3], 1 + wb * r2, 1e-5) << f << " " << m;
  }
}

TEST(ForwardHand, Gemma4sPerLayerInputIsGatedIntoTheStateThenTheLayerScaleApplies) {
  // hidden 2, per-layer input width 1, attention and MLP zero (their post-norms of zero add
  // nothing). Token 0's embedding (3, 4) scaled by sqrt 2; per_layer_model_proj (1, 0) gives
  // 3 sqrt 2, times 1/sqrt 2: 3, RMS-normed (width 1): 1; its per_layer_token_embd value a (times
  // sqrt 1); the input is (1 + a) / sqrt 2. The gate GELU(inp_gate . x) = GELU(3 sqrt 2) > 0
  // times that input, projected by (1, 2) and RMS-normed: +-(1, 2) / sqrt 2.5 by the input's sign,
  // nothing when it is 0 (a = -1). Then the whole state times layer_output_scale (0.5).
  DecoderSpec s = tiny("gemma4", 2, 2, 1);
  s.per_layer_input = 1;
  s.query_scale = 1.0;
  MapWeights w = zero_layer(s);
  w.set("token_embd.weight", 1, 2, {3, 4});
  w.set("per_layer_model_proj.weight", 1, 2, {1, 0});
  w.set("per_layer_proj_norm.weight", 1, 1, {1});
  w.set("blk.0.inp_gate.weight", 1, 2, {1, 0});
  w.set("blk.0.proj.weight", 2, 1, {1, 2});
  w.set("blk.0.post_norm.weight", 1, 2, {1, 1});
  w.set("blk.0.layer_output_scale.weight", 1, 1, {0.5f});
  const double r2 = std::sqrt(2.0), n = std::sqrt(2.5);
  for (const auto& [a, sign] : {std::pair{1.0f, 1.0}, std::pair{-3.0f, -1.0}, std::pair{-1.0f, 0.0}}) {
    w.set("per_layer_token_embd.weight", 1, 1, {a});
    const std::vector<float> x = decoder_forward(s, w, {0}, 1).layers[0];
    EXPECT_NEAR(x[0], 0.5 * (3 * r2 + sign / n), 1e-5) << a;
    EXPECT_NEAR(x[1], 0.5 * (4 * r2 + sign * 2 / n), 1e-5) << a;
  }
}

TEST(ForwardHand, Gemma4sSharedKvLayerAttendsToItsDonorsKeysAndValues) {
  // hidden 2, one head of 2, two layers; layer 1 has no attn_k / attn_v and reads layer 0's.
  // Queries zero: every visible position weighs the same. Layer 0's values swap the normed
  // input ((1, 0) and (0, 1) scaled and normed: (sqrt 2, 0) and (0, sqrt 2)) and are RMS-normed
  // again (no change), its output zero; layer 1's output is the identity, its post-norm RMS-
  // normalises: position 0 gets layer 0's value (0, sqrt 2), position 1 the mean of both,
  // (sqrt 2 / 2, sqrt 2 / 2), normed to (1, 1).
  DecoderSpec s = tiny("gemma4", 2, 2, 2);
  s.n_layers = 2;
  s.query_scale = 1.0;
  s.layers = {{false, 2, 1, 1, 2, -1}, {false, 2, 1, 1, 2, 0}};
  MapWeights w = zero_layer(s);
  for (const auto& [name, v] : std::map<std::string, std::vector<float>>(w.t))
    if (name.compare(0, 6, "blk.0.") == 0 && name.find("attn_k") == std::string::npos &&
        name.find("attn_v") == std::string::npos)
      w.set("blk.1." + name.substr(6), 1, int64_t(v.size()), v);
  w.set("token_embd.weight", 2, 2, {1, 0, 0, 1});
  w.set("blk.0.attn_k.weight", 2, 2, {1, 0, 0, 1});
  w.set("blk.0.attn_v.weight", 2, 2, {0, 1, 1, 0});
  w.set("blk.1.attn_output.weight", 2, 2, {1, 0, 0, 1});
  w.t.erase("blk.0.layer_output_scale.weight");
  w.t.erase("blk.1.layer_output_scale.weight");
  const std::vector<float> x = decoder_forward(s, w, {0, 1}, 2).layers[1];
  const double r2 = std::sqrt(2.0);
  const double want[] = {r2, r2, 1, r2 + 1};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(x[size_t(i)], want[i], 1e-5) << i;
  EXPECT_FALSE(w.has("blk.1.attn_k.weight"));
}

TEST(ForwardHand, MixturesRouteEachTokenToItsTopExpertsAndAddTheSharedOne) {
  // hidden 2, attention all zero (it adds nothing), the state x = (1, 1): its RMSNorm h = (1, 1).
  // Three experts of width 1, two a token. The router's rows (1, 0), (0, 0), (1, 1) give logits
  // (1, 0, 2): experts 2 and 0 are chosen, with the softmax over all three, p = e^l / S,
  // S = 1 + e + e^2. Expert 0: gate (1, 0) and up (0, 1) give silu(1) * 1 = sigma(1), down (1, 0)
  // puts it on the first unit; expert 2: gate (0, 1) -> 1, up (1, 1) -> 2, 2 sigma(1) on the
  // second unit (down (0, 1)); expert 1 would add 9s. Qwen2-MoE keeps the weights as they are
  // and adds its shared expert: gate (1, 1) -> 2, up (1, 0) -> 1, silu(2) = 2 sigma(2), down
  // (1, 1), times sigmoid of its gate (1, 0) . h = sigma(1). Qwen3-MoE divides the two weights by
  // their sum: e / (e + e^2) = 1 / (1 + e) and e / (1 + e).
  const double e = std::exp(1.0), S = 1 + e + e * e, s1 = 1 / (1 + std::exp(-1.0)), s2 = 1 / (1 + std::exp(-2.0));
  for (const char* family : {"qwen2moe", "qwen3moe"}) {
    SCOPED_TRACE(family);
    DecoderSpec s = tiny(family, 2, 2, 1);
    s.n_expert = 3; s.n_expert_used = 2; s.expert_ffn = 1;
    const bool shared = std::string(family) == "qwen2moe";
    s.shexp_ffn = shared ? 1 : 0;
    MapWeights w = zero_layer(s);
    w.set("token_embd.weight", 1, 2, {1, 1});
    w.set("blk.0.ffn_gate_inp.weight", 3, 2, {1, 0, 0, 0, 1, 1});
    w.set("blk.0.ffn_gate_exps.weight", 3, 2, {1, 0, 5, 5, 0, 1});  // [3 experts x 1 x 2]
    w.set("blk.0.ffn_up_exps.weight", 3, 2, {0, 1, 5, 5, 1, 1});
    w.set("blk.0.ffn_down_exps.weight", 3, 2, {1, 0, 9, 9, 0, 1});  // [3 x 2 x 1]
    if (shared) {
      w.set("blk.0.ffn_gate_shexp.weight", 1, 2, {1, 1});
      w.set("blk.0.ffn_up_shexp.weight", 1, 2, {1, 0});
      w.set("blk.0.ffn_down_shexp.weight", 2, 1, {1, 1});
      w.set("blk.0.ffn_gate_inp_shexp.weight", 1, 2, {1, 0});
    }
    const ForwardTrace tr = decoder_forward(s, w, {0}, 1);
    const double w0 = shared ? e / S : 1 / (1 + e), w2 = shared ? e * e / S : e / (1 + e);
    const double sh = shared ? s1 * 2 * s2 : 0;
    EXPECT_NEAR(tr.layers[0][0], 1 + w0 * s1 + sh, 1e-6);
    EXPECT_NEAR(tr.layers[0][1], 1 + w2 * 2 * s1 + sh, 1e-6);
    EXPECT_NEAR(tr.router_margin, 1.0, 1e-9) << "logit 1 (expert 0, chosen) against 0 (expert 1, not)";
  }
}
