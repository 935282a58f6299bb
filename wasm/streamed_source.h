// A shard whose bytes arrive from the browser's reader worker (web/reader.js) instead of being
// read on demand: the worker streams the pipeline's read order (Pipeline::caller_read_order)
// ahead of the conversion, and read_at takes the next bytes of that stream. This keeps file
// reading off the converting thread and uses the browser's fastest read path (BYOB streams);
// the JS side (web/source_stream.js) checks every call against the order.
#pragma once
#include <emscripten.h>

#include <cstdlib>
#include <string>

#include "core/byte_io.h"

// Copies the next n bytes of the stream into wasm memory at dst, waiting for the reader.
// Returns 0, or a malloc'd message (the caller frees it) when the read fails.
EM_JS(char*, leapconv_stream_read, (int shard, double offset, void* dst, double n), {
  const err = self.leapconvSourceStream
                  ? self.leapconvSourceStream.read(shard, offset, dst, n)
                  : 'no source stream is open';
  if (!err) return 0;
  const size = lengthBytesUTF8(err) + 1;
  const p = _malloc(size);
  stringToUTF8(err, p, size);
  return p;
});

namespace leapconv {

// What the page says first when the browser will not read a picked file any more.
inline std::string unreadable_advice(const std::string& name) {
  return name + " could not be read any more: a file changed, moved or removed after it was picked cannot be read. Pick the files again.";
}

class StreamedSource : public ByteSource {
 public:
  StreamedSource(int shard, std::string name, int64_t size)
      : shard_(shard), name_(std::move(name)), size_(size) {}
  const std::string& name() const override { return name_; }
  int64_t size() const override { return size_; }
  void read_at(int64_t offset, void* dst, size_t n) override {
    if (char* err = leapconv_stream_read(shard_, double(offset), dst, double(n))) {
      const std::string msg = err;
      std::free(err);
      throw ConvertError(name_, "", msg).advise(unreadable_advice(name_));
    }
  }

 private:
  int shard_;
  std::string name_;
  int64_t size_;
};

}  // namespace leapconv
