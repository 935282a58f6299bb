// Each family's GGUF keys, as its module of llama.cpp's converter writes them
// (set_gguf_parameters: the `<arch>.*` keys llama.cpp's loader reads, in the converter's order),
// and the tensors it computes from the config (generate_extra_tensors: Llama 3.1's rope_freqs).
// A family's row in the architecture table names its writer; a config llama.cpp would run
// differently from Hugging Face is an UnsupportedError naming the key.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "container/gguf_file.h"

namespace leapconv {

struct ModelConfig;
struct ArchDims;
struct ArchFamily;

// A tensor computed from the config: its values.
struct ComputedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// What a family's key writer is given (family, head_dim) and fills.
struct GgufKeys {
  const ArchFamily* family = nullptr;
  int64_t head_dim = 0;
  GgufMetadata kv;                       // the `<arch>.*` keys, in the converter's order
  // keys the converter writes while it prepares the tensors (generate_extra_tensors), so right
  // after general.architecture: Phi-3's rope.scaling.attn_factor
  GgufMetadata after_architecture;
  std::vector<ComputedTensor> computed;  // written before the checkpoint's tensors
  std::vector<std::string> warnings;
  std::vector<std::string> notes;        // what the file holds that a user should know (one line each)
};
using GgufKeysFn = void (*)(const ModelConfig& c, const ArchDims& d, GgufKeys& k);

// general.file_type's place among a family's keys: each converter module writes it at its own
// point of set_gguf_parameters (add_file_type); a writer puts this placeholder there and the
// planner assigns the value in place (GgufMetadata::assign), or appends it when there is none.
void file_type_slot(GgufKeys& k);

void llama_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void qwen2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void qwen3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void phi3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void gemma2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void gpt2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void gemma_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void gemma3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void smollm3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void granite_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void olmo2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void glm4_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void gemma4_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void qwen2moe_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void qwen3moe_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void olmoe_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void gpt_oss_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void bitnet_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);

// The sizes a family's config gives beyond the common ones (ArchDims::layers, ple): Gemma 4's.
using ArchDimsFn = void (*)(const ModelConfig& c, ArchDims& d);
void gemma4_dims(const ModelConfig& c, ArchDims& d);

// Llama 3.1's rope_freqs from config.json's rope_scaling {rope_type: llama3, ...}: one factor per
// rotary pair, in float32 as convert_hf_to_gguf.py computes them.
std::vector<float> llama3_rope_factors(double theta, int64_t head_dim, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_context);

}  // namespace leapconv
