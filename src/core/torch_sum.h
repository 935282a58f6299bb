// torch's float32 sum of a contiguous tensor, in its order of additions, so that a converter step
// that reduces a whole tensor in PyTorch (BitNet's weight_quant: weight.abs().mean()) gives the
// same f32 bits here. The order is ATen's CPU cascade_sum (aten/src/ATen/native/cpu/SumKernel.cpp,
// torch 1.13 as Debian ships it) on one thread with 8-lane vectors (its AVX2 kernels):
//   - the n values are vectors of 8 lanes; vectors are taken 4 at a time (ILP), each of the 4 its
//     own accumulator, and the rows of 4 vectors are summed in a cascade of 4 levels of
//     2^p rows each (p = max(4, ceil(log2(rows)) / 4)), each level flushed into the next;
//   - the vectors left over go into accumulator 0, then accumulators 1..3 are added to it;
//   - the values past the last whole vector are summed one by one from 0, then the 8 lanes of the
//     vector are added to that in order;
//   - fewer than 8 values: the same with scalars in place of vectors.
// torch with several threads splits the tensor among them (two_pass_reduction), which can move
// the last bit; llama.cpp's converter here runs it on one (Debian's torch: get_num_threads() = 1).
// Checked against torch itself (tests/tools/torch_sum_fixture.py writes what torch gives).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

namespace leapconv {

namespace torch_sum_detail {

inline int64_t ceil_log2(int64_t x) {
  if (x <= 2) return 1;
  int64_t b = 0;
  for (uint64_t u = uint64_t(x) - 1; u; u >>= 1) ++b;
  return b;
}

// row_sum: `size` items of L lanes (item i: values at(i * L + lane)), as 4 columns of rows.
template <int L, typename At>
std::array<float, L> row_sum(const At& at, int64_t size) {
  using V = std::array<float, L>;
  auto load = [&](int64_t i) {
    V v;
    for (int l = 0; l < L; ++l) v[size_t(l)] = at(i * L + l);
    return v;
  };
  auto add = [](V& a, const V& b) {
    for (int l = 0; l < L; ++l) a[size_t(l)] += b[size_t(l)];
  };
  const int64_t rows = size / 4;  // multi_row_sum over rows of 4 items
  const int64_t power = std::max<int64_t>(4, ceil_log2(rows) / 4), step = int64_t(1) << power, mask = step - 1;
  V acc[4][4] = {};
  int64_t i = 0;
  while (i + step <= rows) {
    for (int64_t j = 0; j < step; ++j, ++i)
      for (int k = 0; k < 4; ++k) add(acc[0][k], load(i * 4 + k));
    for (int j = 1; j < 4; ++j) {
      for (int k = 0; k < 4; ++k) {
        add(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = V{};
      }
      if (i & (mask << (j * power))) break;
    }
  }
  for (; i < rows; ++i)
    for (int k = 0; k < 4; ++k) add(acc[0][k], load(i * 4 + k));
  for (int j = 1; j < 4; ++j)
    for (int k = 0; k < 4; ++k) add(acc[0][k], acc[j][k]);
  for (int64_t v = rows * 4; v < size; ++v) add(acc[0][0], load(v));
  for (int k = 1; k < 4; ++k) add(acc[0][0], acc[0][k]);
  return acc[0][0];
}

}  // namespace torch_sum_detail

// The sum of at(0) .. at(n - 1) (at: int64_t -> float) as torch adds them.
template <typename At>
float torch_float_sum(const At& at, int64_t n) {
  constexpr int L = 8;
  if (n < L) return 0.0f + torch_sum_detail::row_sum<1>(at, n)[0];  // scalar_inner_sum
  const int64_t vectors = n / L;
  const std::array<float, L> lanes = torch_sum_detail::row_sum<L>(at, vectors);  // vectorized_inner_sum
  float total = 0.0f;
  for (int64_t k = vectors * L; k < n; ++k) total += at(k);
  for (float v : lanes) total += v;
  return 0.0f + total;  // (added to the output, which starts at 0)
}

}  // namespace leapconv
