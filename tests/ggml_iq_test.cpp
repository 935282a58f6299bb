// The codebook types of src/quant/ggml_iq.cpp (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M) against ggml's own quantize_<type>(src, dst, nrow, n_per_row, quant_weights) as
// llama-quantize calls it (grids initialised as ggml_quantize_init does), with importance
// weights and, where ggml takes none, without; and their dequantize_row_* against ggml's. Rows
// gaussian, heavy-tailed, constant, zero, subnormal, tiny and huge-but-finite; weights
// imatrix-like (1e-6 .. 1e3), equal, partly and wholly zero; rows of 256, 512 and 4096 values.
// The bytes must be ggml's (memcmp). Also: the grids derived from ggml's index lists at build
// time equal ggml-common.h's tables, and the table's rows.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ggml_ref.h"
#include "quant/ggml_quants.h"
#include "quant/quant_types.h"

namespace g = leapconv::ggml;
using leapconv::QType;
using leapconv::quant_type;

namespace {

using RowIq = bool (*)(const float*, uint8_t*, int64_t, const float*);

struct IqType {
  const char* name;
  int ggml_type;
  int64_t block_bytes;
  RowIq ours;
  bool null_weights;  // ggml takes quant_weights == NULL
  QType id;
};

const IqType kIqTypes[] = {
    {"IQ2_XXS", 16, g::kIQ2_XXSBlockBytes, g::quantize_row_iq2_xxs_w, false, QType::IQ2_XXS},
    {"IQ3_XXS", 18, g::kIQ3_XXSBlockBytes, g::quantize_row_iq3_xxs_w, true, QType::IQ3_XXS},
    {"IQ2_XS", 17, g::kIQ2_XSBlockBytes, g::quantize_row_iq2_xs_w, false, QType::IQ2_XS},
    {"IQ3_S", 21, g::kIQ3_SBlockBytes, g::quantize_row_iq3_s_w, true, QType::IQ3_S},
    {"IQ2_S", 22, g::kIQ2_SBlockBytes, g::quantize_row_iq2_s_w, true, QType::IQ2_S},
    {"IQ1_S", 19, g::kIQ1_SBlockBytes, g::quantize_row_iq1_s_w, false, QType::IQ1_S},
    {"IQ1_M", 29, g::kIQ1_MBlockBytes, g::quantize_row_iq1_m_w, true, QType::IQ1_M},
};

void PrintTo(const IqType& t, std::ostream* os) { *os << t.name; }

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> gen_normal(int64_t n, int64_t rows, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(size_t(n * rows));
  for (float& x : v) x = d(rng);
  return v;
}

struct Matrix {
  std::string name;
  std::vector<float> (*make)(int64_t n, int64_t rows, uint32_t seed);
};

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
    {"mixed_block_scales", [](int64_t n, int64_t r, uint32_t s) {  // outlier sub-blocks
       std::mt19937 rng(s);
       std::normal_distribution<float> d(0.0f, 1.0f);
       std::uniform_real_distribution<float> e(-12.0f, 3.0f);
       std::vector<float> v(size_t(n * r));
       for (size_t b = 0; b < v.size(); b += 16) {
         const float sc = std::exp2(e(rng));
         for (size_t i = 0; i < 16; ++i) v[b + i] = sc * d(rng);
       }
       return v;
     }},
    {"positive", [](int64_t n, int64_t r, uint32_t s) {
       std::vector<float> v = gen_normal(n, r, s, 0.5f);
       for (float& x : v) x = std::fabs(x) + 0.25f;
       return v;
     }},
    {"with_zeros", [](int64_t n, int64_t r, uint32_t s) {  // 40% zeros (+-0), and a zero 32-block per row
       std::mt19937 rng(s);
       std::normal_distribution<float> d(0.0f, 0.05f);
       std::vector<float> v(size_t(n * r));
       for (float& x : v) x = rng() % 5 < 2 ? 0.0f : d(rng);
       for (int64_t i = 0; i < r; ++i)
         for (int j = 0; j < 32; ++j) v[size_t(i * n + (i * 32) % n + j)] = (j & 1) ? 0.0f : -0.0f;
       return v;
     }},
    {"grid_quarters", [](int64_t n, int64_t r, uint32_t s) {  // exact ties, and equal values to sort
       std::mt19937 rng(s);
       std::uniform_int_distribution<int> d(-8, 8);
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
    {"tiny_1e-9", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 1e-9f); }},  // near the IQ eps
    {"tiny_1e-30", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 1e-30f); }},
    {"near_f16_max", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 60000.0f); }},
    {"huge_1e7", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 1e7f); }},  // d past f16
    {"huge_1e10", [](int64_t n, int64_t r, uint32_t s) { return gen_normal(n, r, s, 1e10f); }},
};

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
       for (int64_t j = 0; j < 32 && j < n; ++j) w[size_t(j)] = 0.0f;  // a whole zero sub-block
       return w;
     }},
    {"all_zero", [](int64_t n, uint32_t) { return std::vector<float>(size_t(n), 0.0f); }},
};

std::string first_byte_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int64_t block_bytes) {
  if (a.size() != b.size()) return "sizes differ";
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return "block " + std::to_string(int64_t(i) / block_bytes) + " byte " + std::to_string(int64_t(i) % block_bytes) +
             ": ours " + std::to_string(a[i]) + ", ggml " + std::to_string(b[i]);
  return "";
}

// Quantizes x (nrow rows of n) with ours, row by row at an odd address, then, where ours says
// ggml would not abort, with ggml; the bytes must agree, and so must the two dequantizers.
// Returns whether the comparison ran.
// The neighbour searches run four grid points a step, then as the CPU takes them (AVX2: 8).
bool compare(const IqType& t, const std::vector<float>& x, int64_t nrow, int64_t n, const float* qw) {
  const int64_t row_bytes = n / 256 * t.block_bytes;
  std::vector<uint8_t> ours(size_t(nrow * row_bytes) + 1, 0xA5), ref(size_t(nrow * row_bytes), 0x5A);
  bool ggml_ran = false;
  for (const int lanes : {4, 0}) {
    leapconv::ggml::force_search_lanes(lanes);
    for (int64_t i = 0; i < nrow; ++i)
      if (!t.ours(x.data() + i * n, ours.data() + 1 + i * row_bytes, n, qw)) return false;
    if (!ggml_ran) EXPECT_EQ(ggml_ref_quantize_rows_w(t.ggml_type, x.data(), ref.data(), nrow, n, qw), 0);
    ggml_ran = true;
    const std::vector<uint8_t> o(ours.begin() + 1, ours.end());
    EXPECT_EQ(first_byte_diff(o, ref, t.block_bytes), "") << leapconv::ggml::search_lanes() << " lanes";
  }
  std::vector<float> a(x.size()), b(x.size());
  const uint8_t* region[leapconv::kMaxRegions] = {ref.data()};
  quant_type(t.id).decode(region, nrow, n, 256, a.data());
  EXPECT_EQ(ggml_ref_dequantize_row(t.ggml_type, ref.data(), b.data(), int64_t(b.size())), 0);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "dequantize";
  return true;
}

class GgmlIq : public ::testing::TestWithParam<IqType> {};

TEST_P(GgmlIq, MatchesGgmlQuantizeWithImportanceWeights) {
  const IqType& t = GetParam();
  int compared = 0, refused = 0;
  for (int64_t n : {256, 512, 4096}) {
    const int64_t nrow = n >= 4096 ? 2 : 4;
    uint32_t seed = uint32_t(n);
    for (const Matrix& m : kMatrices) {
      const std::vector<float> x = m.make(n, nrow, ++seed);
      for (const Weights& w : kWeights) {
        SCOPED_TRACE(std::string(t.name) + " n=" + std::to_string(n) + " " + m.name + " weights " + w.name);
        const std::vector<float> qw = w.make(n, seed * 31u);
        (compare(t, x, nrow, n, qw.data()) ? compared : refused)++;
      }
    }
  }
  EXPECT_GT(compared, 250);
  EXPECT_EQ(refused, 0);  // every finite row here is one ggml quantizes
}

TEST_P(GgmlIq, MatchesGgmlQuantizeWithoutWeights) {
  const IqType& t = GetParam();
  if (!t.null_weights) GTEST_SKIP() << "ggml asserts quant_weights for " << t.name;
  int compared = 0;
  for (int64_t n : {256, 512, 4096}) {
    const int64_t nrow = n >= 4096 ? 2 : 4;
    uint32_t seed = uint32_t(n) + 1000;
    for (const Matrix& m : kMatrices) {
      SCOPED_TRACE(std::string(t.name) + " n=" + std::to_string(n) + " " + m.name);
      const std::vector<float> x = m.make(n, nrow, ++seed);
      compared += compare(t, x, nrow, n, nullptr);
    }
  }
  EXPECT_EQ(compared, 3 * int(std::size(kMatrices)));
}

// Random bytes (any grid index, sign and scale bits, f16 d of any value but NaN/Inf) decode as
// ggml decodes them.
TEST_P(GgmlIq, DequantizeMatchesGgmlOnAnyBytes) {
  const IqType& t = GetParam();
  std::mt19937 rng(99);
  const int64_t blocks = 64;
  std::vector<uint8_t> bytes(size_t(blocks * t.block_bytes));
  for (uint8_t& b : bytes) b = uint8_t(rng());
  std::vector<float> a(size_t(blocks * 256)), b(a.size());
  const uint8_t* region[leapconv::kMaxRegions] = {bytes.data()};
  quant_type(t.id).decode(region, 1, blocks * 256, 256, a.data());
  ASSERT_EQ(ggml_ref_dequantize_row(t.ggml_type, bytes.data(), b.data(), int64_t(b.size())), 0);
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4)) FAIL() << "value " << i << ": ours " << a[i] << ", ggml " << b[i];
}

// Rows holding NaN, Inf or values near FLT_MAX (which the table refuses before): ours never
// crashes; it reports where ggml would abort or read out of bounds (false), and elsewhere writes
// ggml's bytes (so ggml is only run where it runs to the end).
TEST_P(GgmlIq, NonFiniteRowsAreReportedOrGgmlsBytes) {
  const IqType& t = GetParam();
  std::mt19937 rng(7);
  const int64_t n = 256;
  int reported = 0, compared = 0;
  for (int it = 0; it < 200; ++it) {
    std::vector<float> x = gen_normal(n, 1, uint32_t(it), it % 3 ? 1.0f : 1e-3f);
    const float bad[] = {NAN, INFINITY, -INFINITY, 3e38f, -FLT_MAX};
    for (int j = 0; j < 1 + it % 3; ++j) x[rng() % n] = bad[(it + j) % 5];
    const std::vector<float> qw = kWeights[it % 5].make(n, uint32_t(it));
    for (const float* w : {qw.data(), t.null_weights ? nullptr : qw.data()}) {  // (twice weighted where ggml needs weights)
      std::vector<uint8_t> ours(size_t(t.block_bytes)), ref(ours.size());
      if (!t.ours(x.data(), ours.data(), n, w)) {
        ++reported;
        continue;
      }
      ASSERT_EQ(ggml_ref_quantize_rows_w(t.ggml_type, x.data(), ref.data(), 1, n, w), 0);
      EXPECT_EQ(first_byte_diff(ours, ref, t.block_bytes), "") << "row " << it;
      ++compared;
    }
  }
  EXPECT_EQ(reported + compared, 400);
  RecordProperty("compared", compared);
}

INSTANTIATE_TEST_SUITE_P(Ggml, GgmlIq, ::testing::ValuesIn(kIqTypes),
                         [](const ::testing::TestParamInfo<IqType>& info) { return std::string(info.param.name); });

// ---- the grids, derived at build time from ggml's index lists, are ggml-common.h's ----

TEST(GgmlIqGrids, DerivedTablesEqualGgmlCommon) {
  struct U64 { const char* name; g::IqTable t; int n; };
  for (const U64& u : {U64{"iq2xxs_grid", g::IqTable::Iq2xxsGrid, 256}, U64{"iq2xs_grid", g::IqTable::Iq2xsGrid, 512},
                       U64{"iq2s_grid", g::IqTable::Iq2sGrid, 1024}, U64{"iq1s_grid", g::IqTable::Iq1sGrid, 2048}}) {
    const auto* ref = static_cast<const uint64_t*>(ggml_ref_iq_table(u.name));
    ASSERT_NE(ref, nullptr) << u.name;
    EXPECT_EQ(std::memcmp(g::iq_table_u64(u.t), ref, size_t(u.n) * 8), 0) << u.name;
  }
  struct U32 { const char* name; g::IqTable t; int n; };
  for (const U32& u : {U32{"iq3xxs_grid", g::IqTable::Iq3xxsGrid, 256}, U32{"iq3s_grid", g::IqTable::Iq3sGrid, 512}}) {
    const auto* ref = static_cast<const uint32_t*>(ggml_ref_iq_table(u.name));
    ASSERT_NE(ref, nullptr) << u.name;
    EXPECT_EQ(std::memcmp(g::iq_table_u32(u.t), ref, size_t(u.n) * 4), 0) << u.name;
  }
  EXPECT_EQ(std::memcmp(g::iq_ksigns(), ggml_ref_iq_table("ksigns_iq2xs"), 128), 0);
  const auto* kmask = static_cast<const uint8_t*>(ggml_ref_iq_table("kmask_iq2xs"));
  for (int j = 0; j < 8; ++j) EXPECT_EQ(kmask[j], 1 << j);  // the dequantizers' (1 << j)
}

// The neighbour lists are built once, whichever thread asks first; concurrent first uses agree.
TEST(GgmlIqGrids, ConcurrentFirstUseGivesTheSameBytes) {
  const int64_t n = 512;
  const std::vector<float> x = gen_normal(n, 1, 3, 0.1f), qw = kWeights[0].make(n, 4);
  std::vector<std::vector<uint8_t>> out(4, std::vector<uint8_t>(size_t(n / 256 * g::kIQ1_SBlockBytes)));
  std::vector<std::thread> th;
  for (auto& o : out) th.emplace_back([&] { EXPECT_TRUE(g::quantize_row_iq1_s_w(x.data(), o.data(), n, qw.data())); });
  for (auto& t : th) t.join();
  std::vector<uint8_t> ref(out[0].size());
  ASSERT_EQ(ggml_ref_quantize_rows_w(19, x.data(), ref.data(), 1, n, qw.data()), 0);
  for (auto& o : out) EXPECT_EQ(o, ref);
}

// ---- through the quant-type table ----

TEST(GgmlIqTable, RowsEncodeAndRefuse) {
  const int64_t rows = 3, cols = 512;
  const std::vector<float> w = gen_normal(cols, rows, 77, 0.03f);
  const std::vector<float> qw = kWeights[0].make(cols, 78);
  for (const IqType& it : kIqTypes) {
    const leapconv::QuantType& t = quant_type(it.id);
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.ggml_type, it.ggml_type);
    EXPECT_EQ(t.block_values, 256);
    EXPECT_EQ(t.bytes_of(1, 256, 0).total(), it.block_bytes);
    EXPECT_EQ(leapconv::quant_type_by_ggml_type(it.ggml_type), &t);
    ASSERT_NE(t.encode_weighted, nullptr);
    std::vector<uint8_t> ours(size_t(rows * cols / 256 * it.block_bytes)), ref(ours.size());
    uint8_t* region[leapconv::kMaxRegions] = {ours.data(), nullptr};
    const float err = t.encode_weighted(w.data(), rows, cols, qw.data(), region);
    ASSERT_EQ(ggml_ref_quantize_rows_w(it.ggml_type, w.data(), ref.data(), rows, cols, qw.data()), 0);
    EXPECT_EQ(first_byte_diff(ours, ref, it.block_bytes), "");
    std::vector<float> back(w.size());
    ASSERT_EQ(ggml_ref_dequantize_row(it.ggml_type, ref.data(), back.data(), int64_t(back.size())), 0);
    float want = 0;
    for (size_t i = 0; i < w.size(); ++i) want = std::max(want, std::fabs(w[i] - back[i]));
    EXPECT_EQ(err, want);
    // unweighted: ggml's NULL-weight search where it has one, else refused
    const float e0 = t.encode(w.data(), rows, cols, 256, region);
    if (it.null_weights) {
      ASSERT_EQ(ggml_ref_quantize_rows_w(it.ggml_type, w.data(), ref.data(), rows, cols, nullptr), 0);
      EXPECT_EQ(first_byte_diff(ours, ref, it.block_bytes), "");
      EXPECT_LT(e0, INFINITY);
    } else {
      EXPECT_EQ(e0, INFINITY) << "needs an imatrix";
    }
    for (float bad : {NAN, INFINITY, -INFINITY, 1e30f}) {  // 1e30: past the search limit
      std::vector<float> x = w;
      x[size_t(cols + 17)] = bad;
      EXPECT_EQ(t.encode_weighted(x.data(), rows, cols, qw.data(), region), INFINITY) << bad;
    }
    for (float bad : {NAN, INFINITY, -1.0f, 1e37f}) {
      std::vector<float> q = qw;
      q[9] = bad;
      EXPECT_EQ(t.encode_weighted(w.data(), rows, cols, q.data(), region), INFINITY) << "qw " << bad;
    }
  }
}

}  // namespace
