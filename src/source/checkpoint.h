// A checkpoint: its safetensors shards (validated headers, a name -> tensor index) and its
// config. The platform layer finds the files; this module only reads through ByteSources.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/byte_io.h"
#include "source/model_config.h"
#include "source/quantized.h"
#include "source/safetensors.h"
#include "source/side_files.h"

namespace leapconv {

struct CheckpointFiles {
  std::string label;  // folder name or file name, for messages and metadata
  std::vector<std::unique_ptr<ByteSource>> shards;  // *.safetensors, in name order
  std::optional<std::string> config_json;           // contents, when present
  std::optional<std::string> params_json;
  std::optional<std::string> index_json;  // model.safetensors.index.json
  std::vector<SideFile> side_files;        // tokenizer and generation files (side_files.h)
  std::vector<std::string> other_weights;  // weight files of other kinds (pytorch_model.bin, *.gguf), by name
  // A PEFT LoRA adapter's adapter_config.json (then the shards are its adapter_model.safetensors
  // and config_json is its base model's).
  std::optional<std::string> adapter_config_json;
  // An adapter folder's own config.json, where it has one (PEFT writes none): convert_lora_to_gguf.py
  // takes the base's shape from --base, but gguf-py's Metadata reads the adapter folder's
  // config.json for its _name_or_path. checkpoint_files_in sets it; use_base_config keeps it.
  std::optional<std::string> adapter_folder_config_json;
};

// A LoRA adapter's files with its base model's config.json (convert_lora_to_gguf.py's --base): the
// base's shape from `config_json`; the adapter folder's own config.json stays its metadata's.
void use_base_config(CheckpointFiles& adapter, std::string config_json);

// A PEFT LoRA adapter (adapter_config.json), as llama.cpp's convert_lora_to_gguf.py reads it.
struct LoraAdapter {
  double alpha = 0;        // lora_alpha: llama.cpp scales B A by alpha / rank
  int64_t rank = 0;        // r
  std::string base;        // base_model_name_or_path ("" when not given)
  nlohmann::json folder_config;  // the adapter folder's own config.json (null: none), for general.*
};

struct TensorRef {
  int shard = 0;
  TensorInfo info;
};

// What the page says first when a folder has no config.json (the planners that need one).
inline constexpr const char* kNoConfigAdvice =
    "The folder has no config.json, the file that says which model this is and its shape. Put the "
    "repository's config.json (from the Hub, next to the weights) in the folder and load it again.";

class Checkpoint {
 public:
  std::string label;
  std::vector<std::unique_ptr<ByteSource>> shards;
  std::vector<SafetensorsHeader> headers;
  std::map<std::string, TensorRef> tensors;
  std::vector<std::string> order;  // tensor names: shard by shard, in data order
  std::optional<ModelConfig> config;
  // How a quantized checkpoint scales its weights (quantized.h); its scale and activation-scale
  // tensors are in `tensors` but not in `order`: they are read as part of their weights.
  Quantization quant;
  std::optional<LoraAdapter> lora;  // the checkpoint is a LoRA adapter of the model `config` describes
  // --merge-lora: weights with a low-rank update folded in, W + scale x (B A) (their A and B in an
  // adapter shard appended to `shards`, not in `order`).
  struct LowRank {
    TensorRef a, b;  // A [r, in], B [out, r]
    float scale = 1;   // lora_alpha / r
  };
  std::map<std::string, LowRank> merged;
  int64_t source_bytes = 0;  // sum of shard sizes
  std::vector<SideFile> side_files;  // validated; in side_file_specs() order
  std::vector<std::string> warnings;  // e.g. a shard the index does not list, which is ignored
  // What a planner derives from the checkpoint's files alone, kept for the next plan of the same
  // checkpoint (the page replans on every choice; a 128k-token vocabulary takes a second to build
  // and does not change with the type): the planner's key -> its value, of the planner's type.
  // Planning is single-threaded; nothing else touches it.
  mutable std::map<std::string, std::shared_ptr<const void>> derived;

  const SideFile* side_file(const std::string& name) const;

  const TensorRef* find(const std::string& name) const;
  // Every tensor of the shards by dtype (a quantized checkpoint's scales and packed codes too):
  // dtype name -> tensors, values, bytes.
  struct Stored { int64_t tensors = 0, numel = 0, bytes = 0; };
  std::map<std::string, Stored> stored_by_dtype() const;
  // Its values are a weight's: a float dtype, or a quantized checkpoint's scaled, packed or NVFP4
  // weight (int8, I32 words and U8 nibbles too).
  bool holds_weights(const TensorRef& t) const {
    return dtype_is_float(t.info.dtype) || quant.scales.count(t.info.name) > 0 || quant.packed.count(t.info.name) > 0 ||
           quant.nvfp4.count(t.info.name) > 0;
  }
  const std::string& shard_name(int shard) const { return shards[size_t(shard)]->name(); }
  // The shards, for reading (a tensor's values: plan/recipe.h's realize_rows).
  std::vector<ByteSource*> sources() const;
};

// A folder of checkpoint files, wherever it is: a directory here (platform/posix), or a model on
// the Hugging Face Hub (the CLIs' hf://owner/name, platform/posix/hub_folder.h).
class Folder {
 public:
  virtual ~Folder() = default;
  virtual std::vector<std::string> names() const = 0;  // the files in it, any order
  // Whether `name` is a file in it; something else under that name (a FIFO, a folder) throws
  // rather than being silently not read.
  virtual bool has(const std::string& name) const = 0;
  virtual int64_t size(const std::string& name) const = 0;
  virtual std::string read(const std::string& name) const = 0;  // whole: small files only
  virtual std::unique_ptr<ByteSource> open(const std::string& name) const = 0;
  virtual std::string path(const std::string& name) const = 0;  // how messages name it
};

// The checkpoint in `folder`: its *.safetensors in name order (or only `shard`), config.json or
// params.json, a PEFT adapter's adapter_config.json, the shards' index (not with `shard`) and the
// side files, each bounded before it is read; weight files of other kinds by name.
CheckpointFiles checkpoint_files_in(const Folder& folder, std::string label, const std::string& shard = "");

// The names of the small files checkpoint_files_in reads whole (configs, index, side files).
std::vector<std::string> checkpoint_small_files();

// Validates every shard header, checks the index against the shards, parses the config
// (config.json preferred, params.json otherwise). Throws ConvertError. With an index, a
// .safetensors file it does not name is left out (as Hugging Face's loader leaves it out: a
// consolidated.safetensors beside the shards), with a warning.
Checkpoint open_checkpoint(CheckpointFiles files);

// A PEFT adapter tensor's base weight: "base_model.model.<x>.lora_A.weight" -> "<x>.weight" (*is_a
// true; lora_B: false); "" for a name that is neither.
std::string lora_base_name(const std::string& name, bool* is_a);

// Folds a LoRA adapter (opened with open_checkpoint: ck.lora set) into the base checkpoint: each
// adapted weight of `base` reads its A and B too (Recipe::add_source). Throws ConvertError naming
// the adapter tensor that adapts nothing of the base, or whose shapes do not fit.
void merge_lora(Checkpoint& base, Checkpoint&& adapter);

}  // namespace leapconv
