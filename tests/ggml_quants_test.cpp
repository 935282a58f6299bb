// src/quant/ggml_quants.* against ggml itself: ggml-quants.c and ggml-impl.h's conversions,
// compiled from llama.cpp's source in the build directory (tests/ggml_ref). Every type, on
// rows shaped like real tensors and on the awkward ones (zeros, constants, outliers,
// subnormals, near FLT_MAX, tiny magnitudes), must give ggml's bytes (memcmp) and ggml's
// dequantized floats bit for bit.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ggml_ref.h"
#include "quant/ggml_quants.h"

namespace g = leapconv::ggml;

namespace {

struct QType {
  const char* name;
  int ggml_type;  // ggml's (and GGUF's) type number
  int64_t block_values, block_bytes;
  void (*quantize)(const float*, uint8_t*, int64_t);
  void (*dequantize)(const uint8_t*, float*, int64_t);
  int halves[2];  // byte offsets of the block's f16 fields (scale, min); -1: none
};

const QType kTypes[] = {
    {"Q8_0", 8, g::kQ8_0BlockValues, g::kQ8_0BlockBytes, g::quantize_row_q8_0, g::dequantize_row_q8_0,
     {0, -1}},
    {"Q4_0", 2, g::kQ4_0BlockValues, g::kQ4_0BlockBytes, g::quantize_row_q4_0, g::dequantize_row_q4_0,
     {0, -1}},
    {"Q4_1", 3, g::kQ4_1BlockValues, g::kQ4_1BlockBytes, g::quantize_row_q4_1, g::dequantize_row_q4_1,
     {0, 2}},
    {"Q5_0", 6, g::kQ5_0BlockValues, g::kQ5_0BlockBytes, g::quantize_row_q5_0, g::dequantize_row_q5_0,
     {0, -1}},
    {"Q5_1", 7, g::kQ5_1BlockValues, g::kQ5_1BlockBytes, g::quantize_row_q5_1, g::dequantize_row_q5_1,
     {0, 2}},
    {"Q2_K", 10, g::kQ2_KBlockValues, g::kQ2_KBlockBytes, g::quantize_row_q2_K, g::dequantize_row_q2_K,
     {80, 82}},
    {"Q3_K", 11, g::kQ3_KBlockValues, g::kQ3_KBlockBytes, g::quantize_row_q3_K, g::dequantize_row_q3_K,
     {108, -1}},
    {"Q4_K", 12, g::kQ4_KBlockValues, g::kQ4_KBlockBytes, g::quantize_row_q4_K, g::dequantize_row_q4_K,
     {0, 2}},
    {"Q5_K", 13, g::kQ5_KBlockValues, g::kQ5_KBlockBytes, g::quantize_row_q5_K, g::dequantize_row_q5_K,
     {0, 2}},
    {"Q6_K", 14, g::kQ6_KBlockValues, g::kQ6_KBlockBytes, g::quantize_row_q6_K, g::dequantize_row_q6_K,
     {208, -1}},
    {"MXFP4", 39, g::kMXFP4BlockValues, g::kMXFP4BlockBytes, g::quantize_row_mxfp4, g::dequantize_row_mxfp4,
     {-1, -1}},  // (its scale is an E8M0 byte: every pattern finite)
    {"NVFP4", 40, g::kNVFP4BlockValues, g::kNVFP4BlockBytes, g::quantize_row_nvfp4, g::dequantize_row_nvfp4,
     {-1, -1}},  // (four UE4M3 scale bytes: every pattern finite)
    // IQ4_NL / IQ4_XS: ggml's quantize_iq4_* with NULL weights (what llama-quantize writes)
    {"IQ4_NL", 20, g::kIQ4_NLBlockValues, g::kIQ4_NLBlockBytes, g::quantize_row_iq4_nl, g::dequantize_row_iq4_nl,
     {0, -1}},
    {"IQ4_XS", 23, g::kIQ4_XSBlockValues, g::kIQ4_XSBlockBytes, g::quantize_row_iq4_xs, g::dequantize_row_iq4_xs,
     {0, -1}},
    {"TQ1_0", 34, g::kTQ1_0BlockValues, g::kTQ1_0BlockBytes, g::quantize_row_tq1_0, g::dequantize_row_tq1_0,
     {52, -1}},
    {"TQ2_0", 35, g::kTQ2_0BlockValues, g::kTQ2_0BlockBytes, g::quantize_row_tq2_0, g::dequantize_row_tq2_0,
     {64, -1}},
    {"Q1_0", 41, g::kQ1_0BlockValues, g::kQ1_0BlockBytes, g::quantize_row_q1_0, g::dequantize_row_q1_0,
     {0, -1}},
    {"Q2_0", 42, g::kQ2_0BlockValues, g::kQ2_0BlockBytes, g::quantize_row_q2_0, g::dequantize_row_q2_0,
     {0, -1}},
};

void PrintTo(const QType& t, std::ostream* os) { *os << t.name; }

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Row {
  std::string name;
  std::vector<float> x;  // length a multiple of 256
};

std::vector<float> normal(int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// The rows every type is checked on. Lengths are real tensor widths (256 .. 4096, and
// 2048 + 256) so both block sizes see many blocks.
const std::vector<Row>& rows() {
  static const std::vector<Row> all = [] {
    std::vector<Row> r;
    r.push_back({"normal_0.02_k4096", normal(4096, 0.02f, 1)});
    r.push_back({"normal_1_k2304", normal(2048 + 256, 1.0f, 2)});
    r.push_back({"normal_30_k256", normal(256, 30.0f, 3)});
    {  // per-32 blocks of very different scales, as in real weights with outlier channels
      std::mt19937 rng(4);
      std::normal_distribution<float> d(0.0f, 1.0f);
      std::uniform_real_distribution<float> e(-12.0f, 3.0f);
      std::vector<float> v(4096);
      for (size_t b = 0; b < v.size(); b += 32) {
        const float s = std::exp2(e(rng));
        for (size_t i = 0; i < 32; ++i) v[b + i] = s * d(rng);
      }
      r.push_back({"mixed_block_scales_k4096", v});
    }
    {
      std::mt19937 rng(5);
      std::student_t_distribution<float> t(2.0f);
      std::vector<float> v(4096);
      for (float& x : v) x = 0.02f * t(rng);
      r.push_back({"student_t2_k4096", v});
    }
    {
      std::mt19937 rng(6);
      std::cauchy_distribution<float> c(0.0f, 0.01f);
      std::vector<float> v(2048);
      for (float& x : v) x = c(rng);
      r.push_back({"cauchy_k2048", v});
    }
    {  // larger matrices (16 rows of 4096, as ggml quantizes a tensor: one long run of
       // blocks) of shapes that reach the rarer branches of make_qx_quants (the last scale
       // candidate winning), make_q3_quants (a 5th refinement pass) and make_qkx2_quants
      std::mt19937 rng(19);
      std::student_t_distribution<float> t(2.0f);
      std::normal_distribution<float> n(0.0f, 1.0f);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::cauchy_distribution<float> cy(0.0f, 0.01f);
      std::vector<float> a(65536), b(65536), c(65536), d(65536);
      for (float& x : a) x = 0.01f * t(rng);
      for (float& x : b) x = 0.05f * ((rng() & 1 ? 1.0f : -1.0f) + 0.1f * n(rng));
      for (float& x : c) x = 0.03f * u(rng);
      for (float& x : d) x = cy(rng);
      r.push_back({"student_t2_16x4096", a});
      r.push_back({"bimodal_16x4096", b});
      r.push_back({"uniform_16x4096", c});
      r.push_back({"cauchy_16x4096", d});
    }
    {  // Three super-blocks, found by a search over Cauchy rows (this stream, libstdc++'s
       // distribution), where make_qx_quants's last scale candidate (is = +9) wins in the
       // group that sets Q6_K's scale, so that it decides Q6_K's bytes (about 1 super-block
       // in 3000 does).
      std::mt19937 rng(123);
      std::cauchy_distribution<float> cy(0.0f, 1.0f);
      std::vector<float> v;
      std::vector<float> sb(256);
      for (int i = 0; i <= 10149; ++i) {
        for (float& x : sb) x = cy(rng);
        if (i == 8333 || i == 10027 || i == 10149) v.insert(v.end(), sb.begin(), sb.end());
      }
      r.push_back({"cauchy_q6k_last_candidate_k768", v});
    }
    {  // non-negative (post-ReLU-like) and all-negative rows: the min/offset paths
      std::vector<float> v = normal(1024, 0.5f, 7);
      for (float& x : v) x = std::fabs(x) + 0.25f;
      r.push_back({"positive_k1024", v});
      for (float& x : v) x = -x;
      r.push_back({"negative_k1024", v});
    }
    {  // values on a coarse grid: exact rounding ties in x * id and in nearest_int
      std::mt19937 rng(8);
      std::uniform_int_distribution<int> d(-32, 32);
      std::vector<float> v(1024);
      for (float& x : v) x = float(d(rng)) * 0.25f;
      r.push_back({"grid_quarters_k1024", v});
    }
    r.push_back({"zeros_k256", std::vector<float>(256, 0.0f)});
    r.push_back({"neg_zeros_k256", std::vector<float>(256, -0.0f)});
    r.push_back({"const_pos_k512", std::vector<float>(512, 0.7f)});
    r.push_back({"const_neg_k512", std::vector<float>(512, -3.25f)});
    r.push_back({"const_one_k256", std::vector<float>(256, 1.0f)});
    {
      std::vector<float> v = normal(256, 0.01f, 9);
      v[77] = 50.0f;
      r.push_back({"outlier_pos_k256", v});
      v[77] = -50.0f;
      r.push_back({"outlier_neg_k256", v});
      std::vector<float> z(256, 0.0f);
      z[3] = 1.0f;
      r.push_back({"lone_value_k256", z});
    }
    {  // subnormal floats only, then subnormals mixed with a few normal values
      std::mt19937 rng(10);
      std::uniform_int_distribution<uint32_t> m(1, 0x7fffff);
      std::vector<float> v(512);
      for (float& x : v) x = from_bits(m(rng) | (rng() & 0x80000000u));
      r.push_back({"subnormal_k512", v});
      for (size_t i = 0; i < v.size(); i += 37) v[i] = (i & 1 ? -1.0f : 1.0f) * 1e-3f;
      r.push_back({"subnormal_mixed_k512", v});
      std::vector<float> w = normal(256, 1.0f, 11);
      for (float& x : w) x *= FLT_MIN;  // around the normal/subnormal border
      r.push_back({"near_flt_min_k256", w});
    }
    // Tiny magnitudes: at 1e-37 the Q8_0..Q5_1 scale d = max/127 (.. /8) is subnormal and
    // 1 / d overflows to Inf, so x * id is Inf or NaN (0 * Inf) inside ggml.
    r.push_back({"tiny_1e-20_k256", normal(256, 1e-20f, 12)});
    r.push_back({"tiny_1e-30_k256", normal(256, 1e-30f, 13)});
    r.push_back({"tiny_1e-37_k512", normal(512, 1e-37f, 14)});
    r.push_back({"tiny_1e-39_k256", normal(256, 1e-39f, 15)});
    {  // huge magnitudes: f16 scales overflow to Inf; max - min overflows for Q4_1/Q5_1
      std::vector<float> v = normal(512, 1.0f, 16);
      for (float& x : v) x *= 1e37f;
      r.push_back({"huge_1e37_k512", v});
      std::vector<float> w(256);
      std::mt19937 rng(17);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (float& x : w) x = u(rng) * FLT_MAX;
      w[5] = FLT_MAX;
      w[200] = -FLT_MAX;
      r.push_back({"near_flt_max_k256", w});
      std::vector<float> m(256);
      for (size_t i = 0; i < m.size(); ++i) m[i] = i % 3 == 0 ? FLT_MAX : i % 3 == 1 ? -FLT_MAX : 0.0f;
      r.push_back({"flt_max_pattern_k256", m});
      r.push_back({"const_flt_max_k256", std::vector<float>(256, FLT_MAX)});
      r.push_back({"const_neg_flt_max_k256", std::vector<float>(256, -FLT_MAX)});
      std::vector<float> h = normal(256, 1.0f, 18);
      for (float& x : h) x *= 60000.0f;  // around f16's largest finite value
      r.push_back({"near_f16_max_k256", h});
    }
    return r;
  }();
  return all;
}

// First differing byte as a readable message (block index and offset in it), "" if equal.
std::string first_byte_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                            int64_t block_bytes, const char* a_name = "ours",
                            const char* b_name = "ggml") {
  if (a.size() != b.size()) return "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      return "block " + std::to_string(int64_t(i) / block_bytes) + " byte " +
             std::to_string(int64_t(i) % block_bytes) + ": " + a_name + " " +
             std::to_string(a[i]) + ", " + b_name + " " + std::to_string(b[i]);
    }
  }
  return "";
}

std::string first_float_diff(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (bits(a[i]) != bits(b[i])) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "value %zu: ours %a (0x%08x), ggml %a (0x%08x)", i,
                    double(a[i]), bits(a[i]), double(b[i]), bits(b[i]));
      return buf;
    }
  }
  return "";
}

class GgmlQuant : public ::testing::TestWithParam<QType> {};

TEST_P(GgmlQuant, QuantizeMatchesGgmlBytesAndDequantizeMatchesGgmlBits) {
  const QType& t = GetParam();
  for (const Row& row : rows()) {
    SCOPED_TRACE(std::string(t.name) + " on " + row.name);
    const int64_t k = int64_t(row.x.size());
    ASSERT_EQ(k % t.block_values, 0);
    const size_t nbytes = size_t(k / t.block_values * t.block_bytes);

    // Ours writes to an odd address (no alignment assumed); ggml's buffer is pre-filled with
    // a pattern other than ours, so a byte either side forgets to write shows up.
    std::vector<uint8_t> ours_buf(nbytes + 1, 0xA5), ref(nbytes, 0x5A);
    uint8_t* ours_ptr = ours_buf.data() + 1;
    t.quantize(row.x.data(), ours_ptr, k);
    ASSERT_EQ(ggml_ref_quantize_row(t.ggml_type, row.x.data(), ref.data(), k), 0);
    const std::vector<uint8_t> ours(ours_ptr, ours_ptr + nbytes);
    const std::string qdiff = first_byte_diff(ours, ref, t.block_bytes);
    EXPECT_EQ(qdiff, "");
    if (!qdiff.empty()) continue;

    std::vector<float> deq_ours(size_t(k), 1.0f), deq_ref(size_t(k), 2.0f);
    t.dequantize(ours_ptr, deq_ours.data(), k);
    ASSERT_EQ(ggml_ref_dequantize_row(t.ggml_type, ref.data(), deq_ref.data(), k), 0);
    EXPECT_EQ(first_float_diff(deq_ours, deq_ref), "");
  }
}

// Dequantizing arbitrary bytes (every scale pattern, including f16 Inf/NaN and K-quant sub-
// scales no quantizer writes) is also ggml's, bit for bit.
TEST_P(GgmlQuant, DequantizeOfRandomBytesMatchesGgml) {
  const QType& t = GetParam();
  const int64_t k = 4096;
  const size_t nbytes = size_t(k / t.block_values * t.block_bytes);
  std::mt19937 rng(uint32_t(t.ggml_type) * 7919u);
  for (int round = 0; round < 4; ++round) {
    std::vector<uint8_t> blocks(nbytes + 1);
    for (uint8_t& b : blocks) b = uint8_t(rng());
    if (round == 0) {  // finite, moderate f16 scales: the values real files hold
      for (size_t off = 0; off < nbytes; off += size_t(t.block_bytes))
        for (int h : t.halves)
          if (h >= 0) blocks[1 + off + size_t(h) + 1] &= 0x3b;  // exponent <= 14: no Inf/NaN
    }
    SCOPED_TRACE(std::string(t.name) + " round " + std::to_string(round));
    std::vector<float> deq_ours(static_cast<size_t>(k)), deq_ref(static_cast<size_t>(k));
    t.dequantize(blocks.data() + 1, deq_ours.data(), k);  // odd address
    std::vector<uint8_t> aligned(blocks.begin() + 1, blocks.end());
    ASSERT_EQ(ggml_ref_dequantize_row(t.ggml_type, aligned.data(), deq_ref.data(), k), 0);
    EXPECT_EQ(first_float_diff(deq_ours, deq_ref), "");
  }
}

TEST_P(GgmlQuant, BlockGeometryIsGgmls) {
  const QType& t = GetParam();
  EXPECT_EQ(t.block_values, ggml_ref_block_values(t.ggml_type));
  EXPECT_EQ(t.block_bytes, ggml_ref_block_bytes(t.ggml_type));
  // A row of two blocks is written in exactly 2 * block_bytes, every one of them.
  std::vector<float> x = normal(2 * t.block_values, 1.0f, 99);
  for (uint8_t fill : {0x00, 0xff}) {
    std::vector<uint8_t> ours(size_t(3 * t.block_bytes), fill), ref(size_t(2 * t.block_bytes));
    t.quantize(x.data(), ours.data(), int64_t(x.size()));
    ASSERT_EQ(ggml_ref_quantize_row(t.ggml_type, x.data(), ref.data(), int64_t(x.size())), 0);
    EXPECT_EQ(0, std::memcmp(ours.data(), ref.data(), ref.size()));
    for (size_t i = ref.size(); i < ours.size(); ++i) ASSERT_EQ(ours[i], fill) << i;
  }
}

// NVFP4's UE4M3 scale bytes both ways, as ggml-impl.h converts them: every byte, and every
// 61st float bit pattern (both signs, NaN, Inf, subnormal, the rounding and saturation edges
// among them) plus every float within 2^12 steps of each UE4M3 value and its midpoints.
TEST(GgmlNvfp4, Ue4m3ConversionsAreGgmls) {
  for (int b = 0; b < 256; ++b) EXPECT_EQ(bits(g::ue4m3_to_fp32(uint8_t(b))), bits(ggml_ref_ue4m3_to_fp32(uint8_t(b)))) << b;
  int64_t bad = 0;
  const auto check = [&](uint32_t u) {
    const float x = from_bits(u);
    if (g::fp32_to_ue4m3(x) != ggml_ref_fp32_to_ue4m3(x) && bad++ < 5) ADD_FAILURE() << std::hexfloat << x;
  };
  for (uint64_t u = 0; u <= 0xffffffffu; u += 61) check(uint32_t(u));
  for (int b = 0; b < 256; ++b)
    for (const float c : {2 * g::ue4m3_to_fp32(uint8_t(b)), 2 * (g::ue4m3_to_fp32(uint8_t(b)) + g::ue4m3_to_fp32(uint8_t(b + 1))) / 2})
      for (int d = -4096; d <= 4096; ++d) check(uint32_t(int64_t(bits(c)) + d));
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(Ggml, GgmlQuant, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<QType>& info) {
                           return std::string(info.param.name);
                         });

// The SIMD spellings of the K-quants and IQ4 (four or eight sub-blocks per vector) against the plain scalar
// port, on the same rows; the oracle test above already holds the default (SIMD) path to ggml.
TEST(GgmlSimd, KQuantsMatchTheScalarPort) {
#if defined(__SSE2__)
  EXPECT_TRUE(g::simd_enabled());
#endif
  struct S {
    const char* name;
    int64_t bytes;
    void (*simd)(const float*, uint8_t*, int64_t);
    void (*scalar)(const float*, uint8_t*, int64_t);
  } const kinds[] = {
      {"Q2_K", g::kQ2_KBlockBytes, g::quantize_row_q2_K, g::scalar::quantize_row_q2_K},
      {"Q4_K", g::kQ4_KBlockBytes, g::quantize_row_q4_K, g::scalar::quantize_row_q4_K},
      {"Q5_K", g::kQ5_KBlockBytes, g::quantize_row_q5_K, g::scalar::quantize_row_q5_K},
      {"Q6_K", g::kQ6_KBlockBytes, g::quantize_row_q6_K, g::scalar::quantize_row_q6_K},
      {"IQ4_XS", g::kIQ4_XSBlockBytes, g::quantize_row_iq4_xs,
       [](const float* x, uint8_t* y, int64_t k) { g::scalar::quantize_row_iq4_xs_w(x, y, k, nullptr); }},
      {"IQ4_NL (a 256-value block of 8)", 8 * g::kIQ4_NLBlockBytes, g::quantize_row_iq4_nl,
       [](const float* x, uint8_t* y, int64_t k) { g::scalar::quantize_row_iq4_nl_w(x, y, k, nullptr); }},
  };
  for (const int lanes : {4, 8, 0}) {  // four sub-blocks a step, eight, then as the CPU takes them (AVX-512: 16)
    g::force_search_lanes(lanes);
    for (const S& t : kinds) {
      for (const Row& row : rows()) {
        SCOPED_TRACE(std::string(t.name) + " on " + row.name + ", " + std::to_string(g::search_lanes()) + " lanes");
        const int64_t k = int64_t(row.x.size());
        std::vector<uint8_t> a(size_t(k / 256 * t.bytes), 1), b(a.size(), 2);
        t.simd(row.x.data(), a.data(), k);
        t.scalar(row.x.data(), b.data(), k);
        EXPECT_EQ(first_byte_diff(a, b, t.bytes, "simd", "scalar"), "");
      }
    }
  }
}

// Q8_0 and Q4_0 run a block at a time in SIMD (native SSE2, wasm simd128): on rows made to hit
// every rounding edge (x / d exactly n + 1/2, blocks whose 1/d overflows, subnormals, +-FLT_MAX,
// a +a/-a tie for Q4_0's signed maximum, zeros and -0, Inf, a NaN block taking the scalar path),
// their bytes are ggml's reference C's, and the error they report is max |x - dequantized|.
TEST(GgmlSimd, LegacyBlocksMatchGgmlOnRoundingEdges) {
  std::vector<float> x;
  auto block = [&](auto f) { for (int j = 0; j < 32; ++j) x.push_back(f(j)); };
  block([](int j) { return float(j - 16) * 0.5f; });                     // halves: q = n + 1/2
  block([](int j) { return j == 0 ? 127.0f : float(j) + 0.5f; });        // d = 1: x / d = n + 1/2
  block([](int j) { return j == 3 ? -8.0f : j == 9 ? 8.0f : float(j % 7) - 3.0f; });  // tie: -8 first
  block([](int j) { return j == 5 ? 8.0f : j == 9 ? -8.0f : 0.25f * float(j % 5); });  // tie: +8 first
  block([](int j) { return from_bits(uint32_t(1 + j)); });               // subnormals: 1/d overflows
  block([](int j) { return j % 2 ? from_bits(0x00000001) : 0.0f; });
  block([](int j) { return j % 3 ? FLT_MAX : -FLT_MAX; });
  block([](int) { return -0.0f; });
  block([](int) { return 0.0f; });
  block([](int j) { return j == 7 ? INFINITY : 1.0f; });
  block([](int j) { return j == 7 ? -INFINITY : float(j); });
  block([](int j) { return j == 11 ? NAN : float(j); });
  block([](int j) { return 1e-30f * float(j - 10); });
  const std::vector<float> n = normal(32 * 64, 0.02f, 7);
  x.insert(x.end(), n.begin(), n.end());
  const int64_t k = int64_t(x.size());
  struct S {
    const char* name;
    int ggml_type;
    int64_t bytes;
    void (*ours)(const float*, uint8_t*, int64_t);
    float (*with_err)(const float*, uint8_t*, int64_t);
    void (*dequantize)(const uint8_t*, float*, int64_t);
  } const kinds[] = {
      {"Q8_0", 8, g::kQ8_0BlockBytes, g::quantize_row_q8_0, g::quantize_row_q8_0_err, g::dequantize_row_q8_0},
      {"Q4_0", 2, g::kQ4_0BlockBytes, g::quantize_row_q4_0, g::quantize_row_q4_0_err, g::dequantize_row_q4_0},
  };
  for (const S& t : kinds) {
    SCOPED_TRACE(t.name);
    std::vector<uint8_t> ours(size_t(k / 32 * t.bytes), 1), ref(ours.size(), 2), err_path(ours.size(), 3);
    t.ours(x.data(), ours.data(), k);
    ASSERT_EQ(ggml_ref_quantize_row(t.ggml_type, x.data(), ref.data(), k), 0);
    EXPECT_EQ(first_byte_diff(ours, ref, t.bytes), "");
    // the error each block reports, against its own decoding (finite blocks only)
    for (int64_t b = 0; b < k / 32; ++b) {
      const float* xb = x.data() + 32 * b;
      bool finite = true;
      for (int j = 0; j < 32; ++j) finite = finite && std::isfinite(xb[j]);
      const float e = t.with_err(xb, err_path.data(), 32);
      EXPECT_EQ(0, std::memcmp(err_path.data(), ours.data() + b * t.bytes, size_t(t.bytes))) << "block " << b;
      if (!finite) {
        EXPECT_EQ(e, INFINITY) << "block " << b << ": a NaN or an Inf is reported as an infinite error";
        continue;
      }
      EXPECT_EQ(0, std::memcmp(err_path.data(), ours.data() + b * t.bytes, size_t(t.bytes))) << "block " << b;
      float back[32], want = 0;
      t.dequantize(err_path.data(), back, 32);
      for (int j = 0; j < 32; ++j) want = std::max(want, std::fabs(xb[j] - back[j]));
      EXPECT_EQ(e, want) << "block " << b;
    }
  }
  // a whole row (four blocks at a time where it can) reports the largest block error
  for (const S& t : kinds) {
    std::vector<uint8_t> tmp(size_t(n.size() / 32 * t.bytes));
    std::vector<float> back(n.size());
    const float e = t.with_err(n.data(), tmp.data(), int64_t(n.size()));
    t.dequantize(tmp.data(), back.data(), int64_t(n.size()));
    float want = 0;
    for (size_t j = 0; j < n.size(); ++j) want = std::max(want, std::fabs(n[j] - back[j]));
    EXPECT_EQ(e, want) << t.name;
    EXPECT_EQ(t.with_err(x.data(), tmp.data(), 32 * 12), INFINITY) << t.name << ": the Inf and NaN blocks";
  }
  // and the plain reference loops agree too (the SIMD path is on by default)
  std::vector<uint8_t> a(size_t(k / 32 * g::kQ8_0BlockBytes)), b(a.size());
  g::quantize_row_q8_0(x.data(), a.data(), k);
  g::quantize_row_q8_0_scalar(x.data(), b.data(), k);
  EXPECT_EQ(a, b);
  std::vector<uint8_t> c(size_t(k / 32 * g::kQ4_0BlockBytes)), d(c.size());
  g::quantize_row_q4_0(x.data(), c.data(), k);
  g::quantize_row_q4_0_scalar(x.data(), d.data(), k);
  EXPECT_EQ(c, d);
}

// ---- MXFP4 ----

// Its scale byte is floorf(log2f(max |x|)) - 2 + 127, computed here without a libm: on every
// float where log2f's rounding could move the floor (the 300 floats below each power of two,
// subnormals included) and a stride through the rest, and on the Inf max and the tiny maxima
// whose exponent goes negative (x86's wrap of the (uint8_t) cast), the bytes are ggml's.
TEST(GgmlMxfp4, ScaleExponentMatchesGgmlOnLog2Edges) {
  std::vector<float> x;
  auto block = [&](float a) {  // max |x| = a, the other values below it
    x.push_back(a);
    for (int j = 1; j < 32; ++j) x.push_back(a * ((float(j % 7) - 3.0f) / 4.0f));
  };
  for (int n = -149; n <= 128; ++n) {  // 2^n, from the smallest subnormal to just past FLT_MAX
    const uint32_t p = n < -126 ? uint32_t(1) << (n + 149) : uint32_t(n + 127) << 23;
    for (uint32_t d = 0; d < 300 && d < p; ++d)
      if (p - d - 1 < 0x7f800000u) block(from_bits(p - d - 1));
    if (n <= 127) for (uint32_t d = 0; d < 3; ++d) block(from_bits(p + d));
  }
  for (uint32_t u = 1; u < 0x7f800000u; u += 8191 * 257) block(from_bits(u));
  block(INFINITY);
  block(-INFINITY);
  const int64_t k = int64_t(x.size());
  std::vector<uint8_t> ours(size_t(k / 32 * g::kMXFP4BlockBytes), 1), ref(ours.size(), 2);
  g::quantize_row_mxfp4(x.data(), ours.data(), k);
  ASSERT_EQ(ggml_ref_quantize_row(39, x.data(), ref.data(), k), 0);
  EXPECT_EQ(first_byte_diff(ours, ref, g::kMXFP4BlockBytes), "");
}

// The nearest level on ties (the first of equals: -0 before 0, 0 at index 0 before index 8), NaN
// (never nearer: index 0), Inf, -0 and values past the top level; every scale byte decodes as
// ggml's E8M0 half, and every nibble under every scale byte as ggml's dequantize_row_mxfp4.
TEST(GgmlMxfp4, LevelsTiesAndSpecialsMatchGgml) {
  std::vector<float> x;
  // max 8: e = 128, d = 1, so the values are in level units: each midpoint between levels
  const float mids[] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f, 14.0f, 15.0f, 0.25f, 0.75f};
  for (int sign = 0; sign < 2; ++sign) {
    x.push_back(8.0f);
    for (int j = 1; j < 32; ++j) x.push_back((sign ? -1.0f : 1.0f) * (j < 12 ? mids[j - 1] : float(j - 12) * 0.375f));
  }
  for (float special : {NAN, -NAN, INFINITY, -INFINITY, -0.0f, 0.0f, FLT_MAX, -FLT_MAX, FLT_TRUE_MIN})
    for (int j = 0; j < 32; ++j) x.push_back(j == 5 ? special : float(j) - 9.5f);
  for (int j = 0; j < 32; ++j) x.push_back(-0.0f);
  const int64_t k = int64_t(x.size());
  std::vector<uint8_t> ours(size_t(k / 32 * g::kMXFP4BlockBytes), 1), ref(ours.size(), 2);
  g::quantize_row_mxfp4(x.data(), ours.data(), k);
  ASSERT_EQ(ggml_ref_quantize_row(39, x.data(), ref.data(), k), 0);
  EXPECT_EQ(first_byte_diff(ours, ref, g::kMXFP4BlockBytes), "");

  for (int e = 0; e < 256; ++e)
    ASSERT_EQ(bits(g::e8m0_to_fp32_half(uint8_t(e))), bits(ggml_ref_e8m0_to_fp32_half(uint8_t(e)))) << "e " << e;
  std::vector<uint8_t> blocks(size_t(256 * g::kMXFP4BlockBytes));
  for (int e = 0; e < 256; ++e) {
    blocks[size_t(e * g::kMXFP4BlockBytes)] = uint8_t(e);
    for (int j = 0; j < 16; ++j) blocks[size_t(e * g::kMXFP4BlockBytes + 1 + j)] = uint8_t(j | (15 - j) << 4);
  }
  std::vector<float> deq_ours(256 * 32), deq_ref(deq_ours.size());
  g::dequantize_row_mxfp4(blocks.data(), deq_ours.data(), int64_t(deq_ours.size()));
  ASSERT_EQ(ggml_ref_dequantize_row(39, blocks.data(), deq_ref.data(), int64_t(deq_ref.size())), 0);
  EXPECT_EQ(first_float_diff(deq_ours, deq_ref), "");
}

// ---- fp16 / bf16 ----

TEST(GgmlHalf, EveryHalfPatternDecodesLikeGgml) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float ours = g::fp16_to_fp32(uint16_t(h)), ref = ggml_ref_fp16_to_fp32(uint16_t(h));
    ASSERT_EQ(bits(ours), bits(ref)) << "half 0x" << std::hex << h;
    ASSERT_EQ(g::fp32_to_fp16(ours), ggml_ref_fp32_to_fp16(ref)) << "half 0x" << std::hex << h;
  }
}

TEST(GgmlBf16, EveryBf16PatternDecodesLikeGgml) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float ours = g::bf16_to_fp32(uint16_t(h)), ref = ggml_ref_bf16_to_fp32(uint16_t(h));
    ASSERT_EQ(bits(ours), bits(ref)) << "bf16 0x" << std::hex << h;
    ASSERT_EQ(g::fp32_to_bf16(ours), ggml_ref_fp32_to_bf16(ref)) << "bf16 0x" << std::hex << h;
  }
}

// Floats that probe the encoders: every half's and bf16's neighbours and exact midpoints
// (ties), the specials, and a stride through all 2^32 bit patterns.
std::vector<uint32_t> probe_floats() {
  std::vector<uint32_t> v;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    // f16: each finite half, the midpoint to the next half up in magnitude, and +-1 ulp.
    const uint32_t e = (h >> 10) & 0x1f;
    if (e != 0x1f) {
      const float a = ggml_ref_fp16_to_fp32(uint16_t(h));
      const float b = e == 0x1e && (h & 0x3ff) == 0x3ff
                          ? std::copysign(65536.0f, a)  // the value that would follow 65504
                          : ggml_ref_fp16_to_fp32(uint16_t(h + 1));
      const uint32_t mid = bits((a + b) * 0.5f);  // exact: 12 significant bits at most
      for (uint32_t m : {bits(a), mid - 1, mid, mid + 1}) v.push_back(m);
    }
    // bf16: the pattern itself, its midpoint (ties), and +-1.
    const uint32_t w = h << 16;
    for (uint32_t m : {w, w | 0x7fffu, w | 0x8000u, w | 0x8001u}) v.push_back(m);
  }
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, FLT_MIN,
                            -FLT_MIN, FLT_TRUE_MIN, 65504.0f, 65519.99f, 65520.0f, 0x1p-24f,
                            0x1p-25f, 0x1.8p-25f, 0x1p-14f, 0x1.ffcp-15f};
  for (float f : specials) v.push_back(bits(f));
  for (uint32_t n : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu,
                     0x7fffffffu, 0xffffffffu, 0x7fa00000u, 0x7f80ffffu, 0x7f807fffu})
    v.push_back(n);
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 1021) v.push_back(uint32_t(u));
  return v;
}

TEST(GgmlHalf, EncodesFloatsLikeGgml) {
  for (uint32_t u : probe_floats()) {
    const float f = from_bits(u);
    ASSERT_EQ(g::fp32_to_fp16(f), ggml_ref_fp32_to_fp16(f)) << "float 0x" << std::hex << u;
  }
}

TEST(GgmlBf16, EncodesFloatsLikeGgml) {
  for (uint32_t u : probe_floats()) {
    const float f = from_bits(u);
    ASSERT_EQ(g::fp32_to_bf16(f), ggml_ref_fp32_to_bf16(f)) << "float 0x" << std::hex << u;
  }
}

// A few fixed points, so a change in both ggml and us would not pass unnoticed.
TEST(GgmlHalf, KnownValues) {
  EXPECT_EQ(g::fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);      // tie -> even
  EXPECT_EQ(g::fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie -> even
  EXPECT_EQ(g::fp32_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(g::fp32_to_fp16(0x1p-25f), 0x0000);
  EXPECT_EQ(g::fp32_to_fp16(-NAN), 0xfe00);
  EXPECT_EQ(bits(g::fp16_to_fp32(0x7c01)), 0x7fc02000u);  // NaN kept, made quiet
  EXPECT_EQ(g::fp32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(g::fp32_to_bf16(from_bits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(g::fp32_to_bf16(from_bits(0x7f800001u)), 0x7fc0);  // sNaN -> quiet
  EXPECT_EQ(g::fp32_to_bf16(FLT_MAX), 0x7f80);                 // rounds up to Inf
}

}  // namespace
