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

// The folder or file name only (the CLI sees a path, the page a name): general.name.
double num(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
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
      if (rp.contains(hf) && rp[hf].is_number()) kv.set_f32(a + "rope.scaling." + key, rp[hf].get<float>());
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

// The keys of TextModel.set_gguf_parameters, in its order, for the families that keep them
// (Llama, Qwen2, Qwen3): counts and sizes, rope scaling, rope theta, the RMS epsilon, head_dim.
void text_model_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m, const char* extra_rope = nullptr,
                     std::string* rope_type = nullptr, double* theta_out = nullptr) {
  GgufMetadata& kv = m.kv;
  const std::string a = std::string(m.family->name) + ".";
  size_keys(c, d, m, {"block_count", "context_length", "embedding_length", "feed_forward_length",
                      "attention.head_count", "attention.head_count_kv"});
  const json rp = rope_parameters(c);
  const double theta = num(rp, "rope_theta", c.rope_theta);
  const std::string type = rope_scaling_keys(c, rp, a, kv, extra_rope);
  if (c.rope_theta_stated || rp.contains("rope_theta")) kv.set_f32(a + "rope.freq_base", float(theta));
  size_keys(c, d, m, {"attention.layer_norm_rms_epsilon"});
  if (c.head_dim) {
    kv.set_u32(a + "attention.key_length", u32_of(c, "head_dim", c.head_dim));
    kv.set_u32(a + "attention.value_length", u32_of(c, "head_dim", c.head_dim));
  }
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

// Llama (LLM_ARCH_LLAMA): the keys llama.cpp's loader reads, as TextModel.set_gguf_parameters and
// LlamaModel.set_gguf_parameters write them; rope scaling as keys or as rope_freqs.
void llama_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  std::string type;
  double theta = 0;
  text_model_keys(c, d, m, "llama3", &type, &theta);
  if (type == "llama3") {
    const json rp = rope_parameters(c);
    m.computed.push_back({"rope_freqs.weight", {m.head_dim / 2},
                          llama3_rope_factors(theta, m.head_dim, num(rp, "factor", 8.0), num(rp, "low_freq_factor", 1.0),
                                              num(rp, "high_freq_factor", 4.0),
                                              num(rp, "original_max_position_embeddings", 8192.0))});
  }
  m.kv.set_u32("llama.vocab_size", u32_of(c, "vocab_size", d.vocab));
  m.kv.set_u32("llama.rope.dimension_count", u32_of(c, "head_dim", m.head_dim));
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

// Phi-3 (Phi3MiniModel.set_gguf_parameters, in its order): partial rotary as
// rope.dimension_count, the original context, the sliding window (which llama.cpp does not run).
void phi3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  need_plain_head_dim(c, m);
  GgufMetadata& kv = m.kv;
  const json rp = rope_parameters(c);
  const std::string type = rope_type_of(c, rp);
  if (!type.empty() && type != "default")
    throw refused(c.file, "rope_scaling.rope_type",
                    "'" + type + "' is not supported for Phi-3 yet (llama.cpp picks its long or short factors by "
                                 "the context size, Hugging Face by the sequence length)");
  const int64_t orig = c.raw.contains("original_max_position_embeddings") &&
                               c.raw["original_max_position_embeddings"].is_number_integer()
                           ? c.raw["original_max_position_embeddings"].get<int64_t>()
                           : int64_t(num(rp, "original_max_position_embeddings", 0));
  if (orig <= 0)
    throw key_error(c.file, "original_max_position_embeddings",
                    "is missing: llama.cpp's phi3 needs phi3.rope.scaling.original_context_length");
  const double pct = c.raw.contains("partial_rotary_factor") ? num(c.raw, "partial_rotary_factor", 1.0)
                                                             : num(rp, "partial_rotary_factor", 1.0);
  const int64_t rope_dims = int64_t(pct * double(c.dim)) / c.n_heads;  // int(rot_pct * n_embd) // n_head
  if (!(pct > 0 && pct <= 1) || rope_dims <= 0 || rope_dims % 2 || rope_dims > m.head_dim)
    throw key_error(c.file, "partial_rotary_factor",
                    "gives " + std::to_string(rope_dims) + " rotary dimensions of a head of " +
                        std::to_string(m.head_dim) + ": must be even and in 2..head_dim");
  size_keys(c, d, m, {"context_length"});
  kv.set_u32("phi3.rope.scaling.original_context_length", u32_of(c, "original_max_position_embeddings", orig));
  size_keys(c, d, m, {"embedding_length", "feed_forward_length", "block_count", "attention.head_count",
                      "attention.head_count_kv", "attention.layer_norm_rms_epsilon"});
  kv.set_u32("phi3.rope.dimension_count", uint32_t(rope_dims));
  kv.set_f32("phi3.rope.freq_base", float(num(rp, "rope_theta", c.rope_theta)));
  const int64_t window = c.sliding_window > 0 ? c.sliding_window : 0;
  kv.set_u32("phi3.attention.sliding_window", uint32_t(std::min<int64_t>(window, UINT32_MAX)));
  if (window > 0 && window < c.seq_len)
    m.warnings.push_back("config.json: sliding_window " + std::to_string(window) +
                         ": llama.cpp runs Phi-3 with full attention (as its own converter's files), so past " +
                         std::to_string(window) + " tokens of context it attends further back than Hugging Face");
}

// Gemma 2 (Gemma2Model.set_gguf_parameters, in its order): head_dim, both soft-caps, the
// sliding window; llama.cpp fixes what the config could otherwise change (the layer pattern,
// GELU, the query scale, tied embeddings), so a config that changes them is refused.
void gemma2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& m) {
  GgufMetadata& kv = m.kv;
  if (!c.head_dim) throw key_error(c.file, "head_dim", "is missing: llama.cpp's gemma2 needs gemma2.attention.key_length");
  if (c.tie_stated && !c.tie_word_embeddings)
    throw refused(c.file, "tie_word_embeddings", "is false: llama.cpp's gemma2 always uses the embeddings as the classifier");
  for (const char* key : {"hidden_activation", "hidden_act"})
    if (auto it = c.raw.find(key); it != c.raw.end() && !it->is_null()) {
      if (!it->is_string() || (it->get<std::string>() != "gelu_pytorch_tanh" && it->get<std::string>() != "gelu_new"))
        throw refused(c.file, key, it->dump() + ": llama.cpp's gemma2 runs GELU's tanh approximation (gelu_pytorch_tanh)");
      break;
    }
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
