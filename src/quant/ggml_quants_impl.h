// Helpers of ggml_quants.cpp that the other ports of ggml-quants.c share (ggml_iq.cpp): not an
// API of the core.
#pragma once
#include <cstdint>

namespace leapconv {
namespace ggml {
namespace detail {

// ggml's make_qp_quants (ggml_quants.cpp): levels 0..nmax for n values x, weighted; the scale.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights);

}  // namespace detail
}  // namespace ggml
}  // namespace leapconv
