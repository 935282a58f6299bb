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

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_gen.h"

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
// after timeout_s.
inline RunResult run_cli(const std::vector<std::string>& args, const std::string& scratch_dir,
                         double timeout_s = 30.0, size_t mem_limit_mb = 2048) {
  RunResult r;
  static int counter = 0;
  const std::string tag = scratch_dir + "/.run" + std::to_string(counter++);
  const std::string out_path = tag + ".out", err_path = tag + ".err";
  std::vector<std::string> argv_s = {EXPORT_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || in < 0) ::_exit(120);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    if (mem_limit_mb) {
      struct rlimit rl;
      rl.rlim_cur = rl.rlim_max = rlim_t(mem_limit_mb) << 20;
      ::setrlimit(RLIMIT_AS, &rl);
    }
    ::execv(argv[0], argv.data());
    ::_exit(121);
  }
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.timed_out) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) { r.signaled = true; r.signal = WTERMSIG(status); }
  }
  r.out = slurp_text(out_path);
  r.err = slurp_text(err_path);
  ::unlink(out_path.c_str());
  ::unlink(err_path.c_str());
  return r;
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
// Writes a shard from an arbitrary header JSON text and data section.
inline void write_raw_shard(const std::string& path, const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b(8);
  const uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  gen::write_file(path, b);
}

inline const gen::Tensor& find_tensor(const std::vector<gen::Tensor>& ts, const std::string& name) {
  for (const auto& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("generator returned no tensor " + name);
}

inline int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace tsup
