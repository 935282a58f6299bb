// A model on the Hugging Face Hub as a Folder, for `--model hf://owner/name[@revision]` in the
// Node CLI (wasm/cli.mjs). The core decides which files it reads, as for a local folder
// (checkpoint_files_in); JavaScript moves the bytes, through the page's own code: web/hub.js lists
// the repository and resolves each file, web/remote_file.js reads a shard by range requests with
// its checks (206, exact Content-Range, the listed size, one ETag throughout) and retries
// (wasm/hub_fetcher.mjs runs them; wasm/node_pre.js waits for them on the converting thread).
// The native CLI has no HTTP client: there, hf:// is one line saying to use the Node CLI.
#pragma once
#include <cstdlib>
#include <memory>
#include <string>

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

#ifdef __EMSCRIPTEN__
// A file of the model on the Hub: a shard, read by range, or a small file, fetched whole when the
// model was opened (a blocking call into JavaScript per read).
class HubSource : public ByteSource {
 public:
  HubSource(int index, std::string name, int64_t size) : index_(index), name_(std::move(name)), size_(size) {}
  const std::string& name() const override { return name_; }
  int64_t size() const override { return size_; }
  void read_at(int64_t offset, void* dst, size_t n) override {
    if (offset < 0 || offset > size_ || int64_t(n) > size_ - offset)
      throw ConvertError(name_, "", "read past the end of the file (truncated?)");
    if (n == 0) return;
    if (char* err = leapconv_hub_read(index_, double(offset), dst, double(n))) {
      const std::string msg = err;
      std::free(err);
      throw ConvertError(name_, "", msg);
    }
  }

 private:
  int index_;
  std::string name_;
  int64_t size_;
};

class HubFolder : public Folder {
 public:
  explicit HubFolder(const nlohmann::json& listing) : listing_(listing) {}
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
    HubSource(f.at("index").get<int>(), name, int64_t(bytes.size())).read_at(0, bytes.data(), bytes.size());
    return bytes;
  }
  std::unique_ptr<ByteSource> open(const std::string& name) const override {
    const nlohmann::json& f = at(name);
    return std::make_unique<HubSource>(f.at("index").get<int>(), name, f.at("size").get<int64_t>());
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
  nlohmann::json listing_;
};

// The model `spec` names (hf://owner/name[@revision]), listed and resolved.
inline std::unique_ptr<Folder> open_hub_folder(const std::string& spec) {
  const nlohmann::json wanted = checkpoint_small_files();
  char* raw = leapconv_hub_open(spec.c_str(), wanted.dump().c_str());
  const std::string text = raw;
  std::free(raw);
  const nlohmann::json answer = nlohmann::json::parse(text);  // (ours: wasm/hub_fetcher.mjs made it)
  if (answer.contains("error")) throw ConvertError(spec, "", answer.at("error").get<std::string>());
  return std::make_unique<HubFolder>(answer.at("files"));
}
#else
inline std::unique_ptr<Folder> open_hub_folder(const std::string& spec) {
  throw ConvertError(spec, "", "this CLI reads from the Hugging Face Hub only in its Node build: run `node wasm/cli.mjs` "
                               "with the same arguments (or download the model and give its folder)");
}
#endif

}  // namespace leapconv
