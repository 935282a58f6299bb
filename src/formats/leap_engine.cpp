#include "formats/leap_engine.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "core/error.h"

namespace leapconv {

namespace {

constexpr int64_t kInt32Limit = int64_t(1) << 31;  // a product at or past this wraps

int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0) return 0;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t product(const std::vector<int64_t>& v, size_t n) {
  int64_t p = 1;
  for (size_t i = 0; i < n && i < v.size(); ++i) p = sat_mul(p, v[i]);
  return p;
}

std::string num(int64_t v) { return v == INT64_MAX ? std::string("more than 2^63") : std::to_string(v); }

std::string human_bytes(int64_t b) {
  char s[32];
  if (b >= (int64_t(1) << 30)) std::snprintf(s, sizeof s, "%.1f GiB", double(b) / double(int64_t(1) << 30));
  else if (b >= (int64_t(1) << 20)) std::snprintf(s, sizeof s, "%.1f MiB", double(b) / double(1 << 20));
  else std::snprintf(s, sizeof s, "%.1f KiB", double(b) / 1024.0);
  return s;
}

// The largest divisor of both in [16, 64], for a hint when none of 64, 32, 16 divides both.
int other_group_size(int64_t dim, int64_t hidden) {
  const int64_t g = std::gcd(dim, hidden);
  for (int64_t d = 64; d >= kLeapMinGroupSize; --d)
    if (g % d == 0) return int(d);
  return 0;
}

}  // namespace

int64_t leap_seq_len(int64_t model_max, int64_t override_len) {
  if (override_len > 0) return override_len;
  return model_max > 0 ? std::min(model_max, kLeapDefaultSeqLen) : kLeapDefaultSeqLen;
}

int default_group_size(int64_t dim, int64_t hidden_dim) {
  for (int gs : {64, 32, 16})
    if (dim % gs == 0 && hidden_dim % gs == 0) return gs;
  return 0;
}

int leap_group_size(const std::string& file, const LeapShape& s, int requested, const std::string& asked) {
  const std::string D = std::to_string(s.dim), H = std::to_string(s.hidden_dim);
  const int fallback = default_group_size(s.dim, s.hidden_dim), other = other_group_size(s.dim, s.hidden_dim);
  const std::string instead = fallback ? "use --group-size " + std::to_string(fallback) + " (the default for dim " + D +
                                             " and hidden_dim " + H + ")"
                              : other ? "use --group-size " + std::to_string(other) + ", or --version 1 (fp32)"
                                      : "no group size works for dim " + D + " and hidden_dim " + H +
                                            ": use --version 1 (fp32)";
  if (requested > 0) {
    const std::string r = asked + " " + std::to_string(requested);
    if (requested < kLeapMinGroupSize)
      throw ConvertError(file, "", r + " is below 16: LEAP's engine dequantizes the embeddings 16 values at a time "
                                       "with one scale when the first and last agree, so it would compute wrong "
                                       "results; " + instead);
    const bool d = s.dim % requested == 0, h = s.hidden_dim % requested == 0;
    if (!d || !h)
      throw ConvertError(file, "", r + " does not divide " + (!d && !h ? "dim " + D + " nor hidden_dim " + H
                                                               : !d   ? "dim " + D
                                                                      : "hidden_dim " + H) +
                                       ": LEAP's int8 matmul assumes every input length (dim for wq, wk, wv, wo, w1, "
                                       "w3 and the classifier, hidden_dim for w2) is a multiple of the group size, so "
                                       "LEAP's engine would compute wrong results; " + instead);
    return requested;
  }
  if (!fallback)
    throw ConvertError(file, "", "LEAP version 2 needs an int8 group size that divides both dim " + D +
                                     " and hidden_dim " + H + " (LEAP's int8 matmul assumes every input length is "
                                     "a multiple of it) and is at least 16 (its dequantizer breaks below): none of "
                                     "64, 32, 16 does, so LEAP's engine would compute wrong results; " + instead);
  return fallback;
}

// The products, as LEAP's source computes them in `int` (Config's fields are int). Factors that
// the check compares stand last where a remedy changes them (seq_len).
const std::vector<LeapInt32Product>& leap_int32_products() {
  using P = LeapInt32Product;
  static const std::vector<P> kProducts = {
      {"n_layers × kv_dim × seq_len", "p->n_layers * p->seq_len * kv_dim",
       "init_run_state() (key_cache and value_cache sizes; also loff = l * p->seq_len * kv_dim in run_layer())", 3,
       [](const LeapShape& s) { return std::vector<int64_t>{s.n_layers, s.kv_dim(), s.seq_len}; }, P::SeqLen},
      {"n_heads × seq_len", "p->n_heads * p->seq_len", "init_run_state() (att size; h * p->seq_len in run_layer())", 3,
       [](const LeapShape& s) { return std::vector<int64_t>{s.n_heads, s.seq_len}; }, P::SeqLen},
      {"vocab_size × dim", "config.vocab_size * config.dim",
       "memory_map_weights() (the embedding table; token * dim in forward(), i * n in the classifier's matmul())", 3,
       [](const LeapShape& s) { return std::vector<int64_t>{s.vocab, s.dim}; }, P::None},
      {"hidden_dim × dim", "i * n", "matmul() (row offsets in w1, w2, w3; in version 2 also "
       "init_quantized_tensors(..., config.dim * config.hidden_dim))", 3,
       [](const LeapShape& s) { return std::vector<int64_t>{s.hidden_dim, s.dim}; }, P::None},
      {"dim × dim", "i * n", "matmul() (row offsets in wq and wo)", 3,
       [](const LeapShape& s) { return std::vector<int64_t>{s.dim, s.dim}; }, P::None},
      {"(n_layers − 1) × dim × hidden_dim", "l * dim * hidden_dim",
       "FloatTransformer::run_layer() (where w1, w2, w3 of layer l start)", 1,
       [](const LeapShape& s) { return std::vector<int64_t>{std::max<int64_t>(0, s.n_layers - 1), s.dim, s.hidden_dim}; },
       P::Version2},
      {"(n_layers − 1) × dim × dim", "l * dim * dim", "FloatTransformer::run_layer() (where wq and wo of layer l start)",
       1, [](const LeapShape& s) { return std::vector<int64_t>{std::max<int64_t>(0, s.n_layers - 1), s.dim, s.dim}; },
       P::Version2},
      {"n_layers × dim", "config.n_layers * config.dim", "QuantizedTransformer::memory_map_weights() (norm offsets)", 2,
       [](const LeapShape& s) { return std::vector<int64_t>{s.n_layers, s.dim}; }, P::None},
  };
  return kProducts;
}

void check_leap_int32(const std::string& file, const LeapShape& s, int version) {
  if (version != 1 && version != 2) return;
  for (const LeapInt32Product& p : leap_int32_products()) {
    if (!(p.versions & (1u << (version - 1)))) continue;
    const std::vector<int64_t> v = p.values(s);
    const int64_t total = product(v, v.size());
    if (total < kInt32Limit) continue;
    std::string values;
    for (int64_t x : v) values += (values.empty() ? "" : " × ") + num(x);
    std::string remedy;
    if (p.remedy == LeapInt32Product::SeqLen && product(v, v.size() - 1) < kInt32Limit) {
      const int64_t most = (kInt32Limit - 1) / std::max<int64_t>(1, product(v, v.size() - 1));
      remedy = "choose --seq-len " + std::to_string(most) + " or less";
    } else if (p.remedy == LeapInt32Product::Version2) {
      remedy = "LEAP version 1 cannot hold this model; version 2 (--version 2) keeps each layer's tensors apart";
    } else {
      remedy = "LEAP's engine cannot run a model of this size";
    }
    throw ConvertError(file, "", "LEAP's engine (version " + std::to_string(version) + ") computes " + p.factors +
                                     " = " + values + " = " + num(total) + " in a 32-bit int (" + p.expression +
                                     " in " + p.where + "), which wraps at 2^31; " + remedy);
  }
}

int check_leap_engine(const std::string& file, const LeapShape& s, const LeapChoice& c) {
  const int gs = c.version == 2 ? leap_group_size(file, s, c.group_size) : 0;
  check_leap_int32(file, s, c.version);
  return gs;
}

int64_t leap_kv_cache_bytes(const LeapShape& s) {
  return sat_mul(sat_mul(sat_mul(2 * 4, s.n_layers), s.seq_len), s.kv_dim());
}

nlohmann::json leap_engine_json(const LeapShape& s, const std::string& seq_len_from) {
  const int64_t bytes = leap_kv_cache_bytes(s);
  const std::string why = seq_len_from == "option" ? "as chosen"
                          : seq_len_from == "model" ? "the model's own maximum"
                                                    : "LEAP's default";
  const std::string summary = "LEAP's engine allocates its two f32 KV caches whole at load: 2 × " +
                              std::to_string(s.n_layers) + " layers × " + std::to_string(s.seq_len) +
                              " positions × " + std::to_string(s.kv_dim()) + " × 4 bytes = " + human_bytes(bytes) +
                              " (seq_len " + std::to_string(s.seq_len) + ", " + why + ")";
  return {{"seq_len", s.seq_len}, {"seq_len_from", seq_len_from}, {"kv_dim", s.kv_dim()},
          {"kv_cache_bytes", bytes}, {"rms_eps", kLeapRmsEps}, {"rope_theta", kLeapRopeTheta},
          {"summary", summary}};
}

}  // namespace leapconv
