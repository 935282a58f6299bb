// ggml's codebook ("grid") types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M: a port of
// ggml-quants.c's quantize_<type> (llama-quantize's entry point), its grid set-up
// (iq2xs_init_impl / iq3xs_init_impl) and dequantize_row_<type>, line by line: the same float
// operations in the same order as ggml's C compiled with -O2 -ffp-contract=off, the same
// tie-breaking (first best wins; ggml's qsorts reproduced exactly, see below).
//
// The grids are llama.cpp's data and not part of this repository: the build extracts ggml's
// index lists (kgrid_*) from the llama.cpp source that node-llama-cpp ships into
// generated/iq_grids.h (cmake/IqGrids.cmake); everything else is derived here.
#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <vector>

#include "iq_grids.h"  // generated at configure time (build directory)
#include "quant/codebook.h"
#include "quant/ggml_lanes.h"
#include "quant/ggml_quants.h"
#include "quant/ggml_quants_avx2.h"
#include "quant/ggml_quants_impl.h"

namespace leapconv {
namespace ggml {

using namespace detail;  // the block fields and ggml's rounding (ggml_quants_impl.h)

namespace {

constexpr float GROUP_MAX_EPS_IQ3_XXS = 1e-8f;
constexpr float GROUP_MAX_EPS_IQ2_S = 1e-8f;
constexpr float GROUP_MAX_EPS_IQ1_M = 1e-7f;
constexpr float GROUP_MAX_EPS_IQ1_S = 1e-12f;
constexpr float IQ1S_DELTA = 0.125f;
constexpr float IQ1M_DELTA = 0.125f;
constexpr int NGRID_IQ1S = 2048;


// ---- the grids ----
// A grid point's coordinate levels l (packed b bits each in ggml's kgrid_* lists) are stored by
// ggml's quantizers as 2l + 1 (int8), and dequantized through ggml-common.h's tables, whose
// bytes are each level's value: IQ2 (E8 lattice) 8, 25, 43; IQ3_XXS 4, 12, ..., 52 and 62;
// IQ3_S 2l + 1; IQ1 (ternary) -1, 0, 1 as int8.
constexpr uint8_t kIq2Values[4] = {8, 25, 43, 0};  // level 3 is on no grid point
constexpr uint8_t kIq3xxsValues[8] = {4, 12, 20, 28, 36, 44, 52, 62};
constexpr uint8_t kIq3sValues[8] = {1, 3, 5, 7, 9, 11, 13, 15};
constexpr uint8_t kIq1Values[4] = {0xff, 0x00, 0x01, 0};

template <size_t N, int Bits, int Coords, typename T>
constexpr std::array<T, N> expand_grid(const uint16_t (&k)[N], const uint8_t* values) {
  std::array<T, N> g{};
  for (size_t i = 0; i < N; ++i)
    for (int c = 0; c < Coords; ++c) g[i] |= T(values[(k[i] >> Bits * c) & ((1 << Bits) - 1)]) << 8 * c;
  return g;
}
using namespace iq_grids;
constexpr auto kIq2xxsGrid = expand_grid<256, 2, 8, uint64_t>(kgrid_2bit_256, kIq2Values);
constexpr auto kIq2xsGrid = expand_grid<512, 2, 8, uint64_t>(kgrid_2bit_512, kIq2Values);
constexpr auto kIq2sGrid = expand_grid<1024, 2, 8, uint64_t>(kgrid_2bit_1024, kIq2Values);
constexpr auto kIq1sGrid = expand_grid<2048, 2, 8, uint64_t>(kgrid_1bit_2048, kIq1Values);
constexpr auto kIq3xxsGrid = expand_grid<256, 3, 4, uint32_t>(kgrid_256, kIq3xxsValues);
constexpr auto kIq3sGrid = expand_grid<512, 3, 4, uint32_t>(kgrid_512, kIq3sValues);

// ksigns_iq2xs: the 7 stored sign bits and an 8th that makes their count even.
constexpr std::array<uint8_t, 128> make_ksigns() {
  std::array<uint8_t, 128> s{};
  for (int i = 0; i < 128; ++i) s[size_t(i)] = uint8_t(i | ((std::popcount(unsigned(i)) & 1) << 7));
  return s;
}
constexpr auto kSigns = make_ksigns();

// byte c of grid point g (the dequantization tables hold little-endian packed bytes)
template <typename T>
inline uint8_t grid_byte(T g, int c) { return uint8_t(g >> 8 * c); }

// What iq2xs_init_impl / iq3xs_init_impl build for the quantizers: the grid as 2l + 1 per
// coordinate; map[u] for every packed level vector u of the search space (2 bits x 8 or 3 bits x
// 4): its grid index, or -(offset + 1) of its neighbour list in `neighbours` ({n, then n grid
// indices}): the grid points at the nwant smallest squared distances from it, by distance, then
// index (ggml sorts (d2, j) pairs in full; their order is a total one, so qsort's is the only one).
struct SearchGrid {
  int coords = 0;
  std::vector<int8_t> grid;  // grid_size x coords
  std::vector<int> map;
  std::vector<uint16_t> neighbours;
  const int8_t* point(int j) const { return grid.data() + size_t(j) * size_t(coords); }
};

template <int bits, int coords>
void build_search_grid(SearchGrid& s, const uint16_t* kgrid, int grid_size, int kmap_size, int nwant) {
  s.coords = coords;
  s.grid.assign(size_t(grid_size) * size_t(coords), 0);
  const int mask = (1 << bits) - 1;
  for (int k = 0; k < grid_size; ++k)
    for (int i = 0; i < coords; ++i) s.grid[size_t(k * coords + i)] = int8_t(2 * ((kgrid[k] >> bits * i) & mask) + 1);
  s.map.assign(size_t(kmap_size), -1);
  for (int i = 0; i < grid_size; ++i) {
    int index = 0;
    for (int k = 0; k < coords; ++k) index |= ((s.point(i)[k] - 1) / 2) << bits * k;
    s.map[size_t(index)] = i;
  }
  // For each point off the grid: the distances to every grid point (small integers), then the
  // grid points whose distance is among the nwant smallest distinct ones, in (d2, j) order.
  std::vector<int> d2(static_cast<size_t>(grid_size));
  constexpr int kMaxD2 = 8 * 14 * 14 + 1;
  std::vector<int> count(kMaxD2);
  s.neighbours.clear();
  for (int i = 0; i < kmap_size; ++i) {
    if (s.map[size_t(i)] >= 0) continue;
    int8_t pos[8];
    for (int k = 0; k < coords; ++k) pos[k] = int8_t(2 * ((i >> bits * k) & mask) + 1);
    std::fill(count.begin(), count.end(), 0);
    for (int j = 0; j < grid_size; ++j) {
      const int8_t* pg = s.point(j);
      int d = 0;
      for (int k = 0; k < coords; ++k) d += (pg[k] - pos[k]) * (pg[k] - pos[k]);
      d2[size_t(j)] = d;
      ++count[size_t(d)];
    }
    const size_t start = s.neighbours.size();
    s.map[size_t(i)] = -int(start + 1);
    s.neighbours.push_back(0);
    int n = 0, nhave = 0;
    for (int d = 0; d < kMaxD2 && nhave < nwant; ++d) {
      if (!count[size_t(d)]) continue;
      ++nhave;
      for (int j = 0; j < grid_size; ++j)
        if (d2[size_t(j)] == d) {
          s.neighbours.push_back(uint16_t(j));
          ++n;
        }
    }
    s.neighbours[start] = uint16_t(n);
  }
}

// ggml's iq2_data[4] and iq3_data[2], each built once (std::call_once: any thread, WebAssembly too).
enum GridId { kG2xxs, kG2xs, kG1s, kG2s, kG3xxs, kG3s, kGridCount };
const SearchGrid& search_grid(GridId id) {
  static SearchGrid grids[kGridCount];
  static std::once_flag once[kGridCount];
  std::call_once(once[id], [id] {
    SearchGrid& s = grids[id];
    switch (id) {
      case kG2xxs: build_search_grid<2, 8>(s, kgrid_2bit_256, 256, 43692, 2); break;
      case kG2xs: build_search_grid<2, 8>(s, kgrid_2bit_512, 512, 43692, 2); break;
      case kG1s: build_search_grid<2, 8>(s, kgrid_1bit_2048, NGRID_IQ1S, 43692, 3); break;
      case kG2s: build_search_grid<2, 8>(s, kgrid_2bit_1024, 1024, 43692, 1); break;
      case kG3xxs: build_search_grid<3, 4>(s, kgrid_256, 256, 4096, 2); break;
      case kG3s: build_search_grid<3, 4>(s, kgrid_512, 512, 4096, 3); break;
      default: break;
    }
  });
  return grids[id];
}

// ggml's iq2_find_best_neighbour (N = 8) and iq3_find_best_neighbour (N = 4): the neighbour of
// least weighted squared distance (the first of equal ones), eight (AVX2) or four a step
// (ggml_lanes.h); -1 where ggml asserts (every distance NaN or >= FLT_MAX: only reachable with
// overflowing inputs, which the table refuses). `wide`: search_lanes() >= 8, asked once a row.
template <int N>
int find_best_neighbour(const SearchGrid& g, const uint16_t* neighbours, const float* xval, const float* weight,
                        float scale, int8_t* L, bool wide) {
  const uint16_t* idx = neighbours + 1;
  int best;
#if LEAPCONV_GGML_AVX2
  if (wide)
    best = grid_best8_avx2(N, g.grid.data(), idx, neighbours[0], xval, weight, scale);
  else
#endif
    best = lanes::grid_best<4, N>(g.grid.data(), idx, neighbours[0], xval, weight, scale);
  (void)wide;
  if (best < 0) return -1;
  const int grid_index = idx[best];
  const int8_t* pg = g.point(grid_index);
  for (int i = 0; i < N; ++i) L[i] = int8_t((pg[i] - 1) / 2);
  return grid_index;
}
inline const uint16_t* neighbours_of(const SearchGrid& g, int u) { return g.neighbours.data() + (-g.map[size_t(u)] - 1); }

// IQ3_S's and IQ2_S's loop over 19 candidate scales (is = -9 .. 9: inverse scale
// (2 kMaxQ - 1 + is * step) / max; levels 0 .. kMaxQ - 1, kBits each in a grid index), several a step (ggml_lanes.h's codebook_candidates), then
// ggml's choice among them in order: scale, best, L and is_on_grid take a candidate whose fit is
// better. False where ggml would assert.
template <int N, int kBlock, int kBits, int kMaxQ>
bool best_candidate(const SearchGrid& g, bool wide, float step, float max, const float* xval, const float* weight,
                    const float* waux, float& scale, float& best, int8_t* L, bool* is_on_grid) {
  constexpr int kGroups = kBlock / N;
  float id[19], sc[19], sumqx[19], sumq2[19];
  int8_t Lc[19 * kBlock];
  bool on_grid[19 * kGroups];
  for (int t = 0; t < 19; ++t) {
    id[t] = (float(2 * kMaxQ - 1) + float(t - 9) * step) / max;
    sc[t] = 1 / id[t];
  }
  bool found;
#if LEAPCONV_GGML_AVX2
  if (wide)
    found = codebook_candidates8_avx2(N, g.grid.data(), g.map.data(), g.neighbours.data(), xval, weight, waux, id, sc, 19,
                                      sumqx, sumq2, Lc, on_grid);
  else
#endif
    found = lanes::codebook_candidates<4, N, kBlock, kBits, kMaxQ>(g.grid.data(), g.map.data(), g.neighbours.data(), xval, weight,
                                                            waux, id, sc, 19, sumqx, sumq2, Lc, on_grid);
  (void)wide;
  if (!found) return false;
  for (int t = 0; t < 19; ++t) {
    if (sumq2[t] > 0 && sumqx[t] * sumqx[t] > best * sumq2[t]) {
      scale = sumqx[t] / sumq2[t];
      best = scale * sumqx[t];
      std::memcpy(L, Lc + t * kBlock, kBlock);
      std::memcpy(is_on_grid, on_grid + t * kGroups, kGroups * sizeof(bool));
    }
  }
  return true;
}

// The sign handling of IQ2_XXS, IQ2_XS and IQ3_XXS: |x| per value, the signs of each group of 8
// as 7 bits (an odd count of negatives flips the sign of the value with the least weight * x^2,
// whose sign the parity bit then restores in the dequantizer).
inline uint8_t even_signs(const float* xb, const float* weight, float* xval) {
  int nflip = 0;
  uint8_t s = 0;
  for (int i = 0; i < 8; ++i) {
    if (xb[i] >= 0) {
      xval[i] = xb[i];
    } else {
      xval[i] = -xb[i];
      ++nflip;
      s |= uint8_t(1 << i);
    }
  }
  if (nflip % 2) {
    int imin = 0;
    float min = weight[imin] * xb[imin] * xb[imin];
    for (int i = 1; i < 8; ++i) {
      const float ax = weight[i] * xb[i] * xb[i];
      if (ax < min) {
        min = ax;
        imin = i;
      }
    }
    xval[imin] = -xval[imin];
    s ^= uint8_t(1 << imin);
  }
  return s & 127;
}

inline float row_sumx2(const float* xbl) {
  float sumx2 = 0;
  for (int i = 0; i < QK_K; ++i) sumx2 += xbl[i] * xbl[i];
  return sumx2;
}

}  // namespace

// ---------------- IQ2_XXS {d, qs[32] (uint16)}: 8 groups of 32, each 4 grid indices (bytes) and
// a uint32 of 4 x 7 sign bits and a 4-bit scale ----------------
bool quantize_row_iq2_xxs_w(const float* x, uint8_t* vy, int64_t n, const float* quant_weights) {
  const SearchGrid& g = search_grid(kG2xxs);
  const bool wide = search_lanes() >= 8;  // (the neighbour searches eight points a step)
  constexpr int kMaxQ = 3;
  const int64_t nbl = n / QK_K;
  float scales[QK_K / 32];
  float weight[32];
  float xval[32];
  int8_t L[32];
  int8_t Laux[32];
  float waux[32];
  uint8_t block_signs[4];
  uint32_t q2[2 * (QK_K / 32)];

  for (int64_t ibl = 0; ibl < nbl; ++ibl) {
    uint8_t* y = vy + ibl * kIQ2_XXSBlockBytes;
    put_u16(y, fp32_to_fp16(0.f));
    std::memset(q2, 0, sizeof(q2));
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sumx2 = row_sumx2(xbl);
    const float sigma2 = sumx2 / QK_K;

    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const float* xb = xbl + 32 * ib;
      const float* qw = quant_weights + QK_K * ibl + 32 * ib;
      for (int i = 0; i < 32; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
      for (int i = 0; i < 32; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < 4; ++k) block_signs[k] = even_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
      float max = xval[0];
      for (int i = 1; i < 32; ++i) max = max_(max, xval[i]);
      if (max < GROUP_MAX_EPS) {
        scales[ib] = 0;
        std::memset(L, 0, 32);
        continue;
      }
      float scale = detail::make_qp_quants(32, kMaxQ + 1, xval, reinterpret_cast<uint8_t*>(L), weight);
      const float eff_max = scale * kMaxQ;
      if (eff_max <= 0) {
        scales[ib] = 0;
        std::memset(L, 0, 32);
        continue;
      }
      float best = 0;
      for (int is = -6; is <= 6; ++is) {
        const float id = (float(2 * kMaxQ - 1) + float(is) * 0.1f) / eff_max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 4; ++k) {
          for (int i = 0; i < 8; ++i) {
            const int l = nearest_int(0.5f * (id * xval[8 * k + i] - 1));
            Laux[8 * k + i] = int8_t(max_(0, min_(kMaxQ - 1, l)));
          }
          int u = 0;
          for (int i = 0; i < 8; ++i) u |= Laux[8 * k + i] << 2 * i;
          if (g.map[size_t(u)] < 0 &&
              find_best_neighbour<8>(g, neighbours_of(g, u), xval + 8 * k, waux + 8 * k, this_scale, Laux + 8 * k, wide) < 0)
            return false;
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < 32; ++i) {
          const float w = weight[i];
          const float q = float(2 * Laux[i] + 1);
          sumqx += w * xval[i] * q;
          sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          std::memcpy(L, Laux, 32);
        }
      }
      if (scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 4; ++k) {
          int u = 0;
          for (int i = 0; i < 8; ++i) {
            int l = nearest_int(0.5f * (id * xval[8 * k + i] - 1));
            l = max_(0, min_(kMaxQ - 1, l));
            u |= l << 2 * i;
          }
          int grid_index = g.map[size_t(u)];
          if (grid_index < 0) {
            grid_index = find_best_neighbour<8>(g, neighbours_of(g, u), xval + 8 * k, waux + 8 * k, scale, L + 8 * k, wide);
            if (grid_index < 0) return false;
          }
          const int8_t* pg = g.point(grid_index);
          for (int i = 0; i < 8; ++i) L[8 * k + i] = int8_t((pg[i] - 1) / 2);
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < 32; ++i) {
          const float w = weight[i];
          const float q = float(2 * L[i] + 1);
          sumqx += w * xval[i] * q;
          sumq2 += w * q * q;
        }
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 4; ++k) block_signs[k] = uint8_t(~block_signs[k] & 127);
      }
      for (int k = 0; k < 4; ++k) {
        // (L holds make_qp_quants' levels, not a grid point's, when the scale is NaN: ggml then
        // reads its map out of bounds, or aborts; so does a NaN scale below)
        uint16_t u = 0;
        for (int i = 0; i < 8; ++i) u = uint16_t(u | (L[8 * k + i] << 2 * i));
        if (u >= g.map.size()) return false;
        const int grid_index = g.map[u];
        if (grid_index < 0) return false;  // ggml aborts ("Oops: found point not on grid")
        q2[2 * ib + 0] |= uint32_t(grid_index) << 8 * k;
        q2[2 * ib + 1] |= uint32_t(block_signs[k]) << 7 * k;
      }
      if (!(scale >= 0)) return false;  // GGML_ASSERT(scale >= 0)
      scales[ib] = scale;
      max_scale = max_(max_scale, scale);
    }

    if (!max_scale) {
      std::memset(y + 2, 0, QK_K / 4);
      continue;
    }
    const float d = max_scale / 31;
    put_u16(y, fp32_to_fp16(d));
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      int l = nearest_int(0.5f * (id * scales[ib] - 1));
      l = max_(0, min_(15, l));
      q2[2 * ib + 1] |= uint32_t(l) << 28;
    }
    for (int i = 0; i < 2 * (QK_K / 32); ++i) put_u32(y + 2 + 4 * i, q2[i]);
  }
  return true;
}

// ---------------- IQ2_XS {d, qs[32] (uint16: 9-bit grid index, 7 sign bits), scales[8]} ----------------
bool quantize_row_iq2_xs_w(const float* x, uint8_t* vy, int64_t n, const float* quant_weights) {
  const SearchGrid& g = search_grid(kG2xs);
  const bool wide = search_lanes() >= 8;  // (the neighbour searches eight points a step)
  constexpr int kMaxQ = 3;
  const int64_t nbl = n / QK_K;
  float scales[QK_K / 16];
  float weight[16];
  float xval[16];
  int8_t L[16];
  int8_t Laux[16];
  float waux[16];
  bool is_on_grid[2];
  bool is_on_grid_aux[2];
  uint8_t block_signs[2];
  uint16_t q2[2 * (QK_K / 16)];

  for (int64_t ibl = 0; ibl < nbl; ++ibl) {
    uint8_t* y = vy + ibl * kIQ2_XSBlockBytes;
    uint8_t* ysc = y + 2 + QK_K / 4;
    put_u16(y, fp32_to_fp16(0.f));
    std::memset(q2, 0, sizeof(q2));
    std::memset(ysc, 0, QK_K / 32);
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sumx2 = row_sumx2(xbl);
    const float sigma2 = sumx2 / QK_K;

    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      const float* qw = quant_weights + QK_K * ibl + 16 * ib;
      for (int i = 0; i < 16; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
      for (int i = 0; i < 16; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < 2; ++k) block_signs[k] = even_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
      float max = xval[0];
      for (int i = 1; i < 16; ++i) max = max_(max, xval[i]);
      std::memset(L, 0, 16);
      if (max < GROUP_MAX_EPS) {
        scales[ib] = 0;
        continue;
      }
      float best = 0;
      float scale = max / (2 * kMaxQ - 1);
      is_on_grid[0] = is_on_grid[1] = true;
      for (int is = -9; is <= 9; ++is) {
        const float id = (float(2 * kMaxQ - 1) + float(is) * 0.1f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 2; ++k) {
          for (int i = 0; i < 8; ++i) {
            const int l = nearest_int(0.5f * (id * xval[8 * k + i] - 1));
            Laux[8 * k + i] = int8_t(max_(0, min_(kMaxQ - 1, l)));
          }
          int u = 0;
          for (int i = 0; i < 8; ++i) u |= Laux[8 * k + i] << 2 * i;
          is_on_grid_aux[k] = true;
          if (g.map[size_t(u)] < 0) {
            is_on_grid_aux[k] = false;
            if (find_best_neighbour<8>(g, neighbours_of(g, u), xval + 8 * k, waux + 8 * k, this_scale, Laux + 8 * k, wide) < 0)
              return false;
          }
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < 16; ++i) {
          const float w = weight[i];
          const float q = float(2 * Laux[i] + 1);
          sumqx += w * xval[i] * q;
          sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          for (int i = 0; i < 16; ++i) L[i] = Laux[i];
          for (int k = 0; k < 2; ++k) is_on_grid[k] = is_on_grid_aux[k];
        }
      }
      int n_not_ongrid = 0;
      for (int k = 0; k < 2; ++k)
        if (!is_on_grid[k]) ++n_not_ongrid;
      if (n_not_ongrid > 0 && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 2; ++k) {
          if (is_on_grid[k]) continue;
          int u = 0;
          for (int i = 0; i < 8; ++i) {
            int l = nearest_int(0.5f * (id * xval[8 * k + i] - 1));
            l = max_(0, min_(kMaxQ - 1, l));
            u |= l << 2 * i;
            L[8 * k + i] = int8_t(l);
          }
          if (g.map[size_t(u)] < 0 &&
              find_best_neighbour<8>(g, neighbours_of(g, u), xval + 8 * k, waux + 8 * k, scale, L + 8 * k, wide) < 0)
            return false;
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < 16; ++i) {
          const float w = weight[i];
          const float q = float(2 * L[i] + 1);
          sumqx += w * xval[i] * q;
          sumq2 += w * q * q;
        }
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 2; ++k) block_signs[k] = uint8_t(~block_signs[k] & 127);
      }
      for (int k = 0; k < 2; ++k) {
        int u = 0;
        for (int i = 0; i < 8; ++i) u |= L[8 * k + i] << 2 * i;
        const int grid_index = g.map[size_t(u)];
        if (grid_index < 0) return false;
        q2[2 * ib + k] = uint16_t(grid_index | (block_signs[k] << 9));
      }
      if (!(scale >= 0)) return false;
      scales[ib] = scale;
      max_scale = max_(max_scale, scale);
    }

    if (!max_scale) {
      std::memset(y + 2, 0, QK_K / 4);
      continue;
    }
    const float d = max_scale / 31;
    put_u16(y, fp32_to_fp16(d));
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      int l = nearest_int(0.5f * (id * scales[ib] - 1));
      l = max_(0, min_(15, l));
      if (ib % 2 == 0) ysc[ib / 2] = uint8_t(l);
      else ysc[ib / 2] |= uint8_t(l << 4);
    }
    for (int i = 0; i < 2 * (QK_K / 16); ++i) put_u16(y + 2 + 2 * i, q2[i]);
  }
  return true;
}

// ---------------- IQ2_S {d, qs[64] (32 grid index bytes, then 32 sign bytes), qh[8], scales[8]} ----------------
bool quantize_row_iq2_s_w(const float* x, uint8_t* vy, int64_t n, const float* quant_weights) {
  const SearchGrid& g = search_grid(kG2s);
  const bool wide = search_lanes() >= 8;  // (the neighbour searches eight points a step)
  constexpr int kMaxQ = 3;
  const int64_t nbl = n / QK_K;
  float scales[QK_K / 16];
  float weight[16];
  float xval[16];
  int8_t L[16];
  float waux[16];
  bool is_on_grid[2];
  uint8_t block_signs[2];

  for (int64_t ibl = 0; ibl < nbl; ++ibl) {
    uint8_t* y = vy + ibl * kIQ2_SBlockBytes;
    std::memset(y, 0, size_t(kIQ2_SBlockBytes));
    put_u16(y, fp32_to_fp16(0.f));
    uint8_t* qs = y + 2;
    uint8_t* qh = qs + QK_K / 4;
    uint8_t* ysc = qh + QK_K / 32;
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sumx2 = row_sumx2(xbl);
    const float sigma2 = 2 * sumx2 / QK_K;

    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      if (quant_weights) {
        const float* qw = quant_weights + QK_K * ibl + 16 * ib;
        for (int i = 0; i < 16; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
      } else {
        for (int i = 0; i < 16; ++i) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
      }
      for (int i = 0; i < 16; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < 2; ++k) {
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
          if (xb[8 * k + i] >= 0) {
            xval[8 * k + i] = xb[8 * k + i];
          } else {
            xval[8 * k + i] = -xb[8 * k + i];
            s |= uint8_t(1 << i);
          }
        }
        block_signs[k] = s;
      }
      float max = xval[0];
      for (int i = 1; i < 16; ++i) max = max_(max, xval[i]);
      std::memset(L, 0, 16);
      if (max < GROUP_MAX_EPS_IQ2_S) {
        scales[ib] = 0;
        continue;
      }
      float best = 0;
      float scale = max / (2 * kMaxQ - 1);
      is_on_grid[0] = is_on_grid[1] = true;
      if (!best_candidate<8, 16, 2, kMaxQ>(g, wide, 0.1f, max, xval, weight, waux, scale, best, L, is_on_grid)) return false;
      int n_not_ongrid = 0;
      for (int k = 0; k < 2; ++k)
        if (!is_on_grid[k]) ++n_not_ongrid;
      if (n_not_ongrid > 0 && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 2; ++k) {
          if (is_on_grid[k]) continue;
          int u = 0;
          for (int i = 0; i < 8; ++i) {
            int l = nearest_int(0.5f * (id * xval[8 * k + i] - 1));
            l = max_(0, min_(kMaxQ - 1, l));
            u |= l << 2 * i;
            L[8 * k + i] = int8_t(l);
          }
          if (g.map[size_t(u)] < 0 &&
              find_best_neighbour<8>(g, neighbours_of(g, u), xval + 8 * k, waux + 8 * k, scale, L + 8 * k, wide) < 0)
            return false;
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < 16; ++i) {
          const float w = weight[i];
          const float q = float(2 * L[i] + 1);
          sumqx += w * xval[i] * q;
          sumq2 += w * q * q;
        }
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 2; ++k) block_signs[k] = uint8_t(~block_signs[k]);
      }
      for (int k = 0; k < 2; ++k) {
        int u = 0;
        for (int i = 0; i < 8; ++i) u |= L[8 * k + i] << 2 * i;
        const int grid_index = g.map[size_t(u)];
        if (grid_index < 0) return false;
        const int i8 = 2 * ib + k;
        qs[i8] = uint8_t(grid_index & 255);
        qh[i8 / 4] |= uint8_t((grid_index >> 8) << 2 * (i8 % 4));
        qs[QK_K / 8 + i8] = block_signs[k];
      }
      if (!(scale >= 0)) return false;
      scales[ib] = scale;
      max_scale = max_(max_scale, scale);
    }

    if (!max_scale) continue;
    const float d = max_scale / 31;
    put_u16(y, fp32_to_fp16(d * 0.9875f));
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      int l = nearest_int(0.5f * (id * scales[ib] - 1));
      l = max_(0, min_(15, l));
      if (ib % 2 == 0) ysc[ib / 2] = uint8_t(l);
      else ysc[ib / 2] |= uint8_t(l << 4);
    }
  }
  return true;
}
bool quantize_row_iq2_s(const float* x, uint8_t* y, int64_t k) { return quantize_row_iq2_s_w(x, y, k, nullptr); }

// ---------------- IQ3_XXS {d, qs[64] grid indices, then 8 uint32 of 4 x 7 sign bits + 4-bit scale} ----------------
bool quantize_row_iq3_xxs_w(const float* x, uint8_t* vy, int64_t n, const float* quant_weights) {
  const SearchGrid& g = search_grid(kG3xxs);
  const bool wide = search_lanes() >= 8;  // (the neighbour searches eight points a step)
  constexpr int kMaxQ = 8;
  const int64_t nbl = n / QK_K;
  constexpr int quant_size = int(kIQ3_XXSBlockBytes) - 2;
  float scales[QK_K / 32];
  float weight[32];
  float xval[32];
  int8_t L[32];
  int8_t Laux[32];
  float waux[32];
  bool is_on_grid[8];
  bool is_on_grid_aux[8];
  uint8_t block_signs[8];
  uint8_t q3[3 * (QK_K / 8) + QK_K / 32];
  uint8_t* scales_and_signs = q3 + QK_K / 4;

  for (int64_t ibl = 0; ibl < nbl; ++ibl) {
    uint8_t* y = vy + ibl * kIQ3_XXSBlockBytes;
    put_u16(y, fp32_to_fp16(0.f));
    std::memset(q3, 0, sizeof(q3));
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sumx2 = row_sumx2(xbl);
    const float sigma2 = 2 * sumx2 / QK_K;

    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const float* xb = xbl + 32 * ib;
      if (quant_weights) {
        const float* qw = quant_weights + QK_K * ibl + 32 * ib;
        for (int i = 0; i < 32; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
      } else {
        for (int i = 0; i < 32; ++i) weight[i] = xb[i] * xb[i];
      }
      for (int i = 0; i < 32; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < 4; ++k) block_signs[k] = even_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
      float max = xval[0];
      for (int i = 1; i < 32; ++i) max = max_(max, xval[i]);
      std::memset(L, 0, 32);
      if (max < GROUP_MAX_EPS_IQ3_XXS) {
        scales[ib] = 0;
        continue;
      }
      float best = 0;
      float scale = max / (2 * kMaxQ - 1);
      for (int k = 0; k < 8; ++k) is_on_grid[k] = true;
      for (int is = -15; is <= 15; ++is) {
        const float id = (float(2 * kMaxQ - 1) + float(is) * 0.2f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 8; ++k) {
          for (int i = 0; i < 4; ++i) {
            const int l = nearest_int(0.5f * (id * xval[4 * k + i] - 1));
            Laux[4 * k + i] = int8_t(max_(0, min_(kMaxQ - 1, l)));
          }
          int u = 0;
          for (int i = 0; i < 4; ++i) u |= Laux[4 * k + i] << 3 * i;
          is_on_grid_aux[k] = true;
          if (g.map[size_t(u)] < 0) {
            is_on_grid_aux[k] = false;
            if (find_best_neighbour<4>(g, neighbours_of(g, u), xval + 4 * k, waux + 4 * k, this_scale, Laux + 4 * k, wide) < 0)
              return false;
          }
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < 32; ++i) {
          const float w = weight[i];
          const float q = float(2 * Laux[i] + 1);
          sumqx += w * xval[i] * q;
          sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          for (int i = 0; i < 32; ++i) L[i] = Laux[i];
          for (int k = 0; k < 8; ++k) is_on_grid[k] = is_on_grid_aux[k];
        }
      }
      int n_not_ongrid = 0;
      for (int k = 0; k < 8; ++k)
        if (!is_on_grid[k]) ++n_not_ongrid;
      if (n_not_ongrid > 0 && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 8; ++k) {
          if (is_on_grid[k]) continue;
          int u = 0;
          for (int i = 0; i < 4; ++i) {
            int l = nearest_int(0.5f * (id * xval[4 * k + i] - 1));
            l = max_(0, min_(kMaxQ - 1, l));
            u |= l << 3 * i;
          }
          int grid_index = g.map[size_t(u)];
          if (grid_index < 0) {
            grid_index = find_best_neighbour<4>(g, neighbours_of(g, u), xval + 4 * k, waux + 4 * k, scale, L + 4 * k, wide);
            if (grid_index < 0) return false;
          }
          const int8_t* pg = g.point(grid_index);
          for (int i = 0; i < 4; ++i) L[4 * k + i] = int8_t((pg[i] - 1) / 2);
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < 32; ++i) {
          const float w = weight[i];
          const float q = float(2 * L[i] + 1);
          sumqx += w * xval[i] * q;
          sumq2 += w * q * q;
        }
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 4; ++k) block_signs[k] = uint8_t(~block_signs[k] & 127);
      }
      for (int k = 0; k < 8; ++k) {
        int u = 0;
        for (int i = 0; i < 4; ++i) u |= L[4 * k + i] << 3 * i;
        const int grid_index = g.map[size_t(u)];
        if (grid_index < 0) return false;
        q3[8 * ib + k] = uint8_t(grid_index);
      }
      put_u32(scales_and_signs + 4 * ib, uint32_t(block_signs[0]) | (uint32_t(block_signs[1]) << 7) |
                                            (uint32_t(block_signs[2]) << 14) | (uint32_t(block_signs[3]) << 21));
      if (!(scale >= 0)) return false;
      scales[ib] = scale;
      max_scale = max_(max_scale, scale);
    }

    if (!max_scale) {
      std::memset(y + 2, 0, quant_size);
      continue;
    }
    const float d = max_scale / 31;
    put_u16(y, fp32_to_fp16(d * 1.0125f));
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      int l = nearest_int(0.5f * (id * scales[ib] - 1));
      l = max_(0, min_(15, l));
      put_u32(scales_and_signs + 4 * ib, get_u32(scales_and_signs + 4 * ib) | (uint32_t(l) << 28));
    }
    std::memcpy(y + 2, q3, quant_size);
  }
  return true;
}
bool quantize_row_iq3_xxs(const float* x, uint8_t* y, int64_t k) { return quantize_row_iq3_xxs_w(x, y, k, nullptr); }

// ---------------- IQ3_S {d, qs[64], qh[8], signs[32], scales[4]} ----------------
bool quantize_row_iq3_s_w(const float* x, uint8_t* vy, int64_t n, const float* quant_weights) {
  const SearchGrid& g = search_grid(kG3s);
  const bool wide = search_lanes() >= 8;  // (the neighbour searches eight points a step)
  constexpr int block_size = 32;  // IQ3S_BLOCK_SIZE
  constexpr int kMaxQ = 8;
  const int64_t nbl = n / QK_K;
  constexpr int bs4 = block_size / 4;
  constexpr int bs8 = block_size / 8;
  // ggml's quantize_iq3_s passes these scratch arrays to every row (none is read before written)
  float scales[QK_K / block_size];
  float weight[block_size];
  float xval[block_size];
  int8_t L[block_size];
  float waux[block_size];
  bool is_on_grid[block_size / 4];
  uint8_t block_signs[block_size / 8];

  for (int64_t ibl = 0; ibl < nbl; ++ibl) {
    uint8_t* y = vy + ibl * kIQ3_SBlockBytes;
    std::memset(y, 0, size_t(kIQ3_SBlockBytes));
    put_u16(y, fp32_to_fp16(0.f));
    uint8_t* qs = y + 2;
    uint8_t* qh = y + 2 + QK_K / 4;
    uint8_t* signs = qh + QK_K / 32;
    uint8_t* ysc = signs + QK_K / 8;
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sumx2 = row_sumx2(xbl);
    const float sigma2 = 2 * sumx2 / QK_K;

    for (int ib = 0; ib < QK_K / block_size; ++ib) {
      const float* xb = xbl + block_size * ib;
      if (quant_weights) {
        const float* qw = quant_weights + QK_K * ibl + block_size * ib;
        for (int i = 0; i < block_size; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
      } else {
        for (int i = 0; i < block_size; ++i) weight[i] = xb[i] * xb[i];
      }
      for (int i = 0; i < block_size; ++i) waux[i] = std::sqrt(weight[i]);
      for (int k = 0; k < bs8; ++k) {
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
          if (xb[8 * k + i] >= 0) {
            xval[8 * k + i] = xb[8 * k + i];
          } else {
            xval[8 * k + i] = -xb[8 * k + i];
            s |= uint8_t(1 << i);
          }
        }
        block_signs[k] = s;
      }
      float max = xval[0];
      for (int i = 1; i < block_size; ++i) max = max_(max, xval[i]);
      std::memset(L, 0, block_size);
      if (!max) {
        scales[ib] = 0;
        continue;
      }
      float best = 0;
      float scale = max / (2 * kMaxQ - 1);
      for (int k = 0; k < bs4; ++k) is_on_grid[k] = false;
      if (!best_candidate<4, block_size, 3, kMaxQ>(g, wide, 0.2f, max, xval, weight, waux, scale, best, L, is_on_grid)) return false;
      int n_not_ongrid = 0;
      for (int k = 0; k < bs4; ++k)
        if (!is_on_grid[k]) ++n_not_ongrid;
      if (n_not_ongrid > 0 && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < bs4; ++k) {  // (ggml: every group, on the grid or not)
          int u = 0;
          for (int i = 0; i < 4; ++i) {
            int l = nearest_int(0.5f * (id * xval[4 * k + i] - 1));
            l = max_(0, min_(kMaxQ - 1, l));
            u |= l << 3 * i;
          }
          int grid_index = g.map[size_t(u)];
          if (grid_index < 0) {
            grid_index = find_best_neighbour<4>(g, neighbours_of(g, u), xval + 4 * k, waux + 4 * k, scale, L + 4 * k, wide);
            if (grid_index < 0) return false;
          }
          const int8_t* pg = g.point(grid_index);
          for (int i = 0; i < 4; ++i) L[4 * k + i] = int8_t((pg[i] - 1) / 2);
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < block_size; ++i) {
          const float w = weight[i];
          const float q = float(2 * L[i] + 1);
          sumqx += w * xval[i] * q;
          sumq2 += w * q * q;
        }
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < bs8; ++k) block_signs[k] = uint8_t(~block_signs[k]);
      }
      for (int k = 0; k < bs4; ++k) {
        int u = 0;
        for (int i = 0; i < 4; ++i) u |= L[4 * k + i] << 3 * i;
        const int grid_index = g.map[size_t(u)];
        if (grid_index < 0) return false;
        qs[k] = uint8_t(grid_index & 255);
        qh[(ib * bs4 + k) / 8] |= uint8_t((grid_index >> 8) << ((ib * bs4 + k) % 8));
      }
      qs += bs4;
      for (int k = 0; k < bs8; ++k) signs[k] = block_signs[k];
      signs += bs8;
      if (!(scale >= 0)) return false;
      scales[ib] = scale;
      max_scale = max_(max_scale, scale);
    }

    if (!max_scale) continue;
    const float d = max_scale / 31;
    put_u16(y, fp32_to_fp16(d * 1.033f));
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / block_size; ib += 2) {
      int l1 = nearest_int(0.5f * (id * scales[ib + 0] - 1));
      l1 = max_(0, min_(15, l1));
      int l2 = nearest_int(0.5f * (id * scales[ib + 1] - 1));
      l2 = max_(0, min_(15, l2));
      ysc[ib / 2] = uint8_t(l1 | (l2 << 4));
    }
  }
  return true;
}
bool quantize_row_iq3_s(const float* x, uint8_t* y, int64_t k) { return quantize_row_iq3_s_w(x, y, k, nullptr); }

// ---------------- IQ1_S, IQ1_M: ternary grid points, -1/0/+1 shifted by +-delta ----------------
namespace {

// ggml's qsort of (value, index) pairs by value (iq1_sort_helper: -1, 1, or 0 for equal or
// unordered) as glibc's qsort runs it: a top-down merge sort (msort_with_tmp: halves of n / 2 and
// n - n / 2, the left element taken unless it compares greater). Equal values keep their index
// order, as any stable sort keeps them; spelled out so that NaN (never equal, never ordered)
// also sorts as there.
struct Pair {
  float v;
  int i;
};
void msort_pairs(Pair* b, int n, Pair* tmp) {
  if (n <= 1) return;
  const int n1 = n / 2, n2 = n - n1;
  msort_pairs(b, n1, tmp);
  msort_pairs(b + n1, n2, tmp);
  int i = 0, j = n1, k = 0;
  while (i < n1 && j < n) tmp[k++] = b[i].v > b[j].v ? b[j++] : b[i++];  // cmp(b1, b2) <= 0: b1
  while (i < n1) tmp[k++] = b[i++];
  std::memcpy(b, tmp, size_t(k) * sizeof(Pair));  // (b[j..n) already in place)
}
void sort_pairs(const float* xb, int n, Pair* pairs) {
  Pair tmp[32];
  for (int j = 0; j < n; ++j) pairs[j] = {xb[j], j};
  msort_pairs(pairs, n, tmp);
}

// ggml's iq1_find_best_neighbour2: least weighted squared distance; -1 where ggml would fall
// back to a loop over the whole grid that reads past its 8 values (xval[i], i the grid index):
// every distance NaN or >= FLT_MAX, which only overflowing inputs reach (refused by the table).
int iq1_find_best_neighbour2(const SearchGrid& g, const uint16_t* neighbours, const float* xval, const float* weight,
                             float scale, const float* xg, int8_t* L) {
  const int num_neighbors = neighbours[0];
  float best_score = FLT_MAX;
  int grid_index = -1;
  for (int j = 1; j <= num_neighbors; ++j) {
    const int8_t* pg = g.point(neighbours[j]);
    float d2 = 0;
    for (int i = 0; i < 8; ++i) {
      const float q = xg[(pg[i] - 1) / 2];
      const float w = weight[i];
      const float diff = scale * q - xval[i];
      d2 += w * diff * diff;
    }
    if (d2 < best_score) {
      best_score = d2;
      grid_index = neighbours[j];
    }
  }
  if (grid_index < 0) return -1;
  const int8_t* pg = g.point(grid_index);
  for (int i = 0; i < 8; ++i) L[i] = int8_t((pg[i] - 1) / 2);
  return grid_index;
}

}  // namespace

bool quantize_row_iq1_s_w(const float* x, uint8_t* vy, int64_t n, const float* quant_weights) {
  const SearchGrid& g = search_grid(kG1s);
  constexpr int block_size = 32;  // IQ1S_BLOCK_SIZE
  const int64_t nbl = n / QK_K;
  const float x_p[3] = {-1 + IQ1S_DELTA, IQ1S_DELTA, 1 + IQ1S_DELTA};
  const float x_m[3] = {-1 - IQ1S_DELTA, -IQ1S_DELTA, 1 - IQ1S_DELTA};
  float scales[QK_K / block_size];
  float weight[block_size];
  int8_t L[block_size];
  float sumx[block_size + 1];
  float sumw[block_size + 1];
  Pair pairs[block_size];
  uint16_t index[block_size / 8];
  int8_t shifts[QK_K / block_size];

  for (int64_t ibl = 0; ibl < nbl; ++ibl) {
    uint8_t* y = vy + ibl * kIQ1_SBlockBytes;
    uint8_t* qs = y + 2;
    uint8_t* qhb = qs + QK_K / 8;
    uint16_t qh[QK_K / 32] = {};
    put_u16(y, fp32_to_fp16(0.f));
    std::memset(qs, 0, QK_K / 8);
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sumx2 = row_sumx2(xbl);
    const float sigma2 = 2 * sumx2 / QK_K;

    for (int ib = 0; ib < QK_K / block_size; ++ib) {
      const float* xb = xbl + block_size * ib;
      const float* qw = quant_weights + QK_K * ibl + block_size * ib;
      for (int i = 0; i < block_size; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
      float max = std::fabs(xb[0]);
      for (int i = 1; i < block_size; ++i) max = max_(max, std::fabs(xb[i]));
      if (max < GROUP_MAX_EPS_IQ1_S) {
        scales[ib] = 0;
        shifts[ib] = 1;
        std::memset(L, 1, block_size);
        continue;
      }
      sort_pairs(xb, block_size, pairs);
      sumx[0] = sumw[0] = 0;
      for (int j = 0; j < block_size; ++j) {
        const int i = pairs[j].i;
        sumx[j + 1] = sumx[j] + weight[i] * xb[i];
        sumw[j + 1] = sumw[j] + weight[i];
      }
      float best_score = -FLT_MAX, scale = max;
      int besti1 = -1, besti2 = -1, best_shift = 0;
      for (int i1 = 0; i1 <= block_size; ++i1) {
        for (int i2 = i1; i2 <= block_size; ++i2) {
          float sumqx = (sumx[i1] - sumx[0]) * x_p[0] + (sumx[i2] - sumx[i1]) * x_p[1] + (sumx[block_size] - sumx[i2]) * x_p[2];
          float sumq2 = (sumw[i1] - sumw[0]) * x_p[0] * x_p[0] + (sumw[i2] - sumw[i1]) * x_p[1] * x_p[1] +
                        (sumw[block_size] - sumw[i2]) * x_p[2] * x_p[2];
          if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
            scale = sumqx / sumq2;
            best_score = scale * sumqx;
            besti1 = i1;
            besti2 = i2;
            best_shift = 1;
          }
          sumqx = (sumx[i1] - sumx[0]) * x_m[0] + (sumx[i2] - sumx[i1]) * x_m[1] + (sumx[block_size] - sumx[i2]) * x_m[2];
          sumq2 = (sumw[i1] - sumw[0]) * x_m[0] * x_m[0] + (sumw[i2] - sumw[i1]) * x_m[1] * x_m[1] +
                  (sumw[block_size] - sumw[i2]) * x_m[2] * x_m[2];
          if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
            scale = sumqx / sumq2;
            best_score = scale * sumqx;
            besti1 = i1;
            besti2 = i2;
            best_shift = -1;
          }
        }
      }
      if (besti1 < 0 || besti2 < 0 || best_shift == 0) {
        scales[ib] = 0;
        shifts[ib] = 1;
        std::memset(L, 1, block_size);
        continue;
      }
      for (int j = 0; j < besti1; ++j) L[pairs[j].i] = 0;
      for (int j = besti1; j < besti2; ++j) L[pairs[j].i] = 1;
      for (int j = besti2; j < block_size; ++j) L[pairs[j].i] = 2;
      if (scale < 0) {
        for (int j = 0; j < block_size; ++j) L[j] = int8_t(2 - L[j]);
        scale = -scale;
        best_shift = -best_shift;
      }
      bool all_on_grid = true;
      const float* xx = best_shift == 1 ? x_p : x_m;
      for (int k = 0; k < block_size / 8; ++k) {
        int u = 0;
        for (int j = 0; j < 8; ++j) u |= L[8 * k + j] << 2 * j;
        int grid_index = g.map[size_t(u)];
        if (grid_index < 0) {
          all_on_grid = false;
          grid_index = iq1_find_best_neighbour2(g, neighbours_of(g, u), xb + 8 * k, weight + 8 * k, scale, xx, L + 8 * k);
          if (grid_index < 0) return false;
        }
        index[k] = uint16_t(grid_index);
      }
      if (!all_on_grid) {
        float sumqx = 0, sumq2 = 0;
        for (int k = 0; k < block_size / 8; ++k) {
          const int8_t* pg = g.point(index[k]);
          for (int j = 0; j < 8; ++j) {
            const float w = weight[8 * k + j];
            const float q = xx[(pg[j] - 1) / 2];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
          }
        }
        if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
      }
      uint16_t h = 0;
      for (int k = 0; k < block_size / 8; ++k) {
        qs[(block_size / 8) * ib + k] = uint8_t(index[k] & 255);
        h |= uint16_t((index[k] >> 8) << 3 * k);
      }
      qh[ib] = h;
      if (!(scale >= 0)) return false;
      scales[ib] = scale;
      shifts[ib] = int8_t(best_shift);
      max_scale = max_(max_scale, scale);
    }

    if (max_scale) {
      const float d = max_scale / 15;
      put_u16(y, fp32_to_fp16(d * 1.125f));
      const float id = 1 / d;
      for (int ib = 0; ib < QK_K / block_size; ++ib) {
        int l = nearest_int(0.5f * (id * scales[ib] - 1));
        l = max_(0, min_(7, l));
        if (shifts[ib] == -1) l |= 8;
        qh[ib] |= uint16_t(l << 12);
      }
    }
    for (int ib = 0; ib < QK_K / 32; ++ib) put_u16(qhb + 2 * ib, qh[ib]);
  }
  return true;
}

bool quantize_row_iq1_m_w(const float* x, uint8_t* vy, int64_t n, const float* quant_weights) {
  const SearchGrid& g = search_grid(kG1s);
  constexpr int block_size = 16;  // IQ1M_BLOCK_SIZE
  const int64_t nbl = n / QK_K;
  const float x_p[3] = {-1 + IQ1M_DELTA, IQ1M_DELTA, 1 + IQ1M_DELTA};
  const float x_m[3] = {-1 - IQ1M_DELTA, -IQ1M_DELTA, 1 - IQ1M_DELTA};
  const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
  float scales[QK_K / block_size];
  float weight[block_size];
  int8_t L[block_size];
  Pair pairs[block_size];
  uint16_t index[block_size / 8];
  int8_t shifts[QK_K / block_size];
  float sumqx[4], sumq2[4];
  const float* xx;

  for (int64_t ibl = 0; ibl < nbl; ++ibl) {
    uint8_t* y = vy + ibl * kIQ1_MBlockBytes;
    uint8_t* qs = y;
    uint8_t* qh = y + QK_K / 8;
    uint16_t sc[4] = {};  // the block's scales[8], as ggml's uint16_t view of them
    std::memset(y, 0, size_t(kIQ1_MBlockBytes));
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sumx2 = row_sumx2(xbl);
    const float sigma2 = 2 * sumx2 / QK_K;

    for (int ib = 0; ib < QK_K / block_size; ++ib) {
      const float* xb = xbl + block_size * ib;
      if (quant_weights) {
        const float* qw = quant_weights + QK_K * ibl + block_size * ib;
        for (int i = 0; i < block_size; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
      } else {
        for (int i = 0; i < block_size; ++i) weight[i] = xb[i] * xb[i];
      }
      float max = std::fabs(xb[0]);
      for (int i = 1; i < block_size; ++i) max = max_(max, std::fabs(xb[i]));
      if (max < GROUP_MAX_EPS_IQ1_M) {
        scales[ib] = 0;
        shifts[ib] = 0;
        std::memset(L, 1, block_size);
        continue;
      }
      sort_pairs(xb, block_size, pairs);
      float best_score = -FLT_MAX, scale = max;
      int besti1 = -1, besti2 = -1, best_k = -1;
      // 0: +, +   1: +, -   2: -, +   3: -, -
      for (int i1 = 0; i1 <= block_size; ++i1) {
        for (int i2 = i1; i2 <= block_size; ++i2) {
          std::memset(sumqx, 0, sizeof(sumqx));
          std::memset(sumq2, 0, sizeof(sumq2));
          auto add = [&](int j0, int j1, int lev) {
            for (int j = j0; j < j1; ++j) {
              const int i = pairs[j].i;
              if (i < block_size / 2) {
                sumqx[0] += weight[i] * x_p[lev] * xb[i];
                sumqx[1] += weight[i] * x_p[lev] * xb[i];
                sumqx[2] += weight[i] * x_m[lev] * xb[i];
                sumqx[3] += weight[i] * x_m[lev] * xb[i];
                sumq2[0] += weight[i] * x_p[lev] * x_p[lev];
                sumq2[1] += weight[i] * x_p[lev] * x_p[lev];
                sumq2[2] += weight[i] * x_m[lev] * x_m[lev];
                sumq2[3] += weight[i] * x_m[lev] * x_m[lev];
              } else {
                sumqx[0] += weight[i] * x_p[lev] * xb[i];
                sumqx[2] += weight[i] * x_p[lev] * xb[i];
                sumqx[1] += weight[i] * x_m[lev] * xb[i];
                sumqx[3] += weight[i] * x_m[lev] * xb[i];
                sumq2[0] += weight[i] * x_p[lev] * x_p[lev];
                sumq2[2] += weight[i] * x_p[lev] * x_p[lev];
                sumq2[1] += weight[i] * x_m[lev] * x_m[lev];
                sumq2[3] += weight[i] * x_m[lev] * x_m[lev];
              }
            }
          };
          add(0, i1, 0);
          add(i1, i2, 1);
          add(i2, block_size, 2);
          for (int k = 0; k < 4; ++k) {
            if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
              scale = sumqx[k] / sumq2[k];
              best_score = scale * sumqx[k];
              besti1 = i1;
              besti2 = i2;
              best_k = k;
            }
          }
        }
      }
      if (besti1 < 0 || besti2 < 0 || best_k < 0) {
        scales[ib] = 0;
        shifts[ib] = 0;
        std::memset(L, 1, block_size);
        continue;
      }
      for (int j = 0; j < besti1; ++j) L[pairs[j].i] = 0;
      for (int j = besti1; j < besti2; ++j) L[pairs[j].i] = 1;
      for (int j = besti2; j < block_size; ++j) L[pairs[j].i] = 2;
      if (scale < 0) {
        for (int j = 0; j < block_size; ++j) L[j] = int8_t(2 - L[j]);
        scale = -scale;
        best_k = best_k == 0 ? 3 : best_k == 1 ? 2 : best_k == 2 ? 1 : 0;
      }
      bool all_on_grid = true;
      for (int k = 0; k < block_size / 8; ++k) {
        if (k == 0) xx = best_k < 2 ? x_p : x_m;
        else xx = best_k % 2 == 0 ? x_p : x_m;
        int u = 0;
        for (int j = 0; j < 8; ++j) u |= L[8 * k + j] << 2 * j;
        int grid_index = g.map[size_t(u)];
        if (grid_index < 0) {
          all_on_grid = false;
          grid_index = iq1_find_best_neighbour2(g, neighbours_of(g, u), xb + 8 * k, weight + 8 * k, scale, xx, L + 8 * k);
          if (grid_index < 0) return false;
        }
        index[k] = uint16_t(grid_index);
      }
      if (!all_on_grid) {
        float sumqx_f = 0, sumq2_f = 0;
        for (int k = 0; k < block_size / 8; ++k) {
          if (k == 0) xx = best_k < 2 ? x_p : x_m;
          else xx = best_k % 2 == 0 ? x_p : x_m;
          const int8_t* pg = g.point(index[k]);
          for (int j = 0; j < 8; ++j) {
            const float w = weight[8 * k + j];
            const float q = xx[(pg[j] - 1) / 2];
            sumqx_f += w * q * xb[8 * k + j];
            sumq2_f += w * q * q;
          }
        }
        if (sumqx_f > 0 && sumq2_f > 0) scale = sumqx_f / sumq2_f;
      }
      qs[2 * ib + 0] = uint8_t(index[0] & 255);
      qs[2 * ib + 1] = uint8_t(index[1] & 255);
      qh[ib] = uint8_t((index[0] >> 8) | ((index[1] >> 8) << 4));
      if (!(scale >= 0)) return false;
      scales[ib] = scale;
      shifts[ib] = int8_t(best_k);
      max_scale = max_(max_scale, scale);
    }

    if (!max_scale) continue;
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx_f = 0, sumq2_f = 0;
    for (int ib = 0; ib < QK_K / block_size; ++ib) {
      int l = nearest_int(0.5f * (id * scales[ib + 0] - 1));
      l = max_(0, min_(7, l));
      sc[ib / 4] |= uint16_t(l << 3 * (ib % 4));
      qh[ib] |= masks[shifts[ib]];
      const float* xb = xbl + block_size * ib;
      if (quant_weights) {
        const float* qw = quant_weights + QK_K * ibl + block_size * ib;
        for (int i = 0; i < block_size; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
      } else {
        for (int i = 0; i < block_size; ++i) weight[i] = xb[i] * xb[i];
      }
      for (int k = 0; k < block_size / 8; ++k) {
        if (k == 0) xx = shifts[ib] < 2 ? x_p : x_m;
        else xx = shifts[ib] % 2 == 0 ? x_p : x_m;
        const int8_t* pg = g.point(qs[2 * ib + k] + ((qh[ib] << (8 - 4 * k)) & 0x700));
        for (int j = 0; j < 8; ++j) {
          const float w = weight[8 * k + j];
          const float q = xx[(pg[j] - 1) / 2] * float(2 * l + 1);
          sumqx_f += w * q * xb[8 * k + j];
          sumq2_f += w * q * q;
        }
      }
    }
    if (sumq2_f > 0) d = sumqx_f / sumq2_f;
    const uint16_t s = fp32_to_fp16(d * 1.1125f);
    sc[0] |= uint16_t((s & 0x000f) << 12);
    sc[1] |= uint16_t((s & 0x00f0) << 8);
    sc[2] |= uint16_t((s & 0x0f00) << 4);
    sc[3] |= uint16_t((s & 0xf000) << 0);
    for (int i = 0; i < 4; ++i) put_u16(y + QK_K / 8 + QK_K / 16 + 2 * i, sc[i]);
  }
  return true;
}
bool quantize_row_iq1_m(const float* x, uint8_t* y, int64_t k) { return quantize_row_iq1_m_w(x, y, k, nullptr); }

// ---------------- dequantize_row_* ----------------
void dequantize_row_iq2_xxs(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = x + i * kIQ2_XXSBlockBytes;
    const float d = get_f16(b);
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      const uint8_t* aux8 = b + 2 + 8 * ib32;
      const uint32_t aux1 = get_u32(aux8 + 4);
      const float db = d * (0.5f + float(aux1 >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = kIq2xxsGrid[aux8[l]];
        const uint8_t signs = kSigns[(aux1 >> 7 * l) & 127];
        for (int j = 0; j < 8; ++j) y[j] = db * float(grid_byte(grid, j)) * (signs & (1 << j) ? -1.f : 1.f);
        y += 8;
      }
    }
  }
}

void dequantize_row_iq2_xs(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = x + i * kIQ2_XSBlockBytes;
    const float d = get_f16(b);
    const uint8_t* scales = b + 2 + QK_K / 4;
    float db[2];
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      db[0] = d * (0.5f + float(scales[ib32] & 0xf)) * 0.25f;
      db[1] = d * (0.5f + float(scales[ib32] >> 4)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        const uint16_t q = get_u16(b + 2 + 2 * (4 * ib32 + l));
        const uint64_t grid = kIq2xsGrid[q & 511];
        const uint8_t signs = kSigns[q >> 9];
        for (int j = 0; j < 8; ++j) y[j] = db[l / 2] * float(grid_byte(grid, j)) * (signs & (1 << j) ? -1.f : 1.f);
        y += 8;
      }
    }
  }
}

void dequantize_row_iq2_s(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = x + i * kIQ2_SBlockBytes;
    const float d = get_f16(b);
    const uint8_t* qs = b + 2;
    const uint8_t* qh = b + 2 + QK_K / 4;
    const uint8_t* scales = qh + QK_K / 32;
    const uint8_t* signs = qs + QK_K / 8;
    float db[2];
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      db[0] = d * (0.5f + float(scales[ib32] & 0xf)) * 0.25f;
      db[1] = d * (0.5f + float(scales[ib32] >> 4)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        const float dl = db[l / 2];
        const uint64_t grid = kIq2sGrid[size_t(qs[l] | ((qh[ib32] << (8 - 2 * l)) & 0x300))];
        for (int j = 0; j < 8; ++j) y[j] = dl * float(grid_byte(grid, j)) * (signs[l] & (1 << j) ? -1.f : 1.f);
        y += 8;
      }
      qs += 4;
      signs += 4;
    }
  }
}

void dequantize_row_iq3_xxs(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = x + i * kIQ3_XXSBlockBytes;
    const float d = get_f16(b);
    const uint8_t* qs = b + 2;
    const uint8_t* scales_and_signs = qs + QK_K / 4;
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      const uint32_t aux32 = get_u32(scales_and_signs + 4 * ib32);
      const float db = d * (0.5f + float(aux32 >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l) {
        const uint8_t signs = kSigns[(aux32 >> 7 * l) & 127];
        const uint32_t grid1 = kIq3xxsGrid[qs[2 * l + 0]];
        const uint32_t grid2 = kIq3xxsGrid[qs[2 * l + 1]];
        for (int j = 0; j < 4; ++j) {
          y[j + 0] = db * float(grid_byte(grid1, j)) * (signs & (1 << j) ? -1.f : 1.f);
          y[j + 4] = db * float(grid_byte(grid2, j)) * (signs & (1 << (j + 4)) ? -1.f : 1.f);
        }
        y += 8;
      }
      qs += 8;
    }
  }
}

void dequantize_row_iq3_s(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = x + i * kIQ3_SBlockBytes;
    const float d = get_f16(b);
    const uint8_t* qs = b + 2;
    const uint8_t* qh = qs + QK_K / 4;
    const uint8_t* signs = qh + QK_K / 32;
    const uint8_t* scales = signs + QK_K / 8;
    for (int ib32 = 0; ib32 < QK_K / 32; ib32 += 2) {
      const float db1 = d * float(1 + 2 * (scales[ib32 / 2] & 0xf));
      const float db2 = d * float(1 + 2 * (scales[ib32 / 2] >> 4));
      for (int half = 0; half < 2; ++half) {
        const float db = half ? db2 : db1;
        for (int l = 0; l < 4; ++l) {
          const uint32_t grid1 = kIq3sGrid[size_t(qs[2 * l + 0] | ((qh[half] << (8 - 2 * l)) & 256))];
          const uint32_t grid2 = kIq3sGrid[size_t(qs[2 * l + 1] | ((qh[half] << (7 - 2 * l)) & 256))];
          for (int j = 0; j < 4; ++j) {
            y[j + 0] = db * float(grid_byte(grid1, j)) * (signs[l] & (1 << j) ? -1.f : 1.f);
            y[j + 4] = db * float(grid_byte(grid2, j)) * (signs[l] & (1 << (j + 4)) ? -1.f : 1.f);
          }
          y += 8;
        }
        qs += 8;
        signs += 4;
      }
      qh += 2;
    }
  }
}

void dequantize_row_iq1_s(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = x + i * kIQ1_SBlockBytes;
    const float d = get_f16(b);
    const uint8_t* qs = b + 2;
    const uint8_t* qhb = qs + QK_K / 8;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const uint16_t qh = get_u16(qhb + 2 * ib);
      const float dl = d * float(2 * ((qh >> 12) & 7) + 1);
      const float delta = qh & 0x8000 ? -IQ1S_DELTA : IQ1S_DELTA;
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = kIq1sGrid[size_t(qs[l] | (((qh >> 3 * l) & 7) << 8))];
        for (int j = 0; j < 8; ++j) y[j] = dl * (float(int8_t(grid_byte(grid, j))) + delta);
        y += 8;
      }
      qs += 4;
    }
  }
}

void dequantize_row_iq1_m(const uint8_t* x, float* y, int64_t k) {
  const int64_t nb = k / QK_K;
  float delta[4];
  uint16_t idx[4];
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = x + i * kIQ1_MBlockBytes;
    const uint8_t* qs = b;
    const uint8_t* qh = b + QK_K / 8;
    uint16_t sc[4];
    for (int j = 0; j < 4; ++j) sc[j] = get_u16(b + QK_K / 8 + QK_K / 16 + 2 * j);
    const uint16_t scale = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const float d = fp16_to_fp32(scale);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const float dl1 = d * float(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1);
      const float dl2 = d * float(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1);
      idx[0] = uint16_t(qs[0] | ((qh[0] << 8) & 0x700));
      idx[1] = uint16_t(qs[1] | ((qh[0] << 4) & 0x700));
      idx[2] = uint16_t(qs[2] | ((qh[1] << 8) & 0x700));
      idx[3] = uint16_t(qs[3] | ((qh[1] << 4) & 0x700));
      delta[0] = qh[0] & 0x08 ? -IQ1S_DELTA : IQ1S_DELTA;
      delta[1] = qh[0] & 0x80 ? -IQ1S_DELTA : IQ1S_DELTA;
      delta[2] = qh[1] & 0x08 ? -IQ1S_DELTA : IQ1S_DELTA;
      delta[3] = qh[1] & 0x80 ? -IQ1S_DELTA : IQ1S_DELTA;
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = kIq1sGrid[idx[l]];
        const float dl = l < 2 ? dl1 : dl2;
        for (int j = 0; j < 8; ++j) y[j] = dl * (float(int8_t(grid_byte(grid, j))) + delta[l]);
        y += 8;
      }
      qs += 4;
      qh += 2;
    }
  }
}

// ---- the derived tables, for the tests that hold them to ggml-common.h's ----
const uint64_t* iq_table_u64(IqTable t) {
  switch (t) {
    case IqTable::Iq2xxsGrid: return kIq2xxsGrid.data();
    case IqTable::Iq2xsGrid: return kIq2xsGrid.data();
    case IqTable::Iq2sGrid: return kIq2sGrid.data();
    case IqTable::Iq1sGrid: return kIq1sGrid.data();
    default: return nullptr;
  }
}
const uint32_t* iq_table_u32(IqTable t) {
  switch (t) {
    case IqTable::Iq3xxsGrid: return kIq3xxsGrid.data();
    case IqTable::Iq3sGrid: return kIq3sGrid.data();
    default: return nullptr;
  }
}
const uint8_t* iq_ksigns() { return kSigns.data(); }
void iq_init_grids() {
  for (int g = 0; g < kGridCount; ++g) search_grid(GridId(g));
}

}  // namespace ggml
}  // namespace leapconv

// ---- the block view's decode: dequantize_row_<type>'s reads, a grid index at a time ----
namespace leapconv {
namespace ggml {

namespace {
using Slice = CodebookGroup::Slice;
// A group of 8 (or 4) from grid point `g` (coordinates as bytes), its signs and scale; IQ1's
// grid bytes are int8 and take a delta instead of signs.
template <typename T>
CodebookGroup group_of(int first, int size, int index, int bits, std::initializer_list<Slice> at,
                       std::initializer_list<int> aux, T g, int signs, float scale) {
  CodebookGroup c;
  c.first = first;
  c.size = size;
  c.index = index;
  c.index_bits = bits;
  std::copy(at.begin(), at.end(), c.index_slices);
  std::copy(aux.begin(), aux.end(), c.aux_bytes);
  c.signs = signs;
  c.scale = scale;
  for (int j = 0; j < size; ++j) {
    c.grid[j] = grid_byte(g, j);
    c.values[j] = scale * float(grid_byte(g, j)) * (signs & (1 << j) ? -1.f : 1.f);
  }
  return c;
}
CodebookGroup iq1_group(int first, int index, std::initializer_list<Slice> at, std::initializer_list<int> aux, uint64_t g,
                        float dl, float delta) {
  CodebookGroup c;
  c.first = first;
  c.index = index;
  c.index_bits = 11;
  std::copy(at.begin(), at.end(), c.index_slices);
  std::copy(aux.begin(), aux.end(), c.aux_bytes);
  c.scale = dl;
  c.delta = delta;
  for (int j = 0; j < 8; ++j) {
    c.grid[j] = int8_t(grid_byte(g, j));
    c.values[j] = dl * (float(int8_t(grid_byte(g, j))) + delta);
  }
  return c;
}
}  // namespace

std::vector<CodebookGroup> codebook_groups(GgmlType type, const uint8_t* b) {
  std::vector<CodebookGroup> v;
  switch (type) {
    case GgmlType::IQ2_XXS: {  // d, then per 32 values: 4 index bytes and a u32 of 4 x 7 sign bits and a 4-bit scale
      const float d = get_f16(b);
      for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
        const int at = 2 + 8 * ib32;
        const uint32_t aux1 = get_u32(b + at + 4);
        const float db = d * (0.5f + float(aux1 >> 28)) * 0.25f;
        for (int l = 0; l < 4; ++l)
          v.push_back(group_of(32 * ib32 + 8 * l, 8, b[at + l], 8, {{at + l, 0, 8}}, {at + 4, at + 5, at + 6, at + 7},
                               kIq2xxsGrid[b[at + l]], kSigns[(aux1 >> 7 * l) & 127], db));
      }
      break;
    }
    case GgmlType::IQ2_XS: {  // a u16 per 8 values: 9-bit index, 7 sign bits; then 4-bit scales
      const float d = get_f16(b);
      const int scales = 2 + QK_K / 4;
      for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
        const float db[2] = {d * (0.5f + float(b[scales + ib32] & 0xf)) * 0.25f, d * (0.5f + float(b[scales + ib32] >> 4)) * 0.25f};
        for (int l = 0; l < 4; ++l) {
          const int at = 2 + 2 * (4 * ib32 + l);
          const uint16_t q = get_u16(b + at);
          v.push_back(group_of(32 * ib32 + 8 * l, 8, q & 511, 9, {{at, 0, 8}, {at + 1, 0, 1}}, {at + 1, scales + ib32},
                               kIq2xsGrid[q & 511], kSigns[q >> 9], db[l / 2]));
        }
      }
      break;
    }
    case GgmlType::IQ2_S: {
      const float d = get_f16(b);
      const int qs = 2, qh = 2 + QK_K / 4, scales = qh + QK_K / 32, signs = qs + QK_K / 8;
      for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
        const float db[2] = {d * (0.5f + float(b[scales + ib32] & 0xf)) * 0.25f, d * (0.5f + float(b[scales + ib32] >> 4)) * 0.25f};
        for (int l = 0; l < 4; ++l) {
          const int at = qs + 4 * ib32 + l, index = b[at] | ((b[qh + ib32] << (8 - 2 * l)) & 0x300);
          v.push_back(group_of(32 * ib32 + 8 * l, 8, index, 10, {{at, 0, 8}, {qh + ib32, 2 * l, 2}}, {signs + 4 * ib32 + l, scales + ib32},
                               kIq2sGrid[size_t(index)], b[signs + 4 * ib32 + l], db[l / 2]));
        }
      }
      break;
    }
    case GgmlType::IQ3_XXS: {
      const float d = get_f16(b);
      const int qs = 2, ss = qs + QK_K / 4;
      for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
        const int sa = ss + 4 * ib32;
        const uint32_t aux32 = get_u32(b + sa);
        const float db = d * (0.5f + float(aux32 >> 28)) * 0.5f;
        for (int l = 0; l < 4; ++l) {
          const int signs = kSigns[(aux32 >> 7 * l) & 127];
          for (int h = 0; h < 2; ++h) {
            const int at = qs + 8 * ib32 + 2 * l + h;
            v.push_back(group_of(32 * ib32 + 8 * l + 4 * h, 4, b[at], 8, {{at, 0, 8}}, {sa, sa + 1, sa + 2, sa + 3},
                                 kIq3xxsGrid[b[at]], (signs >> 4 * h) & 15, db));
          }
        }
      }
      break;
    }
    case GgmlType::IQ3_S: {
      const float d = get_f16(b);
      const int qs = 2, qh = qs + QK_K / 4, signs = qh + QK_K / 32, scales = signs + QK_K / 8;
      for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
        const int s = b[scales + ib32 / 2];
        const float db = d * float(1 + 2 * (ib32 % 2 ? s >> 4 : s & 0xf));
        for (int l = 0; l < 4; ++l)
          for (int h = 0; h < 2; ++h) {
            const int at = qs + 8 * ib32 + 2 * l + h;
            const int index = b[at] | ((b[qh + ib32] << (8 - 2 * l - h)) & 256);
            v.push_back(group_of(32 * ib32 + 8 * l + 4 * h, 4, index, 9, {{at, 0, 8}, {qh + ib32, 2 * l + h, 1}},
                                 {signs + 4 * ib32 + l, scales + ib32 / 2}, kIq3sGrid[size_t(index)], (b[signs + 4 * ib32 + l] >> 4 * h) & 15, db));
          }
      }
      break;
    }
    case GgmlType::IQ1_S: {
      const float d = get_f16(b);
      const int qs = 2, qhb = qs + QK_K / 8;
      for (int ib = 0; ib < QK_K / 32; ++ib) {
        const int hb = qhb + 2 * ib;
        const uint16_t qh = get_u16(b + hb);
        const float dl = d * float(2 * ((qh >> 12) & 7) + 1);
        const float delta = qh & 0x8000 ? -IQ1S_DELTA : IQ1S_DELTA;
        for (int l = 0; l < 4; ++l) {
          const int at = qs + 4 * ib + l, index = b[at] | (((qh >> 3 * l) & 7) << 8), bit = 3 * l;
          auto add = [&](std::initializer_list<Slice> where) {
            v.push_back(iq1_group(32 * ib + 8 * l, index, where, {hb, hb + 1}, kIq1sGrid[size_t(index)], dl, delta));
          };
          if (bit + 3 <= 8) add({{at, 0, 8}, {hb, bit, 3}});
          else if (bit >= 8) add({{at, 0, 8}, {hb + 1, bit - 8, 3}});
          else add({{at, 0, 8}, {hb, bit, 8 - bit}, {hb + 1, 0, bit + 3 - 8}});  // (bits 6..8 span the u16's bytes)
        }
      }
      break;
    }
    case GgmlType::IQ1_M: {  // no d field: its f16 is the top nibbles of the four scale words
      const int qs0 = 0, qh0 = QK_K / 8, sc0 = QK_K / 8 + QK_K / 16;
      uint16_t sc[4];
      for (int j = 0; j < 4; ++j) sc[j] = get_u16(b + sc0 + 2 * j);
      const float d = fp16_to_fp32(uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
      for (int ib = 0; ib < QK_K / 32; ++ib) {
        const float dl1 = d * float(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1);
        const float dl2 = d * float(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1);
        for (int l = 0; l < 4; ++l) {
          const int at = qs0 + 4 * ib + l, hb = qh0 + 2 * ib + l / 2, h = b[hb];
          const int index = b[at] | ((l % 2 ? h << 4 : h << 8) & 0x700);
          const float delta = h & (l % 2 ? 0x80 : 0x08) ? -IQ1S_DELTA : IQ1S_DELTA;
          v.push_back(iq1_group(32 * ib + 8 * l, index, {{at, 0, 8}, {hb, l % 2 ? 4 : 0, 3}}, {hb, sc0 + 2 * (ib / 2), sc0 + 2 * (ib / 2) + 1},
                                kIq1sGrid[size_t(index)], l < 2 ? dl1 : dl2, delta));
        }
      }
      break;
    }
    default: break;
  }
  return v;
}

std::vector<CodebookField> codebook_fields(GgmlType type) {
  switch (type) {
    case GgmlType::IQ2_XXS: return {{"d", 0, 2, "f16 scale"}, {"qs", 2, 64, "per 32 values: 4 grid indices, then 4 × 7 sign bits and a 4-bit scale"}};
    case GgmlType::IQ2_XS: return {{"d", 0, 2, "f16 scale"}, {"qs", 2, 64, "a 9-bit grid index and 7 sign bits per 8 values"}, {"scales", 66, 8, "4-bit scales"}};
    case GgmlType::IQ2_S: return {{"d", 0, 2, "f16 scale"}, {"qs", 2, 32, "grid indices, low 8 bits"}, {"signs", 34, 32, "sign bits"},
                                  {"qh", 66, 8, "grid indices, high 2 bits"}, {"scales", 74, 8, "4-bit scales"}};
    case GgmlType::IQ3_XXS: return {{"d", 0, 2, "f16 scale"}, {"qs", 2, 64, "grid indices (4 values each)"},
                                    {"scales_and_signs", 66, 32, "per 32 values: 4 × 7 sign bits and a 4-bit scale"}};
    case GgmlType::IQ3_S: return {{"d", 0, 2, "f16 scale"}, {"qs", 2, 64, "grid indices, low 8 bits"}, {"qh", 66, 8, "grid indices, 9th bit"},
                                  {"signs", 74, 32, "sign bits"}, {"scales", 106, 4, "4-bit scales"}};
    case GgmlType::IQ1_S: return {{"d", 0, 2, "f16 scale"}, {"qs", 2, 32, "grid indices, low 8 bits"},
                                  {"qh", 34, 16, "per 32 values: 4 × 3 index bits, a 3-bit scale, the delta's sign"}};
    case GgmlType::IQ1_M: return {{"qs", 0, 32, "grid indices, low 8 bits"}, {"qh", 32, 16, "3 index bits and the delta's sign per 8 values"},
                                  {"scales", 48, 8, "3-bit scales; their top nibbles the f16 d"}};
    default: return {};
  }
}

const char* codebook_formula(GgmlType type) {
  switch (type) {
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S: return "d·(0.5 + s)/4 · grid · sign";
    case GgmlType::IQ3_XXS: return "d·(0.5 + s)/2 · grid · sign";
    case GgmlType::IQ3_S: return "d·(1 + 2s) · grid · sign";
    case GgmlType::IQ1_S:
    case GgmlType::IQ1_M: return "d·(2s + 1) · (grid ± 1/8)";
    default: return "";
  }
}

}  // namespace ggml
}  // namespace leapconv
