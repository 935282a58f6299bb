#include "checkpoint_gen.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace gen {

namespace {

struct Rng {
  uint64_t s;
  uint64_t next() {  // xorshift64*
    s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
    return s * 0x2545F4914F6CDD1DULL;
  }
};

// An exact value for the dtype: m * 2^-e with |m| small enough to fit the significand.
float draw(Rng& r, const std::string& dtype, float amplitude_log2) {
  const uint64_t x = r.next();
  const int mbits = dtype == "bf16" ? 8 : dtype == "f16" ? 11 : 24;
  const int64_t m = int64_t(x % (uint64_t(1) << mbits)) - (int64_t(1) << (mbits - 1));
  const int e = int((x >> 40) % 3);  // spread magnitudes a little
  return std::ldexp(float(m), int(amplitude_log2) - (mbits - 1) - e);
}

// A normal draw (Box-Muller) rounded to the dtype (to nearest, even on ties).
float normal(Rng& r, const std::string& dtype, double std) {
  const double u1 = (double(r.next() >> 11) + 1.0) * 0x1p-53, u2 = double(r.next() >> 11) * 0x1p-53;
  float v = float(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  if (dtype == "bf16") {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&v, &b, 4);
  } else if (dtype == "f16") {
    int e;
    std::frexp(v, &e);
    const int q = std::max(e - 11, -24);  // 11 significant bits; the subnormal grid below 2^-14
    v = float(std::ldexp(std::nearbyint(std::ldexp(double(v), -q)), q));
  }
  return v;
}

uint16_t exact_f16_bits(float v) {
  if (v == 0.0f) return std::signbit(v) ? 0x8000 : 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  float a = std::fabs(v);
  int e;
  float fr = std::frexp(a, &e);  // a = fr * 2^e, fr in [0.5, 1)
  int exp = e - 1 + 15;           // biased exponent of 1.xxx * 2^(e-1)
  if (exp <= 0) {                 // subnormal: a = mant * 2^-24
    return uint16_t(sign | uint16_t(std::ldexp(a, 24)));
  }
  const uint32_t mant = uint32_t(std::ldexp(fr, 11)) & 0x3ff;
  return uint16_t(sign | (exp << 10) | mant);
}

void put_value(std::vector<uint8_t>& out, size_t i, float v, const std::string& dtype) {
  if (dtype == "f32") { std::memcpy(&out[i * 4], &v, 4); return; }
  uint16_t h;
  if (dtype == "bf16") { uint32_t b; std::memcpy(&b, &v, 4); h = uint16_t(b >> 16); }
  else h = exact_f16_bits(v);
  std::memcpy(&out[i * 2], &h, 2);
}

int dtype_bytes(const std::string& d) { return d == "f32" ? 4 : 2; }
std::string st_dtype(const std::string& d) { return d == "f32" ? "F32" : d == "f16" ? "F16" : "BF16"; }

void mkdirs(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0755);
    }
    if (i < dir.size()) cur += dir[i];
  }
}

struct Planned {
  std::string name;
  std::vector<int64_t> shape;
  // 0 weight, 1 norm weight (around 1), 2 bias, 3 Gemma norm weight (around 0: applied as 1 + w),
  // 4 causal mask (1 on and below the diagonal), 5 GPT-2's masked_bias (-1e4), 6 MXFP4 blocks
  // (U8: any two fp4 values a byte), 7 E8M0 scales (U8: powers of two around the weights' size)
  int kind;
  bool bytes() const { return kind == 6 || kind == 7; }
};

std::vector<Planned> llama_tensors(const Spec& s) {
  const int64_t hd = s.dim / s.heads, kv = s.kv_heads * hd;
  std::vector<Planned> t = {{"model.embed_tokens.weight", {s.vocab, s.dim}, 0}};
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", {s.dim}, 1});
    t.push_back({p + "self_attn.q_proj.weight", {s.dim, s.dim}, 0});
    t.push_back({p + "self_attn.k_proj.weight", {kv, s.dim}, 0});
    t.push_back({p + "self_attn.v_proj.weight", {kv, s.dim}, 0});
    t.push_back({p + "self_attn.o_proj.weight", {s.dim, s.dim}, 0});
    t.push_back({p + "post_attention_layernorm.weight", {s.dim}, 1});
    t.push_back({p + "mlp.gate_proj.weight", {s.hidden, s.dim}, 0});
    t.push_back({p + "mlp.up_proj.weight", {s.hidden, s.dim}, 0});
    t.push_back({p + "mlp.down_proj.weight", {s.dim, s.hidden}, 0});
  }
  t.push_back({"model.norm.weight", {s.dim}, 1});
  if (!s.tied) t.push_back({"lm_head.weight", {s.vocab, s.dim}, 0});
  return t;
}

std::vector<Planned> gpt2_tensors(const Spec& s) {
  const int64_t d = s.dim;
  const std::string base = s.headless ? "" : "transformer.";
  std::vector<Planned> t = {{base + "wte.weight", {s.vocab, d}, 0}, {base + "wpe.weight", {s.seq_len, d}, 0}};
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = base + "h." + std::to_string(l) + ".";
    t.push_back({p + "ln_1.weight", {d}, 1});
    t.push_back({p + "ln_1.bias", {d}, 2});
    if (s.headless) {  // GPT2Attention's buffers come before its submodules in the state dict
      t.push_back({p + "attn.bias", {1, 1, s.seq_len, s.seq_len}, 4});
      t.push_back({p + "attn.masked_bias", {}, 5});
    }
    t.push_back({p + "attn.c_attn.weight", {d, 3 * d}, 0});  // Conv1D: [in, out]
    t.push_back({p + "attn.c_attn.bias", {3 * d}, 2});
    t.push_back({p + "attn.c_proj.weight", {d, d}, 0});
    t.push_back({p + "attn.c_proj.bias", {d}, 2});
    t.push_back({p + "ln_2.weight", {d}, 1});
    t.push_back({p + "ln_2.bias", {d}, 2});
    t.push_back({p + "mlp.c_fc.weight", {d, 4 * d}, 0});
    t.push_back({p + "mlp.c_fc.bias", {4 * d}, 2});
    t.push_back({p + "mlp.c_proj.weight", {4 * d, d}, 0});
    t.push_back({p + "mlp.c_proj.bias", {d}, 2});
  }
  t.push_back({base + "ln_f.weight", {d}, 1});
  t.push_back({base + "ln_f.bias", {d}, 2});
  return t;
}

int64_t head_dim_of(const Spec& s) { return s.head_dim ? s.head_dim : s.dim / s.heads; }

std::string family_config_json(const Spec& s);

// Gemma 4 as Gemma4ForCausalLM / Gemma4ForConditionalGeneration saves it, its tensors as its
// config (after config_patch) shapes them: sliding and full layers' heads (head_dim,
// global_head_dim), the full layers' keys doubling as values (attention_k_eq_v: no v_proj, kv
// heads num_global_key_value_heads), the shared KV layers at the end without k / v of their own
// (as transformers since 5.5.2 saves them), double-wide MLPs there, the per-layer inputs
// (hidden_size_per_layer_input), a layer_scalar buffer per layer.
std::vector<Planned> gemma4_tensors(const Spec& s) {
  const nlohmann::json full = nlohmann::json::parse(family_config_json(s));
  const nlohmann::json& c = full.contains("text_config") ? full["text_config"] : full;
  const int64_t hd = c["head_dim"], ple = c["hidden_size_per_layer_input"];
  const int64_t shared = c["num_kv_shared_layers"], ffn = c["intermediate_size"];
  const bool k_eq_v = c["attention_k_eq_v"], wide = c["use_double_wide_mlp"], moe = c["enable_moe_block"];
  const int64_t eff = moe ? c["moe_intermediate_size"].get<int64_t>() : 0, experts = moe ? c["num_experts"].get<int64_t>() : 0;
  // a full layer's own (per_layer_config, transformers 5.15's form), else the global key's
  auto full_layer = [&](int64_t l, const char* key, const char* global, int64_t fallback) -> int64_t {
    if (c.contains("per_layer_config"))
      for (const auto& [idx, lc] : c["per_layer_config"].items())
        if (std::stoll(idx) == l && lc.contains(key)) return lc[key];
    return c.contains(global) && c[global].is_number() ? c[global].get<int64_t>() : fallback;
  };
  const std::string m = s.vision ? "model.language_model." : "model.";
  std::vector<Planned> t = {{m + "embed_tokens.weight", {s.vocab, s.dim}, 0}};
  if (ple > 0) {
    t.push_back({m + "embed_tokens_per_layer.weight", {s.vocab, s.layers * ple}, 0});
    t.push_back({m + "per_layer_model_projection.weight", {s.layers * ple, s.dim}, 0});
    t.push_back({m + "per_layer_projection_norm.weight", {ple}, 1});
  }
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = m + "layers." + std::to_string(l) + ".";
    const bool swa = c["layer_types"][size_t(l)] == "sliding_attention", own_kv = l < s.layers - shared;
    const int64_t h = swa ? hd : full_layer(l, "head_dim", "global_head_dim", 0);
    const int64_t kv = (swa || !k_eq_v ? s.kv_heads : full_layer(l, "num_key_value_heads", "num_global_key_value_heads", s.kv_heads)) * h;
    const int64_t f = wide && !own_kv ? 2 * ffn : ffn;
    t.push_back({p + "self_attn.q_proj.weight", {s.heads * h, s.dim}, 0});
    if (own_kv) t.push_back({p + "self_attn.k_proj.weight", {kv, s.dim}, 0});
    if (own_kv && (swa || !k_eq_v)) t.push_back({p + "self_attn.v_proj.weight", {kv, s.dim}, 0});
    t.push_back({p + "self_attn.o_proj.weight", {s.dim, s.heads * h}, 0});
    t.push_back({p + "self_attn.q_norm.weight", {h}, 1});
    if (own_kv) t.push_back({p + "self_attn.k_norm.weight", {h}, 1});
    t.push_back({p + "mlp.gate_proj.weight", {f, s.dim}, 0});
    t.push_back({p + "mlp.up_proj.weight", {f, s.dim}, 0});
    t.push_back({p + "mlp.down_proj.weight", {s.dim, f}, 0});
    t.push_back({p + "input_layernorm.weight", {s.dim}, 1});
    t.push_back({p + "post_attention_layernorm.weight", {s.dim}, 1});
    t.push_back({p + "pre_feedforward_layernorm.weight", {s.dim}, 1});
    t.push_back({p + "post_feedforward_layernorm.weight", {s.dim}, 1});
    if (moe) {  // (enable_moe_block, as 26B-A4B) the mixture beside the MLP: router, experts
                // (parameters of the experts module: no ".weight"), its norms
      t.push_back({p + "router.proj.weight", {experts, s.dim}, 0});
      t.push_back({p + "router.scale", {s.dim}, 1});
      t.push_back({p + "router.per_expert_scale", {experts}, 1});
      if (s.unfused_experts) {
        for (int64_t e = 0; e < experts; ++e) {
          const std::string x = p + "experts." + std::to_string(e) + ".";
          t.push_back({x + "gate_proj.weight", {eff, s.dim}, 0});
          t.push_back({x + "up_proj.weight", {eff, s.dim}, 0});
          t.push_back({x + "down_proj.weight", {s.dim, eff}, 0});
        }
      } else {
        t.push_back({p + "experts.gate_up_proj", {experts, 2 * eff, s.dim}, 0});
        t.push_back({p + "experts.down_proj", {experts, s.dim, eff}, 0});
      }
      t.push_back({p + "pre_feedforward_layernorm_2.weight", {s.dim}, 1});
      t.push_back({p + "post_feedforward_layernorm_1.weight", {s.dim}, 1});
      t.push_back({p + "post_feedforward_layernorm_2.weight", {s.dim}, 1});
    }
    if (ple > 0) {
      t.push_back({p + "per_layer_input_gate.weight", {ple, s.dim}, 0});
      t.push_back({p + "per_layer_projection.weight", {s.dim, ple}, 0});
      t.push_back({p + "post_per_layer_input_norm.weight", {s.dim}, 1});
    }
    t.push_back({p + "layer_scalar", {1}, 1});
  }
  t.push_back({m + "norm.weight", {s.dim}, 1});
  if (!s.tied) t.push_back({"lm_head.weight", {s.vocab, s.dim}, 0});
  if (s.vision) {  // the vision and audio towers and their embedders: llama.cpp's converter leaves them out
    t.push_back({"model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight", {32, 32}, 0});
    t.push_back({"model.vision_tower.patch_embedder.input_proj.weight", {32, 48}, 0});
    t.push_back({"model.embed_vision.embedding_projection.weight", {s.dim, 32}, 0});
    t.push_back({"model.audio_tower.layers.0.feed_forward1.ffw_layer_1.linear.weight", {32, 32}, 0});
    t.push_back({"model.embed_audio.embedding_projection.weight", {s.dim, 32}, 0});
  }
  return t;
}

// The other families: the module order of their decoder layers, as their state_dict (and so
// save_pretrained) lists the tensors. A multimodal Gemma 3 (Gemma3ForConditionalGeneration) keeps
// its language model under model.language_model. beside a (small) vision tower and projector.
std::vector<Planned> decoder_tensors(const Spec& s) {
  const int64_t hd = head_dim_of(s), q = s.heads * hd, kv = s.kv_heads * hd;
  const std::string& a = s.arch;
  const bool gemma = a == "gemma" || a == "gemma2" || a == "gemma3", phi3 = a == "phi3", olmo2 = a == "olmo2",
             glm4 = a == "glm4", bitnet = a == "bitnet";
  const bool sandwich = a == "gemma2" || a == "gemma3";  // pre- and post-norms around attention and the MLP
  const int norm = gemma ? 3 : 1;
  const std::string m = s.vision ? "model.language_model." : "model.";
  std::vector<Planned> t = {{m + "embed_tokens.weight", {s.vocab, s.dim}, 0}};
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = m + "layers." + std::to_string(l) + ".";
    if (phi3) {
      t.push_back({p + "self_attn.o_proj.weight", {s.dim, q}, 0});
      t.push_back({p + "self_attn.qkv_proj.weight", {q + 2 * kv, s.dim}, 0});
      t.push_back({p + "mlp.gate_up_proj.weight", {2 * s.hidden, s.dim}, 0});
      t.push_back({p + "mlp.down_proj.weight", {s.dim, s.hidden}, 0});
      t.push_back({p + "input_layernorm.weight", {s.dim}, norm});
      t.push_back({p + "post_attention_layernorm.weight", {s.dim}, norm});
      continue;
    }
    const bool bias = a == "qwen2" || glm4;
    t.push_back({p + "self_attn.q_proj.weight", {q, s.dim}, 0});
    if (bias) t.push_back({p + "self_attn.q_proj.bias", {q}, 2});
    t.push_back({p + "self_attn.k_proj.weight", {kv, s.dim}, 0});
    if (bias) t.push_back({p + "self_attn.k_proj.bias", {kv}, 2});
    t.push_back({p + "self_attn.v_proj.weight", {kv, s.dim}, 0});
    if (bias) t.push_back({p + "self_attn.v_proj.bias", {kv}, 2});
    t.push_back({p + "self_attn.o_proj.weight", {s.dim, q}, 0});
    if (bitnet) t.push_back({p + "self_attn.inner_attn_ln.weight", {q}, norm});  // (BitnetAttention's, after o_proj)
    if (a == "qwen3" || a == "gemma3" || olmo2) {
      t.push_back({p + "self_attn.q_norm.weight", {olmo2 ? q : hd}, norm});
      t.push_back({p + "self_attn.k_norm.weight", {olmo2 ? kv : hd}, norm});
    }
    if (glm4) {
      t.push_back({p + "mlp.gate_up_proj.weight", {2 * s.hidden, s.dim}, 0});
    } else {
      t.push_back({p + "mlp.gate_proj.weight", {s.hidden, s.dim}, 0});
      t.push_back({p + "mlp.up_proj.weight", {s.hidden, s.dim}, 0});
    }
    t.push_back({p + "mlp.down_proj.weight", {s.dim, s.hidden}, 0});
    if (bitnet) t.push_back({p + "mlp.ffn_layernorm.weight", {s.hidden}, norm});
    if (!olmo2) t.push_back({p + "input_layernorm.weight", {s.dim}, norm});
    t.push_back({p + "post_attention_layernorm.weight", {s.dim}, norm});
    if (sandwich) {
      t.push_back({p + "pre_feedforward_layernorm.weight", {s.dim}, norm});
      t.push_back({p + "post_feedforward_layernorm.weight", {s.dim}, norm});
    }
    if (olmo2) t.push_back({p + "post_feedforward_layernorm.weight", {s.dim}, norm});
    if (glm4) {
      t.push_back({p + "post_self_attn_layernorm.weight", {s.dim}, norm});
      t.push_back({p + "post_mlp_layernorm.weight", {s.dim}, norm});
    }
  }
  t.push_back({m + "norm.weight", {s.dim}, norm});
  if (!s.tied && a != "gemma2" && a != "gemma" && !bitnet) t.push_back({"lm_head.weight", {s.vocab, s.dim}, 0});
  if (s.vision) {  // SigLIP's names (a tiny tower) and Gemma 3's projector: llama.cpp's converter leaves them out
    const std::string v = "model.vision_tower.vision_model.";
    t.push_back({v + "embeddings.patch_embedding.weight", {32, 3, 4, 4}, 0});
    t.push_back({v + "embeddings.patch_embedding.bias", {32}, 2});
    t.push_back({v + "encoder.layers.0.self_attn.q_proj.weight", {32, 32}, 0});
    t.push_back({v + "post_layernorm.weight", {32}, 1});
    t.push_back({"model.multi_modal_projector.mm_input_projection_weight", {32, s.dim}, 0});
    t.push_back({"model.multi_modal_projector.mm_soft_emb_norm.weight", {32}, 3});
  }
  return t;
}

bool is_moe(const Spec& s) {
  return s.arch == "mixtral" || s.arch == "qwen2moe" || s.arch == "qwen3moe" || s.arch == "olmoe" || s.arch == "gpt-oss";
}

// gpt-oss as openai/gpt-oss-20b ships it: attention with biases and sinks, the router with a bias,
// the experts' weights as MXFP4 blocks and E8M0 scales (gate and up interleaved row by row in
// gate_up_proj), their biases in bf16, in GptOssDecoderLayer's module order.
std::vector<Planned> gpt_oss_tensors(const Spec& s) {
  const int64_t hd = head_dim_of(s), q = s.heads * hd, kv = s.kv_heads * hd, E = s.experts;
  const int64_t ff = s.expert_hidden ? s.expert_hidden : s.hidden;
  std::vector<Planned> t = {{"model.embed_tokens.weight", {s.vocab, s.dim}, 0}};
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "self_attn.q_proj.weight", {q, s.dim}, 0});
    t.push_back({p + "self_attn.q_proj.bias", {q}, 2});
    t.push_back({p + "self_attn.k_proj.weight", {kv, s.dim}, 0});
    t.push_back({p + "self_attn.k_proj.bias", {kv}, 2});
    t.push_back({p + "self_attn.v_proj.weight", {kv, s.dim}, 0});
    t.push_back({p + "self_attn.v_proj.bias", {kv}, 2});
    t.push_back({p + "self_attn.o_proj.weight", {s.dim, q}, 0});
    t.push_back({p + "self_attn.o_proj.bias", {s.dim}, 2});
    t.push_back({p + "self_attn.sinks", {s.heads}, 2});
    t.push_back({p + "mlp.router.weight", {E, s.dim}, 0});
    t.push_back({p + "mlp.router.bias", {E}, 2});
    t.push_back({p + "mlp.experts.gate_up_proj_blocks", {E, 2 * ff, s.dim / 32, 16}, 6});
    t.push_back({p + "mlp.experts.gate_up_proj_scales", {E, 2 * ff, s.dim / 32}, 7});
    t.push_back({p + "mlp.experts.gate_up_proj_bias", {E, 2 * ff}, 2});
    t.push_back({p + "mlp.experts.down_proj_blocks", {E, s.dim, ff / 32, 16}, 6});
    t.push_back({p + "mlp.experts.down_proj_scales", {E, s.dim, ff / 32}, 7});
    t.push_back({p + "mlp.experts.down_proj_bias", {E, s.dim}, 2});
    t.push_back({p + "input_layernorm.weight", {s.dim}, 1});
    t.push_back({p + "post_attention_layernorm.weight", {s.dim}, 1});
  }
  t.push_back({"model.norm.weight", {s.dim}, 1});
  if (!s.tied) t.push_back({"lm_head.weight", {s.vocab, s.dim}, 0});
  return t;
}

// The mixtures of experts, in their modules' order: attention (Qwen2-MoE's biases, Qwen3-MoE's
// per-head and OLMoE's whole-projection q/k norms), the router and the experts (Mixtral's
// block_sparse_moe w1 / w2 / w3; the others' mlp.experts.E.*_proj), Qwen2-MoE's shared expert and
// its gate, then the two norms.
std::vector<Planned> moe_tensors(const Spec& s) {
  const int64_t hd = head_dim_of(s), q = s.heads * hd, kv = s.kv_heads * hd;
  const int64_t ff = s.expert_hidden ? s.expert_hidden : s.hidden, sf = s.shared_hidden ? s.shared_hidden : s.hidden;
  const bool mixtral = s.arch == "mixtral", qwen2 = s.arch == "qwen2moe", olmoe = s.arch == "olmoe";
  std::vector<Planned> t = {{"model.embed_tokens.weight", {s.vocab, s.dim}, 0}};
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "self_attn.q_proj.weight", {q, s.dim}, 0});
    if (qwen2) t.push_back({p + "self_attn.q_proj.bias", {q}, 2});
    t.push_back({p + "self_attn.k_proj.weight", {kv, s.dim}, 0});
    if (qwen2) t.push_back({p + "self_attn.k_proj.bias", {kv}, 2});
    t.push_back({p + "self_attn.v_proj.weight", {kv, s.dim}, 0});
    if (qwen2) t.push_back({p + "self_attn.v_proj.bias", {kv}, 2});
    t.push_back({p + "self_attn.o_proj.weight", {s.dim, q}, 0});
    if (!mixtral && !qwen2) {
      t.push_back({p + "self_attn.q_norm.weight", {olmoe ? q : hd}, 1});
      t.push_back({p + "self_attn.k_norm.weight", {olmoe ? kv : hd}, 1});
    }
    const std::string m = p + (mixtral ? "block_sparse_moe." : "mlp.");
    t.push_back({m + "gate.weight", {s.experts, s.dim}, 0});
    for (int64_t e = 0; e < s.experts; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      t.push_back({x + (mixtral ? "w1" : "gate_proj") + ".weight", {ff, s.dim}, 0});
      if (mixtral) {
        t.push_back({x + "w2.weight", {s.dim, ff}, 0});
        t.push_back({x + "w3.weight", {ff, s.dim}, 0});
      } else {
        t.push_back({x + "up_proj.weight", {ff, s.dim}, 0});
        t.push_back({x + "down_proj.weight", {s.dim, ff}, 0});
      }
    }
    if (qwen2) {
      t.push_back({m + "shared_expert.gate_proj.weight", {sf, s.dim}, 0});
      t.push_back({m + "shared_expert.up_proj.weight", {sf, s.dim}, 0});
      t.push_back({m + "shared_expert.down_proj.weight", {s.dim, sf}, 0});
      t.push_back({m + "shared_expert_gate.weight", {1, s.dim}, 0});
    }
    t.push_back({p + "input_layernorm.weight", {s.dim}, 1});
    t.push_back({p + "post_attention_layernorm.weight", {s.dim}, 1});
  }
  t.push_back({"model.norm.weight", {s.dim}, 1});
  if (!s.tied) t.push_back({"lm_head.weight", {s.vocab, s.dim}, 0});
  return t;
}

std::string torch_dtype(const Spec& s) { return s.dtype == "f32" ? "float32" : s.dtype == "f16" ? "float16" : "bfloat16"; }

// config.json as transformers' save_pretrained writes it for these families (sorted keys, the
// model's config class's attributes; values of the small real models where they do not shape).
std::string family_config_json(const Spec& s) {
  using json = nlohmann::json;
  if (s.arch == "gemma4") {  // Gemma4TextConfig as transformers 5.5 saves it (every field; E2B's layout, small)
    json j = {{"architectures", {"Gemma4ForCausalLM"}}, {"model_type", "gemma4_text"}, {"attention_bias", false},
              {"attention_dropout", 0.0}, {"attention_k_eq_v", false}, {"enable_moe_block", false},
              {"final_logit_softcapping", 30.0}, {"global_head_dim", 2 * head_dim_of(s)}, {"head_dim", head_dim_of(s)},
              {"hidden_activation", "gelu_pytorch_tanh"}, {"hidden_size", s.dim}, {"hidden_size_per_layer_input", 8},
              {"initializer_range", 0.02}, {"intermediate_size", s.hidden}, {"max_position_embeddings", s.seq_len},
              {"moe_intermediate_size", nullptr}, {"num_attention_heads", s.heads}, {"num_experts", nullptr},
              {"num_global_key_value_heads", nullptr}, {"num_hidden_layers", s.layers},
              {"num_key_value_heads", s.kv_heads}, {"num_kv_shared_layers", s.layers >= 4 ? 2 : 0},
              {"rms_norm_eps", 1e-06},
              {"rope_parameters", {{"full_attention", {{"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0},
                                                       {"rope_type", "proportional"}}},
                                   {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}}},
              {"sliding_window", 512}, {"tie_word_embeddings", s.tied}, {"top_k_experts", nullptr},
              {"torch_dtype", torch_dtype(s)}, {"transformers_version", "5.5.0"}, {"use_bidirectional_attention", nullptr},
              {"use_cache", true}, {"use_double_wide_mlp", true}, {"vocab_size", s.vocab},
              {"vocab_size_per_layer_input", s.vocab}, {"bos_token_id", 2}, {"eos_token_id", 1}, {"pad_token_id", 0}};
    json types = json::array();  // every other layer full, the last one full (as transformers forces)
    for (int64_t l = 0; l < s.layers; ++l) types.push_back(l % 2 == 1 || l + 1 == s.layers ? "full_attention" : "sliding_attention");
    j["layer_types"] = types;
    if (!s.config_patch.empty()) j.merge_patch(json::parse(s.config_patch));
    if (s.vision) {  // Gemma4Config: the text model's under text_config, beside the vision and audio ones
      json text = j;
      text.erase("architectures");
      text.erase("tie_word_embeddings");
      j = {{"architectures", {"Gemma4ForConditionalGeneration"}}, {"model_type", "gemma4"}, {"text_config", text},
           {"boi_token_id", 255999}, {"eoi_token_id", 258882}, {"image_token_id", 258880}, {"audio_token_id", 258881},
           {"initializer_range", 0.02}, {"tie_word_embeddings", s.tied}, {"torch_dtype", torch_dtype(s)},
           {"transformers_version", "5.5.0"}, {"eos_token_id", {1, 106}},
           {"vision_config", {{"hidden_size", 32}, {"model_type", "gemma4_vision"}, {"num_hidden_layers", 1}}},
           {"audio_config", {{"hidden_size", 32}, {"model_type", "gemma4_audio"}, {"num_hidden_layers", 1}}}};
    }
    return j.dump(2) + "\n";
  }
  json j;
  j["torch_dtype"] = torch_dtype(s);
  j["transformers_version"] = "4.51.3";
  j["vocab_size"] = s.vocab;
  j["use_cache"] = true;
  j["initializer_range"] = 0.02;
  j["attention_dropout"] = 0.0;
  if (s.arch == "gpt2") {
    j = {{"activation_function", "gelu_new"}, {"architectures", {"GPT2LMHeadModel"}}, {"attn_pdrop", 0.1},
         {"embd_pdrop", 0.1}, {"initializer_range", 0.02}, {"layer_norm_epsilon", 1e-05}, {"model_type", "gpt2"},
         {"n_ctx", s.seq_len}, {"n_embd", s.dim}, {"n_head", s.heads}, {"n_inner", nullptr}, {"n_layer", s.layers},
         {"n_positions", s.seq_len}, {"reorder_and_upcast_attn", false}, {"resid_pdrop", 0.1},
         {"scale_attn_by_inverse_layer_idx", false}, {"scale_attn_weights", true}, {"summary_activation", nullptr},
         {"summary_first_dropout", 0.1}, {"summary_proj_to_labels", true}, {"summary_type", "cls_index"},
         {"summary_use_proj", true}, {"torch_dtype", torch_dtype(s)}, {"transformers_version", "4.51.3"},
         {"use_cache", true}, {"vocab_size", s.vocab}};
  } else {
    j["hidden_size"] = s.dim;
    j["intermediate_size"] = s.hidden;
    j["num_hidden_layers"] = s.layers;
    j["num_attention_heads"] = s.heads;
    j["num_key_value_heads"] = s.kv_heads;
    j["max_position_embeddings"] = s.seq_len;
    j["tie_word_embeddings"] = s.tied || s.arch == "gemma2" || s.arch == "gemma";
    if (s.arch == "qwen2" || s.arch == "qwen3") {  // Qwen2Config / Qwen3Config
      j["architectures"] = {s.arch == "qwen2" ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM"};
      j["model_type"] = s.arch;
      j["hidden_act"] = "silu";
      j["max_window_layers"] = s.layers;
      j["rms_norm_eps"] = 1e-06;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = s.rope_theta;
      j["sliding_window"] = nullptr;
      j["use_sliding_window"] = false;
      if (s.arch == "qwen3") {
        j["attention_bias"] = false;
        j["head_dim"] = head_dim_of(s);
      }
    } else if (is_moe(s)) {  // MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig, OlmoeConfig (the real models' values where they do not shape)
      const int64_t ff = s.expert_hidden ? s.expert_hidden : s.hidden;
      j["hidden_act"] = "silu";
      j["num_experts_per_tok"] = s.experts_used;
      j["output_router_logits"] = false;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = s.rope_theta;
      if (s.arch == "mixtral" || s.arch == "olmoe" || s.arch == "gpt-oss") j["intermediate_size"] = ff;  // (their experts' width)
      if (s.arch == "gpt-oss") {  // GptOssConfig (gpt-oss-20b's values where they do not shape)
        j["architectures"] = {"GptOssForCausalLM"};
        j["model_type"] = "gpt_oss";
        j["num_local_experts"] = s.experts;
        j["experts_per_token"] = s.experts_used;
        j["attention_bias"] = true;
        j["head_dim"] = head_dim_of(s);
        j["initial_context_length"] = 4096;
        j["layer_types"] = json::array();
        for (int64_t l = 0; l < s.layers; ++l) j["layer_types"].push_back(l % 2 ? "full_attention" : "sliding_attention");
        j["sliding_window"] = 128;
        j["swiglu_limit"] = 7.0;
        j["rms_norm_eps"] = 1e-05;
        j["rope_theta"] = 150000.0;
        j["rope_scaling"] = {{"beta_fast", 32.0}, {"beta_slow", 1.0}, {"factor", 32.0},
                             {"original_max_position_embeddings", 4096}, {"rope_type", "yarn"}, {"truncate", false}};
        j["router_aux_loss_coef"] = 0.9;
        j["quantization_config"] = {{"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                "model.embed_tokens", "lm_head"}},
                                    {"quant_method", "mxfp4"}};
        j["eos_token_id"] = 200002;
        j["pad_token_id"] = 199999;
      } else if (s.arch == "mixtral") {
        j["architectures"] = {"MixtralForCausalLM"};
        j["model_type"] = "mixtral";
        j["num_local_experts"] = s.experts;
        j["rms_norm_eps"] = 1e-05;
        j["router_aux_loss_coef"] = 0.02;
        j["router_jitter_noise"] = 0.0;
        j["sliding_window"] = nullptr;
        j["bos_token_id"] = 1;
        j["eos_token_id"] = 2;
      } else if (s.arch == "olmoe") {
        j["architectures"] = {"OlmoeForCausalLM"};
        j["model_type"] = "olmoe";
        j["num_experts"] = s.experts;
        j["attention_bias"] = false;
        j["clip_qkv"] = nullptr;
        j["norm_topk_prob"] = false;
        j["rms_norm_eps"] = 1e-05;
        j["router_aux_loss_coef"] = 0.01;
        j["pad_token_id"] = 1;
        j["eos_token_id"] = 50279;
      } else {
        const bool q2 = s.arch == "qwen2moe";
        j["architectures"] = {q2 ? "Qwen2MoeForCausalLM" : "Qwen3MoeForCausalLM"};
        j["model_type"] = q2 ? "qwen2_moe" : "qwen3_moe";
        j["num_experts"] = s.experts;
        j["moe_intermediate_size"] = ff;
        j["decoder_sparse_step"] = 1;
        j["mlp_only_layers"] = json::array();
        j["max_window_layers"] = s.layers;
        j["norm_topk_prob"] = !q2;
        j["rms_norm_eps"] = 1e-06;
        j["router_aux_loss_coef"] = 0.001;
        j["sliding_window"] = nullptr;
        j["use_sliding_window"] = false;
        if (q2) j["shared_expert_intermediate_size"] = s.shared_hidden ? s.shared_hidden : s.hidden;
        else j["attention_bias"] = false, j["head_dim"] = head_dim_of(s);
      }
    } else if (s.arch == "phi3") {  // Phi3Config (Phi-3-mini-4k's values)
      j["architectures"] = {"Phi3ForCausalLM"};
      j["model_type"] = "phi3";
      j["hidden_act"] = "silu";
      j["embd_pdrop"] = 0.0;
      j["resid_pdrop"] = 0.0;
      j["original_max_position_embeddings"] = s.seq_len;
      j["partial_rotary_factor"] = 1.0;
      j["rms_norm_eps"] = 1e-05;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = s.rope_theta;
      j["sliding_window"] = s.seq_len - 1;
      j["bos_token_id"] = 1;
      j["eos_token_id"] = 2;
      j["pad_token_id"] = 0;
    } else if (s.arch == "smollm3") {  // SmolLM3Config (SmolLM3-3B's values where they do not shape)
      j["architectures"] = {"SmolLM3ForCausalLM"};
      j["model_type"] = "smollm3";
      j["hidden_act"] = "silu";
      j["attention_bias"] = false;
      j["mlp_bias"] = false;
      j["rms_norm_eps"] = 1e-06;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = s.rope_theta;
      j["use_sliding_window"] = false;
      j["sliding_window"] = nullptr;
      j["max_window_layers"] = s.layers;
      j["no_rope_layer_interval"] = 4;
      j["no_rope_layers"] = json::array();
      j["layer_types"] = json::array();
      for (int64_t l = 0; l < s.layers; ++l) {
        j["no_rope_layers"].push_back(int((l + 1) % 4 != 0));
        j["layer_types"].push_back("full_attention");
      }
      j["bos_token_id"] = 128000;
      j["eos_token_id"] = 128012;
      j["pad_token_id"] = 128004;
    } else if (s.arch == "granite") {  // GraniteConfig (granite-3.3-2b's multipliers)
      j["architectures"] = {"GraniteForCausalLM"};
      j["model_type"] = "granite";
      j["hidden_act"] = "silu";
      j["attention_bias"] = false;
      j["mlp_bias"] = false;
      j["attention_multiplier"] = 0.015625;
      j["embedding_multiplier"] = 12.0;
      j["residual_multiplier"] = 0.22;
      j["logits_scaling"] = 8.0;
      j["rms_norm_eps"] = 1e-05;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = s.rope_theta;
      j["bos_token_id"] = 0;
      j["eos_token_id"] = 0;
      j["pad_token_id"] = 0;
    } else if (s.arch == "bitnet") {  // 1bitLLM/bitnet_b1_58-large's config.json (BitnetConfig)
      j["architectures"] = {"BitnetForCausalLM"};
      j["model_type"] = "llama";
      j["attention_bias"] = false;
      j["hidden_act"] = "silu";
      j["input_bits"] = 8;
      j["weight_bits"] = 1;
      j["pretraining_tp"] = 1;
      j["rms_norm_eps"] = 1e-05;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = s.rope_theta;
      j["bos_token_id"] = 1;
      j["eos_token_id"] = 2;
    } else if (s.arch == "olmo2") {  // Olmo2Config (OLMo-2-1124-7B's values where they do not shape)
      j["architectures"] = {"Olmo2ForCausalLM"};
      j["model_type"] = "olmo2";
      j["hidden_act"] = "silu";
      j["attention_bias"] = false;
      j["rms_norm_eps"] = 1e-06;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = s.rope_theta;
      j["pad_token_id"] = 100277;
      j["eos_token_id"] = 100257;
    } else if (s.arch == "glm4") {  // Glm4Config (GLM-4-9B-0414's values where they do not shape)
      j["architectures"] = {"Glm4ForCausalLM"};
      j["model_type"] = "glm4";
      j["attention_bias"] = true;
      j["head_dim"] = head_dim_of(s);
      j["hidden_act"] = "silu";
      j["partial_rotary_factor"] = 0.5;
      j["rms_norm_eps"] = 1e-05;
      j["rope_theta"] = s.rope_theta;
      j["pad_token_id"] = 151329;
      j["eos_token_id"] = {151329, 151336, 151338};
    } else if (s.arch == "gemma") {  // GemmaConfig (gemma-2b's values where they do not shape)
      j["architectures"] = {"GemmaForCausalLM"};
      j["model_type"] = "gemma";
      j["attention_bias"] = false;
      j["head_dim"] = head_dim_of(s);
      j["hidden_act"] = "gelu_pytorch_tanh";
      j["hidden_activation"] = "gelu_pytorch_tanh";
      j["rms_norm_eps"] = 1e-06;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = 10000.0;
      j["bos_token_id"] = 2;
      j["eos_token_id"] = 1;
      j["pad_token_id"] = 0;
    } else if (s.arch == "gemma3") {  // Gemma3TextConfig (gemma-3-1b's values where they do not shape)
      j["architectures"] = {"Gemma3ForCausalLM"};
      j["model_type"] = "gemma3_text";
      j["attention_bias"] = false;
      j["attn_logit_softcapping"] = nullptr;
      j["final_logit_softcapping"] = nullptr;
      j["head_dim"] = head_dim_of(s);
      j["hidden_activation"] = "gelu_pytorch_tanh";
      j["query_pre_attn_scalar"] = head_dim_of(s);
      j["rms_norm_eps"] = 1e-06;
      j["rope_local_base_freq"] = 10000.0;
      j["rope_scaling"] = nullptr;
      j["rope_theta"] = s.rope_theta;
      j["sliding_window"] = 512;
      j["sliding_window_pattern"] = 6;
      j["cache_implementation"] = "hybrid";
      j["bos_token_id"] = 2;
      j["eos_token_id"] = 1;
      j["pad_token_id"] = 0;
      if (s.vision) {  // Gemma3Config: the text model's under text_config, SigLIP's under vision_config
        json text = j;
        text.erase("architectures");
        j = {{"architectures", {"Gemma3ForConditionalGeneration"}}, {"model_type", "gemma3"},
             {"text_config", text}, {"boi_token_index", 255999}, {"eoi_token_index", 256000},
             {"image_token_index", 262144}, {"mm_tokens_per_image", 256}, {"initializer_range", 0.02},
             {"torch_dtype", torch_dtype(s)}, {"transformers_version", "4.51.3"},
             {"vision_config", {{"hidden_size", 32}, {"image_size", 16}, {"intermediate_size", 64},
                                {"model_type", "siglip_vision_model"}, {"num_attention_heads", 2},
                                {"num_hidden_layers", 1}, {"patch_size", 4}, {"vision_use_head", false}}}};
      }
    } else if (s.arch == "gemma2") {  // Gemma2Config (gemma-2-2b's values where they do not shape)
      j["architectures"] = {"Gemma2ForCausalLM"};
      j["model_type"] = "gemma2";
      j["attention_bias"] = false;
      j["attn_logit_softcapping"] = 50.0;
      j["final_logit_softcapping"] = 30.0;
      j["head_dim"] = head_dim_of(s);
      j["hidden_act"] = "gelu_pytorch_tanh";
      j["hidden_activation"] = "gelu_pytorch_tanh";
      j["query_pre_attn_scalar"] = head_dim_of(s);
      j["rms_norm_eps"] = 1e-06;
      j["rope_theta"] = s.rope_theta;
      j["sliding_window"] = 4096;
      j["cache_implementation"] = "hybrid";
      j["bos_token_id"] = 2;
      j["eos_token_id"] = 1;
      j["pad_token_id"] = 0;
    }
  }
  if (!s.config_patch.empty()) j.merge_patch(json::parse(s.config_patch));
  return j.dump(2) + "\n";
}

std::string config_json(const Spec& s) {
  if (s.arch != "llama") return family_config_json(s);
  char buf[2048];
  std::snprintf(buf, sizeof buf,
                "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
                "  \"hidden_size\": %lld,\n  \"intermediate_size\": %lld,\n  \"num_hidden_layers\": %lld,\n"
                "  \"num_attention_heads\": %lld,\n  \"num_key_value_heads\": %lld,\n  \"vocab_size\": %lld,\n"
                "  \"max_position_embeddings\": %lld,\n  \"rms_norm_eps\": 1e-05,\n  \"rope_theta\": %.1f,\n"
                "  \"rope_scaling\": null,\n  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\"\n}\n",
                (long long)s.dim, (long long)s.hidden, (long long)s.layers, (long long)s.heads,
                (long long)s.kv_heads, (long long)s.vocab, (long long)s.seq_len, s.rope_theta,
                s.tied ? "true" : "false",
                s.dtype == "f32" ? "float32" : s.dtype == "f16" ? "float16" : "bfloat16");
  if (s.config_patch.empty()) return buf;
  nlohmann::json j = nlohmann::json::parse(buf);
  j.merge_patch(nlohmann::json::parse(s.config_patch));
  return j.dump(2) + "\n";
}

std::string params_json(const Spec& s) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"dim\": %lld, \"n_layers\": %lld, \"n_heads\": %lld, \"n_kv_heads\": %lld, "
                "\"vocab_size\": %lld, \"multiple_of\": 32, \"norm_eps\": 1e-05, \"rope_theta\": %.1f, "
                "\"max_seq_len\": %lld}\n",
                (long long)s.dim, (long long)s.layers, (long long)s.heads, (long long)s.kv_heads,
                (long long)s.vocab, s.rope_theta, (long long)s.seq_len);
  return buf;
}

}  // namespace

std::string safetensors_header_json(const std::vector<RawTensor>& tensors) {
  std::string j = "{\"__metadata__\":{\"format\":\"pt\"}";
  size_t off = 0;
  for (const RawTensor& t : tensors) {
    j += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) j += (i ? "," : "") + std::to_string(t.shape[i]);
    j += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + t.bytes.size()) + "]}";
    off += t.bytes.size();
  }
  j += "}";
  while (j.size() % 8) j += ' ';  // the safetensors library pads the header to 8 bytes
  return j;
}

void write_safetensors(const std::string& path, const std::vector<RawTensor>& tensors) {
  const std::string h = safetensors_header_json(tensors);
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(h.data(), std::streamsize(h.size()));
  for (const RawTensor& t : tensors) f.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

void write_text(const std::string& path, const std::string& text) {
  write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
}

std::vector<Tensor> write_checkpoint(const std::string& dir, const Spec& s) {
  mkdirs(dir);
  static const std::set<std::string> known = {"llama", "gpt2", "qwen2", "qwen3", "phi3", "gemma2", "gemma",
                                              "gemma3", "gemma4", "smollm3", "granite", "olmo2", "glm4",
                                              "bitnet", "mixtral", "qwen2moe", "qwen3moe", "olmoe", "gpt-oss"};
  if (!known.count(s.arch)) throw std::runtime_error("unknown architecture " + s.arch);
  if (s.vision && s.arch != "gemma3" && s.arch != "gemma4") throw std::runtime_error("vision: Gemma 3's and 4's layouts only");
  if (s.headless && s.arch != "gpt2") throw std::runtime_error("headless: GPT-2's layout only");
  const std::vector<Planned> plan = s.arch == "gpt2"     ? gpt2_tensors(s)
                                    : s.arch == "llama"  ? llama_tensors(s)
                                    : s.arch == "gemma4" ? gemma4_tensors(s)
                                    : s.arch == "gpt-oss" ? gpt_oss_tensors(s)
                                    : is_moe(s)          ? moe_tensors(s)
                                                         : decoder_tensors(s);
  const int dtype_size = dtype_bytes(s.dtype);
  auto bytes_of = [&](const Planned& p) { return p.bytes() ? 1 : dtype_size; };
  int64_t total = 0;
  for (const Planned& p : plan) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    total += n * bytes_of(p);
  }
  // Split into shards of roughly equal size, in tensor order.
  std::vector<int> shard_of(plan.size());
  {
    int64_t acc = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      int64_t n = 1;
      for (int64_t d : plan[i].shape) n *= d;
      shard_of[i] = int(std::min<int64_t>(s.shards - 1, acc * s.shards / std::max<int64_t>(1, total)));
      acc += n * bytes_of(plan[i]);
    }
  }
  auto shard_name = [&](int k) {
    if (s.shards == 1) return std::string("model.safetensors");
    char b[64];
    std::snprintf(b, sizeof b, "model-%05d-of-%05d.safetensors", k + 1, s.shards);
    return std::string(b);
  };

  Rng rng{s.seed * 0x9E3779B97F4A7C15ULL + 1};
  std::vector<Tensor> out;
  std::string weight_map;
  for (int k = 0; k < s.shards; ++k) {
    std::vector<RawTensor> header_only;
    std::vector<size_t> members;
    for (size_t i = 0; i < plan.size(); ++i)
      if (shard_of[i] == k) {
        members.push_back(i);
        int64_t n = 1;
        for (int64_t d : plan[i].shape) n *= d;
        RawTensor rt{plan[i].name, plan[i].bytes() ? "U8" : st_dtype(s.dtype), plan[i].shape, {}};
        rt.bytes.resize(size_t(n * bytes_of(plan[i])));  // placeholder sizes for the header
        header_only.push_back(std::move(rt));
        weight_map += std::string(weight_map.empty() ? "" : ",\n") + "    \"" + plan[i].name + "\": \"" + shard_name(k) + "\"";
      }
    // Stream the shard: header, then each tensor generated and written in turn.
    const std::string h = safetensors_header_json(header_only);
    header_only.clear();
    std::ofstream f(dir + "/" + shard_name(k), std::ios::binary);
    const uint64_t hn = h.size();
    f.write(reinterpret_cast<const char*>(&hn), 8);
    f.write(h.data(), std::streamsize(h.size()));
    for (size_t i : members) {
      const Planned& p = plan[i];
      int64_t n = 1;
      for (int64_t d : p.shape) n *= d;
      Tensor t{p.name, p.shape, {}};
      const int bytes_per = bytes_of(p);
      std::vector<uint8_t> bytes(size_t(std::min<int64_t>(n, 1 << 22)) * size_t(bytes_per));
      if (s.keep_values) t.values.resize(size_t(n));
      // The first group of 64 values of every v_proj is zero: zero groups must give zero.
      const bool zero_head = p.name.find("v_proj") != std::string::npos;
      // transformers' GPT2PreTrainedModel._init_weights: c_proj (attention and MLP) / sqrt(2 n_layer)
      const bool c_proj = p.name.size() > 13 && p.name.compare(p.name.size() - 13, 13, "c_proj.weight") == 0;
      const double std0 = 0.02 / (c_proj ? std::sqrt(2.0 * double(s.layers)) : 1.0);
      // Norm weights sit around 1, on the dtype's grid there (2^-7 for bf16, 2^-10 for f16).
      const float norm_step = s.dtype == "bf16" ? 0x1p-7f : s.dtype == "f16" ? 0x1p-10f : 0x1p-20f;
      for (int64_t base = 0; base < n; base += 1 << 22) {
        const int64_t m = std::min<int64_t>(n - base, 1 << 22);
        for (int64_t j = 0; j < m; ++j) {
          float v;
          if (p.bytes()) {  // (hf_init: weights of ~0.02, fp4 values up to 6 x 2^-7)
            const uint8_t b = p.kind == 6 ? uint8_t(rng.next() >> 56) : uint8_t((s.hf_init ? 118 : 122) + rng.next() % 4);
            bytes[size_t(j)] = b;
            if (s.keep_values) t.values[size_t(base + j)] = float(b);
            continue;
          }
          if (p.kind == 4) v = (base + j) % s.seq_len <= (base + j) / s.seq_len % s.seq_len ? 1.0f : 0.0f;
          else if (p.kind == 5) v = s.dtype == "bf16" ? -9984.0f : -10000.0f;  // -1e4 as the dtype holds it
          else if (p.kind == 1) v = 1.0f + norm_step * float(int64_t(rng.next() % 33) - 16);
          else if (p.kind == 3) v = 0x1p-7f * float(int64_t(rng.next() % 33) - 16);
          else if (p.kind == 2) v = draw(rng, s.dtype, -5);
          else if (s.hf_init) v = normal(rng, s.dtype, std0);
          else v = draw(rng, s.dtype, -3);
          if (zero_head && base + j < 64) v = 0.0f;
          put_value(bytes, size_t(j), v, s.dtype);
          if (s.keep_values) t.values[size_t(base + j)] = v;
        }
        f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(m * bytes_per));
      }
      out.push_back(std::move(t));
    }
    if (!f) throw std::runtime_error("cannot write " + dir + "/" + shard_name(k));
  }
  if (s.shards > 1)
    write_text(dir + "/model.safetensors.index.json",
               "{\n  \"metadata\": {\"total_size\": " + std::to_string(total) + "},\n  \"weight_map\": {\n" +
                   weight_map + "\n  }\n}\n");
  if (s.config_json) write_text(dir + "/config.json", config_json(s));
  if (s.params_json) write_text(dir + "/params.json", params_json(s));
  return out;
}

}  // namespace gen

// ---- quantized checkpoints ----

namespace gen {

namespace {

// float8 E4M3FN from its bit fields (sign, 4 exponent bits of bias 7, 3 mantissa bits; no
// infinities, S.1111.111 NaN), written from the OCP spec, apart from the core's table.
float fp8_value(uint8_t code) {
  const int e = (code >> 3) & 0xf, m = code & 7;
  double mag = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
  return float(code & 0x80 ? -mag : mag);
}
// Nearest E4M3 code to x (|x| <= 448), ties to the even code.
uint8_t fp8_code(float x) {
  static const std::vector<float> pos = [] {
    std::vector<float> v;
    for (int c = 0; c < 127; ++c) v.push_back(fp8_value(uint8_t(c)));  // increasing
    return v;
  }();
  const float a = std::min(std::fabs(x), 448.0f);
  size_t hi = size_t(std::lower_bound(pos.begin(), pos.end(), a) - pos.begin());
  if (hi >= pos.size()) hi = pos.size() - 1;
  size_t best = hi;
  if (hi > 0 && (a - pos[hi - 1] < pos[hi] - a || (a - pos[hi - 1] == pos[hi] - a && (hi - 1) % 2 == 0))) best = hi - 1;
  return uint8_t(best | (x < 0 ? 0x80 : 0));
}
float bf16_round(float f) {  // to nearest even
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b = (b + 0x7fff + ((b >> 16) & 1)) & 0xffff0000u;
  std::memcpy(&f, &b, 4);
  return f;
}

struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<float> values;  // decoded
  std::vector<uint8_t> raw;   // as stored
};

std::vector<StTensor> read_shard_values(const std::string& path) {
  const std::vector<uint8_t> b = read_file(path);
  uint64_t n;
  std::memcpy(&n, b.data(), 8);
  const nlohmann::json h = nlohmann::json::parse(b.begin() + 8, b.begin() + 8 + int64_t(n));
  std::vector<std::pair<int64_t, StTensor>> ts;
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    StTensor t{name, e["dtype"], e["shape"].get<std::vector<int64_t>>(), {}};
    const int64_t o0 = e["data_offsets"][0], o1 = e["data_offsets"][1];
    const uint8_t* d = b.data() + 8 + n + o0;
    t.raw.assign(d, d + (o1 - o0));
    const int64_t width = t.dtype == "F32" ? 4 : t.dtype == "U8" ? 1 : 2;
    for (int64_t i = 0; i < (o1 - o0) / width; ++i) {
      float v = 0;
      if (t.dtype == "F32") std::memcpy(&v, d + 4 * i, 4);
      else if (t.dtype == "BF16") { uint32_t w = uint32_t(d[2 * i] | d[2 * i + 1] << 8) << 16; std::memcpy(&v, &w, 4); }
      else if (t.dtype == "F16") { uint16_t hbits = uint16_t(d[2 * i] | d[2 * i + 1] << 8);
        const int ex = (hbits >> 10) & 31, ma = hbits & 1023;
        v = float((ex == 0 ? ma / 1024.0 * std::pow(2.0, -14) : (1 + ma / 1024.0) * std::pow(2.0, ex - 15)) * (hbits & 0x8000 ? -1 : 1)); }
      else throw std::runtime_error("quantize_checkpoint: " + t.dtype + " tensors are not re-encoded");
      t.values.push_back(v);
    }
    ts.push_back({o0, std::move(t)});
  }
  std::sort(ts.begin(), ts.end(), [](auto& a, auto& b2) { return a.first < b2.first; });
  std::vector<StTensor> out;
  for (auto& [o, t] : ts) out.push_back(std::move(t));
  return out;
}

// (fused_experts: also a mixture's experts stored as one 3-D parameter, Gemma 4's
// experts.gate_up_proj / experts.down_proj, as transformers' FP8 experts quantize them)
bool quantizable(const StTensor& t, bool fused_experts = false) {
  static const char* kLinear[] = {"q_proj.", "k_proj.", "v_proj.", "o_proj.", "gate_proj.", "up_proj.", "down_proj.",
                                  ".w1.", ".w2.", ".w3.", "qkv_proj.", "gate_up_proj."};
  auto ends = [&](const std::string& e) { return t.name.size() >= e.size() && t.name.compare(t.name.size() - e.size(), e.size(), e) == 0; };
  if (fused_experts && t.shape.size() == 3 && (ends("experts.gate_up_proj") || ends("experts.down_proj"))) return true;
  if (t.shape.size() != 2 || t.name.size() < 7 || t.name.compare(t.name.size() - 7, 7, ".weight")) return false;
  for (const char* k : kLinear)
    if (t.name.find(k) != std::string::npos) return true;
  return false;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<uint8_t> bf16_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b;
  for (float f : v) { uint32_t w; std::memcpy(&w, &f, 4); b.push_back(uint8_t(w >> 16)); b.push_back(uint8_t(w >> 24)); }
  return b;
}


// An f32 already on the f16 grid (a normal or zero), as IEEE half bits.
uint16_t half_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if ((b & 0x7fffffffu) == 0) return uint16_t(b >> 16);
  const int e = int((b >> 23) & 255) - 127 + 15;
  if (e < 1 || e > 30 || (b & 0x1fff)) throw std::runtime_error("half_bits: not a normal half");
  return uint16_t((b >> 16 & 0x8000) | e << 10 | (b >> 13 & 1023));
}
float f16_round(float f) {  // to the nearest normal half (scales: no subnormals)
  int e;
  const double m = std::frexp(double(f), &e);
  return float(std::ldexp(std::nearbyint(m * 2048.0), e - 11));
}

// Packs codes (each < 2^bits) into little-endian 32-bit words: code k of a word at bits k x bits.
void put_code(std::vector<uint8_t>& words, int64_t word, int64_t k, int bits, uint32_t code) {
  uint32_t w;
  std::memcpy(&w, &words[size_t(word * 4)], 4);
  w |= code << (k * bits);
  std::memcpy(&words[size_t(word * 4)], &w, 4);
}

// GPTQ (AutoGPTQ's layout): W [out, in] in groups of `group` input columns taken in a shuffled
// order (act-order: g_idx), asymmetric (scale, zero) per group and output; v1 stores zero - 1.
void encode_gptq(const StTensor& t, int bits, bool v2, int64_t group, uint64_t seed, std::vector<RawTensor>& out,
                 std::vector<float>& decoded) {
  const int64_t O = t.shape[0], I = t.shape[1], pf = 32 / bits, maxq = (1 << bits) - 1;
  if (I % pf || O % pf || I % group) throw std::runtime_error("encode_gptq: " + t.name + " does not pack");
  const int64_t G = I / group;
  std::vector<int64_t> perm(static_cast<size_t>(I));
  for (int64_t i = 0; i < I; ++i) perm[size_t(i)] = i;
  Rng rng{seed * 0x9E3779B97F4A7C15ULL + 7};
  for (int64_t i = I - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(rng.next() % uint64_t(i + 1))]);
  std::vector<int32_t> gidx(static_cast<size_t>(I));
  for (int64_t k = 0; k < I; ++k) gidx[size_t(perm[size_t(k)])] = int32_t(k / group);
  std::vector<float> scale(static_cast<size_t>(G * O));
  std::vector<int32_t> zero(static_cast<size_t>(G * O));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t o = 0; o < O; ++o) {
      float lo = 0, hi = 0;
      for (int64_t i = 0; i < I; ++i)
        if (gidx[size_t(i)] == g) lo = std::min(lo, t.values[size_t(o * I + i)]), hi = std::max(hi, t.values[size_t(o * I + i)]);
      const float s = hi > lo ? f16_round((hi - lo) / float(maxq)) : 1.0f;
      scale[size_t(g * O + o)] = s;
      zero[size_t(g * O + o)] = int32_t(std::max<float>(v2 ? 0 : 1, std::min<float>(float(maxq), std::nearbyint(-lo / s))));
    }
  std::vector<uint8_t> qweight(static_cast<size_t>(I / pf * O * 4)), qzeros(size_t(G * O / pf * 4)), scales, g_idx;
  decoded.assign(size_t(O * I), 0.0f);
  for (int64_t i = 0; i < I; ++i)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = gidx[size_t(i)];
      const float s = scale[size_t(g * O + o)];
      const int32_t z = zero[size_t(g * O + o)];
      const int32_t q = int32_t(std::max<float>(0, std::min<float>(float(maxq), std::nearbyint(t.values[size_t(o * I + i)] / s) + float(z))));
      put_code(qweight, (i / pf) * O + o, i % pf, bits, uint32_t(q));
      decoded[size_t(o * I + i)] = s * float(q - z);  // scales[g_idx].float() * (weight - zeros[g_idx]).float()
    }
  for (int64_t g = 0; g < G; ++g)
    for (int64_t o = 0; o < O; ++o) put_code(qzeros, g * (O / pf) + o / pf, o % pf, bits, uint32_t(zero[size_t(g * O + o)] - (v2 ? 0 : 1)));
  for (float f : scale) { const uint16_t h = half_bits(f); scales.push_back(uint8_t(h)); scales.push_back(uint8_t(h >> 8)); }
  for (int32_t g : gidx) for (int k = 0; k < 4; ++k) g_idx.push_back(uint8_t(uint32_t(g) >> (8 * k)));
  const std::string base = t.name.substr(0, t.name.size() - 7);
  out.push_back({base + ".g_idx", "I32", {I}, g_idx});
  out.push_back({base + ".qweight", "I32", {I / pf, O}, qweight});
  out.push_back({base + ".qzeros", "I32", {G, O / pf}, qzeros});
  out.push_back({base + ".scales", "F16", {G, O}, scales});
}

// compressed-tensors pack-quantized: groups of `group` values along a row; symmetric (codes
// offset by 2^(bits - 1), no zero point) or asymmetric (a zero point per row and group, packed
// along the rows); BF16 scales.
void encode_pack(const StTensor& t, int bits, bool asym, int64_t group, std::vector<RawTensor>& out, std::vector<float>& decoded) {
  const int64_t R = t.shape[0], C = t.shape[1], pf = 32 / bits, G = C / group, maxq = (1 << bits) - 1, mid = 1 << (bits - 1);
  if (C % group) throw std::runtime_error("encode_pack: " + t.name + " does not split into groups");
  std::vector<uint8_t> packed(size_t(R * ((C + pf - 1) / pf) * 4)), zp(size_t((R + pf - 1) / pf * G * 4));
  std::vector<float> scale(static_cast<size_t>(R * G));
  decoded.assign(size_t(R * C), 0.0f);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t g = 0; g < G; ++g) {
      float lo = 0, hi = 0;
      for (int64_t c = g * group; c < (g + 1) * group; ++c) lo = std::min(lo, t.values[size_t(r * C + c)]), hi = std::max(hi, t.values[size_t(r * C + c)]);
      float s = asym ? (hi - lo) / float(maxq) : std::max(hi, -lo) / float(mid - 1);
      s = s > 0 ? bf16_round(s) : 1.0f;
      const int32_t z = asym ? int32_t(std::max<float>(0, std::min<float>(float(maxq), std::nearbyint(-lo / s)))) : int32_t(mid);
      scale[size_t(r * G + g)] = s;
      if (asym) put_code(zp, (r / pf) * G + g, r % pf, bits, uint32_t(z));
      for (int64_t c = g * group; c < (g + 1) * group; ++c) {
        const int32_t q = int32_t(std::max<float>(0, std::min<float>(float(maxq), std::nearbyint(t.values[size_t(r * C + c)] / s) + float(z))));
        put_code(packed, r * ((C + pf - 1) / pf) + c / pf, c % pf, bits, uint32_t(q));
        decoded[size_t(r * C + c)] = float(q - z) * s;  // (unpacked - offset) * scale.float()
      }
    }
  const std::string base = t.name;  // <x>.weight
  out.push_back({base + "_packed", "I32", {R, (C + pf - 1) / pf}, packed});
  out.push_back({base + "_scale", "BF16", {R, G}, bf16_bytes(scale)});
  std::vector<uint8_t> shape;
  for (int64_t d : {R, C}) for (int k = 0; k < 8; ++k) shape.push_back(uint8_t(uint64_t(d) >> (8 * k)));
  out.push_back({base + "_shape", "I64", {2}, shape});
  if (asym) out.push_back({base + "_zero_point", "I32", {(R + pf - 1) / pf, G}, zp});
}

// NVFP4 as NVIDIA ModelOpt saves it (and compressed-tensors' nvfp4-pack-quantized, names
// aside): a per-tensor F32 weight_scale_2 = amax / (6 x 448); per 16 values of a row an E4M3
// scale, the group's amax / 6 / scale_2 rounded to the nearest code; each value the nearest E2M1
// level (0, 0.5, 1, 1.5, 2, 3, 4, 6, signed) of x / (scale x scale_2), two a byte (element 2i in
// the low nibble). decoded: level x E4M3 x scale_2 in f32 (the converter's factor: ct gives
// 1 / (1 / scale_2)). input_scale: a made-up activation amax / (6 x 448).
void encode_nvfp4(const StTensor& t, bool ct, std::vector<RawTensor>& out, std::vector<float>& decoded) {
  static const float kLevels[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const int64_t R = t.shape[0], C = t.shape[1];
  if (C % 16) throw std::runtime_error("encode_nvfp4: " + t.name + " rows are not groups of 16");
  float amax = 0;
  for (float v : t.values) amax = std::max(amax, std::fabs(v));
  float s2 = amax > 0 ? amax / (6.0f * 448.0f) : 1.0f;
  const float global = 1.0f / s2;          // compressed-tensors stores this
  const float s2_read = ct ? 1.0f / global : s2;  // what the converter multiplies by
  std::vector<uint8_t> codes(size_t(R * C / 2)), scales(size_t(R * C / 16));
  decoded.assign(size_t(R * C), 0.0f);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t g = 0; g < C / 16; ++g) {
      float gmax = 0;
      for (int64_t c = g * 16; c < g * 16 + 16; ++c) gmax = std::max(gmax, std::fabs(t.values[size_t(r * C + c)]));
      const uint8_t sc = fp8_code(std::min(448.0f, gmax / 6.0f / s2));
      scales[size_t(r * (C / 16) + g)] = sc;
      const float step = fp8_value(sc) * s2;
      for (int64_t c = g * 16; c < g * 16 + 16; ++c) {
        const float x = t.values[size_t(r * C + c)];
        int best = 0;
        if (step > 0)
          for (int k = 1; k < 8; ++k)
            if (std::fabs(std::fabs(x) / step - kLevels[k]) < std::fabs(std::fabs(x) / step - kLevels[best])) best = k;
        const uint8_t nib = uint8_t(best | (x < 0 && best ? 8 : 0));
        codes[size_t((r * C + c) / 2)] |= uint8_t(nib << (4 * (c % 2)));
        decoded[size_t(r * C + c)] = (x < 0 && best ? -kLevels[best] : kLevels[best]) * fp8_value(sc) * s2_read;
      }
    }
  const std::string stem = t.name.substr(0, t.name.size() - 7);
  const float in_amax = 0.75f + float(R % 7) / 8.0f;
  if (ct) {
    out.push_back({stem + ".input_global_scale", "F32", {1}, f32_bytes({6.0f * 448.0f / in_amax})});
    out.push_back({t.name + "_global_scale", "F32", {1}, f32_bytes({global})});
    out.push_back({t.name + "_packed", "U8", {R, C / 2}, codes});
    out.push_back({t.name + "_scale", "F8_E4M3", {R, C / 16}, scales});
  } else {
    out.push_back({stem + ".input_scale", "F32", {}, f32_bytes({in_amax / (6.0f * 448.0f)})});
    out.push_back({t.name, "U8", {R, C / 2}, codes});
    out.push_back({t.name + "_scale", "F8_E4M3", {R, C / 16}, scales});
    out.push_back({t.name + "_scale_2", "F32", {}, f32_bytes({s2})});
  }
}

}  // namespace

// The decoded twin of Gemma 4's mixture saved one tensor per expert (ModelOpt's layout, NVFP4):
// as transformers holds it unquantized, experts.gate_up_proj [E, 2F, D] (each expert's gate
// rows, then its up rows) and experts.down_proj [E, D, F], so that it converts as a Gemma 4
// checkpoint does (llama.cpp's converter merges per-expert tensors only from NVFP4).
void fuse_gemma4_experts(std::vector<RawTensor>& ts) {
  static const std::regex kExpert(R"((.*\.layers\.\d+\.)experts\.(\d+)\.(gate|up|down)_proj\.weight)");
  std::map<std::string, std::map<std::string, std::map<int, const RawTensor*>>> by_layer;  // prefix -> proj -> expert
  for (const RawTensor& t : ts) {
    std::smatch m;
    if (std::regex_match(t.name, m, kExpert)) by_layer[m[1]][m[3]][std::stoi(m[2])] = &t;
  }
  if (by_layer.empty()) return;
  std::vector<RawTensor> out;
  for (const auto& [prefix, proj] : by_layer) {
    const int64_t E = int64_t(proj.at("gate").size());
    RawTensor gu{prefix + "experts.gate_up_proj", "F32", {}, {}}, down{prefix + "experts.down_proj", "F32", {}, {}};
    for (int e = 0; e < E; ++e) {
      const RawTensor *g = proj.at("gate").at(e), *u = proj.at("up").at(e), *d = proj.at("down").at(e);
      if (g->dtype != "F32" || u->dtype != "F32" || d->dtype != "F32") throw std::runtime_error("fuse_gemma4_experts: decoded experts are F32");
      gu.bytes.insert(gu.bytes.end(), g->bytes.begin(), g->bytes.end());
      gu.bytes.insert(gu.bytes.end(), u->bytes.begin(), u->bytes.end());
      down.bytes.insert(down.bytes.end(), d->bytes.begin(), d->bytes.end());
      gu.shape = {E, 2 * g->shape[0], g->shape[1]};
      down.shape = {E, d->shape[0], d->shape[1]};
    }
    out.push_back(std::move(gu));
    out.push_back(std::move(down));
  }
  for (RawTensor& t : ts)
    if (!std::regex_match(t.name, kExpert)) out.push_back(std::move(t));
  ts = std::move(out);
}

int quantize_checkpoint(const std::string& dir, const std::string& kind, int64_t block, const std::string& ref_dir) {
  static const std::set<std::string> kinds = {"fp8-block", "fp8-tensor", "ct-fp8-channel", "ct-fp8-block", "ct-int8-channel", "modelopt-fp8",
                                              "gptq4", "gptq8-v2", "gptq2", "ct-int4-group", "ct-int4-zp", "ct-int8-group",
                                              "modelopt-nvfp4", "modelopt-nvfp4-hf", "ct-nvfp4", "bitnet"};
  const bool nvfp4 = kind == "modelopt-nvfp4" || kind == "modelopt-nvfp4-hf" || kind == "ct-nvfp4";
  const bool gptq = kind.rfind("gptq", 0) == 0, pack = kind == "ct-int4-group" || kind == "ct-int4-zp" || kind == "ct-int8-group";
  const int pack_bits = kind == "gptq2" ? 2 : kind == "gptq8-v2" || kind == "ct-int8-group" ? 8 : 4;
  if (!kinds.count(kind)) throw std::runtime_error("quantize_checkpoint: unknown kind " + kind);
  const bool blocked = kind == "fp8-block" || kind == "ct-fp8-block", channel = kind == "ct-fp8-channel" || kind == "ct-int8-channel";
  const bool int8 = kind == "ct-int8-channel";
  const std::string scale_suffix = kind.rfind("fp8-", 0) == 0 ? "_scale_inv" : "_scale";
  const bool want_ref = !ref_dir.empty();
  if (want_ref) mkdirs(ref_dir);
  std::vector<RawTensor> ref;
  int quantized = 0;
  std::vector<std::string> shards;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".safetensors") shards.push_back(name);
    else if (want_ref && name != "config.json" && name != "model.safetensors.index.json")
      std::filesystem::copy_file(e.path(), ref_dir + "/" + name, std::filesystem::copy_options::overwrite_existing);
  }
  std::sort(shards.begin(), shards.end());
  nlohmann::json index;  // the weight map gains the scale tensors
  const bool indexed = std::filesystem::exists(dir + "/model.safetensors.index.json");
  if (indexed) index = nlohmann::json::parse(read_file(dir + "/model.safetensors.index.json"));
  for (const std::string& shard : shards) {
    std::vector<RawTensor> out;
    for (StTensor& t : read_shard_values(dir + "/" + shard)) {
      if (!quantizable(t, kind == "fp8-block" || kind == "fp8-tensor")) {
        out.push_back({t.name, t.dtype, t.shape, t.raw});  // as it was
        if (want_ref) ref.push_back({t.name, t.dtype, t.shape, t.raw});  // (as it was: the twin holds what the converter holds)
        continue;
      }
      ++quantized;
      if (nvfp4) {
        std::vector<float> decoded;
        const size_t first = out.size();
        encode_nvfp4(t, kind == "ct-nvfp4", out, decoded);
        if (indexed)
          for (size_t k = first; k < out.size(); ++k) index["weight_map"][out[k].name] = shard;
        if (want_ref) ref.push_back({t.name, "F32", t.shape, f32_bytes(decoded)});
        continue;
      }
      if (kind == "bitnet") {
        // microsoft/bitnet-b1.58-2B-4T's layout: ternary codes + 1 (0, 1, 2), four rows a byte —
        // row q R + p in bits 2q of byte row p ([R / 4, C] U8 under the weight's name) — and a
        // one-value BF16 weight_scale, the inverse of the values' step (decoded: (code - 1) / scale)
        const int64_t R = t.shape[0], C = t.shape[1];
        if (R % 4) throw std::runtime_error("quantize_checkpoint: " + t.name + " rows do not split in four");
        double mean = 0;
        for (float v : t.values) mean += std::fabs(v);
        mean = std::max(mean / double(t.values.size()), 1e-5);
        const float scale = bf16_round(float(1.0 / mean));
        std::vector<uint8_t> packed(size_t(R / 4 * C), 0);
        std::vector<float> decoded(size_t(R * C));
        for (int64_t r = 0; r < R; ++r)
          for (int64_t c = 0; c < C; ++c) {
            const int q = int(std::max(-1.0f, std::min(1.0f, std::nearbyint(t.values[size_t(r * C + c)] * scale)))) + 1;
            packed[size_t((r % (R / 4)) * C + c)] |= uint8_t(q << (2 * (r / (R / 4))));
            decoded[size_t(r * C + c)] = (float(q) - 1.0f) / scale;  // as torch: (data.float() - 1) / scale.float()
          }
        out.push_back({t.name, "U8", {R / 4, C}, packed});
        out.push_back({t.name + "_scale", "BF16", {1}, bf16_bytes({scale})});
        if (indexed) index["weight_map"][t.name + "_scale"] = shard;
        if (want_ref) ref.push_back({t.name, "F32", t.shape, f32_bytes(decoded)});
        continue;
      }
      if (gptq || pack) {
        std::vector<float> decoded;
        const size_t first = out.size();
        if (gptq) encode_gptq(t, pack_bits, kind == "gptq8-v2", block, uint64_t(quantized), out, decoded);
        else encode_pack(t, pack_bits, kind == "ct-int4-zp", block, out, decoded);
        if (indexed)
          for (size_t k = first; k < out.size(); ++k) index["weight_map"][out[k].name] = shard;
        if (want_ref) ref.push_back({t.name, "F32", t.shape, f32_bytes(decoded)});
        continue;
      }
      // M matrices of [R, C] (a 3-D expert tensor: one per expert, each with its own blocks)
      const bool stacked = t.shape.size() == 3;
      const int64_t M = stacked ? t.shape[0] : 1, R = t.shape[t.shape.size() - 2], C = t.shape.back();
      const int64_t br = blocked ? block : channel ? 1 : R, bc = blocked ? block : C;
      const int64_t sr = (R + br - 1) / br, sc = (C + bc - 1) / bc;
      std::vector<float> scale(size_t(M * sr * sc)), decoded(size_t(M * R * C));
      std::vector<uint8_t> codes(size_t(M * R * C));
      const float qmax = int8 ? 127.0f : 448.0f;
      for (int64_t m = 0; m < M; ++m)
      for (int64_t i = 0; i < sr; ++i)
        for (int64_t j = 0; j < sc; ++j) {
          const size_t at = size_t(m * R * C);
          float amax = 0;
          for (int64_t r = i * br; r < std::min(R, (i + 1) * br); ++r)
            for (int64_t c = j * bc; c < std::min(C, (j + 1) * bc); ++c) amax = std::max(amax, std::fabs(t.values[at + size_t(r * C + c)]));
          float s = amax > 0 ? amax / qmax : 1.0f;
          if (kind == "ct-fp8-channel") s = bf16_round(s);
          scale[size_t((m * sr + i) * sc + j)] = s;
          for (int64_t r = i * br; r < std::min(R, (i + 1) * br); ++r)
            for (int64_t c = j * bc; c < std::min(C, (j + 1) * bc); ++c) {
              const size_t k = at + size_t(r * C + c);
              const float x = t.values[k] / s;
              if (int8) {
                const int q = int(std::max(-127.0f, std::min(127.0f, std::nearbyint(x))));
                codes[k] = uint8_t(int8_t(q));
                decoded[k] = float(q) * s;
              } else {
                const uint8_t q = fp8_code(x);
                codes[k] = q;
                decoded[k] = fp8_value(q) * s;  // f32 x f32, as torch: weight.float() * scale
              }
            }
        }
      out.push_back({t.name, int8 ? "I8" : "F8_E4M3", t.shape, codes});
      std::vector<int64_t> sshape = blocked ? std::vector<int64_t>{sr, sc} : channel ? std::vector<int64_t>{R, 1} : std::vector<int64_t>{};
      if (kind == "fp8-tensor") sshape = {1};
      if (stacked) sshape = kind == "fp8-tensor" ? std::vector<int64_t>{M, 1, 1} : std::vector<int64_t>{M, sr, sc};  // (FP8Expert's)
      out.push_back({t.name + scale_suffix, kind == "ct-fp8-channel" ? "BF16" : "F32", sshape,
                     kind == "ct-fp8-channel" ? bf16_bytes(scale) : f32_bytes(scale)});
      const std::string stem = t.name.substr(0, t.name.size() - 7);
      if (kind == "fp8-tensor" && !stacked) out.push_back({stem + ".activation_scale", "F32", {1}, f32_bytes({1.0f})});
      if (kind == "modelopt-fp8") out.push_back({stem + ".input_scale", "F32", {}, f32_bytes({1.0f})});
      if (indexed) {
        index["weight_map"][t.name + scale_suffix] = shard;
        if (kind == "fp8-tensor" && !stacked) index["weight_map"][stem + ".activation_scale"] = shard;
        if (kind == "modelopt-fp8") index["weight_map"][stem + ".input_scale"] = shard;
      }
      if (want_ref) ref.push_back({t.name, "F32", t.shape, f32_bytes(decoded)});
    }
    write_safetensors(dir + "/" + shard, out);
  }
  if (indexed) write_text(dir + "/model.safetensors.index.json", index.dump(2));
  nlohmann::json config = nlohmann::json::parse(read_file(dir + "/config.json"));
  if (want_ref) {
    fuse_gemma4_experts(ref);
    write_safetensors(ref_dir + "/model.safetensors", ref);
    write_text(ref_dir + "/config.json", config.dump(2));
  }
  nlohmann::json q;
  if (kind == "fp8-block") q = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"weight_block_size", {block, block}}};
  else if (kind == "fp8-tensor") q = {{"quant_method", "fp8"}, {"activation_scheme", "static"}};
  else if (kind == "modelopt-fp8") q = {{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"kv_cache_quant_algo", nullptr}};
  else if (kind == "modelopt-nvfp4" || kind == "modelopt-nvfp4-hf") {
    // ModelOpt's hf_quant_config.json (and, in newer exports, the same in config.json)
    const nlohmann::json hq = {{"producer", {{"name", "modelopt"}, {"version", "0.29.0"}}},
                               {"quantization", {{"quant_algo", "NVFP4"}, {"kv_cache_quant_algo", nullptr}, {"group_size", 16},
                                                 {"exclude_modules", {"lm_head"}}}}};
    write_text(dir + "/hf_quant_config.json", hq.dump(4));
    q = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"kv_cache_quant_algo", nullptr}, {"group_size", 16},
         {"exclude_modules", {"lm_head"}}, {"producer", {{"name", "modelopt"}, {"version", "0.29.0"}}}};
  }
  else if (kind == "ct-nvfp4") {
    nlohmann::json w = {{"num_bits", 4}, {"type", "float"}, {"symmetric", true}, {"dynamic", false}, {"strategy", "tensor_group"},
                        {"group_size", 16}, {"observer", "minmax"}};
    nlohmann::json a = w;
    a["dynamic"] = "local";
    q = {{"quant_method", "compressed-tensors"}, {"format", "nvfp4-pack-quantized"}, {"quantization_status", "compressed"},
         {"ignore", {"lm_head"}}, {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}, {"input_activations", a},
                                                                   {"format", "nvfp4-pack-quantized"}}}}}};
  }
  else if (kind == "bitnet") q = {{"quant_method", "bitnet"}, {"linear_class", "autobitlinear"}, {"quantization_mode", "offline"}};
  else if (gptq) q = {{"quant_method", "gptq"}, {"bits", pack_bits}, {"group_size", block}, {"desc_act", true}, {"sym", false},
                      {"damp_percent", 0.01}, {"checkpoint_format", kind == "gptq8-v2" ? "gptq_v2" : "gptq"}};
  else if (pack) {
    nlohmann::json w = {{"num_bits", pack_bits}, {"type", "int"}, {"symmetric", kind != "ct-int4-zp"}, {"dynamic", false},
                        {"strategy", "group"}, {"group_size", block}, {"observer", "minmax"}};
    q = {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"}, {"quantization_status", "compressed"},
         {"ignore", {"lm_head"}}, {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}}}}}};
  }
  else {
    nlohmann::json w = {{"num_bits", 8}, {"type", int8 ? "int" : "float"}, {"symmetric", true}, {"dynamic", false},
                        {"strategy", blocked ? "block" : "channel"}, {"group_size", nullptr}, {"observer", "minmax"},
                        {"block_structure", blocked ? nlohmann::json({block, block}) : nlohmann::json(nullptr)}};
    q = {{"quant_method", "compressed-tensors"}, {"format", int8 ? "int-quantized" : "float-quantized"},
         {"quantization_status", "compressed"}, {"ignore", {"lm_head"}}, {"kv_cache_scheme", nullptr},
         {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}, {"input_activations", nullptr}}}}}};
  }
  if (kind == "modelopt-nvfp4-hf") config.erase("quantization_config");  // (older exports: hf_quant_config.json only)
  else config["quantization_config"] = q;
  write_text(dir + "/config.json", config.dump(2));
  return quantized;
}

int write_lora_adapter(const std::string& base_dir, const std::string& dir, const LoraSpec& spec, const std::string& merged_dir) {
  if (spec.dtype != "f32" && spec.dtype != "bf16") throw std::runtime_error("write_lora_adapter: dtype f32 or bf16");
  mkdirs(dir);
  std::vector<std::string> shards;
  for (const auto& e : std::filesystem::directory_iterator(base_dir))
    if (e.path().extension() == ".safetensors") shards.push_back(e.path().filename().string());
  std::sort(shards.begin(), shards.end());
  Rng rng{spec.seed * 0x9E3779B97F4A7C15ULL + 11};
  std::vector<RawTensor> adapter, merged;
  int adapted = 0;
  const float scale = float(spec.alpha / double(spec.r));
  for (const std::string& shard : shards)
    for (StTensor& t : read_shard_values(base_dir + "/" + shard)) {
      std::string module = t.name.size() > 7 ? t.name.substr(0, t.name.size() - 7) : "";
      bool target = t.shape.size() == 2 && t.name.compare(t.name.size() - 7, 7, ".weight") == 0;
      if (target) {
        target = false;
        for (const std::string& m : spec.targets)
          target |= module.size() > m.size() && module.compare(module.size() - m.size() - 1, m.size() + 1, "." + m) == 0;
      }
      if (!target) {
        if (!merged_dir.empty()) merged.push_back({t.name, "F32", t.shape, f32_bytes(t.values)});
        continue;
      }
      ++adapted;
      const int64_t out = t.shape[0], in = t.shape[1], r = spec.r;
      std::vector<float> a(static_cast<size_t>(r * in)), b(static_cast<size_t>(out * r));
      for (float& v : a) v = draw(rng, spec.dtype, -4);  // exact in the dtype
      for (float& v : b) v = draw(rng, spec.dtype, -5);
      const std::string stem = "base_model.model." + module;
      adapter.push_back({stem + ".lora_A.weight", spec.dtype == "f32" ? "F32" : "BF16", {r, in}, spec.dtype == "f32" ? f32_bytes(a) : bf16_bytes(a)});
      adapter.push_back({stem + ".lora_B.weight", spec.dtype == "f32" ? "F32" : "BF16", {out, r}, spec.dtype == "f32" ? f32_bytes(b) : bf16_bytes(b)});
      if (!merged_dir.empty()) {
        std::vector<float> w = t.values;
        for (int64_t o = 0; o < out; ++o)
          for (int64_t i = 0; i < in; ++i) {
            float delta = 0.0f;
            for (int64_t k = 0; k < r; ++k) delta += b[size_t(o * r + k)] * a[size_t(k * in + i)];
            w[size_t(o * in + i)] += scale * delta;
          }
        merged.push_back({t.name, "F32", t.shape, f32_bytes(w)});
      }
    }
  std::sort(adapter.begin(), adapter.end(), [](const RawTensor& x, const RawTensor& y) { return x.name < y.name; });
  write_safetensors(dir + "/adapter_model.safetensors", adapter);
  nlohmann::json c = {{"alpha_pattern", nlohmann::json::object()}, {"auto_mapping", nullptr}, {"base_model_name_or_path", base_dir},
                      {"bias", "none"}, {"fan_in_fan_out", false}, {"inference_mode", true}, {"init_lora_weights", true},
                      {"lora_alpha", spec.alpha}, {"lora_dropout", 0.05}, {"modules_to_save", nullptr}, {"peft_type", "LORA"},
                      {"r", spec.r}, {"rank_pattern", nlohmann::json::object()}, {"revision", nullptr},
                      {"target_modules", spec.targets}, {"task_type", "CAUSAL_LM"}, {"use_dora", false}, {"use_rslora", false}};
  write_text(dir + "/adapter_config.json", c.dump(2));
  if (!merged_dir.empty()) {
    mkdirs(merged_dir);
    write_safetensors(merged_dir + "/model.safetensors", merged);
    for (const auto& e : std::filesystem::directory_iterator(base_dir))
      if (e.path().extension() != ".safetensors" && e.path().filename() != "model.safetensors.index.json")
        std::filesystem::copy_file(e.path(), merged_dir + "/" + e.path().filename().string(), std::filesystem::copy_options::overwrite_existing);
  }
  return adapted;
}

}  // namespace gen
