#include "source/checkpoint.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/text.h"


namespace leapconv {

static std::string base_name(const std::string& path) {
  size_t p = path.find_last_of("/\\");
  return p == std::string::npos ? path : path.substr(p + 1);
}

const TensorRef* Checkpoint::find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

const SideFile* Checkpoint::side_file(const std::string& name) const {
  for (const SideFile& f : side_files)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<ByteSource*> Checkpoint::sources() const {
  std::vector<ByteSource*> v;
  for (auto& s : shards) v.push_back(s.get());
  return v;
}

static void check_index(const Checkpoint& ck, const std::string& text) {
  const std::string file = "model.safetensors.index.json";
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw ConvertError(file, "", "not a valid JSON object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) throw ConvertError(file, "", "has no weight_map");
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) throw ConvertError(file, it.key(), "shard name is not a string");
    const std::string shard = it->get<std::string>();
    const TensorRef* t = ck.find(it.key());
    if (!t) {
      bool have_shard = false;
      for (auto& s : ck.shards) have_shard |= base_name(s->name()) == shard;
      throw ConvertError(file, it.key(),
                         have_shard ? "listed in shard '" + shard + "' but not found there"
                                    : "listed in shard '" + shard + "', which is missing");
    }
    if (base_name(ck.shard_name(t->shard)) != shard)
      throw ConvertError(file, it.key(),
                         "listed in shard '" + shard + "' but found in '" +
                             base_name(ck.shard_name(t->shard)) + "'");
  }
}

// The shard file names an index's weight_map refers to (empty when it cannot be read: then
// check_index reports what is wrong with it).
static std::set<std::string> indexed_shards(const std::string& text) {
  std::set<std::string> names;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return names;
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return names;
  for (auto it = wm->begin(); it != wm->end(); ++it)
    if (it->is_string()) names.insert(it->get<std::string>());
  return names;
}

namespace {
// adapter_config.json: what convert_lora_to_gguf.py reads, and what it would write wrongly refused.
LoraAdapter read_lora_config(const std::string& text) {
  const std::string file = "adapter_config.json";
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw ConvertError(file, "", "is not a JSON object");
  LoraAdapter a;
  if (j.value("peft_type", std::string("LORA")) != "LORA")
    throw ConvertError(file, "peft_type", "is " + j["peft_type"].dump() + ": only LoRA adapters are converted");
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number())
    throw ConvertError(file, "lora_alpha", "is missing: llama.cpp scales an adapter by lora_alpha / r");
  a.alpha = j["lora_alpha"].get<double>();
  a.rank = config_int(j, "r", 0);
  if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string()) a.base = j["base_model_name_or_path"];
  for (const char* k : {"use_dora", "fan_in_fan_out"})  // the converter does not read them: llama.cpp would run it wrongly
    if (j.contains(k) && j[k].is_boolean() && j[k].get<bool>())
      throw ConvertError(file, k, std::string("is true: ") +
                                      (k == std::string("use_dora") ? "DoRA adapters scale the weight's columns, which a GGUF LoRA adapter cannot say"
                                                                    : "weights stored transposed (Conv1D) are not taken for adapters"));
  if (j.contains("use_rslora") && j["use_rslora"].is_boolean() && j["use_rslora"].get<bool>())
    throw ConvertError(file, "use_rslora", "is true: rank-stabilised LoRA scales by alpha / sqrt(r), llama.cpp by alpha / r");
  return a;
}
}  // namespace

void use_base_config(CheckpointFiles& adapter, std::string config_json) {
  adapter.config_json = std::move(config_json);
  adapter.params_json.reset();
}

std::vector<std::string> checkpoint_small_files() {
  std::vector<std::string> v = {"config.json", "params.json", "adapter_config.json", "model.safetensors.index.json"};
  for (const SideFileSpec& spec : side_file_specs()) v.push_back(spec.name);
  return v;
}

CheckpointFiles checkpoint_files_in(const Folder& folder, std::string label, const std::string& shard) {
  CheckpointFiles files;
  files.label = std::move(label);
  std::vector<std::string> shards;
  if (!shard.empty()) {
    shards.push_back(shard);
  } else {
    for (const std::string& n : folder.names()) {
      if (n.empty() || n[0] == '.') continue;
      if (ends_with(n, ".safetensors")) shards.push_back(n);
      else if (ends_with(n, ".bin") || ends_with(n, ".pt") || ends_with(n, ".pth") || ends_with(n, ".ckpt") ||
               ends_with(n, ".gguf"))
        files.other_weights.push_back(n);  // named when there are no safetensors
    }
    std::sort(files.other_weights.begin(), files.other_weights.end());
    std::sort(shards.begin(), shards.end());
  }
  for (const std::string& s : shards) files.shards.push_back(folder.open(s));
  if (folder.has("config.json")) files.config_json = folder.read("config.json");
  if (folder.has("params.json")) files.params_json = folder.read("params.json");
  if (folder.has("adapter_config.json")) {  // a PEFT LoRA adapter
    if (folder.size("adapter_config.json") > (int64_t(1) << 20))
      throw ConvertError(folder.path("adapter_config.json"), "", "is more than 1 MiB: not an adapter's config");
    files.adapter_config_json = folder.read("adapter_config.json");
    files.adapter_folder_config_json = files.config_json;
  }
  if (shard.empty() && folder.has("model.safetensors.index.json"))
    files.index_json = folder.read("model.safetensors.index.json");
  for (const SideFileSpec& spec : side_file_specs()) {
    if (!folder.has(spec.name)) continue;
    check_side_file_size(spec.name, folder.size(spec.name));  // bounded before it is read
    files.side_files.push_back({spec.name, folder.read(spec.name)});
  }
  return files;
}

Checkpoint open_checkpoint(CheckpointFiles files) {
  Checkpoint ck;
  ck.label = files.label;
  if (files.index_json) {
    const std::set<std::string> listed = indexed_shards(*files.index_json);
    for (auto& s : files.shards) {
      if (listed.empty() || listed.count(base_name(s->name()))) ck.shards.push_back(std::move(s));
      else
        ck.warnings.push_back(s->name() + " is not named in model.safetensors.index.json: left out (as Hugging Face's "
                                          "loader leaves it out)");
    }
  } else {
    ck.shards = std::move(files.shards);
  }
  if (ck.shards.empty()) {
    std::string others;
    for (const std::string& n : files.other_weights) others += (others.empty() ? "" : ", ") + n;
    throw ConvertError(ck.label, "", "no .safetensors files found" +
                                         (others.empty() ? std::string()
                                                         : " (it has " + others + ": PyTorch pickles and GGUF files are "
                                                           "not read; the weights are needed as *.safetensors)"));
  }
  for (size_t i = 0; i < ck.shards.size(); ++i) {
    ByteSource& src = *ck.shards[i];
    ck.source_bytes += src.size();
    ck.headers.push_back(read_safetensors_header(src));
    for (const TensorInfo& t : ck.headers.back().tensors) {
      if (auto prev = ck.find(t.name))
        throw ConvertError(src.name(), t.name,
                           "also present in " + ck.shard_name(prev->shard));
      ck.tensors[t.name] = TensorRef{int(i), t};
      ck.order.push_back(t.name);
    }
  }
  if (files.index_json) check_index(ck, *files.index_json);
  for (const SideFileSpec& spec : side_file_specs())  // in table order, whatever order they came in
    for (SideFile& f : files.side_files)
      if (f.name == spec.name) {
        if (validate_side_file(f)) ck.side_files.push_back(std::move(f));
        else ck.warnings.push_back(f.name + ": not a valid JSON object: left out (as llama.cpp's converter leaves it out)");
      }
  if (files.config_json)
    ck.config = parse_model_config("config.json", *files.config_json);
  else if (files.params_json)
    ck.config = parse_model_config("params.json", *files.params_json);
  if (files.adapter_config_json) {
    ck.lora = read_lora_config(*files.adapter_config_json);
    if (files.adapter_folder_config_json) {  // (Metadata.load_hf_parameters: json.load, then .get)
      ck.lora->folder_config = nlohmann::json::parse(*files.adapter_folder_config_json, nullptr, false);
      if (!ck.lora->folder_config.is_object())
        throw ConvertError(files.label + "/config.json", "", "is not a JSON object (llama.cpp's converter reads the adapter folder's config.json for its name)");
    }
  }
  const SideFile* hq = ck.side_file("hf_quant_config.json");
  ck.quant = read_quantization(ck.config ? &*ck.config : nullptr, ck.tensors, ck.shards, hq ? &hq->bytes : nullptr);
  // An NVFP4 weight stored under another name (compressed-tensors' `<x>.weight_packed`) is
  // `<x>.weight`, moved to the end (the converter pops and re-adds it), in its codes' order.
  std::vector<std::string> renamed;
  for (const std::string& n : ck.order)
    for (const auto& [name, w] : ck.quant.nvfp4)
      if (w.codes == n && name != n) renamed.push_back(name);
  for (const std::string& name : renamed) {
    TensorRef t = ck.tensors.at(ck.quant.nvfp4.at(name).codes);
    t.info.name = name;
    ck.tensors[name] = t;
    ck.order.push_back(name);
  }
  // An NVFP4 weight is the weight it stands for, [rows, cols] (as a packed weight is): its codes
  // are read as what they are, U8 [rows, cols / 2] (nvfp4_codes_source).
  for (const auto& [name, w] : ck.quant.nvfp4)
    if (auto it = ck.tensors.find(name); it != ck.tensors.end()) it->second.info.shape = w.shape;
  // A packed weight is a tensor under the converter's name, after every other tensor in its
  // codes' order (dequant_model's new_tensors, added to model_tensors last).
  // (BitNet's codes are under the weight's own name: the weight stays where it is, with its shape.)
  std::vector<std::string> packed;
  for (const std::string& n : ck.order)
    for (const auto& [name, p] : ck.quant.packed) {
      if (p.codes != n) continue;
      if (name == n) ck.tensors[name].info.shape = p.shape;
      else packed.push_back(name);
    }
  for (const std::string& name : packed) {
    const PackedWeight& p = ck.quant.packed.at(name);
    if (ck.tensors.count(name))
      throw ConvertError(ck.shard_name(ck.tensors[name].shard), name, "is in the checkpoint beside its packed codes " + p.codes);
    TensorRef t = ck.tensors.at(p.codes);
    t.info.name = name;
    t.info.shape = p.shape;
    ck.tensors[name] = t;
    ck.order.push_back(name);
  }
  if (!ck.quant.dropped.empty())
    ck.order.erase(std::remove_if(ck.order.begin(), ck.order.end(), [&](const std::string& n) { return ck.quant.dropped.count(n) > 0; }),
                   ck.order.end());
  return ck;
}

std::map<std::string, Checkpoint::Stored> Checkpoint::stored_by_dtype() const {
  std::map<std::string, Stored> m;
  for (const SafetensorsHeader& h : headers)
    for (const TensorInfo& t : h.tensors) {
      Stored& s = m[dtype_name(t.dtype)];
      ++s.tensors, s.numel += t.numel(), s.bytes += t.nbytes();
    }
  return m;
}

std::string lora_base_name(const std::string& name, bool* is_a) {
  std::string w = name.rfind("base_model.model.", 0) == 0 ? name.substr(17) : name;
  for (const char* part : {".lora_A.weight", ".lora_B.weight"})
    if (const size_t at = w.find(part); at != std::string::npos) {
      *is_a = part[6] == 'A';
      return w.replace(at, 14, ".weight");
    }
  return "";
}

void merge_lora(Checkpoint& base, Checkpoint&& adapter) {
  if (!adapter.lora) throw ConvertError(adapter.label, "", "internal: not a LoRA adapter");
  if (adapter.lora->rank < 1) throw ConvertError("adapter_config.json", "r", "must be 1 or more to merge the adapter");
  const int first = int(base.shards.size());
  std::map<std::string, std::pair<const TensorRef*, const TensorRef*>> pairs;  // base weight -> A, B
  for (const auto& [name, t] : adapter.tensors) {
    bool is_a = false;
    const std::string w = lora_base_name(name, &is_a);
    if (w.empty()) throw ConvertError(adapter.shard_name(t.shard), name, "is not a lora_A or lora_B tensor");
    (is_a ? pairs[w].first : pairs[w].second) = &t;
  }
  for (auto& s : adapter.shards) base.shards.push_back(std::move(s));
  for (auto& h : adapter.headers) base.headers.push_back(std::move(h));
  for (const auto& [w, ab] : pairs) {
    const TensorRef* some = ab.first ? ab.first : ab.second;
    const std::string file = base.shard_name(first + some->shard);
    if (!ab.first || !ab.second) throw ConvertError(file, some->info.name, std::string("has no ") + (ab.first ? "lora_B" : "lora_A") + " beside it");
    const TensorRef* weight = base.find(w);
    if (!weight) throw ConvertError(file, some->info.name, "adapts " + w + ", which the base checkpoint does not have");
    const auto &sw = weight->info.shape, &sa = ab.first->info.shape, &sb = ab.second->info.shape;
    if (sw.size() != 2 || sa.size() != 2 || sb.size() != 2 || sa[1] != sw[1] || sb[0] != sw[0] || sa[0] != sb[1])
      throw ConvertError(file, ab.first->info.name, "A " + shape_string(sa) + " and B " + shape_string(sb) + " do not make a " +
                                                        shape_string(sw) + " update of " + w);
    for (const TensorRef* t : {ab.first, ab.second})
      if (!dtype_is_float(t->info.dtype) || source_dtype(t->info.dtype).needs_scale)
        throw ConvertError(file, t->info.name, std::string("dtype ") + dtype_name(t->info.dtype) + ": A and B are F32, F16 or BF16");
    // (scaled by alpha / its own rank, as llama.cpp scales an adapter: A's rows)
    Checkpoint::LowRank lr{*ab.first, *ab.second, float(adapter.lora->alpha / double(sa[0]))};
    lr.a.shard += first, lr.b.shard += first;
    base.merged[w] = lr;
  }
  base.source_bytes += adapter.source_bytes;
}

}  // namespace leapconv
