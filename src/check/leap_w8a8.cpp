#include "check/leap_w8a8.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace leapconv {

float Int8Rows::scale(int64_t group) const {
  if (group < s0 || group - s0 >= int64_t(s.size()))
    throw ConvertError("internal: int8 scale of group " + std::to_string(group) + " not read");
  return s[size_t(group - s0)];
}

Int8Activation leap_quantize(const float* x, int64_t n, int group_size) {
  Int8Activation a;
  a.group_size = group_size;
  a.q.assign(size_t(n), 0);
  a.s.assign(size_t((n + group_size - 1) / group_size), 0.0f);
  for (int64_t i = 0; i < n; i += group_size) {
    float max_val = 0.0f;
    const int64_t current = std::min<int64_t>(group_size, n - i);
    for (int64_t j = 0; j < current; ++j) {
      const float v = std::fabs(x[i + j]);
      if (v > max_val) max_val = v;
    }
    const float scale = max_val / 127.0f;
    const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
    a.s[size_t(i / group_size)] = scale;
    for (int64_t j = 0; j < current; ++j) {
      const float r = std::round(x[i + j] * id);  // std::round(float): half away from zero
      // |r| <= 127 for finite input; NaN/Inf (undefined in the engine's cast) become 0 here.
      a.q[size_t(i + j)] = r >= -128.0f && r <= 127.0f ? int8_t(r) : int8_t(0);
    }
  }
  return a;
}

void leap_matmul(const Int8Activation& x, const Int8Rows& w, float* out) {
  if (x.group_size != w.group_size || int64_t(x.q.size()) != w.cols)
    throw ConvertError("internal: W8A8 matmul of mismatched shapes");
  const int64_t n = w.cols, gs = w.group_size;
  for (int64_t k = 0; k < w.rows; ++k) {
    const int64_t in = (w.r0 + k) * n;  // the engine's i * n
    const int8_t* wq = w.q.data() + k * n;
    float val = 0.0f;
    for (int64_t j = 0; j <= n - gs; j += gs) {
      int32_t ival = 0;
      for (int64_t t = 0; t < gs; ++t) ival += int32_t(x.q[size_t(j + t)]) * int32_t(wq[j + t]);
      float term = float(ival) * w.scale((in + j) / gs);  // (float(ival) * w.s[...]) * sx, as written
      term = term * x.s[size_t(j / gs)];
      val = val + term;
    }
    out[k] = val;
  }
}

float leap_dequantize(const Int8Rows& w, int64_t row, int64_t col) {
  const int64_t n = w.total_rows * w.cols, e = row * w.cols + col, gs = w.group_size;
  const float q = float(w.q[size_t((row - w.r0) * w.cols + col)]);
  const int64_t block = e / 16 * 16;
  if (block + 16 <= n) {  // the SIMD loop: for (i = 0; i <= n - 16; i += 16)
    const float first = w.scale(block / gs), last = w.scale((block + 15) / gs);
    if (first == last) return q * first;
  }
  return q * w.scale(e / gs);  // its per-element path (a boundary in the 16, or the tail)
}

}  // namespace leapconv
