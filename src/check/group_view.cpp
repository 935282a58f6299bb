#include "check/group_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/f16.h"
#include "formats/gguf_lite.h"
#include "plan/plan.h"
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

// One row of a 2-D tensor as f32, read through the shard's ByteSource (never the whole tensor).
std::vector<float> read_row(const Checkpoint& ck, const TensorRef& t, int64_t row) {
  std::vector<float> v = ck.read_rows_f32(t, row, row + 1);
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
