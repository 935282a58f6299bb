// A model on the Hugging Face Hub as a Folder, for `--model hf://owner/name[@revision]` (either
// CLI). The core decides which files it reads, as for a local folder (checkpoint_files_in);
// JavaScript moves the bytes, through the page's own code: web/hub.js lists the repository and
// resolves each file, web/remote_file.js reads a shard by range requests with its checks (206,
// exact Content-Range, the listed size, one ETag throughout) and retries. wasm/hub_fetcher.mjs
// runs them: in the Node CLI as a worker its converting thread waits on (wasm/node_pre.js); the
// native CLI, which has no HTTP client of its own, runs it as a Node process.
#pragma once
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "source/checkpoint.h"

#ifdef __EMSCRIPTEN__
#include <emscripten.h>

// Lists and resolves the model (the small files the core reads fetched whole, the shards' sizes):
// a malloc'd JSON {label, files: [{name, size, index, whole}]} or {error}. wanted: a JSON list of
// the small files' names.
EM_JS(char*, leapconv_hub_open, (const char* spec, const char* wanted), {
  const answer = globalThis.leapconvHub ? globalThis.leapconvHub.open(UTF8ToString(spec), UTF8ToString(wanted))
                                  : JSON.stringify({error: 'this build cannot read from the Hub'});
  const size = lengthBytesUTF8(answer) + 1;
  const p = _malloc(size);
  stringToUTF8(answer, p, size);
  return p;
});

// Bytes [offset, offset + n) of file `index` into wasm memory at dst: 0, or a malloc'd message.
EM_JS(char*, leapconv_hub_read, (int index, double offset, void* dst, double n), {
  const got = globalThis.leapconvHub.read(index, offset, n);
  if (typeof got !== 'string' && got.length === n) {
    new Uint8Array(wasmMemory.buffer, dst, n).set(got);
    return 0;
  }
  const err = typeof got === 'string' ? got : 'the Hub reader returned ' + got.length + ' bytes, not ' + n;
  const size = lengthBytesUTF8(err) + 1;
  const p = _malloc(size);
  stringToUTF8(err, p, size);
  return p;
});
#else
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
extern char** environ;
#endif

namespace leapconv {

inline constexpr const char* kHubScheme = "hf://";

// "hf://owner/name@rev" -> "name": the model is named as the folder a download of it makes.
inline std::string hub_label(const std::string& spec) {
  std::string id = spec.substr(std::string(kHubScheme).size());
  id = id.substr(0, id.find('@'));
  const size_t slash = id.find('/');
  return slash == std::string::npos ? id : id.substr(slash + 1);
}

// How a Hub model's bytes reach the core: wasm/hub_fetcher.mjs, as a worker of the Node CLI
// (WasmHubChannel) or as a Node process of the native CLI's (NodeHubChannel). One request at a time.
class HubChannel {
 public:
  virtual ~HubChannel() = default;
  // The model `spec` names, listed and resolved: the JSON answer ({label, files} or {error}).
  virtual std::string open(const std::string& spec, const std::string& wanted) = 0;
  // Bytes [offset, offset + n) of file `index` into dst: "" or why they could not be read.
  virtual std::string read(int index, int64_t offset, void* dst, size_t n) = 0;
};

#ifdef __EMSCRIPTEN__
class WasmHubChannel : public HubChannel {
 public:
  std::string open(const std::string& spec, const std::string& wanted) override {
    char* raw = leapconv_hub_open(spec.c_str(), wanted.c_str());
    std::string answer = raw;
    std::free(raw);
    return answer;
  }
  std::string read(int index, int64_t offset, void* dst, size_t n) override {
    char* err = leapconv_hub_read(index, double(offset), dst, double(n));
    if (!err) return "";
    std::string msg = err;
    std::free(err);
    return msg;
  }
};
#else
// `node wasm/hub_fetcher.mjs` as a child process on a socket pair (a socket, not a pipe: a child
// that died is an error here, not a SIGPIPE): a line of JSON per request, a line of JSON per
// answer, a read's bytes after its line.
class NodeHubChannel : public HubChannel {
 public:
  explicit NodeHubChannel(const std::string& spec) : spec_(spec) {
    const std::string fetcher = fetcher_path();
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) fail(std::string("cannot start the Hub reader: ") + std::strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    const char* node = std::getenv("LEAPCONV_NODE") ? std::getenv("LEAPCONV_NODE") : "node";
    std::vector<char*> argv = {const_cast<char*>(node), const_cast<char*>(fetcher.c_str()), nullptr};
    const int rc = ::posix_spawnp(&pid_, node, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(sv[1]);
    fd_ = sv[0];
    if (rc != 0) {
      pid_ = -1;
      fail(rc == ENOENT ? "reading from the Hub runs Node.js (the `node` command), which is not on the PATH: install "
                          "Node.js 20 or later, or give the model's folder instead"
                        : std::string("cannot start node: ") + std::strerror(rc));
    }
  }
  ~NodeHubChannel() override {
    if (fd_ >= 0) ::close(fd_);  // (the end of its stdin ends it)
    if (pid_ > 0) {
      for (int i = 0; i < 50; ++i) {  // up to 0.5 s, then it is stopped
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
        ::usleep(10000);
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  std::string open(const std::string& spec, const std::string& wanted) override {
    const nlohmann::json a = ask({{"op", "open"}, {"spec", spec}, {"wanted", wanted}});
    if (a.contains("error")) return nlohmann::json{{"error", a["error"]}}.dump();
    return a.at("json").get<std::string>();
  }
  std::string read(int index, int64_t offset, void* dst, size_t n) override {
    const nlohmann::json a = ask({{"op", "read"}, {"file", index}, {"offset", offset}, {"length", n}});
    if (a.contains("error")) return a["error"].get<std::string>();
    if (a.value("bytes", int64_t(-1)) != int64_t(n)) return "the Hub reader answered " + a.dump() + " for " + std::to_string(n) + " bytes";
    take(static_cast<char*>(dst), n);
    return "";
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw ConvertError(spec_, "", why); }

  // wasm/hub_fetcher.mjs: $LEAPCONV_HUB_FETCHER, or beside this program's build folder (build/native/x
  // -> wasm/, up to three folders up).
  std::string fetcher_path() const {
    if (const char* e = std::getenv("LEAPCONV_HUB_FETCHER")) return e;
    char exe[4096];
    const ssize_t len = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    std::string dir = len > 0 ? std::string(exe, size_t(len)) : std::string();
    for (int up = 0; up < 4 && !dir.empty(); ++up) {
      dir = dir.substr(0, dir.find_last_of('/'));
      const std::string p = dir + "/wasm/hub_fetcher.mjs";
      if (::access(p.c_str(), R_OK) == 0) return p;
    }
    fail("reading from the Hub needs wasm/hub_fetcher.mjs from this program's source folder (set LEAPCONV_HUB_FETCHER to it)");
  }

  nlohmann::json ask(const nlohmann::json& request) {
    std::lock_guard<std::mutex> lock(m_);
    const std::string line = request.dump() + "\n";
    for (size_t at = 0; at < line.size();) {
      const ssize_t k = ::send(fd_, line.data() + at, line.size() - at, MSG_NOSIGNAL);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) fail("the Hub reader (node) stopped");
      at += size_t(k);
    }
    std::string answer;
    for (;;) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        answer = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        break;
      }
      if (buf_.size() > (size_t(64) << 20)) fail("the Hub reader's answer has no end");
      fill();
    }
    try {
      return nlohmann::json::parse(answer);
    } catch (const std::exception&) {
      fail("the Hub reader answered something that is not JSON");
    }
  }
  void take(char* dst, size_t n) {  // n bytes after the answer's line
    const size_t have = std::min(n, buf_.size());
    std::memcpy(dst, buf_.data(), have);
    buf_.erase(0, have);
    for (size_t at = have; at < n;) {
      const ssize_t k = ::recv(fd_, dst + at, n - at, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) fail("the Hub reader (node) stopped in the middle of an answer");
      at += size_t(k);
    }
  }
  void fill() {
    char chunk[65536];
    ssize_t k;
    do k = ::recv(fd_, chunk, sizeof chunk, 0);
    while (k < 0 && errno == EINTR);
    if (k <= 0) fail("the Hub reader (node) stopped without an answer");
    buf_.append(chunk, size_t(k));
  }

  std::string spec_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buf_;  // what came after the last answer taken
  std::mutex m_;
};
#endif

// A file of the model on the Hub: a shard, read by range, or a small file, fetched whole when the
// model was opened.
class HubSource : public ByteSource {
 public:
  HubSource(std::shared_ptr<HubChannel> channel, int index, std::string name, int64_t size)
      : channel_(std::move(channel)), index_(index), name_(std::move(name)), size_(size) {}
  const std::string& name() const override { return name_; }
  int64_t size() const override { return size_; }
  void read_at(int64_t offset, void* dst, size_t n) override {
    if (offset < 0 || offset > size_ || int64_t(n) > size_ - offset)
      throw ConvertError(name_, "", "read past the end of the file (truncated?)");
    if (n == 0) return;
    const std::string err = channel_->read(index_, offset, dst, n);
    if (!err.empty()) throw ConvertError(name_, "", err);
  }

 private:
  std::shared_ptr<HubChannel> channel_;
  int index_;
  std::string name_;
  int64_t size_;
};

class HubFolder : public Folder {
 public:
  HubFolder(std::shared_ptr<HubChannel> channel, const nlohmann::json& listing) : channel_(std::move(channel)), listing_(listing) {}
  std::vector<std::string> names() const override {
    std::vector<std::string> v;
    for (const auto& f : listing_) v.push_back(f.at("name").get<std::string>());
    return v;
  }
  bool has(const std::string& name) const override { return find(name) != nullptr; }
  int64_t size(const std::string& name) const override { return at(name).at("size").get<int64_t>(); }
  std::string read(const std::string& name) const override {
    const nlohmann::json& f = at(name);
    if (!f.at("whole").get<bool>()) throw ConvertError(name, "", "is not one of the small files fetched whole");
    std::string bytes(size_t(f.at("size").get<int64_t>()), '\0');
    HubSource(channel_, f.at("index").get<int>(), name, int64_t(bytes.size())).read_at(0, bytes.data(), bytes.size());
    return bytes;
  }
  std::unique_ptr<ByteSource> open(const std::string& name) const override {
    const nlohmann::json& f = at(name);
    return std::make_unique<HubSource>(channel_, f.at("index").get<int>(), name, f.at("size").get<int64_t>());
  }
  std::string path(const std::string& name) const override { return name; }

 private:
  const nlohmann::json* find(const std::string& name) const {
    for (const auto& f : listing_)
      if (f.at("name").get<std::string>() == name) return &f;
    return nullptr;
  }
  const nlohmann::json& at(const std::string& name) const {
    const nlohmann::json* f = find(name);
    if (!f) throw ConvertError(name, "", "is not in the model's listing");
    return *f;
  }
  std::shared_ptr<HubChannel> channel_;
  nlohmann::json listing_;
};

// The model `spec` names (hf://owner/name[@revision]), listed and resolved.
inline std::unique_ptr<Folder> open_hub_folder(const std::string& spec) {
#ifdef __EMSCRIPTEN__
  auto channel = std::make_shared<WasmHubChannel>();
#else
  auto channel = std::make_shared<NodeHubChannel>(spec);
#endif
  const nlohmann::json answer = nlohmann::json::parse(channel->open(spec, nlohmann::json(checkpoint_small_files()).dump()));
  if (answer.contains("error")) throw ConvertError(spec, "", answer.at("error").get<std::string>());
  return std::make_unique<HubFolder>(channel, answer.at("files"));
}

}  // namespace leapconv
