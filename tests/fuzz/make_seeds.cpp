// make_fuzz_seeds <dir>: writes the seed corpus of every fuzz target into <dir>/<target>/, from
// the tests' own generator (tests/gen) and the converter itself: generated shards, their
// config / params / index files, rules files, LEAP / GGUF-lite / GGUF conversions of a
// generated model, and tokenizer files (a small tokenizer.json, the tests' real SentencePiece
// model).
#include <cstdio>
#include <fstream>
#include <sstream>

#include "fuzz_common.h"
#include "container/gguf_file.h"
#include "imatrix_file.h"

using namespace leapconv;

namespace {

std::string g_root;

void put(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string dir = g_root + "/" + target;
  std::filesystem::create_directories(dir);
  gen::write_file(dir + "/" + name, bytes);
}
void put(const std::string& target, const std::string& name, const std::string& text, int mode = -1) {
  std::vector<uint8_t> b;
  if (mode >= 0) b.push_back(uint8_t(mode));
  b.insert(b.end(), text.begin(), text.end());
  put(target, name, b);
}

gen::RawTensor raw(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, int bytes_per) {
  gen::RawTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  t.bytes.resize(size_t(n * bytes_per));
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = uint8_t(i * 37 + 11);
  return t;
}

const char* kTokenizerJson = R"({"version": "1.0", "added_tokens": [{"id": 6, "content": "<s>", "special": true}],
  "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": null, "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false, "ignore_merges": false,
            "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "\u0120a": 5}, "merges": ["a b", "ab c"]}})";
const char* kUnigramJson = R"({"normalizer": null,
  "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true},
  "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": false,
            "vocab": [["<unk>", 0.0], ["\u2581a", -1.5], ["b", -2.25], ["\u2581", -3.0], ["a", -4.0]]},
  "added_tokens": [{"id": 0, "content": "<unk>", "special": true}]})";
const char* kTokenizerConfig = R"({"add_bos_token": true, "bos_token": "<s>", "eos_token": "</s>",
  "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}",
  "added_tokens_decoder": {"6": {"content": "<s>", "special": true, "normalized": false}}})";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_seeds <dir>\n");
    return 2;
  }
  g_root = argv[1];
  try {
    // ---- safetensors: generated shards and hand-made edge cases ----
    const fuzz::CheckpointBytes one = fuzz::make_checkpoint_bytes(1), two = fuzz::make_checkpoint_bytes(2);
    put("safetensors", "llama-1shard", one.shards[0].second);
    put("safetensors", "llama-shard1of2", two.shards[0].second);
    char tmpl[] = "/tmp/leapconv-seeds-XXXXXX";
    const std::string tmp = ::mkdtemp(tmpl);
    const std::vector<std::vector<gen::RawTensor>> edge = {
        {raw("w", "F32", {4, 64}, 4), raw("b", "F16", {64}, 2), raw("e", "BF16", {0, 64}, 2)},
        {raw("x", "I64", {3}, 8), raw("y", "U8", {2, 2, 2}, 1), raw("z", "F64", {2}, 8), raw("s", "F32", {}, 4)},
        {raw("odd", "BF16", {3, 5}, 2), raw("long.name.with.layers.0.mlp.up_proj.weight", "F16", {2, 128}, 2)},
    };
    for (size_t i = 0; i < edge.size(); ++i) {
      gen::write_safetensors(tmp + "/e.safetensors", edge[i]);
      put("safetensors", "edge" + std::to_string(i), gen::read_file(tmp + "/e.safetensors"));
    }
    // ---- the checkpoint's JSON files (first byte: which file) ----
    put("checkpoint_json", "config", one.config_json, 0);
    gen::Spec meta = fuzz::small_spec();
    meta.config_json = false;
    meta.params_json = true;
    gen::write_checkpoint(tmp + "/meta", meta);
    const std::vector<uint8_t> params = gen::read_file(tmp + "/meta/params.json");
    put("checkpoint_json", "params", std::string(params.begin(), params.end()), 1);
    put("checkpoint_json", "index", two.index_json, 2);
    put("checkpoint_json", "rules-lite", R"([{"pattern": "*.mlp.*", "scheme": "q4"}, {"pattern": "*", "scheme": "f16"}])", 3);
    put("checkpoint_json", "rules-gguf", R"({"blk.*.ffn_down.weight": "Q8_0", "output.weight": "Q6_K"})", 3);
    put("checkpoint_json", "tokenizer-config", kTokenizerConfig, 4);
    put("checkpoint_json", "generation-config", R"({"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": true})", 5);
    for (const auto& [arch, mode] : {std::pair{"gpt-oss", 6}, std::pair{"qwen2moe", 7}}) {  // the MoE checkpoints' own configs
      const fuzz::CheckpointBytes m = fuzz::make_checkpoint_bytes(1, arch);
      put("checkpoint_json", std::string("config-") + arch, m.config_json, mode);
    }
    for (const auto& [kind, mode] : {std::pair{"fp8-block", 8}, std::pair{"gptq4", 9}, std::pair{"ct-int4-zp", 10}}) {  // quantized
      const fuzz::CheckpointBytes q = fuzz::make_checkpoint_bytes(1, "", kind);
      put("checkpoint_json", std::string("config-") + kind, q.config_json, mode);
      put("checkpoint_json", std::string("shard-") + kind, std::string(q.shards[0].second.begin(), q.shards[0].second.end()), mode + 3);
    }
    {  // NVFP4: ModelOpt's config.json (240), shard (241), hf_quant_config.json (242); compressed-tensors' shard (243)
      const fuzz::CheckpointBytes m = fuzz::make_checkpoint_bytes(1, "", "modelopt-nvfp4", 64), c = fuzz::make_checkpoint_bytes(1, "", "ct-nvfp4", 64);
      put("checkpoint_json", "config-modelopt-nvfp4", m.config_json, 240);
      put("checkpoint_json", "shard-modelopt-nvfp4", std::string(m.shards[0].second.begin(), m.shards[0].second.end()), 241);
      put("checkpoint_json", "hf-quant-config-nvfp4", m.hf_quant_config, 242);
      put("checkpoint_json", "shard-ct-nvfp4", std::string(c.shards[0].second.begin(), c.shards[0].second.end()), 243);
      const fuzz::CheckpointBytes b = fuzz::make_checkpoint_bytes(1, "", "bitnet");  // BitNet: config.json (244), shard (245)
      put("checkpoint_json", "config-bitnet", b.config_json, 244);
      put("checkpoint_json", "shard-bitnet", std::string(b.shards[0].second.begin(), b.shards[0].second.end()), 245);
    }
    {  // a LoRA adapter: its config (14) and its shard (15)
      const fuzz::CheckpointBytes a = fuzz::make_adapter_bytes();
      put("checkpoint_json", "adapter-config", a.adapter_config_json, 14);
      put("checkpoint_json", "adapter-shard", std::string(a.shards[0].second.begin(), a.shards[0].second.end()), 15);
    }
    put("checkpoint_json", "config-rope",
        R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32, "max_position_embeddings": 64,
            "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 32}})",
        0);
    // ---- written files: every format, from the fixed checkpoint ----
    const Checkpoint ck = open_checkpoint(fuzz::files_of(one));
    for (const auto& [name, opt] : fuzz::conversions()) {
      const std::vector<uint8_t> file = fuzz::convert(ck, opt);
      put("verify", name, file);
      if (opt.format == "leap") put("leap", name, file);
      if (opt.format == "gguf-lite") put("gguf_lite", name, file);
      if (opt.format == "gguf") put("gguf", name, file);
    }
    // ---- a split GGUF: its parts, one after the other (fuzz_gguf reads them together) ----
    {
      ConvertOptions o;
      for (const auto& [name, c] : fuzz::conversions())
        if (name == "gguf-q8_0") o = c;
      o.split_max_tensors = 4;
      std::vector<uint8_t> joined;
      for (const std::vector<uint8_t>& part : fuzz::convert_files(ck, o)) {
        if (!joined.empty()) joined.insert(joined.end(), fuzz::kPartMarker, fuzz::kPartMarker + sizeof fuzz::kPartMarker - 1);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      put("gguf", "gguf-q8_0-split", joined);
    }
    // ---- GGUF files holding only a vocabulary (fuzz_gguf tokenizes with it) ----
    const std::string sp = "\xe2\x96\x81";
    auto vocab_only = [&](const std::string& name, const std::string& model, std::vector<std::string> tokens,
                          std::vector<int32_t> types, std::vector<std::string> merges) {
      GgufMetadata kv;
      kv.set_string("tokenizer.ggml.model", model);
      if (model == "gpt2") kv.set_string("tokenizer.ggml.pre", "llama-bpe");
      std::vector<float> scores;
      for (size_t i = 0; i < tokens.size(); ++i) scores.push_back(-float(i));
      kv.set_string_array("tokenizer.ggml.tokens", std::move(tokens));
      kv.set_f32_array("tokenizer.ggml.scores", scores);
      kv.set_i32_array("tokenizer.ggml.token_type", types);
      if (!merges.empty()) kv.set_string_array("tokenizer.ggml.merges", std::move(merges));
      kv.set_u32("tokenizer.ggml.bos_token_id", 1);
      const GgufLayout layout = layout_gguf(kv, {});
      MemorySink sink;
      write_gguf_header(sink, layout);
      write_gguf_padding(sink, layout);
      put("gguf", name, sink.bytes());
    };
    std::vector<std::string> spm = {"<unk>", "<s>", "</s>", sp, "a", "b", sp + "a", "ab", sp + "H", "e", "l", "o"};
    std::vector<int32_t> spm_types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      spm.push_back(hex);
      spm_types.push_back(6);
    }
    vocab_only("vocab-spm", "llama", spm, spm_types, {});
    vocab_only("vocab-bpe", "gpt2", {"a", "<s>", "b", "ab", "\xc4\xa0", "\xc4\xa0" "a", "H", "e", "l", "lo"}, {1, 3, 1, 1, 1, 1, 1, 1, 1, 1},
               {"a b", "\xc4\xa0 a", "l o"});
    // ---- importance matrices: both formats, a dense entry and one of stacked experts ----
    {
      const std::vector<timx::Entry> es = {timx::make_entry("blk.0.attn_q.weight", 16, 1, 1, 40),
                                           timx::make_entry("blk.0.ffn_down_exps.weight", 8, 3, 2, 40)};
      put("imatrix_dat", "legacy", timx::legacy_file({es[0]}, 3, "calibration.txt"));
      put("imatrix_dat", "legacy-no-trailer", timx::legacy_file(es, -1, ""));
      put("imatrix_gguf", "gguf", timx::gguf_file(es, 3, 512, {"calibration.txt"}));
    }
    // ---- tokenizer files (first byte: 0 tokenizer.json, 1 tokenizer.model, +2: then the marker and tokenizer_config) ----
    put("tokenizer", "bpe-json", kTokenizerJson, 0);
    put("tokenizer", "unigram-json", kUnigramJson, 0);
    put("tokenizer", "bpe-json-config", std::string(kTokenizerJson) + std::string(fuzz::kConfigMarker) + kTokenizerConfig, 2);
#ifdef VOCAB_TEST_DATA
    std::ifstream mf(std::string(VOCAB_TEST_DATA) + "/tiny_sp_bpe.model", std::ios::binary);
    std::ostringstream ms;
    ms << mf.rdbuf();
    if (!ms.str().empty()) {
      put("tokenizer", "sentencepiece-model", ms.str(), 1);
      put("tokenizer", "sentencepiece-model-config", ms.str() + std::string(fuzz::kConfigMarker) + kTokenizerConfig, 3);
    }
    // ---- model cards: the tests' README.md front matters ----
    for (const auto& e : std::filesystem::directory_iterator(std::string(VOCAB_TEST_DATA) + "/model_cards")) {
      if (e.path().extension() != ".md") continue;
      std::ifstream cf(e.path(), std::ios::binary);
      std::ostringstream cs;
      cs << cf.rdbuf();
      put("model_card", e.path().stem().string(), cs.str());
    }
    put("model_card", "id", std::string("id:Qwen2.5-Coder-32B-Instruct-v1.1-8x7B-q4_k_m\n---\nlicense: mit\n---\n"));
    put("model_card", "meta", std::string("id:Qwen3-0.6B\nmeta:{\"general.name\": \"N\", \"general.tags\": [\"a\"], "
                                          "\"general.base_models\": [{\"name\": \"B\"}], \"general.sampling.top_k\": 40}\n"
                                          "---\nlicense: mit\n---\n"));
#endif
    std::filesystem::remove_all(tmp);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
