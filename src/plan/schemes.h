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

// A type a GGUF-lite scheme may name (f32, f16, q8, q4, or their long names); false if unknown.
bool parse_scheme(const std::string& s, QType* out);
// "f32, f16, q8, q4": the names parse_scheme takes, for messages.
std::string scheme_names();
// Parses a --schemes file: [{"pattern": "*.mlp.*", "scheme": "q4"}, ...] or {"glob": "scheme"}.
std::vector<SchemeRule> parse_scheme_rules(const std::string& file, const std::string& text);

}  // namespace leapconv
