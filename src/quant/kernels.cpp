#include "quant/kernels.h"

#include "core/f16.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define LEAPCONV_SSE2 1
#endif
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

namespace leapconv {
namespace kernels {

// ---------------------------------------------------------------- scalar reference
namespace scalar {

void bf16_to_f32(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = leapconv::bf16_to_f32(in[i]);
}

void f16_to_f32(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = leapconv::f16_to_f32(in[i]);
}

float abs_max(const float* x, size_t n, bool* nonfinite) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float a = f32_from_bits(f32_bits(x[i]) & 0x7fffffffu);
    if ((f32_bits(a) & 0x7f800000u) == 0x7f800000u) *nonfinite = true;
    m = m > a ? m : a;
  }
  return m;
}

float quantize(const float* x, size_t n, float scale, float lo, float hi, int8_t* q) {
  const float keep = scale != 0.0f ? 1.0f : 0.0f;
  const float div = scale != 0.0f ? scale : 1.0f;
  float err = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    float r = round_half_even(x[i] / div) * keep;
    r = r > lo ? r : lo;
    r = r < hi ? r : hi;
    q[i] = int8_t(int(r));
    const float e = f32_from_bits(f32_bits(x[i] - r * scale) & 0x7fffffffu);
    err = err > e ? err : e;
  }
  return err;
}

void pack_nibbles(const int8_t* q, size_t n, uint8_t* out) {
  for (size_t k = 0; k < n / 2; ++k)
    out[k] = uint8_t((uint8_t(q[2 * k]) & 0x0f) | (uint8_t(q[2 * k + 1]) << 4));
}

}  // namespace scalar

#if LEAPCONV_SSE2
// ---------------------------------------------------------------- SSE2 (and wasm simd128)

bool simd_enabled() { return true; }

// x86's maxps/minps: a > b ? a : b and a < b ? a : b (the second operand when unordered).
// Emscripten maps _mm_max_ps/_mm_min_ps to a compare and a bitselect (four instructions in
// V8); wasm's pseudo-max/min are one instruction with the same rule, operands swapped:
// pmax(b, a) = b < a ? a : b.
static inline __m128 max_ps(__m128 a, __m128 b) {
#if defined(__wasm_simd128__)
  return (__m128)wasm_f32x4_pmax((v128_t)b, (v128_t)a);
#else
  return _mm_max_ps(a, b);
#endif
}
static inline __m128 min_ps(__m128 a, __m128 b) {
#if defined(__wasm_simd128__)
  return (__m128)wasm_f32x4_pmin((v128_t)b, (v128_t)a);
#else
  return _mm_min_ps(a, b);
#endif
}

static inline float hmax(__m128 v) {
  v = max_ps(v, _mm_shuffle_ps(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = max_ps(v, _mm_shuffle_ps(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtss_f32(v);
}

// The int32 of floats that hold small integers (|r| < 2^22): r + 1.5 * 2^23 is exact and its
// low mantissa bits are r. Two instructions everywhere, where wasm's saturating truncation
// costs V8 about seven and Emscripten's _mm_cvttps_epi32 is four scalar lrint calls.
static inline __m128i small_float_to_int(__m128 r, __m128 magic) {
  return _mm_sub_epi32(_mm_castps_si128(_mm_add_ps(r, magic)), _mm_castps_si128(magic));
}

void bf16_to_f32(const uint16_t* in, size_t n, float* out) {
  const __m128i zero = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_unpacklo_epi16(zero, h));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 4), _mm_unpackhi_epi16(zero, h));
  }
  scalar::bf16_to_f32(in + i, n - i, out + i);
}

// The scalar f16_to_f32 formula, four lanes at a time.
static inline __m128 f16x4_to_f32(__m128i w) {  // w = half << 16
  const __m128i sign = _mm_and_si128(w, _mm_set1_epi32(int(0x80000000u)));
  const __m128i two_w = _mm_add_epi32(w, w);
  const __m128 normalized = _mm_mul_ps(
      _mm_castsi128_ps(_mm_add_epi32(_mm_srli_epi32(two_w, 4), _mm_set1_epi32(0xE0 << 23))),
      _mm_set1_ps(0x1.0p-112f));
  const __m128 denormalized = _mm_sub_ps(
      _mm_castsi128_ps(_mm_or_si128(_mm_srli_epi32(two_w, 17), _mm_set1_epi32(126 << 23))),
      _mm_set1_ps(0.5f));
  const __m128i is_denorm = _mm_cmpeq_epi32(_mm_srli_epi32(two_w, 27), _mm_setzero_si128());
  const __m128i mag = _mm_or_si128(_mm_and_si128(is_denorm, _mm_castps_si128(denormalized)),
                                   _mm_andnot_si128(is_denorm, _mm_castps_si128(normalized)));
  return _mm_castsi128_ps(_mm_or_si128(sign, mag));
}

void f16_to_f32(const uint16_t* in, size_t n, float* out) {
  const __m128i zero = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm_storeu_ps(out + i, f16x4_to_f32(_mm_unpacklo_epi16(zero, h)));
    _mm_storeu_ps(out + i + 4, f16x4_to_f32(_mm_unpackhi_epi16(zero, h)));
  }
  scalar::f16_to_f32(in + i, n - i, out + i);
}

float abs_max(const float* x, size_t n, bool* nonfinite) {
  const __m128 absmask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128i expmask = _mm_set1_epi32(0x7f800000);
  __m128 m = _mm_setzero_ps();
  __m128i bad = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 a = _mm_and_ps(_mm_loadu_ps(x + i), absmask);
    bad = _mm_or_si128(bad, _mm_cmpeq_epi32(_mm_and_si128(_mm_castps_si128(a), expmask), expmask));
    m = max_ps(m, a);  // NaN lanes are caught by `bad`
  }
  if (_mm_movemask_epi8(bad)) *nonfinite = true;
  const float tail = scalar::abs_max(x + i, n - i, nonfinite);
  const float v = hmax(m);
  return v > tail ? v : tail;
}

float quantize(const float* x, size_t n, float scale, float lo, float hi, int8_t* q) {
  const __m128 keep = _mm_set1_ps(scale != 0.0f ? 1.0f : 0.0f);
  const __m128 div = _mm_set1_ps(scale != 0.0f ? scale : 1.0f);
  const __m128 vscale = _mm_set1_ps(scale), vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi);
  const __m128 magic = _mm_set1_ps(12582912.0f);
  const __m128 absmask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 err = _mm_setzero_ps();
  auto step = [&](const float* p) {
    const __m128 v = _mm_loadu_ps(p);
    __m128 r = _mm_sub_ps(_mm_add_ps(_mm_div_ps(v, div), magic), magic);
    r = _mm_mul_ps(r, keep);
    r = min_ps(max_ps(r, vlo), vhi);
    err = max_ps(err, _mm_and_ps(_mm_sub_ps(v, _mm_mul_ps(r, vscale)), absmask));
    return small_float_to_int(r, magic);  // exact: r is a clamped small integer
  };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm_packs_epi32(step(x + i), step(x + i + 4));
    const __m128i b = _mm_packs_epi32(step(x + i + 8), step(x + i + 12));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(a, b));
  }
  const float tail = scalar::quantize(x + i, n - i, scale, lo, hi, q + i);
  const float v = hmax(err);
  return v > tail ? v : tail;
}

void pack_nibbles(const int8_t* q, size_t n, uint8_t* out) {
  const __m128i lo4 = _mm_set1_epi16(0x000f), hi4 = _mm_set1_epi16(0x00f0);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    // each 16-bit lane holds q[2k] (low byte) and q[2k+1] (high byte)
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i + 16));
    const __m128i pa = _mm_or_si128(_mm_and_si128(a, lo4), _mm_and_si128(_mm_srli_epi16(a, 4), hi4));
    const __m128i pb = _mm_or_si128(_mm_and_si128(b, lo4), _mm_and_si128(_mm_srli_epi16(b, 4), hi4));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i / 2), _mm_packus_epi16(pa, pb));
  }
  scalar::pack_nibbles(q + i, n - i, out + i / 2);
}

#else
// ---------------------------------------------------------------- no SIMD: the reference

bool simd_enabled() { return false; }
void bf16_to_f32(const uint16_t* in, size_t n, float* out) { scalar::bf16_to_f32(in, n, out); }
void f16_to_f32(const uint16_t* in, size_t n, float* out) { scalar::f16_to_f32(in, n, out); }
float abs_max(const float* x, size_t n, bool* nonfinite) { return scalar::abs_max(x, n, nonfinite); }
float quantize(const float* x, size_t n, float scale, float lo, float hi, int8_t* q) {
  return scalar::quantize(x, n, scale, lo, hi, q);
}
void pack_nibbles(const int8_t* q, size_t n, uint8_t* out) { scalar::pack_nibbles(q, n, out); }

#endif

}  // namespace kernels
}  // namespace leapconv
