// A Hugging Face checkpoint -> the tensors and architecture keys of a real GGUF file, as
// llama.cpp's convert_hf_to_gguf.py writes them: GGUF tensor names from the architecture table,
// the shape checked against the config, Llama's q/k permutation, tensors computed from the config
// (rope_freqs for Llama 3.1's rope scaling) and the `general.*` / `<arch>.*` keys. Types and the
// tokenizer are chosen by the planner (gguf_format.h). Anything llama.cpp would run differently
// from Hugging Face is a ConvertError naming the file and the key or tensor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "arch/arch_table.h"
#include "arch/gguf_keys.h"
#include "container/gguf_file.h"
#include "plan/recipe.h"
#include "source/checkpoint.h"

namespace leapconv {
struct MetadataOverride;
}

namespace leapconv {

struct GgufWeight {
  const TensorRole* role = nullptr;  // null for a computed tensor
  int64_t layer = 0;
  std::string name;                  // GGUF name: blk.3.attn_q.weight
  std::string imatrix_name;          // the name looked up in an importance matrix, when not `name`
                                     // (--prune-layers renumbers blocks; the imatrix has the model's)
  std::vector<int64_t> shape;        // as written, Hugging Face order (rows first)
  Recipe recipe;                     // its values: the source tensor(s) and steps, or computed from the config
  bool keep_f32 = false;             // F32 whatever the type asked (converter_keeps_f32)
};

struct GgufModel {
  const ArchFamily* family = nullptr;
  std::string name;    // general.name
  GgufMetadata kv;     // general.architecture, general.type, general.name and the <arch>.* keys
  std::vector<GgufWeight> weights;  // in file order: computed tensors first, then the converter's (shard, name) order
  int64_t vocab_rows = 0;           // rows of the embedding matrix
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int64_t n_experts = 0;            // a mixture's experts per layer (0: dense)
  // general.file_type the converter writes for --outtype f32 / f16 / bf16 where some tensors keep
  // a quantized type as they ship (gpt-oss's MXFP4 experts: 38, MOSTLY_MXFP4_MOE); -1: the type's own
  int64_t float_file_type = -1;
  bool tied = false;                // the classifier is the embeddings (no output.weight)
  // The type of the converter's --outtype auto file, which llama-quantize reads: BF16 or F16 as
  // the first 2-D BF16 / F16 tensor of the checkpoint, in (shard, name) order, else F16.
  DType auto_dtype = DType::F16;
  std::vector<std::string> warnings;
  std::vector<std::string> notes;   // what the file holds that a user should know (longrope, left-out parts)
  int64_t left_out = 0;             // source tensors the converter leaves out (a vision tower)
};

// Validates the checkpoint against its config and the family's roles; throws ConvertError.
// metadata: the converter's --metadata / --model-name (null: none).
GgufModel map_checkpoint_to_gguf(const Checkpoint& ck, const MetadataOverride* metadata = nullptr);

// A PEFT LoRA adapter (ck.lora: adapter_model.safetensors, the base's config.json) -> a GGUF
// LoRA adapter as llama.cpp's convert_lora_to_gguf.py writes it: for each adapted weight, in the
// adapter's name order, <gguf name>.lora_a (A [r, in]) and .lora_b (B [out, r], with the base
// weight's transform: Llama's q/k permutation acts on B's rows); general.type adapter,
// adapter.type lora, adapter.lora.alpha; no tokenizer.
GgufModel map_lora_to_gguf(const Checkpoint& ck);

// The families GGUF export takes, for messages: "LlamaForCausalLM, MistralForCausalLM, ...".
std::string gguf_architecture_list();

}  // namespace leapconv
