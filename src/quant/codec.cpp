#include "quant/codec.h"

namespace leapconv {

float encode_rows(const PlanItem& it, const float* w, int64_t rows, uint8_t* const* regions) {
  return it.qt().encode(w, rows, it.cols, it.block(), regions);
}

void decode_rows(const PlanItem& it, int64_t r0, int64_t r1, const uint8_t* bytes, float* out) {
  const RowRegions rr = row_regions(it, r0, r1);
  const uint8_t* region[kMaxRegions] = {};
  for (int i = 0; i < rr.n; ++i) {
    region[i] = bytes;
    bytes += rr.region[i].bytes;
  }
  it.qt().decode(region, r1 - r0, it.cols, it.block(), out);
}

static void check_rows(ByteSource& src, const PlanItem& it, int64_t r0, int64_t r1) {
  if (r0 < 0 || r1 > it.rows || r0 > r1) throw ConvertError(src.name(), it.name, "row range out of bounds");
  const int64_t b = it.block();
  if (it.qt().span != BlockSpan::Row && b > 1 && ((r0 * it.cols) % b || (r1 * it.cols) % b))
    throw ConvertError(src.name(), it.name,
                       std::string("rows do not start on a ") + it.qt().name + " block boundary");
}

std::vector<float> read_rows_f32(ByteSource& src, const PlanItem& it, int64_t r0, int64_t r1) {
  check_rows(src, it, r0, r1);
  const RowRegions rr = row_regions(it, r0, r1);
  std::vector<uint8_t> bytes(size_t(rr.total()));
  size_t at = 0;
  for (int i = 0; i < rr.n; ++i) {
    if (rr.region[i].bytes) src.read_at(rr.region[i].offset, bytes.data() + at, size_t(rr.region[i].bytes));
    at += size_t(rr.region[i].bytes);
  }
  std::vector<float> out(size_t((r1 - r0) * it.cols));
  decode_rows(it, r0, r1, bytes.data(), out.data());
  return out;
}

std::vector<float> read_tensor_f32(ByteSource& src, const PlanItem& it) {
  std::vector<uint8_t> bytes(size_t(it.size.total()));
  src.read_at(it.offset, bytes.data(), bytes.size());
  std::vector<float> out(size_t(it.rows * it.cols));
  decode_rows(it, 0, it.rows, bytes.data(), out.data());
  return out;
}

std::vector<float> fake_quantize(const PlanItem& it, const float* w, float* err) {
  const RowRegions rr = row_regions(it, 0, it.rows);
  std::vector<uint8_t> bytes(size_t(it.size.total()));
  uint8_t* region[kMaxRegions] = {};
  size_t at = 0;
  for (int i = 0; i < rr.n; ++i) {
    region[i] = bytes.data() + at;
    at += size_t(rr.region[i].bytes);
  }
  const float e = encode_rows(it, w, it.rows, region);
  if (err) *err = e;
  std::vector<float> out(size_t(it.rows * it.cols));
  decode_rows(it, 0, it.rows, bytes.data(), out.data());
  return out;
}

}  // namespace leapconv
