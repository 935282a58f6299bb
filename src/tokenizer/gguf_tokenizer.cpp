#include "tokenizer/gguf_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <queue>

#include "core/error.h"
#include "tokenizer/pre_tokenizers.h"

namespace leapconv {
namespace {

// Unicode's White_Space (llama.cpp's unicode_set_whitespace), for \s: JavaScript's \s differs
// (it has U+FEFF, and lacks U+0085).
constexpr const char* kWhiteSpace = R"(\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000)";

std::string ecmascript_pattern(const std::string& re) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char d = re[i + 1];
      ++i;
      if (d == 's') out += in_class ? kWhiteSpace : std::string("[") + kWhiteSpace + "]";
      else if (d == 'S' && !in_class) out += std::string("[^") + kWhiteSpace + "]";
      else if (d == 'S') throw ConvertError("internal error: \\S inside a character class in " + re);
      else { out += c; out += d; }
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

// GPT-2's bytes_to_unicode: the byte-level alphabet byte-level BPE vocabularies are written in.
const std::string& byte_char(uint8_t b) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    auto utf8 = [](uint32_t cp) {
      std::string s;
      if (cp < 0x80) s += char(cp);
      else { s += char(0xc0 | (cp >> 6)); s += char(0x80 | (cp & 0x3f)); }
      return s;
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      t[size_t(b)] = utf8(printable ? uint32_t(b) : next++);
    }
    return t;
  }();
  return table[b];
}

// The bytes a text in GPT-2's byte alphabet stands for (a character outside it stays as it is).
std::string bytes_of_byte_chars(const std::string& text) {
  static const std::unordered_map<std::string, char> back = [] {
    std::unordered_map<std::string, char> m;
    for (int b = 0; b < 256; ++b) m[byte_char(uint8_t(b))] = char(b);
    return m;
  }();
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const size_t n = std::min(size_t(c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1), text.size() - i);
    const std::string ch = text.substr(i, n);
    const auto it = back.find(ch);
    out += it == back.end() ? ch : std::string(1, it->second);
    i += n;
  }
  return out;
}

size_t utf8_len(unsigned char c) {  // llama.cpp's unicode_len_utf8
  static const size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[c >> 4];
}

// llama_token_type in the file -> the llama_token_attr bits that matter here.
enum Attr : uint16_t {
  kUnknown = 1 << 0, kUnused = 1 << 1, kNormal = 1 << 2, kControl = 1 << 3, kUserDefined = 1 << 4, kByte = 1 << 5,
  kLstrip = 1 << 7, kRstrip = 1 << 8
};
uint16_t attr_of_type(int32_t type) {
  switch (type) {
    case 1: return kNormal;
    case 2: return kUnknown;
    case 3: return kControl;
    case 4: return kUserDefined;
    case 5: return kUnused;
    case 6: return kByte;
    default: return 0;
  }
}

// Texts llama.cpp's loader makes control tokens whatever their type (end-of-generation and
// fill-in-the-middle markers it finds by text: "control-looking token ... will be overridden").
const std::vector<std::string>& control_looking_texts() {
  static const std::vector<std::string> t = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
      "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
      "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
      "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "<|code_prefix|>", "<|prefix|>",
      "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "<|code_suffix|>", "<|suffix|>",
      "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "<|code_middle|>", "<|middle|>",
      "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
      "<reponame>", "<|file_sep|>"};
  return t;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// llm_symbol: a text as a chain of UTF-8 characters (or one symbol, whole); a merge folds a
// symbol's right neighbour into it.
struct SymbolChain {
  struct Sym { size_t at, n; int prev, next; };
  const std::string& s;
  std::vector<Sym> sym;
  SymbolChain(const std::string& text, bool whole) : s(text) {
    for (size_t at = 0; at < s.size();) {
      const size_t n = whole ? s.size() : std::min(utf8_len(static_cast<unsigned char>(s[at])), s.size() - at);
      sym.push_back({at, n, int(sym.size()) - 1, at + n == s.size() ? -1 : int(sym.size()) + 1});
      at += n;
    }
  }
  std::string text(int i) const { return s.substr(sym[size_t(i)].at, sym[size_t(i)].n); }
  // llama.cpp's work queue, for both tokenizers: the best pair of neighbours first (`worse`
  // orders them), each merge offering the merged symbol's two new pairs; offer(l, r) gives the
  // pair's entry or nothing, stale(b) says an entry no longer matches its symbols.
  template <typename Bigram, typename Worse, typename Offer, typename Stale>
  void merge_pairs(Worse worse, Offer offer, Stale stale) {
    std::priority_queue<Bigram, std::vector<Bigram>, Worse> queue(worse);
    auto push = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      if (std::optional<Bigram> b = offer(l, r)) queue.push(*b);
    };
    for (int i = 1; i < int(sym.size()); ++i) push(i - 1, i);
    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      Sym& l = sym[size_t(b.left)];
      Sym& r = sym[size_t(b.right)];
      if (l.n == 0 || r.n == 0 || stale(b)) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) sym[size_t(r.next)].prev = b.left;
      push(l.prev, b.left);
      push(b.left, l.next);
    }
  }
};

}  // namespace

GgufTokenizer GgufTokenizer::from_metadata(const GgufMetadata& kv, const std::string& file) {
  GgufTokenizer t;
  t.file_ = file;
  auto fail = [&](const std::string& key, const std::string& why) { throw ConvertError(file, "", "key '" + key + "': " + why); };
  if (!kv.has("tokenizer.ggml.model")) fail("tokenizer.ggml.model", "absent: the file holds no vocabulary");
  t.model_ = kv.get_string("tokenizer.ggml.model");
  if (t.model_ == "llama") t.spm_ = true;
  else if (t.model_ != "gpt2" && t.model_ != "gemma4")
    fail("tokenizer.ggml.model", "'" + t.model_ + "': only llama.cpp's SentencePiece (\"llama\"), byte-level BPE (\"gpt2\") " +
                                     "and Gemma 4's BPE (\"gemma4\") tokenizers are implemented here");
  t.tokens_ = kv.get_string_array("tokenizer.ggml.tokens");
  const size_t n = t.tokens_.size();
  if (n == 0 || n > size_t(INT32_MAX)) fail("tokenizer.ggml.tokens", "holds " + std::to_string(n) + " tokens");
  if (kv.has("tokenizer.ggml.scores")) {
    t.scores_ = kv.get_f32_array("tokenizer.ggml.scores");
    if (t.scores_.size() < n) fail("tokenizer.ggml.scores", "fewer scores than tokens");
  }
  t.scores_.resize(n, 0.0f);
  t.attrs_.assign(n, kNormal);  // no token_type: every token normal, as llama.cpp
  if (kv.has("tokenizer.ggml.token_type")) {
    const std::vector<int32_t> types = kv.get_i32_array("tokenizer.ggml.token_type");
    if (types.size() < n) fail("tokenizer.ggml.token_type", "fewer types than tokens");
    for (size_t i = 0; i < n; ++i) t.attrs_[i] = attr_of_type(types[i]);
  }
  for (size_t i = 0; i < n; ++i) {
    if (t.tokens_[i].empty()) t.tokens_[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    t.ids_[t.tokens_[i]] = int32_t(i);  // a repeated text: the last id, as llama.cpp's token_to_id
  }
  for (const std::string& s : control_looking_texts())
    if (auto it = t.ids_.find(s); it != t.ids_.end()) t.attrs_[size_t(it->second)] |= kControl;
  // llama.cpp's workaround for Gemma 4 (and PaddleOCR): with <|tool_response>, "</s>" is a normal token
  if (auto s = t.ids_.find("</s>"); s != t.ids_.end() && t.ids_.count("<|tool_response>"))
    t.attrs_[size_t(s->second)] = kNormal;

  auto id_key = [&](const char* key) -> int32_t {
    if (!kv.has(key)) return -1;
    const uint32_t id = kv.get_u32(key);
    if (id >= n) fail(key, std::to_string(id) + " is not a token id (the vocabulary has " + std::to_string(n) + ")");
    return int32_t(id);
  };
  t.bos_ = id_key("tokenizer.ggml.bos_token_id");
  t.eos_ = id_key("tokenizer.ggml.eos_token_id");
  t.pre_ = kv.has("tokenizer.ggml.pre") ? kv.get_string("tokenizer.ggml.pre") : "default";
  if (t.model_ == "gemma4") t.pre_ = "gemma4";  // llama.cpp's loader names it by the model
  if (t.spm_) {
    t.add_space_prefix_ = true;
    t.add_bos_ = true;
  } else {
    const PreTokenizer* row = find_pre_tokenizer(t.pre_);
    if (!row || row->patterns.empty())
      fail("tokenizer.ggml.pre", "'" + t.pre_ + "': a pre-tokenizer this does not implement");
    for (const char* re : row->patterns) t.patterns_.push_back(ecmascript_pattern(re));
    t.ignore_merges_ = row->ignore_merges;
    t.add_bos_ = row->add_bos;
    t.escaped_raw_ = row->escaped_raw_utf8;
    const std::vector<std::string>& merges = kv.get_string_array("tokenizer.ggml.merges");
    for (size_t i = 0; i < merges.size(); ++i) {
      const std::string& m = merges[i];
      const size_t space = m.find(' ', 1);  // as llama.cpp: the first space after the first byte
      const std::string left = space == std::string::npos ? "" : m.substr(0, space);
      const std::string right = space == std::string::npos ? "" : m.substr(space + 1);
      t.ranks_.emplace(left + '\0' + right, int32_t(i));  // the first of a repeated merge wins
    }
  }
  if (kv.has("tokenizer.ggml.add_space_prefix")) t.add_space_prefix_ = kv.get_bool("tokenizer.ggml.add_space_prefix");
  if (kv.has("tokenizer.ggml.add_bos_token")) t.add_bos_ = kv.get_bool("tokenizer.ggml.add_bos_token");
  if (t.pre_ == "gemma4") t.add_bos_ = true;  // llama.cpp forces it for Gemma 4
  if (kv.has("tokenizer.ggml.add_eos_token")) t.add_eos_ = kv.get_bool("tokenizer.ggml.add_eos_token");
  if (t.add_bos_ && t.bos_ < 0) fail("tokenizer.ggml.bos_token_id", "absent, but a BOS token is to be added");
  if (t.add_eos_ && t.eos_ < 0) fail("tokenizer.ggml.eos_token_id", "absent, but an EOS token is to be added");

  for (size_t i = 0; i < n; ++i)
    if (t.attrs_[i] & (kControl | kUserDefined | kUnknown)) t.specials_.push_back(int32_t(i));
  std::stable_sort(t.specials_.begin(), t.specials_.end(),
                   [&](int32_t a, int32_t b) { return t.tokens_[size_t(a)].size() > t.tokens_[size_t(b)].size(); });
  // Phi-3's files (by general.name, as llama.cpp decides it): special tokens eat the spaces after them.
  std::string name = kv.has("general.name") ? kv.get_string("general.name") : "";
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : t.specials_) t.attrs_[size_t(id)] |= kRstrip;
    auto set = [&](const char* text, bool on) {
      if (auto it = t.ids_.find(text); it != t.ids_.end()) {
        if (on) t.attrs_[size_t(it->second)] |= kRstrip;
        else t.attrs_[size_t(it->second)] &= uint16_t(~kRstrip);
      }
    };
    set("</s>", true);
    for (const char* s : {"<unk>", "<s>", "<|endoftext|>"}) set(s, false);
  }
  return t;
}

// llama.cpp's token_to_piece(special = true): a special token's text, a normal token's text as
// bytes (U+2581 as a space for SentencePiece, GPT-2's byte alphabet undone for byte-level BPE), a
// byte token's byte; nothing for the rest (unused, undefined).
std::string GgufTokenizer::piece(int32_t id) const {
  const std::string& text = tokens_.at(size_t(id));
  const uint16_t a = attrs_[size_t(id)];
  if (a & (kUnknown | kControl | kUserDefined)) return text;
  if (a & kByte) {
    const auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
    if ((spm_ || escaped_raw_) && text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>' &&
        hex(text[3]) >= 0 && hex(text[4]) >= 0)
      return std::string(1, char(hex(text[3]) * 16 + hex(text[4])));
    if (!spm_ && !escaped_raw_) return bytes_of_byte_chars(text);
    return "";
  }
  if (!(a & kNormal)) return "";
  if (spm_ || escaped_raw_) {
    std::string out;
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, 3, "\xe2\x96\x81") == 0) { out += ' '; i += 3; }
      else out += text[i++];
    }
    return out;
  }
  return bytes_of_byte_chars(text);
}

int32_t GgufTokenizer::find(const std::string& text) const {
  const auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

int32_t GgufTokenizer::byte_token(uint8_t b) const {  // SentencePiece's <0xXX>, else the byte itself
  static const char* hex = "0123456789ABCDEF";
  const char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
  int32_t id = find(buf);
  if (id < 0) id = find(std::string(1, char(b)));
  if (id < 0) throw ConvertError(file_, "", "the vocabulary has no token for the byte " + std::string(buf));
  return id;
}

// llama.cpp's tokenizer_st_partition: each special token (longest first) cut out of the text.
std::vector<GgufTokenizer::Fragment> GgufTokenizer::partition(const std::string& text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, int64_t(text.size())});
  for (int32_t id : specials_) {
    const uint16_t a = attrs_[size_t(id)];
    if (!parse_special && (a & (kControl | kUnknown))) continue;
    const std::string& s = tokens_[size_t(id)];
    std::vector<Fragment> next;
    for (const Fragment& f : frags) {
      if (f.token >= 0) { next.push_back(f); continue; }
      int64_t pos = f.begin;
      for (;;) {
        const size_t m = std::string_view(text.data(), size_t(f.end)).find(s, size_t(pos));
        if (m == std::string::npos) break;
        int64_t left_end = int64_t(m);
        if (a & kLstrip)
          while (left_end > pos && is_space(text[size_t(left_end - 1)])) --left_end;
        if (left_end > pos) next.push_back({-1, pos, left_end});
        next.push_back({id, int64_t(m), int64_t(m + s.size())});
        pos = int64_t(m + s.size());
        if (a & kRstrip)
          while (pos < f.end && is_space(text[size_t(pos)])) ++pos;
      }
      if (pos < f.end) next.push_back({-1, pos, f.end});
    }
    frags = std::move(next);
  }
  return frags;
}

std::vector<TokenSpan> GgufTokenizer::tokenize(const std::string& text, bool add_special, bool parse_special,
                                               const PatternSplit& split) const {
  std::vector<TokenSpan> out;
  const int64_t len = int64_t(text.size());
  if (add_special && add_bos_) out.push_back({bos_, 0, 0});
  bool prev_special = true;  // SentencePiece: a space before the first text, and after each special token
  for (const Fragment& f : partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back({f.token, f.begin, f.end});
      prev_special = true;
    } else if (spm_) {
      spm(text, f.begin, f.end, add_space_prefix_ && prev_special, out);
      prev_special = false;
    } else {
      bpe(text, f.begin, f.end, split, out);
    }
  }
  if (add_special && add_eos_) out.push_back({eos_, len, len});
  return out;
}

// llm_tokenizer_spm_session: spaces as U+2581, then the highest-scoring pair of neighbours that is
// a token merged first (the leftmost among equals), until no pair is; what is not a token goes
// out as its bytes.
void GgufTokenizer::spm(const std::string& text, int64_t begin, int64_t end, bool space_prefix,
                        std::vector<TokenSpan>& out) const {
  static const std::string kSpace = "\xe2\x96\x81";
  std::string s;
  std::vector<int64_t> src;  // the text offset of each byte of s
  auto put = [&](const std::string& bytes, int64_t at) {
    s += bytes;
    src.insert(src.end(), bytes.size(), at);
  };
  if (space_prefix) put(kSpace, begin);
  for (int64_t i = begin; i < end; ++i) put(text[size_t(i)] == ' ' ? kSpace : std::string(1, text[size_t(i)]), i);

  SymbolChain c(s, false);
  struct Bigram { int left, right; float score; size_t size; };
  c.merge_pairs<Bigram>(
      [](const Bigram& l, const Bigram& r) { return l.score < r.score || (l.score == r.score && l.left > r.left); },
      [&](int l, int r) -> std::optional<Bigram> {
        const size_t size = c.sym[size_t(l)].n + c.sym[size_t(r)].n;
        const int32_t id = find(s.substr(c.sym[size_t(l)].at, size));
        if (id < 0) return std::nullopt;
        return Bigram{l, r, scores_[size_t(id)], size};
      },
      [&](const Bigram& b) { return c.sym[size_t(b.left)].n + c.sym[size_t(b.right)].n != b.size; });
  // The text offset where byte i of s ends: a U+2581 ends with its space, the prefix one at `begin`.
  const auto end_of = [&](size_t i) { return i + 1 < s.size() ? src[i + 1] : end; };
  for (int i = c.sym.empty() ? -1 : 0; i != -1; i = c.sym[size_t(i)].next) {
    const SymbolChain::Sym& y = c.sym[size_t(i)];
    if (y.n == 0) continue;
    const int32_t id = find(c.text(i));
    if (id >= 0) {
      out.push_back({id, src[y.at], end_of(y.at + y.n - 1)});
      continue;
    }
    for (size_t j = y.at; j < y.at + y.n; ++j) out.push_back({byte_token(uint8_t(s[j])), src[j], end_of(j)});
  }
}

// llm_tokenizer_bpe_session: the pre-tokenizer's words (Gemma 4: of the text with its spaces as
// U+2581), each merged by rank (the lowest first, the leftmost among equals), in GPT-2's byte
// alphabet or (Gemma 4) as raw UTF-8.
void GgufTokenizer::bpe(const std::string& text, int64_t begin, int64_t end, const PatternSplit& split,
                        std::vector<TokenSpan>& out) const {
  static const std::string kSpace = "\xe2\x96\x81";
  std::string s;
  std::vector<int64_t> src;  // the text offset of each byte of s
  for (int64_t i = begin; i < end; ++i) {
    const std::string b = escaped_raw_ && text[size_t(i)] == ' ' ? kSpace : std::string(1, text[size_t(i)]);
    s += b;
    src.insert(src.end(), b.size(), i);
  }
  std::vector<std::string> words = {s};
  for (const std::string& pattern : patterns_) {
    std::vector<std::string> next;
    for (const std::string& w : words) {
      std::vector<std::string> pieces = split(w, pattern);
      std::string joined;
      for (const std::string& p : pieces) joined += p;
      if (joined != w) throw ConvertError(file_, "", "the pre-tokenizer split of a text lost or changed some of it");
      for (std::string& p : pieces)
        if (!p.empty()) next.push_back(std::move(p));
    }
    words = std::move(next);
  }
  size_t at = 0;
  for (const std::string& w : words) {
    const std::vector<int64_t> wsrc(src.begin() + long(at), src.begin() + long(at + w.size()));
    at += w.size();
    bpe_word(w, wsrc, at < s.size() ? src[at] : end, out);
  }
}

void GgufTokenizer::bpe_word(const std::string& word, const std::vector<int64_t>& wsrc, int64_t word_end,
                             std::vector<TokenSpan>& out) const {
  std::string enc;
  std::vector<int64_t> src;  // the text offset of each byte of enc
  for (size_t i = 0; i < word.size(); ++i) {
    const std::string ch = escaped_raw_ ? std::string(1, word[i]) : byte_char(uint8_t(word[i]));
    enc += ch;
    src.insert(src.end(), ch.size(), wsrc[i]);
  }
  const auto end_of = [&](size_t i) { return i + 1 < enc.size() ? src[i + 1] : word_end; };
  // Gemma 4: a run of newlines that is a token is taken whole (llama.cpp's fix, PR 21343)
  const bool newlines = escaped_raw_ && enc.find_first_not_of('\n') == std::string::npos && find(enc) >= 0;
  SymbolChain c(enc, (ignore_merges_ && find(enc) >= 0) || newlines);
  struct Bigram { int left, right; int32_t rank; std::string text; };
  c.merge_pairs<Bigram>(
      [](const Bigram& l, const Bigram& r) { return l.rank > r.rank || (l.rank == r.rank && l.left > r.left); },
      [&](int l, int r) -> std::optional<Bigram> {
        const std::string a = c.text(l), b = c.text(r);
        const auto it = ranks_.find(a + '\0' + b);
        if (it == ranks_.end()) return std::nullopt;
        return Bigram{l, r, it->second, a + b};
      },
      [&](const Bigram& b) { return c.text(b.left) + c.text(b.right) != b.text; });
  for (const SymbolChain::Sym& y : c.sym) {
    if (y.n == 0) continue;
    const int32_t id = find(enc.substr(y.at, y.n));
    if (id >= 0) {
      out.push_back({id, src[y.at], end_of(y.at + y.n - 1)});
      continue;
    }
    // as llama.cpp: each byte of the piece alone, where that is a token (a lone byte of a
    // two-byte character never is, and is dropped); raw UTF-8: its <0xXX> token
    for (size_t j = y.at; j < y.at + y.n; ++j) {
      static const char* hex = "0123456789ABCDEF";
      const uint8_t ch = uint8_t(enc[j]);
      const char buf[7] = {'<', '0', 'x', hex[ch >> 4], hex[ch & 15], '>', 0};
      if (const int32_t b = find(escaped_raw_ ? std::string(buf) : std::string(1, enc[j])); b >= 0)
        out.push_back({b, src[j], end_of(j)});
    }
  }
}

}  // namespace leapconv
