// The overlap check every reader runs on its tensors' byte ranges (safetensors, GGUF-lite,
// GGUF): sorted by start, a range overlaps an earlier one iff it starts before the furthest
// end seen so far. Empty ranges occupy nothing and are skipped, but cannot hide an overlap.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace leapconv {

struct ByteSpan {
  int64_t begin = 0, end = 0;
  const std::string* name = nullptr;
};

inline void check_no_overlap(const std::string& file, std::vector<ByteSpan> spans) {
  std::sort(spans.begin(), spans.end(), [](const ByteSpan& a, const ByteSpan& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const ByteSpan* furthest = nullptr;
  for (const ByteSpan& s : spans) {
    if (s.end == s.begin) continue;
    if (furthest && s.begin < furthest->end)
      throw ConvertError(file, *s.name, "data overlaps tensor '" + *furthest->name + "'");
    if (!furthest || s.end > furthest->end) furthest = &s;
  }
}

}  // namespace leapconv
