// Encoding and decoding of one tensor's rows in its quant type, given its layout: type, 2-D
// geometry and where it starts in a file. The writer (pipeline), the readers (inspect, verify,
// the block view) and fake-quant all go through these, so one definition of each byte layout
// (the quant-type table) serves them all. A plan item converts to its TensorCodec.
#pragma once
#include <vector>

#include "core/byte_io.h"
#include "quant/quant_types.h"

namespace leapconv {

struct TensorCodec {
  const QuantType* type = nullptr;
  int64_t rows = 1, cols = 1;  // rows of the last dimension
  int group_size = 0;          // BlockSpan::Parameter types only (LEAP v2)
  int64_t offset = 0;          // of its first byte in the file
  EncodedSize size;            // type->bytes_of(rows, cols, group_size)
  // llama-quantize's importance weights (--imatrix), one per column for each slice of
  // slice_rows rows (a stacked expert; one slice for a 2-D weight); null: none.
  const float* importance = nullptr;
  int64_t slice_rows = 0;
  int64_t block() const { return type->block(cols, group_size); }
};

// One region of rows [r0, r1) of a tensor: where it sits in the file and how long it is.
struct RegionSpan {
  int64_t offset = 0, bytes = 0;
};
struct RowRegions {
  RegionSpan region[kMaxRegions];
  int n = 0;
  int64_t total() const {
    int64_t t = 0;
    for (int i = 0; i < n; ++i) t += region[i].bytes;
    return t;
  }
};
// The file regions that hold rows [r0, r1) of the tensor, in file order (r0 * cols and r1 * cols
// on block boundaries).
RowRegions row_regions(const TensorCodec& t, int64_t r0, int64_t r1);

// Encodes `rows` rows of t.cols values, the tensor's rows [row0, row0 + rows), into the tensor's
// regions (file order), with their slice's importance weights where the tensor has them; returns
// max |w - deq| (+inf if w holds NaN/Inf and the type quantizes).
float encode_rows(const TensorCodec& t, const float* w, int64_t row0, int64_t rows, uint8_t* const* regions);

// Decodes rows [r0, r1) from their encoded bytes, laid out in file order as `row_regions` gives
// them, back to back from `bytes`.
void decode_rows(const TensorCodec& t, int64_t r0, int64_t r1, const uint8_t* bytes, float* out);

// The whole tensor, decoded (it starts at t.offset).
std::vector<float> read_tensor_f32(ByteSource& src, const TensorCodec& t, const std::string& name);
// Rows [r0, r1) of an encoded tensor, decoded; reads only those rows' bytes. r0 * cols and
// r1 * cols must fall on block boundaries (true for LEAP's embeddings).
std::vector<float> read_rows_f32(ByteSource& src, const TensorCodec& t, const std::string& name, int64_t r0, int64_t r1);

// What a reader gets back after writing w (t.rows rows, the tensor's rows from row0):
// decode(encode(w)); *err (if given) is encode's max |w - deq|, +inf when the type cannot store
// w (the writer refuses it).
std::vector<float> fake_quantize(const TensorCodec& t, const float* w, float* err = nullptr, int64_t row0 = 0);

}  // namespace leapconv
