// The K-quant sub-block searches sixteen sub-blocks at a time (ggml_lanes.h at W = 16), for x86-64
// CPUs with AVX-512F: this file alone is built with -mavx512f (CMakeLists.txt; no FMA ISA, and
// -ffp-contract=off everywhere, so no product is fused into an add), and ggml_quants.cpp calls it
// only when the CPU has AVX-512F. The bytes are the scalar port's, lane for lane. Elsewhere (wasm,
// other CPUs) it is empty.
#include "quant/ggml_quants_avx2.h"

#if LEAPCONV_GGML_AVX2
#include "quant/ggml_lanes.h"

namespace leapconv {
namespace ggml {

void qkx2_group16_avx512(int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales, float* mins,
                         float rmin, float rdelta, int nstep, bool use_mad) {
  lanes::qkx2_group<16>(n, nmax, x, w, L, scales, mins, rmin, rdelta, nstep, use_mad);
}

void qx_rmse1_group16_avx512(int n, int nmax, const float* x, const float* w, uint8_t* L, float* scales) {
  lanes::qx_rmse1_group<16>(n, nmax, x, w, L, scales);
}

}  // namespace ggml
}  // namespace leapconv
#endif
