#include "quant/codec.h"

#include <algorithm>
#include <cstring>

#include "quant/quantize.h"

namespace leapconv {

float encode_rows(const PlanItem& it, const float* w, int64_t rows, uint8_t* values,
                  uint8_t* scales) {
  const size_t r = size_t(rows), c = size_t(it.cols), n = r * c;
  switch (it.enc) {
    case Encoding::F32: std::memcpy(values, w, n * 4); return 0.0f;
    case Encoding::F16: return convert_f32_to_f16(w, n, reinterpret_cast<uint16_t*>(values));
    case Encoding::Int8Group:
      return quantize_int8_groups(w, n, it.group_size, reinterpret_cast<int8_t*>(values),
                                  reinterpret_cast<float*>(scales));
    case Encoding::Q8Channel:
      return quantize_q8_rows(w, r, c, reinterpret_cast<uint16_t*>(scales),
                              reinterpret_cast<int8_t*>(values));
    case Encoding::Q4Group64:
      return quantize_q4_rows(w, r, c, reinterpret_cast<uint16_t*>(scales), values);
  }
  return 0.0f;
}

int64_t tensor_start(const PlanItem& l) { return std::min(l.values_offset, l.scales_offset); }

void decode_tensor(const PlanItem& l, const uint8_t* b, float* out) {
  const size_t rows = size_t(l.rows), cols = size_t(l.cols), n = rows * cols;
  const uint8_t* values = b + (l.values_offset - tensor_start(l));
  const uint8_t* scales = b + (l.scales_offset - tensor_start(l));
  switch (l.enc) {
    case Encoding::F32: std::memcpy(out, values, n * 4); break;
    case Encoding::F16: convert_f16_to_f32(reinterpret_cast<const uint16_t*>(values), n, out); break;
    case Encoding::Q8Channel:
      dequantize_q8_rows(reinterpret_cast<const uint16_t*>(scales),
                         reinterpret_cast<const int8_t*>(values), rows, cols, out);
      break;
    case Encoding::Q4Group64:
      dequantize_q4_rows(reinterpret_cast<const uint16_t*>(scales), values, rows, cols, out);
      break;
    case Encoding::Int8Group:
      dequantize_int8_groups(reinterpret_cast<const int8_t*>(values),
                             reinterpret_cast<const float*>(scales), n, l.group_size, out);
      break;
  }
}

std::vector<float> read_tensor_f32(ByteSource& src, const PlanItem& l) {
  std::vector<uint8_t> bytes(size_t(l.size.total()));
  src.read_at(tensor_start(l), bytes.data(), bytes.size());
  std::vector<float> out(size_t(l.rows * l.cols));
  decode_tensor(l, bytes.data(), out.data());
  return out;
}

std::vector<float> fake_quantize(const PlanItem& l, const float* w) {
  PlanItem local = l;  // lay the encoded tensor out from 0, in the item's own order
  const int64_t first = tensor_start(l);
  local.values_offset -= first;
  local.scales_offset -= first;
  std::vector<uint8_t> bytes(size_t(l.size.total()));
  encode_rows(l, w, l.rows, bytes.data() + local.values_offset, bytes.data() + local.scales_offset);
  std::vector<float> out(size_t(l.rows * l.cols));
  decode_tensor(local, bytes.data(), out.data());
  return out;
}

}  // namespace leapconv

namespace leapconv {

std::vector<float> read_rows_f32(ByteSource& src, const PlanItem& it, int64_t r0, int64_t r1) {
  if (r0 < 0 || r1 > it.rows || r0 > r1) throw ConvertError(src.name(), it.name, "row range out of bounds");
  if (it.enc == Encoding::Int8Group && ((r0 * it.cols) % it.group_size || (r1 * it.cols) % it.group_size))
    throw ConvertError(src.name(), it.name, "rows do not start on an int8 group boundary");
  const EncodedSize before = encoded_size(it.enc, r0, it.cols, it.group_size);
  PlanItem part = it;  // the rows as a small tensor of their own, laid out values then scales
  part.shape = {r1 - r0, it.cols};
  part.rows = r1 - r0;
  part.size = encoded_size(it.enc, part.rows, it.cols, it.group_size);
  part.values_offset = 0;
  part.scales_offset = part.size.values;
  std::vector<uint8_t> bytes(size_t(part.size.total()));
  if (part.size.values) src.read_at(it.values_offset + before.values, bytes.data(), size_t(part.size.values));
  if (part.size.scales)
    src.read_at(it.scales_offset + before.scales, bytes.data() + part.size.values, size_t(part.size.scales));
  std::vector<float> out(size_t(part.rows * it.cols));
  decode_tensor(part, bytes.data(), out.data());
  return out;
}

}  // namespace leapconv
