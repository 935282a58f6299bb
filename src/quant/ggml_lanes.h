// The searches of ggml's quantizers, W at a time: the sub-block searches of the K-quants, the
// weighted legacy types and IQ4_NL / IQ4_XS (make_qkx2_quants, make_qx_quants with rmse_type 1,
// quantize_row_iq4_nl_impl's scale search), lane k searching sub-block k, and the codebook
// types' neighbour search, lane k measuring grid point k. Each lane runs the same float
// operations in the same order as the scalar port (ggml_quants.cpp, ggml_iq.cpp), so its
// results are the scalar results bit for bit. Branches become per-lane selects (compare, then a
// bitwise select, not min/max instructions, whose NaN and signed-zero rules differ from C's ?:),
// except in the clamps of levels, which hold neither (Ops::clamp, Ops::fclamp). Written once
// with GCC/Clang vector extensions and compiled for each width: W = 4 (SSE2; wasm simd128) in
// ggml_quants.cpp and ggml_iq.cpp, W = 8 in ggml_quants_avx2.cpp (built with -mavx2, no FMA:
// every product is rounded on its own), W = 16 in ggml_quants_avx512.cpp (the sub-block
// searches only).
//
// Internal linkage on purpose (an anonymous namespace in a header): each translation unit keeps
// its own instantiations, compiled for its own instruction set, so the linker can never hand
// the SSE2 callers an AVX2 copy.
#pragma once
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

#include "quant/ggml_quants.h"
#include "quant/ggml_quants_impl.h"

namespace leapconv {
namespace ggml {
namespace {
namespace lanes {

template <int W>
struct Vec;
template <>
struct Vec<4> {
  typedef float V __attribute__((vector_size(16)));
  typedef int32_t VI __attribute__((vector_size(16)));
  typedef uint8_t VB __attribute__((vector_size(4)));
};
template <>
struct Vec<8> {
  typedef float V __attribute__((vector_size(32)));
  typedef int32_t VI __attribute__((vector_size(32)));
  typedef uint8_t VB __attribute__((vector_size(8)));
};
template <>
struct Vec<16> {
  typedef float V __attribute__((vector_size(64)));
  typedef int32_t VI __attribute__((vector_size(64)));
  typedef uint8_t VB __attribute__((vector_size(16)));
};

template <int W>
struct Ops {
  using V = typename Vec<W>::V;
  using VI = typename Vec<W>::VI;
  static V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static VI load_i(const int32_t* p) {
    VI v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(int32_t* p, VI v) { std::memcpy(p, &v, sizeof v); }
  static void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
  // Broadcasts as one initializer {s, s, ...}: clang 14 compiles a loop filling the lanes into
  // stores and a reload under wasm, which made the searches many times slower than scalar code.
  template <typename T, typename S, size_t... I>
  static T broadcast(S s, std::index_sequence<I...>) {
    return T{((void)I, s)...};
  }
  static V splat(float s) { return broadcast<V>(s, std::make_index_sequence<W>()); }
  static VI splati(int32_t s) { return broadcast<VI>(s, std::make_index_sequence<W>()); }
  static V sel(VI m, V a, V b) { return (V)((m & (VI)a) | (~m & (VI)b)); }
  static VI seli(VI m, VI a, VI b) { return (m & a) | (~m & b); }
  static V vabs(V a) { return (V)((VI)a & splati(0x7fffffff)); }
  static V vneg(V a) { return (V)((VI)a ^ splati(INT32_MIN)); }
  static V tof(VI l) { return __builtin_convertvector(l, V); }
  // ggml's nearest_int: the float's bits after adding 1.5 * 2^23
  static VI nearest_int(V f) { return ((VI)(f + splat(12582912.f)) & splati(0x007fffff)) - splati(0x00400000); }
  // MAX(lo, MIN(hi, l)): one min and one max where the instruction set has them for int32
  // (exact for integers), else compares and selects (SSE2).
  static VI clamp(VI l, VI lo, VI hi) {
#if defined(__AVX512F__)
    if constexpr (W == 16) return (VI)_mm512_max_epi32((__m512i)lo, _mm512_min_epi32((__m512i)hi, (__m512i)l));
#endif
#if defined(__AVX2__)
    if constexpr (W == 8) return (VI)_mm256_max_epi32((__m256i)lo, _mm256_min_epi32((__m256i)hi, (__m256i)l));
#endif
#if defined(__wasm_simd128__)
    if constexpr (W == 4) return (VI)wasm_i32x4_max((v128_t)lo, wasm_i32x4_min((v128_t)hi, (v128_t)l));
#endif
    l = seli(hi < l, hi, l);
    return seli(lo > l, lo, l);
  }
  // The same clamp on floats holding integers, for lanes that hold no NaN (min/max instructions
  // where the instruction set has them: for such lanes they are the compares).
  static V fclamp(V l, V lo, V hi) {
#if defined(__AVX512F__)
    if constexpr (W == 16) return (V)_mm512_max_ps((__m512)lo, _mm512_min_ps((__m512)hi, (__m512)l));
#endif
#if defined(__AVX2__)
    if constexpr (W == 8) return (V)_mm256_max_ps((__m256)lo, _mm256_min_ps((__m256)hi, (__m256)l));
#endif
#if defined(__wasm_simd128__)
    if constexpr (W == 4) return (V)wasm_f32x4_pmax((v128_t)lo, wasm_f32x4_pmin((v128_t)hi, (v128_t)l));
#endif
    l = sel(hi < l, hi, l);
    return sel(lo > l, lo, l);
  }
  // rint(f) for |f| < 2^22, as floats: (f + 1.5 * 2^23) - 1.5 * 2^23 (both steps exact, ties to
  // even), or the ISA's one round-to-nearest-even instruction. They differ only in the sign of a
  // zero (-0.3 gives +0 one way, -0 the other), which no sum of products below can see: every
  // sum starts at +0, and adding a zero of either sign to it, or to any other value, changes
  // nothing.
  static V round_even(V f) {
#if defined(__AVX512F__)
    if constexpr (W == 16) return (V)_mm512_roundscale_ps((__m512)f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#endif
#if defined(__AVX__)
    if constexpr (W == 8) return (V)_mm256_round_ps((__m256)f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#endif
#if defined(__wasm_simd128__)
    if constexpr (W == 4) return (V)wasm_f32x4_nearest((v128_t)f);
#endif
    return (f + splat(12582912.f)) - splat(12582912.f);
  }
  static bool any(VI m) {
    int32_t r = 0;
    for (int k = 0; k < W; ++k) r |= m[k];
    return r != 0;
  }
};

// make_qkx2_quants for W sub-blocks of n <= 32 values; xt[W * i + k]: element i of sub-block k
// (wt likewise), Lt[W * i + k] its level.
template <int W>
void make_qkx2_quants(int n, int nmax, const float* xt, const float* wt, int32_t* Lt, float* the_min,
                      float* scale_out, float rmin, float rdelta, int nstep, bool use_mad) {
  using O = Ops<W>;
  using V = typename O::V;
  using VI = typename O::VI;
  const V zero = O::splat(0.0f);
  const VI lo = O::splati(0), hi = O::splati(nmax);
  VI L[32], Laux[32];
  V min = O::load(xt);
  V max = min;
  V sum_w = O::load(wt);
  V sum_x = sum_w * min;
  for (int i = 1; i < n; ++i) {
    const V x = O::load(xt + W * i);
    min = O::sel(x < min, x, min);
    max = O::sel(x > max, x, max);
    const V w = O::load(wt + W * i);
    sum_w = sum_w + w;
    sum_x = sum_x + w * x;
  }
  min = O::sel(min > zero, zero, min);
  const VI degenerate = max == min;  // scalar: L = 0, return 0
  const V min0 = min;
  V iscale = O::splat(float(nmax)) / (max - min);
  V scale = O::splat(1.0f) / iscale;
  V best_error = zero;
  for (int i = 0; i < n; ++i) {
    const V x = O::load(xt + W * i);
    L[i] = O::clamp(O::nearest_int(iscale * (x - min)), lo, hi);
    V diff = scale * O::tof(L[i]) + min - x;
    diff = use_mad ? O::vabs(diff) : diff * diff;
    best_error = best_error + O::load(wt + W * i) * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    const float num = rmin + rdelta * float(is) + float(nmax);
    iscale = O::splat(num) / (max - min);  // min moves as ggml's does
    V sum_l = zero, sum_l2 = zero, sum_xl = zero;
    for (int i = 0; i < n; ++i) {
      const V x = O::load(xt + W * i);
      Laux[i] = O::clamp(O::nearest_int(iscale * (x - min)), lo, hi);
      const V l = O::tof(Laux[i]);
      const V wl = O::load(wt + W * i) * l;
      sum_l = sum_l + wl;
      sum_l2 = sum_l2 + wl * l;
      sum_xl = sum_xl + wl * x;
    }
    const V D = sum_w * sum_l2 - sum_l * sum_l;
    const VI dpos = D > zero;
    if (!O::any(dpos)) continue;
    V this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    V this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    const VI mpos = this_min > zero;
    this_min = O::sel(mpos, zero, this_min);
    this_scale = O::sel(mpos, sum_xl / sum_l2, this_scale);
    V cur_error = zero;
    for (int i = 0; i < n; ++i) {
      const V x = O::load(xt + W * i);
      V diff = this_scale * O::tof(Laux[i]) + this_min - x;
      diff = use_mad ? O::vabs(diff) : diff * diff;
      cur_error = cur_error + O::load(wt + W * i) * diff;
    }
    const VI upd = dpos & (cur_error < best_error);
    if (!O::any(upd)) continue;
    for (int i = 0; i < n; ++i) L[i] = O::seli(upd, Laux[i], L[i]);
    best_error = O::sel(upd, cur_error, best_error);
    scale = O::sel(upd, this_scale, scale);
    min = O::sel(upd, this_min, min);
  }
  for (int i = 0; i < n; ++i) O::store(Lt + W * i, ~degenerate & L[i]);
  O::store(the_min, O::vneg(O::sel(degenerate, min0, min)));
  O::store(scale_out, O::sel(degenerate, zero, scale));
}

// K candidates of make_qx_quants with rmse_type 1 at once: for each iscale[c], the sums
// sum(w x l) and sum(w l l) in the scalar code's order (w x l is (w * x) * l: wx holds w * x, the
// same product for every candidate; w is x^2, or qw's weights). Each sum is a chain of dependent
// adds: K candidates side by side keep the adder busy while each chain waits on its last add.
template <int W, int K>
void qx_candidates(int n, const float* xt, const typename Ops<W>::V* wv, const typename Ops<W>::V* wx,
                   const typename Ops<W>::V* iscale, typename Ops<W>::VI lo, typename Ops<W>::VI hi,
                   typename Ops<W>::V* sumlx, typename Ops<W>::V* suml2) {
  using O = Ops<W>;
  using V = typename O::V;
  // float(nearest_int(f)) is round_even(f) for |f| < 2^22 (ggml asserts that); clamped as
  // floats, the levels are the same small integers.
  const V lof = O::tof(lo), hif = O::tof(hi);
  V sx[K], s2[K];
  for (int c = 0; c < K; ++c) sx[c] = s2[c] = O::splat(0.0f);
  for (int i = 0; i < n; ++i) {
    const V x = O::load(xt + W * i);
    for (int c = 0; c < K; ++c) {
      const V l = O::fclamp(O::round_even(iscale[c] * x), lof, hif);
      sx[c] = sx[c] + wx[i] * l;
      s2[c] = s2[c] + wv[i] * l * l;
    }
  }
  for (int c = 0; c < K; ++c) {
    sumlx[c] = sx[c];
    suml2[c] = s2[c];
  }
}

// make_qx_quants(n <= 32, nmax, x, L, rmse_type = 1, qw) for W sub-blocks; wt: qw transposed as
// xt, null for qw = NULL. Lt: the levels plus nmax, as ggml stores them. The candidates keep
// only their sums and scale, three at a time, each then judged in the scalar code's order; the
// levels are those of the winning iscale, made once at the end (the same operations: the same
// levels).
template <int W>
void make_qx_quants_rmse1(int n, int nmax, const float* xt, const float* wt, int32_t* Lt, float* scale_out) {
  using O = Ops<W>;
  using V = typename O::V;
  using VI = typename O::VI;
  const V zero = O::splat(0.0f);
  const VI lo = O::splati(-nmax), hi = O::splati(nmax - 1), off = O::splati(nmax);
  V wv[32], wx[32];
  V max = zero, amax = zero;
  for (int i = 0; i < n; ++i) {
    const V x = O::load(xt + W * i);
    const V ax = O::vabs(x);
    const VI m = ax > amax;
    amax = O::sel(m, ax, amax);
    max = O::sel(m, x, max);
    wv[i] = wt ? O::load(wt + W * i) : x * x;
    wx[i] = wv[i] * x;
  }
  const VI all_zero = amax < O::splat(detail::GROUP_MAX_EPS);  // scalar: L = 0, return 0
  V sumlx[3], suml2[3];
  V iscale = O::splat(float(-nmax)) / max;
  qx_candidates<W, 1>(n, xt, wv, wx, &iscale, lo, hi, sumlx, suml2);
  V scale = O::sel(suml2[0] != zero, sumlx[0] / suml2[0], zero);
  V best = scale * sumlx[0];
  // is = -9 ... -1, 1 ... 9: 18 candidates, three at a time
  static constexpr int kIs[18] = {-9, -8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (int t = 0; t < 18; t += 3) {
    V cand[3];
    for (int c = 0; c < 3; ++c) cand[c] = O::splat(-(float(nmax) + 0.1f * float(kIs[t + c]))) / max;
    qx_candidates<W, 3>(n, xt, wv, wx, cand, lo, hi, sumlx, suml2);
    for (int c = 0; c < 3; ++c) {
      const VI upd = (suml2[c] > zero) & (sumlx[c] * sumlx[c] > best * suml2[c]);
      if (!O::any(upd)) continue;
      iscale = O::sel(upd, cand[c], iscale);
      scale = O::sel(upd, sumlx[c] / suml2[c], scale);
      best = O::sel(upd, scale * sumlx[c], best);
    }
  }
  for (int i = 0; i < n; ++i)
    O::store(Lt + W * i, ~all_zero & (O::clamp(O::nearest_int(iscale * O::load(xt + W * i)), lo, hi) + off));
  O::store(scale_out, O::sel(all_zero, zero, scale));
}

// The IQ4 levels as floats, and the step up to each from the one below (small integers: exact).
struct Iq4Floats {
  float level[16], step[16];
};
constexpr Iq4Floats kIq4 = [] {
  Iq4Floats t{};
  for (int i = 0; i < 16; ++i) {
    t.level[i] = float(kIq4nlLevels[i]);
    t.step[i] = i ? float(kIq4nlLevels[i] - kIq4nlLevels[i - 1]) : 0.0f;
  }
  return t;
}();

// ggml's best_index_int8(16, kvalues_iq4nl, t) for W values at once: the index of the nearest
// IQ4 level (the lower one unless t - lo < hi - t fails, the scalar test itself; NaN gives 15),
// and that level as a float in *level. Pair i (levels i-1 and i) votes "up" unless t is nearer
// its lower level: every pair below t votes up, none above it does, and the pair around t
// votes as the scalar bisection decides; the votes are a prefix, so their count is the index.
// (fl(hi - t) is -fl(t - hi): rounding is symmetric in sign.)
template <int W>
typename Ops<W>::VI iq4_index(typename Ops<W>::V t, typename Ops<W>::V* level) {
  using O = Ops<W>;
  using V = typename O::V;
  using VI = typename O::VI;
  V below = t - O::splat(kIq4.level[0]);  // t - lo
  V q = O::splat(kIq4.level[0]);
  VI index = O::splati(0);
#pragma GCC unroll 16
  for (int i = 1; i < 16; ++i) {  // (unrolled: every level a constant vector)
    const V above = t - O::splat(kIq4.level[i]);  // t - hi
    const VI up = ~(below < O::vneg(above));
    index = index - up;
    q = q + (V)(up & (VI)O::splat(kIq4.step[i]));
    below = above;
  }
  *level = q;
  return index;
}

// One candidate scale of quantize_row_iq4_nl_impl: sum(w q x) and sum(w q q) over the 32 values
// of each lane's block, q the level nearest id * x, in the scalar code's order.
template <int W>
void iq4_sums(const float* xt, const float* wt, typename Ops<W>::V id, typename Ops<W>::V* sumqx,
              typename Ops<W>::V* sumq2) {
  using O = Ops<W>;
  using V = typename O::V;
  V sx = O::splat(0.0f), s2 = sx;
  for (int j = 0; j < 32; ++j) {
    const V x = O::load(xt + W * j);
    V q;
    iq4_index<W>(id * x, &q);
    const V wq = O::load(wt + W * j) * q;
    sx = sx + wq * x;
    s2 = s2 + wq * q;
  }
  *sumqx = sx;
  *sumq2 = s2;
}

// quantize_row_iq4_nl_impl's scale search (ntry = 7) for W blocks of 32: xt[W * j + k] is value
// j of block k, wt its weight. The scale from the block's signed maximum refined to its
// least-squares fit, then the 15 candidates -max / (127 - t), t = -7 .. 7, whose fit wins where it
// is better; a block below GROUP_MAX_EPS gets 0.
template <int W>
void iq4_search(const float* xt, const float* wt, float* scale_out) {
  using O = Ops<W>;
  using V = typename O::V;
  using VI = typename O::VI;
  const V zero = O::splat(0.0f);
  V max = zero, amax = zero;
  for (int j = 0; j < 32; ++j) {
    const V x = O::load(xt + W * j);
    const V ax = O::vabs(x);
    const VI m = ax > amax;
    amax = O::sel(m, ax, amax);
    max = O::sel(m, x, max);
  }
  const VI all_zero = amax < O::splat(detail::GROUP_MAX_EPS);
  V sumqx, sumq2;
  const V d0 = O::vneg(max) / O::splat(float(kIq4nlLevels[0]));
  iq4_sums<W>(xt, wt, O::splat(1.0f) / d0, &sumqx, &sumq2);
  V d = O::sel(sumq2 > zero, sumqx / sumq2, zero);
  V best = d * sumqx;
  for (int itry = -7; itry <= 7; ++itry) {
    iq4_sums<W>(xt, wt, O::splat(float(itry + kIq4nlLevels[0])) / max, &sumqx, &sumq2);
    const VI upd = (sumq2 > zero) & (sumqx * sumqx > best * sumq2);
    d = O::sel(upd, sumqx / sumq2, d);
    best = O::sel(upd, d * sumqx, best);
  }
  O::store(scale_out, O::sel(all_zero, zero, d));
}

// The levels of 32 values for the scale whose inverse is id, W values a step: L[j] is the
// index of the level nearest id * x[j].
template <int W>
void iq4_levels(const float* x, float id, uint8_t* L) {
  using O = Ops<W>;
  alignas(32) int32_t idx[W];
  for (int j = 0; j < 32; j += W) {
    typename O::V q;
    O::store(idx, iq4_index<W>(O::splat(id) * O::load(x + j), &q));
    for (int k = 0; k < W; ++k) L[j + k] = uint8_t(idx[k]);
  }
}

// The codebook types' neighbour search (ggml's iq2_find_best_neighbour, N = 8, and
// iq3_find_best_neighbour, N = 4), W grid points a step: of the n grid points idx[0..n) (each N
// int8 coordinates at grid + N * idx[j], small positive odd numbers), the position of the first
// of least d2 = sum over i of weight[i] * (scale * q_i - xval[i])^2 (i ascending, as in ggml),
// or -1 when no d2 is below FLT_MAX (where ggml asserts).
template <int W, int N>
int grid_best(const int8_t* grid, const uint16_t* idx, int n, const float* xval, const float* weight, float scale) {
  using O = Ops<W>;
  using V = typename O::V;
  using VI = typename O::VI;
  static_assert(N == 4 || N == 8);
  const V s = O::splat(scale);
  float best_d2 = FLT_MAX;
  int best = -1;
  for (int j = 0; j < n; j += W) {
    // The points' coordinates as 32-bit words, four a word, lane k the point idx[j + k] (past n:
    // the last one again, its result unused). Built from scalars: a vector load of words just
    // stored one by one would wait for the stores.
    const auto word = [&](int k, int h) {
      int32_t v;
      std::memcpy(&v, grid + N * idx[j + k < n ? j + k : n - 1] + 4 * h, 4);
      return v;
    };
    VI w4[N / 4];
    for (int h = 0; h < N / 4; ++h)
      w4[h] = [&]<size_t... K>(std::index_sequence<K...>) { return VI{word(int(K), h)...}; }(std::make_index_sequence<W>());
    V acc = O::splat(0.0f);
    for (int i = 0; i < N; ++i) {
      const V q = O::tof((w4[i / 4] >> (8 * (i % 4))) & O::splati(0xff));
      const V diff = s * q - O::splat(xval[i]);
      acc = acc + O::splat(weight[i]) * diff * diff;
    }
    for (int k = 0; k < W && j + k < n; ++k)
      if (acc[k] < best_d2) {
        best_d2 = acc[k];
        best = j + k;
      }
  }
  return best;
}

// The candidate scales of IQ3_S (kBlock 32 values in groups of N = 4, 3-bit levels) and IQ2_S
// (16 in groups of N = 8, 2-bit levels) for one block, W candidates a step, lane k one candidate.
// Candidate t (0 .. count-1) has the inverse scale id[t] and the scale sc[t] = 1 / id[t]. Per
// group, each value's level clamp(nearest_int(0.5 (id x - 1)), 0, kMaxQ - 1), kBits a level in
// the grid's index; a group off the
// grid (map[u] < 0) takes its nearest neighbour at sc[t] (ggml's iq{2,3}_find_best_neighbour,
// weights waux). The lanes off the grid scan their neighbour lists in lockstep, each keeping its
// first least distance, as ggml's loop keeps it. Out: per candidate the sums sum(w x q) and
// sum(w q q) (q = 2 L + 1, i ascending, as ggml sums them), its levels Lc[t * kBlock + i] and
// which groups were on the grid (on_grid[t * groups + g]). False where ggml would assert (no neighbour at a finite distance).
// grid: N int8 coordinates a point; map: a grid index, or -(offset + 1) of a neighbour list
// {n, indices...} in `neighbours`.
template <int W, int N, int kBlock, int kBits, int kMaxQ>
bool codebook_candidates(const int8_t* grid, const int* map, const uint16_t* neighbours, const float* xval,
                         const float* weight, const float* waux, const float* id, const float* sc, int count,
                         float* sumqx, float* sumq2, int8_t* Lc, bool* on_grid) {
  using O = Ops<W>;
  using V = typename O::V;
  using VI = typename O::VI;
  constexpr int kGroups = kBlock / N;
  static_assert(kMaxQ <= (1 << kBits));
  const VI lo = O::splati(0), hi = O::splati(kMaxQ - 1);
  for (int t0 = 0; t0 < count; t0 += W) {
    alignas(32) float idt[W], sct[W];
    for (int k = 0; k < W; ++k) {  // (past count: the last candidate again, its results unused)
      idt[k] = id[t0 + k < count ? t0 + k : count - 1];
      sct[k] = sc[t0 + k < count ? t0 + k : count - 1];
    }
    const V idv = O::load(idt), scv = O::load(sct);
    alignas(32) int32_t L[kBlock][W];
    for (int g = 0; g < kGroups; ++g) {
      const float* xg = xval + N * g;
      VI u = O::splati(0);
      for (int i = 0; i < N; ++i) {
        const VI l = O::clamp(O::nearest_int(O::splat(0.5f) * (idv * O::splat(xg[i]) - O::splat(1.0f))), lo, hi);
        O::store(L[N * g + i], l);
        u = u | (l << (kBits * i));
      }
      alignas(32) int32_t ut[W];
      O::store(ut, u);
      // the lanes off the grid: their neighbour lists, scanned together
      const uint16_t* list[W];
      int32_t len[W];
      int longest = 0;
      for (int k = 0; k < W; ++k) {
        const int m = map[ut[k]];
        if (t0 + k < count) on_grid[(t0 + k) * kGroups + g] = m >= 0;
        list[k] = m >= 0 ? nullptr : neighbours + (-m - 1) + 1;
        len[k] = m >= 0 ? 0 : neighbours[-m - 1];
        longest = len[k] > longest ? len[k] : longest;
      }
      if (!longest) continue;
      VI lenv;
      std::memcpy(&lenv, len, sizeof lenv);
      V best_d2 = O::splat(FLT_MAX);
      VI best = O::splati(-1);
      for (int j = 0; j < longest; ++j) {
        // the j-th neighbour of each lane, four coordinates a 32-bit word (from scalars: see grid_best)
        VI w4[N / 4];
        for (int h = 0; h < N / 4; ++h) {
          const auto word = [&](int k) {
            int32_t v = 0;
            if (j < len[k]) std::memcpy(&v, grid + N * list[k][j] + 4 * h, 4);
            return v;
          };
          w4[h] = [&]<size_t... K>(std::index_sequence<K...>) { return VI{word(int(K))...}; }(std::make_index_sequence<W>());
        }
        V acc = O::splat(0.0f);
        for (int i = 0; i < N; ++i) {
          const V q = O::tof((w4[i / 4] >> (8 * (i % 4))) & O::splati(0xff));
          const V diff = scv * q - O::splat(xg[i]);
          acc = acc + O::splat(waux[N * g + i]) * diff * diff;
        }
        const VI upd = (O::splati(j) < lenv) & (acc < best_d2);
        best_d2 = O::sel(upd, acc, best_d2);
        best = O::seli(upd, O::splati(j), best);
      }
      alignas(32) int32_t bt[W];
      O::store(bt, best);
      for (int k = 0; k < W && t0 + k < count; ++k) {
        if (!len[k]) continue;
        if (bt[k] < 0) return false;
        const int8_t* pg = grid + N * list[k][bt[k]];
        for (int i = 0; i < N; ++i) L[N * g + i][k] = (pg[i] - 1) / 2;
      }
    }
    V sx = O::splat(0.0f), s2 = sx;
    for (int i = 0; i < kBlock; ++i) {
      const V q = O::tof(O::load_i(L[i]) * O::splati(2) + O::splati(1));
      sx = sx + O::splat(weight[i] * xval[i]) * q;
      s2 = s2 + O::splat(weight[i]) * q * q;
    }
    alignas(32) float sxt[W], s2t[W];
    O::store(sxt, sx);
    O::store(s2t, s2);
    for (int k = 0; k < W && t0 + k < count; ++k) {
      sumqx[t0 + k] = sxt[k];
      sumq2[t0 + k] = s2t[k];
      for (int i = 0; i < kBlock; ++i) Lc[(t0 + k) * kBlock + i] = int8_t(L[i][k]);
    }
  }
  return true;
}

// The W x W tile at `in` (row k at in + in_stride * k) transposed to `out` (row i at
// out + out_stride * i), in log2(W) rounds of two-vector shuffles: round B swaps, in every 2B x 2B
// block, the top-right and bottom-left B x B quarters (rows r and r + B exchange their elements j
// with bit B set and clear). T: float or int32_t.
template <int W, int B, typename V, size_t... J>
inline void swap_quarters(V& a, V& b, std::index_sequence<J...>) {  // a: row r, b: row r + B
  const V na = __builtin_shufflevector(a, b, ((J & B) ? W + (J ^ B) : J)...);
  const V nb = __builtin_shufflevector(a, b, ((J & B) ? W + J : (J ^ B))...);
  a = na;
  b = nb;
}
template <int W, int B, typename V>
inline void transpose_rounds(V* r) {
  if constexpr (B >= 1) {
    for (int k = 0; k < W; ++k)
      if (!(k & B)) swap_quarters<W, B>(r[k], r[k + B], std::make_index_sequence<W>());
    transpose_rounds<W, B / 2>(r);
  }
}
template <int W, typename T>
inline void transpose_tile(const T* in, std::ptrdiff_t in_stride, T* out, std::ptrdiff_t out_stride) {
  using V = std::conditional_t<std::is_same_v<T, float>, typename Vec<W>::V, typename Vec<W>::VI>;
  static_assert(sizeof(V) == sizeof(T) * W);
  V r[W];
  for (int k = 0; k < W; ++k) std::memcpy(&r[k], in + in_stride * k, sizeof(V));
  transpose_rounds<W, W / 2>(r);
  for (int i = 0; i < W; ++i) std::memcpy(out + out_stride * i, &r[i], sizeof(V));
}
// W sub-blocks of n values (sub-block k at x + n * k; n a multiple of W) into lanes:
// xt[W * i + k] = x[n * k + i]; and the levels back, as bytes: L[n * k + i] = Lt[W * i + k].
template <int W>
inline void to_lanes(const float* x, int n, float* xt) {
  for (int i0 = 0; i0 < n; i0 += W) transpose_tile<W>(x + i0, n, xt + W * i0, W);
}
template <int W>
inline void levels_from_lanes(const int32_t* Lt, int n, uint8_t* L) {
  using VI = typename Vec<W>::VI;
  using VB = typename Vec<W>::VB;
  alignas(64) int32_t tile[W * W];
  for (int i0 = 0; i0 < n; i0 += W) {
    transpose_tile<W>(Lt + W * i0, W, tile, W);
    for (int k = 0; k < W; ++k) {
      VI v;
      std::memcpy(&v, tile + W * k, sizeof v);
      const VB b = __builtin_convertvector(v, VB);  // levels 0 ... 63: no bits lost
      std::memcpy(L + n * k + i0, &b, sizeof b);
    }
  }
}
// (GCC cannot see that the transposes below fill the first n rows the searches read.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// W consecutive sub-blocks of n values (sub-block k at x + n * k, its weights at w + n * k; w null
// for make_qx_quants without weights), transposed into lanes, searched, and their levels written
// back in order as bytes (L[n * k + i]).
template <int W>
void qkx2_group(int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales, float* mins, float rmin,
                float rdelta, int nstep, bool use_mad) {
  alignas(64) float xt[W * 32], wt[W * 32];
  alignas(64) int32_t Lt[W * 32];
  to_lanes<W>(x, n, xt);
  to_lanes<W>(w, n, wt);
  make_qkx2_quants<W>(n, nmax, xt, wt, Lt, mins, scales, rmin, rdelta, nstep, use_mad);
  levels_from_lanes<W>(Lt, n, L);
}
template <int W>
void qx_rmse1_group(int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales) {
  alignas(64) float xt[W * 32], wt[W * 32];
  alignas(64) int32_t Lt[W * 32];
  to_lanes<W>(x, n, xt);
  if (w) to_lanes<W>(w, n, wt);
  make_qx_quants_rmse1<W>(n, nmax, xt, w ? wt : nullptr, Lt, scales);
  levels_from_lanes<W>(Lt, n, L);
}

// The scales of W consecutive blocks of 32 (x + 32 * k, weights w + 32 * k), transposed into lanes.
template <int W>
void iq4_group(const float* x, const float* w, float* scales) {
  alignas(64) float xt[W * 32], wt[W * 32];
  to_lanes<W>(x, 32, xt);
  to_lanes<W>(w, 32, wt);
  iq4_search<W>(xt, wt, scales);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace lanes
}  // namespace
}  // namespace ggml
}  // namespace leapconv
