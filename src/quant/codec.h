// Encoding and decoding of one tensor's rows in its quant type, given its plan item. The
// writer (pipeline), the readers (inspect, verify, the block view) and fake-quant all go
// through these, so one definition of each byte layout (the quant-type table) serves them all.
#pragma once
#include <vector>

#include "core/byte_io.h"
#include "plan/plan.h"

namespace leapconv {

// Encodes `rows` rows of item.cols values into the item's regions (file order); returns
// max |w - deq| (+inf if w holds NaN/Inf and the type quantizes).
float encode_rows(const PlanItem& item, const float* w, int64_t rows, uint8_t* const* regions);

// Decodes rows [r0, r1) from their encoded bytes, laid out in file order as `row_regions` gives
// them, back to back from `bytes`.
void decode_rows(const PlanItem& item, int64_t r0, int64_t r1, const uint8_t* bytes, float* out);

// The whole tensor, decoded (it starts at item.offset).
std::vector<float> read_tensor_f32(ByteSource& src, const PlanItem& item);
// Rows [r0, r1) of a 2-D encoded tensor, decoded; reads only those rows' bytes. r0 * cols and
// r1 * cols must fall on block boundaries (true for LEAP's embeddings).
std::vector<float> read_rows_f32(ByteSource& src, const PlanItem& item, int64_t r0, int64_t r1);

// What a reader gets back after writing w (item.rows rows): decode(encode(w)); *err (if given)
// is encode's max |w - deq|, +inf when the type cannot store w (the writer refuses it).
std::vector<float> fake_quantize(const PlanItem& item, const float* w, float* err = nullptr);

}  // namespace leapconv
