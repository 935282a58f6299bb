#include <gtest/gtest.h>

#include <cmath>

#include "core/f16.h"

using namespace leapconv;

// Every half value survives half -> float -> half, and the float is the exact value.
TEST(F16, AllHalfValuesRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) {
      EXPECT_TRUE(man ? std::isnan(f) : std::isinf(f)) << h;
      continue;
    }
    const double want = (h & 0x8000 ? -1.0 : 1.0) *
                        (exp ? std::ldexp(1.0 + man / 1024.0, int(exp) - 15) : std::ldexp(man / 1024.0, -14));
    ASSERT_EQ(double(f), want) << h;
    ASSERT_EQ(f32_to_f16(f), h) << h;
  }
}

TEST(F16, RoundsHalfToEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);        // tie between 0 and the smallest subnormal
  EXPECT_EQ(f32_to_f16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(F16, Bf16IsTheTopHalfOfF32) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
}

TEST(Rounding, HalfToEven) {
  EXPECT_EQ(round_half_even(0.5f), 0.0f);
  EXPECT_EQ(round_half_even(1.5f), 2.0f);
  EXPECT_EQ(round_half_even(2.5f), 2.0f);
  EXPECT_EQ(round_half_even(-2.5f), -2.0f);
  EXPECT_EQ(round_half_even(-3.5f), -4.0f);
  EXPECT_EQ(round_half_even(126.49f), 126.0f);
}
