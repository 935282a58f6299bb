#include "quant/codec.h"

#include <algorithm>
#include <cmath>

namespace leapconv {

RowRegions row_regions(const TensorCodec& t, int64_t r0, int64_t r1) {
  const QuantType& q = *t.type;
  const EncodedSize before = q.bytes_of(r0, t.cols, t.group_size);
  const EncodedSize here = q.bytes_of(r1 - r0, t.cols, t.group_size);
  RowRegions rr;
  switch (q.layout) {
    case Layout::Plain:
    case Layout::Interleaved:
      rr.region[rr.n++] = {t.offset + before.total(), here.total()};
      break;
    case Layout::ValuesThenScales:
      rr.region[rr.n++] = {t.offset + before.values, here.values};
      rr.region[rr.n++] = {t.offset + t.size.values + before.scales, here.scales};
      break;
    case Layout::ScalesThenValues:
      rr.region[rr.n++] = {t.offset + before.scales, here.scales};
      rr.region[rr.n++] = {t.offset + t.size.scales + before.values, here.values};
      break;
  }
  return rr;
}

float encode_rows(const TensorCodec& t, const float* w, int64_t row0, int64_t rows, uint8_t* const* regions) {
  const QuantType& q = *t.type;
  if (!t.importance || !q.encode_weighted) return q.encode(w, rows, t.cols, t.block(), regions);
  // row by row within a slice: llama-quantize's imatrix_for_row (a chunk never crosses an expert)
  const int64_t row_bytes = q.bytes_of(1, t.cols, t.group_size).total();
  float worst = 0.0f;
  for (int64_t r = 0; r < rows;) {
    const int64_t slice = (row0 + r) / t.slice_rows, end = std::min(rows, (slice + 1) * t.slice_rows - row0);
    uint8_t* at[kMaxRegions] = {regions[0] + r * row_bytes};
    const float e = q.encode_weighted(w + r * t.cols, end - r, t.cols, t.importance + slice * t.cols, at);
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
    r = end;
  }
  return worst;
}

void decode_rows(const TensorCodec& t, int64_t r0, int64_t r1, const uint8_t* bytes, float* out) {
  const RowRegions rr = row_regions(t, r0, r1);
  const uint8_t* region[kMaxRegions] = {};
  for (int i = 0; i < rr.n; ++i) {
    region[i] = bytes;
    bytes += rr.region[i].bytes;
  }
  t.type->decode(region, r1 - r0, t.cols, t.block(), out);
}

static void check_rows(ByteSource& src, const TensorCodec& t, const std::string& name, int64_t r0, int64_t r1) {
  if (r0 < 0 || r1 > t.rows || r0 > r1) throw ConvertError(src.name(), name, "row range out of bounds");
  const int64_t b = t.block();
  if (t.type->span != BlockSpan::Row && b > 1 && ((r0 * t.cols) % b || (r1 * t.cols) % b))
    throw ConvertError(src.name(), name, std::string("rows do not start on a ") + t.type->name + " block boundary");
}

std::vector<float> read_rows_f32(ByteSource& src, const TensorCodec& t, const std::string& name, int64_t r0, int64_t r1) {
  check_rows(src, t, name, r0, r1);
  const RowRegions rr = row_regions(t, r0, r1);
  std::vector<uint8_t> bytes(size_t(rr.total()));
  size_t at = 0;
  for (int i = 0; i < rr.n; ++i) {
    if (rr.region[i].bytes) src.read_at(rr.region[i].offset, bytes.data() + at, size_t(rr.region[i].bytes));
    at += size_t(rr.region[i].bytes);
  }
  std::vector<float> out(size_t((r1 - r0) * t.cols));
  decode_rows(t, r0, r1, bytes.data(), out.data());
  return out;
}

std::vector<float> read_tensor_f32(ByteSource& src, const TensorCodec& t, const std::string&) {
  std::vector<uint8_t> bytes(size_t(t.size.total()));
  src.read_at(t.offset, bytes.data(), bytes.size());
  std::vector<float> out(size_t(t.rows * t.cols));
  decode_rows(t, 0, t.rows, bytes.data(), out.data());
  return out;
}

std::vector<float> fake_quantize(const TensorCodec& t, const float* w, float* err, int64_t row0) {
  const RowRegions rr = row_regions(t, 0, t.rows);
  std::vector<uint8_t> bytes(size_t(t.size.total()));
  uint8_t* region[kMaxRegions] = {};
  size_t at = 0;
  for (int i = 0; i < rr.n; ++i) {
    region[i] = bytes.data() + at;
    at += size_t(rr.region[i].bytes);
  }
  const float e = encode_rows(t, w, row0, t.rows, region);
  if (err) *err = e;
  std::vector<float> out(size_t(t.rows * t.cols));
  decode_rows(t, 0, t.rows, bytes.data(), out.data());
  return out;
}

}  // namespace leapconv
