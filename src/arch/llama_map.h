// Hugging Face Llama checkpoint -> the weights LEAP's engine wants, in LEAP's order.
// Checks the architecture and every shape against the config before anything is written.
#pragma once
#include <string>
#include <vector>

#include "source/checkpoint.h"

namespace leapconv {

struct LeapWeight {
  std::string leap_name;  // e.g. "layers.3.wq", "tok_embeddings"
  const TensorRef* src = nullptr;
  std::vector<int64_t> shape;
  int permute_heads = 0;  // wq: n_heads, wk: n_kv_heads
  bool is_norm = false;   // norms stay f32 in every version
};

struct LeapModel {
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0;
  int32_t vocab_size = 0, seq_len = 0;
  bool shared_classifier = true;
  std::vector<LeapWeight> weights;  // LEAP order: norms, final norm, embeddings, wq.., output
  std::vector<std::string> warnings;
};

// seq_len_override > 0 replaces the config's sequence length.
LeapModel map_llama_to_leap(const Checkpoint& ck, int64_t seq_len_override);

}  // namespace leapconv
