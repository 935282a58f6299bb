#include "source/side_files.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace leapconv {

namespace {
constexpr int64_t MiB = 1 << 20;
const std::vector<SideFileSpec> kSpecs = {
    {"tokenizer.json", true, 256 * MiB},
    {"tokenizer_config.json", true, 64 * MiB},  // chat templates can be long
    {"tokenizer.model", false, 64 * MiB},       // SentencePiece protobuf
    {"generation_config.json", true, 4 * MiB},
    {"special_tokens_map.json", true, 4 * MiB},
};
}  // namespace

const std::vector<SideFileSpec>& side_file_specs() { return kSpecs; }

const SideFileSpec* find_side_file_spec(const std::string& name) {
  for (const SideFileSpec& s : kSpecs)
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

void validate_side_file(const SideFile& f) {
  check_side_file_size(f.name, int64_t(f.bytes.size()));
  if (find_side_file_spec(f.name)->json) {
    const auto j = nlohmann::json::parse(f.bytes, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw ConvertError(f.name, "", "not a valid JSON object");
  }
}

}  // namespace leapconv
