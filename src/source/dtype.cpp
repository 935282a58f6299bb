#include "source/dtype.h"

#include <cmath>
#include <cstring>

#include "core/byte_io.h"
#include "core/f16.h"
#include "quant/kernels.h"

namespace leapconv {

namespace {

void dec_f32(const uint8_t* raw, size_t n, float* out) {
  if (n) std::memcpy(out, raw, n * 4);
}
void dec_bf16(const uint8_t* raw, size_t n, float* out) {
  kernels::bf16_to_f32(reinterpret_cast<const uint16_t*>(raw), n, out);
}
void dec_f16(const uint8_t* raw, size_t n, float* out) {
  kernels::f16_to_f32(reinterpret_cast<const uint16_t*>(raw), n, out);
}
template <typename T>
void dec_value(const uint8_t* raw, size_t n, float* out) {  // integers and F64: their value, rounded to f32
  for (size_t i = 0; i < n; ++i) out[i] = float(get_le<T>(raw + i * sizeof(T)));
}

// float8 E4M3FN (torch.float8_e4m3fn): bias 7, subnormals, no infinities, S.1111.111 is NaN.
float e4m3(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float mag = e == 15 && m == 7 ? NAN : e == 0 ? std::ldexp(float(m), -9) : std::ldexp(float(8 + m), e - 10);
  return b & 0x80 ? -mag : mag;
}
// float8 E5M2 (torch.float8_e5m2): the top byte of an IEEE half.
float e5m2(uint8_t b) { return f16_to_f32(uint16_t(b << 8)); }
// E8M0 (torch.float8_e8m0fnu): 2^(e - 127); 0xFF is NaN.
float e8m0(uint8_t b) { return b == 0xff ? NAN : std::ldexp(1.0f, int(b) - 127); }

template <float (*F)(uint8_t)>
void dec_byte_table(const uint8_t* raw, size_t n, float* out) {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (int b = 0; b < 256; ++b) t[size_t(b)] = F(uint8_t(b));
    return t;
  }();
  for (size_t i = 0; i < n; ++i) out[i] = table[raw[i]];
}

// float4 E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit; two per byte, first in the low nibble.
void dec_f4(const uint8_t* raw, size_t n, float* out) {
  static const float kE2M1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (size_t i = 0; i < n; ++i) out[i] = kE2M1[(raw[i / 2] >> (i % 2 * 4)) & 15];
}

using D = DType;
// id, safetensors name, bits, float, needs a scale, decoder (rows in enum order)
const std::vector<SourceDType> kDTypes = {
    {D::F64, "F64", 64, true, false, dec_value<double>},
    {D::F32, "F32", 32, true, false, dec_f32},
    {D::F16, "F16", 16, true, false, dec_f16},
    {D::BF16, "BF16", 16, true, false, dec_bf16},
    {D::F8_E4M3, "F8_E4M3", 8, true, true, dec_byte_table<e4m3>},
    {D::F8_E5M2, "F8_E5M2", 8, true, true, dec_byte_table<e5m2>},
    {D::F8_E8M0, "F8_E8M0", 8, false, true, dec_byte_table<e8m0>},
    {D::F4, "F4", 4, true, true, dec_f4},
    {D::I64, "I64", 64, false, false, dec_value<int64_t>},
    {D::I32, "I32", 32, false, false, dec_value<int32_t>},
    {D::I16, "I16", 16, false, false, dec_value<int16_t>},
    {D::I8, "I8", 8, false, false, dec_value<int8_t>},
    {D::U64, "U64", 64, false, false, dec_value<uint64_t>},
    {D::U32, "U32", 32, false, false, dec_value<uint32_t>},
    {D::U16, "U16", 16, false, false, dec_value<uint16_t>},
    {D::U8, "U8", 8, false, false, dec_value<uint8_t>},
    {D::BOOL, "BOOL", 8, false, false, dec_value<uint8_t>},
};

}  // namespace

const std::vector<SourceDType>& source_dtypes() { return kDTypes; }

const SourceDType& source_dtype(DType d) { return kDTypes[size_t(d)]; }

const SourceDType* find_source_dtype(const std::string& name) {
  for (const SourceDType& t : kDTypes)
    if (name == t.name) return &t;
  return nullptr;
}

int64_t dtype_bytes(DType d, int64_t n) {
  const int64_t bits = dtype_bits(d);
  int64_t total;
  if (n < 0 || __builtin_mul_overflow(n, bits, &total) || total % 8) return -1;
  return total / 8;
}

}  // namespace leapconv
