#include "formats/gguf/gguf_format.h"

#include <algorithm>
#include <cctype>

#include "formats/gguf/gguf_model.h"
#include "quant/codec.h"

namespace leapconv {

namespace {

// name, type of 2-D weights, LLAMA_FTYPE, what it costs
// In the page's menu order: the usual choice first, then smaller, then lossless.
const std::vector<GgufFileType> kFileTypes = {
    {"Q8_0", QType::Q8_0, 7, "near-lossless, about half the size of F16"},
    {"Q5_1", QType::Q5_1, 9, "5 bits and an offset per block of 32: close to Q8_0's quality, a third smaller"},
    {"Q5_0", QType::Q5_0, 8, "5 bits per block of 32, no offset: a little smaller than Q5_1, a little worse"},
    {"Q4_1", QType::Q4_1, 3, "4 bits and an offset per block of 32: a little better than Q4_0"},
    {"Q4_0", QType::Q4_0, 2, "the smallest of the legacy types: visible quality loss on small models"},
    {"F16", QType::F16, 1, "lossless for f16 checkpoints (bf16 ones round), 2 bytes a weight"},
    {"BF16", QType::BF16, 32, "lossless for bf16 checkpoints, 2 bytes a weight"},
    {"F32", QType::F32, 0, "lossless, 4 bytes a weight: for checking, not for running"},
};

const std::string kTokenizerPrefix = "tokenizer.";

int64_t kv_bytes(const GgufKV& e) { return 8 + int64_t(e.key.size()) + int64_t(e.value.serialized_size()); }

bool is_vocabulary_key(const std::string& key) { return key.compare(0, kTokenizerPrefix.size(), kTokenizerPrefix) == 0; }

// The tokenizer's keys, in the order gguf-py's writer puts them.
void add_vocab_keys(GgufMetadata& kv, const GgufVocab& v) {
  if (v.model.empty()) return;
  kv.set_string("tokenizer.ggml.model", v.model);
  if (!v.pre.empty()) kv.set_string("tokenizer.ggml.pre", v.pre);
  if (!v.tokens.empty()) kv.set_string_array("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty()) kv.set_f32_array("tokenizer.ggml.scores", v.scores);
  if (!v.token_type.empty()) kv.set_i32_array("tokenizer.ggml.token_type", v.token_type);
  if (!v.merges.empty()) kv.set_string_array("tokenizer.ggml.merges", v.merges);
  const std::pair<const char*, const std::optional<uint32_t>*> ids[] = {
      {"bos_token_id", &v.bos_token_id},         {"eos_token_id", &v.eos_token_id},
      {"unknown_token_id", &v.unknown_token_id}, {"seperator_token_id", &v.seperator_token_id},
      {"padding_token_id", &v.padding_token_id}, {"mask_token_id", &v.mask_token_id},
      {"eot_token_id", &v.eot_token_id},         {"eom_token_id", &v.eom_token_id}};
  for (const auto& [key, id] : ids)
    if (*id) kv.set_u32(std::string("tokenizer.ggml.") + key, **id);
  const std::pair<const char*, const std::optional<bool>*> flags[] = {{"add_bos_token", &v.add_bos_token},
                                                                      {"add_eos_token", &v.add_eos_token},
                                                                      {"add_sep_token", &v.add_sep_token},
                                                                      {"add_space_prefix", &v.add_space_prefix}};
  for (const auto& [key, flag] : flags)
    if (*flag) kv.set_bool(std::string("tokenizer.ggml.") + key, **flag);
  if (v.chat_template) kv.set_string("tokenizer.chat_template", *v.chat_template);
  if (!v.named_chat_templates.empty()) {
    std::vector<std::string> names;
    for (const auto& t : v.named_chat_templates) {
      kv.set_string("tokenizer.chat_template." + t.name, t.text);
      names.push_back(t.name);
    }
    kv.set_string_array("tokenizer.chat_templates", names);
  }
}

VocabFiles vocab_files(const Checkpoint& ck, std::string& config_text) {
  VocabFiles f;
  auto side = [&](const char* name) -> std::optional<std::string_view> {
    const SideFile* s = ck.side_file(name);
    if (!s) return std::nullopt;
    return std::string_view(s->bytes);
  };
  f.tokenizer_json = side("tokenizer.json");
  f.tokenizer_config_json = side("tokenizer_config.json");
  f.generation_config_json = side("generation_config.json");
  f.tokenizer_model = side("tokenizer.model");
  f.chat_template_jinja = side("chat_template.jinja");
  if (ck.config && ck.config->file == "config.json") {
    config_text = ck.config->raw.dump();
    f.config_json = std::string_view(config_text);
    f.vocab_size = ck.config->vocab_size;
  }
  return f;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b;
  for (float x : v) put_le<float>(b, x);
  return b;
}

// The type of one weight: F32 where llama.cpp's converter keeps F32, else the first matching
// rule or the file type; a type whose blocks do not divide the row falls back to F16, as
// convert_hf_to_gguf.py does (reported).
QType choose_type(const GgufWeight& w, const GgufPlanOptions& opt, std::string* note) {
  if (w.keep_f32) return QType::F32;
  QType want = opt.default_scheme;
  const int rule = matching_rule(opt.rules, w.name);
  if (rule >= 0) want = opt.rules[size_t(rule)].type;
  const std::string why = quant_type_refusal(quant_type(want), w.shape);
  if (why.empty()) return want;
  *note = std::string(quant_type(want).name) + " -> F16 (" + why + ")";
  return QType::F16;
}

}  // namespace

const std::vector<GgufFileType>& gguf_file_types() { return kFileTypes; }

const GgufFileType* find_gguf_file_type(const std::string& name) {
  std::string up = name;
  for (char& ch : up) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  for (const GgufFileType& t : kFileTypes)
    if (up == t.name) return &t;
  return nullptr;
}

const GgufFileType* gguf_file_type_of(QType q) {
  for (const GgufFileType& t : kFileTypes)
    if (t.type == q) return &t;
  return nullptr;
}

PlannedConversion plan_gguf(const Checkpoint& ck, const ConvertOptions& opt) {
  GgufModel m = map_checkpoint_to_gguf(ck);
  const GgufFileType* ft = gguf_file_type_of(opt.gguf.default_scheme);
  if (!ft) throw ConvertError(std::string("GGUF has no file type ") + quant_name(opt.gguf.default_scheme));

  std::string config_text;
  const GgufVocab vocab = build_gguf_vocab(vocab_files(ck, config_text), opt.vocab);
  if (vocab.kind != VocabKind::None && int64_t(vocab.tokens.size()) != m.vocab_rows)
    throw ConvertError(vocab.source, "",
                       "has " + std::to_string(vocab.tokens.size()) + " tokens but the embedding has " +
                           std::to_string(m.vocab_rows) + " rows: llama.cpp would refuse the file");

  GgufMetadata kv = m.kv;
  kv.set_u32("general.file_type", ft->ftype);
  kv.set_u32("general.quantization_version", 2);  // GGML_QNT_VERSION
  add_vocab_keys(kv, vocab);

  PlannedConversion pc;
  pc.format = "gguf";
  pc.warnings = m.warnings;
  for (const std::string& w : vocab.warnings) pc.warnings.push_back("tokenizer: " + w);
  if (vocab.kind == VocabKind::None)
    pc.warnings.push_back("no tokenizer in the file (asked for): llama.cpp cannot turn text into tokens with it");

  std::vector<GgufTensorInfo> infos;
  std::vector<PlanItem> items;  // parallel to m.weights
  for (const GgufWeight& w : m.weights) {
    PlanItem it;
    it.name = w.name;
    it.shape = w.shape;
    it.permute_heads = w.permute_heads;
    if (w.src) {
      it.source_name = w.src->info.name;
      it.shard = w.src->shard;
      it.src_dtype = w.src->info.dtype;
      it.src_offset = w.src->info.begin;
    }
    it.type = w.src ? choose_type(w, opt.gguf, &it.note) : QType::F32;
    if (!it.note.empty()) pc.warnings.push_back("fallback: " + it.name + ": " + it.note);
    finish_item_geometry(it);
    GgufTensorInfo ti;
    ti.name = it.name;
    ti.dims = ggml_dims_from_shape(it.shape);
    ti.type = uint32_t(it.qt().ggml_type);
    ti.nbytes = it.size.total();
    infos.push_back(std::move(ti));
    items.push_back(std::move(it));
  }
  kv.label = ck.label;
  const GgufLayout L = layout_gguf(kv, std::move(infos), ck.label);
  pc.plan.header = L.header;
  for (size_t i = 0; i < items.size(); ++i) {
    items[i].offset = L.tensors[i].file_offset;
    if (m.weights[i].src) pc.plan.items.push_back(items[i]);
    else pc.plan.fixed.push_back({items[i].name, items[i].offset, f32_bytes(m.weights[i].values)});
  }
  if (!L.tensors.empty()) {  // the padding after the last tensor: the file ends on the alignment
    const GgufTensorInfo& last = L.tensors.back();
    const int64_t end = last.file_offset + last.nbytes;
    if (L.file_size > end) pc.plan.fixed.push_back({"", end, std::vector<uint8_t>(size_t(L.file_size - end), 0)});
  }
  pc.plan.total_bytes = L.file_size;

  int64_t vocab_bytes = 0;
  for (const GgufKV& e : kv.entries())
    if (is_vocabulary_key(e.key)) vocab_bytes += kv_bytes(e);
  pc.predicted = make_breakdown(pc.format, items, L.bytes.fixed, L.bytes.kv - vocab_bytes, L.bytes.tensor_info,
                                ck.source_bytes);
  add_vocabulary_and_padding(pc.predicted, vocab_bytes, L.bytes.padding + L.bytes.data_padding);

  const VocabSummary vs = summarize_vocab(vocab);
  nlohmann::json specials = nlohmann::json::object();
  for (const VocabSummary::Special& s : vs.specials) specials[s.name] = {{"id", s.id}, {"text", s.text}};
  pc.header = {{"magic", "GGUF"},
               {"version", kGgufVersion},
               {"n_tensors", L.tensors.size()},
               {"n_kv", kv.size()},
               {"alignment", L.alignment},
               {"architecture", m.family->name},
               {"name", m.name},
               {"file_type", ft->name},
               {"tokenizer",
                {{"kind", vs.kind}, {"model", vs.model}, {"pre", vs.pre}, {"source", vs.source},
                 {"tokens", vs.n_tokens}, {"merges", vs.n_merges}, {"special", specials},
                 {"chat_template", vs.has_chat_template}, {"adds_bos", vs.adds_bos},
                 {"summary", vocab_summary_line(vocab)}}}};
  nlohmann::json computed = nlohmann::json::array();
  for (const FixedPiece& f : pc.plan.fixed)
    if (!f.name.empty()) computed.push_back(f.name);
  if (!computed.empty()) pc.header["computed_tensors"] = computed;
  return pc;
}

nlohmann::json gguf_header_json(const GgufFile& f) {
  nlohmann::json keys = nlohmann::json::object();
  for (const GgufKV& e : f.kv.entries()) keys[e.key] = e.value.summary();
  nlohmann::json j = {{"magic", "GGUF"},       {"version", f.version}, {"n_tensors", f.tensors.size()},
                      {"n_kv", f.kv.size()},   {"alignment", f.alignment}, {"data_start", f.data_start},
                      {"metadata", keys}};
  if (const GgufValue* a = f.kv.find("general.architecture"); a && a->type() == GgufType::STRING)
    j["architecture"] = a->str();
  if (const GgufValue* n = f.kv.find("general.name"); n && n->type() == GgufType::STRING) j["name"] = n->str();
  if (const GgufValue* t = f.kv.find("general.file_type"); t && t->type() == GgufType::UINT32) {
    j["file_type_id"] = t->get<uint32_t>();
    for (const GgufFileType& ft : kFileTypes)
      if (ft.ftype == t->get<uint32_t>()) j["file_type"] = ft.name;
  }
  if (const GgufValue* t = f.kv.find("tokenizer.ggml.tokens"); t && t->is_array()) j["vocabulary_tokens"] = t->size();
  if (const GgufValue* t = f.kv.find("tokenizer.ggml.model"); t && t->type() == GgufType::STRING)
    j["tokenizer_model"] = t->str();
  return j;
}

InspectedFile inspect_gguf(ByteSource& src) {
  GgufReadOptions ro;
  ro.max_array_elements = 16;  // a summary: a 128k vocabulary is validated, not kept
  const GgufFile g = read_gguf_file(src, ro);
  InspectedFile f;
  f.format = "gguf";
  f.names = InspectedFile::Names::Gguf;
  if (const GgufValue* a = g.kv.find("general.architecture"); a && a->type() == GgufType::STRING)
    f.architecture = a->str();
  for (const GgufTensorInfo& t : g.tensors) {
    const QuantType* qt = quant_type_by_ggml_type(int(t.type));
    if (!qt) {
      const GgmlTypeInfo* info = ggml_type_info(t.type);
      throw ConvertError(src.name(), t.name,
                         std::string("is stored as ggml type ") + (info ? info->name : "?") +
                             ", which this project cannot decode yet");
    }
    PlanItem it;
    it.name = t.name;
    it.shape.assign(t.dims.rbegin(), t.dims.rend());
    it.type = qt->id;
    finish_item_geometry(it);
    it.offset = t.file_offset;
    f.items.push_back(std::move(it));
  }
  f.header = gguf_header_json(g);
  int64_t vocab_bytes = 0, other = 0;
  for (size_t i = 0; i < g.kv.entries().size(); ++i)
    (is_vocabulary_key(g.kv.entries()[i].key) ? vocab_bytes : other) += g.kv_bytes[i];
  f.breakdown = make_breakdown(f.format, f.items, g.bytes.fixed, other, g.bytes.tensor_info, 0);
  add_vocabulary_and_padding(f.breakdown, vocab_bytes, g.bytes.padding + g.bytes.data_padding);
  return f;
}

}  // namespace leapconv
