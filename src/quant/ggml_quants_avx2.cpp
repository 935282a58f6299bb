// The K-quant sub-block searches eight sub-blocks at a time (ggml_lanes.h at W = 8), for x86-64
// CPUs with AVX2: this file alone is built with -mavx2 (CMakeLists.txt; no -mfma, so no product
// is fused into an add), and ggml_quants.cpp calls it only when the CPU has AVX2. The bytes are
// the scalar port's, lane for lane. Elsewhere (wasm, other CPUs) it is empty.
#include "quant/ggml_quants_avx2.h"

#if LEAPCONV_GGML_AVX2
#include "quant/ggml_lanes.h"

namespace leapconv {
namespace ggml {

void qkx2_group8_avx2(int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales, float* mins,
                      float rmin, float rdelta, int nstep, bool use_mad) {
  lanes::qkx2_group<8>(n, nmax, x, w, L, scales, mins, rmin, rdelta, nstep, use_mad);
}

void qx_rmse1_group8_avx2(int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales) {
  lanes::qx_rmse1_group<8>(n, nmax, x, w, L, scales);
}

int grid_best8_avx2(int coords, const int8_t* grid, const uint16_t* idx, int n, const float* xval, const float* weight,
                    float scale) {
  return coords == 8 ? lanes::grid_best<8, 8>(grid, idx, n, xval, weight, scale)
                     : lanes::grid_best<8, 4>(grid, idx, n, xval, weight, scale);
}
bool codebook_candidates8_avx2(int coords, const int8_t* grid, const int* map, const uint16_t* neighbours,
                               const float* xval, const float* weight, const float* waux, const float* id, const float* sc,
                               int count, float* sumqx, float* sumq2, int8_t* Lc, bool* on_grid) {
  return coords == 4 ? lanes::codebook_candidates<8, 4, 32, 3, 8>(grid, map, neighbours, xval, weight, waux, id, sc, count,
                                                              sumqx, sumq2, Lc, on_grid)
                     : lanes::codebook_candidates<8, 8, 16, 2, 3>(grid, map, neighbours, xval, weight, waux, id, sc, count,
                                                              sumqx, sumq2, Lc, on_grid);
}
void iq4_group8_avx2(const float* x, const float* w, float* scales) { lanes::iq4_group<8>(x, w, scales); }

}  // namespace ggml
}  // namespace leapconv
#endif
