// Importance matrices (llama-imatrix's output), read as llama-quantize reads them
// (common/imatrix-loader.cpp and tools/quantize/quantize.cpp's load_imatrix, llama.cpp of the
// node-llama-cpp 3.21.1 bundle), in both formats:
//   - legacy .dat: i32 n_entries, then per entry {i32 len, name[len], i32 ncall, i32 nval,
//     f32 values[nval]} (the values are sum/count * ncall), then optionally i32 chunk count,
//     i32 len, dataset[len];
//   - GGUF: per weight two F32 tensors `<name>.in_sum2` [ne0, n_slices] (sums of squared
//     activations) and `<name>.counts` [n_slices] (tokens seen), keys imatrix.datasets,
//     imatrix.chunk_count, imatrix.chunk_size.
// Each entry's weights come out normalised as llama-quantize normalises them: legacy values /
// ncall (as they are when ncall <= 0); GGUF sums / count per slice (all 1 for a slice never
// seen). A slice is an expert of a stacked MoE weight (n_slices = ne[2]), one for a dense one.
// Everything is validated before any allocation: counts and lengths against the file's size,
// pairs complete, F32 only, sums a whole number of slices, no duplicates, finite weights.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/byte_io.h"

namespace leapconv {

struct ImatrixEntry {
  std::shared_ptr<const std::vector<float>> weights;  // normalised; slices x cols (legacy: one count for all)
  int64_t slices = 1;  // GGUF: its counts (experts); legacy: 1
};

struct Imatrix {
  std::string file;   // the path as the user gave it (llama-quantize writes it into quantize.imatrix.file)
  bool legacy = false;
  std::vector<std::string> datasets;
  int32_t chunk_count = 0;  // 0: not recorded
  int32_t chunk_size = 0;
  std::map<std::string, ImatrixEntry> entries;  // by GGUF tensor name
  const ImatrixEntry* find(const std::string& name) const {
    auto it = entries.find(name);
    return it == entries.end() ? nullptr : &it->second;
  }
};

// The weights for a tensor of this name and shape (Hugging Face order: experts, rows, cols),
// as llama-quantize looks them up: ne[0] * ne[2] values (cols x experts). null with *why set
// when the entry is missing ("") or of another size (the reason).
std::shared_ptr<const std::vector<float>> importance_for(const Imatrix& im, const std::string& name,
                                                         const std::vector<int64_t>& shape, std::string* why);

// llama-quantize's --include-weights / --exclude-weights (prepare_imatrix): keep only the entries
// whose name contains one of `include` (when given), or drop those containing one of `exclude`.
// Left with no entry, llama-quantize goes on without an importance matrix; so does the caller.
void filter_imatrix(Imatrix& im, const std::vector<std::string>& include, const std::vector<std::string>& exclude);

// Reads src (its name in errors); `as_given` is the path as the user typed it. Throws
// ConvertError naming the file and the entry.
Imatrix read_imatrix(ByteSource& src, const std::string& as_given);

}  // namespace leapconv
