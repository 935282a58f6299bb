// The tokenizer files of a Hugging Face checkpoint folder -> the tokenizer metadata of a real GGUF
// file, as llama.cpp's converter (convert_hf_to_gguf.py with gguf-py's SpecialVocab) writes it, and
// where the project must choose (the BPE `pre` name, SentencePiece scores without tokenizer.model),
// as makes llama.cpp tokenize like the Hugging Face tokenizer.
//
// Two kinds of vocabulary:
//  - byte-level BPE (GPT-2, Llama 3, Qwen2/3, SmolLM): model "gpt2", `pre` from the tokenizer.json
//    pre_tokenizer (the pre-tokenizer table: tokenizer/pre_tokenizers.h), merges;
//  - SentencePiece-style (Llama 2, Mistral, TinyLlama, Gemma): model "llama", pre "default", scores
//    from tokenizer.model, else from tokenizer.json (Unigram scores, or BPE scores derived from the
//    merge ranks);
//  - a family's own model (Gemma 4: "gemma4"): tokenizer.json's byte-fallback BPE with its merges,
//    as gguf-py's LlamaHfVocab reads it, no pre.
// Every input is untrusted: sizes, counts, types, ids and uniqueness are checked, and a problem is
// one ConvertError line naming the file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace leapconv {

// llama.cpp's llama_token_type (= gguf-py's TokenType = SentencePiece's piece types).
enum VocabTokenType : int32_t {
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

enum class VocabKind {
  None,             // no vocabulary (only with VocabOptions::allow_no_vocab)
  ByteLevelBpe,     // model "gpt2"
  SentencePiece,    // model "llama"
  ByteFallbackBpe   // a family's own model ("gemma4"): SentencePiece-style BPE with merges
};

// The folder's files, each absent (nullopt) or its full text / bytes. The views must stay valid
// for the call only.
struct VocabFiles {
  std::optional<std::string_view> tokenizer_json;
  std::optional<std::string_view> tokenizer_config_json;
  std::optional<std::string_view> config_json;
  std::optional<std::string_view> generation_config_json;
  std::optional<std::string_view> chat_template_jinja;  // chat_template.jinja (newer HF repos)
  std::optional<std::string_view> tokenizer_model;      // SentencePiece ModelProto bytes
  int64_t vocab_size = 0;  // config.json's vocab_size (rows of the embedding); 0 = not stated
};

// Where a family's converter module (its set_vocab) writes tokenizer.ggml.add_space_prefix:
//  - Derived: nowhere; the project writes it (among the flags) only for a SentencePiece
//    vocabulary that does not prepend a space, where llama.cpp's default (true) would;
//  - TokenizerConfigFirst: LlamaModel (Llama, SmolLM3, Granite) writes tokenizer_config.json's
//    add_prefix_space, when it says, before every other tokenizer key;
//  - FalseLast: Gemma's modules write false after every other tokenizer key.
enum class SpacePrefixKey : uint8_t { Derived, TokenizerConfigFirst, FalseLast };

// A special token a family's converter module sets itself (SpecialVocab._set_special_token, which
// never overwrites one the files name): by id, or by the text of an added token.
struct DefaultSpecial {
  const char* type;           // "bos", "eos", "unk", "eot", ...
  int64_t id = -1;            // GemmaModel: eot 107
  const char* text = nullptr;  // Glm4Model: eot "<|user|>"
};

struct VocabOptions {
  std::string pre;              // explicit tokenizer.ggml.pre (--tokenizer-pre NAME); "" = derive
  bool allow_no_vocab = false;  // no tokenizer files: a vocabulary-less result instead of an error
  SpacePrefixKey space_prefix = SpacePrefixKey::Derived;  // the family's (ArchFamily::space_prefix)
  std::vector<DefaultSpecial> default_specials;  // the family's (ArchFamily::default_specials)
  std::string tokenizer_model;  // the family's own tokenizer.ggml.model (ArchFamily::tokenizer_model), "" = derive
  bool sentencepiece_only = false;  // from tokenizer.model only (ArchFamily::sentencepiece_only)
};

// What goes into the GGUF file. Each field names its key and GGUF value type; an empty vector /
// nullopt means the key is not written.
struct GgufVocab {
  VocabKind kind = VocabKind::None;
  std::string source;  // the file the tokens came from: "tokenizer.json", "tokenizer.model" or ""

  std::string model;  // tokenizer.ggml.model       STRING  "gpt2" | "llama" | "none"
  std::string pre;    // tokenizer.ggml.pre         STRING  (not written when empty, i.e. kind None)
  std::vector<std::string> tokens;  // tokenizer.ggml.tokens      ARRAY of STRING, id order
  std::vector<int32_t> token_type;  // tokenizer.ggml.token_type  ARRAY of INT32 (VocabTokenType)
  std::vector<float> scores;        // tokenizer.ggml.scores      ARRAY of FLOAT32 (llama only)
  std::vector<std::string> merges;  // tokenizer.ggml.merges      ARRAY of STRING "a b" (gpt2 only)

  // Special token ids, UINT32 each (in the order the converter writes them: bos eos unk sep pad
  // mask eot eom).
  std::optional<uint32_t> bos_token_id;        // tokenizer.ggml.bos_token_id
  std::optional<uint32_t> eos_token_id;        // tokenizer.ggml.eos_token_id
  std::optional<uint32_t> unknown_token_id;    // tokenizer.ggml.unknown_token_id
  std::optional<uint32_t> seperator_token_id;  // tokenizer.ggml.seperator_token_id (sic)
  std::optional<uint32_t> padding_token_id;    // tokenizer.ggml.padding_token_id
  std::optional<uint32_t> mask_token_id;       // tokenizer.ggml.mask_token_id
  std::optional<uint32_t> eot_token_id;        // tokenizer.ggml.eot_token_id
  std::optional<uint32_t> eom_token_id;        // tokenizer.ggml.eom_token_id

  std::optional<bool> add_bos_token;     // tokenizer.ggml.add_bos_token     BOOL (among the flags, or last)
  std::optional<bool> add_eos_token;     // tokenizer.ggml.add_eos_token     BOOL
  std::optional<bool> add_sep_token;     // tokenizer.ggml.add_sep_token     BOOL
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix  BOOL
  enum class Place : uint8_t { Flags, First, Last } add_space_prefix_place = Place::Flags;  // among the keys
  Place add_bos_token_place = Place::Flags;
  // The order SpecialVocab sets the three flags in (its add_special_token dict: the post-processor's
  // first, then tokenizer_config's): "bos", "eos", "sep"; the writer follows it.
  std::vector<std::string> add_token_order;

  std::optional<std::string> chat_template;  // tokenizer.chat_template  STRING
  struct NamedTemplate {
    std::string name, text;
  };
  // tokenizer.chat_template.<name> STRING each, and tokenizer.chat_templates ARRAY of STRING
  // (their names), from a tokenizer_config chat_template given as a list of {name, template}.
  std::vector<NamedTemplate> named_chat_templates;

  std::vector<std::string> warnings;  // things the user should know; none of them is an error
};

// Reads the files. Throws ConvertError naming the file on anything malformed, out of range or not
// supported, and when there is no tokenizer file at all (unless opt.allow_no_vocab).
GgufVocab build_gguf_vocab(const VocabFiles& files, const VocabOptions& opt = {});

// What llama.cpp will do with add_bos for this vocabulary: the written key, else its default for
// the model / pre name (SentencePiece: true; BPE: true for the Llama 3 family, tekken, chameleon).
bool llama_cpp_adds_bos(const GgufVocab& v);

// For the page and the CLI.
struct VocabSummary {
  std::string kind;   // "byte-level BPE", "SentencePiece", "none"
  std::string model, pre, source;
  size_t n_tokens = 0, n_merges = 0;
  struct Special {
    std::string name;  // "bos", "eos", "unk", "sep", "pad", "mask", "eot", "eom"
    uint32_t id;
    std::string text;
  };
  std::vector<Special> specials;
  bool has_chat_template = false;
  bool adds_bos = false;  // what llama.cpp will do
};
VocabSummary summarize_vocab(const GgufVocab& v);
std::string vocab_summary_line(const GgufVocab& v);  // one line: kind, size, specials, template

}  // namespace leapconv
