#include "plan/schemes.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace leapconv {

bool glob_match(const std::string& p, const std::string& s) {
  size_t pi = 0, si = 0, star = std::string::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) { ++pi; ++si; }
    else if (pi < p.size() && p[pi] == '*') { star = pi++; mark = si; }
    else if (star != std::string::npos) { pi = star + 1; si = ++mark; }
    else return false;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

int matching_rule(const std::vector<SchemeRule>& rules, const std::string& name) {
  for (size_t i = 0; i < rules.size(); ++i)
    if (glob_match(rules[i].pattern, name)) return int(i);
  return -1;
}

bool parse_scheme(const std::string& s, QType* out) {
  const QuantType* t = find_quant_type(s);
  if (!t || t->gguf_lite_code < 0) return false;
  *out = t->id;
  return true;
}

std::string scheme_names() {
  std::string s;
  for (const QuantType& t : quant_types())
    if (t.gguf_lite_code >= 0) s += (s.empty() ? "" : ", ") + std::string(t.short_name);
  return s;
}

std::vector<SchemeRule> parse_scheme_rules(const std::string& file, const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw ConvertError(file, "", "not valid JSON");
  if (j.is_object() && j.contains("rules")) j = j["rules"];
  std::vector<SchemeRule> rules;
  auto add = [&](const nlohmann::json& pat, const nlohmann::json& sch) {
    QType t;
    if (!pat.is_string() || !sch.is_string() || !parse_scheme(sch.get<std::string>(), &t))
      throw ConvertError(file, "", "each rule needs a string pattern and a scheme of " + scheme_names());
    rules.push_back({pat.get<std::string>(), t});
  };
  if (j.is_array()) {
    for (const auto& r : j) {
      if (!r.is_object() || !r.contains("pattern") || !r.contains("scheme"))
        throw ConvertError(file, "", "rules must be objects {\"pattern\": ..., \"scheme\": ...}");
      add(r["pattern"], r["scheme"]);
    }
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) add(nlohmann::json(it.key()), *it);
  } else {
    throw ConvertError(file, "", "expected a list of rules");
  }
  return rules;
}

}  // namespace leapconv
