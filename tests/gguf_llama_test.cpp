// The CLI's real GGUF for Llama checkpoints, read back with the test's own GGUF reader
// (tests/gguf3_reader.h, written from the spec) and compared with the generator's values:
// names and dims as llama.cpp's converter writes them, the q/k permutation worked out here from
// convert_hf_to_gguf.py's reshape/swapaxes, norms in F32, alignment, keys and file types,
// fallbacks, and refusals that name the key or tensor.
#include <map>

#include "gguf3_reader.h"
#include "test_support.h"

namespace {

using tsup::slurp;

class GgufLlama : public tsup::TempDirTest {
 protected:
  std::vector<gen::Tensor> make(gen::Spec s) {
    s.dtype = "f32";
    return gen::write_checkpoint(dir + "/ck", s);
  }
  tsup::RunResult convert(const std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {dir + "/" + out, "--model", dir + "/ck", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return tsup::run_cli(args, dir);
  }
  void tokenizer() {  // the 400-piece SentencePiece model of tests/data
    std::filesystem::copy_file(std::string(VOCAB_TEST_DATA) + "/tiny_sp_bpe.model",
                               dir + "/ck/tokenizer.model");
  }
};

// convert_hf_to_gguf.py: w.reshape(n_head, 2, rows / n_head / 2, cols).swapaxes(1, 2).reshape(w.shape)
std::vector<float> permute_like_llama_cpp(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t n_head) {
  const int64_t half = rows / n_head / 2;
  std::vector<float> out(w.size());
  int64_t r_out = 0;
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)      // the swapped axes: i first ...
      for (int64_t j = 0; j < 2; ++j, ++r_out) {  // ... then j
        const int64_t r_in = (h * 2 + j) * half + i;
        std::copy_n(w.begin() + r_in * cols, cols, out.begin() + r_out * cols);
      }
  return out;
}

std::vector<float> floats_at(const std::vector<uint8_t>& b, size_t off, size_t n) {
  std::vector<float> v(n);
  std::memcpy(v.data(), b.data() + off, n * 4);
  return v;
}

const std::map<std::string, std::string> kGgufNames = {
    {"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"}};

std::string gguf_name(const std::string& hf) {
  if (auto it = kGgufNames.find(hf); it != kGgufNames.end()) return it->second;
  static const std::pair<const char*, const char*> per_layer[] = {
      {"input_layernorm.weight", "attn_norm.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},   {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},   {"self_attn.o_proj.weight", "attn_output.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},    {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  const std::string pre = "model.layers.";
  const size_t dot = hf.find('.', pre.size());
  const std::string layer = hf.substr(pre.size(), dot - pre.size()), rest = hf.substr(dot + 1);
  for (const auto& [a, b] : per_layer)
    if (rest == a) return "blk." + layer + "." + b;
  return "?";
}

TEST_F(GgufLlama, F32FileHoldsTheCheckpointAsLlamaCppsConverterWritesIt) {
  gen::Spec s;
  s.dim = 64; s.hidden = 96; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.vocab = 400; s.seq_len = 128;
  const auto tensors = make(s);
  tokenizer();
  const auto r = convert("m.gguf", {"--outtype", "F32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<uint8_t> b = slurp(dir + "/m.gguf");
  const tg3::File f = tg3::parse(b);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  std::map<std::string, const tg3::Tensor*> by_name;
  for (const auto& t : f.tensors) by_name[t.name] = &t;
  size_t end = 0;
  for (const gen::Tensor& src : tensors) {
    const std::string name = gguf_name(src.name);
    ASSERT_TRUE(by_name.count(name)) << src.name << " -> " << name;
    const tg3::Tensor& t = *by_name[name];
    EXPECT_EQ(t.type, 0u) << name;  // F32
    EXPECT_EQ(t.ne, std::vector<int64_t>(src.shape.rbegin(), src.shape.rend())) << name;
    EXPECT_EQ(t.offset % 32, 0u) << name;
    std::vector<float> want = src.values;
    const int64_t rows = src.shape[0], cols = src.values.size() / rows;
    if (name.find("attn_q.") != std::string::npos) want = permute_like_llama_cpp(want, rows, cols, s.heads);
    if (name.find("attn_k.") != std::string::npos) want = permute_like_llama_cpp(want, rows, cols, s.kv_heads);
    EXPECT_EQ(floats_at(b, f.data_start + t.offset, want.size()), want) << name;
    end = std::max(end, size_t(f.data_start + t.offset + want.size() * 4));
  }
  EXPECT_EQ(b.size(), (end + 31) / 32 * 32) << "the last tensor is padded to the alignment too";
  auto u32 = [&](const char* k) { const auto* e = f.find(k); return e ? tg3::item<uint32_t>(*e) : 0xffffffffu; };
  auto str = [&](const char* k) { const auto* e = f.find(k); return e ? e->items.at(0) : std::string("<absent>"); };
  EXPECT_EQ(str("general.architecture"), "llama");
  EXPECT_EQ(str("general.name"), "Ck");  // gguf-py's title of the folder's name (tests/general_metadata_test.cpp)
  EXPECT_EQ(u32("general.file_type"), 0u);
  EXPECT_EQ(u32("general.quantization_version"), 2u);
  EXPECT_EQ(u32("llama.block_count"), 2u);
  EXPECT_EQ(u32("llama.context_length"), 128u);
  EXPECT_EQ(u32("llama.embedding_length"), 64u);
  EXPECT_EQ(u32("llama.feed_forward_length"), 96u);
  EXPECT_EQ(u32("llama.attention.head_count"), 4u);
  EXPECT_EQ(u32("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(u32("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(u32("llama.vocab_size"), 400u);
  EXPECT_EQ(tg3::item<float>(*f.find("llama.rope.freq_base")), 500000.0f);
  EXPECT_EQ(tg3::item<float>(*f.find("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f.find("llama.attention.key_length"), nullptr) << "only when config.json states head_dim";
  EXPECT_EQ(str("tokenizer.ggml.model"), "llama");
  ASSERT_NE(f.find("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->n, 400u);
}

TEST_F(GgufLlama, FileTypesNormsStayF32AndRowsTheBlocksCannotTakeFallBackToF16) {
  gen::Spec s;
  s.dim = 48; s.hidden = 64; s.layers = 1; s.heads = 4; s.kv_heads = 4; s.vocab = 400;  // rows of 48: not % 32
  make(s);
  tokenizer();
  const std::pair<const char*, uint32_t> ftypes[] = {{"Q8_0", 7}, {"q4_0", 2}, {"Q4_1", 3}, {"Q5_0", 8},
                                                     {"Q5_1", 9}, {"F16", 1}, {"bf16", 32}};
  for (const auto& [type, ftype] : ftypes) {
    const auto r = convert("t.gguf", {"--type", type, "--json"});
    ASSERT_EQ(r.exit_code, 0) << type << ": " << r.err;
    const tg3::File f = tg3::parse(slurp(dir + "/t.gguf"));
    EXPECT_EQ(tg3::item<uint32_t>(*f.find("general.file_type")), ftype) << type;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    for (const auto& t : f.tensors) {
      const bool norm = t.ne.size() == 1;
      const bool blocks = std::string(type) != "F16" && std::string(type) != "bf16";
      if (norm) EXPECT_EQ(t.type, 0u) << type << " " << t.name;
      else if (blocks && t.ne[0] % 32) EXPECT_EQ(t.type, 1u) << type << " " << t.name << ": falls back to F16";
      else if (t.ne[0] % 32 == 0 && blocks) EXPECT_NE(t.type, 1u) << type << " " << t.name;
    }
    if (std::string(type) == "Q8_0") {
      bool reported = false;
      for (const auto& w : j["warnings"]) reported |= w.get<std::string>().find("blk.0.attn_q.weight: Q8_0 -> F16") != std::string::npos;
      EXPECT_TRUE(reported) << j["warnings"].dump();
    }
  }
  const auto bad = convert("u.gguf", {"--type", "Q4_K_Z"});
  EXPECT_EQ(bad.exit_code, 1);
  ASSERT_EQ(bad.error_lines().size(), 1u) << bad.err;
  EXPECT_NE(bad.error_lines()[0].find("GGUF has no type 'Q4_K_Z' (use Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q4_K_M, Q4_K_S, Q3_K_L, Q3_K_M, Q3_K_S, Q2_K, "
                                         "Q2_K_S, IQ4_XS, IQ4_NL, IQ3_M, IQ3_S, IQ3_XS, IQ3_XXS, IQ2_M, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S, TQ2_0, TQ1_0, Q2_0, Q1_0, MXFP4_MOE, Q5_1, Q5_0, Q4_1, Q4_0, F16, BF16, F32)"), std::string::npos) << bad.err;
  const auto outtype = convert("o.gguf", {"--outtype", "q8_0"});
  EXPECT_EQ(outtype.exit_code, 0) << outtype.err;
  EXPECT_EQ(slurp(dir + "/o.gguf"), [&] { convert("p.gguf", {"--outtype", "Q8_0"}); return slurp(dir + "/p.gguf"); }());
}

TEST_F(GgufLlama, WhatLlamaCppWouldNotRunTheSameWayIsRefusedByName) {
  gen::Spec s;
  s.vocab = 400;
  make(s);
  tokenizer();
  auto config = nlohmann::json::parse(tsup::slurp_text(dir + "/ck/config.json"));
  const auto with = [&](nlohmann::json patch) {
    nlohmann::json c = config;
    c.merge_patch(patch);
    gen::write_text(dir + "/ck/config.json", c.dump());
    const auto r = convert("x.gguf");
    EXPECT_FALSE(tsup::exists(dir + "/x.gguf"));
    if (r.error_lines().size() != 1) return "(" + r.err + ")";
    std::string line = r.error_lines()[0];
    const std::string shard = dir + "/ck/";  // shards are named by their path
    if (const size_t at = line.find(shard); at != std::string::npos) line.erase(at, shard.size());
    return line;
  };
  EXPECT_EQ(with({{"architectures", {"FalconForCausalLM"}}, {"model_type", "falcon"}}),
            "error: config.json: key 'architectures': 'FalconForCausalLM' is not supported for GGUF export yet "
            "(supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
            "GPT2LMHeadModel, Phi3ForCausalLM, Gemma2ForCausalLM, GemmaForCausalLM, Gemma3ForCausalLM, "
            "Gemma3ForConditionalGeneration, Gemma4ForCausalLM, Gemma4ForConditionalGeneration, SmolLM3ForCausalLM, GraniteForCausalLM, Olmo2ForCausalLM, "
            "Olmo3ForCausalLM, Glm4ForCausalLM, BitnetForCausalLM, BitNetForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, "
            "OlmoeForCausalLM, GptOssForCausalLM)");
  EXPECT_EQ(with({{"rope_scaling", {{"rope_type", "longrope"}}}}),
            "error: config.json: key 'rope_scaling.rope_type': 'longrope' is not a rope scaling llama.cpp's llama "
            "architecture runs (linear, yarn, llama3)");
  EXPECT_EQ(with({{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}}}}),
            "error: config.json: key 'rope_scaling.original_max_position_embeddings': is missing or not a positive number");
  EXPECT_EQ(with({{"max_position_embeddings", nullptr}}),
            "error: config.json: key 'max_position_embeddings': is missing: llama.cpp needs llama.context_length (the "
            "trained context)");
  EXPECT_EQ(with({{"intermediate_size", 100}}),
            "error: model.safetensors: tensor 'model.layers.0.mlp.down_proj.weight': shape [64, 160] contradicts "
            "config.json (intermediate_size gives [64, 100])");
  EXPECT_EQ(with({{"vocab_size", 500}}),
            "error: model.safetensors: tensor 'model.embed_tokens.weight': has 400 rows but config.json's vocab_size is 500");
}

}  // namespace
