#include "formats/gguf/gguf_format.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "core/text.h"
#include "formats/gguf/gguf_model.h"
#include "formats/gguf/gguf_presets.h"
#include "quant/codec.h"

namespace leapconv {

namespace {

// name, type of 2-D weights, LLAMA_FTYPE, what it costs
// In the page's menu order: the usual choices first, then smaller, then lossless.
const std::vector<GgufFileType> kFileTypes = {
    {"Q8_0", QType::Q8_0, kFtypeQ8_0, "near-lossless, about half the size of F16", true},
    {"Q6_K", QType::Q6_K, kFtypeQ6_K, "6.6 bits a weight: practically as good as Q8_0, a fifth smaller", false},
    {"Q5_K_M", QType::Q5_K, kFtypeQ5_K_M, "5.7 bits: a very small loss; attn_v and ffn_down get Q6_K in some layers", false},
    {"Q5_K_S", QType::Q5_K, kFtypeQ5_K_S, "5.5 bits: a very small loss", false},
    {"Q4_K_M", QType::Q4_K, kFtypeQ4_K_M, "4.9 bits: the usual download, a small loss; attn_v and ffn_down get Q6_K in some layers", false},
    {"Q4_K_S", QType::Q4_K, kFtypeQ4_K_S, "4.6 bits: a little smaller than Q4_K_M, a little worse", false},
    {"Q3_K_L", QType::Q3_K, kFtypeQ3_K_L, "4.3 bits: a clear loss; attention output, attn_v and ffn_down get Q5_K", false},
    {"Q3_K_M", QType::Q3_K, kFtypeQ3_K_M, "3.9 bits: a clear loss", false},
    {"Q3_K_S", QType::Q3_K, kFtypeQ3_K_S, "3.5 bits: a large loss", false},
    {"Q2_K", QType::Q2_K, kFtypeQ2_K, "the smallest K-quant: a large loss, for big models only", false},
    {"Q2_K_S", QType::Q2_K, kFtypeQ2_K_S, "Q2_K with fewer bumps; needs an importance matrix (--imatrix)", false},
    {"IQ4_XS", QType::IQ4_XS, kFtypeIQ4_XS, "4.25 bits, non-linear levels: smaller than Q4_K_S, about as good (best with an imatrix)", false},
    {"IQ4_NL", QType::IQ4_NL, kFtypeIQ4_NL, "4.5 bits, non-linear levels in blocks of 32", false},
    {"IQ3_M", QType::IQ3_S, kFtypeIQ3_M, "3.7 bits, codebook i-quant mixture: about Q3_K_M's quality, smaller", false},
    {"IQ3_S", QType::IQ3_S, kFtypeIQ3_S, "3.4 bits, codebook i-quant", false},
    {"IQ3_XS", QType::IQ3_S, kFtypeIQ3_XS, "3.3 bits, codebook i-quant mixture", false},
    {"IQ3_XXS", QType::IQ3_XXS, kFtypeIQ3_XXS, "3.06 bits, codebook i-quant; needs an importance matrix", false},
    {"IQ2_M", QType::IQ2_S, kFtypeIQ2_M, "2.7 bits, codebook i-quant mixture; needs an importance matrix", false},
    {"IQ2_S", QType::IQ2_XS, kFtypeIQ2_S, "2.5 bits, codebook i-quant mixture; needs an importance matrix", false},
    {"IQ2_XS", QType::IQ2_XS, kFtypeIQ2_XS, "2.31 bits, codebook i-quant; needs an importance matrix", false},
    {"IQ2_XXS", QType::IQ2_XXS, kFtypeIQ2_XXS, "2.06 bits, codebook i-quant; needs an importance matrix", false},
    {"IQ1_M", QType::IQ1_M, kFtypeIQ1_M, "1.75 bits: for very large models only; needs an importance matrix", false},
    {"IQ1_S", QType::IQ1_S, kFtypeIQ1_S, "1.56 bits: for very large models only; needs an importance matrix", false},
    {"TQ2_0", QType::TQ2_0, kFtypeTQ2_0, "ternary (-1, 0, 1), 2.06 bits: for models trained ternary (BitNet); others break", false, true},
    {"TQ1_0", QType::TQ1_0, kFtypeTQ1_0, "ternary, 1.69 bits: for models trained ternary (BitNet); others break", false, true},
    {"Q2_0", QType::Q2_0, kFtypeQ2_0, "2 bits in blocks of 64: for models trained for it", false},
    {"Q1_0", QType::Q1_0, kFtypeQ1_0, "1 bit (sign) in blocks of 128: for models trained binary", false},
    {"MXFP4_MOE", QType::MXFP4, kFtypeMxfp4Moe, "mixtures of experts: the experts in MXFP4 (4.25 bits), the rest Q8_0", false},
    {"Q5_1", QType::Q5_1, kFtypeQ5_1, "legacy: 5 bits and an offset per block of 32; output.weight Q6_K", false},
    {"Q5_0", QType::Q5_0, kFtypeQ5_0, "legacy: 5 bits per block of 32; output.weight Q6_K", false},
    {"Q4_1", QType::Q4_1, kFtypeQ4_1, "legacy: 4 bits and an offset per block of 32; output.weight Q6_K", false},
    {"Q4_0", QType::Q4_0, kFtypeQ4_0, "legacy: the smallest of the legacy types, visible loss on small models; output.weight Q6_K", false},
    {"F16", QType::F16, 1, "lossless for f16 checkpoints (bf16 ones round), 2 bytes a weight", true},
    {"BF16", QType::BF16, 32, "lossless for bf16 checkpoints, 2 bytes a weight", true},
    {"F32", QType::F32, 0, "lossless, 4 bytes a weight: for checking, not for running", true},
};

const std::string kTokenizerPrefix = "tokenizer.";

int64_t kv_bytes(const GgufKV& e) { return 8 + int64_t(e.key.size()) + int64_t(e.value.serialized_size()); }

bool is_vocabulary_key(const std::string& key) { return key.compare(0, kTokenizerPrefix.size(), kTokenizerPrefix) == 0; }

// The tokenizer's keys, in the order gguf-py's writer puts them.
void add_vocab_keys(GgufMetadata& kv, const GgufVocab& v) {
  if (v.model.empty()) return;
  const auto space_prefix = [&](GgufVocab::Place at) {
    if (v.add_space_prefix && v.add_space_prefix_place == at) kv.set_bool("tokenizer.ggml.add_space_prefix", *v.add_space_prefix);
  };
  space_prefix(GgufVocab::Place::First);
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
  // in SpecialVocab's order; bos, eos, sep for flags set beyond it
  std::vector<std::string> order = v.add_token_order;
  for (const char* t : {"bos", "eos", "sep"})
    if (std::find(order.begin(), order.end(), t) == order.end()) order.push_back(t);
  for (const std::string& t : order) {
    const std::optional<bool>& flag = t == "bos" ? v.add_bos_token : t == "eos" ? v.add_eos_token : v.add_sep_token;
    if (flag && !(t == "bos" && v.add_bos_token_place == GgufVocab::Place::Last))
      kv.set_bool("tokenizer.ggml.add_" + t + "_token", *flag);
  }
  space_prefix(GgufVocab::Place::Flags);
  if (v.chat_template) kv.set_string("tokenizer.chat_template", *v.chat_template);
  if (!v.named_chat_templates.empty()) {
    std::vector<std::string> names;
    for (const auto& t : v.named_chat_templates) {
      kv.set_string("tokenizer.chat_template." + t.name, t.text);
      names.push_back(t.name);
    }
    kv.set_string_array("tokenizer.chat_templates", names);
  }
  space_prefix(GgufVocab::Place::Last);
  if (v.add_bos_token && v.add_bos_token_place == GgufVocab::Place::Last)  // Gemma4Model.set_vocab
    kv.set_bool("tokenizer.ggml.add_bos_token", *v.add_bos_token);
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

// The vocabulary, built once per checkpoint, family and options (ck.derived): the slowest step of
// a plan, and the same for every type.
const GgufVocab kNoVocab{};
const GgufVocab& vocab_of(const Checkpoint& ck, const VocabOptions& vo, const std::string& family) {
  const std::string key = "gguf-vocab\n" + family + "\n" + vo.pre + "\n" + (vo.allow_no_vocab ? "1" : "0");
  auto& slot = ck.derived[key];
  if (!slot) {
    std::string config_text;  // (vocab_files reads config.json's text from here)
    slot = std::make_shared<const GgufVocab>(build_gguf_vocab(vocab_files(ck, config_text), vo));
  }
  return *static_cast<const GgufVocab*>(slot.get());
}

// A weight's type in the converter's --outtype auto file, which llama-quantize reads: F32 where it
// keeps F32, else the file's 16-bit type (GgufModel::auto_dtype; what a tensor llama-quantize leaves keeps).
QType converter_auto_type(const GgufWeight& w, DType auto_dtype) {
  if (w.keep_f32) return QType::F32;
  return auto_dtype == DType::BF16 ? QType::BF16 : QType::F16;
}

// The type of one weight: F32 where llama.cpp's converter keeps F32 (1-D, *_norm.weight), else
// the first matching rule (as llama-quantize's --tensor-type), else the file type's choice (its
// type, or llama-quantize's mixture); a type whose blocks do not divide the row falls back as
// llama-quantize does (K-quants to a 32-block type, then F16), and says so.
QType choose_type(const GgufWeight& w, DType auto_dtype, const GgufFileType& ft, bool llama_quantize, const QuantizeModel& qm,
                  QuantizeCounters& counters, const ConvertOptions& opt, QuantizeNotes* notes) {
  QuantizeNotes& why = *notes;
  why = {};
  if (w.keep_f32) {  // whatever a rule says (converter_keeps_f32)
    if (matching_rule(opt.gguf.rules, w.name) >= 0)
      why.mixture = "stays F32 (llama.cpp's converter keeps norms, 1-D tensors and position embeddings in F32 and llama-quantize leaves them; the matching rule is not applied)";
    return QType::F32;
  }
  QuantizeTensor t{w.name, w.role && w.role->per_layer ? w.layer : -1, int64_t(w.shape.size()), w.shape.back(),
                   w.shape.size() >= 3 ? w.shape[w.shape.size() - 3] : 1};
  const int rule = matching_rule(opt.gguf.rules, w.name);
  QType type;
  if (rule >= 0) {
    type = opt.gguf.rules[size_t(rule)].type;
    const QType fb = llama_quantize_fallback(type, t.ncols, w.name);
    if (fb != type)
      why.fallback = std::string(quant_name(type)) + " -> " + quant_name(fb) + " (rows of " + std::to_string(t.ncols) +
                     " are not a multiple of " + std::to_string(quant_type(type).block_values) + ")";
    type = fb;
  } else if (llama_quantize) {
    type = llama_quantize_type(ft.ftype, ft.type, converter_auto_type(w, auto_dtype), qm, t, counters, &why, opt.quantize);
  } else {  // the converter's file: every 2-D weight the type; F16 where gguf-py's quantizer cannot take the rows
    type = ft.type;
    if ((type == QType::TQ1_0 || type == QType::TQ2_0) &&
        (w.name == "token_embd.weight" || w.name == "output.weight" || w.name == "per_layer_token_embd.weight")) {
      type = QType::F16;  // (prepare_tensors: "TODO: use Q4_K and Q6_K")
      why.mixture = "F16 (the converter's TQ1_0 / TQ2_0 files keep the embeddings and the classifier in F16)";
    } else if (t.ncols % quant_type(type).block_values) {
      type = QType::F16;  // (gguf-py's QuantError: "falling back to F16")
      why.fallback = std::string(quant_name(ft.type)) + " -> F16 (rows of " + std::to_string(t.ncols) +
                     " are not a multiple of " + std::to_string(quant_type(ft.type).block_values) + ")";
    }
  }
  return type;
}

// llama-quantize's tensor order (llama_model_loader's weight_name_comparer): tensors outside the
// blocks first, then block by block; by name within each.
int64_t block_of(const std::string& name) {
  int layer = -1;
  return std::sscanf(name.c_str(), "blk.%d.", &layer) == 1 ? layer : -1;
}
void sort_like_llama_quantize(std::vector<GgufWeight>& w) {
  std::stable_sort(w.begin(), w.end(), [](const GgufWeight& a, const GgufWeight& b) {
    const int64_t la = block_of(a.name), lb = block_of(b.name);
    return la != lb ? la < lb : a.name < b.name;
  });
}

// llama-quantize's --prune-layers (llama-quant.cpp's remap_layer, over the tensors in its order):
// the blocks listed are left out, those below the first kept as they are, the rest numbered on
// from there; the imatrix is still looked up by the original names. Returns the new block count.
int64_t prune_layers(std::vector<GgufWeight>& w, const std::vector<int>& prune) {
  std::map<int64_t, int64_t> mapped;  // block -> new number, -1: pruned
  int64_t next = 0;
  std::vector<GgufWeight> kept;
  for (GgufWeight& x : w) {
    const int64_t blk = block_of(x.name);
    if (blk >= 0) {
      if (!mapped.count(blk)) {
        if (std::binary_search(prune.begin(), prune.end(), blk)) mapped[blk] = -1;
        else if (blk < prune.front()) mapped[blk] = blk, next = blk + 1;
        else mapped[blk] = next++;
      }
      if (mapped[blk] < 0) continue;
      if (mapped[blk] != blk) {
        x.imatrix_name = x.name;
        x.name = "blk." + std::to_string(mapped[blk]) + x.name.substr(x.name.find('.', 4));
        x.layer = mapped[blk];
      }
    }
    kept.push_back(std::move(x));
  }
  w = std::move(kept);
  return next;
}

// Which tensors go into which file: all into one, or the parts llama-gguf-split --split makes
// (gguf-split.cpp's split_strategy: by size, a new part when the tensors so far, each padded to
// the alignment, would pass the limit, metadata not counted; by count, every n tensors).
std::vector<std::vector<size_t>> split_parts(const std::vector<GgufTensorInfo>& infos, const ConvertOptions& opt) {
  std::vector<std::vector<size_t>> parts(1);
  const int64_t max_bytes = opt.split_max_bytes, max_tensors = opt.split_max_tensors;
  if (max_bytes <= 0 && max_tensors <= 0) {
    for (size_t i = 0; i < infos.size(); ++i) parts[0].push_back(i);
    return parts;
  }
  int64_t size = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    const int64_t padded = (infos[i].nbytes + kGgufDefaultAlignment - 1) / kGgufDefaultAlignment * kGgufDefaultAlignment;
    const bool next = max_bytes > 0 ? size + padded > max_bytes : i > 0 && int64_t(i) % max_tensors == 0;
    if (next) {
      if (parts.back().empty())
        throw ConvertError("", infos[i].name, "is " + std::to_string(padded) + " bytes, more than the largest part (" +
                                                  std::to_string(max_bytes) + " bytes): a part holds at least one tensor");
      parts.emplace_back();
      size = 0;
    }
    size += padded;
    parts.back().push_back(i);
  }
  if (parts.size() > 65535)
    throw ConvertError("the split would make " + std::to_string(parts.size()) + " parts; GGUF's split.count holds at most 65535");
  return parts;
}

// llama-quantize's importance weights for a tensor it quantizes (a type other than the one its
// BF16/F16 input holds): the imatrix entry of its name, ne[0] * ne[2] values (one row of weights
// per expert); none found: quantized without (said in a note). A mis-sized entry is an error,
// but for token_embd (llama-quantize: "tok_embd should be ignored in this case").
void attach_importance(PlanItem& it, const GgufWeight& w, DType auto_dtype, const Imatrix& im, std::vector<std::string>& notes,
                       std::vector<std::string>& missing, uint32_t ftype) {
  if (it.type == converter_auto_type(w, auto_dtype)) return;  // copied as it is
  std::string why;
  auto weights = importance_for(im, w.imatrix_name.empty() ? it.name : w.imatrix_name, it.shape, &why);
  if (!weights && why.empty()) {
    if (llama_quantize_requires_imatrix(it.name, it.type, ftype))  // "Missing importance matrix for tensor ..."
      throw ConvertError(im.file, it.name, std::string("has no importance weights, which ") + quant_name(it.type) +
                                               " needs here: llama-quantize refuses to write it without (\"the result will be garbage\")");
    missing.push_back(it.name);
    return;
  }
  if (!weights) {
    if (it.name == "token_embd.weight" || it.name == "per_layer_token_embd.weight") {
      notes.push_back(it.name + " " + why + ": quantized without them (as llama-quantize does)");
      return;
    }
    throw ConvertError(im.file, it.name, why + ": an importance matrix of another model?");
  }
  if (it.qt().encode_weighted) it.importance = std::move(weights);  // (Q8_0 and MXFP4 take none)
}

}  // namespace

std::string split_suffix(int part, int count) {
  char b[32];
  std::snprintf(b, sizeof b, "-%05d-of-%05d", part + 1, count);  // llama_split_path's "%s-%05d-of-%05d.gguf"
  return b;
}

const std::vector<GgufFileType>& gguf_file_types() { return kFileTypes; }

const GgufFileType* find_gguf_file_type(const std::string& name) {
  std::string up = name;
  for (char& ch : up) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  for (const GgufFileType& t : kFileTypes)
    if (up == t.name) return &t;
  return nullptr;
}

const GgufFileType* gguf_file_type_of(QType q) {
  const GgufFileType* any = nullptr;  // the converter's row, else the first preset of that type
  for (const GgufFileType& t : kFileTypes)
    if (t.type == q && (t.converter || !any)) {
      if (t.converter) return &t;
      any = &t;
    }
  return any;
}

const GgufFileType* gguf_file_type_by_ftype(uint32_t ftype) {
  for (const GgufFileType& t : kFileTypes)
    if (t.ftype == ftype) return &t;
  return nullptr;
}

// A weight the converter decoded from FP8 (its _fp8_dequantized set), by its first source.
static bool from_fp8(const Checkpoint& ck, const Recipe& r) {
  if (r.sources.empty()) return false;
  auto q = ck.quant.scales.find(r.sources[0].name);
  return q != ck.quant.scales.end() && q->second.from_fp8;
}

PlannedConversion plan_gguf(const Checkpoint& ck, const ConvertOptions& opt) {
  const bool adapter = ck.lora.has_value();  // a LoRA adapter: convert_lora_to_gguf.py's file
  if (adapter && !opt.metadata.empty())
    throw ConvertError(std::string(opt.metadata.values.is_null() ? "--model-name" : "--metadata") +
                       ": a LoRA adapter is written as convert_lora_to_gguf.py writes it, which takes neither --metadata nor --model-name");
  std::vector<std::string> ignored;
  check_metadata_override(opt.metadata, &ignored);
  GgufModel m = adapter ? map_lora_to_gguf(ck) : map_checkpoint_to_gguf(ck, &opt.metadata);
  for (const std::string& k : ignored)
    m.warnings.push_back(opt.metadata.file + ": " + k + " is not a key llama.cpp's converter reads from --metadata: ignored");
  const GgufFileType* ft = opt.gguf_file_type >= 0 ? gguf_file_type_by_ftype(uint32_t(opt.gguf_file_type))
                                                   : gguf_file_type_of(opt.gguf.default_scheme);
  if (!ft) throw ConvertError(std::string("GGUF has no file type ") + quant_name(opt.gguf.default_scheme));
  if (adapter && !ft->converter)
    throw ConvertError(std::string("--type ") + ft->name + ": a LoRA adapter is written as convert_lora_to_gguf.py writes it, in F32, F16, BF16 or Q8_0");
  // llama-quantize's file (of the converter's), or the converter's own; an adapter is always the converter's
  const bool llama_quantize = !adapter && (opt.llama_quantize || (!ft->converter && !ft->converter_outtype));
  if (!llama_quantize && (opt.quantize.any() || !opt.override_kv.empty()))
    throw ConvertError(std::string("--pure, --tensor-type, --output-tensor-type, --token-embedding-type, --leave-output-tensor, --prune-layers and --override-kv "
                                   "are llama-quantize's options: give the type with --type, not the converter's --outtype (") + ft->name + ")");
  if (llama_quantize) sort_like_llama_quantize(m.weights);
  const int64_t block_count = opt.quantize.prune_layers.empty() ? -1 : prune_layers(m.weights, opt.quantize.prune_layers);
  QuantizeModel qm;
  qm.n_layers = ck.config->n_layers;
  qm.n_head = m.n_heads;
  qm.n_head_kv = m.n_kv_heads;
  qm.has_output = std::any_of(m.weights.begin(), m.weights.end(), [](const GgufWeight& w) { return w.name == "output.weight"; });
  // llama.cpp's LLM_TYPE_70B: 80 layers of llama (with GQA; an 8-expert llama is 8x7B / 8x22B) or qwen2
  const std::string arch = m.family->name;
  qm.is_70b = ck.config->n_layers == 80 &&
              ((arch == "llama" && m.n_experts != 8 && m.n_heads != m.n_kv_heads) || arch == "qwen2");
  qm.n_expert = m.n_experts;
  qm.has_imatrix = opt.imatrix != nullptr;
  if (opt.imatrix && !llama_quantize)
    throw ConvertError(opt.imatrix->file, "", std::string("--imatrix is llama-quantize's option: it applies to its types (--type Q4_K_M, ...), not to the converter's ") + ft->name);
  for (GgufWeight& w : m.weights)  // llama-quantize counts them in its order
    if (llama_quantize_counts_as_attn_v(w.name)) ++qm.n_attention_wv;

  VocabOptions vo = opt.vocab;
  vo.space_prefix = m.family->space_prefix;
  vo.default_specials = m.family->default_specials;
  vo.tokenizer_model = m.family->tokenizer_model;
  vo.sentencepiece_only = m.family->sentencepiece_only;
  if (adapter) vo.allow_no_vocab = true;  // (an adapter has no tokenizer: its base's)
  const GgufVocab& vocab = adapter ? kNoVocab : vocab_of(ck, vo, m.family->name);
  if (vocab.kind != VocabKind::None && int64_t(vocab.tokens.size()) != m.vocab_rows)
    throw ConvertError(vocab.source, "",
                       "has " + std::to_string(vocab.tokens.size()) + " tokens but the embedding has " +
                           std::to_string(m.vocab_rows) + " rows: llama.cpp would refuse the file");

  GgufMetadata kv = m.kv;
  const bool float_type = ft->type == QType::F32 || ft->type == QType::F16 || ft->type == QType::BF16;
  const bool ships_nvfp4 = m.float_file_type == 39;
  if (m.float_file_type >= 0 && !float_type && ft->type != QType::Q8_0 && (ships_nvfp4 || ft->ftype != kFtypeMxfp4Moe))
    throw UnsupportedError(ck.config->file, "",
                           std::string("--type ") + ft->name + ": this checkpoint ships " +
                               (ships_nvfp4 ? "NVFP4 weights" : "quantized experts (MXFP4)") +
                               ", which llama.cpp's converter keeps as they are and llama-quantize will not requantize; "
                               "F16, BF16, F32, Q8_0" + (ships_nvfp4 ? "" : " and MXFP4_MOE") + " keep them");
  if (!adapter)  // (convert_lora_to_gguf.py writes no file type)
    kv.assign("general.file_type",  // in the family's slot (file_type_slot)
              GgufValue::scalar(float_type && m.float_file_type >= 0 ? uint32_t(m.float_file_type) : ft->ftype));
  kv.set_u32("general.quantization_version", 2);  // GGML_QNT_VERSION
  add_vocab_keys(kv, vocab);
  if (llama_quantize) {  // llama-quantize sets these (gguf_set_val: moved to the end), then its overrides
    kv.set_u32("general.quantization_version", 2);
    kv.set_u32("general.file_type", ft->ftype);
  }
  for (const GgufKV& e : opt.override_kv) kv.set(e.key, e.value);
  if (opt.imatrix) {  // llama-quantize's kv overrides, set last (strings cut at 127 bytes, counts as u32)
    const Imatrix& im = *opt.imatrix;
    kv.set_string("quantize.imatrix.file", im.file.substr(0, 127));
    if (!im.datasets.empty()) kv.set_string("quantize.imatrix.dataset", im.datasets[0].substr(0, 127));
    kv.set_u32("quantize.imatrix.entries_count", uint32_t(im.entries.size()));
    if (im.chunk_count > 0) kv.set_u32("quantize.imatrix.chunks_count", uint32_t(im.chunk_count));
  }
  if (block_count >= 0) kv.set_u32(arch + ".block_count", uint32_t(block_count));  // (after its overrides)

  PlannedConversion pc;
  pc.format = "gguf";
  pc.warnings = m.warnings;
  pc.notes = m.notes;
  for (const std::string& w : vocab.warnings) pc.warnings.push_back("tokenizer: " + w);
  if (vocab.kind == VocabKind::None && !adapter)
    pc.warnings.push_back("no tokenizer in the file (asked for): llama.cpp cannot turn text into tokens with it");
  if (adapter)
    pc.notes.push_back("a LoRA adapter (rank " + std::to_string(ck.lora->rank) + ", alpha " + std::to_string(ck.lora->alpha) +
                       "): load it beside its base model's GGUF (llama-cli -m base.gguf --lora this.gguf)");

  // F32, F16, BF16 and Q8_0 files are the converter's (--outtype); the others llama-quantize's
  const bool converter_writes = !llama_quantize;
  if (opt.fp8_as_q8 && !converter_writes)
    throw ConvertError(std::string("--fp8-as-q8 is the converter's option: it applies to F32, F16, BF16 and Q8_0 files, not ") +
                       ft->name);
  std::vector<GgufTensorInfo> infos;
  std::vector<PlanItem> items;  // parallel to m.weights
  std::vector<std::string> no_importance;  // quantized with an imatrix that has no entry for them
  QuantizeCounters counters;               // llama-quantize's, over the tensors in its order
  for (GgufWeight& w : m.weights) {
    PlanItem it;
    it.name = w.name;
    it.shape = w.shape;
    QuantizeNotes why;
    const Step* kept = w.recipe.find(StepKind::PassThrough);  // blocks kept as they ship (gpt-oss's MXFP4)
    it.type = w.recipe.is_computed() ? QType::F32 : kept ? kept->type : choose_type(w, m.auto_dtype, *ft, llama_quantize, qm, counters, opt, &why);
    if (kept) why.mixture = std::string("kept as it ships (") + quant_name(kept->type) + ")";
    // --fp8-as-q8: tensor_force_quant's Q8_0 for a weight decoded from FP8 (before the converter's
    // always-F32 list, after its 1-D / *_norm rule)
    if (opt.fp8_as_q8 && !kept && !w.recipe.is_computed() && w.shape.size() >= 2 && !ends_with(w.name, "_norm.weight") &&
        from_fp8(ck, w.recipe)) {
      it.type = llama_quantize_fallback(QType::Q8_0, w.shape.back());  // (gguf-py's QuantError: F16)
      why = {};
      why.mixture = std::string("decoded from FP8, written as ") + quant_name(it.type) + " (--fp8-as-q8)";
    }
    it.recipe = std::move(w.recipe);
    // llama-quantize reads the converter's --outtype auto file: every weight the converter does
    // not keep in F32 holds that file's 16-bit values (an F32 checkpoint's, a decoded or
    // ternarized one's rounded to them), whatever type it is then given
    if (llama_quantize && !kept && !it.recipe.is_computed() && !w.keep_f32) it.recipe.then(Step::round_to(m.auto_dtype));
    if (llama_quantize && !opt.imatrix && llama_quantize_requires_imatrix(it.name, it.type, ft->ftype))
      throw ConvertError("", it.name, std::string("would be ") + quant_name(it.type) + " in " + ft->name +
                                          ", which llama-quantize writes only with an importance matrix: give one (--imatrix FILE; on the page, drop it with the checkpoint)");
    if (opt.imatrix && llama_quantize && !kept && !it.recipe.is_computed())
      attach_importance(it, w, m.auto_dtype, *opt.imatrix, pc.notes, no_importance, ft->ftype);
    // (token_embd and output, which llama-quantize lets through without weights, or an imatrix
    // without this tensor's entry, or the converter's own file: ggml would abort)
    if (it.qt().needs_importance && !it.importance)
      throw ConvertError("", it.name, std::string("would be ") + quant_name(it.type) +
                                          ", which ggml cannot quantize without importance weights (llama-quantize aborts: "
                                          "GGML_ASSERT(quant_weights)): " +
                                          (llama_quantize ? "give an importance matrix that has this tensor with --imatrix FILE, or another type for it"
                                                          : "write it in llama-quantize's file: --type T --tensor-type PATTERN=TYPE --imatrix FILE"));
    it.note = why.fallback.empty() ? why.mixture : why.mixture.empty() ? why.fallback : why.mixture + "; " + why.fallback;
    if (!why.fallback.empty()) pc.warnings.push_back("fallback: " + it.name + ": " + why.fallback);
    if (it.recipe.is_computed())
      it.note = ends_with(it.name, ".scale") || ends_with(it.name, ".input_scale")
                    ? "an NVFP4 weight's per-tensor factor (weight_scale_2 / input_scale), as llama.cpp's converter writes it"
                    : "computed from config.json's rope_scaling, as llama.cpp's converter does";
    finish_item_geometry(it);
    GgufTensorInfo ti;
    ti.name = it.name;
    ti.dims = ggml_dims_from_shape(it.shape);
    if (!converter_writes)  // llama-quantize's (ggml's) writer stores n_dims without trailing 1s
      while (ti.dims.size() > 1 && ti.dims.back() == 1) ti.dims.pop_back();
    ti.type = uint32_t(it.qt().ggml_type);
    ti.nbytes = it.size.total();
    infos.push_back(std::move(ti));
    items.push_back(std::move(it));
  }
  if (opt.imatrix) {
    const Imatrix& im = *opt.imatrix;
    const int64_t weighted = std::count_if(items.begin(), items.end(), [](const PlanItem& it) { return it.importance != nullptr; });
    pc.notes.push_back("importance matrix " + im.file + " (" + (im.legacy ? "legacy .dat" : "GGUF") + "): " +
                       std::to_string(im.entries.size()) + " entries" +
                       (im.chunk_count > 0 ? ", " + std::to_string(im.chunk_count) + " chunks" : "") +
                       (im.datasets.empty() ? "" : " of " + im.datasets[0]) + "; " + std::to_string(weighted) +
                       " tensors quantized with its weights");
  }
  if (!no_importance.empty()) {
    std::string names;
    for (size_t i = 0; i < no_importance.size() && i < 4; ++i) names += (i ? ", " : "") + no_importance[i];
    pc.notes.push_back(std::to_string(no_importance.size()) + " tensor(s) have no importance weights in " + opt.imatrix->file + " (" +
                       names + (no_importance.size() > 4 ? ", ..." : "") + "): quantized without, as llama-quantize does");
  }
  kv.label = ck.label;
  // One file, or the parts llama-gguf-split --split makes of it (each a GGUF file of its own).
  const std::vector<std::vector<size_t>> parts = split_parts(infos, opt);
  const bool split = opt.split_max_bytes > 0 || opt.split_max_tensors > 0;  // parts even when one fits all, as gguf-split
  GgufHeaderBytes sum;  // over the parts
  sum.fixed = 0;
  int64_t vocab_bytes = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    GgufMetadata part_kv;
    std::vector<GgufTensorInfo> part_infos;
    for (size_t i : parts[k]) part_infos.push_back(infos[i]);
    if (split) {
      // gguf-split: every key in the first part only, then split.no, split.tensors.count and
      // split.count in each (it sets split.count last: ggml's gguf_set_val moves a key it
      // replaces to the end); ggml's writer stores n_dims without trailing 1s
      if (k == 0) part_kv = kv;
      part_kv.set_u16(kSplitNo, uint16_t(k));
      part_kv.set_i32(kSplitTensorsCount, int32_t(infos.size()));
      part_kv.set_u16(kSplitCount, uint16_t(parts.size()));
      for (GgufTensorInfo& t : part_infos)
        while (t.dims.size() > 1 && t.dims.back() <= 1) t.dims.pop_back();
    } else {
      part_kv = kv;
    }
    part_kv.label = ck.label;
    const GgufLayout L = layout_gguf(part_kv, std::move(part_infos), ck.label);
    PlanFile file;
    file.suffix = split ? split_suffix(int(k), int(parts.size())) : "";
    file.header = L.header;
    for (size_t j = 0; j < parts[k].size(); ++j) {
      items[parts[k][j]].file = int(k);
      items[parts[k][j]].offset = L.tensors[j].file_offset;
    }
    if (!L.tensors.empty()) {  // the padding after the last tensor: the file ends on the alignment
      const GgufTensorInfo& last = L.tensors.back();
      const int64_t end = last.file_offset + last.nbytes;
      if (L.file_size > end) file.fixed.push_back({end, std::vector<uint8_t>(size_t(L.file_size - end), 0)});
    }
    file.total_bytes = L.file_size;
    pc.plan.files.push_back(std::move(file));
    sum.fixed += L.bytes.fixed;
    sum.kv += L.bytes.kv;
    sum.tensor_info += L.bytes.tensor_info;
    sum.padding += L.bytes.padding + L.bytes.data_padding;
    for (const GgufKV& e : part_kv.entries())
      if (is_vocabulary_key(e.key)) vocab_bytes += kv_bytes(e);
  }
  pc.predicted = make_breakdown(pc.format, items, sum.fixed, sum.kv - vocab_bytes, sum.tensor_info, ck.source_bytes);
  add_vocabulary_and_padding(pc.predicted, vocab_bytes, sum.padding);

  const VocabSummary vs = summarize_vocab(vocab);
  nlohmann::json specials = nlohmann::json::object();
  for (const VocabSummary::Special& s : vs.specials) specials[s.name] = {{"id", s.id}, {"text", s.text}};
  pc.header = {{"magic", "GGUF"},
               {"version", kGgufVersion},
               {"n_tensors", items.size()},
               {"n_kv", kv.size()},
               {"alignment", kGgufDefaultAlignment},
               {"architecture", m.family->name},
               {"name", m.name},
               {"file_type", ft->name},
               {"tokenizer",
                {{"kind", vs.kind}, {"model", vs.model}, {"pre", vs.pre}, {"source", vs.source},
                 {"tokens", vs.n_tokens}, {"merges", vs.n_merges}, {"special", specials},
                 {"chat_template", vs.has_chat_template}, {"adds_bos", vs.adds_bos},
                 {"summary", vocab_summary_line(vocab)}}}};
  if (split) {
    nlohmann::json files = nlohmann::json::array();
    for (const PlanFile& f : pc.plan.files) files.push_back({{"suffix", f.suffix}, {"bytes", f.total_bytes}});
    pc.header["split"] = nlohmann::json{{"count", pc.plan.files.size()}, {"files", files}};
  }
  nlohmann::json computed = nlohmann::json::array();
  for (const PlanItem& it : items)
    if (it.recipe.is_computed()) computed.push_back(it.name);
  if (!computed.empty()) pc.header["computed_tensors"] = computed;
  if (opt.imatrix) pc.header["imatrix"] = opt.imatrix->file;  // (only llama-quantize's types take one)
  pc.plan.items = std::move(items);
  return pc;
}

FileModel gguf_file_model(const Checkpoint& ck, const InspectedFile& f, const std::string& file) {
  GgufModel m = ck.lora ? map_lora_to_gguf(ck) : map_checkpoint_to_gguf(ck);
  if (f.architecture != m.family->name)
    throw ConvertError(file, "general.architecture", "is '" + f.architecture + "' but the checkpoint is " + m.family->name);
  FileModel fm;
  for (GgufWeight& w : m.weights) fm.tensors.push_back({w.name, w.shape, std::move(w.recipe), w.role, w.layer});
  if (ck.lora) {  // its tensors are checked; it has no forward pass of its own
    fm.why_not = "a LoRA adapter: no forward pass of its own (llama.cpp runs it beside its base model)";
    return fm;
  }
  fm.compute = FileModel::Compute::Decoder;
  fm.kv = std::move(m.kv);
  fm.vocab_rows = m.vocab_rows;
  return fm;
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

namespace {

// One metadata value as JSON: a scalar as itself, an array as its count and first elements.
nlohmann::json gguf_element_json(const GgufValue& v, uint64_t i) {
  switch (v.elem_type()) {
    case GgufType::UINT8: return v.get<uint8_t>(i);
    case GgufType::INT8: return v.get<int8_t>(i);
    case GgufType::UINT16: return v.get<uint16_t>(i);
    case GgufType::INT16: return v.get<int16_t>(i);
    case GgufType::UINT32: return v.get<uint32_t>(i);
    case GgufType::INT32: return v.get<int32_t>(i);
    case GgufType::UINT64: return v.get<uint64_t>(i);
    case GgufType::INT64: return v.get<int64_t>(i);
    case GgufType::FLOAT32: return double(v.get<float>(i));
    case GgufType::FLOAT64: return v.get<double>(i);
    case GgufType::BOOL: return v.get<bool>(i);
    case GgufType::STRING: return v.str(i);
    case GgufType::ARRAY: break;
  }
  return nullptr;
}

nlohmann::json gguf_keys_json(const GgufFile& g, uint64_t first) {
  nlohmann::json keys = nlohmann::json::array();
  for (size_t k = 0; k < g.kv.entries().size(); ++k) {
    const GgufKV& e = g.kv.entries()[k];
    nlohmann::json j = {{"key", e.key}, {"bytes", g.kv_bytes[k]}};
    if (e.value.is_array()) {
      j["type"] = std::string("arr[") + gguf_type_name(e.value.elem_type()) + "]";
      j["count"] = e.value.size();
      nlohmann::json head = nlohmann::json::array();
      for (uint64_t i = 0; i < std::min<uint64_t>(first, e.value.kept()); ++i) head.push_back(gguf_element_json(e.value, i));
      j["first"] = head;
    } else {
      j["type"] = gguf_type_name(e.value.elem_type());
      j["value"] = gguf_element_json(e.value, 0);
    }
    keys.push_back(std::move(j));
  }
  return keys;
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

InspectedFile inspect_gguf(ByteSource& src) {
  GgufReadOptions ro;
  ro.max_array_elements = 16;  // a summary: a 128k vocabulary is validated, not kept
  const GgufFile g = read_gguf_file(src, ro);
  InspectedFile f;
  f.format = "gguf";
  if (const GgufValue* a = g.kv.find("general.architecture"); a && a->type() == GgufType::STRING)
    f.architecture = a->str();
  if (g.kv.has(kSplitCount)) {  // a part of a split file: its keys as gguf-split writes them
    const GgufValue* no = g.kv.find(kSplitNo), *count = g.kv.find(kSplitCount), *all = g.kv.find(kSplitTensorsCount);
    auto bad = [&](const char* key, const std::string& what) { return ConvertError(src.name(), key, what); };
    if (!count || count->type() != GgufType::UINT16) throw bad(kSplitCount, "is not a u16");
    if (!no || no->type() != GgufType::UINT16) throw bad(kSplitNo, "is missing or not a u16");
    if (!all || all->type() != GgufType::INT32) throw bad(kSplitTensorsCount, "is missing or not an i32");
    f.split = {no->get<uint16_t>(), count->get<uint16_t>(), all->get<int32_t>()};
    if (f.split.count < 1 || f.split.no >= f.split.count)
      throw bad(kSplitNo, std::to_string(f.split.no) + " is not a part of " + std::to_string(f.split.count));
    if (f.split.tensors < int64_t(g.tensors.size()))
      throw bad(kSplitTensorsCount, std::to_string(f.split.tensors) + " is fewer than this part's " +
                                        std::to_string(g.tensors.size()) + " tensors");
  }
  for (const GgufTensorInfo& t : g.tensors) {
    std::vector<int64_t> shape(t.dims.rbegin(), t.dims.rend());
    const QuantType* qt = quant_type_by_ggml_type(int(t.type));
    if (!qt) {  // a type ggml knows (the reader checked) but the project does not decode: listed, not read
      f.undecodable.push_back({t.name, upper(ggml_type_info(t.type)->name), std::move(shape), t.file_offset, t.nbytes});
      continue;
    }
    PlanItem it;
    it.name = t.name;
    it.shape = std::move(shape);
    it.type = qt->id;
    finish_item_geometry(it);
    it.offset = t.file_offset;
    f.items.push_back(std::move(it));
  }
  f.header = gguf_header_json(g);
  f.keys = gguf_keys_json(g, 8);  // an array's first 8 elements
  int64_t vocab_bytes = 0, other = 0;
  for (size_t i = 0; i < g.kv.entries().size(); ++i)
    (is_vocabulary_key(g.kv.entries()[i].key) ? vocab_bytes : other) += g.kv_bytes[i];
  f.breakdown = make_breakdown(f.format, f.items, g.bytes.fixed, other, g.bytes.tensor_info, 0);
  for (const OpaqueTensor& t : f.undecodable) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    add_undecoded_tensor(f.breakdown, t.type, numel, t.bytes);
  }
  add_vocabulary_and_padding(f.breakdown, vocab_bytes, g.bytes.padding + g.bytes.data_padding);
  return f;
}

}  // namespace leapconv
