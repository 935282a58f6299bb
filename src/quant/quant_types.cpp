#include "quant/quant_types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/byte_io.h"
#include "core/f16.h"

#include "quant/ggml_quants.h"
#include "quant/quantize.h"

namespace leapconv {

namespace {

// Adapters from the table's (rows, cols, block, regions) to each quantizer's own arguments.
// Regions are in file order, so a scales-first type finds its scales in region[0].

float enc_f32(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  if (rows * cols != 0) std::memcpy(r[0], w, size_t(rows * cols) * 4);  // (empty tensors may have no buffers)
  return 0.0f;
}
void dec_f32(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t, float* out) {
  if (rows * cols != 0) std::memcpy(out, r[0], size_t(rows * cols) * 4);
}

// 16-bit floats, one value at a time; returns max |w - back(to(w))|. NaN weights are carried,
// not an error (a 16-bit float stores them).
template <uint16_t (*To)(float), float (*Back)(uint16_t)>
float enc_half(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  float worst = 0.0f;
  const size_t n = size_t(rows * cols);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = To(w[i]);
    std::memcpy(r[0] + 2 * i, &h, 2);
    const float e = std::fabs(w[i] - Back(h));
    worst = e > worst ? e : worst;
  }
  return worst;
}
template <float (*Back)(uint16_t)>
void dec_half(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t, float* out) {
  const size_t n = size_t(rows * cols);
  for (size_t i = 0; i < n; ++i) out[i] = Back(get_le<uint16_t>(r[0] + 2 * i));
}
// F16 takes ggml's conversion: the project's own for every number (checked over all 2^32
// floats), and a NaN becomes ggml's quiet 0x7e00 with its sign, as llama.cpp writes it.
constexpr auto enc_f16 = enc_half<ggml::fp32_to_fp16, ggml::fp16_to_fp32>;
constexpr auto dec_f16 = dec_half<f16_to_f32>;
constexpr auto enc_bf16 = enc_half<ggml::fp32_to_bf16, ggml::bf16_to_fp32>;
constexpr auto dec_bf16 = dec_half<ggml::bf16_to_fp32>;

float enc_int8(const float* w, int64_t rows, int64_t cols, int64_t block, uint8_t* const* r) {
  return quantize_int8_groups(w, size_t(rows * cols), int(block), reinterpret_cast<int8_t*>(r[0]), r[1]);
}
void dec_int8(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t block, float* out) {
  dequantize_int8_groups(reinterpret_cast<const int8_t*>(r[0]), r[1],
                         size_t(rows * cols), int(block), out);
}

float enc_q8(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  return quantize_q8_rows(w, size_t(rows), size_t(cols), r[0],
                          reinterpret_cast<int8_t*>(r[1]));
}
void dec_q8(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t, float* out) {
  dequantize_q8_rows(r[0], reinterpret_cast<const int8_t*>(r[1]),
                     size_t(rows), size_t(cols), out);
}

float enc_q4(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  return quantize_q4_rows(w, size_t(rows), size_t(cols), r[0], r[1]);
}
void dec_q4(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t, float* out) {
  dequantize_q4_rows(r[0], r[1], size_t(rows), size_t(cols), out);
}

// ggml's block types: each row is quantized on its own (blocks never straddle rows), then
// decoded again to report the largest error; a row with NaN or Inf cannot be quantized. Nor
// can a row whose block scales overflow their f16 (a finite weight too large for the type:
// Q8_0's d = max|x| / 127 is Inf past ~8.3e6, and every value of the block would decode to
// Inf or NaN): the bytes stay ggml's, the error is +inf, and the conversion refuses the tensor.
using RowQuantize = void (*)(const float*, uint8_t*, int64_t);
using RowDequantize = void (*)(const uint8_t*, float*, int64_t);

// Where each type's f16 fields sit in its block (ggml's block_* structs): d, and dmin / m
// where the type has one.
struct HalfFields {
  int n;
  int at[2];
};
template <int64_t Bytes>
constexpr HalfFields kHalfFields = {0, {0, 0}};
template <> constexpr HalfFields kHalfFields<ggml::kQ8_0BlockBytes> = {1, {0, 0}};   // d, qs[32]
template <> constexpr HalfFields kHalfFields<ggml::kQ4_0BlockBytes> = {1, {0, 0}};   // d, qs[16]
template <> constexpr HalfFields kHalfFields<ggml::kQ4_1BlockBytes> = {2, {0, 2}};   // d, m, qs[16]
template <> constexpr HalfFields kHalfFields<ggml::kQ5_0BlockBytes> = {1, {0, 0}};   // d, qh[4], qs[16]
template <> constexpr HalfFields kHalfFields<ggml::kQ5_1BlockBytes> = {2, {0, 2}};   // d, m, qh[4], qs[16]
template <> constexpr HalfFields kHalfFields<ggml::kQ2_KBlockBytes> = {2, {80, 82}};  // scales[16], qs[64], d, dmin
template <> constexpr HalfFields kHalfFields<ggml::kQ3_KBlockBytes> = {1, {108, 0}}; // hmask[32], qs[64], scales[12], d
template <> constexpr HalfFields kHalfFields<ggml::kQ4_KBlockBytes> = {2, {0, 2}};   // d, dmin, scales[12], qs[128]
template <> constexpr HalfFields kHalfFields<ggml::kQ5_KBlockBytes> = {2, {0, 2}};   // d, dmin, scales[12], qh[32], qs[128]
template <> constexpr HalfFields kHalfFields<ggml::kQ6_KBlockBytes> = {1, {208, 0}}; // ql[128], qh[64], scales[16], d

// A row whose max |x| reaches this is refused before ggml's search could overflow into a
// meaningless block (see kQ3_KSearchLimit); +inf: only NaN and Inf are.
template <int64_t Bytes>
constexpr float kSearchLimit = INFINITY;
template <> constexpr float kSearchLimit<ggml::kQ3_KBlockBytes> = ggml::kQ3_KSearchLimit;
template <> constexpr float kSearchLimit<ggml::kQ6_KBlockBytes> = ggml::kQ6_KSearchLimit;

// True when every f16 field of `blocks` blocks is finite (exponent bits not all ones).
template <int64_t Bytes>
bool half_fields_finite(const uint8_t* y, int64_t blocks) {
  constexpr HalfFields f = kHalfFields<Bytes>;
  static_assert(f.n > 0, "a ggml block type without its f16 fields listed");
  uint16_t bad = 0;
  for (int64_t b = 0; b < blocks; ++b)
    for (int i = 0; i < f.n; ++i) {
      const uint16_t h = uint16_t(y[b * Bytes + f.at[i]] | (y[b * Bytes + f.at[i] + 1] << 8));
      bad |= uint16_t((h & 0x7c00) == 0x7c00);
    }
  return !bad;
}

template <RowQuantize Q, RowDequantize DQ, int64_t Values, int64_t Bytes>
float enc_ggml(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  const int64_t row_bytes = cols / Values * Bytes;
  float worst = 0.0f, back[256];
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = w + i * cols;
    if (!(abs_max(x, size_t(cols)) < kSearchLimit<Bytes>)) return INFINITY;  // NaN, Inf, or past the search
    uint8_t* y = r[0] + i * row_bytes;
    Q(x, y, cols);
    if (!half_fields_finite<Bytes>(y, cols / Values)) return INFINITY;
    for (int64_t b = 0; b < cols; b += Values) {  // one block at a time, decoded in the cache
      DQ(y + b / Values * Bytes, back, Values);
      for (int64_t j = 0; j < Values; ++j) {
        const float e = std::fabs(x[b + j] - back[j]);
        if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;  // a NaN error is no error to miss
      }
    }
  }
  return worst;
}
// Types whose quantizer reports its own error in the same pass (SIMD, bytes unchanged), +inf
// for a row holding a NaN or an Inf; an overflowing scale is caught here.
using RowQuantizeErr = float (*)(const float*, uint8_t*, int64_t);
template <RowQuantizeErr QE, int64_t Values, int64_t Bytes>
float enc_ggml_err(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  const int64_t row_bytes = cols / Values * Bytes;
  float worst = 0.0f;
  for (int64_t i = 0; i < rows; ++i) {
    uint8_t* y = r[0] + i * row_bytes;
    const float e = QE(w + i * cols, y, cols);  // +inf for a NaN or an Inf
    if (!half_fields_finite<Bytes>(y, cols / Values)) return INFINITY;
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
  }
  return worst;
}
template <RowDequantize DQ, int64_t Values, int64_t Bytes>
void dec_ggml(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t, float* out) {
  const int64_t row_bytes = cols / Values * Bytes;
  for (int64_t i = 0; i < rows; ++i) DQ(r[0] + i * row_bytes, out + i * cols, cols);
}
#define GGML_CODEC(T, t)                                                                        \
  enc_ggml<ggml::quantize_row_##t, ggml::dequantize_row_##t, ggml::k##T##BlockValues,           \
           ggml::k##T##BlockBytes>,                                                             \
      dec_ggml<ggml::dequantize_row_##t, ggml::k##T##BlockValues, ggml::k##T##BlockBytes>

#define GGML_CODEC_ERR(T, t)                                                                    \
  enc_ggml_err<ggml::quantize_row_##t##_err, ggml::k##T##BlockValues, ggml::k##T##BlockBytes>,     \
      dec_ggml<ggml::dequantize_row_##t, ggml::k##T##BlockValues, ggml::k##T##BlockBytes>


// ---- block anatomies: where each element's bits sit (ggml's block_* structs and the loops of
// its dequantize_row_*; GGUF-lite's layouts of SPEC.md). Held to ggml by block_anatomy_test.
StoredInt bits(int byte, int shift, int width, int offset = 0) {
  StoredInt s;
  s.part[0] = {byte, shift, width};
  s.n = 1;
  s.offset = offset;
  return s;
}
StoredInt sbits(int byte, int shift, int width) {  // two's complement
  StoredInt s = bits(byte, shift, width);
  s.is_signed = true;
  return s;
}
StoredInt operator+(StoredInt lo, BitSlice hi) {  // hi's bits above lo's
  lo.part[lo.n++] = hi;
  return lo;
}
StoredInt less(StoredInt s, int offset) {
  s.offset = offset;
  return s;
}

// Q8_0 {d, qs[32]}; GGUF-lite Q8 as shown: the row's scale, then 32 of its int8 values.
void el_int8_at2(int e, ElementBits& o) { o.q = sbits(2 + e, 0, 8); }
// Q4_0 {d, qs[16]} / Q4_1 {d, m, qs[16]}: element j in the low nibble of qs[j], j + 16 in its high one.
template <int Qs, int Offset>
void el_q4_legacy(int e, ElementBits& o) { o.q = bits(Qs + e % 16, e < 16 ? 0 : 4, 4, Offset); }
// Q5_0 {d, qh[4], qs[16]} / Q5_1 {d, m, qh[4], qs[16]}: as Q4, the fifth bit of element j is bit j of qh.
template <int Qh, int Qs, int Offset>
void el_q5_legacy(int e, ElementBits& o) {
  o.q = less(bits(Qs + e % 16, e < 16 ? 0 : 4, 4) + BitSlice{Qh + e / 8, e % 8, 1}, Offset);
}
// GGUF-lite Q4 as shown: the group's f16 scale, then its 32 packed bytes (2k low, 2k+1 high nibble).
void el_q4_lite(int e, ElementBits& o) { o.q = sbits(2 + e / 2, e % 2 * 4, 4); }
// Q2_K {scales[16], qs[64], d, dmin}: per 128 values, 32 bytes of qs hold 4 crumbs each;
// scales[s] = sc (low nibble) | m (high nibble) of sub-block s of 16.
void el_q2_k(int e, ElementBits& o) {
  const int h = e / 128, j = e % 128 / 32, w = e % 32, s = e / 16;
  o.q = bits(16 + 32 * h + w, 2 * j, 2);
  o.sub = s;
  o.sc = bits(s, 0, 4);
  o.m = bits(s, 4, 4);
}
// Q3_K {hmask[32], qs[64], scales[12], d}: 2 low bits as Q2_K, the third in hmask (bit 4h + j of
// byte w), q = (low | third << 2) - 4; 16 6-bit scales: low nibbles in scales[0..7], high crumbs in scales[8..11], less 32.
void el_q3_k(int e, ElementBits& o) {
  const int h = e / 128, j = e % 128 / 32, w = e % 32, s = e / 16;
  o.q = less(bits(32 + 32 * h + w, 2 * j, 2) + BitSlice{w, 4 * h + j, 1}, 4);
  o.sub = s;
  o.sc = less(bits(96 + s % 8, s < 8 ? 0 : 4, 4) + BitSlice{104 + s % 4, 2 * (s / 4), 2}, 32);
}
// Q4_K / Q5_K's 8 6-bit scales and mins in 12 bytes (ggml's get_scale_min_k4), at byte At.
template <int At>
void k4_scales(int j, ElementBits& o) {
  o.sub = j;
  if (j < 4) {
    o.sc = bits(At + j, 0, 6);
    o.m = bits(At + j + 4, 0, 6);
  } else {
    o.sc = bits(At + j + 4, 0, 4) + BitSlice{At + j - 4, 6, 2};
    o.m = bits(At + j + 4, 4, 4) + BitSlice{At + j, 6, 2};
  }
}
// Q4_K {d, dmin, scales[12], qs[128]}: per 64 values, 32 bytes: low nibbles the first 32, high the next.
void el_q4_k(int e, ElementBits& o) {
  const int c = e / 64, r = e % 64;
  o.q = bits(16 + 32 * c + r % 32, r < 32 ? 0 : 4, 4);
  k4_scales<4>(e / 32, o);
}
// Q5_K {d, dmin, scales[12], qh[32], qs[128]}: as Q4_K, the fifth bit in qh (bit 2c or 2c + 1 of byte r % 32).
void el_q5_k(int e, ElementBits& o) {
  const int c = e / 64, r = e % 64;
  o.q = bits(48 + 32 * c + r % 32, r < 32 ? 0 : 4, 4) + BitSlice{16 + r % 32, 2 * c + (r < 32 ? 0 : 1), 1};
  k4_scales<4>(e / 32, o);
}
// Q6_K {ql[128], qh[64], scales[16] int8, d}: per 128 values, the low 4 bits in 64 bytes of ql
// (low nibbles, then high), the high 2 in 32 bytes of qh (crumb k), less 32; int8 scale per 16.
void el_q6_k(int e, ElementBits& o) {
  const int h = e / 128, k = e % 128 / 32, l = e % 32;
  o.q = less(bits(64 * h + l + (k & 1 ? 32 : 0), k >= 2 ? 4 : 0, 4) + BitSlice{128 + 32 * h + l, 2 * k, 2}, 32);
  o.sub = e / 16;
  o.sc = sbits(192 + e / 16, 0, 8);
}

const char* kScale = "scale", *kMin = "min", *kSubScales = "sub-block scales", *kHigh = "high bits", *kValues = "values";
const BlockAnatomy kAnatQ8_0 = {32, 34, {{"d", 0, 2, kScale}, {"qs", 2, 32, kValues}}, 0, -1, 0, "d", "", 32,
                                el_int8_at2, "d·q"};
const BlockAnatomy kAnatQ4_0 = {32, 18, {{"d", 0, 2, kScale}, {"qs", 2, 16, kValues}}, 0, -1, 0, "d", "", 32,
                                el_q4_legacy<2, 8>, "d·q, q = stored − 8"};
const BlockAnatomy kAnatQ4_1 = {32, 20, {{"d", 0, 2, kScale}, {"m", 2, 2, kMin}, {"qs", 4, 16, kValues}}, 0, 2, +1,
                                "d", "m", 32, el_q4_legacy<4, 0>, "d·q + m"};
const BlockAnatomy kAnatQ5_0 = {32, 22, {{"d", 0, 2, kScale}, {"qh", 2, 4, kHigh}, {"qs", 6, 16, kValues}}, 0, -1, 0,
                                "d", "", 32, el_q5_legacy<2, 6, 16>, "d·q, q = stored − 16"};
const BlockAnatomy kAnatQ5_1 = {32, 24, {{"d", 0, 2, kScale}, {"m", 2, 2, kMin}, {"qh", 4, 4, kHigh}, {"qs", 8, 16, kValues}},
                                0, 2, +1, "d", "m", 32, el_q5_legacy<4, 8, 0>, "d·q + m"};
const BlockAnatomy kAnatQ2_K = {256, 84, {{"scales", 0, 16, kSubScales}, {"qs", 16, 64, kValues}, {"d", 80, 2, kScale},
                                {"dmin", 82, 2, kMin}}, 80, 82, -1, "d", "dmin", 16, el_q2_k, "(d·sc)·q − dmin·m"};
const BlockAnatomy kAnatQ3_K = {256, 110, {{"hmask", 0, 32, kHigh}, {"qs", 32, 64, kValues}, {"scales", 96, 12, kSubScales},
                                {"d", 108, 2, kScale}}, 108, -1, 0, "d", "", 16, el_q3_k, "(d·sc)·q, sc = stored − 32, q = stored − 4"};
const BlockAnatomy kAnatQ4_K = {256, 144, {{"d", 0, 2, kScale}, {"dmin", 2, 2, kMin}, {"scales", 4, 12, kSubScales},
                                {"qs", 16, 128, kValues}}, 0, 2, -1, "d", "dmin", 32, el_q4_k, "(d·sc)·q − dmin·m"};
const BlockAnatomy kAnatQ5_K = {256, 176, {{"d", 0, 2, kScale}, {"dmin", 2, 2, kMin}, {"scales", 4, 12, kSubScales},
                                {"qh", 16, 32, kHigh}, {"qs", 48, 128, kValues}}, 0, 2, -1, "d", "dmin", 32, el_q5_k,
                                "(d·sc)·q − dmin·m"};
const BlockAnatomy kAnatQ6_K = {256, 210, {{"ql", 0, 128, kValues}, {"qh", 128, 64, kHigh}, {"scales", 192, 16, kSubScales},
                                {"d", 208, 2, kScale}}, 208, -1, 0, "d", "", 16, el_q6_k, "(d·sc)·q, q = stored − 32"};
// GGUF-lite: a block as shown joins its scale (from the scales region) and its values.
const BlockAnatomy kAnatQ8Ch = {32, 34, {{"s", 0, 2, kScale}, {"q", 2, 32, kValues}}, 0, -1, 0, "s", "", 32,
                                el_int8_at2, "s·q"};
const BlockAnatomy kAnatQ4Lite = {kQ4Group, 2 + kQ4Group / 2, {{"s", 0, 2, kScale}, {"packed", 2, kQ4Group / 2, kValues}},
                                  0, -1, 0, "s", "", kQ4Group, el_q4_lite, "s·q"};

using B = BlockSpan;
using L = Layout;

// id, name, short, label, family, colour, span, block, bits, scale bytes, layout, 2-D only, quantizes,
// GGUF-lite code, ggml type id, encode, decode, block anatomy
const std::vector<QuantType> kTypes = {
    {QType::F32, "F32", "f32", "F32", "float", "#4e79a7", B::Fixed, 1, 32, 0, L::Plain, false, false, 0, 0, enc_f32, dec_f32},
    {QType::F16, "F16", "f16", "F16", "float", "#59a14f", B::Fixed, 1, 16, 0, L::Plain, false, false, 1, 1, enc_f16, dec_f16},
    {QType::Int8Group, "INT8", "int8", "int8 per group", "int8", "#f28e2b", B::Parameter, 0, 8, 4, L::ValuesThenScales, false, true,
     -1, -1, enc_int8, dec_int8},
    {QType::Q8Channel, "Q8_per_channel", "q8", "Q8 per channel", "q8", "#e15759", B::Row, 0, 8, 2, L::ScalesThenValues, true, true, 2,
     -1, enc_q8, dec_q8, &kAnatQ8Ch},
    {QType::Q4Group64, "Q4_per_group_64", "q4", "Q4 per group of 64", "q4", "#b07aa1", B::Fixed, kQ4Group, 4, 2, L::ScalesThenValues, true,
     true, 3, -1, enc_q4, dec_q4, &kAnatQ4Lite},
    {QType::BF16, "BF16", "bf16", "BF16", "float", "#76b7b2", B::Fixed, 1, 16, 0, L::Plain, false, false, -1, 30,
     enc_bf16, dec_bf16},
    {QType::Q8_0, "Q8_0", "q8_0", "Q8_0 (8-bit, blocks of 32)", "q8", "#e15759", B::Fixed, 32, 8, 2, L::Interleaved,
     false, true, -1, 8, GGML_CODEC_ERR(Q8_0, q8_0), &kAnatQ8_0},
    {QType::Q4_0, "Q4_0", "q4_0", "Q4_0 (4-bit, blocks of 32)", "q4", "#b07aa1", B::Fixed, 32, 4, 2, L::Interleaved,
     false, true, -1, 2, GGML_CODEC_ERR(Q4_0, q4_0), &kAnatQ4_0},
    {QType::Q4_1, "Q4_1", "q4_1", "Q4_1 (4-bit with offset)", "q4", "#9c6b98", B::Fixed, 32, 4, 4, L::Interleaved,
     false, true, -1, 3, GGML_CODEC(Q4_1, q4_1), &kAnatQ4_1},
    {QType::Q5_0, "Q5_0", "q5_0", "Q5_0 (5-bit, blocks of 32)", "q5", "#ff9da7", B::Fixed, 32, 5, 2, L::Interleaved,
     false, true, -1, 6, GGML_CODEC(Q5_0, q5_0), &kAnatQ5_0},
    {QType::Q5_1, "Q5_1", "q5_1", "Q5_1 (5-bit with offset)", "q5", "#e8879a", B::Fixed, 32, 5, 4, L::Interleaved,
     false, true, -1, 7, GGML_CODEC(Q5_1, q5_1), &kAnatQ5_1},
    {QType::Q2_K, "Q2_K", "q2_k", "Q2_K (2-bit K-quant)", "k", "#9c755f", B::Fixed, 256, 2, 20, L::Interleaved, false,
     true, -1, 10, GGML_CODEC(Q2_K, q2_K), &kAnatQ2_K},
    {QType::Q3_K, "Q3_K", "q3_k", "Q3_K (3-bit K-quant)", "k", "#bab0ac", B::Fixed, 256, 3, 14, L::Interleaved, false,
     true, -1, 11, GGML_CODEC(Q3_K, q3_K), &kAnatQ3_K},
    {QType::Q4_K, "Q4_K", "q4_k", "Q4_K (4-bit K-quant)", "k", "#edc948", B::Fixed, 256, 4, 16, L::Interleaved, false,
     true, -1, 12, GGML_CODEC(Q4_K, q4_K), &kAnatQ4_K},
    {QType::Q5_K, "Q5_K", "q5_k", "Q5_K (5-bit K-quant)", "k", "#f1ce63", B::Fixed, 256, 5, 16, L::Interleaved, false,
     true, -1, 13, GGML_CODEC(Q5_K, q5_K), &kAnatQ5_K},
    {QType::Q6_K, "Q6_K", "q6_k", "Q6_K (6-bit K-quant)", "k", "#8cd17d", B::Fixed, 256, 6, 18, L::Interleaved, false,
     true, -1, 14, GGML_CODEC(Q6_K, q6_K), &kAnatQ6_K},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

}  // namespace

const std::vector<QuantType>& quant_types() { return kTypes; }

const QuantType& quant_type(QType t) { return kTypes[size_t(t)]; }  // rows are in enum order

const QuantType* find_quant_type(const std::string& name) {
  const std::string l = lower(name);
  for (const QuantType& t : kTypes)
    if (l == t.short_name || l == lower(t.name)) return &t;
  return nullptr;
}

const QuantType* quant_type_by_ggml_type(int id) {
  for (const QuantType& t : kTypes)
    if (t.ggml_type >= 0 && t.ggml_type == id) return &t;
  return nullptr;
}

const QuantType* quant_type_by_gguf_lite_code(int code) {
  for (const QuantType& t : kTypes)
    if (t.gguf_lite_code >= 0 && t.gguf_lite_code == code) return &t;
  return nullptr;
}

std::string quant_type_refusal(const QuantType& t, const std::vector<int64_t>& shape) {
  if (t.needs_matrix && shape.size() != 2) return std::to_string(shape.size()) + "-D";
  // blocks run along the innermost dimension (a row in ggml's terms)
  if (t.span == BlockSpan::Fixed && t.block_values > 1 && !shape.empty() && shape.back() % t.block_values)
    return "in=" + std::to_string(shape.back()) + " is not a multiple of " + std::to_string(t.block_values);
  return "";
}

}  // namespace leapconv
