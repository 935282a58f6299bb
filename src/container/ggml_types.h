// ggml's tensor types: ggml.h's enum ggml_type and ggml.c's type_traits (blck_size, type_size =
// sizeof(block_*) from ggml-common.h), llama.cpp as shipped in node-llama-cpp 3.21.1. The one
// statement of every block's geometry: the GGUF reader validates tensor sizes with it, and the
// quantizers (quant/ggml_quants.h) and the quant-type table take their block sizes from it.
// Ids 4, 5 (Q4_2, Q4_3), 31-33 (Q4_0_4_4/4_8/8_8) and 36-38 (IQ4_NL_4_4/4_8/8_8) are removed:
// gguf.cpp rejects them.
#pragma once
#include <cstdint>

namespace leapconv {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10, Q3_K = 11,
  Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19,
  IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28,
  IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};
constexpr uint32_t kGgmlTypeCount = 43;  // GGML_TYPE_COUNT

struct GgmlTypeInfo {
  uint32_t id;
  const char* name;    // ggml_type_name: "f32", "q4_0", "q4_K", ...
  int64_t block_size;  // values per block
  int64_t type_size;   // bytes per block
};

inline constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "f32", 1, 4},          {1, "f16", 1, 2},          {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},       {6, "q5_0", 32, 22},       {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},       {9, "q8_1", 32, 36},       {10, "q2_K", 256, 84},
    {11, "q3_K", 256, 110},    {12, "q4_K", 256, 144},    {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},    {15, "q8_K", 256, 292},    {16, "iq2_xxs", 256, 66},
    {17, "iq2_xs", 256, 74},   {18, "iq3_xxs", 256, 98},  {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},    {21, "iq3_s", 256, 110},   {22, "iq2_s", 256, 82},
    {23, "iq4_xs", 256, 136},  {24, "i8", 1, 1},          {25, "i16", 1, 2},
    {26, "i32", 1, 4},         {27, "i64", 1, 8},         {28, "f64", 1, 8},
    {29, "iq1_m", 256, 56},    {30, "bf16", 1, 2},        {34, "tq1_0", 256, 54},
    {35, "tq2_0", 256, 66},    {39, "mxfp4", 32, 17},     {40, "nvfp4", 64, 36},
    {41, "q1_0", 128, 18},     {42, "q2_0", 64, 18},
};

// The ggml type with this id, or nullptr for removed ids and ids past GGML_TYPE_COUNT.
constexpr const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const GgmlTypeInfo& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}
constexpr const GgmlTypeInfo& ggml_traits(GgmlType t) { return *ggml_type_info(uint32_t(t)); }

}  // namespace leapconv
