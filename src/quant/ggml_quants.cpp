// A line-by-line port of ggml's reference quantizers (see ggml_quants.h). Each expression
// keeps ggml's evaluation order and types: C's usual conversions (int -> float before a float
// multiply, (a*b)*c left to right) are spelled out where they matter. The project builds with
// -ffp-contract=off and without fast-math, as the order of float operations is the contract.
#include "quant/ggml_quants.h"
#include "quant/ggml_quants_avx2.h"
#include "quant/ggml_quants_impl.h"
#include "quant/ggml_lanes.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <initializer_list>

#if defined(__SSE2__)
#include <emmintrin.h>
#if defined(__EMSCRIPTEN__)
#include <wasm_simd128.h>
#endif
#define LEAPCONV_GGML_SSE2 1
#else
#define LEAPCONV_GGML_SSE2 0
#endif

namespace leapconv {
namespace ggml {

using namespace detail;  // the block fields and ggml's rounding (ggml_quants_impl.h)

namespace {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- helpers of the K-quants (ggml-quants.c, same names) ----

// qw: the importance weights of the n values (the weighted quantizers); null: weights from
// rmse_type (x^2 for 1).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type,
                     const float* qw = nullptr) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < GROUP_MAX_EPS) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = float(-nmax) / max;
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i) {
      const int l = nearest_int(iscale * x[i]);
      L[i] = int8_t(nmax + max_(-nmax, min_(nmax - 1, l)));
    }
    return 1 / iscale;
  }
  bool return_early = false;
  if (rmse_type < 0) {
    rmse_type = -rmse_type;
    return_early = true;
  }
  auto weight = [rmse_type, qw, x](int i) -> float {
    const float xi = x[i];
    return qw                ? qw[i]
           : rmse_type == 1 ? xi * xi
           : rmse_type == 2 ? 1.0f
           : rmse_type == 3 ? std::fabs(xi)
                            : std::sqrt(std::fabs(xi));
  };
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = max_(-nmax, min_(nmax - 1, l));
    L[i] = int8_t(l + nmax);
    const float w = weight(i);
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(float(nmax) + 0.1f * float(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = max_(-nmax, min_(nmax - 1, l));
      const float w = weight(i);
      sumlx += w * x[i] * float(l);
      suml2 += w * float(l) * float(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = int8_t(nmax + max_(-nmax, min_(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < GROUP_MAX_EPS) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = float(-nmax) / max;
  if (do_rmse) {
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = max_(-nmax, min_(nmax - 1, l));
      L[i] = int8_t(l);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * float(l);
      suml2 += w * float(l) * float(l);
    }
    for (int itry = 0; itry < 5; ++itry) {
      int n_changed = 0;
      for (int i = 0; i < n; ++i) {
        const float w = x[i] * x[i];
        float slx = sumlx - w * x[i] * float(L[i]);
        if (slx > 0) {
          float sl2 = suml2 - w * float(L[i]) * float(L[i]);
          int new_l = nearest_int(x[i] * sl2 / slx);
          new_l = max_(-nmax, min_(nmax - 1, new_l));
          if (new_l != L[i]) {
            slx += w * x[i] * float(new_l);
            sl2 += w * float(new_l) * float(new_l);
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
              L[i] = int8_t(new_l);
              sumlx = slx;
              suml2 = sl2;
              ++n_changed;
            }
          }
        }
      }
      if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
  }
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = max_(-nmax, min_(nmax - 1, l));
    L[i] = int8_t(l + nmax);
  }
  return 1 / iscale;
}

float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = float(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(max_(0, min_(nmax, l)));
    float diff = scale * float(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    const float w = weights[i];
    best_error += w * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = max_(0, min_(nmax, l));
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * float(l);
      sum_l2 += w * float(l) * float(l);
      sum_xl += w * float(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * float(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        const float w = weights[i];
        cur_error += w * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// ggml's make_qkx3_quants (the weighted quantizers' search for a scale and a min) is
// make_qkx2_quants with the weights given: the same steps in the same order; its `max <= min`
// test for the degenerate case is make_qkx2's `max == min` (max >= min whenever neither is NaN,
// and both are false for NaN), and its memset the same zeros. So make_qkx2_quants serves both.

}  // namespace

namespace detail {
// ggml's make_qp_quants: levels 0..nmax (no lower clamp: a negative x rounds to a negative
// level, stored in L's uint8_t as C's conversion wraps it) for n non-negative values x (the
// sub-block scales or mins of a K-quant), weighted by quant_weights; returns the scale.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = max_(max, x[i]);
  if (max < GROUP_MAX_EPS) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = float(nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = uint8_t(nearest_int(iscale * x[i]));
  const float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * float(L[i]);  // L read back as stored (uint8_t)
    const float w = quant_weights[i];
    best_mse += w * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * float(is) + float(nmax)) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale_is * x[i]);
      l = min_(nmax, l);
      const float diff = x[i] - scale_is * float(l);
      const float w = quant_weights[i];
      mse += w * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = min_(nmax, l);
    L[i] = uint8_t(l);
    const float w = quant_weights[i];
    sumlx += w * x[i] * float(l);  // the int l, not the stored byte
    suml2 += w * float(l) * float(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = quant_weights[i];
      float slx = sumlx - w * x[i] * float(L[i]);
      float sl2 = suml2 - w * float(L[i]) * float(L[i]);
      if (slx > 0 && sl2 > 0) {
        int new_l = nearest_int(x[i] * sl2 / slx);
        new_l = min_(nmax, new_l);
        if (new_l != int(L[i])) {
          slx += w * x[i] * float(new_l);
          sl2 += w * float(new_l) * float(new_l);
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = uint8_t(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}
}  // namespace detail

namespace {
using detail::make_qp_quants;

#if LEAPCONV_GGML_SSE2
// ---- SSE2 (and wasm simd128 through Emscripten's SSE2 mapping): the K-quants' requantization
// and the Q8_0 / Q4_0 blocks, four values a vector, each lane the scalar code's float operations
// (the sub-block searches are ggml_lanes.h's). Selects are and/andnot/or, never minps/maxps,
// whose NaN and signed-zero rules differ from C's ?:.

using V = __m128;
using VI = __m128i;

inline VI seli(VI m, VI a, VI b) {
  return _mm_or_si128(_mm_and_si128(m, a), _mm_andnot_si128(m, b));
}
inline V vabs(V a) { return _mm_and_ps(a, _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff))); }
inline VI nearest_int4(V f) {
  const VI i = _mm_castps_si128(_mm_add_ps(f, _mm_set1_ps(12582912.f)));
  return _mm_sub_epi32(_mm_and_si128(i, _mm_set1_epi32(0x007fffff)), _mm_set1_epi32(0x00400000));
}
// MAX(lo, MIN(hi, l))
inline VI clamp4(VI l, VI lo, VI hi) {
  l = seli(_mm_cmplt_epi32(hi, l), hi, l);
  return seli(_mm_cmpgt_epi32(lo, l), lo, l);
}
inline bool any(V m) { return _mm_movemask_ps(m) != 0; }

// L[i] = MAX(lo, MIN(hi, nearest_int((x[i] + add) / d))) + off for n (a multiple of 4)
// values; without kAdd, nearest_int(x[i] / d).
template <bool kAdd>
inline void requantize4(const float* x, int n, float add, float d, int lo, int hi, int off,
                        uint8_t* L) {
  const V va = _mm_set1_ps(add), vd = _mm_set1_ps(d);
  const VI vlo = _mm_set1_epi32(lo), vhi = _mm_set1_epi32(hi), voff = _mm_set1_epi32(off);
  for (int i = 0; i < n; i += 4) {
    const V xi = _mm_loadu_ps(x + i);
    const V q = _mm_div_ps(kAdd ? _mm_add_ps(xi, va) : xi, vd);
    const VI l = _mm_add_epi32(clamp4(nearest_int4(q), vlo, vhi), voff);
    int32_t t[4];
    _mm_storeu_si128((VI*)t, l);
    for (int k = 0; k < 4; ++k) L[i + k] = uint8_t(t[k]);
  }
}
// ---- Q8_0 and Q4_0, one 32-value block at a time, four values a lane ----
// The block's max |x| is a max (exact in any order for NaN-free input; blocks holding a NaN take
// the scalar code); every other step is ggml's own float operation applied elementwise, so the
// bytes are the scalar ones. Each also returns the block's largest |x - dequantized|, with the
// products dequantize_row_* computes (the conversion's error report, in the same pass).

// cvttps2dq: truncation toward zero, INT32_MIN for NaN and |x| >= 2^31. Emscripten's
// _mm_cvttps_epi32 is four scalar lrint calls; wasm's saturating truncation plus a select is
// the same function.
#if defined(__EMSCRIPTEN__)
inline VI cvtt_epi32(V x) {
  const V in_range = _mm_cmplt_ps(vabs(x), _mm_set1_ps(2147483648.0f));
  return seli(_mm_castps_si128(in_range), (VI)wasm_i32x4_trunc_sat_f32x4((v128_t)x), _mm_set1_epi32(INT32_MIN));
}
// The same for values known to be in range (|x| < 2^31, not NaN): wasm's truncation alone.
inline VI cvtt_in_range(V x) { return (VI)wasm_i32x4_trunc_sat_f32x4((v128_t)x); }
#else
inline VI cvtt_epi32(V x) { return _mm_cvttps_epi32(x); }
inline VI cvtt_in_range(V x) { return _mm_cvttps_epi32(x); }
#endif

inline float hmax(V v) {
  v = _mm_max_ps(v, _mm_shuffle_ps(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = _mm_max_ps(v, _mm_shuffle_ps(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(v);
}
inline bool any_nan32(const V* x) {
  V u = _mm_cmpunord_ps(x[0], x[0]);
  for (int i = 1; i < 8; ++i) u = _mm_or_ps(u, _mm_cmpunord_ps(x[i], x[i]));
  return any(u);
}
// (int)roundf(x) as trunc_i32(std::round(x)): truncate, then one away from zero when the dropped
// fraction (exact: Sterbenz) is at least 1/2; NaN, Inf and |x| >= 2^31 stay cvttps2dq's INT32_MIN.
inline VI round_away_i32(V x) {
  const VI t = cvtt_epi32(x);
  const V frac = _mm_sub_ps(x, _mm_cvtepi32_ps(t));
  const V up = _mm_and_ps(_mm_cmpge_ps(vabs(frac), _mm_set1_ps(0.5f)),
                          _mm_cmplt_ps(vabs(x), _mm_set1_ps(2147483648.0f)));
  const VI away = _mm_or_si128(_mm_srai_epi32(_mm_castps_si128(x), 31), _mm_set1_epi32(1));  // -1 or +1
  return _mm_add_epi32(t, _mm_and_si128(_mm_castps_si128(up), away));
}
// The low bytes of 16 int32s (what ggml's (int8_t)/(uint8_t) casts keep), packed in order.
inline VI low_bytes16(VI a, VI b, VI c, VI d) {
  const VI m = _mm_set1_epi32(0xff);
  return _mm_packus_epi16(_mm_packs_epi32(_mm_and_si128(a, m), _mm_and_si128(b, m)),
                          _mm_packs_epi32(_mm_and_si128(c, m), _mm_and_si128(d, m)));
}
inline V block_err(V worst, V x, V back) { return _mm_max_ps(worst, vabs(_mm_sub_ps(x, back))); }

bool q8_0_block_sse2(const float* xp, uint8_t* y, float* err) {
  V x[8];
  for (int i = 0; i < 8; ++i) x[i] = _mm_loadu_ps(xp + 4 * i);
  if (any_nan32(x)) return false;
  V am = vabs(x[0]);
  for (int i = 1; i < 8; ++i) am = _mm_max_ps(am, vabs(x[i]));
  const float amax = hmax(am);
  const float d = amax / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_f16(y, d);
  const V vid = _mm_set1_ps(id), dh = _mm_set1_ps(get_f16(y));
  VI q[8];
  V worst = _mm_setzero_ps();
  for (int i = 0; i < 8; ++i) {
    q[i] = round_away_i32(_mm_mul_ps(x[i], vid));
    // dequantize_row_q8_0: float(int8_t(q)) * d
    const VI q8 = _mm_srai_epi32(_mm_slli_epi32(q[i], 24), 24);
    worst = block_err(worst, x[i], _mm_mul_ps(_mm_cvtepi32_ps(q8), dh));
  }
  _mm_storeu_si128((VI*)(y + 2), low_bytes16(q[0], q[1], q[2], q[3]));
  _mm_storeu_si128((VI*)(y + 18), low_bytes16(q[4], q[5], q[6], q[7]));
  *err = std::isinf(amax) ? INFINITY : hmax(worst);
  return true;
}

// Q8_0, four blocks at a time: their four maxima in one vector, d and 1/d by one division each
// (the same IEEE divisions as the scalar code's), then every value elementwise. For these
// blocks |x / d| <= 127 (plus rounding), so roundf needs no range handling and the packs no
// masking. Blocks with a NaN, or whose 1/d overflows (subnormal maxima), take q8_0_block_sse2.
// Returns false when the four are not such blocks; *worst gathers |x - dequantized|.
// Loads four blocks of 32 into x[32] and their max |x| into lane b of *amax; false when any
// value is NaN or the largest is infinite (those blocks take the one-block path).
bool load_4blocks(const float* xp, V* x, V* amax) {
  V nan = _mm_setzero_ps(), am[4];
  for (int b = 0; b < 4; ++b) {
    am[b] = _mm_setzero_ps();
    for (int i = 0; i < 8; ++i) {
      const V v = x[8 * b + i] = _mm_loadu_ps(xp + 32 * b + 4 * i);
      nan = _mm_or_ps(nan, _mm_cmpunord_ps(v, v));
      am[b] = _mm_max_ps(am[b], vabs(v));
    }
  }
  _MM_TRANSPOSE4_PS(am[0], am[1], am[2], am[3]);
  *amax = _mm_max_ps(_mm_max_ps(am[0], am[1]), _mm_max_ps(am[2], am[3]));
  return !any(nan) && !any(_mm_cmpge_ps(*amax, _mm_set1_ps(INFINITY)));
}
// d per lane and 1/d (0 where d is 0, as ggml's `d ? 1/d : 0`); false when a 1/d overflows.
bool scales_4blocks(V d, float* dv, float* idv) {
  const V id = _mm_and_ps(_mm_cmpneq_ps(d, _mm_setzero_ps()), _mm_div_ps(_mm_set1_ps(1.0f), d));
  _mm_store_ps(dv, d);
  _mm_store_ps(idv, id);
  return !any(_mm_cmpge_ps(vabs(id), _mm_set1_ps(INFINITY)));
}

bool q8_0_4blocks_sse2(const float* xp, uint8_t* y, V* worst) {
  V x[32], amax;
  if (!load_4blocks(xp, x, &amax)) return false;
  alignas(16) float dv[4], idv[4];
  if (!scales_4blocks(_mm_div_ps(amax, _mm_set1_ps(127.0f)), dv, idv)) return false;
  const V half = _mm_set1_ps(0.5f), one = _mm_castsi128_ps(_mm_set1_epi32(1));
  for (int b = 0; b < 4; ++b) {
    uint8_t* yb = y + b * kQ8_0BlockBytes;
    put_f16(yb, dv[b]);
    const V vid = _mm_set1_ps(idv[b]), dh = _mm_set1_ps(get_f16(yb));
    VI q[8];
    for (int i = 0; i < 8; ++i) {
      const V x0 = _mm_mul_ps(x[8 * b + i], vid);
      const VI t = cvtt_in_range(x0);
      const V frac = _mm_sub_ps(x0, _mm_cvtepi32_ps(t));  // exact
      const VI away = _mm_or_si128(_mm_srai_epi32(_mm_castps_si128(x0), 31), _mm_castps_si128(one));
      q[i] = _mm_add_epi32(t, _mm_and_si128(_mm_castps_si128(_mm_cmpge_ps(vabs(frac), half)), away));
      *worst = block_err(*worst, x[8 * b + i], _mm_mul_ps(_mm_cvtepi32_ps(q[i]), dh));
    }
    _mm_storeu_si128((VI*)(yb + 2), _mm_packs_epi16(_mm_packs_epi32(q[0], q[1]), _mm_packs_epi32(q[2], q[3])));
    _mm_storeu_si128((VI*)(yb + 18), _mm_packs_epi16(_mm_packs_epi32(q[4], q[5]), _mm_packs_epi32(q[6], q[7])));
  }
  return true;
}

// Q4_0, four blocks at a time as q8_0_4blocks_sse2: each block's signed maximum (its first value
// of the largest magnitude) found with a compare, d = max / -8 and 1/d for the four in one
// division each; here x / d + 8.5 lies in [0.5, 16.5], so the truncation needs no range handling.
bool q4_0_4blocks_sse2(const float* xp, uint8_t* y, V* worst) {
  V x[32], amax;
  if (!load_4blocks(xp, x, &amax)) return false;
  alignas(16) float av[4], mv[4] = {0, 0, 0, 0};
  _mm_store_ps(av, amax);
  for (int b = 0; b < 4; ++b) {
    if (!(av[b] > 0)) continue;  // all zero: max stays 0
    const V va = _mm_set1_ps(av[b]);
    for (int i = 0; i < 8; ++i)
      if (const int m = _mm_movemask_ps(_mm_cmpeq_ps(vabs(x[8 * b + i]), va))) {
        mv[b] = xp[32 * b + 4 * i + __builtin_ctz(unsigned(m))];
        break;
      }
  }
  alignas(16) float dv[4], idv[4];
  if (!scales_4blocks(_mm_div_ps(_mm_load_ps(mv), _mm_set1_ps(-8.0f)), dv, idv)) return false;
  const V half = _mm_set1_ps(8.5f);
  const VI fifteen = _mm_set1_epi32(15), eight = _mm_set1_epi32(8);
  for (int b = 0; b < 4; ++b) {
    uint8_t* yb = y + b * kQ4_0BlockBytes;
    put_f16(yb, dv[b]);
    const V vid = _mm_set1_ps(idv[b]), dh = _mm_set1_ps(get_f16(yb));
    VI q[8];
    for (int i = 0; i < 8; ++i) {
      const VI t = cvtt_in_range(_mm_add_ps(_mm_mul_ps(x[8 * b + i], vid), half));  // in [0, 16]
      q[i] = seli(_mm_cmpgt_epi32(t, fifteen), fifteen, t);
      *worst = block_err(*worst, x[8 * b + i], _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(q[i], eight)), dh));
    }
    const VI lo = _mm_packus_epi16(_mm_packs_epi32(q[0], q[1]), _mm_packs_epi32(q[2], q[3]));
    const VI hi = _mm_packus_epi16(_mm_packs_epi32(q[4], q[5]), _mm_packs_epi32(q[6], q[7]));
    _mm_storeu_si128((VI*)(yb + 2), _mm_or_si128(lo, _mm_slli_epi16(hi, 4)));  // hi <= 15: no carry
  }
  return true;
}

bool q4_0_block_sse2(const float* xp, uint8_t* y, float* err) {
  V x[8];
  for (int i = 0; i < 8; ++i) x[i] = _mm_loadu_ps(xp + 4 * i);
  if (any_nan32(x)) return false;
  V am = vabs(x[0]);
  for (int i = 1; i < 8; ++i) am = _mm_max_ps(am, vabs(x[i]));
  const float amax = hmax(am);
  float max = 0.0f;  // ggml: the first value of the largest magnitude (0 when all are zero)
  if (amax > 0) {
    const V va = _mm_set1_ps(amax);
    for (int i = 0; i < 8; ++i)
      if (const int m = _mm_movemask_ps(_mm_cmpeq_ps(vabs(x[i]), va))) {
        max = xp[4 * i + __builtin_ctz(unsigned(m))];
        break;
      }
  }
  const float d = max / -8;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_f16(y, d);
  const V vid = _mm_set1_ps(id), dh = _mm_set1_ps(get_f16(y)), half = _mm_set1_ps(8.5f);
  VI q[8];
  V worst = _mm_setzero_ps();
  for (int i = 0; i < 8; ++i) {
    // uint8_t(min_(15, int(int8_t(trunc_i32(x * id + 8.5f)))))
    const VI t = cvtt_epi32(_mm_add_ps(_mm_mul_ps(x[i], vid), half));
    const VI s8 = _mm_srai_epi32(_mm_slli_epi32(t, 24), 24);
    q[i] = _mm_and_si128(seli(_mm_cmpgt_epi32(s8, _mm_set1_epi32(15)), _mm_set1_epi32(15), s8), _mm_set1_epi32(0xff));
    // dequantize_row_q4_0: float((nibble) - 8) * d
    const VI nib = _mm_sub_epi32(_mm_and_si128(q[i], _mm_set1_epi32(0x0f)), _mm_set1_epi32(8));
    worst = block_err(worst, x[i], _mm_mul_ps(_mm_cvtepi32_ps(nib), dh));
  }
  // byte j = uint8_t(q[j] | (q[j + 16] << 4))
  const VI lo = low_bytes16(q[0], q[1], q[2], q[3]), hi = low_bytes16(q[4], q[5], q[6], q[7]);
  const VI hi4 = _mm_and_si128(_mm_slli_epi16(hi, 4), _mm_set1_epi8(char(0xf0)));
  _mm_storeu_si128((VI*)(y + 2), _mm_or_si128(lo, hi4));
  *err = std::isinf(amax) ? INFINITY : hmax(worst);
  return true;
}
#endif  // LEAPCONV_GGML_SSE2

// ---- the sub-block searches, several sub-blocks a step (ggml_lanes.h) ----
// Sixteen lanes where the CPU has AVX-512F (ggml_quants_avx512.cpp; the sub-block searches), eight
// where it has AVX2 (ggml_quants_avx2.cpp), else four (SSE2, wasm simd128). force_search_lanes
// (tests) picks fewer even there.
int g_search_lanes = 0;  // 0: not decided yet

int cpu_search_lanes() {
#if LEAPCONV_GGML_AVX2
  if (!__builtin_cpu_supports("avx2")) return 4;
  return __builtin_cpu_supports("avx512f") ? 16 : 8;
#else
  return 4;
#endif
}
}  // namespace

int search_lanes() {
  if (g_search_lanes == 0) g_search_lanes = cpu_search_lanes();
  return g_search_lanes;
}
void force_search_lanes(int lanes) { g_search_lanes = lanes == 0 ? 0 : std::min(lanes, cpu_search_lanes()); }

namespace {

// make_qkx2_quants on `count` consecutive sub-blocks of n values (count a multiple of 4):
// sub-block j at x + n * j with weights w + n * j, its levels to L + n * j, scales[j], mins[j].
void qkx2_subblocks(int count, int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales, float* mins,
                    float rmin, float rdelta, int nstep, bool use_mad) {
  int j = 0;
#if LEAPCONV_GGML_AVX2
  if (search_lanes() == 16)
    for (; j + 16 <= count; j += 16)
      qkx2_group16_avx512(n, nmax, x + n * j, w + n * j, L + n * j, scales + j, mins + j, rmin, rdelta, nstep, use_mad);
  if (search_lanes() >= 8)
    for (; j + 8 <= count; j += 8)
      qkx2_group8_avx2(n, nmax, x + n * j, w + n * j, L + n * j, scales + j, mins + j, rmin, rdelta, nstep, use_mad);
#endif
  for (; j < count; j += 4)
    lanes::qkx2_group<4>(n, nmax, x + n * j, w + n * j, L + n * j, scales + j, mins + j, rmin, rdelta, nstep, use_mad);
}
// make_qx_quants(n, nmax, ..., rmse_type 1, w) on `count` consecutive sub-blocks (a multiple of
// 4; w null: weighted by x^2), levels plus nmax to L + n * j.
void qx_rmse1_subblocks(int count, int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales) {
  int j = 0;
#if LEAPCONV_GGML_AVX2
  if (search_lanes() == 16)
    for (; j + 16 <= count; j += 16) qx_rmse1_group16_avx512(n, nmax, x + n * j, w ? w + n * j : nullptr, L + n * j, scales + j);
  if (search_lanes() >= 8)
    for (; j + 8 <= count; j += 8) qx_rmse1_group8_avx2(n, nmax, x + n * j, w ? w + n * j : nullptr, L + n * j, scales + j);
#endif
  for (; j < count; j += 4) lanes::qx_rmse1_group<4>(n, nmax, x + n * j, w ? w + n * j : nullptr, L + n * j, scales + j);
}

inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// The 6-bit scales and mins of Q4_K / Q5_K (shared by both, as in ggml).
inline void pack_scales_k4(const float* scales, const float* mins, float max_scale, float max_min,
                           uint8_t* out /* 12 bytes */) {
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t ls = uint8_t(nearest_int(inv_scale * scales[j]));
    uint8_t lm = uint8_t(nearest_int(inv_min * mins[j]));
    ls = uint8_t(min_(63, int(ls)));
    lm = uint8_t(min_(63, int(lm)));
    if (j < 4) {
      out[j] = ls;
      out[j + 4] = lm;
    } else {
      out[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
      out[j - 4] = uint8_t(out[j - 4] | ((ls >> 4) << 6));
      out[j - 0] = uint8_t(out[j - 0] | ((lm >> 4) << 6));
    }
  }
}

// The sub-block search of Q2_K, Q4_K and Q5_K: make_qkx2_quants (make_qkx3_quants for the
// weighted quantizers, the same function) on each of the super-block's QK_K / N sub-blocks of N
// values, four sub-blocks a vector in SIMD. weights: QK_K, sub-block j's at N * j.
template <bool kSimd, int N>
void qkx_search(const float* x, const float* weights, int nmax, float rmin, float rdelta, int nstep,
                bool use_mad, uint8_t* L, float* scales, float* mins) {
  if (kSimd) {
    qkx2_subblocks(QK_K / N, N, nmax, x, weights, L, scales, mins, rmin, rdelta, nstep, use_mad);
    return;
  }
  uint8_t Laux[N];
  for (int j = 0; j < QK_K / N; ++j)
    scales[j] = make_qkx2_quants(N, nmax, x + N * j, weights + N * j, L + N * j, &mins[j], Laux,
                                 rmin, rdelta, nstep, use_mad);
}

// The weighted quantizers' weights for a K-quant super-block: qw[i] * sqrt(sigma2 + x[i]^2),
// sigma2 = sigma2_factor * sum(x^2) / QK_K (ggml: 1 for Q2_K, 2 for Q3_K, Q4_K, Q5_K); sw[j]
// the sum of sub-block j's N weights, in order.
template <int N>
void k_weights(const float* x, const float* qw, float sigma2_factor, float* weights, float* sw) {
  float sum_x2 = 0;
  for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
  const float sigma2 = sigma2_factor == 1.f ? sum_x2 / float(QK_K) : sigma2_factor * sum_x2 / float(QK_K);
  for (int j = 0; j < QK_K / N; ++j) {
    for (int l = 0; l < N; ++l) weights[N * j + l] = qw[N * j + l] * std::sqrt(sigma2 + x[N * j + l] * x[N * j + l]);
    float sumw = 0;
    for (int l = 0; l < N; ++l) sumw += weights[N * j + l];
    sw[j] = sumw;
  }
}

// Steps shared by Q4_K and Q5_K: sub-block scales/mins, the packed 6-bit scales, d and dmin
// (as halves in d16/dmin16), and the final L[] (0..nmax) from the rounded scales.
// qw null: ggml's quantize_row_q*_K_ref (rmin and nstep the type's); else its
// quantize_row_q*_K_impl with these importance weights: make_qkx3_quants over weights
// qw * sqrt(sigma2 + x^2), then make_qp_quants for the 6-bit scales and mins (their levels
// clamped to 63 only for Q5_K: clamp63).
template <bool kSimd>
void quantize_k4_superblock(const float* x, int nmax, float rmin, int nstep, uint8_t* L,
                            uint8_t* scales_out, uint16_t* d16, uint16_t* dmin16,
                            const float* qw = nullptr, bool clamp63 = false) {
  float weights[QK_K];  // weights of sub-block j at 32 * j
  float mins[QK_K / 32];
  float scales[QK_K / 32];
  if (!qw) {
    for (int j = 0; j < QK_K / 32; ++j) {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[32 * j + l] = av_x + std::fabs(x[32 * j + l]);
    }
    qkx_search<kSimd, 32>(x, weights, nmax, rmin, 0.1f, nstep, false, L, scales, mins);
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
      const float scale = scales[j];
      if (scale > max_scale) max_scale = scale;
      const float min = mins[j];
      if (min > max_min) max_min = min;
    }
    std::memset(scales_out, 0, 12);  // (ggml assigns every byte before or-ing into it anyway)
    pack_scales_k4(scales, mins, max_scale, max_min, scales_out);
    *d16 = fp32_to_fp16(max_scale / 63.f);
    *dmin16 = fp32_to_fp16(max_min / 63.f);
  } else {
    float sw[QK_K / 32];
    k_weights<32>(x, qw, 2.f, weights, sw);
    qkx_search<kSimd, 32>(x, weights, nmax, -0.9f, 0.05f, 36, false, L, scales, mins);
    uint8_t Ls[QK_K / 32], Lm[QK_K / 32];
    const float d_block = make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
    const float m_block = make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
    for (int j = 0; j < QK_K / 32; ++j) {
      uint8_t ls = Ls[j];
      uint8_t lm = Lm[j];
      if (clamp63) {
        ls = uint8_t(min_(63, int(ls)));
        lm = uint8_t(min_(63, int(lm)));
      }
      if (j < 4) {  // (Q4_K: a wrapped negative level spills into the neighbouring bits, as in ggml)
        scales_out[j] = ls;
        scales_out[j + 4] = lm;
      } else {
        scales_out[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
        scales_out[j - 4] = uint8_t(scales_out[j - 4] | ((ls >> 4) << 6));
        scales_out[j - 0] = uint8_t(scales_out[j - 0] | ((lm >> 4) << 6));
      }
    }
    *d16 = fp32_to_fp16(d_block);
    *dmin16 = fp32_to_fp16(m_block);
  }
  const float d_all = fp16_to_fp32(*d16);
  const float dmin_all = fp16_to_fp32(*dmin16);
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, scales_out, &sc, &m);
    const float d = d_all * float(sc);
    if (d == 0) continue;
    const float dm = dmin_all * float(m);
#if LEAPCONV_GGML_SSE2
    if (kSimd) {
      requantize4<true>(x + 32 * j, 32, dm, d, 0, nmax, 0, L + 32 * j);
      continue;
    }
#endif
    for (int ii = 0; ii < 32; ++ii) {
      int l = nearest_int((x[32 * j + ii] + dm) / d);
      l = max_(0, min_(nmax, l));
      L[32 * j + ii] = uint8_t(l);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------- fp16 / bf16

uint16_t fp32_to_fp16(float f) {
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;

  const uint32_t w = f32_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;

  base = f32_from_bits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = f32_bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return uint16_t((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

float fp16_to_fp32(uint16_t h) {
  // ggml computes normal values as bits * 2^-112 and subnormals as (0.5 + m/2^24) - 0.5, both
  // exact; the integer spelling here gives the same bits, and for NaN the quiet bit that
  // ggml's multiply sets (on x86 and ARM alike) without depending on how a target propagates
  // NaN payloads through arithmetic.
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  uint32_t r;
  if (e == 0x1f) {
    r = m ? 0x7FC00000u | (m << 13) : 0x7F800000u;
  } else if (e == 0) {
    r = f32_bits(float(m) * 0x1.0p-24f);  // exact: m < 2^10
  } else {
    r = ((e + 112) << 23) | (m << 13);
  }
  return f32_from_bits(sign | r);
}

uint16_t fp32_to_bf16(float s) {
  const uint32_t i = f32_bits(s);
  if ((i & 0x7fffffffu) > 0x7f800000u) return uint16_t((i >> 16) | 64);  // NaN: force quiet
  return uint16_t((i + (0x7fffu + ((i >> 16) & 1))) >> 16);
}

float bf16_to_fp32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

// ---------------------------------------------------------------- 32-value blocks

namespace {

// Q4_0 and Q5_0's scale source: the block's first value of the largest magnitude (0 if all are 0).
float signed_max32(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float v = x[j];
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  return max;
}

void q8_0_block_ref(const float* x, uint8_t* y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = max_(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_f16(y, d);
  for (int j = 0; j < 32; ++j) {
    const float x0 = x[j] * id;
    y[2 + j] = uint8_t(trunc_i32(std::round(x0)));
  }
}

void q4_0_block_ref(const float* x, uint8_t* y) {
  const float d = signed_max32(x) / -8;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_f16(y, d);
  for (int j = 0; j < 16; ++j) {
    const float x0 = x[0 + j] * id;
    const float x1 = x[16 + j] * id;
    const uint8_t xi0 = uint8_t(min_(15, int(int8_t(trunc_i32(x0 + 8.5f)))));
    const uint8_t xi1 = uint8_t(min_(15, int(int8_t(trunc_i32(x1 + 8.5f)))));
    y[2 + j] = uint8_t(xi0 | (xi1 << 4));
  }
}

// max |x - dequantize(y)| over one block, by the type's own dequantizer.
template <void (*DQ)(const uint8_t*, float*, int64_t)>
float block_error(const float* x, const uint8_t* y) {
  float back[32], worst = 0.0f;
  DQ(y, back, 32);
  for (int j = 0; j < 32; ++j) {
    const float e = std::fabs(x[j] - back[j]);
    worst = e > worst ? e : worst;
  }
  return worst;
}

bool finite32(const float* x) {
  for (int j = 0; j < 32; ++j)
    if (!std::isfinite(x[j])) return false;
  return true;
}

// A row block by block: the SIMD block where there is one (false: a NaN, do it the scalar way).
// The error is +inf when the row holds a NaN or an Inf (the bytes are still ggml's).
template <bool (*Simd)(const float*, uint8_t*, float*), void (*Ref)(const float*, uint8_t*),
          void (*DQ)(const uint8_t*, float*, int64_t), int64_t Bytes>
float quantize_blocks(const float* x, uint8_t* y, int64_t k, int64_t first = 0, float worst = 0.0f) {
  for (int64_t i = first; i < k / 32; ++i) {
    const float* xb = x + 32 * i;
    uint8_t* yb = y + Bytes * i;
    float e;
    if (!Simd(xb, yb, &e)) {  // (the SIMD blocks report an Inf themselves)
      Ref(xb, yb);
      e = finite32(xb) ? block_error<DQ>(xb, yb) : INFINITY;
    }
    if (e > worst) worst = e;
  }
  return worst;
}

#if LEAPCONV_GGML_SSE2
constexpr auto kQ8_0Simd = q8_0_block_sse2;
constexpr auto kQ4_0Simd = q4_0_block_sse2;
#else
bool no_simd(const float*, uint8_t*, float*) { return false; }
constexpr auto kQ8_0Simd = no_simd;
constexpr auto kQ4_0Simd = no_simd;
#endif

}  // namespace

namespace {
// A row four blocks at a time where it can, one block at a time for the rest and for any four
// the fast path declines (a NaN, an Inf, an overflowing 1/d among them).
#if LEAPCONV_GGML_SSE2
template <bool (*Four)(const float*, uint8_t*, V*), bool (*Simd)(const float*, uint8_t*, float*),
          void (*Ref)(const float*, uint8_t*), void (*DQ)(const uint8_t*, float*, int64_t), int64_t Bytes>
float quantize_row_fast(const float* x, uint8_t* y, int64_t k) {
  int64_t i = 0;
  float worst = 0.0f;
  V w = _mm_setzero_ps();
  for (; i + 4 <= k / 32; i += 4)
    if (!Four(x + 32 * i, y + Bytes * i, &w)) {
      const float e = quantize_blocks<Simd, Ref, DQ, Bytes>(x, y, 32 * (i + 4), i, 0.0f);
      worst = e > worst ? e : worst;
    }
  const float wv = hmax(w);
  return quantize_blocks<Simd, Ref, DQ, Bytes>(x, y, k, i, wv > worst ? wv : worst);
}
#endif
}  // namespace

float quantize_row_q8_0_err(const float* x, uint8_t* y, int64_t k) {
#if LEAPCONV_GGML_SSE2
  return quantize_row_fast<q8_0_4blocks_sse2, kQ8_0Simd, q8_0_block_ref, dequantize_row_q8_0, kQ8_0BlockBytes>(x, y, k);
#else
  return quantize_blocks<kQ8_0Simd, q8_0_block_ref, dequantize_row_q8_0, kQ8_0BlockBytes>(x, y, k);
#endif
}
float quantize_row_q4_0_err(const float* x, uint8_t* y, int64_t k) {
#if LEAPCONV_GGML_SSE2
  return quantize_row_fast<q4_0_4blocks_sse2, kQ4_0Simd, q4_0_block_ref, dequantize_row_q4_0, kQ4_0BlockBytes>(x, y, k);
#else
  return quantize_blocks<kQ4_0Simd, q4_0_block_ref, dequantize_row_q4_0, kQ4_0BlockBytes>(x, y, k);
#endif
}
void quantize_row_q8_0(const float* x, uint8_t* y, int64_t k) { quantize_row_q8_0_err(x, y, k); }
void quantize_row_q4_0(const float* x, uint8_t* y, int64_t k) { quantize_row_q4_0_err(x, y, k); }
// The reference loops alone (tests hold the SIMD path to them).
void quantize_row_q8_0_scalar(const float* x, uint8_t* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; ++i) q8_0_block_ref(x + 32 * i, y + kQ8_0BlockBytes * i);
}
void quantize_row_q4_0_scalar(const float* x, uint8_t* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; ++i) q4_0_block_ref(x + 32 * i, y + kQ4_0BlockBytes * i);
}

void quantize_row_q4_1(const float* x, uint8_t* y, int64_t k) {
  const int64_t nb = k / 32;
  for (int64_t i = 0; i < nb; ++i, x += 32, y += kQ4_1BlockBytes) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      const float v = x[j];
      if (v < min) min = v;
      if (v > max) max = v;
    }
    const float d = (max - min) / 15;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(y, d);
    put_f16(y + 2, min);
    for (int j = 0; j < 16; ++j) {
      const float x0 = (x[0 + j] - min) * id;
      const float x1 = (x[16 + j] - min) * id;
      const uint8_t xi0 = uint8_t(min_(15, int(int8_t(trunc_i32(x0 + 0.5f)))));
      const uint8_t xi1 = uint8_t(min_(15, int(int8_t(trunc_i32(x1 + 0.5f)))));
      y[4 + j] = uint8_t(xi0 | (xi1 << 4));
    }
  }
}

void quantize_row_q5_0(const float* x, uint8_t* y, int64_t k) {
  const int64_t nb = k / 32;
  for (int64_t i = 0; i < nb; ++i, x += 32, y += kQ5_0BlockBytes) {
    const float d = signed_max32(x) / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(y, d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[0 + j] * id;
      const float x1 = x[16 + j] * id;
      const uint8_t xi0 = uint8_t(min_(31, int(int8_t(trunc_i32(x0 + 16.5f)))));
      const uint8_t xi1 = uint8_t(min_(31, int(int8_t(trunc_i32(x1 + 16.5f)))));
      y[6 + j] = uint8_t((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    put_u32(y + 2, qh);
  }
}

void quantize_row_q5_1(const float* x, uint8_t* y, int64_t k) {
  const int64_t nb = k / 32;
  for (int64_t i = 0; i < nb; ++i, x += 32, y += kQ5_1BlockBytes) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      const float v = x[j];
      if (v < min) min = v;
      if (v > max) max = v;
    }
    const float d = (max - min) / 31;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(y, d);
    put_f16(y + 2, min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const float x0 = (x[0 + j] - min) * id;
      const float x1 = (x[16 + j] - min) * id;
      const uint8_t xi0 = uint8_t(trunc_i32(x0 + 0.5f));
      const uint8_t xi1 = uint8_t(trunc_i32(x1 + 0.5f));
      y[8 + j] = uint8_t((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    put_u32(y + 4, qh);
  }
}

// ---- the 32-value types with importance weights (ggml's quantize_row_q*_impl) ----
// Structurally unlike the reference quantizers above: every block's scale comes from a weighted
// search (make_qx_quants for Q4_0 / Q5_0, make_qkx3_quants with a min for Q4_1 / Q5_1) with
// weights qw[j] * sqrt(sigma2 + x[j]^2), sigma2 the mean square of the whole row (not of the
// block), and the levels are the search's own, not re-rounded against the f16 scale.
namespace {

// One block's bytes from its levels L[32] (0..15 or 0..31), its scale d and its min.
void pack_q4_0_w(const uint8_t* L, float d, float, uint8_t* y) {
  put_f16(y, d);
  for (int j = 0; j < 16; ++j) y[2 + j] = uint8_t(L[j] | (L[j + 16] << 4));
}
void pack_q4_1_w(const uint8_t* L, float d, float the_min, uint8_t* y) {
  put_f16(y, d);
  put_f16(y + 2, -the_min);
  for (int j = 0; j < 16; ++j) y[4 + j] = uint8_t(L[j] | (L[j + 16] << 4));
}
template <int Qh, int Qs>
void pack_q5_w(const uint8_t* L, uint8_t* y) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const uint8_t xi0 = L[j];
    const uint8_t xi1 = L[j + 16];
    y[Qs + j] = uint8_t((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
  }
  put_u32(y + Qh, qh);
}
void pack_q5_0_w(const uint8_t* L, float d, float, uint8_t* y) {
  put_f16(y, d);
  pack_q5_w<2, 6>(L, y);
}
void pack_q5_1_w(const uint8_t* L, float d, float the_min, uint8_t* y) {
  put_f16(y, d);
  put_f16(y + 2, -the_min);
  pack_q5_w<4, 8>(L, y);
}

// kMin: make_qkx3_quants(32, kNmax, ..., -0.9, 0.05, 36, false) (Q4_1, Q5_1); else
// make_qx_quants(32, kNmax, ..., rmse_type 1, weights) (Q4_0: 8, Q5_0: 16). Sixteen, eight or four
// blocks a step in SIMD (qkx2_subblocks), the rest one at a time.
template <bool kSimd, int kNmax, bool kMin, void (*Pack)(const uint8_t*, float, float, uint8_t*), int64_t Bytes>
void quantize_row_legacy_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  float sum_x2 = 0;
  for (int64_t j = 0; j < k; ++j) sum_x2 += x[j] * x[j];
  const float sigma2 = sum_x2 / float(k);
  const int64_t nb = k / 32;
  int64_t ib = 0;
  uint8_t L[32];
  if (kSimd) {
    float xw[16 * 32], d[16], m[16];
    uint8_t Lg[16 * 32];
    for (const int g : {search_lanes(), 4})  // blocks a step: sixteen (AVX-512), eight (AVX2) or four, then four
      for (; ib + g <= nb; ib += g) {
        const float* xb = x + 32 * ib;
        for (int j = 0; j < 32 * g; ++j) xw[j] = qw[32 * ib + j] * std::sqrt(sigma2 + xb[j] * xb[j]);
        if (kMin)
          qkx2_subblocks(g, 32, kNmax, xb, xw, Lg, d, m, -0.9f, 0.05f, 36, false);
        else
          qx_rmse1_subblocks(g, 32, kNmax, xb, xw, Lg, d);
        for (int b = 0; b < g; ++b) Pack(Lg + 32 * b, d[b], kMin ? m[b] : 0.0f, y + Bytes * (ib + b));
      }
  }
  float weight[32];
  for (; ib < nb; ++ib) {
    const float* xb = x + 32 * ib;
    for (int j = 0; j < 32; ++j) weight[j] = qw[32 * ib + j] * std::sqrt(sigma2 + xb[j] * xb[j]);
    float d, the_min = 0;
    if (kMin) {
      uint8_t Laux[32];
      d = make_qkx2_quants(32, kNmax, xb, weight, L, &the_min, Laux, -0.9f, 0.05f, 36, false);
    } else {
      int8_t Li[32];
      d = make_qx_quants(32, kNmax, xb, Li, 1, weight);
      for (int j = 0; j < 32; ++j) L[j] = uint8_t(Li[j]);
    }
    Pack(L, d, the_min, y + Bytes * ib);
  }
}

}  // namespace

void quantize_row_q4_0_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_legacy_w<true, 8, false, pack_q4_0_w, kQ4_0BlockBytes>(x, y, k, qw);
}
void quantize_row_q4_1_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_legacy_w<true, 15, true, pack_q4_1_w, kQ4_1BlockBytes>(x, y, k, qw);
}
void quantize_row_q5_0_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_legacy_w<true, 16, false, pack_q5_0_w, kQ5_0BlockBytes>(x, y, k, qw);
}
void quantize_row_q5_1_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_legacy_w<true, 31, true, pack_q5_1_w, kQ5_1BlockBytes>(x, y, k, qw);
}
namespace scalar {
void quantize_row_q4_0_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_legacy_w<false, 8, false, pack_q4_0_w, kQ4_0BlockBytes>(x, y, k, qw);
}
void quantize_row_q4_1_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_legacy_w<false, 15, true, pack_q4_1_w, kQ4_1BlockBytes>(x, y, k, qw);
}
void quantize_row_q5_0_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_legacy_w<false, 16, false, pack_q5_0_w, kQ5_0BlockBytes>(x, y, k, qw);
}
void quantize_row_q5_1_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_legacy_w<false, 31, true, pack_q5_1_w, kQ5_1BlockBytes>(x, y, k, qw);
}
}  // namespace scalar

void dequantize_row_q8_0(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / 32;
  for (int64_t i = 0; i < nb; ++i, x += kQ8_0BlockBytes, y += 32) {
    const float d = get_f16(x);
    for (int j = 0; j < 32; ++j) y[j] = float(int8_t(x[2 + j])) * d;
  }
}

void dequantize_row_q4_0(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / 32;
  for (int64_t i = 0; i < nb; ++i, x += kQ4_0BlockBytes, y += 32) {
    const float d = get_f16(x);
    for (int j = 0; j < 16; ++j) {
      const int x0 = (x[2 + j] & 0x0F) - 8;
      const int x1 = (x[2 + j] >> 4) - 8;
      y[j + 0] = float(x0) * d;
      y[j + 16] = float(x1) * d;
    }
  }
}

void dequantize_row_q4_1(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / 32;
  for (int64_t i = 0; i < nb; ++i, x += kQ4_1BlockBytes, y += 32) {
    const float d = get_f16(x);
    const float m = get_f16(x + 2);
    for (int j = 0; j < 16; ++j) {
      const int x0 = x[4 + j] & 0x0F;
      const int x1 = x[4 + j] >> 4;
      y[j + 0] = float(x0) * d + m;
      y[j + 16] = float(x1) * d + m;
    }
  }
}

void dequantize_row_q5_0(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / 32;
  for (int64_t i = 0; i < nb; ++i, x += kQ5_0BlockBytes, y += 32) {
    const float d = get_f16(x);
    const uint32_t qh = get_u32(x + 2);
    for (int j = 0; j < 16; ++j) {
      const uint8_t xh_0 = uint8_t(((qh >> (j + 0)) << 4) & 0x10);
      const uint8_t xh_1 = uint8_t((qh >> (j + 12)) & 0x10);
      const int32_t x0 = ((x[6 + j] & 0x0F) | xh_0) - 16;
      const int32_t x1 = ((x[6 + j] >> 4) | xh_1) - 16;
      y[j + 0] = float(x0) * d;
      y[j + 16] = float(x1) * d;
    }
  }
}

void dequantize_row_q5_1(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / 32;
  for (int64_t i = 0; i < nb; ++i, x += kQ5_1BlockBytes, y += 32) {
    const float d = get_f16(x);
    const float m = get_f16(x + 2);
    const uint32_t qh = get_u32(x + 4);
    for (int j = 0; j < 16; ++j) {
      const uint8_t xh_0 = uint8_t(((qh >> (j + 0)) << 4) & 0x10);
      const uint8_t xh_1 = uint8_t((qh >> (j + 12)) & 0x10);
      const int x0 = (x[8 + j] & 0x0F) | xh_0;
      const int x1 = (x[8 + j] >> 4) | xh_1;
      y[j + 0] = float(x0) * d + m;
      y[j + 16] = float(x1) * d + m;
    }
  }
}

// ---------------------------------------------------------------- MXFP4 (32 values, E8M0 scale)

float e8m0_to_fp32_half(uint8_t e) { return f32_from_bits(e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23); }

namespace {

// floorf(log2f(a)) for a > 0 (+inf for +inf), as ggml computes it, with no libm: log2f returns
// the float nearest log2(a) (glibc's and musl's, wherever it decides the floor), which is the
// exact floor n of log2(a) except just below 2^(n+1), where log2(a) may lie within half a float
// step of n + 1 and round up to it (8 - 2^-21: log2 = 3 - 8.6e-8, floats near 3 are 2.4e-7
// apart). Below 2^up, up - log2(a) = -log2(r) with r = a / 2^up, which is under half a step
// 2^(p-24) (the floats just below up lie in [2^p, 2^(p+1)) in magnitude) exactly when 1 - r is
// under 2^(p-24) * ln 2, to within 2^-18 of one of a's steps, while no float comes closer to that
// bound than 0.09 of a step. All exact in double; checked against glibc's log2f over every
// positive float.
float floor_log2f(float a) {
  const uint32_t u = f32_bits(a);
  if (u >= 0x7f800000u) return a;
  const int n = u >= 0x00800000u ? int(u >> 23) - 127 : 31 - std::countl_zero(u) - 149;  // exact
  const int up = n + 1;
  if (up == 0) return float(n);  // floats just below 0 are as fine as needed
  const int p = up == 1 ? -1 : 31 - std::countl_zero(uint32_t(up > 0 ? up - 1 : -up));
  const double r = double(a) * std::ldexp(1.0, -up);
  return 1.0 - r < std::ldexp(0.6931471805599453, p - 24) ? float(up) : float(n);
}

// ggml's best_index_mxfp4: the level nearest x as |level * d - x|, the first of equals.
inline uint8_t nearest_mxfp4(float x, float d) {
  int best = 0;
  float best_err = std::fabs(float(kMxfp4Levels[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(float(kMxfp4Levels[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return uint8_t(best);
}

}  // namespace

void quantize_row_mxfp4(const float* x, uint8_t* y, int64_t k) {
  const int64_t nb = k / 32;
  for (int64_t i = 0; i < nb; ++i, x += 32, y += kMXFP4BlockBytes) {
    float amax = 0.0f;  // (a NaN never wins the comparison)
    for (int j = 0; j < 32; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    // float arithmetic, then ggml's (uint8_t) cast as x86 does it (an Inf max gives 0)
    const uint8_t e = amax > 0.0f ? uint8_t(trunc_i32(floor_log2f(amax) - 2 + 127)) : 0;
    const float d = e8m0_to_fp32_half(e);
    y[0] = e;
    for (int j = 0; j < 16; ++j) y[1 + j] = uint8_t(nearest_mxfp4(x[j], d) | (nearest_mxfp4(x[16 + j], d) << 4));
  }
}

void dequantize_row_mxfp4(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / 32;
  for (int64_t i = 0; i < nb; ++i, x += kMXFP4BlockBytes, y += 32) {
    const float d = e8m0_to_fp32_half(x[0]);
    for (int j = 0; j < 16; ++j) {
      y[j + 0] = float(kMxfp4Levels[x[1 + j] & 0x0F]) * d;
      y[j + 16] = float(kMxfp4Levels[x[1 + j] >> 4]) * d;
    }
  }
}

// ---------------------------------------------------------------- NVFP4 (64 values, 4 UE4M3 scales)

float ue4m3_to_fp32(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int exp = (x >> 3) & 0xF, man = x & 0x7;
  const float raw = exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
  return raw * 0.5f;
}

uint8_t fp32_to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  if (x > 448.0f) x = 448.0f;
  const uint32_t bits = f32_bits(x);
  const int fp32_exp = int((bits >> 23) & 0xFF) - 127, fp32_man = int((bits >> 20) & 0x7);
  int e = fp32_exp + 7;
  if (e <= 0) {  // subnormal: man * 2^-9
    const int man = trunc_i32(x * 512.0f + 0.5f);
    return man < 1 ? 0 : uint8_t(man > 7 ? 7 : man);
  }
  if (e >= 15) return 0x7E;
  int man = fp32_man + int((bits >> 19) & 1);
  if (man > 7) {
    man = 0;
    if (++e >= 15) return 0x7E;
  }
  return uint8_t((e << 3) | man);
}

void quantize_row_nvfp4(const float* x, uint8_t* y, int64_t k) {
  const int64_t nb = k / kNVFP4BlockValues;
  for (int64_t i = 0; i < nb; ++i, y += kNVFP4BlockBytes) {
    for (int s = 0; s < 4; ++s, x += 16) {
      float amax = 0.0f;  // (a NaN never wins the comparison)
      for (int j = 0; j < 16; ++j)
        if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
      y[s] = fp32_to_ue4m3(amax / 6.0f);
      const float d = ue4m3_to_fp32(y[s]);
      for (int j = 0; j < 8; ++j) y[4 + 8 * s + j] = uint8_t(nearest_mxfp4(x[j], d) | (nearest_mxfp4(x[8 + j], d) << 4));
    }
  }
}

void dequantize_row_nvfp4(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / kNVFP4BlockValues;
  for (int64_t i = 0; i < nb; ++i, x += kNVFP4BlockBytes) {
    for (int s = 0; s < 4; ++s, y += 16) {
      const float d = ue4m3_to_fp32(x[s]);
      for (int j = 0; j < 8; ++j) {
        y[j + 0] = float(kMxfp4Levels[x[4 + 8 * s + j] & 0x0F]) * d;
        y[j + 8] = float(kMxfp4Levels[x[4 + 8 * s + j] >> 4]) * d;
      }
    }
  }
}

// ---------------------------------------------------------------- K-quants (256 values)

// block_q2_K: scales[16] qs[64] d dmin
// qw null: ggml's quantize_row_q2_K_ref; else its quantize_row_q2_K_impl (importance weights
// qw[k]): make_qkx3_quants over qw * sqrt(sigma2 + x^2) with a finer scale search, then
// make_qp_quants for the 4-bit scales and mins in place of ggml's max-based rounding.
template <bool kSimd>
static void quantize_row_q2_K_impl(const float* x, uint8_t* y, int64_t k, const float* qw = nullptr) {
  const int64_t nb = k / QK_K;
  uint8_t L[QK_K];
  float weights[QK_K];
  float mins[QK_K / 16];
  float scales[QK_K / 16];
  const float q4scale = 15.f;

  for (int64_t i = 0; i < nb; ++i, x += QK_K, y += kQ2_KBlockBytes) {
    uint8_t* const ys = y;
    uint8_t* const qs = y + 16;
    uint16_t d16, dmin16;
    if (!qw) {
      for (int l = 0; l < QK_K; ++l) weights[l] = std::fabs(x[l]);
      qkx_search<kSimd, 16>(x, weights, 3, -0.5f, 0.1f, 15, true, L, scales, mins);
      float max_scale = 0;
      float max_min = 0;
      for (int j = 0; j < QK_K / 16; ++j) {
        const float scale = scales[j];
        if (scale > max_scale) max_scale = scale;
        const float min = mins[j];
        if (min > max_min) max_min = min;
      }
      if (max_scale > 0) {
        const float iscale = q4scale / max_scale;
        for (int j = 0; j < QK_K / 16; ++j) ys[j] = uint8_t(nearest_int(iscale * scales[j]));
        d16 = fp32_to_fp16(max_scale / q4scale);
      } else {
        for (int j = 0; j < QK_K / 16; ++j) ys[j] = 0;
        d16 = fp32_to_fp16(0.f);
      }
      if (max_min > 0) {
        const float iscale = q4scale / max_min;
        for (int j = 0; j < QK_K / 16; ++j) {
          const int l = nearest_int(iscale * mins[j]);
          ys[j] = uint8_t(ys[j] | (unsigned(l) << 4));  // ggml's `l << 4`: the same low byte, no UB for l < 0
        }
        dmin16 = fp32_to_fp16(max_min / q4scale);
      } else {
        dmin16 = fp32_to_fp16(0.f);
      }
    } else {
      float sw[QK_K / 16];
      k_weights<16>(x, qw + QK_K * i, 1.f, weights, sw);
      qkx_search<kSimd, 16>(x, weights, 3, -0.9f, 0.05f, 36, false, L, scales, mins);
      uint8_t Ls[QK_K / 16], Lm[QK_K / 16];
      const float dm = make_qp_quants(QK_K / 16, 15, scales, Ls, sw);
      const float mm = make_qp_quants(QK_K / 16, 15, mins, Lm, sw);
      d16 = fp32_to_fp16(dm);
      dmin16 = fp32_to_fp16(mm);
      for (int j = 0; j < QK_K / 16; ++j) ys[j] = uint8_t(Ls[j] | (Lm[j] << 4));
    }
    const float d_all = fp16_to_fp32(d16);
    const float dmin_all = fp16_to_fp32(dmin16);
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = d_all * float(ys[j] & 0xF);
      if (d == 0) continue;
      const float dm = dmin_all * float(ys[j] >> 4);
#if LEAPCONV_GGML_SSE2
      if (kSimd) {
        requantize4<true>(x + 16 * j, 16, dm, d, 0, 3, 0, L + 16 * j);
        continue;
      }
#endif
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int((x[16 * j + ii] + dm) / d);
        l = max_(0, min_(3, l));
        L[16 * j + ii] = uint8_t(l);
      }
    }
    for (int j = 0; j < QK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        qs[j / 4 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                (L[j + l + 96] << 6));
      }
    }
    put_u16(y + 80, d16);
    put_u16(y + 82, dmin16);
  }
}

void dequantize_row_q2_K(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i, x += kQ2_KBlockBytes) {
    const uint8_t* scales = x;
    const float d = get_f16(x + 80);
    const float min = get_f16(x + 82);
    const uint8_t* q = x + 16;
    int is = 0;
    for (int n = 0; n < QK_K; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        uint8_t sc = scales[is++];
        float dl = d * float(sc & 0xF), ml = min * float(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * float(int8_t((q[l] >> shift) & 3)) - ml;
        sc = scales[is++];
        dl = d * float(sc & 0xF);
        ml = min * float(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * float(int8_t((q[l + 16] >> shift) & 3)) - ml;
        shift += 2;
      }
      q += 32;
    }
  }
}

// block_q3_K: hmask[32] qs[64] scales[12] d
// Sub-block j's 6-bit scale level l (0..63, stored less 32) into Q3_K's 12 scale bytes (zeroed).
inline void put_q3_K_scale(uint8_t* ys, int j, int l) {
  if (j < 8) {
    ys[j] = uint8_t(l & 0xF);
  } else {
    ys[j - 8] = uint8_t(ys[j - 8] | ((l & 0xF) << 4));
  }
  l >>= 4;
  ys[j % 4 + 8] = uint8_t(ys[j % 4 + 8] | (l << (2 * (j / 4))));
}

// qw null: ggml's quantize_row_q3_K_ref; else its quantize_row_q3_K_impl: make_qx_quants with
// weights qw * sqrt(sigma2 + x^2) per sub-block (in place of make_q3_quants' refinement), and the
// 16 scales quantized by make_qx_quants again, weighted by the sub-blocks' weight sums (in place
// of the max-based rounding).
template <bool kSimd>
static void quantize_row_q3_K_impl(const float* x, uint8_t* y, int64_t k, const float* qw = nullptr) {
  const int64_t nb = k / QK_K;
  int8_t L[QK_K];
  float scales[QK_K / 16];

  for (int64_t i = 0; i < nb; ++i, x += QK_K, y += kQ3_KBlockBytes) {
    uint8_t* const hmask = y;
    uint8_t* const qs = y + 32;
    uint8_t* const ys = y + 96;
    std::memset(ys, 0, 12);
    uint16_t d16;
    if (!qw) {
      float max_scale = 0;
      float amax = 0;
      for (int j = 0; j < QK_K / 16; ++j) {
        scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
        const float scale = std::fabs(scales[j]);
        if (scale > amax) {
          amax = scale;
          max_scale = scales[j];
        }
      }
      if (max_scale != 0) {
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < QK_K / 16; ++j) {
          int8_t l = int8_t(nearest_int(iscale * scales[j]));
          l = int8_t(max_(-32, min_(31, int(l))) + 32);
          put_q3_K_scale(ys, j, l);
        }
        d16 = fp32_to_fp16(1 / iscale);
      } else {
        d16 = fp32_to_fp16(0.f);
      }
    } else {
      float weights[QK_K], sw[QK_K / 16];
      k_weights<16>(x, qw + QK_K * i, 2.f, weights, sw);
      if (kSimd)
        qx_rmse1_subblocks(QK_K / 16, 16, 4, x, weights, reinterpret_cast<uint8_t*>(L), scales);
      else
        for (int j = 0; j < QK_K / 16; ++j)
          scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, 1, weights + 16 * j);
      int8_t Ls[QK_K / 16];
      const float d_block = make_qx_quants(QK_K / 16, 32, scales, Ls, 1, sw);
      for (int j = 0; j < QK_K / 16; ++j) put_q3_K_scale(ys, j, Ls[j]);
      d16 = fp32_to_fp16(d_block);
    }

    const float d_all = fp16_to_fp32(d16);
    for (int j = 0; j < QK_K / 16; ++j) {
      int8_t sc = int8_t(j < 8 ? ys[j] & 0xF : ys[j - 8] >> 4);
      sc = int8_t((sc | (((ys[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
      const float d = d_all * float(sc);
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int(x[16 * j + ii] / d);
        l = max_(-4, min_(3, l));
        L[16 * j + ii] = int8_t(l + 4);
      }
    }

    std::memset(hmask, 0, QK_K / 8);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < QK_K; ++j) {
      if (L[j] > 3) {
        hmask[m] = uint8_t(hmask[m] | hm);
        L[j] = int8_t(L[j] - 4);
      }
      if (++m == QK_K / 8) {
        m = 0;
        hm = uint8_t(hm << 1);
      }
    }
    for (int j = 0; j < QK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        qs[j / 4 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                (L[j + l + 96] << 6));
      }
    }
    put_u16(y + 108, d16);
  }
}

void dequantize_row_q3_K(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  const uint32_t kmask1 = 0x03030303;
  const uint32_t kmask2 = 0x0f0f0f0f;
  for (int64_t i = 0; i < nb; ++i, x += kQ3_KBlockBytes) {
    const float d_all = get_f16(x + 108);
    const uint8_t* q = x + 32;
    const uint8_t* hm = x;
    uint8_t m = 1;

    uint32_t aux[4];
    aux[0] = get_u32(x + 96);
    aux[1] = get_u32(x + 100);
    aux[2] = get_u32(x + 104);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];  // aux's bytes in memory (little-endian) order
    for (int b = 0; b < 16; ++b) scales[b] = int8_t(uint8_t(aux[b / 4] >> (8 * (b % 4))));

    int is = 0;
    for (int n = 0; n < QK_K; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        float dl = d_all * float(scales[is++] - 32);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * float(int8_t((q[l + 0] >> shift) & 3) - ((hm[l + 0] & m) ? 0 : 4));
        dl = d_all * float(scales[is++] - 32);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * float(int8_t((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
        shift += 2;
        m = uint8_t(m << 1);
      }
      q += 32;
    }
  }
}

// block_q4_K: d dmin scales[12] qs[128]
template <bool kSimd>
static void quantize_row_q4_K_impl(const float* x, uint8_t* y, int64_t k, const float* qw = nullptr) {
  const int64_t nb = k / QK_K;
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i, x += QK_K, y += kQ4_KBlockBytes) {
    uint16_t d16, dmin16;
    quantize_k4_superblock<kSimd>(x, 15, -1.f, 20, L, y + 4, &d16, &dmin16, qw ? qw + QK_K * i : nullptr, false);
    put_u16(y, d16);
    put_u16(y + 2, dmin16);
    uint8_t* q = y + 16;
    for (int j = 0; j < QK_K; j += 64) {
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
      q += 32;
    }
  }
}

void dequantize_row_q4_K(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i, x += kQ4_KBlockBytes) {
    const uint8_t* q = x + 16;
    const uint8_t* scales = x + 4;
    const float d = get_f16(x);
    const float min = get_f16(x + 2);
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < QK_K; j += 64) {
      get_scale_min_k4(is + 0, scales, &sc, &m);
      const float d1 = d * float(sc);
      const float m1 = min * float(m);
      get_scale_min_k4(is + 1, scales, &sc, &m);
      const float d2 = d * float(sc);
      const float m2 = min * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

// block_q5_K: d dmin scales[12] qh[32] qs[128]
template <bool kSimd>
static void quantize_row_q5_K_impl(const float* x, uint8_t* y, int64_t k, const float* qw = nullptr) {
  const int64_t nb = k / QK_K;
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i, x += QK_K, y += kQ5_KBlockBytes) {
    uint16_t d16, dmin16;
    quantize_k4_superblock<kSimd>(x, 31, -0.5f, 15, L, y + 4, &d16, &dmin16, qw ? qw + QK_K * i : nullptr, true);
    put_u16(y, d16);
    put_u16(y + 2, dmin16);
    uint8_t* const qh = y + 16;
    uint8_t* ql = y + 48;
    std::memset(qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < QK_K; n += 64) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] = uint8_t(qh[j] | m1);
        }
        int l2 = L[n + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] = uint8_t(qh[j] | m2);
        }
        ql[j] = uint8_t(l1 | (l2 << 4));
      }
      m1 = uint8_t(m1 << 2);
      m2 = uint8_t(m2 << 2);
      ql += 32;
    }
  }
}

void dequantize_row_q5_K(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i, x += kQ5_KBlockBytes) {
    const uint8_t* ql = x + 48;
    const uint8_t* qh = x + 16;
    const uint8_t* scales = x + 4;
    const float d = get_f16(x);
    const float min = get_f16(x + 2);
    int is = 0;
    uint8_t sc, m;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < QK_K; j += 64) {
      get_scale_min_k4(is + 0, scales, &sc, &m);
      const float d1 = d * float(sc);
      const float m1 = min * float(m);
      get_scale_min_k4(is + 1, scales, &sc, &m);
      const float d2 = d * float(sc);
      const float m2 = min * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 = uint8_t(u1 << 2);
      u2 = uint8_t(u2 << 2);
    }
  }
}

// block_q6_K: ql[128] qh[64] scales[16] (int8) d
// qw null: ggml's quantize_row_q6_K_ref; else its quantize_row_q6_K_impl, which is the same
// but for make_qx_quants weighing each value by qw itself (not qw * sqrt(sigma2 + x^2) as the
// other K-quants do: ggml has that line commented out).
template <bool kSimd>
static void quantize_row_q6_K_impl(const float* x, uint8_t* y, int64_t k, const float* qw = nullptr) {
  const int64_t nb = k / QK_K;
  int8_t L[QK_K];
  float scales[QK_K / 16];

  for (int64_t i = 0; i < nb; ++i, x += QK_K, y += kQ6_KBlockBytes) {
    float max_scale = 0;
    float max_abs_scale = 0;
    if (kSimd) qx_rmse1_subblocks(QK_K / 16, 16, 32, x, qw ? qw + QK_K * i : nullptr, reinterpret_cast<uint8_t*>(L), scales);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const float scale = kSimd ? scales[ib]
                              : make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, qw ? qw + QK_K * i + 16 * ib : nullptr);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }

    if (max_abs_scale < GROUP_MAX_EPS) {
      std::memset(y, 0, kQ6_KBlockBytes);
      put_u16(y + 208, fp32_to_fp16(0.f));
      continue;
    }

    uint8_t* ys = y + 192;
    const float iscale = -128.f / max_scale;
    const uint16_t d16 = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib)
      ys[ib] = uint8_t(int8_t(min_(127, nearest_int(iscale * scales[ib]))));

    const float d_all = fp16_to_fp32(d16);
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = d_all * float(int8_t(ys[j]));
      if (d == 0) continue;
#if LEAPCONV_GGML_SSE2
      if (kSimd) {
        requantize4<false>(x + 16 * j, 16, 0.0f, d, -32, 31, 32,
                           reinterpret_cast<uint8_t*>(L + 16 * j));
        continue;
      }
#endif
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int(x[16 * j + ii] / d);
        l = max_(-32, min_(31, l));
        L[16 * j + ii] = int8_t(l + 32);
      }
    }

    uint8_t* ql = y;
    uint8_t* qh = y + 128;
    for (int j = 0; j < QK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF;
        const uint8_t q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF;
        const uint8_t q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = uint8_t(q1 | (q3 << 4));
        ql[l + 32] = uint8_t(q2 | (q4 << 4));
        qh[l] = uint8_t((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                        ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
      ql += 64;
      qh += 32;
    }
    put_u16(y + 208, d16);
  }
}

void dequantize_row_q6_K(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i, x += kQ6_KBlockBytes) {
    const float d = get_f16(x + 208);
    const uint8_t* ql = x;
    const uint8_t* qh = x + 128;
    const uint8_t* sc = x + 192;
    for (int n = 0; n < QK_K; n += 128) {
      for (int is = 0; is < 2; ++is) {  // (sixteen values a scale: the loop below vectorizes)
        // d * sc * q is (d * sc) * q: the same products as ggml's
        const float s1 = d * float(int8_t(sc[is + 0])), s2 = d * float(int8_t(sc[is + 2]));
        const float s3 = d * float(int8_t(sc[is + 4])), s4 = d * float(int8_t(sc[is + 6]));
        for (int l = 16 * is; l < 16 * is + 16; ++l) {
          const int8_t q1 = int8_t(int8_t((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
          const int8_t q2 = int8_t(int8_t((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
          const int8_t q3 = int8_t(int8_t((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
          const int8_t q4 = int8_t(int8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
          y[l + 0] = s1 * float(q1);
          y[l + 32] = s2 * float(q2);
          y[l + 64] = s3 * float(q3);
          y[l + 96] = s4 * float(q4);
        }
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void quantize_row_q3_K(const float* x, uint8_t* y, int64_t k) { quantize_row_q3_K_impl<true>(x, y, k); }
void quantize_row_q2_K(const float* x, uint8_t* y, int64_t k) { quantize_row_q2_K_impl<true>(x, y, k); }
void quantize_row_q4_K(const float* x, uint8_t* y, int64_t k) { quantize_row_q4_K_impl<true>(x, y, k); }
void quantize_row_q5_K(const float* x, uint8_t* y, int64_t k) { quantize_row_q5_K_impl<true>(x, y, k); }
void quantize_row_q6_K(const float* x, uint8_t* y, int64_t k) { quantize_row_q6_K_impl<true>(x, y, k); }

void quantize_row_q2_K_w(const float* x, uint8_t* y, int64_t k, const float* qw) { quantize_row_q2_K_impl<true>(x, y, k, qw); }
void quantize_row_q3_K_w(const float* x, uint8_t* y, int64_t k, const float* qw) { quantize_row_q3_K_impl<true>(x, y, k, qw); }
void quantize_row_q4_K_w(const float* x, uint8_t* y, int64_t k, const float* qw) { quantize_row_q4_K_impl<true>(x, y, k, qw); }
void quantize_row_q5_K_w(const float* x, uint8_t* y, int64_t k, const float* qw) { quantize_row_q5_K_impl<true>(x, y, k, qw); }
void quantize_row_q6_K_w(const float* x, uint8_t* y, int64_t k, const float* qw) { quantize_row_q6_K_impl<true>(x, y, k, qw); }

namespace scalar {
void quantize_row_q2_K(const float* x, uint8_t* y, int64_t k) { quantize_row_q2_K_impl<false>(x, y, k); }
void quantize_row_q4_K(const float* x, uint8_t* y, int64_t k) { quantize_row_q4_K_impl<false>(x, y, k); }
void quantize_row_q5_K(const float* x, uint8_t* y, int64_t k) { quantize_row_q5_K_impl<false>(x, y, k); }
void quantize_row_q6_K(const float* x, uint8_t* y, int64_t k) { quantize_row_q6_K_impl<false>(x, y, k); }
void quantize_row_q2_K_w(const float* x, uint8_t* y, int64_t k, const float* qw) { quantize_row_q2_K_impl<false>(x, y, k, qw); }
void quantize_row_q3_K_w(const float* x, uint8_t* y, int64_t k, const float* qw) { quantize_row_q3_K_impl<false>(x, y, k, qw); }
void quantize_row_q4_K_w(const float* x, uint8_t* y, int64_t k, const float* qw) { quantize_row_q4_K_impl<false>(x, y, k, qw); }
void quantize_row_q5_K_w(const float* x, uint8_t* y, int64_t k, const float* qw) { quantize_row_q5_K_impl<false>(x, y, k, qw); }
void quantize_row_q6_K_w(const float* x, uint8_t* y, int64_t k, const float* qw) { quantize_row_q6_K_impl<false>(x, y, k, qw); }
}  // namespace scalar

// ---------------------------------------------------------------- IQ4_NL / IQ4_XS (non-linear 4-bit)

namespace {

// ggml's best_index_int8 over the 16 IQ4 levels: the nearest level to x (the lower on a tie),
// by bisection; NaN compares false everywhere and ends at index 15.
inline int best_index_iq4nl(float x) {
  const int8_t* val = kIq4nlLevels;
  if (x <= float(val[0])) return 0;
  if (x >= float(val[15])) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < float(val[mav]))
      mu = mav;
    else
      ml = mav;
  }
  return x - float(val[mu - 1]) < float(val[mu]) - x ? mu - 1 : mu;
}

// ggml's quantize_row_iq4_nl_impl as quantize_iq4_nl / quantize_iq4_xs call it (ntry = 7), on
// super-blocks of kSuper values (32: IQ4_NL, one block; 256: IQ4_XS, 8 blocks of 32 sharing an
// f16 d, each with a 6-bit scale). Per block of 32: weights x^2, or qw * sqrt(sigma2 + x^2)
// (sigma2 = 2 * mean x^2 over the super-block) with importance weights; a first scale from the
// block's signed maximum and the levels it gives, refined to the weighted least-squares scale,
// then 15 more candidate scales whose least-squares fit wins if better (the levels are not kept
// from those). IQ4_NL stores that scale and requantizes with it (unrounded); IQ4_XS quantizes the
// 8 scales against d = -max_scale / 32 and requantizes each block with its rounded scale.
// The search runs several blocks a step (ggml_lanes.h's iq4_search) unless kLanes is false (the
// scalar port below, which the tests hold the lanes to).

// The weights of `count` blocks of 32 (x: count * 32 values in super-blocks of kSuper).
void iq4_weights(int kSuper, size_t count, const float* x, const float* qw, float* weight) {
  for (size_t s = 0; s < 32 * count; s += size_t(kSuper)) {
    float sigma2 = 0;
    for (size_t j = s; j < s + size_t(kSuper); ++j) sigma2 += x[j] * x[j];
    sigma2 *= 2.f / float(kSuper);
    for (size_t j = s; j < s + size_t(kSuper); ++j) weight[j] = qw ? qw[j] * std::sqrt(sigma2 + x[j] * x[j]) : x[j] * x[j];
  }
}

// The scale search on one block of 32 values and their weights (the scalar port).
float iq4_block_scale(const float* xb, const float* weight) {
  const int8_t* values = kIq4nlLevels;
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(xb[j]);
    if (ax > amax) {
      amax = ax;
      max = xb[j];
    }
  }
  if (amax < GROUP_MAX_EPS) return 0;
  float d = -max / float(values[0]);
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const float q = float(values[best_index_iq4nl(id * xb[j])]);
    const float w = weight[j];
    sumqx += w * q * xb[j];
    sumq2 += w * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int itry = -7; itry <= 7; ++itry) {
    id = float(itry + values[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = float(values[best_index_iq4nl(id * xb[j])]);
      const float w = weight[j];
      sumqx += w * q * xb[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// The scales of `count` (<= 8) consecutive blocks of 32: eight or four a step, the rest one by one.
template <bool kLanes>
void iq4_scales(size_t count, const float* x, const float* weight, float* scales) {
  size_t b = 0;
  if (kLanes) {
#if LEAPCONV_GGML_AVX2
    if (search_lanes() >= 8)
      for (; b + 8 <= count; b += 8) iq4_group8_avx2(x + 32 * b, weight + 32 * b, scales + b);
#endif
    for (; b + 4 <= count; b += 4) lanes::iq4_group<4>(x + 32 * b, weight + 32 * b, scales + b);
  }
  for (; b < count; ++b) scales[b] = iq4_block_scale(x + 32 * b, weight + 32 * b);
}

// The levels of a block of 32 for the inverse scale id, packed as ggml packs them: byte j holds
// value j (low nibble) and value j + 16 (high).
template <bool kLanes>
void iq4_pack_levels(const float* xb, float id, uint8_t* q4) {
  uint8_t L[32];
  if (kLanes)
    lanes::iq4_levels<4>(xb, id, L);
  else
    for (int j = 0; j < 32; ++j) L[j] = uint8_t(best_index_iq4nl(id * xb[j]));
  for (int j = 0; j < 16; ++j) q4[j] = uint8_t(L[j] | (L[16 + j] << 4));
}

// k values of IQ4_NL: up to eight blocks (each its own super-block) searched at a time.
// y: block_iq4_nl {d, qs[16]}.
template <bool kLanes>
void quantize_row_iq4_nl_impl(const float* x, uint8_t* y, int64_t k, const float* qw) {
  float weight[8 * 32], scales[8];
  for (int64_t i = 0; i < k / 32; i += 8) {
    const size_t count = size_t(std::min<int64_t>(8, k / 32 - i));
    const float* xg = x + 32 * i;
    iq4_weights(32, count, xg, qw ? qw + 32 * i : nullptr, weight);
    iq4_scales<kLanes>(count, xg, weight, scales);
    for (size_t b = 0; b < count; ++b) {
      uint8_t* yb = y + kIQ4_NLBlockBytes * (i + int64_t(b));
      put_f16(yb, scales[b]);
      iq4_pack_levels<kLanes>(xg + 32 * b, scales[b] != 0 ? 1 / scales[b] : 0.f, yb + 2);
    }
  }
}

// k values of IQ4_XS, a super-block of 256 at a time.
// y: block_iq4_xs {d, scales_h, scales_l[4], qs[128]}.
template <bool kLanes>
void quantize_row_iq4_xs_impl(const float* x, uint8_t* y, int64_t k, const float* qw) {
  float weight[QK_K], scales[8];
  for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K, y += kIQ4_XSBlockBytes) {
    iq4_weights(QK_K, 8, x, qw ? qw + QK_K * i : nullptr, weight);
    iq4_scales<kLanes>(8, x, weight, scales);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const float abs_d = std::fabs(scales[ib]);
      if (abs_d > amax_scale) {
        amax_scale = abs_d;
        max_scale = scales[ib];
      }
    }
    uint8_t* const scales_l = y + 4;
    uint16_t scales_h = 0;
    const float d = -max_scale / 32;  // (-0 when every block is zero: ggml stores that sign)
    put_f16(y, d);
    const float id = d != 0 ? 1 / d : 0.f;
    for (int ib = 0; ib < 8; ++ib) {
      int l = nearest_int(id * scales[ib]);
      l = max_(-32, min_(31, l));
      const float dl = d * float(l);
      iq4_pack_levels<kLanes>(x + 32 * ib, dl != 0 ? 1 / dl : 0.f, y + 8 + 16 * ib);
      l += 32;
      const uint8_t l_l = uint8_t(l & 0xf);
      const uint8_t l_h = uint8_t(l >> 4);
      if (ib % 2 == 0)
        scales_l[ib / 2] = l_l;
      else
        scales_l[ib / 2] = uint8_t(scales_l[ib / 2] | (l_l << 4));
      scales_h = uint16_t(scales_h | (l_h << 2 * (ib % 8)));
    }
    put_u16(y + 2, scales_h);
  }
}

}  // namespace

void quantize_row_iq4_nl(const float* x, uint8_t* y, int64_t k) { quantize_row_iq4_nl_w(x, y, k, nullptr); }
void quantize_row_iq4_nl_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_iq4_nl_impl<true>(x, y, k, qw);
}
void quantize_row_iq4_xs(const float* x, uint8_t* y, int64_t k) { quantize_row_iq4_xs_w(x, y, k, nullptr); }
void quantize_row_iq4_xs_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_iq4_xs_impl<true>(x, y, k, qw);
}
namespace scalar {
void quantize_row_iq4_nl_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_iq4_nl_impl<false>(x, y, k, qw);
}
void quantize_row_iq4_xs_w(const float* x, uint8_t* y, int64_t k, const float* qw) {
  quantize_row_iq4_xs_impl<false>(x, y, k, qw);
}
}  // namespace scalar

void dequantize_row_iq4_nl(const uint8_t* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; ++i, x += kIQ4_NLBlockBytes, y += 32) {
    const float d = get_f16(x);
    for (int j = 0; j < 16; ++j) {
      y[j + 0] = d * float(kIq4nlLevels[x[2 + j] & 0xf]);
      y[j + 16] = d * float(kIq4nlLevels[x[2 + j] >> 4]);
    }
  }
}

void dequantize_row_iq4_xs(const uint8_t* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / QK_K; ++i, x += kIQ4_XSBlockBytes) {
    const float d = get_f16(x);
    const uint16_t scales_h = get_u16(x + 2);
    const uint8_t* scales_l = x + 4;
    const uint8_t* qs = x + 8;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * float(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j + 0] = dl * float(kIq4nlLevels[qs[j] & 0xf]);
        y[j + 16] = dl * float(kIq4nlLevels[qs[j] >> 4]);
      }
      y += 32;
      qs += 16;
    }
  }
}

// ---------------------------------------------------------------- TQ1_0 / TQ2_0 (ternary)

namespace {

// ggml's `int xi = lroundf(v) + 1` as glibc computes it on x86-64: round half away from zero;
// NaN, Inf and |v| >= 2^63 give LONG_MIN (its (long) cast, cvttss2si); the sum's low 32 bits as
// the int (gcc's conversion). Only reached with 1/d overflowing (a block whose max is below
// 2^-128), where v is +-Inf or NaN and xi is 1.
inline int ternary_plus1(float v) {
  const int64_t r = std::fabs(v) < 0x1p63f ? int64_t(std::round(v)) : INT64_MIN;
  return int(uint32_t(uint64_t(r) + 1));
}

// A block's max |x| as ggml's MAX(amax, fabsf(v)) folds it (a NaN is taken, then dropped by the
// next value), d = that max and 1/d (0 for 0).
inline float ternary_amax(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < QK_K; ++j) amax = max_(amax, std::fabs(x[j]));
  return amax;
}

// 5 (or 4) trits as one byte: sum t_n 3^(4-n), the first the most significant, then scaled to
// ceil(q * 256 / 243) so that a byte times 3^n, times 3, >> 8 reads trit n back.
inline uint8_t trits_to_byte(uint8_t q) { return uint8_t((uint16_t(q) * 256 + (243 - 1)) / 243); }

}  // namespace

// block_tq1_0: qs[48] (5 trits a byte: 32 bytes for values 0..159, 16 for 160..239) qh[4]
// (4 trits a byte, values 240..255) d
void quantize_row_tq1_0(const float* x, uint8_t* y, int64_t k) {
  for (int64_t i = 0; i < k / QK_K; ++i, y += kTQ1_0BlockBytes) {
    const float d = ternary_amax(x);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(y + 52, d);
    for (int m = 0; m < 32; ++m) {
      uint8_t q = 0;
      for (int n = 0; n < 5; ++n) q = uint8_t(uint8_t(q * 3) + ternary_plus1(x[m + n * 32] * id));
      y[m] = trits_to_byte(q);
    }
    x += 5 * 32;
    for (int m = 0; m < 16; ++m) {
      uint8_t q = 0;
      for (int n = 0; n < 5; ++n) q = uint8_t(uint8_t(q * 3) + ternary_plus1(x[m + n * 16] * id));
      y[32 + m] = trits_to_byte(q);
    }
    x += 5 * 16;
    for (int j = 0; j < 4; ++j) {
      uint8_t q = 0;
      for (int m = 0; m < 4; ++m) q = uint8_t(uint8_t(q * 3) + ternary_plus1(x[j + m * 4] * id));
      q = uint8_t(q * 3);  // the first trit to the most significant place
      y[48 + j] = trits_to_byte(q);
    }
    x += 16;
  }
}

void dequantize_row_tq1_0(const uint8_t* x, float* y, int64_t k) {
  static constexpr uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
  auto trit = [](uint8_t byte, int n) {
    const uint8_t q = uint8_t(byte * pow3[n]);
    return int16_t((uint16_t(q) * 3) >> 8);
  };
  for (int64_t i = 0; i < k / QK_K; ++i, x += kTQ1_0BlockBytes) {
    const float d = get_f16(x + 52);
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 32; ++m) *y++ = float(trit(x[m], n) - 1) * d;
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 16; ++m) *y++ = float(trit(x[32 + m], n) - 1) * d;
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 4; ++j) *y++ = float(trit(x[48 + j], n) - 1) * d;
  }
}

// block_tq2_0: qs[64] (per 128 values, 32 bytes: value 32n + m in bits 2n of byte m) d
void quantize_row_tq2_0(const float* x, uint8_t* y, int64_t k) {
  for (int64_t i = 0; i < k / QK_K; ++i, y += kTQ2_0BlockBytes) {
    const float d = ternary_amax(x);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(y + 64, d);
    for (int j = 0; j < 64; j += 32) {
      for (int m = 0; m < 32; ++m) {
        uint8_t q = 0;
        for (int n = 0; n < 4; ++n) q = uint8_t(q + ((ternary_plus1(x[m + n * 32] * id) & 3) << (2 * n)));
        y[j + m] = q;
      }
      x += 4 * 32;
    }
  }
}

void dequantize_row_tq2_0(const uint8_t* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / QK_K; ++i, x += kTQ2_0BlockBytes) {
    const float d = get_f16(x + 64);
    for (int j = 0; j < 64; j += 32)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) *y++ = float(int((x[j + m] >> (l * 2)) & 3) - 1) * d;
  }
}

// ---------------------------------------------------------------- Q1_0 / Q2_0

// block_q1_0 {d, qs[16]}: d = mean |x| over 128 values, bit j of the block (byte j / 8, bit
// j % 8) set for x >= 0; reads back as +-d.
void quantize_row_q1_0(const float* x, uint8_t* y, int64_t k) {
  for (int64_t i = 0; i < k / 128; ++i, x += 128, y += kQ1_0BlockBytes) {
    float sum_abs = 0.0f;
    for (int j = 0; j < 128; ++j) sum_abs += std::fabs(x[j]);
    put_f16(y, sum_abs / 128);
    std::memset(y + 2, 0, 16);
    for (int j = 0; j < 128; ++j)
      if (x[j] >= 0.0f) y[2 + j / 8] = uint8_t(y[2 + j / 8] | (1 << (j % 8)));
  }
}

void dequantize_row_q1_0(const uint8_t* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / 128; ++i, x += kQ1_0BlockBytes, y += 128) {
    const float d = get_f16(x);
    const float neg_d = -d;
    for (int j = 0; j < 128; ++j) y[j] = (x[2 + j / 8] >> (j % 8)) & 1 ? d : neg_d;
  }
}

// block_q2_0 {d, qs[16]}: d = max |x| over 64 values, q = clamp(round(x / d) + 1, 0, 3) in bits
// 2 (j % 4) of byte j / 4; reads back as (q - 1) d.
void quantize_row_q2_0(const float* x, uint8_t* y, int64_t k) {
  for (int64_t i = 0; i < k / 64; ++i, x += 64, y += kQ2_0BlockBytes) {
    float amax = 0.0f;
    for (int j = 0; j < 64; ++j) {
      const float a = std::fabs(x[j]);
      if (a > amax) amax = a;
    }
    const float d = amax;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    put_f16(y, d);
    std::memset(y + 2, 0, 16);
    for (int j = 0; j < 64; ++j) {
      // (int)roundf(w * id) + 1, the cast as x86 does it (INT32_MIN out of range: q 0)
      int q = trunc_i32(std::round(x[j] * id)) + 1;
      if (q < 0) q = 0;
      if (q > 3) q = 3;
      y[2 + j / 4] = uint8_t(y[2 + j / 4] | (q << ((j % 4) * 2)));
    }
  }
}

void dequantize_row_q2_0(const uint8_t* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / 64; ++i, x += kQ2_0BlockBytes, y += 64) {
    const float d = get_f16(x);
    for (int j = 0; j < 64; ++j) y[j] = float(int((x[2 + j / 4] >> ((j % 4) * 2)) & 3) - 1) * d;
  }
}

bool simd_enabled() { return LEAPCONV_GGML_SSE2 != 0; }

}  // namespace ggml
}  // namespace leapconv
