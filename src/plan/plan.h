// A conversion plan: the output header bytes plus, for every output tensor, where its source
// bytes are, which quant type stores it and where its encoded bytes go. Every offset is fixed
// before any data is read (llama.cpp's gguf writer does the same), so the pipeline can stream.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "quant/quant_types.h"
#include "source/safetensors.h"

namespace leapconv {

struct PlanItem {
  std::string name;         // name in the output file
  std::string source_name;  // name in the checkpoint
  int shard = 0;
  DType src_dtype = DType::F32;
  int64_t src_offset = 0;   // absolute offset of the tensor's data in its shard
  std::vector<int64_t> shape;  // as stored in the output (PyTorch order)
  int64_t rows = 1, cols = 1;  // the 2-D view the encoders work on
  int permute_heads = 0;       // > 0: apply the RoPE rotate-half -> interleaved permutation
  bool transpose = false;      // the source is [cols, rows] (GPT-2's Conv1D): one chunk holds it whole
  float add = 0.0f;            // added to every value after conversion (Gemma's norms: 1 + w)
  QType type = QType::F32;
  int group_size = 0;          // BlockSpan::Parameter types only (LEAP v2)
  int64_t offset = 0;          // absolute offset of the tensor's first byte in the output file
  EncodedSize size;
  int64_t row_quantum = 1;     // chunks start at multiples of this many rows
  std::string note;            // e.g. why a scheme fell back

  const QuantType& qt() const { return quant_type(type); }
  int64_t block() const { return qt().block(cols, group_size); }
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
// The file regions that hold rows [r0, r1) of the item, in file order (r0 * cols and r1 * cols
// on block boundaries).
RowRegions row_regions(const PlanItem& item, int64_t r0, int64_t r1);

// Bytes known when planning, besides the header: a tensor computed from the config (GGUF's
// rope_freqs), the zero padding that ends a GGUF file.
struct FixedPiece {
  std::string name;  // the tensor's name, or "" for padding
  int64_t offset = 0;
  std::vector<uint8_t> bytes;
};

struct ConversionPlan {
  std::vector<uint8_t> header;     // written at offset 0
  std::vector<FixedPiece> fixed;   // written with the header
  std::vector<PlanItem> items;     // the tensors streamed from the checkpoint, in file order
  int64_t total_bytes = 0;
};

// The RoPE permutation as a row map: output row r of a [heads * head_dim, cols] matrix in
// LEAP's interleaved layout [heads, head_dim/2, 2] comes from this source row of HF's
// rotate-half layout [heads, 2, head_dim/2].
inline int64_t rope_source_row(int64_t r, int64_t head_dim) {
  const int64_t h = r / head_dim, k = r % head_dim, half = head_dim / 2;
  return h * head_dim + (k % 2) * half + k / 2;
}

// Fills rows/cols/row_quantum/size from shape, type, permute_heads and transpose.
void finish_item_geometry(PlanItem& item);

}  // namespace leapconv
