// The CLI's GGUF for the families besides Llama, read back with the test's own GGUF reader
// (tests/gguf3_reader.h) and compared with the generator's values, as llama.cpp's converter
// (conversion/qwen.py, gpt2.py, phi.py, gemma.py and gguf-py's tensor_mapping.py) writes them:
// tensor names and dims, no q/k permutation (NEOX RoPE), GPT-2's Conv1D weights transposed,
// Gemma's norms holding 1 + w, Phi-3's fused projections kept, the `<arch>.*` keys; and the
// config options llama.cpp would run differently from Hugging Face refused naming the key.
#include <map>

#include <nlohmann/json.hpp>

#include "core/f16.h"
#include "gguf3_reader.h"
#include "test_support.h"

namespace {

using tsup::slurp;

class GgufFamilies : public tsup::TempDirTest {
 protected:
  std::vector<gen::Tensor> make(gen::Spec s) {
    s.dtype = "f32";
    return gen::write_checkpoint(dir + "/ck", s);
  }
  tsup::RunResult convert(const std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {dir + "/" + out, "--model", dir + "/ck", "--quiet", "--no-vocab"};
    args.insert(args.end(), extra.begin(), extra.end());
    return tsup::run_cli(args, dir);
  }
  // config.json patched, converted: the one error line, the checkpoint's path taken out
  std::string refusal(const nlohmann::json& patch) {
    auto c = nlohmann::json::parse(tsup::slurp_text(dir + "/ck/config.json"));
    const std::string saved = c.dump();
    c.merge_patch(patch);
    gen::write_text(dir + "/ck/config.json", c.dump());
    std::filesystem::remove(dir + "/x.gguf");
    const auto r = convert("x.gguf");
    gen::write_text(dir + "/ck/config.json", saved);
    EXPECT_FALSE(tsup::exists(dir + "/x.gguf"));
    if (r.error_lines().size() != 1) return "(" + r.err + ")";
    return r.error_lines()[0];
  }
  tg3::File file(const std::string& name, std::vector<uint8_t>* bytes) {
    *bytes = slurp(dir + "/" + name);
    return tg3::parse(*bytes);
  }
};

std::vector<float> floats_at(const std::vector<uint8_t>& b, size_t off, size_t n) {
  std::vector<float> v(n);
  std::memcpy(v.data(), b.data() + off, n * 4);
  return v;
}

// The GGUF names of a family's checkpoint tensors (gguf-py's tensor_mapping.py for that arch).
std::string gguf_name(const std::string& arch, const std::string& hf) {
  static const std::map<std::string, std::string> global = {
      {"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},                {"transformer.wte.weight", "token_embd.weight"},
      {"transformer.wpe.weight", "position_embd.weight"}, {"transformer.ln_f.weight", "output_norm.weight"},
      {"transformer.ln_f.bias", "output_norm.bias"}};
  if (auto it = global.find(hf); it != global.end()) return it->second;
  const std::map<std::string, std::string> per_layer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", arch == "gemma2" ? "post_attention_norm.weight" : "ffn_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.weight", "attn_k.weight"}, {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"}, {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.gate_up_proj.weight", "ffn_up.weight"}, {"mlp.down_proj.weight", "ffn_down.weight"},
      {"ln_1.weight", "attn_norm.weight"}, {"ln_1.bias", "attn_norm.bias"},
      {"attn.c_attn.weight", "attn_qkv.weight"}, {"attn.c_attn.bias", "attn_qkv.bias"},
      {"attn.c_proj.weight", "attn_output.weight"}, {"attn.c_proj.bias", "attn_output.bias"},
      {"ln_2.weight", "ffn_norm.weight"}, {"ln_2.bias", "ffn_norm.bias"},
      {"mlp.c_fc.weight", "ffn_up.weight"}, {"mlp.c_fc.bias", "ffn_up.bias"},
      {"mlp.c_proj.weight", "ffn_down.weight"}, {"mlp.c_proj.bias", "ffn_down.bias"}};
  const std::string pre = arch == "gpt2" ? "transformer.h." : "model.layers.";
  const size_t dot = hf.find('.', pre.size());
  const std::string layer = hf.substr(pre.size(), dot - pre.size()), rest = hf.substr(dot + 1);
  auto it = per_layer.find(rest);
  return it == per_layer.end() ? "?" : "blk." + layer + "." + it->second;
}

}  // namespace

TEST_F(GgufFamilies, EachFamilysTensorsAreWrittenAsLlamaCppsConverterWritesThem) {
  for (const char* arch : {"qwen2", "qwen3", "phi3", "gemma2", "gpt2"}) {
    SCOPED_TRACE(arch);
    std::filesystem::remove_all(dir + "/ck");
    gen::Spec s;
    s.arch = arch;
    s.dim = 64; s.hidden = 96; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.vocab = 100; s.seq_len = 32;
    if (s.arch == "qwen3" || s.arch == "gemma2") s.head_dim = 32;
    const auto tensors = make(s);
    const auto r = convert("m.gguf", {"--outtype", "F32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<uint8_t> b;
    const tg3::File f = file("m.gguf", &b);
    std::map<std::string, const tg3::Tensor*> by_name;
    for (const auto& t : f.tensors) by_name[t.name] = &t;
    EXPECT_EQ(f.tensors.size(), tensors.size());
    for (const gen::Tensor& src : tensors) {
      const std::string name = gguf_name(arch, src.name);
      ASSERT_TRUE(by_name.count(name)) << src.name << " -> " << name;
      const tg3::Tensor& t = *by_name[name];
      std::vector<float> want = src.values;
      std::vector<int64_t> shape = src.shape;
      const bool conv1d = s.arch == "gpt2" && src.shape.size() == 2 && name != "token_embd.weight" &&
                          name != "position_embd.weight";
      if (conv1d) {  // GPT2Model.modify_tensors: data_torch.transpose(1, 0)
        const int64_t in = src.shape[0], out = src.shape[1];
        for (int64_t i = 0; i < in; ++i)
          for (int64_t o = 0; o < out; ++o) want[size_t(o * in + i)] = src.values[size_t(i * out + o)];
        shape = {out, in};
      }
      if (s.arch == "gemma2" && src.name.size() > 11 && src.name.compare(src.name.size() - 11, 11, "norm.weight") == 0)
        for (float& x : want) x += 1.0f;  // Gemma2Model.modify_tensors: data_torch + 1
      EXPECT_EQ(t.ne, std::vector<int64_t>(shape.rbegin(), shape.rend())) << name;
      EXPECT_EQ(t.type, 0u) << name;
      EXPECT_EQ(floats_at(b, f.data_start + t.offset, want.size()), want) << name;
    }
    auto u32 = [&](const std::string& k) { const auto* e = f.find(k); return e ? tg3::item<uint32_t>(*e) : 0xffffffffu; };
    auto f32 = [&](const std::string& k) { const auto* e = f.find(k); return e ? tg3::item<float>(*e) : -1.0f; };
    const std::string a = std::string(arch) + ".";
    EXPECT_EQ(f.find("general.architecture")->items.at(0), arch);
    EXPECT_EQ(u32(a + "block_count"), 2u);
    EXPECT_EQ(u32(a + "context_length"), 32u);
    EXPECT_EQ(u32(a + "embedding_length"), 64u);
    EXPECT_EQ(u32(a + "attention.head_count"), 4u);
    if (s.arch == "gpt2") {
      EXPECT_EQ(u32(a + "feed_forward_length"), 256u) << "n_inner null: 4 n_embd, from the tensors";
      EXPECT_EQ(f32(a + "attention.layer_norm_epsilon"), 1e-5f);
      EXPECT_EQ(f.find(a + "attention.head_count_kv"), nullptr);
      continue;
    }
    EXPECT_EQ(u32(a + "feed_forward_length"), 96u);
    EXPECT_EQ(u32(a + "attention.head_count_kv"), 2u);
    EXPECT_EQ(f32(a + "attention.layer_norm_rms_epsilon"), s.arch == "phi3" ? 1e-5f : 1e-6f);
    if (s.arch == "qwen3" || s.arch == "gemma2") {
      EXPECT_EQ(u32(a + "attention.key_length"), 32u);
      EXPECT_EQ(u32(a + "attention.value_length"), 32u);
    } else {
      EXPECT_EQ(f.find(a + "attention.key_length"), nullptr);
    }
    if (s.arch == "phi3") {
      EXPECT_EQ(u32(a + "rope.dimension_count"), 16u);
      EXPECT_EQ(u32(a + "rope.scaling.original_context_length"), 32u);
      EXPECT_EQ(u32(a + "attention.sliding_window"), 31u);
      EXPECT_EQ(f32(a + "rope.freq_base"), 500000.0f);
    }
    if (s.arch == "gemma2") {
      EXPECT_EQ(f32(a + "attn_logit_softcapping"), 50.0f);
      EXPECT_EQ(f32(a + "final_logit_softcapping"), 30.0f);
      EXPECT_EQ(u32(a + "attention.sliding_window"), 4096u);
      EXPECT_EQ(f32(a + "rope.freq_base"), 500000.0f) << "only a theta other than Gemma 2's 10000 is written";
    }
    if (s.arch == "qwen2" || s.arch == "qwen3") EXPECT_EQ(f32(a + "rope.freq_base"), 500000.0f);
  }
}

TEST_F(GgufFamilies, WhatLlamaCppWouldRunDifferentlyIsRefusedNamingTheKey) {
  gen::Spec s;
  s.arch = "qwen2";
  s.vocab = 100;
  make(s);
  EXPECT_EQ(refusal({{"use_sliding_window", true}}),
            "error: config.json: key 'use_sliding_window': is true: llama.cpp's qwen2 architecture runs every layer "
            "with full attention");
  EXPECT_EQ(refusal({{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8}}}}),
            "error: config.json: key 'rope_scaling.rope_type': 'llama3' is not a rope scaling llama.cpp's qwen2 "
            "architecture runs (linear, yarn)");
  std::filesystem::remove_all(dir + "/ck");
  s.head_dim = 32;  // q_proj 128 rows: a Qwen2 llama.cpp would shape as 64
  make(s);
  EXPECT_EQ(refusal({{"head_dim", 32}}),
            "error: config.json: key 'head_dim': 32 x num_attention_heads is not hidden_size: llama.cpp's qwen2 "
            "architecture takes head_dim = hidden_size / num_attention_heads only");
  s.head_dim = 0;

  std::filesystem::remove_all(dir + "/ck");
  s.arch = "qwen3";
  make(s);
  EXPECT_EQ(refusal({{"attention_bias", true}}),
            "error: config.json: key 'attention_bias': is true: llama.cpp's qwen3 architecture takes no biases on the "
            "attention projections");
  EXPECT_EQ(refusal({{"layer_types", {"full_attention", "sliding_attention"}}}),
            "error: config.json: key 'layer_types': has 'sliding_attention': llama.cpp's qwen3 architecture runs every "
            "layer with full attention");

  std::filesystem::remove_all(dir + "/ck");
  s.arch = "phi3";
  make(s);
  EXPECT_EQ(refusal({{"rope_scaling", {{"type", "longrope"}, {"long_factor", {1}}, {"short_factor", {1}}}}}),
            "error: config.json: key 'rope_scaling.long_factor': must list rope dimensions / 2 = 8 numbers");
  const nlohmann::json eight = {1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(refusal({{"rope_scaling", {{"type", "su"}, {"long_factor", eight}, {"short_factor", {1, 1, 1, 1, 1, 1, 1, -1}}}}}),
            "error: config.json: key 'rope_scaling.short_factor': -1 is not a positive number");
  EXPECT_EQ(refusal({{"rope_scaling", {{"type", "dynamic"}, {"factor", 2}}}}),
            "error: config.json: key 'rope_scaling.rope_type': 'dynamic': llama.cpp's phi3 runs longrope scaling only "
            "(its long and short factors)");
  EXPECT_EQ(refusal({{"original_max_position_embeddings", nullptr}}),
            "error: config.json: key 'original_max_position_embeddings': is missing: llama.cpp's phi3 needs "
            "phi3.rope.scaling.original_context_length");
  EXPECT_EQ(refusal({{"partial_rotary_factor", 0.35}}),  // int(0.35 * 64) // 4 = 22 // 4
            "error: config.json: key 'partial_rotary_factor': gives 5 rotary dimensions of a head of 16: must be even "
            "and in 2..head_dim");

  std::filesystem::remove_all(dir + "/ck");
  s.arch = "gemma2";
  make(s);
  EXPECT_EQ(refusal({{"query_pre_attn_scalar", 256}}),
            "error: config.json: key 'query_pre_attn_scalar': 256: llama.cpp's gemma2 scales queries by 1/sqrt(16) for "
            "this model (head_dim)");
  EXPECT_EQ(refusal({{"attn_logit_softcapping", nullptr}}),
            "error: config.json: key 'attn_logit_softcapping': is missing or not a positive number: llama.cpp's gemma2 "
            "always applies it");
  EXPECT_EQ(refusal({{"tie_word_embeddings", false}}),
            "error: config.json: key 'tie_word_embeddings': is false: llama.cpp's gemma2 always uses the embeddings as "
            "the classifier");
  EXPECT_EQ(refusal({{"hidden_activation", "gelu"}}),
            "error: config.json: key 'hidden_activation': \"gelu\": llama.cpp's gemma2 runs GELU's tanh approximation "
            "(gelu_pytorch_tanh)");
  EXPECT_EQ(refusal({{"layer_types", {"full_attention", "sliding_attention"}}}),
            "error: config.json: key 'layer_types': layer 0 is \"full_attention\": llama.cpp's gemma2 runs even layers "
            "with the sliding window and odd ones in full");

  std::filesystem::remove_all(dir + "/ck");
  s.arch = "gpt2";
  make(s);
  EXPECT_EQ(refusal({{"activation_function", "relu"}}),
            "error: config.json: key 'activation_function': 'relu': llama.cpp's gpt2 runs GELU's tanh approximation "
            "(gelu_new)");
  EXPECT_EQ(refusal({{"scale_attn_by_inverse_layer_idx", true}}),
            "error: config.json: key 'scale_attn_by_inverse_layer_idx': is true: llama.cpp's gpt2 does not scale by "
            "the layer");
  EXPECT_EQ(refusal({{"n_ctx", 64}}),
            "error: config.json: key 'n_ctx': 64 differs from n_positions 128: llama.cpp's gpt2 takes one context "
            "length, the rows of the position embeddings");
}

TEST_F(GgufFamilies, Phi3sSlidingWindowIsKeptAndWarnedAbout) {
  // llama.cpp runs Phi-3 with full attention (it disables the window its converter writes):
  // the file is written as that converter writes it, and the CLI says what differs.
  gen::Spec s;
  s.arch = "phi3";
  s.vocab = 100;
  s.seq_len = 64;
  make(s);
  const auto r = convert("p.gguf", {"--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  bool warned = false;
  for (const auto& w : j["warnings"]) warned |= w.get<std::string>().find("sliding_window 63") != std::string::npos;
  EXPECT_TRUE(warned) << j["warnings"].dump();
}

TEST_F(GgufFamilies, LeapRefusesTheFamiliesNamingWhatItsEngineLacks) {
  gen::Spec s;
  s.arch = "qwen3";
  s.vocab = 100;
  s.head_dim = 32;
  make(s);
  const auto r = tsup::run_cli({dir + "/o.bin", "--meta-llama", dir + "/ck", "--quiet"}, dir);
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_EQ(r.error_lines().size(), 1u) << r.err;
  EXPECT_EQ(r.error_lines()[0],
            "error: config.json: architecture 'Qwen3ForCausalLM' is not supported for LEAP export (Llama-family only: "
            "LlamaForCausalLM, MistralForCausalLM): LEAP's engine has no per-head q/k norms (Qwen3 has them) and no "
            "head_dim of its own");
}

TEST_F(GgufFamilies, VerifyRunsEachFamilysForwardPassOnGgufAndGgufLite) {
  for (const char* arch : {"qwen2", "qwen3", "phi3", "gemma2", "gpt2"}) {
    SCOPED_TRACE(arch);
    std::filesystem::remove_all(dir + "/ck");
    gen::Spec s;
    s.arch = arch;
    s.dim = 64; s.hidden = 96; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.vocab = 100; s.seq_len = 32;
    if (s.arch == "qwen3" || s.arch == "gemma2") s.head_dim = 32;
    s.dtype = "bf16";
    gen::write_checkpoint(dir + "/ck", s);
    for (const std::vector<std::string>& out : std::vector<std::vector<std::string>>{
             {dir + "/v.gguf", "--outtype", "Q8_0", "--no-vocab"}, {dir + "/v.gguf-lite", "--scheme", "q8"}}) {
      std::vector<std::string> args = out;
      args.insert(args.end(), {"--model", dir + "/ck", "--quiet"});
      const auto c = tsup::run_cli(args, dir);
      ASSERT_EQ(c.exit_code, 0) << c.err;
      const auto v = tsup::run_cli({"--verify", out[0], "--model", dir + "/ck", "--json"}, dir);
      EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
      const auto j = nlohmann::json::parse(v.out);
      const auto& f = j["forward"];
      EXPECT_TRUE(f["ran"].get<bool>()) << f.dump();
      EXPECT_EQ(f["architecture"], arch);
      ASSERT_EQ(f["layers"].size(), 3u) << f.dump();
      for (const auto& l : f["layers"]) {
        EXPECT_LE(l["max_abs_file_vs_reference"].get<double>(), 1e-5) << out[0] << " " << l.dump();
        EXPECT_GT(l["max_abs_quantized_vs_source"].get<double>(), 0.0) << out[0] << " " << l.dump();
      }
    }
  }
}

TEST_F(GgufFamilies, Gpt2sHeadlessLayoutConvertsAsLlamaCppsConverterTakesIt) {
  // openai-community/gpt2's own model.safetensors: GPT2Model's names (no "transformer."), no
  // lm_head (tied), and the causal-mask buffers h.N.attn.bias / masked_bias, which llama.cpp's
  // converter drops (GPT2Model.modify_tensors) and tensor_mapping.py's "wte", "h.{bid}.ln_1", ...
  // name as the prefixed ones. The same weights in both layouts give the same GGUF bytes.
  gen::Spec s;
  s.arch = "gpt2";
  s.dim = 64; s.layers = 2; s.heads = 4; s.vocab = 100; s.seq_len = 32;
  s.dtype = "bf16";
  const auto prefixed = gen::write_checkpoint(dir + "/prefixed/gpt", s);
  s.headless = true;
  const auto headless = gen::write_checkpoint(dir + "/headless/gpt", s);
  ASSERT_EQ(headless.size(), prefixed.size() + 2 * 2);
  EXPECT_EQ(headless[0].name, "wte.weight");
  EXPECT_EQ(headless[4].name, "h.0.attn.bias");
  EXPECT_EQ(headless[5].name, "h.0.attn.masked_bias");
  auto out = [&](const std::string& layout, const std::string& file, std::vector<std::string> args) {
    std::vector<std::string> a = {dir + "/" + layout + "/" + file, "--model", dir + "/" + layout + "/gpt", "--quiet"};
    a.insert(a.end(), args.begin(), args.end());
    const auto r = tsup::run_cli(a, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return dir + "/" + layout + "/" + file;
  };
  for (const char* type : {"F32", "Q8_0"}) {
    SCOPED_TRACE(type);
    const std::string a = out("prefixed", "m.gguf", {"--type", type, "--no-vocab"});
    const std::string b = out("headless", "m.gguf", {"--type", type, "--no-vocab"});
    EXPECT_EQ(slurp(a), slurp(b)) << "the same tensors, names, keys and general.name";
  }
  // GGUF-lite keeps every source tensor under its own name; verify runs GPT-2's forward pass on both.
  for (const std::string layout : {"prefixed", "headless"})
    for (const std::string file : {"m.gguf", "m.gguf-lite"}) {
      SCOPED_TRACE(layout + "/" + file);
      if (file == "m.gguf-lite") out(layout, file, {"--scheme", "q8"});
      const auto v = tsup::run_cli({"--verify", dir + "/" + layout + "/" + file, "--model", dir + "/" + layout + "/gpt",
                                    "--json"}, dir);
      EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
      const auto j = nlohmann::json::parse(v.out);
      EXPECT_TRUE(j["forward"]["ran"].get<bool>()) << j["forward"].dump();
      EXPECT_EQ(j["forward"]["layers"].size(), 3u);
      EXPECT_EQ(j["tensors"].size(), (file == "m.gguf" ? prefixed.size() : layout == "prefixed" ? prefixed.size()
                                                                                                 : headless.size()));
    }

  // A checkpoint naming one role both ways is refused (llama.cpp's writer: a duplicated tensor name).
  std::vector<gen::RawTensor> raw;
  for (const char* n : {"wte.weight", "transformer.wte.weight"})
    raw.push_back({n, "F32", {100, 64}, std::vector<uint8_t>(100 * 64 * 4)});
  std::filesystem::create_directories(dir + "/both");
  gen::write_safetensors(dir + "/both/model.safetensors", raw);
  std::filesystem::copy(dir + "/headless/gpt/config.json", dir + "/both/config.json");
  const auto r = tsup::run_cli({dir + "/x.gguf", "--model", dir + "/both", "--quiet", "--no-vocab"}, dir);
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_EQ(r.error_lines().size(), 1u) << r.err;
  EXPECT_NE(r.error_lines()[0].find("is a second source of token_embd.weight"), std::string::npos) << r.error_lines()[0];
  // What is missing is named as the checkpoint names the rest.
  std::filesystem::remove(dir + "/headless/gpt/model.safetensors");
  std::vector<gen::RawTensor> part;
  for (const gen::Tensor& t : headless)
    if (t.name != "h.1.mlp.c_fc.bias") {
      gen::RawTensor rt{t.name, "F32", t.shape, std::vector<uint8_t>(t.values.size() * 4)};
      std::memcpy(rt.bytes.data(), t.values.data(), rt.bytes.size());
      part.push_back(std::move(rt));
    }
  gen::write_safetensors(dir + "/headless/gpt/model.safetensors", part);
  const auto m = tsup::run_cli({dir + "/y.gguf", "--model", dir + "/headless/gpt", "--quiet", "--no-vocab"}, dir);
  ASSERT_EQ(m.error_lines().size(), 1u) << m.err;
  EXPECT_NE(m.error_lines()[0].find("tensor 'h.1.mlp.c_fc.bias': missing from the checkpoint"), std::string::npos)
      << m.error_lines()[0];
}

// Gemma 3 4B / 12B as published: their text_config states only what differs from
// Gemma3TextConfig (no heads, head_dim or query scalar), and llama.cpp's converter reads it
// through transformers, which fills the class's defaults in. The file equals the one from the
// same checkpoint with every key stated. A wrapper no family takes (PaliGemma: a Gemma language
// model under text_config) stays refused by its architectures, not taken for its text_config's.
TEST_F(GgufFamilies, Gemma3sMultimodalConfigTakesTheTextConfigClassDefaults) {
  gen::Spec s;
  s.arch = "gemma3";
  s.vision = true;
  s.dim = 64; s.hidden = 96; s.layers = 6; s.heads = 8; s.kv_heads = 4; s.head_dim = 256; s.vocab = 128;
  s.tied = true;  // as the published ones (no lm_head.weight)
  make(s);
  auto c = nlohmann::json::parse(tsup::slurp_text(dir + "/ck/config.json"));
  ASSERT_TRUE(c.contains("text_config"));
  c["text_config"]["rope_theta"] = 1e6;  // the class's (the generator's differ)
  c["text_config"]["max_position_embeddings"] = 131072;
  gen::write_text(dir + "/ck/config.json", c.dump());
  auto r = convert("full.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json full = c["text_config"];
  // the keys google/gemma-3-4b-it's text_config has (and vocab_size: the defaults' 262208 rows
  // would not match this small embedding)
  nlohmann::json minimal = nlohmann::json::object();
  for (const char* k : {"hidden_size", "intermediate_size", "model_type", "num_hidden_layers", "rope_scaling",
                        "sliding_window", "vocab_size"})
    if (full.contains(k)) minimal[k] = full[k];
  c["text_config"] = minimal;
  gen::write_text(dir + "/ck/config.json", c.dump());
  r = convert("minimal.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(slurp(dir + "/full.gguf"), slurp(dir + "/minimal.gguf"));
  // a default that differs from the checkpoint's shapes is caught by them
  minimal.erase("vocab_size");
  c["text_config"] = minimal;
  gen::write_text(dir + "/ck/config.json", c.dump());
  r = convert("novocab.gguf");
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
  EXPECT_NE(r.error_lines()[0].find("262208"), std::string::npos) << r.error_lines()[0];
  // PaliGemma's layout of names: refused by its own architectures
  c["architectures"] = {"PaliGemmaForConditionalGeneration"};
  c["model_type"] = "paligemma";
  minimal["model_type"] = "gemma";
  c["text_config"] = minimal;
  gen::write_text(dir + "/ck/config.json", c.dump());
  r = convert("pali.gguf");
  ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
  EXPECT_NE(r.error_lines()[0].find("'PaliGemmaForConditionalGeneration' is not supported"), std::string::npos)
      << r.error_lines()[0];
  EXPECT_FALSE(tsup::exists(dir + "/pali.gguf"));
  // a text_config that holds a text_config of its own is read as any other key (no crash)
  c["architectures"] = {"Gemma3ForConditionalGeneration"};
  c["model_type"] = "gemma3";
  c["text_config"] = full;
  c["text_config"]["text_config"] = {{"hidden_size", 7}};
  gen::write_text(dir + "/ck/config.json", c.dump());
  r = convert("self.gguf");
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

// Gemma 4 as Gemma4Model writes it (conversion/gemma.py): rope_freqs first (1 for the rotated
// pairs of a full layer's head, 1e30 for the rest), the norms as they are (no + 1), per-layer
// arrays (the sliding pattern as BOOL, MLP widths and kv heads as INT32), the shared layers
// without k / v, layer_scalar as blk.N.layer_output_scale.weight; what llama.cpp would run
// differently refused naming the key.
TEST_F(GgufFamilies, Gemma4sLayersKeysAndTensorsAreWrittenAsItsConverterWritesThem) {
  gen::Spec s;
  s.arch = "gemma4";
  s.dim = 64; s.hidden = 96; s.layers = 6; s.heads = 4; s.kv_heads = 2; s.head_dim = 16; s.vocab = 100; s.seq_len = 32;
  const auto tensors = make(s);
  auto r = convert("e2b.gguf", {"--outtype", "F32"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::vector<uint8_t> b;
  tg3::File f = file("e2b.gguf", &b);
  ASSERT_FALSE(f.tensors.empty());
  EXPECT_EQ(f.tensors[0].name, "rope_freqs.weight");
  EXPECT_EQ(f.tensors[0].ne, std::vector<int64_t>{16});  // global_head_dim 32 / 2
  std::vector<float> want_freqs(16, 1e30f);
  std::fill(want_freqs.begin(), want_freqs.begin() + 4, 1.0f);  // int(32 x 0.25 / 2)
  EXPECT_EQ(floats_at(b, f.data_start + f.tensors[0].offset, 16), want_freqs);
  std::map<std::string, const tg3::Tensor*> by_name;
  for (const auto& t : f.tensors) by_name[t.name] = &t;
  EXPECT_EQ(f.tensors.size(), tensors.size() + 1);
  for (const char* n : {"blk.4.attn_k.weight", "blk.4.attn_v.weight", "blk.5.attn_k_norm.weight"})
    EXPECT_FALSE(by_name.count(n)) << n;
  for (const gen::Tensor& src : tensors) {  // every value as the checkpoint has it
    std::string name = src.name;
    for (const auto& [hf, gg] : std::vector<std::pair<std::string, std::string>>{
             {"model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight"},
             {"model.per_layer_model_projection.weight", "per_layer_model_proj.weight"},
             {"model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight"}})
      if (name == hf) name = gg;
    if (name.compare(0, 13, "model.layers.") == 0) {
      const size_t dot = name.find('.', 13);
      const std::string l = name.substr(13, dot - 13), rest = name.substr(dot + 1);
      const std::map<std::string, std::string> per_layer = {
          {"per_layer_input_gate.weight", "inp_gate.weight"}, {"per_layer_projection.weight", "proj.weight"},
          {"post_per_layer_input_norm.weight", "post_norm.weight"}, {"layer_scalar", "layer_output_scale.weight"},
          {"post_attention_layernorm.weight", "post_attention_norm.weight"}};
      name = per_layer.count(rest) ? "blk." + l + "." + per_layer.at(rest) : gguf_name("gemma3", name);
    } else {
      name = name.find("per_layer") != std::string::npos ? name : gguf_name("gemma3", name);
    }
    ASSERT_TRUE(by_name.count(name)) << src.name << " -> " << name;
    const tg3::Tensor& t = *by_name[name];
    EXPECT_EQ(t.ne, std::vector<int64_t>(src.shape.rbegin(), src.shape.rend())) << name;
    EXPECT_EQ(floats_at(b, f.data_start + t.offset, src.values.size()), src.values) << name;
  }
  auto u32 = [&](const std::string& k) { const auto* e = f.find(k); return e ? tg3::item<uint32_t>(*e) : 0xffffffffu; };
  auto i32s = [&](const std::string& k) {
    std::vector<int32_t> v;
    if (const auto* e = f.find(k); e && e->elem == 5)
      for (size_t i = 0; i < e->items.size(); ++i) v.push_back(tg3::item<int32_t>(*e, i));
    return v;
  };
  EXPECT_EQ(u32("gemma4.attention.key_length"), 32u);
  EXPECT_EQ(u32("gemma4.attention.key_length_swa"), 16u);
  EXPECT_EQ(u32("gemma4.rope.dimension_count"), 32u);
  EXPECT_EQ(u32("gemma4.rope.dimension_count_swa"), 16u);
  EXPECT_EQ(u32("gemma4.attention.shared_kv_layers"), 2u);
  EXPECT_EQ(u32("gemma4.embedding_length_per_layer_input"), 8u);
  EXPECT_EQ(u32("gemma4.attention.sliding_window"), 512u);
  EXPECT_EQ(i32s("gemma4.feed_forward_length"), (std::vector<int32_t>{96, 96, 96, 96, 192, 192}));
  const auto* pattern = f.find("gemma4.attention.sliding_window_pattern");
  ASSERT_NE(pattern, nullptr);
  EXPECT_EQ(pattern->elem, 7u);  // BOOL
  std::string flags;
  for (const std::string& it : pattern->items) flags += it[0] ? 'S' : 'F';
  EXPECT_EQ(flags, "SFSFSF");
  EXPECT_EQ(f.find("gemma4.attention.head_count_kv")->elem, 4u) << "one number without num_global_key_value_heads";

  // 31B's layout: the full layers' keys are their values (no attn_v), one kv head there
  std::filesystem::remove_all(dir + "/ck");
  s.config_patch = R"({"attention_k_eq_v": true, "num_global_key_value_heads": 1, "hidden_size_per_layer_input": 0,
                       "num_kv_shared_layers": 0, "use_double_wide_mlp": false})";
  make(s);
  r = convert("31b.gguf", {"--outtype", "F32"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  f = file("31b.gguf", &b);
  by_name.clear();
  for (const auto& t : f.tensors) by_name[t.name] = &t;
  EXPECT_TRUE(by_name.count("blk.0.attn_v.weight"));
  EXPECT_FALSE(by_name.count("blk.1.attn_v.weight"));
  EXPECT_FALSE(by_name.count("per_layer_token_embd.weight"));
  EXPECT_FALSE(by_name.count("blk.0.post_norm.weight"));
  EXPECT_EQ(by_name["blk.1.attn_k.weight"]->ne, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(i32s("gemma4.attention.head_count_kv"), (std::vector<int32_t>{2, 1, 2, 1, 2, 1}));
  EXPECT_EQ(u32("gemma4.embedding_length_per_layer_input"), 0u);

  // what llama.cpp would run differently from Hugging Face
  std::filesystem::remove_all(dir + "/ck");
  s.config_patch = R"({"layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                                       "sliding_attention", "full_attention"]})";
  make(s);
  EXPECT_EQ(refusal(nlohmann::json::object()),
            "error: config.json: key 'num_kv_shared_layers': 2 with these layer_types: llama.cpp's gemma4 takes a "
            "shared sliding layer's keys and values from layer 2 and a shared full layer's from layer 3, which are not "
            "the last unshared layers of those types here");
  std::filesystem::remove_all(dir + "/ck");
  s.config_patch = "";
  make(s);
  EXPECT_EQ(refusal({{"final_logit_softcapping", nullptr}}),
            "error: config.json: key 'final_logit_softcapping': is not set: Hugging Face caps no logits, llama.cpp's "
            "gemma4 caps them at 30 without the key");
  EXPECT_EQ(refusal({{"num_global_key_value_heads", 1}}),
            "error: config.json: key 'num_global_key_value_heads': 1 without attention_k_eq_v: Hugging Face gives the "
            "full layers 2 kv heads (num_key_value_heads), llama.cpp's converter writes 1");
  EXPECT_EQ(refusal({{"rope_parameters", {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}},
                                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}}}}),
            "error: config.json: key 'rope_parameters.full_attention.rope_type': 'default': llama.cpp's converter "
            "writes Gemma 4's full layers with proportional RoPE only");
  EXPECT_EQ(refusal({{"use_bidirectional_attention", "all"}}),
            "error: config.json: key 'use_bidirectional_attention': is \"all\": llama.cpp runs Gemma 4's text model "
            "causally");
}

// Gemma 4's mixture (26B-A4B) as Gemma4Model writes it: beside every layer's dense MLP, the
// router (router.proj -> ffn_gate_inp, router.scale -> ffn_gate_inp.scale), the experts as they
// ship (3-D, gate and up kept fused: ffn_gate_up_exps; down: ffn_down_exps), per_expert_scale as
// ffn_down_exps.scale, the three norms of its own; expert_count, expert_used_count (top_k_experts)
// and expert_feed_forward_length in TextModel's slots. A config whose flag and count disagree is
// refused naming the key.
TEST_F(GgufFamilies, Gemma4sMixtureIsWrittenAsItsConverterWritesIt) {
  gen::Spec s;
  s.arch = "gemma4";
  s.dim = 64; s.hidden = 96; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.head_dim = 16; s.vocab = 100; s.seq_len = 32;
  s.config_patch = R"({"attention_k_eq_v": true, "num_global_key_value_heads": 1, "hidden_size_per_layer_input": 0,
                       "num_kv_shared_layers": 0, "use_double_wide_mlp": false, "enable_moe_block": true,
                       "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32})";
  const auto tensors = make(s);
  auto r = convert("moe.gguf", {"--outtype", "F32"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::vector<uint8_t> b;
  tg3::File f = file("moe.gguf", &b);
  std::map<std::string, const tg3::Tensor*> by_name;
  for (const auto& t : f.tensors) by_name[t.name] = &t;
  EXPECT_EQ(f.tensors.size(), tensors.size() + 1);  // (and rope_freqs)
  const std::map<std::string, std::string> moe = {
      {"router.proj.weight", "ffn_gate_inp.weight"}, {"router.scale", "ffn_gate_inp.scale"},
      {"router.per_expert_scale", "ffn_down_exps.scale"}, {"experts.gate_up_proj", "ffn_gate_up_exps.weight"},
      {"experts.down_proj", "ffn_down_exps.weight"}, {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight"},
      {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight"},
      {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight"}};
  int mixture_tensors = 0;
  for (const gen::Tensor& src : tensors) {
    const size_t dot = src.name.find('.', 13);
    if (src.name.compare(0, 13, "model.layers.") || !moe.count(src.name.substr(dot + 1))) continue;
    const std::string name = "blk." + src.name.substr(13, dot - 13) + "." + moe.at(src.name.substr(dot + 1));
    ASSERT_TRUE(by_name.count(name)) << src.name << " -> " << name;
    const tg3::Tensor& t = *by_name[name];
    EXPECT_EQ(t.type, 0u) << name;  // F32
    EXPECT_EQ(t.ne, std::vector<int64_t>(src.shape.rbegin(), src.shape.rend())) << name;
    EXPECT_EQ(floats_at(b, f.data_start + t.offset, src.values.size()), src.values) << name;
    ++mixture_tensors;
  }
  EXPECT_EQ(mixture_tensors, 2 * 8);
  EXPECT_EQ(by_name["blk.1.ffn_gate_up_exps.weight"]->ne, (std::vector<int64_t>{64, 64, 4}));
  EXPECT_TRUE(by_name.count("blk.1.ffn_gate.weight")) << "the dense MLP beside the experts";
  auto u32 = [&](const std::string& k) { const auto* e = f.find(k); return e ? tg3::item<uint32_t>(*e) : 0xffffffffu; };
  EXPECT_EQ(u32("gemma4.expert_count"), 4u);
  EXPECT_EQ(u32("gemma4.expert_used_count"), 2u);
  EXPECT_EQ(u32("gemma4.expert_feed_forward_length"), 32u);
  std::vector<std::string> keys;
  for (const auto& kv : f.kv) keys.push_back(kv.key);
  auto at = [&](const char* k) { return std::find(keys.begin(), keys.end(), k) - keys.begin(); };
  EXPECT_EQ(at("gemma4.expert_count"), at("gemma4.attention.layer_norm_rms_epsilon") + 1);
  EXPECT_EQ(at("gemma4.expert_used_count"), at("gemma4.expert_count") + 1);
  EXPECT_EQ(at("gemma4.attention.key_length"), at("gemma4.expert_used_count") + 1);

  EXPECT_EQ(refusal({{"enable_moe_block", false}}),
            "error: config.json: key 'enable_moe_block': is false beside num_experts 4: Hugging Face builds no "
            "experts, llama.cpp's converter would write an expert count");
  EXPECT_EQ(refusal({{"num_experts", nullptr}}),
            "error: config.json: key 'num_experts': is missing: enable_moe_block is true");
  EXPECT_EQ(refusal({{"top_k_experts", nullptr}}),
            "error: config.json: key 'num_experts_per_tok': is missing: llama.cpp needs the experts used per token");
  EXPECT_EQ(refusal({{"num_experts", 8}}),
            "error: " + dir + "/ck/model.safetensors: tensor 'model.layers.0.experts.down_proj': shape [4, 64, 32] contradicts "
            "config.json (num_experts x hidden_size x moe_intermediate_size gives [8, 64, 32])");
}

// Gemma4ForConditionalGeneration: the language model under model.language_model., the vision
// and audio towers left out (said), and a text_config holding only what differs from
// Gemma4TextConfig's defaults (as transformers saves it) converts to the same bytes as one stating
// every key, its layer_types derived as the class does (every sixth layer full, the last full).
TEST_F(GgufFamilies, Gemma4sMultimodalCheckpointIsItsLanguageModelWithTheClassDefaults) {
  gen::Spec s;
  s.arch = "gemma4";
  s.vision = true;
  s.tied = true;
  s.dim = 64; s.hidden = 96; s.layers = 7; s.heads = 8; s.kv_heads = 4; s.head_dim = 256; s.vocab = 100; s.seq_len = 32;
  s.config_patch = R"({"global_head_dim": 512, "num_kv_shared_layers": 0, "use_double_wide_mlp": false,
                       "hidden_size_per_layer_input": 256, "layer_types": ["sliding_attention", "sliding_attention",
                       "sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "full_attention"],
                       "max_position_embeddings": 131072, "sliding_window": 512, "final_logit_softcapping": 30.0})";
  make(s);
  auto r = convert("full.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("5 tensors of Gemma4ForConditionalGeneration are not the language model's"), std::string::npos)
      << r.err;
  auto c = nlohmann::json::parse(tsup::slurp_text(dir + "/ck/config.json"));
  nlohmann::json minimal = nlohmann::json::object();
  for (const char* k : {"hidden_size", "intermediate_size", "model_type", "num_hidden_layers", "vocab_size",
                        "vocab_size_per_layer_input", "final_logit_softcapping", "use_double_wide_mlp"})
    minimal[k] = c["text_config"][k];
  c["text_config"] = minimal;
  gen::write_text(dir + "/ck/config.json", c.dump());
  r = convert("minimal.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(slurp(dir + "/full.gguf"), slurp(dir + "/minimal.gguf"));
}

namespace {
// A mixture's per-layer tensors in the order llama.cpp's converter writes them: the checkpoint's
// names sorted (safetensors lists them so), a layer's experts held until the last of them
// arrives, then stacked role by role in the module's order (Mixtral's w1, w2, w3: LlamaModel;
// down, gate, up: Qwen2MoeModel and its copies), the rest mapped as they come.
std::vector<std::string> converter_layer_order(const std::string& arch) {
  if (arch == "mixtral")  // block_sparse_moe.experts.* < block_sparse_moe.gate < input_layernorm < ...
    return {"ffn_gate_exps", "ffn_down_exps", "ffn_up_exps", "ffn_gate_inp", "attn_norm", "ffn_norm",
            "attn_k", "attn_output", "attn_q", "attn_v"};
  std::vector<std::string> o = {"attn_norm", "ffn_down_exps", "ffn_gate_exps", "ffn_up_exps", "ffn_gate_inp"};
  if (arch == "qwen2moe") {  // mlp.shared_expert.* then mlp.shared_expert_gate ('.' < '_'); biases before weights
    for (const char* t : {"ffn_down_shexp", "ffn_gate_shexp", "ffn_up_shexp", "ffn_gate_inp_shexp", "ffn_norm",
                          "attn_k.bias", "attn_k", "attn_output", "attn_q.bias", "attn_q", "attn_v.bias", "attn_v"})
      o.push_back(t);
  } else {
    for (const char* t : {"ffn_norm", "attn_k_norm", "attn_k", "attn_output", "attn_q_norm", "attn_q", "attn_v"})
      o.push_back(t);
  }
  return o;
}
}  // namespace

TEST_F(GgufFamilies, MixturesOfExpertsAreStackedAsTheConverterStacksThem) {
  // Each expert is its own tensor in Hugging Face; GGUF holds [experts, rows, cols] per layer
  // (ne {cols, rows, experts}), expert 0 first, written where the converter writes it: when the
  // last expert of the layer arrives. 11 layers: names sort 0, 1, 10, 2, ... as the converter reads them.
  for (const char* arch : {"mixtral", "qwen2moe", "qwen3moe", "olmoe"}) {
    SCOPED_TRACE(arch);
    std::filesystem::remove_all(dir + "/ck");
    gen::Spec s;
    s.arch = arch;
    s.dim = 32; s.hidden = 48; s.layers = 11; s.heads = 4; s.kv_heads = s.arch == "olmoe" ? 4 : 2; s.vocab = 64;
    s.seq_len = 32; s.experts = 4; s.experts_used = 2; s.expert_hidden = 16; s.shared_hidden = 24;
    const auto tensors = make(s);
    std::map<std::string, const gen::Tensor*> src;
    for (const gen::Tensor& t : tensors) src[t.name] = &t;
    const auto r = convert("m.gguf", {"--outtype", "F32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<uint8_t> b;
    const tg3::File f = file("m.gguf", &b);
    // order: global tensors, then layers in string order, each in the converter's order
    std::vector<std::string> want_order = {"token_embd.weight"};
    for (const char* l : {"0", "1", "10", "2", "3", "4", "5", "6", "7", "8", "9"})
      for (const std::string& t : converter_layer_order(arch))
        want_order.push_back("blk." + std::string(l) + "." + t + (t.find(".bias") == std::string::npos ? ".weight" : ""));
    want_order.push_back("output_norm.weight");
    want_order.push_back("output.weight");
    if (s.arch == "mixtral")  // model.embed_tokens < model.layers < model.norm; lm_head first of all
      std::rotate(want_order.rbegin(), want_order.rbegin() + 1, want_order.rend());
    std::vector<std::string> got_order;
    for (const auto& t : f.tensors) got_order.push_back(t.name);
    if (s.arch != "mixtral") {  // lm_head sorts first for every family: the generator's single shard
      std::rotate(want_order.rbegin(), want_order.rbegin() + 1, want_order.rend());
    }
    EXPECT_EQ(got_order, want_order);
    // the stacked values: expert e's rows at [e]
    const bool mixtral = s.arch == "mixtral";
    const std::string m = mixtral ? ".block_sparse_moe." : ".mlp.";
    for (const auto& t : f.tensors) {
      const std::string n = t.name;
      for (const auto& [role, hf] : std::vector<std::pair<std::string, std::string>>{
               {"ffn_gate_exps", mixtral ? "w1" : "gate_proj"}, {"ffn_down_exps", mixtral ? "w2" : "down_proj"},
               {"ffn_up_exps", mixtral ? "w3" : "up_proj"}}) {
        if (n.find("." + role + ".") == std::string::npos) continue;
        const std::string layer = n.substr(4, n.find('.', 4) - 4);
        std::vector<float> want;
        for (int e = 0; e < 4; ++e) {
          const gen::Tensor& x = *src.at("model.layers." + layer + m + "experts." + std::to_string(e) + "." + hf + ".weight");
          want.insert(want.end(), x.values.begin(), x.values.end());
        }
        const bool down = role == "ffn_down_exps";
        EXPECT_EQ(t.ne, (std::vector<int64_t>{down ? 16 : 32, down ? 32 : 16, 4})) << n;
        EXPECT_EQ(floats_at(b, f.data_start + t.offset, want.size()), want) << n;
      }
      if (n.find(".ffn_gate_inp.") != std::string::npos) EXPECT_EQ(t.ne, (std::vector<int64_t>{32, 4})) << n;
      if (n.find(".ffn_gate_inp_shexp.") != std::string::npos) EXPECT_EQ(t.ne, (std::vector<int64_t>{32, 1})) << n;
    }
    auto u32 = [&](const std::string& k) { const auto* e = f.find(k); return e ? tg3::item<uint32_t>(*e) : 0xffffffffu; };
    const std::string a = (mixtral ? std::string("llama") : std::string(arch)) + ".";
    EXPECT_EQ(f.find("general.architecture")->items.at(0), a.substr(0, a.size() - 1));
    EXPECT_EQ(u32(a + "expert_count"), 4u);
    EXPECT_EQ(u32(a + "expert_used_count"), 2u);
    const bool qwen = s.arch == "qwen2moe" || s.arch == "qwen3moe";
    EXPECT_EQ(u32(a + "expert_feed_forward_length"), qwen ? 16u : 0xffffffffu);
    EXPECT_EQ(u32(a + "expert_shared_feed_forward_length"), s.arch == "qwen2moe" ? 24u : 0xffffffffu);
    EXPECT_EQ(u32(a + "feed_forward_length"), qwen ? 48u : 16u) << "intermediate_size, as the config has it";
    // gguf-py's size_label for a mixture: experts x (shared + one expert's parameters)
    EXPECT_EQ(f.find("general.size_label")->items.at(0).substr(0, 2), "4x");
  }
}

TEST_F(GgufFamilies, MixturesOfExpertsThatContradictTheirTensorsOrLlamaCppAreRefused) {
  gen::Spec s;
  s.arch = "mixtral";
  s.dim = 32; s.hidden = 16; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.vocab = 64; s.experts = 4;
  const auto tensors = make(s);
  auto refused = [&](const nlohmann::json& patch) {  // (the shard named without the test's folder)
    std::string e = refusal(patch);
    for (const std::string at : {dir + "/ck/", dir + "/"})
      if (const size_t p = e.find(at); p != std::string::npos) e.erase(p, at.size());
    return e;
  };
  EXPECT_EQ(refused({{"num_local_experts", 3}}),
            "error: model.safetensors: tensor 'model.layers.0.block_sparse_moe.experts.3.w1.weight': is expert 3 but "
            "config.json names 3 experts (num_local_experts / num_experts)");
  EXPECT_EQ(refused({{"num_local_experts", 5}}),
            "error: model.safetensors: tensor 'model.layers.0.block_sparse_moe.gate.weight': shape [4, 32] contradicts "
            "config.json (num_experts x hidden_size gives [5, 32])");
  EXPECT_EQ(refused({{"intermediate_size", 24}}),
            "error: model.safetensors: tensor 'model.layers.0.block_sparse_moe.experts.0.w1.weight': shape [16, 32] "
            "contradicts config.json (one expert: moe_intermediate_size (else intermediate_size) x hidden_size gives "
            "[24, 32])");
  EXPECT_EQ(refusal({{"num_experts_per_tok", 5}}),
            "error: config.json: key 'num_experts_per_tok': 5 experts per token: must be 1 to the expert count (4)");
  EXPECT_EQ(refusal({{"num_experts_per_tok", nullptr}}),
            "error: config.json: key 'num_experts_per_tok': is missing: llama.cpp needs the experts used per token");
  EXPECT_EQ(refused({{"num_local_experts", nullptr}}),
            "error: model.safetensors: tensor 'model.layers.0.block_sparse_moe.experts.0.w1.weight': is an expert's "
            "tensor, but config.json names no experts (num_local_experts / num_experts)");
  // one expert missing from a layer: named, expert and all
  {
    std::vector<gen::RawTensor> raw;
    for (const gen::Tensor& t : tensors) {
      if (t.name == "model.layers.1.block_sparse_moe.experts.2.w2.weight") continue;
      gen::RawTensor r{t.name, "F32", t.shape, std::vector<uint8_t>(t.values.size() * 4)};
      std::memcpy(r.bytes.data(), t.values.data(), r.bytes.size());
      raw.push_back(std::move(r));
    }
    gen::write_safetensors(dir + "/ck/model.safetensors", raw);
    EXPECT_EQ(refused({{"num_local_experts", 4}}),
              "error: ck: tensor 'model.layers.1.block_sparse_moe.experts.2.w2.weight': missing from the checkpoint "
              "(searched 1 shard(s))");
  }
  std::filesystem::remove_all(dir + "/ck");
  for (const char* arch : {"qwen2moe", "qwen3moe", "olmoe"}) {
    SCOPED_TRACE(arch);
    std::filesystem::remove_all(dir + "/ck");
    s.arch = arch;
    s.kv_heads = s.arch == "olmoe" ? 4 : 2;
    make(s);
    const bool norm = s.arch == "qwen3moe";
    EXPECT_EQ(refusal({{"norm_topk_prob", !norm}}),
              std::string("error: config.json: key 'norm_topk_prob': is ") + (norm ? "false" : "true") +
                  ": llama.cpp's " + arch + (norm ? " always divides" : " never divides") +
                  " the chosen experts' weights by their sum");
    if (s.arch == "olmoe") {
      EXPECT_EQ(refusal({{"clip_qkv", 8}}), "error: config.json: key 'clip_qkv': is set: llama.cpp's olmoe does not clamp q, k and v");
      EXPECT_EQ(refusal({{"rms_norm_eps", 1e-6}}),
                "error: config.json: key 'rms_norm_eps': is not 1e-5: llama.cpp's converter writes 1e-5 for OLMoE "
                "whatever it says");
      continue;
    }
    EXPECT_EQ(refusal({{"mlp_only_layers", {1}}}),
              std::string("error: config.json: key 'mlp_only_layers': [1]: llama.cpp's ") + arch +
                  " builds every layer as a mixture of experts");
    EXPECT_EQ(refusal({{"decoder_sparse_step", 2}}),
              std::string("error: config.json: key 'decoder_sparse_step': is not 1: llama.cpp's ") + arch +
                  " builds every layer as a mixture of experts");
  }
}

TEST_F(GgufFamilies, GptOssMxfp4ExpertsAreRepackedByteForByteAsItsConverterDoes) {
  // gpt-oss ships its experts as MXFP4: per row, blocks of 32 values as 16 bytes (OCP MX: element
  // 2i in byte i's low nibble, 2i+1 in its high one) and one E8M0 scale byte per block in a
  // tensor of its own; gate_up_proj interleaves gate (even rows) and up (odd rows). ggml's MXFP4
  // block is the scale byte, then qs[j] = element j | element j + 16 << 4. The converter writes
  // them first (generate_extra_tensors), layer by layer in name order: down, gate, up.
  gen::Spec s;
  s.arch = "gpt-oss";
  s.dim = 64; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.head_dim = 16; s.vocab = 64; s.seq_len = 32;
  s.experts = 4; s.experts_used = 2; s.expert_hidden = 32;
  const auto tensors = make(s);
  std::map<std::string, const gen::Tensor*> src;
  for (const gen::Tensor& t : tensors) src[t.name] = &t;
  const auto r = convert("g.gguf", {"--outtype", "F32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<uint8_t> b;
  const tg3::File f = file("g.gguf", &b);
  const std::vector<std::string> first = {"blk.0.ffn_down_exps.weight", "blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight",
                                          "blk.1.ffn_down_exps.weight", "blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight"};
  ASSERT_GE(f.tensors.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    const tg3::Tensor& t = f.tensors[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, first[i]);
    EXPECT_EQ(t.type, 39u) << "GGML_TYPE_MXFP4";
    const bool down = t.name.find("down") != std::string::npos;
    const int64_t rows = down ? 64 : 32, cols = down ? 32 : 64, nb = cols / 32;
    EXPECT_EQ(t.ne, (std::vector<int64_t>{cols, rows, 4}));
    const std::string layer = t.name.substr(4, 1), base = "model.layers." + layer + ".mlp.experts." +
                                                       (down ? "down_proj" : "gate_up_proj");
    const gen::Tensor &blocks = *src.at(base + "_blocks"), &scales = *src.at(base + "_scales");
    const int64_t stride = down ? 1 : 2, start = t.name.find("up_exps") != std::string::npos ? 1 : 0;
    const uint8_t* out = b.data() + f.data_start + t.offset;
    for (int64_t e = 0; e < 4; ++e)
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t k = 0; k < nb; ++k) {
          const int64_t srow = e * rows * stride + start + row * stride;  // the source's [expert, row]
          const uint8_t* blk = out + ((e * rows + row) * nb + k) * 17;
          ASSERT_EQ(blk[0], uint8_t(scales.values[size_t(srow * nb + k)])) << e << " " << row << " " << k;
          auto element = [&](int64_t i) {  // OCP MX: element i of the block, a nibble
            const uint8_t byte = uint8_t(blocks.values[size_t((srow * nb + k) * 16 + i / 2)]);
            return i % 2 ? byte >> 4 : byte & 15;
          };
          for (int j = 0; j < 16; ++j)
            ASSERT_EQ(blk[1 + j], uint8_t(element(j) | element(j + 16) << 4)) << e << " " << row << " " << k << " " << j;
        }
  }
  std::map<std::string, const tg3::Tensor*> by;
  for (const auto& t : f.tensors) by[t.name] = &t;
  // the gate_up bias: gate the even values of each expert's row, up the odd ones
  const gen::Tensor& gub = *src.at("model.layers.1.mlp.experts.gate_up_proj_bias");
  for (const char* which : {"gate", "up"}) {
    const tg3::Tensor& t = *by.at(std::string("blk.1.ffn_") + which + "_exps.bias");
    EXPECT_EQ(t.ne, (std::vector<int64_t>{32, 4}));
    std::vector<float> want;
    for (size_t i = which[0] == 'u'; i < gub.values.size(); i += 2) want.push_back(gub.values[i]);
    EXPECT_EQ(floats_at(b, f.data_start + t.offset, want.size()), want) << which;
  }
  EXPECT_EQ(by.at("blk.0.attn_sinks.weight")->ne, (std::vector<int64_t>{4}));
  EXPECT_EQ(by.at("blk.0.post_attention_norm.weight")->ne, (std::vector<int64_t>{64}));
  auto u32 = [&](const std::string& k) { const auto* e = f.find(k); return e ? tg3::item<uint32_t>(*e) : 0xffffffffu; };
  EXPECT_EQ(u32("general.file_type"), 38u) << "MOSTLY_MXFP4_MOE, as the converter writes for f32 / f16 / bf16";
  EXPECT_EQ(u32("gpt-oss.attention.sliding_window"), 128u);
  EXPECT_EQ(u32("gpt-oss.expert_feed_forward_length"), 32u);
  EXPECT_EQ(u32("gpt-oss.rope.scaling.original_context_length"), 4096u);
  EXPECT_EQ(f.find("gpt-oss.rope.scaling.type")->items.at(0), "yarn");
  EXPECT_EQ(f.find("general.size_label")->items.at(0).substr(0, 2), "4x");
}

TEST_F(GgufFamilies, GptOssRefusesWhatItsConverterOrLlamaCppWouldNotTake) {
  gen::Spec s;
  s.arch = "gpt-oss";
  s.dim = 64; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.head_dim = 16; s.vocab = 64; s.seq_len = 32;
  s.experts = 4; s.experts_used = 2; s.expert_hidden = 32;
  const auto tensors = make(s);
  EXPECT_EQ(refusal({{"quantization_config", nullptr}}),
            "error: config.json: key 'quantization_config': is not MXFP4: gpt-oss's experts are read as they ship, in "
            "MXFP4, only");
  EXPECT_EQ(refusal({{"swiglu_limit", 8}}),
            "error: config.json: key 'swiglu_limit': 8: llama.cpp's gpt-oss clamps the experts' SwiGLU at 7");
  EXPECT_EQ(refusal({{"layer_types", {"full_attention", "sliding_attention"}}}),
            "error: config.json: key 'layer_types': layer 0 is \"full_attention\": llama.cpp's gpt-oss runs even layers "
            "with the sliding window and odd ones in full");
  // llama-quantize will not requantize MXFP4: the K-quant presets are refused, MXFP4_MOE and Q8_0 keep the experts
  {
    const auto q = convert("k.gguf", {"--type", "Q4_K_M"});
    EXPECT_EQ(q.exit_code, 1);
    ASSERT_EQ(q.error_lines().size(), 1u) << q.err;
    EXPECT_NE(q.error_lines()[0].find("--type Q4_K_M: this checkpoint ships quantized experts (MXFP4)"), std::string::npos)
        << q.error_lines()[0];
    EXPECT_FALSE(tsup::exists(dir + "/k.gguf"));
    for (const char* type : {"MXFP4_MOE", "Q8_0"}) {
      const auto ok = convert(std::string(type) + ".gguf", {"--type", type});
      EXPECT_EQ(ok.exit_code, 0) << type << ok.err;
    }
  }
  // a missing scales tensor, and blocks of the wrong dtype, are named
  std::vector<gen::RawTensor> raw;
  for (const gen::Tensor& t : tensors) {
    if (t.name == "model.layers.1.mlp.experts.down_proj_scales") continue;
    const bool u8 = t.name.find("_blocks") != std::string::npos || t.name.find("_scales") != std::string::npos;
    gen::RawTensor rt{t.name, u8 ? "U8" : "F32", t.shape, {}};
    for (float v : t.values) {
      if (u8) { rt.bytes.push_back(uint8_t(v)); continue; }
      uint8_t x[4];
      std::memcpy(x, &v, 4);
      rt.bytes.insert(rt.bytes.end(), x, x + 4);
    }
    raw.push_back(std::move(rt));
  }
  gen::write_safetensors(dir + "/ck/model.safetensors", raw);
  const auto m = convert("m.gguf");
  ASSERT_EQ(m.error_lines().size(), 1u) << m.err;
  EXPECT_NE(m.error_lines()[0].find("tensor 'model.layers.1.mlp.experts.down_proj_scales': missing from the checkpoint: "
                                    "the MXFP4 scales of model.layers.1.mlp.experts.down_proj_blocks"),
            std::string::npos)
      << m.error_lines()[0];
}

// BitNet b1.58 (1bitLLM's BitnetForCausalLM, conversion/bitnet.py): Llama's names plus the two
// sub-norms, q and k not permuted (NEOX RoPE), no output.weight, rope scaling linear x 1.0, and every
// projection ternarized by weight_quant: each value 0 or +-s, s the mean of |w| over the tensor
// (here held to the mean in double within f32's rounding; the f32 bits are torch_order_test's),
// +-s where |w| >= s / 2. Refused naming the key: an activation llama.cpp's bitnet would not run
// (2B4T's relu2), rope scaling it would drop; a folder without tokenizer.model.
TEST_F(GgufFamilies, BitnetIsWrittenTernarizedAsItsConverterWritesIt) {
  gen::Spec s;
  s.arch = "bitnet";
  s.dim = 64; s.hidden = 96; s.layers = 2; s.heads = 4; s.kv_heads = 2; s.vocab = 100; s.seq_len = 32;
  const auto tensors = make(s);
  const auto r = convert("m.gguf", {"--outtype", "F32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<uint8_t> b;
  const tg3::File f = file("m.gguf", &b);
  std::map<std::string, const tg3::Tensor*> by_name;
  for (const auto& t : f.tensors) by_name[t.name] = &t;
  EXPECT_EQ(f.tensors.size(), tensors.size());
  EXPECT_FALSE(by_name.count("output.weight"));
  int ternarized = 0;
  for (const gen::Tensor& src : tensors) {
    const std::string rest = src.name.substr(src.name.find('.', 13) + 1);
    const bool sub = rest == "self_attn.inner_attn_ln.weight" || rest == "mlp.ffn_layernorm.weight";
    const std::string name = sub ? "blk." + src.name.substr(13, src.name.find('.', 13) - 13) +
                                       (rest[0] == 's' ? ".attn_sub_norm.weight" : ".ffn_sub_norm.weight")
                                 : gguf_name("bitnet", src.name);
    ASSERT_TRUE(by_name.count(name)) << src.name << " -> " << name;
    const tg3::Tensor& t = *by_name[name];
    EXPECT_EQ(t.ne, std::vector<int64_t>(src.shape.rbegin(), src.shape.rend())) << name;
    const std::vector<float> got = floats_at(b, f.data_start + t.offset, src.values.size());
    const bool proj = src.name.find("_proj.weight") != std::string::npos;
    if (!proj) {
      EXPECT_EQ(got, src.values) << name;
      continue;
    }
    double mean = 0;
    for (float x : src.values) mean += std::fabs(double(x));
    mean /= double(src.values.size());
    float scale = 0;
    for (float x : got) scale = std::max(scale, std::fabs(x));
    EXPECT_NEAR(scale, mean, mean * 4e-7) << name;
    for (size_t i = 0; i < got.size(); ++i) {  // in place, q / k rows not permuted
      const float w = src.values[i];
      const float want = std::fabs(w) >= scale / 2 ? std::copysign(scale, w) : std::copysign(0.0f, w);
      if (std::fabs(std::fabs(w) - scale / 2) > scale * 1e-6f) ASSERT_EQ(got[i], want) << name << " [" << i << "] of " << w;
    }
    ++ternarized;
  }
  EXPECT_EQ(ternarized, 14);
  const auto* type = f.find("bitnet.rope.scaling.type");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->items.at(0), "linear");
  EXPECT_EQ(tg3::item<float>(*f.find("bitnet.rope.scaling.factor")), 1.0f);
  EXPECT_EQ(f.find("bitnet.vocab_size"), nullptr) << "TextModel's keys, not LlamaModel's";

  EXPECT_EQ(refusal({{"hidden_act", "relu2"}}),
            "error: config.json: key 'hidden_act': \"relu2\": llama.cpp's bitnet computes SiLU in its MLP (BitNet b1.58 "
            "2B4T's relu2 would run as SiLU)");
  EXPECT_EQ(refusal({{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}}),
            "error: config.json: key 'rope_scaling': is set: llama.cpp's converter overwrites BitNet's rope scaling "
            "with linear x 1.0, so llama.cpp would run the model unscaled");
  // The converter's own ternary file (--outtype tq2_0): the embeddings F16, every projection
  // TQ2_0 (ggml type 35: per 256 values 64 bytes of 2-bit codes, then an f16 scale), decoding to
  // the F32 file's values with the scale rounded to f16; the rest as in every converter file.
  std::filesystem::remove_all(dir + "/ck");
  s.dim = 256, s.hidden = 512;
  make(s);
  ASSERT_EQ(convert("f.gguf", {"--outtype", "F32"}).exit_code, 0);
  const auto tq = convert("t.gguf", {"--outtype", "tq2_0"});
  ASSERT_EQ(tq.exit_code, 0) << tq.err;
  std::vector<uint8_t> fb, tb;
  const tg3::File ff = file("f.gguf", &fb), tf = file("t.gguf", &tb);
  EXPECT_EQ(tg3::item<uint32_t>(*tf.find("general.file_type")), 37u) << "MOSTLY_TQ2_0";
  ASSERT_EQ(ff.tensors.size(), tf.tensors.size());
  int tq2 = 0;
  for (size_t k = 0; k < tf.tensors.size(); ++k) {
    const tg3::Tensor &a = ff.tensors[k], &t = tf.tensors[k];
    ASSERT_EQ(a.name, t.name);
    const size_t n = size_t(a.ne[0] * (a.ne.size() > 1 ? a.ne[1] : 1));
    const std::vector<float> want = floats_at(fb, ff.data_start + a.offset, n);
    if (t.name.find("_proj") == std::string::npos && (t.name == "token_embd.weight" || t.ne.size() < 2 || t.name.find("norm") != std::string::npos)) {
      EXPECT_EQ(t.type, t.name == "token_embd.weight" ? 1u : 0u) << t.name;  // F16 / F32
      continue;
    }
    ASSERT_EQ(t.type, 35u) << t.name;
    const uint8_t* blk = tb.data() + tf.data_start + t.offset;
    for (size_t b0 = 0; b0 < n; b0 += 256, blk += 66) {  // ggml's dequantize_row_tq2_0
      uint16_t h;
      std::memcpy(&h, blk + 64, 2);
      const float d = leapconv::f16_to_f32(h);
      for (int j = 0; j < 64; j += 32)
        for (int l = 0; l < 4; ++l)
          for (int m = 0; m < 32; ++m) {
            const size_t i = b0 + size_t(j * 4 + l * 32 + m);
            const float got = float(int((blk[j + m] >> (l * 2)) & 3) - 1) * d;
            const float w = want[i];
            ASSERT_EQ(got, w == 0 ? 0.0f : std::copysign(leapconv::f16_to_f32(leapconv::f32_to_f16(std::fabs(w))), w))
                << t.name << " [" << i << "]";
          }
    }
    ++tq2;
  }
  EXPECT_EQ(tq2, 14);

  std::filesystem::remove(dir + "/x.gguf");
  const auto nv = tsup::run_cli({dir + "/x.gguf", "--model", dir + "/ck", "--quiet"}, dir);
  ASSERT_EQ(nv.error_lines().size(), 1u) << nv.err;
  EXPECT_NE(nv.error_lines()[0].find("tokenizer.model: is missing: llama.cpp's converter reads this family's vocabulary "
                                     "from it alone"), std::string::npos) << nv.err;
  EXPECT_FALSE(tsup::exists(dir + "/x.gguf"));
}
