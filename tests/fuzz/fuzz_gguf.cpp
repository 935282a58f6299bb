// libFuzzer: a GGUF file through the real GGUF reader (gguf_file.h read_gguf_file, with and
// without its summary limits) and the --inspect path, then every tensor up to 1 MiB decoded, and
// its vocabulary (when it holds one the tokenizer takes) tokenizing a few texts and the input's
// last bytes (any bytes: the page's prompt is text, a hostile vocabulary is not), and writing
// tokens out as pieces. An input holding kPartMarker is the parts of a split file, read together
// (inspect_files: their split keys checked, every tensor from its part).
#include "fuzz_common.h"

#include "container/gguf_file.h"
#include "tokenizer/gguf_tokenizer.h"

using namespace leapconv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() >= 4) std::memcpy(bytes.data(), "GGUF", 4);
  MemorySource src("fuzz.gguf", bytes);
  try {
    read_gguf_file(src);
  } catch (const ConvertError&) {
  }
  try {
    GgufReadOptions ro;
    ro.require_trailing_padding = false;
    const GgufFile f = read_gguf_file(src, ro);
    const GgufTokenizer t = GgufTokenizer::from_metadata(f.kv, "fuzz.gguf");
    // words: split at spaces (the real patterns need a Unicode regex engine)
    const PatternSplit split = [](const std::string& text, const std::string&) {
      std::vector<std::string> out;
      size_t at = 0;
      for (size_t i = 1; i <= text.size(); ++i)
        if (i == text.size() || text[i] == ' ') { out.push_back(text.substr(at, i - at)); at = i; }
      return out;
    };
    const std::string tail(reinterpret_cast<const char*>(data) + (size > 64 ? size - 64 : 0), size > 64 ? 64 : size);
    for (const std::string& text : {std::string("Hello world, <s> 42 caf\xc3\xa9"), std::string(" "), std::string(), tail})
      for (bool special : {true, false})
        for (const TokenSpan& s : t.tokenize(text, true, special, split)) t.piece(s.id);
    for (size_t id = 0; id < t.n_tokens() && id < 4096; ++id) t.piece(int32_t(id));
  } catch (const ConvertError&) {
  }
  // the parts of a split file, when the input says where each begins
  std::vector<std::unique_ptr<MemorySource>> parts;
  const std::string text(reinterpret_cast<const char*>(data), size), marker = fuzz::kPartMarker;
  for (size_t at = 0, next; parts.size() < 8; at = next + marker.size()) {
    next = text.find(marker, at);
    if (next == std::string::npos && parts.empty()) break;
    std::vector<uint8_t> part(data + at, data + (next == std::string::npos ? size : next));
    if (part.size() >= 4) std::memcpy(part.data(), "GGUF", 4);
    parts.push_back(std::make_unique<MemorySource>("fuzz-0000" + std::to_string(parts.size() + 1) + "-of-00008.gguf",
                                                   std::move(part)));
    if (next == std::string::npos) break;
  }
  if (!parts.empty()) {
    try {
      std::vector<ByteSource*> sources;
      for (auto& p : parts) sources.push_back(p.get());
      const InspectedFile info = inspect_files(sources);
      int64_t budget = 1 << 20;
      for (const PlanItem& it : info.items) {
        if (it.size.total() > budget) continue;
        budget -= it.size.total();
        read_tensor_f32(*sources.at(size_t(it.file)), it);
      }
    } catch (const ConvertError&) {
    }
  }
  try {
    GgufReadOptions ro;
    ro.max_array_elements = 16;
    ro.require_trailing_padding = false;
    read_gguf_file(src, ro);
    const InspectedFile info = inspect_file(src);
    int64_t budget = 1 << 20;
    for (const PlanItem& it : info.items) {
      if (it.size.total() > budget) continue;
      budget -= it.size.total();
      read_tensor_f32(src, it);
    }
  } catch (const ConvertError&) {
  }
  return 0;
}
