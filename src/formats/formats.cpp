#include "formats/formats.h"

#include <algorithm>
#include <cctype>

#include "formats/gguf/gguf_format.h"
#include "formats/gguf/gguf_model.h"
#include "formats/leap_format.h"

namespace leapconv {

namespace {

PlannedConversion plan_leap_format(const Checkpoint& ck, const ConvertOptions& opt) {
  PlannedConversion pc;
  const LeapModel m = map_llama_to_leap(ck, LeapChoice{opt.version, opt.seq_len, opt.group_size});
  LeapHeader h;
  pc.plan = plan_leap(m, opt.version, opt.group_size, &h);
  pc.format = h.version == 1 ? "leap-v1" : "leap-v2";
  pc.warnings = m.warnings;
  pc.header = leap_header_json(h);
  pc.header["magic"] = "ak42";
  pc.engine = leap_engine_json(leap_shape(h), m.seq_len_from);
  pc.predicted = make_breakdown(pc.format, pc.plan.items, kLeapHeaderBytes, 0, 0, ck.source_bytes);
  return pc;
}

InspectedFile inspect_leap(ByteSource& src) {
  InspectedFile f;
  uint8_t head[kLeapHeaderBytes] = {};
  const size_t n = size_t(std::min<int64_t>(src.size(), kLeapHeaderBytes));
  src.read_at(0, head, n);
  const LeapHeader h = decode_leap_header(src.name(), head, n);
  f.format = h.version == 1 ? "leap-v1" : "leap-v2";
  const int64_t want = leap_implied_size(h);
  if (want < 0) throw ConvertError(src.name(), "", "LEAP header implies an impossibly large file");
  if (src.size() != want)
    throw ConvertError(src.name(), "", "file is " + std::to_string(src.size()) + " bytes but its header implies " +
                                           std::to_string(want) + (src.size() < want ? ": truncated" : ""));
  f.items = leap_layout(h);
  f.header = leap_header_json(h);
  f.breakdown = make_breakdown(f.format, f.items, kLeapHeaderBytes, 0, 0, 0);
  return f;
}

// A LEAP file holds the Llama family's weights in LEAP's order, q/k RoPE-permuted; LEAP's engine
// runs it as llama_forward does (and, version 2, in W8A8).
FileModel leap_file_model(const Checkpoint& ck, const InspectedFile& f, const std::string& file) {
  const LeapModel m = map_llama_to_leap(ck, 0);
  const nlohmann::json& h = f.header;
  if (h["dim"] != m.dim || h["hidden_dim"] != m.hidden_dim || h["n_layers"] != m.n_layers ||
      h["n_heads"] != m.n_heads || h["n_kv_heads"] != m.n_kv_heads ||
      h["shared_classifier"] != m.shared_classifier || std::abs(h["vocab_size"].get<int>()) != m.vocab_size)
    throw ConvertError(file, "", "LEAP header does not describe the checkpoint " + ck.label);
  FileModel fm;
  for (const LeapWeight& w : m.weights) fm.tensors.push_back({w.leap_name, w.shape, w.recipe, w.role, w.layer});
  fm.compute = FileModel::Compute::Llama;
  fm.llama = {m.dim, m.hidden_dim, m.n_layers, m.n_heads, m.n_kv_heads, m.vocab_size, m.shared_classifier,
              ck.config->norm_eps, ck.config->rope_theta};
  if (h["version"] == 2) {
    fm.w8a8_group_size = h["group_size"].get<int>();
    fm.w8a8_note = "not run (no forward check)";
  } else {
    fm.w8a8_note = "LEAP version 1: LEAP's engine runs it in fp32, as the forward check does";
  }
  return fm;
}

// A GGUF-lite file holds every checkpoint tensor as it is; its model is the family's, as GGUF
// export maps it, read through the file's tensors (when GGUF export takes the checkpoint).
FileModel gguf_lite_file_model(const Checkpoint& ck, const InspectedFile&, const std::string&) {
  FileModel fm;
  for (const std::string& name : ck.order) {
    const TensorRef& t = *ck.find(name);
    fm.tensors.push_back({name, t.info.shape, Recipe::of(ck, t)});
  }
  if (!ck.config) {
    fm.why_not = "no config.json: no forward pass";
    return fm;
  }
  try {
    GgufModel m = map_checkpoint_to_gguf(ck);
    for (GgufWeight& w : m.weights) fm.weights.push_back({w.name, w.shape, std::move(w.recipe), w.role, w.layer});
    fm.compute = FileModel::Compute::Decoder;
    fm.weights_over_file = true;
    fm.kv = std::move(m.kv);
    fm.vocab_rows = m.vocab_rows;
  } catch (const UnsupportedError& e) {  // a model GGUF export refuses: no forward check (a contradiction is an error)
    fm.why_not = "no reference forward pass for this checkpoint: " + std::string(e.what());
  }
  return fm;
}

PlannedConversion plan_gguf_lite_format(const Checkpoint& ck, const ConvertOptions& opt) {
  PlannedConversion pc;
  pc.plan = plan_gguf_lite(ck, opt.gguf);
  pc.format = "gguf-lite";
  for (const PlanItem& it : pc.plan.items)
    if (!it.note.empty()) pc.warnings.push_back("fallback: " + it.name + ": " + it.note);
  const std::vector<uint8_t>& header = pc.plan.files[0].header;
  const int64_t meta = get_le<uint32_t>(header.data() + 12);
  const int64_t desc = int64_t(header.size()) - 16 - meta;
  pc.header = {{"magic", "GLFT"}, {"version", kGgufLiteVersion}, {"n_tensors", pc.plan.items.size()},
               {"metadata_len", meta}};
  pc.predicted = make_breakdown(pc.format, pc.plan.items, 16, meta, desc, ck.source_bytes);
  return pc;
}

InspectedFile inspect_gguf_lite(ByteSource& src) {
  InspectedFile f;
  GgufLiteFile g = read_gguf_lite(src);
  f.format = "gguf-lite";
  for (GgufTensor& t : g.tensors) f.items.push_back(t.layout);
  f.metadata = g.metadata;
  f.header = gguf_lite_header_json(g);
  f.breakdown = make_breakdown(f.format, f.items, 16, g.metadata_bytes, g.descriptor_bytes, 0);
  f.breakdown.total = src.size();  // any trailing bytes count too
  return f;
}

bool no_type(const QuantType&) { return false; }
bool gguf_lite_type(const QuantType& t) { return t.gguf_lite_code >= 0; }
bool gguf_tensor_type(const QuantType& t) { return t.ggml_type >= 0; }
bool set_gguf_lite_type(const std::string& name, ConvertOptions& o) {
  const QuantType* t = find_scheme_type(name, gguf_lite_type);
  if (t) o.gguf.default_scheme = t->id;
  return t != nullptr;
}
bool set_gguf_type(const std::string& name, ConvertOptions& o) {
  const GgufFileType* t = find_gguf_file_type(name);
  if (!t) return false;
  o.gguf.default_scheme = t->type;
  o.gguf_file_type = int(t->ftype);
  return true;
}

// Menu entries, one per type: "gguf-lite-q8" "GGUF-lite, Q8 per channel"; "gguf-q8_0" "GGUF, Q8_0".
std::vector<FormatChoice> gguf_lite_choices(const OutputFormat& f) {
  std::vector<FormatChoice> v;
  for (const QuantType& t : quant_types())
    if (gguf_lite_type(t))
      v.push_back({std::string(f.id) + "-" + t.short_name, std::string(f.name) + ", " + t.label, t.short_name,
                   {{"format", f.id}, {"scheme", t.short_name}}, ""});
  return v;
}
std::vector<FormatChoice> gguf_choices(const OutputFormat& f) {
  std::vector<FormatChoice> v;
  for (const GgufFileType& t : gguf_file_types()) {
    std::string lower = t.name;
    for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    v.push_back({std::string(f.id) + "-" + lower, std::string(f.name) + ", " + t.name, t.name,
                 {{"format", f.id}, {"scheme", lower}}, t.summary});
  }
  return v;
}

// GGUF first: the format most people came for.
const std::vector<OutputFormat> kFormats = {
    {"gguf", "GGUF", "loads in llama.cpp, Ollama, LM Studio and wllama", "llama-cli -m {file} -p \"Once upon a time\"",
     get_le<uint32_t>(reinterpret_cast<const uint8_t*>(kGgufMagic)), {".gguf"}, true, QType::Q8_0, {},
     gguf_choices, set_gguf_type, gguf_tensor_type, plan_gguf, inspect_gguf, gguf_file_model},
    {"leap", "LEAP .bin", "for the LEAP inference engine", "", kLeapMagic, {".bin"}, false, QType::F32,
     {{"leap-1", "LEAP .bin, version 1 (fp32)", "leap-v1", {{"format", "leap"}, {"version", 1}}, ""},
      {"leap-2", "LEAP .bin, version 2 (int8, groups)", "leap-v2", {{"format", "leap"}, {"version", 2}}, ""}},
     nullptr, nullptr, no_type, plan_leap_format, inspect_leap, leap_file_model},
    {"gguf-lite", "GGUF-lite", "a teaching format that no runtime reads: this page, --inspect and --verify read it back", "",
     kGgufLiteMagic, {".gguf-lite"}, true, QType::Q8Channel, {}, gguf_lite_choices,
     set_gguf_lite_type, gguf_lite_type, plan_gguf_lite_format, inspect_gguf_lite, gguf_lite_file_model},
};

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

}  // namespace

const std::vector<OutputFormat>& output_formats() { return kFormats; }

const OutputFormat* find_format(const std::string& id) {
  for (const OutputFormat& f : kFormats)
    if (id == f.id) return &f;
  return nullptr;
}

const OutputFormat* format_for_path(const std::string& path) {
  for (const OutputFormat& f : kFormats)
    for (const char* ext : f.extensions)
      if (ends_with(path, ext)) return &f;
  return nullptr;
}

void set_format_file_type(const OutputFormat& f, const std::string& name, const std::string& what, ConvertOptions& opt) {
  if (f.set_file_type && f.set_file_type(name, opt)) return;
  std::string names;  // as its menu spells them (GGUF: llama.cpp's names, in its menu order)
  if (f.type_choices)
    for (const FormatChoice& c : f.type_choices(f)) names += (names.empty() ? "" : ", ") + c.file_suffix;
  throw ConvertError(what + ": " + std::string(f.name) + " has no type '" + name + "'" +
                     (names.empty() ? " (it takes none)" : " (use " + names + ")"));
}

std::vector<SchemeRule> format_rules(const OutputFormat& f, const std::string& file, const std::string& text) {
  return parse_scheme_rules(file, text, f.rule_type_ok);
}

std::string format_ids() {
  std::string s;
  for (const OutputFormat& f : kFormats) s += (s.empty() ? "" : " or ") + std::string(f.id);
  return s;
}

static nlohmann::json rule_types(const OutputFormat& f) {
  nlohmann::json names = nlohmann::json::array();
  for (const QuantType& t : quant_types())
    if (f.rule_type_ok(t)) names.push_back(t.short_name);
  return names;
}

nlohmann::json catalog_json() {
  static const char* kLayouts[] = {"plain", "values-then-scales", "scales-then-values", "interleaved"};
  static const char* kSpans[] = {"fixed", "row", "parameter"};
  nlohmann::json types = nlohmann::json::array();
  for (const QuantType& t : quant_types())
    types.push_back({{"name", t.name}, {"short", t.short_name}, {"family", t.family}, {"color", t.color},
                     {"label", t.label}, {"block", t.span == BlockSpan::Fixed ? t.block_values : 0}, {"block_span", kSpans[int(t.span)]},
                     {"value_bits", t.value_bits}, {"scale_bytes", t.scale_bytes},
                     {"layout", kLayouts[int(t.layout)]}, {"needs_matrix", t.needs_matrix},
                     {"gguf_lite", t.gguf_lite_code >= 0}});
  nlohmann::json formats = nlohmann::json::array();
  for (const OutputFormat& f : kFormats) {
    std::vector<FormatChoice> choices = f.choices;
    if (f.type_choices) for (FormatChoice& c : f.type_choices(f)) choices.push_back(std::move(c));
    nlohmann::json menu = nlohmann::json::array();
    for (const FormatChoice& c : choices) {
      menu.push_back({{"value", c.value}, {"label", c.label}, {"file_suffix", c.file_suffix}, {"options", c.options}});
      if (!c.summary.empty()) menu.back()["summary"] = c.summary;
    }
    formats.push_back({{"id", f.id}, {"name", f.name}, {"runs_in", f.runs_in}, {"run_command", f.run_command},
                       {"extension", f.extensions.front()},
                       {"scheme_rules", f.scheme_rules},
                       {"default_scheme", f.scheme_rules ? quant_type(f.default_scheme).short_name : ""},
                       {"rule_types", rule_types(f)},
                       {"menu", menu}});
  }
  // The files of a checkpoint folder the core reads (the page passes only these to it).
  nlohmann::json files = {"config.json", "params.json", "model.safetensors.index.json"};
  for (const SideFileSpec& s : side_file_specs()) files.push_back(s.name);
  return {{"quant_types", types}, {"formats", formats}, {"checkpoint_files", files},
          {"shard_extension", ".safetensors"}};
}

ConvertOptions parse_convert_options(const nlohmann::json& j) {
  if (!j.is_object()) throw ConvertError("conversion options: not a JSON object");
  ConvertOptions o;
  auto str = [&](const char* key, const std::string& fallback) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_string()) throw ConvertError(std::string("conversion options: '") + key + "' is not a string");
    return it->get<std::string>();
  };
  auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t fallback) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi)
      throw ConvertError(std::string("conversion options: '") + key + "' must be a whole number from " +
                         std::to_string(lo) + " to " + std::to_string(hi));
    return it->get<int64_t>();
  };
  o.format = str("format", output_formats().front().id);
  const OutputFormat* f = find_format(o.format);
  if (!f) throw ConvertError("unknown format " + nlohmann::json(o.format).dump() + " (use " + format_ids() + ")");
  o.version = int(integer("version", 1, 2, 1));
  o.seq_len = integer("seq_len", 0, 1 << 30, 0);
  o.group_size = int(integer("group_size", 0, 1 << 20, 0));
  o.gguf.default_scheme = f->default_scheme;
  const std::string type = str("type", str("scheme", "")), flag = str("type_flag", "type");
  if (!type.empty()) {
    if (!f->scheme_rules) throw ConvertError(flag + " is for GGUF and GGUF-lite; " + f->name + " takes a version");
    set_format_file_type(*f, type, flag, o);
  }
  if (j.contains("rules") && !j["rules"].is_null())  // a rules file's text, or its JSON
    o.gguf.rules = format_rules(*f, str("rules_source", "scheme rules"),
                                j["rules"].is_string() ? j["rules"].get<std::string>() : j["rules"].dump());
  o.vocab.pre = str("tokenizer_pre", "");
  if (j.contains("allow_no_vocab")) {
    if (!j["allow_no_vocab"].is_boolean()) throw ConvertError("conversion options: 'allow_no_vocab' is not true or false");
    o.vocab.allow_no_vocab = j["allow_no_vocab"].get<bool>();
  }
  return o;
}

PlannedConversion plan_conversion(const Checkpoint& ck, const ConvertOptions& opt) {
  const OutputFormat* f = find_format(opt.format);
  if (!f) throw ConvertError("unknown format '" + opt.format + "' (use " + format_ids() + ")");
  PlannedConversion pc = f->plan(ck, opt);
  pc.warnings.insert(pc.warnings.begin(), ck.warnings.begin(), ck.warnings.end());  // what the checkpoint left out
  return pc;
}

const OutputFormat* format_by_magic(const uint8_t* head, size_t n) {
  if (n < 4) return nullptr;
  for (const OutputFormat& f : kFormats)
    if (get_le<uint32_t>(head) == f.magic) return &f;
  return nullptr;
}

InspectedFile inspect_file(ByteSource& src) {
  uint8_t head[4] = {};
  const size_t n = src.size() >= 4 ? 4 : 0;
  if (n) src.read_at(0, head, n);
  if (const OutputFormat* f = format_by_magic(head, n)) {
    InspectedFile info = f->inspect(src);
    info.of = f;
    return info;
  }
  std::string names;
  for (const OutputFormat& f : kFormats) names += std::string(names.empty() ? "neither a " : " nor a ") + f.name;
  throw ConvertError(src.name(), "", names + " file (unknown magic)");
}

nlohmann::json inspected_file_json(const InspectedFile& f) {
  struct Row {
    int64_t offset;
    nlohmann::json j;
  };
  std::vector<Row> rows;
  for (const PlanItem& it : f.items)
    rows.push_back({it.offset, {{"name", it.name}, {"dtype", it.qt().name}, {"shape", it.shape}, {"offset", it.offset},
                                {"bytes", it.size.total()}, {"decodable", true}}});
  for (const OpaqueTensor& t : f.undecodable)
    rows.push_back({t.offset, {{"name", t.name}, {"dtype", t.type}, {"shape", t.shape}, {"offset", t.offset},
                               {"bytes", t.bytes}, {"decodable", false}}});
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.offset < b.offset; });
  nlohmann::json tensors = nlohmann::json::array();
  for (Row& r : rows) tensors.push_back(std::move(r.j));
  nlohmann::json j = {{"format", f.format}, {"header", f.header}, {"tensors", tensors},
                      {"breakdown", breakdown_json(f.breakdown)}};
  if (!f.keys.empty()) j["keys"] = f.keys;
  if (!f.metadata.empty()) j["metadata"] = f.metadata;
  return j;
}

}  // namespace leapconv
