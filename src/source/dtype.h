// The source-dtype table: one row per element type a safetensors shard can hold (safetensors'
// own names), with its width in bits (sub-byte types pack several elements into a byte, the
// first in the low bits), whether it is a float, its decoder to f32 and whether its values mean
// anything without a scale tensor (the float8 / float4 / E8M0 types of quantized checkpoints).
// The header parser, the recipes that read tensors and every message ask this table.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace leapconv {

enum class DType : uint8_t {
  F64, F32, F16, BF16,
  F8_E4M3, F8_E5M2,  // float8: OCP E4M3FN (no infinities) and E5M2
  F8_E8M0,           // a power of two per element: the block scales of MX formats
  F4,                // float4 E2M1, two per byte (first element in the low nibble)
  I64, I32, I16, I8, U64, U32, U16, U8, BOOL,
};

// n elements of raw bytes (the first element at the first byte's low bits) -> f32. Integers
// decode to their value; scaled types to their unscaled value.
using DTypeDecode = void (*)(const uint8_t* raw, size_t n, float* out);

struct SourceDType {
  DType id;
  const char* name;   // as safetensors headers spell it
  int bits;           // per element
  bool is_float;      // a weight may be stored in it
  bool needs_scale;   // only a scale tensor gives its values a meaning (quantized checkpoints)
  DTypeDecode decode;
};

const std::vector<SourceDType>& source_dtypes();
const SourceDType& source_dtype(DType d);  // rows are in enum order
const SourceDType* find_source_dtype(const std::string& name);  // safetensors' name; null if none

inline const char* dtype_name(DType d) { return source_dtype(d).name; }
inline bool dtype_is_float(DType d) { return source_dtype(d).is_float; }
inline int dtype_bits(DType d) { return source_dtype(d).bits; }
// Bytes of n elements; -1 when they do not fill whole bytes (an odd count of F4) or overflow.
int64_t dtype_bytes(DType d, int64_t n);
// n elements at raw -> f32 (source_dtype(d).decode).
inline void decode_to_f32(DType d, const uint8_t* raw, size_t n, float* out) { source_dtype(d).decode(raw, n, out); }

}  // namespace leapconv
