#include "source/quantized.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text.h"
#include "source/checkpoint.h"
#include "source/model_config.h"

namespace leapconv {

namespace {

using json = nlohmann::json;

// One quant_method as dequant_model reads it: a tensor named `<x><suffix>` scales `<x><weight>`;
// tensors ending in a `drops` suffix are not used.
struct ScaleName {
  const char* suffix;
  const char* weight;
};
struct MethodRow {
  const char* method;
  std::vector<ScaleName> scales;
  std::vector<const char*> drops;
  bool orphan_scales_dropped;  // a scale without its weight is dropped (modelopt), not an error
};

const std::vector<MethodRow> kMethods = {
    {"fp8", {{"_scale_inv", ""}, {".qscale_weight", ".weight"}}, {".activation_scale", "_activation_scale", ".qscale_act"}, false},
    {"compressed-tensors", {{".weight_scale", ".weight"}}, {}, false},
    {"modelopt", {{".weight_scale", ".weight"}}, {".input_scale", ".k_scale", ".v_scale"}, true},
};


// A [rows, cols] block size from a JSON list of two whole numbers >= 1 (null: none).
std::vector<int64_t> block_of(const json& v, const std::string& key) {
  if (v.is_null()) return {};
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() || !v[1].is_number_unsigned() ||
      v[0].get<uint64_t>() < 1 || v[1].get<uint64_t>() < 1 || v[0].get<uint64_t>() > (1u << 30) ||
      v[1].get<uint64_t>() > (1u << 30))
    throw ConvertError("config.json", key, "must be [rows, cols] of two whole numbers >= 1 (it is " + v.dump() + ")");
  return {int64_t(v[0].get<uint64_t>()), int64_t(v[1].get<uint64_t>())};
}

std::string text_of(const json& q, const char* key) {
  auto it = q.find(key);
  return it != q.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// How many values one scale covers, from the shapes when the config gives no block
// (dequant_simple broadcasts the scale over the weight, aligned at the first dimension).
void resolve_block(WeightScale& ws, const TensorInfo& w, const TensorInfo& s, const std::string& file) {
  int64_t rows = 1, cols = w.shape.empty() ? 1 : w.shape.back();
  for (size_t i = 0; i + 1 < w.shape.size(); ++i) rows *= w.shape[i];
  if (s.numel() == 1) {  // one scale for the tensor
    ws.block_rows = std::max<int64_t>(rows, 1), ws.block_cols = std::max<int64_t>(cols, 1);
    ws.scale_view = {1, 1};
    return;
  }
  // one per row: [R...] or [R..., 1] against [R..., C]
  std::vector<int64_t> lead(w.shape.begin(), w.shape.end() - (w.shape.empty() ? 0 : 1)), with_one = lead;
  with_one.push_back(1);
  if (!w.shape.empty() && (s.shape == lead || s.shape == with_one)) {
    ws.block_rows = 1, ws.block_cols = std::max<int64_t>(cols, 1);
    ws.scale_view = {rows, 1};
    return;
  }
  throw ConvertError(file, s.name, "shape " + shape_string(s.shape) + " gives " + w.name + " " + shape_string(w.shape) +
                                       " neither one scale nor one per row, and the config names no block size");
}

// A whole number of a config object, or refused naming the key.
int64_t whole(const json& o, const char* k, const std::string& key, const std::string& file) {
  auto it = o.find(k);
  if (it == o.end() || !it->is_number_integer()) throw ConvertError(file, key, "must be a whole number");
  return it->get<int64_t>();
}

// GPTQ's qweight / qzeros / scales / g_idx quartets: the weight `<x>.weight` of each `<x>.qweight`.
void read_gptq(Quantization& q, const json& qc, const std::map<std::string, TensorRef>& tensors, const std::string& file,
               const std::vector<std::unique_ptr<ByteSource>>& shards) {
  const int64_t bits = whole(qc, "bits", "quantization_config.bits", file);
  if (bits == 3) throw ConvertError(file, "quantization_config.bits", "is 3: llama.cpp's converter has no 3-bit GPTQ decoding");
  if (bits != 2 && bits != 4 && bits != 8) throw ConvertError(file, "quantization_config.bits", "is " + std::to_string(bits) + ": GPTQ takes 2, 4 or 8");
  const std::string format = qc.contains("checkpoint_format") && qc["checkpoint_format"].is_string() ? qc["checkpoint_format"].get<std::string>() : "gptq";
  if (format != "gptq" && format != "gptq_v2")
    throw ConvertError(file, "quantization_config.checkpoint_format", "is \"" + format + "\": GPTQ checkpoints are \"gptq\" or \"gptq_v2\"");
  q.format = format == "gptq" ? "" : format;  // (v1, the default: said by the method)
  q.block = std::to_string(bits) + "-bit codes";
  for (const auto& [name, ref] : tensors) {
    if (!ends_with(name, ".qweight")) continue;
    const std::string base = name.substr(0, name.size() - 8);
    PackedWeight p;
    p.packing = Packing::GptqColumns;
    p.codes = name, p.scale = base + ".scales", p.zeros = base + ".qzeros", p.group_index = base + ".g_idx";
    for (const std::string* t : {&p.scale, &p.zeros, &p.group_index})
      if (!tensors.count(*t))
        throw ConvertError(shards[size_t(ref.shard)]->name(), *t, "missing from the checkpoint: GPTQ's " + name + " needs it");
    p.bits = int(bits);
    p.zero_bias = format == "gptq" ? 1 : 0;  // v1 stores zero - 1
    if (ref.info.shape.size() != 2)
      throw ConvertError(shards[size_t(ref.shard)]->name(), name, "shape " + shape_string(ref.info.shape) + ": GPTQ codes are 2-D");
    p.shape = {ref.info.shape[1], ref.info.shape[0] * (32 / bits)};
    for (const char* part : {".qweight", ".scales", ".qzeros", ".g_idx"}) q.dropped.insert(base + part);
    q.packed[base + ".weight"] = p;
  }
}

// compressed-tensors pack-quantized: `<x>.weight_packed`, `_scale`, `_shape` (its [rows, cols]) and
// an optional `_zero_point`.
void read_pack_quantized(Quantization& q, const json& w, const std::string& wkey, const std::map<std::string, TensorRef>& tensors,
                         const std::string& file, const std::vector<std::unique_ptr<ByteSource>>& shards) {
  if (text_of(w, "strategy") != "group") throw ConvertError(file, wkey + ".strategy", "must be \"group\" for pack-quantized (as llama.cpp's converter asserts)");
  if (w.contains("type") && text_of(w, "type") != "int") throw ConvertError(file, wkey + ".type", "must be \"int\" for pack-quantized");
  const int64_t bits = whole(w, "num_bits", wkey + ".num_bits", file), group = whole(w, "group_size", wkey + ".group_size", file);
  if (bits < 1 || bits > 8) throw ConvertError(file, wkey + ".num_bits", "is " + std::to_string(bits) + ": 1 to 8 bits pack into 32-bit words here");
  if (group < 1) throw ConvertError(file, wkey + ".group_size", "must be 1 or more");
  q.block = std::to_string(bits) + "-bit codes in groups of " + std::to_string(group);
  for (const auto& [name, ref] : tensors) {
    if (!ends_with(name, ".weight_packed")) continue;
    const std::string base = name.substr(0, name.size() - 7);  // <x>.weight
    const std::string& shard = shards[size_t(ref.shard)]->name();
    PackedWeight p;
    p.packing = Packing::GroupRows;
    p.codes = name, p.scale = base + "_scale", p.zeros = tensors.count(base + "_zero_point") ? base + "_zero_point" : "";
    p.bits = int(bits), p.group = group;
    auto sh = tensors.find(base + "_shape");
    if (!tensors.count(p.scale)) throw ConvertError(shard, p.scale, "missing from the checkpoint: " + name + " needs it");
    if (sh == tensors.end()) throw ConvertError(shard, base + "_shape", "missing from the checkpoint: " + name + " needs it");
    const TensorInfo& si = sh->second.info;
    if ((si.dtype != DType::I32 && si.dtype != DType::I64) || si.numel() != 2)
      throw ConvertError(shards[size_t(sh->second.shard)]->name(), si.name, "must be the weight's [rows, cols] as 2 I32 or I64 values");
    uint8_t raw[16];
    shards[size_t(sh->second.shard)]->read_at(si.begin, raw, size_t(si.nbytes()));
    for (int i = 0; i < 2; ++i) {
      const int64_t v = si.dtype == DType::I32 ? int64_t(get_le<int32_t>(raw + 4 * i)) : get_le<int64_t>(raw + 8 * i);
      if (v < 1 || v > (int64_t(1) << 40))
        throw ConvertError(shards[size_t(sh->second.shard)]->name(), si.name, "says " + std::to_string(v) + ": not a dimension");
      p.shape.push_back(v);
    }
    for (const char* part : {"_packed", "_scale", "_shape", "_zero_point"}) q.dropped.insert(base + part);
    q.packed[base] = p;
  }
}

}  // namespace

std::string Quantization::describe() const {
  if (!any()) return "";
  std::string s = method + (format.empty() ? "" : " " + format);
  const size_t n = scales.size() + packed.size();
  if (!block.empty()) s += " (" + block + ", " + std::to_string(n) + (packed.empty() ? " scaled" : " packed") + " weights)";
  return s;
}

Quantization read_quantization(const ModelConfig* config, const std::map<std::string, TensorRef>& tensors,
                               const std::vector<std::unique_ptr<ByteSource>>& shards) {
  Quantization q;
  if (!config) return q;
  const json& raw = config->raw;
  json qc;
  std::string file = config->file, at = "quantization_config";
  if (raw.is_object() && raw.contains("quantization_config") && raw["quantization_config"].is_object()) {
    qc = raw["quantization_config"];
  } else if (config->file == "params.json" && raw.is_object() && raw.contains("quantization") && raw["quantization"].is_object()) {
    // Mistral's own format (conversion/mistral.py): FP8 E4M3 weights with a per-tensor qscale_weight
    const json& m = raw["quantization"];
    if (text_of(m, "qformat_weight") != "fp8_e4m3")
      throw ConvertError(file, "quantization.qformat_weight",
                         "is " + (m.contains("qformat_weight") ? m["qformat_weight"].dump() : std::string("missing")) +
                             ": llama.cpp's converter takes only \"fp8_e4m3\"");
    qc = {{"quant_method", "fp8"}, {"weight_block_size", nullptr}};
    at = "quantization";
  } else {
    return q;  // (a quantization_config that is not an object: the converter ignores it too)
  }
  auto key = [&](const std::string& k) { return at + "." + k; };
  if (!qc.contains("quant_method") || qc["quant_method"].is_null()) return q;
  if (!qc["quant_method"].is_string()) throw ConvertError(file, key("quant_method"), "must be a string");
  q.method = qc["quant_method"].get<std::string>();

  std::vector<int64_t> block;
  bool fp8_values = false;  // every scaled weight counts as FP8 (--fp8-as-q8)
  if (q.method == "mxfp4") return q;  // gpt-oss: its family repacks the blocks (arch table)
  if (q.method == "fp8") {
    block = block_of(qc.value("weight_block_size", json()), key("weight_block_size"));
    fp8_values = true;
  } else if (q.method == "compressed-tensors") {
    q.format = text_of(qc, "format");
    const json groups = qc.value("config_groups", json::object());
    if (!groups.is_object() || groups.empty()) throw ConvertError(file, key("config_groups"), "must name one group");
    if (q.format == "nvfp4-pack-quantized" || q.format == "mixed-precision")
      throw ConvertError(file, key("format"), "\"" + q.format + "\": NVFP4 checkpoints are not read yet");
    if (groups.size() > 1)
      throw ConvertError(file, key("config_groups"), "has " + std::to_string(groups.size()) +
                                                         " groups: llama.cpp's converter takes one (\"Can't handle multiple config groups\")");
    const json& g = groups.begin().value();
    const json w = g.is_object() ? g.value("weights", json()) : json();
    const std::string wkey = key("config_groups." + groups.begin().key() + ".weights");
    if (!w.is_object()) throw ConvertError(file, wkey, "must be an object");
    if (q.format == "pack-quantized") {
      read_pack_quantized(q, w, wkey, tensors, file, shards);
      return q;
    }
    if (q.format != "float-quantized" && q.format != "int-quantized" && q.format != "naive-quantized")
      throw ConvertError(file, key("format"), "\"" + q.format + "\" is not a format llama.cpp's converter reads for compressed-tensors");
    const std::string strategy = text_of(w, "strategy");
    if (strategy != "channel" && strategy != "block")
      throw ConvertError(file, wkey + ".strategy", "is \"" + strategy + "\": llama.cpp's converter takes \"channel\" or \"block\"");
    if (w.contains("group_size") && !w["group_size"].is_null())
      throw ConvertError(file, wkey + ".group_size", "is set: llama.cpp's converter takes none for " + q.format);
    block = block_of(w.value("block_structure", json()), wkey + ".block_structure");
    fp8_values = q.format == "float-quantized" && text_of(w, "type") == "float" && w.value("num_bits", json()) == 8;
  } else if (q.method == "modelopt") {
    const std::string algo = text_of(qc, "quant_algo");
    bool nvfp4 = algo == "NVFP4" || algo == "W4A16_NVFP4";
    if (qc.contains("quantized_layers") && qc["quantized_layers"].is_object())
      for (const auto& [name, v] : qc["quantized_layers"].items())
        if (v.is_object() && ends_with(text_of(v, "quant_algo"), "NVFP4")) nvfp4 = true;
    if (nvfp4) throw ConvertError(file, key("quant_algo"), "\"" + algo + "\": NVFP4 checkpoints are not read yet");
  } else if (q.method == "gptq") {
    if (at != "quantization_config") throw ConvertError(file, key("quant_method"), "\"gptq\": not a Mistral format method");
    read_gptq(q, qc, tensors, file, shards);
    return q;
  } else if (q.method == "bitnet") {
    throw ConvertError(file, key("quant_method"), "\"bitnet\": BitNet checkpoints (BitNetForCausalLM) are not read yet");
  } else {
    throw ConvertError(file, key("quant_method"), "\"" + q.method + "\": llama.cpp's converter does not take it (\"Quant method is not yet supported\")");
  }
  q.block = block.empty() ? "per tensor or per row" : "blocks of " + std::to_string(block[0]) + " x " + std::to_string(block[1]);

  const MethodRow* row = nullptr;
  for (const MethodRow& m : kMethods)
    if (q.method == m.method) row = &m;
  for (const auto& [name, ref] : tensors) {
    for (const char* d : row->drops)
      if (ends_with(name, d)) q.dropped.insert(name);
    for (const ScaleName& sn : row->scales) {
      if (!ends_with(name, sn.suffix)) continue;
      const std::string weight = name.substr(0, name.size() - std::string(sn.suffix).size()) + sn.weight;
      const std::string& shard = shards[size_t(ref.shard)]->name();
      q.dropped.insert(name);
      auto w = tensors.find(weight);
      if (w == tensors.end()) {
        if (row->orphan_scales_dropped) break;
        throw ConvertError(shard, name, "is the scale of " + weight + ", which the checkpoint does not have");
      }
      const SourceDType& sd = source_dtype(ref.info.dtype);
      if (!sd.is_float || sd.needs_scale)
        throw ConvertError(shard, name, std::string("is ") + sd.name + ": a scale must be F32, F16 or BF16");
      if (q.scales.count(weight)) throw ConvertError(shard, name, "is a second scale of " + weight);
      WeightScale ws;
      ws.scale = name;
      ws.from_fp8 = fp8_values || (q.method == "modelopt" && (w->second.info.dtype == DType::F8_E4M3 ||
                                                               w->second.info.dtype == DType::F8_E5M2));
      if (block.empty()) resolve_block(ws, w->second.info, ref.info, shard);
      else ws.block_rows = block[0], ws.block_cols = block[1];
      q.scales[weight] = ws;
      break;
    }
  }
  return q;
}

}  // namespace leapconv
