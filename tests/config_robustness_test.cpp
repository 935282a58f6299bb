// Configs and shapes that used to crash or mislead: a GPT-2 config larger than its tensors
// (--verify read past the embedding rows), n_positions -1 (a raw vector::_M_default_append),
// an embedding with no rows (a division by zero in --verify, a LEAP file its own --inspect
// rejects), config integers written as huge floats (undefined casts: 1e20 experts slipped past
// the mixture-of-experts refusal). Each must give one error line naming the file, exit 1.
#include <gtest/gtest.h>

#include <functional>

#include "test_support.h"

using nlohmann::json;
using tsup::run_cli;

namespace {

class ConfigRobustness : public tsup::TempDirTest {
 protected:
  void expect_error(const std::vector<std::string>& args, const std::vector<std::string>& names) {
    const auto r = run_cli(args, dir);
    ASSERT_FALSE(r.timed_out) << r.describe();
    ASSERT_FALSE(r.signaled) << "crashed\n" << r.describe();
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    const auto lines = r.error_lines();
    ASSERT_EQ(lines.size(), 1u) << r.describe();
    for (const std::string& n : names) EXPECT_NE(lines[0].find(n), std::string::npos) << "'" << n << "' not in " << lines[0];
    EXPECT_EQ(lines[0].find("vector::"), std::string::npos) << lines[0];
    EXPECT_EQ(lines[0].find("json.exception"), std::string::npos) << lines[0];
  }
  void edit_config(const std::string& model, const std::function<void(json&)>& fn) {
    json c = json::parse(tsup::slurp_text(path(model + "/config.json")));
    fn(c);
    gen::write_text(path(model + "/config.json"), c.dump(2));
  }
  void write_gpt2(int64_t dim) {
    gen::Spec s;
    s.arch = "gpt2";
    s.dim = dim;
    s.heads = 2;
    s.layers = 2;
    s.vocab = 50;
    s.seq_len = 16;
    s.dtype = "f32";
    gen::write_checkpoint(path("gpt2"), s);
  }
};

TEST_F(ConfigRobustness, Gpt2ConfigLargerThanItsTensorsIsRefusedByVerify) {
  write_gpt2(8);
  const auto w = run_cli({path("g.gguf-lite"), "--model", path("gpt2"), "--scheme", "f32", "--quiet"}, dir);
  ASSERT_EQ(w.exit_code, 0) << w.describe();
  const auto ok = run_cli({"--verify", path("g.gguf-lite"), "--model", path("gpt2")}, dir);
  ASSERT_EQ(ok.exit_code, 0) << ok.describe();
  edit_config("gpt2", [](json& c) { c["n_embd"] = 64; });  // tensors stay 8 wide
  expect_error({"--verify", path("g.gguf-lite"), "--model", path("gpt2")}, {"transformer.", "contradicts config.json"});
  edit_config("gpt2", [](json& c) {
    c["n_embd"] = 8;
    c["vocab_size"] = 500;  // more rows than wte has
  });
  expect_error({"--verify", path("g.gguf-lite"), "--model", path("gpt2")}, {"transformer.wte.weight", "vocab_size"});
}

TEST_F(ConfigRobustness, Gpt2NegativeOrHugePositionsAreConfigErrors) {
  write_gpt2(8);
  ASSERT_EQ(run_cli({path("g.gguf-lite"), "--model", path("gpt2"), "--quiet"}, dir).exit_code, 0);
  for (const json& v : {json(-1), json(0), json(1e300), json("16"), json(2.5)}) {
    SCOPED_TRACE(v.dump());
    edit_config("gpt2", [&](json& c) { c["n_positions"] = v; });
    expect_error({"--verify", path("g.gguf-lite"), "--model", path("gpt2")}, {"config.json"});
  }
}

TEST_F(ConfigRobustness, EmbeddingWithoutRowsIsRefusedNotDividedBy) {
  gen::Spec s;
  s.tied = true;
  gen::write_checkpoint(path("m"), s);
  tsup::Shard sh = tsup::read_shard(path("m/model.safetensors"));
  for (gen::RawTensor& t : sh.tensors)
    if (t.name == "model.embed_tokens.weight") {
      t.shape = {0, s.dim};
      t.bytes.clear();
    }
  gen::write_safetensors(path("m/model.safetensors"), sh.tensors);
  edit_config("m", [](json& c) { c.erase("vocab_size"); });
  // LEAP: its header cannot hold an empty vocabulary (its own --inspect would reject the file).
  expect_error({path("o.bin"), "--model", path("m"), "--quiet"}, {"model.embed_tokens.weight", "no rows"});
  EXPECT_FALSE(tsup::exists(path("o.bin")));
  // GGUF-lite stores any tensor; verifying the file against the model then fails cleanly.
  const auto w = run_cli({path("o.gguf-lite"), "--model", path("m"), "--quiet"}, dir);
  ASSERT_EQ(w.exit_code, 0) << w.describe();
  expect_error({"--verify", path("o.gguf-lite"), "--model", path("m")}, {"model.embed_tokens.weight"});
  // GGUF refuses it (llama.cpp needs a vocabulary).
  const auto g = run_cli({path("o.gguf"), "--model", path("m"), "--no-vocab", "--quiet"}, dir);
  EXPECT_EQ(g.exit_code, 1) << g.describe();
  EXPECT_FALSE(g.signaled);
}

TEST_F(ConfigRobustness, HugeFloatIntegersAreRefusedNotCast) {
  gen::Spec s;
  gen::write_checkpoint(path("m"), s);
  const json original = json::parse(tsup::slurp_text(path("m/config.json")));
  const std::vector<std::pair<std::string, json>> cases = {
      {"num_local_experts", 1e20}, {"num_local_experts", 1e19},   {"hidden_size", 1e300},
      {"num_hidden_layers", -1e19}, {"max_position_embeddings", 9.3e18}, {"vocab_size", 1.5e19},
      {"intermediate_size", 160.5}, {"num_attention_heads", json::parse("18446744073709551615")},
  };
  for (const auto& kv : cases) {
    const std::string& key = kv.first;
    const json& value = kv.second;
    SCOPED_TRACE(key + " = " + value.dump());
    edit_config("m", [&](json& c) {
      c = original;
      c[key] = value;
    });
    for (const char* out : {"o.bin", "o.gguf", "o.gguf-lite"}) {
      SCOPED_TRACE(out);
      expect_error({path(out), "--model", path("m"), "--no-vocab", "--quiet"}, {"config.json", key});
      EXPECT_FALSE(tsup::exists(path(out)));
    }
  }
  // Whole numbers written as floats are whole numbers.
  edit_config("m", [&](json& c) {
    c = original;
    c["hidden_size"] = 64.0;
    c["max_position_embeddings"] = 128.0;
  });
  const auto r = run_cli({path("o.bin"), "--model", path("m"), "--quiet", "--json"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(json::parse(r.out)["header"]["seq_len"], 128);
  // A position count past 2^32 is not taken modulo 2^32 (it was: 2^32 + 5 became 5).
  edit_config("m", [&](json& c) {
    c = original;
    c["max_position_embeddings"] = (int64_t(1) << 32) + 5;
  });
  const auto big = run_cli({path("o2.bin"), "--model", path("m"), "--quiet", "--json"}, dir);
  ASSERT_EQ(big.exit_code, 0) << big.describe();
  EXPECT_EQ(json::parse(big.out)["header"]["seq_len"], 2048);
  expect_error({path("o2.gguf"), "--model", path("m"), "--no-vocab", "--quiet"}, {"max_position_embeddings"});
}

}  // namespace
