// The core's llama.cpp tokenizer (src/tokenizer/gguf_tokenizer.*) on small hand-built
// vocabularies, each case worked out by hand from llama.cpp's algorithm: SentencePiece merges by
// score, byte fallback, the space prefix, special tokens cut out first (and not, without
// parse_special), byte-level BPE by merge rank, ignore_merges, the spans, and the errors. The
// real vocabularies are held to llama.cpp itself in tests/node/gguf_tokenizer.test.mjs.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/gguf_tokenizer.h"

using namespace leapconv;

namespace {

const std::string kSp = "\xe2\x96\x81";  // U+2581, SentencePiece's space

std::vector<TokenSpan> run(const GgufTokenizer& t, const std::string& text, bool parse_special = true) {
  // BPE words: the whole text as one piece (the real patterns need a Unicode regex engine)
  return t.tokenize(text, true, parse_special, [](const std::string& s, const std::string&) { return std::vector<std::string>{s}; });
}
std::vector<int32_t> ids(const std::vector<TokenSpan>& v) {
  std::vector<int32_t> out;
  for (const TokenSpan& s : v) out.push_back(s.id);
  return out;
}

// 0 <unk>, 1 <s>, 2 </s>, 3 <0x63> ('c'), 4 ▁, 5 a, 6 b, 7 ▁a, 8 ab, 9 ▁ab
GgufMetadata spm_vocab() {
  GgufMetadata kv;
  kv.set_string("tokenizer.ggml.model", "llama");
  kv.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0x63>", kSp, "a", "b", kSp + "a", "ab", kSp + "ab"});
  kv.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, 0, -1, -2, -2, -3, -1.5f, -4});
  kv.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 6, 1, 1, 1, 1, 1, 1});
  kv.set_u32("tokenizer.ggml.bos_token_id", 1);
  kv.set_u32("tokenizer.ggml.eos_token_id", 2);
  return kv;
}

TEST(GgufTokenizer, SentencePieceMergesTheBestScoringPairFirst) {
  const GgufTokenizer t = GgufTokenizer::from_metadata(spm_vocab(), "v.gguf");
  EXPECT_TRUE(t.split_patterns().empty());
  // "▁ab": pairs ▁a (-3) and ab (-1.5): ab first, then ▁+ab = ▁ab (-4)
  const auto r = run(t, "ab");
  EXPECT_EQ(ids(r), (std::vector<int32_t>{1, 9}));
  EXPECT_EQ(r[0].begin, 0);
  EXPECT_EQ(r[0].end, 0);  // BOS: an empty span
  EXPECT_EQ(r[1].begin, 0);
  EXPECT_EQ(r[1].end, 2);
  // "▁a▁b": ▁a merges, ▁b is no token: ▁ and b apart; the space's ▁ spans the space
  const auto s = run(t, "a b");
  EXPECT_EQ(ids(s), (std::vector<int32_t>{1, 7, 4, 6}));
  EXPECT_EQ(s[2].begin, 1);
  EXPECT_EQ(s[2].end, 2);
  EXPECT_EQ(s[3].begin, 2);
  EXPECT_EQ(s[3].end, 3);
}

TEST(GgufTokenizer, SentencePieceFallsBackToBytes) {
  const GgufTokenizer t = GgufTokenizer::from_metadata(spm_vocab(), "v.gguf");
  EXPECT_EQ(ids(run(t, "ac")), (std::vector<int32_t>{1, 7, 3}));
  // a byte without a token: one error line naming the file
  try {
    run(t, "d");
    FAIL();
  } catch (const ConvertError& e) {
    EXPECT_NE(std::string(e.what()).find("v.gguf"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("<0x64>"), std::string::npos);
  }
}

TEST(GgufTokenizer, SpecialTokensAreCutOutFirstAndThenTakeASpacePrefix) {
  const GgufTokenizer t = GgufTokenizer::from_metadata(spm_vocab(), "v.gguf");
  // a</s>b: ▁a, </s>, then "b" after a special token gets the space prefix: ▁ b
  const auto r = run(t, "a</s>b");
  EXPECT_EQ(ids(r), (std::vector<int32_t>{1, 7, 2, 4, 6}));
  EXPECT_EQ(r[2].begin, 1);
  EXPECT_EQ(r[2].end, 5);
  EXPECT_EQ(r[3].begin, 5);  // the prefix ▁ is no text of the prompt
  EXPECT_EQ(r[3].end, 5);
  // without parse_special, "</s>" is text: not a token, so its bytes, and there are none for '<'
  EXPECT_THROW(run(t, "a</s>b", false), ConvertError);
  // add_space_prefix false (Gemma's files): no ▁ before the text
  GgufMetadata kv = spm_vocab();
  kv.set_bool("tokenizer.ggml.add_space_prefix", false);
  kv.set_bool("tokenizer.ggml.add_bos_token", false);
  EXPECT_EQ(ids(run(GgufTokenizer::from_metadata(kv, "v.gguf"), "ab")), (std::vector<int32_t>{8}));
}

TEST(GgufTokenizer, APhi3FilesSpecialTokensEatTheSpacesAfterThemAsLlamaCppDecidesByName) {
  // llama.cpp, for a general.name with "phi3" or "phi-3": every special token but <s>, <unk> and
  // <|endoftext|> takes the white space after it (RSTRIP)
  GgufMetadata kv = spm_vocab();
  EXPECT_EQ(ids(run(GgufTokenizer::from_metadata(kv, "v.gguf"), "a</s>  b")), (std::vector<int32_t>{1, 7, 2, 4, 4, 4, 6}));
  kv.set_string("general.name", "Phi-3 mini");
  const GgufTokenizer t = GgufTokenizer::from_metadata(kv, "v.gguf");
  const auto r = run(t, "a</s>  b");
  EXPECT_EQ(ids(r), (std::vector<int32_t>{1, 7, 2, 4, 6}));
  EXPECT_EQ(r[3].begin, 7);  // the space prefix after the stripped spaces
  EXPECT_EQ(ids(run(t, "a<s>  b")), (std::vector<int32_t>{1, 7, 1, 4, 4, 4, 6}));
}

// Byte-level: 0 a, 1 b, 2 c, 3 ab, 4 abc, 5 bc, 6 <|x|>; merges "b c" (rank 0), "a b" (1), "ab c" (2)
GgufMetadata bpe_vocab(const std::string& pre) {
  GgufMetadata kv;
  kv.set_string("tokenizer.ggml.model", "gpt2");
  kv.set_string("tokenizer.ggml.pre", pre);
  kv.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c", "ab", "abc", "bc", "<|x|>"});
  kv.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 3});
  kv.set_string_array("tokenizer.ggml.merges", {"b c", "a b", "ab c"});
  kv.set_u32("tokenizer.ggml.bos_token_id", 6);
  return kv;
}

TEST(GgufTokenizer, BytePairMergesTheLowestRankFirst) {
  const GgufTokenizer t = GgufTokenizer::from_metadata(bpe_vocab("qwen2"), "v.gguf");
  EXPECT_FALSE(t.add_bos());
  // abc: "b c" (rank 0) before "a b": a + bc, and "a bc" is no merge
  const auto r = run(t, "abc");
  EXPECT_EQ(ids(r), (std::vector<int32_t>{0, 5}));
  EXPECT_EQ(r[1].begin, 1);
  EXPECT_EQ(r[1].end, 3);
  EXPECT_EQ(ids(run(t, "ab<|x|>c")), (std::vector<int32_t>{3, 6, 2}));
  // llama-bpe: ignore_merges, a word that is a token is taken whole; and a BOS by default
  const GgufTokenizer l = GgufTokenizer::from_metadata(bpe_vocab("llama-bpe"), "v.gguf");
  EXPECT_TRUE(l.add_bos());
  EXPECT_EQ(ids(run(l, "abc")), (std::vector<int32_t>{6, 4}));
}

TEST(GgufTokenizer, PiecesAreWhatLlamaCppWritesOut) {
  const GgufTokenizer spm = GgufTokenizer::from_metadata(spm_vocab(), "v.gguf");
  EXPECT_EQ(spm.piece(9), " ab");   // ▁ as a space
  EXPECT_EQ(spm.piece(3), "c");     // <0x63>: its byte
  EXPECT_EQ(spm.piece(2), "</s>");  // a special token: its text
  GgufMetadata kv = bpe_vocab("qwen2");
  kv.set_string_array("tokenizer.ggml.tokens", {"a", "\xc4\xa0" "b", "\xc3\xa9", "c", "ab", "abc", "<|x|>"});
  const GgufTokenizer bpe = GgufTokenizer::from_metadata(kv, "v.gguf");
  EXPECT_EQ(bpe.piece(1), " b");      // Ġ is the space byte
  EXPECT_EQ(bpe.piece(2), "\xe9");    // é in the byte alphabet is the byte 0xE9, not valid UTF-8 alone
  EXPECT_EQ(bpe.piece(6), "<|x|>");
}

TEST(GgufTokenizer, PatternsSpellOutUnicodeWhiteSpace) {
  const GgufTokenizer t = GgufTokenizer::from_metadata(bpe_vocab("llama-bpe"), "v.gguf");
  ASSERT_EQ(t.split_patterns().size(), 1u);
  const std::string& p = t.split_patterns()[0];
  EXPECT_EQ(p.find("\\s"), std::string::npos) << p;
  EXPECT_EQ(p.find("\\S"), std::string::npos) << p;
  EXPECT_NE(p.find("\\x85"), std::string::npos) << p;                        // NEL is white space
  EXPECT_NE(p.find("(?![^\\t-\\r \\x85"), std::string::npos) << p;           // \s+(?!\S)
  EXPECT_NE(p.find("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"), std::string::npos) << p;  // the rest as llama.cpp's
  EXPECT_EQ(GgufTokenizer::from_metadata(bpe_vocab("default"), "v.gguf").split_patterns().size(), 4u);
}

TEST(GgufTokenizer, RefusesWhatItDoesNotImplementNamingTheKey) {
  auto message = [](const GgufMetadata& kv) {
    try {
      GgufTokenizer::from_metadata(kv, "v.gguf");
    } catch (const ConvertError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  GgufMetadata kv = bpe_vocab("no-such-pre");
  EXPECT_NE(message(kv).find("tokenizer.ggml.pre"), std::string::npos) << message(kv);
  kv = bpe_vocab("qwen2");
  kv.set_string("tokenizer.ggml.model", "bert");
  EXPECT_NE(message(kv).find("tokenizer.ggml.model"), std::string::npos) << message(kv);
  kv = bpe_vocab("qwen2");
  kv.set_bool("tokenizer.ggml.add_bos_token", true);
  kv.remove("tokenizer.ggml.bos_token_id");
  EXPECT_NE(message(kv).find("bos_token_id"), std::string::npos) << message(kv);
  EXPECT_NE(message(GgufMetadata()).find("no vocabulary"), std::string::npos);
  // a split that loses text is an error, not silently fewer tokens
  const GgufTokenizer t = GgufTokenizer::from_metadata(bpe_vocab("qwen2"), "v.gguf");
  EXPECT_THROW(t.tokenize("abc", true, true, [](const std::string&, const std::string&) { return std::vector<std::string>{"ab"}; }),
               ConvertError);
}

}  // namespace
