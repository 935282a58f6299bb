#include "source/quantized.h"

#include <cctype>
#include <cmath>
#include <tuple>

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
  // stacked experts [E, R, C] (transformers' FP8 experts without a block size): one scale per
  // expert, [E, 1, 1] or [E] (dequant_simple unsqueezes it to [E, 1, 1])
  if (w.shape.size() == 3 && (s.shape == std::vector<int64_t>{w.shape[0], 1, 1} || s.shape == std::vector<int64_t>{w.shape[0]})) {
    ws.block_rows = std::max<int64_t>(w.shape[1], 1), ws.block_cols = std::max<int64_t>(cols, 1);
    ws.scale_view = {w.shape[0], 1};
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

// BitNet b1.58's packed ternary weights (dequant_bitnet): `<x>.weight` holds four rows a byte
// ([R / 4, C], 1-byte codes viewed as U8) and `<x>.weight_scale` one value: the weight [R, C].
void read_bitnet(Quantization& q, const std::map<std::string, TensorRef>& tensors, const std::vector<std::unique_ptr<ByteSource>>& shards) {
  q.block = "ternary codes, four a byte, one scale a tensor";
  for (const auto& [name, ref] : tensors) {
    if (!ends_with(name, ".weight_scale")) continue;
    const std::string weight = name.substr(0, name.size() - 6);  // (the converter's removesuffix("_scale"))
    const std::string& shard = shards[size_t(ref.shard)]->name();
    auto w = tensors.find(weight);
    if (w == tensors.end()) throw ConvertError(shard, name, "is the scale of " + weight + ", which the checkpoint does not have");
    const TensorInfo& wi = w->second.info;
    if ((wi.dtype != DType::U8 && wi.dtype != DType::I8) || wi.shape.size() != 2)
      throw ConvertError(shards[size_t(w->second.shard)]->name(), weight,
                         std::string("is ") + dtype_name(wi.dtype) + " " + shape_string(wi.shape) +
                             ": BitNet's packed weights are 2-D bytes, four ternary codes a byte");
    const SourceDType& sd = source_dtype(ref.info.dtype);
    if (!sd.is_float || sd.needs_scale || ref.info.numel() != 1)
      throw ConvertError(shard, name, std::string("is ") + sd.name + " " + shape_string(ref.info.shape) +
                                          ": a BitNet weight's scale is one F32, F16 or BF16 value");
    PackedWeight p;
    p.packing = Packing::Bitnet;
    p.codes = weight, p.scale = name;
    p.bits = 2;
    p.shape = {wi.shape[0] * 4, wi.shape[1]};
    q.dropped.insert(name);
    q.packed[weight] = p;
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

// One value of a per-tensor factor (weight_scale_2, input_scale, a global scale): F32, F16 or BF16.
float read_factor(const TensorRef& t, const std::vector<std::unique_ptr<ByteSource>>& shards, const std::string& of) {
  const std::string& file = shards[size_t(t.shard)]->name();
  const SourceDType& sd = source_dtype(t.info.dtype);
  if (!sd.is_float || sd.needs_scale || t.info.numel() != 1)
    throw ConvertError(file, t.info.name, std::string("is ") + sd.name + " " + shape_string(t.info.shape) + ": the per-tensor factor of " + of +
                                              " must be one F32, F16 or BF16 value");
  uint8_t raw[8] = {};
  shards[size_t(t.shard)]->read_at(t.info.begin, raw, size_t(t.info.nbytes()));
  float v = 0;
  decode_to_f32(t.info.dtype, raw, 1, &v);
  if (!std::isfinite(v)) throw ConvertError(file, t.info.name, "is " + std::to_string(v) + ": the factor of " + of + " must be finite");
  return v;
}

// NVFP4 weights as _generate_nvfp4_tensors finds them: every `<x>.weight` with a 2-D
// `<x>.weight_scale` (a 1-D one is a ModelOpt FP8 weight's, decoded as such), its optional
// `.weight_scale_2` and `.input_scale`. compressed-tensors (ct): `<x>.weight_packed` stands for
// `<x>.weight`, `.weight_global_scale` / `.input_global_scale` for 1 / scale_2 / input_scale.
void read_nvfp4(Quantization& q, const std::map<std::string, TensorRef>& tensors, const std::vector<std::unique_ptr<ByteSource>>& shards, bool ct) {
  q.nvfp4_file = true;
  for (const auto& [name, ref] : tensors) {
    std::string weight = name;
    if (ct) {
      if (!ends_with(name, ".weight_packed")) continue;
      weight = name.substr(0, name.size() - 7);
      if (tensors.count(weight)) continue;  // (the converter renames only when the name is free)
    } else if (!ends_with(name, ".weight")) {
      continue;
    }
    const std::string stem = weight.substr(0, weight.size() - 7);
    auto sc = tensors.find(weight + "_scale");
    if (sc == tensors.end()) continue;
    const TensorInfo& si = sc->second.info;
    if (si.shape.size() < 2) continue;  // a ModelOpt FP8 weight's scale
    const std::string& file = shards[size_t(ref.shard)]->name();
    const std::string& sfile = shards[size_t(sc->second.shard)]->name();
    if (si.dtype != DType::F8_E4M3)
      throw ConvertError(sfile, si.name, std::string("is ") + dtype_name(si.dtype) + ": NVFP4 block scales are F8_E4M3");
    if (ref.info.dtype != DType::U8 || ref.info.shape.size() != 2)
      throw ConvertError(file, name, std::string("is ") + dtype_name(ref.info.dtype) + " " + shape_string(ref.info.shape) +
                                         ": NVFP4 weights are 2-D U8 (two 4-bit values a byte)");
    if (si.shape.size() != 2 || si.shape[0] != ref.info.shape[0] || si.shape[1] * 8 != ref.info.shape[1])
      throw ConvertError(sfile, si.name, "shape " + shape_string(si.shape) + " does not give one scale per 16 values of " + name + " " +
                                             shape_string(ref.info.shape) + " (want [" + std::to_string(ref.info.shape[0]) + ", " +
                                             std::to_string(ref.info.shape[1] / 8) + "]" +
                                             (ref.info.shape[1] % 8 ? ", and its rows are not whole groups of 16 values" : "") + ")");
    if (si.shape[1] % 4 || si.shape[1] == 0)
      throw ConvertError(file, name, "rows of " + std::to_string(si.shape[1] * 16) +
                                         " values are not whole NVFP4 blocks of 64 (llama.cpp's converter packs 4 groups of 16 a block)");
    Nvfp4Weight w;
    w.codes = name;
    w.scale = sc->first;
    w.shape = {si.shape[0], si.shape[1] * 16};
    const std::string s2 = ct ? stem + ".weight_global_scale" : weight + "_scale_2";
    const std::string in = ct ? stem + ".input_global_scale" : stem + ".input_scale";
    for (const auto& [n, v, keep] : {std::tuple{s2, &w.scale2, &w.scale2_name}, std::tuple{in, &w.input_scale, &w.input_scale_name}}) {
      auto f = tensors.find(n);
      if (f == tensors.end()) continue;
      float x = read_factor(f->second, shards, weight);
      if (ct) {
        if (x == 0.0f) throw ConvertError(shards[size_t(f->second.shard)]->name(), n, "is 0: a global scale is divided by");
        x = 1.0f / x;  // (compressed-tensors' global scales are the reciprocals: 1.0 / scale in f32)
      }
      *v = x;
      *keep = n;
      q.dropped.insert(n);
    }
    q.dropped.insert(sc->first);
    if (ct) q.dropped.insert(name);
    q.nvfp4[weight] = w;
  }
  for (const auto& [name, ref] : tensors)  // (the converter drops the KV cache's scales too)
    if (ends_with(name, ".k_scale") || ends_with(name, ".v_scale")) q.dropped.insert(name);
}

// A group size the config states must be NVFP4's 16.
void check_nvfp4_group(const json& o, const std::string& key, const std::string& file) {
  if (!o.is_object() || !o.contains("group_size") || o["group_size"].is_null()) return;
  if (!o["group_size"].is_number_integer() || o["group_size"].get<int64_t>() != 16)
    throw ConvertError(file, key + ".group_size", "is " + o["group_size"].dump() + ": NVFP4 scales groups of 16 values");
}

}  // namespace

std::string Quantization::describe() const {
  if (!any()) return "";
  std::string s = method + (format.empty() ? "" : " " + format);
  const size_t n = scales.size() + packed.size() + nvfp4.size();
  if (!block.empty()) s += " (" + block + ", " + std::to_string(n) + (!nvfp4.empty() ? " NVFP4 and scaled" : packed.empty() ? " scaled" : " packed") + " weights)";
  return s;
}

bool nvfp4_factor_written(float v) { return !(std::fabs(double(v) - 1.0) < 1e-6); }

Quantization read_quantization(const ModelConfig* config, const std::map<std::string, TensorRef>& tensors,
                               const std::vector<std::unique_ptr<ByteSource>>& shards, const std::string* hf_quant_config) {
  Quantization q;
  if (!config) return q;
  const json& raw = config->raw;
  json qc = json::object();
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
  }
  auto key = [&](const std::string& k) { return at + "." + k; };
  // NVFP4, as the converter's prepare_tensors detects it: config.json's quant_algo, a layer's
  // quant_algo ending in NVFP4, compressed-tensors' nvfp4-pack-quantized groups; and, when
  // config.json names no quant_algo or no quantized_layers, hf_quant_config.json's "quantization"
  // (its producer's name the method when config.json names none).
  std::string algo = text_of(qc, "quant_algo"), method = text_of(qc, "quant_method"), format = text_of(qc, "format");
  json groups = qc.contains("config_groups") && qc["config_groups"].is_object() ? qc["config_groups"] : json::object();
  json layers = qc.contains("quantized_layers") && qc["quantized_layers"].is_object() ? qc["quantized_layers"] : json::object();
  json group_of = qc;  // where a group_size would be stated
  std::string group_file = file, group_key = at;
  if ((algo.empty() || layers.empty()) && hf_quant_config) {
    json h;
    try {
      h = json::parse(*hf_quant_config);
    } catch (const json::exception& e) {
      throw ConvertError("hf_quant_config.json", "", std::string("is not valid JSON: ") + e.what());
    }
    const json hq = h.is_object() && h.contains("quantization") && h["quantization"].is_object() ? h["quantization"] : json::object();
    const json producer = h.is_object() && h.contains("producer") && h["producer"].is_object() ? h["producer"] : json::object();
    if (!qc.contains("quant_method") || qc["quant_method"].is_null()) {
      std::string p = text_of(producer, "name");
      for (char& ch : p) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      qc["quant_method"] = method = p;
      if (at != "quantization_config") at = "quantization_config";
    }
    if (hq.contains("quant_algo")) algo = text_of(hq, "quant_algo");
    if (hq.contains("quant_method")) method = text_of(hq, "quant_method");
    if (hq.contains("format")) format = text_of(hq, "format");
    if (hq.contains("config_groups")) groups = hq["config_groups"].is_object() ? hq["config_groups"] : json::object();
    if (hq.contains("quantized_layers")) layers = hq["quantized_layers"].is_object() ? hq["quantized_layers"] : json::object();
    if (hq.contains("group_size")) group_of = hq, group_file = "hf_quant_config.json", group_key = "quantization";
  }
  bool all_nvfp4_groups = !groups.empty();
  for (const auto& [n, g] : groups.items())
    if (g.is_object() && text_of(g, "format") != "nvfp4-pack-quantized") all_nvfp4_groups = false;
  const bool nvfp4_ct = method == "compressed-tensors" && (format == "nvfp4-pack-quantized" || (format == "mixed-precision" && all_nvfp4_groups));
  if (algo != "NVFP4") {
    if (nvfp4_ct) algo = "NVFP4";
    else
      for (const auto& [n, v] : layers.items())
        if (v.is_object() && v.contains("quant_algo") && ends_with(v["quant_algo"].is_string() ? v["quant_algo"].get<std::string>() : v["quant_algo"].dump(), "NVFP4"))
          algo = "NVFP4";
  }
  const bool nvfp4 = algo == "NVFP4" || algo == "W4A16_NVFP4";
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
    if (nvfp4 && nvfp4_ct) {  // (the converter's dequant_model leaves them to _generate_nvfp4_tensors)
      for (const auto& [n, g] : groups.items())
        if (g.is_object()) check_nvfp4_group(g.value("weights", json()), key("config_groups." + n + ".weights"), file);
      read_nvfp4(q, tensors, shards, true);
      q.block = "NVFP4, groups of 16";
      return q;
    }
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
    if (nvfp4) {
      check_nvfp4_group(group_of, group_key, group_file);
      read_nvfp4(q, tensors, shards, false);
    }
  } else if (q.method == "gptq") {
    if (at != "quantization_config") throw ConvertError(file, key("quant_method"), "\"gptq\": not a Mistral format method");
    read_gptq(q, qc, tensors, file, shards);
    return q;
  } else if (q.method == "bitnet") {
    if (at != "quantization_config") throw ConvertError(file, key("quant_method"), "\"bitnet\": not a Mistral format method");
    read_bitnet(q, tensors, shards);
    return q;
  } else {
    throw ConvertError(file, key("quant_method"), "\"" + q.method + "\": llama.cpp's converter does not take it (\"Quant method is not yet supported\")");
  }
  q.block = !q.nvfp4.empty() ? "NVFP4, groups of 16" : block.empty() ? "per tensor or per row" : "blocks of " + std::to_string(block[0]) + " x " + std::to_string(block[1]);

  const MethodRow* row = nullptr;
  for (const MethodRow& m : kMethods)
    if (q.method == m.method) row = &m;
  for (const auto& [name, ref] : tensors) {
    if (q.dropped.count(name) && !q.nvfp4.empty()) continue;  // an NVFP4 weight's
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
      // stacked experts [E, R, C] with a block size (transformers' FP8 experts): the scale is
      // [E, ceil(R / block), ceil(C / block)], each expert's blocks its own (dequant_simple
      // repeats them over the last two dimensions, then cuts each expert's to its size)
      if (!block.empty() && w->second.info.shape.size() == 3) ws.matrix_rows = w->second.info.shape[1];
      q.scales[weight] = ws;
      break;
    }
  }
  return q;
}

}  // namespace leapconv
