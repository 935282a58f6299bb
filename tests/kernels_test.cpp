// The SIMD kernels must give exactly the scalar reference's results (the same bytes as every
// other build), including ties, zero scales, tails that are not a multiple of the vector width,
// subnormal halves, and NaN/Inf detection.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/kernels.h"

using namespace leapconv;

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float amplitude) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-amplitude, amplitude);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace

TEST(Kernels, SimdIsCompiledInOnX86) {
#if defined(__SSE2__)
  EXPECT_TRUE(kernels::simd_enabled());
#else
  GTEST_SKIP() << "no SSE2 on this target";
#endif
}

TEST(Kernels, HalfAndBfloatConversionsMatchScalarForEveryBitPattern) {
  std::vector<uint16_t> all(65536 + 5);
  for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i * 40503u);  // odd length: a tail
  for (auto fn : {0, 1}) {
    std::vector<float> simd(all.size()), ref(all.size());
    if (fn == 0) {
      kernels::f16_to_f32(all.data(), all.size(), simd.data());
      kernels::scalar::f16_to_f32(all.data(), all.size(), ref.data());
    } else {
      kernels::bf16_to_f32(all.data(), all.size(), simd.data());
      kernels::scalar::bf16_to_f32(all.data(), all.size(), ref.data());
    }
    EXPECT_TRUE(same_bits(simd, ref)) << (fn == 0 ? "f16" : "bf16");
  }
}

TEST(Kernels, QuantizeMatchesScalarIncludingTiesAndTails) {
  for (size_t n : {1u, 7u, 16u, 31u, 64u, 100u, 1000u}) {
    std::vector<float> x = random_floats(n, uint32_t(n), 0.3f);
    // exact ties: k + 0.5 times the scale
    const float scale = 0.25f / 127.0f;
    for (size_t i = 0; i < n; i += 3) x[i] = (float(int(i % 200) - 100) + 0.5f) * scale;
    for (float s : {scale, 0.0f, 1e-3f}) {
      for (auto [lo, hi] : {std::pair{-127.0f, 127.0f}, std::pair{-8.0f, 7.0f}}) {
        std::vector<int8_t> q1(n), q2(n);
        const float e1 = kernels::quantize(x.data(), n, s, lo, hi, q1.data());
        const float e2 = kernels::scalar::quantize(x.data(), n, s, lo, hi, q2.data());
        EXPECT_EQ(q1, q2) << "n=" << n << " scale=" << s;
        EXPECT_EQ(e1, e2);
      }
    }
  }
}

TEST(Kernels, QuantizeRoundsHalfToEven) {
  const float x[4] = {0.5f, 1.5f, 2.5f, -2.5f};
  int8_t q[4];
  kernels::quantize(x, 4, 1.0f, -127, 127, q);
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[1], 2);
  EXPECT_EQ(q[2], 2);
  EXPECT_EQ(q[3], -2);
}

TEST(Kernels, AbsMaxFindsMaxAndFlagsNonFinite) {
  std::vector<float> x = random_floats(77, 5, 2.0f);
  x[70] = -9.5f;
  bool bad = false;
  EXPECT_EQ(kernels::abs_max(x.data(), x.size(), &bad), 9.5f);
  EXPECT_FALSE(bad);
  for (size_t at : {3u, 76u}) {  // in the vector body and in the tail
    for (float v : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> y = x;
      y[at] = v;
      bool b1 = false, b2 = false;
      kernels::abs_max(y.data(), y.size(), &b1);
      kernels::scalar::abs_max(y.data(), y.size(), &b2);
      EXPECT_TRUE(b1 && b2) << at << " " << v;
    }
  }
}

TEST(Kernels, PackNibblesMatchesScalar) {
  std::vector<int8_t> q(64 + 32 + 6);
  for (size_t i = 0; i < q.size(); ++i) q[i] = int8_t(int(i * 7 % 16) - 8);
  std::vector<uint8_t> a(q.size() / 2), b(q.size() / 2);
  kernels::pack_nibbles(q.data(), q.size(), a.data());
  kernels::scalar::pack_nibbles(q.data(), q.size(), b.data());
  EXPECT_EQ(a, b);
  // element 0 in the low nibble, element 1 in the high nibble
  EXPECT_EQ(a[0], uint8_t((q[0] & 15) | ((q[1] & 15) << 4)));
}
