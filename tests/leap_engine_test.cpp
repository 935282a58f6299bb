// Files LEAP's own engine runs correctly (issue 17): the group size divides dim and hidden_dim
// and is at least 16; seq_len defaults to 2048 and its KV caches fit the engine's 32-bit ints;
// the engine's other 32-bit products are refused per version; rms eps other than 1e-5 warns;
// --verify tells what the engine's W8A8 arithmetic computes. The emulation's kernels are checked
// against hand-worked cases; everything else goes through the real CLI.
#include <gtest/gtest.h>

#include <cmath>

#include "check/leap_w8a8.h"
#include "leap_reader.h"
#include "test_support.h"

using tsup::run_cli;

namespace {

// ---------------- the W8A8 kernels, by hand ----------------

leapconv::Int8Rows rows_of(int64_t total_rows, int64_t cols, int gs, std::vector<int8_t> q, std::vector<float> s) {
  leapconv::Int8Rows r;
  r.r0 = 0;
  r.rows = r.total_rows = total_rows;
  r.cols = cols;
  r.group_size = gs;
  r.q = std::move(q);
  r.s = std::move(s);
  return r;
}

TEST(LeapW8A8, QuantizeRoundsHalfAwayFromZeroWithAReciprocal) {
  // group 0: max 127 -> scale 1, id 1: 2.5 -> 3 and -0.5 -> -1 (half-to-even would give 2 and 0)
  // group 1: max 63.5 -> scale 0.5, id 2: 1.25 * 2 = 2.5 -> 3, -0.25 * 2 = -0.5 -> -1
  // group 2 (short: 2 of 4): all zero -> scale 0, q 0
  const float x[] = {127.0f, 2.5f, -0.5f, -3.5f, 63.5f, 1.25f, -0.25f, 0.0f, 0.0f, -0.0f};
  const leapconv::Int8Activation a = leapconv::leap_quantize(x, 10, 4);
  EXPECT_EQ(std::vector<int>(a.q.begin(), a.q.end()), (std::vector<int>{127, 3, -1, -4, 127, 3, -1, 0, 0, 0}));
  EXPECT_EQ(a.s, (std::vector<float>{1.0f, 0.5f, 0.0f}));
}

TEST(LeapW8A8, MatmulIsInt32DotProductsPerGroupScaledInF32) {
  const float x[] = {127.0f, 2.5f, -0.5f, -3.5f, 63.5f, 1.25f, -0.25f, 0.0f};  // q: 127 3 -1 -4 | 127 3 -1 0
  // W: 2 x 8, groups of 4 over the flattened tensor: scales 0.25, 2 (row 0), 1, 0.5 (row 1).
  const leapconv::Int8Rows w = rows_of(2, 8, 4, {1, 2, 3, 4, -1, 0, 1, 2, -127, 0, 0, 1, 10, 10, 10, 10},
                                       {0.25f, 2.0f, 1.0f, 0.5f});
  float out[2] = {0, 0};
  leapconv::leap_matmul(leapconv::leap_quantize(x, 8, 4), w, out);
  // row 0: (127 + 6 - 3 - 16) * 0.25 * 1 = 28.5;  (-127 + 0 - 1 + 0) * 2 * 0.5 = -128   -> -99.5
  // row 1: (-16129 - 4) * 1 * 1 = -16133;  (127 + 3 - 1 + 0) * 10 * 0.5 * 0.5 = 322.5   -> -15810.5
  EXPECT_EQ(out[0], -99.5f);
  EXPECT_EQ(out[1], -15810.5f);
  // the f32 product of the dequantized weights and the unquantized x is another number: -98.375
  EXPECT_NE(out[0], -98.375f);
}

TEST(LeapW8A8, MatmulMirrorsTheEngineWhereTheGroupDoesNotDivideTheRow) {
  // n = 6, group 4: the engine's loop (j <= n - group_size) stops after the first group, and
  // row 1 takes its scale from group (1 * 6 + 0) / 4 = 1 of the flattened tensor.
  const float x[] = {127.0f, 0.0f, 0.0f, 0.0f, 5.0f, 5.0f};
  const leapconv::Int8Rows w = rows_of(2, 6, 4, std::vector<int8_t>(12, 1), {1.0f, 2.0f, 3.0f});
  float out[2] = {0, 0};
  leapconv::leap_matmul(leapconv::leap_quantize(x, 6, 4), w, out);
  EXPECT_EQ(out[0], 127.0f);  // 127 * 1 * 1; the 5s are never multiplied
  EXPECT_EQ(out[1], 254.0f);  // 127 * 2 * 1
}

TEST(LeapW8A8, DequantizeLikeTheSimdBuildsBelowGroup16) {
  // 16 values in groups of 4 with scales 1, 2, 2, 1: the first and last scale of the 16 agree,
  // so the engine's AVX2/NEON loop multiplies all 16 by 1.
  std::vector<int8_t> q(32, 3);
  const leapconv::Int8Rows w4 = rows_of(2, 16, 4, q, {1, 2, 2, 1, 1, 1, 1, 1});
  for (int c = 0; c < 16; ++c) EXPECT_EQ(leapconv::leap_dequantize(w4, 0, c), 3.0f) << c;
  const leapconv::Int8Rows w16 = rows_of(2, 16, 16, q, {1, 2});  // 16 and more: exact
  EXPECT_EQ(leapconv::leap_dequantize(w16, 1, 5), 6.0f);
}

// ---------------- the CLI ----------------

class LeapEngine : public tsup::TempDirTest {
 protected:
  std::vector<gen::Tensor> make(const gen::Spec& s, const std::string& model = "model") {
    return gen::write_checkpoint(path(model), s);
  }
  // Changes config.json of a written checkpoint (a config that lies about the shape needs no
  // big tensors: LEAP's rules are checked on the config before any tensor).
  void edit_config(const nlohmann::json& patch, const std::string& model = "model") {
    nlohmann::json c = nlohmann::json::parse(tsup::slurp_text(path(model + "/config.json")));
    c.update(patch);
    gen::write_text(path(model + "/config.json"), c.dump());
  }
  tsup::RunResult convert(const std::vector<std::string>& extra, const std::string& out = "out.bin",
                          const std::string& model = "model") {
    std::vector<std::string> args = {path(out), "--meta-llama", path(model)};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args, dir);
  }
  // A refusal: exit 1, one error line holding every part of `want`, no output file.
  void expect_refused(const tsup::RunResult& r, const std::vector<std::string>& want, const std::string& out = "out.bin") {
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    const auto lines = r.error_lines();
    ASSERT_EQ(lines.size(), 1u) << r.describe();
    for (const std::string& w : want) EXPECT_NE(lines[0].find(w), std::string::npos) << "no '" << w << "' in " << lines[0];
    EXPECT_FALSE(tsup::exists(path(out)));
    EXPECT_FALSE(tsup::exists(path(out) + ".partial"));
  }
};

TEST_F(LeapEngine, V2GroupSizeDividesHidden160) {
  gen::Spec s;  // dim 64, hidden 160: 64 does not divide 160, 32 divides both
  s.dtype = "f32";
  const auto src = make(s);
  const auto r = convert({"--version", "2", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto f = tleap::read_leap(path("out.bin"), src, s, 2, 32);
  EXPECT_EQ(tsup::le<int32_t>(f.bytes, 0x25), 32);  // unaligned i32 at 0x25
  EXPECT_EQ(f.bytes[0x25], 32);
  EXPECT_EQ(f.h.hidden_dim, 160);
  EXPECT_EQ(f.end, f.bytes.size());
  for (const auto& it : f.items) {  // w2 is [64, 160]: its 160-long rows are 5 whole groups
    if (it.e.norm) continue;
    ASSERT_EQ(it.scales.size(), it.q.size() / 32) << it.e.leap;
    const std::vector<float> w = tleap::expected_source(it.e, src);
    for (size_t g = 0; g < it.scales.size(); ++g) {
      float amax = 0;
      for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(w[g * 32 + i]));
      ASSERT_EQ(it.scales[g], amax / 127.0f) << it.e.leap << " group " << g;
    }
  }
  // and dim 96, hidden 160 -> 32; dim 128, hidden 176 -> 16
  for (auto [dim, hidden, gs] : {std::tuple<int, int, int>{96, 160, 32}, {128, 176, 16}}) {
    gen::Spec t;
    t.dim = dim;
    t.hidden = hidden;
    const std::string m = "m" + std::to_string(dim);
    make(t, m);
    const auto rr = convert({"--version", "2", "--quiet"}, m + ".bin", m);
    ASSERT_EQ(rr.exit_code, 0) << rr.describe();
    EXPECT_EQ(tsup::le<int32_t>(tsup::slurp(path(m + ".bin")), 0x25), gs) << dim << " x " << hidden;
  }
}

TEST_F(LeapEngine, GroupSizesTheEngineWouldGetWrongAreRefused) {
  gen::Spec s;  // dim 64, hidden 160
  make(s);
  expect_refused(convert({"--version", "2", "--group-size", "8", "--quiet"}),
                 {"config.json", "--group-size 8", "below 16", "wrong results", "--group-size 32"});
  expect_refused(convert({"--version", "2", "--group-size", "64", "--quiet"}),
                 {"config.json", "--group-size 64", "does not divide hidden_dim 160", "wrong results", "--group-size 32"});
  expect_refused(convert({"--version", "2", "--group-size", "20", "--quiet"}), {"does not divide dim 64"});
  // 16 and 32 divide both: accepted
  for (const char* gs : {"16", "32"}) EXPECT_EQ(convert({"--version", "2", "--group-size", gs, "--quiet"}).exit_code, 0) << gs;
}

TEST_F(LeapEngine, NoDefaultGroupSizeRefusesV2AndSuggestsV1) {
  gen::Spec s;
  s.dim = 80;      // 80 = 16 x 5, 120 = 8 x 15: none of 64, 32, 16 divides both
  s.hidden = 120;  // (40 does: it is offered)
  make(s);
  expect_refused(convert({"--version", "2", "--quiet"}),
                 {"config.json", "dim 80", "hidden_dim 120", "none of 64, 32, 16", "wrong results", "--version 1",
                  "--group-size 40"});
  EXPECT_EQ(convert({"--version", "1", "--quiet"}, "v1.bin").exit_code, 0);
  EXPECT_EQ(convert({"--version", "2", "--group-size", "40", "--quiet"}, "g40.bin").exit_code, 0);
  gen::Spec p = s;  // params.json states no hidden_dim: refused on the tensors' shape instead
  p.config_json = false;
  p.params_json = true;
  make(p, "params");
  expect_refused(convert({"--version", "2", "--quiet"}, "p.bin", "params"), {"params.json", "hidden_dim 120"}, "p.bin");
}

TEST_F(LeapEngine, SeqLenDefaultsTo2048OrTheModelsSmallerMaximum) {
  for (auto [max, want] : {std::pair<int64_t, int32_t>{4096, 2048}, {131072, 2048}, {2048, 2048}, {1000, 1000}}) {
    gen::Spec s;
    s.seq_len = max;  // max_position_embeddings
    const std::string m = "m" + std::to_string(max);
    make(s, m);
    ASSERT_EQ(convert({"--quiet"}, m + ".bin", m).exit_code, 0);
    EXPECT_EQ(tleap::read_header(tsup::slurp(path(m + ".bin"))).seq_len, want) << "max_position_embeddings " << max;
  }
  gen::Spec p;
  p.config_json = false;
  p.params_json = true;
  p.seq_len = 8192;  // max_seq_len
  make(p, "params");
  ASSERT_EQ(convert({"--version", "2", "--quiet"}, "p.bin", "params").exit_code, 0);
  EXPECT_EQ(tleap::read_header(tsup::slurp(path("p.bin"))).seq_len, 2048);
  ASSERT_EQ(convert({"--seq-len", "8192", "--quiet"}, "q.bin", "params").exit_code, 0);  // chosen: kept
  EXPECT_EQ(tleap::read_header(tsup::slurp(path("q.bin"))).seq_len, 8192);
}

TEST_F(LeapEngine, KvCacheMemoryIsReportedOnStderrAndInJson) {
  gen::Spec s;  // 2 layers, kv_dim = 2 kv heads x 16 = 32
  s.seq_len = 4096;
  make(s);
  // 2 caches x 2 layers x 2048 x 32 x 4 bytes = 1 MiB
  const auto r = convert({"--version", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json e = nlohmann::json::parse(r.out).at("engine");
  EXPECT_EQ(e.at("kv_cache_bytes").get<int64_t>(), 2 * 2 * 2048 * 32 * 4);
  EXPECT_EQ(e.at("seq_len").get<int64_t>(), 2048);
  EXPECT_EQ(e.at("seq_len_from"), "default");
  EXPECT_NE(r.err.find("note: LEAP's engine allocates its two f32 KV caches"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2 × 2 layers × 2048 positions × 32 × 4 bytes = 1.0 MiB"), std::string::npos) << r.err;
  const auto o = convert({"--seq-len", "100", "--json", "--quiet"}, "o.bin");
  ASSERT_EQ(o.exit_code, 0) << o.describe();
  const nlohmann::json eo = nlohmann::json::parse(o.out).at("engine");
  EXPECT_EQ(eo.at("kv_cache_bytes").get<int64_t>(), 2 * 2 * 100 * 32 * 4);
  EXPECT_EQ(eo.at("seq_len_from"), "option");
  EXPECT_EQ(o.err.find("note:"), std::string::npos) << "--quiet keeps the note off stderr";
}

TEST_F(LeapEngine, SeqLenWhoseKvCacheOverflowsTheEnginesIntsIsRefused) {
  gen::Spec s;  // n_layers x kv_dim = 2 x 32 = 64: 2^31 / 64 = 33554432
  make(s);
  for (const char* v : {"1", "2"}) {
    SCOPED_TRACE(std::string("version ") + v);
    expect_refused(convert({"--version", v, "--seq-len", "33554432", "--quiet"}),
                   {"config.json", "n_layers × kv_dim × seq_len = 2 × 32 × 33554432 = 2147483648", "32-bit",
                    "--seq-len 33554431 or less"});
    const auto ok = convert({"--version", v, "--seq-len", "33554431", "--quiet"}, "edge.bin");  // 2^31 - 64
    ASSERT_EQ(ok.exit_code, 0) << ok.describe();
    EXPECT_EQ(tleap::read_header(tsup::slurp(path("edge.bin"))).seq_len, 33554431);
  }
  // Llama 3.1 8B's shape at its 131072 positions: 32 x 1024 x 131072 = 2^32, which wraps to 0.
  edit_config({{"hidden_size", 4096}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
               {"num_key_value_heads", 8}, {"intermediate_size", 14336}, {"vocab_size", 128256},
               {"max_position_embeddings", 131072}});
  expect_refused(convert({"--version", "2", "--seq-len", "131072", "--quiet"}),
                 {"config.json", "32 × 1024 × 131072 = 4294967296", "--seq-len 65535 or less"});
}

TEST_F(LeapEngine, Int32ProductsAreRefusedPerVersionBeforeAnyTensor) {
  gen::Spec s;
  make(s);
  // Llama 2 13B's shape (the tensors stay tiny: the config is checked first). Version 1
  // offsets layer l's w1/w2/w3 by l * dim * hidden_dim in an int: 39 x 5120 x 13824 >= 2^31.
  edit_config({{"hidden_size", 5120}, {"num_hidden_layers", 40}, {"num_attention_heads", 40},
               {"num_key_value_heads", 40}, {"intermediate_size", 13824}, {"vocab_size", 32000},
               {"max_position_embeddings", 4096}});
  expect_refused(convert({"--version", "1", "--quiet"}),
                 {"config.json", "(n_layers − 1) × dim × hidden_dim = 39 × 5120 × 13824 = 2760376320", "32-bit",
                  "l * dim * hidden_dim", "--version 2"});
  // Version 2 keeps layers apart: no 32-bit refusal, only the lie about the shapes.
  const auto v2 = convert({"--version", "2", "--quiet"});
  EXPECT_EQ(v2.exit_code, 1);
  ASSERT_EQ(v2.error_lines().size(), 1u) << v2.describe();
  EXPECT_EQ(v2.error_lines()[0].find("32-bit"), std::string::npos) << v2.err;
  EXPECT_NE(v2.error_lines()[0].find("contradicts the config"), std::string::npos) << v2.err;
  // Llama 2 7B and Llama 3 8B fit version 1: their refusals are the shape lie, not 32 bits.
  edit_config({{"hidden_size", 4096}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
               {"num_key_value_heads", 8}, {"intermediate_size", 14336}, {"vocab_size", 128256}});
  const auto v1 = convert({"--version", "1", "--quiet"});
  ASSERT_EQ(v1.error_lines().size(), 1u) << v1.describe();
  EXPECT_EQ(v1.error_lines()[0].find("32-bit"), std::string::npos) << v1.err;
  // vocab_size x dim indexes the embeddings in an int in both versions: 524288 x 4096 = 2^31.
  edit_config({{"vocab_size", 524288}, {"num_hidden_layers", 2}});
  for (const char* v : {"1", "2"})
    expect_refused(convert({"--version", v, "--quiet"}), {"vocab_size × dim = 524288 × 4096 = 2147483648", "32-bit"});
}

TEST_F(LeapEngine, RmsEpsOtherThanTheEnginesWarns) {
  gen::Spec s;
  make(s);
  edit_config({{"rms_norm_eps", 1e-6}});
  const auto r = convert({"--version", "2", "--json", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("warning: config.json: rms_norm_eps is 1e-06, but LEAP's engine hard-codes 1e-05"),
            std::string::npos) << r.err;
  const nlohmann::json w = nlohmann::json::parse(r.out).at("warnings");
  bool found = false;
  for (const auto& x : w) found |= x.get<std::string>().find("rms_norm_eps is 1e-06") != std::string::npos;
  EXPECT_TRUE(found) << w.dump();
  edit_config({{"rms_norm_eps", 1e-5}});
  const auto q = convert({"--quiet"}, "q.bin");
  ASSERT_EQ(q.exit_code, 0);
  EXPECT_EQ(q.err.find("rms_norm_eps"), std::string::npos) << q.err;
}

// ---------------- verify: what the engine computes ----------------

nlohmann::json verify_json(const std::string& file, const std::string& model, const std::string& dir, int* code) {
  const tsup::RunResult r = run_cli({"--verify", file, "--model", model, "--json"}, dir, 60.0);
  *code = r.exit_code;
  return nlohmann::json::parse(r.out);
}

// The file the converter wrote before issue 17 for dim 64, hidden 160: group 64, which does
// not divide hidden_dim. Built by the test from SPEC's layout and its own quantizer.
void write_group64_file(const std::string& from, const std::string& to, const std::vector<gen::Tensor>& src,
                        const gen::Spec& s) {
  const tleap::File f = tleap::read_leap(from, src, s, 2, 32);
  std::vector<uint8_t> b(f.bytes.begin(), f.bytes.begin() + 256);
  tsup::put<int32_t>(b, 0x25, 64);
  for (const auto& it : f.items) {
    if (it.e.norm) {
      const auto* p = reinterpret_cast<const uint8_t*>(it.f32.data());
      b.insert(b.end(), p, p + 4 * it.f32.size());
      continue;
    }
    const std::vector<float> w = tleap::expected_source(it.e, src);
    std::vector<float> scales(w.size() / 64);
    std::vector<int8_t> q(w.size());
    for (size_t g = 0; g < scales.size(); ++g) {
      float amax = 0;
      for (size_t i = 0; i < 64; ++i) amax = std::max(amax, std::fabs(w[g * 64 + i]));
      scales[g] = amax / 127.0f;
      for (size_t i = 0; i < 64; ++i)
        q[g * 64 + i] = scales[g] == 0.0f ? 0 : int8_t(std::nearbyint(w[g * 64 + i] / scales[g]));
    }
    b.insert(b.end(), reinterpret_cast<uint8_t*>(q.data()), reinterpret_cast<uint8_t*>(q.data()) + q.size());
    b.insert(b.end(), reinterpret_cast<uint8_t*>(scales.data()), reinterpret_cast<uint8_t*>(scales.data()) + 4 * scales.size());
  }
  gen::write_file(to, b);
}

TEST_F(LeapEngine, VerifyReportsWhatTheEnginesW8A8Computes) {
  gen::Spec s;  // dim 64, hidden 160, 2 layers, vocab 96
  s.dtype = "f32";
  const auto src = make(s);
  ASSERT_EQ(convert({"--version", "2", "--quiet"}).exit_code, 0);
  int code = -1;
  const nlohmann::json j = verify_json(path("out.bin"), path("model"), dir, &code);
  EXPECT_EQ(code, 0) << j.dump(2);
  EXPECT_TRUE(j["ok"].get<bool>());
  const nlohmann::json& w = j.at("w8a8");
  ASSERT_TRUE(w["ran"].get<bool>()) << w.dump(2);
  EXPECT_TRUE(w["informative"].get<bool>());
  EXPECT_EQ(w["group_size"], 32);
  ASSERT_EQ(w["layers"].size(), 3u);  // 2 layers + logits
  const nlohmann::json& logits = w["layers"].back();
  EXPECT_EQ(logits["name"], "logits");
  const double cost = logits["max_abs_vs_as_written"].get<double>(), scale = w["max_abs_logit_as_written"].get<double>();
  EXPECT_GT(cost, 0.0) << "int8 activations cost something over the fp32 model";
  EXPECT_LT(cost, 0.1 * scale) << w.dump(2);
  EXPECT_GT(logits["max_abs_vs_source"].get<double>(), 0.0);
  EXPECT_EQ(w["positions"], 8);
  EXPECT_GE(w["top1_same_as_written"].get<int>(), 6) << w.dump(2);
  EXPECT_EQ(w["note"].get<std::string>().find("breaks"), std::string::npos) << w["note"];
  const tsup::RunResult text = run_cli({"--verify", path("out.bin"), "--model", path("model")}, dir, 60.0);
  EXPECT_NE(text.out.find("what LEAP's engine computes (W8A8)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("not part of PASS/FAIL"), std::string::npos) << text.out;

  // The old group-64 file: its bytes read back exactly (verify passes), but the emulated engine
  // skips the last 32 of w2's 160 inputs and takes scales from the wrong groups, and says so.
  write_group64_file(path("out.bin"), path("old.bin"), src, s);
  const nlohmann::json o = verify_json(path("old.bin"), path("model"), dir, &code);
  EXPECT_EQ(code, 0) << o.dump(2);
  EXPECT_TRUE(o["ok"].get<bool>()) << "W8A8 is informative: it does not fail verify";
  const nlohmann::json& ow = o.at("w8a8");
  EXPECT_EQ(ow["group_size"], 64);
  EXPECT_NE(ow["note"].get<std::string>().find("this file breaks LEAP's engine"), std::string::npos) << ow["note"];
  EXPECT_NE(ow["note"].get<std::string>().find("does not divide hidden_dim 160"), std::string::npos) << ow["note"];
  EXPECT_GT(ow["layers"].back()["max_abs_vs_as_written"].get<double>(), 5 * cost) << ow.dump(2);

  // version 1 runs in fp32: no W8A8
  ASSERT_EQ(convert({"--version", "1", "--quiet"}, "v1.bin").exit_code, 0);
  const nlohmann::json v1 = verify_json(path("v1.bin"), path("model"), dir, &code);
  EXPECT_FALSE(v1.at("w8a8")["ran"].get<bool>());
}

}  // namespace
