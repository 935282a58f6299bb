// The hot loops, in two spellings with identical results: SSE2 intrinsics (native x86-64,
// and WebAssembly, where Emscripten maps SSE2 onto simd128 with -msse2 -msimd128) and plain
// scalar C++ (other targets, and the reference the tests hold the SIMD path to). Every
// operation is exact IEEE arithmetic in the same order, so both give the same bytes.
#pragma once
#include <cstddef>
#include <cstdint>

namespace leapconv {
namespace kernels {

void bf16_to_f32(const uint16_t* in, size_t n, float* out);
void f16_to_f32(const uint16_t* in, size_t n, float* out);
// max |x|; *nonfinite is set when any value is NaN or Inf.
float abs_max(const float* x, size_t n, bool* nonfinite);
// q = clamp(round_half_even(x / scale), lo, hi), q = 0 where scale == 0;
// returns max |x - q * scale|. Needs |x / scale| < 2^22 (always so when scale >= max|x| / 127)
// and lo, hi within int8 range.
float quantize(const float* x, size_t n, float scale, float lo, float hi, int8_t* q);
// out[k] = (q[2k] & 15) | (q[2k+1] << 4); n even.
void pack_nibbles(const int8_t* q, size_t n, uint8_t* out);

// The scalar reference versions (also what non-SSE2 targets run).
namespace scalar {
void bf16_to_f32(const uint16_t* in, size_t n, float* out);
void f16_to_f32(const uint16_t* in, size_t n, float* out);
float abs_max(const float* x, size_t n, bool* nonfinite);
float quantize(const float* x, size_t n, float scale, float lo, float hi, int8_t* q);
void pack_nibbles(const int8_t* q, size_t n, uint8_t* out);
}  // namespace scalar

// True when the SIMD spelling is compiled in.
bool simd_enabled();

}  // namespace kernels
}  // namespace leapconv
