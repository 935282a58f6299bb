// One Q4 group of 64, and its row's Q8 per-channel view, laid open for the page's teaching
// view: source values, the f16 scale, the 4-bit integers, the 32 packed bytes, the dequantized
// values and their error. The bytes come from the very quantizers the writer runs (checkpoint
// and example sources) or straight from a written GGUF-lite file (file source), never from a
// second implementation.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/byte_io.h"
#include "source/checkpoint.h"

namespace leapconv {

// Group `group` (columns group*64 .. group*64+63) of row `row` of a 2-D checkpoint tensor,
// quantized as the Q4 writer would (one row is read, never the whole tensor), with the Q8
// per-channel view of the same row.
nlohmann::json group_view_checkpoint(const Checkpoint& ck, const std::string& tensor, int64_t row,
                                     int64_t group);

// The same group as stored in a written GGUF-lite file (the tensor must be Q4_per_group_64):
// the f16 scale and the 32 packed bytes read at their offsets. When `ck` holds a tensor of the
// same name and shape, the source values, the errors and the Q8 row view come from it.
nlohmann::json group_view_file(ByteSource& file, const Checkpoint* ck, const std::string& tensor,
                               int64_t row, int64_t group);

// The built-in classroom example: a small hand-picked tensor (negative values, exact ties, an
// outlier, a zero group, a group whose f16 scale is subnormal so that a value reaches -8).
nlohmann::json group_view_example(int64_t row, int64_t group);

}  // namespace leapconv
