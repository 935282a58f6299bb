// libFuzzer: a README.md through read_model_card (its YAML front matter), then what it read
// through gguf-py's general.* heuristics (set_general_metadata) as a GGUF export does; the first
// input line, when it starts "id:", is the folder's name instead (the model id heuristics); a
// line after it starting "meta:" is a --metadata file's JSON (checked, then applied over both).
#include "fuzz_common.h"

#include "container/gguf_file.h"
#include "formats/gguf/gguf_metadata.h"
#include "source/model_card.h"

using namespace leapconv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  GeneralSources in;
  std::string readme = text;
  if (text.rfind("id:", 0) == 0) {
    const size_t nl = text.find('\n');
    in.folder = text.substr(3, nl == std::string::npos ? std::string::npos : nl - 3);
    readme = nl == std::string::npos ? "" : text.substr(nl + 1);
  }
  if (readme.rfind("meta:", 0) == 0) {
    const size_t nl = readme.find('\n');
    in.override.file = "meta.json";
    in.override.values = nlohmann::json::parse(readme.substr(5, nl == std::string::npos ? std::string::npos : nl - 5), nullptr, false);
    if (in.override.values.is_discarded()) in.override.values = nullptr;
    readme = nl == std::string::npos ? "" : readme.substr(nl + 1);
    try {
      std::vector<std::string> ignored;
      check_metadata_override(in.override, &ignored);
    } catch (const ConvertError&) {
      return 0;  // (refused: never applied)
    }
  }
  const ModelCard card = read_model_card(readme);  // never throws
  in.card = card.front;
  in.total_params = int64_t(size) * 1000 - 50000;  // (both signs: a model and an adapter)
  in.computed_size_label = "1.0K";
  GgufMetadata kv;
  std::vector<std::string> warnings;
  try {
    set_general_metadata(kv, in, &warnings);
  } catch (const ConvertError&) {
  }
  return 0;
}
