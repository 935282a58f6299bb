// The architecture table, in the spirit of llama.cpp's tensor_mapping.py: per model family,
// every tensor role with its Hugging Face name, its shape rule from the config, its transform
// and its name in each output format. The LEAP mapper, the LEAP layout, the forward pass and
// verify all read it; the list of accepted architectures is here and nowhere else.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace leapconv {

struct ModelConfig;

// A dimension of a shape rule, resolved from the config (see ArchDims).
enum class Dim : uint8_t { Hidden, Ffn, Vocab, Kv, Q, Positions, Hidden3, One };  // Q: n_heads x head_dim

// How a source tensor is changed on its way into a file.
enum class Transform : uint8_t {
  None,
  RopeHeads,    // HF rotate-half -> interleaved pairs, per head of n_heads (wq)
  RopeKvHeads,  // the same per head of n_kv_heads (wk)
};

struct TensorRole {
  const char* role;  // llama.cpp's name stem: token_embd, attn_q, ffn_down, ...
  const char* hf;    // Hugging Face name; "{L}" stands for the layer index
  const char* leap;  // LEAP's name, or null where LEAP has no such tensor
  const char* gguf;  // GGUF's tensor name
  bool per_layer;
  std::vector<Dim> shape;  // rows first, as Hugging Face stores it
  const char* why;         // the config fields that give the shape, for messages
  Transform transform;
  bool norm;      // stays f32 in every LEAP version
  bool optional;  // may be absent (a tied classifier)
};

struct ArchFamily {
  const char* name;  // "llama", "gpt2"
  std::vector<const char*> architectures;  // config.json "architectures"
  std::vector<const char*> model_types;    // config.json "model_type" (and params.json: llama)
  bool leap;                               // LEAP's engine runs it
  std::vector<TensorRole> roles;           // in LEAP's file order where the family has one
  std::vector<const char*> ignorable;      // substrings of source tensors that carry nothing
};

const std::vector<ArchFamily>& arch_families();
// The family a config names (architecture first, then model_type); null if none.
const ArchFamily* find_family(const ModelConfig& c);
const ArchFamily& llama_family();
const ArchFamily* find_family_by_name(const std::string& name);
// A role of a family by its stem; throws if the family has none (an internal error).
const TensorRole& role_of(const ArchFamily& f, const char* role);
// "LlamaForCausalLM, MistralForCausalLM": the architectures of the families LEAP takes.
std::string leap_architecture_list();

// A role's name in some format for layer l ("{L}" replaced); "" for a null pattern.
std::string role_name(const char* pattern, int64_t layer);
// The layer a name has under a pattern ("model.layers.{L}.mlp.up_proj.weight" and
// "model.layers.7.mlp.up_proj.weight" give 7; a pattern without "{L}" gives 0 when equal);
// -1 when it does not match.
int64_t match_role_name(const char* pattern, const std::string& name);

// The config's sizes that shape rules refer to.
struct ArchDims {
  int64_t hidden = 0, ffn = 0, vocab = 0, kv = 0, q = 0, positions = 0;
  int64_t of(Dim d) const;
  std::vector<int64_t> shape(const std::vector<Dim>& rule) const;
};

}  // namespace leapconv
