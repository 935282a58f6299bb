#include "formats/leap_format.h"

#include <cstdlib>

namespace leapconv {

std::vector<uint8_t> encode_leap_header(const LeapHeader& h) {
  std::vector<uint8_t> b;
  put_le<uint32_t>(b, kLeapMagic);
  put_le<int32_t>(b, h.version);
  for (int32_t v : {h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size, h.seq_len})
    put_le<int32_t>(b, v);
  put_u8(b, h.shared_classifier ? 1 : 0);
  if (h.version == 2) put_le<int32_t>(b, h.group_size);  // at 0x25, unaligned
  b.resize(kLeapHeaderBytes, 0);
  return b;
}

LeapHeader decode_leap_header(const std::string& file, const uint8_t* p, size_t n) {
  if (n < size_t(kLeapHeaderBytes))
    throw ConvertError(file, "", "too small for a LEAP header (" + std::to_string(n) + " bytes)");
  if (get_le<uint32_t>(p) != kLeapMagic) throw ConvertError(file, "", "not a LEAP file (bad magic)");
  LeapHeader h;
  h.version = get_le<int32_t>(p + 4);
  if (h.version != 1 && h.version != 2)
    throw ConvertError(file, "", "unknown LEAP version " + std::to_string(h.version));
  int32_t* fields[] = {&h.dim, &h.hidden_dim, &h.n_layers, &h.n_heads, &h.n_kv_heads, &h.vocab_size, &h.seq_len};
  for (int i = 0; i < 7; ++i) *fields[i] = get_le<int32_t>(p + 8 + 4 * i);
  h.shared_classifier = p[0x24] != 0;
  if (h.version == 2) h.group_size = get_le<int32_t>(p + 0x25);
  if (h.dim <= 0 || h.hidden_dim <= 0 || h.n_layers <= 0 || h.n_heads <= 0 || h.n_kv_heads <= 0 ||
      h.vocab_size == 0 || h.dim % h.n_heads || h.n_heads % h.n_kv_heads ||
      (h.version == 2 && (h.group_size <= 0 || h.dim % h.group_size)))
    throw ConvertError(file, "", "LEAP header holds inconsistent dimensions");
  return h;
}

LeapShape leap_shape(const LeapHeader& h) {
  LeapShape s;
  s.dim = h.dim;
  s.hidden_dim = h.hidden_dim;
  s.n_layers = h.n_layers;
  s.n_heads = h.n_heads;
  s.n_kv_heads = h.n_kv_heads;
  s.vocab = std::abs(int64_t(h.vocab_size));
  s.seq_len = h.seq_len;
  return s;
}

int64_t leap_implied_size(const LeapHeader& h) {
  // Dimensions up to 2^31 multiply past int64: estimate in long double, then count exactly.
  const int64_t D = h.dim, H = h.hidden_dim, L = h.n_layers, V = std::abs(int64_t(h.vocab_size));
  const int64_t KV = int64_t(h.n_kv_heads) * (D / h.n_heads);
  const long double est = (long double)V * D * 2 + (long double)L * (2.0L * D * D + 2.0L * KV * D + 3.0L * H * D);
  if (est * 5 + (long double)(2 * L + 1) * D * 4 > 9.0e18L) return -1;
  const int64_t numel = V * D * (h.shared_classifier ? 1 : 2) + L * (2 * D * D + 2 * KV * D + 3 * H * D);
  const int64_t norms = (2 * L + 1) * D * 4;
  const int64_t weights = h.version == 1 ? numel * 4 : numel + numel / h.group_size * 4;
  return kLeapHeaderBytes + norms + weights;
}

nlohmann::json leap_header_json(const LeapHeader& h) {
  return {{"version", h.version}, {"dim", h.dim}, {"hidden_dim", h.hidden_dim}, {"n_layers", h.n_layers},
          {"n_heads", h.n_heads}, {"n_kv_heads", h.n_kv_heads}, {"vocab_size", h.vocab_size},
          {"seq_len", h.seq_len}, {"shared_classifier", h.shared_classifier}, {"group_size", h.group_size}};
}

std::vector<PlanItem> leap_layout(const LeapHeader& h) {
  ArchDims dims;
  dims.hidden = h.dim;
  dims.ffn = h.hidden_dim;
  dims.vocab = std::abs(int64_t(h.vocab_size));
  dims.kv = int64_t(h.n_kv_heads) * (h.dim / h.n_heads);
  dims.q = h.dim;
  std::vector<PlanItem> items;
  for_each_leap_slot(dims, h.n_layers, h.shared_classifier,
                     [&](const TensorRole& r, int64_t l, std::vector<int64_t> shape) {
                       PlanItem it;
                       it.name = role_name(r.leap, l);
                       it.shape = std::move(shape);
                       it.type = (r.norm || h.version == 1) ? QType::F32 : QType::Int8Group;
                       it.group_size = it.type == QType::Int8Group ? h.group_size : 0;
                       finish_item_geometry(it);
                       items.push_back(std::move(it));
                     });
  int64_t off = kLeapHeaderBytes;  // INT8 is values-then-scales (the quant-type table)
  for (PlanItem& it : items) {
    it.offset = off;
    off += it.size.total();
  }
  return items;
}

ConversionPlan plan_leap(const LeapModel& m, int version, int group_size, LeapHeader* header_out) {
  if (version != 1 && version != 2)
    throw ConvertError("--version must be 1 (fp32) or 2 (int8), not " + std::to_string(version));
  LeapHeader h;
  h.version = version;
  h.dim = m.dim;
  h.hidden_dim = m.hidden_dim;
  h.n_layers = m.n_layers;
  h.n_heads = m.n_heads;
  h.n_kv_heads = m.n_kv_heads;
  h.seq_len = m.seq_len;
  h.shared_classifier = m.shared_classifier;
  // llama2.c legacy: LEAP's loader reads a negative vocab_size as "unshared classifier".
  h.vocab_size = (version == 1 && !m.shared_classifier) ? -m.vocab_size : m.vocab_size;
  // The group size (version 2), and a refusal where the engine's 32-bit products would wrap.
  h.group_size = check_leap_engine(m.config_file, leap_shape(h), {version, m.seq_len, group_size});
  ConversionPlan plan;
  PlanFile file;
  file.header = encode_leap_header(h);
  plan.items = leap_layout(h);
  for (size_t i = 0; i < plan.items.size(); ++i) {  // both in for_each_leap_slot's order
    plan.items[i].recipe = m.weights[i].recipe;
    finish_item_geometry(plan.items[i]);  // the recipe checked; the permutation changes the row quantum
  }
  file.total_bytes = plan.items.empty() ? kLeapHeaderBytes : plan.items.back().offset + plan.items.back().size.total();
  plan.files.push_back(std::move(file));
  if (header_out) *header_out = h;
  return plan;
}

}  // namespace leapconv
