// Hugging Face Llama checkpoint -> the weights LEAP's engine wants, in LEAP's order (the
// architecture table's role order). Checks the architecture and every shape against the
// config before anything is written.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "arch/arch_table.h"
#include "formats/leap_engine.h"
#include "plan/recipe.h"
#include "source/checkpoint.h"

namespace leapconv {

struct LeapWeight {
  const TensorRole* role = nullptr;
  int64_t layer = 0;
  std::string leap_name;  // e.g. "layers.3.wq", "tok_embeddings"
  std::vector<int64_t> shape;
  Recipe recipe;          // the source tensor; wq / wk RoPE-permuted in n_heads / n_kv_heads heads
};

struct LeapModel {
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0;
  int32_t vocab_size = 0, seq_len = 0;
  std::string seq_len_from;  // "option" (--seq-len), "model" (its maximum, below 2048) or "default"
  std::string config_file;   // config.json / params.json: where the shape comes from, for messages
  bool shared_classifier = true;
  std::vector<LeapWeight> weights;  // LEAP order: norms, final norm, embeddings, wq.., output
  std::vector<std::string> warnings;
};

// LEAP's weight slots in file order for these sizes: every role of the Llama family, per
// layer where it is per layer, the classifier only when it is not shared. The mapper and the
// file layout both walk this, so their orders agree by construction.
void for_each_leap_slot(const ArchDims& dims, int64_t n_layers, bool shared_classifier,
                        const std::function<void(const TensorRole&, int64_t layer, std::vector<int64_t> shape)>& fn);

// seq_len_override > 0 replaces the default sequence length (leap_seq_len).
LeapModel map_llama_to_leap(const Checkpoint& ck, int64_t seq_len_override);
// The same for a file to write: LEAP's engine's rules (leap_engine.h) are also checked on the
// shape the config states before any tensor is looked at, so a refusal names the config file.
LeapModel map_llama_to_leap(const Checkpoint& ck, const LeapChoice& choice);

}  // namespace leapconv
