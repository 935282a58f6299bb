// Links ggml-quants.c on its own: a C face for the test (ggml_ref.h) and stand-ins for the
// few ggml.c functions that ggml-quants.c references on paths the tests never take.
// ggml-common.h's tables (iq2xxs_grid & co.) defined here too, as ggml-quants.c includes it
#define GGML_COMMON_IMPL_C
#include "ggml-common.h"

#include "ggml_ref.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-impl.h"
#include "ggml-quants.h"

void ggml_abort(const char* file, int line, const char* fmt, ...) {
  fprintf(stderr, "ggml_abort at %s:%d: ", file, line);
  va_list args;
  va_start(args, fmt);
  vfprintf(stderr, fmt, args);
  va_end(args);
  fputc('\n', stderr);
  abort();
}

static void not_linked(const char* what) {
  fprintf(stderr, "ggml_ref: %s is not part of the test oracle\n", what);
  abort();
}
size_t ggml_type_size(enum ggml_type type) { (void)type; not_linked("ggml_type_size"); return 0; }
// quantize_<type> (the importance-weighted entry points) sizes its rows with this.
size_t ggml_row_size(enum ggml_type type, int64_t ne) {
  const int64_t values = ggml_ref_block_values(type), bytes = ggml_ref_block_bytes(type);
  if (values <= 0) not_linked("ggml_row_size of this type");
  return (size_t)(bytes * (ne / values));
}
const char* ggml_type_name(enum ggml_type type) { (void)type; not_linked("ggml_type_name"); return 0; }

int ggml_ref_quantize_row(int type, const float* x, void* y, int64_t k) {
  switch ((enum ggml_type)type) {
    case GGML_TYPE_Q4_0: quantize_row_q4_0_ref(x, (block_q4_0*)y, k); return 0;
    case GGML_TYPE_Q4_1: quantize_row_q4_1_ref(x, (block_q4_1*)y, k); return 0;
    case GGML_TYPE_Q5_0: quantize_row_q5_0_ref(x, (block_q5_0*)y, k); return 0;
    case GGML_TYPE_Q5_1: quantize_row_q5_1_ref(x, (block_q5_1*)y, k); return 0;
    case GGML_TYPE_Q8_0: quantize_row_q8_0_ref(x, (block_q8_0*)y, k); return 0;
    case GGML_TYPE_Q2_K: quantize_row_q2_K_ref(x, (block_q2_K*)y, k); return 0;
    case GGML_TYPE_Q3_K: quantize_row_q3_K_ref(x, (block_q3_K*)y, k); return 0;
    case GGML_TYPE_Q4_K: quantize_row_q4_K_ref(x, (block_q4_K*)y, k); return 0;
    case GGML_TYPE_Q5_K: quantize_row_q5_K_ref(x, (block_q5_K*)y, k); return 0;
    case GGML_TYPE_Q6_K: quantize_row_q6_K_ref(x, (block_q6_K*)y, k); return 0;
    case GGML_TYPE_MXFP4: quantize_row_mxfp4_ref(x, (block_mxfp4*)y, k); return 0;
    case GGML_TYPE_NVFP4: quantize_row_nvfp4_ref(x, (block_nvfp4*)y, k); return 0;
    // IQ4: what llama-quantize writes (quantize_iq4_* with NULL weights), not the _ref
    case GGML_TYPE_IQ4_NL: quantize_iq4_nl(x, y, 1, k, NULL); return 0;
    case GGML_TYPE_IQ4_XS: quantize_iq4_xs(x, y, 1, k, NULL); return 0;
    case GGML_TYPE_TQ1_0: quantize_row_tq1_0_ref(x, (block_tq1_0*)y, k); return 0;
    case GGML_TYPE_TQ2_0: quantize_row_tq2_0_ref(x, (block_tq2_0*)y, k); return 0;
    case GGML_TYPE_Q1_0: quantize_row_q1_0_ref(x, (block_q1_0*)y, k); return 0;
    case GGML_TYPE_Q2_0: quantize_row_q2_0_ref(x, (block_q2_0*)y, k); return 0;
    default: return -1;
  }
}

int ggml_ref_quantize_rows_w(int type, const float* x, void* y, int64_t nrow, int64_t n_per_row, const float* qw) {
  switch ((enum ggml_type)type) {
    case GGML_TYPE_Q4_0: quantize_q4_0(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q4_1: quantize_q4_1(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q5_0: quantize_q5_0(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q5_1: quantize_q5_1(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q8_0: quantize_q8_0(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q2_K: quantize_q2_K(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q3_K: quantize_q3_K(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q4_K: quantize_q4_K(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q5_K: quantize_q5_K(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q6_K: quantize_q6_K(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_MXFP4: quantize_mxfp4(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_NVFP4: quantize_nvfp4(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_IQ4_NL: quantize_iq4_nl(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_IQ4_XS: quantize_iq4_xs(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_TQ1_0: quantize_tq1_0(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_TQ2_0: quantize_tq2_0(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q1_0: quantize_q1_0(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_Q2_0: quantize_q2_0(x, y, nrow, n_per_row, qw); return 0;
    default: break;
  }
  // the codebook types: their grids set up first, as llama-quantize's ggml_quantize_init does
  switch ((enum ggml_type)type) {
    case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ1_S:
    case GGML_TYPE_IQ1_M: iq2xs_init_impl((enum ggml_type)type); break;
    case GGML_TYPE_IQ3_XXS: iq3xs_init_impl(256); break;
    case GGML_TYPE_IQ3_S: iq3xs_init_impl(512); break;
    default: return -1;
  }
  switch ((enum ggml_type)type) {
    case GGML_TYPE_IQ2_XXS: quantize_iq2_xxs(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_IQ2_XS: quantize_iq2_xs(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_IQ2_S: quantize_iq2_s(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_IQ3_XXS: quantize_iq3_xxs(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_IQ3_S: quantize_iq3_s(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_IQ1_S: quantize_iq1_s(x, y, nrow, n_per_row, qw); return 0;
    case GGML_TYPE_IQ1_M: quantize_iq1_m(x, y, nrow, n_per_row, qw); return 0;
    default: return -1;
  }
}

const void* ggml_ref_iq_table(const char* name) {
  if (!strcmp(name, "iq2xxs_grid")) return iq2xxs_grid;
  if (!strcmp(name, "iq2xs_grid")) return iq2xs_grid;
  if (!strcmp(name, "iq2s_grid")) return iq2s_grid;
  if (!strcmp(name, "iq1s_grid")) return iq1s_grid;
  if (!strcmp(name, "iq3xxs_grid")) return iq3xxs_grid;
  if (!strcmp(name, "iq3s_grid")) return iq3s_grid;
  if (!strcmp(name, "ksigns_iq2xs")) return ksigns_iq2xs;
  if (!strcmp(name, "kmask_iq2xs")) return kmask_iq2xs;
  return 0;
}

int ggml_ref_dequantize_row(int type, const void* x, float* y, int64_t k) {
  switch ((enum ggml_type)type) {
    case GGML_TYPE_Q4_0: dequantize_row_q4_0((const block_q4_0*)x, y, k); return 0;
    case GGML_TYPE_Q4_1: dequantize_row_q4_1((const block_q4_1*)x, y, k); return 0;
    case GGML_TYPE_Q5_0: dequantize_row_q5_0((const block_q5_0*)x, y, k); return 0;
    case GGML_TYPE_Q5_1: dequantize_row_q5_1((const block_q5_1*)x, y, k); return 0;
    case GGML_TYPE_Q8_0: dequantize_row_q8_0((const block_q8_0*)x, y, k); return 0;
    case GGML_TYPE_Q2_K: dequantize_row_q2_K((const block_q2_K*)x, y, k); return 0;
    case GGML_TYPE_Q3_K: dequantize_row_q3_K((const block_q3_K*)x, y, k); return 0;
    case GGML_TYPE_Q4_K: dequantize_row_q4_K((const block_q4_K*)x, y, k); return 0;
    case GGML_TYPE_Q5_K: dequantize_row_q5_K((const block_q5_K*)x, y, k); return 0;
    case GGML_TYPE_Q6_K: dequantize_row_q6_K((const block_q6_K*)x, y, k); return 0;
    case GGML_TYPE_MXFP4: dequantize_row_mxfp4((const block_mxfp4*)x, y, k); return 0;
    case GGML_TYPE_NVFP4: dequantize_row_nvfp4((const block_nvfp4*)x, y, k); return 0;
    case GGML_TYPE_IQ4_NL: dequantize_row_iq4_nl((const block_iq4_nl*)x, y, k); return 0;
    case GGML_TYPE_IQ4_XS: dequantize_row_iq4_xs((const block_iq4_xs*)x, y, k); return 0;
    case GGML_TYPE_TQ1_0: dequantize_row_tq1_0((const block_tq1_0*)x, y, k); return 0;
    case GGML_TYPE_TQ2_0: dequantize_row_tq2_0((const block_tq2_0*)x, y, k); return 0;
    case GGML_TYPE_Q1_0: dequantize_row_q1_0((const block_q1_0*)x, y, k); return 0;
    case GGML_TYPE_Q2_0: dequantize_row_q2_0((const block_q2_0*)x, y, k); return 0;
    case GGML_TYPE_IQ2_XXS: dequantize_row_iq2_xxs((const block_iq2_xxs*)x, y, k); return 0;
    case GGML_TYPE_IQ2_XS: dequantize_row_iq2_xs((const block_iq2_xs*)x, y, k); return 0;
    case GGML_TYPE_IQ2_S: dequantize_row_iq2_s((const block_iq2_s*)x, y, k); return 0;
    case GGML_TYPE_IQ3_XXS: dequantize_row_iq3_xxs((const block_iq3_xxs*)x, y, k); return 0;
    case GGML_TYPE_IQ3_S: dequantize_row_iq3_s((const block_iq3_s*)x, y, k); return 0;
    case GGML_TYPE_IQ1_S: dequantize_row_iq1_s((const block_iq1_s*)x, y, k); return 0;
    case GGML_TYPE_IQ1_M: dequantize_row_iq1_m((const block_iq1_m*)x, y, k); return 0;
    default: return -1;
  }
}

uint8_t ggml_ref_fp32_to_ue4m3(float x) { return ggml_fp32_to_ue4m3(x); }
float ggml_ref_ue4m3_to_fp32(uint8_t x) { return ggml_ue4m3_to_fp32(x); }

int64_t ggml_ref_block_values(int type) {
  switch ((enum ggml_type)type) {
    case GGML_TYPE_Q4_0: return QK4_0;
    case GGML_TYPE_Q4_1: return QK4_1;
    case GGML_TYPE_Q5_0: return QK5_0;
    case GGML_TYPE_Q5_1: return QK5_1;
    case GGML_TYPE_Q8_0: return QK8_0;
    case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
    case GGML_TYPE_Q6_K: return QK_K;
    case GGML_TYPE_MXFP4: return QK_MXFP4;
    case GGML_TYPE_NVFP4: return QK_NVFP4;
    case GGML_TYPE_IQ4_NL: return QK4_NL;
    case GGML_TYPE_IQ4_XS: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: return QK_K;
    case GGML_TYPE_Q1_0: return QK1_0;
    case GGML_TYPE_Q2_0: return QK2_0;
    case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS:
    case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ1_M: return QK_K;
    default: return -1;
  }
}

int64_t ggml_ref_block_bytes(int type) {
  switch ((enum ggml_type)type) {
    case GGML_TYPE_Q4_0: return sizeof(block_q4_0);
    case GGML_TYPE_Q4_1: return sizeof(block_q4_1);
    case GGML_TYPE_Q5_0: return sizeof(block_q5_0);
    case GGML_TYPE_Q5_1: return sizeof(block_q5_1);
    case GGML_TYPE_Q8_0: return sizeof(block_q8_0);
    case GGML_TYPE_Q2_K: return sizeof(block_q2_K);
    case GGML_TYPE_Q3_K: return sizeof(block_q3_K);
    case GGML_TYPE_Q4_K: return sizeof(block_q4_K);
    case GGML_TYPE_Q5_K: return sizeof(block_q5_K);
    case GGML_TYPE_Q6_K: return sizeof(block_q6_K);
    case GGML_TYPE_MXFP4: return sizeof(block_mxfp4);
    case GGML_TYPE_NVFP4: return sizeof(block_nvfp4);
    case GGML_TYPE_IQ4_NL: return sizeof(block_iq4_nl);
    case GGML_TYPE_IQ4_XS: return sizeof(block_iq4_xs);
    case GGML_TYPE_TQ1_0: return sizeof(block_tq1_0);
    case GGML_TYPE_TQ2_0: return sizeof(block_tq2_0);
    case GGML_TYPE_Q1_0: return sizeof(block_q1_0);
    case GGML_TYPE_Q2_0: return sizeof(block_q2_0);
    case GGML_TYPE_IQ2_XXS: return sizeof(block_iq2_xxs);
    case GGML_TYPE_IQ2_XS: return sizeof(block_iq2_xs);
    case GGML_TYPE_IQ2_S: return sizeof(block_iq2_s);
    case GGML_TYPE_IQ3_XXS: return sizeof(block_iq3_xxs);
    case GGML_TYPE_IQ3_S: return sizeof(block_iq3_s);
    case GGML_TYPE_IQ1_S: return sizeof(block_iq1_s);
    case GGML_TYPE_IQ1_M: return sizeof(block_iq1_m);
    default: return -1;
  }
}

uint16_t ggml_ref_fp32_to_fp16(float f) { return ggml_compute_fp32_to_fp16(f); }
float ggml_ref_fp16_to_fp32(uint16_t h) { return ggml_compute_fp16_to_fp32(h); }
uint16_t ggml_ref_fp32_to_bf16(float f) { return ggml_compute_fp32_to_bf16(f).bits; }
float ggml_ref_e8m0_to_fp32_half(uint8_t e) { return GGML_E8M0_TO_FP32_HALF(e); }
float ggml_ref_bf16_to_fp32(uint16_t h) {
  ggml_bf16_t b;
  b.bits = h;
  return ggml_compute_bf16_to_fp32(b);
}
