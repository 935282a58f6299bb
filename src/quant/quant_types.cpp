#include "quant/quant_types.h"

#include <algorithm>
#include <cfloat>
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

constexpr const char* kScale = "scale", *kMin = "min", *kSubScales = "sub-block scales", *kHigh = "high bits", *kValues = "values";
constexpr BlockAnatomy kAnatQ8_0 = {ggml::kQ8_0BlockValues, ggml::kQ8_0BlockBytes, {{"d", 0, 2, kScale}, {"qs", 2, 32, kValues}}, 0, -1, 0, "d", "", 32,
                                el_int8_at2, "d·q"};
constexpr BlockAnatomy kAnatQ4_0 = {ggml::kQ4_0BlockValues, ggml::kQ4_0BlockBytes, {{"d", 0, 2, kScale}, {"qs", 2, 16, kValues}}, 0, -1, 0, "d", "", 32,
                                el_q4_legacy<2, 8>, "d·q, q = stored − 8"};
constexpr BlockAnatomy kAnatQ4_1 = {ggml::kQ4_1BlockValues, ggml::kQ4_1BlockBytes, {{"d", 0, 2, kScale}, {"m", 2, 2, kMin}, {"qs", 4, 16, kValues}}, 0, 2, +1,
                                "d", "m", 32, el_q4_legacy<4, 0>, "d·q + m"};
constexpr BlockAnatomy kAnatQ5_0 = {ggml::kQ5_0BlockValues, ggml::kQ5_0BlockBytes, {{"d", 0, 2, kScale}, {"qh", 2, 4, kHigh}, {"qs", 6, 16, kValues}}, 0, -1, 0,
                                "d", "", 32, el_q5_legacy<2, 6, 16>, "d·q, q = stored − 16"};
constexpr BlockAnatomy kAnatQ5_1 = {ggml::kQ5_1BlockValues, ggml::kQ5_1BlockBytes, {{"d", 0, 2, kScale}, {"m", 2, 2, kMin}, {"qh", 4, 4, kHigh}, {"qs", 8, 16, kValues}},
                                0, 2, +1, "d", "m", 32, el_q5_legacy<4, 8, 0>, "d·q + m"};
constexpr BlockAnatomy kAnatQ2_K = {ggml::kQ2_KBlockValues, ggml::kQ2_KBlockBytes, {{"scales", 0, 16, kSubScales}, {"qs", 16, 64, kValues}, {"d", 80, 2, kScale},
                                {"dmin", 82, 2, kMin}}, 80, 82, -1, "d", "dmin", 16, el_q2_k, "(d·sc)·q − dmin·m"};
constexpr BlockAnatomy kAnatQ3_K = {ggml::kQ3_KBlockValues, ggml::kQ3_KBlockBytes, {{"hmask", 0, 32, kHigh}, {"qs", 32, 64, kValues}, {"scales", 96, 12, kSubScales},
                                {"d", 108, 2, kScale}}, 108, -1, 0, "d", "", 16, el_q3_k, "(d·sc)·q, sc = stored − 32, q = stored − 4"};
constexpr BlockAnatomy kAnatQ4_K = {ggml::kQ4_KBlockValues, ggml::kQ4_KBlockBytes, {{"d", 0, 2, kScale}, {"dmin", 2, 2, kMin}, {"scales", 4, 12, kSubScales},
                                {"qs", 16, 128, kValues}}, 0, 2, -1, "d", "dmin", 32, el_q4_k, "(d·sc)·q − dmin·m"};
constexpr BlockAnatomy kAnatQ5_K = {ggml::kQ5_KBlockValues, ggml::kQ5_KBlockBytes, {{"d", 0, 2, kScale}, {"dmin", 2, 2, kMin}, {"scales", 4, 12, kSubScales},
                                {"qh", 16, 32, kHigh}, {"qs", 48, 128, kValues}}, 0, 2, -1, "d", "dmin", 32, el_q5_k,
                                "(d·sc)·q − dmin·m"};
constexpr BlockAnatomy kAnatQ6_K = {ggml::kQ6_KBlockValues, ggml::kQ6_KBlockBytes, {{"ql", 0, 128, kValues}, {"qh", 128, 64, kHigh}, {"scales", 192, 16, kSubScales},
                                {"d", 208, 2, kScale}}, 208, -1, 0, "d", "", 16, el_q6_k, "(d·sc)·q, q = stored − 32"};
// MXFP4 {e, qs[16]}: nibbles as Q4_0's, each an index into the 16 levels; d an E8M0 byte.
constexpr BlockAnatomy kAnatMXFP4 = {ggml::kMXFP4BlockValues, ggml::kMXFP4BlockBytes, {{"e", 0, 1, kScale}, {"qs", 1, 16, kValues}}, 0, -1, 0,
                                 "e", "", 32, el_q4_legacy<1, 0>,
                                 "d·q, d = 2^(e − 128), q = {0 1 2 3 4 6 8 12 0 −1 −2 −3 −4 −6 −8 −12}[stored]",
                                 ScaleFormat::E8M0Half, ggml::kMxfp4Levels};
// IQ4_NL {d, qs[16]}: as MXFP4 with an f16 d, each nibble an index into ggml's 16 non-linear levels.
constexpr BlockAnatomy kAnatIQ4_NL = {ggml::kIQ4_NLBlockValues, ggml::kIQ4_NLBlockBytes, {{"d", 0, 2, kScale}, {"qs", 2, 16, kValues}}, 0, -1, 0,
                                  "d", "", 32, el_q4_legacy<2, 0>, "d·q, q = {−127 −104 −83 −65 −49 −35 −22 −10 1 13 25 38 53 69 89 113}[stored]",
                                  ScaleFormat::F16, ggml::kIq4nlLevels};
// IQ4_XS {d, scales_h, scales_l[4], qs[128]}: 8 sub-blocks of 32, each a 6-bit scale (low nibble
// in scales_l, crumb 2·ib of the 16-bit scales_h) less 32; per sub-block 16 bytes of nibbles as IQ4_NL's.
void el_iq4_xs(int e, ElementBits& o) {
  const int ib = e / 32, j = e % 32;
  o.q = bits(8 + 16 * ib + j % 16, j < 16 ? 0 : 4, 4);
  o.sub = ib;
  o.sc = less(bits(4 + ib / 2, 4 * (ib % 2), 4) + BitSlice{2 + ib / 4, 2 * (ib % 4), 2}, 32);
}
constexpr BlockAnatomy kAnatIQ4_XS = {ggml::kIQ4_XSBlockValues, ggml::kIQ4_XSBlockBytes, {{"d", 0, 2, kScale}, {"scales_h", 2, 2, kSubScales},
                                  {"scales_l", 4, 4, kSubScales}, {"qs", 8, 128, kValues}}, 0, -1, 0, "d", "", 32, el_iq4_xs,
                                  "(d·sc)·q, sc = stored − 32, q = {−127 −104 −83 −65 −49 −35 −22 −10 1 13 25 38 53 69 89 113}[stored]",
                                  ScaleFormat::F16, ggml::kIq4nlLevels};
// TQ2_0 {qs[64], d}: per 128 values, 32 bytes of 4 crumbs (value 32n + m in crumb n of byte m), less 1.
void el_tq2_0(int e, ElementBits& o) { o.q = bits(32 * (e / 128) + e % 32, 2 * (e % 128 / 32), 2, 1); }
constexpr BlockAnatomy kAnatTQ2_0 = {ggml::kTQ2_0BlockValues, ggml::kTQ2_0BlockBytes, {{"qs", 0, 64, kValues}, {"d", 64, 2, kScale}}, 64, -1, 0,
                                 "d", "", 256, el_tq2_0, "d·q, q = stored − 1"};
// TQ1_0 has none: it packs 5 (or 4) ternary digits a byte as a base-3 number scaled to 0..255
// (byte = ceil(243-based value · 256 / 243), digit n read back as ((byte · 3^n mod 256) · 3) >> 8),
// which no bit slice of the block describes.
// Q1_0 {d, qs[16]}: element j the bit j % 8 of qs[j / 8]: 0 reads -d, 1 reads d.
constexpr int8_t kQ1Levels[2] = {-1, 1};
void el_q1_0(int e, ElementBits& o) { o.q = bits(2 + e / 8, e % 8, 1); }
constexpr BlockAnatomy kAnatQ1_0 = {ggml::kQ1_0BlockValues, ggml::kQ1_0BlockBytes, {{"d", 0, 2, kScale}, {"qs", 2, 16, kValues}}, 0, -1, 0,
                                "d", "", 128, el_q1_0, "d·q, q = {−1 1}[stored]", ScaleFormat::F16, kQ1Levels};
// Q2_0 {d, qs[16]}: element j in crumb j % 4 of qs[j / 4], less 1.
void el_q2_0(int e, ElementBits& o) { o.q = bits(2 + e / 4, 2 * (e % 4), 2, 1); }
constexpr BlockAnatomy kAnatQ2_0 = {ggml::kQ2_0BlockValues, ggml::kQ2_0BlockBytes, {{"d", 0, 2, kScale}, {"qs", 2, 16, kValues}}, 0, -1, 0,
                                "d", "", 64, el_q2_0, "d·q, q = stored − 1"};
// GGUF-lite: a block as shown joins its scale (from the scales region) and its values.
constexpr BlockAnatomy kAnatQ8Ch = {32, 34, {{"s", 0, 2, kScale}, {"q", 2, 32, kValues}}, 0, -1, 0, "s", "", 32,
                                el_int8_at2, "s·q"};
constexpr BlockAnatomy kAnatQ4Lite = {kQ4Group, 2 + kQ4Group / 2, {{"s", 0, 2, kScale}, {"packed", 2, kQ4Group / 2, kValues}},
                                  0, -1, 0, "s", "", kQ4Group, el_q4_lite, "s·q"};

// ggml's block types: each row is quantized on its own (blocks never straddle rows), then
// decoded again to report the largest error; a row with NaN or Inf cannot be quantized. Nor
// can a row whose block scales overflow their f16 (a finite weight too large for the type:
// Q8_0's d = max|x| / 127 is Inf past ~8.3e6, and every value of the block would decode to
// Inf or NaN): the bytes stay ggml's, the error is +inf, and the conversion refuses the tensor.
using RowQuantize = void (*)(const float*, uint8_t*, int64_t);
using RowDequantize = void (*)(const uint8_t*, float*, int64_t);

// A row whose max |x| reaches this is refused before ggml's search could overflow into a
// meaningless block (see kQ3_KSearchLimit); +inf: only NaN and Inf are. By the type's decoder.
template <RowDequantize DQ>
constexpr float kSearchLimit = INFINITY;
template <> constexpr float kSearchLimit<ggml::dequantize_row_q3_K> = ggml::kQ3_KSearchLimit;
template <> constexpr float kSearchLimit<ggml::dequantize_row_q6_K> = ggml::kQ6_KSearchLimit;
template <> constexpr float kSearchLimit<ggml::dequantize_row_iq4_nl> = ggml::kIQ4SearchLimit;
template <> constexpr float kSearchLimit<ggml::dequantize_row_iq4_xs> = ggml::kIQ4SearchLimit;
template <> constexpr float kSearchLimit<ggml::dequantize_row_nvfp4> = ggml::kNVFP4Limit;

// True when every f16 field of `blocks` blocks is finite (exponent bits not all ones): d at DAt,
// and dmin (or m) at DminAt where the type has one (-1: none), where its block anatomy says they
// sit. DAt -1: no f16 scale (an E8M0 scale is always finite).
template <int64_t Bytes, int DAt, int DminAt>
bool half_fields_finite(const uint8_t* y, int64_t blocks) {
  if constexpr (DAt < 0) return true;
  constexpr int n = DminAt >= 0 ? 2 : 1;
  constexpr int at[2] = {DAt, DminAt};
  uint16_t bad = 0;
  for (int64_t b = 0; b < blocks; ++b)
    for (int i = 0; i < n; ++i) {
      const uint16_t h = uint16_t(y[b * Bytes + at[i]] | (y[b * Bytes + at[i] + 1] << 8));
      bad |= uint16_t((h & 0x7c00) == 0x7c00);
    }
  return !bad;
}

// max |x - decode(y)| over one row, folded into worst, one block at a time (decoded in the cache).
template <RowDequantize DQ, int64_t Values, int64_t Bytes>
float row_error(const float* x, const uint8_t* y, int64_t cols, float worst) {
  typedef float F4 __attribute__((vector_size(16)));
  typedef int32_t I4 __attribute__((vector_size(16)));
  static_assert(Values % 4 == 0);
  alignas(16) float back[256];
  // Four lanes (SSE2, wasm simd128): the largest error is a max (exact in any order), and a NaN
  // error is no error to miss: it makes the row's error +inf.
  F4 most = {worst, worst, worst, worst};
  I4 nan = {0, 0, 0, 0};
  for (int64_t b = 0; b < cols; b += Values) {
    DQ(y + b / Values * Bytes, back, Values);
    for (int64_t j = 0; j < Values; j += 4) {
      F4 xv, bv;
      std::memcpy(&xv, x + b + j, sizeof xv);
      std::memcpy(&bv, back + j, sizeof bv);
      const F4 e = (F4)((I4)(xv - bv) & 0x7fffffff);  // fabs
      const I4 up = e > most;
      most = (F4)((up & (I4)e) | (~up & (I4)most));
      nan |= e != e;
    }
  }
  float m = worst;
  for (int k = 0; k < 4; ++k) {
    if (nan[k]) return INFINITY;
    m = most[k] > m ? most[k] : m;
  }
  return m;
}

template <RowQuantize Q, RowDequantize DQ, int64_t Values, int64_t Bytes, int DAt, int DminAt>
float enc_ggml(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  const int64_t row_bytes = cols / Values * Bytes;
  float worst = 0.0f;
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = w + i * cols;
    if (!(abs_max(x, size_t(cols)) < kSearchLimit<DQ>)) return INFINITY;  // NaN, Inf, or past the search
    uint8_t* y = r[0] + i * row_bytes;
    Q(x, y, cols);
    if (!half_fields_finite<Bytes, DAt, DminAt>(y, cols / Values)) return INFINITY;
    worst = row_error<DQ, Values, Bytes>(x, y, cols, worst);
  }
  return worst;
}

// With importance weights (ggml's quantize_<type> with quant_weights; qw[cols], the same for
// every row), row by row as ggml runs them. Refused (+inf) as enc_ggml refuses, and also when a
// weight is negative or not finite (an imatrix holds means of squares), or when the weights are
// so large that ggml's weighted sums could overflow: its searches add up terms of at most about
// qw * x^2 * nmax^2 (and sum x^2 over a row); below FLT_MAX / 2^26 per column of the row none can
// reach Inf, so no NaN scale can silently turn a block into zeros. (In practice the f16 scales
// overflow long before: this bound only refuses absurd weights.)
using RowQuantizeW = void (*)(const float*, uint8_t*, int64_t, const float*);
template <RowQuantizeW Q, RowDequantize DQ, int64_t Values, int64_t Bytes, int DAt, int DminAt>
float enc_ggml_w(const float* w, int64_t rows, int64_t cols, const float* qw, uint8_t* const* r) {
  double qmax = 1.0;
  for (int64_t j = 0; j < cols; ++j) {
    if (!(qw[j] >= 0.0f && qw[j] < INFINITY)) return INFINITY;  // NaN, Inf or negative
    qmax = std::max(qmax, double(qw[j]));
  }
  const int64_t row_bytes = cols / Values * Bytes;
  float worst = 0.0f;
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = w + i * cols;
    const float amax = abs_max(x, size_t(cols));
    if (!(amax < kSearchLimit<DQ>)) return INFINITY;  // NaN, Inf, or past the search
    const double a = std::max(1.0, double(amax));
    if (!(a * a * qmax * double(cols) * 0x1p26 < double(FLT_MAX))) return INFINITY;
    uint8_t* y = r[0] + i * row_bytes;
    Q(x, y, cols, qw);
    if (!half_fields_finite<Bytes, DAt, DminAt>(y, cols / Values)) return INFINITY;
    worst = row_error<DQ, Values, Bytes>(x, y, cols, worst);
  }
  return worst;
}
// Types whose quantizer reports its own error in the same pass (SIMD, bytes unchanged), +inf
// for a row holding a NaN or an Inf; an overflowing scale is caught here.
using RowQuantizeErr = float (*)(const float*, uint8_t*, int64_t);
template <RowQuantizeErr QE, int64_t Values, int64_t Bytes, int DAt, int DminAt>
float enc_ggml_err(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  const int64_t row_bytes = cols / Values * Bytes;
  float worst = 0.0f;
  for (int64_t i = 0; i < rows; ++i) {
    uint8_t* y = r[0] + i * row_bytes;
    const float e = QE(w + i * cols, y, cols);  // +inf for a NaN or an Inf
    if (!half_fields_finite<Bytes, DAt, DminAt>(y, cols / Values)) return INFINITY;
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
  }
  return worst;
}
template <RowDequantize DQ, int64_t Values, int64_t Bytes>
void dec_ggml(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t, float* out) {
  const int64_t row_bytes = cols / Values * Bytes;
  for (int64_t i = 0; i < rows; ++i) DQ(r[0] + i * row_bytes, out + i * cols, cols);
}
// ggml type T's encoder and decoder (quantize_row_t / dequantize_row_t; _ERR: the quantizer
// that reports its error in the same pass; _W: the importance-weighted quantizer quantize_row_t_w),
// its geometry from ggml's type traits, the offsets of its f16 fields (HALVES: from its anatomy).
#define HALVES(A) ((A).d_format == ScaleFormat::F16 ? (A).d_at : -1), (A).dmin_at
#define GGML_ENC(T, t, ...) \
  enc_ggml<ggml::quantize_row_##t, ggml::dequantize_row_##t, ggml::k##T##BlockValues, ggml::k##T##BlockBytes, __VA_ARGS__>
#define GGML_ENC_ERR(T, t, ...) \
  enc_ggml_err<ggml::quantize_row_##t##_err, ggml::k##T##BlockValues, ggml::k##T##BlockBytes, __VA_ARGS__>
#define GGML_ENC_W(T, t, ...)                                                                                \
  enc_ggml_w<ggml::quantize_row_##t##_w, ggml::dequantize_row_##t, ggml::k##T##BlockValues, ggml::k##T##BlockBytes, \
             __VA_ARGS__>
#define GGML_DEC(T, t) dec_ggml<ggml::dequantize_row_##t, ggml::k##T##BlockValues, ggml::k##T##BlockBytes>
#define GGML_CODEC(T, t) .encode = GGML_ENC(T, t, HALVES(kAnat##T)), .decode = GGML_DEC(T, t), .anatomy = &kAnat##T
#define GGML_CODEC_ERR(T, t) \
  .encode = GGML_ENC_ERR(T, t, HALVES(kAnat##T)), .decode = GGML_DEC(T, t), .anatomy = &kAnat##T
#define GGML_CODEC_W(T, t)                                                                          \
  .encode = GGML_ENC(T, t, HALVES(kAnat##T)), .decode = GGML_DEC(T, t),                             \
  .encode_weighted = GGML_ENC_W(T, t, HALVES(kAnat##T)), .anatomy = &kAnat##T
#define GGML_CODEC_ERR_W(T, t)                                                                      \
  .encode = GGML_ENC_ERR(T, t, HALVES(kAnat##T)), .decode = GGML_DEC(T, t),                         \
  .encode_weighted = GGML_ENC_W(T, t, HALVES(kAnat##T)), .anatomy = &kAnat##T

// The codebook types (ggml_iq.cpp): ggml's quantize_<type>, with importance weights (qw) or
// without (null, where ggml takes none: IQ2_S, IQ3_XXS, IQ3_S, IQ1_M). Refused (+inf) as
// enc_ggml_w refuses: NaN, Inf, past the search limit, unusable weights; and where ggml would
// abort (or read out of bounds), which the quantizer reports. Their f16 d overflowing (IQ1_M
// keeps it in four nibbles) shows as an Inf or NaN decoded value, caught by the error.
using RowQuantizeIq = bool (*)(const float*, uint8_t*, int64_t, const float*);
template <RowQuantizeIq Q, RowDequantize DQ, int64_t Values, int64_t Bytes>
float enc_iq_rows(const float* w, int64_t rows, int64_t cols, const float* qw, uint8_t* const* r) {
  double qmax = 1.0;
  for (int64_t j = 0; qw && j < cols; ++j) {
    if (!(qw[j] >= 0.0f && qw[j] < INFINITY)) return INFINITY;  // NaN, Inf or negative
    qmax = std::max(qmax, double(qw[j]));
  }
  const int64_t row_bytes = cols / Values * Bytes;
  float worst = 0.0f;
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = w + i * cols;
    const float amax = abs_max(x, size_t(cols));
    if (!(amax < ggml::kIQSearchLimit)) return INFINITY;
    const double a = std::max(1.0, double(amax));
    if (!(a * a * qmax * double(cols) * 0x1p26 < double(FLT_MAX))) return INFINITY;
    uint8_t* y = r[0] + i * row_bytes;
    if (!Q(x, y, cols, qw)) return INFINITY;
    worst = row_error<DQ, Values, Bytes>(x, y, cols, worst);
  }
  return worst;
}
template <RowQuantizeIq Q, RowDequantize DQ, int64_t Values, int64_t Bytes>
float enc_iq(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  return enc_iq_rows<Q, DQ, Values, Bytes>(w, rows, cols, nullptr, r);
}
// IQ2_XXS, IQ2_XS, IQ1_S without importance weights: ggml asserts them (llama-quantize refuses
// these types without an imatrix), so nothing is written.
float enc_needs_imatrix(const float*, int64_t, int64_t, int64_t, uint8_t* const*) { return INFINITY; }
#define IQ_CODEC(T, t, enc)                                                                                      \
  .encode = enc, .decode = GGML_DEC(T, t),                                                                       \
  .encode_weighted = enc_iq_rows<ggml::quantize_row_##t##_w, ggml::dequantize_row_##t, ggml::k##T##BlockValues, \
                                 ggml::k##T##BlockBytes>
#define IQ_CODEC_NULLW(T, t) \
  IQ_CODEC(T, t, (enc_iq<ggml::quantize_row_##t##_w, ggml::dequantize_row_##t, ggml::k##T##BlockValues, ggml::k##T##BlockBytes>))

using B = BlockSpan;
using L = Layout;

// A ggml block type's row: its geometry from ggml's type traits (values per block; the scale
// bytes are what the block holds besides its value_bits-wide values), interleaved blocks.
constexpr QuantType ggml_blocks(QuantType t) {
  const GgmlTypeInfo& g = *ggml_type_info(uint32_t(t.ggml_type));
  t.span = B::Fixed;
  t.block_values = int(g.block_size);
  t.scale_bytes = int(g.type_size - g.block_size * t.value_bits / 8);
  t.layout = L::Interleaved;
  t.quantizes = true;
  return t;
}

// One row per type, indexed by the type (ggml's type_traits[] in spirit: rows in QType order,
// checked below).
constexpr QuantType kTypeRows[] = {
    {.id = QType::F32, .name = "F32", .short_name = "f32", .label = "F32", .family = "float", .color = "#4e79a7",
     .value_bits = 32, .gguf_lite_code = 0, .ggml_type = 0, .encode = enc_f32, .decode = dec_f32},
    {.id = QType::F16, .name = "F16", .short_name = "f16", .label = "F16", .family = "float", .color = "#59a14f",
     .value_bits = 16, .gguf_lite_code = 1, .ggml_type = 1, .encode = enc_f16, .decode = dec_f16},
    {.id = QType::Int8Group, .name = "INT8", .short_name = "int8", .label = "int8 per group", .family = "int8",
     .color = "#f28e2b", .span = B::Parameter, .block_values = 0, .value_bits = 8, .scale_bytes = 4,
     .layout = L::ValuesThenScales, .quantizes = true, .encode = enc_int8, .decode = dec_int8},
    {.id = QType::Q8Channel, .name = "Q8_per_channel", .short_name = "q8", .label = "Q8 per channel", .family = "q8",
     .color = "#e15759", .span = B::Row, .block_values = 0, .value_bits = 8, .scale_bytes = 2,
     .layout = L::ScalesThenValues, .needs_matrix = true, .quantizes = true, .gguf_lite_code = 2, .encode = enc_q8,
     .decode = dec_q8, .anatomy = &kAnatQ8Ch},
    {.id = QType::Q4Group64, .name = "Q4_per_group_64", .short_name = "q4", .label = "Q4 per group of 64", .family = "q4",
     .color = "#b07aa1", .block_values = kQ4Group, .value_bits = 4, .scale_bytes = 2, .layout = L::ScalesThenValues,
     .needs_matrix = true, .quantizes = true, .gguf_lite_code = 3, .encode = enc_q4, .decode = dec_q4,
     .anatomy = &kAnatQ4Lite},
    {.id = QType::BF16, .name = "BF16", .short_name = "bf16", .label = "BF16", .family = "float", .color = "#76b7b2",
     .value_bits = 16, .ggml_type = 30, .encode = enc_bf16, .decode = dec_bf16},
    ggml_blocks({.id = QType::Q8_0, .name = "Q8_0", .short_name = "q8_0", .label = "Q8_0 (8-bit, blocks of 32)",
                 .family = "q8", .color = "#e15759", .value_bits = 8, .ggml_type = 8, GGML_CODEC_ERR(Q8_0, q8_0)}),
    ggml_blocks({.id = QType::Q4_0, .name = "Q4_0", .short_name = "q4_0", .label = "Q4_0 (4-bit, blocks of 32)",
                 .family = "q4", .color = "#b07aa1", .value_bits = 4, .ggml_type = 2, GGML_CODEC_ERR_W(Q4_0, q4_0)}),
    ggml_blocks({.id = QType::Q4_1, .name = "Q4_1", .short_name = "q4_1", .label = "Q4_1 (4-bit with offset)",
                 .family = "q4", .color = "#9c6b98", .value_bits = 4, .ggml_type = 3, GGML_CODEC_W(Q4_1, q4_1)}),
    ggml_blocks({.id = QType::Q5_0, .name = "Q5_0", .short_name = "q5_0", .label = "Q5_0 (5-bit, blocks of 32)",
                 .family = "q5", .color = "#ff9da7", .value_bits = 5, .ggml_type = 6, GGML_CODEC_W(Q5_0, q5_0)}),
    ggml_blocks({.id = QType::Q5_1, .name = "Q5_1", .short_name = "q5_1", .label = "Q5_1 (5-bit with offset)",
                 .family = "q5", .color = "#e8879a", .value_bits = 5, .ggml_type = 7, GGML_CODEC_W(Q5_1, q5_1)}),
    ggml_blocks({.id = QType::Q2_K, .name = "Q2_K", .short_name = "q2_k", .label = "Q2_K (2-bit K-quant)",
                 .family = "k", .color = "#9c755f", .value_bits = 2, .ggml_type = 10, GGML_CODEC_W(Q2_K, q2_K)}),
    ggml_blocks({.id = QType::Q3_K, .name = "Q3_K", .short_name = "q3_k", .label = "Q3_K (3-bit K-quant)",
                 .family = "k", .color = "#bab0ac", .value_bits = 3, .ggml_type = 11, GGML_CODEC_W(Q3_K, q3_K)}),
    ggml_blocks({.id = QType::Q4_K, .name = "Q4_K", .short_name = "q4_k", .label = "Q4_K (4-bit K-quant)",
                 .family = "k", .color = "#edc948", .value_bits = 4, .ggml_type = 12, GGML_CODEC_W(Q4_K, q4_K)}),
    ggml_blocks({.id = QType::Q5_K, .name = "Q5_K", .short_name = "q5_k", .label = "Q5_K (5-bit K-quant)",
                 .family = "k", .color = "#f1ce63", .value_bits = 5, .ggml_type = 13, GGML_CODEC_W(Q5_K, q5_K)}),
    ggml_blocks({.id = QType::Q6_K, .name = "Q6_K", .short_name = "q6_k", .label = "Q6_K (6-bit K-quant)",
                 .family = "k", .color = "#8cd17d", .value_bits = 6, .ggml_type = 14, GGML_CODEC_W(Q6_K, q6_K)}),
    ggml_blocks({.id = QType::MXFP4, .name = "MXFP4", .short_name = "mxfp4", .label = "MXFP4 (4-bit float, blocks of 32)",
                 .family = "fp4", .color = "#a0cbe8", .value_bits = 4, .ggml_type = 39, GGML_CODEC(MXFP4, mxfp4)}),
    // IQ4_NL and IQ4_XS: llama-quantize's search (quantize_iq4_*), with importance weights or without
    ggml_blocks({.id = QType::IQ4_NL, .name = "IQ4_NL", .short_name = "iq4_nl", .label = "IQ4_NL (4-bit non-linear, blocks of 32)",
                 .family = "iq4", .color = "#86bcb6", .value_bits = 4, .ggml_type = 20, GGML_CODEC_W(IQ4_NL, iq4_nl)}),
    ggml_blocks({.id = QType::IQ4_XS, .name = "IQ4_XS", .short_name = "iq4_xs", .label = "IQ4_XS (4-bit non-linear, 6-bit sub-block scales)",
                 .family = "iq4", .color = "#499894", .value_bits = 4, .ggml_type = 23, GGML_CODEC_W(IQ4_XS, iq4_xs)}),
    // TQ1_0 stores 1.625 bits a value (5 trits a byte): value_bits 1 counts 32 of its 52 bytes of
    // trits as values, the other 20 with its d as scale bytes; the block's total is ggml's. No
    // block anatomy (see above).
    ggml_blocks({.id = QType::TQ1_0, .name = "TQ1_0", .short_name = "tq1_0", .label = "TQ1_0 (ternary, 1.69 bits a value)",
                 .family = "ternary", .color = "#d37295", .value_bits = 1, .ggml_type = 34,
                 .encode = GGML_ENC(TQ1_0, tq1_0, 52, -1), .decode = GGML_DEC(TQ1_0, tq1_0)}),
    ggml_blocks({.id = QType::TQ2_0, .name = "TQ2_0", .short_name = "tq2_0", .label = "TQ2_0 (ternary, 2 bits a value)",
                 .family = "ternary", .color = "#fabfd2", .value_bits = 2, .ggml_type = 35, GGML_CODEC(TQ2_0, tq2_0)}),
    ggml_blocks({.id = QType::Q1_0, .name = "Q1_0", .short_name = "q1_0", .label = "Q1_0 (1-bit signs, blocks of 128)",
                 .family = "q1", .color = "#79706e", .value_bits = 1, .ggml_type = 41, GGML_CODEC(Q1_0, q1_0)}),
    ggml_blocks({.id = QType::Q2_0, .name = "Q2_0", .short_name = "q2_0", .label = "Q2_0 (2-bit, blocks of 64)",
                 .family = "q2", .color = "#d4a6c8", .value_bits = 2, .ggml_type = 42, GGML_CODEC(Q2_0, q2_0)}),
    // The codebook types: 8 (IQ2, IQ1) or 4 (IQ3) values a grid index, under 256-value blocks.
    // value_bits counts the grid indices' share (the rest of the block, signs and scales
    // included, as scale bytes). No block anatomy: a codebook block is no set of bit fields that
    // each hold one value's integer (the page's codebook view is separate).
    ggml_blocks({.id = QType::IQ2_XXS, .name = "IQ2_XXS", .short_name = "iq2_xxs", .label = "IQ2_XXS (2.06 bits, E8-lattice codebook)",
                 .family = "iq2", .color = "#c9a0dc", .value_bits = 2, .ggml_type = 16,
                 IQ_CODEC(IQ2_XXS, iq2_xxs, enc_needs_imatrix), .needs_importance = true}),
    ggml_blocks({.id = QType::IQ2_XS, .name = "IQ2_XS", .short_name = "iq2_xs", .label = "IQ2_XS (2.31 bits, E8-lattice codebook)",
                 .family = "iq2", .color = "#a87cc0", .value_bits = 2, .ggml_type = 17,
                 IQ_CODEC(IQ2_XS, iq2_xs, enc_needs_imatrix), .needs_importance = true}),
    ggml_blocks({.id = QType::IQ3_XXS, .name = "IQ3_XXS", .short_name = "iq3_xxs", .label = "IQ3_XXS (3.06 bits, D4-lattice codebook)",
                 .family = "iq3", .color = "#6b9ac4", .value_bits = 3, .ggml_type = 18, IQ_CODEC_NULLW(IQ3_XXS, iq3_xxs)}),
    ggml_blocks({.id = QType::IQ1_S, .name = "IQ1_S", .short_name = "iq1_s", .label = "IQ1_S (1.56 bits, ternary codebook)",
                 .family = "iq1", .color = "#8c8c8c", .value_bits = 1, .ggml_type = 19,
                 IQ_CODEC(IQ1_S, iq1_s, enc_needs_imatrix), .needs_importance = true}),
    ggml_blocks({.id = QType::IQ3_S, .name = "IQ3_S", .short_name = "iq3_s", .label = "IQ3_S (3.44 bits, D4-lattice codebook)",
                 .family = "iq3", .color = "#4a7bab", .value_bits = 3, .ggml_type = 21, IQ_CODEC_NULLW(IQ3_S, iq3_s)}),
    ggml_blocks({.id = QType::IQ2_S, .name = "IQ2_S", .short_name = "iq2_s", .label = "IQ2_S (2.56 bits, E8-lattice codebook)",
                 .family = "iq2", .color = "#8e5ea8", .value_bits = 2, .ggml_type = 22, IQ_CODEC_NULLW(IQ2_S, iq2_s)}),
    ggml_blocks({.id = QType::IQ1_M, .name = "IQ1_M", .short_name = "iq1_m", .label = "IQ1_M (1.75 bits, ternary codebook)",
                 .family = "iq1", .color = "#b0b0b0", .value_bits = 1, .ggml_type = 29, IQ_CODEC_NULLW(IQ1_M, iq1_m)}),
    // NVFP4: MXFP4's levels in sub-blocks of 16, each with a UE4M3 scale byte (4 of the block's 36
    // bytes). No block anatomy: its scales are per sub-block floats, not d·sc. ggml's quantizer
    // takes no importance weights; llama-quantize writes it only through --tensor-type.
    ggml_blocks({.id = QType::NVFP4, .name = "NVFP4", .short_name = "nvfp4", .label = "NVFP4 (4-bit float, E4M3 scale per 16)",
                 .family = "fp4", .color = "#76b7b2", .value_bits = 4, .ggml_type = 40,
                 .encode = GGML_ENC(NVFP4, nvfp4, -1, -1), .decode = GGML_DEC(NVFP4, nvfp4)}),
};
constexpr bool rows_in_type_order() {
  for (size_t i = 0; i < std::size(kTypeRows); ++i)
    if (size_t(kTypeRows[i].id) != i) return false;
  return true;
}
static_assert(rows_in_type_order(), "quant-type rows must be in QType order");

const std::vector<QuantType> kTypes(std::begin(kTypeRows), std::end(kTypeRows));

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

}  // namespace

const std::vector<QuantType>& quant_types() { return kTypes; }

float anatomy_scale(const BlockAnatomy& a, const uint8_t* block, int at) {
  return a.d_format == ScaleFormat::F16 ? f16_to_f32(get_le<uint16_t>(block + at)) : ggml::e8m0_to_fp32_half(block[at]);
}

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
