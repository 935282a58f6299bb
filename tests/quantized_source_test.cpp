// Quantized checkpoints in (issue 27): FP8 with block scales or one scale, compressed-tensors
// float- and int-quantized (channel, block), ModelOpt FP8. The oracle: the generator writes, beside
// each quantized checkpoint, the checkpoint as llama.cpp's converter decodes it (dequant_simple:
// float(code) x float(scale) in f32, from the bit fields, in tests/gen) as plain F32 tensors; every
// output of the quantized one must be byte for byte the output of that one. Then --fp8-as-q8, and
// every bad input refused in one line naming the file and tensor or key, nothing written.
#include <gtest/gtest.h>

#include <functional>

#include "gguf3_reader.h"
#include "test_support.h"

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

class QuantizedSource : public tsup::TempDirTest {
 protected:
  // A quantized checkpoint at <dir>/<name>/M and its decoded twin at <dir>/<name>-ref/M (same folder
  // name: general.name is the same).
  std::string make(const std::string& name, const std::string& arch, const std::string& kind, int64_t block = 32) {
    gen::Spec s;
    s.arch = arch;
    s.hf_init = true;
    gen::write_checkpoint(path(name + "/M"), s);
    EXPECT_GT(gen::quantize_checkpoint(path(name + "/M"), kind, block, path(name + "-ref/M")), 0);
    return path(name + "/M");
  }
  static std::string ref_of(const std::string& d) { return d.substr(0, d.size() - 2) + "-ref/M"; }

  void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& names, const std::string& out) {
    tsup::expect_one_error(tsup::run_cli(args, dir, 60.0), names, out);
  }
};

// A GGUF file's keys and tensors (type, shape, bytes) by name: the same model whatever the order.
struct GgufModel {
  std::vector<uint8_t> b;
  tg3::File f;
  explicit GgufModel(const std::string& path) : b(tsup::slurp(path)), f(tg3::parse(b)) {}
  // tensor i's bytes, and any padding after it
  std::vector<uint8_t> data(size_t i) const {
    const size_t a = f.data_start + f.tensors[i].offset, e = i + 1 < f.tensors.size() ? f.data_start + f.tensors[i + 1].offset : b.size();
    return std::vector<uint8_t>(b.begin() + int64_t(a), b.begin() + int64_t(e));
  }
  const tg3::Tensor* find(const std::string& name, size_t* at) const {
    for (size_t i = 0; i < f.tensors.size(); ++i)
      if (f.tensors[i].name == name) return *at = i, &f.tensors[i];
    return nullptr;
  }
};
void expect_same_model(const std::string& a, const std::string& b) {
  const GgufModel x(a), y(b);
  ASSERT_EQ(x.f.kv.size(), y.f.kv.size()) << a;
  for (size_t i = 0; i < x.f.kv.size(); ++i) EXPECT_TRUE(x.f.kv[i].key == y.f.kv[i].key && x.f.kv[i].items == y.f.kv[i].items) << a << ": " << x.f.kv[i].key;
  ASSERT_EQ(x.f.tensors.size(), y.f.tensors.size()) << a;
  for (size_t i = 0; i < x.f.tensors.size(); ++i) {
    size_t j = 0;
    const tg3::Tensor* t = y.find(x.f.tensors[i].name, &j);
    ASSERT_TRUE(t) << a << ": " << x.f.tensors[i].name;
    EXPECT_TRUE(t->type == x.f.tensors[i].type && t->ne == x.f.tensors[i].ne) << a << ": " << t->name;
    std::vector<uint8_t> p = x.data(i), q = y.data(j);  // (the last tensor has no padding after it)
    const size_t n = std::min(p.size(), q.size());
    EXPECT_TRUE(std::equal(p.begin(), p.begin() + int64_t(n), q.begin()) &&
                std::all_of(p.begin() + int64_t(n), p.end(), [](uint8_t c) { return c == 0; }) &&
                std::all_of(q.begin() + int64_t(n), q.end(), [](uint8_t c) { return c == 0; }))
        << a << ": " << t->name << " differs";
  }
}

// Every kind, a dense and a mixture-of-experts family, the converter's float types, Q8_0 and a
// llama-quantize preset: the same bytes as the decoded checkpoint gives (weights unpacked from
// integer codes come last, as dequant_model adds them: the same tensors in another order).
TEST_F(QuantizedSource, EveryKindGivesTheDecodedCheckpointsBytes) {
  const std::vector<std::string> kinds = {"fp8-block", "fp8-tensor", "ct-fp8-channel", "ct-fp8-block", "ct-int8-channel", "modelopt-fp8",
                                          "gptq4", "gptq2", "gptq8-v2", "ct-int4-group", "ct-int4-zp", "ct-int8-group", "bitnet"};
  const std::vector<std::string> types = {"F32", "BF16", "F16", "Q8_0", "Q4_K_M"};
  std::vector<std::vector<std::string>> runs;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& arch : {"llama", "qwen3moe"})
    for (const std::string& k : kinds) {
      const bool packed = k.rfind("gptq", 0) == 0 || k.find("group") != std::string::npos || k == "ct-int4-zp";
      const std::string d = make(arch + "-" + k, arch, k, packed || k == "fp8-block" ? 32 : 48);  // (48: blocks that do not divide 64 / 160)
      for (const std::string& t : types) {
        for (const std::string& m : {d, ref_of(d)})  // the converter's types, then a llama-quantize preset
          runs.push_back({m + "." + t + ".gguf", "--model", m, t == "Q4_K_M" ? "--type" : "--outtype", t, "--no-vocab", "--quiet"});
        pairs.push_back({d + "." + t + ".gguf", ref_of(d) + "." + t + ".gguf"});
        if (packed) pairs.back().first = "packed:" + pairs.back().first;
      }
    }
  for (const tsup::RunResult& r : tsup::run_many(runs, dir, 120.0)) ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const auto& [a, b] : pairs) {
    if (a.rfind("packed:", 0) == 0) {
      expect_same_model(a.substr(7), b);
      continue;
    }
    const std::vector<uint8_t> x = tsup::slurp(a), y = tsup::slurp(b);
    EXPECT_TRUE(x == y) << a << " differs from " << b;
  }
  // the unpacked weights after every other tensor (their order checked against the converter by hand)
  const GgufModel g(path("llama-gptq4/M.F32.gguf"));
  std::vector<std::string> names;
  for (const tg3::Tensor& t : g.f.tensors) names.push_back(t.name);
  ASSERT_EQ(names.size(), 2u + 2 * 9 + 1);
  const std::vector<std::string> last(names.end() - 14, names.end());
  for (const std::string& n : last) EXPECT_TRUE(n.find("norm") == std::string::npos) << ::testing::PrintToString(names);
}

// Gemma 4's mixture with its experts in FP8 as transformers' FP8 experts hold them: one 3-D
// tensor per layer and projection ([experts, rows, cols]) with a scale per block of each expert
// ([experts, ceil(rows / 48), ceil(cols / 48)]: an expert's 64 rows end in a short block, and the
// next expert's blocks start afresh, as dequant_simple's repeat over the last two dimensions
// gives) or one per expert ([experts, 1, 1]). The decoded twin's bytes, in F32, BF16 and Q8_0;
// --fp8-as-q8 writes the experts as Q8_0.
TEST_F(QuantizedSource, Fp8FusedExpertsGiveTheDecodedCheckpointsBytes) {
  std::vector<std::vector<std::string>> runs;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string k : {"fp8-block", "fp8-tensor"}) {
    gen::Spec s;
    s.arch = "gemma4";
    s.hf_init = true;
    s.dim = 64; s.hidden = 96; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.head_dim = 16; s.vocab = 100; s.seq_len = 32;
    s.config_patch = R"({"attention_k_eq_v": true, "num_global_key_value_heads": 1, "hidden_size_per_layer_input": 0,
                         "num_kv_shared_layers": 0, "use_double_wide_mlp": false, "enable_moe_block": true,
                         "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32})";
    const std::string d = path(k + "/M"), r = path(k + "-ref/M");
    gen::write_checkpoint(d, s);
    EXPECT_GT(gen::quantize_checkpoint(d, k, 48, r), 0);
    const std::vector<uint8_t> shard = tsup::slurp(d + "/model.safetensors");
    const std::string header(shard.begin() + 8, shard.begin() + 8 + int64_t(shard[0] | shard[1] << 8 | shard[2] << 16));
    const json h = json::parse(header);
    ASSERT_EQ(h["model.layers.1.experts.gate_up_proj"]["dtype"], "F8_E4M3") << header;
    EXPECT_EQ(h["model.layers.1.experts.gate_up_proj_scale_inv"]["shape"],
              k == "fp8-block" ? json({4, 2, 2}) : json({4, 1, 1}));
    EXPECT_EQ(h["model.layers.1.experts.down_proj_scale_inv"]["shape"], k == "fp8-block" ? json({4, 2, 1}) : json({4, 1, 1}));
    for (const std::string t : {"F32", "BF16", "Q8_0"}) {
      for (const std::string& m : {d, r}) runs.push_back({m + "." + t + ".gguf", "--model", m, "--outtype", t, "--no-vocab", "--quiet"});
      pairs.push_back({d + "." + t + ".gguf", r + "." + t + ".gguf"});
    }
    runs.push_back({d + ".q8.gguf", "--model", d, "--outtype", "BF16", "--fp8-as-q8", "--no-vocab", "--quiet"});
  }
  for (const tsup::RunResult& x : tsup::run_many(runs, dir, 120.0)) ASSERT_EQ(x.exit_code, 0) << x.describe();
  for (const auto& [a, b] : pairs) EXPECT_TRUE(tsup::slurp(a) == tsup::slurp(b)) << a << " differs from " << b;
  const std::vector<uint8_t> b = tsup::slurp(path("fp8-block/M.q8.gguf"));
  const tg3::File f = tg3::parse(b);
  int experts = 0;
  for (const tg3::Tensor& t : f.tensors)
    if (t.name.find("_exps.weight") != std::string::npos) {
      EXPECT_EQ(t.type, 8u) << t.name;  // Q8_0
      ++experts;
    }
  EXPECT_EQ(experts, 2 * 2);
}

// A GPTQ weight's rows are columns of its codes: they stream in strips, chunk by chunk, as the
// other kinds do. In chunks of 1 MiB of f32: Llama's 1024 x 1024 (q / k permuted in heads: 256
// rows a chunk), 1152 x 1024 and 1024 x 1152 (the last chunk shorter), 2 bits; Qwen3-MoE's 4
// experts of 640 x 512 stacked (chunks of 512 rows across experts), 8 bits (v2); act-order group
// indices. The decoded twin's bytes, and the pipeline's buffers no larger than for that twin (F32
// source rows): before, each slot held a whole tensor in f32.
TEST_F(QuantizedSource, GptqStreamsInStripsOfItsCodes) {
  for (const auto& [arch, kind] : std::vector<std::pair<std::string, std::string>>{{"llama", "gptq2"}, {"qwen3moe", "gptq8-v2"}}) {
    gen::Spec s;
    s.arch = arch;
    s.hf_init = true;
    s.dim = arch == "llama" ? 1024 : 512, s.hidden = 1152, s.heads = 8, s.kv_heads = 8, s.layers = 1;
    s.experts = 4, s.experts_used = 2, s.expert_hidden = 640;
    const std::string d = path(arch + "/M"), r = path(arch + "-ref/M");
    gen::write_checkpoint(d, s);
    ASSERT_GT(gen::quantize_checkpoint(d, kind, 128, r), 0);
    std::vector<nlohmann::json> reports;
    for (const std::string& m : {d, r}) {
      const tsup::RunResult x = tsup::run_cli({m + ".gguf", "--model", m, "--outtype", "F32", "--no-vocab", "--chunk-mb", "1",
                                               "--threads", "2", "--json"}, dir, 120.0);
      ASSERT_EQ(x.exit_code, 0) << x.describe();
      reports.push_back(nlohmann::json::parse(x.out.substr(x.out.find('{'))));
    }
    expect_same_model(d + ".gguf", r + ".gguf");
    const int64_t gptq = reports[0]["pipeline_buffer_bytes"], twin = reports[1]["pipeline_buffer_bytes"];
    std::printf("# %s %s: pipeline buffers %lld bytes (its decoded twin's: %lld)\n", arch.c_str(), kind.c_str(),
                (long long)gptq, (long long)twin);
    EXPECT_LE(gptq, twin) << arch;
  }
}

// LEAP (v1 fp32, v2 int8), GGUF-lite and --verify take them too.
TEST_F(QuantizedSource, LeapGgufLiteAndVerify) {
  const std::string d = make("q", "llama", "fp8-block"), r = ref_of(d);
  std::vector<std::vector<std::string>> runs;
  for (const std::string& m : {d, r}) {
    runs.push_back({m + ".v1.bin", "--meta-llama", m, "--version", "1", "--quiet"});
    runs.push_back({m + ".v2.bin", "--meta-llama", m, "--version", "2", "--quiet"});
    runs.push_back({m + ".q8.gguf-lite", "--model", m, "--scheme", "q8", "--quiet"});
  }
  for (const tsup::RunResult& x : tsup::run_many(runs, dir, 120.0)) ASSERT_EQ(x.exit_code, 0) << x.describe();
  for (const char* ext : {".v1.bin", ".v2.bin", ".q8.gguf-lite"})
    EXPECT_TRUE(tsup::slurp(d + ext) == tsup::slurp(r + ext)) << ext;
  // packed codes (GPTQ) are weights too: GGUF-lite quantizes them as their decoded twin's (the
  // file's tensor order aside: packed weights come last, as the converter adds them)
  const std::string g = make("g", "llama", "gptq4"), gr = ref_of(g);
  for (const std::string& m : {g, gr})
    ASSERT_EQ(tsup::run_cli({m + ".q8.gguf-lite", "--model", m, "--scheme", "q8", "--quiet"}, dir, 120.0).exit_code, 0);
  auto types = [&](const std::string& f) {  // --inspect's table of types
    const std::string o = tsup::run_cli({"--inspect", f}, dir, 60.0).out;
    return o.substr(o.find("dtype"), o.find("header+meta") - o.find("dtype"));
  };
  EXPECT_EQ(types(g + ".q8.gguf-lite"), types(gr + ".q8.gguf-lite"));
  EXPECT_NE(types(g + ".q8.gguf-lite").find("Q8_per_channel"), std::string::npos);
  const tsup::RunResult v = tsup::run_cli({"--verify", d + ".v2.bin", "--model", d}, dir, 120.0);
  EXPECT_EQ(v.exit_code, 0) << v.describe();
  EXPECT_NE(v.out.find("PASS"), std::string::npos) << v.describe();
}

// --fp8-as-q8 (the converter's tensor_force_quant): a weight decoded from FP8 is Q8_0, every other
// tensor as --outtype says; an int8 checkpoint's weights are not FP8 and stay.
TEST_F(QuantizedSource, Fp8AsQ8) {
  const std::string d = make("q", "llama", "fp8-block"), i8 = make("i", "llama", "ct-int8-channel");
  std::vector<std::vector<std::string>> runs = {
      {d + ".bf16q8.gguf", "--model", d, "--outtype", "BF16", "--fp8-as-q8", "--no-vocab", "--quiet"},
      {d + ".bf16.gguf", "--model", d, "--outtype", "BF16", "--no-vocab", "--quiet"},
      {d + ".q8.gguf", "--model", d, "--outtype", "Q8_0", "--no-vocab", "--quiet"},
      {i8 + ".bf16q8.gguf", "--model", i8, "--outtype", "BF16", "--fp8-as-q8", "--no-vocab", "--quiet"},
      {i8 + ".bf16.gguf", "--model", i8, "--outtype", "BF16", "--no-vocab", "--quiet"}};
  for (const tsup::RunResult& x : tsup::run_many(runs, dir, 120.0)) ASSERT_EQ(x.exit_code, 0) << x.describe();
  struct Gguf {
    std::vector<uint8_t> b;
    tg3::File f;
    // tensor i's bytes and the padding after it (the same padding for the same bytes)
    std::vector<uint8_t> data(size_t i) const {
      const size_t a = f.data_start + f.tensors[i].offset, e = i + 1 < f.tensors.size() ? f.data_start + f.tensors[i + 1].offset : b.size();
      return std::vector<uint8_t>(b.begin() + int64_t(a), b.begin() + int64_t(e));
    }
  };
  auto load = [](const std::string& p) { Gguf g{tsup::slurp(p), {}}; g.f = tg3::parse(g.b); return g; };
  const Gguf mixed = load(d + ".bf16q8.gguf"), bf16 = load(d + ".bf16.gguf"), q8 = load(d + ".q8.gguf");
  ASSERT_EQ(mixed.f.tensors.size(), bf16.f.tensors.size());
  int forced = 0;
  for (size_t i = 0; i < mixed.f.tensors.size(); ++i) {
    const std::string& n = mixed.f.tensors[i].name;
    const bool linear = (n.find("attn_") != std::string::npos || n.find("ffn_") != std::string::npos) && n.find("norm") == std::string::npos;
    const Gguf& want = linear ? q8 : bf16;
    EXPECT_EQ(mixed.f.tensors[i].type, want.f.tensors[i].type) << n;
    EXPECT_TRUE(mixed.data(i) == want.data(i)) << n;
    forced += linear;
  }
  EXPECT_EQ(forced, 2 * 7);
  EXPECT_TRUE(tsup::slurp(i8 + ".bf16q8.gguf") == tsup::slurp(i8 + ".bf16.gguf"));
  expect_refused({path("x.gguf"), "--model", d, "--type", "Q4_K_M", "--fp8-as-q8", "--no-vocab", "--quiet"},
                 {"--fp8-as-q8", "Q4_K_M"}, path("x.gguf"));
}

// Bad quantized inputs: one line naming the file and the tensor or key; nothing written.
TEST_F(QuantizedSource, BadInputsAreRefused) {
  const std::string d = make("q", "llama", "fp8-block");
  const std::string shard = d + "/model.safetensors", out = path("o.gguf");
  const std::vector<std::string> args = {out, "--model", d, "--no-vocab", "--quiet"};
  const tsup::Shard orig = tsup::read_shard(shard);
  const std::string orig_config = tsup::slurp_text(d + "/config.json");
  auto with_tensors = [&](const std::function<void(std::vector<gen::RawTensor>&)>& fn) { tsup::rewrite_shard(shard, orig, fn); };
  auto with_config = [&](const std::function<void(json&)>& fn) {
    json c = json::parse(orig_config);
    fn(c);
    gen::write_text(d + "/config.json", c.dump());
  };
  auto restore = [&]() {
    gen::write_safetensors(shard, orig.tensors);
    gen::write_text(d + "/config.json", orig_config);
  };
  auto find = tsup::tensor_named;
  const std::string w = "model.layers.1.self_attn.k_proj.weight", s = w + "_scale_inv";

  with_tensors([&](auto& t) { t.erase(std::find_if(t.begin(), t.end(), [&](auto& x) { return x.name == s; })); });
  expect_refused(args, {"model.safetensors", w, "F8_E4M3", "no scale"}, out);
  with_tensors([&](auto& t) { find(t, s).shape = {1, 3}; find(t, s).bytes.resize(12); });
  expect_refused(args, {"model.safetensors", s, "[1, 3]"}, out);
  with_tensors([&](auto& t) {
    const float nan = std::nanf("");
    std::memcpy(find(t, s).bytes.data() + 4, &nan, 4);
  });
  expect_refused(args, {"model.safetensors", s, "nan"}, out);
  with_tensors([&](auto& t) { find(t, s).dtype = "I32"; });
  expect_refused(args, {"model.safetensors", s, "I32"}, out);
  with_tensors([&](auto& t) { t.push_back({"model.layers.9.mlp.up_proj.weight_scale_inv", "F32", {1}, {0, 0, 128, 63}}); });
  expect_refused(args, {"model.safetensors", "model.layers.9.mlp.up_proj.weight_scale_inv", "does not have"}, out);
  restore();
  with_config([](json& c) { c["quantization_config"]["weight_block_size"] = {128}; });
  expect_refused(args, {"config.json", "quantization_config.weight_block_size"}, out);
  with_config([](json& c) { c["quantization_config"] = {{"quant_method", "awq"}}; });
  expect_refused(args, {"config.json", "quantization_config.quant_method", "awq"}, out);
  with_config([](json& c) { c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 3}}; });
  expect_refused(args, {"config.json", "quantization_config.bits", "3-bit"}, out);
  with_config([](json& c) { c["quantization_config"] = {{"quant_method", "bitnet"}}; });  // (FP8 weights said to be BitNet's)
  expect_refused(args, {"model.safetensors", "_scale_inv", "not a tensor of llama.cpp's llama architecture"}, out);
  with_config([](json& c) {
    c["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "float-quantized"},
                                {"config_groups", {{"g", {{"weights", {{"strategy", "tensor"}}}}}}}};
  });
  expect_refused(args, {"config.json", "quantization_config.config_groups.g.weights.strategy", "tensor"}, out);
  with_config([](json& c) {
    c["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "float-quantized"},
                                {"config_groups", {{"a", {{"weights", json::object()}}}, {"b", {{"weights", json::object()}}}}}};
  });
  expect_refused(args, {"config.json", "quantization_config.config_groups", "2 groups"}, out);
  with_config([](json& c) { c.erase("quantization_config"); });  // scales, and no method says what they are
  expect_refused(args, {"model.safetensors", "weight_scale_inv", "is not a tensor of"}, out);
  restore();
  EXPECT_EQ(tsup::run_cli(args, dir, 60.0).exit_code, 0);  // and the restored checkpoint converts
}

// --inspect of a checkpoint: the quantization and every stored dtype's bytes, as the shard's header has them.
TEST_F(QuantizedSource, InspectSaysHowItIsStored) {
  for (const auto& [kind, method] : {std::pair{"gptq4", "gptq"}, std::pair{"fp8-block", "fp8"}, std::pair{"ct-int4-zp", "compressed-tensors"}}) {
    const std::string d = make(kind, "llama", kind);
    const tsup::RunResult r = tsup::run_cli({"--inspect", d, "--json"}, dir, 60.0);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const json j = json::parse(r.out);
    EXPECT_EQ(j["quantization"]["method"], method);
    EXPECT_EQ(j["quantization"]["scaled_weights"].get<int>() + j["quantization"]["packed_weights"].get<int>(), 14) << kind;
    std::map<std::string, int64_t> want;
    for (const gen::RawTensor& t : tsup::read_shard(d + "/model.safetensors").tensors) want[t.dtype] += int64_t(t.bytes.size());
    std::map<std::string, int64_t> got;
    for (const json& e : j["source_by_dtype"]) got[e["dtype"]] = e["bytes"];
    EXPECT_EQ(got, want) << kind;
    EXPECT_EQ(j["tensors"].size(), 21u) << kind;  // the model's tensors: scales, zero points and group indices read with them
    const tsup::RunResult t = tsup::run_cli({"--inspect", d}, dir, 60.0);
    EXPECT_NE(t.out.find(std::string("quantized   ") + method), std::string::npos) << t.out;
    // a conversion's byte breakdown gives the source's bytes by dtype too
    const tsup::RunResult c = tsup::run_cli({path(std::string(kind) + ".gguf"), "--model", d, "--no-vocab", "--json"}, dir, 60.0);
    ASSERT_EQ(c.exit_code, 0) << c.describe();
    std::map<std::string, int64_t> in_breakdown;
    const json summary = json::parse(c.out);
    for (const json& e : summary["breakdown"]["source_by_dtype"]) in_breakdown[e["dtype"]] = e["bytes"];
    EXPECT_EQ(in_breakdown, want) << kind;
  }
}

// Packed codes (GPTQ, pack-quantized): a bad group index, a missing or mis-shaped companion, a
// shape tensor that is not one: one line naming the tensor; nothing written.
TEST_F(QuantizedSource, BadPackedInputsAreRefused) {
  const std::string g = make("g", "llama", "gptq4"), p = make("p", "llama", "ct-int4-zp");
  const std::string out = path("o.gguf");
  auto edit = [&](const std::string& dir, const std::function<void(std::vector<gen::RawTensor>&)>& fn) {
    const std::string shard = dir + "/model.safetensors";
    const tsup::Shard orig = tsup::read_shard(shard);
    std::vector<gen::RawTensor> t = orig.tensors;
    fn(t);
    gen::write_safetensors(shard, t);
    return orig.tensors;
  };
  auto find = tsup::tensor_named;
  auto refused = [&](const std::string& dir, const std::vector<std::string>& names) {
    expect_refused({out, "--model", dir, "--no-vocab", "--quiet"}, names, out);
  };
  const std::string q = "model.layers.1.self_attn.q_proj";
  auto orig = edit(g, [&](auto& t) { find(t, q + ".g_idx").bytes[4] = 99; });  // entry 1: group 99 of 2
  refused(g, {"model.safetensors", q + ".g_idx", "entry 1 is 99", "2 groups"});
  edit(g, [&](auto& t) { t = orig; t.erase(std::find_if(t.begin(), t.end(), [&](auto& x) { return x.name == q + ".qzeros"; })); });
  refused(g, {"model.safetensors", q + ".qzeros", "missing", q + ".qweight"});
  edit(g, [&](auto& t) { t = orig; find(t, q + ".scales").shape = {1, 128}; });
  refused(g, {"model.safetensors", q + ".scales", "[1, 128]", "[2, 64]"});
  edit(g, [&](auto& t) { t = orig; find(t, q + ".scales").dtype = "I16"; });
  refused(g, {"model.safetensors", q + ".scales", "I16"});
  edit(g, [&](auto& t) {
    t = orig;
    const float inf = INFINITY;
    const uint16_t h = 0x7c00;  // f16 +inf
    (void)inf;
    std::memcpy(find(t, q + ".scales").bytes.data(), &h, 2);
  });
  refused(g, {"model.safetensors", q + ".scales", "inf"});
  edit(g, [&](auto& t) { t = orig; });

  const std::string w = "model.layers.0.mlp.up_proj.weight";
  orig = edit(p, [&](auto& t) { find(t, w + "_shape").bytes[0] = 0; });  // rows 0
  refused(p, {"model.safetensors", w + "_shape", "says 0"});
  edit(p, [&](auto& t) { t = orig; find(t, w + "_shape").bytes[8] = 65; });  // cols 65: not the config's
  refused(p, {"model.safetensors", w, "[160, 65]", "config.json"});
  edit(p, [&](auto& t) {
    t = orig;
    find(t, w + "_packed").shape = {160, 4};  // words for 32 values a row, not 64
    find(t, w + "_packed").bytes.resize(160 * 4 * 4);
  });
  refused(p, {"model.safetensors", w + "_packed", "160 x 64"});
  edit(p, [&](auto& t) { t = orig; find(t, w + "_zero_point").shape = {1, 2}; });
  refused(p, {"model.safetensors", w + "_zero_point", "[1, 2]"});
  edit(p, [&](auto& t) { t = orig; });
  EXPECT_EQ(tsup::run_cli({out, "--model", p, "--no-vocab", "--quiet"}, dir, 60.0).exit_code, 0);

  // BitNet: the codes are bytes [rows / 4, cols] under the weight's name, its scale one finite value
  std::filesystem::remove(out);
  const std::string b = make("b", "llama", "bitnet"), k = "model.layers.1.self_attn.k_proj.weight";
  orig = edit(b, [&](auto& t) { find(t, k + "_scale").shape = {2}, find(t, k + "_scale").bytes.resize(4); });
  refused(b, {"model.safetensors", k + "_scale", "one F32, F16 or BF16 value"});
  edit(b, [&](auto& t) { t = orig; find(t, k).dtype = "F16", find(t, k).shape = {8, 32}; });  // (the same bytes as 2-byte values)
  refused(b, {"model.safetensors", k, "F16", "2-D bytes"});
  edit(b, [&](auto& t) { t = orig; find(t, k).shape = {32, 16}; });  // 128 values a row: not the config's [32, 64]
  refused(b, {"model.safetensors", k, "[128, 16]", "config.json"});
  edit(b, [&](auto& t) { t = orig; std::memset(find(t, k + "_scale").bytes.data(), 0, 2); });  // 0: (code - 1) / 0
  refused(b, {"model.safetensors", k + "_scale", "finite"});
  edit(b, [&](auto& t) { t = orig; t.erase(std::find_if(t.begin(), t.end(), [&](auto& x) { return x.name == "model.layers.0.mlp.up_proj.weight"; })); });
  refused(b, {"model.safetensors", "model.layers.0.mlp.up_proj.weight_scale", "does not have"});
  edit(b, [&](auto& t) { t = orig; });
  EXPECT_EQ(tsup::run_cli({out, "--model", b, "--no-vocab", "--quiet"}, dir, 60.0).exit_code, 0);
}

}  // namespace
