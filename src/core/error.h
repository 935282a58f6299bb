// Errors the converter reports to a user: one line that names the file and, where there is one,
// the tensor. Everything that can go wrong with input or output throws ConvertError.
#pragma once
#include <cstdio>
#include <stdexcept>
#include <string>

namespace leapconv {

// Text from a file (a tensor name, a path, a JSON value) made safe for one line of a terminal:
// control characters (newline, ESC, C1 controls) and bytes that are not valid UTF-8 become
// \xNN, and text past `max_bytes` is cut with a note of how much was dropped. A name can then
// neither forge a second "error:" line, nor drive the terminal, nor make a megabyte line.
inline std::string one_line_text(const std::string& s, size_t max_bytes = std::string::npos) {
  std::string out;
  size_t i = 0;
  auto escape = [&](unsigned char c) {
    char b[8];
    std::snprintf(b, sizeof b, "\\x%02x", c);
    out += b;
  };
  while (i < s.size() && out.size() < max_bytes) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) escape(c);
      else out += char(c);
      ++i;
      continue;
    }
    // a well-formed UTF-8 sequence (no overlongs, no surrogates, at most U+10FFFF), not a C1 control
    const int n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    bool ok = n > 0 && i + size_t(n) <= s.size() && c <= 0xf4;
    uint32_t cp = n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; ok && k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + size_t(k)]);
      ok = (d & 0xc0) == 0x80;
      cp = (cp << 6) | (d & 0x3f);
    }
    ok = ok && !(n == 3 && cp < 0x800) && !(n == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
         !(cp >= 0xd800 && cp <= 0xdfff) && !(cp >= 0x80 && cp < 0xa0);
    if (ok) {
      out.append(s, i, size_t(n));
      i += size_t(n);
    } else {
      escape(c);
      ++i;
    }
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size() - i) + " more bytes)";
  return out;
}

class ConvertError : public std::runtime_error {
 public:
  ConvertError(std::string file, std::string tensor, std::string what)
      : std::runtime_error(compose(file, tensor, what)),
        file_(std::move(file)), tensor_(std::move(tensor)), detail_(std::move(what)) {}
  explicit ConvertError(std::string what) : ConvertError("", "", std::move(what)) {}

  const std::string& file() const { return file_; }
  const std::string& tensor() const { return tensor_; }
  const std::string& detail() const { return detail_; }
  // What the user can do, in the user's terms (the page shows it above the technical line; the
  // CLI keeps its one line). Empty: the caller says something general for the error's kind.
  // (`throw ConvertError(...).advise(...)` throws a ConvertError: an UnsupportedError is
  // advised before it is thrown, not in the throw expression.)
  const std::string& advice() const { return advice_; }
  ConvertError& advise(std::string a) {
    advice_ = std::move(a);
    return *this;
  }
  // The same error named with the tensor whose bytes were being read (a source's read error knows
  // its file only), its advice kept.
  ConvertError in_tensor(std::string tensor) const { return ConvertError(file_, std::move(tensor), detail_).advise(advice_); }

 private:
  // One printable line: names are cut at 256 bytes, the whole at 4 KiB (see one_line_text()).
  static std::string compose(const std::string& file, const std::string& tensor,
                             const std::string& what) {
    std::string s;
    if (!file.empty()) s += one_line_text(file, 1024) + ": ";
    if (!tensor.empty()) s += "tensor '" + one_line_text(tensor, 256) + "': ";
    return one_line_text(s + what, 4096);
  }
  std::string file_, tensor_, detail_, advice_;
};

// What the converter refuses although the input is sound: a model, dtype or option it does not
// take (yet), or one a runtime would compute differently from Hugging Face. Another path may
// take the same checkpoint (GGUF-lite stores any tensor; verify then skips what it cannot run).
class UnsupportedError : public ConvertError {
 public:
  using ConvertError::ConvertError;
};

}  // namespace leapconv
