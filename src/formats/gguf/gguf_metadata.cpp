#include "formats/gguf/gguf_metadata.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>

#include "core/error.h"

namespace leapconv {

namespace {

using json = nlohmann::json;

// Python's str.isdecimal / isalpha per character, for the ASCII model ids are written in (any
// other byte of UTF-8 text counts as a letter, as most non-ASCII characters of names are).
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || static_cast<unsigned char>(c) >= 0x80; }
bool is_word(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }
char lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }
char upper(char c) { return c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c; }
std::string lowered(std::string s) {
  for (char& c : s) c = lower(c);
  return s;
}
bool digits_at(const std::string& s, size_t& i) {  // \d+ from i (advances)
  const size_t from = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  return i > from;
}

// The patterns of get_model_id_components, case-insensitive, each matched whole.
bool version_part(const std::string& p) {  // (v|iter)?\d+([.]\d+)*
  const std::string l = lowered(p);
  size_t i = l.rfind("iter", 0) == 0 ? 4 : (!l.empty() && l[0] == 'v') ? 1 : 0;
  if (!digits_at(l, i)) return false;
  while (i < l.size()) {
    if (l[i] != '.') return false;
    ++i;
    if (!digits_at(l, i)) return false;
  }
  return true;
}
bool type_part(const std::string& p) {  // i?q\d(_\w)*|b?fp?(16|32)
  const std::string l = lowered(p);
  size_t i = (!l.empty() && l[0] == 'i') ? 1 : 0;
  if (i + 1 < l.size() && l[i] == 'q' && is_digit(l[i + 1])) {
    size_t j = i + 2;
    while (j + 1 < l.size() && l[j] == '_' && is_word(l[j + 1])) j += 2;
    if (j == l.size()) return true;
  }
  i = (!l.empty() && l[0] == 'b') ? 1 : 0;
  if (i >= l.size() || l[i] != 'f') return false;
  ++i;
  if (i < l.size() && l[i] == 'p') ++i;
  return l.substr(i) == "16" || l.substr(i) == "32";
}
bool size_part(const std::string& p) {  // (([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl)
  const std::string l = lowered(p);
  for (const char* w : {"small", "mini", "medium", "large", "xl", "xxl"})
    if (l == w) return true;
  size_t i = 0;
  if (!l.empty() && l[0] == 'a') i = 1;
  else {
    size_t j = 0;
    if (digits_at(l, j) && j < l.size() && l[j] == 'x') i = j + 1;
  }
  if (!digits_at(l, i)) return false;
  if (i < l.size() && (l[i] == '.' || l[i] == '_')) {
    ++i;
    if (!digits_at(l, i)) return false;
  }
  if (i >= l.size() || std::string("kmbt").find(l[i]) == std::string::npos) return false;
  ++i;
  if (i < l.size() && is_digit(l[i])) ++i;
  return i == l.size();
}
bool finetune_part(const std::string& p) {
  const std::string l = lowered(p);
  return l == "chat" || l == "instruct" || l == "vision" || l == "lora";
}
// Python's float() of a size's number ("1.5", "7"): false where it would raise.
bool python_float(const std::string& s, double* v) {
  size_t i = 0;
  if (!digits_at(s, i)) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i != s.size()) return false;
  *v = std::strtod(s.c_str(), nullptr);
  return true;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : "-") + x;
  return s;
}

}  // namespace

std::string id_to_title(const std::string& id) {
  std::string spaced = id, out;
  std::replace(spaced.begin(), spaced.end(), '-', ' ');
  auto is_lower = [](char c) { return c >= 'a' && c <= 'z'; };
  auto is_upper = [](char c) { return c >= 'A' && c <= 'Z'; };
  size_t at = 0;
  while (at < spaced.size()) {
    while (at < spaced.size() && spaced[at] == ' ') ++at;
    const size_t end = std::min(spaced.find(' ', at), spaced.size());
    if (end == at) break;
    std::string w = spaced.substr(at, end - at);
    at = end;
    const bool all_lower = std::any_of(w.begin(), w.end(), is_lower) && std::none_of(w.begin(), w.end(), is_upper);
    const bool version = is_digit(w[0]) || (w[0] == 'v' && version_part(w) && lowered(w).rfind("iter", 0) != 0);
    if (all_lower && !version) {
      bool prev_letter = false;  // str.title: a letter after a non-letter upper, after a letter lower
      for (char& c : w) {
        const bool letter = is_lower(c) || is_upper(c);
        if (letter) c = prev_letter ? lower(c) : upper(c);
        prev_letter = letter;
      }
    }
    out += (out.empty() ? "" : " ") + w;
  }
  return out;
}

ModelIdParts model_id_components(const std::string& model_id, int64_t total_params) {
  ModelIdParts r;
  if (model_id.find(' ') != std::string::npos) {  // a sentence: a name only
    r.has_name = true;
    r.name = model_id;
    return r;
  }
  std::string full = model_id;
  if (const size_t slash = model_id.find('/'); slash != std::string::npos) {
    r.org = model_id.substr(0, slash);
    r.has_org = r.org.empty() || r.org[0] != '.';  // ('./x', '../x': a path, no organization)
    if (!r.has_org) r.org.clear();
    full = model_id.substr(slash + 1);
  }
  r.has_name = true;
  r.name = full;

  std::vector<std::string> parts;
  for (size_t at = 0; at <= full.size();) {
    const size_t dash = std::min(full.find('-', at), full.size());
    if (dash > at) parts.push_back(full.substr(at, dash - at));
    at = dash + 1;
  }
  std::vector<std::set<std::string>> types(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string& part = parts[i];
    if (version_part(part)) {
      types[i].insert("version");
    } else if (type_part(part)) {
      types[i].insert("type");
      for (char& c : part) c = upper(c);
    } else if (i > 0 && size_part(part)) {
      std::replace(part.begin(), part.end(), '_', '.');
      if (is_digit(part.back()))  // bloom-7b1: 7.1b
        part = part.substr(0, part.size() - 2) + "." + part.back() + part[part.size() - 2];
      if (part.size() > 1 && is_digit(part[part.size() - 2]) && std::string("kmbt").find(part.back()) != std::string::npos)
        part.back() = upper(part.back());
      double number = 0;
      if (total_params != 0 && python_float(part.substr(0, part.size() - 1), &number)) {
        const int64_t k = int64_t(std::string(" KMBT").find(part.back()));  // (npos: -1, 1000^-1)
        const double label = number * (k == -1 ? 0.001 : std::pow(1000.0, double(k)));
        // a size far from the model's (a context length, "32k"): a finetune, lowercased
        const bool far = (total_params < 0 && label < double((-total_params) / 8)) ||
                         (total_params > 0 && std::fabs(label - double(total_params)) > double(7 * total_params / 8));
        if (far) {
          types[i].insert("finetune");
          part.back() = lower(part.back());
        }
      }
      if (types[i].empty()) types[i].insert("size_label");
    } else if (i > 0 && finetune_part(part)) {
      types[i].insert(total_params < 0 && lowered(part) == "lora" ? "type" : "finetune");
    }
  }
  // word sizes ("small") are not sizes when a number is one
  bool number_size = false;
  for (size_t i = 0; i < parts.size(); ++i)
    if (types[i].count("size_label") && std::any_of(parts[i].begin(), parts[i].end(), is_digit)) number_size = true;
  if (number_size)
    for (size_t i = 0; i < parts.size(); ++i)
      if (types[i].count("size_label") && std::all_of(parts[i].begin(), parts[i].end(), is_alpha)) types[i].erase("size_label");
  bool at_start = true;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (at_start && ((types[i].empty() && is_alpha(parts[i][0])) || types[i].count("version"))) {
      types[i].insert("basename");
    } else {
      at_start = false;
      if (types[i].empty()) types[i].insert("finetune");
    }
  }
  for (size_t i = parts.size(); i-- > 0;) {  // a trailing version is not the basename's
    if (types[i].count("basename") && types[i].size() > 1) types[i].erase("basename");
    else break;
  }
  std::vector<std::string> basename, size, finetune, version;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (types[i].count("basename")) basename.push_back(parts[i]);
    if (types[i].count("size_label") && std::find(size.begin(), size.end(), parts[i]) == size.end()) size.push_back(parts[i]);
    if (types[i].count("finetune")) finetune.push_back(parts[i]);
    if (types[i].count("version") && !types[i].count("basename")) version.push_back(parts[i]);
  }
  r.size_label = join(size), r.finetune = join(finetune), r.version = join(version);
  if (!r.size_label.empty() || !r.finetune.empty() || !r.version.empty()) r.basename = join(basename);  // else too ambiguous
  return r;
}

namespace {

// gguf-py's Metadata: each attribute None (null) until something sets it.
struct Meta {
  std::map<std::string, json> v;
  bool has(const std::string& k) const { return v.count(k) && !v.at(k).is_null(); }
};

// A base model's or a dataset's entry from a model card's id or URL (apply_metadata_heuristic).
json source_entry(const json& id, int64_t total_params, std::vector<std::string>* warnings, const char* what) {
  json e = json::object();
  if (id.is_object()) return id;
  if (!id.is_string()) {
    warnings->push_back(std::string("README.md: a ") + what + " entry that is neither text nor a mapping: an empty entry, as llama.cpp's converter writes it");
    return e;
  }
  const std::string s = id.get<std::string>();
  auto parts_into = [&](const std::string& model_id, bool with_repo) {
    const ModelIdParts p = model_id_components(model_id, total_params);
    if (p.has_name) e["name"] = id_to_title(p.name);
    if (p.has_org) e["organization"] = id_to_title(p.org);
    if (!p.version.empty()) e["version"] = p.version;
    if (with_repo && p.has_org && p.has_name) e["repo_url"] = "https://huggingface.co/" + p.org + "/" + p.name;
  };
  if (s.rfind("http://", 0) == 0 || s.rfind("https://", 0) == 0 || s.rfind("ssh://", 0) == 0) {
    e["repo_url"] = s;
    if (s.find("huggingface.co") != std::string::npos) {  // https?://huggingface.co/([^/]+/[^/]+)$
      const std::string prefix = s.rfind("https://", 0) == 0 ? "https://huggingface.co/" : "http://huggingface.co/";
      if (s.rfind(prefix, 0) == 0) {
        const std::string rest = s.substr(prefix.size());
        const size_t slash = rest.find('/');
        if (slash != std::string::npos && slash > 0 && slash + 1 < rest.size() && rest.find('/', slash + 1) == std::string::npos &&
            rest.find('\n') == std::string::npos)
          parts_into(rest, false);
      }
    }
  } else {
    parts_into(s, true);
  }
  return e;
}

void name_heuristics(Meta& m, const std::string& model_id, int64_t total_params) {
  const ModelIdParts p = model_id_components(model_id, total_params);
  if (!m.has("name") && p.has_name) m.v["name"] = id_to_title(p.name);
  if (!m.has("organization") && p.has_org) m.v["organization"] = id_to_title(p.org);
  if (!m.has("basename") && !p.basename.empty()) m.v["basename"] = p.basename;
  if (!m.has("finetune") && !p.finetune.empty()) m.v["finetune"] = p.finetune;
  if (!m.has("version") && !p.version.empty()) m.v["version"] = p.version;
  if (!m.has("size_label") && !p.size_label.empty()) m.v["size_label"] = p.size_label;
}

void model_card_heuristics(Meta& m, const json& card, int64_t total_params, std::vector<std::string>* warnings) {
  auto use = [&](const char* attr, const char* key) {
    if (card.contains(key) && !m.has(attr)) m.v[attr] = card[key];
  };
  auto use_array = [&](const char* attr, const char* key) {  // appends
    if (!card.contains(key) || card[key].is_null()) return;
    json cur = m.has(attr) ? m.v[attr] : json::array();
    if (card[key].is_string()) cur.push_back(card[key]);
    else if (card[key].is_array())
      for (const json& x : card[key]) cur.push_back(x);
    m.v[attr] = cur;
  };
  // llama.cpp's own keys, then with model_ in front, then Hugging Face's that some cards use
  static const char* const kOwn[][2] = {{"name", "name"}, {"author", "author"}, {"version", "version"},
                                        {"organization", "organization"}, {"description", "description"},
                                        {"finetune", "finetune"}, {"basename", "basename"}, {"size_label", "size_label"},
                                        {"source_url", "url"}, {"source_doi", "doi"}, {"source_uuid", "uuid"},
                                        {"source_repo_url", "repo_url"}};
  for (const auto& k : kOwn) use(k[0], k[1]);
  for (const auto& k : kOwn) use(k[0], ("model_" + std::string(k[1])).c_str());
  use("name", "model_name");
  use("author", "model_creator");
  use("basename", "model_type");

  auto sources = [&](const char* attr, std::initializer_list<const char*> keys, const char* what) {
    const json* value = nullptr;
    for (const char* k : keys)
      if (card.contains(k)) {
        value = &card[k];
        break;
      }
    if (!value) return;
    json list = m.has(attr) ? m.v[attr] : json::array();
    std::vector<json> ids;
    if (value->is_string()) ids.push_back(*value);
    else if (value->is_array()) ids.assign(value->begin(), value->end());
    for (const json& id : ids) list.push_back(source_entry(id, total_params, warnings, what));
    m.v[attr] = list;
  };
  sources("base_models", {"base_model", "base_models", "base_model_sources"}, "base model");
  sources("datasets", {"datasets", "dataset", "dataset_sources"}, "dataset");

  use("license", "license");
  use("license_name", "license_name");
  use("license_link", "license_link");
  use_array("tags", "tags");
  use_array("tags", "pipeline_tag");
  use_array("languages", "languages");
  use_array("languages", "language");
}

// Python's truth of a value: gguf-py's add_string writes nothing for a false one ("", 0, [], ...).
bool falsy(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v.get<double>() == 0.0) ||
         (v.is_string() && v.get<std::string>().empty()) || ((v.is_array() || v.is_object()) && v.empty());
}

// One text key, or a warning where the converter would stop at a value that is not text.
void put_text(GgufMetadata& kv, const std::string& key, const json& v, const char* from, std::vector<std::string>* w) {
  if (falsy(v)) return;
  if (v.is_string()) kv.set_string(key, v.get<std::string>());
  else
    w->push_back(std::string(from) + ": " + key + " is not text (" + v.dump().substr(0, 40) + "): left out (llama.cpp's converter stops at it)");
}

// gguf-py's add_array: types by the elements (all text, all booleans, all whole numbers as
// int32, all numbers as float32); empty: not written.
enum class ArrayKind { Mixed, Text, Bool, Int32, Float };
ArrayKind array_kind(const json& list) {
  auto all = [&](auto pred) { return std::all_of(list.begin(), list.end(), pred); };
  if (all([](const json& x) { return x.is_string(); })) return ArrayKind::Text;
  if (all([](const json& x) { return x.is_boolean(); })) return ArrayKind::Bool;
  if (all([](const json& x) { return x.is_number_integer() && x.get<int64_t>() >= INT32_MIN && x.get<int64_t>() <= INT32_MAX; }))
    return ArrayKind::Int32;
  if (all([](const json& x) { return x.is_number_float(); })) return ArrayKind::Float;
  return ArrayKind::Mixed;
}
void put_array(GgufMetadata& kv, const std::string& key, const json& list, std::vector<std::string>* w) {
  if (!list.is_array() || list.empty()) return;
  const ArrayKind k = array_kind(list);
  if (k == ArrayKind::Text) {
    std::vector<std::string> s;
    for (const json& x : list) s.push_back(x.get<std::string>());
    kv.set_string_array(key, std::move(s));
  } else if (k == ArrayKind::Bool) {
    std::vector<bool> b;
    for (const json& x : list) b.push_back(x.get<bool>());
    kv.set_bool_array(key, b);
  } else if (k == ArrayKind::Int32) {
    std::vector<int32_t> n;
    for (const json& x : list) n.push_back(int32_t(x.get<int64_t>()));
    kv.set_i32_array(key, n);
  } else if (k == ArrayKind::Float) {
    std::vector<float> f;
    for (const json& x : list) f.push_back(float(x.get<double>()));
    kv.set_f32_array(key, f);
  } else {
    w->push_back("README.md: " + key + " mixes kinds of values (" + list.dump().substr(0, 60) +
                 "): left out (llama.cpp's converter stops at it)");
  }
}

// Metadata.load's override keys (general.* in the --metadata file) and the attribute each sets.
const char* const kOverride[][2] = {
    {"name", "general.name"}, {"author", "general.author"}, {"version", "general.version"},
    {"organization", "general.organization"}, {"finetune", "general.finetune"}, {"basename", "general.basename"},
    {"description", "general.description"}, {"quantized_by", "general.quantized_by"}, {"size_label", "general.size_label"},
    {"license_name", "general.license.name"}, {"license_link", "general.license.link"}, {"url", "general.url"},
    {"doi", "general.doi"}, {"uuid", "general.uuid"}, {"repo_url", "general.repo_url"},
    {"source_url", "general.source.url"}, {"source_doi", "general.source.doi"}, {"source_uuid", "general.source.uuid"},
    {"source_repo_url", "general.source.repo_url"}, {"base_models", "general.base_models"},
    {"datasets", "general.datasets"}, {"tags", "general.tags"}, {"languages", "general.languages"}};

struct SamplingKey {
  const char* from;  // generation_config.json's key
  const char* key;   // general.sampling.<key>
  char kind;         // 's' text, 'i' int32, 'f' float32
};
const SamplingKey kSampling[] = {
    {"sequence", "sequence", 's'},     {"top_k", "top_k", 'i'},
    {"top_p", "top_p", 'f'},           {"min_p", "min_p", 'f'},
    {"xtc_probability", "xtc_probability", 'f'}, {"xtc_threshold", "xtc_threshold", 'f'},
    {"temperature", "temp", 'f'},      {"penalty_last_n", "penalty_last_n", 'i'},
    {"penalty_repeat", "penalty_repeat", 'f'},   {"mirostat", "mirostat", 'i'},
    {"mirostat_tau", "mirostat_tau", 'f'},       {"mirostat_eta", "mirostat_eta", 'f'},
};

}  // namespace

void set_general_metadata(GgufMetadata& kv, const GeneralSources& in, std::vector<std::string>* warnings) {
  Meta m;
  if (in.card.is_object()) model_card_heuristics(m, in.card, in.total_params, warnings);
  if (in.config.is_object() && in.config.contains("_name_or_path") && in.config["_name_or_path"].is_string()) {
    const std::string id = in.config["_name_or_path"].get<std::string>();
    if (std::count(id.begin(), id.end(), '/') <= 1) name_heuristics(m, id, in.total_params);  // a model id, not a path
  }
  name_heuristics(m, in.folder, in.total_params);
  // the --metadata file's keys (after generation_config.json's, as Metadata.load reads them), then
  // --model-name; then prepare_metadata's fallbacks
  if (in.override.values.is_object())
    for (const auto& [attr, key] : kOverride)
      if (in.override.values.contains(key)) m.v[attr] = in.override.values[key];
  if (in.override.model_name) m.v["name"] = *in.override.model_name;
  if (!m.has("name")) m.v["name"] = in.folder;
  if (!m.has("size_label") && in.total_params > 0 && !in.computed_size_label.empty()) m.v["size_label"] = in.computed_size_label;

  // general.sampling.*: generation_config.json's values (repetition_penalty for penalty_repeat),
  // each replaced by the --metadata file's where it has the key
  const json& o = in.override.values.is_object() ? in.override.values : json::object();
  if (in.generation.is_object() || !o.empty()) {
    const json& g = in.generation.is_object() ? in.generation : json::object();
    for (const SamplingKey& s : kSampling) {
      const std::string key = std::string("general.sampling.") + s.key;
      const json* v = g.contains(s.from) ? &g[s.from] : nullptr;
      if (!v && std::string(s.from) == "penalty_repeat" && g.contains("repetition_penalty")) v = &g["repetition_penalty"];
      if (o.contains(key)) v = &o[key];
      if (!v || v->is_null()) continue;
      // (json's booleans are Python's: True packs as 1; a whole number past int32 fails struct.pack there)
      const bool whole = v->is_boolean() || (v->is_number_unsigned() && v->get<uint64_t>() <= uint64_t(INT32_MAX)) ||
                         (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() >= INT32_MIN &&
                          v->get<int64_t>() <= INT32_MAX);
      const double number = v->is_boolean() ? double(v->get<bool>()) : v->is_number() ? v->get<double>() : 0.0;
      if (s.kind == 's' && falsy(*v)) continue;  // (add_string writes no false value)
      if (s.kind == 's' && v->is_string()) kv.set_string(key, v->get<std::string>());
      else if (s.kind == 'i' && whole) kv.set_i32(key, int32_t(v->is_boolean() ? int64_t(v->get<bool>()) : v->get<int64_t>()));
      else if (s.kind == 'f' && (v->is_boolean() || v->is_number()) && std::isfinite(float(number)))
        kv.set_f32(key, float(number));
      else
        warnings->push_back("generation_config.json: " + std::string(s.from) + " is " + v->dump().substr(0, 40) +
                            ", not " + (s.kind == 's' ? "text" : s.kind == 'i' ? "a 32-bit whole number" : "a number") +
                            ": " + key + " left out (llama.cpp's converter stops at it)");
    }
  }

  static const char* const kText[][2] = {
      {"name", "general.name"}, {"author", "general.author"}, {"version", "general.version"},
      {"organization", "general.organization"}, {"finetune", "general.finetune"}, {"basename", "general.basename"},
      {"description", "general.description"}, {"quantized_by", "general.quantized_by"}, {"size_label", "general.size_label"}};
  for (const auto& t : kText)
    if (m.has(t[0])) put_text(kv, t[1], m.v[t[0]], "README.md", warnings);
  if (m.has("license")) {
    const json& l = m.v["license"];
    if (l.is_array()) {
      std::vector<std::string> names;
      for (const json& x : l)
        if (x.is_string()) names.push_back(x.get<std::string>());
      std::string joined;
      for (size_t i = 0; i < names.size(); ++i) joined += (i ? "," : "") + names[i];
      if (names.size() == l.size()) put_text(kv, "general.license", joined, "README.md", warnings);
      else warnings->push_back("README.md: license lists a value that is not text: left out (llama.cpp's converter stops at it)");
    } else {
      put_text(kv, "general.license", l, "README.md", warnings);
    }
  }
  static const char* const kLater[][2] = {
      {"license_name", "general.license.name"}, {"license_link", "general.license.link"}, {"url", "general.url"},
      {"doi", "general.doi"}, {"uuid", "general.uuid"}, {"repo_url", "general.repo_url"},
      {"source_url", "general.source.url"}, {"source_doi", "general.source.doi"},
      {"source_uuid", "general.source.uuid"}, {"source_repo_url", "general.source.repo_url"}};
  for (const auto& t : kLater)
    if (m.has(t[0])) put_text(kv, t[1], m.v[t[0]], "README.md", warnings);
  for (const auto& [attr, prefix] : {std::pair{"base_models", "general.base_model"}, std::pair{"datasets", "general.dataset"}}) {
    if (!m.has(attr)) continue;
    const json& list = m.v[attr];
    kv.set_u32(std::string(prefix) + ".count", uint32_t(list.size()));
    for (size_t i = 0; i < list.size(); ++i)
      for (const char* f : {"name", "author", "version", "organization", "description", "url", "doi", "uuid", "repo_url"})
        if (list[i].is_object() && list[i].contains(f))
          put_text(kv, std::string(prefix) + "." + std::to_string(i) + "." + f, list[i][f], "README.md", warnings);
  }
  if (m.has("tags")) put_array(kv, "general.tags", m.v["tags"], warnings);
  if (m.has("languages")) put_array(kv, "general.languages", m.v["languages"], warnings);
}

void check_metadata_override(const MetadataOverride& o, std::vector<std::string>* ignored) {
  if (o.values.is_null()) return;
  if (!o.values.is_object()) throw ConvertError(o.file, "", "must hold a JSON object of general.* keys");
  auto fail = [&](const std::string& key, const std::string& what) { throw ConvertError(o.file, key, what + " (llama.cpp's converter stops at it)"); };
  auto text = [&](const std::string& key, const json& v) {
    if (!v.is_null() && !v.is_string()) fail(key, "is " + v.dump().substr(0, 40) + ", not text");
  };
  // add_array: the kinds put_array writes (array_kind)
  auto array = [&](const std::string& key, const json& v) {
    if (v.is_null()) return;
    if (!v.is_array()) fail(key, "is " + v.dump().substr(0, 40) + ", not a list");
    if (!v.empty() && array_kind(v) == ArrayKind::Mixed) fail(key, "mixes kinds of values");
  };
  for (const auto& [key, v] : o.values.items()) {
    bool read = false;
    for (const auto& [attr, k] : kOverride) {
      if (key != k) continue;
      read = true;
      if (key == "general.tags" || key == "general.languages") {
        array(key, v);
      } else if (key == "general.base_models" || key == "general.datasets") {  // entries of text fields
        if (v.is_null()) continue;
        if (!v.is_array()) fail(key, "is " + v.dump().substr(0, 40) + ", not a list of entries");
        for (size_t i = 0; i < v.size(); ++i) {
          if (!v[i].is_object()) fail(key + "[" + std::to_string(i) + "]", "is not an entry ({\"name\": ...})");
          for (const char* f : {"name", "author", "version", "organization", "description", "url", "doi", "uuid", "repo_url"})
            if (v[i].contains(f)) text(key + "[" + std::to_string(i) + "]." + f, v[i][f]);
        }
      } else {
        text(key, v);
      }
    }
    for (const SamplingKey& s : kSampling) {
      if (key != std::string("general.sampling.") + s.key) continue;
      read = true;
      const bool whole = v.is_number_integer() && v.get<int64_t>() >= INT32_MIN && v.get<int64_t>() <= INT32_MAX;
      if (v.is_null()) continue;
      if (s.kind == 's') text(key, v);
      else if (s.kind == 'i' && !whole && !v.is_boolean()) fail(key, "is " + v.dump().substr(0, 40) + ", not a 32-bit whole number");
      else if (s.kind == 'f' && !v.is_number() && !v.is_boolean()) fail(key, "is " + v.dump().substr(0, 40) + ", not a number");
    }
    if (!read && ignored) ignored->push_back(key);
  }
}

}  // namespace leapconv
