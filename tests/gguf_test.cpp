// GGUF-lite export through the real CLI, read back with the test's own reader (tests/gguf_reader.h)
// and compared with the test's own fake-quant of the generator's source values.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "gguf_reader.h"
#include "leap_reader.h"
#include "test_support.h"

using tsup::run_cli;

namespace {

uint8_t scheme_code(const std::string& s) {
  return s == "f32" ? tgguf::F32 : s == "f16" ? tgguf::F16 : s == "q8" ? tgguf::Q8 : tgguf::Q4;
}

class Gguf : public tsup::TempDirTest {
 protected:
  tsup::RunResult export_gguf(const std::string& out, const std::string& model, std::vector<std::string> extra) {
    std::vector<std::string> args = {path(out), "--model", model};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args, dir);
  }

  // Full structural and value check of a written file against the source tensors, where
  // want_code(name, dims) gives the dtype each tensor must have.
  void check_file(const std::string& out, const std::vector<gen::Tensor>& src,
                  const std::function<uint8_t(const gen::Tensor&)>& want_code) {
    const tgguf::File f = tgguf::read(path(out));
    ASSERT_EQ(f.magic, 0x474C4654u);
    ASSERT_EQ(f.version, 1u);
    ASSERT_EQ(f.n_tensors, src.size());
    // metadata: "key=value" lines joined by "\n"
    {
      std::istringstream ms(f.metadata);
      int lines = 0;
      for (std::string line; std::getline(ms, line); ++lines) {
        const size_t eq = line.find('=');
        EXPECT_NE(eq, std::string::npos) << "metadata line without '=': " << line;
        EXPECT_GT(eq, 0u) << "metadata line with an empty key: " << line;
      }
      EXPECT_GT(lines, 0);
      EXPECT_NE(f.metadata.back(), '\n') << "lines are joined by \\n, not terminated";
    }
    // names and shapes as in the source (dims in PyTorch order)
    std::set<std::string> want_names, got_names;
    for (const auto& t : src) want_names.insert(t.name);
    for (const auto& d : f.descs) got_names.insert(d.name);
    ASSERT_EQ(got_names, want_names);
    // data concatenated in descriptor order, offsets from the data section, no padding
    uint64_t expect_off = 0;
    for (const auto& d : f.descs) {
      EXPECT_EQ(d.offset, expect_off) << d.name;
      expect_off += tgguf::tensor_bytes(d.dtype, d.dims);
    }
    ASSERT_EQ(f.data_start + expect_off, f.bytes.size()) << "file size != header + descriptors + data";

    for (const auto& d : f.descs) {
      const gen::Tensor& t = tsup::find_tensor(src, d.name);
      EXPECT_EQ(d.dims, t.shape) << d.name;
      const uint8_t code = want_code(t);
      ASSERT_EQ(int(d.dtype), int(code)) << d.name << ": got " << tgguf::code_name(d.dtype) << ", want "
                                         << tgguf::code_name(code);
      const std::vector<float> got = tgguf::dequant(f, d);
      const std::vector<float> fq = tgguf::fake_quant(code, t.shape, t.values);
      ASSERT_EQ(got.size(), t.values.size());
      // exactly the fake-quantized values
      double max_vs_fq = 0.0;
      for (size_t i = 0; i < got.size(); ++i) max_vs_fq = std::max(max_vs_fq, std::fabs(double(got[i]) - double(fq[i])));
      EXPECT_EQ(max_vs_fq, 0.0) << d.name;
      // and within the scheme's bound of the source
      std::vector<float> scales;
      if (code == tgguf::Q8 || code == tgguf::Q4) scales = tgguf::ref_scales(code, t.shape, t.values);
      const size_t span = code == tgguf::Q8 ? size_t(t.shape[1]) : 64;
      double max_vs_src = 0.0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double e = std::fabs(double(got[i]) - double(t.values[i]));
        max_vs_src = std::max(max_vs_src, e);
        double bound = 0.0;
        if (code == tgguf::F16) bound = std::fabs(double(t.values[i])) * 0x1p-11 + 0x1p-25;
        if (code == tgguf::Q8 || code == tgguf::Q4) bound = double(scales[i / span]) * (0.5 + 1e-6);
        ASSERT_LE(e, bound) << d.name << " element " << i;
      }
      if (code == tgguf::F32) EXPECT_EQ(max_vs_src, 0.0) << d.name;
    }
  }
};

// ---------------- B2: round trip per scheme ----------------

class GgufSchemes : public Gguf, public ::testing::WithParamInterface<std::string> {};

TEST_P(GgufSchemes, LlamaRoundTripExact) {
  const std::string scheme = GetParam();
  gen::Spec s;
  s.dtype = "f32";  // full mantissas: f16 storage and quantization both lose bits
  s.shards = 2;
  s.hidden = 160;   // down_proj in = 160: Q4 falls back to F16
  const auto src = gen::write_checkpoint(path("model"), s);
  const auto r = export_gguf("out.gguf-lite", path("model"), {"--scheme", scheme, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  check_file("out.gguf-lite", src, [&](const gen::Tensor& t) { return tgguf::expected_code(scheme_code(scheme), t.shape); });
  if (scheme == "q4") {
    // The fallback is reported on stderr, naming the tensor.
    EXPECT_NE(r.err.find("model.layers.0.mlp.down_proj.weight"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("model.layers.1.mlp.down_proj.weight"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("q_proj"), std::string::npos) << "no fallback for tensors that can take q4\n" << r.err;
  } else {
    EXPECT_EQ(r.err.find("down_proj"), std::string::npos) << "no fallback expected\n" << r.err;
  }
}

TEST_P(GgufSchemes, Gpt2LayoutRoundTripExact) {
  const std::string scheme = GetParam();
  gen::Spec s;
  s.arch = "gpt2";
  s.dim = 96;  // wte/wpe/c_attn (288)/c_proj (96) are not multiples of 64: Q4 falls back to F16
  s.heads = 4;
  s.layers = 2;
  s.vocab = 80;
  s.seq_len = 32;
  s.dtype = "f32";
  const auto src = gen::write_checkpoint(path("gpt2"), s);
  const auto r = export_gguf("g.gguf-lite", path("gpt2"), {"--scheme", scheme, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // Conv1D weights keep their [in, out] shape as stored.
  EXPECT_EQ(tsup::find_tensor(src, "transformer.h.0.attn.c_attn.weight").shape, (std::vector<int64_t>{96, 288}));
  check_file("g.gguf-lite", src, [&](const gen::Tensor& t) { return tgguf::expected_code(scheme_code(scheme), t.shape); });
}

TEST_P(GgufSchemes, SingleSafetensorsFileAsModel) {
  const std::string scheme = GetParam();
  gen::Spec s;
  s.dtype = "bf16";
  s.hidden = 128;
  const auto src = gen::write_checkpoint(path("model"), s);
  const auto r = export_gguf("one.gguf-lite", path("model/model.safetensors"), {"--scheme", scheme, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  check_file("one.gguf-lite", src, [&](const gen::Tensor& t) { return tgguf::expected_code(scheme_code(scheme), t.shape); });
}

INSTANTIATE_TEST_SUITE_P(Schemes, GgufSchemes, ::testing::Values("f32", "f16", "q8", "q4"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST_F(Gguf, BF16SourceIsExactInF16) {
  // bf16 values with 8-bit mantissas, magnitudes well inside f16's normal range: f16 storage is lossless.
  gen::Spec s;
  const auto src = gen::write_checkpoint(path("model"), s);
  ASSERT_EQ(export_gguf("o.gguf-lite", path("model"), {"--scheme", "f16", "--quiet"}).exit_code, 0);
  const tgguf::File f = tgguf::read(path("o.gguf-lite"));
  for (const auto& d : f.descs) {
    const auto got = tgguf::dequant(f, d);
    EXPECT_EQ(0, std::memcmp(got.data(), tsup::find_tensor(src, d.name).values.data(), 4 * got.size())) << d.name;
  }
}

TEST_F(Gguf, DefaultSchemeAndFormatFromExtension) {
  gen::Spec s;
  s.hidden = 128;
  const auto src = gen::write_checkpoint(path("model"), s);
  // No --format and no --scheme: the .gguf-lite extension selects GGUF-lite, 2-D tensors get q8.
  const auto r = run_cli({path("d.gguf-lite"), "--model", path("model"), "--quiet"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  check_file("d.gguf-lite", src, [](const gen::Tensor& t) { return tgguf::expected_code(tgguf::Q8, t.shape); });
}

// Chunking and threads must not change a single byte.
TEST_F(Gguf, ChunkingAndThreadsDoNotChangeBytes) {
  gen::Spec s;
  s.dim = 128;
  s.heads = 8;
  s.hidden = 256;
  s.vocab = 4096;  // 2 MiB as f32: several chunks at --chunk-mb 1
  const auto src = gen::write_checkpoint(path("model"), s);
  for (const char* scheme : {"q8", "q4"}) {
    ASSERT_EQ(export_gguf("a.gguf-lite", path("model"), {"--scheme", scheme, "--threads", "1", "--chunk-mb", "64", "--quiet"}).exit_code, 0);
    ASSERT_EQ(export_gguf("b.gguf-lite", path("model"), {"--scheme", scheme, "--threads", "4", "--chunk-mb", "1", "--quiet"}).exit_code, 0);
    EXPECT_EQ(tsup::slurp(path("a.gguf-lite")), tsup::slurp(path("b.gguf-lite"))) << scheme;
  }
}

// ---------------- B3: rules ----------------

TEST_F(Gguf, SchemeRulesFirstMatchWins) {
  gen::Spec s;
  s.hidden = 128;  // every matrix can take q4
  s.dtype = "f32";
  const auto src = gen::write_checkpoint(path("model"), s);
  gen::write_text(path("rules.json"), R"([
    {"pattern": "*.mlp.*", "scheme": "q4"},
    {"pattern": "*.mlp.down_proj.weight", "scheme": "f32"},
    {"pattern": "model.layers.1.*", "scheme": "f32"},
    {"pattern": "*embed_tokens*", "scheme": "f16"},
    {"pattern": "model.layers.?.self_attn.o_proj.weight", "scheme": "q4"}
  ])");
  const auto r = export_gguf("r.gguf-lite", path("model"), {"--scheme", "q8", "--schemes", path("rules.json"), "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto want = [](const gen::Tensor& t) -> uint8_t {
    const std::string& n = t.name;
    if (t.shape.size() == 1) return tgguf::F32;
    if (n.find(".mlp.") != std::string::npos) return tgguf::Q4;  // rule 0 shadows rule 1
    if (n.rfind("model.layers.1.", 0) == 0) return tgguf::F32;   // rule 2
    if (n.find("embed_tokens") != std::string::npos) return tgguf::F16;
    if (n.find("self_attn.o_proj") != std::string::npos) return tgguf::Q4;  // '?' matches one char
    return tgguf::Q8;  // the default scheme
  };
  check_file("r.gguf-lite", src, want);
  // Spot-check that the expectations above are not all the same.
  const tgguf::File f = tgguf::read(path("r.gguf-lite"));
  std::set<int> codes;
  for (const auto& d : f.descs) codes.insert(d.dtype);
  EXPECT_EQ(codes.size(), 4u);
}

TEST_F(Gguf, SchemeRulesQ4FallbackStillApplies) {
  gen::Spec s;  // hidden 160: down_proj cannot take q4
  const auto src = gen::write_checkpoint(path("model"), s);
  gen::write_text(path("rules.json"), R"([{"pattern": "*", "scheme": "q4"}])");
  const auto r = export_gguf("r.gguf-lite", path("model"), {"--schemes", path("rules.json"), "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  check_file("r.gguf-lite", src, [](const gen::Tensor& t) { return tgguf::expected_code(tgguf::Q4, t.shape); });
  EXPECT_NE(r.err.find("model.layers.0.mlp.down_proj.weight"), std::string::npos) << r.err;
}

TEST_F(Gguf, BadRulesFileIsAnError) {
  gen::Spec s;
  gen::write_checkpoint(path("model"), s);
  gen::write_text(path("rules.json"), R"([{"pattern": "*", "scheme": "q3"}])");
  const auto r = export_gguf("r.gguf-lite", path("model"), {"--schemes", path("rules.json"), "--quiet"});
  EXPECT_NE(r.exit_code, 0);
  ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
  EXPECT_NE(r.error_lines()[0].find("rules.json"), std::string::npos);
  EXPECT_FALSE(tsup::exists(path("r.gguf-lite")));
}

// ---------------- B4: --verify and --inspect ----------------

TEST_F(Gguf, VerifyJsonExactForEveryScheme) {
  gen::Spec s;
  s.dtype = "f32";
  const auto src = gen::write_checkpoint(path("model"), s);
  for (const char* scheme : {"f32", "f16", "q8", "q4"}) {
    SCOPED_TRACE(scheme);
    ASSERT_EQ(export_gguf("v.gguf-lite", path("model"), {"--scheme", scheme, "--quiet"}).exit_code, 0);
    const auto r = run_cli({"--verify", path("v.gguf-lite"), "--model", path("model"), "--json"}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("ok").get<bool>());
    ASSERT_EQ(j.at("tensors").size(), src.size());
    for (const auto& t : j["tensors"]) {
      EXPECT_EQ(t.at("max_abs_vs_fake_quant").get<double>(), 0.0) << t.dump();
      if (std::string(scheme) == "f32") EXPECT_EQ(t.at("max_abs_vs_source").get<double>(), 0.0) << t.dump();
    }
  }
}

TEST_F(Gguf, VerifyLeapFiles) {
  gen::Spec s;
  const auto src = gen::write_checkpoint(path("model"), s);
  for (const char* v : {"1", "2"}) {
    SCOPED_TRACE(v);
    ASSERT_EQ(run_cli({path("m.bin"), "--meta-llama", path("model"), "--version", v, "--quiet"}, dir).exit_code, 0);
    const auto r = run_cli({"--verify", path("m.bin"), "--model", path("model"), "--json"}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("ok").get<bool>());
    EXPECT_EQ(j.at("tensors").size(), tleap::expected_order(s.layers, s.heads, s.kv_heads, s.tied).size());
    for (const auto& t : j["tensors"]) EXPECT_EQ(t.at("max_abs_vs_fake_quant").get<double>(), 0.0) << t.dump();
  }
}

// verify must be able to fail: one changed value byte is found, in the right tensor.
TEST_F(Gguf, VerifyDetectsAChangedByte) {
  gen::Spec s;
  const auto src = gen::write_checkpoint(path("model"), s);
  ASSERT_EQ(export_gguf("t.gguf-lite", path("model"), {"--scheme", "q8", "--quiet"}).exit_code, 0);
  tgguf::File f = tgguf::read(path("t.gguf-lite"));
  const tgguf::Desc* victim = nullptr;
  for (const auto& d : f.descs)
    if (d.name == "model.layers.1.self_attn.o_proj.weight") victim = &d;
  ASSERT_NE(victim, nullptr);
  ASSERT_EQ(victim->dtype, tgguf::Q8);
  // a value byte (after the row scales) of row 3
  const size_t at = f.data_start + victim->offset + size_t(victim->dims[0]) * 2 + 3 * size_t(victim->dims[1]) + 5;
  f.bytes[at] = uint8_t(f.bytes[at] ^ 0x11);
  gen::write_file(path("t.gguf-lite"), f.bytes);
  const auto r = run_cli({"--verify", path("t.gguf-lite"), "--model", path("model"), "--json"}, dir);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.at("ok").get<bool>());
  for (const auto& t : j["tensors"]) {
    if (t["name"] == "model.layers.1.self_attn.o_proj.weight") EXPECT_GT(t["max_abs_vs_fake_quant"].get<double>(), 0.0);
    else EXPECT_EQ(t["max_abs_vs_fake_quant"].get<double>(), 0.0) << t.dump();
  }
}

// A file that lacks one of the checkpoint's tensors does not round-trip the checkpoint.
TEST_F(Gguf, VerifyDetectsAMissingTensor) {
  gen::Spec s;
  gen::write_checkpoint(path("model"), s);
  ASSERT_EQ(export_gguf("t.gguf-lite", path("model"), {"--scheme", "q8", "--quiet"}).exit_code, 0);
  const tgguf::File f = tgguf::read(path("t.gguf-lite"));
  // Rebuild the file without its last tensor (descriptor and data), offsets unchanged.
  std::vector<tgguf::WTensor> ts;
  for (size_t i = 0; i + 1 < f.descs.size(); ++i) ts.push_back({f.descs[i].name, f.descs[i].dims, f.descs[i].dtype, f.descs[i].offset});
  const size_t data_len = size_t(f.descs.back().offset);
  std::vector<uint8_t> b = tgguf::write(f.metadata, ts, 0);
  b.insert(b.end(), f.bytes.begin() + long(f.data_start), f.bytes.begin() + long(f.data_start + data_len));
  gen::write_file(path("short.gguf-lite"), b);
  ASSERT_EQ(run_cli({"--inspect", path("short.gguf-lite")}, dir).exit_code, 0) << "the shortened file is well-formed";
  const auto r = run_cli({"--verify", path("short.gguf-lite"), "--model", path("model")}, dir);
  EXPECT_NE(r.exit_code, 0) << "verify passed a file missing " << f.descs.back().name << "\n" << r.describe();
}

TEST_F(Gguf, InspectJsonBreakdownAddsUp) {
  gen::Spec s;
  s.dtype = "f32";
  const auto src = gen::write_checkpoint(path("model"), s);
  int64_t fp32 = 0;
  for (const auto& t : src) fp32 += tsup::numel(t.shape) * 4;
  for (const char* scheme : {"f32", "f16", "q8", "q4"}) {
    SCOPED_TRACE(scheme);
    ASSERT_EQ(export_gguf("i.gguf-lite", path("model"), {"--scheme", scheme, "--quiet"}).exit_code, 0);
    const auto r = run_cli({"--inspect", path("i.gguf-lite"), "--json"}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const auto j = nlohmann::json::parse(r.out);
    const auto& bd = j.at("breakdown");
    const tgguf::File f = tgguf::read(path("i.gguf-lite"));
    // Own per-dtype totals from the test's reader.
    std::map<std::string, std::pair<int64_t, int64_t>> mine;  // values, scales
    for (const auto& d : f.descs) {
      const int64_t total = int64_t(tgguf::tensor_bytes(d.dtype, d.dims));
      const int64_t sc = d.dtype == tgguf::Q8 ? tgguf::rows_of(d.dims) * 2
                         : d.dtype == tgguf::Q4 ? tsup::numel(d.dims) / 64 * 2 : 0;
      mine[tgguf::code_name(d.dtype)].first += total - sc;
      mine[tgguf::code_name(d.dtype)].second += sc;
    }
    int64_t sum = 0;
    ASSERT_EQ(bd.at("by_dtype").size(), mine.size());
    for (const auto& row : bd["by_dtype"]) {
      const std::string dt = row.at("dtype");
      ASSERT_TRUE(mine.count(dt)) << dt;
      EXPECT_EQ(row.at("values_bytes").get<int64_t>(), mine[dt].first) << dt;
      EXPECT_EQ(row.at("scales_bytes").get<int64_t>(), mine[dt].second) << dt;
      sum += row["values_bytes"].get<int64_t>() + row["scales_bytes"].get<int64_t>();
    }
    EXPECT_EQ(bd.at("header_bytes").get<int64_t>(), 16);
    EXPECT_EQ(bd.at("metadata_bytes").get<int64_t>(), int64_t(f.metadata_len));
    EXPECT_EQ(bd.at("descriptor_bytes").get<int64_t>(), int64_t(f.data_start - 16 - f.metadata_len));
    sum += bd["header_bytes"].get<int64_t>() + bd["metadata_bytes"].get<int64_t>() + bd["descriptor_bytes"].get<int64_t>();
    EXPECT_EQ(sum, int64_t(std::filesystem::file_size(path("i.gguf-lite"))));
    EXPECT_EQ(bd.at("total_bytes").get<int64_t>(), int64_t(std::filesystem::file_size(path("i.gguf-lite"))));
    EXPECT_EQ(bd.at("fp32_baseline_bytes").get<int64_t>(), fp32);
    EXPECT_EQ(j.at("tensors").size(), src.size());
  }
}

TEST_F(Gguf, InspectJsonLeapAddsUp) {
  gen::Spec s;
  const auto src = gen::write_checkpoint(path("model"), s);
  int64_t fp32 = 0;
  for (const auto& t : src) fp32 += tsup::numel(t.shape) * 4;
  for (const char* v : {"1", "2"}) {
    SCOPED_TRACE(v);
    ASSERT_EQ(run_cli({path("m.bin"), "--meta-llama", path("model"), "--version", v, "--quiet"}, dir).exit_code, 0);
    const auto r = run_cli({"--inspect", path("m.bin"), "--json"}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const auto bd = nlohmann::json::parse(r.out).at("breakdown");
    int64_t sum = bd.at("header_bytes").get<int64_t>() + bd.at("metadata_bytes").get<int64_t>() +
                  bd.at("descriptor_bytes").get<int64_t>();
    EXPECT_EQ(bd["header_bytes"].get<int64_t>(), 256);
    for (const auto& row : bd.at("by_dtype")) sum += row.at("values_bytes").get<int64_t>() + row.at("scales_bytes").get<int64_t>();
    EXPECT_EQ(sum, int64_t(std::filesystem::file_size(path("m.bin"))));
    EXPECT_EQ(bd.at("fp32_baseline_bytes").get<int64_t>(), fp32);  // untied: every source tensor is written
  }
}

}  // namespace
