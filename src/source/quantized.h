// A quantized checkpoint's weights, read as llama.cpp's converter reads them (conversion/base.py
// dequant_model): config.json's `quantization_config` says the method; a table of methods says
// which tensors are a weight's scales (by name suffix), how many values one scale covers, and
// which tensors the converter drops (activation scales). A scaled weight is decoded as
// dequant_simple decodes it, `weight.float() * scale.float()` in f32, as one more step of its
// recipe (plan/recipe.h Recipe::add_source), so every output and every check takes it.
//
// A weight stored as integer codes packed in 32-bit words (`gptq`; compressed-tensors'
// `pack-quantized`) is a tensor of the checkpoint under the name the converter gives it
// (`<x>.weight`, its shape), read through its codes, scales, zero points and group index with an
// Unpack step (plan/recipe.h).
//
// Read: `fp8` (weight_block_size blocks or per tensor; `*_scale_inv`, Mistral's `qscale_weight`),
// `compressed-tensors` float-/int-/naive-quantized (channel and block strategies) and
// pack-quantized (int groups, zero points or not), `gptq` (2, 4, 8 bits, both checkpoint
// formats), `modelopt` FP8, `mxfp4` (gpt-oss: its family writes the blocks), `bitnet` (packed
// ternary weights, for the families taken here: BitNet's own architecture is not). Refused in one
// line naming the key: what the converter refuses.
//
// NVFP4 (ModelOpt's quant_algo NVFP4 / W4A16_NVFP4, per layer in quantized_layers too, from
// config.json's quantization_config or hf_quant_config.json; compressed-tensors'
// nvfp4-pack-quantized) is not decoded: as llama.cpp's converter (conversion/base.py
// _generate_nvfp4_tensors, _nvfp4_pack), each NVFP4 weight is written as ggml's NVFP4 blocks,
// byte for byte (the E4M3 scale bytes' sign bit cleared, the nibbles reordered), with its
// per-tensor weight_scale_2 and input_scale as F32 `.scale` / `.input_scale` tensors beside it.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <memory>

#include "core/byte_io.h"
#include "source/safetensors.h"

namespace leapconv {

struct ModelConfig;
struct TensorRef;

// How one weight is scaled.
struct WeightScale {
  std::string scale;                       // the tensor holding its scales
  int64_t block_rows = 0, block_cols = 0;  // values per scale, in the weight's rows view [numel / last, last]
  std::vector<int64_t> scale_view;         // the scale's shape as the recipe reads it (a per-row [R] as [R, 1])
  // a stacked weight ([experts, rows, cols]: transformers' FP8 experts): the rows of one matrix,
  // where each has blocks of its own (0: the weight is one matrix)
  int64_t matrix_rows = 0;
  bool from_fp8 = false;                   // the converter's _fp8_dequantized: what --fp8-as-q8 writes as Q8_0
};

// How a weight's integer codes are packed (llama.cpp's conversion/base.py dequant_gptq, dequant_packed).
enum class Packing : uint8_t {
  // GPTQ: qweight [in x bits / 32, out] (codes packed along the input dimension), qzeros
  // [groups, out x bits / 32], scales [groups, out], g_idx [in]: the weight [out, in] is
  // (scales[g_idx] * (q - (zeros[g_idx] + zero_bias))).T. An output row is a column of qweight.
  GptqColumns,
  // compressed-tensors pack-quantized: weight_packed [rows, ceil(cols x bits / 32)] (packed along
  // a row), weight_scale [rows, cols / group], weight_zero_point [ceil(rows x bits / 32), cols /
  // group] (packed along the rows; none: the codes' middle, 2^(bits - 1)).
  GroupRows,
  // NVFP4 (ModelOpt, compressed-tensors' nvfp4-pack-quantized) decoded to floats, for the outputs
  // that do not keep ggml's NVFP4 blocks (LEAP, GGUF-lite): codes U8 [rows, cols / 2] (element 2i
  // in the low nibble), scales F8_E4M3 [rows, cols / 16] read as llama.cpp reads the blocks the
  // converter packs (sign bit cleared: ggml's UE4M3), each value E2M1 x scale, then x scale_2
  // (what llama.cpp multiplies the product by), in f32.
  Nvfp4,
  // BitNet b1.58 (quant_method bitnet, llama.cpp's dequant_bitnet): codes U8 [rows / 4, cols] under
  // the weight's own name, output row q (rows / 4) + p in bits 2q of byte row p, each code - 1
  // (-1, 0, 1) divided by the tensor's one scale, in f32 ((code - 1) / scale: a division, as torch).
  Bitnet,
};

// A weight whose codes are packed (its Unpack step's sources and numbers).
struct PackedWeight {
  Packing packing = Packing::GptqColumns;
  std::string codes, scale, zeros, group_index;  // tensor names ("" for none)
  int bits = 0, zero_bias = 0;
  int64_t group = 0;
  std::vector<int64_t> shape;  // the weight's [rows, cols]
};

// An NVFP4 weight kept as it ships: codes U8 [rows, cols / 2] (two E2M1 values a byte, element 2i
// in the low nibble), scale F8_E4M3 [rows, cols / 16] (one per 16 values); times scale2 (one value).
struct Nvfp4Weight {
  std::string codes, scale;   // tensor names (compressed-tensors: `<x>.weight_packed` for `<x>.weight`)
  std::vector<int64_t> shape;  // the weight's [rows, cols]
  // weight_scale_2 and input_scale as the converter reads them (`.float()`; compressed-tensors'
  // weight_global_scale / input_global_scale: 1 / them, in f32); 1 when the checkpoint has none
  float scale2 = 1.0f, input_scale = 1.0f;
  std::string scale2_name, input_scale_name;  // "" when none
};

// The converter's _write_scale_tensor rule: a per-tensor factor is written unless it is 1 (within 1e-6).
bool nvfp4_factor_written(float v);

struct Quantization {
  std::string method;  // quant_method; "" for a checkpoint that is not quantized
  std::string format;  // compressed-tensors' format
  std::string block;   // "128 x 128", "per tensor", "per row": for people
  std::map<std::string, WeightScale> scales;  // weight name -> how it is scaled
  std::map<std::string, PackedWeight> packed;  // weight name (the converter's) -> its packed codes
  std::map<std::string, Nvfp4Weight> nvfp4;   // weight name (the converter's) -> its NVFP4 blocks
  bool nvfp4_file = false;                    // the converter's _is_nvfp4: general.file_type MOSTLY_NVFP4 (39) for f32/f16/bf16
  std::set<std::string> dropped;              // scales, packed codes and activation scales: not tensors of the model
  bool any() const { return !method.empty(); }
  // "fp8 (blocks of 128 x 128; 42 scaled weights)", "" when not quantized.
  std::string describe() const;
};

// The checkpoint's quantization from its config (null: none) and tensors. Throws ConvertError
// naming the config key or the tensor at fault.
// (shards: to read compressed-tensors' weight_shape tensors and NVFP4's per-tensor factors;
// hf_quant_config: ModelOpt's hf_quant_config.json, when the folder has it.)
Quantization read_quantization(const ModelConfig* config, const std::map<std::string, TensorRef>& tensors,
                               const std::vector<std::unique_ptr<ByteSource>>& shards,
                               const std::string* hf_quant_config = nullptr);

}  // namespace leapconv
