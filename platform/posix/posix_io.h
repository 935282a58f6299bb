// POSIX byte sources and sinks for the CLI (native, and Node through Emscripten's NODERAWFS).
// Offsets are 64-bit (pread/pwrite with off_t), so shards past 2 GiB work on wasm32 too.
#pragma once
#include <string>
#include <vector>

#include "source/checkpoint.h"

namespace leapconv {

// pread/pwrite are thread-safe natively. Under Emscripten, file calls from pthreads are
// proxied to the main thread, so I/O stays on the calling thread there.
#ifdef __EMSCRIPTEN__
constexpr bool kConcurrentIo = false;
#else
constexpr bool kConcurrentIo = true;
#endif

// Opens regular files only (a FIFO, a device or a folder named like a shard is refused before
// open() could block on it); every file opened is remembered, so an output that resolves to one
// of them (same device and inode) is refused before it could replace the input.
class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path);
  ~FileSource() override;
  const std::string& name() const override { return path_; }
  int64_t size() const override { return size_; }
  void read_at(int64_t offset, void* dst, size_t n) override;
  bool concurrent_reads() const override { return kConcurrentIo; }
  bool cheap_short_reads() const override { return true; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// Writes to "<path>.partial" beside the target and renames it into place on commit(); a sink
// destroyed without commit() removes its temporary file, so failures leave nothing behind.
// The temporary file is always one this process created (O_EXCL | O_NOFOLLOW: never a link,
// never an existing file) and holds an exclusive lock while it exists, so a second conversion
// to the same output is refused instead of sharing it; a stale one left by a killed run (no
// lock) is removed. An output that is one of the files read (FileSource) is refused, here and
// again at commit(). Interrupting signals (INT, TERM, HUP, QUIT, PIPE) remove it. The
// WebAssembly CLI (Node: no flock) holds <path>.partial.lock instead, a file naming the writer
// (wasm/node_pre.js), to the same effect.
class AtomicFileSink : public ByteSink {
 public:
  explicit AtomicFileSink(const std::string& path);
  ~AtomicFileSink() override;
  void write_at(int64_t offset, const void* src, size_t n) override;
  bool concurrent_writes() const override { return kConcurrentIo; }
  void commit();
  const std::string& temp_path() const { return temp_; }
  // Things worth saying about the output path (it is a symbolic link that will be replaced,
  // a stale temporary file was removed), for the caller to print.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  void create_temp();
  void unlock();  // the WebAssembly CLI's lock file, when it holds one
  std::string path_, temp_;
  int fd_ = -1;
  bool locked_ = false;
  std::vector<std::string> notes_;
};

// Throws ConvertError if `path` names a file this process has read (same device and inode):
// writing the output there would destroy an input.
void refuse_input_as_output(const std::string& path);

// Removes `owner`'s temporary output if the process is interrupted (SIGINT, SIGTERM, SIGHUP,
// SIGQUIT, SIGPIPE); "" forgets it. Each output being written (every part of a split file) has
// its own.
void remove_on_signal(const void* owner, const std::string& temp_path);

std::string read_text_file(const std::string& path);
bool is_directory(const std::string& path);
bool file_exists(const std::string& path);

// A checkpoint folder (config.json/params.json, *.safetensors sorted by name, index json), or
// a single .safetensors file (config.json beside it is used when present).
CheckpointFiles find_checkpoint_files(const std::string& path);

}  // namespace leapconv
