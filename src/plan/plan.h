// A conversion plan: the output header bytes plus, for every output tensor, where its source
// bytes are, how to encode them and where the encoded values/scales go. Every offset is fixed
// before any data is read (llama.cpp's gguf writer does the same), so the pipeline can stream.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "source/safetensors.h"

namespace leapconv {

enum class Encoding {
  F32,        // 4 bytes a value
  F16,        // 2 bytes a value
  Int8Group,  // LEAP v2: int8 values, then f32 scales, one per group of the flattened tensor
  Q8Channel,  // GGUF-lite: f16 scale per row, then int8 values
  Q4Group64,  // GGUF-lite: f16 scale per 64 values of a row, then packed nibbles
};

const char* encoding_name(Encoding e);

struct EncodedSize {
  int64_t values = 0;
  int64_t scales = 0;
  int64_t total() const { return values + scales; }
};
EncodedSize encoded_size(Encoding e, int64_t rows, int64_t cols, int group_size);

struct PlanItem {
  std::string name;         // name in the output file
  std::string source_name;  // name in the checkpoint
  int shard = 0;
  DType src_dtype = DType::F32;
  int64_t src_offset = 0;   // absolute offset of the tensor's data in its shard
  std::vector<int64_t> shape;  // as stored in the output (PyTorch order)
  int64_t rows = 1, cols = 1;  // the 2-D view the encoders work on
  int permute_heads = 0;       // > 0: apply the RoPE rotate-half -> interleaved permutation
  Encoding enc = Encoding::F32;
  int group_size = 0;          // Int8Group only
  int64_t values_offset = 0, scales_offset = 0;  // absolute offsets in the output file
  EncodedSize size;
  int64_t row_quantum = 1;     // chunks start at multiples of this many rows
  std::string note;            // e.g. why a scheme fell back
};

struct ConversionPlan {
  std::vector<uint8_t> header;  // written at offset 0
  std::vector<PlanItem> items;  // in file order
  int64_t total_bytes = 0;
};

// The RoPE permutation as a row map: output row r of a [heads * head_dim, cols] matrix in
// LEAP's interleaved layout [heads, head_dim/2, 2] comes from this source row of HF's
// rotate-half layout [heads, 2, head_dim/2].
inline int64_t rope_source_row(int64_t r, int64_t head_dim) {
  const int64_t h = r / head_dim, k = r % head_dim, half = head_dim / 2;
  return h * head_dim + (k % 2) * half + k / 2;
}

// Fills rows/cols/row_quantum/size from shape, enc and permute_heads.
void finish_item_geometry(PlanItem& item);

}  // namespace leapconv
