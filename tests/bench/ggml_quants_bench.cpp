// Quick timing (not a test): quantize_row_* of src/quant/ggml_quants against ggml's reference
// C on the same rows, in MB/s of f32 input (1 MB = 1e6 bytes), one thread, best of N runs; then
// the importance-weighted quantizers (quantize_row_*_w) against ggml's quantize_<type>(..., qw);
// then the codebook types (IQ2_*, IQ3_*, IQ1_*; their grids initialised before the timing, as
// llama-quantize's ggml_quantize_init does, and the set-up timed on its own).
//   build/native/ggml_quants_bench [rows=256] [cols=4096] [runs=5]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "ggml_ref.h"
#include "quant/ggml_quants.h"

namespace g = leapconv::ggml;

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 256;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int runs = argc > 3 ? std::atoi(argv[3]) : 5;
  struct T {
    const char* name;
    int type;
    int64_t values, bytes;
    void (*q)(const float*, uint8_t*, int64_t);
  } types[] = {
      {"Q8_0", 8, g::kQ8_0BlockValues, g::kQ8_0BlockBytes, g::quantize_row_q8_0},
      {"Q4_0", 2, g::kQ4_0BlockValues, g::kQ4_0BlockBytes, g::quantize_row_q4_0},
      {"Q4_1", 3, g::kQ4_1BlockValues, g::kQ4_1BlockBytes, g::quantize_row_q4_1},
      {"Q5_0", 6, g::kQ5_0BlockValues, g::kQ5_0BlockBytes, g::quantize_row_q5_0},
      {"Q5_1", 7, g::kQ5_1BlockValues, g::kQ5_1BlockBytes, g::quantize_row_q5_1},
      {"Q2_K", 10, g::kQ2_KBlockValues, g::kQ2_KBlockBytes, g::quantize_row_q2_K},
      {"Q3_K", 11, g::kQ3_KBlockValues, g::kQ3_KBlockBytes, g::quantize_row_q3_K},
      {"Q4_K", 12, g::kQ4_KBlockValues, g::kQ4_KBlockBytes, g::quantize_row_q4_K},
      {"Q5_K", 13, g::kQ5_KBlockValues, g::kQ5_KBlockBytes, g::quantize_row_q5_K},
      {"Q6_K", 14, g::kQ6_KBlockValues, g::kQ6_KBlockBytes, g::quantize_row_q6_K},
      {"IQ4_NL", 20, g::kIQ4_NLBlockValues, g::kIQ4_NLBlockBytes, g::quantize_row_iq4_nl},
      {"IQ4_XS", 23, g::kIQ4_XSBlockValues, g::kIQ4_XSBlockBytes, g::quantize_row_iq4_xs},
      {"TQ1_0", 34, g::kTQ1_0BlockValues, g::kTQ1_0BlockBytes, g::quantize_row_tq1_0},
      {"TQ2_0", 35, g::kTQ2_0BlockValues, g::kTQ2_0BlockBytes, g::quantize_row_tq2_0},
      {"Q1_0", 41, g::kQ1_0BlockValues, g::kQ1_0BlockBytes, g::quantize_row_q1_0},
      {"Q2_0", 42, g::kQ2_0BlockValues, g::kQ2_0BlockBytes, g::quantize_row_q2_0},
  };
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> x(size_t(rows * cols));
  for (float& v : x) v = d(rng);
  const double mb = double(x.size()) * 4 / 1e6;
  std::printf("%lld rows x %lld cols (%.1f MB f32), best of %d\n", (long long)rows,
              (long long)cols, mb, runs);
  std::printf("%-6s %12s %12s %8s  %s\n", "type", "ours MB/s", "ggml MB/s", "ratio", "bytes");
  for (const T& t : types) {
    const size_t row_bytes = size_t(cols / t.values * t.bytes);
    std::vector<uint8_t> a(row_bytes * size_t(rows)), b(a.size());
    auto time = [&](auto&& f) {
      double best = 1e30;
      for (int r = 0; r < runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < rows; ++i) f(i);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s < best) best = s;
      }
      return mb / best;
    };
    const double ours = time([&](int64_t i) {
      t.q(x.data() + i * cols, a.data() + size_t(i) * row_bytes, cols);
    });
    const double ref = time([&](int64_t i) {
      ggml_ref_quantize_row(t.type, x.data() + i * cols, b.data() + size_t(i) * row_bytes, cols);
    });
    std::printf("%-6s %12.1f %12.1f %7.2fx  %s\n", t.name, ours, ref, ours / ref,
                std::memcmp(a.data(), b.data(), a.size()) == 0 ? "identical" : "DIFFER");
  }
  // With importance weights (llama-quantize with an imatrix): ggml's quantize_<type>(..., qw)
  // against ours row by row; scalar: the plain spelling of ours, without the SIMD lanes.
  struct W {
    const char* name;
    int type;
    int64_t values, bytes;
    void (*q)(const float*, uint8_t*, int64_t, const float*);
    void (*s)(const float*, uint8_t*, int64_t, const float*);
  } wtypes[] = {
      {"Q4_0", 2, g::kQ4_0BlockValues, g::kQ4_0BlockBytes, g::quantize_row_q4_0_w, g::scalar::quantize_row_q4_0_w},
      {"Q4_1", 3, g::kQ4_1BlockValues, g::kQ4_1BlockBytes, g::quantize_row_q4_1_w, g::scalar::quantize_row_q4_1_w},
      {"Q5_0", 6, g::kQ5_0BlockValues, g::kQ5_0BlockBytes, g::quantize_row_q5_0_w, g::scalar::quantize_row_q5_0_w},
      {"Q5_1", 7, g::kQ5_1BlockValues, g::kQ5_1BlockBytes, g::quantize_row_q5_1_w, g::scalar::quantize_row_q5_1_w},
      {"Q2_K", 10, g::kQ2_KBlockValues, g::kQ2_KBlockBytes, g::quantize_row_q2_K_w, g::scalar::quantize_row_q2_K_w},
      {"Q3_K", 11, g::kQ3_KBlockValues, g::kQ3_KBlockBytes, g::quantize_row_q3_K_w, g::scalar::quantize_row_q3_K_w},
      {"Q4_K", 12, g::kQ4_KBlockValues, g::kQ4_KBlockBytes, g::quantize_row_q4_K_w, g::scalar::quantize_row_q4_K_w},
      {"Q5_K", 13, g::kQ5_KBlockValues, g::kQ5_KBlockBytes, g::quantize_row_q5_K_w, g::scalar::quantize_row_q5_K_w},
      {"Q6_K", 14, g::kQ6_KBlockValues, g::kQ6_KBlockBytes, g::quantize_row_q6_K_w, g::scalar::quantize_row_q6_K_w},
      {"IQ4_NL", 20, g::kIQ4_NLBlockValues, g::kIQ4_NLBlockBytes, g::quantize_row_iq4_nl_w, g::quantize_row_iq4_nl_w},
      {"IQ4_XS", 23, g::kIQ4_XSBlockValues, g::kIQ4_XSBlockBytes, g::quantize_row_iq4_xs_w, g::quantize_row_iq4_xs_w},
  };
  std::vector<float> qw(static_cast<size_t>(cols));
  std::uniform_real_distribution<float> e(-6.0f, 3.0f);
  for (float& v : qw) v = std::pow(10.0f, e(rng));
  std::printf("\nwith importance weights\n%-6s %12s %12s %12s %8s  %s\n", "type", "ours MB/s", "scalar MB/s",
              "ggml MB/s", "ratio", "bytes");
  for (const W& t : wtypes) {
    const size_t row_bytes = size_t(cols / t.values * t.bytes);
    std::vector<uint8_t> a(row_bytes * size_t(rows)), b(a.size()), c(a.size());
    auto time = [&](auto&& f) {
      double best = 1e30;
      for (int r = 0; r < runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s < best) best = s;
      }
      return mb / best;
    };
    const double ours = time([&] {
      for (int64_t i = 0; i < rows; ++i) t.q(x.data() + i * cols, a.data() + size_t(i) * row_bytes, cols, qw.data());
    });
    const double scal = time([&] {
      for (int64_t i = 0; i < rows; ++i) t.s(x.data() + i * cols, c.data() + size_t(i) * row_bytes, cols, qw.data());
    });
    const double ref = time([&] { ggml_ref_quantize_rows_w(t.type, x.data(), b.data(), rows, cols, qw.data()); });
    std::printf("%-6s %12.1f %12.1f %12.1f %7.2fx  %s\n", t.name, ours, scal, ref, ours / ref,
                std::memcmp(a.data(), b.data(), a.size()) == 0 && std::memcmp(c.data(), b.data(), a.size()) == 0
                    ? "identical"
                    : "DIFFER");
  }

  // The codebook types: ours (bool: false where ggml would abort) against ggml's quantize_<type>.
  struct C {
    const char* name;
    int type;
    int64_t bytes;
    bool (*q)(const float*, uint8_t*, int64_t, const float*);
  } ctypes[] = {
      {"IQ2_XXS", 16, g::kIQ2_XXSBlockBytes, g::quantize_row_iq2_xxs_w},
      {"IQ2_XS", 17, g::kIQ2_XSBlockBytes, g::quantize_row_iq2_xs_w},
      {"IQ2_S", 22, g::kIQ2_SBlockBytes, g::quantize_row_iq2_s_w},
      {"IQ3_XXS", 18, g::kIQ3_XXSBlockBytes, g::quantize_row_iq3_xxs_w},
      {"IQ3_S", 21, g::kIQ3_SBlockBytes, g::quantize_row_iq3_s_w},
      {"IQ1_S", 19, g::kIQ1_SBlockBytes, g::quantize_row_iq1_s_w},
      {"IQ1_M", 29, g::kIQ1_MBlockBytes, g::quantize_row_iq1_m_w},
  };
  auto seconds = [](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double init_ours = seconds([] { g::iq_init_grids(); });
  const double init_ref = seconds([&] {  // one row of each: ggml sets its grids up on first use here
    std::vector<uint8_t> tmp(size_t(cols / 256 * 110));
    for (const C& t : ctypes) ggml_ref_quantize_rows_w(t.type, x.data(), tmp.data(), 1, cols, qw.data());
  });
  std::printf("\ncodebook types (grid set-up: ours %.2f s, ggml %.2f s, all seven)\n%-7s %12s %12s %8s  %s\n",
              init_ours, init_ref, "type", "ours MB/s", "ggml MB/s", "ratio", "bytes");
  for (const C& t : ctypes) {
    const size_t row_bytes = size_t(cols / 256 * t.bytes);
    std::vector<uint8_t> a(row_bytes * size_t(rows)), b(a.size());
    auto time = [&](auto&& f) {
      double best = 1e30;
      for (int r = 0; r < runs; ++r) best = std::min(best, seconds(f));
      return mb / best;
    };
    bool ok = true;
    const double ours = time([&] {
      for (int64_t i = 0; i < rows; ++i) ok &= t.q(x.data() + i * cols, a.data() + size_t(i) * row_bytes, cols, qw.data());
    });
    const double ref = time([&] { ggml_ref_quantize_rows_w(t.type, x.data(), b.data(), rows, cols, qw.data()); });
    std::printf("%-7s %12.2f %12.2f %7.2fx  %s\n", t.name, ours, ref, ours / ref,
                ok && std::memcmp(a.data(), b.data(), a.size()) == 0 ? "identical" : "DIFFER");
  }
  return 0;
}
