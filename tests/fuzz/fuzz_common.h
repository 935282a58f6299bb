// Shared by the libFuzzer targets and their seed generator: a small generated checkpoint held in
// memory, conversions into memory, and the rule every target follows: a ConvertError (one
// error line naming the file and tensor) is the only acceptable failure. Anything else that
// escapes (a json exception, std::length_error, a crash, a sanitizer report) is a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint_gen.h"
#include "engine/run.h"
#include "formats/convert.h"

namespace fuzz {

using namespace leapconv;

// fuzz_tokenizer: what separates tokenizer.json / tokenizer.model from tokenizer_config.json.
constexpr std::string_view kConfigMarker = "\xff\xfe<tokenizer_config.json>";

// The checkpoint the JSON, verify and seed code use: small enough that a forward pass over it
// costs microseconds, with GQA, an untied classifier and rows of 64 (the FFN's down projection,
// so Q4 groups occur).
inline gen::Spec small_spec(int shards = 1) {
  gen::Spec s;
  s.dim = 32;
  s.hidden = 64;
  s.layers = 1;
  s.heads = 2;
  s.kv_heads = 1;
  s.vocab = 16;
  s.seq_len = 64;
  s.dtype = "bf16";
  s.shards = shards;
  s.rope_theta = 500000.0;
  return s;
}

// The checkpoint's files, read into memory once (written to a scratch folder, then removed).
struct CheckpointBytes {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> shards;  // name order
  std::string config_json, index_json;
  std::string adapter_config_json;  // a LoRA adapter's (then shards are its adapter_model.safetensors)
  std::string hf_quant_config;      // ModelOpt's hf_quant_config.json ("" when none)
};

// A PEFT LoRA adapter of the small Llama: its adapter_model.safetensors, adapter_config.json and
// the base's config.json.
inline CheckpointBytes make_adapter_bytes() {
  char tmpl[] = "/tmp/leapconv-fuzz-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (!dir) std::abort();
  const std::string base = std::string(dir) + "/base", adapter = std::string(dir) + "/adapter";
  gen::Spec spec = small_spec(1);
  gen::write_checkpoint(base, spec);
  gen::LoraSpec l;
  l.r = 4;
  gen::write_lora_adapter(base, adapter, l);
  CheckpointBytes b;
  b.shards.push_back({"adapter_model.safetensors", gen::read_file(adapter + "/adapter_model.safetensors")});
  const std::vector<uint8_t> c = gen::read_file(base + "/config.json"), a = gen::read_file(adapter + "/adapter_config.json");
  b.config_json.assign(c.begin(), c.end());
  b.adapter_config_json.assign(a.begin(), a.end());
  std::filesystem::remove_all(dir);
  return b;
}

// arch: the generator's family ("" Llama; "gpt-oss": MXFP4 experts, "qwen2moe": stacked experts
// with a shared one, small).
// quant: a quantized checkpoint's kind (gen::quantize_checkpoint), "" for none.
// dim: the hidden size instead of small_spec's (NVFP4 takes rows of whole 64-value blocks: 64).
inline CheckpointBytes make_checkpoint_bytes(int shards = 1, const std::string& arch = "", const std::string& quant = "", int64_t dim = 0) {
  char tmpl[] = "/tmp/leapconv-fuzz-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (!dir) std::abort();
  gen::Spec spec = small_spec(shards);
  if (dim > 0) spec.dim = dim;
  if (!arch.empty()) {
    spec.arch = arch;
    spec.experts = 4;
    spec.experts_used = 2;
    spec.expert_hidden = 32;
    spec.shared_hidden = 32;
    if (arch == "gpt-oss") spec.head_dim = 16;
  }
  gen::write_checkpoint(dir, spec);
  if (!quant.empty()) {
    gen::quantize_checkpoint(dir, quant, 32, std::string(dir) + "-ref");
    std::filesystem::remove_all(std::string(dir) + "-ref");
  }
  CheckpointBytes b;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) b.shards.push_back({n, gen::read_file(std::string(dir) + "/" + n)});
  const std::vector<uint8_t> c = gen::read_file(std::string(dir) + "/config.json");
  b.config_json.assign(c.begin(), c.end());
  if (std::filesystem::exists(std::string(dir) + "/hf_quant_config.json")) {
    const std::vector<uint8_t> h = gen::read_file(std::string(dir) + "/hf_quant_config.json");
    b.hf_quant_config.assign(h.begin(), h.end());
  }
  if (std::filesystem::exists(std::string(dir) + "/model.safetensors.index.json")) {
    const std::vector<uint8_t> i = gen::read_file(std::string(dir) + "/model.safetensors.index.json");
    b.index_json.assign(i.begin(), i.end());
  }
  std::filesystem::remove_all(dir);
  return b;
}

inline CheckpointFiles files_of(const CheckpointBytes& b) {
  CheckpointFiles f;
  f.label = "fuzz-model";
  for (const auto& [name, bytes] : b.shards) f.shards.push_back(std::make_unique<MemorySource>(name, bytes));
  f.config_json = b.config_json;
  if (!b.index_json.empty()) f.index_json = b.index_json;
  if (!b.adapter_config_json.empty()) f.adapter_config_json = b.adapter_config_json;
  if (!b.hf_quant_config.empty()) f.side_files.push_back({"hf_quant_config.json", b.hf_quant_config});
  return f;
}

// A whole conversion into memory.
inline std::vector<uint8_t> convert(const Checkpoint& ck, const ConvertOptions& opt) {
  const PlannedConversion pc = plan_conversion(ck, opt);
  MemorySink sink;
  PipelineOptions po;
  po.threads = 0;
  run_plan(pc.plan, ck.sources(), sink, po, nullptr);
  sink.bytes().resize(size_t(pc.plan.total_bytes()));
  return std::move(sink.bytes());
}

// A conversion into memory of every file it writes (a split GGUF: its parts).
inline std::vector<std::vector<uint8_t>> convert_files(const Checkpoint& ck, const ConvertOptions& opt) {
  const PlannedConversion pc = plan_conversion(ck, opt);
  std::vector<MemorySink> sinks(pc.plan.files.size());
  std::vector<ByteSink*> list;
  for (MemorySink& s : sinks) list.push_back(&s);
  PipelineOptions po;
  po.threads = 0;
  run_plan(pc.plan, ck.sources(), list, po, nullptr);
  std::vector<std::vector<uint8_t>> files;
  for (size_t i = 0; i < sinks.size(); ++i) {
    sinks[i].bytes().resize(size_t(pc.plan.files[i].total_bytes));
    files.push_back(std::move(sinks[i].bytes()));
  }
  return files;
}

// fuzz_gguf's input holds the parts of a split file one after the other, this between them.
constexpr char kPartMarker[] = "\n--next part--\n";

// The conversions the seeds and the verify target use: every format, a few types.
inline std::vector<std::pair<std::string, ConvertOptions>> conversions() {
  std::vector<std::pair<std::string, ConvertOptions>> v;
  auto add = [&](const std::string& name, const std::string& format, int version, QType scheme, int gguf_ftype) {
    ConvertOptions o;
    o.format = format;
    o.version = version;
    o.gguf.default_scheme = scheme;
    o.gguf_file_type = gguf_ftype;
    o.vocab.allow_no_vocab = true;
    v.push_back({name, o});
  };
  add("leap-v1", "leap", 1, QType::F32, -1);
  add("leap-v2", "leap", 2, QType::F32, -1);
  add("gguf-lite-q8", "gguf-lite", 1, QType::Q8Channel, -1);
  add("gguf-lite-q4", "gguf-lite", 1, QType::Q4Group64, -1);
  add("gguf-lite-f16", "gguf-lite", 1, QType::F16, -1);
  add("gguf-q8_0", "gguf", 1, QType::Q8_0, -1);
  add("gguf-q4_0", "gguf", 1, QType::Q4_0, 2);  // (LLAMA_FTYPE_MOSTLY_Q4_0: llama-quantize's preset)
  add("gguf-f16", "gguf", 1, QType::F16, -1);
  return v;
}

}  // namespace fuzz
