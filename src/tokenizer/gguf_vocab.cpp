// Tokenizer files -> GGUF tokenizer metadata. The reference for every rule here is llama.cpp as
// shipped in node-llama-cpp (convert_hf_to_gguf.py / conversion/base.py: get_vocab_base,
// _set_vocab_gpt2, _create_vocab_sentencepiece, _set_vocab_llama_hf, LlamaModel.set_vocab;
// gguf-py/gguf/vocab.py: SpecialVocab, LlamaHfVocab; src/llama-vocab.cpp: what the loader reads).
// Where this file does something else on purpose, a comment says so and why.
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/pre_tokenizers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "source/side_files.h"

namespace leapconv {

namespace {

using nlohmann::json;

// ---- limits: nothing read from a file is trusted beyond these ----
// The tokenizer files' size bounds are the side-file table's (source/side_files.cpp), so a file the
// checkpoint accepted is never refused here for its size; config.json is bounded like the small ones.
size_t side_file_bound(const char* name) { return size_t(find_side_file_spec(name)->max_bytes); }
const size_t kMaxSmallJsonBytes = side_file_bound("tokenizer_config.json");
constexpr size_t kMaxJsonValues = size_t(12) << 20;           // JSON values in one file (Gemma 3's tokenizer.json: ~2.3 M)
const size_t kMaxModelBytes = side_file_bound("tokenizer.model");
constexpr int64_t kMaxTokens = int64_t(1) << 22;              // 4 M tokens (largest real vocabularies: ~262 k)
constexpr size_t kMaxMerges = size_t(1) << 23;                // 8 M: below 2^24, so -rank is exact in f32
constexpr size_t kMaxTokenBytes = size_t(1) << 16;            // one token's text
constexpr size_t kMaxTemplateBytes = size_t(4) << 20;         // one chat template

const char* const kTokenizerJson = "tokenizer.json";
const char* const kTokenizerConfig = "tokenizer_config.json";
const char* const kConfigJson = "config.json";
const char* const kGenerationConfig = "generation_config.json";
const char* const kTokenizerModel = "tokenizer.model";
const char* const kChatTemplateJinja = "chat_template.jinja";

[[noreturn]] void fail(const std::string& file, const std::string& what) { throw ConvertError(file, "", what); }

// Printable form of a token for messages (control characters escaped, long ones cut).
std::string show(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && out.size() < 60; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else out += static_cast<char>(c);
  }
  if (out.size() >= 60) out += "...";
  return out + "'";
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

// Counts JSON values (roughly: opening brackets and separators outside strings) so that a file
// of millions of tiny values is refused before the DOM is built.
size_t count_json_values(std::string_view s) {
  size_t count = 1;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == ',' || c == '[' || c == '{') {
      ++count;
    }
  }
  return count;
}

json parse_json_file(const char* file, std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes)
    fail(file, "is " + std::to_string(text.size() >> 20) + " MiB; more than the " + std::to_string(max_bytes >> 20) +
                   " MiB a tokenizer file may have");
  if (count_json_values(text) > kMaxJsonValues)
    fail(file, "holds more than " + std::to_string(kMaxJsonValues) + " JSON values; not a tokenizer file");
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    std::string what = e.what();
    const size_t p = what.find("] ");
    fail(file, "is not valid JSON (" + (p == std::string::npos ? what : what.substr(p + 2)) + ")");
  }
  if (!j.is_object()) fail(file, "is not a JSON object");
  return j;
}

// A member of an object, or nullptr when absent or null.
const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> get_bool(const json& obj, const char* key) {
  const json* v = member(obj, key);
  if (v && v->is_boolean()) return v->get<bool>();
  return std::nullopt;
}

// An integer member (not a bool, not a float), else nullopt.
std::optional<int64_t> get_int(const json& obj, const char* key) {
  const json* v = member(obj, key);
  if (v && v->is_number_integer()) {
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      return u > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max() : int64_t(u);
    }
    return v->get<int64_t>();
  }
  return std::nullopt;
}

std::string get_string(const json& obj, const char* key) {
  const json* v = member(obj, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

// tokenizer_config's "<typ>_token" entry: a string, or an AddedToken dict {"content": ...}.
std::string token_content(const json* v) {
  if (!v) return {};
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object()) return get_string(*v, "content");
  return {};
}

bool is_byte_token(std::string_view t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
  return t.size() == 6 && t[0] == '<' && t[1] == '0' && t[2] == 'x' && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }

// The converter's does_token_look_special(): added tokens some models forgot to mark special.
bool looks_special(std::string_view t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (starts_with(t, "<|") && ends_with(t, "|>")) return true;
  if (starts_with(t, "<\xEF\xBD\x9C") && ends_with(t, "\xEF\xBD\x9C>")) return true;  // <｜ ... ｜>
  return starts_with(t, "<unused") && ends_with(t, ">");
}

const std::string kSpmSpace = "\xE2\x96\x81";  // U+2581 ▁

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  size_t p = 0;
  while ((p = s.find(from, p)) != std::string::npos) {
    s.replace(p, from.size(), to);
    p += to.size();
  }
  return s;
}

std::string pad_token(int64_t id) { return "[PAD" + std::to_string(id) + "]"; }

// ---- tokenizer.json pieces shared by both kinds ----

struct AddedToken {
  int64_t id;
  std::string content;
  bool special;
  bool normalized;
};

std::vector<AddedToken> read_added_tokens(const json& tj) {
  std::vector<AddedToken> out;
  const json* at = member(tj, "added_tokens");
  if (!at) return out;
  if (!at->is_array()) fail(kTokenizerJson, "added_tokens is not a list");
  for (size_t i = 0; i < at->size(); ++i) {
    const json& a = (*at)[i];
    const std::optional<int64_t> id = get_int(a, "id");
    const json* content = member(a, "content");
    if (!a.is_object() || !id || !content || !content->is_string())
      fail(kTokenizerJson, "added_tokens[" + std::to_string(i) + "] has no integer id and string content");
    if (*id < 0 || *id >= kMaxTokens)
      fail(kTokenizerJson, "added token " + show(content->get<std::string>()) + " has id " + std::to_string(*id) +
                               ", outside 0.." + std::to_string(kMaxTokens - 1));
    const bool special = get_bool(a, "special").value_or(false);
    // HF's AddedToken default: normalized = not special.
    out.push_back({*id, content->get<std::string>(), special, get_bool(a, "normalized").value_or(!special)});
  }
  return out;
}

// The merges of a BPE model, as pairs. Accepts the legacy "a b" strings and the ["a", "b"]
// pairs of tokenizers >= 0.20 (transformers 4.45).
std::vector<std::pair<std::string, std::string>> read_merges(const json& model) {
  std::vector<std::pair<std::string, std::string>> out;
  const json* m = member(model, "merges");
  if (!m) return out;
  if (!m->is_array()) fail(kTokenizerJson, "model.merges is not a list");
  if (m->size() > kMaxMerges)
    fail(kTokenizerJson, "has " + std::to_string(m->size()) + " merges; more than the " + std::to_string(kMaxMerges) +
                             " allowed");
  out.reserve(m->size());
  for (size_t i = 0; i < m->size(); ++i) {
    const json& e = (*m)[i];
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
        fail(kTokenizerJson, "merge " + std::to_string(i) + " " + show(s) + " is not of the form \"a b\"");
      out.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string() &&
               !e[0].get_ref<const std::string&>().empty() && !e[1].get_ref<const std::string&>().empty()) {
      out.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      fail(kTokenizerJson, "merge " + std::to_string(i) + " is neither \"a b\" nor a pair of non-empty strings");
    }
  }
  return out;
}

// A BPE model's vocab {token: id}, checked: integer ids in range and unique.
std::vector<std::pair<std::string, int64_t>> read_bpe_vocab(const json& model) {
  const json* v = member(model, "vocab");
  if (!v || !v->is_object()) fail(kTokenizerJson, "model.vocab is not an object of token: id");
  if (int64_t(v->size()) > kMaxTokens)
    fail(kTokenizerJson, "has " + std::to_string(v->size()) + " tokens; more than the " + std::to_string(kMaxTokens) +
                             " allowed");
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(v->size());
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_number_integer()) fail(kTokenizerJson, "model.vocab: the id of " + show(it.key()) + " is not an integer");
    const int64_t id = it.value().is_number_unsigned() ? int64_t(std::min<uint64_t>(it.value().get<uint64_t>(), uint64_t(kMaxTokens)))
                                                       : it.value().get<int64_t>();
    if (id < 0 || id >= kMaxTokens)
      fail(kTokenizerJson, "model.vocab: " + show(it.key()) + " has id " + std::to_string(id) + ", outside 0.." +
                               std::to_string(kMaxTokens - 1));
    out.emplace_back(it.key(), id);
  }
  return out;
}

// ---- pre-tokenizer signatures ----
// A tokenizer.json pre_tokenizer, flattened (Sequence) into one canonical string per step:
//   "ByteLevel" (use_regex false) / "ByteLevel(use_regex)" (GPT-2's built-in regex),
//   "Split(Regex|String,<behavior>,<pattern>)", "Digits(individual)" / "Digits", and for anything
//   else its type plus the settings that matter. add_prefix_space / invert make a step unknown.

void signature_of(const json& p, std::vector<std::string>& out, int depth) {
  if (depth > 8 || !p.is_object()) { out.push_back("?"); return; }
  const std::string type = get_string(p, "type");
  if (type == "Sequence") {
    const json* list = member(p, "pretokenizers");
    if (!list || !list->is_array()) { out.push_back("Sequence(?)"); return; }
    for (const json& q : *list) signature_of(q, out, depth + 1);
  } else if (type == "ByteLevel") {
    std::string s = "ByteLevel";
    std::vector<std::string> flags;
    if (get_bool(p, "add_prefix_space").value_or(true)) flags.push_back("add_prefix_space");
    if (get_bool(p, "use_regex").value_or(true)) flags.push_back("use_regex");
    for (size_t i = 0; i < flags.size(); ++i) s += (i ? "," : "(") + flags[i] + (i + 1 == flags.size() ? ")" : "");
    out.push_back(s);
  } else if (type == "Split") {
    const json* pat = member(p, "pattern");
    std::string kind = "?", pattern;
    if (pat && pat->is_object()) {
      if (const json* r = member(*pat, "Regex"); r && r->is_string()) { kind = "Regex"; pattern = r->get<std::string>(); }
      else if (const json* s = member(*pat, "String"); s && s->is_string()) { kind = "String"; pattern = s->get<std::string>(); }
    }
    std::string s = "Split(" + kind + "," + get_string(p, "behavior") + "," + pattern + ")";
    if (get_bool(p, "invert").value_or(false)) s += "(invert)";
    out.push_back(s);
  } else if (type == "Digits") {
    out.push_back(get_bool(p, "individual_digits").value_or(false) ? "Digits(individual)" : "Digits");
  } else if (type == "Metaspace") {
    out.push_back("Metaspace(" + get_string(p, "replacement") + "," + get_string(p, "prepend_scheme") + ")");
  } else {
    out.push_back(type.empty() ? "?" : type);
  }
}

std::vector<std::string> pre_signature(const json& tj) {
  std::vector<std::string> sig;
  if (const json* p = member(tj, "pre_tokenizer")) signature_of(*p, sig, 0);
  return sig;
}

std::string join_signature(const std::vector<std::string>& sig) {
  if (sig.empty()) return "(none)";
  std::string s;
  for (size_t i = 0; i < sig.size(); ++i) s += (i ? " + " : "") + sig[i];
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}

bool pre_has_byte_level(const std::vector<std::string>& sig) {
  for (const auto& s : sig)
    if (starts_with(s, "ByteLevel")) return true;
  return false;
}

// ---- special tokens: gguf-py's SpecialVocab ----

struct SpecialIds {
  std::vector<std::pair<std::string, uint32_t>> ids;  // insertion order, first set wins
  std::vector<std::pair<std::string, bool>> add;     // insertion order, later assignments update in place

  bool has(const std::string& typ) const {
    for (const auto& p : ids)
      if (p.first == typ) return true;
    return false;
  }
  void set_add(const std::string& typ, bool v) {
    for (auto& p : add)
      if (p.first == typ) { p.second = v; return; }
    add.emplace_back(typ, v);
  }
};

struct SpecialContext {
  const json* tokenizer_json = nullptr;   // parsed, or nullptr
  json* tokenizer_config = nullptr;       // parsed (mutable: SpecialVocab rewrites entries), or nullptr
  const json* config_json = nullptr;
  const json* generation_config = nullptr;
  const std::vector<AddedToken>* added = nullptr;
  size_t n_vocab = 0;
  // tokenizer.model's trainer_spec ids with the piece type they must have (last fallback)
  std::vector<std::pair<std::string, int64_t>> model_ids;
  const std::vector<int32_t>* types = nullptr;
};

void set_special(SpecialIds& s, const std::string& typ, std::optional<int64_t> tid, size_t n_vocab, const char* from,
                 std::vector<std::string>& warnings) {
  if (!tid) return;
  if (s.has(typ)) return;
  if (*tid < 0 || uint64_t(*tid) >= n_vocab) {
    // The converter raises on a negative id and, for SentencePiece, skips one out of range; both
    // are skipped here (llama.cpp would ignore such an id anyway), with a warning.
    warnings.push_back(std::string(from) + ": " + typ + " token id " + std::to_string(*tid) +
                       " is outside the vocabulary (0.." + std::to_string(n_vocab - 1) + "); not written");
    return;
  }
  s.ids.emplace_back(typ, uint32_t(*tid));
}

SpecialIds special_vocab(SpecialContext& c, std::vector<std::string>& warnings) {
  SpecialIds s;
  std::vector<std::string> types = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
  json* tc = c.tokenizer_config;
  const bool have_tc = tc && !tc->empty();  // Python: `if tokenizer_config` (an empty dict is false)
  if (c.tokenizer_json) {
    auto tc_str = [&](const char* key) { return have_tc ? token_content(member(*tc, key)) : std::string(); };
    std::string special_bos = tc_str("bos_token"), special_cls = tc_str("cls_token");
    std::string special_eos = tc_str("eos_token"), special_sep = tc_str("sep_token");
    if (special_bos.empty() && !special_cls.empty() && have_tc) (*tc)["bos_token"] = special_bos = special_cls;
    if (special_eos.empty() && !special_sep.empty() && have_tc) (*tc)["eos_token"] = special_eos = special_sep;
    if (const json* post = member(*c.tokenizer_json, "post_processor"); post && post->is_object()) {
      std::vector<const json*> processors;
      if (const json* list = member(*post, "processors"); list && list->is_array()) {
        for (const json& p : *list) processors.push_back(&p);
      } else {
        processors.push_back(post);
      }
      auto special_id_of = [](const json& item) -> std::string {
        const json* st = member(item, "SpecialToken");
        return st ? get_string(*st, "id") : std::string();
      };
      auto sequence_id_of = [](const json& item) -> std::string {
        const json* sq = member(item, "Sequence");
        return sq ? get_string(*sq, "id") : std::string();
      };
      for (const json* pp : processors) {
        const json& p = *pp;
        const std::string ptype = get_string(p, "type");
        if (ptype == "RobertaProcessing") {
          s.set_add("bos", true);
          s.set_add("eos", true);
          s.set_add("sep", true);
          if (special_cls.empty() && have_tc) {
            const json* cls = member(p, "cls");
            special_cls = cls && cls->is_array() && !cls->empty() && (*cls)[0].is_string() ? (*cls)[0].get<std::string>() : special_bos;
            (*tc)["cls_token"] = special_cls;
          }
          if (special_sep.empty() && have_tc) {
            const json* sep = member(p, "sep");
            special_sep = sep && sep->is_array() && !sep->empty() && (*sep)[0].is_string() ? (*sep)[0].get<std::string>() : special_eos;
            (*tc)["sep_token"] = special_sep;
          }
          continue;
        }
        if (ptype != "TemplateProcessing") continue;
        // SpecialVocab's crude reading of TemplateProcessing, step by step.
        const json* single = member(p, "single");
        const json* pair = member(p, "pair");
        const json empty = json::array();
        const json& tmpl_single = single && single->is_array() ? *single : empty;
        std::string special_first, special_last;
        if (tmpl_single.size() > 1) {
          special_first = special_id_of(tmpl_single.front());
          if (!special_first.empty()) {
            if (!have_tc) {
              special_bos = special_first;
            } else if (special_first != special_bos && special_first != special_cls) {
              if (special_bos.empty()) (*tc)["bos_token"] = special_bos = special_first;
              if (special_cls.empty()) (*tc)["cls_token"] = special_cls = special_first;
            }
            const bool known = special_first == special_bos || special_first == special_cls;
            s.set_add("bos", known);
            if (!known) warnings.push_back(std::string(kTokenizerJson) + ": unknown leading special token " + show(special_first) + " in TemplateProcessing");
          }
          special_last = special_id_of(tmpl_single.back());
          if (!special_last.empty()) {
            if (!have_tc) {
              special_eos = special_last;
            } else if (special_last != special_eos) {
              if (std::find(types.begin(), types.end(), "eot") == types.end()) {
                types.push_back("eot");
                (*tc)["eot_token"] = special_eos;
              } else if (std::find(types.begin(), types.end(), "eom") == types.end()) {
                types.push_back("eom");
                (*tc)["eom_token"] = special_eos;
              }
              (*tc)["eos_token"] = special_eos = special_last;
            }
            s.set_add("eos", special_last == special_eos);
          }
        }
        if (pair && pair->is_array() && !pair->empty()) {
          const size_t seq_start = !special_first.empty() && special_id_of(pair->front()) == special_first ? 1 : 0;
          const size_t seq_stop_cut = !special_last.empty() && special_id_of(pair->back()) == special_last ? 1 : 0;
          std::vector<const json*> mid;
          for (size_t i = seq_start; i + seq_stop_cut < pair->size(); ++i) mid.push_back(&(*pair)[i]);
          if (!mid.empty()) {
            const std::string tmpl_a = sequence_id_of(*mid.front()), tmpl_b = sequence_id_of(*mid.back());
            if (tmpl_a == "A" && tmpl_b == "B" && mid.size() > 2) {
              std::vector<const json*> inner(mid.begin() + 1, mid.end() - 1);
              bool add_sep = false;
              const std::string e1 = special_id_of(*inner[0]);
              if (!e1.empty() && (e1 == special_sep || e1 == special_eos) && special_last.empty()) add_sep = true;
              if (inner.size() == 2) {
                const std::string e2 = special_id_of(*inner[1]);
                if (!e2.empty() && (e2 == special_sep || e2 == special_eos)) add_sep = true;
              }
              s.set_add("sep", add_sep);
              if (add_sep && special_sep.empty() && have_tc) (*tc)["sep_token"] = special_eos;
            }
          }
        }
      }
    }
  }
  if (have_tc) {
    for (const std::string& typ : types) {
      if (const std::optional<bool> a = get_bool(*tc, ("add_" + typ + "_token").c_str())) s.set_add(typ, *a);
      if (!c.tokenizer_json || !c.added) continue;  // ids come from tokenizer.json's added_tokens only
      const std::string content = token_content(member(*tc, (typ + "_token").c_str()));
      if (content.empty()) continue;
      for (const AddedToken& a : *c.added) {
        if (a.content == content) {
          set_special(s, typ, a.id, c.n_vocab, kTokenizerConfig, warnings);
          break;
        }
      }
    }
  }
  if (c.config_json) {
    const json* text_config = member(*c.config_json, "text_config");
    for (const std::string& typ : types) {
      const std::string key = typ + "_token_id";
      // (a list, as some configs give eos_token_id, is not an int: SpecialVocab ignores it)
      std::optional<int64_t> id = member(*c.config_json, key.c_str()) ? get_int(*c.config_json, key.c_str())
                                  : text_config                       ? get_int(*text_config, key.c_str())
                                                                      : std::nullopt;
      set_special(s, typ, id, c.n_vocab, kConfigJson, warnings);
    }
  }
  // Beyond the converter: generation_config.json's bos/eos/pad ids (what transformers' generate()
  // uses), and tokenizer.model's trainer ids, only for a type still unset. Without them llama.cpp
  // would fall back to hard-coded guesses (11 for gpt2, 1/2/0 for llama).
  if (c.generation_config) {
    for (const char* typ : {"bos", "eos", "pad"})
      if (std::optional<int64_t> id = get_int(*c.generation_config, (std::string(typ) + "_token_id").c_str()))
        set_special(s, typ, id, c.n_vocab, kGenerationConfig, warnings);
  }
  for (const auto& [typ, id] : c.model_ids) {
    if (id < 0 || uint64_t(id) >= c.n_vocab || !c.types) continue;
    const int32_t t = (*c.types)[size_t(id)];
    if ((typ == "unk" && t == kTokenUnknown) || (typ != "unk" && t == kTokenControl))
      set_special(s, typ, id, c.n_vocab, kTokenizerModel, warnings);
  }
  return s;
}

// ---- tokenizer.model: SentencePiece's ModelProto (protobuf, proto2) ----

struct SpPiece {
  std::string piece;
  float score = 0.0f;
  int32_t type = kTokenNormal;
};

struct SpModel {
  std::vector<SpPiece> pieces;
  int64_t model_type = 1;  // TrainerSpec.model_type: 1 UNIGRAM (default), 2 BPE, 3 WORD, 4 CHAR
  bool byte_fallback = false;
  int64_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;  // TrainerSpec defaults
  std::optional<bool> add_dummy_prefix;                     // NormalizerSpec.add_dummy_prefix, when stated
};

class ProtoReader {
 public:
  ProtoReader(const uint8_t* begin, const uint8_t* end, const uint8_t* base) : p_(begin), end_(end), base_(base) {}
  bool done() const { return p_ >= end_; }
  size_t offset() const { return size_t(p_ - base_); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) bad("a number runs past the end of its message");
      const uint8_t b = *p_++;
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    bad("a number is longer than 10 bytes");
  }
  // Reads a field key; returns false at the end of the message.
  bool key(uint32_t& field, uint32_t& wire) {
    if (done()) return false;
    const uint64_t k = varint();
    field = uint32_t(k >> 3);
    wire = uint32_t(k & 7);
    if (field == 0 || k >> 32) bad("field number " + std::to_string(k >> 3) + " is not valid");
    return true;
  }
  ProtoReader sub() {
    const uint64_t len = varint();
    if (len > uint64_t(end_ - p_)) bad("a field of " + std::to_string(len) + " bytes runs past the end of its message");
    ProtoReader r(p_, p_ + len, base_);
    p_ += len;
    return r;
  }
  std::string_view bytes() {
    ProtoReader r = sub();
    return std::string_view(reinterpret_cast<const char*>(r.p_), size_t(r.end_ - r.p_));
  }
  float fixed32_float() {
    if (end_ - p_ < 4) bad("a float runs past the end of its message");
    const uint32_t u = uint32_t(p_[0]) | uint32_t(p_[1]) << 8 | uint32_t(p_[2]) << 16 | uint32_t(p_[3]) << 24;
    p_ += 4;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  void skip(uint32_t wire) {
    switch (wire) {
      case 0: varint(); break;
      case 1:
        if (end_ - p_ < 8) bad("a 64-bit field runs past the end of its message");
        p_ += 8;
        break;
      case 2: sub(); break;
      case 5:
        if (end_ - p_ < 4) bad("a 32-bit field runs past the end of its message");
        p_ += 4;
        break;
      default: bad("wire type " + std::to_string(wire) + " is not valid");
    }
  }
  void expect(uint32_t field, uint32_t wire, uint32_t want) {
    if (wire != want)
      bad("field " + std::to_string(field) + " has wire type " + std::to_string(wire) + ", not " + std::to_string(want));
  }
  [[noreturn]] void bad(const std::string& what) const {
    fail(kTokenizerModel, "not a valid SentencePiece model: " + what + " (at byte " + std::to_string(offset()) + ")");
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* base_;
};

int64_t as_int32(uint64_t v) { return int64_t(int32_t(uint32_t(v))); }  // proto int32 (negatives are 10-byte varints)

SpModel read_sentencepiece(std::string_view bytes) {
  if (bytes.size() > kMaxModelBytes)
    fail(kTokenizerModel, "is " + std::to_string(bytes.size() >> 20) + " MiB; more than the " +
                              std::to_string(kMaxModelBytes >> 20) + " MiB a SentencePiece model may have");
  if (bytes.empty()) fail(kTokenizerModel, "is empty");
  {
    // tiktoken's format (Meta's Llama 3 original/tokenizer.model) is text: "<base64> <rank>" lines.
    size_t printable = 0;
    const size_t probe = std::min<size_t>(bytes.size(), 256);
    for (size_t i = 0; i < probe; ++i) {
      const unsigned char c = static_cast<unsigned char>(bytes[i]);
      if ((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\r') ++printable;
    }
    if (printable == probe && bytes.find(' ') != std::string_view::npos && bytes.find('\n') != std::string_view::npos &&
        bytes[0] != 0x0a)
      fail(kTokenizerModel, "is a text file (tiktoken's format?), not a SentencePiece model; use tokenizer.json");
  }
  const uint8_t* base = reinterpret_cast<const uint8_t*>(bytes.data());
  ProtoReader top(base, base + bytes.size(), base);
  SpModel m;
  std::unordered_set<std::string_view> seen;
  uint32_t field, wire;
  while (top.key(field, wire)) {
    if (field == 1) {  // repeated SentencePiece pieces
      top.expect(field, wire, 2);
      if (int64_t(m.pieces.size()) >= kMaxTokens) top.bad("more than " + std::to_string(kMaxTokens) + " pieces");
      ProtoReader pr = top.sub();
      SpPiece piece;
      bool has_piece = false;
      while (pr.key(field, wire)) {
        if (field == 1) {
          pr.expect(field, wire, 2);
          const std::string_view s = pr.bytes();
          if (s.size() > kMaxTokenBytes) pr.bad("a piece of " + std::to_string(s.size()) + " bytes");
          piece.piece.assign(s.data(), s.size());
          has_piece = true;
        } else if (field == 2) {
          pr.expect(field, wire, 5);
          piece.score = pr.fixed32_float();
        } else if (field == 3) {
          pr.expect(field, wire, 0);
          const uint64_t t = pr.varint();
          if (t < 1 || t > 6) pr.bad("piece " + std::to_string(m.pieces.size()) + " has type " + std::to_string(t));
          piece.type = int32_t(t);
        } else {
          pr.skip(wire);
        }
      }
      const std::string where = "piece " + std::to_string(m.pieces.size());
      if (!has_piece || piece.piece.empty()) top.bad(where + " has no text");
      if (!valid_utf8(piece.piece)) top.bad(where + " is not valid UTF-8");
      if (!std::isfinite(piece.score)) top.bad(where + " " + show(piece.piece) + " has a score that is not finite");
      m.pieces.push_back(std::move(piece));
    } else if (field == 2) {  // TrainerSpec
      top.expect(field, wire, 2);
      ProtoReader tr = top.sub();
      while (tr.key(field, wire)) {
        if (field == 3 || field == 35 || (field >= 40 && field <= 43)) {
          tr.expect(field, wire, 0);
          const uint64_t v = tr.varint();
          if (field == 3) m.model_type = as_int32(v);
          else if (field == 35) m.byte_fallback = v != 0;
          else if (field == 40) m.unk_id = as_int32(v);
          else if (field == 41) m.bos_id = as_int32(v);
          else if (field == 42) m.eos_id = as_int32(v);
          else m.pad_id = as_int32(v);
        } else {
          tr.skip(wire);
        }
      }
    } else if (field == 3) {  // NormalizerSpec
      top.expect(field, wire, 2);
      ProtoReader nr = top.sub();
      while (nr.key(field, wire)) {
        if (field == 3) {
          nr.expect(field, wire, 0);
          m.add_dummy_prefix = nr.varint() != 0;
        } else {
          nr.skip(wire);
        }
      }
    } else {
      top.skip(wire);
    }
  }
  if (m.pieces.empty()) fail(kTokenizerModel, "not a valid SentencePiece model: it has no pieces");
  for (size_t i = 0; i < m.pieces.size(); ++i)
    if (!seen.insert(m.pieces[i].piece).second)
      fail(kTokenizerModel, "piece " + std::to_string(i) + " " + show(m.pieces[i].piece) + " appears twice");
  return m;
}

// Vocabulary size: config.json's when stated (the converter's hparams["vocab_size"]), else one
// past the largest id.
int64_t target_vocab_size(int64_t config_vocab, int64_t max_id) {
  if (config_vocab < 0 || config_vocab > kMaxTokens)
    fail(kConfigJson, "vocab_size " + std::to_string(config_vocab) + " is outside 1.." + std::to_string(kMaxTokens));
  return config_vocab > 0 ? config_vocab : max_id + 1;
}

// Merges, written "a b" as gguf-py's SpecialVocab does (a space inside a part of the pair form
// becomes U+0120, the byte-level alphabet's space). Each must name vocabulary tokens, as HF requires.
template <typename Index>
void write_merges(const json& model, const Index& base_index, GgufVocab& out) {
  const auto merges = read_merges(model);
  if (merges.empty()) fail(kTokenizerJson, "has no merges; llama.cpp's BPE tokenizer needs them");
  out.merges.reserve(merges.size());
  bool spaces = false;
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [a, b] = merges[i];
    if (!base_index.count(a) || !base_index.count(b) || !base_index.count(a + b))
      fail(kTokenizerJson, "merge " + std::to_string(i) + " " + show(a + " " + b) + " names a token that is not in model.vocab");
    if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos) {
      spaces = true;
      out.merges.push_back(replace_all(a, " ", "\xC4\xA0") + " " + replace_all(b, " ", "\xC4\xA0"));
    } else {
      out.merges.push_back(a + " " + b);
    }
  }
  if (spaces) out.warnings.push_back(std::string(kTokenizerJson) + ": spaces in merges are written as U+0120, as gguf-py does");
}

// ---- byte-level BPE (get_vocab_base + _set_vocab_gpt2) ----

void build_byte_level_bpe(const json& tj, const json& model, const json* tokenizer_config, const VocabFiles& files,
                          const VocabOptions& opt, GgufVocab& out) {
  if (const json* p = member(model, "continuing_subword_prefix"); p && !(p->is_string() && p->get_ref<const std::string&>().empty()))
    fail(kTokenizerJson, "model.continuing_subword_prefix is set; llama.cpp's BPE has no such prefix");
  if (const json* p = member(model, "end_of_word_suffix"); p && !(p->is_string() && p->get_ref<const std::string&>().empty()))
    fail(kTokenizerJson, "model.end_of_word_suffix is set; llama.cpp's BPE has no such suffix");
  if (member(model, "dropout") && !(member(model, "dropout")->is_number() && member(model, "dropout")->get<double>() == 0.0))
    out.warnings.push_back(std::string(kTokenizerJson) + ": BPE dropout is set; llama.cpp tokenizes without it");
  if (const json* n = member(tj, "normalizer")) {
    const std::string t = get_string(*n, "type");
    if (t != "NFC")
      out.warnings.push_back(std::string(kTokenizerJson) + ": normalizer " + (t.empty() ? "?" : t) +
                             " is not applied by llama.cpp's BPE tokenizer");
  }

  const auto base = read_bpe_vocab(model);
  const std::vector<AddedToken> added = read_added_tokens(tj);

  int64_t max_id = -1;
  for (const auto& [tok, id] : base) max_id = std::max(max_id, id);
  for (const auto& a : added) max_id = std::max(max_id, a.id);
  if (max_id < 0) fail(kTokenizerJson, "has an empty vocabulary");
  const int64_t n = target_vocab_size(files.vocab_size, max_id);
  if (max_id >= n)
    fail(kTokenizerJson, "has token id " + std::to_string(max_id) + ", but config.json's vocab_size is " +
                             std::to_string(n) + " (the embedding has no row for it)");

  // tokenizer.vocab (base, then added tokens overriding by content) reversed by id, as
  // get_vocab_base does: an added token's content moves to the added id; any id left without a
  // token becomes [PAD<id>] (UNUSED).
  std::vector<const std::string*> rev(size_t(n), nullptr);
  std::unordered_map<std::string_view, int64_t> base_index;
  base_index.reserve(base.size());
  for (const auto& [tok, id] : base) {
    if (rev[size_t(id)]) fail(kTokenizerJson, "model.vocab gives id " + std::to_string(id) + " to both " + show(*rev[size_t(id)]) + " and " + show(tok));
    rev[size_t(id)] = &tok;
    base_index.emplace(tok, id);
  }
  std::unordered_map<std::string_view, const AddedToken*> added_by_content;
  for (const AddedToken& a : added) added_by_content[a.content] = &a;
  for (const AddedToken& a : added) {
    const auto it = base_index.find(a.content);
    if (it != base_index.end() && it->second != a.id) rev[size_t(it->second)] = nullptr;
  }
  std::vector<const AddedToken*> added_at(size_t(n), nullptr);
  for (const AddedToken& a : added) {
    rev[size_t(a.id)] = &a.content;
    added_at[size_t(a.id)] = &a;
  }

  out.tokens.reserve(size_t(n));
  out.token_type.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const std::string* t = rev[size_t(i)];
    if (!t) {
      out.tokens.push_back(pad_token(i));
      out.token_type.push_back(kTokenUnused);
      continue;
    }
    const auto ai = added_by_content.find(*t);
    if (ai != added_by_content.end()) {
      // added_tokens_decoder[i].special, looked up by id as the converter does
      const AddedToken* a = added_at[size_t(i)] ? added_at[size_t(i)] : ai->second;
      // (The converter also round-trips a non-normalized added token through encode/decode; for an
      // added token that gives back its content, so the content is written as is.)
      if (a->special || looks_special(*t)) {
        out.tokens.push_back(*t);
        out.token_type.push_back(kTokenControl);
      } else {
        out.tokens.push_back(replace_all(*t, kSpmSpace, " "));  // "pre-normalize user-defined spaces"
        out.token_type.push_back(kTokenUserDefined);
      }
    } else {
      out.tokens.push_back(*t);
      out.token_type.push_back(kTokenNormal);
    }
  }

  write_merges(model, base_index, out);

  // pre: from the pre-tokenizer (llama.cpp's own converter hashes a tokenization instead).
  const std::vector<std::string> sig = pre_signature(tj);
  const std::optional<bool> ignore_merges = get_bool(model, "ignore_merges");
  const std::optional<bool> clean = tokenizer_config ? get_bool(*tokenizer_config, "clean_up_tokenization_spaces") : std::nullopt;
  const HfPreTokenizer* known = recognise_pre_tokenizer(sig, ignore_merges.value_or(false), clean.value_or(false));
  std::string pre = known ? known->name : "";
  if (!opt.pre.empty()) {
    pre = opt.pre;
  } else if (pre.empty()) {
    std::string names;
    for (const std::string& s : pre_tokenizer_names()) names += (names.empty() ? "" : ", ") + s;
    fail(kTokenizerJson, "its pre-tokenizer is not known (" + join_signature(sig) + ", ignore_merges " +
                             (ignore_merges.value_or(false) ? "true" : "false") +
                             "); choose llama.cpp's with --tokenizer-pre NAME, one of: " + names);
  }
  out.pre = pre;
  out.model = "gpt2";
  out.kind = VocabKind::ByteLevelBpe;
  out.source = kTokenizerJson;
}

// ---- byte-fallback BPE as gguf-py's LlamaHfVocab reads it (Gemma 4's set_vocab) ----
// The tokens of model.vocab in id order, then the added tokens past them; every score -1000;
// <0xXX> a BYTE, a special token of the tokenizer (all_special_ids) CONTROL, the rest NORMAL (an
// added one USER_DEFINED); the merges. No pre: llama.cpp's loader names it by the model.

// Gemma4Model.set_vocab's tokens always written out (USER_DEFINED), so a chat parser sees them.
const char* const kGemma4VisibleTokens[] = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>",
                                            "<|tool_response>", "<tool_response|>", "<|\"|>"};

void build_hf_bpe_vocab(const json& tj, const json& model, const json* tokenizer_config, const std::string& name,
                        GgufVocab& out) {
  if (!get_bool(model, "byte_fallback").value_or(false))
    fail(kTokenizerJson, "model.byte_fallback is not true: llama.cpp's converter reads a " + name +
                             " vocabulary as byte-fallback BPE only (gguf-py's LlamaHfVocab)");
  const json* dec = member(tj, "decoder");
  if (!dec || get_string(*dec, "type") != "Sequence")
    fail(kTokenizerJson, "decoder is not a Sequence: llama.cpp's converter reads a " + name +
                             " vocabulary as a SentencePiece-style BPE only (gguf-py's LlamaHfVocab)");
  const auto base = read_bpe_vocab(model);
  const int64_t n_base = int64_t(base.size());
  std::vector<const std::string*> rev(size_t(n_base), nullptr);
  std::unordered_map<std::string_view, int64_t> index;
  for (const auto& [tok, id] : base) {
    if (id >= n_base || rev[size_t(id)])
      fail(kTokenizerJson, "model.vocab: " + show(tok) + " has id " + std::to_string(id) +
                               ": the ids must be 0.." + std::to_string(n_base - 1) + ", each once");
    rev[size_t(id)] = &tok;
    index.emplace(tok, id);
  }
  std::vector<AddedToken> added = read_added_tokens(tj), extra;
  for (const AddedToken& a : added) {
    if (a.id < n_base) {
      if (*rev[size_t(a.id)] != a.content)
        fail(kTokenizerJson, "added token " + show(a.content) + " has the id of " + show(*rev[size_t(a.id)]) + " in model.vocab");
      continue;
    }
    extra.push_back(a);
  }
  std::sort(extra.begin(), extra.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  for (size_t i = 0; i < extra.size(); ++i)
    if (extra[i].id != n_base + int64_t(i))
      fail(kTokenizerJson, "added token " + show(extra[i].content) + " has id " + std::to_string(extra[i].id) +
                               ": the converter numbers the added tokens from " + std::to_string(n_base) + " without gaps");
  for (const AddedToken& a : extra) index.emplace(a.content, a.id);
  std::set<int64_t> special_ids;
  std::set<std::string> special_texts;
  auto special = [&](const json& v) {
    const json* c = v.is_object() ? member(v, "content") : &v;
    if (!c || !c->is_string()) return;
    special_texts.insert(c->get<std::string>());
    if (auto it = index.find(c->get_ref<const std::string&>()); it != index.end()) special_ids.insert(it->second);
  };
  // transformers 5's all_special_tokens (Gemma 4 needs it): every named token of tokenizer_config
  // (bos_token ... mask_token and the model's own, sot_token, image_token, ...) and the lists
  // extra_special_tokens / additional_special_tokens (or the values of a dict of them)
  if (tokenizer_config && tokenizer_config->is_object()) {
    for (const auto& [k, v] : tokenizer_config->items()) {
      const bool named = k.size() > 6 && k.compare(k.size() - 6, 6, "_token") == 0 && k.compare(0, 4, "add_") != 0;
      if (named) special(v);
      if ((k == "extra_special_tokens" || k == "additional_special_tokens") && (v.is_array() || v.is_object()))
        for (const json& e : v) special(e);
    }
  }
  auto visible = [&](const std::string& t) {
    return name == "gemma4" && std::find(std::begin(kGemma4VisibleTokens), std::end(kGemma4VisibleTokens), t) !=
                                   std::end(kGemma4VisibleTokens);
  };
  for (int64_t id = 0; id < n_base; ++id) {
    const std::string& t = *rev[size_t(id)];
    out.tokens.push_back(t);
    out.token_type.push_back(visible(t)                ? kTokenUserDefined
                             : is_byte_token(t)        ? kTokenByte
                             : special_ids.count(id)   ? kTokenControl
                                                       : kTokenNormal);
  }
  for (const AddedToken& a : extra) {
    out.tokens.push_back(a.content);
    out.token_type.push_back(!visible(a.content) && special_texts.count(a.content) ? kTokenControl : kTokenUserDefined);
  }
  out.scores.assign(out.tokens.size(), -1000.0f);
  write_merges(model, index, out);
  out.model = name;
  out.kind = VocabKind::ByteFallbackBpe;
  out.source = kTokenizerJson;
}

// ---- SentencePiece-style from tokenizer.json (BPE with byte_fallback, or Unigram) ----

// Whether the HF pipeline puts a "▁" in front of the text (llama.cpp's add_space_prefix):
// normalizer Prepend("▁") (Llama 2 / Mistral legacy files), or a Metaspace pre-tokenizer with
// prepend_scheme always/first (or the old add_prefix_space: true). nullopt: no Metaspace-style
// step at all.
std::optional<bool> prepends_space(const json& tj) {
  std::optional<bool> result;
  std::function<void(const json&, int)> walk_norm = [&](const json& n, int depth) {
    if (depth > 8 || !n.is_object()) return;
    const std::string t = get_string(n, "type");
    if (t == "Sequence") {
      if (const json* l = member(n, "normalizers"); l && l->is_array())
        for (const json& q : *l) walk_norm(q, depth + 1);
    } else if (t == "Prepend" && get_string(n, "prepend") == kSpmSpace) {
      result = true;
    } else if (t == "Replace" && !result) {
      if (const json* p = member(n, "pattern"); p && get_string(*p, "String") == " " && get_string(n, "content") == kSpmSpace)
        result = false;
    }
  };
  std::function<void(const json&, int)> walk_pre = [&](const json& p, int depth) {
    if (depth > 8 || !p.is_object()) return;
    const std::string t = get_string(p, "type");
    if (t == "Sequence") {
      if (const json* l = member(p, "pretokenizers"); l && l->is_array())
        for (const json& q : *l) walk_pre(q, depth + 1);
    } else if (t == "Metaspace") {
      const std::string scheme = get_string(p, "prepend_scheme");
      if (!scheme.empty()) result = scheme != "never";
      else result = get_bool(p, "add_prefix_space").value_or(true);
    }
  };
  if (const json* n = member(tj, "normalizer")) walk_norm(*n, 0);
  if (const json* p = member(tj, "pre_tokenizer")) walk_pre(*p, 0);
  return result;
}

// Token types of a SentencePiece-style vocabulary from tokenizer.json: the unk token UNKNOWN,
// <0xNN> BYTE, added special tokens (and those that look special, as the converter decides)
// CONTROL, other added tokens USER_DEFINED, the rest NORMAL.
int32_t spm_json_type(const std::string& tok, const AddedToken* a, const std::string& unk, bool byte_fallback) {
  if (!unk.empty() && tok == unk) return kTokenUnknown;
  if (byte_fallback && is_byte_token(tok)) return kTokenByte;
  if (a) return a->special || looks_special(tok) ? kTokenControl : kTokenUserDefined;
  return kTokenNormal;
}

// The text written for an added USER_DEFINED token. llama.cpp matches user-defined tokens in the
// raw text, before it escapes spaces to "▁"; HF matches a normalized added token in the
// normalized text (spaces already "▁") and a non-normalized one in the raw text. So "▁" becomes a
// space only for a normalized one. (The converter turns every "▁" into a space, which for
// Gemma's non-normalized "▁▁" tokens would make llama.cpp take a run of spaces whole where HF
// runs its BPE over it.)
std::string user_defined_text(const AddedToken& a) {
  return a.normalized ? replace_all(a.content, kSpmSpace, " ") : a.content;
}

void build_spm_from_json(const json& tj, const json& model, const std::string& model_type, const VocabFiles& files,
                         GgufVocab& out) {
  const std::vector<AddedToken> added = read_added_tokens(tj);
  const bool unigram = model_type == "Unigram";
  const bool byte_fallback = get_bool(model, "byte_fallback").value_or(false);
  std::vector<std::string> base;  // by id, 0..n_base-1
  std::vector<float> base_scores;
  std::string unk;
  if (unigram) {
    const json* v = member(model, "vocab");
    if (!v || !v->is_array()) fail(kTokenizerJson, "model.vocab of a Unigram model is not a list of [piece, score]");
    if (int64_t(v->size()) > kMaxTokens)
      fail(kTokenizerJson, "has " + std::to_string(v->size()) + " tokens; more than the " + std::to_string(kMaxTokens) + " allowed");
    base.reserve(v->size());
    base_scores.reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
        fail(kTokenizerJson, "model.vocab[" + std::to_string(i) + "] is not [piece, score]");
      const double sc = e[1].get<double>();
      if (!std::isfinite(sc) || std::fabs(sc) > 3.0e38)
        fail(kTokenizerJson, "model.vocab[" + std::to_string(i) + "] has a score that is not a finite f32");
      base.push_back(e[0].get<std::string>());
      base_scores.push_back(float(sc));
    }
    if (const std::optional<int64_t> u = get_int(model, "unk_id")) {
      if (*u < 0 || size_t(*u) >= base.size()) fail(kTokenizerJson, "model.unk_id " + std::to_string(*u) + " is outside the vocabulary");
      unk = base[size_t(*u)];
    }
  } else {
    const auto vocab = read_bpe_vocab(model);
    base.assign(vocab.size(), std::string());
    std::vector<bool> have(vocab.size(), false);
    for (const auto& [tok, id] : vocab) {
      // LlamaHfVocab walks ids 0..len(vocab)-1: they must be exactly those.
      if (size_t(id) >= vocab.size())
        fail(kTokenizerJson, "model.vocab ids are not 0.." + std::to_string(vocab.size() - 1) + " (" + show(tok) + " has " + std::to_string(id) + ")");
      if (have[size_t(id)]) fail(kTokenizerJson, "model.vocab gives id " + std::to_string(id) + " to both " + show(base[size_t(id)]) + " and " + show(tok));
      have[size_t(id)] = true;
      base[size_t(id)] = tok;
    }
    unk = get_string(model, "unk_token");
  }
  if (base.empty()) fail(kTokenizerJson, "has an empty vocabulary");
  const int64_t n_base = int64_t(base.size());

  // Added tokens: those inside the base ids re-type a base token; those past it extend the
  // vocabulary and must follow it without gaps (the converter appends them in id order, so a gap
  // would shift every id after it).
  const int64_t config_n = files.vocab_size;
  if (config_n < 0 || config_n > kMaxTokens)
    fail(kConfigJson, "vocab_size " + std::to_string(config_n) + " is outside 1.." + std::to_string(kMaxTokens));
  std::vector<const AddedToken*> added_at(size_t(n_base), nullptr);
  std::vector<const AddedToken*> extra;
  for (const AddedToken& a : added) {
    if (a.id < n_base) {
      if (a.content != base[size_t(a.id)])
        fail(kTokenizerJson, "added token " + show(a.content) + " has id " + std::to_string(a.id) + ", which model.vocab gives to " + show(base[size_t(a.id)]));
      added_at[size_t(a.id)] = &a;
    } else if (config_n > 0 && a.id >= config_n) {
      // As _create_vocab_sentencepiece does with a token past hparams["vocab_size"].
      out.warnings.push_back(std::string(kTokenizerJson) + ": added token " + show(a.content) + " (id " + std::to_string(a.id) +
                             ") is past config.json's vocab_size " + std::to_string(config_n) + "; left out");
    } else {
      extra.push_back(&a);
    }
  }
  std::sort(extra.begin(), extra.end(), [](const AddedToken* x, const AddedToken* y) { return x->id < y->id; });
  for (size_t k = 0; k < extra.size(); ++k)
    if (extra[k]->id != n_base + int64_t(k))
      fail(kTokenizerJson, "added token " + show(extra[k]->content) + " has id " + std::to_string(extra[k]->id) + "; expected " +
                               std::to_string(n_base + int64_t(k)) + " (added tokens must follow the vocabulary without gaps)");
  const int64_t n_real = n_base + int64_t(extra.size());
  if (config_n > 0 && n_base > config_n)
    fail(kTokenizerJson, "has " + std::to_string(n_base) + " tokens, but config.json's vocab_size is " + std::to_string(config_n) +
                             " (the embedding has no row for the rest)");
  const int64_t n = config_n > 0 ? config_n : n_real;

  // Scores.
  // Unigram: its own log probabilities.
  // BPE: HF merges the adjacent pair of lowest merge rank; llama.cpp's SPM tokenizer merges the
  // adjacent pair whose concatenation is a token of highest score. So a piece gets the score
  // -(rank of the first merge that produces it): the merge HF would apply first is the one
  // llama.cpp applies first (ties: both take the leftmost). Every other token — single
  // characters, <0xNN> byte tokens, added / control tokens, pieces no merge produces, [PAD]s —
  // gets -(number of merges), below every merge's score. For a single character the value never
  // matters (llama.cpp starts from characters and only scores concatenations of two symbols); for
  // the rest it keeps llama.cpp from preferring a concatenation HF's merges could not make to one
  // they can, which is the best a score can do (llama.cpp still takes such a token when nothing
  // else is left to merge). All values are integers below 2^24, exact in f32, and no -0.0 is
  // written. llama.cpp's own converter writes -1000 for every token here, and its tokenizer then
  // merges in token-text order instead of merge order.
  std::vector<float> scores(size_t(n), 0.0f);
  std::vector<std::pair<std::string, std::string>> merges;
  float no_merge_score = 0.0f;
  if (unigram) {
    for (int64_t i = 0; i < n_base; ++i) scores[size_t(i)] = base_scores[size_t(i)];
    for (int64_t i = n_base; i < n; ++i) scores[size_t(i)] = -1000.0f;  // the converter's value for added / [PAD] tokens
    out.warnings.push_back(std::string(kTokenizerJson) +
                           ": a Unigram model; llama.cpp's SentencePiece tokenizer merges greedily by score, which can "
                           "segment differently from Unigram's best path");
  } else {
    merges = read_merges(model);
    if (merges.empty()) fail(kTokenizerJson, "a BPE model without merges");
    std::unordered_map<std::string_view, int64_t> index;
    index.reserve(base.size());
    for (int64_t i = 0; i < n_base; ++i) index.emplace(base[size_t(i)], i);
    std::vector<int64_t> rank(size_t(n_base), -1);
    for (size_t r = 0; r < merges.size(); ++r) {
      const auto& [a, b] = merges[r];
      const auto it = index.find(a + b);
      if (!index.count(a) || !index.count(b) || it == index.end())
        fail(kTokenizerJson, "merge " + std::to_string(r) + " " + show(a + " " + b) + " names a token that is not in model.vocab");
      if (rank[size_t(it->second)] < 0) rank[size_t(it->second)] = int64_t(r);
    }
    no_merge_score = -float(int64_t(merges.size()));
    for (int64_t i = 0; i < n; ++i)
      scores[size_t(i)] = i < n_base && rank[size_t(i)] >= 0 ? float(-rank[size_t(i)]) : no_merge_score;
  }

  out.tokens.reserve(size_t(n));
  out.token_type.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    if (i >= n_real) {
      out.tokens.push_back(pad_token(i));
      out.token_type.push_back(kTokenUnused);
      continue;
    }
    const AddedToken* a = i < n_base ? added_at[size_t(i)] : extra[size_t(i - n_base)];
    const std::string& tok = i < n_base ? base[size_t(i)] : a->content;
    const int32_t t = spm_json_type(tok, a, unk, byte_fallback);
    out.tokens.push_back(t == kTokenUserDefined ? user_defined_text(*a) : tok);
    out.token_type.push_back(t);
  }
  out.scores = std::move(scores);

  bool has_all_bytes = true;
  {
    std::unordered_set<std::string_view> all(out.tokens.begin(), out.tokens.end());
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256 && has_all_bytes; ++b) {
      const char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
      has_all_bytes = all.count(std::string_view(buf, 6)) > 0;
    }
  }
  if (!has_all_bytes)
    out.warnings.push_back(std::string(kTokenizerJson) +
                           ": not all 256 <0xNN> byte tokens are in the vocabulary; llama.cpp fails on a character that "
                           "is not in it");
  if (const json* nrm = member(tj, "normalizer")) {
    std::vector<std::string> kinds;
    std::function<void(const json&, int)> walk = [&](const json& x, int d) {
      if (d > 8 || !x.is_object()) return;
      const std::string t = get_string(x, "type");
      if (t == "Sequence") {
        if (const json* l = member(x, "normalizers"); l && l->is_array())
          for (const json& q : *l) walk(q, d + 1);
      } else if (!(t == "Prepend" || (t == "Replace" && get_string(x, "content") == kSpmSpace))) {
        kinds.push_back(t.empty() ? "?" : t);
      }
    };
    walk(*nrm, 0);
    for (const auto& k : kinds)
      out.warnings.push_back(std::string(kTokenizerJson) + ": normalizer " + k + " is not applied by llama.cpp's SentencePiece tokenizer");
  }
  out.add_space_prefix = prepends_space(tj);
  out.model = "llama";
  out.pre = "default";
  out.kind = VocabKind::SentencePiece;
  out.source = kTokenizerJson;
}

// ---- SentencePiece from tokenizer.model (_create_vocab_sentencepiece) ----

void build_spm_from_model(const SpModel& sp, const json* tokenizer_config, const VocabFiles& files, GgufVocab& out) {
  const int64_t n_sp = int64_t(sp.pieces.size());
  if (files.vocab_size < 0 || files.vocab_size > kMaxTokens)
    fail(kConfigJson, "vocab_size " + std::to_string(files.vocab_size) + " is outside 1.." + std::to_string(kMaxTokens));
  const int64_t n = files.vocab_size > 0 ? files.vocab_size : n_sp;
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<float> scores(size_t(n), -10000.0f);
  std::vector<int32_t> types(size_t(n), kTokenUnused);
  for (int64_t i = 0; i < n; ++i) tokens[size_t(i)] = pad_token(i);
  if (n_sp > n)
    out.warnings.push_back(std::string(kTokenizerModel) + ": pieces from id " + std::to_string(n) +
                           " on are past config.json's vocab_size; left out");
  for (int64_t i = 0; i < std::min(n, n_sp); ++i) {
    const SpPiece& p = sp.pieces[size_t(i)];
    tokens[size_t(i)] = p.piece;
    scores[size_t(i)] = p.score;
    // The converter maps a USER_DEFINED piece to NORMAL (it tests only unknown / control / unused
    // / byte); it stays USER_DEFINED here, so that llama.cpp keeps it whole as SentencePiece does.
    types[size_t(i)] = p.type;
  }
  if (tokenizer_config) {
    if (const json* atd = member(*tokenizer_config, "added_tokens_decoder")) {
      if (!atd->is_object()) fail(kTokenizerConfig, "added_tokens_decoder is not an object");
      for (auto it = atd->begin(); it != atd->end(); ++it) {
        const std::string& key = it.key();
        int64_t id = 0;
        bool ok = !key.empty() && key.size() <= 9;
        for (char c : key) ok = ok && c >= '0' && c <= '9';
        if (ok) id = std::stoll(key);
        const json* content = member(it.value(), "content");
        if (!ok || !content || !content->is_string() || content->get_ref<const std::string&>().empty())
          fail(kTokenizerConfig, "added_tokens_decoder entry " + show(key) + " is not {id: {content, ...}}");
        const std::string& text = content->get_ref<const std::string&>();
        if (id >= n) {
          out.warnings.push_back(std::string(kTokenizerConfig) + ": added token " + show(text) + " (id " + std::to_string(id) +
                                 ") is past the vocabulary size " + std::to_string(n) + "; left out");
          continue;
        }
        const bool special = get_bool(it.value(), "special").value_or(false);
        AddedToken a{id, text, special, get_bool(it.value(), "normalized").value_or(!special)};
        const bool same_piece = id < n_sp && sp.pieces[size_t(id)].piece == text;
        if (special || looks_special(text)) {
          types[size_t(id)] = kTokenControl;
          tokens[size_t(id)] = text;
        } else {
          types[size_t(id)] = kTokenUserDefined;
          tokens[size_t(id)] = user_defined_text(a);
        }
        // The converter writes -1000 for every added token; a piece that is only re-typed keeps
        // its SentencePiece score here, so llama.cpp merges into it when SentencePiece would.
        if (!same_piece) scores[size_t(id)] = -1000.0f;
      }
    }
  }
  if (sp.model_type == 1)
    out.warnings.push_back(std::string(kTokenizerModel) +
                           ": a Unigram model; llama.cpp's SentencePiece tokenizer merges greedily by score, which can "
                           "segment differently from Unigram's best path");
  out.tokens = std::move(tokens);
  out.scores = std::move(scores);
  out.token_type = std::move(types);
  if (sp.add_dummy_prefix) out.add_space_prefix = *sp.add_dummy_prefix;
  out.model = "llama";
  out.pre = "default";
  out.kind = VocabKind::SentencePiece;
  out.source = kTokenizerModel;
}

// ---- final checks: what llama.cpp's loader relies on ----

void check_tokens(const GgufVocab& v) {
  const char* file = v.source.c_str();
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& t = v.tokens[i];
    if (t.empty()) fail(file, "token " + std::to_string(i) + " is empty");
    if (t.size() > kMaxTokenBytes) fail(file, "token " + std::to_string(i) + " is " + std::to_string(t.size()) + " bytes long");
    // llama.cpp reads each token as a C string: a NUL would cut it short.
    if (t.find('\0') != std::string::npos) fail(file, "token " + std::to_string(i) + " " + show(t) + " contains a NUL byte");
    const auto [it, fresh] = seen.emplace(t, i);
    // llama.cpp asserts that every token text is distinct (id_to_token.size() == token_to_id.size()).
    if (!fresh)
      fail(file, "tokens " + std::to_string(it->second) + " and " + std::to_string(i) + " are both " + show(t) +
                     " (llama.cpp needs every token text to be distinct)");
  }
}

struct ChatTemplates {
  std::optional<std::string> main;
  std::vector<GgufVocab::NamedTemplate> named;
};

ChatTemplates chat_templates(const json* tc, const VocabFiles& files, std::vector<std::string>& warnings) {
  ChatTemplates out;
  if (!tc || tc->empty()) return out;  // SpecialVocab reads templates only with a tokenizer_config
  auto check = [](const char* file, const std::string& t) {
    if (t.size() > kMaxTemplateBytes)
      fail(file, "chat template is " + std::to_string(t.size()) + " bytes; more than the " + std::to_string(kMaxTemplateBytes) + " allowed");
  };
  const json* ct = member(*tc, "chat_template");
  if (!ct) {
    if (files.chat_template_jinja) {
      std::string t(files.chat_template_jinja->data(), files.chat_template_jinja->size());
      check(kChatTemplateJinja, t);
      out.main = std::move(t);
    }
    return out;
  }
  if (ct->is_string()) {
    check(kTokenizerConfig, ct->get_ref<const std::string&>());
    out.main = ct->get<std::string>();
  } else if (ct->is_array()) {
    // gguf_writer.add_chat_template: "default" -> tokenizer.chat_template, every other named one ->
    // tokenizer.chat_template.<name> (name reduced to [A-Za-z0-9_]), names listed in
    // tokenizer.chat_templates.
    for (const json& e : *ct) {
      std::string name = get_string(e, "name");
      const json* t = member(e, "template");
      if (name.empty() || !t || !t->is_string()) continue;
      for (char& c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) c = '_';
      check(kTokenizerConfig, t->get_ref<const std::string&>());
      if (name == "default") {
        out.main = t->get<std::string>();
      } else {
        bool dup = false;
        for (auto& nt : out.named)
          if (nt.name == name) { nt.text = t->get<std::string>(); dup = true; }
        if (!dup) out.named.push_back({name, t->get<std::string>()});
      }
    }
  } else {
    warnings.push_back(std::string(kTokenizerConfig) + ": chat_template is neither a string nor a list; ignored");
  }
  return out;
}

}  // namespace

GgufVocab build_gguf_vocab(const VocabFiles& files, const VocabOptions& opt) {
  GgufVocab out;
  json tj, tc, cfg, gen;
  if (opt.sentencepiece_only && !files.tokenizer_model && !opt.allow_no_vocab)
    fail("tokenizer.model", "is missing: llama.cpp's converter reads this family's vocabulary from it alone "
                            "(SentencePiece; tokenizer.json is not read)");
  const bool have_tj = files.tokenizer_json.has_value();
  if (have_tj) tj = parse_json_file(kTokenizerJson, *files.tokenizer_json, side_file_bound(kTokenizerJson));
  if (files.tokenizer_config_json) tc = parse_json_file(kTokenizerConfig, *files.tokenizer_config_json, kMaxSmallJsonBytes);
  if (files.config_json) cfg = parse_json_file(kConfigJson, *files.config_json, kMaxSmallJsonBytes);
  if (files.generation_config_json) {
    // The converter reads generation_config.json leniently ("not all models have a valid one").
    try {
      gen = parse_json_file(kGenerationConfig, *files.generation_config_json, side_file_bound(kGenerationConfig));
    } catch (const ConvertError& e) {
      out.warnings.push_back(std::string(e.what()) + "; ignored");
      gen = json();
    }
  }
  if (!opt.pre.empty()) {
    const std::vector<std::string> names = pre_tokenizer_names();
    if (std::find(names.begin(), names.end(), opt.pre) == names.end()) {
      std::string list;
      for (const std::string& s : names) list += (list.empty() ? "" : ", ") + s;
      throw ConvertError("--tokenizer-pre " + opt.pre + ": llama.cpp knows no such pre-tokenizer; one of: " + list);
    }
  }
  const json* tc_ptr = files.tokenizer_config_json ? &tc : nullptr;

  // Which vocabulary: a byte-level BPE tokenizer.json wins (a tokenizer.model beside it would be
  // tiktoken's or stale); else tokenizer.model, as LlamaModel.set_vocab tries SentencePiece first;
  // else a SentencePiece-style tokenizer.json.
  std::string model_type;
  const json* model = nullptr;
  bool byte_level = false;
  if (have_tj) {
    model = member(tj, "model");
    if (!model || !model->is_object()) fail(kTokenizerJson, "has no model object");
    model_type = get_string(*model, "type");
    if (model_type.empty() && member(*model, "merges")) model_type = "BPE";  // very old files omit it
    if (model_type == "BPE") {
      const bool byte_fallback = get_bool(*model, "byte_fallback").value_or(false);
      const bool bl = pre_has_byte_level(pre_signature(tj));
      const json* dec = member(tj, "decoder");
      byte_level = !byte_fallback && (bl || (dec && get_string(*dec, "type") == "ByteLevel"));
      if (!byte_level && !byte_fallback && !prepends_space(tj).has_value())
        fail(kTokenizerJson, "a BPE model that is neither byte-level (no ByteLevel pre-tokenizer) nor SentencePiece-style "
                             "(no byte_fallback, no \xE2\x96\x81 spaces); llama.cpp has no tokenizer for it");
    } else if (model_type == "Unigram") {
    } else if (model_type == "WordPiece" || model_type == "WordLevel") {
      fail(kTokenizerJson, "a " + model_type + " tokenizer (BERT-style); only BPE and SentencePiece vocabularies are supported");
    } else {
      fail(kTokenizerJson, "model type " + show(model_type) + " is not supported (BPE or Unigram)");
    }
  }

  std::optional<SpModel> sp;
  if (!opt.tokenizer_model.empty() && (have_tj || files.tokenizer_model || !opt.allow_no_vocab)) {
    // the family's own (Gemma 4): from tokenizer.json only
    if (!have_tj || model_type != "BPE")
      fail(kTokenizerJson, have_tj ? "is not a BPE model: llama.cpp's converter reads a " + opt.tokenizer_model +
                                         " vocabulary from a byte-fallback BPE tokenizer.json"
                                   : "is missing: llama.cpp's converter reads a " + opt.tokenizer_model +
                                         " vocabulary from it (tokenizer.model is not read)");
    build_hf_bpe_vocab(tj, *model, tc_ptr, opt.tokenizer_model, out);
  } else if (byte_level && !opt.sentencepiece_only) {  // (sentencepiece_only: the tokens from tokenizer.model,
    build_byte_level_bpe(tj, *model, tc_ptr, files, opt, out);
  } else if (files.tokenizer_model) {
    sp = read_sentencepiece(*files.tokenizer_model);
    build_spm_from_model(*sp, tc_ptr, files, out);
  } else if (have_tj && !opt.sentencepiece_only) {  // tokenizer.json only for special tokens, as SpecialVocab reads it)
    build_spm_from_json(tj, *model, model_type, files, out);
  } else if (opt.allow_no_vocab) {
    out.kind = VocabKind::None;
    out.model = "none";  // _set_vocab_none; llama.cpp then takes no tokens
    out.warnings.push_back("no tokenizer.json or tokenizer.model: the file has no vocabulary");
    return out;
  } else {
    throw ConvertError(
        "no tokenizer: the folder has neither tokenizer.json nor tokenizer.model, and llama.cpp needs a vocabulary")
        .advise("The folder has no tokenizer (tokenizer.json or tokenizer.model), which a GGUF carries. Put the "
                "repository's tokenizer files in the folder and load it again.");
  }
  if (out.kind == VocabKind::SentencePiece && !opt.pre.empty())
    out.warnings.push_back("--tokenizer-pre " + opt.pre + " ignored: a SentencePiece vocabulary has no pre-tokenizer (pre stays \"default\")");
  // tokenizer.ggml.add_space_prefix where the family's converter writes it (VocabOptions::space_prefix);
  // else only where llama.cpp's default would tokenize otherwise than the files say
  if (out.kind != VocabKind::SentencePiece || out.add_space_prefix.value_or(true)) out.add_space_prefix.reset();
  if (opt.space_prefix == SpacePrefixKey::TokenizerConfigFirst && tc_ptr)
    if (const std::optional<bool> aps = get_bool(tc, "add_prefix_space")) {  // LlamaModel.set_vocab: it wins
      out.add_space_prefix = *aps;
      out.add_space_prefix_place = GgufVocab::Place::First;
    }
  if (opt.space_prefix == SpacePrefixKey::FalseLast) {
    out.add_space_prefix = false;
    out.add_space_prefix_place = GgufVocab::Place::Last;
  }

  check_tokens(out);

  // Special tokens.
  std::vector<AddedToken> added;
  if (have_tj) added = read_added_tokens(tj);
  SpecialContext sc;
  sc.tokenizer_json = have_tj ? &tj : nullptr;
  sc.tokenizer_config = tc_ptr ? &tc : nullptr;
  sc.config_json = files.config_json ? &cfg : nullptr;
  sc.generation_config = gen.is_object() ? &gen : nullptr;
  sc.added = &added;
  sc.n_vocab = out.tokens.size();
  sc.types = &out.token_type;
  if (sp) sc.model_ids = {{"bos", sp->bos_id}, {"eos", sp->eos_id}, {"unk", sp->unk_id}, {"pad", sp->pad_id}};
  const SpecialIds ids = special_vocab(sc, out.warnings);
  for (const auto& [typ, id] : ids.ids) {
    if (typ == "bos") out.bos_token_id = id;
    else if (typ == "eos") out.eos_token_id = id;
    else if (typ == "unk") out.unknown_token_id = id;
    else if (typ == "sep") out.seperator_token_id = id;
    else if (typ == "pad") out.padding_token_id = id;
    else if (typ == "mask") out.mask_token_id = id;
    else if (typ == "eot") out.eot_token_id = id;
    else if (typ == "eom") out.eom_token_id = id;
    // "cls": gguf-py's writer has no key for it (SpecialVocab skips it with a warning)
  }
  for (const DefaultSpecial& d : opt.default_specials) {
    int64_t id = d.id;
    if (d.text)
      for (const AddedToken& a : added)
        if (a.content == d.text) id = a.id;
    std::optional<uint32_t>* slot = nullptr;
    for (const auto& [typ, s] : std::initializer_list<std::pair<std::string_view, std::optional<uint32_t>*>>{
             {"bos", &out.bos_token_id}, {"eos", &out.eos_token_id}, {"unk", &out.unknown_token_id}, {"eot", &out.eot_token_id}})
      if (typ == d.type) slot = s;
    if (slot && !*slot && id >= 0 && size_t(id) < out.tokens.size()) *slot = uint32_t(id);
  }
  for (const auto& [typ, value] : ids.add) {
    if (typ == "bos" || typ == "eos" || typ == "sep") out.add_token_order.push_back(typ);
    if (typ == "bos") out.add_bos_token = value;
    else if (typ == "eos") out.add_eos_token = value;
    else if (typ == "sep") out.add_sep_token = value;
  }
  if (out.kind == VocabKind::ByteFallbackBpe) {  // Gemma4Model.set_vocab: add_bos_token true, last unless written
    if (!out.add_bos_token) out.add_bos_token_place = GgufVocab::Place::Last;
    out.add_bos_token = true;
  }
  // Beyond the converter: when neither tokenizer_config's add_bos_token nor the post-processor
  // says (e.g. the first Llama 3 release: a plain ByteLevel post-processor and no add_bos_token),
  // the converter writes no add_bos key and llama.cpp falls back to its default for the vocabulary
  // (true for SentencePiece and for "llama-bpe"), while the Hugging Face tokenizer adds a BOS only
  // when its class does so by default. So the key is written with what HF does, as far as the
  // named tokenizer_class tells: its post-processor (which asked for nothing: no BOS), except for
  // the classes that rebuild it with add_bos_token defaulting to true.
  if (!out.add_bos_token && have_tj && files.tokenizer_config_json && out.kind != VocabKind::None) {
    const std::string cls = get_string(tc, "tokenizer_class");
    if (!cls.empty()) {
      static const char* const bos_by_default[] = {"LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer",
                                                   "CodeLlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast"};
      out.add_bos_token = std::find(std::begin(bos_by_default), std::end(bos_by_default), cls) != std::end(bos_by_default);
    }
  }
  if (out.add_bos_token.value_or(false) && !out.bos_token_id && out.kind == VocabKind::ByteLevelBpe)
    out.warnings.push_back("add_bos_token is true but no bos token id was found; llama.cpp would use id 11");

  ChatTemplates ct = chat_templates(tc_ptr, files, out.warnings);
  out.chat_template = std::move(ct.main);
  out.named_chat_templates = std::move(ct.named);
  return out;
}

bool llama_cpp_adds_bos(const GgufVocab& v) {
  if (v.add_bos_token) return *v.add_bos_token;
  if (v.kind == VocabKind::SentencePiece || v.kind == VocabKind::ByteFallbackBpe) return true;
  if (v.kind != VocabKind::ByteLevelBpe) return false;
  const PreTokenizer* p = find_pre_tokenizer(v.pre);
  return p && p->add_bos;
}

VocabSummary summarize_vocab(const GgufVocab& v) {
  VocabSummary s;
  s.kind = v.kind == VocabKind::ByteLevelBpe      ? "byte-level BPE"
           : v.kind == VocabKind::SentencePiece  ? "SentencePiece"
           : v.kind == VocabKind::ByteFallbackBpe ? "byte-fallback BPE"
                                                 : "none";
  s.model = v.model;
  s.pre = v.pre;
  s.source = v.source;
  s.n_tokens = v.tokens.size();
  s.n_merges = v.merges.size();
  const std::pair<const char*, const std::optional<uint32_t>*> specials[] = {
      {"bos", &v.bos_token_id}, {"eos", &v.eos_token_id}, {"unk", &v.unknown_token_id}, {"sep", &v.seperator_token_id},
      {"pad", &v.padding_token_id}, {"mask", &v.mask_token_id}, {"eot", &v.eot_token_id}, {"eom", &v.eom_token_id}};
  for (const auto& [name, id] : specials)
    if (*id && **id < v.tokens.size()) s.specials.push_back({name, **id, v.tokens[**id]});
  s.has_chat_template = v.chat_template.has_value() || !v.named_chat_templates.empty();
  s.adds_bos = llama_cpp_adds_bos(v);
  return s;
}

std::string vocab_summary_line(const GgufVocab& v) {
  const VocabSummary s = summarize_vocab(v);
  if (v.kind == VocabKind::None) return "vocabulary: none";
  std::string line = "vocabulary: " + s.kind + " from " + s.source + " (model " + s.model + ", pre " + s.pre + "), " +
                     std::to_string(s.n_tokens) + " tokens";
  if (s.n_merges) line += ", " + std::to_string(s.n_merges) + " merges";
  for (size_t i = 0; i < s.specials.size(); ++i)
    line += (i ? ", " : "; ") + s.specials[i].name + " " + std::to_string(s.specials[i].id) + " " + show(s.specials[i].text);
  line += std::string("; adds bos: ") + (s.adds_bos ? "yes" : "no");
  line += std::string("; chat template: ") + (s.has_chat_template ? "yes" : "no");
  return line;
}

}  // namespace leapconv
