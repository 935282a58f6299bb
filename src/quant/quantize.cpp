#include "quant/quantize.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/f16.h"
#include "quant/kernels.h"

namespace leapconv {

float abs_max(const float* x, size_t n) {
  bool nonfinite = false;
  const float m = kernels::abs_max(x, n, &nonfinite);
  return nonfinite ? std::numeric_limits<float>::infinity() : m;
}

static inline bool finite_bits(float v) { return (f32_bits(v) & 0x7fffffffu) < 0x7f800000u; }

// Scales at any alignment, little-endian.
static inline uint16_t load_u16(const void* p, size_t i) {
  uint16_t v;
  std::memcpy(&v, static_cast<const uint8_t*>(p) + 2 * i, 2);
  return v;
}
static inline void store_u16(void* p, size_t i, uint16_t v) { std::memcpy(static_cast<uint8_t*>(p) + 2 * i, &v, 2); }
static inline float load_f32(const void* p, size_t i) {
  float v;
  std::memcpy(&v, static_cast<const uint8_t*>(p) + 4 * i, 4);
  return v;
}
static inline void store_f32(void* p, size_t i, float v) { std::memcpy(static_cast<uint8_t*>(p) + 4 * i, &v, 4); }

float quantize_int8_groups(const float* w, size_t n, int gs, int8_t* q, void* scales) {
  float worst = 0.0f;
  for (size_t g = 0; g * gs < n; ++g) {
    const float* x = w + g * gs;
    const float amax = abs_max(x, gs);
    if (!finite_bits(amax)) return std::numeric_limits<float>::infinity();
    const float scale = amax / 127.0f;
    store_f32(scales, g, scale);
    const float e = kernels::quantize(x, size_t(gs), scale, -127.0f, 127.0f, q + g * gs);
    worst = e > worst ? e : worst;
  }
  return worst;
}

void dequantize_int8_groups(const int8_t* q, const void* scales, size_t n, int gs, float* out) {
  for (size_t g = 0; g * size_t(gs) < n; ++g) {
    const float s = load_f32(scales, g);
    for (size_t i = g * size_t(gs); i < (g + 1) * size_t(gs) && i < n; ++i) out[i] = float(q[i]) * s;
  }
}

float quantize_q8_rows(const float* w, size_t rows, size_t cols, void* scales, int8_t* q) {
  float worst = 0.0f;
  for (size_t r = 0; r < rows; ++r) {
    const float* x = w + r * cols;
    const float amax = abs_max(x, cols);
    if (!finite_bits(amax)) return std::numeric_limits<float>::infinity();
    const uint16_t h = f32_to_f16(amax / 127.0f);
    store_u16(scales, r, h);
    if (!finite_bits(f16_to_f32(h))) return std::numeric_limits<float>::infinity();  // the scale overflows f16
    const float e = kernels::quantize(x, cols, f16_to_f32(h), -127.0f, 127.0f, q + r * cols);
    worst = e > worst ? e : worst;
  }
  return worst;
}

void dequantize_q8_rows(const void* scales, const int8_t* q, size_t rows, size_t cols,
                        float* out) {
  for (size_t r = 0; r < rows; ++r) {
    const float s = f16_to_f32(load_u16(scales, r));
    for (size_t c = 0; c < cols; ++c) out[r * cols + c] = float(q[r * cols + c]) * s;
  }
}

float quantize_q4_rows(const float* w, size_t rows, size_t cols, void* scales,
                       uint8_t* packed) {
  float worst = 0.0f;
  int8_t q[kQ4Group];
  const size_t groups = rows * cols / kQ4Group;  // groups never straddle rows: cols % 64 == 0
  for (size_t g = 0; g < groups; ++g) {
    const float* x = w + g * kQ4Group;
    const float amax = abs_max(x, kQ4Group);
    if (!finite_bits(amax)) return std::numeric_limits<float>::infinity();
    const uint16_t h = f32_to_f16(amax / 7.0f);
    store_u16(scales, g, h);
    if (!finite_bits(f16_to_f32(h))) return std::numeric_limits<float>::infinity();  // the scale overflows f16
    const float e = kernels::quantize(x, kQ4Group, f16_to_f32(h), -8.0f, 7.0f, q);
    worst = e > worst ? e : worst;
    kernels::pack_nibbles(q, kQ4Group, packed + g * (kQ4Group / 2));
  }
  return worst;
}

void dequantize_q4_rows(const void* scales, const uint8_t* packed, size_t rows, size_t cols,
                        float* out) {
  const size_t n = rows * cols;
  for (size_t i = 0; i < n; i += 2) {
    const float s = f16_to_f32(load_u16(scales, i / kQ4Group));
    const uint8_t b = packed[i / 2];
    out[i] = float(nibble_value(b & 0x0f)) * s;
    out[i + 1] = float(nibble_value(b >> 4)) * s;
  }
}

}  // namespace leapconv
