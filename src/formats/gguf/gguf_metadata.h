// The general.* metadata llama.cpp's converter writes (gguf-py's gguf/metadata.py: Metadata.load,
// apply_metadata_heuristic, get_model_id_components, set_gguf_meta_model), from what a checkpoint
// folder holds: README.md's model card (license, tags, languages, base models, datasets, the
// converter's own name keys), config.json's `_name_or_path`, the folder's name (the model's name,
// basename, finetune, version and size label, by gguf-py's heuristics) and generation_config.json
// (the recommended sampling, general.sampling.*).
//
// A value the converter would stop at (a name that is not text, an array mixing types, a top_k
// that is not a whole number) is left out with a warning naming the file and key.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "container/gguf_file.h"

namespace leapconv {

// What gguf-py's get_model_id_components makes of a model id ("Qwen/Qwen3-0.6B-Instruct-v2"):
// the name part, the organization, and the name's annotated parts ("" where none).
struct ModelIdParts {
  bool has_name = false, has_org = false;
  std::string name, org, basename, finetune, version, size_label;
};
// total_params: the model's parameters (< 0 for an adapter, whose count is not exact), 0 if unknown.
ModelIdParts model_id_components(const std::string& model_id, int64_t total_params);
// gguf-py's Metadata.id_to_title: '-' as spaces, each all-lowercase word title-cased unless a
// version (v1, v1.2) or starting with a digit.
std::string id_to_title(const std::string& id);

// The converter's --metadata FILE (a JSON object of general.* keys: each key Metadata.load reads
// from it replaces what the folder gave, a null too) and --model-name NAME (general.name, last).
struct MetadataOverride {
  std::string file;                       // the file's name, for messages
  nlohmann::json values;                  // its object; null: no --metadata
  std::optional<std::string> model_name;  // --model-name
  bool empty() const { return values.is_null() && !model_name; }
};
// The keys of `values` as gguf-py would pack them, or a ConvertError naming the file and key (a
// name that is not text, a top_k that is not a whole number: where the converter would stop).
// Keys it does not read are listed in *ignored.
void check_metadata_override(const MetadataOverride& o, std::vector<std::string>* ignored);

struct GeneralSources {
  std::string folder;          // the folder's name (model_path.name)
  nlohmann::json card;         // README.md's front matter (source/model_card.h); null: none
  nlohmann::json config;       // config.json of that folder; null: none
  nlohmann::json generation;   // generation_config.json; null: none
  int64_t total_params = 0;                    // gguf_writer's get_total_parameter_count()[0]
  std::string computed_size_label;             // gguf.size_label of the counts, "" for an adapter
  MetadataOverride override;                   // --metadata, --model-name
};

// Sets general.sampling.*, general.name, ... general.languages in set_gguf_meta_model's order.
void set_general_metadata(GgufMetadata& kv, const GeneralSources& in, std::vector<std::string>* warnings);

}  // namespace leapconv
