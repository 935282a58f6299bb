// A model card's metadata: the YAML front matter of a checkpoint's README.md, read as llama.cpp's
// converter reads it (gguf-py's Metadata.load_model_card): the lines between a first line "---"
// and the next line "---", "- no" lines quoted (its fix for YAML 1.1's "no" = false), tabs as
// two spaces, then PyYAML's safe_load; anything but a mapping counts as no metadata.
//
// The YAML read here is the subset model cards are written in: block mappings and sequences
// (compact "- key: value" items too), flow [..] and {..}, plain, single- and double-quoted
// scalars (folded over lines as YAML folds them), literal and folded block scalars (| and >, with
// their chomping and indentation indicators), comments; plain scalars take YAML 1.1's implicit
// types as PyYAML resolves them (null, booleans, integers, floats; the rest is text). Anchors,
// aliases, tags, complex keys and several documents are not read: then the card's metadata is
// empty and `warning` says which line (where PyYAML would read it, or fail the conversion).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace leapconv {

struct ModelCard {
  nlohmann::json front = nlohmann::json::object();  // the front matter's mapping ({} when none)
  std::string warning;  // "line 7: anchors, ... are not read" (README.md's line): why a front matter was not read ("" if it was, or there is none)
};

// Never throws for any bytes: what is not read is said in `warning`.
ModelCard read_model_card(const std::string& readme);

}  // namespace leapconv
