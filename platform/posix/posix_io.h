// POSIX byte sources and sinks for the CLI (native, and Node through Emscripten's NODERAWFS).
// Offsets are 64-bit (pread/pwrite with off_t), so shards past 2 GiB work on wasm32 too.
#pragma once
#include <string>

#include "source/checkpoint.h"

namespace leapconv {

// pread/pwrite are thread-safe natively. Under Emscripten, file calls from pthreads are
// proxied to the main thread, so I/O stays on the calling thread there.
#ifdef __EMSCRIPTEN__
constexpr bool kConcurrentIo = false;
#else
constexpr bool kConcurrentIo = true;
#endif

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path);
  ~FileSource() override;
  const std::string& name() const override { return path_; }
  int64_t size() const override { return size_; }
  void read_at(int64_t offset, void* dst, size_t n) override;
  bool concurrent_reads() const override { return kConcurrentIo; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// Writes to "<path>.partial" beside the target and renames it into place on commit(); a sink
// destroyed without commit() removes its temporary file, so failures leave nothing behind.
class AtomicFileSink : public ByteSink {
 public:
  explicit AtomicFileSink(const std::string& path);
  ~AtomicFileSink() override;
  void write_at(int64_t offset, const void* src, size_t n) override;
  bool concurrent_writes() const override { return kConcurrentIo; }
  void commit();
  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, temp_;
  int fd_ = -1;
};

// Removes the temporary output if the process is interrupted (SIGINT/SIGTERM).
void remove_on_signal(const std::string& temp_path);

std::string read_text_file(const std::string& path);
bool is_directory(const std::string& path);
bool file_exists(const std::string& path);

// A checkpoint folder (config.json/params.json, *.safetensors sorted by name, index json), or
// a single .safetensors file (config.json beside it is used when present).
CheckpointFiles find_checkpoint_files(const std::string& path);

}  // namespace leapconv
