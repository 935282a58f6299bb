// The quant-type table: one row per encoding a tensor can be stored in, holding everything
// the rest of the core needs to know about it (names, block geometry, byte layout, which
// tensors it accepts, its encoder and decoder). Planning, the pipeline, readers, verify, the
// byte breakdown and the page all ask this table; nothing else switches on a type. In the
// spirit of ggml's type_traits: adding a type is adding a row.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace leapconv {

// Types of today's formats. llama.cpp's block types (Q8_0, Q4_0, Q4_K, ...) become rows too.
enum class QType : uint8_t {
  F32,        // 4 bytes a value
  F16,        // 2 bytes a value
  Int8Group,  // LEAP v2: int8 values, then f32 scales, one per group of the flattened tensor
  Q8Channel,  // GGUF-lite: f16 scale per row, then int8 values
  Q4Group64,  // GGUF-lite: f16 scale per 64 values of a row, then packed nibbles
  // llama.cpp's (ggml's) types, bit-exact with ggml-quants.c's reference quantizers
  BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
  MXFP4,  // (appended: the ids above are kept)
  IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, Q1_0, Q2_0,
  // the codebook ("grid") i-quants
  IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ3_S, IQ2_S, IQ1_M,
  NVFP4,
};

// How a tensor's blocks sit in the file.
enum class Layout : uint8_t {
  Plain,             // values only (float types)
  ValuesThenScales,  // every value of the tensor, then every scale (LEAP v2)
  ScalesThenValues,  // every scale, then every value (GGUF-lite)
  Interleaved,       // block after block, each holding its own scale (ggml's types)
};

// What one block is.
enum class BlockSpan : uint8_t {
  Fixed,      // block_values values
  Row,        // one whole row (per-channel scale)
  Parameter,  // the plan's group size (LEAP v2), over the flattened tensor
};

// A tensor's encoded bytes, the values' and the scales' share of them.
struct EncodedSize {
  int64_t values = 0;
  int64_t scales = 0;
  int64_t total() const { return values + scales; }
};

// The tensor's regions in file order (one for Plain / Interleaved, two otherwise).
constexpr int kMaxRegions = 2;

// region[k]: where region k of the encoded rows goes / comes from, in file order.
using EncodeFn = float (*)(const float* w, int64_t rows, int64_t cols, int64_t block, uint8_t* const* region);
using DecodeFn = void (*)(const uint8_t* const* region, int64_t rows, int64_t cols, int64_t block, float* out);
// encode with llama-quantize's importance weights: qw[cols], one weight per column, the same for
// every row (ggml's quantize_<type>(..., quant_weights)); Fixed-span ggml types only.
using EncodeWeightedFn = float (*)(const float* w, int64_t rows, int64_t cols, const float* qw, uint8_t* const* region);

// ---- one block laid open: the page's block view draws it, a test holds it to ggml's decode ----
// `width` bits from bit `shift` of byte `byte` of the block as shown.
struct BitSlice {
  int byte = 0, shift = 0, width = 0;
};
// An integer stored in a block: its slices concatenated, the first the lowest bits; then read
// as two's complement of the total width (is_signed) or less `offset`.
struct StoredInt {
  BitSlice part[3];
  int n = 0;  // 0: not stored (a scale or min the type has not: reads as 1)
  bool is_signed = false;
  int offset = 0;
};
// Where element e's integers sit: q, and for types with sub-blocks its sub-block's scale and min.
struct ElementBits {
  StoredInt q, sc, m;
  int sub = 0;
};
// A byte range of the block and what it holds.
struct BlockField {
  const char* name = "";
  int offset = 0, bytes = 0;
  const char* role = "";
};
// A block's fields in order (at most 6), a constant like the rest of the anatomy.
struct BlockFields {
  BlockField f[6];
  int n = 0;
  constexpr BlockFields(std::initializer_list<BlockField> l) {
    for (const BlockField& x : l) f[n++] = x;
  }
  constexpr const BlockField* begin() const { return f; }
  constexpr const BlockField* end() const { return f + n; }
  constexpr size_t size() const { return size_t(n); }
  constexpr const BlockField& operator[](size_t i) const { return f[i]; }
};
// How a block stores its d (and dmin).
enum class ScaleFormat : uint8_t {
  F16,       // an IEEE half, 2 bytes
  E8M0Half,  // 1 byte e, read as 2^(e - 128) (ggml's GGML_E8M0_TO_FP32_HALF: MXFP4's levels are doubled)
};
// value = (d * sc) * q + min_sign * (dmin * m), in float, in that order (ggml's dequantize_row_*);
// d and dmin are fields in d_format; sc, m, q are StoredInts (sc and m read 1 when not stored),
// q looked up in q_table where the type has one (MXFP4: q = q_table[the stored nibble]).
struct BlockAnatomy {
  int values, bytes;  // one block as shown; split layouts show its scale bytes, then its value bytes
  BlockFields fields;
  int d_at, dmin_at;  // byte offsets of the scale fields (dmin_at -1: none)
  int min_sign;       // +1: a min added (Q4_1's m), -1: subtracted (K-quants' dmin)
  const char *d_name, *dmin_name;
  int sub_values;     // elements per sub-block (= values: none)
  void (*element)(int e, ElementBits& out);
  const char* formula;  // for people: "(d·sc)·q − dmin·m"
  ScaleFormat d_format = ScaleFormat::F16;
  const int8_t* q_table = nullptr;  // 2^(q's width) entries; null: q is the stored integer
  constexpr int scale_field_bytes() const { return d_format == ScaleFormat::F16 ? 2 : 1; }
};
// A scale field of the block (d at d_at, dmin at dmin_at) as a float, in the anatomy's d_format.
float anatomy_scale(const BlockAnatomy& a, const uint8_t* block, int at);

struct QuantType {
  QType id = QType::F32;
  const char* name = "";        // as files, reports and the page name it
  const char* short_name = "";  // as --scheme and rule files spell it
  const char* label = "";       // for people: "Q4 per group of 64"
  const char* family = "";      // float | int8 | q8 | q4 | q5 | k | fp4 | iq4 | ternary | q1 | q2 | iq1 | iq2 | iq3: the page colours the breakdown by family
  const char* color = "";       // the family's colour in the page's breakdown
  BlockSpan span = BlockSpan::Fixed;
  int block_values = 1;         // Fixed: values per block (ggml's types: from its type traits)
  int value_bits = 32;          // bits per value
  int scale_bytes = 0;          // bytes of scale (and offset) per block (ggml's types: the rest of the block)
  Layout layout = Layout::Plain;
  bool needs_matrix = false;    // 2-D tensors only
  bool quantizes = false;       // rounds to integers (NaN/Inf cannot be encoded)
  int gguf_lite_code = -1;      // dtype code in GGUF-lite descriptors, -1 if GGUF-lite has none
  int ggml_type = -1;           // ggml's type id in GGUF tensor infos, -1 if GGUF has none
  EncodeFn encode = nullptr;    // returns max |w - decode(encode(w))|, +inf for NaN/Inf input
  DecodeFn decode = nullptr;
  // null: ggml's quantizer for the type takes no importance weights (Q8_0, MXFP4, TQ1_0, TQ2_0,
  // Q1_0, Q2_0, the float types). IQ2_XXS, IQ2_XS and IQ1_S need them: ggml asserts them, and
  // llama-quantize refuses those types without an imatrix; their `encode` refuses every tensor
  // (+inf), so that only encode_weighted writes them.
  EncodeWeightedFn encode_weighted = nullptr;
  // ggml cannot quantize it without importance weights (IQ2_XXS, IQ2_XS, IQ1_S: GGML_ASSERT in
  // quantize_<type>, llama-quantize would abort); `encode` refuses (+inf), a plan must not ask it
  bool needs_importance = false;
  const BlockAnatomy* anatomy = nullptr;  // the block view's description (types it can lay open)

  // Values per block for a tensor of `cols` columns (group: the plan's group size).
  int64_t block(int64_t cols, int64_t group) const {
    return span == BlockSpan::Fixed ? block_values : span == BlockSpan::Row ? cols : group;
  }
  // Bytes of `rows` rows of `cols` values (rows * cols a multiple of the block), so a chunk's
  // bytes start at bytes_of(row0, ...) into each region.
  EncodedSize bytes_of(int64_t rows, int64_t cols, int64_t group) const {
    const int64_t n = rows * cols, b = block(cols, group);
    return {n * value_bits / 8, span == BlockSpan::Row ? rows * scale_bytes : b > 0 ? n / b * scale_bytes : 0};
  }
  int regions() const { return layout == Layout::Plain || layout == Layout::Interleaved ? 1 : 2; }
};

const QuantType& quant_type(QType t);
const std::vector<QuantType>& quant_types();
// By name or short name, case-insensitive (f32, F16, q8, Q8_per_channel, ...); null if unknown.
const QuantType* find_quant_type(const std::string& name);
// By ggml type id (GGUF tensor infos); null if the project has no such type.
const QuantType* quant_type_by_ggml_type(int id);
// By GGUF-lite dtype code; null if unknown.
const QuantType* quant_type_by_gguf_lite_code(int code);
inline const char* quant_name(QType t) { return quant_type(t).name; }

// Why type t cannot store a tensor of this shape ("" if it can).
std::string quant_type_refusal(const QuantType& t, const std::vector<int64_t>& shape);

}  // namespace leapconv
