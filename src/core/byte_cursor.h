// Sequential reads of a ByteSource for header parsers (GGUF-lite, GGUF): a position, a limit,
// and a read-ahead window, so thousands of small fields cost one read_at per 64 KiB and a huge
// file is touched only where its header is. Running past the limit calls the owner's
// `truncated(n, what)`, which throws the owner's own error (naming its key or tensor).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/byte_io.h"

namespace leapconv {

class ByteCursor {
 public:
  using Truncated = std::function<void(uint64_t n, const std::string& what)>;  // must throw
  ByteCursor(ByteSource& src, int64_t pos, int64_t limit, Truncated truncated)
      : src_(src), pos_(pos), limit_(limit), truncated_(std::move(truncated)) {}

  int64_t pos() const { return pos_; }
  int64_t remaining() const { return limit_ - pos_; }
  void need(uint64_t n, const std::string& what) const {
    if (n > uint64_t(remaining())) {
      truncated_(n, what);
      throw ConvertError(src_.name(), "", "truncated: " + what);  // in case the owner did not
    }
  }
  void read(void* dst, size_t n, const std::string& what) {
    need(n, what);
    uint8_t* d = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (pos_ < win_pos_ || pos_ >= win_pos_ + int64_t(win_.size())) {
        if (int64_t(n) >= kWindow) {  // large: straight into the destination
          src_.read_at(pos_, d, n);
          pos_ += int64_t(n);
          return;
        }
        win_pos_ = pos_;
        win_.resize(size_t(std::min<int64_t>(kWindow, remaining())));
        src_.read_at(win_pos_, win_.data(), win_.size());
      }
      const size_t off = size_t(pos_ - win_pos_);
      const size_t k = std::min(n, win_.size() - off);
      std::memcpy(d, win_.data() + off, k);
      d += k;
      n -= k;
      pos_ += int64_t(k);
    }
  }
  void skip(uint64_t n, const std::string& what) {
    need(n, what);
    pos_ += int64_t(n);
  }
  template <typename T>
  T get(const std::string& what) {
    uint8_t b[sizeof(T)];
    read(b, sizeof(T), what);
    return get_le<T>(b);
  }

 private:
  static constexpr int64_t kWindow = 64 * 1024;
  ByteSource& src_;
  int64_t pos_, limit_;
  Truncated truncated_;
  std::vector<uint8_t> win_;
  int64_t win_pos_ = 0;
};

}  // namespace leapconv
