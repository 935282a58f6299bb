// A conversion plan: the output files' header bytes plus, for every output tensor, its recipe
// (the source tensors and steps that make its values), which quant type stores it and where its
// encoded bytes go. Every offset is fixed before any data is read (llama.cpp's gguf writer does
// the same), so the pipeline can stream. One conversion may write several files (the parts of a
// split GGUF), each with its own header and offsets.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plan/recipe.h"
#include "quant/codec.h"

namespace leapconv {

struct PlanItem {
  std::string name;            // name in the output file
  Recipe recipe;               // how its values are made (empty for a tensor read back from a file)
  std::vector<int64_t> shape;  // as stored in the output (PyTorch order)
  int64_t rows = 1, cols = 1;  // the 2-D view the encoders work on: rows of the last dimension, as ggml's
  QType type = QType::F32;
  int group_size = 0;          // BlockSpan::Parameter types only (LEAP v2)
  int file = 0;                // which of the plan's files holds it
  int64_t offset = 0;          // absolute offset of the tensor's first byte in its file
  EncodedSize size;
  int64_t row_quantum = 1;     // chunks start at multiples of this many rows
  std::string note;            // e.g. why a scheme fell back
  // llama-quantize's importance weights (--imatrix): slices x cols, the rows of slice k (k =
  // row / (rows / slices): a stacked expert) weighted by the k-th cols; null: none.
  std::shared_ptr<const std::vector<float>> importance;

  const QuantType& qt() const { return quant_type(type); }
  int64_t block() const { return qt().block(cols, group_size); }
  const std::string& source_name() const { return recipe.source_name(); }
  // Its encoding as the codec sees it (encode_rows, decode_rows, fake_quantize take an item).
  operator TensorCodec() const {
    const int64_t slices = importance && cols > 0 ? int64_t(importance->size()) / cols : 0;
    return {&qt(), rows, cols, group_size, offset, size, importance ? importance->data() : nullptr, slices > 0 ? rows / slices : 0};
  }
};

// Bytes known when planning, besides the header: the zero padding that ends a GGUF file.
struct FixedPiece {
  int64_t offset = 0;
  std::vector<uint8_t> bytes;
};

// One output file: its name's suffix, header and fixed pieces.
struct PlanFile {
  std::string suffix;            // "" (the output itself) or "-00002-of-00003" (a part, before the extension)
  std::vector<uint8_t> header;   // written at offset 0
  std::vector<FixedPiece> fixed; // written with the header
  int64_t total_bytes = 0;
};

struct ConversionPlan {
  std::vector<PlanFile> files;   // one, or every part of a split output
  std::vector<PlanItem> items;   // the tensors, in file order (file by file)
  int64_t total_bytes() const;   // of every file
};

// Rows [r0, r1) of the item's tensor (their values w) as a reader gets them back: encoded and
// decoded in the item's type, with their slices' importance weights.
std::vector<float> fake_quantize_rows(const PlanItem& it, const float* w, int64_t r0, int64_t r1);

// The item's tensor in a written file, decoded: whole, or rows [r0, r1).
inline std::vector<float> read_tensor_f32(ByteSource& src, const PlanItem& it) { return read_tensor_f32(src, it, it.name); }
inline std::vector<float> read_rows_f32(ByteSource& src, const PlanItem& it, int64_t r0, int64_t r1) {
  return read_rows_f32(src, it, it.name, r0, r1);
}

// Checks the item's recipe against its shape and fills rows/cols/row_quantum/size from shape,
// type and recipe. Throws ConvertError naming the tensor when the recipe does not make it.
void finish_item_geometry(PlanItem& item);

}  // namespace leapconv
