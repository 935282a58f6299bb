#include "posix_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>

#include <nlohmann/json.hpp>

#include "core/text.h"
#include "hub_folder.h"

#ifdef __EMSCRIPTEN__
#include <emscripten.h>
#endif

namespace leapconv {

static std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

static const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a named pipe (FIFO)";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

// Every file a FileSource opened: an output must never be one of them.
namespace {
struct InputFile {
  dev_t dev;
  ino_t ino;
  std::string path;
};
std::mutex g_inputs_mu;
std::vector<InputFile>& input_files() {
  static std::vector<InputFile> v;
  return v;
}
void remember_input(const struct stat& st, const std::string& path) {
  std::lock_guard<std::mutex> lock(g_inputs_mu);
  for (const InputFile& f : input_files())
    if (f.dev == st.st_dev && f.ino == st.st_ino) return;
  input_files().push_back({st.st_dev, st.st_ino, path});
}
const InputFile* input_with_id(const struct stat& st) {
  for (const InputFile& f : input_files())
    if (f.dev == st.st_dev && f.ino == st.st_ino) return &f;
  return nullptr;
}
}  // namespace

FileSource::FileSource(const std::string& path) : path_(path) {
  // Regular files only, checked before open(): opening a FIFO blocks until a writer comes
  // (and under Node the open cannot be made non-blocking).
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw ConvertError(path, "", sys_error("cannot open"));
  if (!S_ISREG(st.st_mode)) throw ConvertError(path, "", std::string("cannot read it: it is ") + file_kind(st.st_mode));
#ifdef __EMSCRIPTEN__
  fd_ = ::open(path.c_str(), O_RDONLY);
#else
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // replaced by a FIFO since stat(): no hang
#endif
  if (fd_ < 0) throw ConvertError(path, "", sys_error("cannot open"));
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = S_ISREG(st.st_mode) ? sys_error("cannot stat") : std::string("cannot read it: it is ") + file_kind(st.st_mode);
    ::close(fd_);
    fd_ = -1;
    throw ConvertError(path, "", why);
  }
  size_ = int64_t(st.st_size);
  remember_input(st, path);
}

FileSource::~FileSource() {
  if (fd_ >= 0) ::close(fd_);
}

void FileSource::read_at(int64_t offset, void* dst, size_t n) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, p, n, off_t(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw ConvertError(path_, "", sys_error("read failed"));
    if (got == 0) throw ConvertError(path_, "", "unexpected end of file at byte " + std::to_string(offset) + " (truncated?)");
    p += got;
    offset += got;
    n -= size_t(got);
  }
}

void refuse_input_as_output(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_inputs_mu);
  struct stat st;
  for (int follow = 0; follow < 2; ++follow) {  // the name itself, and what a link points to
    if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) continue;
    if (const InputFile* in = input_with_id(st))
      throw ConvertError(path, "", (in->path == path ? std::string("is an input file") : "is the input file " + in->path) +
                                       ": writing the output there would destroy it; choose another output path");
  }
}

// ---- removing the temporary outputs on signals ----
// One slot per output being written (a split file writes several): the path its temporary file
// has now, or null. The handler reads only these (async-signal-safe); a slot's old path is never
// freed, as the handler may be reading it (a few short strings a run).

static constexpr int kMaxTemps = 4096;  // outputs written at once (the parts of a split file)
struct TempSlot {
  const void* owner;
  const char* volatile path;
};
static TempSlot g_temps[kMaxTemps];
static volatile sig_atomic_t g_temps_used = 0;  // slots ever used: the only ones scanned (or touched)
static std::mutex g_temps_mu;

#ifdef __EMSCRIPTEN__
// Node delivers signals to JavaScript, not to the program: wasm/cli.mjs removes the files the
// program names here when one arrives.
static void tell_node(const char* old_path, const char* path) {
  MAIN_THREAD_EM_ASM({
    const temps = globalThis.leapconvTempOutputs || (globalThis.leapconvTempOutputs = new Set());
    if ($0) temps.delete(UTF8ToString($0));
    if ($1) temps.add(UTF8ToString($1));
  }, old_path, path);
}
#else
static void tell_node(const char*, const char*) {}
#endif

static constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};

static void on_signal(int sig) {
  for (int i = 0; i < g_temps_used; ++i)
    if (const char* p = g_temps[i].path) ::unlink(p);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void remove_on_signal(const void* owner, const std::string& temp_path) {
  std::lock_guard<std::mutex> lock(g_temps_mu);
  TempSlot* slot = nullptr;
  for (int i = 0; i < g_temps_used && !slot; ++i)
    if (g_temps[i].owner == owner) slot = &g_temps[i];
  if (!slot && temp_path.empty()) return;
  for (int i = 0; i < g_temps_used && !slot; ++i)
    if (!g_temps[i].owner) slot = &g_temps[i];
  if (!slot && g_temps_used < kMaxTemps) {
    slot = &g_temps[g_temps_used];
    g_temps_used = g_temps_used + 1;
  }
  if (!slot) throw ConvertError("more than " + std::to_string(kMaxTemps) + " output files at once: split into fewer parts");
  slot->owner = owner;
  const char* old_path = slot->path;
  if (temp_path.empty()) {
    slot->path = nullptr;
    slot->owner = nullptr;
    tell_node(old_path, nullptr);
    return;
  }
  char* copy = new char[temp_path.size() + 1];  // never freed: see above
  std::memcpy(copy, temp_path.c_str(), temp_path.size() + 1);
  slot->path = copy;
  tell_node(old_path, copy);
  static bool installed = false;
  if (installed) return;
  installed = true;
  for (int sig : kCleanupSignals) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int other : kCleanupSignals) sigaddset(&sa.sa_mask, other);  // one cleanup at a time
    ::sigaction(sig, &sa, nullptr);
  }
}

// ---- the output ----

static bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

AtomicFileSink::AtomicFileSink(const std::string& path) : path_(path), temp_(path + ".partial") {
  if (is_directory(path)) throw ConvertError(path, "", "output path is a directory");
  refuse_input_as_output(path);
  refuse_input_as_output(temp_);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    char target[4096];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    notes_.push_back(path + " is a symbolic link" + (n > 0 ? std::string(" (to ") + target + ")" : std::string()) +
                     ": it is replaced by the converted file; what it pointed to is left as it is");
  }
  create_temp();
}

#ifndef __EMSCRIPTEN__
// The state and start time of a process (fields 3 and 22 of /proc/<pid>/stat); false without /proc.
static bool proc_stat(long pid, std::string* state, std::string* start) {
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);  // (size 0: read, not stat)
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  const std::string text(buf, size_t(n > 0 ? n : 0));
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return false;
  std::vector<std::string> f;
  for (size_t at = paren + 2; at < text.size();) {
    const size_t sp = std::min(text.find(' ', at), text.size());
    f.push_back(text.substr(at, sp - at));
    at = sp + 1;
  }
  if (f.size() < 20) return false;
  *state = f[0];
  *start = f[19];
  return true;
}

// Whether the WebAssembly CLI's lock (wasm/node_pre.js: {"pid", "start", "host"}) names a process
// that still runs: the same test as node_pre.js's, so both CLIs agree on whose file it is.
static bool wasm_writer_alive(const std::string& lock) {
  const int fd = ::open(lock.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return false;
  const nlohmann::json j = nlohmann::json::parse(std::string(buf, size_t(n)), nullptr, false);
  if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer() || !j.contains("host") || !j["host"].is_string())
    return false;
  const long pid = j["pid"].get<long>();
  if (pid <= 0) return false;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || j["host"].get<std::string>() != host) return true;  // cannot tell
  if (::kill(pid_t(pid), 0) != 0 && errno == ESRCH) return false;
  std::string state, start;
  if (proc_stat(pid, &state, &start)) {
    if (state == "Z") return false;
    if (j.contains("start") && j["start"].is_string() && j["start"].get<std::string>() != start) return false;  // the pid reused
  }
  return true;
}
#endif

// What is at temp_ already: a live conversion's file (locked) is refused, anything that is not
// a plain file of ours is refused, a stale one (no lock) is removed. Returns normally when the
// name may be tried again.
static void deal_with_existing_temp(const std::string& out, const std::string& temp, std::vector<std::string>& notes) {
  struct stat st;
  if (::lstat(temp.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // gone meanwhile
    throw ConvertError(out, "", sys_error("cannot examine " + temp));
  }
  if (!S_ISREG(st.st_mode))
    throw ConvertError(out, "", temp + " exists and is " + file_kind(st.st_mode) +
                                    ", not a file this converter left: remove it, or choose another output path");
#ifdef __EMSCRIPTEN__
  // No flock under Node: this process holds <temp>.lock (node_lock), so a file here is stale.
  if (st.st_nlink != 1)
    throw ConvertError(out, "", temp + " exists and is not a file this converter left (it has other links): "
                                       "remove it, or choose another output path");
  if (::unlink(temp.c_str()) == 0) notes.push_back("removed " + temp + ", left by an interrupted conversion");
#else
  const int fd = ::open(temp.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return;
    throw ConvertError(out, "", sys_error("cannot examine " + temp));
  }
  struct stat fst;
  if (::fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode) || fst.st_nlink != 1) {
    ::close(fd);
    throw ConvertError(out, "", temp + " exists and is not a file this converter left (it has other links): "
                                       "remove it, or choose another output path");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw ConvertError(out, "", "another conversion is writing this output (" + temp +
                                    " is locked): wait for it to finish, or choose another output path");
  }
  // Unlocked, but a running WebAssembly CLI (no flock under Node) says so in <temp>.lock.
  if (wasm_writer_alive(temp + ".lock")) {
    ::close(fd);
    throw ConvertError(out, "", "another conversion is writing this output (" + temp +
                                    " is locked): wait for it to finish, or choose another output path");
  }
  // Unlocked: left by a conversion that was killed. Remove it if the name still means this file.
  if (::lstat(temp.c_str(), &st) == 0 && same_file(st, fst) && ::unlink(temp.c_str()) == 0)
    notes.push_back("removed " + temp + ", left by an interrupted conversion");
  ::close(fd);
#endif
}

#ifdef __EMSCRIPTEN__
// The WebAssembly CLI's stand-in for flock: <temp>.lock names the writer (wasm/node_pre.js).
static int node_lock(const std::string& lock) {
  return MAIN_THREAD_EM_ASM_INT({
    const l = globalThis.leapconvOutputLock;
    return l ? l.acquire(UTF8ToString($0)) : -1;
  }, lock.c_str());
}
static void node_unlock(const std::string& lock) {
  MAIN_THREAD_EM_ASM({
    const l = globalThis.leapconvOutputLock;
    if (l) l.release(UTF8ToString($0));
  }, lock.c_str());
}
#endif

void AtomicFileSink::create_temp() {
  const int kCreate = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
#ifdef __EMSCRIPTEN__
  const std::string lock = temp_ + ".lock";
  switch (node_lock(lock)) {
    case 1:
      throw ConvertError(path_, "", "another conversion is writing this output (" + temp_ +
                                        " is locked): wait for it to finish, or choose another output path");
    case 2:
      throw ConvertError(path_, "", lock + " exists and is not a file this converter left: remove it, or choose another output path");
    case 3:
      notes_.push_back("removed " + lock + ", left by an interrupted conversion");
      [[fallthrough]];
    case 0:
      locked_ = true;
      break;
    default:
      break;  // no lock could be made here: the open below says why (or goes on unlocked)
  }
  // Locked, whatever is at temp_ is ours or stale: a signal may remove it from the moment it can
  // exist (no window between the open and wasm/cli.mjs learning the name).
  if (locked_) remove_on_signal(this, temp_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    fd_ = ::open(temp_.c_str(), kCreate, 0644);
    if (fd_ >= 0) {
      remove_on_signal(this, temp_);
      return;
    }
    try {
      if (errno != EEXIST) throw ConvertError(path_, "", sys_error("cannot write output"));
      if (!locked_)
        throw ConvertError(path_, "", temp_ + " exists and " + lock + " could not be made: remove " + temp_ +
                                          " if no conversion is running, or choose another output path");
      deal_with_existing_temp(path_, temp_, notes_);
    } catch (...) {
      remove_on_signal(this, "");
      unlock();
      throw;
    }
  }
  remove_on_signal(this, "");
  unlock();
#else
  // The file is created under a name of its own, locked, then linked to <out>.partial: the
  // name never shows an unlocked file, so a file without a lock there is certainly stale.
  static std::atomic<unsigned> counter{0};
  const std::string mine = temp_ + "." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(mine.c_str(), kCreate, 0644);
  bool linkable = fd >= 0;
  if (fd < 0 && errno != ENAMETOOLONG) throw ConvertError(path_, "", sys_error("cannot write output"));
  if (fd >= 0) {
    remove_on_signal(this, mine);
    ::flock(fd, LOCK_EX | LOCK_NB);  // a new file: nobody else can hold it
  }  // (a name too long for the suffix: create <out>.partial itself, below)
  for (int attempt = 0; attempt < 3; ++attempt) {
    // No cleanup signal between the link and the handler learning the new name (it would
    // remove only the old one): they wait until the name is known.
    sigset_t block, old;
    sigemptyset(&block);
    for (int sig : kCleanupSignals) sigaddset(&block, sig);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    const bool linked = linkable && ::link(mine.c_str(), temp_.c_str()) == 0;
    const int link_errno = errno;
    if (linked) remove_on_signal(this, temp_);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = link_errno;
    if (linked) {
      ::unlink(mine.c_str());
      fd_ = fd;
      return;
    }
    if (linkable && errno != EEXIST) {
      // A file system without hard links: create <out>.partial itself (and lock it at once).
      linkable = false;
      remove_on_signal(this, "");
      ::close(fd);
      ::unlink(mine.c_str());
      fd = -1;
    }
    if (!linkable) {
      sigset_t block, old;
      sigemptyset(&block);
      for (int sig : kCleanupSignals) sigaddset(&block, sig);
      pthread_sigmask(SIG_BLOCK, &block, &old);
      fd = ::open(temp_.c_str(), kCreate, 0644);
      const int open_errno = errno;
      if (fd >= 0) remove_on_signal(this, temp_);
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      errno = open_errno;
      if (fd >= 0) {
        ::flock(fd, LOCK_EX | LOCK_NB);
        fd_ = fd;
        return;
      }
      if (errno != EEXIST) throw ConvertError(path_, "", sys_error("cannot write output"));
    }
    try {
      deal_with_existing_temp(path_, temp_, notes_);
    } catch (...) {
      if (fd >= 0) {
        remove_on_signal(this, "");
        ::close(fd);
        ::unlink(mine.c_str());
      }
      throw;
    }
  }
  if (fd >= 0) {
    remove_on_signal(this, "");
    ::close(fd);
    ::unlink(mine.c_str());
  }
#endif
  throw ConvertError(path_, "", "cannot create " + temp_ + ": it keeps reappearing (another conversion to the same output?)");
}

AtomicFileSink::~AtomicFileSink() {
  if (fd_ < 0) return;
  remove_on_signal(this, "");
  struct stat a, b;  // remove the temporary file only while it is still the one this sink made
  if (::fstat(fd_, &a) == 0 && ::lstat(temp_.c_str(), &b) == 0 && same_file(a, b)) ::unlink(temp_.c_str());
  ::close(fd_);
  unlock();
}

void AtomicFileSink::unlock() {
#ifdef __EMSCRIPTEN__
  if (locked_) node_unlock(temp_ + ".lock");
#endif
  locked_ = false;
}

void AtomicFileSink::write_at(int64_t offset, const void* src, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(src);
  while (n > 0) {
    const ssize_t put = ::pwrite(fd_, p, n, off_t(offset));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) throw ConvertError(path_, "", sys_error("write failed"));
    p += put;
    offset += put;
    n -= size_t(put);
  }
}

void AtomicFileSink::commit() {
  refuse_input_as_output(path_);  // (the destructor removes the temporary file)
  struct stat a, b;
  if (::fstat(fd_, &a) != 0 || ::lstat(temp_.c_str(), &b) != 0 || !same_file(a, b))
    throw ConvertError(path_, "", temp_ + " was removed or replaced while the conversion wrote it");
#ifdef __EMSCRIPTEN__
  const int lock = -1;
#else
  const int lock = ::dup(fd_);  // holds the lock until the file has its name
#endif
  const bool closed = ::close(fd_) == 0;
  const int close_errno = errno;
  fd_ = -1;
  auto fail = [&](const std::string& err) {
    ::unlink(temp_.c_str());
    remove_on_signal(this, "");
    if (lock >= 0) ::close(lock);
    unlock();
    throw ConvertError(path_, "", err);
  };
  if (!closed) {
    errno = close_errno;
    fail(sys_error("write failed"));
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) fail(sys_error("cannot move the finished file into place"));
  remove_on_signal(this, "");
  if (lock >= 0) ::close(lock);
  unlock();
}

std::string read_text_file(const std::string& path) {
  FileSource f(path);
  std::string s(size_t(f.size()), '\0');
  f.read_at(0, s.data(), s.size());
  return s;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A file of the checkpoint's that may be absent: true if it is there; something else under its
// name (a FIFO, a folder) is an error rather than a file silently not read.
static bool optional_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  if (!S_ISREG(st.st_mode)) throw ConvertError(path, "", std::string("cannot read it: it is ") + file_kind(st.st_mode));
  return true;
}

// A directory here, as a Folder.
class DirFolder : public Folder {
 public:
  explicit DirFolder(std::string dir) : dir_(std::move(dir)) {}
  std::vector<std::string> names() const override {
    std::vector<std::string> v;
    DIR* d = ::opendir(dir_.empty() ? "." : dir_.c_str());
    if (!d) throw ConvertError(dir_, "", sys_error("cannot list folder"));
    while (dirent* e = ::readdir(d)) v.push_back(e->d_name);
    ::closedir(d);
    return v;
  }
  bool has(const std::string& name) const override { return optional_file(path(name)); }
  int64_t size(const std::string& name) const override { return FileSource(path(name)).size(); }
  std::string read(const std::string& name) const override { return read_text_file(path(name)); }
  std::unique_ptr<ByteSource> open(const std::string& name) const override { return std::make_unique<FileSource>(path(name)); }
  std::string path(const std::string& name) const override { return dir_.empty() ? name : dir_ + "/" + name; }

 private:
  std::string dir_;  // "": the current folder
};

CheckpointFiles find_checkpoint_files(const std::string& path) {
  std::string label = path;
  while (label.size() > 1 && label.back() == '/') label.pop_back();
  if (path.rfind(kHubScheme, 0) == 0) {  // a model on the Hub: named as the folder a download of it makes
    const std::unique_ptr<Folder> hub = open_hub_folder(path);
    return checkpoint_files_in(*hub, hub_label(path));
  }
  if (is_directory(path)) return checkpoint_files_in(DirFolder(path), label);
  if (!file_exists(path)) throw ConvertError(path, "", "no such file or folder");
  if (!ends_with(path, ".safetensors")) throw ConvertError(path, "", "not a .safetensors file or a folder");
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
  return checkpoint_files_in(DirFolder(dir), label, path.substr(slash == std::string::npos ? 0 : slash + 1));
}

}  // namespace leapconv
