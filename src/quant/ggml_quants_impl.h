// Helpers of ggml_quants.cpp that the other ports of ggml-quants.c share (ggml_iq.cpp): not an
// API of the core.
#pragma once
#include <cstdint>
#include <cstring>

#include "quant/ggml_quants.h"

namespace leapconv {
namespace ggml {
namespace detail {

constexpr int QK_K = 256;
constexpr float GROUP_MAX_EPS = 1e-15f;

// Little-endian fields of a block, at any alignment.
inline void put_u16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}
inline uint16_t get_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline void put_u32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v >> 16);
  p[3] = uint8_t(v >> 24);
}
inline uint32_t get_u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
inline void put_f16(uint8_t* p, float f) { put_u16(p, fp32_to_fp16(f)); }
inline float get_f16(const uint8_t* p) { return fp16_to_fp32(get_u16(p)); }

// (int)v as x86's cvttss2si / cvttps2dq compute it: truncation toward zero, and INT32_MIN (the
// "integer indefinite") for NaN or a value outside int32's range, where the C cast that ggml
// writes is undefined. ggml's (int8_t)/(uint8_t) casts of a float keep this value's low byte.
inline int32_t trunc_i32(float v) {
  return (v >= -2147483648.0f && v < 2147483648.0f) ? int32_t(v) : INT32_MIN;
}

// ggml's nearest_int: round half to even by adding 1.5 * 2^23 and reading the mantissa. For
// |fval| > 2^22 it returns what those bits say (ggml only asserts the range in debug builds).
inline int nearest_int(float fval) {
  const float val = fval + 12582912.f;
  int32_t i;
  std::memcpy(&i, &val, 4);
  return (i & 0x007fffff) - 0x00400000;
}

template <typename T>
inline T min_(T a, T b) { return a < b ? a : b; }  // ggml's MIN(a, b)
template <typename T>
inline T max_(T a, T b) { return a > b ? a : b; }  // ggml's MAX(a, b)

// ggml's make_qp_quants (ggml_quants.cpp): levels 0..nmax for n values x, weighted; the scale.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights);

}  // namespace detail
}  // namespace ggml
}  // namespace leapconv
