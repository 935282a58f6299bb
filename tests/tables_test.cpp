// The core's tables (quant types, architectures, output formats) and the checkpoint's side
// files: what the rest of the core and the page rely on them to say.
#include <gtest/gtest.h>
#include <fstream>
#include <sstream>

#include "arch/arch_table.h"
#include "formats/formats.h"
#include "container/gguf_file.h"
#include "formats/leap_format.h"
#include "source/model_config.h"
#include "test_support.h"

using namespace leapconv;
using tsup::run_cli;

TEST(Tables, QuantTypeRowsAreInEnumOrderAndNamedUniquely) {
  const auto& types = quant_types();
  for (size_t i = 0; i < types.size(); ++i) {
    EXPECT_EQ(size_t(types[i].id), i) << types[i].name;  // quant_type() indexes by id
    EXPECT_EQ(find_quant_type(types[i].name), &types[i]);
    EXPECT_EQ(find_quant_type(types[i].short_name), &types[i]);
  }
  EXPECT_EQ(find_quant_type("Q4_PER_GROUP_64"), &quant_type(QType::Q4Group64));
  EXPECT_EQ(find_quant_type("q5"), nullptr);
}

TEST(Tables, GgmlRowsAgreeWithTheGgufContainersTypeTable) {
  // Two tables name ggml's types: the container's (every type a GGUF may hold, to read any file)
  // and the quant-type table (the types this project encodes). Their shared facts must agree.
  int rows = 0;
  for (const QuantType& t : quant_types()) {
    if (t.ggml_type < 0) continue;
    ++rows;
    const GgmlTypeInfo* g = ggml_type_info(uint32_t(t.ggml_type));
    ASSERT_NE(g, nullptr) << t.name;
    EXPECT_EQ(g->block_size, t.block(0, 0)) << t.name;
    EXPECT_EQ(g->type_size, t.bytes_of(1, g->block_size, 0).total()) << t.name;
    EXPECT_EQ(quant_type_by_ggml_type(t.ggml_type), &t);
  }
  EXPECT_EQ(rows, 28);  // F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K, MXFP4, IQ4_NL, IQ4_XS,
                        // TQ1_0, TQ2_0, Q1_0, Q2_0, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, NVFP4
}

TEST(Tables, SizesAreRowsTimesRowBytesPerRegion) {
  // Q4 per group of 64 on a 3 x 128 tensor: 6 f16 scales first, then 192 bytes of nibbles.
  PlanItem it;
  it.shape = {3, 128};
  it.type = QType::Q4Group64;
  it.offset = 1000;
  finish_item_geometry(it);
  EXPECT_EQ(it.size.scales, 12);
  EXPECT_EQ(it.size.values, 192);
  const RowRegions rr = row_regions(it, 1, 3);
  ASSERT_EQ(rr.n, 2);
  EXPECT_EQ(rr.region[0].offset, 1000 + 4);        // scales of rows 1..2
  EXPECT_EQ(rr.region[0].bytes, 8);
  EXPECT_EQ(rr.region[1].offset, 1000 + 12 + 64);  // nibbles of rows 1..2
  EXPECT_EQ(rr.region[1].bytes, 128);
  // LEAP's int8 groups: values first, then f32 scales, groups over the flattened tensor.
  PlanItem l;
  l.shape = {4, 48};
  l.type = QType::Int8Group;
  l.group_size = 32;
  finish_item_geometry(l);
  EXPECT_EQ(l.size.values, 192);
  EXPECT_EQ(l.size.scales, 24);
  EXPECT_EQ(l.row_quantum, 2);  // 2 rows = 96 values = 3 whole groups
  const RowRegions lr = row_regions(l, 2, 4);
  EXPECT_EQ(lr.region[0].offset, 96);
  EXPECT_EQ(lr.region[1].offset, 192 + 12);
}

TEST(Tables, RefusalsComeFromTheRow) {
  EXPECT_EQ(quant_type_refusal(quant_type(QType::Q4Group64), {8, 96}), "in=96 is not a multiple of 64");
  EXPECT_EQ(quant_type_refusal(quant_type(QType::Q8Channel), {8}), "1-D");
  EXPECT_EQ(quant_type_refusal(quant_type(QType::F16), {8}), "");
}

TEST(Tables, FormatsByIdMagicAndExtension) {
  EXPECT_STREQ(format_for_path("x/model.gguf-lite")->id, "gguf-lite");
  EXPECT_STREQ(format_for_path("model.bin")->id, "leap");
  EXPECT_EQ(format_for_path("model.txt"), nullptr);
  EXPECT_STREQ(format_for_path("Model-Q8_0.gguf")->id, "gguf");  // real GGUF; GGUF-lite keeps .gguf-lite
  EXPECT_EQ(find_format("gguf")->magic, 0x46554747u);            // "GGUF"
  EXPECT_EQ(find_format("leap")->magic, kLeapMagic);
  const nlohmann::json c = catalog_json();
  EXPECT_EQ(c["quant_types"].size(), quant_types().size());
  std::vector<std::string> menu;
  for (const auto& f : c["formats"])
    for (const auto& m : f["menu"]) menu.push_back(m["value"]);
  const std::vector<std::string> want = {
      "gguf-q8_0", "gguf-q6_k", "gguf-q5_k_m", "gguf-q5_k_s", "gguf-q4_k_m", "gguf-q4_k_s", "gguf-q3_k_l",
      "gguf-q3_k_m", "gguf-q3_k_s", "gguf-q2_k", "gguf-q2_k_s", "gguf-iq4_xs", "gguf-iq4_nl", "gguf-iq3_m", "gguf-iq3_s", "gguf-iq3_xs",
      "gguf-iq3_xxs", "gguf-iq2_m", "gguf-iq2_s", "gguf-iq2_xs", "gguf-iq2_xxs", "gguf-iq1_m", "gguf-iq1_s", "gguf-tq2_0", "gguf-tq1_0",
      "gguf-q2_0", "gguf-q1_0", "gguf-mxfp4_moe", "gguf-q5_1", "gguf-q5_0", "gguf-q4_1", "gguf-q4_0",
      "gguf-f16", "gguf-bf16", "gguf-f32", "leap-1", "leap-2", "gguf-lite-f32", "gguf-lite-f16",
      "gguf-lite-q8", "gguf-lite-q4"};
  EXPECT_EQ(menu, want);
}

TEST(Tables, FamiliesByArchitectureThenModelType) {
  ModelConfig c;
  c.architecture = "MistralForCausalLM";
  EXPECT_EQ(find_family(c), &llama_family());
  c.architecture = "";
  c.model_type = "gpt2";
  ASSERT_NE(find_family(c), nullptr);
  EXPECT_STREQ(find_family(c)->name, "gpt2");
  c.model_type = "qwen2";
  ASSERT_NE(find_family(c), nullptr);
  EXPECT_STREQ(find_family(c)->name, "qwen2");
  c.model_type = "gemma3";
  ASSERT_NE(find_family(c), nullptr);
  EXPECT_STREQ(find_family(c)->name, "gemma3");
  c.model_type = "gemma3_text";
  ASSERT_NE(find_family(c), nullptr);
  EXPECT_STREQ(find_family(c)->name, "gemma3");
  c.model_type = "falcon";
  EXPECT_EQ(find_family(c), nullptr);
  c.architecture = "Gemma2ForCausalLM";
  ASSERT_NE(find_family(c), nullptr);
  EXPECT_STREQ(find_family(c)->name, "gemma2");
  EXPECT_EQ(leap_architecture_list(), "LlamaForCausalLM, MistralForCausalLM");
  EXPECT_EQ(role_name(role_of(llama_family(), "attn_k").gguf, 7), "blk.7.attn_k.weight");
}

TEST(Tables, RoleNamesTakeALayerAndAnExpert) {
  const char* hf = "model.layers.{L}.block_sparse_moe.experts.{E}.w1.weight";
  EXPECT_EQ(role_name(hf, 3, 17), "model.layers.3.block_sparse_moe.experts.17.w1.weight");
  EXPECT_EQ(role_name("blk.{L}.ffn_gate_exps.weight", 3, 17), "blk.3.ffn_gate_exps.weight");
  int64_t e = -1;
  EXPECT_EQ(match_role_name(hf, "model.layers.12.block_sparse_moe.experts.7.w1.weight", &e), 12);
  EXPECT_EQ(e, 7);
  EXPECT_EQ(match_role_name(hf, "model.layers.12.block_sparse_moe.experts.07.w1.weight", &e), -1);  // no leading 0
  EXPECT_EQ(match_role_name(hf, "model.layers.12.block_sparse_moe.experts..w1.weight", &e), -1);
  EXPECT_EQ(match_role_name(hf, "model.layers.x.block_sparse_moe.experts.7.w1.weight", &e), -1);
  EXPECT_EQ(match_role_name(hf, "model.layers.1.block_sparse_moe.experts.7.w2.weight", &e), -1);
  // one placeholder, as before: the layer, and an expert of 0
  EXPECT_EQ(match_role_name("model.layers.{L}.mlp.up_proj.weight", "model.layers.5.mlp.up_proj.weight", &e), 5);
  EXPECT_EQ(e, 0);
  EXPECT_EQ(match_role_name("model.norm.weight", "model.norm.weight"), 0);
  EXPECT_EQ(match_role_name("model.norm.weight", "model.norm.bias"), -1);
}

class SideFiles : public tsup::TempDirTest {};

TEST_F(SideFiles, AreReadListedAndValidated) {
  gen::Spec spec;
  gen::write_checkpoint(path("m"), spec);
  gen::write_text(path("m/tokenizer.json"), R"({"model": {"type": "BPE"}})");
  gen::write_text(path("m/generation_config.json"), R"({"bos_token_id": 1})");
  auto r = run_cli({path("out.bin"), "--meta-llama", path("m"), "--json", "--quiet"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["side_files"].size(), 2u);
  EXPECT_EQ(j["side_files"][0]["name"], "tokenizer.json");  // in the table's order
  EXPECT_EQ(j["side_files"][1]["name"], "generation_config.json");

  gen::write_text(path("m/tokenizer_config.json"), R"({"add_bos_token": tru)");
  r = run_cli({path("out2.bin"), "--meta-llama", path("m"), "--quiet"}, dir);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
  EXPECT_NE(r.error_lines()[0].find("tokenizer_config.json"), std::string::npos) << r.err;
  EXPECT_FALSE(tsup::exists(path("out2.bin")));
}

// The README's table of families is the architecture table's (`export --families`), verbatim
// between its markers: a row added or changed in the table and not in the README fails here.
TEST(Tables, ReadmeFamiliesTableIsTheArchitectureTables) {
  std::ifstream f(README_MD, std::ios::binary);
  ASSERT_TRUE(f) << README_MD;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string readme = ss.str();
  const std::string begin = "<!-- families: generated by `export --families`; do not edit -->\n", end = "<!-- /families -->";
  const size_t a = readme.find(begin), b = readme.find(end);
  ASSERT_NE(a, std::string::npos) << "README.md has no families table";
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(readme.substr(a + begin.size(), b - a - begin.size()), leapconv::families_markdown())
      << "regenerate it: build/native/export --families";
  // every family GGUF export takes has a row, with its examples
  for (const leapconv::ArchFamily& fam : leapconv::arch_families())
    if (fam.gguf_keys) EXPECT_NE(readme.find(std::string("| `") + fam.name + "` |"), std::string::npos) << fam.name;
}
