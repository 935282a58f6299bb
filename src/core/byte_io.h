// The I/O boundary of the core. The core never opens files: a platform layer (native POSIX,
// Node's raw FS, the browser's File/WritableStream) hands it ByteSources to read and a ByteSink
// to write. Calls are per chunk (megabytes), never per element.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"

namespace leapconv {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual const std::string& name() const = 0;  // for error messages
  virtual int64_t size() const = 0;
  // Reads exactly n bytes at offset, or throws ConvertError naming the file.
  virtual void read_at(int64_t offset, void* dst, size_t n) = 0;
  // True if read_at may be called from several threads at once.
  virtual bool concurrent_reads() const { return false; }
  // True if thousands of short reads cost about what one long read of their bytes does (a file's
  // pread, memory); false where each read has its own start-up cost (a range request, a browser
  // File's stream): the pipeline then reads a GPTQ weight whole rather than in strips.
  virtual bool cheap_short_reads() const { return false; }
};

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Positioned write: the plan knows every offset up front, so values and scales of a tensor
  // can be written chunk by chunk without buffering a whole tensor.
  virtual void write_at(int64_t offset, const void* src, size_t n) = 0;
  // True if write_at may be called from several threads at once.
  virtual bool concurrent_writes() const { return false; }
};

// A source over bytes in memory (tests, small files, the browser's demo checkpoint).
class MemorySource : public ByteSource {
 public:
  MemorySource(std::string name, std::vector<uint8_t> bytes)
      : name_(std::move(name)), bytes_(std::move(bytes)) {}
  const std::string& name() const override { return name_; }
  int64_t size() const override { return int64_t(bytes_.size()); }
  void read_at(int64_t offset, void* dst, size_t n) override {
    if (offset < 0 || n > bytes_.size() || offset > size() - int64_t(n))
      throw ConvertError(name_, "", "read past the end of the file (truncated?)");
    if (n) std::memcpy(dst, bytes_.data() + offset, n);  // (an empty read may have no buffer)
  }
  bool cheap_short_reads() const override { return true; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::string name_;
  std::vector<uint8_t> bytes_;
};

// A sink into a growing buffer in memory.
class MemorySink : public ByteSink {
 public:
  void write_at(int64_t offset, const void* src, size_t n) override {
    if (n == 0) return;
    if (size_t(offset) + n > bytes_.size()) bytes_.resize(size_t(offset) + n);
    std::memcpy(bytes_.data() + offset, src, n);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Little-endian field helpers for headers.
inline void put_u8(std::vector<uint8_t>& b, uint8_t v) { b.push_back(v); }
template <typename T>
inline void put_le(std::vector<uint8_t>& b, T v) {
  uint8_t tmp[sizeof(T)];
  std::memcpy(tmp, &v, sizeof(T));  // all our targets are little-endian
  b.insert(b.end(), tmp, tmp + sizeof(T));
}
template <typename T>
inline T get_le(const uint8_t* p) { T v; std::memcpy(&v, p, sizeof(T)); return v; }

}  // namespace leapconv
