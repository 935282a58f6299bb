#include "arch/gguf_keys.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "arch/arch_table.h"
#include "source/model_config.h"

namespace leapconv {

namespace {

using json = nlohmann::json;

// A config key that is missing or malformed: "config.json: key 'x': ...".
ConvertError key_error(const std::string& file, const std::string& key, const std::string& what) {
  return ConvertError(file, "", "key '" + key + "': " + what);
}
// A config key llama.cpp would not read as Hugging Face means it (or a model it does not take).
UnsupportedError refused(const std::string& file, const std::string& key, const std::string& what) {
  return UnsupportedError(file, "", "key '" + key + "': " + what);
}

// A number of a JSON object; fallback when absent or not a number.
double num(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// config_int, its error naming the file (config_int's own names only the key).
static int64_t cfg_int(const ModelConfig& c, const char* key, int64_t fallback) {
  try {
    return config_int(c.raw, key, fallback);
  } catch (const ConvertError& e) {
    throw ConvertError(c.file, "", e.detail());
  }
}

// config.json's rope_scaling (or transformers' newer rope_parameters), {} when absent.
json rope_parameters(const ModelConfig& c) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = c.raw.find(key);
    if (it != c.raw.end() && it->is_object()) return *it;
    if (it != c.raw.end() && !it->is_null())
      throw key_error(c.file, key, "is neither an object nor null");
  }
  return json::object();
}

std::string rope_type_of(const ModelConfig& c, const json& rp) {
  for (const char* key : {"rope_type", "type"}) {
    auto it = rp.find(key);
    if (it == rp.end()) continue;
    if (!it->is_string()) throw key_error(c.file, std::string("rope_scaling.") + key, "is not a string");
    return it->get<std::string>();
  }
  return "";
}

double need_positive(const ModelConfig& c, const json& rp, const char* key) {
  auto it = rp.find(key);
  if (it == rp.end() || !it->is_number() || !(it->get<double>() > 0))
    throw key_error(c.file, std::string("rope_scaling.") + key, "is missing or not a positive number");
  return it->get<double>();
}

uint32_t u32_of(const ModelConfig& c, const char* key, int64_t v) {
  if (v <= 0 || v > int64_t(UINT32_MAX)) throw key_error(c.file, key, "must be a positive 32-bit number");
  return uint32_t(v);
}

// The rope scaling keys TextModel.set_gguf_parameters writes (linear, yarn); `extra` names the
// family's own kinds (Llama's llama3: its rope_freqs tensor), handled by the caller. Anything
// else is refused: llama.cpp would run the model unscaled.
std::string rope_scaling_keys(const ModelConfig& c, const json& rp, const std::string& a, GgufMetadata& kv,
                              const char* extra = nullptr) {
  const std::string type = rope_type_of(c, rp);
  if (type == "linear") {
    kv.set_string(a + "rope.scaling.type", "linear");
    kv.set_f32(a + "rope.scaling.factor", float(need_positive(c, rp, "factor")));
  } else if (type == "yarn") {
    kv.set_string(a + "rope.scaling.type", "yarn");
    kv.set_f32(a + "rope.scaling.factor", float(need_positive(c, rp, "factor")));
    kv.set_u32(a + "rope.scaling.original_context_length",
               u32_of(c, "rope_scaling.original_max_position_embeddings",
                      int64_t(need_positive(c, rp, "original_max_position_embeddings"))));
    const std::pair<const char*, const char*> yarn[] = {{"extrapolation_factor", "yarn_ext_factor"},
                                                        {"attention_factor", "yarn_attn_factor"},
                                                        {"beta_fast", "yarn_beta_fast"},
                                                        {"beta_slow", "yarn_beta_slow"}};
    for (const auto& [hf, key] : yarn)
      if (const char* k = rp.contains(hf) ? hf : std::string(hf) == "attention_factor" ? "attn_factor" : nullptr;
          k && rp.contains(k) && rp[k].is_number())
        kv.set_f32(a + "rope.scaling." + key, rp[k].get<float>());
  } else if (!type.empty() && type != "default" && !(extra && type == extra)) {
    const std::string arch = a.substr(0, a.size() - 1);
    throw refused(c.file, "rope_scaling.rope_type",
                    "'" + type + "' is not a rope scaling llama.cpp's " + arch + " architecture runs (linear, yarn" +
                        (extra ? std::string(", ") + extra : std::string()) + ")");
  }
  return type;
}

// The sizes every family but GPT-2 writes from the same config keys, each family in its own
// converter's order: block_count, context_length, embedding_length, feed_forward_length,
// attention.head_count, attention.head_count_kv, attention.layer_norm_rms_epsilon.
void size_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m, std::initializer_list<const char*> keys) {
  const std::string a = std::string(m.family->name) + ".";
  for (const std::string k : keys) {
    if (k == "attention.layer_norm_rms_epsilon") {
      m.kv.set_f32(a + k, float(c.norm_eps));
      continue;
    }
    if (k == "context_length" && c.seq_len <= 0)
      throw key_error(c.file, "max_position_embeddings",
                      "is missing: llama.cpp needs " + a + "context_length (the trained context)");
    const auto [key, v] = k == "block_count"           ? std::pair{"num_hidden_layers", c.n_layers}
                          : k == "context_length"      ? std::pair{"max_position_embeddings", c.seq_len}
                          : k == "embedding_length"    ? std::pair{"hidden_size", d.hidden}
                          : k == "feed_forward_length" ? std::pair{"intermediate_size", d.ffn}
                          : k == "attention.head_count" ? std::pair{"num_attention_heads", c.n_heads}
                          : k == "attention.head_count_kv" ? std::pair{"num_key_value_heads", c.n_kv_heads}
                                                           : throw std::logic_error("size key " + k);
    m.kv.set_u32(a + k, u32_of(c, key, v));
  }
}

// The first of `keys` config.json has (TextModel.find_hparam's order), or null.
const json* first_of(const ModelConfig& c, std::initializer_list<const char*> keys, const char** which = nullptr) {
  for (const char* k : keys)
    if (auto it = c.raw.find(k); it != c.raw.end() && !it->is_null()) {
      if (which) *which = k;
      return &*it;
    }
  return nullptr;
}

// TextModel's mixture-of-experts keys: expert_count and expert_used_count where the config has
// them (the tensors are checked against the count where they are mapped).
void expert_keys(const ModelConfig& c, GgufKeys& m) {
  const std::string a = std::string(m.family->name) + ".";
  const char* key = nullptr;
  if (first_of(c, {"num_local_experts", "num_experts", "n_routed_experts"}, &key))
    m.kv.set_u32(a + "expert_count", u32_of(c, key, cfg_int(c, key, 0)));
  if (first_of(c, {"num_experts_per_tok", "num_experts_per_token", "top_k_experts"}, &key)) {
    const int64_t used = cfg_int(c, key, 0);
    if (used < 1 || (c.num_experts > 0 && used > c.num_experts))
      throw key_error(c.file, key, std::to_string(used) + " experts per token: must be 1 to the expert count (" +
                                       std::to_string(c.num_experts) + ")");
    m.kv.set_u32(a + "expert_used_count", u32_of(c, key, used));
  }
  for (const char* k : {"n_group", "topk_group", "score_function", "scoring_func", "score_func", "moe_router_activation",
                        "moe_router_activation_func", "expert_selection_fn"})
    if (first_of(c, {k}))
      throw refused(c.file, k, "grouped or non-softmax expert routing is not written by this converter yet");
}

// The keys of TextModel.set_gguf_parameters, in its order, for the families that keep them
// (Llama, Qwen2, Qwen3): counts and sizes, rope scaling, rope theta, the RMS epsilon, head_dim.
void text_model_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m, const char* extra_rope = nullptr,
                     std::string* rope_type = nullptr, double* theta_out = nullptr, bool head_dim_keys = true) {
  GgufMetadata& kv = m.kv;
  const std::string a = std::string(m.family->name) + ".";
  size_keys(c, d, m, {"block_count", "context_length", "embedding_length", "feed_forward_length",
                      "attention.head_count", "attention.head_count_kv"});
  const json rp = rope_parameters(c);
  const double theta = num(rp, "rope_theta", c.rope_theta);
  const std::string type = rope_scaling_keys(c, rp, a, kv, extra_rope);
  if (c.rope_theta_stated || rp.contains("rope_theta")) kv.set_f32(a + "rope.freq_base", float(theta));
  size_keys(c, d, m, {"attention.layer_norm_rms_epsilon"});
  expert_keys(c, m);
  if (c.head_dim && head_dim_keys) {
    kv.set_u32(a + "attention.key_length", u32_of(c, "head_dim", c.head_dim));
    kv.set_u32(a + "attention.value_length", u32_of(c, "head_dim", c.head_dim));
  }
  file_type_slot(m);
  if (rope_type) *rope_type = type;
  if (theta_out) *theta_out = theta;
}

bool flag(const ModelConfig& c, const char* key) {
  auto it = c.raw.find(key);
  return it != c.raw.end() && it->is_boolean() && it->get<bool>();
}

// llama.cpp's families with wq / wo of [hidden, hidden] (Qwen2, Phi-3): head_dim must be hidden / heads.
void need_plain_head_dim(const ModelConfig& c, const GgufKeys& m) {
  if (c.head_dim && c.head_dim * c.n_heads != c.dim)
    throw refused(c.file, "head_dim",
                    std::to_string(c.head_dim) + " x num_attention_heads is not hidden_size: llama.cpp's " +
                        m.family->name + " architecture takes head_dim = hidden_size / num_attention_heads only");
}

// Sliding-window attention Hugging Face would run and llama.cpp would not (Qwen2 / Qwen3).
void refuse_sliding_window(const ModelConfig& c, const GgufKeys& m) {
  if (flag(c, "use_sliding_window"))
    throw refused(c.file, "use_sliding_window",
                    std::string("is true: llama.cpp's ") + m.family->name +
                        " architecture runs every layer with full attention");
  if (auto lt = c.raw.find("layer_types"); lt != c.raw.end() && lt->is_array())
    for (const json& t : *lt)
      if (!t.is_string() || t.get<std::string>() != "full_attention")
        throw refused(c.file, "layer_types",
                        std::string("has '") + (t.is_string() ? t.get<std::string>() : t.dump()) +
                            "': llama.cpp's " + m.family->name + " architecture runs every layer with full attention");
}

}  // namespace

void file_type_slot(GgufKeys& k) { k.kv.set_u32("general.file_type", 0); }

// Llama (LLM_ARCH_LLAMA): the keys llama.cpp's loader reads, as TextModel.set_gguf_parameters and
// LlamaModel.set_gguf_parameters write them; rope scaling as keys or as rope_freqs.
// LlamaModel.set_gguf_parameters (Llama and its subclasses SmolLM3, Granite): TextModel's keys,
// Llama 3.1's rope_freqs where the family runs it, the vocabulary size and the rotary dimensions.
static void llama_model_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m, bool llama3_rope, bool head_dim_keys = true) {
  const std::string a = std::string(m.family->name) + ".";
  std::string type;
  double theta = 0;
  text_model_keys(c, d, m, llama3_rope ? "llama3" : nullptr, &type, &theta, head_dim_keys);
  if (type == "llama3") {
    const json rp = rope_parameters(c);
    m.computed.push_back({"rope_freqs.weight", {m.head_dim / 2},
                          llama3_rope_factors(theta, m.head_dim, num(rp, "factor", 8.0), num(rp, "low_freq_factor", 1.0),
                                              num(rp, "high_freq_factor", 4.0),
                                              num(rp, "original_max_position_embeddings", 8192.0))});
  }
  m.kv.set_u32(a + "vocab_size", u32_of(c, "vocab_size", d.vocab));
  m.kv.set_u32(a + "rope.dimension_count", u32_of(c, "head_dim", m.head_dim));
}

static void moe_checks(const ModelConfig& c, const GgufKeys& m);

// Llama, Mistral and Mixtral (its experts: TextModel's expert keys; LlamaModel writes no width of
// its own for them, llama.cpp sizes them by feed_forward_length).
void llama_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  if (c.num_experts > 0) moe_checks(c, m);
  llama_model_keys(c, d, m, true);
}

// SmolLM3 (SmolLM3Model: LlamaModel's keys under "smollm3"). llama.cpp runs every 4th layer
// without RoPE by itself (no key says so): a config with other layers without it is refused.
void smollm3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  refuse_sliding_window(c, m);
  const int period = m.family->compute.no_rope_period;
  if (auto it = c.raw.find("no_rope_layers"); it != c.raw.end() && !it->is_null()) {
    if (!it->is_array() || int64_t(it->size()) != c.n_layers)
      throw key_error(c.file, "no_rope_layers", "must list num_hidden_layers flags");
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const json& v = (*it)[size_t(l)];
      const int want = (l + 1) % period != 0;
      if (!v.is_number_integer() || v.get<int64_t>() != want)
        throw refused(c.file, "no_rope_layers",
                      "layer " + std::to_string(l) + " is " + v.dump() + ": llama.cpp's smollm3 runs RoPE in every layer but every " +
                          std::to_string(period) + "th (layers 3, 7, 11, ...)");
    }
  } else if (auto iv = c.raw.find("no_rope_layer_interval"); iv != c.raw.end() && !iv->is_null() &&
                                                              (!iv->is_number_integer() || iv->get<int64_t>() != period)) {
    throw refused(c.file, "no_rope_layer_interval",
                  iv->dump() + ": llama.cpp's smollm3 runs every " + std::to_string(period) + "th layer without RoPE");
  }
  llama_model_keys(c, d, m, false);  // llama.cpp's smollm3 reads no rope_freqs
}

// Granite (GraniteModel: LlamaModel's keys without head_dim, then its four multipliers, each as
// GraniteConfig has it, 1.0 when config.json does not say).
void granite_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  need_plain_head_dim(c, m);  // GraniteModel drops head_dim: llama.cpp takes hidden_size / heads
  llama_model_keys(c, d, m, false, false);
  const std::pair<const char*, const char*> scales[] = {{"attention_multiplier", "granite.attention.scale"},
                                                        {"embedding_multiplier", "granite.embedding_scale"},
                                                        {"residual_multiplier", "granite.residual_scale"},
                                                        {"logits_scaling", "granite.logit_scale"}};
  for (const auto& [hf, key] : scales) {
    const auto it = c.raw.find(hf);
    if (it != c.raw.end() && !it->is_null() && (!it->is_number() || it->get<double>() == 0))
      throw key_error(c.file, hf, it->dump() + " is not a nonzero number");
    m.kv.set_f32(key, float(num(c.raw, hf, 1.0)));
  }
}

// OLMo 2 / OLMo 3 (Olmo2Model: TextModel's keys; OLMo 3's sliding window and its pattern after
// them). llama.cpp reads the pattern's period only (4: three sliding layers, then a full one),
// not the array the converter writes; it has no tied classifier.
void olmo2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  if (c.tie_stated && c.tie_word_embeddings)
    throw refused(c.file, "tie_word_embeddings", "is true: llama.cpp's olmo2 needs its own output.weight");
  need_plain_head_dim(c, m);
  text_model_keys(c, d, m);
  auto sw = c.raw.find("sliding_window");
  if (sw == c.raw.end() || sw->is_null()) return;
  const int period = m.family->compute.swa_period;
  std::vector<bool> pattern;
  for (int64_t l = 0; l < c.n_layers; ++l) pattern.push_back((l + 1) % period != 0);
  if (auto lt = c.raw.find("layer_types"); lt != c.raw.end() && !lt->is_null()) {
    if (!lt->is_array() || int64_t(lt->size()) != c.n_layers)
      throw key_error(c.file, "layer_types", "must list num_hidden_layers layer types");
    for (int64_t l = 0; l < c.n_layers; ++l)
      if ((*lt)[size_t(l)] != (pattern[size_t(l)] ? "sliding_attention" : "full_attention"))
        throw refused(c.file, "layer_types",
                      "layer " + std::to_string(l) + " is " + (*lt)[size_t(l)].dump() +
                          ": llama.cpp's olmo2 runs three sliding layers, then a full one");
  }
  m.kv.set_u32("olmo2.attention.sliding_window", u32_of(c, "sliding_window", cfg_int(c, "sliding_window", 0)));
  m.kv.set_bool_array("olmo2.attention.sliding_window_pattern", pattern);
}

// The rotated fraction of a head: rope_parameters' own, else the top level's (TextModel copies
// the top-level key into rope_parameters only where it has none), else the family's default.
static double partial_rotary_factor(const ModelConfig& c, const json& rp, double fallback) {
  return num(rp, "partial_rotary_factor", num(c.raw, "partial_rotary_factor", fallback));
}

// GLM-4 (Glm4Model: TextModel's keys, then the rotary dimensions: head_dim x
// partial_rotary_factor, 0.5 as Glm4Config has it when config.json does not say).
void glm4_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  const json rp = rope_parameters(c);
  const double pct = partial_rotary_factor(c, rp, 0.5);
  const int64_t rope_dims = int64_t(double(m.head_dim) * pct);
  if (!(pct > 0 && pct <= 1) || rope_dims <= 0 || rope_dims % 2)
    throw key_error(c.file, "partial_rotary_factor",
                    "gives " + std::to_string(rope_dims) + " rotary dimensions of a head of " +
                        std::to_string(m.head_dim) + ": must be even and in 2..head_dim");
  text_model_keys(c, d, m);
  m.kv.set_u32("glm4.rope.dimension_count", uint32_t(rope_dims));
}

// Qwen2 / Qwen2.5 (Qwen2Model: TextModel's keys). NEOX RoPE: q and k are not permuted.
void qwen2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  need_plain_head_dim(c, m);
  refuse_sliding_window(c, m);
  text_model_keys(c, d, m);
}

// Qwen3 (Qwen3Model: TextModel's keys, head_dim as key_length / value_length).
void qwen3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  refuse_sliding_window(c, m);
  text_model_keys(c, d, m);
}

// BitNet b1.58 (BitnetModel: TextModel's keys, then rope scaling linear x 1.0, which llama.cpp
// reads as none). llama.cpp's bitnet computes SiLU in its MLP and wq / wo of [hidden, hidden];
// a config's own rope scaling would be overwritten by linear x 1.0 (Hugging Face would scale,
// llama.cpp would not): refused.
void bitnet_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  need_plain_head_dim(c, m);
  if (auto it = c.raw.find("hidden_act"); it != c.raw.end() && !it->is_null() && *it != "silu")
    throw refused(c.file, "hidden_act",
                  it->dump() + ": llama.cpp's bitnet computes SiLU in its MLP (BitNet b1.58 2B4T's relu2 would run as SiLU)");
  if (auto it = c.raw.find("rope_scaling"); it != c.raw.end() && !it->is_null())
    throw refused(c.file, "rope_scaling",
                  "is set: llama.cpp's converter overwrites BitNet's rope scaling with linear x 1.0, so llama.cpp "
                  "would run the model unscaled");
  text_model_keys(c, d, m);
  m.kv.set_string("bitnet.rope.scaling.type", "linear");
  m.kv.set_f32("bitnet.rope.scaling.factor", 1.0f);
}

// What llama.cpp's graph fixes for a mixture of experts, against the config's own say: every
// layer a mixture (the dense layers of mlp_only_layers / decoder_sparse_step are not built), the
// routing weights renormalised or not (the family's compute row), a per-token count given.
static void moe_checks(const ModelConfig& c, const GgufKeys& m) {
  if (c.num_experts <= 0) throw key_error(c.file, "num_experts", "is missing: a mixture of experts needs its expert count");
  if (!first_of(c, {"num_experts_per_tok", "num_experts_per_token", "top_k_experts"}))
    throw key_error(c.file, "num_experts_per_tok", "is missing: llama.cpp needs the experts used per token");
  if (auto it = c.raw.find("mlp_only_layers"); it != c.raw.end() && !it->is_null() && !(it->is_array() && it->empty()))
    throw refused(c.file, "mlp_only_layers",
                  it->dump() + ": llama.cpp's " + m.family->name + " builds every layer as a mixture of experts");
  if (cfg_int(c, "decoder_sparse_step", 1) != 1)
    throw refused(c.file, "decoder_sparse_step", "is not 1: llama.cpp's " + std::string(m.family->name) +
                                                     " builds every layer as a mixture of experts");
  const bool norm = m.family->compute.moe_norm_weights;
  if (auto it = c.raw.find("norm_topk_prob"); it != c.raw.end() && it->is_boolean() && it->get<bool>() != norm)
    throw refused(c.file, "norm_topk_prob",
                  std::string("is ") + (norm ? "false" : "true") + ": llama.cpp's " + m.family->name +
                      (norm ? " always divides" : " never divides") + " the chosen experts' weights by their sum");
}

// Qwen2-MoE (Qwen2MoeModel: TextModel's keys, then the expert and shared expert widths).
void qwen2moe_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  need_plain_head_dim(c, m);
  refuse_sliding_window(c, m);
  moe_checks(c, m);
  text_model_keys(c, d, m);
  if (first_of(c, {"moe_intermediate_size"}))
    m.kv.set_u32("qwen2moe.expert_feed_forward_length", u32_of(c, "moe_intermediate_size", d.expert_ffn));
  if (first_of(c, {"shared_expert_intermediate_size"}))
    m.kv.set_u32("qwen2moe.expert_shared_feed_forward_length",
                 u32_of(c, "shared_expert_intermediate_size", d.shexp_ffn));
}

// Qwen3-MoE (Qwen3MoeModel: Qwen2MoeModel's keys; head_dim as key / value length).
void qwen3moe_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  refuse_sliding_window(c, m);
  moe_checks(c, m);
  if (d.shexp_ffn > 0)
    throw refused(c.file, "shared_expert_intermediate_size", "llama.cpp's qwen3moe has no shared expert");
  text_model_keys(c, d, m);
  if (first_of(c, {"moe_intermediate_size"}))
    m.kv.set_u32("qwen3moe.expert_feed_forward_length", u32_of(c, "moe_intermediate_size", d.expert_ffn));
}

// OLMoE (OlmoeModel: TextModel's keys, the RMS epsilon then set to 1e-5 in its place). llama.cpp
// norms q and k over the whole projection as [hidden]: as many kv heads as heads.
void olmoe_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  need_plain_head_dim(c, m);
  moe_checks(c, m);
  if (c.n_kv_heads != c.n_heads)
    throw refused(c.file, "num_key_value_heads", "is not num_attention_heads: llama.cpp's olmoe norms k as [hidden_size]");
  if (auto it = c.raw.find("clip_qkv"); it != c.raw.end() && !it->is_null())
    throw refused(c.file, "clip_qkv", "is set: llama.cpp's olmoe does not clamp q, k and v");
  if (float(c.norm_eps) != 1e-5f)
    throw refused(c.file, "rms_norm_eps", "is not 1e-5: llama.cpp's converter writes 1e-5 for OLMoE whatever it says");
  text_model_keys(c, d, m);
  m.kv.assign("olmoe.attention.layer_norm_rms_epsilon", GgufValue::scalar(1e-5f));
}

// gpt-oss (GptOssModel: TextModel's keys, its YaRN rope scaling among them, then the sliding
// window and the experts' width, intermediate_size). What llama.cpp fixes for it, held against
// the config: layers sliding, full, sliding, ... (its period 2), SwiGLU clamped at 7 (alpha 1.702),
// the experts as MXFP4 (quantization_config's quant_method; the tensors are checked where mapped).
void gpt_oss_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  moe_checks(c, m);
  const auto qc = c.raw.find("quantization_config");
  if (qc == c.raw.end() || !qc->is_object() || qc->value("quant_method", "") != "mxfp4")
    throw refused(c.file, "quantization_config", "is not MXFP4: gpt-oss's experts are read as they ship, in MXFP4, only");
  if (auto it = c.raw.find("swiglu_limit"); it != c.raw.end() && !it->is_null() && !(it->is_number() && it->get<double>() == 7.0))
    throw refused(c.file, "swiglu_limit", it->dump() + ": llama.cpp's gpt-oss clamps the experts' SwiGLU at 7");
  if (auto lt = c.raw.find("layer_types"); lt != c.raw.end() && !lt->is_null()) {
    if (!lt->is_array() || int64_t(lt->size()) != c.n_layers)
      throw key_error(c.file, "layer_types", "must list num_hidden_layers layer types");
    for (int64_t l = 0; l < c.n_layers; ++l)
      if ((*lt)[size_t(l)] != (l % 2 == 0 ? "sliding_attention" : "full_attention"))
        throw refused(c.file, "layer_types",
                      "layer " + std::to_string(l) + " is " + (*lt)[size_t(l)].dump() +
                          ": llama.cpp's gpt-oss runs even layers with the sliding window and odd ones in full");
  }
  text_model_keys(c, d, m);
  m.kv.set_u32("gpt-oss.attention.sliding_window", u32_of(c, "sliding_window", cfg_int(c, "sliding_window", 0)));
  m.kv.set_u32("gpt-oss.expert_feed_forward_length", u32_of(c, "intermediate_size", c.hidden_dim));
  const json rp = rope_parameters(c);
  if (rope_type_of(c, rp) == "yarn" && rp.contains("truncate") && rp["truncate"] == false)
    m.warnings.push_back("rope_scaling.truncate is false: Hugging Face blends YaRN's frequencies over an unrounded "
                         "range, llama.cpp over the range rounded to whole dimensions (its converter drops the flag)");
}

// Phi-3's longrope (Phi-3-mini-128k, Phi-3.5-mini, Phi-4-mini; Phi3MiniModel.generate_extra_tensors):
// the long and short factors as tensors and the attention factor as a key. transformers' Phi3Config
// reads "su" and "yarn" as longrope. Hugging Face picks the long factors for sequences longer than
// the original context; llama.cpp picks them once, for contexts longer than it.
static void phi3_longrope(const ModelConfig& c, const json& rp, const std::string& type, int64_t orig, int64_t rope_dims,
                   GgufKeys& m) {
  if (type != "longrope" && type != "su" && type != "yarn")
    throw refused(c.file, "rope_scaling.rope_type",
                  "'" + type + "': llama.cpp's phi3 runs longrope scaling only (its long and short factors)");
  auto factors = [&](const char* key) {
    auto it = rp.find(key);
    if (it == rp.end() || !it->is_array() || int64_t(it->size()) * 2 != rope_dims)
      throw key_error(c.file, std::string("rope_scaling.") + key,
                      "must list rope dimensions / 2 = " + std::to_string(rope_dims / 2) + " numbers");
    std::vector<float> v;
    for (const json& x : *it) {
      if (!x.is_number() || !(x.get<double>() > 0))
        throw key_error(c.file, std::string("rope_scaling.") + key, x.dump() + " is not a positive number");
      v.push_back(x.get<float>());  // torch.tensor(..., dtype=torch.float32)
    }
    return v;
  };
  std::vector<float> long_f = factors("long_factor"), short_f = factors("short_factor");
  const double scale = double(c.seq_len) / double(orig);
  const double attn = scale > 1.0 ? std::sqrt(1 + std::log(scale) / std::log(double(orig))) : 1.0;
  if (auto af = rp.find("attention_factor"); af != rp.end() && !af->is_null() &&
                                             (!af->is_number() || float(af->get<double>()) != float(attn)))
    throw refused(c.file, "rope_scaling.attention_factor",
                  af->dump() + ": llama.cpp's converter writes sqrt(1 + ln(scale) / ln(original context)) = " +
                      std::to_string(attn) + " whatever the config says");
  m.after_architecture.set_f32("phi3.rope.scaling.attn_factor", float(attn));
  m.computed.push_back({"rope_factors_long.weight", {int64_t(long_f.size())}, std::move(long_f)});
  m.computed.push_back({"rope_factors_short.weight", {int64_t(short_f.size())}, std::move(short_f)});
  m.notes.push_back("longrope: llama.cpp uses the long factors when its context is longer than " +
                    std::to_string(orig) + " tokens (Hugging Face: when the sequence is), the short ones otherwise");
}

// Phi-3 (Phi3MiniModel.set_gguf_parameters, in its order): partial rotary as
// rope.dimension_count, the original context, the sliding window (which llama.cpp does not run).
void phi3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  need_plain_head_dim(c, m);
  GgufMetadata& kv = m.kv;
  const json rp = rope_parameters(c);
  const std::string type = rope_type_of(c, rp);
  const int64_t orig = c.raw.contains("original_max_position_embeddings") &&
                               c.raw["original_max_position_embeddings"].is_number_integer()
                           ? c.raw["original_max_position_embeddings"].get<int64_t>()
                           : int64_t(num(rp, "original_max_position_embeddings", 0));
  if (orig <= 0)
    throw key_error(c.file, "original_max_position_embeddings",
                    "is missing: llama.cpp's phi3 needs phi3.rope.scaling.original_context_length");
  const double pct = partial_rotary_factor(c, rp, 1.0);
  const int64_t rope_dims = int64_t(pct * double(c.dim)) / c.n_heads;  // int(rot_pct * n_embd) // n_head
  if (!(pct > 0 && pct <= 1) || rope_dims <= 0 || rope_dims % 2 || rope_dims > m.head_dim)
    throw key_error(c.file, "partial_rotary_factor",
                    "gives " + std::to_string(rope_dims) + " rotary dimensions of a head of " +
                        std::to_string(m.head_dim) + ": must be even and in 2..head_dim");
  if (!type.empty() && type != "default") phi3_longrope(c, rp, type, orig, rope_dims, m);
  size_keys(c, d, m, {"context_length"});
  kv.set_u32("phi3.rope.scaling.original_context_length", u32_of(c, "original_max_position_embeddings", orig));
  size_keys(c, d, m, {"embedding_length", "feed_forward_length", "block_count", "attention.head_count",
                      "attention.head_count_kv", "attention.layer_norm_rms_epsilon"});
  kv.set_u32("phi3.rope.dimension_count", uint32_t(rope_dims));
  kv.set_f32("phi3.rope.freq_base", float(num(rp, "rope_theta", c.rope_theta)));
  file_type_slot(m);
  const int64_t window = c.sliding_window > 0 ? c.sliding_window : 0;
  kv.set_u32("phi3.attention.sliding_window", uint32_t(std::min<int64_t>(window, UINT32_MAX)));
  if (window > 0 && window < c.seq_len)
    m.warnings.push_back("config.json: sliding_window " + std::to_string(window) +
                         ": llama.cpp runs Phi-3 with full attention (as its own converter's files), so past " +
                         std::to_string(window) + " tokens of context it attends further back than Hugging Face");
}

// Gemma's MLP activation: llama.cpp runs GELU's tanh approximation for every Gemma, the one the
// models were trained with. Only hidden_activation is checked: the first Gemma configs say
// "hidden_act": "gelu", which transformers' Gemma ignored for the tanh form (PR #29402).
static void need_gelu_tanh(const ModelConfig& c, const GgufKeys& m) {
  if (auto it = c.raw.find("hidden_activation"); it != c.raw.end() && !it->is_null())
    if (!it->is_string() || (it->get<std::string>() != "gelu_pytorch_tanh" && it->get<std::string>() != "gelu_new"))
      throw refused(c.file, "hidden_activation", it->dump() + ": llama.cpp's " + m.family->name +
                                                     " runs GELU's tanh approximation (gelu_pytorch_tanh)");
}

// Gemma 1 (GemmaModel.set_gguf_parameters, in its order): no rope keys (llama.cpp's default base
// 10000), the classifier always the embeddings.
void gemma_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  if (!c.head_dim) throw key_error(c.file, "head_dim", "is missing: llama.cpp's gemma needs gemma.attention.key_length");
  if (c.tie_stated && !c.tie_word_embeddings)
    throw refused(c.file, "tie_word_embeddings", "is false: llama.cpp's gemma always uses the embeddings as the classifier");
  need_gelu_tanh(c, m);
  const json rp = rope_parameters(c);
  if (const std::string type = rope_type_of(c, rp); !type.empty() && type != "default")
    throw refused(c.file, "rope_scaling.rope_type", "'" + type + "': llama.cpp's gemma runs no rope scaling");
  if (num(rp, "rope_theta", c.rope_theta) != 10000.0)
    throw refused(c.file, "rope_theta", "llama.cpp's gemma runs RoPE with base 10000 (its converter writes no base)");
  size_keys(c, d, m, {"context_length", "embedding_length", "block_count", "feed_forward_length",
                      "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon"});
  m.kv.set_u32("gemma.attention.key_length", u32_of(c, "head_dim", c.head_dim));
  m.kv.set_u32("gemma.attention.value_length", u32_of(c, "head_dim", c.head_dim));
  file_type_slot(m);
}

// Gemma 3 (Gemma3Model.set_gguf_parameters: TextModel's keys, then its own, a rewritten key keeping
// its place). Its config class's defaults stand in for keys config.json leaves out (the converter
// reads the config through transformers). llama.cpp fixes the layer pattern (five sliding layers,
// then a full one) and the query scale (1/sqrt(head_dim); 27B: 1/sqrt(hidden / heads)); a config
// that changes them is refused.
void gemma3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  GgufMetadata& kv = m.kv;
  const ArchCompute& cp = m.family->compute;
  need_gelu_tanh(c, m);
  if (auto it = c.raw.find("attn_logit_softcapping"); it != c.raw.end() && !it->is_null())
    throw refused(c.file, "attn_logit_softcapping", "is set: llama.cpp's gemma3 caps no attention scores");
  const int64_t head_dim = c.head_dim ? c.head_dim : 256;  // Gemma3TextConfig's default
  if (head_dim != m.head_dim) throw key_error(c.file, "head_dim", "is missing (Gemma3TextConfig's default is 256)");
  const int64_t scalar = cfg_int(c, "query_pre_attn_scalar", 256);
  const int64_t llama_cpp_scalar = c.n_layers == cp.query_scale_hidden_layers ? c.dim / c.n_heads : head_dim;
  if (scalar != llama_cpp_scalar)
    throw refused(c.file, "query_pre_attn_scalar",
                  std::to_string(scalar) + ": llama.cpp's gemma3 scales queries by 1/sqrt(" +
                      std::to_string(llama_cpp_scalar) + ") for this model");
  const int64_t pattern = cfg_int(c, "sliding_window_pattern", cp.swa_period);
  if (pattern != cp.swa_period && pattern != 1)
    throw refused(c.file, "sliding_window_pattern",
                  std::to_string(pattern) + ": llama.cpp's gemma3 runs five sliding layers, then a full one (6)");
  if (auto lt = c.raw.find("layer_types"); lt != c.raw.end() && lt->is_array())
    for (size_t l = 0; l < lt->size(); ++l) {
      const bool sliding = pattern != 1 && (l + 1) % size_t(pattern) != 0;
      if ((*lt)[l] != (sliding ? "sliding_attention" : "full_attention"))
        throw refused(c.file, "layer_types",
                      "layer " + std::to_string(l) + " is " + (*lt)[l].dump() +
                          ": llama.cpp's gemma3 runs five sliding layers, then a full one");
    }
  // rope: transformers' older keys (rope_theta, rope_local_base_freq, rope_scaling) or its newer
  // rope_parameters {full_attention: {...}, sliding_attention: {...}}
  json rp = rope_parameters(c);
  const json full = rp.contains("full_attention") && rp["full_attention"].is_object() ? rp["full_attention"] : rp;
  const json local = rp.contains("sliding_attention") && rp["sliding_attention"].is_object() ? rp["sliding_attention"]
                                                                                            : json::object();
  if (const std::string t = rope_type_of(c, local); !t.empty() && t != "default")
    throw refused(c.file, "rope_parameters.sliding_attention.rope_type",
                  "'" + t + "': llama.cpp's gemma3 runs the sliding layers' RoPE unscaled");
  size_keys(c, d, m, {"block_count"});
  kv.set_u32("gemma3.context_length", u32_of(c, "max_position_embeddings", cfg_int(c, "max_position_embeddings", 131072)));
  size_keys(c, d, m, {"embedding_length", "feed_forward_length", "attention.head_count", "attention.head_count_kv"});
  const std::string type = rope_type_of(c, full);
  if (type == "linear") {
    kv.set_string("gemma3.rope.scaling.type", "linear");
    kv.set_f32("gemma3.rope.scaling.factor", float(need_positive(c, full, "factor")));
  } else if (!type.empty() && type != "default") {
    throw refused(c.file, "rope_scaling.rope_type", "'" + type + "': llama.cpp's gemma3 runs linear rope scaling only");
  }
  kv.set_f32("gemma3.rope.freq_base", float(num(full, "rope_theta", num(c.raw, "rope_theta", 1e6))));
  kv.set_f32("gemma3.rope.freq_base_swa", float(num(local, "rope_theta", num(c.raw, "rope_local_base_freq", 10000.0))));
  kv.set_f32("gemma3.attention.layer_norm_rms_epsilon", float(num(c.raw, "rms_norm_eps", 1e-6)));
  kv.set_u32("gemma3.attention.key_length", u32_of(c, "head_dim", head_dim));
  kv.set_u32("gemma3.attention.value_length", u32_of(c, "head_dim", head_dim));
  file_type_slot(m);
  if (const double cap = num(c.raw, "final_logit_softcapping", 0); cap != 0)
    kv.set_f32("gemma3.final_logit_softcapping", float(cap));
  if (pattern != 1)
    kv.set_u32("gemma3.attention.sliding_window", u32_of(c, "sliding_window", cfg_int(c, "sliding_window", 4096)));
}

// Gemma 4's layers as its config describes them (Gemma4TextConfig; the converter's reading of it):
// which slide, the sliding and full layers' head sizes and kv heads, the shared KV layers at
// the end, the MLP width of each layer, where a full layer's keys are its values.
struct Gemma4Layout {
  std::vector<bool> sliding;
  int64_t head_dim_swa = 0, head_dim_full = 0, kv_swa = 0, kv_full = 0;  // kv_full 0: not stated
  int64_t shared = 0, ffn = 0, ple = 0;
  bool double_wide = false, k_eq_v = false;
  json full_rope, swa_rope;
};

// A full-attention layer's own value in per_layer_config (newer transformers keep
// global_head_dim and num_global_key_value_heads there): the first full layer's that has it.
static const json* gemma4_full_layer_value(const ModelConfig& c, const std::vector<bool>& sliding, const char* key) {
  auto plc = c.raw.find("per_layer_config");
  if (plc == c.raw.end() || !plc->is_object()) return nullptr;
  for (const auto& [idx, lc] : plc->items()) {
    int64_t l = -1;
    try {
      l = std::stoll(idx);
    } catch (const std::exception&) {
      throw key_error(c.file, "per_layer_config", "'" + idx + "' is not a layer number");
    }
    if (l >= 0 && l < int64_t(sliding.size()) && !sliding[size_t(l)] && lc.is_object() && lc.contains(key))
      return &lc[key];
  }
  return nullptr;
}

static Gemma4Layout gemma4_layout(const ModelConfig& c) {
  Gemma4Layout g;
  auto lt = c.raw.find("layer_types");
  if (lt == c.raw.end() || !lt->is_array() || int64_t(lt->size()) != c.n_layers)
    throw key_error(c.file, "layer_types", "must list num_hidden_layers layer types (llama.cpp's gemma4 needs the pattern)");
  for (size_t l = 0; l < lt->size(); ++l) {
    const json& t = (*lt)[l];
    if (t != "sliding_attention" && t != "full_attention")
      throw key_error(c.file, "layer_types", "layer " + std::to_string(l) + " is " + t.dump() +
                                                 ": neither sliding_attention nor full_attention");
    g.sliding.push_back(t == "sliding_attention");
  }
  if (!c.head_dim) throw key_error(c.file, "head_dim", "is missing: llama.cpp's gemma4 needs the sliding layers' head size");
  g.head_dim_swa = c.head_dim;
  auto whole = [&](const json* v, const char* key) -> int64_t {
    if (!v || v->is_null()) return 0;
    if (!v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() > (int64_t(1) << 20))
      throw key_error(c.file, key, v->dump() + " is not a positive whole number");
    return v->get<int64_t>();
  };
  auto top = [&](const char* key) { auto it = c.raw.find(key); return it == c.raw.end() ? nullptr : &*it; };
  g.head_dim_full = whole(top("global_head_dim"), "global_head_dim");
  if (!g.head_dim_full) g.head_dim_full = whole(gemma4_full_layer_value(c, g.sliding, "head_dim"), "per_layer_config.head_dim");
  if (!g.head_dim_full && !c.raw.contains("per_layer_config")) g.head_dim_full = 512;  // Gemma4TextConfig's default
  if (!g.head_dim_full || g.head_dim_full % 2 || g.head_dim_swa % 2)
    throw key_error(c.file, "per_layer_config", "names no even head_dim of a full-attention layer (nor global_head_dim)");
  g.kv_swa = c.n_kv_heads;
  g.kv_full = whole(top("num_global_key_value_heads"), "num_global_key_value_heads");
  if (!g.kv_full)
    g.kv_full = whole(gemma4_full_layer_value(c, g.sliding, "num_key_value_heads"), "per_layer_config.num_key_value_heads");
  if (g.kv_full && c.n_heads % g.kv_full)
    throw key_error(c.file, "num_global_key_value_heads", "must divide num_attention_heads");
  auto shared = c.raw.find("num_kv_shared_layers");
  if (shared == c.raw.end() || !shared->is_number_integer() || shared->get<int64_t>() < 0 ||
      shared->get<int64_t>() >= c.n_layers)
    throw key_error(c.file, "num_kv_shared_layers", "must be a whole number below num_hidden_layers");
  g.shared = shared->get<int64_t>();
  g.ffn = c.hidden_dim;
  g.double_wide = flag(c, "use_double_wide_mlp");
  g.k_eq_v = flag(c, "attention_k_eq_v");
  g.ple = cfg_int(c, "hidden_size_per_layer_input", 0);
  if (g.ple < 0) throw key_error(c.file, "hidden_size_per_layer_input", "is negative");
  const json rp = rope_parameters(c);
  auto part = [&](const char* key) {
    auto it = rp.find(key);
    if (it == rp.end() || !it->is_object())
      throw key_error(c.file, std::string("rope_parameters.") + key, "is missing: Gemma 4 has one RoPE per layer type");
    return *it;
  };
  g.full_rope = part("full_attention");
  g.swa_rope = part("sliding_attention");
  return g;
}

void gemma4_dims(const ModelConfig& c, ArchDims& d) {
  const Gemma4Layout g = gemma4_layout(c);
  d.ple = g.ple;
  // the mixture (Gemma4TextDecoderLayer builds router and experts when enable_moe_block): beside
  // the dense MLP, experts of expert_intermediate_size / moe_intermediate_size (find_hparam's order)
  const bool moe_block = flag(c, "enable_moe_block");
  if (moe_block && c.num_experts <= 0) throw key_error(c.file, "num_experts", "is missing: enable_moe_block is true");
  if (!moe_block && c.num_experts > 0)
    throw refused(c.file, "enable_moe_block",
                  "is false beside num_experts " + std::to_string(c.num_experts) +
                      ": Hugging Face builds no experts, llama.cpp's converter would write an expert count");
  d.mlp_beside_experts = moe_block;
  if (moe_block) {
    const char* key = nullptr;
    first_of(c, {"expert_intermediate_size", "moe_intermediate_size"}, &key);
    if (!key) throw key_error(c.file, "moe_intermediate_size", "is missing: the experts' width");
    d.expert_ffn = cfg_int(c, key, 0);
    if (d.expert_ffn <= 0) throw key_error(c.file, key, "must be a positive whole number");
  }
  std::vector<LayerDims>& out = d.layers;
  out.clear();
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const bool swa = g.sliding[size_t(l)];
    // Hugging Face: the full layers' own kv heads only where their keys are their values
    const int64_t hd = swa ? g.head_dim_swa : g.head_dim_full;
    const int64_t kv = (swa || !g.k_eq_v || !g.kv_full ? g.kv_swa : g.kv_full) * hd;
    const bool shared = l >= c.n_layers - g.shared;
    out.push_back({c.n_heads * hd, kv, !swa && g.k_eq_v ? 0 : kv, hd, g.double_wide && shared ? 2 * g.ffn : g.ffn, shared});
  }
}

// Gemma 4 (Gemma4Model.set_gguf_parameters: Gemma 3's keys, then its own, a rewritten key keeping
// its place; rope_freqs from generate_extra_tensors). llama.cpp fixes what the config could
// otherwise change: the KV-sharing donors (a shared sliding layer reads the KV of the layer two
// before the first shared one, a shared full layer the one just before: Hugging Face reads the
// last unshared layer of its type, the same only when those are a sliding one, then a full one),
// so such a config is refused.
void gemma4_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  GgufMetadata& kv = m.kv;
  need_gelu_tanh(c, m);
  if (auto it = c.raw.find("attn_logit_softcapping"); it != c.raw.end() && !it->is_null())
    throw refused(c.file, "attn_logit_softcapping", "is set: llama.cpp's gemma4 caps no attention scores");
  if (auto it = c.raw.find("is_causal"); it != c.raw.end() && it->is_boolean() && !it->get<bool>())
    throw refused(c.file, "is_causal", "is false: llama.cpp runs Gemma 4's text model causally");
  const Gemma4Layout g = gemma4_layout(c);
  const int64_t first_shared = c.n_layers - g.shared;
  if (g.shared > 0) {
    bool shares_swa = false, shares_full = false;
    for (int64_t l = first_shared; l < c.n_layers; ++l) (g.sliding[size_t(l)] ? shares_swa : shares_full) = true;
    if (first_shared < 2 || (shares_full && g.sliding[size_t(first_shared - 1)]) ||
        (shares_swa && (g.sliding[size_t(first_shared - 1)] || !g.sliding[size_t(first_shared - 2)])))
      throw refused(c.file, "num_kv_shared_layers",
                    std::to_string(g.shared) + " with these layer_types: llama.cpp's gemma4 takes a shared sliding "
                    "layer's keys and values from layer " + std::to_string(first_shared - 2) + " and a shared full "
                    "layer's from layer " + std::to_string(first_shared - 1) + ", which are not the last unshared "
                    "layers of those types here");
  }
  if (g.kv_full && !g.k_eq_v && g.kv_full != g.kv_swa)
    throw refused(c.file, "num_global_key_value_heads",
                  std::to_string(g.kv_full) + " without attention_k_eq_v: Hugging Face gives the full layers " +
                      std::to_string(g.kv_swa) + " kv heads (num_key_value_heads), llama.cpp's converter writes " +
                      std::to_string(g.kv_full));
  if (num(c.raw, "final_logit_softcapping", 0) == 0)
    throw refused(c.file, "final_logit_softcapping",
                  "is not set: Hugging Face caps no logits, llama.cpp's gemma4 caps them at 30 without the key");
  if (auto it = c.raw.find("use_bidirectional_attention"); it != c.raw.end() && *it == "all")
    throw refused(c.file, "use_bidirectional_attention", "is \"all\": llama.cpp runs Gemma 4's text model causally");
  if (const std::string t = rope_type_of(c, g.full_rope); t != "proportional")
    throw refused(c.file, "rope_parameters.full_attention.rope_type",
                  "'" + t + "': llama.cpp's converter writes Gemma 4's full layers with proportional RoPE only");
  if (const std::string t = rope_type_of(c, g.swa_rope); !t.empty() && t != "default")
    throw refused(c.file, "rope_parameters.sliding_attention.rope_type",
                  "'" + t + "': llama.cpp's gemma4 runs the sliding layers' RoPE unscaled");
  if (num(g.swa_rope, "partial_rotary_factor", 1.0) != 1.0)
    throw refused(c.file, "rope_parameters.sliding_attention.partial_rotary_factor",
                  "is not 1: llama.cpp's converter rotates the sliding layers' whole heads");
  const double prf = num(g.full_rope, "partial_rotary_factor", -1);
  if (!(prf > 0 && prf <= 1))
    throw key_error(c.file, "rope_parameters.full_attention.partial_rotary_factor", "must be in (0, 1]");
  // Gemma3Model's keys (TextModel's slots, Gemma 3's values)
  size_keys(c, d, m, {"block_count"});
  kv.set_u32("gemma4.context_length", u32_of(c, "max_position_embeddings", cfg_int(c, "max_position_embeddings", 131072)));
  size_keys(c, d, m, {"embedding_length", "feed_forward_length", "attention.head_count", "attention.head_count_kv"});
  kv.set_f32("gemma4.rope.freq_base", float(num(g.full_rope, "rope_theta", 1e6)));
  kv.set_f32("gemma4.rope.freq_base_swa", float(num(g.swa_rope, "rope_theta", 10000.0)));
  kv.set_f32("gemma4.attention.layer_norm_rms_epsilon", float(num(c.raw, "rms_norm_eps", 1e-6)));
  if (c.num_experts > 0) moe_checks(c, m);
  expert_keys(c, m);
  kv.set_u32("gemma4.attention.key_length", u32_of(c, "global_head_dim", g.head_dim_full));
  kv.set_u32("gemma4.attention.value_length", u32_of(c, "global_head_dim", g.head_dim_full));
  file_type_slot(m);
  if (const double cap = num(c.raw, "final_logit_softcapping", 0); cap != 0)
    kv.set_f32("gemma4.final_logit_softcapping", float(cap));
  kv.set_u32("gemma4.attention.sliding_window", u32_of(c, "sliding_window", cfg_int(c, "sliding_window", 0)));
  // Gemma4Model's own
  kv.set_u32("gemma4.attention.shared_kv_layers", uint32_t(g.shared));
  kv.set_u32("gemma4.embedding_length_per_layer_input", uint32_t(g.ple));
  kv.set_bool_array("gemma4.attention.sliding_window_pattern", g.sliding);
  kv.set_u32("gemma4.attention.key_length_swa", u32_of(c, "head_dim", g.head_dim_swa));
  kv.set_u32("gemma4.attention.value_length_swa", u32_of(c, "head_dim", g.head_dim_swa));
  for (const char* key : {"expert_intermediate_size", "moe_intermediate_size"})
    if (auto it = c.raw.find(key); it != c.raw.end()) {  // find_hparam: the first key present, even null
      if (!it->is_null()) kv.set_u32("gemma4.expert_feed_forward_length", u32_of(c, key, cfg_int(c, key, 0)));
      break;
    }
  // per layer, as gemma4_dims sized them (the converter writes the arrays where the config states
  // double-wide MLPs or the full layers' kv heads)
  if (int64_t(d.layers.size()) != c.n_layers) throw std::logic_error("gemma4_keys: gemma4_dims has not run");
  std::vector<int32_t> ffn, heads;
  for (const LayerDims& y : d.layers) {
    ffn.push_back(int32_t(y.ffn));
    heads.push_back(int32_t(y.kv / y.head_dim));
  }
  if (g.double_wide) kv.assign("gemma4.feed_forward_length", GgufValue::array(ffn));
  if (g.kv_full) kv.assign("gemma4.attention.head_count_kv", GgufValue::array(heads));
  kv.set_u32("gemma4.rope.dimension_count", uint32_t(g.head_dim_full));
  kv.set_u32("gemma4.rope.dimension_count_swa", uint32_t(g.head_dim_swa));
  // rope_freqs: Hugging Face's proportional RoPE rotates the first n_rot pairs of a full layer's
  // head (NEOX pairs i, i + head/2) and leaves the rest; llama.cpp rotates every pair with the
  // frequency divided by these factors (1e30: no rotation).
  const int64_t n_rot = int64_t(double(g.head_dim_full) * prf / 2), pairs = g.head_dim_full / 2;
  std::vector<float> factors(size_t(pairs), 1e30f);
  std::fill(factors.begin(), factors.begin() + std::min(n_rot, pairs), 1.0f);
  m.computed.push_back({"rope_freqs.weight", {pairs}, std::move(factors)});
}

// Gemma 2 (Gemma2Model.set_gguf_parameters, in its order): head_dim, both soft-caps, the
// sliding window; llama.cpp fixes what the config could otherwise change (the layer pattern,
// GELU, the query scale, tied embeddings), so a config that changes them is refused.
void gemma2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  GgufMetadata& kv = m.kv;
  if (!c.head_dim) throw key_error(c.file, "head_dim", "is missing: llama.cpp's gemma2 needs gemma2.attention.key_length");
  if (c.tie_stated && !c.tie_word_embeddings)
    throw refused(c.file, "tie_word_embeddings", "is false: llama.cpp's gemma2 always uses the embeddings as the classifier");
  need_gelu_tanh(c, m);
  auto need_num = [&](const char* key) {
    auto it = c.raw.find(key);
    if (it == c.raw.end() || !it->is_number() || !(it->get<double>() > 0))
      throw key_error(c.file, key, "is missing or not a positive number: llama.cpp's gemma2 always applies it");
    return it->get<double>();
  };
  const double attn_cap = need_num("attn_logit_softcapping"), final_cap = need_num("final_logit_softcapping");
  const int64_t window = int64_t(need_num("sliding_window"));
  const int64_t q_scalar = int64_t(need_num("query_pre_attn_scalar"));
  const int64_t llama_cpp_scalar = c.n_layers == m.family->compute.query_scale_hidden_layers ? c.dim / c.n_heads : c.head_dim;
  if (double(q_scalar) != num(c.raw, "query_pre_attn_scalar", 0) || q_scalar != llama_cpp_scalar)
    throw refused(c.file, "query_pre_attn_scalar",
                    std::to_string(q_scalar) + ": llama.cpp's gemma2 scales queries by 1/sqrt(" +
                        std::to_string(llama_cpp_scalar) + ") for this model (" +
                        (llama_cpp_scalar == c.head_dim ? "head_dim" : "hidden_size / num_attention_heads") + ")");
  if (auto lt = c.raw.find("layer_types"); lt != c.raw.end() && lt->is_array())
    for (size_t l = 0; l < lt->size(); ++l) {
      const std::string want = l % 2 == 0 ? "sliding_attention" : "full_attention";
      if (!(*lt)[l].is_string() || (*lt)[l].get<std::string>() != want)
        throw refused(c.file, "layer_types",
                        "layer " + std::to_string(l) + " is " + (*lt)[l].dump() +
                            ": llama.cpp's gemma2 runs even layers with the sliding window and odd ones in full");
    }
  const json rp = rope_parameters(c);
  const std::string type = rope_type_of(c, rp);
  if (!type.empty() && type != "default")
    throw refused(c.file, "rope_scaling.rope_type", "'" + type + "': llama.cpp's gemma2 runs no rope scaling");
  size_keys(c, d, m, {"context_length", "embedding_length", "block_count", "feed_forward_length",
                      "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon"});
  kv.set_u32("gemma2.attention.key_length", u32_of(c, "head_dim", c.head_dim));
  kv.set_u32("gemma2.attention.value_length", u32_of(c, "head_dim", c.head_dim));
  file_type_slot(m);
  kv.set_f32("gemma2.attn_logit_softcapping", float(attn_cap));
  kv.set_f32("gemma2.final_logit_softcapping", float(final_cap));
  kv.set_u32("gemma2.attention.sliding_window", u32_of(c, "sliding_window", window));
  // Gemma2Model writes no rope theta (llama.cpp's default is Gemma 2's 10000): only another one.
  const double theta = num(rp, "rope_theta", c.rope_theta);
  if (theta != 10000.0) kv.set_f32("gemma2.rope.freq_base", float(theta));
}

// GPT-2 (GPT2Model.set_gguf_parameters): learned positions (context_length = their rows), the
// LayerNorm epsilon; GELU's tanh approximation and 1/sqrt(head_dim) attention are fixed.
void gpt2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  GgufMetadata& kv = m.kv;
  if (auto it = c.raw.find("activation_function"); it != c.raw.end()) {
    const std::string act = it->is_string() ? it->get<std::string>() : it->dump();
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
      throw refused(c.file, "activation_function",
                      "'" + act + "': llama.cpp's gpt2 runs GELU's tanh approximation (gelu_new)");
  }
  if (c.raw.contains("scale_attn_weights") && !flag(c, "scale_attn_weights"))
    throw refused(c.file, "scale_attn_weights", "is false: llama.cpp's gpt2 scales attention by 1/sqrt(head_dim)");
  if (flag(c, "scale_attn_by_inverse_layer_idx"))
    throw refused(c.file, "scale_attn_by_inverse_layer_idx", "is true: llama.cpp's gpt2 does not scale by the layer");
  if (c.seq_len <= 0) throw key_error(c.file, "n_positions", "is missing: llama.cpp needs gpt2.context_length");
  if (auto it = c.raw.find("n_ctx"); it != c.raw.end() && it->is_number_integer() && it->get<int64_t>() != c.seq_len)
    throw key_error(c.file, "n_ctx",
                    std::to_string(it->get<int64_t>()) + " differs from n_positions " + std::to_string(c.seq_len) +
                        ": llama.cpp's gpt2 takes one context length, the rows of the position embeddings");
  kv.set_u32("gpt2.block_count", u32_of(c, "n_layer", c.n_layers));
  kv.set_u32("gpt2.context_length", u32_of(c, "n_positions", c.seq_len));
  kv.set_u32("gpt2.embedding_length", u32_of(c, "n_embd", d.hidden));
  kv.set_u32("gpt2.feed_forward_length", u32_of(c, "n_inner", d.ffn));
  kv.set_u32("gpt2.attention.head_count", u32_of(c, "n_head", c.n_heads));
  kv.set_f32("gpt2.attention.layer_norm_epsilon", float(c.norm_eps));
  file_type_slot(m);
}


std::vector<float> llama3_rope_factors(double theta, int64_t head_dim, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_context) {
  // float32 throughout, in the order torch evaluates convert_hf_to_gguf.py's expressions
  const float dim = float(head_dim), base = float(theta), two_pi = float(2 * M_PI);
  const float old_ctx = float(original_context), f = float(factor), low = float(low_freq_factor);
  const float span = float(high_freq_factor - low_freq_factor);
  const float low_wavelen = float(original_context / low_freq_factor);
  const float high_wavelen = float(original_context / high_freq_factor);
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const float freq = 1.0f / std::pow(base, float(i) / dim);
    const float wavelen = two_pi / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(f);
    } else {
      const float smooth = (old_ctx / wavelen - low) / span;
      out.push_back(1.0f / ((1.0f - smooth) / f + smooth));
    }
  }
  return out;
}

}  // namespace leapconv
