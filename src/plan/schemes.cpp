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

const QuantType* find_scheme_type(const std::string& s, TypeFilter ok) {
  const QuantType* t = find_quant_type(s);
  return t && ok(*t) ? t : nullptr;
}

std::string scheme_type_names(TypeFilter ok) {
  std::string s;
  for (const QuantType& t : quant_types())
    if (ok(t)) s += (s.empty() ? "" : ", ") + std::string(t.short_name);
  return s;
}

std::vector<SchemeRule> parse_scheme_rules(const std::string& file, const std::string& text, TypeFilter ok) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw ConvertError(file, "", "not valid JSON");
  if (j.is_object() && j.contains("rules")) j = j["rules"];
  std::vector<SchemeRule> rules;
  auto add = [&](const nlohmann::json& pat, const nlohmann::json& sch) {
    const QuantType* t = sch.is_string() ? find_scheme_type(sch.get<std::string>(), ok) : nullptr;
    if (!pat.is_string() || !t)
      throw ConvertError(file, "", "each rule needs a string pattern and a scheme of " + scheme_type_names(ok));
    if (pat.get<std::string>().empty()) throw ConvertError(file, "", "a rule's pattern is empty");
    rules.push_back({pat.get<std::string>(), t->id});
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
