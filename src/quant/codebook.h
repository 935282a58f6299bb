// The codebook ("grid") types' blocks as ggml's dequantize_row_<type> reads them, group by group:
// which grid point each stored index picks, the signs and scale applied to it, and the values it
// stands for. For the block view (a codebook block is no set of bit fields holding one value's
// integer each, so it has no BlockAnatomy); the grids are ggml_iq.cpp's, from llama.cpp's source.
#pragma once
#include <cstdint>
#include <vector>

#include "container/ggml_types.h"

namespace leapconv::ggml {

// One grid index of a block and the values it gives: IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M 8 a
// point (32 to a block of 256), IQ3_XXS, IQ3_S 4 (64 to a block).
struct CodebookGroup {
  int first = 0, size = 8;          // elements [first, first + size) of the block
  int index = 0, index_bits = 8;    // the grid index as stored, and its width (the grid has 2^bits points)
  struct Slice { int byte = -1, shift = 0, width = 0; };
  Slice index_slices[3];            // where its bits sit, low bits first (width 0: unused)
  int aux_bytes[4] = {-1, -1, -1, -1};  // the bytes holding its signs and its scale (-1: unused)
  int grid[8] = {};                 // the point's coordinates as ggml's table holds them (IQ2 8, 25, 43; IQ1 -1, 0, 1)
  int signs = -1;                   // bit j set: element first + j negated; -1: none stored (IQ1's grid is signed)
  float scale = 0.0f, delta = 0.0f; // value = scale * grid * sign (IQ2, IQ3); scale * (grid + delta) (IQ1)
  float values[8] = {};             // as ggml's dequantize_row_<type> computes them
};

// The groups of one block of `type` (its bytes at `block`, in ggml's layout), in element order;
// empty for a type that is not a codebook type.
std::vector<CodebookGroup> codebook_groups(GgmlType type, const uint8_t* block);
// The block's fields as ggml's block_<type> struct has them: {name, offset, bytes, role}.
struct CodebookField { const char* name; int offset, bytes; const char* role; };
std::vector<CodebookField> codebook_fields(GgmlType type);
// The formula of a group's values, for people ("d·(0.5 + s)/4 · grid · sign").
const char* codebook_formula(GgmlType type);

}  // namespace leapconv::ggml
