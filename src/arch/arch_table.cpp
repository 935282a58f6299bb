#include "arch/arch_table.h"

#include <cstring>

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
// proj_t: the other projections' (BitNet's ternarization).
std::vector<TensorRole> llama_roles(Transform q_t, Transform k_t, Transform norm_t = T::None, Transform proj_t = T::None) {
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
                 {D::V, D::Hidden}, "num_key_value_heads x head_dim", proj_t),
      layer_role("attn_output", "model.layers.{L}.self_attn.o_proj.weight", "layers.{L}.wo",
                 "blk.{L}.attn_output.weight", {D::Hidden, D::Q}, "num_attention_heads x head_dim", proj_t),
      layer_role("ffn_gate", "model.layers.{L}.mlp.gate_proj.weight", "layers.{L}.w1", "blk.{L}.ffn_gate.weight",
                 {D::Ffn, D::Hidden}, "intermediate_size", proj_t),
      layer_role("ffn_down", "model.layers.{L}.mlp.down_proj.weight", "layers.{L}.w2", "blk.{L}.ffn_down.weight",
                 {D::Hidden, D::Ffn}, "intermediate_size", proj_t),
      layer_role("ffn_up", "model.layers.{L}.mlp.up_proj.weight", "layers.{L}.w3", "blk.{L}.ffn_up.weight",
                 {D::Ffn, D::Hidden}, "intermediate_size", proj_t),
      {"output", "lm_head.weight", "output", "output.weight", false, {D::Vocab, D::Hidden}, "vocab x hidden_size",
       T::None, false, true},
  };
}

// roles without those named in `drop`, then extra (a role extra redefines is named in drop too)
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

// Biases on q, k and v (Qwen2, GLM-4).
const std::vector<TensorRole> kQkvBiases = {
    layer_role("attn_q_b", "model.layers.{L}.self_attn.q_proj.bias", nullptr, "blk.{L}.attn_q.bias", {D::Q},
               "num_attention_heads x head_dim"),
    layer_role("attn_k_b", "model.layers.{L}.self_attn.k_proj.bias", nullptr, "blk.{L}.attn_k.bias", {D::Kv},
               "num_key_value_heads x head_dim"),
    layer_role("attn_v_b", "model.layers.{L}.self_attn.v_proj.bias", nullptr, "blk.{L}.attn_v.bias", {D::Kv},
               "num_key_value_heads x head_dim")};

// Qwen2 / Qwen2.5: Llama's tensors plus biases on q, k and v.
const std::vector<TensorRole> kQwen2Roles = with(llama_roles(T::None, T::None), kQkvBiases);

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

// Gemma's sandwich: a norm after attention and after the MLP besides the ones before them (the
// MLP's own named pre_feedforward_layernorm); Gemma 2 and 3 apply every norm weight w as (1 + w).
std::vector<TensorRole> gemma_sandwich_norms(Transform t) {
  return {layer_role("attn_post_norm", "model.layers.{L}.post_attention_layernorm.weight", nullptr,
                     "blk.{L}.post_attention_norm.weight", {D::Hidden}, "hidden_size", t, true),
          layer_role("ffn_norm", "model.layers.{L}.pre_feedforward_layernorm.weight", nullptr,
                     "blk.{L}.ffn_norm.weight", {D::Hidden}, "hidden_size", t, true),
          layer_role("ffn_post_norm", "model.layers.{L}.post_feedforward_layernorm.weight", nullptr,
                     "blk.{L}.post_ffw_norm.weight", {D::Hidden}, "hidden_size", t, true)};
}

// Gemma 2: Llama's tensors with the sandwich norms (the file holds 1 + w), the classifier always
// the embeddings.
const std::vector<TensorRole> kGemma2Roles =
    with(llama_roles(T::None, T::None, T::NormPlusOne), gemma_sandwich_norms(T::NormPlusOne), {"ffn_norm", "output"});

// Gemma 1: Llama's tensors, every norm weight w applied as (1 + w), the classifier always the
// embeddings (GemmaModel drops an lm_head.weight).
const std::vector<TensorRole> kGemmaRoles = with(llama_roles(T::None, T::None, T::NormPlusOne), {}, {"output"});

// Gemma 3: Gemma 2's norms plus an RMSNorm of every q and k head (all with the +1), and an
// lm_head.weight when the checkpoint has one and the config unties it (Gemma3Model maps it to
// output.weight; a tied checkpoint as transformers saves it has none).
const std::vector<TensorRole> kGemma3Roles = with(
    llama_roles(T::None, T::None, T::NormPlusOne),
    with(gemma_sandwich_norms(T::NormPlusOne),
         {layer_role("attn_q_norm", "model.layers.{L}.self_attn.q_norm.weight", nullptr, "blk.{L}.attn_q_norm.weight",
                     {D::HeadDim}, "head_dim", T::NormPlusOne, true),
          layer_role("attn_k_norm", "model.layers.{L}.self_attn.k_norm.weight", nullptr, "blk.{L}.attn_k_norm.weight",
                     {D::HeadDim}, "head_dim", T::NormPlusOne, true)}),
    {"ffn_norm"});

// Gemma 4: Gemma 3's tensors with the norms as they are (its RMSNorm multiplies by w, not 1 + w;
// Gemma4Model.norm_shift is 0), per-layer sizes (sliding and full layers' heads, D::V 0 where a
// full layer's keys are its values), the per-layer inputs (a second embedding of layers x Ple
// per token, projected from the hidden state too, and gated into each layer's output: none when
// hidden_size_per_layer_input is 0) and a scalar per layer (layer_scalar: a buffer, no ".weight").
const std::vector<TensorRole> kGemma4Roles = with(
    with(llama_roles(T::None, T::None), gemma_sandwich_norms(T::None), {"ffn_norm"}),
    {layer_role("attn_q_norm", "model.layers.{L}.self_attn.q_norm.weight", nullptr, "blk.{L}.attn_q_norm.weight",
                {D::HeadDim}, "head_dim (global_head_dim in full layers)", T::None, true),
     layer_role("attn_k_norm", "model.layers.{L}.self_attn.k_norm.weight", nullptr, "blk.{L}.attn_k_norm.weight",
                {D::KHeadDim}, "head_dim (global_head_dim in full layers)", T::None, true),
     {"per_layer_token_embd", "model.embed_tokens_per_layer.weight", nullptr, "per_layer_token_embd.weight", false,
      {D::Vocab, D::PleAll}, "vocab_size_per_layer_input x (num_hidden_layers x hidden_size_per_layer_input)",
      T::None, false, false},
     {"per_layer_model_proj", "model.per_layer_model_projection.weight", nullptr, "per_layer_model_proj.weight",
      false, {D::PleAll, D::Hidden}, "(num_hidden_layers x hidden_size_per_layer_input) x hidden_size", T::None,
      false, false},
     {"per_layer_proj_norm", "model.per_layer_projection_norm.weight", nullptr, "per_layer_proj_norm.weight", false,
      {D::Ple}, "hidden_size_per_layer_input", T::None, true, false},
     layer_role("inp_gate", "model.layers.{L}.per_layer_input_gate.weight", nullptr, "blk.{L}.inp_gate.weight",
                {D::Ple, D::Hidden}, "hidden_size_per_layer_input x hidden_size"),
     layer_role("proj", "model.layers.{L}.per_layer_projection.weight", nullptr, "blk.{L}.proj.weight",
                {D::Hidden, D::Ple}, "hidden_size x hidden_size_per_layer_input"),
     layer_role("post_norm", "model.layers.{L}.post_per_layer_input_norm.weight", nullptr, "blk.{L}.post_norm.weight",
                {D::PleHidden}, "hidden_size", T::None, true),
     layer_role("layer_output_scale", "model.layers.{L}.layer_scalar", nullptr, "blk.{L}.layer_output_scale.weight",
                {D::One}, "one number", T::None, true)});

// A mixture-of-experts layer's router (one row per expert) and experts (one tensor per expert in
// Hugging Face, stacked in GGUF), the experts in the order the family's converter stacks them
// when the last of a layer's arrives: {role, Hugging Face name of expert {E}} (shape: one expert's).
TensorRole router_role(const char* hf) {
  return layer_role("ffn_gate_inp", hf, nullptr, "blk.{L}.ffn_gate_inp.weight", {D::Experts, D::Hidden},
                    "num_experts x hidden_size");
}
std::vector<TensorRole> expert_roles(const char* router, std::vector<std::pair<const char*, const char*>> experts) {
  std::vector<TensorRole> out = {router_role(router)};
  for (const auto& [role, hf] : experts) {
    const bool down = std::string(role) == "ffn_down_exps";
    out.push_back(layer_role(role, hf, nullptr, down ? "blk.{L}.ffn_down_exps.weight"
                                                : std::string(role) == "ffn_gate_exps" ? "blk.{L}.ffn_gate_exps.weight"
                                                                                       : "blk.{L}.ffn_up_exps.weight",
                             down ? std::vector<Dim>{D::Hidden, D::ExpFfn} : std::vector<Dim>{D::ExpFfn, D::Hidden},
                             "one expert: moe_intermediate_size (else intermediate_size) x hidden_size"));
  }
  return out;
}

// Mixtral (LlamaModel.modify_tensors): block_sparse_moe's router and experts w1 (gate), w2 (down),
// w3 (up), stacked in that order.
const std::vector<TensorRole> kMixtralExperts =
    expert_roles("model.layers.{L}.block_sparse_moe.gate.weight",
                 {{"ffn_gate_exps", "model.layers.{L}.block_sparse_moe.experts.{E}.w1.weight"},
                  {"ffn_down_exps", "model.layers.{L}.block_sparse_moe.experts.{E}.w2.weight"},
                  {"ffn_up_exps", "model.layers.{L}.block_sparse_moe.experts.{E}.w3.weight"}});

// One expert's NVFP4 weight as ModelOpt saves Gemma 4's (each expert its own Linear), merged by
// the converter into ffn_gate_exps / ffn_up_exps / ffn_down_exps (no fused gate and up).
TensorRole nvfp4_expert(const char* role, const char* hf) {
  const bool down = std::string(role) == "ffn_down_exps";
  TensorRole r = layer_role(role, hf, nullptr, down ? "blk.{L}.ffn_down_exps.weight" : std::string(role) == "ffn_gate_exps"
                                                     ? "blk.{L}.ffn_gate_exps.weight" : "blk.{L}.ffn_up_exps.weight",
                            down ? std::vector<Dim>{D::Hidden, D::ExpFfn} : std::vector<Dim>{D::ExpFfn, D::Hidden},
                            "one expert: moe_intermediate_size x hidden_size (NVFP4)");
  r.optional = true;
  r.nvfp4_only = true;
  return r;
}

// Gemma 4's mixture (26B-A4B: Gemma4Model): Gemma 4's tensors, and in every layer beside its
// dense MLP (post-normed by post_feedforward_layernorm_1) a router (router.proj, over the input
// RMS-normed without a weight, times hidden^-1/2 and router.scale) and the experts as they ship,
// gate and up fused in one 3-D tensor (kept fused: ffn_gate_up_exps), pre- and post-normed by
// their own norms, each expert's output times its router.per_expert_scale (ffn_down_exps.scale).
// The experts' tensors have no ".weight" (parameters of the experts module).
const std::vector<TensorRole> kGemma4MoeRoles = with(
    kGemma4Roles,
    {router_role("model.layers.{L}.router.proj.weight"),
     layer_role("ffn_gate_inp_s", "model.layers.{L}.router.scale", nullptr, "blk.{L}.ffn_gate_inp.scale", {D::Hidden},
                "hidden_size", T::None, true),
     layer_role("ffn_down_exps_s", "model.layers.{L}.router.per_expert_scale", nullptr, "blk.{L}.ffn_down_exps.scale",
                {D::Experts}, "num_experts", T::None, true),
     layer_role("ffn_gate_up_exps", "model.layers.{L}.experts.gate_up_proj", nullptr, "blk.{L}.ffn_gate_up_exps.weight",
                {D::Experts, D::ExpFfn2, D::Hidden}, "num_experts x 2 moe_intermediate_size x hidden_size"),
     layer_role("ffn_down_exps", "model.layers.{L}.experts.down_proj", nullptr, "blk.{L}.ffn_down_exps.weight",
                {D::Experts, D::Hidden, D::ExpFfn}, "num_experts x hidden_size x moe_intermediate_size"),
     layer_role("ffn_pre_norm_2", "model.layers.{L}.pre_feedforward_layernorm_2.weight", nullptr,
                "blk.{L}.pre_ffw_norm_2.weight", {D::Hidden}, "hidden_size", T::None, true),
     layer_role("ffn_post_norm_1", "model.layers.{L}.post_feedforward_layernorm_1.weight", nullptr,
                "blk.{L}.post_ffw_norm_1.weight", {D::Hidden}, "hidden_size", T::None, true),
     layer_role("ffn_post_norm_2", "model.layers.{L}.post_feedforward_layernorm_2.weight", nullptr,
                "blk.{L}.post_ffw_norm_2.weight", {D::Hidden}, "hidden_size", T::None, true),
     nvfp4_expert("ffn_gate_exps", "model.layers.{L}.experts.{E}.gate_proj.weight"),
     nvfp4_expert("ffn_up_exps", "model.layers.{L}.experts.{E}.up_proj.weight"),
     nvfp4_expert("ffn_down_exps", "model.layers.{L}.experts.{E}.down_proj.weight")});

// Qwen2-MoE, Qwen3-MoE, OLMoE (Qwen2MoeModel.modify_tensors and its copies): mlp.gate routes,
// mlp.experts.{E}.*_proj stacked down, gate, up.
const std::vector<TensorRole> kQwenMoeExperts =
    expert_roles("model.layers.{L}.mlp.gate.weight",
                 {{"ffn_down_exps", "model.layers.{L}.mlp.experts.{E}.down_proj.weight"},
                  {"ffn_gate_exps", "model.layers.{L}.mlp.experts.{E}.gate_proj.weight"},
                  {"ffn_up_exps", "model.layers.{L}.mlp.experts.{E}.up_proj.weight"}});

// Qwen2-MoE: Qwen2's attention (biases on q, k and v), every layer a mixture plus one shared
// expert (an MLP of shared_expert_intermediate_size) added times sigmoid(shared_expert_gate x).
const std::vector<TensorRole> kQwen2MoeRoles = with(
    llama_roles(T::None, T::None),
    with(with(kQkvBiases, kQwenMoeExperts),
         {layer_role("ffn_gate_shexp", "model.layers.{L}.mlp.shared_expert.gate_proj.weight", nullptr,
                     "blk.{L}.ffn_gate_shexp.weight", {D::ShexpFfn, D::Hidden}, "shared_expert_intermediate_size x hidden_size"),
          layer_role("ffn_up_shexp", "model.layers.{L}.mlp.shared_expert.up_proj.weight", nullptr,
                     "blk.{L}.ffn_up_shexp.weight", {D::ShexpFfn, D::Hidden}, "shared_expert_intermediate_size x hidden_size"),
          layer_role("ffn_down_shexp", "model.layers.{L}.mlp.shared_expert.down_proj.weight", nullptr,
                     "blk.{L}.ffn_down_shexp.weight", {D::Hidden, D::ShexpFfn}, "hidden_size x shared_expert_intermediate_size"),
          layer_role("ffn_gate_inp_shexp", "model.layers.{L}.mlp.shared_expert_gate.weight", nullptr,
                     "blk.{L}.ffn_gate_inp_shexp.weight", {D::ShexpOne, D::Hidden}, "1 x hidden_size")}),
    {"ffn_gate", "ffn_down", "ffn_up"});

// Qwen3-MoE: Qwen3's attention (per-head q/k norms), every layer a mixture.
const std::vector<TensorRole> kQwen3MoeRoles = with(kQwen3Roles, kQwenMoeExperts, {"ffn_gate", "ffn_down", "ffn_up"});

// OLMoE: Llama's attention with an RMSNorm of the whole q and k projections (OLMo 2's), every
// layer a mixture.
const std::vector<TensorRole> kOlmoeRoles = with(
    llama_roles(T::None, T::None),
    with({layer_role("attn_q_norm", "model.layers.{L}.self_attn.q_norm.weight", nullptr, "blk.{L}.attn_q_norm.weight",
                     {D::Q}, "num_attention_heads x head_dim", T::None, true),
          layer_role("attn_k_norm", "model.layers.{L}.self_attn.k_norm.weight", nullptr, "blk.{L}.attn_k_norm.weight",
                     {D::Kv}, "num_key_value_heads x head_dim", T::None, true)},
         kQwenMoeExperts),
    {"ffn_gate", "ffn_down", "ffn_up"});

// gpt-oss (GptOssModel): Llama's attention with biases on every projection and a learned sink
// logit per head, the pre-MoE norm named post_attention_layernorm (GGUF: post_attention_norm), a
// router with a bias, and the experts as they ship: MXFP4 blocks and scales, gate and up
// interleaved row by row in gate_up_proj (even rows gate), with biases (gate_up's interleaved
// value by value).
const std::vector<TensorRole> kGptOssRoles = with(
    llama_roles(T::None, T::None),
    with(kQkvBiases,
         {layer_role("attn_output_b", "model.layers.{L}.self_attn.o_proj.bias", nullptr, "blk.{L}.attn_output.bias",
                     {D::Hidden}, "hidden_size"),
          layer_role("attn_sinks", "model.layers.{L}.self_attn.sinks", nullptr, "blk.{L}.attn_sinks.weight", {D::Heads},
                     "num_attention_heads", T::None, true),
          layer_role("ffn_norm", "model.layers.{L}.post_attention_layernorm.weight", nullptr,
                     "blk.{L}.post_attention_norm.weight", {D::Hidden}, "hidden_size", T::None, true),
          router_role("model.layers.{L}.mlp.router.weight"),
          layer_role("ffn_gate_inp_b", "model.layers.{L}.mlp.router.bias", nullptr, "blk.{L}.ffn_gate_inp.bias",
                     {D::Experts}, "num_local_experts"),
          layer_role("ffn_down_exps", "model.layers.{L}.mlp.experts.down_proj_blocks", nullptr,
                     "blk.{L}.ffn_down_exps.weight", {D::Experts, D::Hidden, D::ExpFfn},
                     "num_local_experts x hidden_size x intermediate_size (MXFP4)", T::Mxfp4),
          layer_role("ffn_gate_exps", "model.layers.{L}.mlp.experts.gate_up_proj_blocks", nullptr,
                     "blk.{L}.ffn_gate_exps.weight", {D::Experts, D::ExpFfn, D::Hidden},
                     "num_local_experts x 2 intermediate_size x hidden_size (MXFP4)", T::Mxfp4EvenRows),
          layer_role("ffn_up_exps", "model.layers.{L}.mlp.experts.gate_up_proj_blocks", nullptr,
                     "blk.{L}.ffn_up_exps.weight", {D::Experts, D::ExpFfn, D::Hidden},
                     "num_local_experts x 2 intermediate_size x hidden_size (MXFP4)", T::Mxfp4OddRows),
          layer_role("ffn_down_exps_b", "model.layers.{L}.mlp.experts.down_proj_bias", nullptr,
                     "blk.{L}.ffn_down_exps.bias", {D::Experts, D::Hidden}, "num_local_experts x hidden_size"),
          layer_role("ffn_gate_exps_b", "model.layers.{L}.mlp.experts.gate_up_proj_bias", nullptr,
                     "blk.{L}.ffn_gate_exps.bias", {D::Experts, D::ExpFfn}, "num_local_experts x 2 intermediate_size",
                     T::EvenCols),
          layer_role("ffn_up_exps_b", "model.layers.{L}.mlp.experts.gate_up_proj_bias", nullptr,
                     "blk.{L}.ffn_up_exps.bias", {D::Experts, D::ExpFfn}, "num_local_experts x 2 intermediate_size",
                     T::OddCols)}),
    {"ffn_norm", "ffn_gate", "ffn_down", "ffn_up"});

// OLMo 2 / OLMo 3: no norm before attention or the MLP, one after each (on the branch, before
// the residual add), and an RMSNorm of the whole q and k projections (not per head).
const std::vector<TensorRole> kOlmo2Roles = with(
    llama_roles(T::None, T::None),
    {layer_role("attn_q_norm", "model.layers.{L}.self_attn.q_norm.weight", nullptr, "blk.{L}.attn_q_norm.weight",
                {D::Q}, "num_attention_heads x head_dim", T::None, true),
     layer_role("attn_k_norm", "model.layers.{L}.self_attn.k_norm.weight", nullptr, "blk.{L}.attn_k_norm.weight",
                {D::Kv}, "num_key_value_heads x head_dim", T::None, true),
     layer_role("attn_post_norm", "model.layers.{L}.post_attention_layernorm.weight", nullptr,
                "blk.{L}.post_attention_norm.weight", {D::Hidden}, "hidden_size", T::None, true),
     layer_role("ffn_post_norm", "model.layers.{L}.post_feedforward_layernorm.weight", nullptr,
                "blk.{L}.post_ffw_norm.weight", {D::Hidden}, "hidden_size", T::None, true)},
    {"attn_norm", "ffn_norm"});

// GLM-4 (0414): norms before and after attention and the MLP, biases on q, k and v, gate and up
// fused in gate_up_proj (llama.cpp takes it as ffn_up: gate rows, then up rows). Its rotary
// pairs are interleaved in Hugging Face already: nothing is permuted.
const std::vector<TensorRole> kGlm4Roles = with(
    llama_roles(T::None, T::None),
    with(kQkvBiases,
         {layer_role("attn_post_norm", "model.layers.{L}.post_self_attn_layernorm.weight", nullptr,
                     "blk.{L}.post_attention_norm.weight", {D::Hidden}, "hidden_size", T::None, true),
          layer_role("ffn_up", "model.layers.{L}.mlp.gate_up_proj.weight", nullptr, "blk.{L}.ffn_up.weight",
                     {D::Ffn2, D::Hidden}, "2 x intermediate_size"),
          layer_role("ffn_post_norm", "model.layers.{L}.post_mlp_layernorm.weight", nullptr,
                     "blk.{L}.post_ffw_norm.weight", {D::Hidden}, "hidden_size", T::None, true)}),
    {"ffn_gate", "ffn_up"});

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

using N = NormKind;
using A = Activation;
using R = RopeKind;

// Gemma 4 as llama.cpp's gemma4 runs it; its mixture (26B-A4B) renormalises the chosen experts' weights.
ArchCompute gemma4_compute(bool mixture) {
  ArchCompute c{.act = A::GeluTanh, .scale_embeddings = true, .swa_base_default = 10000, .swa_from_pattern_key = true,
                .unscaled_queries = true, .v_norm = true, .rope_freqs_full_layers_only = true, .default_final_softcap = 30};
  c.moe_norm_weights = mixture;
  return c;
}

// BitNet b1.58 (1bitLLM's BitnetForCausalLM): Llama's tensors, q and k not permuted (BitnetModel
// is a TextModel; llama.cpp runs bitnet with NEOX RoPE, Hugging Face's rotate-half), every projection
// ternarized, an RMSNorm inside attention (before o_proj) and inside the MLP (before down_proj),
// the classifier always the embeddings (llama.cpp's bitnet has no output.weight; the converter
// cannot map an lm_head.weight).
const std::vector<TensorRole> kBitnetRoles = with(
    llama_roles(T::Ternary, T::Ternary, T::None, T::Ternary),
    {layer_role("attn_sub_norm", "model.layers.{L}.self_attn.inner_attn_ln.weight", nullptr,
                "blk.{L}.attn_sub_norm.weight", {D::Hidden}, "hidden_size", T::None, true),
     layer_role("ffn_sub_norm", "model.layers.{L}.mlp.ffn_layernorm.weight", nullptr, "blk.{L}.ffn_sub_norm.weight",
                {D::Ffn}, "intermediate_size", T::None, true)},
    {"output"});

// One row per family. leap: LEAP's engine runs it (else leap_why_not says what it lacks);
// tied_by_default: tie_word_embeddings when config.json does not say (its config class's
// default); ignorable: substrings of source tensors that carry nothing.
const std::vector<ArchFamily> kFamilies = {
    {.name = "llama", .architectures = {"LlamaForCausalLM", "MistralForCausalLM"}, .model_types = {"llama", "mistral"},
     .leap = true, .compute = {.rope = R::Interleaved},
     .roles = llama_roles(T::RopeHeads, T::RopeKvHeads), .ignorable = {"rotary_emb.inv_freq"}, .gguf_keys = llama_keys, .space_prefix = SpacePrefixKey::TokenizerConfigFirst,
     .examples = "Llama 2, Llama 3.x, Mistral 7B, TinyLlama",
     .refuses = "rope scaling other than linear, yarn and llama3 (llama.cpp runs no other for llama)"},
    {.name = "qwen2", .architectures = {"Qwen2ForCausalLM"}, .model_types = {"qwen2"},
     .leap_why_not = "LEAP's engine has no biases on q, k and v (Qwen2 has them)",
     .compute = {}, .roles = kQwen2Roles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = qwen2_keys, .examples = "Qwen2, Qwen2.5",
     .refuses = "use_sliding_window (llama.cpp's qwen2 attends to every position)"},
    {.name = "qwen3", .architectures = {"Qwen3ForCausalLM"}, .model_types = {"qwen3"},
     .leap_why_not = "LEAP's engine has no per-head q/k norms (Qwen3 has them) and no head_dim of its own",
     .compute = {}, .roles = kQwen3Roles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = qwen3_keys, .examples = "Qwen3 (dense)",
     .refuses = "biases on the attention projections and sliding layers (llama.cpp's qwen3 has neither)"},
    {.name = "gpt2", .architectures = {"GPT2LMHeadModel"}, .model_types = {"gpt2"},
     .leap_why_not = "GPT-2 (LayerNorm with biases, learned positions, GELU, fused qkv) is not a Llama-family model",
     .tied_by_default = true, .compute = {.norm = N::Layer, .act = A::GeluTanh, .gated = false, .rope = R::None},
     .roles = kGpt2Roles,
     .ignorable = {".attn.bias", ".attn.masked_bias"},  // GPT2Attention's causal-mask buffers (older saves)
     .headless_prefix = "transformer.", .gguf_keys = gpt2_keys, .examples = "GPT-2 (openai-community/gpt2)",
     .refuses = "activations other than GELU; scale_attn_weights false; scale_attn_by_inverse_layer_idx (llama.cpp scales by 1/sqrt(head_dim) only)"},
    {.name = "phi3", .architectures = {"Phi3ForCausalLM"}, .model_types = {"phi3"},
     .leap_why_not = "LEAP's engine has no fused qkv / gate_up projections and no partial rotary (Phi-3 has them)",
     .compute = {}, .roles = kPhi3Roles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = phi3_keys, .examples = "Phi-3 mini / medium, Phi-3.5-mini, Phi-4-mini (longrope)",
     .refuses = "a head_dim other than hidden / heads; rope scaling other than longrope; an attention_factor other than the one the converter derives"},
    {.name = "gemma2", .architectures = {"Gemma2ForCausalLM"}, .model_types = {"gemma2"},
     .leap_why_not = "LEAP's engine has no post-norms, soft-capping, sliding window or GELU (Gemma 2 has them)",
     .tied_by_default = true,
     .compute = {.act = A::GeluTanh, .scale_embeddings = true, .swa_period = 2, .default_window = 4096,
                 .swa_rope_scaled = true, .query_scale_hidden_layers = 46},
     .roles = kGemma2Roles, .ignorable = {"rotary_emb.inv_freq", "lm_head.weight"}, .gguf_keys = gemma2_keys, .space_prefix = SpacePrefixKey::FalseLast,
     .examples = "Gemma 2",
     .refuses = "untied output; a query_pre_attn_scalar llama.cpp does not derive; rope scaling; layer types other than alternating sliding / full"},
    {.name = "gemma", .architectures = {"GemmaForCausalLM"}, .model_types = {"gemma"},
     .leap_why_not = "LEAP's engine has no GELU and no embedding scale (Gemma has them)", .tied_by_default = true,
     .compute = {.act = A::GeluTanh, .scale_embeddings = true}, .roles = kGemmaRoles,
     .ignorable = {"rotary_emb.inv_freq", "lm_head.weight"}, .gguf_keys = gemma_keys, .space_prefix = SpacePrefixKey::FalseLast, .default_specials = {{.type = "eot", .id = 107}}, .examples = "Gemma (1), CodeGemma",
     .refuses = "untied output; rope scaling or a rope_theta other than 10000 (the converter writes no base)"},
    {.name = "gemma3", .architectures = {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"},
     .model_types = {"gemma3", "gemma3_text"},
     .leap_why_not = "LEAP's engine has no post-norms, q/k norms, sliding window or GELU (Gemma 3 has them)",
     .tied_by_default = true,
     .compute = {.act = A::GeluTanh, .scale_embeddings = true, .swa_period = 6, .swa_base_default = 10000,
                 .query_scale_hidden_layers = 62},
     .roles = kGemma3Roles, .ignorable = {"rotary_emb.inv_freq"}, .gguf_keys = gemma3_keys, .space_prefix = SpacePrefixKey::FalseLast,
     .examples = "Gemma 3 (270M, 1B text; 4B-27B: the language model)",
     .refuses = "attention soft-capping; a query_pre_attn_scalar llama.cpp does not derive; a sliding-window pattern other than 6 (or 1); rope scaling other than linear"},
    {.name = "gemma4", .architectures = {"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"},
     .model_types = {"gemma4", "gemma4_text"},
     .leap_why_not = "LEAP's engine has no per-layer inputs, shared KV layers, per-layer head sizes or GELU (Gemma 4 has them)",
     .tied_by_default = true,
     .compute = gemma4_compute(false), .roles = kGemma4Roles, .ignorable = {"rotary_emb.inv_freq"}, .gguf_keys = gemma4_keys, .dims = gemma4_dims,
     .space_prefix = SpacePrefixKey::FalseLast, .tokenizer_model = "gemma4",
     .examples = "Gemma 4 (E2B, E4B, 31B: the language model)",
     .refuses = "attention soft-capping; shared KV layers whose last unshared layers are not a sliding one, then a full one (llama.cpp's fixed donors); a full-attention rope other than proportional"},
    // Gemma 4's mixture: the same architecture, a second row (find_family: the one with a router
    // when the config names experts).
    {.name = "gemma4", .architectures = {"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"},
     .model_types = {"gemma4", "gemma4_text"},
     .leap_why_not = "LEAP's engine has no mixture of experts, per-layer head sizes or GELU (Gemma 4 has them)",
     .tied_by_default = true,
     .compute = gemma4_compute(true), .roles = kGemma4MoeRoles, .ignorable = {"rotary_emb.inv_freq"}, .gguf_keys = gemma4_keys, .dims = gemma4_dims,
     .space_prefix = SpacePrefixKey::FalseLast, .tokenizer_model = "gemma4",
     .examples = "Gemma 4 26B-A4B (the language model)",
     .refuses = "as Gemma 4; enable_moe_block false beside an expert count"},
    {.name = "smollm3", .architectures = {"SmolLM3ForCausalLM"}, .model_types = {"smollm3"},
     .leap_why_not = "LEAP's engine rotates every layer (SmolLM3 runs every 4th without RoPE)", .tied_by_default = true,
     .compute = {.rope = R::Interleaved, .no_rope_period = 4}, .roles = llama_roles(T::RopeHeads, T::RopeKvHeads),
     .ignorable = {"rotary_emb.inv_freq"}, .gguf_keys = smollm3_keys, .space_prefix = SpacePrefixKey::TokenizerConfigFirst, .examples = "SmolLM3-3B",
     .refuses = "no_rope_layers other than every 4th layer without RoPE (llama.cpp's fixed pattern)"},
    {.name = "granite", .architectures = {"GraniteForCausalLM"}, .model_types = {"granite"},
     .leap_why_not = "LEAP's engine has no embedding, residual, attention and logit multipliers (Granite has them)",
     .compute = {.rope = R::Interleaved}, .roles = llama_roles(T::RopeHeads, T::RopeKvHeads),
     .ignorable = {"rotary_emb.inv_freq"}, .gguf_keys = granite_keys, .space_prefix = SpacePrefixKey::TokenizerConfigFirst, .examples = "Granite 3.x (dense)",
     .refuses = "a head_dim other than hidden / heads"},
    {.name = "olmo2", .architectures = {"Olmo2ForCausalLM", "Olmo3ForCausalLM"}, .model_types = {"olmo2", "olmo3"},
     .leap_why_not = "LEAP's engine has no post-norms and no q/k norms (OLMo 2 has them)",
     .compute = {.swa_period = 4}, .roles = kOlmo2Roles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = olmo2_keys, .examples = "OLMo 2, OLMo 3 (dense)",
     .refuses = "tied embeddings (llama.cpp's olmo2 needs output.weight); OLMo 3 layer types other than three sliding, one full"},
    {.name = "glm4", .architectures = {"Glm4ForCausalLM"}, .model_types = {"glm4"},
     .leap_why_not = "LEAP's engine has no biases, post-norms, fused gate_up or partial rotary (GLM-4 has them)",
     .compute = {.rope = R::Interleaved}, .roles = kGlm4Roles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = glm4_keys,
     .default_specials = {{.type = "eos", .text = "<|endoftext|>"}, {.type = "eot", .text = "<|user|>"},
                          {.type = "unk", .text = "<|endoftext|>"}, {.type = "bos", .text = "<|endoftext|>"}},
     .examples = "GLM-4-9B-0414, GLM-4-32B-0414"},
    {.name = "bitnet", .architectures = {"BitnetForCausalLM", "BitNetForCausalLM"}, .model_types = {"bitnet"},
     .leap_why_not = "LEAP's engine has no sub-norms and no ternary weights (BitNet has them)",
     .tied_by_default = true, .compute = {}, .roles = kBitnetRoles,
     .ignorable = {"rotary_emb.inv_freq"}, .gguf_keys = bitnet_keys, .sentencepiece_only = true,
     .examples = "BitNet b1.58 (1bitLLM's bitnet_b1_58-large, -3B)",
     .refuses = "an activation other than SiLU (llama.cpp's bitnet computes SiLU: 2B4T's relu2), rope scaling, "
                "an lm_head.weight, a folder without tokenizer.model (the converter reads SentencePiece only)"},
    // Mixtral: llama.cpp's llama with experts (one architecture name, two rows: find_family_by_name
    // tells them apart by the experts)
    {.name = "llama", .architectures = {"MixtralForCausalLM"}, .model_types = {"mixtral"},
     .leap_why_not = "LEAP's engine has no mixtures of experts",
     .compute = {.rope = R::Interleaved, .moe_norm_weights = true},
     .roles = with(llama_roles(T::RopeHeads, T::RopeKvHeads), kMixtralExperts, {"ffn_gate", "ffn_down", "ffn_up"}),
     .ignorable = {"rotary_emb.inv_freq"}, .gguf_keys = llama_keys, .space_prefix = SpacePrefixKey::TokenizerConfigFirst,
     .examples = "Mixtral 8x7B, Mixtral 8x22B",
     .refuses = "rope scaling other than linear, yarn and llama3"},
    {.name = "qwen2moe", .architectures = {"Qwen2MoeForCausalLM"}, .model_types = {"qwen2_moe"},
     .leap_why_not = "LEAP's engine has no mixtures of experts",
     .compute = {}, .roles = kQwen2MoeRoles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = qwen2moe_keys, .examples = "Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B",
     .refuses = "norm_topk_prob true (llama.cpp's qwen2moe never renormalises); dense layers (mlp_only_layers, decoder_sparse_step); use_sliding_window"},
    {.name = "qwen3moe", .architectures = {"Qwen3MoeForCausalLM"}, .model_types = {"qwen3_moe"},
     .leap_why_not = "LEAP's engine has no mixtures of experts",
     .compute = {.moe_norm_weights = true}, .roles = kQwen3MoeRoles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = qwen3moe_keys, .examples = "Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B",
     .refuses = "norm_topk_prob false (llama.cpp's qwen3moe always renormalises); dense layers (mlp_only_layers, decoder_sparse_step); use_sliding_window"},
    {.name = "olmoe", .architectures = {"OlmoeForCausalLM"}, .model_types = {"olmoe"},
     .leap_why_not = "LEAP's engine has no mixtures of experts",
     .compute = {}, .roles = kOlmoeRoles, .ignorable = {"rotary_emb.inv_freq"},
     .gguf_keys = olmoe_keys, .examples = "OLMoE-1B-7B",
     .refuses = "norm_topk_prob true; clip_qkv; an rms_norm_eps other than 1e-5 (the converter writes 1e-5); fewer kv heads than heads"},
    {.name = "gpt-oss", .architectures = {"GptOssForCausalLM"}, .model_types = {"gpt_oss"},
     .leap_why_not = "LEAP's engine has no mixtures of experts, attention sinks or MXFP4",
     .compute = {.swa_period = 2, .swa_rope_scaled = true, .moe_softmax_chosen = true, .moe_swiglu_oai = true},
     .roles = kGptOssRoles,
     .ignorable = {"rotary_emb.inv_freq", "_proj_scales"},  // (the MXFP4 scales: read with their blocks)
     .gguf_keys = gpt_oss_keys, .examples = "gpt-oss-20b, gpt-oss-120b (MXFP4 experts kept as they ship)",
     .refuses = "experts not in MXFP4 (a dequantized upload); K-quant presets (llama-quantize will not requantize MXFP4: F16, BF16, Q8_0 and MXFP4_MOE keep them); layer types other than sliding, full, ..."},
};

}  // namespace

const std::vector<ArchFamily>& arch_families() { return kFamilies; }

std::string families_markdown() {
  auto join = [](const auto& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "`" : ", `") + std::string(x) + "`";
    return s;
  };
  std::string out =
      "| GGUF architecture | config.json `architectures` | Models | LEAP .bin | GGUF refuses (llama.cpp would run it otherwise) |\n"
      "|---|---|---|---|---|\n";
  for (const ArchFamily& f : kFamilies) {
    if (!f.gguf_keys) continue;
    out += std::string("| `") + f.name + "` | " + join(f.architectures) + " | " + f.examples + " | " +
           (f.leap ? "yes" : std::string("no: ") + f.leap_why_not) + " | " + (*f.refuses ? f.refuses : "—") + " |\n";
  }
  return out;
}

const ArchFamily* find_family(const ModelConfig& c) {
  const bool experts = c.num_experts > 0;
  const ArchFamily* any = nullptr;
  auto take = [&](const ArchFamily& f) {
    if ((find_role(f, "ffn_gate_inp") != nullptr) == experts) return true;
    if (!any) any = &f;
    return false;
  };
  for (const ArchFamily& f : kFamilies)
    for (const char* a : f.architectures)
      if (c.architecture == a && take(f)) return &f;
  if (any) return any;
  for (const ArchFamily& f : kFamilies)
    for (const char* t : f.model_types)
      if (c.model_type == t && take(f)) return &f;
  return any;
}

const ArchFamily& llama_family() { return kFamilies[0]; }

const ArchFamily* find_family_by_name(const std::string& name, bool experts) {
  const ArchFamily* any = nullptr;
  for (const ArchFamily& f : kFamilies) {
    if (name != f.name) continue;
    if ((find_role(f, "ffn_gate_inp") != nullptr) == experts) return &f;
    if (!any) any = &f;
  }
  return any;
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

// TextModel.filter_tensors' multimodal parts: names starting with one of the first list or
// holding one of the second are not the language model's.
static const char* const kMultimodalPrefixes[] = {"mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.",
                                                   "resampler.", "sound_encoder.", "sound_projection.",
                                                   "speech_embeddings."};
static const char* const kMultimodalParts[] = {"visual.", "vision.", "audio.", "talker.", "vision_", "audio_",
                                               "token2wav.", "code2wav.", "projector.", "pre_mm_projector_norm",
                                               "image_newline", "view_seperator", "patch_embed", "patch_embedding",
                                               "patch_merger.", "patch_merge_mlp.", "model.connector."};

std::string converter_source_name(const std::string& name) {
  for (const char* p : kMultimodalPrefixes)
    if (name.compare(0, std::strlen(p), p) == 0) return "";
  for (const char* p : kMultimodalParts)
    if (name.find(p) != std::string::npos) return "";
  const std::string lm = "language_model.";
  std::string n = name;
  for (size_t at; (at = n.find(lm)) != std::string::npos;) n.erase(at, lm.size());
  return n;
}

const TensorRole* source_role(const ArchFamily& f, const std::string& name, int64_t* layer, int64_t* expert) {
  const std::string n = converter_source_name(name);
  for (const TensorRole& r : f.roles)
    if (!n.empty() && (*layer = match_source_name(f, r, n)) >= 0) {
      if (expert) match_role_name(r.hf, n, expert);  // (per-expert roles have no headless names)
      return &r;
    }
  return nullptr;
}

std::string source_name(const ArchFamily& f, const TensorRole& r, int64_t layer, bool headless, int64_t expert) {
  const std::string h = headless ? headless_name(f, r) : "";
  return role_name(h.empty() ? r.hf : h.c_str(), layer, expert);
}

bool TensorRole::per_expert() const { return hf && std::strstr(hf, "{E}"); }

bool is_mxfp4(Transform t) { return t == Transform::Mxfp4 || t == Transform::Mxfp4EvenRows || t == Transform::Mxfp4OddRows; }

std::vector<int64_t> role_source_shape(const std::vector<int64_t>& out, Transform t) {
  if (is_mxfp4(t)) {
    if (out.size() != 3 || out[2] % 32) return {};
    return {out[0], out[1] * (t == Transform::Mxfp4 ? 1 : 2), out[2] / 32, 16};
  }
  if (t == Transform::EvenCols || t == Transform::OddCols) {
    if (out.empty()) return {};
    std::vector<int64_t> s = out;
    s.back() *= 2;
    return s;
  }
  return out;
}

const TensorRef* find_source(const Checkpoint& ck, const ArchFamily& f, const TensorRole& r, int64_t layer) {
  const std::string name = role_name(r.hf, layer);
  if (const TensorRef* t = ck.find(name)) return t;
  const std::string headless = headless_name(f, r);
  if (!headless.empty())
    if (const TensorRef* t = ck.find(role_name(headless.c_str(), layer))) return t;
  // a multimodal checkpoint's language model (converter_source_name takes "language_model." out)
  const std::string model = "model.";
  for (const std::string& n : {name.compare(0, model.size(), model) == 0
                                   ? "model.language_model." + name.substr(model.size()) : std::string(),
                               "language_model." + name})
    if (const TensorRef* t = n.empty() ? nullptr : ck.find(n)) return t;
  return nullptr;
}

// prepare_tensors' list of MODEL_TENSORs "always in float32" (TENSOR_NAMES, {L} for {bid}).
static const char* const kConverterF32[] = {
    "blk.{L}.ffn_gate_inp",     "blk.{L}.ffn_gate_inp_shexp", "position_embd",
    "token_types",              "blk.{L}.ssm_conv1d",         "blk.{L}.shortconv.conv",
    "blk.{L}.time_mix_first",   "blk.{L}.time_mix_w1",        "blk.{L}.time_mix_w2",
    "blk.{L}.time_mix_decay_w1", "blk.{L}.time_mix_decay_w2", "blk.{L}.time_mix_lerp_fused",
    "posnet.{L}.norm1",         "posnet.{L}.norm2",           "v.position_embd",
    "a.position_embd",          "blk.{L}.altup_correct_coef", "blk.{L}.altup_predict_coef",
    "blk.{L}.ssm_conv1d_q",     "blk.{L}.ssm_conv1d_k",       "blk.{L}.ssm_conv1d_v",
    "blk.{L}.indexer.proj",
};

bool converter_keeps_f32(const std::string& name, size_t n_dims) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (n_dims <= 1 || ends_with("_norm.weight") || !ends_with(".weight")) return true;
  for (const char* stem : kConverterF32)
    if (match_role_name((std::string(stem) + ".weight").c_str(), name) >= 0) return true;
  return false;
}

int64_t ArchDims::of(Dim d, int64_t layer) const {
  const LayerDims own = layer >= 0 && size_t(layer) < layers.size() ? layers[size_t(layer)]
                                                                     : LayerDims{q, kv, kv, head_dim, ffn};
  switch (d) {
    case Dim::Hidden: return hidden;
    case Dim::Ffn: return experts > 0 && !mlp_beside_experts ? 0 : own.ffn;
    case Dim::Vocab: return vocab;
    case Dim::Kv: return own.kv;
    case Dim::V: return own.v;
    case Dim::Q: return own.q;
    case Dim::Positions: return positions;
    case Dim::Hidden3: return 3 * hidden;
    case Dim::One: return 1;
    case Dim::HeadDim:
    case Dim::KHeadDim: return own.head_dim;
    case Dim::Qkv: return own.q + 2 * own.kv;
    case Dim::Ffn2: return experts > 0 && !mlp_beside_experts ? 0 : 2 * own.ffn;
    case Dim::Experts: return experts;
    case Dim::ExpFfn: return experts > 0 ? expert_ffn : 0;
    case Dim::ExpFfn2: return experts > 0 ? 2 * expert_ffn : 0;
    case Dim::ShexpFfn: return experts > 0 ? shexp_ffn : 0;
    case Dim::ShexpOne: return experts > 0 && shexp_ffn > 0 ? 1 : 0;
    case Dim::Heads: return heads;
    case Dim::Ple: return ple;
    case Dim::PleAll: return ple * n_layers;
    case Dim::PleHidden: return ple > 0 ? hidden : 0;
  }
  return 0;
}

bool ArchDims::may_lack(const TensorRole& r, int64_t layer) const {
  if (r.optional) return true;
  if (layer < 0 || size_t(layer) >= layers.size() || !layers[size_t(layer)].shared_kv) return false;
  for (Dim d : r.shape)
    if (d == Dim::Kv || d == Dim::V || d == Dim::KHeadDim) return true;
  return false;
}

std::vector<int64_t> ArchDims::shape(const std::vector<Dim>& rule, int64_t layer) const {
  std::vector<int64_t> s;
  for (Dim d : rule) s.push_back(of(d, layer));
  return s;
}

}  // namespace leapconv
