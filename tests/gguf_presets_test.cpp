// llama-quantize's per-tensor choices for its presets, held to tables worked out by hand from
// src/llama-quant.cpp (llama_tensor_get_type_impl, tensor_type_fallback) for real model shapes:
// Llama-3-8B-like (32 layers, GQA 4, untied), TinyLlama (22 layers, GQA 8, tied), SmolLM-135M
// (30 layers, GQA 3, tied, rows of 576 that 256-value blocks do not divide), a 70B (80 layers)
// and rows of 48 that not even 32-value blocks divide. Then one file end to end through the CLI.
#include <map>
#include <sstream>
#include <regex>
#include <tuple>
#include <set>

#include "core/byte_io.h"
#include "formats/formats.h"
#include "formats/gguf/gguf_format.h"
#include "formats/gguf/gguf_presets.h"
#include "plan/schemes.h"
#include "source/checkpoint.h"
#include "ggml_ref.h"
#include "gguf3_reader.h"
#include "test_support.h"

using namespace leapconv;

namespace {

struct Shape {
  int64_t n_layers, n_head, n_head_kv, hidden, ffn;
  bool tied;
};

// The type of every tensor of a Llama model of this shape under ftype (base = its default type).
std::map<std::string, std::string> types_of(uint32_t ftype, QType base, const Shape& s, const QuantizeOptions& o = {},
                                            bool imatrix = false) {
  QuantizeModel m{s.n_layers, s.n_head, s.n_head_kv, !s.tied, s.n_layers == 80 && s.n_head != s.n_head_kv};
  m.has_imatrix = imatrix;
  std::map<std::string, std::string> out;
  QuantizeCounters k;  // (layer by layer: attn_v before ffn_down, as llama-quantize's order has them)
  auto add = [&](const std::string& name, int64_t layer, int64_t n_dims, int64_t ncols) {
    QuantizeNotes why;
    // what the converter's BF16 file holds: norms and other 1-D tensors F32, the rest BF16
    const QType keep = n_dims == 1 ? QType::F32 : QType::BF16;
    out[name] = quant_type(llama_quantize_type(ftype, base, keep, m, {name, layer, n_dims, ncols}, k, &why, o)).name;
  };
  add("token_embd.weight", -1, 2, s.hidden);
  if (!s.tied) add("output.weight", -1, 2, s.hidden);
  add("output_norm.weight", -1, 1, s.hidden);
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", l, 1, s.hidden);
    add(b + "ffn_norm.weight", l, 1, s.hidden);
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up"}) add(b + t + ".weight", l, 2, s.hidden);
    add(b + "ffn_down.weight", l, 2, s.ffn);
  }
  return out;
}

std::string layer_types(const std::map<std::string, std::string>& t, const char* role, int64_t n) {
  std::string s;
  for (int64_t l = 0; l < n; ++l) s += (l ? " " : "") + t.at("blk." + std::to_string(l) + "." + role + ".weight");
  return s;
}

// "Q6_K" at the listed layers, `other` elsewhere.
std::string at_layers(int64_t n, const std::set<int64_t>& layers, const char* hit, const char* other) {
  std::string s;
  for (int64_t l = 0; l < n; ++l) s += (l ? " " : "") + std::string(layers.count(l) ? hit : other);
  return s;
}

const Shape kLlama3_8B{32, 32, 8, 4096, 14336, false};
const Shape kTinyLlama{22, 32, 4, 2048, 5632, true};
const Shape kSmolLM135M{30, 9, 3, 576, 1536, true};
const Shape kLlama70B{80, 64, 8, 8192, 28672, false};

// use_more_bits(i, n): i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2, worked out:
const std::set<int64_t> kMoreBits32 = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
const std::set<int64_t> kMoreBits22 = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};

TEST(LlamaQuantizeTypes, Q4_K_M_OnALlama3Shape) {
  const auto t = types_of(kFtypeQ4_K_M, QType::Q4_K, kLlama3_8B);
  EXPECT_EQ(t.at("output.weight"), "Q6_K");
  EXPECT_EQ(t.at("token_embd.weight"), "Q4_K");  // untied: the default type
  EXPECT_EQ(t.at("output_norm.weight"), "F32");  // (not quantized: its type in the input)
  EXPECT_EQ(t.at("blk.7.attn_norm.weight"), "F32");
  EXPECT_EQ(layer_types(t, "attn_v", 32), at_layers(32, kMoreBits32, "Q6_K", "Q4_K"));
  EXPECT_EQ(layer_types(t, "ffn_down", 32), at_layers(32, kMoreBits32, "Q6_K", "Q4_K"));
  for (const char* r : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"})
    EXPECT_EQ(layer_types(t, r, 32), at_layers(32, {}, "", "Q4_K")) << r;
}

TEST(LlamaQuantizeTypes, EveryKPresetOnALlama3Shape) {
  struct Want { uint32_t ftype; QType base; std::string v, down, out_proj, rest, output; };
  const std::vector<Want> wants = {
      {kFtypeQ2_K, QType::Q2_K, at_layers(32, {}, "", "Q4_K") /* GQA >= 4 */, at_layers(32, {}, "", "Q3_K"),
       at_layers(32, {}, "", "Q3_K"), "Q2_K", "Q6_K"},
      {kFtypeQ3_K_S, QType::Q3_K, at_layers(32, {}, "", "Q3_K"), at_layers(32, {}, "", "Q3_K"),
       at_layers(32, {}, "", "Q3_K"), "Q3_K", "Q6_K"},
      {kFtypeQ3_K_M, QType::Q3_K, at_layers(32, {0, 1}, "Q5_K", "Q4_K"), at_layers(32, {0, 1}, "Q5_K", "Q4_K"),
       at_layers(32, {}, "", "Q4_K"), "Q3_K", "Q6_K"},
      {kFtypeQ3_K_L, QType::Q3_K, at_layers(32, {}, "", "Q5_K"), at_layers(32, {}, "", "Q5_K"),
       at_layers(32, {}, "", "Q5_K"), "Q3_K", "Q6_K"},
      {kFtypeQ4_K_S, QType::Q4_K, at_layers(32, {0, 1, 2, 3}, "Q5_K", "Q4_K"), at_layers(32, {0, 1, 2, 3}, "Q5_K", "Q4_K"),
       at_layers(32, {}, "", "Q4_K"), "Q4_K", "Q6_K"},
      {kFtypeQ5_K_S, QType::Q5_K, at_layers(32, {}, "", "Q5_K"), at_layers(32, {}, "", "Q5_K"),
       at_layers(32, {}, "", "Q5_K"), "Q5_K", "Q6_K"},
      {kFtypeQ5_K_M, QType::Q5_K, at_layers(32, kMoreBits32, "Q6_K", "Q5_K"), at_layers(32, kMoreBits32, "Q6_K", "Q5_K"),
       at_layers(32, {}, "", "Q5_K"), "Q5_K", "Q6_K"},
      {kFtypeQ6_K, QType::Q6_K, at_layers(32, {}, "", "Q6_K"), at_layers(32, {}, "", "Q6_K"),
       at_layers(32, {}, "", "Q6_K"), "Q6_K", "Q6_K"},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE("ftype " + std::to_string(w.ftype));
    const auto t = types_of(w.ftype, w.base, kLlama3_8B);
    EXPECT_EQ(layer_types(t, "attn_v", 32), w.v);
    EXPECT_EQ(layer_types(t, "ffn_down", 32), w.down);
    EXPECT_EQ(layer_types(t, "attn_output", 32), w.out_proj);
    EXPECT_EQ(layer_types(t, "attn_q", 32), at_layers(32, {}, "", w.rest.c_str()));
    EXPECT_EQ(t.at("token_embd.weight"), w.rest);
    EXPECT_EQ(t.at("output.weight"), w.output);
  }
}

TEST(LlamaQuantizeTypes, TiedEmbeddingsTakeTheOutputRule) {
  const auto t = types_of(kFtypeQ4_K_M, QType::Q4_K, kTinyLlama);
  EXPECT_EQ(t.count("output.weight"), 0u);
  EXPECT_EQ(t.at("token_embd.weight"), "Q6_K");
  EXPECT_EQ(layer_types(t, "attn_v", 22), at_layers(22, kMoreBits22, "Q6_K", "Q4_K"));
  EXPECT_EQ(layer_types(t, "ffn_down", 22), at_layers(22, kMoreBits22, "Q6_K", "Q4_K"));
  // Q2_K with GQA 8: attn_v Q4_K
  EXPECT_EQ(layer_types(types_of(kFtypeQ2_K, QType::Q2_K, kTinyLlama), "attn_v", 22), at_layers(22, {}, "", "Q4_K"));
}

TEST(LlamaQuantizeTypes, RowsTheBlocksDoNotDivideFallBack) {
  // SmolLM-135M: rows of 576 (not a multiple of 256, a multiple of 32); ffn_down rows of 1536.
  auto t = types_of(kFtypeQ4_K_M, QType::Q4_K, kSmolLM135M);
  EXPECT_EQ(t.at("token_embd.weight"), "Q8_0");  // tied, nx % 256 != 0: the output rule says Q8_0
  EXPECT_EQ(t.at("blk.0.attn_q.weight"), "Q5_0");  // Q4_K -> Q5_0
  // use_more_bits(i, 30): i < 3, i >= 26, (i - 3) % 3 == 2
  const std::set<int64_t> more30 = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29};
  EXPECT_EQ(layer_types(t, "attn_v", 30), at_layers(30, more30, "Q8_0", "Q5_0"));      // Q6_K -> Q8_0, Q4_K -> Q5_0
  EXPECT_EQ(layer_types(t, "ffn_down", 30), at_layers(30, more30, "Q6_K", "Q4_K"));    // 1536 fits
  t = types_of(kFtypeQ5_K_S, QType::Q5_K, kSmolLM135M);
  EXPECT_EQ(t.at("blk.3.ffn_up.weight"), "Q5_1");  // Q5_K -> Q5_1
  t = types_of(kFtypeQ2_K, QType::Q2_K, kSmolLM135M);
  EXPECT_EQ(t.at("blk.3.attn_v.weight"), "Q4_0");   // GQA 3: Q3_K, then -> Q4_0
  EXPECT_EQ(t.at("blk.3.attn_q.weight"), "Q4_0");   // Q2_K -> Q4_0
  EXPECT_EQ(t.at("blk.3.ffn_down.weight"), "Q3_K");
  // rows of 48: not even 32-value blocks divide them
  const Shape odd{4, 4, 4, 48, 256, false};
  t = types_of(kFtypeQ4_K_M, QType::Q4_K, odd);
  EXPECT_EQ(t.at("blk.1.attn_q.weight"), "F16");   // Q4_K -> Q5_0 -> F16
  EXPECT_EQ(t.at("output.weight"), "F16");         // Q8_0 -> F16
  EXPECT_EQ(t.at("blk.1.ffn_down.weight"), "Q4_K");
  QuantizeNotes why;
  QuantizeCounters k{3, 3};  // (the fourth attn_v)
  llama_quantize_type(kFtypeQ4_K_M, QType::Q4_K, QType::F32, {4, 4, 4, true, false}, {"blk.3.attn_v.weight", 3, 2, 48}, k, &why);
  EXPECT_EQ(why.mixture, "Q4_K -> Q6_K (llama-quantize's mixture)");
  EXPECT_EQ(why.fallback, "Q6_K -> F16 (rows of 48 are not a multiple of 256)");
}

// The codebook types: tensor_type_fallback's IQ4_NL (block 32), then F16; and
// tensor_requires_imatrix's list (not IQ3_S; never token_embd / output).
TEST(LlamaQuantizeTypes, CodebookTypesFallBackAndRequireAnImatrix) {
  for (QType t : {QType::IQ2_XXS, QType::IQ2_XS, QType::IQ2_S, QType::IQ3_XXS, QType::IQ3_S, QType::IQ1_S, QType::IQ1_M}) {
    SCOPED_TRACE(quant_type(t).name);
    EXPECT_EQ(llama_quantize_fallback(t, 512), t);
    EXPECT_EQ(llama_quantize_fallback(t, 576), QType::IQ4_NL);
    EXPECT_EQ(llama_quantize_fallback(t, 48), QType::F16);
    EXPECT_EQ(llama_quantize_requires_imatrix("blk.0.ffn_up.weight", t, kFtypeQ4_K_M), t != QType::IQ3_S);
    for (const char* n : {"token_embd.weight", "per_layer_token_embd.weight", "output.weight"})
      EXPECT_FALSE(llama_quantize_requires_imatrix(n, t, kFtypeQ4_K_M)) << n;
  }
}

TEST(LlamaQuantizeTypes, SeventyBGetsMoreBitsInAttnV) {
  auto t = types_of(kFtypeQ3_K_S, QType::Q3_K, kLlama70B);
  EXPECT_EQ(layer_types(t, "attn_v", 80), at_layers(80, {}, "", "Q5_K"));
  EXPECT_EQ(t.at("blk.5.attn_q.weight"), "Q3_K");
  t = types_of(kFtypeQ4_K_S, QType::Q4_K, kLlama70B);
  EXPECT_EQ(layer_types(t, "attn_v", 80), at_layers(80, {}, "", "Q5_K"));
  t = types_of(kFtypeQ2_K, QType::Q2_K, kLlama70B);
  EXPECT_EQ(layer_types(t, "attn_v", 80), at_layers(80, {}, "", "Q5_K"));  // GQA 8: Q4_K, then 70B: Q5_K
}

// The legacy types are presets too: output.weight Q6_K; with an importance matrix, Q4_0 and Q5_0
// guard the first eighth of ffn_down with Q4_1 / Q5_1 ("craziness in the first few ffn_down layers").
TEST(LlamaQuantizeTypes, LegacyPresets) {
  for (const auto& [ftype, base, name] : {std::tuple{kFtypeQ4_0, QType::Q4_0, "Q4_0"}, {kFtypeQ4_1, QType::Q4_1, "Q4_1"},
                                          {kFtypeQ5_0, QType::Q5_0, "Q5_0"}, {kFtypeQ5_1, QType::Q5_1, "Q5_1"}}) {
    const auto t = types_of(ftype, base, kLlama3_8B);
    EXPECT_EQ(t.at("output.weight"), "Q6_K") << name;
    for (const char* r : {"attn_q", "attn_v", "ffn_down", "ffn_up"}) EXPECT_EQ(layer_types(t, r, 32), at_layers(32, {}, "", name)) << r;
  }
  EXPECT_EQ(types_of(kFtypeQ8_0, QType::Q8_0, kLlama3_8B).at("output.weight"), "Q8_0");
  const std::set<int64_t> first_eighth = {0, 1, 2, 3};
  EXPECT_EQ(layer_types(types_of(kFtypeQ4_0, QType::Q4_0, kLlama3_8B, {}, true), "ffn_down", 32), at_layers(32, first_eighth, "Q4_1", "Q4_0"));
  EXPECT_EQ(layer_types(types_of(kFtypeQ5_0, QType::Q5_0, kLlama3_8B, {}, true), "ffn_down", 32), at_layers(32, first_eighth, "Q5_1", "Q5_0"));
  EXPECT_EQ(layer_types(types_of(kFtypeQ4_1, QType::Q4_1, kLlama3_8B, {}, true), "ffn_down", 32), at_layers(32, {}, "", "Q4_1"));
  // F16 / BF16 / F32 file types: every tensor llama-quantize quantizes, in that type (no mixture)
  const auto f16 = types_of(1, QType::F16, kLlama3_8B);
  EXPECT_EQ(f16.at("output.weight"), "F16");
  EXPECT_EQ(f16.at("blk.0.attn_norm.weight"), "F32");
}

// The i-quant presets, worked out from llama_tensor_get_type_impl for a Llama-3-8B shape (GQA 4).
TEST(LlamaQuantizeTypes, IQuantPresets) {
  const std::set<int64_t> first_eighth = {0, 1, 2, 3};
  auto t = types_of(kFtypeIQ2_M, QType::IQ2_S, kLlama3_8B, {}, true);
  EXPECT_EQ(t.at("output.weight"), "Q5_K");
  EXPECT_EQ(t.at("token_embd.weight"), "IQ3_S");
  EXPECT_EQ(layer_types(t, "attn_v", 32), at_layers(32, {}, "", "Q4_K"));        // GQA >= 4
  EXPECT_EQ(layer_types(t, "ffn_down", 32), at_layers(32, first_eighth, "IQ3_S", "IQ2_S"));
  EXPECT_EQ(layer_types(t, "attn_output", 32), at_layers(32, {}, "", "IQ3_S"));
  EXPECT_EQ(layer_types(t, "attn_q", 32), at_layers(32, {}, "", "IQ2_S"));
  t = types_of(kFtypeIQ2_XXS, QType::IQ2_XXS, kLlama3_8B, {}, true);
  EXPECT_EQ(t.at("token_embd.weight"), "Q2_K");
  EXPECT_EQ(layer_types(t, "ffn_down", 32), at_layers(32, first_eighth, "Q2_K", "IQ2_XXS"));
  EXPECT_EQ(layer_types(t, "attn_output", 32), at_layers(32, {}, "", "IQ2_XXS"));
  t = types_of(kFtypeIQ1_S, QType::IQ1_S, kTinyLlama, {}, true);
  EXPECT_EQ(t.at("token_embd.weight"), "Q5_K");  // tied: the output rule
  EXPECT_EQ(layer_types(t, "attn_output", 22), at_layers(22, {}, "", "IQ2_XXS"));
  EXPECT_EQ(layer_types(t, "ffn_down", 22), at_layers(22, {0, 1}, "Q2_K", "IQ1_S"));
  // IQ3_XXS without an imatrix: ffn_down Q4_K / Q3_K; attn_k and attn_q IQ2_S; attn_output IQ3_S
  t = types_of(kFtypeIQ3_XXS, QType::IQ3_XXS, kLlama3_8B);
  EXPECT_EQ(layer_types(t, "ffn_down", 32), at_layers(32, first_eighth, "Q4_K", "Q3_K"));
  EXPECT_EQ(layer_types(t, "attn_k", 32), at_layers(32, {}, "", "IQ2_S"));
  EXPECT_EQ(layer_types(t, "attn_output", 32), at_layers(32, {}, "", "IQ3_S"));
  EXPECT_EQ(layer_types(types_of(kFtypeIQ3_XXS, QType::IQ3_XXS, kLlama3_8B, {}, true), "ffn_down", 32), at_layers(32, {}, "", "IQ3_XXS"));
  // IQ3_XS: the middle layers' ffn_gate / ffn_up and every attn_q / attn_k IQ3_XXS, the rest IQ3_S
  t = types_of(kFtypeIQ3_XS, QType::IQ3_S, kLlama3_8B, {}, true);
  std::set<int64_t> middle;
  for (int64_t l = 4; l < 28; ++l) middle.insert(l);
  EXPECT_EQ(layer_types(t, "ffn_up", 32), at_layers(32, middle, "IQ3_XXS", "IQ3_S"));
  EXPECT_EQ(layer_types(t, "attn_q", 32), at_layers(32, {}, "", "IQ3_XXS"));
  EXPECT_EQ(layer_types(t, "attn_v", 32), at_layers(32, {}, "", "Q4_K"));
  // IQ3_M: attn_v and attn_output Q4_K, the first eighth of ffn_down Q4_K
  t = types_of(kFtypeIQ3_M, QType::IQ3_S, kLlama3_8B, {}, true);
  EXPECT_EQ(layer_types(t, "ffn_down", 32), at_layers(32, first_eighth, "Q4_K", "IQ3_S"));
  EXPECT_EQ(layer_types(t, "attn_output", 32), at_layers(32, {}, "", "Q4_K"));
  // which need an importance matrix (tensor_requires_imatrix)
  EXPECT_TRUE(llama_quantize_requires_imatrix("blk.0.attn_q.weight", QType::IQ2_XXS, kFtypeIQ2_XXS));
  EXPECT_FALSE(llama_quantize_requires_imatrix("blk.0.attn_q.weight", QType::IQ3_S, kFtypeIQ3_M));
  EXPECT_FALSE(llama_quantize_requires_imatrix("token_embd.weight", QType::IQ2_XXS, kFtypeIQ2_XXS));
  EXPECT_TRUE(llama_quantize_requires_imatrix("blk.0.attn_q.weight", QType::Q2_K, kFtypeQ2_K_S));
  EXPECT_FALSE(llama_quantize_requires_imatrix("blk.0.attn_q.weight", QType::Q2_K, kFtypeQ2_K));
}

// llama-quantize's options, in llama_tensor_get_type's order.
TEST(LlamaQuantizeTypes, PerTensorOptions) {
  QuantizeOptions o;
  o.pure = true;
  auto t = types_of(kFtypeQ4_K_M, QType::Q4_K, kLlama3_8B, o);
  EXPECT_EQ(t.at("output.weight"), "Q4_K");
  EXPECT_EQ(layer_types(t, "attn_v", 32), at_layers(32, {}, "", "Q4_K"));
  t = types_of(kFtypeQ4_K_M, QType::Q4_K, kSmolLM135M, o);
  EXPECT_EQ(t.at("blk.0.attn_q.weight"), "Q5_0");  // --pure keeps the fallbacks
  // --tensor-type: a regex searched in the name, first match wins, before the mixture; the fallback still applies
  o = {};
  o.tensor_types.push_back({"attn_v", std::regex("attn_v"), QType::Q8_0});
  o.tensor_types.push_back({"blk\\.[0-3]\\.ffn_down", std::regex("blk\\.[0-3]\\.ffn_down"), QType::Q5_1});
  o.tensor_types.push_back({"ffn", std::regex("ffn"), QType::Q2_K});
  t = types_of(kFtypeQ4_K_M, QType::Q4_K, kLlama3_8B, o);
  EXPECT_EQ(layer_types(t, "attn_v", 32), at_layers(32, {}, "", "Q8_0"));
  EXPECT_EQ(layer_types(t, "ffn_down", 32), at_layers(32, {0, 1, 2, 3}, "Q5_1", "Q2_K"));
  EXPECT_EQ(layer_types(t, "ffn_up", 32), at_layers(32, {}, "", "Q2_K"));
  EXPECT_EQ(t.at("output.weight"), "Q6_K");  // not matched: the mixture
  EXPECT_EQ(types_of(kFtypeQ4_K_M, QType::Q4_K, kSmolLM135M, o).at("blk.0.ffn_up.weight"), "Q4_0");  // Q2_K -> Q4_0 (576)
  // a tensor a pattern decides is not counted by the mixture: the ffn_down after it go by their count
  // (blk.4's is the first the mixture sees: Q4_K_M's use_more_bits(0, 32) gives it Q6_K), as llama-quantize does
  o = {};
  o.tensor_types.push_back({"blk\\.[0-3]\\.ffn_down", std::regex("blk\\.[0-3]\\.ffn_down"), QType::Q5_1});
  t = types_of(kFtypeQ4_K_M, QType::Q4_K, kLlama3_8B, o);
  std::set<int64_t> shifted = {0, 1, 2, 3};
  for (int64_t l = 4; l < 32; ++l)
    if (kMoreBits32.count(l - 4)) shifted.insert(l);
  std::string want;
  for (int64_t l = 0; l < 32; ++l) want += (l ? " " : "") + std::string(l < 4 ? "Q5_1" : shifted.count(l) ? "Q6_K" : "Q4_K");
  EXPECT_EQ(layer_types(t, "ffn_down", 32), want);
  // --output-tensor-type and --token-embedding-type: taken as they are (no fallback); a tied
  // token_embd takes the output type through the mixture
  o = {};
  o.output_type = QType::Q8_0;
  o.token_embd_type = QType::Q4_0;
  t = types_of(kFtypeQ4_K_S, QType::Q4_K, kLlama3_8B, o);
  EXPECT_EQ(t.at("output.weight"), "Q8_0");
  EXPECT_EQ(t.at("token_embd.weight"), "Q4_0");
  o.token_embd_type.reset();
  EXPECT_EQ(types_of(kFtypeQ4_K_S, QType::Q4_K, kTinyLlama, o).at("token_embd.weight"), "Q8_0");
  // --leave-output-tensor: output.weight stays as the input has it
  o = {};
  o.leave_output = true;
  EXPECT_EQ(types_of(kFtypeQ5_K_M, QType::Q5_K, kLlama3_8B, o).at("output.weight"), "BF16");
}

// The presets llama-quantize refuses without an imatrix on a usual model (the page's menu fact):
// the ones whose default type needs one, Q2_K_S (its Q2_K), and IQ3_XS, whose mixture puts
// attn_q / attn_k (and the middle layers' ffn_gate / ffn_up) in IQ3_XXS; not IQ3_S / IQ3_M.
TEST(LlamaQuantizeTypes, PresetsThatNeedAnImatrix) {
  std::set<std::string> need;
  for (const GgufFileType& t : gguf_file_types())
    if (llama_quantize_ftype_needs_imatrix(t.ftype, t.type)) need.insert(t.name);
  EXPECT_EQ(need, (std::set<std::string>{"Q2_K_S", "IQ3_XS", "IQ3_XXS", "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S"}));
}

// A --schemes glob as a --tensor-type pattern matches exactly the names the glob matches (the
// glob the whole name, the pattern searched in it).
TEST(LlamaQuantizeTypes, GlobsAsTensorTypePatterns) {
  EXPECT_EQ(tensor_type_pattern("blk.*.ffn_down.weight"), "^blk\\..*\\.ffn_down\\.weight$");
  EXPECT_EQ(tensor_type_pattern("blk.1?.attn_v.weight"), "^blk\\.1.\\.attn_v\\.weight$");
  const std::vector<std::string> names = {"token_embd.weight", "output.weight", "output_norm.weight", "blk.0.attn_q.weight",
                                          "blk.10.attn_v.weight", "blk.1.attn_v.weight", "blk.2.ffn_down.weight",
                                          "blk.2.ffn_down_exps.weight", "xblk.2.ffn_down.weight", "blk-2.ffn_down.weight"};
  for (const char* g : {"blk.*.ffn_down.weight", "blk.1?.attn_v.weight", "output.weight", "*output*", "blk.?.attn_*", "*",
                        "blk.2.ffn_down*", "token_embd.weight"}) {
    const std::regex re(tensor_type_pattern(g));
    for (const std::string& n : names) EXPECT_EQ(std::regex_search(n, re), glob_match(g, n)) << g << " " << n;
  }
}

// The CLI writes what the table says, in llama-quantize's tensor order, with its file type.
class GgufPresetFile : public tsup::TempDirTest {};

TEST_F(GgufPresetFile, Q4_K_M_File) {
  gen::Spec s;
  s.dim = 256; s.hidden = 512; s.layers = 8; s.heads = 8; s.kv_heads = 2; s.vocab = 400; s.dtype = "bf16";
  gen::write_checkpoint(dir + "/ck", s);
  std::filesystem::copy_file(std::string(VOCAB_TEST_DATA) + "/tiny_sp_bpe.model", dir + "/ck/tokenizer.model");
  const auto r = tsup::run_cli({dir + "/m.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--quiet"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const tg3::File f = tg3::parse(tsup::slurp(dir + "/m.gguf"));
  EXPECT_EQ(tg3::item<uint32_t>(*f.find("general.file_type")), uint32_t(kFtypeQ4_K_M));
  const std::map<uint32_t, std::string> ggml = {{0, "F32"}, {12, "Q4_K"}, {14, "Q6_K"}};
  const auto want = types_of(kFtypeQ4_K_M, QType::Q4_K, {8, 8, 2, 256, 512, false});
  std::vector<std::string> order;
  for (const auto& t : f.tensors) {
    order.push_back(t.name);
    ASSERT_TRUE(ggml.count(t.type)) << t.name << " type " << t.type;
    EXPECT_EQ(ggml.at(t.type), want.at(t.name)) << t.name;
  }
  // llama_model_loader's order: outside the blocks first, then block by block, by name within
  EXPECT_EQ(order.front(), "output.weight");
  EXPECT_EQ(order[1], "output_norm.weight");
  EXPECT_EQ(order[2], "token_embd.weight");
  EXPECT_EQ(order[3], "blk.0.attn_k.weight");
  EXPECT_EQ(order.back(), "blk.7.ffn_up.weight");
}

// The page replans on every choice: the vocabulary (the slowest part of a plan) is built once per
// checkpoint and reused for another type, and the plan is the one a fresh checkpoint gives.
TEST_F(GgufPresetFile, ATypeSwitchReplansWithTheSameVocabulary) {
  gen::Spec s;
  s.dim = 256; s.hidden = 512; s.layers = 2; s.heads = 8; s.kv_heads = 2; s.vocab = 400; s.dtype = "bf16";
  gen::write_checkpoint(dir + "/ck", s);
  std::filesystem::copy_file(std::string(VOCAB_TEST_DATA) + "/tiny_sp_bpe.model", dir + "/ck/tokenizer.model");
  const auto files = [&] {  // the folder: its shard, config.json and tokenizer.model
    CheckpointFiles f;
    f.label = "ck";
    f.shards.push_back(std::make_unique<MemorySource>("model.safetensors", gen::read_file(dir + "/ck/model.safetensors")));
    f.config_json = tsup::slurp_text(dir + "/ck/config.json");
    f.side_files.push_back({"tokenizer.model", tsup::slurp_text(dir + "/ck/tokenizer.model")});
    return f;
  };
  const Checkpoint ck = open_checkpoint(files());
  const auto plan = [](const Checkpoint& c, const nlohmann::json& o) {
    return plan_conversion(c, parse_convert_options(o)).header.dump();
  };
  const std::string q8 = plan(ck, {{"format", "gguf"}, {"type", "Q8_0"}});
  ASSERT_EQ(ck.derived.size(), 1u);
  const void* vocab = ck.derived.begin()->second.get();
  const std::string q4 = plan(ck, {{"format", "gguf"}, {"type", "Q4_K_M"}});
  EXPECT_EQ(ck.derived.size(), 1u);
  EXPECT_EQ(ck.derived.begin()->second.get(), vocab) << "the vocabulary was built again";
  EXPECT_EQ(q4, plan(open_checkpoint(files()), {{"format", "gguf"}, {"type", "Q4_K_M"}}));
  EXPECT_NE(q4, q8);
  // another tokenizer.ggml.pre is another vocabulary
  plan(ck, {{"format", "gguf"}, {"type", "Q8_0"}, {"tokenizer_pre", "default"}});
  EXPECT_EQ(ck.derived.size(), 2u);
}

// llama-quantize's options through the CLI: the types they ask for, --override-kv's keys last
// (an int as u32 of its magnitude, as llama-quantize sets it), and each misuse refused in one line.
TEST_F(GgufPresetFile, OptionsThroughTheCli) {
  gen::Spec s;
  s.dim = 256; s.hidden = 512; s.layers = 8; s.heads = 8; s.kv_heads = 2; s.vocab = 400; s.dtype = "bf16";
  gen::write_checkpoint(dir + "/ck", s);
  std::filesystem::copy_file(std::string(VOCAB_TEST_DATA) + "/tiny_sp_bpe.model", dir + "/ck/tokenizer.model");
  gen::write_text(dir + "/types.txt", "attn_k=q8_0\n  ffn_up=q5_1\n");
  const auto r = tsup::run_cli({dir + "/m.gguf", "--model", dir + "/ck", "--type", "Q4_0", "--tensor-type", "ATTN_V=Q8_0",
                                "--tensor-type-file", dir + "/types.txt", "--output-tensor-type", "q4_k",
                                "--override-kv", "general.name=str:renamed", "--override-kv", "test.n=int:-7", "--quiet"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const tg3::File f = tg3::parse(tsup::slurp(dir + "/m.gguf"));
  std::map<std::string, uint32_t> type;
  for (const auto& t : f.tensors) type[t.name] = t.type;
  EXPECT_EQ(type.at("blk.3.attn_v.weight"), 8u);   // Q8_0 (the pattern is lowercased, as quantize.cpp does)
  EXPECT_EQ(type.at("blk.3.attn_k.weight"), 8u);   // from the file
  EXPECT_EQ(type.at("blk.3.ffn_up.weight"), 7u);   // Q5_1
  EXPECT_EQ(type.at("blk.3.attn_q.weight"), 2u);   // Q4_0
  EXPECT_EQ(type.at("output.weight"), 12u);        // Q4_K
  ASSERT_GE(f.kv.size(), 4u);
  EXPECT_EQ(f.kv[f.kv.size() - 4].key, "general.quantization_version");
  EXPECT_EQ(f.kv[f.kv.size() - 3].key, "general.file_type");
  EXPECT_EQ(f.kv[f.kv.size() - 2].key, "general.name");
  EXPECT_EQ(f.kv[f.kv.size() - 2].items.at(0), "renamed");
  EXPECT_EQ(f.kv.back().key, "test.n");
  EXPECT_EQ(f.kv.back().type, 4u);  // u32
  EXPECT_EQ(tg3::item<uint32_t>(f.kv.back()), 7u);
  struct Bad {
    std::vector<std::string> args;
    std::vector<std::string> expect;
  };
  const std::vector<Bad> bad = {
      {{"--outtype", "Q4_K_M"}, {"--outtype Q4_K_M", "--type Q4_K_M"}},
      {{"--outtype", "F16", "--pure"}, {"llama-quantize's options", "--type"}},
      {{"--type", "Q4_0", "--tensor-type", "attn_v"}, {"--tensor-type 'attn_v'", "PATTERN=TYPE"}},
      {{"--type", "Q4_0", "--tensor-type", "attn_v=q9_9"}, {"'q9_9'"}},
      {{"--type", "Q4_0", "--tensor-type", "attn_v[=q8_0"}, {"not a regular expression"}},
      {{"--type", "Q4_0", "--override-kv", "a.b=int:x"}, {"--override-kv 'a.b=int:x'", "whole number"}},
      {{"--type", "Q4_0", "--override-kv", "a.b=list:1"}, {"int:, float:, bool: or str:"}},
      {{"--type", "Q4_0", "--output-tensor-type", "Q4_K_M"}, {"--output-tensor-type", "'Q4_K_M'"}},
  };
  for (const Bad& b : bad) {
    std::vector<std::string> args = {dir + "/x.gguf", "--model", dir + "/ck"};
    args.insert(args.end(), b.args.begin(), b.args.end());
    tsup::expect_one_error(tsup::run_cli(args, dir), b.expect, dir + "/x.gguf");
  }
}

// llama-quantize's --dry-run: no file, and a line per tensor whose type and bytes are those the
// written file then has (read back by the test's GGUF reader), and the file's size in total.
TEST_F(GgufPresetFile, DryRunPrintsTheFileItWouldWrite) {
  gen::Spec s;
  s.dim = 256; s.hidden = 512; s.layers = 4; s.heads = 8; s.kv_heads = 2; s.vocab = 400; s.dtype = "bf16";
  gen::write_checkpoint(dir + "/ck", s);
  std::filesystem::copy_file(std::string(VOCAB_TEST_DATA) + "/tiny_sp_bpe.model", dir + "/ck/tokenizer.model");
  const std::vector<std::string> opts = {"--model", dir + "/ck", "--type", "Q4_K_M", "--tensor-type", "attn_v=q8_0", "--quiet"};
  std::vector<std::string> dry = {dir + "/dry.gguf", "--dry-run"}, real = {dir + "/m.gguf"};
  dry.insert(dry.end(), opts.begin(), opts.end());
  real.insert(real.end(), opts.begin(), opts.end());
  const auto d = tsup::run_cli(dry, dir);
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/dry.gguf"));
  ASSERT_EQ(tsup::run_cli(real, dir).exit_code, 0);
  const std::vector<uint8_t> bytes = tsup::slurp(dir + "/m.gguf");
  const tg3::File f = tg3::parse(bytes);
  const std::map<uint32_t, std::string> names = {{0, "F32"}, {8, "Q8_0"}, {12, "Q4_K"}, {14, "Q6_K"}};
  std::istringstream lines(d.out);
  std::string line;
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const auto& t = f.tensors[i];
    ASSERT_TRUE(std::getline(lines, line)) << t.name;
    const int64_t next = i + 1 < f.tensors.size() ? int64_t(f.tensors[i + 1].offset) : int64_t(bytes.size() - f.data_start);
    int64_t n = 1;
    for (int64_t e : t.ne) n *= e;
    const int64_t size = t.type == 0 ? 4 * n : n / ggml_ref_block_values(int(t.type)) * ggml_ref_block_bytes(int(t.type));
    ASSERT_LE(size, next - int64_t(t.offset)) << t.name;
    EXPECT_NE(line.find(" " + t.name + " "), std::string::npos) << line;
    EXPECT_NE(line.find("type = " + names.at(t.type) + ", " + std::to_string(size) + " bytes"), std::string::npos) << line;
  }
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line.rfind("gguf: " + std::to_string(bytes.size()) + " bytes in 1 file", 0), 0u) << line;
}

}  // namespace

// The page's rules in llama-quantize's words: the lines, in the rules' order, and the file types
// they give are the rules' (the core plans both ways); the converter's own Q8_0 says why not.
TEST_F(GgufPresetFile, RulesAsTensorTypeWords) {
  gen::Spec s;
  s.dim = 256; s.hidden = 512; s.layers = 4; s.heads = 8; s.kv_heads = 2; s.vocab = 400; s.dtype = "bf16";
  gen::write_checkpoint(dir + "/ck", s);
  CheckpointFiles files;
  files.label = "ck";
  files.config_json = tsup::slurp_text(dir + "/ck/config.json");
  files.shards.push_back(std::make_unique<MemorySource>(dir + "/ck/model.safetensors", gen::read_file(dir + "/ck/model.safetensors")));
  const Checkpoint ck = open_checkpoint(std::move(files));
  const nlohmann::json rules = nlohmann::json::parse(
      R"([{"pattern": "blk.1.ffn_down.weight", "scheme": "q8_0"}, {"pattern": "blk.*.attn_v.weight", "scheme": "q4_0"}])");
  const auto words = [&](const char* scheme) {
    return tensor_type_file_json(ck, parse_convert_options({{"format", "gguf"}, {"scheme", scheme}, {"allow_no_vocab", true}, {"rules", rules}}));
  };
  const nlohmann::json j = words("q4_k_m");
  ASSERT_FALSE(j.contains("why")) << j.dump();
  EXPECT_EQ(j["type"], "Q4_K_M");
  EXPECT_EQ(j["lines"], nlohmann::json::parse(R"(["^blk\\.1\\.ffn_down\\.weight$=Q8_0", "^blk\\..*\\.attn_v\\.weight$=Q4_0"])"));
  EXPECT_EQ(j["text"], "^blk\\.1\\.ffn_down\\.weight$=Q8_0\n^blk\\..*\\.attn_v\\.weight$=Q4_0\n");
  EXPECT_EQ(words("q2_k")["type"], "Q2_K");
  EXPECT_NE(words("q8_0").value("why", "").find("the converter's file"), std::string::npos);
}
