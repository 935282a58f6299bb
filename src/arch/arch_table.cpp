#include "arch/arch_table.h"

#include "core/error.h"
#include "source/checkpoint.h"
#include "source/model_config.h"

namespace leapconv {

namespace {

using D = Dim;
using T = Transform;

// A role of the Llama-shaped families (model.layers.{L}.* in Hugging Face, blk.{L}.* in GGUF).
TensorRole layer_role(const char* role, const char* hf, const char* leap, const char* gguf, std::vector<Dim> shape,
                      const char* why, Transform t = T::None, bool norm = false) {
  return {role, hf, leap, gguf, true, std::move(shape), why, t, norm, false};
}

// Llama (and Mistral): the roles in LEAP's grouped file order (SPEC.md), which is what LEAP's
// loader maps: every layer's attention norm, every ffn norm, the final norm, the embeddings,
// then wq of every layer, wk, ..., and the classifier when it is not shared.
// q_t / k_t: Llama's converter permutes q and k for llama.cpp's interleaved RoPE; the families
// llama.cpp runs with NEOX RoPE (Qwen, Gemma) keep Hugging Face's rotate-half rows.
std::vector<TensorRole> llama_roles(Transform q_t, Transform k_t, Transform norm_t = T::None) {
  return {
      layer_role("attn_norm", "model.layers.{L}.input_layernorm.weight", "layers.{L}.attention_norm",
                 "blk.{L}.attn_norm.weight", {D::Hidden}, "hidden_size", norm_t, true),
      layer_role("ffn_norm", "model.layers.{L}.post_attention_layernorm.weight", "layers.{L}.ffn_norm",
                 "blk.{L}.ffn_norm.weight", {D::Hidden}, "hidden_size", norm_t, true),
      {"output_norm", "model.norm.weight", "norm", "output_norm.weight", false, {D::Hidden}, "hidden_size", norm_t,
       true, false},
      {"token_embd", "model.embed_tokens.weight", "tok_embeddings", "token_embd.weight", false, {D::Vocab, D::Hidden},
       "hidden_size", T::None, false, false},
      layer_role("attn_q", "model.layers.{L}.self_attn.q_proj.weight", "layers.{L}.wq", "blk.{L}.attn_q.weight",
                 {D::Q, D::Hidden}, "num_attention_heads x head_dim", q_t),
      layer_role("attn_k", "model.layers.{L}.self_attn.k_proj.weight", "layers.{L}.wk", "blk.{L}.attn_k.weight",
                 {D::Kv, D::Hidden}, "num_key_value_heads x head_dim", k_t),
      layer_role("attn_v", "model.layers.{L}.self_attn.v_proj.weight", "layers.{L}.wv", "blk.{L}.attn_v.weight",
                 {D::Kv, D::Hidden}, "num_key_value_heads x head_dim"),
      layer_role("attn_output", "model.layers.{L}.self_attn.o_proj.weight", "layers.{L}.wo",
                 "blk.{L}.attn_output.weight", {D::Hidden, D::Q}, "num_attention_heads x head_dim"),
      layer_role("ffn_gate", "model.layers.{L}.mlp.gate_proj.weight", "layers.{L}.w1", "blk.{L}.ffn_gate.weight",
                 {D::Ffn, D::Hidden}, "intermediate_size"),
      layer_role("ffn_down", "model.layers.{L}.mlp.down_proj.weight", "layers.{L}.w2", "blk.{L}.ffn_down.weight",
                 {D::Hidden, D::Ffn}, "intermediate_size"),
      layer_role("ffn_up", "model.layers.{L}.mlp.up_proj.weight", "layers.{L}.w3", "blk.{L}.ffn_up.weight",
                 {D::Ffn, D::Hidden}, "intermediate_size"),
      {"output", "lm_head.weight", "output", "output.weight", false, {D::Vocab, D::Hidden}, "vocab x hidden_size",
       T::None, false, true},
  };
}

// roles + extra, and without the roles named in `drop`
std::vector<TensorRole> with(std::vector<TensorRole> roles, std::vector<TensorRole> extra,
                             std::vector<std::string> drop = {}) {
  std::vector<TensorRole> out;
  for (TensorRole& r : roles) {
    bool dropped = false;
    for (const std::string& d : drop) dropped |= d == r.role;
    if (!dropped) out.push_back(std::move(r));
  }
  for (TensorRole& r : extra) out.push_back(std::move(r));
  return out;
}

// Qwen2 / Qwen2.5: Llama's tensors plus biases on q, k and v.
const std::vector<TensorRole> kQwen2Roles = with(
    llama_roles(T::None, T::None),
    {layer_role("attn_q_b", "model.layers.{L}.self_attn.q_proj.bias", nullptr, "blk.{L}.attn_q.bias", {D::Q},
                "num_attention_heads x head_dim"),
     layer_role("attn_k_b", "model.layers.{L}.self_attn.k_proj.bias", nullptr, "blk.{L}.attn_k.bias", {D::Kv},
                "num_key_value_heads x head_dim"),
     layer_role("attn_v_b", "model.layers.{L}.self_attn.v_proj.bias", nullptr, "blk.{L}.attn_v.bias", {D::Kv},
                "num_key_value_heads x head_dim")});

// Qwen3: Llama's tensors plus an RMSNorm of every q and k head (before RoPE).
const std::vector<TensorRole> kQwen3Roles = with(
    llama_roles(T::None, T::None),
    {layer_role("attn_q_norm", "model.layers.{L}.self_attn.q_norm.weight", nullptr, "blk.{L}.attn_q_norm.weight",
                {D::HeadDim}, "head_dim", T::None, true),
     layer_role("attn_k_norm", "model.layers.{L}.self_attn.k_norm.weight", nullptr, "blk.{L}.attn_k_norm.weight",
                {D::HeadDim}, "head_dim", T::None, true)});

// Phi-3: q, k and v fused in qkv_proj, gate and up fused in gate_up_proj; llama.cpp takes both
// fused (attn_qkv; ffn_up holding gate then up).
const std::vector<TensorRole> kPhi3Roles = with(
    llama_roles(T::None, T::None),
    {layer_role("attn_qkv", "model.layers.{L}.self_attn.qkv_proj.weight", nullptr, "blk.{L}.attn_qkv.weight",
                {D::Qkv, D::Hidden}, "(num_attention_heads + 2 num_key_value_heads) x head_dim"),
     layer_role("ffn_up", "model.layers.{L}.mlp.gate_up_proj.weight", nullptr, "blk.{L}.ffn_up.weight",
                {D::Ffn2, D::Hidden}, "2 x intermediate_size")},
    {"attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"});

// Gemma 2: a norm after attention and after the MLP besides the ones before them, every norm
// weight w applied as (1 + w) (the file holds 1 + w), the classifier always the embeddings.
const std::vector<TensorRole> kGemma2Roles = with(
    llama_roles(T::None, T::None, T::NormPlusOne),
    {layer_role("attn_post_norm", "model.layers.{L}.post_attention_layernorm.weight", nullptr,
                "blk.{L}.post_attention_norm.weight", {D::Hidden}, "hidden_size", T::NormPlusOne, true),
     layer_role("ffn_norm", "model.layers.{L}.pre_feedforward_layernorm.weight", nullptr, "blk.{L}.ffn_norm.weight",
                {D::Hidden}, "hidden_size", T::NormPlusOne, true),
     layer_role("ffn_post_norm", "model.layers.{L}.post_feedforward_layernorm.weight", nullptr,
                "blk.{L}.post_ffw_norm.weight", {D::Hidden}, "hidden_size", T::NormPlusOne, true)},
    {"ffn_norm", "output"});

// GPT-2 (HF GPT2LMHeadModel): Conv1D weights are stored [in, out]; llama.cpp's converter
// transposes them to [out, in]. The classifier is tied unless the config unties it.
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
     {D::Hidden, D::Hidden3}, "n_embd", T::Transpose, false, false},
    {"attn_qkv_b", "transformer.h.{L}.attn.c_attn.bias", nullptr, "blk.{L}.attn_qkv.bias", true, {D::Hidden3},
     "n_embd", T::None, false, false},
    {"attn_output", "transformer.h.{L}.attn.c_proj.weight", nullptr, "blk.{L}.attn_output.weight", true,
     {D::Hidden, D::Hidden}, "n_embd", T::Transpose, false, false},
    {"attn_output_b", "transformer.h.{L}.attn.c_proj.bias", nullptr, "blk.{L}.attn_output.bias", true, {D::Hidden},
     "n_embd", T::None, false, false},
    {"ffn_norm", "transformer.h.{L}.ln_2.weight", nullptr, "blk.{L}.ffn_norm.weight", true, {D::Hidden}, "n_embd",
     T::None, true, false},
    {"ffn_norm_b", "transformer.h.{L}.ln_2.bias", nullptr, "blk.{L}.ffn_norm.bias", true, {D::Hidden}, "n_embd",
     T::None, true, false},
    {"ffn_up", "transformer.h.{L}.mlp.c_fc.weight", nullptr, "blk.{L}.ffn_up.weight", true, {D::Hidden, D::Ffn},
     "n_embd x n_inner", T::Transpose, false, false},
    {"ffn_up_b", "transformer.h.{L}.mlp.c_fc.bias", nullptr, "blk.{L}.ffn_up.bias", true, {D::Ffn}, "n_inner",
     T::None, false, false},
    {"ffn_down", "transformer.h.{L}.mlp.c_proj.weight", nullptr, "blk.{L}.ffn_down.weight", true, {D::Ffn, D::Hidden},
     "n_inner x n_embd", T::Transpose, false, false},
    {"ffn_down_b", "transformer.h.{L}.mlp.c_proj.bias", nullptr, "blk.{L}.ffn_down.bias", true, {D::Hidden},
     "n_embd", T::None, false, false},
    {"output_norm", "transformer.ln_f.weight", nullptr, "output_norm.weight", false, {D::Hidden}, "n_embd", T::None,
     true, false},
    {"output_norm_b", "transformer.ln_f.bias", nullptr, "output_norm.bias", false, {D::Hidden}, "n_embd", T::None,
     true, false},
    {"output", "lm_head.weight", nullptr, "output.weight", false, {D::Vocab, D::Hidden}, "vocab_size x n_embd",
     T::None, false, true},
};

ArchCompute compute(NormKind norm, Activation act, bool gated, RopeKind rope, bool scale_embeddings = false,
                    int swa_period = 0, int64_t query_scale_hidden_layers = 0) {
  ArchCompute c;
  c.norm = norm;
  c.act = act;
  c.gated = gated;
  c.rope = rope;
  c.scale_embeddings = scale_embeddings;
  c.swa_period = swa_period;
  c.query_scale_hidden_layers = query_scale_hidden_layers;
  return c;
}

using N = NormKind;
using A = Activation;
using R = RopeKind;

// One row per family. leap: LEAP's engine runs it (else leap_why_not says what it lacks);
// tied_by_default: tie_word_embeddings when config.json does not say; ignorable: substrings of
// source tensors that carry nothing.
const std::vector<ArchFamily> kFamilies = {
    {.name = "llama", .architectures = {"LlamaForCausalLM", "MistralForCausalLM"}, .model_types = {"llama", "mistral"},
     .leap = true, .compute = compute(N::Rms, A::Silu, true, R::Interleaved),
     .roles = llama_roles(T::RopeHeads, T::RopeKvHeads), .ignorable = {"rotary_emb.inv_freq"}, .gguf_keys = llama_keys},
    {.name = "qwen2", .architectures = {"Qwen2ForCausalLM"}, .model_types = {"qwen2"},
     .leap_why_not = "LEAP's engine has no biases on q, k and v (Qwen2 has them)",
     .compute = compute(N::Rms, A::Silu, true, R::Neox), .roles = kQwen2Roles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = qwen2_keys},
    {.name = "qwen3", .architectures = {"Qwen3ForCausalLM"}, .model_types = {"qwen3"},
     .leap_why_not = "LEAP's engine has no per-head q/k norms (Qwen3 has them) and no head_dim of its own",
     .compute = compute(N::Rms, A::Silu, true, R::Neox), .roles = kQwen3Roles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = qwen3_keys},
    {.name = "gpt2", .architectures = {"GPT2LMHeadModel"}, .model_types = {"gpt2"},
     .leap_why_not = "GPT-2 (LayerNorm with biases, learned positions, GELU, fused qkv) is not a Llama-family model",
     .tied_by_default = true, .compute = compute(N::Layer, A::GeluTanh, false, R::None), .roles = kGpt2Roles,
     .ignorable = {".attn.bias", ".attn.masked_bias"},  // GPT2Attention's causal-mask buffers (older saves)
     .headless_prefix = "transformer.", .gguf_keys = gpt2_keys},
    {.name = "phi3", .architectures = {"Phi3ForCausalLM"}, .model_types = {"phi3"},
     .leap_why_not = "LEAP's engine has no fused qkv / gate_up projections and no partial rotary (Phi-3 has them)",
     .compute = compute(N::Rms, A::Silu, true, R::Neox), .roles = kPhi3Roles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = phi3_keys},
    {.name = "gemma2", .architectures = {"Gemma2ForCausalLM"}, .model_types = {"gemma2"},
     .leap_why_not = "LEAP's engine has no post-norms, soft-capping, sliding window or GELU (Gemma 2 has them)",
     .tied_by_default = true, .compute = compute(N::Rms, A::GeluTanh, true, R::Neox, true, 2, 46), .roles = kGemma2Roles,
     .ignorable = {"rotary_emb.inv_freq", "lm_head.weight"}, .gguf_keys = gemma2_keys},
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

const TensorRole* find_role(const ArchFamily& f, const char* role) {
  for (const TensorRole& r : f.roles)
    if (std::string(r.role) == role) return &r;
  return nullptr;
}

const TensorRole& role_of(const ArchFamily& f, const char* role) {
  if (const TensorRole* r = find_role(f, role)) return *r;
  throw ConvertError(std::string("internal: family ") + f.name + " has no tensor role " + role);
}

std::string leap_architecture_list() {
  std::string s;
  for (const ArchFamily& f : kFamilies)
    if (f.leap)
      for (const char* a : f.architectures) s += (s.empty() ? "" : ", ") + std::string(a);
  return s;
}

std::string role_name(const char* pattern, int64_t layer, int64_t expert) {
  if (!pattern) return "";
  std::string s = pattern;
  for (const auto& [ph, v] : {std::pair{"{L}", layer}, std::pair{"{E}", expert}})
    if (const size_t at = s.find(ph); at != std::string::npos) s.replace(at, 3, std::to_string(v));
  return s;
}

// The number a name has where a pattern has a placeholder: digits, no leading 0, at most 9.
static bool placeholder_number(const std::string& digits, int64_t* out) {
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return false;
  for (char ch : digits)
    if (ch < '0' || ch > '9') return false;
  *out = std::stoll(digits);
  return true;
}

int64_t match_role_name(const char* pattern, const std::string& name, int64_t* expert) {
  if (!pattern) return -1;
  if (expert) *expert = 0;
  // The pattern's literal pieces between its placeholders ({L}, {E}, in the order they come)
  // must be the name's, in order; what lies between them is each placeholder's number.
  std::vector<std::string> pieces(1);
  std::vector<char> holders;
  const std::string p = pattern;
  for (size_t i = 0; i < p.size();) {
    if (p.compare(i, 3, "{L}") == 0 || p.compare(i, 3, "{E}") == 0) {
      holders.push_back(p[i + 1]);
      pieces.emplace_back();
      i += 3;
    } else {
      pieces.back() += p[i++];
    }
  }
  if (holders.empty()) return p == name ? 0 : -1;
  if (name.compare(0, pieces[0].size(), pieces[0]) != 0) return -1;
  size_t at = pieces[0].size();
  int64_t layer = 0;
  for (size_t k = 0; k < holders.size(); ++k) {
    const std::string& next = pieces[k + 1];
    // the last piece ends the name; the others follow the number at their first occurrence
    const size_t end = k + 1 == holders.size()
                           ? (name.size() >= next.size() + at && name.compare(name.size() - next.size(), next.size(), next) == 0
                                  ? name.size() - next.size()
                                  : std::string::npos)
                           : name.find(next, at);
    int64_t v = 0;
    if (end == std::string::npos || end < at || !placeholder_number(name.substr(at, end - at), &v)) return -1;
    if (holders[k] == 'L') layer = v;
    else if (expert) *expert = v;
    at = end + next.size();
  }
  return layer;
}

// The role's name without the family's headless prefix, or "" when it has none to drop.
static std::string headless_name(const ArchFamily& f, const TensorRole& r) {
  if (!f.headless_prefix || !r.hf) return "";
  const std::string hf = r.hf, p = f.headless_prefix;
  return hf.compare(0, p.size(), p) == 0 ? hf.substr(p.size()) : "";
}

int64_t match_source_name(const ArchFamily& f, const TensorRole& r, const std::string& name) {
  const int64_t l = match_role_name(r.hf, name);
  if (l >= 0) return l;
  const std::string headless = headless_name(f, r);
  return headless.empty() ? -1 : match_role_name(headless.c_str(), name);
}

const TensorRole* source_role(const ArchFamily& f, const std::string& name, int64_t* layer) {
  for (const TensorRole& r : f.roles)
    if ((*layer = match_source_name(f, r, name)) >= 0) return &r;
  return nullptr;
}

std::string source_name(const ArchFamily& f, const TensorRole& r, int64_t layer, bool headless) {
  const std::string h = headless ? headless_name(f, r) : "";
  return role_name(h.empty() ? r.hf : h.c_str(), layer);
}

const TensorRef* find_source(const Checkpoint& ck, const ArchFamily& f, const TensorRole& r, int64_t layer) {
  if (const TensorRef* t = ck.find(role_name(r.hf, layer))) return t;
  const std::string headless = headless_name(f, r);
  return headless.empty() ? nullptr : ck.find(role_name(headless.c_str(), layer));
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
    case Dim::HeadDim: return head_dim;
    case Dim::Qkv: return q + 2 * kv;
    case Dim::Ffn2: return 2 * ffn;
  }
  return 0;
}

std::vector<int64_t> ArchDims::shape(const std::vector<Dim>& rule) const {
  std::vector<int64_t> s;
  for (Dim d : rule) s.push_back(of(d));
  return s;
}

}  // namespace leapconv
