// The pre-tokenizer table: one row per branch of llama.cpp's pre-tokenizer choice
// (llama_vocab::impl::load in src/llama-vocab.cpp of node-llama-cpp 3.21.1's llama.cpp): the
// names tokenizer.ggml.pre takes for it, the patterns llm_tokenizer_bpe runs, its flags, and the
// Hugging Face pre-tokenizers (tokenizer.json) the vocabulary writer recognises as it. The writer
// (gguf_vocab) picks a name from here and the tokenizer (gguf_tokenizer) runs the row's
// patterns, so every name the writer can write is one the tokenizer runs.
#pragma once
#include <string>
#include <vector>

namespace leapconv {

// A tokenizer.json pre_tokenizer that selects a name: its canonical signature (gguf_vocab.cpp's
// pre_signature: "Split(Regex,Isolated,<regex>)", "ByteLevel", "Digits(individual)", ...), and
// what tokenizer.json's model.ignore_merges and tokenizer_config's clean_up_tokenization_spaces
// must be (-1: either; an absent value is false).
struct HfPreTokenizer {
  const char* name;  // the llama.cpp name written for it
  std::vector<std::string> signature;
  int ignore_merges = -1;
  int clean_spaces = -1;
};

struct PreTokenizer {
  std::vector<const char*> names;     // llama.cpp's names for this branch, the first its own
  // The regular expressions llama.cpp runs, in order, as its source spells them (its adapted
  // forms; ECMAScript-compatible once \s is spelled out: gguf_tokenizer.cpp). Empty: a split this
  // project does not run (a custom C++ splitter in llama.cpp's unicode.cpp, or raw-UTF-8 BPE).
  std::vector<const char*> patterns;
  bool ignore_merges = false;         // a word that is a token is taken whole
  bool add_bos = false;               // llama.cpp's add_bos when the file does not say
  // SentencePiece-style BPE (Gemma 4): spaces written as U+2581 before the split (llama.cpp's
  // escape_whitespaces), words merged as raw UTF-8 with <0xXX> byte tokens (byte_encode false)
  bool escaped_raw_utf8 = false;
  std::vector<HfPreTokenizer> from_hf;  // what the writer recognises as this branch
};

// Every branch, in llama.cpp's order ("default" first).
const std::vector<PreTokenizer>& pre_tokenizers();
// The row of a tokenizer.ggml.pre name; null when llama.cpp knows no such name.
const PreTokenizer* find_pre_tokenizer(const std::string& name);
// Every name llama.cpp accepts, in its order.
std::vector<std::string> pre_tokenizer_names();
// The name the writer gives a tokenizer.json pre-tokenizer; null when none matches.
const HfPreTokenizer* recognise_pre_tokenizer(const std::vector<std::string>& signature, bool ignore_merges,
                                              bool clean_spaces);

}  // namespace leapconv
