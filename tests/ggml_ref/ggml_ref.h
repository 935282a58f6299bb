// The oracle of ggml_quants_test.cpp: ggml's own reference C (ggml-quants.c and the fp16/bf16
// conversions of ggml-impl.h), compiled from the llama.cpp source that the npm package
// node-llama-cpp ships (cloned into the build directory; see tests/CMakeLists.txt).
// `type` is ggml's type number (GGUF's too): Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8,
// Q2_K 10, Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14, IQ4_NL 20, IQ4_XS 23, TQ1_0 34, TQ2_0 35,
// MXFP4 39, Q1_0 41, Q2_0 42; the codebook types (quantize_rows_w and dequantize_row only)
// IQ2_XXS 16, IQ2_XS 17, IQ3_XXS 18, IQ1_S 19, IQ3_S 21, IQ2_S 22, IQ1_M 29.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// quantize_row_<type>_ref / dequantize_row_<type>; return 0, or -1 for a type not wired here.
// (IQ4_NL / IQ4_XS: quantize_iq4_*(x, y, 1, k, NULL), what llama-quantize writes.)
int ggml_ref_quantize_row(int type, const float* x, void* y, int64_t k);
int ggml_ref_dequantize_row(int type, const void* x, float* y, int64_t k);
// quantize_<type>(x, y, nrow, n_per_row, qw): llama-quantize's entry point, with importance
// weights qw[n_per_row] (NULL: the reference quantizer); 0, or -1 for a type not wired here.
int ggml_ref_quantize_rows_w(int type, const float* x, void* y, int64_t nrow, int64_t n_per_row, const float* qw);

// (The codebook types: their grids are initialised first, as ggml_quantize_init does; qw NULL
// aborts in ggml for IQ2_XXS, IQ2_XS and IQ1_S.)

// ggml-common.h's tables by name (iq2xxs_grid, iq2xs_grid, iq2s_grid, iq1s_grid: uint64_t;
// iq3xxs_grid, iq3s_grid: uint32_t; ksigns_iq2xs, kmask_iq2xs: uint8_t); NULL if unknown.
const void* ggml_ref_iq_table(const char* name);

// QK_* and sizeof(block_*) of the type; -1 for a type not wired here.
int64_t ggml_ref_block_values(int type);
// ggml-impl.h's NVFP4 scale conversions (static inline there)
uint8_t ggml_ref_fp32_to_ue4m3(float x);
float ggml_ref_ue4m3_to_fp32(uint8_t x);
int64_t ggml_ref_block_bytes(int type);

uint16_t ggml_ref_fp32_to_fp16(float f);
float ggml_ref_fp16_to_fp32(uint16_t h);
uint16_t ggml_ref_fp32_to_bf16(float f);
float ggml_ref_bf16_to_fp32(uint16_t h);
// GGML_E8M0_TO_FP32_HALF (MXFP4's scale byte)
float ggml_ref_e8m0_to_fp32_half(uint8_t e);

#ifdef __cplusplus
}
#endif
