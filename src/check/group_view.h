// One Q4 group of 64, and its row's Q8 per-channel view, laid open for the page's teaching
// view: source values, the f16 scale, the 4-bit integers, the 32 packed bytes, the dequantized
// values and their error. The bytes come from the very quantizers the writer runs (checkpoint
// and example sources) or straight from a written GGUF-lite file (file source), never from a
// second implementation. Below, the block view: one block of any type the quant-type table
// gives an anatomy, described from its bytes (fields, bits, integers, arithmetic, values).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/byte_io.h"
#include "quant/quant_types.h"
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

namespace leapconv {

// ---- the block view: one block of any type with a block anatomy, laid open from its bytes ----
// A tensor as the block view sees it: its type, its 2-D shape (rows of `cols` values) and the
// file offset of its data (its first byte; GGUF-lite: its scales region).
struct BlockTensor {
  const QuantType* type = nullptr;
  int64_t rows = 1, cols = 1, offset = 0;
  std::string name;
  std::string file;  // named in errors ("" for a checkpoint row or the example)
};
// Blocks a row holds, as shown (GGUF-lite Q8: windows of 32 of the row's values).
int64_t blocks_per_row(const BlockTensor& t);
// Where block `block` of row `row` sits: its pieces in the order the view shows them, as
// [{offset, size}] (one piece for ggml's types; the scale, then the values for GGUF-lite).
nlohmann::json block_pieces(const BlockTensor& t, int64_t row, int64_t block);
// The block given its bytes (the pieces' bytes, joined): fields, per-element bits and integers,
// sub-block scales, the arithmetic, the values from the type's own decoder and, when `source`
// (the block's source values) is given, the errors.
nlohmann::json block_view_bytes(const BlockTensor& t, int64_t row, int64_t block, const uint8_t* bytes,
                                const float* source);
// A block of a checkpoint tensor's row quantized to `type` as the writer's encoder does.
nlohmann::json block_view_checkpoint(const Checkpoint& ck, const std::string& tensor, const QuantType& type,
                                     int64_t row, int64_t block);
// The built-in example of `type`: a fixed example row quantized by the type's own encoder.
nlohmann::json block_view_example(const QuantType& type, int64_t row, int64_t block);
// A block of a tensor of a written file, read at its pieces. `entry` is the tensor as the
// conversion summary lists it (name, dtype, shape, offset, source, ...); when `ck` holds its
// source tensor unchanged (same shape, not permuted, transposed or offset), the source values
// and the errors come with it.
nlohmann::json block_view_file(ByteSource& file, const Checkpoint* ck, const nlohmann::json& entry, int64_t row,
                               int64_t block);
// The tensor of a summary entry (or of an opened file's tensor table): type by name, 2-D shape.
BlockTensor block_tensor(const nlohmann::json& entry);
// The types the view lays open, for the page: [{name, label, values, bytes, formula}].
nlohmann::json block_view_types();
// Why the block view cannot show type t ("" if it can).
std::string block_view_refusal(const QuantType& t);

}  // namespace leapconv
