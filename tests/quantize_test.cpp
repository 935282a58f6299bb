// The quantizers of src/quantize.h on toy tensors whose bytes were worked out by hand from
// SPEC.md (scales chosen so the f16 scale is exact or easy to round by hand).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "quant/quantize.h"
#include "test_support.h"

using namespace leapconv;

namespace {

uint8_t b8(int q) { return uint8_t(int8_t(q)); }

// ---------------- Q8 per channel ----------------

TEST(QuantizeQ8, ToyTensorHandCheckedBytes) {
  const float s0 = 0x1p-5f;  // row 0: max 127 * 2^-5 -> scale 2^-5 exactly (f16 0x2800)
  const float w[4 * 8] = {
      // row 0 (units of 2^-5): 127, -3, 2.5 (tie -> 2), 3.5 (tie -> 4), -0.5 (-> 0), 1.5 (-> 2), -1.5 (-> -2), -2.5 (-> -2)
      127 * s0, -3 * s0, 2.5f * s0, 3.5f * s0, -0.5f * s0, 1.5f * s0, -1.5f * s0, -2.5f * s0,
      // row 1: all zero -> scale 0, q 0
      0, 0, 0, 0, 0, 0, 0, 0,
      // row 2: max |w| = 508 from a negative value -> scale 4 (f16 0x4400); w / 4 = -127, 1.5, 2.5, -3.5, .25, .75, -.5, 0
      -508, 6, 10, -14, 1, 3, -2, 0,
      // row 3: max 1.0 -> 1/127 = 0.0078740.. rounds to f16 2^-7 * (1 + 8/1024) = 129/16384 (0x2008);
      // q = round(w * 16384 / 129)
      1.0f, -1.0f, 0.5f, 0.25f, -0.125f, 0x1p-7f, -0.75f, 0.0f};
  uint16_t scales[4];
  int8_t q[32];
  const float err = quantize_q8_rows(w, 4, 8, scales, q);
  const uint16_t want_scales[4] = {0x2800, 0x0000, 0x4400, 0x2008};
  const int want_q[32] = {127, -3, 2, 4, 0, 2, -2, -2,                //
                          0, 0, 0, 0, 0, 0, 0, 0,                     //
                          -127, 2, 2, -4, 0, 1, 0, 0,                 //
                          127, -127, 64, 32, -16, 1, -95, 0};         // 63.50, 31.75, -15.88, 0.99, -95.26
  for (int r = 0; r < 4; ++r) EXPECT_EQ(scales[r], want_scales[r]) << "row " << r;
  for (int i = 0; i < 32; ++i) EXPECT_EQ(uint8_t(q[i]), b8(want_q[i])) << "element " << i;

  // dequantize is q * f16 scale, exactly.
  float out[32];
  dequantize_q8_rows(scales, q, 4, 8, out);
  const double sc[4] = {0x1p-5, 0.0, 4.0, 129.0 / 16384.0};
  double worst = 0;
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(double(out[i]), want_q[i] * sc[i / 8]) << "element " << i;
    worst = std::max(worst, std::fabs(double(w[i]) - want_q[i] * sc[i / 8]));
  }
  // Largest error: row 2, 3.5 -> 4 or 2.5 -> 2 or 1.5 -> 2, all half a step of 4 = 2.
  EXPECT_EQ(double(err), worst);
  EXPECT_EQ(double(err), 2.0);
}

// A subnormal f16 scale is much smaller than max/127, so the clamp to [-127, 127] bites.
TEST(QuantizeQ8, SubnormalScaleClamps) {
  const float u = 0x1p-24f;
  // max 177.75 * 2^-24: 177.75 / 127 = 1.3996 -> f16 subnormal 1 * 2^-24 (0x0001)
  const float w[8] = {177.75f * u, -177.75f * u, 130 * u, -128 * u, 127.5f * u, -127.5f * u, 0.5f * u, 1.5f * u};
  uint16_t scale;
  int8_t q[8];
  quantize_q8_rows(w, 1, 8, &scale, q);
  EXPECT_EQ(scale, 0x0001);
  const int want[8] = {127, -127, 127, -127, 127, -127, 0, 2};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(int(q[i]), want[i]) << i;
}

// ---------------- Q4 per group of 64 ----------------

TEST(QuantizeQ4, ToyTensorHandCheckedBytes) {
  const int R = 4, C = 128;
  std::vector<float> w(size_t(R * C), 0.0f);
  auto at = [&](int r, int c) -> float& { return w[size_t(r * C + c)]; };
  // row 0, group 0: max 7 * 0.125 -> scale 0.125 (0x3000). Units: 7, -7, 2.5 (-> 2), 3.5 (-> 4), -2.5 (-> -2), -0.5 (-> 0), 1, -3
  const float g00[8] = {7, -7, 2.5f, 3.5f, -2.5f, -0.5f, 1, -3};
  for (int i = 0; i < 8; ++i) at(0, i) = g00[i] * 0.125f;
  // row 0, group 1: all zero.
  // row 1, group 0: max 9.75 * 2^-24; 9.75 / 7 = 1.39 -> f16 subnormal 2^-24 (0x0001), so values
  // reach past the 4-bit range: -9.75 -> -8 (clamp), -7.5 -> -8 (tie to even), 6.5 -> 6 (tie), 7.25 -> 7,
  // 9 -> 7 (clamp), -8.5 -> -8, 0.5 -> 0 (tie), 1.5 -> 2 (tie)
  const float g10[8] = {-9.75f, -7.5f, 6.5f, 7.25f, 9.0f, -8.5f, 0.5f, 1.5f};
  for (int i = 0; i < 8; ++i) at(1, i) = g10[i] * 0x1p-24f;
  // row 1, group 1: max from a negative value -3.5 -> scale 0.5 (0x3800). w / 0.5 = -7, 2.5, 1.5, -0.5, 6, -3.5, 0, 1
  const float g11[8] = {-3.5f, 1.25f, 0.75f, -0.25f, 3.0f, -1.75f, 0.0f, 0.5f};
  for (int i = 0; i < 8; ++i) at(1, 64 + i) = g11[i];
  // rows 2 and 3: a ramp, checked against the reference quantizer below.
  for (int r = 2; r < 4; ++r)
    for (int c = 0; c < C; ++c) at(r, c) = float((c * 37 + r * 11) % 97 - 48) * 0x1p-6f * (c % 3 == 0 ? -1.0f : 1.0f);

  std::vector<uint16_t> scales(size_t(R * C / 64));
  std::vector<uint8_t> packed(size_t(R * C / 2));
  quantize_q4_rows(w.data(), R, C, scales.data(), packed.data());

  // scales: out x in/64, row-major
  EXPECT_EQ(scales[0], 0x3000);
  EXPECT_EQ(scales[1], 0x0000);
  EXPECT_EQ(scales[2], 0x0001);
  EXPECT_EQ(scales[3], 0x3800);
  // Element 2k in the low nibble, 2k+1 in the high nibble, 4-bit two's complement.
  // row 0 g0: q = 7, -7 | 2, 4 | -2, 0 | 1, -3  -> 0x97 0x42 0x0E 0xD1, then zeros
  const uint8_t r0g0[4] = {0x97, 0x42, 0x0E, 0xD1};
  for (int k = 0; k < 4; ++k) EXPECT_EQ(packed[size_t(k)], r0g0[k]) << "byte " << k;
  for (int k = 4; k < 64; ++k) EXPECT_EQ(packed[size_t(k)], 0) << "byte " << k;  // rest of g0 and all of g1
  // row 1 g0: q = -8, -8 | 6, 7 | 7, -8 | 0, 2 -> 0x88 0x76 0x87 0x20
  const uint8_t r1g0[4] = {0x88, 0x76, 0x87, 0x20};
  for (int k = 0; k < 4; ++k) EXPECT_EQ(packed[size_t(64 + k)], r1g0[k]) << "byte " << 64 + k;
  // row 1 g1: q = -7, 2 | 2, 0 | 6, -4 | 0, 1 -> 0x29 0x02 0xC6 0x10
  const uint8_t r1g1[4] = {0x29, 0x02, 0xC6, 0x10};
  for (int k = 0; k < 4; ++k) EXPECT_EQ(packed[size_t(96 + k)], r1g1[k]) << "byte " << 96 + k;

  // Rows 2-3 against the reference quantizer (SPEC: scale = f16(max/7), q = clamp(round(w/scale), -8, 7)).
  for (int g = 4; g < 8; ++g) {
    const float* x = w.data() + g * 64;
    float amax = 0;
    for (int i = 0; i < 64; ++i) amax = std::max(amax, std::fabs(x[i]));
    const uint16_t sb = tsup::float_to_half(amax / 7.0f);
    EXPECT_EQ(scales[size_t(g)], sb) << "group " << g;
    const float s = tsup::half_to_float(sb);
    for (int i = 0; i < 64; ++i) {
      const int qv = int(std::min(7.0f, std::max(-8.0f, std::nearbyint(x[i] / s))));
      const uint8_t byte = packed[size_t(g * 32 + i / 2)];
      const int nib = i % 2 ? byte >> 4 : byte & 15;
      EXPECT_EQ(nib, qv & 15) << "group " << g << " element " << i;
    }
  }

  // dequantize: nibble value x f16 scale, exactly.
  std::vector<float> out(w.size());
  dequantize_q4_rows(scales.data(), packed.data(), R, C, out.data());
  const int q00[8] = {7, -7, 2, 4, -2, 0, 1, -3}, q10[8] = {-8, -8, 6, 7, 7, -8, 0, 2}, q11[8] = {-7, 2, 2, 0, 6, -4, 0, 1};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(double(out[size_t(i)]), q00[i] * 0.125);
    EXPECT_EQ(double(out[size_t(C + i)]), q10[i] * 0x1p-24);
    EXPECT_EQ(double(out[size_t(C + 64 + i)]), q11[i] * 0.5);
  }
  for (int i = 8; i < 64; ++i) EXPECT_EQ(out[size_t(i)], 0.0f);
  for (int i = 64; i < 128; ++i) EXPECT_EQ(out[size_t(i)], 0.0f);
  for (int g = 4; g < 8; ++g) {
    const float s = tsup::half_to_float(scales[size_t(g)]);
    for (int i = 0; i < 64; ++i) {
      const uint8_t byte = packed[size_t(g * 32 + i / 2)];
      int nib = i % 2 ? byte >> 4 : byte & 15;
      if (nib >= 8) nib -= 16;
      EXPECT_EQ(out[size_t(g * 64 + i)], float(nib) * s);
    }
  }
}

TEST(QuantizeQ4, EveryNibbleDecodesSigned) {
  // -8 is only reachable when the f16 scale is well below max/7: a subnormal scale. Units u = 2^-24,
  // max 10u -> 10/7 = 1.43 -> scale 1u (0x0001). Values -7.5u (tie -> -8), -7u, ..., 7u, then 10u (clamp -> 7).
  const float u = 0x1p-24f;
  std::vector<float> w(64, 0.0f);
  w[0] = -7.5f * u;
  for (int i = 1; i < 16; ++i) w[size_t(i)] = float(i - 8) * u;
  w[16] = 10.0f * u;
  uint16_t scale;
  uint8_t packed[32];
  quantize_q4_rows(w.data(), 1, 64, &scale, packed);
  EXPECT_EQ(scale, 0x0001);
  // q = -8, -7, ..., 7, 7: bytes (low nibble = even index) 0x98, 0xBA, 0xDC, 0xFE, 0x10, 0x32, 0x54, 0x76, 0x07
  const uint8_t want[9] = {0x98, 0xBA, 0xDC, 0xFE, 0x10, 0x32, 0x54, 0x76, 0x07};
  for (int k = 0; k < 9; ++k) EXPECT_EQ(packed[k], want[k]) << k;
  std::vector<float> out(64);
  dequantize_q4_rows(&scale, packed, 1, 64, out.data());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[size_t(i)], float(i - 8) * u);
  EXPECT_EQ(out[16], 7 * u);
  for (int n = 0; n < 16; ++n) EXPECT_EQ(nibble_value(uint8_t(n)), n < 8 ? n : n - 16);
}

// ---------------- LEAP int8 groups ----------------

TEST(QuantizeInt8Groups, HandCheckedGroups) {
  // gs 4: group 0 max 63.5 -> scale 0.5; -1.25/0.5 = -2.5 -> -2 (tie), 0.75/0.5 = 1.5 -> 2 (tie)
  //       group 1 all zero -> scale 0, q 0; group 2 max 127 from -127 -> scale 1
  const float w[12] = {63.5f, -1.25f, 0.75f, 0.0f, 0, 0, 0, 0, -127.0f, 3.5f, 4.5f, -0.4f};
  int8_t q[12];
  float scales[3];
  const float err = quantize_int8_groups(w, 12, 4, q, scales);
  EXPECT_EQ(scales[0], 0.5f);
  EXPECT_EQ(scales[1], 0.0f);
  EXPECT_EQ(scales[2], 1.0f);
  const int want[12] = {127, -2, 2, 0, 0, 0, 0, 0, -127, 4, 4, 0};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(int(q[i]), want[i]) << i;
  float out[12];
  dequantize_int8_groups(q, scales, 12, 4, out);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], float(want[i]) * scales[i / 4]) << i;
  EXPECT_EQ(err, 0.5f);  // 3.5 -> 4 and 4.5 -> 4 at scale 1
}

TEST(QuantizeErrors, NanOrInfReportsInfinity) {
  float w[64] = {};
  w[5] = std::numeric_limits<float>::quiet_NaN();
  uint16_t s16[1];
  int8_t q8[64];
  uint8_t q4[32];
  float s32[1];
  EXPECT_TRUE(std::isinf(quantize_q8_rows(w, 1, 64, s16, q8)));
  EXPECT_TRUE(std::isinf(quantize_q4_rows(w, 1, 64, s16, q4)));
  EXPECT_TRUE(std::isinf(quantize_int8_groups(w, 64, 64, q8, s32)));
  w[5] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(quantize_q8_rows(w, 1, 64, s16, q8)));
}

// The test's own f16 reference agrees with IEEE rounding on a few known values (it is used to
// compute expectations elsewhere, so it must be right on its own).
TEST(ReferenceHalf, KnownValues) {
  EXPECT_EQ(tsup::float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(tsup::float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(tsup::float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(tsup::float_to_half(1.0f + 0x1p-11f), 0x3C00);       // tie -> even
  EXPECT_EQ(tsup::float_to_half(1.0f + 3 * 0x1p-11f), 0x3C02);   // tie -> even
  EXPECT_EQ(tsup::float_to_half(0x1p-24f), 0x0001);
  EXPECT_EQ(tsup::float_to_half(0x1p-25f), 0x0000);              // tie -> even (0)
  EXPECT_EQ(tsup::float_to_half(0x1.8p-24f), 0x0002);            // 1.5 units -> 2
  EXPECT_EQ(tsup::float_to_half(0x1.ffcp-15f), 0x0400);          // rounds up into the normals
  EXPECT_EQ(tsup::float_to_half(1.0f / 127.0f), 0x2008);
  EXPECT_EQ(tsup::half_to_float(0x2008), 129.0f / 16384.0f);
  EXPECT_EQ(tsup::half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(tsup::half_to_float(0xC400), -4.0f);
  // Every finite half survives the round trip, and every midpoint between neighbours goes to the even one.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint16_t hs = uint16_t(h | sign);
      ASSERT_EQ(tsup::float_to_half(tsup::half_to_float(hs)), hs) << h;
      if (h + 1 < 0x7c00) {
        const double mid = (double(tsup::half_to_float(hs)) + double(tsup::half_to_float(uint16_t((h + 1) | sign)))) / 2;
        ASSERT_EQ(tsup::float_to_half(float(mid)), uint16_t(((h & 1) ? h + 1 : h) | sign)) << h;
      }
    }
  }
}

}  // namespace
