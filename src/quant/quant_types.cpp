#include "quant/quant_types.h"

#include <algorithm>
#include <cstring>

#include "quant/quantize.h"

namespace leapconv {

namespace {

// Adapters from the table's (rows, cols, block, regions) to each quantizer's own arguments.
// Regions are in file order, so a scales-first type finds its scales in region[0].

float enc_f32(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  std::memcpy(r[0], w, size_t(rows * cols) * 4);
  return 0.0f;
}
void dec_f32(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t, float* out) {
  std::memcpy(out, r[0], size_t(rows * cols) * 4);
}

float enc_f16(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  return convert_f32_to_f16(w, size_t(rows * cols), reinterpret_cast<uint16_t*>(r[0]));
}
void dec_f16(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t, float* out) {
  convert_f16_to_f32(reinterpret_cast<const uint16_t*>(r[0]), size_t(rows * cols), out);
}

float enc_int8(const float* w, int64_t rows, int64_t cols, int64_t block, uint8_t* const* r) {
  return quantize_int8_groups(w, size_t(rows * cols), int(block), reinterpret_cast<int8_t*>(r[0]),
                              reinterpret_cast<float*>(r[1]));
}
void dec_int8(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t block, float* out) {
  dequantize_int8_groups(reinterpret_cast<const int8_t*>(r[0]), reinterpret_cast<const float*>(r[1]),
                         size_t(rows * cols), int(block), out);
}

float enc_q8(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  return quantize_q8_rows(w, size_t(rows), size_t(cols), reinterpret_cast<uint16_t*>(r[0]),
                          reinterpret_cast<int8_t*>(r[1]));
}
void dec_q8(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t, float* out) {
  dequantize_q8_rows(reinterpret_cast<const uint16_t*>(r[0]), reinterpret_cast<const int8_t*>(r[1]),
                     size_t(rows), size_t(cols), out);
}

float enc_q4(const float* w, int64_t rows, int64_t cols, int64_t, uint8_t* const* r) {
  return quantize_q4_rows(w, size_t(rows), size_t(cols), reinterpret_cast<uint16_t*>(r[0]), r[1]);
}
void dec_q4(const uint8_t* const* r, int64_t rows, int64_t cols, int64_t, float* out) {
  dequantize_q4_rows(reinterpret_cast<const uint16_t*>(r[0]), r[1], size_t(rows), size_t(cols), out);
}

using B = BlockSpan;
using L = Layout;

// id, name, short, label, family, colour, span, block, bits, scale bytes, layout, 2-D only, quantizes,
// GGUF-lite code, encode, decode
const std::vector<QuantType> kTypes = {
    {QType::F32, "F32", "f32", "F32", "float", "#4e79a7", B::Fixed, 1, 32, 0, L::Plain, false, false, 0, enc_f32, dec_f32},
    {QType::F16, "F16", "f16", "F16", "float", "#59a14f", B::Fixed, 1, 16, 0, L::Plain, false, false, 1, enc_f16, dec_f16},
    {QType::Int8Group, "INT8", "int8", "int8 per group", "int8", "#f28e2b", B::Parameter, 0, 8, 4, L::ValuesThenScales, false, true,
     -1, enc_int8, dec_int8},
    {QType::Q8Channel, "Q8_per_channel", "q8", "Q8 per channel", "q8", "#e15759", B::Row, 0, 8, 2, L::ScalesThenValues, true, true, 2,
     enc_q8, dec_q8},
    {QType::Q4Group64, "Q4_per_group_64", "q4", "Q4 per group of 64", "q4", "#b07aa1", B::Fixed, kQ4Group, 4, 2, L::ScalesThenValues, true,
     true, 3, enc_q4, dec_q4},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

}  // namespace

const std::vector<QuantType>& quant_types() { return kTypes; }

const QuantType& quant_type(QType t) { return kTypes[size_t(t)]; }  // rows are in enum order

const QuantType* find_quant_type(const std::string& name) {
  const std::string l = lower(name);
  for (const QuantType& t : kTypes)
    if (l == t.short_name || l == lower(t.name)) return &t;
  return nullptr;
}

const QuantType* quant_type_by_gguf_lite_code(int code) {
  for (const QuantType& t : kTypes)
    if (t.gguf_lite_code >= 0 && t.gguf_lite_code == code) return &t;
  return nullptr;
}

std::string quant_type_refusal(const QuantType& t, const std::vector<int64_t>& shape) {
  if (t.needs_matrix && shape.size() != 2) return std::to_string(shape.size()) + "-D";
  if (t.span == BlockSpan::Fixed && t.block_values > 1 && shape.size() == 2 && shape[1] % t.block_values)
    return "in=" + std::to_string(shape[1]) + " is not a multiple of " + std::to_string(t.block_values);
  return "";
}

}  // namespace leapconv
