// Split GGUF output (--split-max-size / --split-max-tensors), held to llama-gguf-split --split
// (tools/gguf-split/gguf-split.cpp in node-llama-cpp 3.21.1's llama.cpp) as the tests' own GGUF
// reader (gguf3_reader.h) sees it: the parts are the single file cut where gguf-split cuts it
// (by size: a new part when the tensors so far, each padded to 32 bytes, would pass the limit;
// by count: every N tensors), every key in the first part only, then split.no, split.tensors.count
// and split.count (the order ggml's gguf_set_val leaves them in), tensor infos in order with
// n_dims without trailing 1s, and each tensor's bytes the single file's. (Byte for byte against
// the real llama-gguf-split: by hand, with ../shared/tools/llama-peer; see the stop note.)
// --inspect and --verify read all parts from one name; a missing part, or parts of two different
// splits, are refused naming the file.
#include <gtest/gtest.h>

#include <cstdio>

#include "checkpoint_gen.h"
#include "gguf3_reader.h"
#include "test_support.h"

namespace {

class GgufSplit : public tsup::TempDirTest {
 protected:
  void SetUp() override {
    tsup::TempDirTest::SetUp();
    gen::Spec s;  // 4 x 9 + 3 = 39 tensors, ~3.5 MB in Q8_0
    s.dim = 256; s.hidden = 512; s.layers = 4; s.heads = 4; s.kv_heads = 2; s.vocab = 1000;
    gen::write_checkpoint(path("m"), s);
  }
  tsup::RunResult convert(const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {path(out), "--model", path("m"), "--outtype", "Q8_0", "--no-vocab", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return tsup::run_cli(args, dir);
  }
  static constexpr int kTensors = 39;
  static int parts_of(int per_part) { return (kTensors + per_part - 1) / per_part; }
  static std::string part_name(const std::string& base, int k, int n) {
    char b[64];
    std::snprintf(b, sizeof b, "-%05d-of-%05d.gguf", k + 1, n);
    return base + b;
  }
  // A tensor's bytes in a file: from its offset to the next one's (each padded to 32).
  static std::vector<std::vector<uint8_t>> tensor_bytes(const std::vector<uint8_t>& b, const tg3::File& f) {
    std::vector<std::vector<uint8_t>> out;
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      const size_t at = f.data_start + f.tensors[i].offset;
      const size_t end = i + 1 < f.tensors.size() ? f.data_start + f.tensors[i + 1].offset : b.size();
      out.emplace_back(b.begin() + long(at), b.begin() + long(end));
    }
    return out;
  }
  // Checks the parts at base-0000k-of-0000n.gguf against the single file, cut where gguf-split
  // cuts: `cut(i, size_so_far, padded)` says whether tensor i starts a new part.
  template <typename Cut>
  void expect_parts(const std::string& single, const std::string& base, Cut cut) {
    const std::vector<uint8_t> one = tsup::slurp(path(single));
    const tg3::File f = tg3::parse(one);
    const std::vector<std::vector<uint8_t>> data = tensor_bytes(one, f);
    std::vector<std::vector<size_t>> parts(1);
    size_t size = 0;
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      if (cut(i, size, data[i].size())) parts.emplace_back(), size = 0;
      size += data[i].size();
      parts.back().push_back(i);
    }
    const int n = int(parts.size());
    ASSERT_GT(n, 1);
    EXPECT_FALSE(tsup::exists(path(part_name(base, n, n))));  // no extra part
    for (int k = 0; k < n; ++k) {
      SCOPED_TRACE("part " + std::to_string(k + 1));
      const std::vector<uint8_t> b = tsup::slurp(path(part_name(base, k, n)));
      const tg3::File p = tg3::parse(b);
      // the keys: all of the single file's in the first part, then the three split keys
      const size_t own = k == 0 ? f.kv.size() : 0;
      ASSERT_EQ(p.kv.size(), own + 3);
      for (size_t i = 0; i < own; ++i) {
        EXPECT_EQ(p.kv[i].key, f.kv[i].key);
        EXPECT_EQ(p.kv[i].type, f.kv[i].type);
        EXPECT_EQ(p.kv[i].items, f.kv[i].items);
      }
      const char* keys[3] = {"split.no", "split.tensors.count", "split.count"};
      const uint32_t types[3] = {2, 5, 2};  // u16, i32, u16
      const int64_t values[3] = {k, int64_t(f.tensors.size()), n};
      for (int i = 0; i < 3; ++i) {
        const tg3::KV& e = p.kv[own + size_t(i)];
        EXPECT_EQ(e.key, keys[i]);
        ASSERT_EQ(e.type, types[i]);
        EXPECT_EQ(types[i] == 2 ? int64_t(tg3::item<uint16_t>(e)) : int64_t(tg3::item<int32_t>(e)), values[i]);
      }
      // the tensors: in order, their bytes the single file's, offsets from 0, the file padded
      ASSERT_EQ(p.tensors.size(), parts[size_t(k)].size());
      const std::vector<std::vector<uint8_t>> pd = tensor_bytes(b, p);
      uint64_t offset = 0;
      for (size_t j = 0; j < p.tensors.size(); ++j) {
        const tg3::Tensor& t = f.tensors[parts[size_t(k)][j]];
        std::vector<int64_t> ne = t.ne;  // ggml's writer: n_dims without trailing 1s
        while (ne.size() > 1 && ne.back() <= 1) ne.pop_back();
        EXPECT_EQ(p.tensors[j].name, t.name);
        EXPECT_EQ(p.tensors[j].type, t.type);
        EXPECT_EQ(p.tensors[j].ne, ne);
        EXPECT_EQ(p.tensors[j].offset, offset);
        EXPECT_EQ(pd[j], data[parts[size_t(k)][j]]);
        offset += pd[j].size();
      }
      EXPECT_EQ(b.size(), p.data_start + offset);
    }
  }
};

}  // namespace

TEST_F(GgufSplit, BySizeThePartsAreTheSingleFileCutAsGgufSplitCutsIt) {
  ASSERT_EQ(convert("one.gguf", {}).exit_code, 0);
  const auto r = convert("m.gguf", {"--split-max-size", "1M"});  // 10^6 bytes of tensors a part
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_parts("one.gguf", "m", [](size_t, size_t size, size_t padded) { return size + padded > 1000000; });
  EXPECT_FALSE(tsup::exists(path("m.gguf")));
}

TEST_F(GgufSplit, ByCountAndReadBackFromAnyPart) {
  ASSERT_EQ(convert("one.gguf", {}).exit_code, 0);
  ASSERT_EQ(convert("m.gguf", {"--split-max-tensors", "4"}).exit_code, 0);
  expect_parts("one.gguf", "m", [](size_t i, size_t, size_t) { return i > 0 && i % 4 == 0; });
  // --inspect from any part's name: every part's tensors, one file
  const auto one = nlohmann::json::parse(tsup::run_cli({"--inspect", path("one.gguf"), "--json"}, dir).out);
  const int n = parts_of(4);
  const auto parts = tsup::run_cli({"--inspect", path(part_name("m", 2, n)), "--json"}, dir);
  ASSERT_EQ(parts.exit_code, 0) << parts.describe();
  const auto j = nlohmann::json::parse(parts.out);
  EXPECT_EQ(j["parts"].size(), size_t(n));
  ASSERT_EQ(j["tensors"].size(), one["tensors"].size());
  for (size_t i = 0; i < j["tensors"].size(); ++i) {
    EXPECT_EQ(j["tensors"][i]["name"], one["tensors"][i]["name"]);
    EXPECT_EQ(j["tensors"][i]["file"], int(i / 4));
  }
  // --verify: the parts hold the model
  const auto v = tsup::run_cli({"--verify", path(part_name("m", 0, n)), "--model", path("m"), "--json"}, dir);
  ASSERT_EQ(v.exit_code, 0) << v.describe();
  const auto vj = nlohmann::json::parse(v.out);
  EXPECT_TRUE(vj["ok"].get<bool>());
  EXPECT_TRUE(vj["forward"]["ran"].get<bool>());
  EXPECT_EQ(vj["tensors"].size(), one["tensors"].size());
}

TEST_F(GgufSplit, AMissingPartOrPartsOfTwoSplitsAreRefusedByName) {
  ASSERT_EQ(convert("m.gguf", {"--split-max-tensors", "8"}).exit_code, 0);
  ASSERT_EQ(convert("n.gguf", {"--split-max-tensors", "4"}).exit_code, 0);
  // a part of another split under this split's name
  const int m = parts_of(8), n = parts_of(4);
  std::rename(path(part_name("n", 1, n)).c_str(), path(part_name("m", 1, m)).c_str());
  for (const char* op : {"--inspect", "--verify"}) {
    const auto r = tsup::run_cli({op, path(part_name("m", 0, m)), "--model", path("m")}, dir);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
    EXPECT_NE(r.error_lines()[0].find(part_name("m", 1, m)), std::string::npos) << r.error_lines()[0];
    EXPECT_NE(r.error_lines()[0].find("split.count"), std::string::npos) << r.error_lines()[0];
  }
  std::remove(path(part_name("m", 1, m)).c_str());
  for (const char* op : {"--inspect", "--verify"}) {
    const auto r = tsup::run_cli({op, path(part_name("m", 2, m)), "--model", path("m")}, dir);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
    EXPECT_NE(r.error_lines()[0].find(part_name("m", 1, m) + ": is missing"), std::string::npos) << r.error_lines()[0];
  }
}

TEST_F(GgufSplit, ImpossibleSplitsAreRefusedAndWriteNothing) {
  // a part must hold a tensor: a limit below the first one (the embeddings, 1000 x 256 in Q8_0)
  auto r = convert("m.gguf", {"--split-max-size", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
  EXPECT_NE(r.error_lines()[0].find("at least one tensor"), std::string::npos) << r.error_lines()[0];
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("m-0"), std::string::npos) << e.path();
  // sizes as gguf-split spells them, and only for GGUF
  r = convert("m.gguf", {"--split-max-size", "1.5G"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("megabytes (512M) or gigabytes (2G)"), std::string::npos) << r.err;
  r = tsup::run_cli({path("m.bin"), "--model", path("m"), "--split-max-tensors", "2", "--quiet"}, dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("splitting into parts is for GGUF"), std::string::npos) << r.err;
  EXPECT_FALSE(tsup::exists(path("m.bin")));
}
