#include "posix_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

namespace leapconv {

static std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

FileSource::FileSource(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY);
  if (fd_ < 0) throw ConvertError(path, "", sys_error("cannot open"));
  struct stat st;
  if (::fstat(fd_, &st) != 0) throw ConvertError(path, "", sys_error("cannot stat"));
  size_ = int64_t(st.st_size);
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

static volatile sig_atomic_t g_have_temp = 0;
static char g_temp_path[4096];

static void on_signal(int sig) {
  if (g_have_temp) ::unlink(g_temp_path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void remove_on_signal(const std::string& temp_path) {
  if (temp_path.empty()) { g_have_temp = 0; return; }
  std::snprintf(g_temp_path, sizeof g_temp_path, "%s", temp_path.c_str());
  g_have_temp = 1;
  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
}

AtomicFileSink::AtomicFileSink(const std::string& path) : path_(path), temp_(path + ".partial") {
  if (is_directory(path)) throw ConvertError(path, "", "output path is a directory");
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd_ < 0) throw ConvertError(path, "", sys_error("cannot write output"));
  remove_on_signal(temp_);
}

AtomicFileSink::~AtomicFileSink() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
    remove_on_signal("");
  }
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
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(temp_.c_str());
    throw ConvertError(path_, "", sys_error("write failed"));
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const std::string err = sys_error("cannot move the finished file into place");
    ::unlink(temp_.c_str());
    throw ConvertError(path_, "", err);
  }
  remove_on_signal("");
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

static bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

CheckpointFiles find_checkpoint_files(const std::string& path) {
  CheckpointFiles files;
  std::string dir = path;
  std::vector<std::string> shards;
  if (is_directory(path)) {
    DIR* d = ::opendir(path.c_str());
    if (!d) throw ConvertError(path, "", sys_error("cannot list folder"));
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (ends_with(n, ".safetensors") && n[0] != '.') shards.push_back(n);
    }
    ::closedir(d);
    std::sort(shards.begin(), shards.end());
    for (auto& s : shards) s = path + "/" + s;
    files.label = path;
  } else if (file_exists(path)) {
    if (!ends_with(path, ".safetensors")) throw ConvertError(path, "", "not a .safetensors file or a folder");
    shards.push_back(path);
    size_t slash = path.find_last_of('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
    files.label = path;
  } else {
    throw ConvertError(path, "", "no such file or folder");
  }
  while (files.label.size() > 1 && files.label.back() == '/') files.label.pop_back();
  for (const std::string& s : shards) files.shards.push_back(std::make_unique<FileSource>(s));
  if (file_exists(dir + "/config.json")) files.config_json = read_text_file(dir + "/config.json");
  if (file_exists(dir + "/params.json")) files.params_json = read_text_file(dir + "/params.json");
  if (is_directory(path) && file_exists(dir + "/model.safetensors.index.json"))
    files.index_json = read_text_file(dir + "/model.safetensors.index.json");
  for (const SideFileSpec& spec : side_file_specs()) {
    const std::string p = dir + "/" + spec.name;
    if (!file_exists(p)) continue;
    check_side_file_size(spec.name, FileSource(p).size());  // bounded before it is read
    files.side_files.push_back({spec.name, read_text_file(p)});
  }
  return files;
}

}  // namespace leapconv
