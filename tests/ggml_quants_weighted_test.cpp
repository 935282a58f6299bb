// The importance-weighted quantizers of src/quant/ggml_quants.* (quantize_row_*_w) against
// ggml's own quantize_<type>(src, dst, nrow, n_per_row, quant_weights) with quant_weights set,
// as llama-quantize calls it with an imatrix: on matrices of many rows (gaussian, heavy-tailed,
// outlier blocks, constants, zeros, subnormals, huge-but-finite values) and weight vectors
// shaped like real imatrix data (means of squared activations, over orders of magnitude), all
// equal, partly zero and all zero, at several row lengths, the bytes must be ggml's (memcmp).
// Also the table's encode_weighted slot: its bytes, its error and its refusals.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml_ref.h"
#include "quant/ggml_quants.h"
#include "quant/quant_types.h"

namespace g = leapconv::ggml;

namespace {

using RowW = void (*)(const float*, uint8_t*, int64_t, const float*);

struct WType {
  const char* name;
  int ggml_type;
  int64_t block_values, block_bytes;
  RowW ours, scalar;
  float search_limit;  // rows reaching it are not quantized (see kQ3_KSearchLimit)
};

const WType kWTypes[] = {
    {"Q4_0", 2, g::kQ4_0BlockValues, g::kQ4_0BlockBytes, g::quantize_row_q4_0_w, g::scalar::quantize_row_q4_0_w, INFINITY},
    {"Q4_1", 3, g::kQ4_1BlockValues, g::kQ4_1BlockBytes, g::quantize_row_q4_1_w, g::scalar::quantize_row_q4_1_w, INFINITY},
    {"Q5_0", 6, g::kQ5_0BlockValues, g::kQ5_0BlockBytes, g::quantize_row_q5_0_w, g::scalar::quantize_row_q5_0_w, INFINITY},
    {"Q5_1", 7, g::kQ5_1BlockValues, g::kQ5_1BlockBytes, g::quantize_row_q5_1_w, g::scalar::quantize_row_q5_1_w, INFINITY},
    {"Q2_K", 10, g::kQ2_KBlockValues, g::kQ2_KBlockBytes, g::quantize_row_q2_K_w, g::scalar::quantize_row_q2_K_w, INFINITY},
    {"Q3_K", 11, g::kQ3_KBlockValues, g::kQ3_KBlockBytes, g::quantize_row_q3_K_w, g::scalar::quantize_row_q3_K_w, g::kQ3_KSearchLimit},
    {"Q4_K", 12, g::kQ4_KBlockValues, g::kQ4_KBlockBytes, g::quantize_row_q4_K_w, g::scalar::quantize_row_q4_K_w, INFINITY},
    {"Q5_K", 13, g::kQ5_KBlockValues, g::kQ5_KBlockBytes, g::quantize_row_q5_K_w, g::scalar::quantize_row_q5_K_w, INFINITY},
    {"Q6_K", 14, g::kQ6_KBlockValues, g::kQ6_KBlockBytes, g::quantize_row_q6_K_w, g::scalar::quantize_row_q6_K_w, g::kQ6_KSearchLimit},
    // (one spelling each: no SIMD lanes)
    {"IQ4_NL", 20, g::kIQ4_NLBlockValues, g::kIQ4_NLBlockBytes, g::quantize_row_iq4_nl_w, g::scalar::quantize_row_iq4_nl_w, g::kIQ4SearchLimit},
    {"IQ4_XS", 23, g::kIQ4_XSBlockValues, g::kIQ4_XSBlockBytes, g::quantize_row_iq4_xs_w, g::scalar::quantize_row_iq4_xs_w, g::kIQ4SearchLimit},
};

void PrintTo(const WType& t, std::ostream* os) { *os << t.name; }

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A matrix: rows of n values, generated for a given n.
struct Matrix {
  std::string name;
  std::vector<float> (*make)(int64_t n, int64_t rows, uint32_t seed);
};

std::vector<float> gen_normal(int64_t n, int64_t rows, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(size_t(n * rows));
  for (float& x : v) x = d(rng);
  return v;
}

const Matrix kMatrices[] = {
    {"normal_0.02", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 0.02f); }},
    {"normal_1", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 1.0f); }},
    {"student_t2", [](int64_t n, int64_t r, uint32_t s) {
       std::mt19937 rng(s);
       std::student_t_distribution<float> t(2.0f);
       std::vector<float> v(size_t(n * r));
       for (float& x : v) x = 0.02f * t(rng);
       return v;
     }},
    {"cauchy", [](int64_t n, int64_t r, uint32_t s) {
       std::mt19937 rng(s);
       std::cauchy_distribution<float> c(0.0f, 0.01f);
       std::vector<float> v(size_t(n * r));
       for (float& x : v) x = c(rng);
       return v;
     }},
    {"mixed_block_scales", [](int64_t n, int64_t r, uint32_t s) {  // outlier channels
       std::mt19937 rng(s);
       std::normal_distribution<float> d(0.0f, 1.0f);
       std::uniform_real_distribution<float> e(-12.0f, 3.0f);
       std::vector<float> v(size_t(n * r));
       for (size_t b = 0; b < v.size(); b += 32) {
         const float sc = std::exp2(e(rng));
         for (size_t i = 0; i < 32; ++i) v[b + i] = sc * d(rng);
       }
       return v;
     }},
    {"positive", [](int64_t n, int64_t r, uint32_t s) {  // post-ReLU-like: the min paths
       std::vector<float> v = gen_normal(n, r, s, 0.5f);
       for (float& x : v) x = std::fabs(x) + 0.25f;
       return v;
     }},
    {"negative", [](int64_t n, int64_t r, uint32_t s) {
       std::vector<float> v = gen_normal(n, r, s, 0.5f);
       for (float& x : v) x = -std::fabs(x) - 0.1f;
       return v;
     }},
    {"with_zeros", [](int64_t n, int64_t r, uint32_t s) {  // 40% zeros, and a zero 32-block per row
       std::mt19937 rng(s);
       std::normal_distribution<float> d(0.0f, 0.05f);
       std::vector<float> v(size_t(n * r));
       for (float& x : v) x = rng() % 5 < 2 ? 0.0f : d(rng);
       for (int64_t i = 0; i < r; ++i)
         for (int j = 0; j < 32; ++j) v[size_t(i * n + (i * 32) % n + j)] = (j & 1) ? 0.0f : -0.0f;
       return v;
     }},
    {"grid_quarters", [](int64_t n, int64_t r, uint32_t s) {  // exact rounding ties
       std::mt19937 rng(s);
       std::uniform_int_distribution<int> d(-32, 32);
       std::vector<float> v(size_t(n * r));
       for (float& x : v) x = float(d(rng)) * 0.25f;
       return v;
     }},
    {"zeros", [](int64_t n, int64_t r, uint32_t) { return std::vector<float>(size_t(n * r), 0.0f); }},
    {"const_pos", [](int64_t n, int64_t r, uint32_t) { return std::vector<float>(size_t(n * r), 0.7f); }},
    {"const_neg", [](int64_t n, int64_t r, uint32_t) { return std::vector<float>(size_t(n * r), -3.25f); }},
    {"lone_value", [](int64_t n, int64_t r, uint32_t) {
       std::vector<float> v(size_t(n * r), 0.0f);
       for (int64_t i = 0; i < r; ++i) v[size_t(i * n + (7 * i + 3) % n)] = i & 1 ? -1.0f : 1.0f;
       return v;
     }},
    {"subnormal", [](int64_t n, int64_t r, uint32_t s) {
       std::mt19937 rng(s);
       std::uniform_int_distribution<uint32_t> m(1, 0x7fffff);
       std::vector<float> v(size_t(n * r));
       for (float& x : v) x = from_bits(m(rng) | (rng() & 0x80000000u));
       return v;
     }},
    {"subnormal_mixed", [](int64_t n, int64_t r, uint32_t s) {
       std::mt19937 rng(s);
       std::uniform_int_distribution<uint32_t> m(1, 0x7fffff);
       std::vector<float> v(size_t(n * r));
       for (float& x : v) x = from_bits(m(rng) | (rng() & 0x80000000u));
       for (size_t i = 0; i < v.size(); i += 37) v[i] = (i & 1 ? -1.0f : 1.0f) * 1e-3f;
       return v;
     }},
    {"tiny_1e-30", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 1e-30f); }},
    {"near_f16_max", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 60000.0f); }},
    {"huge_1e10", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 1e10f); }},
    {"huge_1e13", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 1e13f); }},
    {"huge_1e20", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 1e20f); }},  // sum x^2 overflows
    {"near_flt_max", [](int64_t n, int64_t r, uint32_t s) {
       std::mt19937 rng(s);
       std::uniform_real_distribution<float> u(-1.0f, 1.0f);
       std::vector<float> v(size_t(n * r));
       for (float& x : v) x = u(rng) * FLT_MAX;
       return v;
     }},
};

// Weight vectors of n columns.
struct Weights {
  std::string name;
  std::vector<float> (*make)(int64_t n, uint32_t seed);
};

const Weights kWeights[] = {
    {"imatrix_like", [](int64_t n, uint32_t s) {  // mean squared activations: 1e-6 .. 1e3, a few huge channels
       std::mt19937 rng(s);
       std::uniform_real_distribution<float> e(-6.0f, 3.0f);
       std::vector<float> w(static_cast<size_t>(n));
       for (float& x : w) x = std::pow(10.0f, e(rng));
       for (int64_t i = 0; i < n; i += 97) w[size_t(i)] *= 300.0f;
       return w;
     }},
    {"all_equal", [](int64_t n, uint32_t) { return std::vector<float>(size_t(n), 1.0f); }},
    {"all_equal_small", [](int64_t n, uint32_t) { return std::vector<float>(size_t(n), 3e-5f); }},
    {"some_zeros", [](int64_t n, uint32_t s) {
       std::mt19937 rng(s);
       std::uniform_real_distribution<float> e(-3.0f, 1.0f);
       std::vector<float> w(static_cast<size_t>(n));
       for (float& x : w) x = rng() % 3 == 0 ? 0.0f : std::pow(10.0f, e(rng));
       for (int64_t j = 0; j < 16 && j < n; ++j) w[size_t(j)] = 0.0f;  // a whole zero sub-block
       return w;
     }},
    {"all_zero", [](int64_t n, uint32_t) { return std::vector<float>(size_t(n), 0.0f); }},
};

std::string first_byte_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int64_t block_bytes,
                            const char* a_name = "ours", const char* b_name = "ggml") {
  if (a.size() != b.size()) return "sizes differ";
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return "block " + std::to_string(int64_t(i) / block_bytes) + " byte " + std::to_string(int64_t(i) % block_bytes) +
             ": " + a_name + " " + std::to_string(a[i]) + ", " + b_name + " " + std::to_string(b[i]);
  return "";
}

class GgmlWeighted : public ::testing::TestWithParam<WType> {};

TEST_P(GgmlWeighted, MatchesGgmlQuantizeWithImportanceWeights) {
  const WType& t = GetParam();
  std::vector<int64_t> lengths = {256, 512, 4096};
  if (t.block_values == 32) lengths.insert(lengths.begin(), {96, 416});  // (13 blocks: groups of 8, 4 and one)
  int compared = 0;
  for (int64_t n : lengths) {
    const int64_t nrow = n >= 4096 ? 3 : 6;
    const int64_t row_bytes = n / t.block_values * t.block_bytes;
    uint32_t seed = uint32_t(n);
    for (const Matrix& m : kMatrices) {
      const std::vector<float> x = m.make(n, nrow, ++seed);
      float amax = 0;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      if (!(amax < t.search_limit)) continue;
      for (const Weights& w : kWeights) {
        SCOPED_TRACE(std::string(t.name) + " n=" + std::to_string(n) + " " + m.name + " weights " + w.name);
        const std::vector<float> qw = w.make(n, seed * 31u);
        std::vector<uint8_t> ref(size_t(nrow * row_bytes), 0x5A), ours(ref.size() + 1, 0xA5), scal(ref.size(), 0x3C);
        ASSERT_EQ(ggml_ref_quantize_rows_w(t.ggml_type, x.data(), ref.data(), nrow, n, qw.data()), 0);
        for (int64_t i = 0; i < nrow; ++i) t.scalar(x.data() + i * n, scal.data() + i * row_bytes, n, qw.data());
        EXPECT_EQ(first_byte_diff(scal, ref, t.block_bytes, "scalar"), "");
        for (const int lanes : {4, 8, 0}) {  // the searches four sub-blocks a step, eight, then as the CPU takes them (AVX-512: 16)
          g::force_search_lanes(lanes);
          for (int64_t i = 0; i < nrow; ++i)  // ours one row at a time, to an odd address
            t.ours(x.data() + i * n, ours.data() + 1 + i * row_bytes, n, qw.data());
          const std::vector<uint8_t> o(ours.begin() + 1, ours.end());
          EXPECT_EQ(first_byte_diff(o, ref, t.block_bytes), "") << g::search_lanes() << " lanes";
        }
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 250);
}

// The weighted quantizers are not the reference ones with uniform weights: ggml runs another
// search (and for Q4_0 .. Q5_1 keeps the search's levels), so the bytes differ on typical rows.
TEST_P(GgmlWeighted, IsNotTheUnweightedQuantizer) {
  const WType& t = GetParam();
  const int64_t n = 4096;
  const std::vector<float> x = gen_normal(n, 1, 5, 0.02f);
  const std::vector<float> qw(size_t(n), 1.0f);
  const int64_t bytes = n / t.block_values * t.block_bytes;
  std::vector<uint8_t> w(static_cast<size_t>(bytes)), u(w.size()), null_w(w.size());
  t.ours(x.data(), w.data(), n, qw.data());
  ASSERT_EQ(ggml_ref_quantize_row(t.ggml_type, x.data(), u.data(), n), 0);
  ASSERT_EQ(ggml_ref_quantize_rows_w(t.ggml_type, x.data(), null_w.data(), 1, n, nullptr), 0);
  EXPECT_EQ(u, null_w) << "quantize_<type> with NULL weights is the reference quantizer";
  EXPECT_NE(w, u);
}

INSTANTIATE_TEST_SUITE_P(Ggml, GgmlWeighted, ::testing::ValuesIn(kWTypes),
                         [](const ::testing::TestParamInfo<WType>& info) { return std::string(info.param.name); });

// ---- through the quant-type table ----

using leapconv::QType;
using leapconv::quant_type;

TEST(GgmlWeightedTable, EncodeWeightedSlotIsFilledForTheTypesGgmlWeighs) {
  for (const leapconv::QuantType& t : leapconv::quant_types()) {
    const bool weighs = t.id == QType::Q4_0 || t.id == QType::Q4_1 || t.id == QType::Q5_0 || t.id == QType::Q5_1 ||
                        t.id == QType::Q2_K || t.id == QType::Q3_K || t.id == QType::Q4_K || t.id == QType::Q5_K ||
                        t.id == QType::Q6_K || t.id == QType::IQ4_NL || t.id == QType::IQ4_XS ||
                        t.id == QType::IQ2_XXS || t.id == QType::IQ2_XS || t.id == QType::IQ3_XXS ||
                        t.id == QType::IQ1_S || t.id == QType::IQ3_S || t.id == QType::IQ2_S || t.id == QType::IQ1_M;
    EXPECT_EQ(t.encode_weighted != nullptr, weighs) << t.name;
  }
  EXPECT_EQ(quant_type(QType::Q8_0).encode_weighted, nullptr);
  EXPECT_EQ(quant_type(QType::MXFP4).encode_weighted, nullptr);
  for (QType id : {QType::TQ1_0, QType::TQ2_0, QType::Q1_0, QType::Q2_0}) {  // ggml ignores the weights: the same bytes
    const leapconv::QuantType& t = quant_type(id);
    const int64_t n = 512;
    const std::vector<float> x = gen_normal(n, 2, 9, 0.1f), qw = kWeights[0].make(n, 10);
    std::vector<uint8_t> a(size_t(2 * n / t.block_values * ggml_ref_block_bytes(t.ggml_type))), b(a.size());
    ASSERT_EQ(ggml_ref_quantize_rows_w(t.ggml_type, x.data(), a.data(), 2, n, qw.data()), 0);
    ASSERT_EQ(ggml_ref_quantize_rows_w(t.ggml_type, x.data(), b.data(), 2, n, nullptr), 0);
    EXPECT_EQ(a, b) << t.name;
  }
}

// Bytes, returned error, for every weighted row of the table on one matrix.
TEST(GgmlWeightedTable, EncodeWeightedGivesGgmlBytesAndTheMaxError) {
  const int64_t rows = 5, cols = 512;
  const std::vector<float> w = gen_normal(cols, rows, 77, 0.03f);
  const std::vector<float> qw = kWeights[0].make(cols, 78);
  int checked = 0;
  for (const leapconv::QuantType& t : leapconv::quant_types()) {
    if (!t.encode_weighted) continue;
    SCOPED_TRACE(t.name);
    const int64_t values = t.block_values, bytes = ggml_ref_block_bytes(t.ggml_type);
    ASSERT_GT(bytes, 0);
    std::vector<uint8_t> ours(size_t(rows * cols / values * bytes), 1), ref(ours.size(), 2);
    uint8_t* region[leapconv::kMaxRegions] = {ours.data(), nullptr};
    const float err = t.encode_weighted(w.data(), rows, cols, qw.data(), region);
    ASSERT_EQ(ggml_ref_quantize_rows_w(t.ggml_type, w.data(), ref.data(), rows, cols, qw.data()), 0);
    EXPECT_EQ(first_byte_diff(ours, ref, bytes), "");
    std::vector<float> back(w.size());
    ASSERT_EQ(ggml_ref_dequantize_row(t.ggml_type, ref.data(), back.data(), int64_t(back.size())), 0);
    float want = 0;
    for (size_t i = 0; i < w.size(); ++i) want = std::max(want, std::fabs(w[i] - back[i]));
    EXPECT_EQ(err, want);
    EXPECT_GT(err, 0.0f);
    ++checked;
  }
  EXPECT_EQ(checked, 18);  // (the codebook types: also tests/ggml_iq_test.cpp)
}

TEST(GgmlWeightedTable, Q4_KEncodeWeightedMatchesGgml) {
  const leapconv::QuantType& t = quant_type(QType::Q4_K);
  ASSERT_NE(t.encode_weighted, nullptr);
  const int64_t rows = 8, cols = 4096;
  std::vector<float> w = kMatrices[4].make(cols, rows, 5);  // outlier blocks
  const std::vector<float> qw = kWeights[0].make(cols, 6);
  std::vector<uint8_t> ours(size_t(rows * cols / 256 * g::kQ4_KBlockBytes)), ref(ours.size());
  uint8_t* region[leapconv::kMaxRegions] = {ours.data(), nullptr};
  const float err = t.encode_weighted(w.data(), rows, cols, qw.data(), region);
  ASSERT_EQ(ggml_ref_quantize_rows_w(12, w.data(), ref.data(), rows, cols, qw.data()), 0);
  EXPECT_EQ(ours, ref);
  std::vector<float> back(w.size());
  g::dequantize_row_q4_K(ref.data(), back.data(), int64_t(back.size()));
  float want = 0;
  for (size_t i = 0; i < w.size(); ++i) want = std::max(want, std::fabs(w[i] - back[i]));
  EXPECT_EQ(err, want);
  // and the importance weights matter: unweighted encode gives other bytes and a larger
  // weighted error where the weights are large
  std::vector<uint8_t> plain(ours.size());
  uint8_t* pr[leapconv::kMaxRegions] = {plain.data(), nullptr};
  t.encode(w.data(), rows, cols, 256, pr);
  EXPECT_NE(plain, ours);
}

// What encode refuses (+inf), encode_weighted refuses too; and weights it cannot use.
TEST(GgmlWeightedTable, RefusesWhatCannotBeEncoded) {
  const int64_t rows = 2, cols = 256;
  for (const leapconv::QuantType& t : leapconv::quant_types()) {
    if (!t.encode_weighted) continue;
    SCOPED_TRACE(t.name);
    std::vector<uint8_t> out(size_t(rows * cols / t.block_values * ggml_ref_block_bytes(t.ggml_type)));
    uint8_t* region[leapconv::kMaxRegions] = {out.data(), nullptr};
    const std::vector<float> ok = gen_normal(cols, rows, 3, 1.0f);
    const std::vector<float> qw(size_t(cols), 1.0f);
    EXPECT_LT(t.encode_weighted(ok.data(), rows, cols, qw.data(), region), INFINITY);
    for (float bad : {NAN, INFINITY, -INFINITY, 1e30f}) {  // 1e30: every type's f16 scale overflows
      std::vector<float> x = ok;
      x[size_t(cols + 17)] = bad;
      EXPECT_EQ(t.encode_weighted(x.data(), rows, cols, qw.data(), region), INFINITY) << bad;
    }
    for (float bad : {NAN, INFINITY, -1.0f}) {  // weights: non-finite or negative
      std::vector<float> q = qw;
      q[9] = bad;
      EXPECT_EQ(t.encode_weighted(ok.data(), rows, cols, q.data(), region), INFINITY) << "qw " << bad;
    }
    // weights so large that ggml's weighted sums would overflow
    std::vector<float> q = qw;
    q[9] = 1e37f;
    EXPECT_EQ(t.encode_weighted(ok.data(), rows, cols, q.data(), region), INFINITY) << "qw 1e37";
  }
  // the search limits of Q3_K and Q6_K hold for the weighted search too
  for (QType id : {QType::Q3_K, QType::Q6_K}) {
    const leapconv::QuantType& t = quant_type(id);
    std::vector<float> x = gen_normal(cols, 1, 4, 1.0f);
    x[3] = id == QType::Q3_K ? g::kQ3_KSearchLimit : g::kQ6_KSearchLimit;
    const std::vector<float> qw(size_t(cols), 1.0f);
    std::vector<uint8_t> out(size_t(cols / 256 * ggml_ref_block_bytes(t.ggml_type)));
    uint8_t* region[leapconv::kMaxRegions] = {out.data(), nullptr};
    EXPECT_EQ(t.encode_weighted(x.data(), 1, cols, qw.data(), region), INFINITY) << t.name;
  }
}

}  // namespace
