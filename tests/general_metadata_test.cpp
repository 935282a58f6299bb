// general.* metadata and model cards against gguf-py's own code: tests/data/model_cards/expected.json
// is what gguf-py's Metadata (llama.cpp's converter, in node-llama-cpp 3.21.1's bundle) and PyYAML
// made of cases.json and the cards beside it (scripts/general_metadata_oracle.py, run by hand:
// Python is not part of this suite). Each general.* key is compared as gguf-py packs it, bytes
// and order; where gguf-py raises at a value, the key must be left out here with a warning.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "container/gguf_file.h"
#include "formats/gguf/gguf_metadata.h"
#include "gguf3_reader.h"
#include "source/model_card.h"
#include "test_support.h"

namespace {

using leapconv::GgufMetadata;
using json = nlohmann::json;

const std::string kCards = std::string(VOCAB_TEST_DATA) + "/model_cards/";
json load(const std::string& name) { return json::parse(tsup::slurp_text(kCards + name)); }

std::string hex(const std::vector<uint8_t>& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) s += d[x >> 4], s += d[x & 15];
  return s;
}

TEST(GeneralMetadata, ModelIdsAnnotatedAsGgufPyAnnotatesThem) {
  const json expected = load("expected.json")["ids"];
  ASSERT_GE(expected.size(), 40u);
  for (const json& row : expected) {
    const std::string id = row[0];
    const json& want = row[2];  // [name, org, basename, finetune, version, size_label], null for None
    const leapconv::ModelIdParts p = leapconv::model_id_components(id, row[1].get<int64_t>());
    auto opt = [](bool has, const std::string& v) { return has ? json(v) : json(nullptr); };
    const json got = {opt(p.has_name, p.name), opt(p.has_org, p.org),       opt(!p.basename.empty(), p.basename),
                      opt(!p.finetune.empty(), p.finetune), opt(!p.version.empty(), p.version), opt(!p.size_label.empty(), p.size_label)};
    EXPECT_EQ(got, want) << "'" << id << "' with " << row[1] << " parameters";
  }
}

TEST(GeneralMetadata, ModelCardFrontMatterReadAsPyYamlReadsIt) {
  const json expected = load("expected.json")["cards"];
  ASSERT_GE(expected.size(), 12u);
  for (const auto& [card, want] : expected.items()) {
    const leapconv::ModelCard got = leapconv::read_model_card(tsup::slurp_text(kCards + card));
    if (card == "anchors.md") {  // YAML this subset does not read: said, and nothing taken
      EXPECT_NE(got.warning.find("line 2: anchors"), std::string::npos) << got.warning;
      EXPECT_EQ(got.front, json::object());
      continue;
    }
    EXPECT_EQ(got.front, want) << card << ": " << got.warning;
    if (card == "list.md") EXPECT_EQ(got.warning, "the front matter is not a mapping");
    else EXPECT_EQ(got.warning, "") << card;
  }
}

TEST(GeneralMetadata, KeysPackedAsTheConverterPacksThem) {
  const json cases = load("cases.json")["metadata"], expected = load("expected.json")["metadata"];
  ASSERT_EQ(cases.size(), expected.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    SCOPED_TRACE(c["name"].get<std::string>());
    leapconv::GeneralSources in;
    in.folder = c["folder"];
    in.total_params = c["total"];
    in.computed_size_label = c["size"];
    if (c.contains("card")) in.card = leapconv::read_model_card(tsup::slurp_text(kCards + c["card"].get<std::string>())).front;
    if (c.contains("config")) in.config = c["config"];
    if (c.contains("generation")) in.generation = c["generation"];
    if (c.contains("override")) in.override.values = c["override"], in.override.file = "meta.json";  // --metadata
    if (c.contains("model_name")) in.override.model_name = c["model_name"];                          // --model-name
    std::vector<std::string> ignored;
    leapconv::check_metadata_override(in.override, &ignored);
    EXPECT_EQ(ignored, c.value("ignored", std::vector<std::string>{})) << "the keys Metadata.load does not read from --metadata";
    GgufMetadata kv;
    std::vector<std::string> warnings;
    leapconv::set_general_metadata(kv, in, &warnings);

    std::vector<std::string> want_keys, got_keys;
    for (const json& k : expected[i]["keys"]) {
      const std::string key = k[0], packed = k[1];
      if (packed == "error") {  // gguf-py stops at it: left out here, and said
        EXPECT_FALSE(kv.has(key)) << key;
        bool said = false;
        for (const std::string& w : warnings) said = said || w.find(key) != std::string::npos || w.find(key.substr(key.rfind('.') + 1)) != std::string::npos;
        EXPECT_TRUE(said) << key << " left out without a warning";
        continue;
      }
      want_keys.push_back(key);
      const leapconv::GgufValue* v = kv.find(key);
      ASSERT_NE(v, nullptr) << key;
      std::vector<uint8_t> bytes;
      v->serialize(bytes);
      EXPECT_EQ(hex(bytes), packed) << key;
    }
    for (const leapconv::GgufKV& e : kv.entries()) got_keys.push_back(e.key);
    EXPECT_EQ(got_keys, want_keys) << "the same keys, in set_gguf_meta_model's order";
  }
}

// Through the CLI: a folder's README.md and generation_config.json reach the file; an adapter's
// model card (PEFT writes one) names its base model.
class GeneralMetadataCli : public tsup::TempDirTest {
 protected:
  // A small Llama in folder `name` with `readme` as its README.md and `generation` as its
  // generation_config.json ("": none), written as F16 to <name>.gguf; the run.
  tsup::RunResult convert(const std::string& name, const std::string& readme, const std::string& generation) {
    const std::string ck = path(name);
    gen::Spec s;
    s.dim = 64, s.hidden = 96, s.layers = 1, s.heads = 4, s.kv_heads = 2, s.vocab = 256, s.seq_len = 64;
    gen::write_checkpoint(ck, s);
    if (!readme.empty()) std::filesystem::copy_file(kCards + readme, ck + "/README.md");
    if (!generation.empty()) gen::write_text(ck + "/generation_config.json", generation);
    return tsup::run_cli({path(name + ".gguf"), "--model", ck, "--outtype", "f16", "--no-vocab"}, dir, 60.0);
  }
  tsup::RunResult again(const std::string& name, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {path(name + "-2.gguf"), "--model", path(name), "--outtype", "f16", "--no-vocab", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return tsup::run_cli(args, dir, 60.0);
  }
};

// The converter's --metadata FILE and --model-name NAME (their keys and order against gguf-py's
// own code: KeysPackedAsTheConverterPacksThem; whole files checked by hand against
// convert_hf_to_gguf.py): a key it does not read is said and ignored; a value it would stop at,
// a file that is not a JSON object, or either option for an adapter or another format is refused
// in one line naming the file and key, nothing written.
TEST_F(GeneralMetadataCli, MetadataFileAndModelNameAsTheConvertersOptions) {
  ASSERT_EQ(convert("Qwen3-0.6B", "qwen3.md", R"({"top_k": 20})").exit_code, 0);
  gen::write_text(path("meta.json"), R"({"general.name": "From the file", "general.author": "Someone",
    "general.tags": ["x"], "general.sampling.top_k": 40, "general.sampling.min_p": 0.05, "general.nmae": "typo"})");
  tsup::RunResult r = again("Qwen3-0.6B", {"--metadata", path("meta.json")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("meta.json: general.nmae is not a key llama.cpp's converter reads from --metadata: ignored"), std::string::npos) << r.err;
  tg3::File f = tg3::parse(tsup::slurp(path("Qwen3-0.6B-2.gguf")));
  auto str = [&](const char* k) { const auto* e = f.find(k); return e ? e->items.at(0) : std::string("<absent>"); };
  EXPECT_EQ(str("general.name"), "From the file");
  EXPECT_EQ(str("general.author"), "Someone");
  EXPECT_EQ(str("general.tags"), "x");  // (the card's tags replaced, not added to)
  EXPECT_EQ(str("general.license"), "apache-2.0") << "general.license is not one of the keys --metadata sets";
  EXPECT_EQ(tg3::item<int32_t>(*f.find("general.sampling.top_k")), 40);
  EXPECT_EQ(tg3::item<float>(*f.find("general.sampling.min_p")), 0.05f);
  r = again("Qwen3-0.6B", {"--metadata", path("meta.json"), "--model-name", "From the flag"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  f = tg3::parse(tsup::slurp(path("Qwen3-0.6B-2.gguf")));
  EXPECT_EQ(str("general.name"), "From the flag");

  std::filesystem::remove(path("Qwen3-0.6B-2.gguf"));
  for (const auto& [text, names] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {R"({"general.name": 7})", {"meta.json", "general.name", "not text"}},
           {R"({"general.sampling.top_k": 0.5})", {"meta.json", "general.sampling.top_k", "whole number"}},
           {R"({"general.tags": ["a", 1]})", {"meta.json", "general.tags", "mixes"}},
           {R"({"general.base_models": [{"name": 1}]})", {"meta.json", "general.base_models[0].name", "not text"}},
           {R"(["general.name"])", {"meta.json", "JSON object"}},
           {R"({"general.name": )", {"meta.json", "not valid JSON"}}}) {
    gen::write_text(path("meta.json"), text);
    tsup::expect_one_error(again("Qwen3-0.6B", {"--metadata", path("meta.json")}), names, path("Qwen3-0.6B-2.gguf"));
  }
  tsup::expect_one_error(tsup::run_cli({path("x.gguf-lite"), "--model", path("Qwen3-0.6B"), "--model-name", "n", "--no-vocab"}, dir, 60.0),
                         {"--model-name", "GGUF"}, path("x.gguf-lite"));
}

TEST_F(GeneralMetadataCli, AFoldersModelCardAndSamplingReachTheFile) {
  const tsup::RunResult r = convert("Qwen3-0.6B", "qwen3.md", R"({"top_k": 20, "top_p": 0.95, "temperature": 0.6})");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const tg3::File f = tg3::parse(tsup::slurp(path("Qwen3-0.6B.gguf")));
  auto str = [&](const char* k) { const auto* e = f.find(k); return e ? e->items.at(0) : std::string("<absent>"); };
  EXPECT_EQ(str("general.name"), "Qwen3 0.6B");
  EXPECT_EQ(str("general.basename"), "Qwen3");
  EXPECT_EQ(str("general.license"), "apache-2.0");
  EXPECT_EQ(str("general.base_model.0.repo_url"), "https://huggingface.co/Qwen/Qwen3-0.6B-Base");
  EXPECT_EQ(str("general.tags"), "text-generation");
  ASSERT_NE(f.find("general.sampling.top_k"), nullptr);
  EXPECT_EQ(tg3::item<int32_t>(*f.find("general.sampling.top_k")), 20);
  EXPECT_EQ(tg3::item<float>(*f.find("general.sampling.temp")), 0.6f);
  // (a model of a few hundred thousand parameters: "0.6B" is far from its size, so a finetune, as gguf-py decides)
  EXPECT_EQ(str("general.finetune"), "0.6b");
}

TEST_F(GeneralMetadataCli, AnUnreadableModelCardIsSaidAndLeftOut) {
  const tsup::RunResult r = convert("m", "anchors.md", "");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("README.md: line 2: anchors"), std::string::npos) << r.err;
  const tg3::File f = tg3::parse(tsup::slurp(path("m.gguf")));
  EXPECT_EQ(f.find("general.license"), nullptr);
  EXPECT_EQ(f.find("general.name")->items.at(0), "M");
}

// gguf-py reads an invalid generation_config.json as none ("not all models have valid
// generation_config.json"): the conversion goes on, said, without its sampling.
TEST_F(GeneralMetadataCli, AnInvalidGenerationConfigIsLeftOut) {
  const tsup::RunResult r = convert("g", "", R"({"top_k": 20, "temperature": 0.6,})");  // (a trailing comma)
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("generation_config.json: not a valid JSON object: left out"), std::string::npos) << r.err;
  const tg3::File f = tg3::parse(tsup::slurp(path("g.gguf")));
  EXPECT_EQ(f.find("general.sampling.top_k"), nullptr);
  EXPECT_NE(f.find("general.name"), nullptr);
}

}  // namespace
