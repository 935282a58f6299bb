// The architecture table, in the spirit of llama.cpp's tensor_mapping.py: per model family,
// every tensor role with its Hugging Face name, its shape rule from the config, its transform
// and its name in each output format. The LEAP mapper, the LEAP layout, the forward pass and
// verify all read it; the list of accepted architectures is here and nowhere else.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "arch/gguf_keys.h"
#include "tokenizer/gguf_vocab.h"

namespace leapconv {

struct ModelConfig;
class Checkpoint;
struct TensorRef;

// A dimension of a shape rule, resolved from the config (see ArchDims).
// Q: n_heads x head_dim, Kv: n_kv_heads x head_dim, Qkv: Q + 2 Kv (a fused projection), Ffn2: 2 x Ffn
// (a fused gate and up projection), HeadDim: one head (per-head q/k norms). Per layer where the
// config varies them (Gemma 4: sliding and full layers' heads, double-wide MLPs). V: the value
// projection's rows, Kv, or 0 in a layer whose keys are its values (Gemma 4's attention_k_eq_v).
// Ple: the per-layer input width (Gemma 4's hidden_size_per_layer_input, 0 without),
// PleAll: layers x Ple, PleHidden: hidden_size where Ple is not 0 (the norm of the per-layer
// input's projection). A role with a 0 in its shape is not in the model. KHeadDim: one key
// head (Gemma 4's k norms). A layer that reads another layer's keys and values (Gemma 4's shared
// KV layers) may lack the roles shaped by Kv, V or KHeadDim.
// Mixtures of experts: Experts (the router's rows: num_local_experts / num_experts, 0 in a dense
// model), ExpFfn (one expert's width: moe_intermediate_size, else intermediate_size), ShexpFfn
// (the shared expert's: shared_expert_intermediate_size, 0 without one), ShexpOne (1 where there
// is a shared expert: its gate's one row), Heads (one value per attention head: gpt-oss's sinks),
// ExpFfn2 (2 x ExpFfn: Gemma 4's experts' gate and up, fused). Ffn and Ffn2 are 0 in a model
// whose every layer is a mixture (its dense MLP roles are not in it), unless the family keeps a
// dense MLP beside the experts (Gemma 4: ArchDims::mlp_beside_experts).
enum class Dim : uint8_t {
  Hidden, Ffn, Vocab, Kv, Q, Positions, Hidden3, One, HeadDim, Qkv, Ffn2, V, Ple, PleAll, PleHidden, KHeadDim,
  Experts, ExpFfn, ShexpFfn, ShexpOne, Heads, ExpFfn2
};

// How a source tensor is changed on its way into a file.
enum class Transform : uint8_t {
  None,
  RopeHeads,    // HF rotate-half -> interleaved pairs, per head of n_heads (wq)
  RopeKvHeads,  // the same per head of n_kv_heads (wk)
  Transpose,    // stored [in, out] (GPT-2's Conv1D), written [out, in] as nn.Linear would hold it
  NormPlusOne,  // Gemma's RMSNorm multiplies by (1 + w): the file holds 1 + w
  // gpt-oss's experts as they ship: MXFP4 blocks ([experts, rows, cols / 32, 16] bytes, OCP MX's
  // nibble order) and their E8M0 scales (the tensor named with "_scales" for "_blocks"), written
  // as ggml's MXFP4 blocks byte for byte; EvenRows / OddRows take every other row (gate and up
  // interleaved in gate_up_proj), all rows otherwise. The converter writes them before any other.
  Mxfp4, Mxfp4EvenRows, Mxfp4OddRows,
  EvenCols, OddCols,  // every other value of each row ([experts, 2 ff] gate_up biases -> [experts, ff])
  // BitNet's projections: each value to -s, 0 or +s, s the mean of |w| over the tensor (the
  // converter's weight_quant: recipe.h's ternarize)
  Ternary,
};

// How a family's model computes, as llama.cpp runs the GGUF file (its weights as written: q/k
// rows permuted for Llama, Conv1D weights transposed, Gemma's norms with the 1 added). The
// reference forward pass (check/forward.h) reads this and the roles; which optional pieces a
// model has (biases, q/k norms, fused projections, post-norms, learned positions) it reads from
// the roles the family has.
enum class NormKind : uint8_t { Rms, Layer };  // Layer: LayerNorm with a bias role "<norm>_b"
enum class Activation : uint8_t { Silu, GeluTanh };
enum class RopeKind : uint8_t { None, Interleaved, Neox };  // None: learned positions
// Norms, biases, post-norms, q/k norms (per head: [head_dim]; over the whole projection, OLMo 2:
// [heads x head_dim]), sub-norms (BitNet: the attention's output before attn_output, act(gate) *
// up before ffn_down), fused projections: from the roles. Multipliers (Granite), rope bases and
// soft-caps: from the file's keys (check/forward.cpp's gguf_decoder_spec).
struct ArchCompute {
  NormKind norm = NormKind::Rms;
  Activation act = Activation::Silu;
  bool gated = true;  // act(gate) * up (SwiGLU / GeGLU); false: act(up)
  RopeKind rope = RopeKind::Neox;
  bool scale_embeddings = false;  // x * sqrt(hidden) after the lookup (Gemma)
  // Sliding-window layers as llama.cpp runs them: layer l slides when l % swa_period <
  // swa_period - 1 (Gemma 2: 2, every even layer; Gemma 3: 6; OLMo 3: 4), with the window of
  // attention.sliding_window, or default_window without that key (0: no sliding window).
  int swa_period = 0;
  int64_t default_window = 0;
  // The sliding layers' RoPE as llama.cpp runs it: base rope.freq_base_swa, else swa_base_default
  // (Gemma 3: 10000; 0: the full layers' base); linear scaling on the full layers only unless
  // swa_rope_scaled (Gemma 2).
  double swa_base_default = 0;
  bool swa_rope_scaled = false;
  // Layer l runs without RoPE when (l + 1) % no_rope_period == 0 (SmolLM3: 4); 0: every layer.
  int no_rope_period = 0;
  // llama.cpp's Gemma 2 / Gemma 3 scale queries by 1/sqrt(hidden / heads) instead of
  // 1/sqrt(head_dim) for a model of this many layers (27B: 46 / 62); 0: never.
  int64_t query_scale_hidden_layers = 0;
  // Gemma 4 as llama.cpp runs it: the sliding layers named by attention.sliding_window_pattern
  // (an array, one flag per layer) rather than by swa_period; queries unscaled (its q/k norms
  // stand in); values RMS-normed without a weight; rope_freqs on the full layers only; the
  // logits soft-capped at default_final_softcap when the file has no final_logit_softcapping.
  bool swa_from_pattern_key = false;
  bool unscaled_queries = false;
  bool v_norm = false;
  bool rope_freqs_full_layers_only = false;
  double default_final_softcap = 0;
  // Its mixture-of-experts layers as llama.cpp's graph runs them (build_moe_ffn's arguments, fixed
  // per architecture, not read from the file): the router's softmax over every expert, the top
  // expert_used_count kept, their weights divided by their sum when moe_norm_weights (Mixtral,
  // Qwen3-MoE; not Qwen2-MoE or OLMoE); a shared expert (Qwen2-MoE) added times the sigmoid of
  // its gate.
  bool moe_norm_weights = false;
  // gpt-oss's (SOFTMAX_WEIGHT, SWIGLU_OAI_MOE): the top k of the raw router logits, their weights
  // the softmax of those k only; each expert's act = min(g, 7) sigma(1.702 min(g, 7)) (clamp(u, +-7) + 1).
  bool moe_softmax_chosen = false;
  bool moe_swiglu_oai = false;
};

// A role whose Hugging Face name has "{E}" is one tensor per expert in the checkpoint and one
// stacked tensor in GGUF ([experts, rows, cols], expert by expert); its shape rule is one expert's.
struct TensorRole {
  const char* role;  // llama.cpp's name stem: token_embd, attn_q, ffn_down, ...
  const char* hf;    // Hugging Face name; "{L}" stands for the layer index, "{E}" for the expert
  const char* leap;  // LEAP's name, or null where LEAP has no such tensor
  const char* gguf;  // GGUF's tensor name
  bool per_layer;
  std::vector<Dim> shape;  // rows first, as Hugging Face stores it
  const char* why;         // the config fields that give the shape, for messages
  Transform transform;
  bool norm;      // stays f32 in every LEAP version
  bool optional;  // may be absent (a tied classifier)
  // Taken only from NVFP4 weights, which llama.cpp's converter merges by their names
  // (_generate_nvfp4_tensors: experts.{E}.gate_proj / up_proj / down_proj): Gemma 4's experts,
  // which otherwise ship fused. Absent unless the checkpoint is NVFP4.
  bool nvfp4_only = false;
  bool per_expert() const;  // "{E}" in hf: stacked from one tensor per expert
};

// The shape of the source tensor a role's transform reads for an output of shape `out` (MXFP4
// blocks: [experts, rows (x2 for every other row), cols / 32, 16]; EvenCols: twice the last
// dimension); `out` itself for the others. Empty when `out` cannot come from such a source.
std::vector<int64_t> role_source_shape(const std::vector<int64_t>& out, Transform t);
bool is_mxfp4(Transform t);

struct ArchFamily {
  const char* name = "";  // "llama", "gpt2": general.architecture in GGUF
  std::vector<const char*> architectures;  // config.json "architectures"
  std::vector<const char*> model_types;    // config.json "model_type" (and params.json: llama)
  bool leap = false;                       // LEAP's engine runs it
  const char* leap_why_not = nullptr;      // what LEAP's engine lacks for it (null when leap)
  bool tied_by_default = false;            // tie_word_embeddings when config.json does not say
  ArchCompute compute;
  std::vector<TensorRole> roles;           // in LEAP's file order where the family has one
  std::vector<const char*> ignorable;      // substrings of source tensors that carry nothing
  // transformers' base_model_prefix, with its dot ("transformer." for GPT-2): a checkpoint saved
  // from the headless base model (openai-community/gpt2's own model.safetensors) names the roles
  // under it without it, and llama.cpp's tensor_mapping.py takes both names ("transformer.wte"
  // and "wte"); null where the table's names are the only ones taken.
  const char* headless_prefix = nullptr;
  // The keys its GGUF file holds, as llama.cpp's converter writes them (arch/gguf_keys.h); null
  // where GGUF export does not take the family.
  GgufKeysFn gguf_keys = nullptr;
  // The sizes its config varies per layer or adds (ArchDims::layers, ple); null: none.
  ArchDimsFn dims = nullptr;
  // Where its converter module's set_vocab writes tokenizer.ggml.add_space_prefix.
  SpacePrefixKey space_prefix = SpacePrefixKey::Derived;
  // The special tokens its converter module sets when the tokenizer files name none.
  std::vector<DefaultSpecial> default_specials = {};
  // Its own tokenizer.ggml.model, where its converter module writes one (Gemma 4: "gemma4", the
  // tokenizer.json's byte-fallback BPE with merges, as gguf-py's LlamaHfVocab reads it); "":
  // byte-level BPE or SentencePiece, from the files.
  const char* tokenizer_model = "";
  // Its converter module reads the vocabulary from tokenizer.model only (_set_vocab_sentencepiece
  // without LlamaModel's fallbacks: BitNet); a folder without one is refused, as it fails there.
  bool sentencepiece_only = false;
  // For the README's table of families (scripts/families_table.mjs): models people download.
  const char* examples = "";
  // For the same table: what GGUF export refuses for it, and why (arch/gguf_keys.cpp's refusals).
  const char* refuses = "";
};

const std::vector<ArchFamily>& arch_families();
// The README's table of families (`export --families`), one row per family of the table above.
std::string families_markdown();
// The family a config names (architecture first, then model_type); null if none. Where two rows
// take the same architecture (Gemma 4 dense and its mixture), the one with a router when the
// config names experts, the one without otherwise.
const ArchFamily* find_family(const ModelConfig& c);
const ArchFamily& llama_family();
// The family general.architecture names; where two rows share a name (llama: Llama and Mixtral),
// the one with a router when the file has experts, the one without otherwise.
const ArchFamily* find_family_by_name(const std::string& name, bool experts = false);
// A role of a family by its stem; throws if the family has none (an internal error).
const TensorRole& role_of(const ArchFamily& f, const char* role);
// The role, or null when the family has none.
const TensorRole* find_role(const ArchFamily& f, const char* role);
// "LlamaForCausalLM, MistralForCausalLM": the architectures of the families LEAP takes.
std::string leap_architecture_list();

// A role's name in some format for layer l and expert e ("{L}" and "{E}" replaced: a mixture of
// experts' tensors are one per expert in a checkpoint, model.layers.{L}.mlp.experts.{E}.w1.weight,
// and stacked in one in GGUF, blk.{L}.ffn_gate_exps.weight); "" for a null pattern.
std::string role_name(const char* pattern, int64_t layer, int64_t expert = 0);
// The layer a name has under a pattern ("model.layers.{L}.mlp.up_proj.weight" and
// "model.layers.7.mlp.up_proj.weight" give 7; a pattern without "{L}" gives 0 when equal);
// -1 when it does not match. *expert (when given) gets the "{E}" number, 0 without one.
int64_t match_role_name(const char* pattern, const std::string& name, int64_t* expert = nullptr);

// The layer of a source tensor name under a role (match_role_name of the role's Hugging Face
// name, or of its headless form where the family has one); -1 when it is not that role.
int64_t match_source_name(const ArchFamily& f, const TensorRole& r, const std::string& name);
// The role a source tensor name plays in a family, with its layer; null when none.
// *expert (when given) gets the expert's number for a per-expert role.
const TensorRole* source_role(const ArchFamily& f, const std::string& name, int64_t* layer, int64_t* expert = nullptr);
// What llama.cpp's converter makes of a source tensor's name before it maps it (TextModel and
// ModelBase.filter_tensors): "" for a tensor it leaves out (a multimodal checkpoint's vision
// tower, projector, audio encoder), else the name with "language_model." taken out
// (model.language_model.layers.0... and language_model.model.layers.0... -> model.layers.0...).
std::string converter_source_name(const std::string& name);
// Role r's Hugging Face name at layer l (and expert e), headless (without the family's headless
// prefix) or not.
std::string source_name(const ArchFamily& f, const TensorRole& r, int64_t layer, bool headless, int64_t expert = 0);
// The checkpoint's tensor for role r at layer l, under the table's name or the headless one;
// null when it has neither.
const TensorRef* find_source(const Checkpoint& ck, const ArchFamily& f, const TensorRole& r, int64_t layer);

// Whether llama.cpp's converter writes a tensor (by its GGUF name, with n_dims dimensions) in F32
// whatever --outtype asks (conversion/base.py's prepare_tensors): every tensor of at most one
// dimension, every *_norm.weight, every name not ending in .weight, and the tensors of one list
// (learned positions, token types, mixture-of-experts routers, ...), for every family alike.
bool converter_keeps_f32(const std::string& gguf_name, size_t n_dims);

// The config's sizes that shape rules refer to; layers: the sizes of each layer where the config
// varies them (empty: every layer the same).
struct LayerDims {
  int64_t q = 0, kv = 0, v = 0, head_dim = 0, ffn = 0;
  bool shared_kv = false;  // reads another layer's keys and values: its own k and v may be absent
};
struct ArchDims {
  int64_t hidden = 0, ffn = 0, vocab = 0, kv = 0, q = 0, positions = 0, head_dim = 0, ple = 0, n_layers = 0;
  int64_t experts = 0, expert_ffn = 0, shexp_ffn = 0;  // a mixture of experts' (0: dense)
  bool mlp_beside_experts = false;  // every layer has a dense MLP too (Gemma 4's mixture)
  int64_t heads = 0;
  std::vector<LayerDims> layers;
  int64_t of(Dim d, int64_t layer = 0) const;
  // Whether role r may be absent at layer l: a classifier, or a key / value role of a shared KV layer.
  bool may_lack(const TensorRole& r, int64_t layer) const;
  std::vector<int64_t> shape(const std::vector<Dim>& rule, int64_t layer = 0) const;
};

}  // namespace leapconv
