// Encoding and decoding of one tensor's rows in any output encoding (LEAP or GGUF-lite),
// given its plan item. The writer (pipeline), the reader (inspect, verify) and fake-quant
// all go through these, so one definition of each byte layout serves all of them.
#pragma once
#include <vector>

#include "core/byte_io.h"
#include "plan/plan.h"

namespace leapconv {

// Encodes `rows` rows of item.cols values into values/scales buffers; returns max |w - deq|
// (+inf if w holds NaN/Inf and the encoding quantizes).
float encode_rows(const PlanItem& item, const float* w, int64_t rows, uint8_t* values,
                  uint8_t* scales);

// The first byte a tensor occupies in its file (LEAP: values first; GGUF-lite: scales first).
int64_t tensor_start(const PlanItem& item);
// Decodes a whole tensor from its bytes, which start at tensor_start(item).
void decode_tensor(const PlanItem& item, const uint8_t* bytes, float* out);
std::vector<float> read_tensor_f32(ByteSource& src, const PlanItem& item);

// What a reader gets back after writing w: decode(encode(w)).
std::vector<float> fake_quantize(const PlanItem& item, const float* w);

}  // namespace leapconv

namespace leapconv {
// Rows [r0, r1) of a 2-D encoded tensor, decoded; reads only those rows' values and scales.
// Int8Group needs r0 * cols and r1 * cols on group boundaries (true for LEAP's embeddings).
std::vector<float> read_rows_f32(ByteSource& src, const PlanItem& item, int64_t r0, int64_t r1);
}  // namespace leapconv
