#include "arch/llama_map.h"

#include <set>

namespace leapconv {

namespace {

const char* kSupportedArchitectures[] = {"LlamaForCausalLM", "MistralForCausalLM"};

// Tensor names a Llama checkpoint may hold that carry no weights LEAP needs.
bool is_ignorable(const std::string& name) {
  return name.find("rotary_emb.inv_freq") != std::string::npos;
}

std::string layer_name(int64_t l, const char* suffix) {
  return "model.layers." + std::to_string(l) + "." + suffix;
}

class Mapper {
 public:
  Mapper(const Checkpoint& ck) : ck_(ck) {}

  const TensorRef& need(const std::string& hf) {
    used_.insert(hf);
    const TensorRef* t = ck_.find(hf);
    if (!t)
      throw ConvertError(ck_.label, hf, "missing from the checkpoint (searched " +
                                            std::to_string(ck_.shards.size()) + " shard(s))");
    return *t;
  }

  void expect_shape(const TensorRef& t, std::vector<int64_t> want, const char* why) {
    if (t.info.shape != want)
      throw ConvertError(ck_.shard_name(t.shard), t.info.name,
                         "shape " + shape_string(t.info.shape) + " contradicts the config (" +
                             why + " gives " + shape_string(want) + ")");
    if (!dtype_is_float(t.info.dtype))
      throw ConvertError(ck_.shard_name(t.shard), t.info.name,
                         std::string("dtype ") + dtype_name(t.info.dtype) +
                             " is not a float type; cannot export it to LEAP");
  }

  void add(LeapModel& m, const std::string& leap, const std::string& hf,
           std::vector<int64_t> shape, const char* why, int permute = 0, bool norm = false) {
    const TensorRef& t = need(hf);
    expect_shape(t, shape, why);
    m.weights.push_back({leap, &t, std::move(shape), permute, norm});
  }

  void check_all_used() {
    for (const std::string& name : ck_.order) {
      if (used_.count(name) || is_ignorable(name)) continue;
      const TensorRef& t = *ck_.find(name);
      std::string why = "not part of a Llama model LEAP can represent";
      if (name.find("bias") != std::string::npos) why = "biases are not supported by LEAP's engine (Qwen2-style q/k/v bias?)";
      if (name.find("expert") != std::string::npos) why = "mixture-of-experts weights are not supported by LEAP";
      throw ConvertError(ck_.shard_name(t.shard), name, why);
    }
  }

 private:
  const Checkpoint& ck_;
  std::set<std::string> used_;
};

}  // namespace

LeapModel map_llama_to_leap(const Checkpoint& ck, int64_t seq_len_override) {
  if (!ck.config)
    throw ConvertError(ck.label, "", "no config.json or params.json: cannot tell the model's shape");
  const ModelConfig& c = *ck.config;
  if (!c.architecture.empty()) {
    bool ok = false;
    for (const char* a : kSupportedArchitectures) ok |= c.architecture == a;
    if (!ok)
      throw ConvertError(c.file, "", "architecture '" + c.architecture +
                                         "' is not supported for LEAP export (Llama-family only: "
                                         "LlamaForCausalLM, MistralForCausalLM)");
  }
  if (c.num_experts > 0)
    throw ConvertError(c.file, "", "mixture-of-experts models are not supported by LEAP");
  if (c.has_qkv_bias)
    throw ConvertError(c.file, "", "attention biases are not supported by LEAP's engine");
  if (c.dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0)
    throw ConvertError(c.file, "", "needs hidden size, layer count and head counts");
  if (c.dim % c.n_heads || c.n_heads % c.n_kv_heads)
    throw ConvertError(c.file, "", "hidden size must divide by heads and heads by kv heads");
  const int64_t hd = c.dim / c.n_heads;
  if (hd % 2) throw ConvertError(c.file, "", "head dimension must be even for RoPE");
  if (c.head_dim && c.head_dim != hd)
    throw ConvertError(c.file, "", "head_dim " + std::to_string(c.head_dim) +
                                       " != hidden_size / heads; LEAP cannot represent it");

  LeapModel m;
  Mapper map(ck);
  const TensorRef& emb = map.need("model.embed_tokens.weight");
  if (emb.info.shape.size() != 2 || emb.info.shape[1] != c.dim)
    map.expect_shape(emb, {c.vocab_size ? c.vocab_size : -1, c.dim}, "hidden_size");
  const int64_t vocab = emb.info.shape[0];
  if (c.vocab_size && c.vocab_size != vocab)
    map.expect_shape(emb, {c.vocab_size, c.dim}, "vocab_size");
  const TensorRef& w1 = map.need(layer_name(0, "mlp.gate_proj.weight"));
  const int64_t hidden = w1.info.shape.empty() ? 0 : w1.info.shape[0];
  if (c.hidden_dim && c.hidden_dim != hidden)
    map.expect_shape(w1, {c.hidden_dim, c.dim}, "intermediate_size");

  const int64_t D = c.dim, KV = c.n_kv_heads * hd, L = c.n_layers;
  for (int64_t l = 0; l < L; ++l)
    map.add(m, "layers." + std::to_string(l) + ".attention_norm", layer_name(l, "input_layernorm.weight"), {D}, "hidden_size", 0, true);
  for (int64_t l = 0; l < L; ++l)
    map.add(m, "layers." + std::to_string(l) + ".ffn_norm", layer_name(l, "post_attention_layernorm.weight"), {D}, "hidden_size", 0, true);
  map.add(m, "norm", "model.norm.weight", {D}, "hidden_size", 0, true);
  map.add(m, "tok_embeddings", "model.embed_tokens.weight", {vocab, D}, "hidden_size");
  struct Kind { const char* leap; const char* hf; int64_t rows, cols; int64_t permute; const char* why; };
  const Kind kinds[] = {
      {"wq", "self_attn.q_proj.weight", D, D, c.n_heads, "hidden_size"},
      {"wk", "self_attn.k_proj.weight", KV, D, c.n_kv_heads, "num_key_value_heads x head_dim"},
      {"wv", "self_attn.v_proj.weight", KV, D, 0, "num_key_value_heads x head_dim"},
      {"wo", "self_attn.o_proj.weight", D, D, 0, "hidden_size"},
      {"w1", "mlp.gate_proj.weight", hidden, D, 0, "intermediate_size"},
      {"w2", "mlp.down_proj.weight", D, hidden, 0, "intermediate_size"},
      {"w3", "mlp.up_proj.weight", hidden, D, 0, "intermediate_size"},
  };
  for (const Kind& k : kinds)
    for (int64_t l = 0; l < L; ++l)
      map.add(m, "layers." + std::to_string(l) + "." + k.leap, layer_name(l, k.hf),
              {k.rows, k.cols}, k.why, int(k.permute));

  const TensorRef* head = ck.find("lm_head.weight");
  m.shared_classifier = !head || c.tie_word_embeddings;
  if (head && c.tie_word_embeddings) map.need("lm_head.weight");  // tied copy: not written
  if (!m.shared_classifier) map.add(m, "output", "lm_head.weight", {vocab, D}, "vocab x hidden_size");
  map.check_all_used();
  // A checkpoint with more layers than the config says is a mismatch, not extra data.

  m.dim = int32_t(D);
  m.hidden_dim = int32_t(hidden);
  m.n_layers = int32_t(L);
  m.n_heads = int32_t(c.n_heads);
  m.n_kv_heads = int32_t(c.n_kv_heads);
  m.vocab_size = int32_t(vocab);
  m.seq_len = int32_t(seq_len_override > 0 ? seq_len_override : c.seq_len);
  if (m.seq_len <= 0) {
    m.seq_len = 2048;
    m.warnings.push_back(c.file + " states no maximum sequence length; using 2048 (set --seq-len)");
  }
  if (!c.rope_theta_stated || c.rope_theta != 500000.0)
    m.warnings.push_back(c.file + ": rope_theta is " + std::to_string(int64_t(c.rope_theta)) +
                         ", but LEAP's engine assumes Llama 3's 500000; outputs will differ");
  if (c.rope_scaling)
    m.warnings.push_back(c.file + ": rope_scaling is set, but LEAP's engine applies Llama 3's own "
                                  "RoPE; long-context outputs may differ");
  if (c.sliding_window > 0 && c.sliding_window < m.seq_len)
    m.warnings.push_back(c.file + ": sliding_window attention is not implemented by LEAP's engine");
  return m;
}

}  // namespace leapconv
