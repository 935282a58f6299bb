// libFuzzer: the tokenizer files GGUF's vocabulary is built from (tokenizer/gguf_vocab.h
// build_gguf_vocab). The first byte picks what the rest is: tokenizer.json, tokenizer.model
// (SentencePiece protobuf), or either of them followed, after the marker kConfigMarker, by
// tokenizer_config.json. The byte's third bit reads the folder as Gemma 4's converter does (its
// own "gemma4" model from tokenizer.json).
#include "fuzz_common.h"

#include "tokenizer/gguf_vocab.h"

using namespace leapconv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0] % 4;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string_view main = rest, config;
  if (mode >= 2) {
    const size_t at = rest.find(fuzz::kConfigMarker);
    if (at != std::string_view::npos) {
      main = rest.substr(0, at);
      config = rest.substr(at + fuzz::kConfigMarker.size());
    }
  }
  VocabFiles f;
  if (mode % 2 == 0) f.tokenizer_json = main;
  else f.tokenizer_model = main;
  if (mode >= 2) f.tokenizer_config_json = config;
  VocabOptions opt;
  if (data[0] & 4) opt.tokenizer_model = "gemma4";
  try {
    const GgufVocab v = build_gguf_vocab(f, opt);
    summarize_vocab(v);
    llama_cpp_adds_bos(v);
  } catch (const ConvertError&) {
  }
  return 0;
}
