// PEFT LoRA adapters out (issue 27): `--lora DIR --model BASE` writes the GGUF LoRA adapter
// convert_lora_to_gguf.py writes (checked byte for byte by hand; see the README). Here, held to
// the test's own reading of the adapter's safetensors: the keys, the tensor order (the adapter's
// names sorted, lora_a then lora_b), the types (Q8_0 where the rows take it, else F16), A as it
// is and B with Llama's q/k permutation of its rows (written here from the HF rotate-half rule);
// and every bad adapter refused in one line, nothing written.
#include <gtest/gtest.h>

#include <functional>

#include "gguf3_reader.h"
#include "test_support.h"

using nlohmann::json;

namespace {

class LoraAdapter : public tsup::TempDirTest {
 protected:
  std::string base, adapter;
  void SetUp() override {
    TempDirTest::SetUp();
    base = path("base"), adapter = path("my-lora");
    gen::Spec s;
    s.hf_init = true;
    gen::write_checkpoint(base, s);
    gen::LoraSpec l;
    l.r = 8;
    l.alpha = 16;
    gen::write_lora_adapter(base, adapter, l);
  }
  void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& names) {
    tsup::expect_one_error(tsup::run_cli(args, dir, 60.0), names, args[0]);
  }
};

std::vector<float> as_f32(const gen::RawTensor& t) {
  std::vector<float> v;
  for (size_t i = 0; i < t.bytes.size(); i += t.dtype == "F32" ? 4 : 2) {
    uint32_t w = 0;
    if (t.dtype == "F32") std::memcpy(&w, &t.bytes[i], 4);
    else w = uint32_t(t.bytes[i] | t.bytes[i + 1] << 8) << 16;  // BF16
    float f;
    std::memcpy(&f, &w, 4);
    v.push_back(f);
  }
  return v;
}

TEST_F(LoraAdapter, WrittenAsTheConverterWritesIt) {
  for (const char* type : {"F32", "F16", "Q8_0"}) {
    const std::string out = path(std::string("a-") + type + ".gguf");
    const tsup::RunResult r = tsup::run_cli({out, "--lora", adapter, "--model", base, "--type", type, "--quiet"}, dir, 60.0);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const std::vector<uint8_t> bytes = tsup::slurp(out);
    const tg3::File f = tg3::parse(bytes);
    std::vector<std::string> keys;
    for (const tg3::KV& kv : f.kv) keys.push_back(kv.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"general.architecture", "general.type", "adapter.type", "general.name",
                                              "adapter.lora.alpha", "general.quantization_version"}));
    EXPECT_EQ(f.kv[1].items[0], "adapter");
    EXPECT_EQ(f.kv[2].items[0], "lora");
    EXPECT_EQ(f.kv[3].items[0], "My Lora");  // gguf-py's title of the folder's name
    float alpha;
    std::memcpy(&alpha, f.kv[4].items[0].data(), 4);
    EXPECT_EQ(alpha, 16.0f);

    // the adapter's tensors, by base module, in name order; lora_a then lora_b
    std::map<std::string, gen::RawTensor> src;
    for (const gen::RawTensor& t : tsup::read_shard(adapter + "/adapter_model.safetensors").tensors) src[t.name] = t;
    std::vector<std::string> want;
    for (const auto& [name, t] : src) {
      if (name.find(".lora_A.") == std::string::npos) continue;
      const std::string m = name.substr(0, name.find(".lora_A."));  // base_model.model.model.layers.L.x.y
      const int layer = std::stoi(m.substr(m.find("layers.") + 7));
      static const std::map<std::string, std::string> g = {
          {"mlp.down_proj", "ffn_down"}, {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"}, {"self_attn.k_proj", "attn_k"},
          {"self_attn.o_proj", "attn_output"}, {"self_attn.q_proj", "attn_q"}, {"self_attn.v_proj", "attn_v"}};
      const std::string gname = "blk." + std::to_string(layer) + "." + g.at(m.substr(m.find('.', m.find("layers.") + 7) + 1)) + ".weight";
      want.push_back(gname + ".lora_a");
      want.push_back(gname + ".lora_b");
    }
    std::vector<std::string> got;
    for (const tg3::Tensor& t : f.tensors) got.push_back(t.name);
    ASSERT_EQ(got, want) << type;

    for (size_t i = 0; i < f.tensors.size(); ++i) {
      const tg3::Tensor& t = f.tensors[i];
      const bool is_a = t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".lora_a") == 0;
      const int64_t cols = t.ne[0];  // lora_a: the base's input width; lora_b: the rank (8: too short a row for Q8_0)
      const uint32_t want_type = std::string(type) == "F32" ? 0 : std::string(type) == "F16" || cols % 32 ? 1 : 8;
      EXPECT_EQ(t.type, want_type) << type << " " << t.name;
      if (std::string(type) != "F32") continue;
      // the values: A as it is, B with the q/k rows permuted as llama.cpp's converter permutes q/k
      std::string hf;  // the i-th tensor's source: pair i / 2 of the adapter's modules in name order
      const size_t pair = i / 2;
      size_t k = 0;
      for (const auto& [name, s] : src) {
        if (name.find(".lora_A.") == std::string::npos) continue;
        if (k++ == pair) hf = name.substr(0, name.find(".lora_A.")) + (is_a ? ".lora_A.weight" : ".lora_B.weight");
      }
      const std::vector<float> v = as_f32(src.at(hf));
      const int64_t rows = int64_t(v.size()) / cols;
      std::vector<float> expect = v;
      const bool q = hf.find("q_proj") != std::string::npos, kk = hf.find("k_proj") != std::string::npos;
      if (!is_a && (q || kk)) {  // rows [heads, 2, hd/2] -> [heads, hd/2, 2]
        const int64_t heads = q ? 4 : 2, hd = rows / heads;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t h = r / hd, j = r % hd, from = h * hd + (j % 2) * (hd / 2) + j / 2;
          std::copy(v.begin() + from * cols, v.begin() + (from + 1) * cols, expect.begin() + r * cols);
        }
      }
      std::vector<float> written(size_t(rows * cols));
      std::memcpy(written.data(), bytes.data() + f.data_start + t.offset, written.size() * 4);
      EXPECT_EQ(written, expect) << t.name;
    }
  }
}

// --merge-lora: the base with the adapter folded in while converting gives the bytes of converting
// the checkpoint merged in f32 by the tests' generator (W + alpha / r x (B A), summed over r in
// order): GGUF types and presets, LEAP; Llama (B's rows permuted with q and k) and Qwen3.
TEST_F(LoraAdapter, MergeLoraGivesTheMergedCheckpointsBytes) {
  std::vector<std::vector<std::string>> runs;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string arch : {"llama", "qwen3"}) {
    const std::string b = path(arch + "/model"), a = path(arch + "-adapter"), m = path(arch + "-merged/model");
    gen::Spec s;
    s.arch = arch;
    s.hf_init = true;
    s.dtype = "bf16";
    gen::write_checkpoint(b, s);
    gen::LoraSpec l;
    l.r = 4;
    l.alpha = 8;
    l.dtype = "f32";
    ASSERT_EQ(gen::write_lora_adapter(b, a, l, m), 14);
    for (const std::string t : {"F32", "BF16", "Q8_0", "Q4_K_M"}) {
      runs.push_back({b + "." + t + ".gguf", "--model", b, "--merge-lora", a, "--type", t, "--no-vocab", "--quiet"});
      runs.push_back({m + "." + t + ".gguf", "--model", m, "--type", t, "--no-vocab", "--quiet"});
      pairs.push_back({b + "." + t + ".gguf", m + "." + t + ".gguf"});
    }
    if (arch == "llama") {
      runs.push_back({b + ".bin", "--meta-llama", b, "--merge-lora", a, "--version", "1", "--quiet"});
      runs.push_back({m + ".bin", "--meta-llama", m, "--version", "1", "--quiet"});
      pairs.push_back({b + ".bin", m + ".bin"});
    }
  }
  for (const tsup::RunResult& r : tsup::run_many(runs, dir, 120.0)) ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const auto& [x, y] : pairs) EXPECT_TRUE(tsup::slurp(x) == tsup::slurp(y)) << x << " differs from " << y;
  // and the adapter changed the weights
  const tsup::RunResult plain = tsup::run_cli({path("plain.gguf"), "--model", path("llama/model"), "--outtype", "F32", "--no-vocab", "--quiet"}, dir, 60.0);
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_FALSE(tsup::slurp(path("plain.gguf")) == tsup::slurp(path("llama/model.F32.gguf")));
  // an adapter of a wider model: named, nothing written
  gen::Spec wide;
  wide.dim = 128;
  gen::write_checkpoint(path("wide"), wide);
  gen::write_lora_adapter(path("wide"), path("wide-adapter"), gen::LoraSpec{});
  expect_refused({path("x.gguf"), "--model", base, "--merge-lora", path("wide-adapter"), "--no-vocab", "--quiet"},
                 {"adapter_model.safetensors", "down_proj.lora_A.weight", "B [128, 8]", "[64, 160] update"});
}

// --verify takes the source as the file was made: the adapter (--lora), or the base with the
// adapter merged (--merge-lora); a merged file against the base alone fails.
TEST_F(LoraAdapter, VerifyTakesAdaptersAndMergedFiles) {
  const std::string a = path("a.gguf"), m = path("m.gguf");
  ASSERT_EQ(tsup::run_cli({a, "--lora", adapter, "--model", base, "--outtype", "F16", "--quiet"}, dir, 60.0).exit_code, 0);
  ASSERT_EQ(tsup::run_cli({m, "--model", base, "--merge-lora", adapter, "--outtype", "Q8_0", "--no-vocab", "--quiet"}, dir, 60.0).exit_code, 0);
  const tsup::RunResult va = tsup::run_cli({"--verify", a, "--lora", adapter, "--model", base, "--json"}, dir, 60.0);
  ASSERT_EQ(va.exit_code, 0) << va.describe();
  const json ja = json::parse(va.out);
  EXPECT_TRUE(ja["ok"].get<bool>());
  EXPECT_EQ(ja["tensors"].size(), 28u);
  const tsup::RunResult vm = tsup::run_cli({"--verify", m, "--model", base, "--merge-lora", adapter}, dir, 120.0);
  EXPECT_EQ(vm.exit_code, 0) << vm.describe();
  const tsup::RunResult wrong = tsup::run_cli({"--verify", m, "--model", base}, dir, 120.0);
  EXPECT_NE(wrong.exit_code, 0) << wrong.describe();
  EXPECT_NE(wrong.out.find("FAIL"), std::string::npos) << wrong.describe();
}

TEST_F(LoraAdapter, InspectSaysItIsAnAdapter) {
  const tsup::RunResult r = tsup::run_cli({"--inspect", adapter, "--json"}, dir, 60.0);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const json j = json::parse(r.out);
  EXPECT_EQ(j["lora"]["rank"], 8);
  EXPECT_EQ(j["lora"]["alpha"], 16.0);
  EXPECT_EQ(j["lora"]["base"], base);
  EXPECT_EQ(j["tensors"].size(), 28u);
}

TEST_F(LoraAdapter, BadAdaptersAreRefused) {
  const std::string out = path("x.gguf");
  const std::vector<std::string> args = {out, "--lora", adapter, "--model", base, "--quiet"};
  // convert_lora_to_gguf.py has neither of convert_hf_to_gguf.py's metadata options
  expect_refused({out, "--lora", adapter, "--model", base, "--model-name", "n", "--quiet"}, {"--model-name", "convert_lora_to_gguf.py"});
  const std::string cfg = tsup::slurp_text(adapter + "/adapter_config.json");
  auto with_config = [&](const std::function<void(json&)>& fn) {
    json c = json::parse(cfg);
    fn(c);
    gen::write_text(adapter + "/adapter_config.json", c.dump());
  };
  with_config([](json& c) { c["use_dora"] = true; });
  expect_refused(args, {"adapter_config.json", "use_dora"});
  with_config([](json& c) { c["use_rslora"] = true; });
  expect_refused(args, {"adapter_config.json", "use_rslora"});
  with_config([](json& c) { c.erase("lora_alpha"); });
  expect_refused(args, {"adapter_config.json", "lora_alpha"});
  with_config([](json& c) { c["peft_type"] = "IA3"; });
  expect_refused(args, {"adapter_config.json", "peft_type"});
  with_config([](json& c) { c["base_model_name_or_path"] = "meta-llama/Llama-3.2-1B"; });
  expect_refused({out, "--lora", adapter, "--quiet"}, {"adapter_config.json", "base_model_name_or_path", "--model"});
  gen::write_text(adapter + "/adapter_config.json", cfg);
  EXPECT_EQ(tsup::run_cli({out, "--lora", adapter, "--quiet"}, dir, 60.0).exit_code, 0);  // the base from base_model_name_or_path
  std::filesystem::remove(out);

  const std::string shard = adapter + "/adapter_model.safetensors";
  const tsup::Shard orig = tsup::read_shard(shard);
  const std::string b = "base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight";
  auto with_tensors = [&](const std::function<void(std::vector<gen::RawTensor>&)>& fn) { tsup::rewrite_shard(shard, orig, fn); };
  auto find = tsup::tensor_named;
  with_tensors([&](auto& t) { t.erase(std::find_if(t.begin(), t.end(), [&](auto& x) { return x.name == b; })); });
  expect_refused(args, {"adapter_model.safetensors", "q_proj.lora_A.weight", "no lora_B"});
  with_tensors([&](auto& t) { find(t, b).shape = {32, 16}; });
  expect_refused(args, {"adapter_model.safetensors", "q_proj.lora_A.weight", "[32, 16]", "[64, 64]"});
  with_tensors([&](auto& t) {
    t.push_back({"base_model.model.model.layers.0.mlp.router.lora_A.weight", "BF16", {8, 64}, std::vector<uint8_t>(1024)});
    t.push_back({"base_model.model.model.layers.0.mlp.router.lora_B.weight", "BF16", {64, 8}, std::vector<uint8_t>(1024)});
  });
  expect_refused(args, {"adapter_model.safetensors", "router", "not a tensor of llama.cpp's llama"});
  with_tensors([&](auto& t) { t.push_back({"base_model.model.model.layers.0.mlp.extra.weight", "BF16", {64}, std::vector<uint8_t>(128)}); });
  expect_refused(args, {"adapter_model.safetensors", "mlp.extra.weight", "not a lora_A or lora_B"});
  with_tensors([&](auto&) {});
  expect_refused({out, "--lora", adapter, "--model", base, "--type", "Q4_K_M", "--quiet"}, {"Q4_K_M", "LoRA adapter"});
}

}  // namespace

namespace {
// PEFT writes a model card beside the adapter naming its base model: convert_lora_to_gguf.py
// reads it (the adapter's folder is its model card's), with the parameter count negated.
TEST_F(LoraAdapter, ItsModelCardNamesTheBaseModel) {
  std::filesystem::copy_file(std::string(VOCAB_TEST_DATA) + "/model_cards/peft_adapter.md", adapter + "/README.md");
  const std::string out = path("a.gguf");
  ASSERT_EQ(tsup::run_cli({out, "--lora", adapter, "--model", base, "--outtype", "F16", "--quiet"}, dir, 60.0).exit_code, 0);
  const tg3::File f = tg3::parse(tsup::slurp(out));
  std::vector<std::string> keys;
  for (const tg3::KV& kv : f.kv) keys.push_back(kv.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"general.architecture", "general.type", "adapter.type", "general.name",
                                            "general.base_model.count", "general.base_model.0.name",
                                            "general.base_model.0.organization", "general.base_model.0.repo_url", "general.tags",
                                            "adapter.lora.alpha", "general.quantization_version"}));
  EXPECT_EQ(f.find("general.base_model.0.name")->items.at(0), "Llama 3.2 1B Instruct");
  EXPECT_EQ(f.find("general.base_model.0.repo_url")->items.at(0), "https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct");
  EXPECT_EQ(f.find("general.tags")->items,
            (std::vector<std::string>{"base_model:adapter:meta-llama/Llama-3.2-1B-Instruct", "lora", "transformers", "text-generation"}));
}

// gguf-py's Metadata reads config.json of the adapter's folder (PEFT writes none; some tools copy
// the base's there) for its _name_or_path, never the base's: the keys below are what
// convert_lora_to_gguf.py --base wrote for this folder, run by hand (the shape comes from the base).
TEST_F(LoraAdapter, ItsFolderOwnConfigNamesItNotTheBases) {
  json own = json::parse(tsup::slurp_text(base + "/config.json"));
  json theirs = own;
  own["_name_or_path"] = "meta-llama/Llama-3.2-1B-Instruct";
  theirs["_name_or_path"] = "someone/Base-Model-7B";
  gen::write_text(base + "/config.json", theirs.dump());
  const auto general = [&](const std::string& out) {
    EXPECT_EQ(tsup::run_cli({out, "--lora", adapter, "--model", base, "--outtype", "F16", "--quiet"}, dir, 60.0).exit_code, 0);
    std::vector<std::string> kv;
    for (const tg3::KV& k : tg3::parse(tsup::slurp(out)).kv)
      if (k.key.rfind("general.", 0) == 0 && k.key != "general.quantization_version") kv.push_back(k.key + "=" + k.items.at(0));
    return kv;
  };
  EXPECT_EQ(general(path("a.gguf")), (std::vector<std::string>{"general.architecture=llama", "general.type=adapter",
                                                              "general.name=My Lora"}));
  gen::write_text(adapter + "/config.json", own.dump());
  EXPECT_EQ(general(path("b.gguf")),
            (std::vector<std::string>{"general.architecture=llama", "general.type=adapter", "general.name=Llama 3.2 1B Instruct",
                                      "general.organization=Meta Llama", "general.finetune=Instruct",
                                      "general.basename=Llama-3.2", "general.size_label=1B"}));
  // one that is not a JSON object stops the converter (json.load, then .get): here one line
  gen::write_text(adapter + "/config.json", "[1, 2]");
  expect_refused({path("c.gguf"), "--lora", adapter, "--model", base, "--quiet"}, {"config.json", "JSON object"});
}
}  // namespace

// BitNet: the converter ternarizes every projection as a whole (weight_quant), so an adapter of
// one is refused as a separate file, and --merge-lora folds it in first: the bytes of the
// checkpoint merged in f32, then converted (and so ternarized).
TEST_F(LoraAdapter, BitnetAdaptersMergeBeforeTheTernarization) {
  const std::string b = path("bitnet/model"), a = path("bitnet-adapter"), m = path("bitnet-merged/model");
  gen::Spec s;
  s.arch = "bitnet";
  s.hf_init = true;
  s.dtype = "bf16";
  gen::write_checkpoint(b, s);
  gen::LoraSpec l;
  l.r = 4;
  l.dtype = "f32";
  ASSERT_EQ(gen::write_lora_adapter(b, a, l, m), 14);
  for (const std::string t : {"F32", "Q8_0"}) {
    const auto x = tsup::run_cli({b + "." + t + ".gguf", "--model", b, "--merge-lora", a, "--outtype", t, "--no-vocab", "--quiet"}, dir, 60.0);
    const auto y = tsup::run_cli({m + "." + t + ".gguf", "--model", m, "--outtype", t, "--no-vocab", "--quiet"}, dir, 60.0);
    ASSERT_EQ(x.exit_code, 0) << x.describe();
    ASSERT_EQ(y.exit_code, 0) << y.describe();
    EXPECT_TRUE(tsup::slurp(b + "." + t + ".gguf") == tsup::slurp(m + "." + t + ".gguf")) << t;
  }
  expect_refused({path("x.gguf"), "--lora", a, "--model", b, "--quiet"},
                 {"adapter_model.safetensors", "down_proj.lora_A.weight", "BitNet projection", "--merge-lora"});
}
