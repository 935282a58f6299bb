#include "source/side_files.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace leapconv {

namespace {
constexpr int64_t MiB = 1 << 20;
}  // namespace

const std::vector<SideFileSpec>& side_file_specs() {
  // A function-local table: other files' constants may read it during static initialisation.
  static const std::vector<SideFileSpec> specs = {
      {"tokenizer.json", true, 192 * MiB},          // Gemma 3's is 33 MB
      {"tokenizer_config.json", true, 32 * MiB},    // chat templates can be long (Gemma 3: 1.2 MB)
      {"tokenizer.model", false, 128 * MiB},        // SentencePiece protobuf (Gemma 3: 4.5 MB)
      // (gguf-py's Metadata: "not all models have valid generation_config.json")
      {"generation_config.json", true, 32 * MiB, true},
      {"special_tokens_map.json", true, 4 * MiB},
      {"chat_template.jinja", false, 32 * MiB},     // newer repos keep the chat template here
      {"hf_quant_config.json", true, 4 * MiB},      // ModelOpt's quantization (NVFP4): source/quantized.h
      {"README.md", false, 16 * MiB},               // the model card: its front matter (source/model_card.h)
  };
  return specs;
}

const SideFileSpec* find_side_file_spec(const std::string& name) {
  for (const SideFileSpec& s : side_file_specs())
    if (name == s.name) return &s;
  return nullptr;
}

void check_side_file_size(const std::string& name, int64_t size) {
  const SideFileSpec* spec = find_side_file_spec(name);
  if (!spec) throw ConvertError(name, "", "not a file the converter reads");
  if (size > spec->max_bytes)
    throw ConvertError(name, "", "is " + std::to_string(size) + " bytes, more than the " +
                                     std::to_string(spec->max_bytes / MiB) + " MiB such a file can hold");
}

bool validate_side_file(const SideFile& f) {
  check_side_file_size(f.name, int64_t(f.bytes.size()));
  const SideFileSpec& spec = *find_side_file_spec(f.name);
  if (spec.json) {
    // Validated without building the document: a tokenizer.json of tens of MB would take ten
    // times that as a DOM, and the planner that reads it parses it once more anyway.
    const size_t first = f.bytes.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || f.bytes[first] != '{' || !nlohmann::json::accept(f.bytes)) {
      if (spec.lenient) return false;
      throw ConvertError(f.name, "", "not a valid JSON object");
    }
  }
  return true;
}

}  // namespace leapconv
