// IEEE half and bfloat16 conversions, bit-exact and branch-light so the loops that call them
// auto-vectorise (x86 SSE2 natively, wasm simd128 in the browser) with identical results.
#pragma once
#include <cstdint>
#include <cstring>

namespace leapconv {

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

// Exact half -> float (after Maratyszcza's FP16 library: no branches, no tables).
inline float f16_to_f32(uint16_t h) {
  const uint32_t w = uint32_t(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = f32_from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = f32_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t result =
      sign | (two_w < (1u << 27) ? f32_bits(denormalized) : f32_bits(normalized));
  return f32_from_bits(result);
}

// float -> half, round-half-to-even, subnormals, inf and NaN handled (numpy's algorithm).
inline uint16_t f32_to_f16(float value) {
  const uint32_t f = f32_bits(value);
  const uint16_t sign = uint16_t((f & 0x80000000u) >> 16);
  uint32_t exp = f & 0x7f800000u;
  if (exp >= 0x47800000u) {  // overflow, inf or NaN
    const uint32_t sig = f & 0x007fffffu;
    if (exp == 0x7f800000u && sig != 0) {
      uint16_t r = uint16_t(0x7c00u + (sig >> 13));
      return uint16_t(sign | (r == 0x7c00u ? 0x7c01u : r));
    }
    return uint16_t(sign | 0x7c00u);
  }
  if (exp <= 0x38000000u) {  // half subnormal or zero
    if (exp < 0x33000000u) return sign;
    exp >>= 23;
    uint32_t sig = 0x00800000u + (f & 0x007fffffu);
    sig >>= (113 - exp);
    if ((sig & 0x3fffu) != 0x1000u || (f & 0x7ffu)) sig += 0x1000u;
    return uint16_t(sign + (sig >> 13));
  }
  const uint16_t hexp = uint16_t((exp - 0x38000000u) >> 13);
  uint32_t sig = f & 0x007fffffu;
  if ((sig & 0x3fffu) != 0x1000u) sig += 0x1000u;
  return uint16_t(sign + hexp + (sig >> 13));  // a carry into the exponent is correct rounding
}

// Round to nearest integer, ties to even, for |x| < 2^22 (all the quantizers need). The
// add/subtract of 1.5 * 2^23 rounds in the FPU's default mode, which is ties-to-even on every
// target we build for; unlike nearbyintf it vectorises without SSE4.1.
inline float round_half_even(float x) {
  const float magic = 12582912.0f;  // 1.5 * 2^23
  return (x + magic) - magic;
}

}  // namespace leapconv
