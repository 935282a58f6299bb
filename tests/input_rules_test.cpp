// What the readers take and what the writers write must agree, and inputs must mean one thing:
// duplicate keys in a safetensors header are refused (a JSON parser keeps the last one), a
// shape whose dimensions multiply past int64 is refused even when one of them is 0, GGUF-lite's
// writer refuses exactly the shapes its reader rejects (9-D, dims past u32, products past
// 2^50), and a .safetensors file the index does not name is left out, with a warning.
#include <gtest/gtest.h>

#include "formats/convert.h"
#include "source/safetensors.h"
#include "gguf_reader.h"
#include "test_support.h"

using namespace leapconv;
using tsup::run_cli;

namespace {

class InputRules : public tsup::TempDirTest {
 protected:
  void expect_error(const std::vector<std::string>& args, const std::vector<std::string>& names) {
    const auto r = run_cli(args, dir);
    ASSERT_FALSE(r.signaled) << r.describe();
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    const auto lines = r.error_lines();
    ASSERT_EQ(lines.size(), 1u) << r.describe();
    for (const std::string& n : names) EXPECT_NE(lines[0].find(n), std::string::npos) << "'" << n << "' not in " << lines[0];
  }
  // A one-shard "checkpoint" of raw tensors, as a single .safetensors file.
  std::string shard_of(const std::string& name, const std::vector<gen::RawTensor>& ts) {
    gen::write_safetensors(path(name), ts);
    return path(name);
  }
};

gen::RawTensor f32_tensor(const std::string& name, std::vector<int64_t> shape) {
  gen::RawTensor t;
  t.name = name;
  t.dtype = "F32";
  t.shape = std::move(shape);
  t.bytes.assign(size_t(std::max<int64_t>(0, tsup::numel(t.shape))) * 4, 0);
  return t;
}

TEST_F(InputRules, DuplicateKeysInASafetensorsHeaderAreRefused) {
  const std::string entry = "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}";
  tsup::write_raw_shard(path("dup.safetensors"), "{\"w\":" + entry + ",\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                        std::vector<uint8_t>(8, 0));
  expect_error({path("o.gguf-lite"), "--model", path("dup.safetensors"), "--quiet"}, {"dup.safetensors", "'w'", "twice"});
  tsup::write_raw_shard(path("dup2.safetensors"), "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                        std::vector<uint8_t>(4, 0));
  expect_error({path("o.gguf-lite"), "--model", path("dup2.safetensors"), "--quiet"}, {"'w'", "'dtype' twice"});
  tsup::write_raw_shard(path("dup3.safetensors"), "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"},\"w\":" + entry + "}",
                        std::vector<uint8_t>(4, 0));
  expect_error({path("o.gguf-lite"), "--model", path("dup3.safetensors"), "--quiet"}, {"'a' twice"});
  EXPECT_FALSE(tsup::exists(path("o.gguf-lite")));
}

// A shard's header as bytes: u64 length, JSON, then `data` bytes.
std::vector<uint8_t> shard_bytes(const std::string& header, size_t data) {
  std::vector<uint8_t> b(8 + header.size() + data, 0);
  for (int i = 0; i < 8; ++i) b[size_t(i)] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::copy(header.begin(), header.end(), b.begin() + 8);
  return b;
}
// The error reading a shard's header throws (none: "").
ConvertError header_error(const std::string& header, size_t data) {
  MemorySource src("model.safetensors", shard_bytes(header, data));
  try {
    read_safetensors_header(src);
  } catch (const ConvertError& e) {
    return e;
  }
  return ConvertError("");
}

// The errors a user meets most carry what to do, in the user's terms (the page shows it above
// the technical line): a shard cut off in the download, a dtype the converter does not read.
TEST_F(InputRules, CommonErrorsSayWhatToDo) {
  const ConvertError cut = header_error(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  EXPECT_NE(std::string(cut.what()).find("lie outside the file"), std::string::npos) << cut.what();
  EXPECT_EQ(cut.advice(), "model.safetensors is shorter than its own header says: the download was cut off. Download it again.");
  const ConvertError dtype = header_error(R"({"w":{"dtype":"F6_E3M2","shape":[4],"data_offsets":[0,3]}})", 3);
  EXPECT_NE(std::string(dtype.what()).find("unsupported dtype 'F6_E3M2'"), std::string::npos) << dtype.what();
  // every dtype the table reads is named, in its order
  std::string names;
  for (const SourceDType& t : source_dtypes()) names += (names.empty() ? "" : ", ") + std::string(t.name);
  EXPECT_EQ(dtype.advice(), "This checkpoint stores weights as F6_E3M2, which the converter does not read: it reads " + names + ".");
  EXPECT_STREQ(header_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8).what(), "") << "a sound header";
}

TEST_F(InputRules, ShapesWhoseProductOverflowsAreRefusedEvenWhenEmpty) {
  const int64_t big = int64_t(1) << 40;
  expect_error({path("o.gguf-lite"), "--model", shard_of("a.safetensors", {f32_tensor("w", {big, big, 0})}), "--quiet"},
               {"a.safetensors", "'w'", "overflows"});
  // Multiplied left to right, as the safetensors library does: a leading 0 keeps the product 0.
  const auto r = run_cli({path("o.gguf-lite"), "--model", shard_of("b.safetensors", {f32_tensor("w", {0, big, big})}),
                          "--quiet"},
                         dir);
  EXPECT_EQ(r.exit_code, 1) << r.describe();  // GGUF-lite's dims are u32: the writer says so
  ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
  EXPECT_NE(r.error_lines()[0].find("GGUF-lite cannot store its shape"), std::string::npos) << r.describe();
}

// The writer refuses what the reader rejects, and the reader takes what the writer writes.
TEST_F(InputRules, GgufLiteWriterAndReaderAcceptTheSameShapes) {
  struct Case {
    std::vector<int64_t> shape;
    bool ok;
  };
  const int64_t u32max = 0xffffffffLL;
  const std::vector<Case> cases = {
      {{1, 1, 1, 1, 1, 1, 1, 1}, true},        {{1, 1, 1, 1, 1, 1, 1, 1, 1}, false},
      {{u32max, u32max, 0}, false},            {{0, u32max, u32max}, true},
      {{u32max + 1, 0}, false},                {{int64_t(1) << 25, int64_t(1) << 25, 0}, true},
      {{int64_t(1) << 26, int64_t(1) << 25, 0}, false}, {{3, 0, 5}, true},
      {{0}, true},                             {{}, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_string(c.shape));
    std::vector<gen::RawTensor> ts = {f32_tensor("a", {2, 3}), f32_tensor("w", c.shape)};
    if (tsup::numel(c.shape) == 0) ts[1].bytes.clear();
    const std::string shard = shard_of("s.safetensors", ts);
    const std::string out = path("o.gguf-lite");
    std::filesystem::remove(out);
    const auto w = run_cli({out, "--model", shard, "--scheme", "f32", "--quiet"}, dir);
    ASSERT_FALSE(w.signaled) << w.describe();
    EXPECT_EQ(w.exit_code == 0, c.ok) << w.describe();
    // The file the writer made, or the one it would have made: the project's reader must agree.
    std::vector<uint8_t> file;
    if (w.exit_code == 0) {
      file = tsup::slurp(out);
      const tgguf::File parsed = tgguf::read(out);  // the tests' own reader takes it too
      ASSERT_EQ(parsed.descs.size(), 2u);
      EXPECT_EQ(parsed.descs[1].dims, c.shape);
    } else {
      std::vector<tgguf::WTensor> d = {{"a", {2, 3}, tgguf::F32, 0}, {"w", c.shape, tgguf::F32, 24}};
      file = tgguf::write("format=gguf-lite", d, 24);
    }
    if (std::any_of(c.shape.begin(), c.shape.end(), [](int64_t d) { return d > 0xffffffffLL; }))
      continue;  // not even expressible in a GGUF-lite descriptor
    MemorySource src("o.gguf-lite", file);
    bool read_ok = true;
    try {
      read_gguf_lite(src);
    } catch (const ConvertError&) {
      read_ok = false;
    }
    EXPECT_EQ(read_ok, c.ok);
  }
}

TEST_F(InputRules, ShardsTheIndexDoesNotNameAreLeftOut) {
  gen::Spec spec;
  spec.shards = 2;
  gen::write_checkpoint(path("m"), spec);
  const auto ref = run_cli({path("ref.gguf-lite"), "--model", path("m"), "--quiet"}, dir);
  ASSERT_EQ(ref.exit_code, 0) << ref.describe();
  // A stray file beside the shards: another tensor, and one with a name the shards also have.
  gen::write_safetensors(path("m/consolidated.safetensors"),
                         {f32_tensor("junk", {4}), f32_tensor("model.norm.weight", {spec.dim})});
  const auto r = run_cli({path("o.gguf-lite"), "--model", path("m")}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("warning: " + path("m/consolidated.safetensors") + " is not named in model.safetensors.index.json"),
            std::string::npos)
      << r.describe();
  EXPECT_EQ(tsup::slurp(path("o.gguf-lite")), tsup::slurp(path("ref.gguf-lite")));
  // Even a garbage stray file is never read.
  gen::write_text(path("m/consolidated.safetensors"), "not a safetensors file");
  EXPECT_EQ(run_cli({path("o2.gguf-lite"), "--model", path("m"), "--quiet"}, dir).exit_code, 0);
  for (const char* out : {"o.bin", "o.gguf"}) {
    const auto t = run_cli({path(out), "--model", path("m"), "--no-vocab", "--quiet"}, dir);
    EXPECT_EQ(t.exit_code, 0) << t.describe();
  }
}

}  // namespace

namespace {

// Names are data: a newline or ESC in one cannot forge a second error line or drive the
// terminal, a megabyte name does not make a megabyte line, and a name that is not UTF-8 does
// not break --json.
TEST_F(InputRules, NamesInErrorLinesAreOneBoundedPrintableLine) {
  const std::string forged = "w\nerror: forged line\x1b[2J\r";
  const std::string huge(1 << 20, 'n');
  for (const std::string& name : {forged, huge, std::string("caf\xc3\xa9\xff\xfe")}) {
    const std::string header =
        nlohmann::json{{name, {{"dtype", "F8_E5M2"}, {"shape", {1}}, {"data_offsets", {0, 1}}}}}.dump(
            -1, ' ', false, nlohmann::json::error_handler_t::ignore);
    tsup::write_raw_shard(path("n.safetensors"), header, {0});
    const auto r = run_cli({path("o.gguf-lite"), "--model", path("n.safetensors"), "--quiet"}, dir);
    ASSERT_FALSE(r.signaled) << r.describe();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.error_lines().size(), 1u) << r.err.substr(0, 500);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err.substr(0, 500);
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
    EXPECT_EQ(r.err.find('\r'), std::string::npos);
    EXPECT_LT(r.err.size(), 5000u);
  }
}

TEST_F(InputRules, InspectJsonOfANameThatIsNotUtf8) {
  const std::vector<tgguf::WTensor> d = {{"ok", {2}, tgguf::F32, 0}, {"bad\xff\xfe name", {2}, tgguf::F32, 8}};
  gen::write_file(path("x.gguf-lite"), tgguf::write("format=gguf-lite\nsource=\xff", d, 16));
  const auto r = run_cli({"--inspect", path("x.gguf-lite"), "--json"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);  // valid JSON, the bytes replaced
  ASSERT_EQ(j["tensors"].size(), 2u);
  EXPECT_EQ(j["tensors"][1]["name"], "bad\xef\xbf\xbd\xef\xbf\xbd name");
  const auto t = run_cli({"--inspect", path("x.gguf-lite")}, dir);
  EXPECT_EQ(t.exit_code, 0) << t.describe();
}

}  // namespace
