// llama.cpp's tokenizer over the vocabulary a GGUF file holds (src/llama-vocab.cpp of the
// llama.cpp bundled with node-llama-cpp 3.21.1: the special-token partition, llm_tokenizer_spm,
// llm_tokenizer_bpe), so that the page can cut a prompt where llama.cpp's tokens end: wllama
// takes text only, and the side-by-side view compares two files at each of the prompt's tokens.
//
// The BPE pre-tokenizer is a list of regular expressions with Unicode classes (\p{L}, \p{N}).
// The core holds them (one row per pre-tokenizer, below in the .cpp) as ECMAScript patterns and
// the caller runs them: the page with JavaScript's RegExp (flag u), which has those classes, where
// C++'s <regex> has none. `\s` is spelled out as Unicode's White_Space, as llama.cpp's tables have it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "container/gguf_file.h"

namespace leapconv {

// One token and the bytes of the text it came from: [begin, end) in the UTF-8 text. A BOS or EOS
// added around the text has an empty span (at 0, or at the end).
struct TokenSpan {
  int32_t id = 0;
  int64_t begin = 0, end = 0;
};

// Splits `text` by one pattern, keeping what lies between matches (llama.cpp's "isolated"
// splitting): the pieces, in order, whose concatenation is `text`.
using PatternSplit = std::function<std::vector<std::string>(const std::string& text, const std::string& pattern)>;

class GgufTokenizer {
 public:
  // From a GGUF's tokenizer.ggml.* keys; ConvertError naming the file and the key when the
  // vocabulary is missing, malformed, or of a kind (or pre-tokenizer) this does not implement.
  static GgufTokenizer from_metadata(const GgufMetadata& kv, const std::string& file);

  const std::string& model() const { return model_; }  // tokenizer.ggml.model: "llama", "gpt2" or "gemma4"
  const std::string& pre() const { return pre_; }      // tokenizer.ggml.pre ("default" when absent)
  bool add_bos() const { return add_bos_; }
  size_t n_tokens() const { return tokens_.size(); }
  const std::string& token_text(int32_t id) const { return tokens_.at(size_t(id)); }
  // What llama.cpp writes out for the token (token_to_piece with special tokens shown): bytes.
  std::string piece(int32_t id) const;
  // The pre-tokenizer's patterns (ECMAScript, flag u), applied in order; empty for SentencePiece.
  const std::vector<std::string>& split_patterns() const { return patterns_; }

  // llama.cpp's llama_tokenize(text, add_special, parse_special). `split` runs split_patterns()
  // (unused for SentencePiece); pieces that do not add up to their text are an error.
  std::vector<TokenSpan> tokenize(const std::string& text, bool add_special, bool parse_special,
                                  const PatternSplit& split) const;

 private:
  struct Fragment {  // a stretch of the text, or a special token matched in it
    int32_t token = -1;
    int64_t begin = 0, end = 0;
  };
  std::vector<Fragment> partition(const std::string& text, bool parse_special) const;
  void spm(const std::string& text, int64_t begin, int64_t end, bool space_prefix, std::vector<TokenSpan>& out) const;
  void bpe(const std::string& text, int64_t begin, int64_t end, const PatternSplit& split, std::vector<TokenSpan>& out) const;
  // word: the text's bytes from src[0] on (src: the text offset of each byte; end: where the last ends)
  void bpe_word(const std::string& word, const std::vector<int64_t>& src, int64_t end, std::vector<TokenSpan>& out) const;
  int32_t find(const std::string& text) const;
  int32_t byte_token(uint8_t b) const;

  std::string file_, model_, pre_;
  bool spm_ = false, escaped_raw_ = false, add_bos_ = false, add_eos_ = false, add_space_prefix_ = false, ignore_merges_ = false;
  int32_t bos_ = -1, eos_ = -1;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<uint16_t> attrs_;  // llama_token_attr bits: the ones this uses
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, int32_t> ranks_;  // BPE merges: left + '\0' + right -> rank
  std::vector<int32_t> specials_;                   // partitioned first, longest text first
  std::vector<std::string> patterns_;
};

}  // namespace leapconv
