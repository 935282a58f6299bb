#include "check/group_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/f16.h"
#include "formats/gguf_lite.h"
#include "plan/plan.h"
#include "quant/codebook.h"
#include "quant/quantize.h"

namespace leapconv {

namespace {

using nlohmann::json;
constexpr int G = kQ4Group;  // the Q4 type's block (quant-type table row Q4Group64)

std::string hex16(uint16_t v) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%04x", unsigned(v));
  return b;
}

json floats(const float* p, size_t n) {
  json a = json::array();
  for (size_t i = 0; i < n; ++i) a.push_back(p[i]);
  return a;
}

bool finite(float v) { return (f32_bits(v) & 0x7fffffffu) < 0x7f800000u; }

json scale_json(uint16_t bits) {
  const bool subnormal = (bits & 0x7c00u) == 0 && (bits & 0x03ffu) != 0;
  return {{"scale_bits", bits}, {"scale_hex", hex16(bits)}, {"scale", f16_to_f32(bits)},
          {"scale_subnormal", subnormal}};
}

// Everything about one Q4 group given its stored bytes; w (the 64 source values) may be null.
json q4_from_bytes(uint16_t scale_bits, const uint8_t* packed, const float* w) {
  int q[G];
  float deq[G];
  for (int i = 0; i < G; ++i) {
    const uint8_t b = packed[i / 2];
    q[i] = nibble_value(i % 2 ? uint8_t(b >> 4) : uint8_t(b & 0x0f));
  }
  dequantize_q4_rows(&scale_bits, packed, 1, G, deq);
  json j = scale_json(scale_bits);
  j["q"] = json(std::vector<int>(q, q + G));
  j["packed"] = json(std::vector<int>(packed, packed + G / 2));
  j["dequant"] = floats(deq, G);
  if (!w) {
    j["error"] = nullptr;
    return j;
  }
  float err[G], worst = 0.0f;
  json clamped = json::array();
  const float s = f16_to_f32(scale_bits);
  for (int i = 0; i < G; ++i) {
    err[i] = std::fabs(w[i] - deq[i]);
    worst = std::max(worst, err[i]);
    if (s != 0.0f) {
      const float r = round_half_even(w[i] / s);
      if (r < -8.0f || r > 7.0f) clamped.push_back(i);
    }
  }
  const float amax = abs_max(w, G);
  j["error"] = floats(err, G);
  j["max_error"] = worst;
  j["amax"] = amax;
  j["amax_over_7"] = amax / 7.0f;  // the scale before f16 rounding
  j["clamped"] = clamped;
  return j;
}

// Q4 of one group of 64 exactly as the writer computes it.
json q4_quantize(const float* w) {
  uint16_t scale = 0;
  uint8_t packed[G / 2];
  if (!finite(quantize_q4_rows(w, 1, G, &scale, packed))) throw ConvertError(finite(abs_max(w, G)) ? "the group holds a value too large for Q4: its f16 scale would overflow" : "the group holds NaN or Inf");
  return q4_from_bytes(scale, packed, w);
}

// Q8 per channel of the whole row (one f16 scale), shown on the group's window of columns.
json q8_row(const std::vector<float>& row, int64_t first, int64_t n) {
  const size_t cols = row.size();
  std::vector<int8_t> q(cols);
  uint16_t scale = 0;
  const float worst = quantize_q8_rows(row.data(), 1, cols, &scale, q.data());
  if (!finite(worst))
    throw ConvertError(finite(abs_max(row.data(), cols)) ? "the row holds a value too large for Q8: its f16 scale would overflow" : "the row holds NaN or Inf");
  std::vector<float> deq(cols);
  dequantize_q8_rows(&scale, q.data(), 1, cols, deq.data());
  size_t arg = 0;
  for (size_t c = 1; c < cols; ++c)
    if (std::fabs(row[c]) > std::fabs(row[arg])) arg = c;
  json j = scale_json(scale);
  std::vector<int> qi(q.begin() + first, q.begin() + first + n);
  std::vector<float> err(size_t(n), 0.0f);
  float wworst = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    err[size_t(i)] = std::fabs(row[size_t(first + i)] - deq[size_t(first + i)]);
    wworst = std::max(wworst, err[size_t(i)]);
  }
  j["amax"] = std::fabs(row[arg]);
  j["amax_col"] = arg;
  j["amax_over_127"] = std::fabs(row[arg]) / 127.0f;
  j["first_col"] = first;
  j["q"] = qi;
  j["dequant"] = floats(deq.data() + first, size_t(n));
  j["error"] = floats(err.data(), size_t(n));
  j["max_error_window"] = wworst;
  j["max_error_row"] = worst;
  return j;
}

json row_bytes(int64_t cols) {
  json j;
  for (const QuantType& t : quant_types()) {  // what one row costs in each GGUF-lite type
    if (t.gguf_lite_code < 0 || !quant_type_refusal(t, {1, cols}).empty()) continue;
    j[t.short_name] = t.bytes_of(1, cols, 0).total();
  }
  return j;
}

void check_position(const std::string& file, const std::string& tensor, int64_t rows, int64_t cols,
                    int64_t row, int64_t group) {
  const int64_t groups = (cols + G - 1) / G;
  if (row < 0 || row >= rows)
    throw ConvertError(file, tensor, "row " + std::to_string(row) + " is outside 0.." + std::to_string(rows - 1));
  if (group < 0 || group >= groups)
    throw ConvertError(file, tensor, "group " + std::to_string(group) + " is outside 0.." + std::to_string(groups - 1));
}

json header(const std::string& source, const std::string& tensor, const std::string& dtype, int64_t rows,
            int64_t cols, int64_t row, int64_t group) {
  return {{"source", source}, {"tensor", tensor}, {"source_dtype", dtype}, {"shape", {rows, cols}},
          {"rows", rows}, {"cols", cols}, {"groups", (cols + G - 1) / G}, {"group_size", G},
          {"row", row}, {"group", group}, {"first_col", group * G}, {"row_bytes", row_bytes(cols)}};
}

// The view of a row held in memory (checkpoint and example sources).
json view_of_row(json j, const std::vector<float>& row, int64_t group, bool float_source) {
  const int64_t cols = int64_t(row.size()), first = group * G, n = std::min<int64_t>(G, cols - first);
  j["values"] = floats(row.data() + first, size_t(n));
  if (!float_source) {
    j["q4"] = nullptr;
    j["q8"] = nullptr;
    j["note"] = "an integer tensor: GGUF-lite carries it as F32";
    return j;
  }
  if (cols % G) {
    j["q4"] = nullptr;
    j["note"] = "in=" + std::to_string(cols) + " is not a multiple of 64: Q4 falls back to F16 for this tensor";
  } else {
    j["q4"] = q4_quantize(row.data() + first);
  }
  j["q8"] = q8_row(row, first, n);
  return j;
}

const TensorRef& matrix_ref(const Checkpoint& ck, const std::string& tensor) {
  const TensorRef* t = ck.find(tensor);
  if (!t) throw ConvertError("", tensor, "no such tensor in the checkpoint");
  if (t->info.shape.size() != 2)
    throw ConvertError(ck.shard_name(t->shard), tensor,
                       std::to_string(t->info.shape.size()) + "-D: the group view takes 2-D tensors");
  return *t;
}

// One row of a tensor as f32 (rows of its last dimension), realized as any recipe is: only that
// row's bytes are read, never the whole tensor.
std::vector<float> read_row(const Checkpoint& ck, const TensorRef& t, int64_t row) {
  Recipe r = Recipe::of(ck, t);
  const RowView view = RowView::of(t.info.shape);
  r.check(t.info.name, view.rows, view.cols);
  if (row < 0 || row >= view.rows) throw ConvertError(ck.shard_name(t.shard), t.info.name, "row range out of bounds");
  std::vector<float> v = realize_rows(r, row, row + 1, ck.sources());
  if (dtype_is_float(t.info.dtype) && !finite(abs_max(v.data(), v.size())))
    throw ConvertError(ck.shard_name(t.shard), t.info.name, "row " + std::to_string(row) + " holds NaN or Inf");
  return v;
}

// ---- the classroom example: 4 rows x 128 columns, two groups a row ----
constexpr int64_t kExRows = 4, kExCols = 128;

std::vector<float> example_row(int64_t r) {
  static const float hand_picked[G] = {
      0.125f,  -0.25f,   0.1875f, 0.3125f,  -0.875f, 0.0625f, -0.0625f, 0.5f,
      0.4375f, -0.5625f, 0.02f,   -0.13f,   0.7f,    -0.41f,  0.09f,    0.0f,
      -0.33f,  0.27f,    -0.05f,  0.61f,    -0.72f,  0.15f,   0.38f,    -0.19f,
      0.875f,  -0.01f,   0.24f,   -0.36f,   0.45f,   -0.6f,   0.11f,    -0.08f,
      0.31f,   -0.29f,   0.52f,   -0.47f,   0.06f,   0.66f,   -0.14f,   0.2f,
      -0.81f,  0.03f,    -0.22f,  0.34f,    -0.4f,   0.58f,   -0.03f,   0.17f,
      0.25f,   -0.125f,  0.375f,  -0.375f,  0.625f,  -0.625f, 0.75f,    -0.75f,
      0.0625f, 0.1875f,  -0.1875f, 0.3125f, -0.3125f, 0.4375f, -0.4375f, 0.5625f};
  std::vector<float> v(size_t(kExCols), 0.0f);
  const double pi = 3.14159265358979323846;
  for (int64_t c = 0; c < kExCols; ++c) {
    float& x = v[size_t(c)];
    const int64_t i = c % G;
    switch (r) {
      case 0:  // hand-picked weights, then small weights around one outlier
        x = c < G ? hand_picked[i] : (i == 13 ? 1.75f : 0.04f * float((i * 37) % 17 - 8) / 8.0f);
        break;
      case 1:  // a zero group, then tiny weights k * 2^-24 for k = -8..7
        x = c < G ? 0.0f : std::ldexp(float(i % 16 - 8), -24);
        break;
      case 2:  // a ramp from -1 to 1
        x = float(-1.0 + 2.0 * double(c) / double(kExCols - 1));
        break;
      default:  // a sine of amplitude 0.5, then of amplitude 0.05
        x = float((c < G ? 0.5 : 0.05) * std::sin(2.0 * pi * double(i) / 16.0 + 0.3));
        break;
    }
  }
  return v;
}

const char* example_caption(int64_t r, int64_t g) {
  static const char* captions[kExRows][2] = {
      {"Hand-picked weights. max|w| = 0.875, so the scale is 0.875 / 7 = 0.125 exactly. Weights "
       "half-way between two steps (0.0625, 0.1875, 0.3125, 0.4375, ...) are ties: they round to the "
       "even integer.",
       "An outlier: one weight of 1.75 sets the group's scale to 0.25, and every small weight around "
       "it rounds to 0. Q8 per channel spends 127 steps on the same row."},
      {"A zero group: max|w| = 0, so the scale is 0 (0x0000) and every nibble is 0.",
       "Tiny weights k × 2^-24 for k = -8..7. max|w| / 7 = 1.14 × 2^-24 rounds down to the smallest f16 "
       "(a subnormal, 2^-24), so -8 × 2^-24 lands on -8: the one code that max/7 scaling otherwise never "
       "reaches. All 16 nibble patterns appear."},
      {"A ramp from -1 to 1: the group uses the levels from -7 to 7.",
       "A ramp from -1 to 1, second half."},
      {"A sine of amplitude 0.5.",
       "A sine of amplitude 0.05: Q4 gives this group its own, ten times smaller scale; Q8 per "
       "channel keeps the one scale of the whole row."}};
  return captions[r][g];
}

}  // namespace

nlohmann::json group_view_checkpoint(const Checkpoint& ck, const std::string& tensor, int64_t row,
                                     int64_t group) {
  const TensorRef& t = matrix_ref(ck, tensor);
  const int64_t rows = t.info.shape[0], cols = t.info.shape[1];
  check_position(ck.shard_name(t.shard), tensor, rows, cols, row, group);
  json j = header("checkpoint", tensor, dtype_name(t.info.dtype), rows, cols, row, group);
  j["shard"] = ck.shard_name(t.shard);
  return view_of_row(std::move(j), read_row(ck, t, row), group, dtype_is_float(t.info.dtype));
}

nlohmann::json group_view_file(ByteSource& file, const Checkpoint* ck, const std::string& tensor,
                               int64_t row, int64_t group) {
  const GgufLiteFile f = read_gguf_lite(file);
  auto it = std::find_if(f.tensors.begin(), f.tensors.end(), [&](const GgufTensor& t) { return t.name == tensor; });
  if (it == f.tensors.end()) throw ConvertError(file.name(), tensor, "not in this file");
  if (it->type != QType::Q4Group64)
    throw ConvertError(file.name(), tensor, std::string("is ") + quant_name(it->type) + " in this file, not " +
                                                quant_name(QType::Q4Group64));
  const PlanItem& L = it->layout;
  const int64_t rows = L.rows, cols = L.cols;
  check_position(file.name(), tensor, rows, cols, row, group);
  const RowRegions rr = row_regions(L, row, row + 1);  // the row's scales, then its nibbles
  const int64_t scale_at = rr.region[0].offset + group * 2;
  const int64_t packed_at = rr.region[1].offset + group * G / 2;
  uint8_t sb[2], packed[G / 2];
  file.read_at(scale_at, sb, 2);
  file.read_at(packed_at, packed, sizeof packed);

  json j = header("file", tensor, "", rows, cols, row, group);
  j["file_size"] = f.file_size;
  j["dtype"] = quant_name(it->type);
  j["offsets"] = {{"tensor", L.offset}, {"scale", scale_at}, {"packed", packed_at}};
  std::vector<float> src;
  if (ck) {
    const TensorRef* t = ck->find(tensor);
    if (t && t->info.shape == it->dims && dtype_is_float(t->info.dtype)) {
      src = read_row(*ck, *t, row);
      j["source_dtype"] = dtype_name(t->info.dtype);
    }
  }
  if (src.empty()) {
    j["values"] = nullptr;
    j["q8"] = nullptr;
    j["q4"] = q4_from_bytes(get_le<uint16_t>(sb), packed, nullptr);
    j["note"] = "the open checkpoint has no tensor of this name and shape: no source values to compare";
    return j;
  }
  const float* w = src.data() + group * G;
  j["values"] = floats(w, G);
  j["q4"] = q4_from_bytes(get_le<uint16_t>(sb), packed, w);
  j["q8"] = q8_row(src, group * G, G);
  return j;
}

nlohmann::json group_view_example(int64_t row, int64_t group) {
  check_position("", "classroom example", kExRows, kExCols, row, group);
  json j = header("example", "classroom example", "F32", kExRows, kExCols, row, group);
  j["caption"] = example_caption(row, group);
  return view_of_row(std::move(j), example_row(row), group, true);
}

}  // namespace leapconv

// ---- the block view ----
namespace leapconv {

namespace {

const BlockAnatomy& anatomy_of(const QuantType& t) {
  if (!t.anatomy) throw ConvertError(std::string("the block view has no anatomy for ") + t.name);
  return *t.anatomy;
}
// A codebook type (IQ2_XXS .. IQ1_M): its blocks are laid open group by group (quant/codebook.h).
bool is_codebook(const QuantType& t) { return t.ggml_type >= 0 && *ggml::codebook_formula(GgmlType(t.ggml_type)); }
// Values and bytes of one block as shown: the anatomy's, or a codebook type's ggml block.
int shown_values(const QuantType& t) { return t.anatomy || !is_codebook(t) ? anatomy_of(t).values : t.block_values; }
int shown_bytes(const QuantType& t) {
  return t.anatomy || !is_codebook(t) ? anatomy_of(t).bytes : int(ggml_traits(GgmlType(t.ggml_type)).type_size);
}

// The unsigned concatenation of s's slices, and the integer it stands for.
uint32_t stored_raw(const StoredInt& s, const uint8_t* b, int* width = nullptr) {
  uint32_t v = 0;
  int at = 0;
  for (int i = 0; i < s.n; ++i) {
    const BitSlice& p = s.part[i];
    v |= uint32_t((b[p.byte] >> p.shift) & ((1u << p.width) - 1)) << at;
    at += p.width;
  }
  if (width) *width = at;
  return v;
}
int stored_int(const StoredInt& s, const uint8_t* b) {
  if (s.n == 0) return 1;
  int w = 0;
  const int64_t v = stored_raw(s, b, &w);
  if (s.is_signed) return int(v >= (int64_t(1) << (w - 1)) ? v - (int64_t(1) << w) : v);
  return int(v - s.offset);
}

json slices_json(const StoredInt& s) {
  json a = json::array();
  for (int i = 0; i < s.n; ++i) a.push_back({{"byte", s.part[i].byte}, {"shift", s.part[i].shift}, {"width", s.part[i].width}});
  return a;
}

std::string num(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", double(v));
  return b;
}

// A row's place in the file (or in a buffer holding the row's regions): where its region k starts.
struct RowStart {
  int64_t at[kMaxRegions] = {0, 0};
};
RowStart row_start(const BlockTensor& t, int64_t row) {
  const QuantType& q = *t.type;
  const EncodedSize one = q.bytes_of(1, t.cols, 0);
  RowStart r;
  if (q.layout == Layout::Interleaved) {
    r.at[0] = t.offset + row * one.total();
  } else {  // ScalesThenValues: every scale of the tensor, then every value
    r.at[0] = t.offset + row * one.scales;
    r.at[1] = t.offset + q.bytes_of(t.rows, t.cols, 0).scales + row * one.values;
  }
  return r;
}
struct Piece {
  int64_t offset, size;
};
// Block `block`'s pieces, from its row's region starts.
int pieces_of(const BlockTensor& t, const RowStart& r, int64_t block, Piece* out) {
  const QuantType& q = *t.type;
  const int64_t values = shown_values(q), bytes = shown_bytes(q);
  if (q.layout == Layout::Interleaved) {
    out[0] = {r.at[0] + block * bytes, bytes};
    return 1;
  }
  out[0] = {r.at[0] + (q.span == BlockSpan::Row ? 0 : block * q.scale_bytes), q.scale_bytes};
  out[1] = {r.at[1] + block * values * q.value_bits / 8, values * q.value_bits / 8};
  return 2;
}

void check_block(const BlockTensor& t, int64_t row, int64_t block) {
  const std::string refusal = block_view_refusal(*t.type);
  if (!refusal.empty()) throw ConvertError(t.file, t.name, refusal);
  const int64_t n = blocks_per_row(t);
  if (n < 1) throw ConvertError(t.file, t.name, "rows of " + std::to_string(t.cols) + " values hold no whole block of " + std::to_string(shown_values(*t.type)));
  if (row < 0 || row >= t.rows)
    throw ConvertError(t.file, t.name, "row " + std::to_string(row) + " is outside 0.." + std::to_string(t.rows - 1));
  if (block < 0 || block >= n)
    throw ConvertError(t.file, t.name, "block " + std::to_string(block) + " is outside 0.." + std::to_string(n - 1));
}

// The example tensor every type's built-in example quantizes: 2 rows of 512, a sine with a slow
// swell, an outlier, and a quiet stretch (a sub-block of small weights beside large ones).
constexpr int64_t kBvRows = 2, kBvCols = 512;
std::vector<float> block_example_row(int64_t r) {
  std::vector<float> v(static_cast<size_t>(kBvCols));
  for (int64_t c = 0; c < kBvCols; ++c) {
    double x = 0.5 * std::sin(0.37 * double(c) + 1.3 * double(r)) * (1.0 + 0.5 * std::cos(double(c) / 23.0));
    if (c % 256 >= 96 && c % 256 < 128) x *= 0.06;  // quiet
    if (c % 256 == 200) x = r ? -1.9 : 2.1;          // an outlier
    v[size_t(c)] = float(x);
  }
  return v;
}

// A row of `t` quantized with its own encoder, and the view of one of its blocks.
json block_of_row(const BlockTensor& t, int64_t row, int64_t block, const std::vector<float>& src) {
  const QuantType& q = *t.type;
  const EncodedSize one = q.bytes_of(1, t.cols, 0);
  std::vector<uint8_t> buf(size_t(one.total()));
  uint8_t* region[kMaxRegions] = {buf.data(), nullptr};
  RowStart r;  // the row's regions in the buffer: values after the scales for split layouts
  if (q.layout != Layout::Interleaved) {
    region[0] = buf.data();
    region[1] = buf.data() + one.scales;
    r.at[1] = one.scales;
  }
  // a type ggml quantizes only with importance weights (IQ2_XXS, IQ2_XS, IQ1_S): with flat ones,
  // every column alike (what an imatrix that saw every column equally gives)
  const std::vector<float> flat(q.needs_importance ? size_t(t.cols) : 0, 1.0f);
  const float worst = q.needs_importance ? q.encode_weighted(src.data(), 1, t.cols, flat.data(), region)
                                         : q.encode(src.data(), 1, t.cols, q.block(t.cols, 0), region);
  if (!finite(worst))
    throw ConvertError("", t.name, std::string("row ") + std::to_string(row) + (finite(abs_max(src.data(), src.size()))
        ? " holds a value too large for " + std::string(q.name) + ": a scale would overflow its f16" : " holds NaN or Inf"));
  Piece p[kMaxRegions];
  const int n = pieces_of(t, r, block, p);
  std::vector<uint8_t> bytes;
  for (int i = 0; i < n; ++i) bytes.insert(bytes.end(), buf.begin() + p[i].offset, buf.begin() + p[i].offset + p[i].size);
  return block_view_bytes(t, row, block, bytes.data(), src.data() + block * shown_values(q));
}

}  // namespace

std::string block_view_refusal(const QuantType& t) {
  if (is_codebook(t)) return "";
  if (!t.anatomy && t.layout == Layout::Interleaved && t.block_values > 1) {
    if (std::string(t.family).rfind("iq", 0) == 0)  // IQ2_XXS .. IQ1_M (IQ4_NL and IQ4_XS have an anatomy)
      return std::string(t.name) + " stores groups of 8 or 4 values as one index into a codebook of grid points, not one value's "
                                   "bits each: the block view lays open block types whose values are bits";
    return std::string(t.name) + " packs base-3 digits, not bit fields: the block view lays open block types whose values are bits";  // TQ1_0
  }
  if (!t.anatomy && t.block_values == 1 && !t.quantizes)
    return std::string(t.name) + " is not quantized: each value is a plain " + std::to_string(t.value_bits) +
           "-bit float, stored as it is, with no blocks or scales to lay open. Pick a quantized tensor (Q8_0, Q4_K, ...)";
  if (!t.anatomy) return std::string(t.name) + " stores plain values (or LEAP's int8 groups): the block view lays open block types";
  return "";
}

int64_t blocks_per_row(const BlockTensor& t) { return t.cols / shown_values(*t.type); }

json block_pieces(const BlockTensor& t, int64_t row, int64_t block) {
  check_block(t, row, block);
  Piece p[kMaxRegions];
  const int n = pieces_of(t, row_start(t, row), block, p);
  json a = json::array();
  for (int i = 0; i < n; ++i) a.push_back({{"offset", p[i].offset}, {"size", p[i].size}});
  return a;
}

// A codebook block in the block view's terms: its fields as ggml's struct has them, d as its scale
// field, each grid index a "sub-block" (the point it picks, its signs and scale, the values), each
// element's q the signed grid coordinate its index gives it (its bits: the index's).
json codebook_view(const BlockTensor& t, int64_t row, int64_t block, const uint8_t* b, const float* source) {
  const QuantType& q = *t.type;
  const GgmlType g = GgmlType(q.ggml_type);
  const int values = shown_values(q), nbytes = shown_bytes(q);
  std::vector<float> deq(static_cast<size_t>(values));
  const uint8_t* region[kMaxRegions] = {b, b};
  q.decode(region, 1, values, values, deq.data());
  json fields = json::array(), scale_fields = json::array(), sub_blocks = json::array(), elements = json::array();
  for (const ggml::CodebookField& f : ggml::codebook_fields(g)) {
    fields.push_back({{"name", f.name}, {"offset", f.offset}, {"bytes", f.bytes}, {"role", f.role}});
    if (std::string(f.name) == "d")
      scale_fields.push_back({{"name", "d"}, {"offset", f.offset}, {"bytes", 2}, {"format", "f16"}, {"hex", hex16(uint16_t(b[0] | (b[1] << 8)))},
                              {"value", f16_to_f32(uint16_t(b[0] | (b[1] << 8)))}});
  }
  const std::vector<ggml::CodebookGroup> groups = ggml::codebook_groups(g, b);
  std::vector<float> err;
  float worst = 0.0f;
  for (size_t k = 0; k < groups.size(); ++k) {
    const ggml::CodebookGroup& c = groups[k];
    json bits = json::array(), aux = json::array(), grid = json::array(), vals = json::array();
    for (const auto& s : c.index_slices)
      if (s.width) bits.push_back({{"byte", s.byte}, {"shift", s.shift}, {"width", s.width}});
    for (int a : c.aux_bytes)
      if (a >= 0) aux.push_back({{"byte", a}, {"shift", 0}, {"width", 8}});
    std::string point, signs, shown;
    for (int j = 0; j < c.size; ++j) {
      grid.push_back(c.grid[j]);
      vals.push_back(c.values[j]);
      if (j) {
        point += ", ";
        shown += ", ";
      }
      point += std::to_string(c.grid[j]);
      if (c.signs >= 0) signs += c.signs & (1 << j) ? "−" : "+";
      shown += num(c.values[j]);
    }
    const bool iq1 = c.signs < 0;
    std::string text = "index " + std::to_string(c.index) + " (" + std::to_string(c.index_bits) + " bits) → grid point (" + point + ")" +
                       (iq1 ? std::string(" + ") + (c.delta < 0 ? "−" : "") + "1/8" : ", signs " + signs) + ", scale " + num(c.scale) +
                       " → (" + shown + ")";
    sub_blocks.push_back({{"index", int(k)}, {"first", c.first}, {"size", c.size}, {"grid_index", c.index}, {"index_bits", c.index_bits},
                          {"grid", grid}, {"signs", c.signs}, {"scale", c.scale}, {"delta", c.delta}, {"values", vals},
                          {"sc_bits", aux}, {"scale_text", "values " + std::to_string(c.first) + "–" + std::to_string(c.first + c.size - 1) + ": " + text}});
    for (int j = 0; j < c.size; ++j) {
      const int e = c.first + j;
      // the grid coordinate with its sign (IQ1: the coordinate, the delta added to it)
      const int qv = c.signs >= 0 && (c.signs & (1 << j)) ? -c.grid[j] : c.grid[j];
      if (f32_bits(c.values[j]) != f32_bits(deq[size_t(e)]) && !(std::isnan(c.values[j]) && std::isnan(deq[size_t(e)])))
        throw ConvertError("", t.name, std::string("internal: ") + q.name + "'s codebook decode disagrees with its decoder at element " + std::to_string(e));
      const std::string et = iq1 ? num(c.scale) + " × (" + std::to_string(qv) + (c.delta < 0 ? " − " : " + ") + "0.125) = " + num(c.values[j])
                                 : num(c.scale) + " × " + std::to_string(qv) + " = " + num(c.values[j]);
      elements.push_back({{"q", qv}, {"raw", c.index}, {"bits", bits}, {"sub", int(k)}, {"text", et}});
      if (source) {
        err.push_back(std::fabs(source[e] - deq[size_t(e)]));
        worst = std::max(worst, err.back());
      }
    }
  }
  json j = {{"view", "block"}, {"codebook", true}, {"type", q.name}, {"label", q.label}, {"formula", ggml::codebook_formula(g)},
            {"values", values}, {"block_bytes", nbytes}, {"sub_values", groups.empty() ? values : groups[0].size}, {"tensor", t.name},
            {"rows", t.rows}, {"cols", t.cols}, {"row", row}, {"block", block}, {"blocks", blocks_per_row(t)},
            {"first_col", block * values}, {"bytes", std::vector<int>(b, b + nbytes)}, {"fields", fields},
            {"scale_fields", scale_fields}, {"sub_blocks", sub_blocks}, {"elements", elements},
            {"dequant", floats(deq.data(), deq.size())}, {"source_values", nullptr}, {"errors", nullptr}};
  if (source) {
    j["source_values"] = floats(source, size_t(values));
    j["errors"] = floats(err.data(), err.size());
    j["max_error"] = worst;
  }
  return j;
}

json block_view_bytes(const BlockTensor& t, int64_t row, int64_t block, const uint8_t* b, const float* source) {
  check_block(t, row, block);
  const QuantType& q = *t.type;
  if (!q.anatomy && is_codebook(q)) return codebook_view(t, row, block, b, source);
  const BlockAnatomy& a = anatomy_of(q);
  // the values, from the project's own decoder of the type
  std::vector<float> deq(size_t(a.values));
  const uint8_t* region[kMaxRegions] = {b, b + q.scale_bytes};
  q.decode(region, 1, a.values, q.block(a.values, 0), deq.data());

  const float d = anatomy_scale(a, b, a.d_at), dmin = a.dmin_at >= 0 ? anatomy_scale(a, b, a.dmin_at) : 0.0f;
  json fields = json::array();
  for (const BlockField& f : a.fields) fields.push_back({{"name", f.name}, {"offset", f.offset}, {"bytes", f.bytes}, {"role", f.role}});
  // the scale fields (d, dmin): their bytes, how they are stored, their values
  const bool f16 = a.d_format == ScaleFormat::F16;
  json scale_fields = json::array();
  for (int k = 0; k < 2; ++k) {
    const int at = k ? a.dmin_at : a.d_at;
    if (at < 0) continue;
    char hex[8];
    std::snprintf(hex, sizeof hex, f16 ? "0x%04x" : "0x%02x", f16 ? unsigned(b[at] | (b[at + 1] << 8)) : unsigned(b[at]));
    scale_fields.push_back({{"name", k ? a.dmin_name : a.d_name}, {"offset", at}, {"bytes", a.scale_field_bytes()},
                            {"format", f16 ? "f16" : "E8M0"}, {"hex", hex}, {"value", k ? dmin : d}});
  }

  const bool subs = a.sub_values < a.values;
  json elements = json::array(), sub_blocks = json::array();
  std::vector<float> err;
  float worst = 0.0f;
  for (int e = 0; e < a.values; ++e) {
    ElementBits eb;
    a.element(e, eb);
    const int qi = a.q_table ? a.q_table[stored_raw(eb.q, b)] : stored_int(eb.q, b);
    const int sc = stored_int(eb.sc, b), m = stored_int(eb.m, b);
    const float scale = d * float(sc), min = dmin * float(m);  // ggml's order: (d·sc)·q ± dmin·m
    float y = scale * float(qi);
    if (a.dmin_at >= 0) y = a.min_sign > 0 ? y + min : y - min;
    if (f32_bits(y) != f32_bits(deq[size_t(e)]) && !(std::isnan(y) && std::isnan(deq[size_t(e)])))
      throw ConvertError("", t.name, std::string("internal: ") + q.name + "'s anatomy disagrees with its decoder at element " + std::to_string(e));
    if (subs && e % a.sub_values == 0) {
      json s = {{"index", eb.sub}, {"first", e}, {"sc", sc}, {"sc_bits", slices_json(eb.sc)}, {"scale", scale},
                {"scale_text", std::string(a.d_name) + "·sc = " + num(d) + " × " + std::to_string(sc) + " = " + num(scale)}};
      if (a.dmin_at >= 0) {
        s["m"] = m;
        s["m_bits"] = slices_json(eb.m);
        s["min"] = min;
        s["min_text"] = std::string(a.dmin_name) + "·m = " + num(dmin) + " × " + std::to_string(m) + " = " + num(min);
      }
      if (eb.sc.n) s["sc_raw"] = stored_raw(eb.sc, b);
      if (eb.m.n) s["m_raw"] = stored_raw(eb.m, b);
      sub_blocks.push_back(std::move(s));
    }
    std::string text = num(scale) + " × " + std::to_string(qi);
    if (a.dmin_at >= 0) text += (a.min_sign > 0 ? " + " : " − ") + num(min);
    text += " = " + num(y);
    json el = {{"q", qi}, {"raw", stored_raw(eb.q, b)}, {"bits", slices_json(eb.q)}, {"sub", eb.sub}, {"text", text}};
    elements.push_back(std::move(el));
    if (source) {
      err.push_back(std::fabs(source[e] - deq[size_t(e)]));
      worst = std::max(worst, err.back());
    }
  }
  const int64_t n = blocks_per_row(t);
  json j = {{"view", "block"}, {"type", q.name}, {"label", q.label}, {"formula", a.formula}, {"values", a.values},
            {"block_bytes", a.bytes}, {"sub_values", a.sub_values}, {"tensor", t.name}, {"rows", t.rows}, {"cols", t.cols},
            {"row", row}, {"block", block}, {"blocks", n}, {"first_col", block * a.values},
            {"bytes", std::vector<int>(b, b + a.bytes)}, {"fields", fields}, {"scale_fields", scale_fields},
            {"sub_blocks", sub_blocks}, {"elements", elements}, {"dequant", floats(deq.data(), deq.size())},
            {"source_values", nullptr}, {"errors", nullptr}};
  if (a.q_table) {  // the levels q is looked up in (IQ4_NL / IQ4_XS: ggml's kvalues_iq4nl; MXFP4's)
    ElementBits eb;
    a.element(0, eb);
    int width = 0;
    stored_raw(eb.q, b, &width);
    j["q_table"] = std::vector<int>(a.q_table, a.q_table + (size_t(1) << width));
  }
  if (source) {
    j["source_values"] = floats(source, size_t(a.values));
    j["errors"] = floats(err.data(), err.size());
    j["max_error"] = worst;
  }
  return j;
}

json block_view_checkpoint(const Checkpoint& ck, const std::string& tensor, const QuantType& type, int64_t row,
                           int64_t block) {
  const TensorRef* ref = ck.find(tensor);
  if (!ref) throw ConvertError("", tensor, "no such tensor in the checkpoint");
  const std::vector<int64_t>& s = ref->info.shape;
  BlockTensor t{&type, 1, s.empty() ? 1 : s.back(), 0, tensor, ""};
  for (size_t i = 0; i + 1 < s.size(); ++i) t.rows *= s[i];
  if (!dtype_is_float(ref->info.dtype)) throw ConvertError(ck.shard_name(ref->shard), tensor, "an integer tensor is not quantized");
  const std::string why = quant_type_refusal(type, {t.rows, t.cols});
  if (!why.empty()) throw ConvertError(ck.shard_name(ref->shard), tensor, std::string(type.name) + " cannot store it: " + why);
  check_block(t, row, block);
  json j = block_of_row(t, row, block, read_row(ck, *ref, row));
  j["source"] = "checkpoint";
  j["source_dtype"] = dtype_name(ref->info.dtype);
  return j;
}

json block_view_example(const QuantType& type, int64_t row, int64_t block) {
  BlockTensor t{&type, kBvRows, kBvCols, 0, std::string(type.name) + " example", ""};
  check_block(t, row, block);
  json j = block_of_row(t, row, block, block_example_row(row));
  j["source"] = "example";
  j["source_dtype"] = "F32";
  return j;
}

BlockTensor block_tensor(const json& entry) {
  const std::string type = entry.value("dtype", ""), name = entry.value("name", "");
  const QuantType* q = find_quant_type(type);
  if (!q) throw ConvertError("", name, "unknown type " + json(type).dump());
  const std::string why = block_view_refusal(*q);
  if (!why.empty()) throw ConvertError("", name, why);
  BlockTensor t{q, 1, 1, entry.value("offset", int64_t(0)), name, ""};
  const std::vector<int64_t> shape = entry.value("shape", std::vector<int64_t>{});
  // a shape from an opened file's tensor table: bounded so that no offset below can overflow
  constexpr int64_t kMaxValues = int64_t(1) << 48;
  if (shape.empty()) throw ConvertError("", name, "no shape");
  for (int64_t d : shape)
    if (d < 1 || d > kMaxValues) throw ConvertError("", name, "shape " + json(shape).dump() + " has a dimension outside 1..2^48");
  t.cols = shape.back();
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    if (t.rows > kMaxValues / shape[i] || t.rows * shape[i] > kMaxValues / t.cols)
      throw ConvertError("", name, "shape " + json(shape).dump() + " holds more than 2^48 values");
    t.rows *= shape[i];
  }
  if (t.offset < 0 || t.offset > kMaxValues) throw ConvertError("", name, "offset " + std::to_string(t.offset) + " is outside 0..2^48");
  return t;
}

json block_view_file(ByteSource& file, const Checkpoint* ck, const json& entry, int64_t row, int64_t block) {
  BlockTensor t = block_tensor(entry);
  t.file = file.name();
  check_block(t, row, block);
  Piece p[kMaxRegions];
  const int n = pieces_of(t, row_start(t, row), block, p);
  std::vector<uint8_t> bytes;
  json offsets = json::array();
  for (int i = 0; i < n; ++i) {
    if (p[i].offset < 0 || p[i].offset + p[i].size > file.size())
      throw ConvertError(file.name(), t.name, "block " + std::to_string(block) + " of row " + std::to_string(row) +
                                                  " lies past the end of the file");
    const size_t at = bytes.size();
    bytes.resize(at + size_t(p[i].size));
    file.read_at(p[i].offset, bytes.data() + at, size_t(p[i].size));
    offsets.push_back({{"offset", p[i].offset}, {"size", p[i].size}});
  }
  // the source row, when the file holds the checkpoint tensor's values as they are
  std::vector<float> src;
  const TensorRef* ref = ck ? ck->find(entry.value("source", "")) : nullptr;
  const bool unchanged = !entry.contains("rope_permuted_heads") && !entry.contains("transposed") &&
                         !entry.contains("value_offset");
  if (ref && unchanged && dtype_is_float(ref->info.dtype) && ref->info.numel() == t.rows * t.cols &&
      !ref->info.shape.empty() && ref->info.shape.back() == t.cols)
    src = read_row(*ck, *ref, row);
  json j = block_view_bytes(t, row, block, bytes.data(), src.empty() ? nullptr : src.data() + block * shown_values(*t.type));
  j["source"] = "file";
  j["pieces"] = offsets;
  const std::vector<int64_t> shape = entry.value("shape", std::vector<int64_t>{});
  if (shape.size() == 3) {  // a mixture's stacked experts [experts, rows, cols]: whose row this is
    j["expert"] = row / shape[1];
    j["expert_row"] = row % shape[1];
    j["experts"] = shape[0];
  }
  if (!src.empty()) j["source_dtype"] = dtype_name(ref->info.dtype);
  return j;
}

json block_view_types() {
  json a = json::array();
  for (const QuantType& t : quant_types())
    if (t.anatomy)
      a.push_back({{"name", t.name}, {"label", t.label}, {"values", t.anatomy->values}, {"bytes", t.anatomy->bytes},
                   {"formula", t.anatomy->formula}});
    else if (is_codebook(t))
      a.push_back({{"name", t.name}, {"label", t.label}, {"values", shown_values(t)}, {"bytes", shown_bytes(t)},
                   {"formula", ggml::codebook_formula(GgmlType(t.ggml_type))}, {"codebook", true}});
  return a;
}

}  // namespace leapconv
