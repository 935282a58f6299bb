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
  GgufMetadata kv;                       // the `<arch>.*` keys are appended to what is there
  std::vector<ComputedTensor> computed;  // written before the checkpoint's tensors
  std::vector<std::string> warnings;
};
using GgufKeysFn = void (*)(const ModelConfig& c, const ArchDims& d, GgufKeys& k);

void llama_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void qwen2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void qwen3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void phi3_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void gemma2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);
void gpt2_keys(const ModelConfig& c, const ArchDims& d, GgufKeys& k);

// Llama 3.1's rope_freqs from config.json's rope_scaling {rope_type: llama3, ...}: one factor per
// rotary pair, in float32 as convert_hf_to_gguf.py computes them.
std::vector<float> llama3_rope_factors(double theta, int64_t head_dim, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_context);

}  // namespace leapconv
