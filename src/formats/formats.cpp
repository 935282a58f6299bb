#include "formats/formats.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <regex>
#include <set>

#include "core/text.h"
#include "formats/gguf/gguf_format.h"
#include "formats/gguf/gguf_model.h"
#include "formats/gguf/gguf_presets.h"
#include "formats/leap_format.h"
#include "source/checkpoint.h"

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
                 {{"format", f.id}, {"scheme", lower}}, t.summary,
                 !t.converter && llama_quantize_ftype_needs_imatrix(t.ftype, t.type), quant_type(t.type).short_name});
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
  for (const QuantType& t : quant_types()) {
    types.push_back({{"name", t.name}, {"short", t.short_name}, {"family", t.family}, {"color", t.color},
                     {"label", t.label}, {"block", t.span == BlockSpan::Fixed ? t.block_values : 0}, {"block_span", kSpans[int(t.span)]},
                     {"value_bits", t.value_bits}, {"scale_bytes", t.scale_bytes},
                     {"layout", kLayouts[int(t.layout)]}, {"needs_matrix", t.needs_matrix},
                     {"gguf_lite", t.gguf_lite_code >= 0}});
    // a weight (not token_embd / output) of this type is written only with importance weights:
    // llama-quantize refuses it without (tensor_requires_imatrix), or ggml cannot make it
    if (t.needs_importance || llama_quantize_requires_imatrix("blk.0.ffn_up.weight", t.id, 0)) types.back()["needs_imatrix"] = true;
  }
  nlohmann::json formats = nlohmann::json::array();
  for (const OutputFormat& f : kFormats) {
    std::vector<FormatChoice> choices = f.choices;
    if (f.type_choices) for (FormatChoice& c : f.type_choices(f)) choices.push_back(std::move(c));
    nlohmann::json menu = nlohmann::json::array();
    for (const FormatChoice& c : choices) {
      menu.push_back({{"value", c.value}, {"label", c.label}, {"file_suffix", c.file_suffix}, {"options", c.options}});
      if (!c.summary.empty()) menu.back()["summary"] = c.summary;
      if (c.needs_imatrix) menu.back()["needs_imatrix"] = true;
      if (!c.type.empty()) menu.back()["type"] = c.type;
    }
    formats.push_back({{"id", f.id}, {"name", f.name}, {"runs_in", f.runs_in}, {"run_command", f.run_command},
                       {"extension", f.extensions.front()},
                       {"scheme_rules", f.scheme_rules},
                       {"default_scheme", f.scheme_rules ? quant_type(f.default_scheme).short_name : ""},
                       {"rule_types", rule_types(f)},
                       {"menu", menu}});
  }
  // The files of a checkpoint folder the core reads (the page passes only these to it).
  const nlohmann::json files = checkpoint_small_files();
  // Files beside a checkpoint the page offers to the core as an importance matrix (llama-imatrix's
  // names: imatrix.gguf, <model>.imatrix, imatrix.dat, ...); the core reads and validates them.
  return {{"quant_types", types}, {"formats", formats}, {"checkpoint_files", files},
          {"shard_extension", ".safetensors"}, {"imatrix_name_hints", {"imatrix", ".dat"}}};
}

nlohmann::json tensor_type_file_json(const Checkpoint& ck, const ConvertOptions& opt) {
  if (opt.format != "gguf") return nlohmann::json::object();  // (llama-quantize writes GGUF only: nothing to say)
  const GgufFileType* ft = opt.gguf_file_type >= 0 ? gguf_file_type_by_ftype(uint32_t(opt.gguf_file_type))
                                                   : gguf_file_type_of(opt.gguf.default_scheme);
  if (!ft) throw ConvertError(std::string("GGUF has no file type ") + quant_name(opt.gguf.default_scheme));
  if ((ft->converter || ft->converter_outtype) && !opt.llama_quantize)
    return {{"why", std::string(ft->name) + " is the converter's file (convert_hf_to_gguf.py --outtype), which llama-quantize does not write: "
                    "its --tensor-type applies to its own types (Q4_K_M, Q5_0, IQ4_XS, ...); --schemes with the rules reproduces it"}};
  ConvertOptions q = opt;  // the rules as --tensor-type patterns, ahead of any given as such
  q.gguf.rules.clear();
  q.llama_quantize = true;
  std::vector<QuantizeOptions::TensorType> patterns;
  nlohmann::json lines = nlohmann::json::array();
  std::string text;
  for (const SchemeRule& r : opt.gguf.rules) {
    const std::string pattern = tensor_type_pattern(r.pattern), line = pattern + "=" + quant_name(r.type);
    patterns.push_back({pattern, std::regex(pattern), r.type});
    lines.push_back(line);
    text += line + "\n";
  }
  q.quantize.tensor_types.insert(q.quantize.tensor_types.begin(), patterns.begin(), patterns.end());
  const PlannedConversion a = plan_conversion(ck, opt), b = plan_conversion(ck, q);
  std::vector<std::string> differ;
  for (size_t i = 0; i < a.plan.items.size(); ++i) {
    const PlanItem& x = a.plan.items[i];
    const auto y = std::find_if(b.plan.items.begin(), b.plan.items.end(), [&](const PlanItem& z) { return z.name == x.name; });
    if (y == b.plan.items.end() || y->type != x.type)
      differ.push_back(x.name + " (" + quant_name(x.type) + " here, " + (y == b.plan.items.end() ? "absent" : quant_name(y->type)) + " there)");
  }
  if (!differ.empty()) {
    std::string names;
    for (size_t i = 0; i < differ.size() && i < 4; ++i) names += (i ? ", " : "") + differ[i];
    return {{"why", "llama-quantize --type " + std::string(ft->name) + " with these patterns would type " + std::to_string(differ.size()) +
                    " tensor(s) otherwise: " + names + (differ.size() > 4 ? ", ..." : "")}};
  }
  return {{"type", ft->name}, {"lines", lines}, {"text", text}};
}

// llama-quantize's options, spelled as its command line spells them.
static QType ggml_type_named(const std::string& name, const std::string& what) {
  const QuantType* t = find_quant_type(name);
  if (!t || t->ggml_type < 0) throw ConvertError(what + ": '" + name + "' is not a ggml type this project writes");
  return t->id;
}
static void parse_quantize_options(const nlohmann::json& j, ConvertOptions& o) {
  auto flag = [&](const char* key) {
    if (!j.contains(key) || j[key].is_null()) return false;
    if (!j[key].is_boolean()) throw ConvertError(std::string("conversion options: '") + key + "' is not true or false");
    return j[key].get<bool>();
  };
  auto strings = [&](const char* key) {
    std::vector<std::string> v;
    if (!j.contains(key) || j[key].is_null()) return v;
    if (!j[key].is_array()) throw ConvertError(std::string("conversion options: '") + key + "' is not a list");
    for (const auto& x : j[key]) {
      if (!x.is_string()) throw ConvertError(std::string("conversion options: '") + key + "' holds a non-string");
      v.push_back(x.get<std::string>());
    }
    return v;
  };
  QuantizeOptions& q = o.quantize;
  q.pure = flag("pure");
  q.leave_output = flag("leave_output_tensor");
  if (j.contains("output_tensor_type") && j["output_tensor_type"].is_string())
    q.output_type = ggml_type_named(j["output_tensor_type"], "--output-tensor-type");
  if (j.contains("token_embedding_type") && j["token_embedding_type"].is_string())
    q.token_embd_type = ggml_type_named(j["token_embedding_type"], "--token-embedding-type");
  for (const std::string& arg : strings("tensor_types")) {  // quantize.cpp's parse_tensor_type
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
      throw ConvertError("--tensor-type '" + one_line_text(arg, 200) + "': give PATTERN=TYPE (attn_v=q8_0)");
    std::string pattern = arg.substr(0, eq);
    for (char& c : pattern) c = char(std::tolower(static_cast<unsigned char>(c)));
    QuantizeOptions::TensorType t{pattern, {}, ggml_type_named(arg.substr(eq + 1), "--tensor-type " + one_line_text(arg, 200))};
    try {
      t.re = std::regex(pattern);
    } catch (const std::regex_error& e) {
      throw ConvertError("--tensor-type '" + one_line_text(arg, 200) + "': the pattern is not a regular expression (" + e.what() + ")");
    }
    q.tensor_types.push_back(std::move(t));
  }
  if (j.contains("prune_layers") && !j["prune_layers"].is_null()) {  // quantize.cpp's parse_layer_prune
    if (!j["prune_layers"].is_string()) throw ConvertError("conversion options: 'prune_layers' is not a string (L0,L1,...)");
    const std::string arg = j["prune_layers"];
    size_t at = 0;
    while (true) {
      const size_t comma = std::min(arg.find(',', at), arg.size());
      const std::string id = arg.substr(at, comma - at);
      int n = -1;
      try {
        n = std::stoi(id);  // (as llama-quantize: leading blanks and trailing text are let through)
      } catch (...) {
      }
      if (n < 0) throw ConvertError("--prune-layers '" + one_line_text(arg, 200) + "': '" + one_line_text(id, 40) + "' is not a layer number");
      q.prune_layers.push_back(n);
      if (comma == arg.size()) break;
      at = comma + 1;
    }
    std::sort(q.prune_layers.begin(), q.prune_layers.end());
    q.prune_layers.erase(std::unique(q.prune_layers.begin(), q.prune_layers.end()), q.prune_layers.end());
  }
  for (const std::string& arg : strings("override_kv")) {  // common.cpp's string_parse_kv_override
    const size_t eq = arg.find('=');
    const std::string bad = "--override-kv '" + one_line_text(arg, 200) + "'";
    if (eq == std::string::npos || eq == 0 || eq >= 128) throw ConvertError(bad + ": give KEY=TYPE:VALUE (TYPE int, float, bool or str)");
    const std::string key = arg.substr(0, eq), typed = arg.substr(eq + 1);
    const size_t colon = typed.find(':');
    const std::string tag = colon == std::string::npos ? "" : typed.substr(0, colon), x = typed.substr(colon + 1);
    char* end = nullptr;
    errno = 0;
    if (tag == "int") {
      const long long n = std::strtoll(x.c_str(), &end, 10);
      if (x.empty() || *end || errno) throw ConvertError(bad + ": not a whole number");
      o.override_kv.push_back({key, GgufValue::scalar(uint32_t(n < 0 ? 0 - uint64_t(n) : uint64_t(n)))});  // (llama-quantize: u32 of |n|)
    } else if (tag == "float") {
      const double d = std::strtod(x.c_str(), &end);
      if (x.empty() || *end) throw ConvertError(bad + ": not a number");
      o.override_kv.push_back({key, GgufValue::scalar(float(d))});
    } else if (tag == "bool") {
      if (x != "true" && x != "false") throw ConvertError(bad + ": bool takes true or false");
      o.override_kv.push_back({key, GgufValue::scalar(x == "true")});
    } else if (tag == "str") {
      if (x.size() > 127) throw ConvertError(bad + ": a value of at most 127 bytes (llama-quantize's limit)");
      o.override_kv.push_back({key, GgufValue::string(x)});
    } else {
      throw ConvertError(bad + ": the type is int:, float:, bool: or str:");
    }
  }
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
  if (const std::string size = str("split_max_size", ""); !size.empty()) {
    // gguf-split's N followed by M (10^6 bytes) or G (10^9); a bare N is bytes
    const char unit = size.back();
    const std::string digits = unit == 'M' || unit == 'G' ? size.substr(0, size.size() - 1) : size;
    const bool whole = !digits.empty() && digits.size() <= 12 && digits.find_first_not_of("0123456789") == std::string::npos;
    const int64_t n = whole ? std::stoll(digits) : 0;
    if (n <= 0)
      throw ConvertError("split size '" + size + "': give a positive whole number of megabytes (512M) or gigabytes (2G)");
    o.split_max_bytes = n * (unit == 'M' ? 1000000 : unit == 'G' ? 1000000000 : 1);
  }
  o.split_max_tensors = integer("split_max_tensors", 0, 1 << 30, 0);
  if ((o.split_max_bytes || o.split_max_tensors) && o.format != "gguf")
    throw ConvertError("splitting into parts is for GGUF (as llama-gguf-split does); " + std::string(f->name) + " writes one file");
  if (o.split_max_bytes && o.split_max_tensors)
    throw ConvertError("split by size or by tensor count, not both (llama-gguf-split takes one)");
  if (j.contains("allow_no_vocab")) {
    if (!j["allow_no_vocab"].is_boolean()) throw ConvertError("conversion options: 'allow_no_vocab' is not true or false");
    o.vocab.allow_no_vocab = j["allow_no_vocab"].get<bool>();
  }
  if (f->id == std::string("gguf") && !type.empty()) {
    // --type / --scheme: llama-quantize's; --outtype: the converter's; no flag (the page): the
    // converter's where it writes the type (F32, F16, BF16, Q8_0), else llama-quantize's
    const GgufFileType* ft = find_gguf_file_type(type);
    o.llama_quantize = flag == "--type" || flag == "--scheme" || (flag != "--outtype" && ft && !ft->converter);
    if (!o.llama_quantize && ft && !ft->converter && !ft->converter_outtype)
      throw ConvertError("--outtype " + type + ": convert_hf_to_gguf.py writes f32, f16, bf16, q8_0, tq1_0 and tq2_0; " + ft->name +
                         " is llama-quantize's: --type " + ft->name);
  }
  parse_quantize_options(j, o);
  if (j.contains("fp8_as_q8")) {
    if (!j["fp8_as_q8"].is_boolean()) throw ConvertError("conversion options: 'fp8_as_q8' is not true or false");
    o.fp8_as_q8 = j["fp8_as_q8"].get<bool>();
    if (o.fp8_as_q8 && o.format != "gguf") throw ConvertError("--fp8-as-q8 is for GGUF (the converter's option)");
  }
  // --metadata (its object, or the file's text as the page gives it, and the file's name for
  // messages) and --model-name
  if (j.contains("metadata") || j.contains("metadata_text")) {
    o.metadata.file = j.value("metadata_file", std::string("--metadata"));
    if (j.contains("metadata_text")) {
      if (!j["metadata_text"].is_string()) throw ConvertError("conversion options: 'metadata_text' is not text");
      o.metadata.values = nlohmann::json::parse(j["metadata_text"].get<std::string>(), nullptr, false);
      if (o.metadata.values.is_discarded()) throw ConvertError(o.metadata.file, "", "is not valid JSON (--metadata)");
    } else {
      o.metadata.values = j["metadata"];
    }
    if (!o.metadata.values.is_object()) throw ConvertError(o.metadata.file, "", "must hold a JSON object of general.* keys (the converter's --metadata)");
  }
  if (j.contains("model_name")) {
    if (!j["model_name"].is_string()) throw ConvertError("conversion options: 'model_name' is not text");
    o.metadata.model_name = j["model_name"].get<std::string>();
  }
  if (!o.metadata.empty() && o.format != "gguf")
    throw ConvertError(std::string(o.metadata.values.is_null() ? "--model-name" : "--metadata") + " is for GGUF (the converter's option)");
  return o;
}

PlannedConversion plan_conversion(const Checkpoint& ck, const ConvertOptions& opt) {
  const OutputFormat* f = find_format(opt.format);
  if (!f) throw ConvertError("unknown format '" + opt.format + "' (use " + format_ids() + ")");
  PlannedConversion pc = f->plan(ck, opt);
  pc.warnings.insert(pc.warnings.begin(), ck.warnings.begin(), ck.warnings.end());  // what the checkpoint left out
  for (const auto& [d, s] : ck.stored_by_dtype()) pc.predicted.source_by_dtype.push_back({d, s.bytes});
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

std::vector<std::string> split_part_names(const std::string& name) {
  // <base>-NNNNN-of-MMMMM.gguf, as llama_split_path makes them
  const std::string tail = "-00000-of-00000.gguf";
  if (name.size() <= tail.size()) return {};
  const std::string t = name.substr(name.size() - tail.size());
  for (size_t i = 0; i < tail.size(); ++i)
    if (tail[i] == '0' ? !std::isdigit(static_cast<unsigned char>(t[i])) : t[i] != tail[i]) return {};
  const int count = std::stoi(t.substr(10, 5));
  if (count < 1 || std::stoi(t.substr(1, 5)) < 1 || std::stoi(t.substr(1, 5)) > count) return {};
  std::vector<std::string> names;
  for (int k = 0; k < count; ++k)
    names.push_back(name.substr(0, name.size() - tail.size()) + split_suffix(k, count) + ".gguf");
  return names;
}

InspectedFile inspect_files(const std::vector<ByteSource*>& sources) {
  if (sources.empty()) throw ConvertError("no file to open");
  std::vector<InspectedFile> parts;
  for (ByteSource* s : sources) {
    parts.push_back(inspect_file(*s));
    parts.back().parts = {s->name()};
  }
  if (parts.size() == 1 && parts[0].split.no < 0) return std::move(parts[0]);
  // Every part of one split file, once: ordered by split.no, each telling the same count.
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].split.no < 0)
      throw ConvertError(sources[i]->name(), "", "is not a part of a split GGUF (no split.count key): open it alone");
    if (parts[i].split.count != parts[0].split.count || parts[i].split.tensors != parts[0].split.tensors)
      throw ConvertError(sources[i]->name(), kSplitCount,
                         "says " + std::to_string(parts[i].split.count) + " parts of " + std::to_string(parts[i].split.tensors) +
                             " tensors, but " + sources[0]->name() + " says " + std::to_string(parts[0].split.count) + " of " +
                             std::to_string(parts[0].split.tensors) + ": parts of different files");
  }
  std::vector<int> at(size_t(parts[0].split.count), -1);
  for (size_t i = 0; i < parts.size(); ++i) {
    int& slot = at[size_t(parts[i].split.no)];
    if (slot >= 0)
      throw ConvertError(sources[i]->name(), kSplitNo, "is part " + std::to_string(parts[i].split.no + 1) + ", as " +
                                                           sources[size_t(slot)]->name() + " is: the same part twice");
    slot = int(i);
  }
  for (size_t k = 0; k < at.size(); ++k)
    if (at[k] < 0) {
      const std::vector<std::string> names = split_part_names(sources[0]->name());
      throw ConvertError(names.size() == at.size() ? names[k] : "part " + std::to_string(k + 1) + " of " + std::to_string(at.size()),
                         "", "is missing: a split model's parts are opened together (llama.cpp loads them from the first)");
    }
  // One file: the first part's keys and header, every part's tensors in part order.
  const InspectedFile& first = parts[size_t(at[0])];
  InspectedFile f;
  f.of = first.of;
  f.format = first.format;
  f.header = first.header;
  f.keys = first.keys;
  f.architecture = first.architecture;
  f.split = first.split;
  f.split.no = 0;
  int64_t header = 0, metadata = 0, descriptors = 0, vocabulary = 0, padding = 0;
  std::set<std::string> names;
  for (size_t k = 0; k < at.size(); ++k) {
    const InspectedFile& p = parts[size_t(at[k])];
    const std::string& file = sources[size_t(at[k])]->name();
    f.parts.push_back(file);
    auto add = [&](const std::string& name) {
      if (!names.insert(name).second) throw ConvertError(file, name, "is in two parts of the split file");
    };
    for (PlanItem it : p.items) {
      add(it.name);
      it.file = int(k);
      f.items.push_back(std::move(it));
    }
    for (OpaqueTensor t : p.undecodable) {
      add(t.name);
      t.file = int(k);
      f.undecodable.push_back(std::move(t));
    }
    header += p.breakdown.header;
    metadata += p.breakdown.metadata;
    descriptors += p.breakdown.descriptors;
    vocabulary += p.breakdown.vocabulary;
    padding += p.breakdown.padding;
  }
  if (int64_t(names.size()) != f.split.tensors)
    throw ConvertError(f.parts[0], kSplitTensorsCount,
                       std::to_string(f.split.tensors) + " tensors, but the parts hold " + std::to_string(names.size()));
  f.breakdown = make_breakdown(f.format, f.items, header, metadata, descriptors, 0);
  for (const OpaqueTensor& t : f.undecodable) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    add_undecoded_tensor(f.breakdown, t.type, numel, t.bytes);
  }
  add_vocabulary_and_padding(f.breakdown, vocabulary, padding);
  return f;
}

nlohmann::json inspected_file_json(const InspectedFile& f) {
  struct Row {
    int file;
    int64_t offset;
    nlohmann::json j;
  };
  const bool split = f.split.count > 0;
  std::vector<Row> rows;
  for (const PlanItem& it : f.items)
    rows.push_back({it.file, it.offset, {{"name", it.name}, {"dtype", it.qt().name}, {"shape", it.shape}, {"offset", it.offset},
                                         {"bytes", it.size.total()}, {"decodable", true}}});
  for (const OpaqueTensor& t : f.undecodable)
    rows.push_back({t.file, t.offset, {{"name", t.name}, {"dtype", t.type}, {"shape", t.shape}, {"offset", t.offset},
                                       {"bytes", t.bytes}, {"decodable", false}}});
  for (Row& r : rows)
    if (split) r.j["file"] = r.file;  // which part: "parts" below
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.file != b.file ? a.file < b.file : a.offset < b.offset; });
  nlohmann::json tensors = nlohmann::json::array();
  for (Row& r : rows) tensors.push_back(std::move(r.j));
  nlohmann::json j = {{"format", f.format}, {"header", f.header}, {"tensors", tensors},
                      {"breakdown", breakdown_json(f.breakdown)}};
  if (split) j["parts"] = f.parts;  // a split file's parts, in order (each tensor's "file")
  if (!f.keys.empty()) j["keys"] = f.keys;
  if (!f.metadata.empty()) j["metadata"] = f.metadata;
  return j;
}

nlohmann::json imatrix_json(const Imatrix& im, const Checkpoint* ck) {
  nlohmann::json j = {{"file", im.file}, {"format", im.legacy ? "legacy .dat" : "GGUF"}, {"entries", im.entries.size()},
                      {"chunks", im.chunk_count}, {"datasets", im.datasets}};
  if (ck && ck->config && !ck->lora) {
    int64_t weights = 0, covered = 0;
    nlohmann::json missing = nlohmann::json::array();
    for (const GgufWeight& w : map_checkpoint_to_gguf(*ck).weights) {
      if (w.shape.size() < 2 || w.keep_f32 || w.name == "token_embd.weight" || w.recipe.is_computed()) continue;
      ++weights;
      std::string why;
      if (importance_for(im, w.name, w.shape, &why)) ++covered;
      else if (missing.size() < 4) missing.push_back(why.empty() ? w.name + ": no entry" : w.name + " " + why);
    }
    j["weights"] = weights;
    j["covered"] = covered;
    j["missing"] = missing;
  }
  return j;
}

nlohmann::json checkpoint_json(const Checkpoint& ck) {
  nlohmann::json tensors = nlohmann::json::array();
  int64_t params = 0;
  for (const std::string& name : ck.order) {
    const TensorRef& t = *ck.find(name);
    params += t.info.numel();
    tensors.push_back({{"name", name}, {"dtype", dtype_name(t.info.dtype)}, {"shape", t.info.shape},
                       {"bytes", t.info.nbytes()}, {"shard", t.shard}});
  }
  std::map<std::string, int64_t> values;  // every stored tensor: scales and packed codes too
  nlohmann::json by_dtype = nlohmann::json::array();
  for (const auto& [d, s] : ck.stored_by_dtype()) {
    values[d] = s.numel;
    by_dtype.push_back({{"dtype", d}, {"tensors", s.tensors}, {"bytes", s.bytes}});
  }
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& s : ck.shards) shards.push_back({{"name", s->name()}, {"bytes", s->size()}});
  nlohmann::json side = nlohmann::json::array();
  for (const SideFile& f : ck.side_files) side.push_back({{"name", f.name}, {"bytes", f.bytes.size()}});
  nlohmann::json j = {{"label", ck.label}, {"parameters", params}, {"source_bytes", ck.source_bytes}, {"dtypes", values},
                      {"source_by_dtype", by_dtype}, {"shards", shards}, {"tensors", tensors}, {"side_files", side}};
  if (ck.quant.any())  // a quantized checkpoint: how its weights are stored (decoded as the converter does)
    j["quantization"] = {{"method", ck.quant.method}, {"format", ck.quant.format}, {"block", ck.quant.block},
                         {"scaled_weights", ck.quant.scales.size()}, {"packed_weights", ck.quant.packed.size()}, {"nvfp4_weights", ck.quant.nvfp4.size()},
                         {"tensors_read_with_them", ck.quant.dropped.size()}, {"summary", ck.quant.describe()}};
  if (ck.lora) j["lora"] = {{"rank", ck.lora->rank}, {"alpha", ck.lora->alpha}, {"base", ck.lora->base}};
  if (ck.config) {
    j["config_file"] = ck.config->file;
    j["architecture"] = ck.config->architecture.empty() ? ck.config->model_type : ck.config->architecture;
    j["config"] = ck.config->raw;
    if (const ArchFamily* fam = find_family(*ck.config)) j["family"] = fam->name;
    if (ck.config->num_experts > 0)  // a mixture of experts: per layer, per token
      j["experts"] = {{"count", ck.config->num_experts}, {"used", ck.config->experts_used},
                      {"shared", ck.config->shared_expert_ffn > 0 ? 1 : 0}};
    int64_t left_out = 0;  // a multimodal checkpoint: what is not its language model
    for (const std::string& name : ck.order) left_out += converter_source_name(name).empty();
    if (left_out > 0)
      j["scope"] = "the language model; " + std::to_string(left_out) +
                   " tensors of the vision tower and projector are left out (llama.cpp reads images with a "
                   "separate mmproj file)";
  }
  return j;
}

std::string checkpoint_text(const nlohmann::json& j) {
  std::string s = j.value("label", "") + ": a checkpoint";
  if (j.contains("architecture")) s += " of " + j["architecture"].get<std::string>() + (j.contains("family") ? " (family " + j["family"].get<std::string>() + ")" : "");
  s += "\n  parameters  " + std::to_string(j.value("parameters", int64_t(0))) + " in " + std::to_string(j["tensors"].size()) +
       " tensors, " + std::to_string(j["shards"].size()) + " shard(s), " + std::to_string(j.value("source_bytes", int64_t(0))) + " bytes";
  if (j.contains("quantization")) s += "\n  quantized   " + j["quantization"]["summary"].get<std::string>();
  if (j.contains("lora"))
    s += "\n  LoRA        rank " + std::to_string(j["lora"]["rank"].get<int64_t>()) + ", alpha " + j["lora"]["alpha"].dump() +
         (j["lora"]["base"].get<std::string>().empty() ? "" : ", base " + j["lora"]["base"].get<std::string>()) +
         " (an adapter: convert it with --lora, or fold it into its base with --merge-lora)";
  s += "\n  stored as";
  for (const auto& d : j["source_by_dtype"])
    s += "\n    " + d["dtype"].get<std::string>() + std::string(12 - std::min<size_t>(11, d["dtype"].get<std::string>().size()), ' ') +
         std::to_string(d["tensors"].get<int64_t>()) + " tensors, " + std::to_string(d["bytes"].get<int64_t>()) + " bytes";
  if (j.contains("scope")) s += "\n  converted   " + j["scope"].get<std::string>();
  return s + "\n";
}

}  // namespace leapconv
