// `export --verify` with the forward pass: the model rebuilt from a LEAP file (interleaved RoPE)
// or a GGUF-lite file matches the source model as written, per layer and for the logits; the
// cost of quantization is reported; a tampered file fails.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "check/verify.h"
#include "checkpoint_gen.h"
#include "formats/formats.h"
#include "container/gguf_file.h"
#include "test_support.h"

namespace {

class VerifyForward : public tsup::TempDirTest {
 protected:
  nlohmann::json verify(const std::string& file, const std::string& model, int* code) {
    const tsup::RunResult r = tsup::run_cli({"--verify", file, "--model", model, "--json"}, dir);
    *code = r.exit_code;
    EXPECT_FALSE(r.signaled || r.timed_out) << r.describe();
    return nlohmann::json::parse(r.out);
  }
  void convert(const std::vector<std::string>& args) {
    const tsup::RunResult r = tsup::run_cli(args, dir);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
};

}  // namespace

TEST_F(VerifyForward, LeapV1AndV2MatchTheSourceModelPerLayer) {
  gen::Spec s;
  s.dim = 64; s.hidden = 128; s.layers = 3; s.heads = 4; s.kv_heads = 2; s.vocab = 80;
  gen::write_checkpoint(path("m"), s);
  for (const char* v : {"1", "2"}) {
    convert({path("o.bin"), "--meta-llama", path("m"), "--version", v, "--quiet"});
    int code = -1;
    const nlohmann::json j = verify(path("o.bin"), path("m"), &code);
    EXPECT_EQ(code, 0) << j.dump(2);
    const nlohmann::json& f = j["forward"];
    ASSERT_TRUE(f["ran"].get<bool>());
    EXPECT_EQ(f["architecture"], "llama");
    EXPECT_EQ(f["layers_run"], 3);
    ASSERT_EQ(f["layers"].size(), 4u);  // 3 layers + logits
    EXPECT_EQ(f["layers"].back()["name"], "logits");
    for (const auto& l : f["layers"]) {
      EXPECT_LE(l["max_abs_file_vs_reference"].get<double>(), 1e-3) << l.dump();
      if (std::string(v) == "1") EXPECT_EQ(l["max_abs_quantized_vs_source"].get<double>(), 0.0) << l.dump();
      else EXPECT_GT(l["max_abs_quantized_vs_source"].get<double>(), 0.0) << l.dump();
    }
  }
}

TEST_F(VerifyForward, GgufOnLlamaAndGpt2ReportsTheCostOfQ4OverQ8) {
  for (const char* arch : {"llama", "gpt2"}) {
    gen::Spec s;
    s.arch = arch;
    s.dim = 64; s.hidden = 128; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.vocab = 96; s.seq_len = 16;
    s.dtype = "f32";
    const std::string m = path(std::string("m_") + arch);
    gen::write_checkpoint(m, s);
    double q8_logits = 0, q4_logits = 0;
    for (const char* scheme : {"q8", "q4"}) {
      const std::string out = path(std::string(arch) + scheme + ".gguf-lite");
      convert({out, "--model", m, "--scheme", scheme, "--quiet"});
      int code = -1;
      const nlohmann::json j = verify(out, m, &code);
      EXPECT_EQ(code, 0) << j.dump(2);
      const nlohmann::json& f = j["forward"];
      ASSERT_TRUE(f["ran"].get<bool>()) << j.dump(2);
      EXPECT_EQ(f["architecture"], arch);
      for (const auto& l : f["layers"]) EXPECT_EQ(l["max_abs_file_vs_reference"].get<double>(), 0.0) << l.dump();
      const double cost = f["layers"].back()["max_abs_quantized_vs_source"].get<double>();
      (std::string(scheme) == "q8" ? q8_logits : q4_logits) = cost;
    }
    EXPECT_GT(q8_logits, 0.0) << arch;
    EXPECT_GT(q4_logits, q8_logits) << arch;  // 4 bits cost more than 8
  }
}

TEST_F(VerifyForward, SwappedRowsInALeapFileFailTheCheck) {
  gen::Spec s;
  s.dim = 64; s.hidden = 128; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.vocab = 80; s.dtype = "f32";
  gen::write_checkpoint(path("m"), s);
  convert({path("o.bin"), "--meta-llama", path("m"), "--version", "1", "--quiet"});
  // LEAP v1: 256-byte header, 5 norms of 64 floats (2 layers x 2 + final), embeddings 80 x 64,
  // then layers.0.wq: swap its rows 0 and 1 (as if the RoPE permutation were wrong)
  std::vector<uint8_t> b = tsup::slurp(path("o.bin"));
  const size_t wq = 256 + 5 * 64 * 4 + 80 * 64 * 4, row = 64 * 4;
  std::swap_ranges(b.begin() + long(wq), b.begin() + long(wq + row), b.begin() + long(wq + row));
  gen::write_file(path("o.bin"), b);
  int code = -1;
  const nlohmann::json j = verify(path("o.bin"), path("m"), &code);
  EXPECT_EQ(code, 1);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_FALSE(j["forward"]["ok"].get<bool>());
  EXPECT_GT(j["forward"]["layers"][0]["max_abs_file_vs_reference"].get<double>(), 1e-3);
}

TEST_F(VerifyForward, AParameterBudgetLimitsTheLayersAndSaysSo) {
  gen::Spec s;
  s.dim = 64; s.hidden = 128; s.layers = 4; s.heads = 4; s.kv_heads = 2; s.vocab = 80;
  gen::write_checkpoint(path("m"), s);
  convert({path("o.bin"), "--meta-llama", path("m"), "--version", "2", "--quiet"});
  // one layer holds 2*64*64 + 2*64*32 + 3*64*128 = 36864 parameters: a budget of 80000 fits two
  const tsup::RunResult r = tsup::run_cli({"--verify", path("o.bin"), "--model", path("m"), "--json",
                                           "--verify-params", "80000"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json f = nlohmann::json::parse(r.out)["forward"];
  EXPECT_EQ(f["layers_run"], 2);
  EXPECT_EQ(f["n_layers"], 4);
  ASSERT_EQ(f["layers"].size(), 2u);  // no logits when not every layer ran
  EXPECT_NE(f["note"].get<std::string>().find("ran 2 of 4 layers"), std::string::npos) << f["note"];
}

namespace {

// The checkpoint at dir (one shard, config.json) from memory: the core's own API, as the page uses it.
leapconv::Checkpoint load_in_memory(const std::string& dir) {
  leapconv::CheckpointFiles f;
  f.label = "m";
  f.shards.push_back(std::make_unique<leapconv::MemorySource>("model.safetensors", tsup::slurp(dir + "/model.safetensors")));
  f.config_json = tsup::slurp_text(dir + "/config.json");
  return leapconv::open_checkpoint(std::move(f));
}

}  // namespace

// The page's verify: in steps, one per tensor, then one per run of the forward check; k of N, to the
// end; the report is the one-call verify's and the CLI's, byte for byte.
TEST_F(VerifyForward, StepwiseVerifyReportsEachStepAndEqualsTheOneCallVerify) {
  gen::Spec s;
  s.dim = 256; s.hidden = 512; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.vocab = 96;
  gen::write_checkpoint(path("m"), s);
  convert({path("o.gguf"), "--model", path("m"), "--type", "Q4_K_M", "--no-vocab", "--quiet"});
  const leapconv::Checkpoint ck = load_in_memory(path("m"));
  leapconv::MemorySource file("o.gguf", tsup::slurp(path("o.gguf")));
  leapconv::VerifyRun run(file, ck);
  const int64_t n = run.progress().n_steps;
  const size_t n_tensors = leapconv::inspect_file(file).items.size();
  EXPECT_EQ(n, int64_t(n_tensors) + 3);  // a step per tensor, then the three runs of the forward check
  EXPECT_EQ(run.progress().step, 0);
  int64_t steps = 0;
  while (run.step()) {
    ++steps;
    EXPECT_EQ(run.progress().step, steps);
    EXPECT_EQ(run.progress().n_steps, n);
    EXPECT_FALSE(run.progress().what.empty());
  }
  EXPECT_EQ(steps, n);
  EXPECT_EQ(run.progress().what, "forward pass: the file's model");
  const nlohmann::json stepped = leapconv::verify_report_json(run.finish());
  EXPECT_TRUE(stepped["ok"].get<bool>());
  EXPECT_EQ(stepped.dump(), leapconv::verify_report_json(leapconv::verify_file(file, ck)).dump());
  int code = -1;
  nlohmann::json cli = verify(path("o.gguf"), path("m"), &code);
  EXPECT_EQ(code, 0);
  cli.erase("file");
  EXPECT_EQ(stepped.dump(), cli.dump());
}

// The types the quant-type table gained (IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, Q1_0, Q2_0) are no longer
// listed as undecodable: inspect reads them as any other block type.
TEST_F(VerifyForward, NewGgmlTypesAreDecodable) {
  leapconv::GgufMetadata kv;
  kv.set("general.architecture", leapconv::GgufValue::string("llama"));
  const leapconv::GgufLayout L = leapconv::layout_gguf(kv, {{"a.weight", {256, 2}, 20}, {"b.weight", {256, 2}, 23},
      {"c.weight", {256, 2}, 34}, {"d.weight", {256, 2}, 35}, {"e.weight", {256, 2}, 41}, {"f.weight", {256, 2}, 42}});
  leapconv::MemorySink sink;
  sink.bytes().assign(size_t(L.file_size), 0);
  leapconv::write_gguf_header(sink, L);
  leapconv::MemorySource file("new.gguf", sink.bytes());
  const leapconv::InspectedFile f = leapconv::inspect_file(file);
  EXPECT_TRUE(f.undecodable.empty());
  const nlohmann::json j = leapconv::inspected_file_json(f);
  ASSERT_EQ(j["tensors"].size(), 6u);
  const char* want[] = {"IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "Q1_0", "Q2_0"};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(j["tensors"][i]["dtype"], want[i]);
    EXPECT_TRUE(j["tensors"][i]["decodable"].get<bool>()) << want[i];
  }
}

// A GGUF tensor of a type the project cannot decode (Q8_K, ggml's dot-product intermediate) is listed, named and counted by
// inspect, and verify refuses the file naming it.
TEST_F(VerifyForward, AnUndecodableGgufTypeIsListedByInspectAndRefusedByVerify) {
  leapconv::GgufMetadata kv;
  kv.set("general.architecture", leapconv::GgufValue::string("llama"));
  const leapconv::GgufLayout L = leapconv::layout_gguf(kv, {{"a.weight", {64}, 0}, {"blk.0.ffn_up.weight", {256, 3}, 15}});
  leapconv::MemorySink sink;
  sink.bytes().assign(size_t(L.file_size), 0);
  leapconv::write_gguf_header(sink, L);
  leapconv::MemorySource file("iq.gguf", sink.bytes());
  const leapconv::InspectedFile f = leapconv::inspect_file(file);
  ASSERT_EQ(f.undecodable.size(), 1u);
  EXPECT_EQ(f.undecodable[0].type, "Q8_K");
  EXPECT_EQ(f.undecodable[0].bytes, 3 * 292);
  const nlohmann::json j = leapconv::inspected_file_json(f);
  ASSERT_EQ(j["tensors"].size(), 2u);
  EXPECT_EQ(j["tensors"][1]["name"], "blk.0.ffn_up.weight");
  EXPECT_EQ(j["tensors"][1]["dtype"], "Q8_K");
  EXPECT_EQ(j["tensors"][1]["shape"], nlohmann::json({3, 256}));
  EXPECT_FALSE(j["tensors"][1]["decodable"].get<bool>());
  EXPECT_EQ(j["breakdown"]["total_bytes"], L.file_size);
  bool row = false;
  for (const auto& r : j["breakdown"]["by_dtype"]) row |= r["dtype"] == "Q8_K" && r["values_bytes"] == 3 * 292;
  EXPECT_TRUE(row) << j["breakdown"].dump();
  gen::Spec s;
  s.dim = 64; s.hidden = 128; s.layers = 1; s.heads = 4; s.kv_heads = 2; s.vocab = 80;
  gen::write_checkpoint(path("m"), s);
  const leapconv::Checkpoint ck = load_in_memory(path("m"));
  try {
    leapconv::verify_file(file, ck);
    FAIL() << "verify accepted a tensor it cannot decode";
  } catch (const leapconv::ConvertError& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_up.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Q8_K"), std::string::npos) << e.what();
  }
}
