// LEAP's int8 arithmetic (its QuantizedTransformer, which runs version-2 files), mirrored
// operation for operation so that verify can tell what the engine will compute: activations
// quantized to int8 in groups (quantize()), int32 dot products of int8 values per group scaled
// in f32 (matmul()), the embedding table dequantized as its SIMD builds do (dequantize()).
// Deliberately the engine's own roundings (round half away from zero, a reciprocal multiply,
// f32 accumulation in group order) and its own indexing (the flattened tensor's group of
// row * n + j), including where a file breaks its assumptions (a group size not dividing n).
#pragma once
#include <cstdint>
#include <vector>

namespace leapconv {

// Rows [r0, r0 + rows) of a LEAP v2 tensor of total_rows x cols as the file stores them:
// q[(r - r0) * cols + c], and the scales of groups s0 .. s0 + s.size() - 1 of the flattened
// tensor (at least every group those rows touch).
struct Int8Rows {
  int64_t r0 = 0, rows = 0, cols = 0, total_rows = 0;
  int group_size = 0;
  std::vector<int8_t> q;
  int64_t s0 = 0;
  std::vector<float> s;
  float scale(int64_t group) const;  // throws if the group is not held
};

// An activation vector as quantize() leaves it: q[i], and s[i / group_size].
struct Int8Activation {
  int group_size = 0;
  std::vector<int8_t> q;
  std::vector<float> s;
};

// QuantizedTransformer::quantize(x, n): per group of group_size (the last may be shorter),
// scale = max|x| / 127, id = 1 / scale (0 when scale is 0), q = (int8) round(x * id).
Int8Activation leap_quantize(const float* x, int64_t n, int group_size);

// QuantizedTransformer::matmul(xout, x, w, n = cols, d): for each held row i,
//   val = 0; for j = 0; j <= n - gs; j += gs:
//     ival = sum over k < gs of x.q[j + k] * w.q[i * n + j + k]                (int32)
//     val += float(ival) * w.s[(i * n + j) / gs] * x.s[j / gs]                 (f32, left to right)
// out[i - r0] = val. The group size is the file's, which must equal the activation's.
void leap_matmul(const Int8Activation& x, const Int8Rows& w, float* out);

// QuantizedTransformer::dequantize() of the embedding table, element `col` of held row `row`,
// as its AVX2 and NEON builds do it: 16 values at a time, all with the first one's scale when
// the first and the last of the 16 have equal scales (exact for group sizes of 16 or more).
float leap_dequantize(const Int8Rows& w, int64_t row, int64_t col);

}  // namespace leapconv
