#include "arch/arch_table.h"

#include "core/error.h"
#include "source/model_config.h"

namespace leapconv {

namespace {

using D = Dim;
using T = Transform;

// Llama (and Mistral): the roles in LEAP's grouped file order (SPEC.md), which is what LEAP's
// loader maps: every layer's attention norm, every ffn norm, the final norm, the embeddings,
// then wq of every layer, wk, ..., and the classifier when it is not shared.
const std::vector<TensorRole> kLlamaRoles = {
    {"attn_norm", "model.layers.{L}.input_layernorm.weight", "layers.{L}.attention_norm", "blk.{L}.attn_norm.weight",
     true, {D::Hidden}, "hidden_size", T::None, true, false},
    {"ffn_norm", "model.layers.{L}.post_attention_layernorm.weight", "layers.{L}.ffn_norm", "blk.{L}.ffn_norm.weight",
     true, {D::Hidden}, "hidden_size", T::None, true, false},
    {"output_norm", "model.norm.weight", "norm", "output_norm.weight", false, {D::Hidden}, "hidden_size", T::None, true,
     false},
    {"token_embd", "model.embed_tokens.weight", "tok_embeddings", "token_embd.weight", false, {D::Vocab, D::Hidden},
     "hidden_size", T::None, false, false},
    {"attn_q", "model.layers.{L}.self_attn.q_proj.weight", "layers.{L}.wq", "blk.{L}.attn_q.weight", true,
     {D::Q, D::Hidden}, "num_attention_heads x head_dim", T::RopeHeads, false, false},
    {"attn_k", "model.layers.{L}.self_attn.k_proj.weight", "layers.{L}.wk", "blk.{L}.attn_k.weight", true,
     {D::Kv, D::Hidden}, "num_key_value_heads x head_dim", T::RopeKvHeads, false, false},
    {"attn_v", "model.layers.{L}.self_attn.v_proj.weight", "layers.{L}.wv", "blk.{L}.attn_v.weight", true,
     {D::Kv, D::Hidden}, "num_key_value_heads x head_dim", T::None, false, false},
    {"attn_output", "model.layers.{L}.self_attn.o_proj.weight", "layers.{L}.wo", "blk.{L}.attn_output.weight", true,
     {D::Hidden, D::Q}, "num_attention_heads x head_dim", T::None, false, false},
    {"ffn_gate", "model.layers.{L}.mlp.gate_proj.weight", "layers.{L}.w1", "blk.{L}.ffn_gate.weight", true,
     {D::Ffn, D::Hidden}, "intermediate_size", T::None, false, false},
    {"ffn_down", "model.layers.{L}.mlp.down_proj.weight", "layers.{L}.w2", "blk.{L}.ffn_down.weight", true,
     {D::Hidden, D::Ffn}, "intermediate_size", T::None, false, false},
    {"ffn_up", "model.layers.{L}.mlp.up_proj.weight", "layers.{L}.w3", "blk.{L}.ffn_up.weight", true,
     {D::Ffn, D::Hidden}, "intermediate_size", T::None, false, false},
    {"output", "lm_head.weight", "output", "output.weight", false, {D::Vocab, D::Hidden}, "vocab x hidden_size",
     T::None, false, true},
};

// GPT-2 (HF GPT2LMHeadModel): Conv1D weights are stored [in, out]; the classifier is tied.
const std::vector<TensorRole> kGpt2Roles = {
    {"token_embd", "transformer.wte.weight", nullptr, "token_embd.weight", false, {D::Vocab, D::Hidden}, "n_embd",
     T::None, false, false},
    {"position_embd", "transformer.wpe.weight", nullptr, "position_embd.weight", false, {D::Positions, D::Hidden},
     "n_positions x n_embd", T::None, false, false},
    {"attn_norm", "transformer.h.{L}.ln_1.weight", nullptr, "blk.{L}.attn_norm.weight", true, {D::Hidden}, "n_embd",
     T::None, true, false},
    {"attn_norm_b", "transformer.h.{L}.ln_1.bias", nullptr, "blk.{L}.attn_norm.bias", true, {D::Hidden}, "n_embd",
     T::None, true, false},
    {"attn_qkv", "transformer.h.{L}.attn.c_attn.weight", nullptr, "blk.{L}.attn_qkv.weight", true,
     {D::Hidden, D::Hidden3}, "n_embd", T::None, false, false},
    {"attn_qkv_b", "transformer.h.{L}.attn.c_attn.bias", nullptr, "blk.{L}.attn_qkv.bias", true, {D::Hidden3},
     "n_embd", T::None, false, false},
    {"attn_output", "transformer.h.{L}.attn.c_proj.weight", nullptr, "blk.{L}.attn_output.weight", true,
     {D::Hidden, D::Hidden}, "n_embd", T::None, false, false},
    {"attn_output_b", "transformer.h.{L}.attn.c_proj.bias", nullptr, "blk.{L}.attn_output.bias", true, {D::Hidden},
     "n_embd", T::None, false, false},
    {"ffn_norm", "transformer.h.{L}.ln_2.weight", nullptr, "blk.{L}.ffn_norm.weight", true, {D::Hidden}, "n_embd",
     T::None, true, false},
    {"ffn_norm_b", "transformer.h.{L}.ln_2.bias", nullptr, "blk.{L}.ffn_norm.bias", true, {D::Hidden}, "n_embd",
     T::None, true, false},
    {"ffn_up", "transformer.h.{L}.mlp.c_fc.weight", nullptr, "blk.{L}.ffn_up.weight", true, {D::Hidden, D::Ffn},
     "n_embd x n_inner", T::None, false, false},
    {"ffn_up_b", "transformer.h.{L}.mlp.c_fc.bias", nullptr, "blk.{L}.ffn_up.bias", true, {D::Ffn}, "n_inner",
     T::None, false, false},
    {"ffn_down", "transformer.h.{L}.mlp.c_proj.weight", nullptr, "blk.{L}.ffn_down.weight", true, {D::Ffn, D::Hidden},
     "n_inner x n_embd", T::None, false, false},
    {"ffn_down_b", "transformer.h.{L}.mlp.c_proj.bias", nullptr, "blk.{L}.ffn_down.bias", true, {D::Hidden},
     "n_embd", T::None, false, false},
    {"output_norm", "transformer.ln_f.weight", nullptr, "output_norm.weight", false, {D::Hidden}, "n_embd", T::None,
     true, false},
    {"output_norm_b", "transformer.ln_f.bias", nullptr, "output_norm.bias", false, {D::Hidden}, "n_embd", T::None,
     true, false},
};

const std::vector<ArchFamily> kFamilies = {
    {"llama", {"LlamaForCausalLM", "MistralForCausalLM"}, {"llama", "mistral"}, true, kLlamaRoles,
     {"rotary_emb.inv_freq"}},
    {"gpt2", {"GPT2LMHeadModel"}, {"gpt2"}, false, kGpt2Roles, {}},
};

}  // namespace

const std::vector<ArchFamily>& arch_families() { return kFamilies; }

const ArchFamily* find_family(const ModelConfig& c) {
  for (const ArchFamily& f : kFamilies)
    for (const char* a : f.architectures)
      if (c.architecture == a) return &f;
  for (const ArchFamily& f : kFamilies)
    for (const char* t : f.model_types)
      if (c.model_type == t) return &f;
  return nullptr;
}

const ArchFamily& llama_family() { return kFamilies[0]; }

const ArchFamily* find_family_by_name(const std::string& name) {
  for (const ArchFamily& f : kFamilies)
    if (name == f.name) return &f;
  return nullptr;
}

const TensorRole& role_of(const ArchFamily& f, const char* role) {
  for (const TensorRole& r : f.roles)
    if (std::string(r.role) == role) return r;
  throw ConvertError(std::string("internal: family ") + f.name + " has no tensor role " + role);
}

std::string leap_architecture_list() {
  std::string s;
  for (const ArchFamily& f : kFamilies)
    if (f.leap)
      for (const char* a : f.architectures) s += (s.empty() ? "" : ", ") + std::string(a);
  return s;
}

std::string role_name(const char* pattern, int64_t layer) {
  if (!pattern) return "";
  std::string s = pattern;
  const size_t at = s.find("{L}");
  if (at != std::string::npos) s.replace(at, 3, std::to_string(layer));
  return s;
}

int64_t match_role_name(const char* pattern, const std::string& name) {
  if (!pattern) return -1;
  const std::string p = pattern;
  const size_t at = p.find("{L}");
  if (at == std::string::npos) return p == name ? 0 : -1;
  const size_t tail = p.size() - at - 3;
  if (name.size() < at + tail + 1 || name.compare(0, at, p, 0, at) != 0 ||
      name.compare(name.size() - tail, tail, p, at + 3, tail) != 0)
    return -1;
  const std::string digits = name.substr(at, name.size() - tail - at);
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return -1;
  for (char ch : digits)
    if (ch < '0' || ch > '9') return -1;
  return std::stoll(digits);
}

int64_t ArchDims::of(Dim d) const {
  switch (d) {
    case Dim::Hidden: return hidden;
    case Dim::Ffn: return ffn;
    case Dim::Vocab: return vocab;
    case Dim::Kv: return kv;
    case Dim::Q: return q;
    case Dim::Positions: return positions;
    case Dim::Hidden3: return 3 * hidden;
    case Dim::One: return 1;
  }
  return 0;
}

std::vector<int64_t> ArchDims::shape(const std::vector<Dim>& rule) const {
  std::vector<int64_t> s;
  for (Dim d : rule) s.push_back(of(d));
  return s;
}

}  // namespace leapconv
