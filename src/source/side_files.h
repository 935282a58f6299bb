// The files of a checkpoint folder that are not weights: the tokenizer and generation files a
// format may put into its output (real GGUF carries the vocabulary). Each has a size bound and,
// when it is JSON, is validated when the checkpoint opens; a planner reads them from here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace leapconv {

struct SideFileSpec {
  const char* name;   // the file name in the folder
  bool json;          // validated as a JSON object when read
  int64_t max_bytes;  // larger is refused (a real tokenizer.json is tens of MB at most)
  bool lenient = false;  // not valid JSON: left out with a warning, as llama.cpp's converter ignores it
};
const std::vector<SideFileSpec>& side_file_specs();
const SideFileSpec* find_side_file_spec(const std::string& name);

struct SideFile {
  std::string name;
  std::string bytes;
};

// Throws ConvertError naming the file if `size` is over its bound (checked before reading).
void check_side_file_size(const std::string& name, int64_t size);
// Throws ConvertError naming the file if it is over its bound or not a JSON object (a lenient
// file that is not: false, and the caller leaves it out).
bool validate_side_file(const SideFile& f);

}  // namespace leapconv
