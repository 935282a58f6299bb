#include "formats/leap_model.h"

#include <cmath>
#include <cstdio>
#include <set>

namespace leapconv {

void for_each_leap_slot(const ArchDims& dims, int64_t n_layers, bool shared_classifier,
                        const std::function<void(const TensorRole&, int64_t, std::vector<int64_t>)>& fn) {
  for (const TensorRole& r : llama_family().roles) {
    if (r.optional && shared_classifier) continue;  // the classifier is the embeddings
    if (!r.leap) continue;                           // (Mixtral's experts: LEAP has none)
    for (int64_t l = 0; l < (r.per_layer ? n_layers : 1); ++l) fn(r, l, dims.shape(r.shape));
  }
}

namespace {

class Mapper {
 public:
  explicit Mapper(const Checkpoint& ck) : ck_(ck) {}

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
    if (!ck_.holds_weights(t))
      throw ConvertError(ck_.shard_name(t.shard), t.info.name,
                         std::string("dtype ") + dtype_name(t.info.dtype) +
                             " is not a float type; cannot export it to LEAP");
  }

  void check_all_used(const ArchFamily& f) {
    for (const std::string& name : ck_.order) {
      if (used_.count(name)) continue;
      bool ignorable = false;
      for (const char* pat : f.ignorable) ignorable |= name.find(pat) != std::string::npos;
      if (ignorable) continue;
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

namespace {

const std::string& ck_shard(const Checkpoint& ck, const TensorRef& t) { return ck.shard_name(t.shard); }

// A config number for a message: whole numbers as such, anything else (1e300) as %g.
std::string number_text(double v) {
  if (std::isfinite(v) && std::fabs(v) < 1e15 && v == std::floor(v)) return std::to_string(int64_t(v));
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

LeapModel map_checkpoint(const Checkpoint& ck, int64_t seq_len_override, const LeapChoice* choice) {
  if (!ck.config)
    throw ConvertError(ck.label, "", "no config.json or params.json: cannot tell the model's shape")
        .advise(kNoConfigAdvice);
  const ModelConfig& c = *ck.config;
  const ArchFamily& fam = llama_family();
  if (!c.architecture.empty()) {
    const ArchFamily* f = find_family(c);
    bool ok = false;
    for (const char* a : fam.architectures) ok |= f == &fam && c.architecture == a;
    if (!ok)
      throw ConvertError(c.file, "", "architecture '" + c.architecture +
                                         "' is not supported for LEAP export (Llama-family only: " +
                                         leap_architecture_list() + ")" +
                                         (f && f->leap_why_not ? std::string(": ") + f->leap_why_not : ""));
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
  if (choice) {  // what the config states (0 = unstated: checked below on the tensors' shapes)
    LeapShape stated;
    stated.dim = c.dim;
    stated.hidden_dim = c.hidden_dim;
    stated.n_layers = c.n_layers;
    stated.n_heads = c.n_heads;
    stated.n_kv_heads = c.n_kv_heads;
    stated.vocab = c.vocab_size;
    stated.seq_len = leap_seq_len(c.seq_len, seq_len_override);
    check_leap_engine(c.file, stated, *choice);
  }

  LeapModel m;
  m.config_file = c.file;
  Mapper map(ck);
  // The vocabulary and the FFN width come from the tensors, checked against the config.
  const TensorRef& emb = map.need(role_of(fam, "token_embd").hf);
  if (emb.info.shape.size() != 2 || emb.info.shape[1] != c.dim)
    map.expect_shape(emb, {c.vocab_size ? c.vocab_size : -1, c.dim}, "hidden_size");
  const int64_t vocab = emb.info.shape[0];
  if (vocab <= 0)  // LEAP's header cannot say it, and nothing could be looked up in it
    throw ConvertError(ck_shard(ck, emb), emb.info.name, "has no rows: the vocabulary is empty");
  if (c.vocab_size && c.vocab_size != vocab)
    map.expect_shape(emb, {c.vocab_size, c.dim}, "vocab_size");
  const TensorRef& w1 = map.need(role_name(role_of(fam, "ffn_gate").hf, 0));
  const int64_t hidden = w1.info.shape.empty() ? 0 : w1.info.shape[0];
  if (hidden <= 0) throw ConvertError(ck_shard(ck, w1), w1.info.name, "has no rows: the feed-forward width is 0");
  if (c.hidden_dim && c.hidden_dim != hidden)
    map.expect_shape(w1, {c.hidden_dim, c.dim}, "intermediate_size");

  const TensorRole& classifier = role_of(fam, "output");
  const TensorRef* head = ck.find(classifier.hf);
  m.shared_classifier = !head || c.tie_word_embeddings;
  if (head && c.tie_word_embeddings) map.need(classifier.hf);  // tied copy: not written

  ArchDims dims;
  dims.hidden = c.dim;
  dims.ffn = hidden;
  dims.vocab = vocab;
  dims.kv = c.n_kv_heads * hd;
  dims.q = c.dim;  // head_dim is dim / n_heads (checked above)
  for_each_leap_slot(dims, c.n_layers, m.shared_classifier,
                     [&](const TensorRole& r, int64_t l, std::vector<int64_t> shape) {
                       const TensorRef& t = map.need(role_name(r.hf, l));
                       map.expect_shape(t, shape, r.why);
                       m.weights.push_back({&r, l, role_name(r.leap, l), std::move(shape),
                                            role_recipe(ck, t, r.transform, c.n_heads, c.n_kv_heads)});
                     });
  map.check_all_used(fam);
  // A checkpoint with more layers than the config says is a mismatch, not extra data.

  m.dim = int32_t(c.dim);
  m.hidden_dim = int32_t(hidden);
  m.n_layers = int32_t(c.n_layers);
  m.n_heads = int32_t(c.n_heads);
  m.n_kv_heads = int32_t(c.n_kv_heads);
  m.vocab_size = int32_t(vocab);
  m.seq_len = int32_t(leap_seq_len(c.seq_len, seq_len_override));
  m.seq_len_from = seq_len_override > 0 ? "option" : c.seq_len > 0 && c.seq_len < kLeapDefaultSeqLen ? "model" : "default";
  if (seq_len_override <= 0 && c.seq_len <= 0)
    m.warnings.push_back(c.file + " states no maximum sequence length; using 2048 (set --seq-len)");
  if (!c.rope_theta_stated || c.rope_theta != kLeapRopeTheta)
    m.warnings.push_back(c.file + ": rope_theta is " + number_text(c.rope_theta) +
                         ", but LEAP's engine assumes Llama 3's 500000; outputs will differ");
  if (c.norm_eps != kLeapRmsEps) {
    char eps[32];
    std::snprintf(eps, sizeof eps, "%g", c.norm_eps);
    m.warnings.push_back(c.file + ": rms_norm_eps is " + eps + ", but LEAP's engine hard-codes 1e-05 in its "
                                  "RMSNorm; outputs will differ slightly");
  }
  if (c.rope_scaling)
    m.warnings.push_back(c.file + ": rope_scaling is set, but LEAP's engine applies Llama 3's own "
                                  "RoPE; long-context outputs may differ");
  if (c.sliding_window > 0 && c.sliding_window < m.seq_len)
    m.warnings.push_back(c.file + ": sliding_window attention is not implemented by LEAP's engine");
  return m;
}

}  // namespace

LeapModel map_llama_to_leap(const Checkpoint& ck, int64_t seq_len_override) { return map_checkpoint(ck, seq_len_override, nullptr); }

LeapModel map_llama_to_leap(const Checkpoint& ck, const LeapChoice& choice) { return map_checkpoint(ck, choice.seq_len, &choice); }

}  // namespace leapconv
