// Scheme rules: which quant type each tensor gets, by glob over tensor names (first match
// wins), as the CLI's --schemes file and the page's scheme editor state them.
#pragma once
#include <string>
#include <vector>

#include "quant/quant_types.h"

namespace leapconv {

struct SchemeRule {
  std::string pattern;  // glob over tensor names: * any run, ? one character
  QType type;
};

bool glob_match(const std::string& pattern, const std::string& name);
// The index of the first rule that matches `name`, or -1.
int matching_rule(const std::vector<SchemeRule>& rules, const std::string& name);

// Which types a format's schemes may name.
using TypeFilter = bool (*)(const QuantType& t);
// The type `s` names (name or short name, any case) if the filter takes it; null otherwise.
const QuantType* find_scheme_type(const std::string& s, TypeFilter ok);
// "f32, f16, q8, q4": the names the filter takes, for messages.
std::string scheme_type_names(TypeFilter ok);
// Parses a --schemes file: [{"pattern": "*.mlp.*", "scheme": "q4"}, ...] or {"glob": "scheme"}.
std::vector<SchemeRule> parse_scheme_rules(const std::string& file, const std::string& text, TypeFilter ok);

}  // namespace leapconv
