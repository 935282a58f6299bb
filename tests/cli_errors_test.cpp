// Bad inputs and outputs through the real CLI: every failure must exit non-zero with exactly
// one "error:" line naming the file (and tensor, where there is one), and leave no output file
// and no "<out>.partial" behind.
#include <gtest/gtest.h>

#include <functional>

#include "test_support.h"

using nlohmann::ordered_json;
using tsup::run_cli;

namespace {

const char* kShard = "model.safetensors";

class CliErrors : public tsup::TempDirTest {
 protected:
  gen::Spec spec;
  std::vector<gen::Tensor> src;

  void SetUp() override {
    TempDirTest::SetUp();
    spec.dtype = "bf16";
    spec.rope_theta = 500000.0;
    src = gen::write_checkpoint(path("model"), spec);
  }
  std::string shard() const { return path("model/") + kShard; }

  // Rewrites the shard with an edited header (same data section).
  void edit_header(const std::function<void(ordered_json&)>& fn, const std::string& file = "") {
    const std::string p = file.empty() ? shard() : file;
    tsup::Shard s = tsup::read_shard(p);
    fn(s.header);
    std::string h = s.header.dump();
    while (h.size() % 8) h += ' ';
    tsup::write_raw_shard(p, h, s.data);
  }
  // Rewrites the shard from (possibly edited) tensors with contiguous offsets.
  void edit_tensors(const std::function<void(std::vector<gen::RawTensor>&)>& fn, const std::string& file = "") {
    const std::string p = file.empty() ? shard() : file;
    tsup::Shard s = tsup::read_shard(p);
    fn(s.tensors);
    gen::write_safetensors(p, s.tensors);
  }

  // Runs a conversion that must fail cleanly; every string in `names` must appear in the error line.
  void expect_failure(const std::vector<std::string>& names, const std::string& format = "leap",
                      const std::string& out_rel = "out.bin") {
    const std::string out = path(out_rel);
    std::vector<std::string> args = {out, "--model", path("model"), "--format", format, "--quiet"};
    const tsup::RunResult r = run_cli(args, dir, 30.0);
    ASSERT_FALSE(r.timed_out) << r.describe();
    ASSERT_FALSE(r.signaled) << "crashed\n" << r.describe();
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_LT(r.exit_code, 128) << r.describe();
    const auto lines = r.error_lines();
    ASSERT_EQ(lines.size(), 1u) << r.describe();
    for (const std::string& n : names)
      EXPECT_NE(lines[0].find(n), std::string::npos) << "error line does not name '" << n << "': " << lines[0];
    EXPECT_FALSE(tsup::exists(out)) << "output left behind";
    EXPECT_FALSE(tsup::exists(out + ".partial")) << "partial output left behind";
  }
  void expect_failure_both_formats(const std::vector<std::string>& names) {
    {
      SCOPED_TRACE("leap");
      expect_failure(names, "leap", "out.bin");
    }
    {
      SCOPED_TRACE("gguf-lite");
      expect_failure(names, "gguf-lite", "out.gguf-lite");
    }
  }
};

TEST_F(CliErrors, BaselineSucceeds) {
  // The fixture's checkpoint converts fine: every failure below comes from the one defect planted.
  for (const char* fmt : {"leap", "gguf-lite"}) {
    const auto r = run_cli({path("ok.out"), "--model", path("model"), "--format", fmt, "--quiet"}, dir);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(r.error_lines().empty());
  }
}

TEST_F(CliErrors, TruncatedShard) {
  auto b = tsup::slurp(shard());
  b.resize(b.size() - 100);  // inside the last tensor (lm_head)
  gen::write_file(shard(), b);
  expect_failure_both_formats({shard(), "lm_head.weight"});
}

TEST_F(CliErrors, ShardShorterThanLengthPrefix) {
  gen::write_file(shard(), {1, 2, 3});
  expect_failure_both_formats({shard()});
}

TEST_F(CliErrors, HeaderLengthPastEof) {
  auto b = tsup::slurp(shard());
  tsup::put<uint64_t>(b, 0, uint64_t(b.size()));
  gen::write_file(shard(), b);
  expect_failure_both_formats({shard()});
}

TEST_F(CliErrors, HeaderLengthHuge) {
  auto b = tsup::slurp(shard());
  tsup::put<uint64_t>(b, 0, ~uint64_t(0));
  gen::write_file(shard(), b);
  expect_failure_both_formats({shard()});
}

// A clone made without git-lfs: the shard is a text pointer. Named as such, with what to run.
TEST_F(CliErrors, GitLfsPointerIsNamed) {
  const std::string ptr = "version https://git-lfs.github.com/spec/v1\n"
                          "oid sha256:4d7a2143a3a2b8bdb7d6e4e3ed2d7fa0a0ce1b4b6f3b2b1c3f8a1b2c3d4e5f60\n"
                          "size 2200119640\n";
  gen::write_file(shard(), std::vector<uint8_t>(ptr.begin(), ptr.end()));
  expect_failure_both_formats({shard(), "Git LFS pointer", "git lfs pull"});
}

// A folder with PyTorch pickles or a GGUF in place of safetensors: says what it has and what it takes.
TEST_F(CliErrors, OtherWeightFilesAreNamed) {
  std::filesystem::remove(shard());
  gen::write_text(path("model/pytorch_model.bin"), "not read");
  gen::write_text(path("model/model.gguf"), "not read");
  expect_failure_both_formats({"no .safetensors files found", "model.gguf, pytorch_model.bin", "*.safetensors"});
}

TEST_F(CliErrors, MalformedJsonHeader) {
  auto b = tsup::slurp(shard());
  const uint64_t n = tsup::le<uint64_t>(b, 0);
  size_t last = 8 + size_t(n) - 1;
  while (b[last] == ' ') --last;
  ASSERT_EQ(b[last], '}');
  b[last] = ' ';  // drop the closing brace: same length, invalid JSON
  gen::write_file(shard(), b);
  expect_failure_both_formats({shard()});
}

TEST_F(CliErrors, HeaderNotAnObject) {
  std::string h = "[1, 2, 3]";
  while (h.size() % 8) h += ' ';
  tsup::write_raw_shard(shard(), h, {});
  expect_failure_both_formats({shard()});
}

TEST_F(CliErrors, OffsetsPastEndOfFile) {
  edit_header([](ordered_json& h) {
    auto& o = h["lm_head.weight"]["data_offsets"];
    o[0] = o[0].get<uint64_t>() + 4096;
    o[1] = o[1].get<uint64_t>() + 4096;
  });
  expect_failure_both_formats({shard(), "lm_head.weight"});
}

TEST_F(CliErrors, OffsetsBeginAfterEnd) {
  edit_header([](ordered_json& h) {
    auto& o = h["model.norm.weight"]["data_offsets"];
    const uint64_t b = o[0], e = o[1];
    o[0] = e;
    o[1] = b;
  });
  expect_failure_both_formats({shard(), "model.norm.weight"});
}

// begin = 2^64 - 1 must be rejected as out of range. With end = nbytes - 1 the length end - begin
// wraps around to exactly nbytes, so only a proper range check on begin catches it; otherwise the
// tensor is read from one byte before the data section (the header's last byte) and shifted.
TEST_F(CliErrors, OffsetBeyondInt64IsRejected) {
  edit_header([](ordered_json& h) {
    auto& o = h["model.embed_tokens.weight"]["data_offsets"];
    ASSERT_EQ(o[0].get<uint64_t>(), 0u);  // the first tensor of the data section
    const uint64_t nbytes = o[1].get<uint64_t>();
    o[0] = ~uint64_t(0);
    o[1] = nbytes - 1;
  });
  expect_failure_both_formats({shard(), "model.embed_tokens.weight"});
}

TEST_F(CliErrors, OverlappingOffsets) {
  edit_header([](ordered_json& h) {
    h["model.layers.0.post_attention_layernorm.weight"]["data_offsets"] =
        h["model.layers.0.input_layernorm.weight"]["data_offsets"];
  });
  const auto r = run_cli({path("out.bin"), "--model", path("model"), "--quiet"}, dir);
  ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
  const std::string line = r.error_lines()[0];
  EXPECT_TRUE(line.find("model.layers.0.post_attention_layernorm.weight") != std::string::npos ||
              line.find("model.layers.0.input_layernorm.weight") != std::string::npos)
      << line;
  expect_failure_both_formats({shard(), "model.layers.0."});
}

// Overlap must be found even when an empty tensor sorts between the two overlapping ones.
TEST_F(CliErrors, OverlapHiddenBehindEmptyTensor) {
  edit_header([](ordered_json& h) {
    const uint64_t emb_begin = h["model.embed_tokens.weight"]["data_offsets"][0];
    h["aaa.empty"] = {{"dtype", "F32"}, {"shape", ordered_json::array({0})}, {"data_offsets", ordered_json::array({emb_begin + 8, emb_begin + 8})}};
    // model.norm.weight (64 x BF16 = 128 bytes) now lies inside the embedding's bytes.
    h["model.norm.weight"]["data_offsets"] = ordered_json::array({emb_begin + 16, emb_begin + 16 + 128});
  });
  expect_failure({shard(), "model.norm.weight"}, "gguf-lite", "out.gguf-lite");
}

TEST_F(CliErrors, ByteLengthDoesNotMatchShape) {
  edit_header([](ordered_json& h) { h["model.norm.weight"]["shape"] = ordered_json::array({63}); });
  expect_failure_both_formats({shard(), "model.norm.weight"});
}

TEST_F(CliErrors, UnsupportedDtype) {
  edit_header([](ordered_json& h) { h["model.norm.weight"]["dtype"] = "F8_E4M3"; });
  expect_failure_both_formats({shard(), "model.norm.weight", "F8_E4M3"});
}

TEST_F(CliErrors, MissingTensor) {
  edit_tensors([](std::vector<gen::RawTensor>& ts) {
    ts.erase(std::remove_if(ts.begin(), ts.end(),
                            [](const gen::RawTensor& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; }),
             ts.end());
  });
  // The shard itself is valid; which file is wrong is the checkpoint (folder) as a whole.
  expect_failure({path("model"), "model.layers.1.mlp.up_proj.weight"});
}

TEST_F(CliErrors, MissingTensorListedInIndex) {
  gen::Spec s = spec;
  s.shards = 3;
  std::filesystem::remove_all(path("model"));
  gen::write_checkpoint(path("model"), s);
  const std::string shard2 = path("model/model-00002-of-00003.safetensors");
  std::string victim;
  edit_tensors([&](std::vector<gen::RawTensor>& ts) {
    victim = ts.back().name;
    ts.pop_back();
  }, shard2);
  ASSERT_FALSE(victim.empty());
  expect_failure_both_formats({"model.safetensors.index.json", victim});
}

TEST_F(CliErrors, HiddenSizeContradictsShapes) {
  std::string cfg = tsup::slurp_text(path("model/config.json"));
  auto j = ordered_json::parse(cfg);
  j["hidden_size"] = 72;  // still divisible by 4 heads; the tensors say 64
  gen::write_text(path("model/config.json"), j.dump(2));
  expect_failure({shard(), "model.embed_tokens.weight"});
}

TEST_F(CliErrors, IntermediateSizeContradictsShapes) {
  auto j = ordered_json::parse(tsup::slurp_text(path("model/config.json")));
  j["intermediate_size"] = 128;  // the tensors say 160
  gen::write_text(path("model/config.json"), j.dump(2));
  expect_failure({shard(), "mlp.gate_proj.weight"});
}

TEST_F(CliErrors, MoreLayersInConfigThanInShards) {
  auto j = ordered_json::parse(tsup::slurp_text(path("model/config.json")));
  j["num_hidden_layers"] = 3;
  gen::write_text(path("model/config.json"), j.dump(2));
  expect_failure({"model.layers.2."});
}

TEST_F(CliErrors, FewerLayersInConfigThanInShards) {
  auto j = ordered_json::parse(tsup::slurp_text(path("model/config.json")));
  j["num_hidden_layers"] = 1;
  gen::write_text(path("model/config.json"), j.dump(2));
  expect_failure({shard(), "model.layers.1."});
}

TEST_F(CliErrors, NoConfigAtAll) {
  std::filesystem::remove(path("model/config.json"));
  expect_failure({path("model")});
}

TEST_F(CliErrors, UnsupportedArchitecture) {
  auto j = ordered_json::parse(tsup::slurp_text(path("model/config.json")));
  j["architectures"] = ordered_json::array({"Qwen2ForCausalLM"});
  gen::write_text(path("model/config.json"), j.dump(2));
  expect_failure({"config.json", "Qwen2ForCausalLM"});
}

TEST_F(CliErrors, AttentionBiasTensorPresent) {
  edit_tensors([](std::vector<gen::RawTensor>& ts) {
    gen::RawTensor b{"model.layers.0.self_attn.q_proj.bias", "BF16", {64}, std::vector<uint8_t>(128, 0)};
    ts.push_back(b);
  });
  expect_failure({shard(), "model.layers.0.self_attn.q_proj.bias"});
}

TEST_F(CliErrors, MalformedConfigJson) {
  gen::write_text(path("model/config.json"), "{\"hidden_size\": 64,");
  expect_failure({"config.json"});
}

TEST_F(CliErrors, OutputDirectoryDoesNotExist) {
  const std::string out = path("no/such/dir/out.bin");
  for (const char* fmt : {"leap", "gguf-lite"}) {
    const auto r = run_cli({out, "--model", path("model"), "--format", fmt, "--quiet"}, dir);
    ASSERT_FALSE(r.signaled) << r.describe();
    EXPECT_NE(r.exit_code, 0) << r.describe();
    ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
    EXPECT_NE(r.error_lines()[0].find(out), std::string::npos) << r.error_lines()[0];
    EXPECT_FALSE(tsup::exists(out));
    EXPECT_FALSE(tsup::exists(out + ".partial"));
  }
}

TEST_F(CliErrors, OutputPathIsADirectory) {
  std::filesystem::create_directories(path("adir"));
  const auto r = run_cli({path("adir"), "--model", path("model"), "--format", "leap", "--quiet"}, dir);
  EXPECT_NE(r.exit_code, 0) << r.describe();
  ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
  EXPECT_NE(r.error_lines()[0].find(path("adir")), std::string::npos);
  EXPECT_FALSE(tsup::exists(path("adir") + ".partial"));
}

TEST_F(CliErrors, ModelPathDoesNotExist) {
  const auto r = run_cli({path("out.bin"), "--model", path("nope"), "--quiet"}, dir);
  EXPECT_NE(r.exit_code, 0) << r.describe();
  ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
  EXPECT_NE(r.error_lines()[0].find(path("nope")), std::string::npos);
  EXPECT_FALSE(tsup::exists(path("out.bin")));
}

// A failed conversion must not clobber an existing file at the output path.
TEST_F(CliErrors, FailureKeepsExistingOutput) {
  gen::write_text(path("out.bin"), "previous contents");
  edit_header([](ordered_json& h) { h["model.norm.weight"]["dtype"] = "F8_E4M3"; });
  const auto r = run_cli({path("out.bin"), "--model", path("model"), "--quiet"}, dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(tsup::slurp_text(path("out.bin")), "previous contents");
  EXPECT_FALSE(tsup::exists(path("out.bin.partial")));
}

}  // namespace
