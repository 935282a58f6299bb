// Corrupt GGUF-lite and LEAP files given to --inspect and --verify: header lies and truncation at
// many points must always give exit code 1 and one "error:" line, never a crash, a hang or a
// runaway allocation (the child runs with a 1 GiB address-space limit and a timeout).
#include <gtest/gtest.h>

#include <climits>
#include <set>

#include "gguf_reader.h"
#include "test_support.h"

using tsup::run_cli;

namespace {

class Corrupt : public tsup::TempDirTest {
 protected:
  std::vector<uint8_t> good_gguf, good_v1, good_v2;
  tgguf::File parsed;

  void SetUp() override {
    TempDirTest::SetUp();
    gen::Spec s;
    s.layers = 1;
    s.vocab = 32;
    s.hidden = 96;  // down_proj in = 96: q4 falls back to F16, so the file mixes F32, F16 and Q4
    s.dtype = "bf16";
    gen::write_checkpoint(path("model"), s);
    ASSERT_EQ(run_cli({path("good.gguf-lite"), "--model", path("model"), "--scheme", "q4", "--quiet"}, dir).exit_code, 0);
    ASSERT_EQ(run_cli({path("good1.bin"), "--meta-llama", path("model"), "--quiet"}, dir).exit_code, 0);
    ASSERT_EQ(run_cli({path("good2.bin"), "--meta-llama", path("model"), "--version", "2", "--quiet"}, dir).exit_code, 0);
    good_gguf = tsup::slurp(path("good.gguf-lite"));
    good_v1 = tsup::slurp(path("good1.bin"));
    good_v2 = tsup::slurp(path("good2.bin"));
    parsed = tgguf::read(path("good.gguf-lite"));
    ASSERT_LT(good_gguf.size(), 65535u) << "small enough for name_len to point past the end";
  }

  struct Bad {
    std::vector<uint8_t> bytes;
    std::string what;
    bool verify = true;  // also run --verify against the source model
  };

  // --inspect, --inspect --json (and --verify against the source model) on every case must fail
  // cleanly. The cases are written to separate files and run concurrently.
  void expect_all_rejected(const std::vector<Bad>& cases, const std::string& ext = ".gguf-lite",
                           bool inspect_json = true, size_t mem_mb = 1024) {
    std::vector<std::vector<std::string>> runs;
    std::vector<std::pair<size_t, std::string>> meta;  // case index, file
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string p = path("bad" + std::to_string(i) + ext);
      gen::write_file(p, cases[i].bytes);
      runs.push_back({"--inspect", p});
      meta.push_back({i, p});
      if (inspect_json) {
        runs.push_back({"--inspect", p, "--json"});
        meta.push_back({i, p});
      }
      if (cases[i].verify) {
        runs.push_back({"--verify", p, "--model", path("model"), "--json"});
        meta.push_back({i, p});
      }
    }
    const auto results = tsup::run_many(runs, dir, 10.0, mem_mb);
    for (size_t k = 0; k < runs.size(); ++k) {
      const auto& r = results[k];
      const std::string& p = meta[k].second;
      SCOPED_TRACE(cases[meta[k].first].what + ": " + runs[k][0] + (runs[k].size() > 2 ? " " + runs[k][2] : ""));
      EXPECT_FALSE(r.timed_out) << "hung\n" << r.describe();
      EXPECT_FALSE(r.signaled) << "crashed\n" << r.describe();
      EXPECT_EQ(r.exit_code, 1) << r.describe();
      const auto lines = r.error_lines();
      EXPECT_EQ(lines.size(), 1u) << r.describe();
      if (lines.size() == 1)
        EXPECT_NE(lines[0].find(p), std::string::npos) << "error does not name the file: " << lines[0];
    }
  }

  std::vector<uint8_t> gguf() const { return good_gguf; }
  size_t desc_pos(size_t i) const { return parsed.descs[i].desc_pos; }
  // Position of descriptor i's n_dims byte, dtype byte and offset field.
  size_t ndims_pos(size_t i) const { return desc_pos(i) + 2 + parsed.descs[i].name.size(); }
  size_t dims_pos(size_t i) const { return ndims_pos(i) + 1; }
  size_t dtype_pos(size_t i) const { return dims_pos(i) + 4 * parsed.descs[i].dims.size(); }
  size_t offset_pos(size_t i) const { return dtype_pos(i) + 1; }
};

TEST_F(Corrupt, GoodFilesAreAccepted) {
  for (const char* f : {"good.gguf-lite", "good1.bin", "good2.bin"}) {
    EXPECT_EQ(run_cli({"--inspect", path(f)}, dir).exit_code, 0) << f;
    EXPECT_EQ(run_cli({"--verify", path(f), "--model", path("model")}, dir).exit_code, 0) << f;
  }
  // The fixture's file mixes the encodings the corruptions below land in.
  std::set<int> codes;
  for (const auto& d : parsed.descs) codes.insert(d.dtype);
  EXPECT_EQ(codes, (std::set<int>{tgguf::F32, tgguf::F16, tgguf::Q4}));
}

TEST_F(Corrupt, BadMagicAndVersion) {
  std::vector<Bad> c;
  auto b = gguf();
  b[0] ^= 0xff;
  c.push_back({b, "magic"});
  b = gguf();
  tsup::put<uint32_t>(b, 4, 2);
  c.push_back({b, "version 2"});
  c.push_back({{}, "empty file"});
  c.push_back({{0x54, 0x46, 0x4C}, "3 bytes"});
  expect_all_rejected(c);
}

TEST_F(Corrupt, NTensorsTooBig) {
  std::vector<Bad> c;
  for (uint32_t n : {parsed.n_tensors + 1, parsed.n_tensors + 1000, 0x7fffffffu, 0xffffffffu}) {
    auto b = gguf();
    tsup::put<uint32_t>(b, 8, n);
    c.push_back({b, "n_tensors " + std::to_string(n)});
  }
  expect_all_rejected(c);
}

TEST_F(Corrupt, MetadataLenPastEof) {
  std::vector<Bad> c;
  for (uint32_t n : {uint32_t(good_gguf.size()), uint32_t(good_gguf.size() - 15), 0xffffffffu}) {
    auto b = gguf();
    tsup::put<uint32_t>(b, 12, n);
    c.push_back({b, "metadata_len " + std::to_string(n)});
  }
  expect_all_rejected(c);
}

TEST_F(Corrupt, NameLenPastEof) {
  const size_t last = parsed.descs.size() - 1;
  std::vector<Bad> c;
  auto b = gguf();
  tsup::put<uint16_t>(b, desc_pos(last), 0xffff);
  c.push_back({b, "name_len 0xffff on the last descriptor"});
  b = gguf();
  tsup::put<uint16_t>(b, desc_pos(0), 0xffff);
  c.push_back({b, "name_len 0xffff on the first descriptor"});
  expect_all_rejected(c);
}

TEST_F(Corrupt, NDimsHuge) {
  std::vector<Bad> c;
  for (uint8_t nd : {uint8_t(9), uint8_t(64), uint8_t(255)}) {
    auto b = gguf();
    b[ndims_pos(0)] = nd;
    c.push_back({b, "n_dims " + std::to_string(nd)});
  }
  expect_all_rejected(c);
}

TEST_F(Corrupt, DimsHuge) {
  std::vector<Bad> c;
  auto b = gguf();
  tsup::put<uint32_t>(b, dims_pos(0), 0xffffffffu);
  c.push_back({b, "dims[0] = 2^32-1"});
  b = gguf();
  for (size_t k = 0; k < parsed.descs[0].dims.size(); ++k) tsup::put<uint32_t>(b, dims_pos(0) + 4 * k, 0xffffffffu);
  c.push_back({b, "all dims 2^32-1"});
  expect_all_rejected(c);
}

TEST_F(Corrupt, OffsetsPastTheEnd) {
  const size_t data_len = good_gguf.size() - parsed.data_start;
  const size_t last = parsed.descs.size() - 1;
  std::vector<Bad> c;
  for (uint64_t off : {uint64_t(data_len), uint64_t(data_len) - 1, uint64_t(1) << 63, ~uint64_t(0),
                       ~uint64_t(0) - 15}) {
    auto b = gguf();
    tsup::put<uint64_t>(b, offset_pos(last), off);
    c.push_back({b, "last offset " + std::to_string(off)});
    b = gguf();
    tsup::put<uint64_t>(b, offset_pos(0), off);
    c.push_back({b, "first offset " + std::to_string(off)});
  }
  expect_all_rejected(c);
}

TEST_F(Corrupt, UnknownDtypeCode) {
  std::vector<Bad> c;
  for (uint8_t code : {uint8_t(4), uint8_t(7), uint8_t(255)}) {
    auto b = gguf();
    b[dtype_pos(0)] = code;
    c.push_back({b, "dtype " + std::to_string(code)});
  }
  expect_all_rejected(c);
}

TEST_F(Corrupt, QuantizedDtypeOnImpossibleShape) {
  // A 1-D norm (F32) relabelled Q8, and a 2-D F16 fallback (in = 96) relabelled Q4.
  size_t norm = SIZE_MAX, fb = SIZE_MAX;
  for (size_t i = 0; i < parsed.descs.size(); ++i) {
    if (parsed.descs[i].dims.size() == 1 && norm == SIZE_MAX) norm = i;
    if (parsed.descs[i].dtype == tgguf::F16 && fb == SIZE_MAX) fb = i;
  }
  ASSERT_NE(norm, SIZE_MAX);
  ASSERT_NE(fb, SIZE_MAX);
  std::vector<Bad> c;
  auto b = gguf();
  b[dtype_pos(norm)] = tgguf::Q8;
  c.push_back({b, "Q8 on a 1-D tensor"});
  b = gguf();
  b[dtype_pos(fb)] = tgguf::Q4;
  c.push_back({b, "Q4 with in % 64 != 0"});
  expect_all_rejected(c);
}

TEST_F(Corrupt, OverlappingTensorData) {
  // Hand-made files: B's bytes lie inside A's; then the same with an empty tensor sorted between.
  expect_all_rejected(
      {{tgguf::write("k=v", {{"a", {16}, tgguf::F32, 0}, {"b", {4}, tgguf::F32, 8}}, 64), "plain overlap", false},
       {tgguf::write("k=v", {{"a", {16}, tgguf::F32, 0}, {"e", {0}, tgguf::F32, 8}, {"b", {4}, tgguf::F32, 16}}, 64),
        "overlap behind an empty tensor", false}});
}

TEST_F(Corrupt, HandMadeWellFormedFileIsAccepted) {
  // Control for the hand-made files above: without the overlap, --inspect accepts it.
  const auto b = tgguf::write("k=v", {{"a", {16}, tgguf::F32, 0}, {"e", {0}, tgguf::F32, 64}, {"b", {4}, tgguf::F32, 64}}, 80);
  gen::write_file(path("ok.gguf-lite"), b);
  const auto r = run_cli({"--inspect", path("ok.gguf-lite"), "--json"}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

TEST_F(Corrupt, TruncatedAtEvery7thByteOfHeaderAndDescriptors) {
  const size_t end = parsed.data_start + 16;
  std::vector<Bad> c;
  for (size_t cut = 0; cut < end; cut += 7)  // --verify on every fourth cut keeps the suite fast
    c.push_back({std::vector<uint8_t>(good_gguf.begin(), good_gguf.begin() + long(cut)),
                 "truncated at " + std::to_string(cut), c.size() % 4 == 0});
  EXPECT_GT(c.size(), 100u);
  expect_all_rejected(c, ".gguf-lite", false);
}

TEST_F(Corrupt, TruncatedInData) {
  const size_t ds = parsed.data_start, size = good_gguf.size();
  std::vector<Bad> c;
  for (size_t cut : {ds, ds + 1, ds + 2, (ds + size) / 2, size - 64, size - 2, size - 1})
    c.push_back({std::vector<uint8_t>(good_gguf.begin(), good_gguf.begin() + long(cut)),
                 "truncated at " + std::to_string(cut) + " of " + std::to_string(size)});
  expect_all_rejected(c);
}

// ---------------- LEAP ----------------

TEST_F(Corrupt, TruncatedLeap) {
  std::vector<Bad> c;
  for (const auto* good : {&good_v1, &good_v2}) {
    const size_t size = good->size();
    for (size_t cut : {size_t(0), size_t(1), size_t(3), size_t(4), size_t(8), size_t(0x24), size_t(0x25),
                       size_t(0x28), size_t(100), size_t(255), size_t(256), size_t(257), size / 2, size - 4,
                       size - 1})
      c.push_back({std::vector<uint8_t>(good->begin(), good->begin() + long(cut)),
                   std::string(good == &good_v1 ? "v1" : "v2") + " truncated at " + std::to_string(cut)});
  }
  expect_all_rejected(c, ".bin");
}

TEST_F(Corrupt, LeapTrailingBytes) {
  auto b = good_v1;
  b.push_back(0);
  expect_all_rejected({{b, "one byte too many"}}, ".bin");
}

TEST_F(Corrupt, LeapHeaderLies) {
  struct Lie {
    const char* what;
    size_t off;
    int32_t value;
    bool v2;
  };
  const Lie lies[] = {
      {"version 3", 4, 3, false},          {"version 0", 4, 0, false},
      {"dim 0", 8, 0, false},              {"dim -64", 8, -64, false},
      {"dim not divisible by heads", 8, 66, false},
      {"hidden_dim 0", 12, 0, false},      {"n_heads 0", 20, 0, false},
      {"n_kv_heads 3 of 4 heads", 24, 3, false},
      {"vocab 0", 28, 0, false},           {"dim 2^31-1", 8, 0x7fffffff, false},
      {"hidden_dim 2^31-1", 12, 0x7fffffff, true},
      {"vocab -2^31", 28, INT32_MIN, false},
      {"group_size 0", 0x25, 0, true},     {"group_size 48 (does not divide 64)", 0x25, 48, true},
      {"group_size -64", 0x25, -64, true},
  };
  std::vector<Bad> c;
  for (const Lie& l : lies) {
    auto b = l.v2 ? good_v2 : good_v1;
    tsup::put<int32_t>(b, l.off, l.value);
    c.push_back({b, l.what});
  }
  expect_all_rejected(c, ".bin");
}

// A 256-byte header claiming 2^31-1 layers: the reader must compare the implied size with the file
// before building a per-layer table (the child gets 256 MiB of address space and 10 s).
TEST_F(Corrupt, LeapHugeLayerCount) {
  auto b = good_v1;
  tsup::put<int32_t>(b, 16, 0x7fffffff);
  expect_all_rejected({{b, "n_layers 2^31-1", false}}, ".bin", false, 256);
}

}  // namespace
