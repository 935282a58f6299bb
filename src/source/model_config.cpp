#include "source/model_config.h"

#include "core/error.h"

#include <cmath>
#include <cstdint>

namespace leapconv {

using json = nlohmann::json;

// A whole number that fits int64. A float is taken when it is integral (4096.0) and in range:
// casting 1e20 or NaN to int64 is undefined behaviour (a release build turned 1e20 experts
// into a negative count and went past the mixture-of-experts refusal).
int64_t config_int(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw ConvertError("", "", std::string("'") + key + "' is not a number");
  if (it->is_number_unsigned()) {
    if (it->get<uint64_t>() > uint64_t(INT64_MAX))
      throw ConvertError("", "", std::string("'") + key + "' is " + it->dump() + ", too large");
    return int64_t(it->get<uint64_t>());
  }
  if (it->is_number_integer()) return it->get<int64_t>();
  const double d = it->get<double>();
  // |d| < 2^63 exactly representable bounds; integral floats beyond 2^53 are taken as they are
  if (!(d >= -9.2233720368547758e18 && d < 9.2233720368547758e18) || d != std::floor(d))
    throw ConvertError("", "", std::string("'") + key + "' is " + it->dump() + ", not a whole number in range");
  return int64_t(d);
}

static int64_t get_int(const json& j, const char* key, int64_t fallback) { return config_int(j, key, fallback); }

static double get_num(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  return it->get<double>();
}

static bool get_bool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return fallback;
  return it->get<bool>();
}

// The first of the keys that is present (convert_hf_to_gguf.py's find_hparam): GPT-2's configs
// say n_embd / n_layer / n_head / n_positions / n_inner where the others say hidden_size ...
static const char* first_key(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (auto it = j.find(k); it != j.end() && !it->is_null()) return k;
  return *keys.begin();
}

static void parse_hf(const json& j, ModelConfig& c) {
  if (auto a = j.find("architectures"); a != j.end() && a->is_array() && !a->empty() &&
                                        (*a)[0].is_string())
    c.architecture = (*a)[0].get<std::string>();
  if (auto t = j.find("model_type"); t != j.end() && t->is_string()) c.model_type = *t;
  c.dim = get_int(j, first_key(j, {"hidden_size", "n_embd"}), 0);
  c.hidden_dim = get_int(j, first_key(j, {"intermediate_size", "n_inner"}), 0);
  c.n_layers = get_int(j, first_key(j, {"num_hidden_layers", "n_layer"}), 0);
  c.n_heads = get_int(j, first_key(j, {"num_attention_heads", "n_head"}), 0);
  c.n_kv_heads = get_int(j, "num_key_value_heads", c.n_heads);
  c.vocab_size = get_int(j, "vocab_size", 0);
  c.seq_len = get_int(j, first_key(j, {"max_position_embeddings", "n_positions"}), 0);
  c.head_dim = get_int(j, "head_dim", 0);
  c.norm_eps = get_num(j, first_key(j, {"rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps"}), c.norm_eps);
  c.rope_theta_stated = j.contains("rope_theta");
  c.rope_theta = get_num(j, "rope_theta", c.rope_theta);
  c.rope_scaling = j.contains("rope_scaling") && !j["rope_scaling"].is_null();
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", false);
  c.tie_stated = j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean();
  c.has_qkv_bias = get_bool(j, "attention_bias", false) || get_bool(j, "qkv_bias", false);
  c.num_experts = get_int(j, "num_local_experts", get_int(j, "num_experts", get_int(j, "n_routed_experts", 0)));
  c.experts_used = get_int(j, "num_experts_per_tok", get_int(j, "num_experts_per_token", get_int(j, "top_k_experts", 0)));
  c.shared_expert_ffn = get_int(j, "shared_expert_intermediate_size", 0);
  c.sliding_window = get_int(j, "sliding_window", 0);
}

static void parse_meta(const json& j, ModelConfig& c) {
  c.model_type = "llama";
  c.dim = get_int(j, "dim", 0);
  c.n_layers = get_int(j, "n_layers", 0);
  c.n_heads = get_int(j, "n_heads", 0);
  c.n_kv_heads = get_int(j, "n_kv_heads", c.n_heads);
  c.vocab_size = std::max<int64_t>(0, get_int(j, "vocab_size", 0));
  c.seq_len = get_int(j, "max_seq_len", 0);
  c.norm_eps = get_num(j, "norm_eps", c.norm_eps);
  c.rope_theta_stated = j.contains("rope_theta");
  c.rope_theta = get_num(j, "rope_theta", c.rope_theta);
  c.num_experts = get_int(j, "moe_num_experts", 0);
}

// What transformers' text config classes fill in for keys a saved config.json leaves out: a
// multimodal checkpoint saves only what differs from them (Gemma 3 4B's text_config has no
// heads, head_dim or query scalar), and llama.cpp's converter reads the config through
// transformers (AutoConfig), so it sees these values. One row per config model_type.
struct TextConfigDefaults {
  const char* model_type;
  const char* values;  // JSON
  // layer_types when absent, as the class's __post_init__ derives them: every period-th layer
  // full attention, the others sliding, and the last always full (Gemma4TextConfig: 6); 0: none.
  int full_attention_period = 0;
};
static const TextConfigDefaults kTextConfigDefaults[] = {
    {"gemma3_text",  // Gemma3TextConfig
     R"({"vocab_size": 262208, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
         "query_pre_attn_scalar": 256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
         "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window": 4096,
         "hidden_activation": "gelu_pytorch_tanh"})"},
    {"olmo3", R"({"sliding_window": 4096})"},  // Olmo3Config
    {"gemma4_text",  // Gemma4TextConfig (global_head_dim: gemma4_layout, after per_layer_config)
     R"({"vocab_size": 262144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
         "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072,
         "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 512,
         "final_logit_softcapping": null, "vocab_size_per_layer_input": 262144, "hidden_size_per_layer_input": 256,
         "attention_k_eq_v": false, "num_kv_shared_layers": 0, "use_double_wide_mlp": false,
         "enable_moe_block": false, "num_experts": null,
         "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                             "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                "rope_theta": 1000000.0}}})",
     6},
};

static void fill_text_config_defaults(json& cfg) {
  const auto mt = cfg.find("model_type");
  if (mt == cfg.end() || !mt->is_string()) return;
  for (const TextConfigDefaults& d : kTextConfigDefaults)
    if (*mt == d.model_type) {
      const json values = json::parse(d.values);  // (items() of a temporary would dangle)
      for (const auto& [k, v] : values.items())
        if (!cfg.contains(k)) cfg[k] = v;
      const auto n = cfg.find("num_hidden_layers");
      if (d.full_attention_period > 0 && !cfg.contains("layer_types") && n != cfg.end() && n->is_number_integer() &&
          n->get<int64_t>() > 0 && n->get<int64_t>() <= (int64_t(1) << 16)) {
        json types = json::array();
        for (int64_t l = 0; l < n->get<int64_t>(); ++l)
          types.push_back((l + 1) % d.full_attention_period && l + 1 < n->get<int64_t>() ? "sliding_attention"
                                                                                         : "full_attention");
        cfg["layer_types"] = types;
      }
    }
}

ModelConfig parse_model_config(const std::string& file, const std::string& text) {
  ModelConfig c;
  c.file = file;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw ConvertError(file, "", "not a valid JSON object");
  try {
    const bool meta = file.size() >= 11 && file.compare(file.size() - 11, 11, "params.json") == 0;
    // A multimodal model's config (Gemma3ForConditionalGeneration) keeps the language model's
    // under text_config: its keys are read as the top level's, as llama.cpp's TextModel does,
    // but for what names the model and its special tokens: the family is the top level's
    // architectures and model_type (a wrapper no family takes stays refused), and the token ids
    // are config.json's own (gguf-py's SpecialVocab reads the file's top level).
    if (!meta && j.contains("text_config") && j["text_config"].is_object()) {
      json tc = j["text_config"];  // a copy: text_config may name itself
      fill_text_config_defaults(tc);
      for (const auto& [k, v] : tc.items()) {
        const bool names = k == "architectures" || k == "model_type";
        const bool token_id = k.size() > 9 && k.compare(k.size() - 9, 9, "_token_id") == 0;
        if ((names || token_id) && j.contains(k)) continue;
        if (token_id) continue;
        j[k] = v;
      }
    } else if (!meta) {
      fill_text_config_defaults(j);
    }
    if (meta) parse_meta(j, c); else parse_hf(j, c);
  } catch (const ConvertError& e) {
    throw ConvertError(file, "", e.detail());
  } catch (const json::exception& e) {
    throw ConvertError(file, "", std::string("malformed value: ") + e.what());
  }
  c.raw = std::move(j);
  return c;
}

}  // namespace leapconv
