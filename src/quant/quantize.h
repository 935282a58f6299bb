// The quantizers, exactly as SPEC.md fixes them. Each quantize_* returns the largest
// |w - dequant(q)| it produced, or +inf when the input holds NaN or Inf (a caller error) or
// when a scale overflows its f16 (a finite value too large for the type: it would decode as
// Inf or NaN).
// Rounding is round-half-to-even everywhere, so native and WebAssembly agree to the byte.
// Scales are little-endian f32 (int8 groups) or f16 (Q8, Q4) at any alignment: in a file a
// scale region may start at an odd offset.
#pragma once
#include <cstddef>
#include <cstdint>

namespace leapconv {

constexpr int kQ4Group = 64;

// LEAP v2: one f32 scale per consecutive group of `gs` values of the flattened tensor;
// scale = max|w| / 127, q = round(w / scale), q = 0 where scale = 0. n % gs == 0.
float quantize_int8_groups(const float* w, size_t n, int gs, int8_t* q, void* scales);
void dequantize_int8_groups(const int8_t* q, const void* scales, size_t n, int gs, float* out);

// GGUF-lite Q8_per_channel: one f16 scale per row, scale = f16(max|row| / 127),
// q = clamp(round(w / scale), -127, 127) with the f16-rounded scale.
float quantize_q8_rows(const float* w, size_t rows, size_t cols, void* scales, int8_t* q);
void dequantize_q8_rows(const void* scales, const int8_t* q, size_t rows, size_t cols,
                        float* out);

// GGUF-lite Q4_per_group_64: cols % 64 == 0; one f16 scale per group of 64 in a row,
// scale = f16(max|group| / 7), q = clamp(round(w / scale), -8, 7), 4-bit two's complement,
// element 2k in the low nibble and 2k+1 in the high nibble of byte k.
float quantize_q4_rows(const float* w, size_t rows, size_t cols, void* scales,
                       uint8_t* packed);
void dequantize_q4_rows(const void* scales, const uint8_t* packed, size_t rows, size_t cols,
                        float* out);
// The signed value of one nibble (0..15 -> -8..7).
inline int nibble_value(uint8_t nib) { return nib >= 8 ? int(nib) - 16 : int(nib); }

// max |x| over n values, as float bits compared as integers so the reduction vectorises
// without fast-math; NaN/Inf come back as a value >= +inf.
float abs_max(const float* x, size_t n);

}  // namespace leapconv
