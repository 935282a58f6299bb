// ggml_quants_avx2.cpp's entry points: ggml_lanes.h's groups at eight lanes, built for AVX2, and
// ggml_quants_avx512.cpp's at sixteen. Call them only where search_lanes() (ggml_quants.h) is 8 or
// 16: the CPU runs them.
#pragma once
#include <cstdint>

#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
#define LEAPCONV_GGML_AVX2 1
#else
#define LEAPCONV_GGML_AVX2 0
#endif

namespace leapconv {
namespace ggml {

#if LEAPCONV_GGML_AVX2
// make_qkx2_quants on 8 consecutive sub-blocks of n values (x + n * k, weights w + n * k).
void qkx2_group8_avx2(int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales, float* mins,
                      float rmin, float rdelta, int nstep, bool use_mad);
// make_qx_quants(n, nmax, ..., rmse_type 1, w) on 8 consecutive sub-blocks (w null: none).
void qx_rmse1_group8_avx2(int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales);
// The codebook types' neighbour search (ggml_lanes.h's grid_best; coords 4 or 8).
int grid_best8_avx2(int coords, const int8_t* grid, const uint16_t* idx, int n, const float* xval, const float* weight,
                    float scale);
// IQ3_S's (coords 4) and IQ2_S's (coords 8) candidate scales for a block (ggml_lanes.h's
// codebook_candidates).
bool codebook_candidates8_avx2(int coords, const int8_t* grid, const int* map, const uint16_t* neighbours,
                               const float* xval, const float* weight, const float* waux, const float* id, const float* sc,
                               int count, float* sumqx, float* sumq2, int8_t* Lc, bool* on_grid);
// quantize_row_iq4_nl_impl's scale search on 8 consecutive blocks of 32 (x + 32 * k, weights w + 32 * k).
void iq4_group8_avx2(const float* x, const float* w, float* scales);

// ggml_quants_avx512.cpp: the same sub-block searches sixteen at a time (Q2_K, Q3_K and Q6_K
// have sixteen sub-blocks a super-block), for CPUs with AVX-512F.
void qkx2_group16_avx512(int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales, float* mins,
                         float rmin, float rdelta, int nstep, bool use_mad);
void qx_rmse1_group16_avx512(int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales);
#endif

}  // namespace ggml
}  // namespace leapconv
