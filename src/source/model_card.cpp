#include "source/model_card.h"

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <vector>

namespace leapconv {

namespace {

// What the subset does not read, or PyYAML would refuse: names the line (1 = the first line after "---").
struct CardError {
  size_t line;
  std::string what;
};

// Python's str.splitlines() of text read with universal newlines (\r\n and \r are \n): also
// \v, \f, \x1c-\x1e, U+0085, U+2028 and U+2029 end a line.
std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t skip = 0;
    if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) skip = 1;
    else if (c == '\r') skip = (i + 1 < s.size() && s[i + 1] == '\n') ? 2 : 1;
    else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) skip = 2;
    else if (c == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
             (static_cast<unsigned char>(s[i + 2]) == 0xa8 || static_cast<unsigned char>(s[i + 2]) == 0xa9))
      skip = 3;
    if (!skip) {
      cur += char(c);
      continue;
    }
    lines.push_back(std::move(cur));
    cur.clear();
    i += skip - 1;
  }
  if (!cur.empty()) lines.push_back(std::move(cur));
  return lines;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (!n || c > 0xf4 || i + size_t(n) > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += size_t(n);
  }
  return true;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// PyYAML's implicit resolvers (YAML 1.1) for a plain scalar, written out by hand (std::regex
// recurses per character: a long value would exhaust the stack). Sexagesimal numbers ("1:30")
// and timestamps stay text.
bool all_of_chars(const std::string& s, size_t from, const char* set) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i)
    if (!std::strchr(set, s[i]) || s[i] == '\0') return false;
  return true;
}
// [eE][-+][0-9]+ from `at` to the end (or nothing at all)
bool exponent_from(const std::string& s, size_t at) {
  if (at == s.size()) return true;
  return at + 1 < s.size() && (s[at] == 'e' || s[at] == 'E') && (s[at + 1] == '-' || s[at + 1] == '+') &&
         all_of_chars(s, at + 2, "0123456789");
}
bool yaml_float(const std::string& v) {
  size_t i = (!v.empty() && (v[0] == '-' || v[0] == '+')) ? 1 : 0;
  const std::string body = v.substr(i);
  if (body == ".inf" || body == ".Inf" || body == ".INF") return true;
  if (i == 0 && (body == ".nan" || body == ".NaN" || body == ".NAN")) return true;
  if (!body.empty() && body[0] == '.') {  // \.[0-9_]+ (unsigned only)
    if (i) return false;
    size_t e = 1;
    while (e < body.size() && (std::isdigit(static_cast<unsigned char>(body[e])) || body[e] == '_')) ++e;
    return e > 1 && exponent_from(body, e);
  }
  if (body.empty() || !std::isdigit(static_cast<unsigned char>(body[0]))) return false;
  size_t e = 1;
  while (e < body.size() && (std::isdigit(static_cast<unsigned char>(body[e])) || body[e] == '_')) ++e;
  if (e == body.size() || body[e] != '.') return false;
  ++e;
  while (e < body.size() && (std::isdigit(static_cast<unsigned char>(body[e])) || body[e] == '_')) ++e;
  return exponent_from(body, e);
}

nlohmann::json resolve_plain(const std::string& v) {
  if (v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL") return nullptr;
  for (const char* t : {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
    if (v == t) return true;
  for (const char* f : {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"})
    if (v == f) return false;
  const size_t s = (v[0] == '-' || v[0] == '+') ? 1 : 0;
  int base = 0;
  size_t digits = s;
  if (v.compare(s, 2, "0b") == 0 && all_of_chars(v, s + 2, "01_")) base = 2, digits = s + 2;
  else if (v.compare(s, 2, "0x") == 0 && all_of_chars(v, s + 2, "0123456789abcdefABCDEF_")) base = 16, digits = s + 2;
  else if (v.size() == s + 1 && v[s] == '0') base = 10;
  else if (v.size() > s + 1 && v[s] == '0' && all_of_chars(v, s + 1, "01234567_")) base = 8, digits = s + 1;
  else if (v.size() > s && v[s] >= '1' && v[s] <= '9' && (v.size() == s + 1 || all_of_chars(v, s + 1, "0123456789_"))) base = 10;
  if (base) {
    std::string d;
    for (size_t i = digits; i < v.size(); ++i)
      if (v[i] != '_') d += v[i];
    errno = 0;
    const unsigned long long u = d.empty() ? 0 : std::strtoull(d.c_str(), nullptr, base);
    if (errno == 0 && u <= uint64_t(INT64_MAX)) return v[0] == '-' ? -int64_t(u) : int64_t(u);
    return v;  // (beyond int64: kept as its text)
  }
  if (yaml_float(v)) {
    std::string d;
    for (char c : v)
      if (c != '_') d += c;
    if (d.find("inf") != std::string::npos || d.find("Inf") != std::string::npos || d.find("INF") != std::string::npos)
      return d[0] == '-' ? -INFINITY : INFINITY;
    if (d.find('n') != std::string::npos || d.find('N') != std::string::npos) return NAN;
    return std::strtod(d.c_str(), nullptr);
  }
  return v;  // text
}

class Parser {
 public:
  explicit Parser(std::vector<std::string> lines) : lines_(std::move(lines)) {}

  nlohmann::json document() {
    nlohmann::json v = block(-1);
    skip_blank();
    if (ln_ < lines_.size()) fail("more than one node at the top: not a YAML mapping");
    return v;
  }

 private:
  std::vector<std::string> lines_;
  size_t ln_ = 0;   // the current line
  size_t col_ = 0;  // where its unread content starts (after a compact "- ")

  [[noreturn]] void fail(const std::string& what) const { throw CardError{ln_ + 1, what}; }

  static size_t indent_of(const std::string& l) { return l.find_first_not_of(' ') == std::string::npos ? l.size() : l.find_first_not_of(' '); }
  // A line of spaces, or only a comment.
  static bool blank_from(const std::string& l, size_t from) {
    const size_t p = l.find_first_not_of(' ', from);
    return p == std::string::npos || l[p] == '#';
  }
  void skip_blank() {
    while (ln_ < lines_.size() && blank_from(lines_[ln_], col_)) ++ln_, col_ = 0;
  }
  // The current line's content column (col_ is 0 on a fresh line: its indentation).
  size_t content_col() const {
    const size_t p = lines_[ln_].find_first_not_of(' ', col_);
    return p == std::string::npos ? lines_[ln_].size() : p;
  }
  static bool starts_entry(const std::string& l, size_t at) {
    return at < l.size() && l[at] == '-' && (at + 1 == l.size() || l[at + 1] == ' ');
  }

  // A key at `at` of line l: the position after its ':' (npos when the line is not "key: ...").
  size_t key_end(const std::string& l, size_t at, std::string* key) {
    if (at >= l.size()) return std::string::npos;
    const char c = l[at];
    if (c == '"' || c == '\'') {  // a quoted key: closed on its line, then ':'
      const size_t save_ln = ln_, save_col = col_;
      std::string k;
      size_t p = l.size();
      col_ = at;
      try {
        k = quoted();
        if (ln_ == save_ln) p = col_;
      } catch (const CardError&) {
      }
      ln_ = save_ln, col_ = save_col;
      while (p < l.size() && l[p] == ' ') ++p;
      if (p < l.size() && l[p] == ':' && (p + 1 == l.size() || l[p + 1] == ' ')) {
        if (key) *key = k;
        return p + 1;
      }
      return std::string::npos;
    }
    if (std::string("[]{},#&*!|>%@`").find(c) != std::string::npos) return std::string::npos;
    if (c == '?' && (at + 1 == l.size() || l[at + 1] == ' ')) fail("complex keys ('? ') are not read");
    for (size_t p = at; p < l.size(); ++p) {
      if (l[p] == '#' && p > at && l[p - 1] == ' ') return std::string::npos;
      if (l[p] == ':' && (p + 1 == l.size() || l[p + 1] == ' ')) {
        if (key) {
          std::string k = l.substr(at, p - at);
          while (!k.empty() && k.back() == ' ') k.pop_back();
          *key = k;
        }
        return p + 1;
      }
    }
    return std::string::npos;
  }

  // The node whose content starts on the current line (after blank lines) indented more than
  // `parent` (a compact "- " item's content is at col_); null when there is none.
  nlohmann::json block(long parent) {
    skip_blank();
    if (ln_ >= lines_.size()) return nullptr;
    const size_t n = content_col();
    if (long(n) <= parent) return nullptr;
    const std::string& l = lines_[ln_];
    if (starts_entry(l, n)) return sequence(n);
    if (key_end(l, n, nullptr) != std::string::npos) return mapping(n);
    return scalar_node(n, parent);
  }

  nlohmann::json sequence(size_t n) {
    nlohmann::json seq = nlohmann::json::array();
    for (;;) {
      const std::string& l = lines_[ln_];
      col_ = n + 1;
      if (blank_from(l, col_)) {
        ++ln_, col_ = 0;
        seq.push_back(block(long(n)));
      } else {
        seq.push_back(block(long(n)));  // the item's content on this line, as a node at its column
      }
      skip_blank();
      if (ln_ >= lines_.size()) break;
      const size_t m = content_col();
      if (m > n) fail("unexpected indentation after a sequence item");
      if (m < n || !starts_entry(lines_[ln_], m)) break;
    }
    return seq;
  }

  nlohmann::json mapping(size_t n) {
    nlohmann::json map = nlohmann::json::object();
    for (;;) {
      std::string key;
      const size_t after = key_end(lines_[ln_], n, &key);
      if (after == std::string::npos) fail("expected 'key: value'");
      col_ = after;
      nlohmann::json value;
      if (blank_from(lines_[ln_], col_)) {  // the value on the lines below
        ++ln_, col_ = 0;
        skip_blank();
        if (ln_ < lines_.size() && content_col() == n && starts_entry(lines_[ln_], n)) value = sequence(n);
        else value = block(long(n));
      } else {
        value = inline_value(long(n));
      }
      map[key] = std::move(value);  // (a repeated key: the last one, as PyYAML)
      skip_blank();
      if (ln_ >= lines_.size()) break;
      const size_t m = content_col();
      if (m > n) fail("unexpected indentation in a mapping");
      if (m < n) break;
      if (starts_entry(lines_[ln_], m)) fail("a sequence item where a key was expected");
    }
    return map;
  }

  // A value that starts on the current line at col_ (after "key:" or standing alone), in a block
  // at indentation `parent` (the mapping's, the sequence's; -1 at the top).
  nlohmann::json inline_value(long parent) {
    const std::string& l = lines_[ln_];
    size_t p = l.find_first_not_of(' ', col_);
    col_ = p;
    const char c = l[p];
    if (c == '&' || c == '*' || c == '!') fail("anchors, aliases and tags are not read");
    if (c == '|' || c == '>') return block_scalar(parent);
    if (c == '[' || c == '{') {
      nlohmann::json v = flow();
      end_of_node_line();
      return v;
    }
    if (c == '"' || c == '\'') {
      std::string s = quoted();
      end_of_node_line();
      return s;
    }
    if (c == '%' || c == '@' || c == '`') fail(std::string("a plain value cannot start with '") + c + "'");
    if (starts_entry(l, p)) fail("a sequence item after 'key:' on the same line");
    return plain(parent);
  }

  nlohmann::json scalar_node(size_t n, long parent) {
    col_ = n;
    return inline_value(parent);
  }

  // After a quoted scalar or a flow collection: only a comment may follow on its line.
  void end_of_node_line() {
    if (!blank_from(lines_[ln_], col_)) fail("text after a closed value");
    ++ln_, col_ = 0;
  }

  // A plain scalar from col_, continued on lines indented more than `parent`.
  nlohmann::json plain(long parent) {
    std::string out;
    auto take = [&](const std::string& l, size_t from, bool* comment) {
      size_t end = l.size();
      for (size_t p = from; p < l.size(); ++p) {
        if (l[p] == '#' && p > from && l[p - 1] == ' ') {
          end = p;
          *comment = true;
          break;
        }
        if (l[p] == ':' && (p + 1 == l.size() || l[p + 1] == ' ')) fail("a ': ' inside a plain value (quote it)");
      }
      std::string s = l.substr(from, end - from);
      while (!s.empty() && s.back() == ' ') s.pop_back();
      return s;
    };
    bool comment = false;
    out = take(lines_[ln_], col_, &comment);
    ++ln_, col_ = 0;
    size_t empties = 0;
    while (!comment && ln_ < lines_.size()) {
      const std::string& l = lines_[ln_];
      const size_t m = indent_of(l);
      if (m == l.size()) {  // an empty line folds to a newline
        ++empties, ++ln_;
        continue;
      }
      if (long(m) <= parent || l[m] == '#') break;
      if (m == 0 && (l.rfind("---", 0) == 0 || l.rfind("...", 0) == 0)) fail("several documents are not read");
      const std::string more = take(l, m, &comment);
      out += empties ? std::string(empties, '\n') : std::string(" ");
      out += more;
      empties = 0;
      ++ln_;
    }
    return resolve_plain(out);  // (empty lines before the next node are not part of it)
  }

  // A quoted scalar starting at col_ of the current line; it may continue over lines. Leaves col_
  // after the closing quote.
  std::string quoted() {
    const char q = lines_[ln_][col_];
    std::string out;
    size_t p = col_ + 1;
    for (;;) {
      const std::string& l = lines_[ln_];
      bool joined = false;  // an escaped line break: the next line follows with nothing between
      while (p < l.size()) {
        const char c = l[p];
        if (q == '\'' && c == '\'') {
          if (p + 1 < l.size() && l[p + 1] == '\'') {
            out += '\'';
            p += 2;
            continue;
          }
          col_ = p + 1;
          return out;
        }
        if (q == '"' && c == '"') {
          col_ = p + 1;
          return out;
        }
        if (q == '"' && c == '\\') {
          if (p + 1 == l.size()) {
            joined = true;
            break;
          }
          p = escape(l, p + 1, out);
          continue;
        }
        out += c;
        ++p;
      }
      // a line break inside the quotes folds: trailing spaces dropped, one break a space, k empty lines k newlines
      if (!joined)
        while (!out.empty() && out.back() == ' ') out.pop_back();
      size_t empties = 0;
      ++ln_;
      while (ln_ < lines_.size() && indent_of(lines_[ln_]) == lines_[ln_].size()) ++empties, ++ln_;
      if (ln_ >= lines_.size()) fail("a quoted value is not closed");
      out += empties || joined ? std::string(empties, '\n') : std::string(" ");
      p = indent_of(lines_[ln_]);
    }
  }
  // A double-quoted escape after the '\' at p; returns the position after it.
  size_t escape(const std::string& l, size_t p, std::string& out) {
    if (p >= l.size()) fail("a '\\' ends a quoted value");
    const char e = l[p];
    static const std::string simple = "0abtnvfre \"/\\N_LP\t";
    static const char* const mapped[] = {"\0", "\a", "\b", "\t", "\n", "\v", "\f", "\r", "\x1b", " ", "\"", "/", "\\",
                                         "\xc2\x85", "\xc2\xa0", "\xe2\x80\xa8", "\xe2\x80\xa9", "\t"};
    const size_t k = simple.find(e);
    if (k != std::string::npos) {
      if (e == '0') out += '\0';
      else out += mapped[k];
      return p + 1;
    }
    const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (!digits) fail(std::string("unknown escape '\\") + e + "'");
    if (p + 1 + size_t(digits) > l.size()) fail("a short \\x / \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = l[p + 1 + size_t(i)];
      const int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (v < 0) fail("a \\x / \\u escape with a non-hex digit");
      cp = cp * 16 + uint32_t(v);
    }
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) fail("an escape that is not a character");
    if (cp < 0x80) out += char(cp);
    else if (cp < 0x800) out += char(0xc0 | (cp >> 6)), out += char(0x80 | (cp & 0x3f));
    else if (cp < 0x10000) out += char(0xe0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3f)), out += char(0x80 | (cp & 0x3f));
    else
      out += char(0xf0 | (cp >> 18)), out += char(0x80 | ((cp >> 12) & 0x3f)), out += char(0x80 | ((cp >> 6) & 0x3f)),
          out += char(0x80 | (cp & 0x3f));
    return p + 1 + size_t(digits);
  }

  // | or > at col_: PyYAML's scan_block_scalar, for a node of the block at indentation `parent`.
  std::string block_scalar(long parent) {
    const std::string& h = lines_[ln_];
    const bool folded = h[col_] == '>';
    int chomp = 0;  // -1 strip, 0 clip, +1 keep
    long increment = 0;
    size_t p = col_ + 1;
    for (int i = 0; i < 2 && p < h.size(); ++i, ++p) {
      if ((h[p] == '+' || h[p] == '-') && chomp == 0) chomp = h[p] == '+' ? 1 : -1;
      else if (h[p] >= '1' && h[p] <= '9' && increment == 0) increment = h[p] - '0';
      else break;
    }
    if (!blank_from(h, p) || (p < h.size() && h[p] == '#')) fail("text after a block scalar's indicator");
    ++ln_, col_ = 0;
    auto spaces_only = [&](size_t q) { return indent_of(lines_[q]) == lines_[q].size(); };
    const long min_indent = std::max<long>(parent + 1, 1);
    long indent = 0;
    std::string breaks;
    // scan_block_scalar_breaks: lines of at most `indent` spaces are line breaks
    auto scan_breaks = [&]() {
      std::string b;
      while (ln_ < lines_.size() && spaces_only(ln_) && long(lines_[ln_].size()) <= indent) b += '\n', ++ln_;
      return b;
    };
    if (increment) {
      indent = min_indent + increment - 1;
      breaks = scan_breaks();
    } else {  // scan_block_scalar_indentation: the deepest of the leading space-only lines and the first text line
      long max_indent = 0;
      while (ln_ < lines_.size() && spaces_only(ln_)) max_indent = std::max<long>(max_indent, long(lines_[ln_].size())), breaks += '\n', ++ln_;
      if (ln_ < lines_.size()) max_indent = std::max<long>(max_indent, long(indent_of(lines_[ln_])));
      indent = std::max(min_indent, max_indent);
    }
    auto text_at_indent = [&](size_t q) { return long(indent_of(lines_[q])) >= indent && long(lines_[q].size()) > indent; };
    std::string out, line_break;
    while (ln_ < lines_.size() && text_at_indent(ln_)) {
      const std::string& l = lines_[ln_];
      out += breaks;
      const bool leading_non_space = l[size_t(indent)] != ' ';
      out += l.substr(size_t(indent));
      line_break = "\n";
      ++ln_;
      breaks = scan_breaks();
      if (ln_ >= lines_.size() || !text_at_indent(ln_)) break;
      if (folded && leading_non_space && lines_[ln_][size_t(indent)] != ' ') {
        if (breaks.empty()) out += ' ';
      } else {
        out += line_break;
      }
    }
    if (chomp >= 0) out += line_break;
    if (chomp > 0) out += breaks;
    return out;
  }

  // [ ... ] or { ... } at col_, over as many lines as it takes; leaves col_ after the closing bracket.
  nlohmann::json flow() {
    const char open = lines_[ln_][col_];
    const char close = open == '[' ? ']' : '}';
    ++col_;
    nlohmann::json v = open == '[' ? nlohmann::json::array() : nlohmann::json::object();
    for (;;) {
      flow_space();
      if (cur() == close) {
        ++col_;
        return v;
      }
      if (open == '[') {
        v.push_back(flow_item());
      } else {
        nlohmann::json k = flow_item(true);
        flow_space();
        nlohmann::json val = nullptr;
        if (cur() == ':') {
          ++col_;
          flow_space();
          if (cur() != ',' && cur() != close) val = flow_item();
        }
        v[k.is_string() ? k.get<std::string>() : k.dump()] = std::move(val);
      }
      flow_space();
      if (cur() == ',') {
        ++col_;
        continue;
      }
      if (cur() != close) fail(std::string("expected ',' or '") + close + "' in a flow collection");
    }
  }
  char cur() const { return ln_ < lines_.size() && col_ < lines_[ln_].size() ? lines_[ln_][col_] : '\0'; }
  // Spaces, comments and line breaks inside a flow collection.
  void flow_space() {
    for (;;) {
      if (ln_ >= lines_.size()) fail("a flow collection is not closed");
      const std::string& l = lines_[ln_];
      while (col_ < l.size() && l[col_] == ' ') ++col_;
      if (col_ < l.size() && l[col_] == '#' && (col_ == 0 || l[col_ - 1] == ' ')) col_ = l.size();
      if (col_ < l.size()) return;
      ++ln_, col_ = 0;
    }
  }
  nlohmann::json flow_item(bool key = false) {
    const char c = cur();
    if (c == '[' || c == '{') {
      if (key) fail("a collection as a key");
      return flow();
    }
    if (c == '"' || c == '\'') return quoted();
    if (c == '&' || c == '*' || c == '!' || c == '?') fail("anchors, aliases, tags and complex keys are not read");
    std::string s;  // a plain scalar, folded over lines with single spaces
    for (;;) {
      const std::string& l = lines_[ln_];
      while (col_ < l.size()) {
        const char x = l[col_];
        if (x == ',' || x == '[' || x == ']' || x == '{' || x == '}') break;
        if (x == ':' && (col_ + 1 == l.size() || std::string(" ,[]{}").find(l[col_ + 1]) != std::string::npos)) break;
        if (x == '#' && col_ > 0 && l[col_ - 1] == ' ') break;
        s += x;
        ++col_;
      }
      while (!s.empty() && s.back() == ' ') s.pop_back();
      if (col_ < l.size() && !(l[col_] == '#')) break;
      // the line ended (or a comment): the scalar may go on after the break
      size_t q = ln_ + 1;
      while (q < lines_.size() && blank_from(lines_[q], 0)) ++q;
      if (q >= lines_.size()) fail("a flow collection is not closed");
      const size_t m = indent_of(lines_[q]);
      const char nx = lines_[q][m];
      if (l.size() > col_ && l[col_] == '#') {  // a comment ends a plain scalar
        ln_ = q, col_ = m;
        break;
      }
      ln_ = q, col_ = m;
      if (nx == ',' || nx == ']' || nx == '}' || nx == ':') break;
      if (!s.empty()) s += ' ';
    }
    if (s.empty()) fail("an empty item in a flow collection");
    return resolve_plain(s);
  }
};

}  // namespace

ModelCard read_model_card(const std::string& readme) {
  ModelCard card;
  if (!valid_utf8(readme)) {
    card.warning = "not UTF-8 text";
    return card;
  }
  const std::vector<std::string> lines = split_lines(readme);
  if (lines.empty() || lines[0] != "---") return card;  // no front matter
  std::string yaml;
  for (size_t i = 1; i < lines.size() && lines[i] != "---"; ++i) yaml += lines[i] + "\n";
  if (yaml.empty()) return card;  // ("---" then "---": nothing, as gguf-py reads it)
  replace_all(yaml, "- no\n", "- \"no\"\n");
  replace_all(yaml, "\t", "  ");
  for (size_t i = 0; i < yaml.size(); ++i) {  // PyYAML reads printable characters only
    const unsigned char c = static_cast<unsigned char>(yaml[i]);
    const bool c1 = c == 0xc2 && i + 1 < yaml.size() && static_cast<unsigned char>(yaml[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(yaml[i + 1]) < 0xa0 && static_cast<unsigned char>(yaml[i + 1]) != 0x85;
    if ((c < 0x20 && c != '\n') || c == 0x7f || c1) {
      card.warning = "a control character in the front matter";
      return card;
    }
  }
  std::vector<std::string> ylines;
  size_t at = 0;
  for (size_t nl = yaml.find('\n'); nl != std::string::npos; at = nl + 1, nl = yaml.find('\n', at))
    ylines.push_back(yaml.substr(at, nl - at));
  try {
    Parser parser(std::move(ylines));
    nlohmann::json doc = parser.document();
    if (doc.is_object()) card.front = std::move(doc);
    else card.warning = "the front matter is not a mapping";  // (gguf-py logs an error and reads nothing)
  } catch (const CardError& e) {
    card.warning = "line " + std::to_string(e.line + 1) + ": " + e.what;  // (README.md's line: "---" is line 1)
  }
  return card;
}

}  // namespace leapconv
