// Tensor recipes: how one output tensor's values are made from source tensors, as data (in the
// spirit of llama.cpp's model_tensors of callables and dequant_model, without the callables).
// A recipe names its sources (each a tensor of a shard: offset, dtype, shape; a weight's scale
// tensor is a source too) and a list of steps; the format mappers write recipes once, the plan
// carries them, and one function realizes any rows of any recipe into f32 in bounded memory:
// the pipeline, verify, the forward check and the teaching views all call realize_rows, so every
// step is written once, here.
//
// Steps, in the order they apply (check() refuses any other order):
//   1. per weight source: Dequant (times its scale source, one scale per block of values) or
//      Unpack (integer codes packed in 32-bit words, with their scales, zero points and group
//      index: GPTQ, compressed-tensors' pack-quantized), LowRank (plus scale x B A: a LoRA
//      adapter merged; B's rows are the weight's), SliceRows (rows start, start + stride,
//      ...), PermuteHeads (HF rotate-half -> interleaved);
//   2. joining several weight sources into one tensor: Stack ([N, R, C]: experts) or ConcatRows;
//   3. on the joined tensor: Transpose ([R, C] read as [C, R]), AddConstant (Gemma's 1 + w),
//      Reshape (the joined values in their order are the output's: a source viewed as rows of
//      one value, every other one taken, gives gpt-oss's [experts, ff] bias halves), Ternarize
//      (BitNet's weight_quant: each value to -s, 0 or +s, s the mean of |w| over the whole
//      tensor, so a chunk of it is the whole tensor, as for Transpose), Round (the values as a
//      16-bit float file holds them: llama-quantize's input, the converter's --outtype auto file).
// PassThrough stands alone: the sources' bytes already are the output's blocks (a quantized
// checkpoint kept as it ships), block by block one source's bytes after the other's (gpt-oss:
// an MXFP4 block's scale byte, then its 16 bytes of values), output row r from source row
// start + r x stride (gpt-oss's gate and up rows interleaved in one tensor); they are copied,
// NibblePairs reordering a source's nibbles on the way (OCP MX's element 2i low, 2i+1 high in
// byte i -> ggml's j low, j + 16 high in byte j; NVFP4: in groups of 8 bytes, j low, j + 8 high),
// MaskBytes clearing bits of a source's bytes (NVFP4's E4M3 scales -> UE4M3: the sign bit), and
// PermuteHeads taking output rows from other rows within their head (llama.cpp's Llama converter
// permutes an NVFP4 q / k projection's rows before packing them), and Stack (count: sources per
// group) giving each group of sources its own rows, one group after the other (NVFP4 experts);
// decoded by the type only to be looked at.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "arch/arch_table.h"
#include "core/byte_io.h"
#include "quant/quant_types.h"
#include "source/dtype.h"
#include "source/quantized.h"

namespace leapconv {

struct TensorRef;
class Checkpoint;

// One source tensor: where its bytes are and how to read them. Recipes see it as rows of its
// last dimension, as ggml sees a tensor: [numel / last, last] (a scalar is one row of one).
struct SourceTensor {
  std::string name;            // in the checkpoint
  std::string file;            // its shard, for messages
  int shard = 0;               // index into the checkpoint's shards
  int64_t offset = 0;          // absolute offset of its data in the shard
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // as stored
  int64_t numel() const;
  int64_t nbytes() const { return dtype_bytes(dtype, numel()); }
  static SourceTensor of(const Checkpoint& ck, const TensorRef& t);
};
// An NVFP4 weight's codes, U8 [rows, cols / 2] (the checkpoint's entry under a ModelOpt weight's
// name is the weight it stands for: [rows, cols]).
SourceTensor nvfp4_codes_source(const Checkpoint& ck, const Nvfp4Weight& w);

// The 2-D view of a shape, as ggml's rows: [numel / last, last]; [1, 1] for a scalar.
struct RowView {
  int64_t rows = 1, cols = 1;
  static RowView of(const std::vector<int64_t>& shape);
};

enum class StepKind : uint8_t {
  Dequant, Unpack, LowRank, SliceRows, PermuteHeads, Stack, ConcatRows, Transpose, AddConstant, Reshape, Ternarize,
  Round, PassThrough, NibblePairs, MaskBytes
};


struct Step {
  StepKind kind;
  int source = 0;                            // per-source steps: the weight source they apply to
  int scale = -1;                            // Dequant: the source holding the scales
  int64_t block_rows = 0, block_cols = 0;    // Dequant: values per scale (a per-tensor scale: rows x cols)
  // Dequant: the rows of one matrix of a stacked weight ([experts, rows, cols] as rows of cols:
  // each expert's blocks start at its first row, its last block cut short); 0: one matrix
  int64_t matrix_rows = 0;
  int64_t start = 0, count = 0, stride = 1;  // SliceRows; PassThrough: start, stride
  int64_t heads = 0;                         // PermuteHeads
  float value = 0.0f;                        // AddConstant; LowRank: the scale
  int lora_a = -1, lora_b = -1;              // LowRank: the sources of A [r, cols] and B [rows, r]
  QType type = QType::F32;                   // PassThrough: the blocks' type
  DType dtype = DType::F32;                  // Ternarize: the dtype torch holds the weight in (its result is cast back to it);
                                             // Round: F16 or BF16
  // Unpack: codes in source `source`, scales in `scale`, zero points in `zeros` and the group of
  // each input column in `group_index` (-1: none); bits per code; values per group (GroupRows);
  // added to every zero point (GPTQ's v1 checkpoints store zero - 1); the weight's shape.
  Packing packing = Packing::GptqColumns;
  int zeros = -1, group_index = -1, bits = 0, zero_bias = 0;
  int64_t group = 0, weight_rows = 0, weight_cols = 0;

  static Step dequant(int source, int scale, int64_t block_rows, int64_t block_cols, int64_t matrix_rows = 0);
  static Step unpack(Packing packing, int source, int scale, int zeros, int group_index, int bits, int64_t group,
                     int zero_bias, int64_t weight_rows, int64_t weight_cols);
  static Step low_rank(int source, int a, int b, float scale);
  static Step slice_rows(int source, int64_t start, int64_t count, int64_t stride = 1);
  static Step permute_heads(int source, int64_t heads);
  static Step stack() { return {StepKind::Stack}; }
  static Step concat_rows() { return {StepKind::ConcatRows}; }
  static Step transpose() { return {StepKind::Transpose}; }
  static Step add(float value);
  static Step reshape() { return {StepKind::Reshape}; }
  static Step ternarize(DType dtype);
  static Step round_to(DType dtype);
  static Step pass_through(QType type, int64_t start = 0, int64_t stride = 1);
  // group_bytes: bytes of a source's block part paired within (0: all of them)
  static Step nibble_pairs(int source, int64_t group_bytes = 0);
  static Step mask_bytes(int source, uint8_t mask);  // (mask in bits)
};

// A byte range of one source shard.
struct SourceRange {
  int shard = 0;
  int64_t offset = 0, size = 0;
};
// Rows [row0, row1) of source `source`: what a realization reads.
struct RowSpan {
  int source = 0;
  int64_t row0 = 0, row1 = 0;
};

class SourceRows;

class Recipe {
 public:
  std::vector<SourceTensor> sources;
  std::vector<Step> steps;
  std::vector<float> constant;  // a tensor computed from the config (rope_freqs): its values, no sources

  Recipe() = default;
  static Recipe of(const Checkpoint& ck, const TensorRef& t);  // the tensor as it is
  static Recipe computed(std::vector<float> values);
  // Appends source t and, when the checkpoint scales it (a quantized checkpoint's weight:
  // source/quantized.h), its scale tensor and the Dequant step reading it (packed codes: their
  // tensors and Unpack). Returns t's index.
  int add_source(const Checkpoint& ck, const TensorRef& t);
  // and, when a LoRA adapter is merged into the checkpoint (ck.merged), its A and B with a LowRank step
  void add_low_rank_of(const Checkpoint& ck, const TensorRef& t, int source);
  Recipe& then(Step s) {
    steps.push_back(s);
    return *this;
  }

  bool empty() const { return sources.empty() && constant.empty(); }
  bool is_computed() const { return sources.empty() && !constant.empty(); }
  bool passes_through() const { return pass_; }
  const Step* find(StepKind k) const;
  // The source messages name: the first one ("" for a computed tensor).
  const std::string& source_name() const;
  // For people: "model.layers.0.self_attn.q_proj.weight (BF16), permute 32 heads".
  std::string describe() const;

  // Validates the recipe against the 2-D output [rows, cols] it must give (shapes, ranges,
  // step order, scale shapes, whole bytes per row) and prepares it for realizing: ConvertError
  // naming `out` and the source at fault. Call before anything else below.
  void check(const std::string& out, int64_t rows, int64_t cols);
  bool checked() const { return checked_; }
  int64_t rows() const { return rows_; }  // the output as checked: rows of cols values
  int64_t cols() const { return cols_; }
  // Output rows a chunk must start on: whole heads for a permuted source, whole tiles of a GPTQ
  // weight's codes, the whole tensor when transposed; 1 otherwise.
  int64_t row_quantum() const { return quantum_; }
  // True when rows [r0, r1) read many short strips of a source (a GPTQ weight's codes) rather
  // than a few long ranges; reads of all the rows are one long range a source all the same.
  bool reads_strips() const;
  // The rows of each source that output rows [r0, r1) read, in the order they are read.
  std::vector<RowSpan> reads(int64_t r0, int64_t r1) const;
  // The same as byte ranges of the shards (span by span); bytes of source bytes per span.
  SourceRange byte_range(const RowSpan& s) const;
  int64_t source_bytes() const;  // every source's bytes: what a whole conversion of it reads
  // Source i as realizing sees it: rows of cols values, row_bytes each (a pass-through source's
  // rows are the output's rows).
  const RowView& source_view(int i) const { return views_[size_t(i)]; }
  int64_t source_row_bytes(int i) const { return row_bytes_[size_t(i)]; }

 private:
  struct Operand {  // a weight source with its own steps, as rows first_row.. of the joined tensor
    int source = 0, scale = -1;
    int64_t block_rows = 1, block_cols = 1, matrix_rows = 0;
    int unpack = -1;                          // its codes are packed: the Unpack step's index (rows are the weight's)
    int low_rank = -1;                        // the LowRank step's index
    int64_t start = 0, stride = 1, rows = 0;  // rows after slicing
    int64_t head_dim = 0;                     // > 0: permuted in heads of this many rows
    int64_t first_row = 0;
    // GPTQ: its rows are columns of its codes, read in tiles of this many (one word of zero
    // points): its qweight, scales and qzeros are viewed as a row per tile, so a chunk of rows
    // reads a strip of each instead of the whole tensor.
    int64_t tile = 0;
    // GPTQ: the tiles [t0, t1) holding its source rows [lo, hi) (what reads() asks for and
    // unpack_rows decodes: the two must agree).
    std::pair<int64_t, int64_t> tiles_of(int64_t lo, int64_t hi) const { return {lo / tile, (hi - 1) / tile + 1}; }
    // Operand row x's row in its source: the RoPE permutation (row x of [heads, hd/2, 2] comes
    // from HF's [heads, 2, hd/2]), then the slice.
    int64_t source_row(int64_t x) const {
      if (head_dim > 0) x = x / head_dim * head_dim + (x % head_dim % 2) * (head_dim / 2) + x % head_dim / 2;
      return start + x * stride;
    }
    // The row of its scales that source row r reads (blocks of block_rows, restarting at each
    // matrix of matrix_rows rows where there is one).
    int64_t scale_row(int64_t r) const {
      if (matrix_rows <= 0) return r / block_rows;
      return r / matrix_rows * ((matrix_rows + block_rows - 1) / block_rows) + r % matrix_rows / block_rows;
    }
  };
  friend void realize_rows(const Recipe&, int64_t, int64_t, SourceRows&, float*);
  friend void pass_through_rows(const Recipe&, int64_t, int64_t, SourceRows&, uint8_t*);
  void operand_rows(const Operand& o, int64_t a, int64_t b, SourceRows& src, float* out) const;
  void unpack_rows(const Operand& o, int64_t a, int64_t b, SourceRows& src, float* out) const;
  void add_low_rank(const Operand& o, int64_t a, int64_t b, SourceRows& src, float* out) const;
  template <typename Fail>
  void check_unpack(const Step& s, const Fail& fail) const;
  bool checked_ = false, pass_ = false, transpose_ = false, ternary_ = false;
  DType ternary_dtype_ = DType::F32;
  DType round_ = DType::F32;  // Round: the 16-bit type the values are rounded to (F32: none)
  int64_t reshape_ = 1;                  // Reshape: joined rows per output row (the joined rows are of cols / reshape_)
  int64_t pass_start_ = 0, pass_stride_ = 1;
  std::vector<int64_t> nibble_pairs_;    // per source (pass-through): bytes paired within; 0: none
  std::vector<uint8_t> mask_;            // per source (pass-through): its bytes AND this
  int64_t pass_head_dim_ = 0;            // pass-through with heads permuted: rows per head
  int pass_parts_ = 1;                   // pass-through: sources a block is made of (stacked: a group's)
  int64_t pass_group_rows_ = 0;          // pass-through: output rows of each group of sources (stacked experts)
  float add_ = 0.0f;
  QType pass_type_ = QType::F32;
  int64_t rows_ = 0, cols_ = 0, quantum_ = 1;
  std::vector<Operand> ops_;
  std::vector<RowView> views_;     // per source
  std::vector<int64_t> row_bytes_;  // per source
};

// A role's tensor as the architecture table says it is written: its transform as steps (q/k
// permuted in n_heads / n_kv_heads heads, Conv1D weights transposed, Gemma's norms plus one).
Recipe role_recipe(const Checkpoint& ck, const TensorRef& t, Transform transform, int64_t n_heads, int64_t n_kv_heads);
// BitNet's weight_quant (llama.cpp's BitnetModel.weight_quant) on n values of a tensor held in
// `dtype`, in place, in torch's f32 arithmetic: s = mean(|w|) (torch's order of additions:
// core/torch_sum.h) clamped to >= 1e-5; w -> round-half-even(w * (1 / s)) clamped to [-1, 1],
// divided by (1 / s), rounded to `dtype`. A mean that is not finite: ConvertError naming file / tensor.
void ternarize(float* w, int64_t n, DType dtype, const std::string& file, const std::string& tensor);

// The shape the role's recipe gives (a transposed 2-D tensor's dims swapped).
std::vector<int64_t> role_shape(const std::vector<int64_t>& source_shape, Transform transform);

// Decoded rows of a recipe's sources.
class SourceRows {
 public:
  virtual ~SourceRows() = default;
  // Rows [r0, r1) of source s (its 2-D view), decoded to f32: (r1 - r0) * cols values.
  virtual void rows(int s, int64_t r0, int64_t r1, float* out) = 0;
  // Their bytes as stored (pass-through recipes).
  virtual const uint8_t* bytes(int s, int64_t r0, int64_t r1) = 0;
  // Values [c0, c1) of row r (of `cols` values) of source s (a transposed tensor's rows are
  // columns of its source).
  virtual void segment(int s, int64_t r, int64_t cols, int64_t c0, int64_t c1, float* out);
};

// Rows read into one buffer, span after span (the pipeline's chunk buffer): serves any rows
// inside the spans.
class BufferedRows : public SourceRows {
 public:
  BufferedRows(const Recipe& r, const std::vector<RowSpan>& spans, const uint8_t* raw);
  void rows(int s, int64_t r0, int64_t r1, float* out) override;
  const uint8_t* bytes(int s, int64_t r0, int64_t r1) override;
  void segment(int s, int64_t r, int64_t cols, int64_t c0, int64_t c1, float* out) override;

 private:
  const Recipe& r_;
  const std::vector<RowSpan>& spans_;
  const uint8_t* raw_;
  std::vector<int64_t> at_;  // each span's offset in raw_
  size_t next_ = 0;          // where the next lookup starts (rows are mostly asked for in order)
};

// Rows [r0, r1) of the recipe's output, as f32 ((r1 - r0) * cols values into out). The recipe
// must be checked.
void realize_rows(const Recipe& r, int64_t r0, int64_t r1, SourceRows& src, float* out);
// The same, reading the spans it needs from the shards first (one read per span).
std::vector<float> realize_rows(const Recipe& r, int64_t r0, int64_t r1, const std::vector<ByteSource*>& shards);
// A pass-through recipe's encoded bytes of rows [r0, r1) (blocks of its type, row after row).
void pass_through_rows(const Recipe& r, int64_t r0, int64_t r1, SourceRows& src, uint8_t* dst);

}  // namespace leapconv
