// Model hyperparameters from Hugging Face's config.json or Meta's params.json.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace leapconv {

struct ModelConfig {
  std::string file;          // "config.json" or "params.json", for messages
  std::string architecture;  // architectures[0] of config.json, "" for params.json
  std::string model_type;
  // hidden_size | n_embd, intermediate_size | n_inner, num_hidden_layers | n_layer,
  // num_attention_heads | n_head; seq_len: max_position_embeddings | n_positions
  int64_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0;
  int64_t vocab_size = 0;  // 0 = not stated (params.json may say -1)
  int64_t seq_len = 0;     // 0 = not stated
  int64_t head_dim = 0;    // only when stated explicitly
  double norm_eps = 1e-5, rope_theta = 10000.0;
  bool rope_theta_stated = false;
  bool rope_scaling = false;  // a non-null rope_scaling entry
  bool tie_word_embeddings = false;
  bool tie_stated = false;    // config.json says tie_word_embeddings (else the family's default)
  bool has_qkv_bias = false;  // attention_bias / qkv bias flags
  int64_t num_experts = 0;    // MoE (num_local_experts / num_experts / n_routed_experts), 0 = dense
  int64_t experts_used = 0;   // num_experts_per_tok / num_experts_per_token / top_k_experts
  int64_t shared_expert_ffn = 0;  // shared_expert_intermediate_size (Qwen2-MoE's one shared expert), 0 = none
  int64_t sliding_window = 0;
  nlohmann::json raw;
};

// A whole number from a config object: absent or null gives `fallback`; a non-number, a
// fraction or a value outside int64 throws ConvertError naming the key (no undefined casts).
int64_t config_int(const nlohmann::json& j, const char* key, int64_t fallback);

// Parses config.json (HF names) or params.json (Meta names), chosen by the file name;
// throws ConvertError naming the file on malformed JSON or missing required fields.
ModelConfig parse_model_config(const std::string& file, const std::string& text);

}  // namespace leapconv
