// ggml's block quantizers, bit-exact with its reference C (ggml/src/ggml-quants.c:
// quantize_row_*_ref and dequantize_row_*, without an importance matrix; quantize_<type> with
// one, the *_w functions; IQ4_NL / IQ4_XS as quantize_iq4_* either way) and with the
// fp16/bf16 conversions of ggml-impl.h. Same float operations in the same order, float where
// ggml uses float; blocks are written and read as little-endian bytes (no struct punning, any
// alignment). Block geometry from ggml's type traits (container/ggml_types.h).
//
// Where ggml's C has undefined behaviour that its x86 build resolves one way (a float -> int8
// cast of NaN/Inf, reached when 1/d overflows for tiny blocks or max - min overflows for
// near-FLT_MAX ones) this code does what x86 does (cvttss2si's INT32_MIN, whose low byte is 0),
// explicitly, so every target (native and WebAssembly) writes the bytes llama-quantize writes
// on x86-64.
#pragma once
#include <cstdint>

#include "container/ggml_types.h"

namespace leapconv {
namespace ggml {

// ---- fp16 / bf16 (ggml_compute_fp32_to_fp16 & co.) ----
// float -> half: round to nearest even, overflow to Inf, NaN -> 0x7e00 with the sign kept.
uint16_t fp32_to_fp16(float f);
// half -> float: exact; a NaN keeps its payload and comes back quiet (as ggml's multiply does).
float fp16_to_fp32(uint16_t h);
// float -> bfloat16: NaN -> top half with the quiet bit forced; else round to nearest even
// (which may round a huge finite value to Inf).
uint16_t fp32_to_bf16(float f);
float bf16_to_fp32(uint16_t h);
// E8M0 scale byte -> float, halved (ggml's GGML_E8M0_TO_FP32_HALF): 2^(e - 128), exact (e < 2:
// subnormal); e = 255 reads as 2^127 (not NaN, as in ggml).
float e8m0_to_fp32_half(uint8_t e);
// NVFP4's sub-block scales, unsigned E4M3 bytes (ggml's ggml_ue4m3_to_fp32 / ggml_fp32_to_ue4m3):
// read as half their E4M3 value (the levels are doubled, as MXFP4's); 0 and 0x7F read 0. Written
// from a float by truncating its mantissa to 3 bits and adding the next bit (round half up),
// clamped to 448 (0x7E), subnormal below 2^-6 (round(x * 512)), 0 for NaN and x <= 0.
float ue4m3_to_fp32(uint8_t x);
uint8_t fp32_to_ue4m3(float x);

// MXFP4's 16 levels (ggml's kvalues_mxfp4): the E2M1 values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
// negatives, doubled (which is why the scale is halved); index = the stored nibble (sign bit 3).
inline constexpr int8_t kMxfp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ---- block geometry: values per block and bytes per block (ggml's block_* structs) ----
constexpr int64_t kQ8_0BlockValues = ggml_traits(GgmlType::Q8_0).block_size, kQ8_0BlockBytes = ggml_traits(GgmlType::Q8_0).type_size;
constexpr int64_t kQ4_0BlockValues = ggml_traits(GgmlType::Q4_0).block_size, kQ4_0BlockBytes = ggml_traits(GgmlType::Q4_0).type_size;
constexpr int64_t kQ4_1BlockValues = ggml_traits(GgmlType::Q4_1).block_size, kQ4_1BlockBytes = ggml_traits(GgmlType::Q4_1).type_size;
constexpr int64_t kQ5_0BlockValues = ggml_traits(GgmlType::Q5_0).block_size, kQ5_0BlockBytes = ggml_traits(GgmlType::Q5_0).type_size;
constexpr int64_t kQ5_1BlockValues = ggml_traits(GgmlType::Q5_1).block_size, kQ5_1BlockBytes = ggml_traits(GgmlType::Q5_1).type_size;
constexpr int64_t kQ2_KBlockValues = ggml_traits(GgmlType::Q2_K).block_size, kQ2_KBlockBytes = ggml_traits(GgmlType::Q2_K).type_size;
constexpr int64_t kQ3_KBlockValues = ggml_traits(GgmlType::Q3_K).block_size, kQ3_KBlockBytes = ggml_traits(GgmlType::Q3_K).type_size;
constexpr int64_t kQ4_KBlockValues = ggml_traits(GgmlType::Q4_K).block_size, kQ4_KBlockBytes = ggml_traits(GgmlType::Q4_K).type_size;
constexpr int64_t kQ5_KBlockValues = ggml_traits(GgmlType::Q5_K).block_size, kQ5_KBlockBytes = ggml_traits(GgmlType::Q5_K).type_size;
constexpr int64_t kQ6_KBlockValues = ggml_traits(GgmlType::Q6_K).block_size, kQ6_KBlockBytes = ggml_traits(GgmlType::Q6_K).type_size;
constexpr int64_t kMXFP4BlockValues = ggml_traits(GgmlType::MXFP4).block_size, kMXFP4BlockBytes = ggml_traits(GgmlType::MXFP4).type_size;
constexpr int64_t kNVFP4BlockValues = ggml_traits(GgmlType::NVFP4).block_size, kNVFP4BlockBytes = ggml_traits(GgmlType::NVFP4).type_size;
constexpr int64_t kIQ4_NLBlockValues = ggml_traits(GgmlType::IQ4_NL).block_size, kIQ4_NLBlockBytes = ggml_traits(GgmlType::IQ4_NL).type_size;
constexpr int64_t kIQ4_XSBlockValues = ggml_traits(GgmlType::IQ4_XS).block_size, kIQ4_XSBlockBytes = ggml_traits(GgmlType::IQ4_XS).type_size;
constexpr int64_t kTQ1_0BlockValues = ggml_traits(GgmlType::TQ1_0).block_size, kTQ1_0BlockBytes = ggml_traits(GgmlType::TQ1_0).type_size;
constexpr int64_t kTQ2_0BlockValues = ggml_traits(GgmlType::TQ2_0).block_size, kTQ2_0BlockBytes = ggml_traits(GgmlType::TQ2_0).type_size;
constexpr int64_t kQ1_0BlockValues = ggml_traits(GgmlType::Q1_0).block_size, kQ1_0BlockBytes = ggml_traits(GgmlType::Q1_0).type_size;
constexpr int64_t kQ2_0BlockValues = ggml_traits(GgmlType::Q2_0).block_size, kQ2_0BlockBytes = ggml_traits(GgmlType::Q2_0).type_size;
constexpr int64_t kIQ2_XXSBlockValues = ggml_traits(GgmlType::IQ2_XXS).block_size, kIQ2_XXSBlockBytes = ggml_traits(GgmlType::IQ2_XXS).type_size;
constexpr int64_t kIQ2_XSBlockValues = ggml_traits(GgmlType::IQ2_XS).block_size, kIQ2_XSBlockBytes = ggml_traits(GgmlType::IQ2_XS).type_size;
constexpr int64_t kIQ2_SBlockValues = ggml_traits(GgmlType::IQ2_S).block_size, kIQ2_SBlockBytes = ggml_traits(GgmlType::IQ2_S).type_size;
constexpr int64_t kIQ3_XXSBlockValues = ggml_traits(GgmlType::IQ3_XXS).block_size, kIQ3_XXSBlockBytes = ggml_traits(GgmlType::IQ3_XXS).type_size;
constexpr int64_t kIQ3_SBlockValues = ggml_traits(GgmlType::IQ3_S).block_size, kIQ3_SBlockBytes = ggml_traits(GgmlType::IQ3_S).type_size;
constexpr int64_t kIQ1_SBlockValues = ggml_traits(GgmlType::IQ1_S).block_size, kIQ1_SBlockBytes = ggml_traits(GgmlType::IQ1_S).type_size;
constexpr int64_t kIQ1_MBlockValues = ggml_traits(GgmlType::IQ1_M).block_size, kIQ1_MBlockBytes = ggml_traits(GgmlType::IQ1_M).type_size;

// IQ4_NL's and IQ4_XS's 16 non-linear levels (ggml's kvalues_iq4nl); index = the stored nibble.
inline constexpr int8_t kIq4nlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// ---- the largest values ggml's float search takes ----
// Q3_K and Q6_K weigh each value by x^2 and sum w * x * l over a sub-block of 16 (l its level,
// |l| <= nmax: 4 and 32). Where a value's level is 0 (|x| <= max / (2 * nmax)) while (x * x) * x
// overflows (|x| >= 0x1.965feap+42, the smallest float whose cube is Inf), that term is
// Inf * 0 = NaN, the sub-block's scale is NaN, and ggml writes a block that is finite and
// meaningless (all zero when every scale is NaN). The first sub-block maximum where that can
// happen is 2 * nmax times that value; below it no sum of theirs reaches NaN (each term has the
// sign of -max, so no Inf - Inf; Inf / Inf needs max >= 1.1e18), and a value too large for the
// type shows as an Inf f16 scale (from ~8.4e6 for Q3_K, ~2.7e8 for Q6_K). The other types' f16
// scales catch every finite value too large for them. A row reaching this limit is refused.
constexpr float kCubeOverflow = 0x1.965feap+42f;
constexpr float kQ3_KSearchLimit = 8 * kCubeOverflow;   // 0x1.965feap+45 ~ 5.585e13
constexpr float kQ6_KSearchLimit = 64 * kCubeOverflow;  // 0x1.965feap+48 ~ 4.468e14
// IQ4_NL and IQ4_XS weigh by x^2 too (without importance weights) and sum w * q * x over 32
// values with |q| <= 127: below 2^38 no such sum reaches Inf (32 * 127 * 2^114 < FLT_MAX), while
// their f16 scales overflow from ~8.3e6 (IQ4_NL) and ~2.7e8 (IQ4_XS), so every row between is
// refused by its scale and none past it can reach a NaN scale unnoticed.
constexpr float kIQ4SearchLimit = 0x1p38f;
// NVFP4's UE4M3 scale stops at 448 (read 224, times the largest level 12): a sub-block with max
// |x| / 6 past 448 would be clipped to ±2688, a finite block that no longer stands for the row.
// Rows up to 2688 (the next float after it is the limit) are written, past it refused.
constexpr float kNVFP4Limit = 0x1.500002p+11f;
// The codebook types (IQ2_*, IQ3_*, IQ1_*): the same bound. Their f16 d overflows from a few
// 1e7 (rows between are refused by their Inf decode), and below 2^38 no sum of x^2 over a block
// reaches Inf.
constexpr float kIQSearchLimit = 0x1p38f;

// ---- rows: k values (a multiple of the type's block) <-> k / values * bytes bytes ----
void quantize_row_q8_0(const float* x, uint8_t* y, int64_t k);
// The same, returning max |x - dequantize(quantized)| over the row, +inf when it holds a NaN or
// an Inf (one pass; SIMD where the bytes stay the reference's). The *_scalar versions are the reference loops alone.
float quantize_row_q8_0_err(const float* x, uint8_t* y, int64_t k);
float quantize_row_q4_0_err(const float* x, uint8_t* y, int64_t k);
void quantize_row_q8_0_scalar(const float* x, uint8_t* y, int64_t k);
void quantize_row_q4_0_scalar(const float* x, uint8_t* y, int64_t k);
void quantize_row_q4_0(const float* x, uint8_t* y, int64_t k);
void quantize_row_q4_1(const float* x, uint8_t* y, int64_t k);
void quantize_row_q5_0(const float* x, uint8_t* y, int64_t k);
void quantize_row_q5_1(const float* x, uint8_t* y, int64_t k);
void quantize_row_q2_K(const float* x, uint8_t* y, int64_t k);
void quantize_row_q3_K(const float* x, uint8_t* y, int64_t k);
void quantize_row_q4_K(const float* x, uint8_t* y, int64_t k);
void quantize_row_q5_K(const float* x, uint8_t* y, int64_t k);
void quantize_row_q6_K(const float* x, uint8_t* y, int64_t k);
// block_mxfp4 {e, qs[16]}: e = floor(log2(max |x|)) - 2 + 127, so that the largest |x| is 8 to
// 16 times d = 2^(e - 128) (below 2^-125 that is negative and, as on x86, wraps to its low byte);
// each value the nearest of d * kMxfp4Levels (the first on a tie). Element j in qs[j]'s low
// nibble, j + 16 in its high one.
void quantize_row_mxfp4(const float* x, uint8_t* y, int64_t k);
// block_nvfp4 {d[4], qs[32]} over 64 values: 4 sub-blocks of 16, each with its UE4M3 scale
// d = fp32_to_ue4m3(max |x| / 6) (6 the largest E2M1 level) and, as MXFP4's, each value the
// nearest of d * kMxfp4Levels; element j of sub-block s in qs[8s + j]'s low nibble, j + 8 in its
// high one. ggml's quantize_nvfp4 ignores importance weights.
void quantize_row_nvfp4(const float* x, uint8_t* y, int64_t k);

// ---- with importance weights (llama-quantize's imatrix): ggml's quantize_<type>(src, dst,
// nrow, n_per_row, quant_weights) for one row, quant_weights != NULL ----
// k = n_per_row values, one row exactly (Q4_0 .. Q5_1 weigh by the mean square of the whole
// row); qw[k]: one weight per column, as llama-quantize passes them. These run ggml's
// quantize_row_<type>_impl, a different search from the reference quantizers above (see
// ggml_quants.cpp), so their bytes differ from the unweighted ones even for equal weights.
// Q8_0 and MXFP4 have none: ggml ignores the weights for them.
void quantize_row_q4_0_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q4_1_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q5_0_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q5_1_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q2_K_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q3_K_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q4_K_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q5_K_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q6_K_w(const float* x, uint8_t* y, int64_t k, const float* qw);

// IQ4_NL {d, qs[16]}, IQ4_XS {d, scales_h, scales_l[4], qs[128]}: what llama-quantize writes,
// ggml's quantize_iq4_nl / quantize_iq4_xs (with NULL weights they weigh by x^2 and still search
// 15 scales: not quantize_row_iq4_nl_ref, which searches none); any number of rows. The _w
// forms take importance weights qw[k] for one row of k values.
void quantize_row_iq4_nl(const float* x, uint8_t* y, int64_t k);
void quantize_row_iq4_xs(const float* x, uint8_t* y, int64_t k);
void quantize_row_iq4_nl_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_iq4_xs_w(const float* x, uint8_t* y, int64_t k, const float* qw);
// The ternary types (BitNet b1.58, TriLMs): d = max |x| over 256 values, each value
// round(x / d) in {-1, 0, 1}. TQ1_0 packs 5 trits a byte (qs[48], qh[4], d), TQ2_0 2 bits a value
// (qs[64], d). ggml takes no importance weights for them.
void quantize_row_tq1_0(const float* x, uint8_t* y, int64_t k);
void quantize_row_tq2_0(const float* x, uint8_t* y, int64_t k);
// Q1_0 {d, qs[16]} over 128 values: sign bits, d = mean |x|. Q2_0 {d, qs[16]} over 64 values:
// 2 bits (q - 1) * d, q in 0..3, d = max |x|. No importance weights either.
void quantize_row_q1_0(const float* x, uint8_t* y, int64_t k);
void quantize_row_q2_0(const float* x, uint8_t* y, int64_t k);

// ---- the codebook ("grid") types, ggml_iq.cpp: ggml's quantize_<type>(x, y, 1, k, qw), what
// llama-quantize writes, and dequantize_row_<type> ----
// Groups of 8 (IQ2, IQ1) or 4 (IQ3) values are stored as the index of a point of a fixed grid
// (ggml's E8 / D4-lattice codebooks, taken from llama.cpp's source at build time) with sign bits
// (IQ2/IQ3) or a +-1/8 shift (IQ1), under 4-bit (3-bit for IQ1) sub-block scales and an f16 d.
// k values (a multiple of 256), qw[k] the importance weights of the row. The _w forms of
// IQ2_XXS, IQ2_XS and IQ1_S need weights (ggml asserts them); IQ2_S, IQ3_XXS, IQ3_S and IQ1_M
// also take qw = nullptr, as ggml does (the unweighted forms below: its own weighting by x^2,
// and for IQ2_S by x^2 + sigma^2 / 4). The grids' neighbour lists are built once, on first use
// (thread-safe); iq_init_grids() builds them all up front.
// They return false where ggml would abort (GGML_ASSERT: no grid neighbour of finite distance)
// or read out of bounds (IQ1's fallback search): only reachable with overflowing sums, which
// the quant-type table refuses before; y's bytes are then unspecified.
bool quantize_row_iq2_xxs_w(const float* x, uint8_t* y, int64_t k, const float* qw);
bool quantize_row_iq2_xs_w(const float* x, uint8_t* y, int64_t k, const float* qw);
bool quantize_row_iq2_s_w(const float* x, uint8_t* y, int64_t k, const float* qw);
bool quantize_row_iq3_xxs_w(const float* x, uint8_t* y, int64_t k, const float* qw);
bool quantize_row_iq3_s_w(const float* x, uint8_t* y, int64_t k, const float* qw);
bool quantize_row_iq1_s_w(const float* x, uint8_t* y, int64_t k, const float* qw);
bool quantize_row_iq1_m_w(const float* x, uint8_t* y, int64_t k, const float* qw);
bool quantize_row_iq2_s(const float* x, uint8_t* y, int64_t k);
bool quantize_row_iq3_xxs(const float* x, uint8_t* y, int64_t k);
bool quantize_row_iq3_s(const float* x, uint8_t* y, int64_t k);
bool quantize_row_iq1_m(const float* x, uint8_t* y, int64_t k);
void iq_init_grids();
// The dequantization tables derived from the grids (ggml-common.h's iq2xxs_grid, ..., and
// ksigns_iq2xs), for the tests.
enum class IqTable { Iq2xxsGrid, Iq2xsGrid, Iq2sGrid, Iq1sGrid, Iq3xxsGrid, Iq3sGrid };
const uint64_t* iq_table_u64(IqTable t);  // the 8-byte grids (IQ2, IQ1); null for the others
const uint32_t* iq_table_u32(IqTable t);  // the 4-byte grids (IQ3)
const uint8_t* iq_ksigns();               // 128 entries

void dequantize_row_q8_0(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q4_0(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q4_1(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q5_0(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q5_1(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q2_K(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q3_K(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q4_K(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q5_K(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q6_K(const uint8_t* x, float* y, int64_t k);
void dequantize_row_mxfp4(const uint8_t* x, float* y, int64_t k);
void dequantize_row_nvfp4(const uint8_t* x, float* y, int64_t k);
void dequantize_row_iq4_nl(const uint8_t* x, float* y, int64_t k);
void dequantize_row_iq4_xs(const uint8_t* x, float* y, int64_t k);
void dequantize_row_tq1_0(const uint8_t* x, float* y, int64_t k);
void dequantize_row_tq2_0(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q1_0(const uint8_t* x, float* y, int64_t k);
void dequantize_row_q2_0(const uint8_t* x, float* y, int64_t k);
void dequantize_row_iq2_xxs(const uint8_t* x, float* y, int64_t k);
void dequantize_row_iq2_xs(const uint8_t* x, float* y, int64_t k);
void dequantize_row_iq2_s(const uint8_t* x, float* y, int64_t k);
void dequantize_row_iq3_xxs(const uint8_t* x, float* y, int64_t k);
void dequantize_row_iq3_s(const uint8_t* x, float* y, int64_t k);
void dequantize_row_iq1_s(const uint8_t* x, float* y, int64_t k);
void dequantize_row_iq1_m(const uint8_t* x, float* y, int64_t k);

// The K-quants above (and the weighted quantizers) run their sub-block searches four sub-blocks a
// step (SSE2; WebAssembly's simd128), eight where the CPU has AVX2 (ggml_lanes.h): lane by lane
// the same float operations as ggml's scalar code, so the same bytes. These are the plain scalar spellings,
// which the tests hold the SIMD ones to.
namespace scalar {
void quantize_row_q2_K(const float* x, uint8_t* y, int64_t k);
void quantize_row_q4_K(const float* x, uint8_t* y, int64_t k);
void quantize_row_q5_K(const float* x, uint8_t* y, int64_t k);
void quantize_row_q6_K(const float* x, uint8_t* y, int64_t k);
void quantize_row_q4_0_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q4_1_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q5_0_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q5_1_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q2_K_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q3_K_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q4_K_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q5_K_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_q6_K_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_iq4_nl_w(const float* x, uint8_t* y, int64_t k, const float* qw);
void quantize_row_iq4_xs_w(const float* x, uint8_t* y, int64_t k, const float* qw);
}  // namespace scalar
bool simd_enabled();
// How many sub-blocks the K-quant searches take a step: 16 where the CPU has AVX-512F, 8 where
// it has AVX2, else 4. force_search_lanes(4 or 8) (tests: every width against the scalar port;
// never more than the CPU runs) or 0 (the CPU's again).
int search_lanes();
void force_search_lanes(int lanes);

}  // namespace ggml
}  // namespace leapconv
