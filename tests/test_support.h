// Shared helpers for the test suite: per-test temp dirs, running the CLI, little-endian
// reading, and reference f16 conversions written independently of src/ (from the IEEE rules),
// so that expectations never come from the code under test.
#pragma once
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_gen.h"

// Built with AddressSanitizer (scripts/sanitize.sh)?
#if defined(__SANITIZE_ADDRESS__)
#define TSUP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TSUP_ASAN 1
#endif
#endif
#ifndef TSUP_ASAN
#define TSUP_ASAN 0
#endif

namespace tsup {

namespace fs = std::filesystem;

// ---- files ----
inline std::vector<uint8_t> slurp(const std::string& path) { return gen::read_file(path); }
inline std::string slurp_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
inline bool exists(const std::string& p) { return fs::exists(fs::path(p)); }

// ---- little-endian reads with bounds checks (a test reader must not run off its buffer) ----
template <typename T>
T le(const std::vector<uint8_t>& b, size_t off) {
  if (off + sizeof(T) > b.size()) throw std::runtime_error("test reader: read past end at " + std::to_string(off));
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}
template <typename T>
void put(std::vector<uint8_t>& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof(T));
}

// ---- reference half precision (independent of src/f16.h) ----
inline float half_to_float(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 0) v = std::ldexp(double(m), -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(double(1024 + m), e - 25);
  return float(s ? -v : v);
}
// Finite inputs, round half to even (std::nearbyint in the default rounding mode).
inline uint16_t float_to_half(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(double(f));
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  int ue = e - 1;
  if (ue < -14) ue = -14;  // subnormal range: quantum 2^-24
  double q = std::nearbyint(std::ldexp(a, 10 - ue));
  if (ue == -14 && q < 1024) return uint16_t(sign | uint16_t(q));
  if (q == 2048) { q = 1024; ++ue; }
  if (ue + 15 >= 31) return uint16_t(sign | 0x7c00);
  return uint16_t(sign | uint16_t((ue + 15) << 10) | uint16_t(q - 1024));
}
inline float round_f16(float f) { return half_to_float(float_to_half(f)); }

// ---- a per-test temporary directory ----
class TempDirTest : public ::testing::Test {
 protected:
  std::string dir;
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    std::string base = ::testing::TempDir();
    if (base.empty()) base = "/tmp/";
    if (base.back() != '/') base += '/';
    dir = base + "leapconv_" + name + "_" + std::to_string(::getpid());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string& rel) const { return dir + "/" + rel; }
};

// ---- running the CLI ----
struct RunResult {
  int exit_code = -1;   // valid when !signaled && !timed_out
  bool signaled = false;
  int signal = 0;
  bool timed_out = false;
  std::string out, err;
  double seconds = 0;
  // Lines of stderr that start with "error:".
  std::vector<std::string> error_lines() const {
    std::vector<std::string> v;
    std::istringstream s(err);
    for (std::string line; std::getline(s, line);)
      if (line.rfind("error:", 0) == 0) v.push_back(line);
    return v;
  }
  std::string describe() const {
    std::ostringstream o;
    o << "exit=" << exit_code << " signaled=" << signaled << " sig=" << signal << " timeout=" << timed_out
      << "\n--- stderr ---\n" << err << "--- stdout (first 2000) ---\n" << out.substr(0, 2000);
    return o.str();
  }
};

// Runs EXPORT_BIN with args; stdout/stderr go to files in scratch_dir. The child gets an address
// space limit (so a runaway allocation fails fast instead of eating the machine) and is killed
// after timeout_s. run_many runs several invocations concurrently (process start-up dominates).
struct Child {
  pid_t pid = -1;
  std::string out_path, err_path;
  std::chrono::steady_clock::time_point t0;
};

inline Child spawn_cli(const std::vector<std::string>& args, const std::string& scratch_dir, size_t mem_limit_mb) {
  static int counter = 0;
  Child c;
  const std::string tag = scratch_dir + "/.run" + std::to_string(counter++);
  c.out_path = tag + ".out";
  c.err_path = tag + ".err";
  std::vector<std::string> argv_s = {EXPORT_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  c.t0 = std::chrono::steady_clock::now();
  c.pid = ::fork();
  if (c.pid == 0) {
    const int o = ::open(c.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(c.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || in < 0) ::_exit(120);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    if (mem_limit_mb) {
#if TSUP_ASAN
      // ASan's shadow memory needs terabytes of address space: under RLIMIT_AS it cannot even
      // start. Its allocator takes the bound instead (no single allocation, and no process,
      // past the limit).
      std::string opts = ::getenv("ASAN_OPTIONS") ? std::string(::getenv("ASAN_OPTIONS")) + ":" : std::string();
      opts += "max_allocation_size_mb=" + std::to_string(mem_limit_mb) + ":hard_rss_limit_mb=" + std::to_string(mem_limit_mb) +
              ":detect_leaks=0";
      ::setenv("ASAN_OPTIONS", opts.c_str(), 1);
#else
      struct rlimit rl;
      rl.rlim_cur = rl.rlim_max = rlim_t(mem_limit_mb) << 20;
      ::setrlimit(RLIMIT_AS, &rl);
#endif
    }
    ::execv(argv[0], argv.data());
    ::_exit(121);
  }
  return c;
}

// Non-blocking: true when the child has finished (or was killed for running past timeout_s).
inline bool poll_cli(Child& c, double timeout_s, RunResult* r) {
  int status = 0;
  const pid_t w = ::waitpid(c.pid, &status, WNOHANG);
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.t0).count();
  if (w != c.pid) {
    if (t <= timeout_s) return false;
    ::kill(c.pid, SIGKILL);
    ::waitpid(c.pid, &status, 0);
    r->timed_out = true;
  }
  r->seconds = t;
  if (!r->timed_out) {
    if (WIFEXITED(status)) r->exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) { r->signaled = true; r->signal = WTERMSIG(status); }
  }
  r->out = slurp_text(c.out_path);
  r->err = slurp_text(c.err_path);
  ::unlink(c.out_path.c_str());
  ::unlink(c.err_path.c_str());
  return true;
}

inline std::vector<RunResult> run_many(const std::vector<std::vector<std::string>>& runs, const std::string& scratch_dir,
                                       double timeout_s = 30.0, size_t mem_limit_mb = 2048, size_t parallel = 4) {
  std::vector<RunResult> results(runs.size());
  std::vector<std::pair<size_t, Child>> active;
  size_t next = 0;
  while (next < runs.size() || !active.empty()) {
    while (next < runs.size() && active.size() < parallel) {
      active.push_back({next, spawn_cli(runs[next], scratch_dir, mem_limit_mb)});
      ++next;
    }
    bool any = false;
    for (size_t i = 0; i < active.size();) {
      if (poll_cli(active[i].second, timeout_s, &results[active[i].first])) {
        active.erase(active.begin() + long(i));
        any = true;
      } else {
        ++i;
      }
    }
    if (!any) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  return results;
}

inline RunResult run_cli(const std::vector<std::string>& args, const std::string& scratch_dir,
                         double timeout_s = 30.0, size_t mem_limit_mb = 2048) {
  return run_many({args}, scratch_dir, timeout_s, mem_limit_mb, 1)[0];
}

// A run that must fail cleanly: not killed, a non-zero exit, exactly one "error:" line naming
// every string in `names`, and no `out` (nor its .partial) left behind.
inline void expect_one_error(const RunResult& r, const std::vector<std::string>& names, const std::string& out) {
  ASSERT_FALSE(r.timed_out || r.signaled) << r.describe();
  EXPECT_NE(r.exit_code, 0) << r.describe();
  const auto lines = r.error_lines();
  ASSERT_EQ(lines.size(), 1u) << r.describe();
  for (const std::string& n : names) EXPECT_NE(lines[0].find(n), std::string::npos) << "no '" << n << "' in: " << lines[0];
  EXPECT_FALSE(exists(out));
  EXPECT_FALSE(exists(out + ".partial"));
}

// ---- a safetensors shard, parsed by the test itself (for building bad inputs) ----
struct Shard {
  nlohmann::ordered_json header;    // as stored, tensors + __metadata__
  std::vector<uint8_t> data;        // the data section
  std::vector<gen::RawTensor> tensors;  // in data order, with their bytes
};
inline Shard read_shard(const std::string& path) {
  Shard s;
  const std::vector<uint8_t> b = slurp(path);
  const uint64_t n = le<uint64_t>(b, 0);
  s.header = nlohmann::ordered_json::parse(std::string(b.begin() + 8, b.begin() + 8 + long(n)));
  s.data.assign(b.begin() + 8 + long(n), b.end());
  std::vector<std::pair<uint64_t, gen::RawTensor>> v;
  for (auto it = s.header.begin(); it != s.header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    gen::RawTensor t;
    t.name = it.key();
    t.dtype = (*it)["dtype"].get<std::string>();
    t.shape = (*it)["shape"].get<std::vector<int64_t>>();
    const uint64_t b0 = (*it)["data_offsets"][0], b1 = (*it)["data_offsets"][1];
    t.bytes.assign(s.data.begin() + long(b0), s.data.begin() + long(b1));
    v.push_back({b0, std::move(t)});
  }
  std::sort(v.begin(), v.end(), [](auto& a, auto& c) { return a.first < c.first; });
  for (auto& p : v) s.tensors.push_back(std::move(p.second));
  return s;
}
// The tensor named n among t (a test's own shard; throws when it is not there).
inline gen::RawTensor& tensor_named(std::vector<gen::RawTensor>& t, const std::string& n) {
  for (gen::RawTensor& x : t)
    if (x.name == n) return x;
  throw std::runtime_error("no " + n);
}
// Rewrites `shard` as orig's tensors after fn changed them (orig itself stays as read).
inline void rewrite_shard(const std::string& shard, const Shard& orig,
                          const std::function<void(std::vector<gen::RawTensor>&)>& fn) {
  std::vector<gen::RawTensor> t = orig.tensors;
  fn(t);
  gen::write_safetensors(shard, t);
}
// Writes a shard from an arbitrary header JSON text and data section.
inline void write_raw_shard(const std::string& path, const std::string& header, const std::vector<uint8_t>& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(header.data(), std::streamsize(header.size()));
  if (!data.empty()) f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

inline const gen::Tensor& find_tensor(const std::vector<gen::Tensor>& ts, const std::string& name) {
  for (const auto& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("generator returned no tensor " + name);
}

// The element count; 0 if any dimension is 0, INT64_MAX where the product would overflow.
inline int64_t numel(const std::vector<int64_t>& shape) {
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

}  // namespace tsup
