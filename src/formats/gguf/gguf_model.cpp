#include "formats/gguf/gguf_model.h"

#include "formats/gguf/gguf_metadata.h"
#include "source/model_card.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <regex>
#include <set>
#include <stdexcept>

#include "core/text.h"
#include "source/dtype.h"
#include "source/model_config.h"

namespace leapconv {

namespace {

// A config key that is missing or malformed: "config.json: key 'x': ...".
ConvertError key_error(const std::string& file, const std::string& key, const std::string& what) {
  return ConvertError(file, "", "key '" + key + "': " + what);
}
// A config key llama.cpp would not read as Hugging Face means it (or a model it does not take).
UnsupportedError refused(const std::string& file, const std::string& key, const std::string& what) {
  return UnsupportedError(file, "", "key '" + key + "': " + what);
}

// The folder or file name only (the CLI sees a path, the page a name): general.name.
std::string model_name(std::string label) {
  while (label.size() > 1 && label.back() == '/') label.pop_back();
  const size_t slash = label.find_last_of('/');
  if (slash != std::string::npos) label = label.substr(slash + 1);
  const std::string ext = ".safetensors";
  if (label.size() > ext.size() && label.compare(label.size() - ext.size(), ext.size(), ext) == 0)
    label.resize(label.size() - ext.size());
  return label.empty() ? "model" : label;
}

// What gguf-py's Metadata reads beside the tensors: the folder's name, its README.md's front
// matter, config.json and generation_config.json (a README.md it cannot read: said, left out).
GeneralSources general_sources(const Checkpoint& ck, const nlohmann::json& config, int64_t total, std::string size,
                               std::vector<std::string>* warnings, const MetadataOverride* metadata = nullptr) {
  GeneralSources g;
  if (metadata) g.override = *metadata;
  g.folder = model_name(ck.label);
  g.total_params = total;
  g.computed_size_label = std::move(size);
  if (const SideFile* f = ck.side_file("README.md")) {
    ModelCard mc = read_model_card(f->bytes);
    if (!mc.warning.empty())
      warnings->push_back("README.md: " + mc.warning + ": the model card's metadata (license, tags, base models) is left out");
    g.card = std::move(mc.front);
  }
  if (const SideFile* f = ck.side_file("generation_config.json")) g.generation = nlohmann::json::parse(f->bytes, nullptr, false);
  g.config = config;
  return g;
}

// gguf-py's model_weight_count_rounded_notation: "57M", "1.1B", "8.0B" (two digits at least).
std::string size_label(int64_t params) {
  const double n = double(params);
  const auto [scaled, suffix] = n > 1e12 ? std::pair{n * 1e-12, "T"} : n > 1e9 ? std::pair{n * 1e-9, "B"}
                              : n > 1e6  ? std::pair{n * 1e-6, "M"}  : std::pair{n * 1e-3, "K"};
  const std::string digits = std::to_string(int64_t(std::nearbyint(scaled)));
  const int fix = std::max(0, 2 - int(digits.size()) + (digits == "0" ? 1 : 0));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f%s", fix, scaled, suffix);
  return buf;
}

}  // namespace

std::string gguf_architecture_list() {
  std::string s;
  std::set<std::string> listed;  // (Gemma 4's dense and mixture rows take the same architectures)
  for (const ArchFamily& f : arch_families())
    if (f.gguf_keys)
      for (const char* a : f.architectures)
        if (listed.insert(a).second) s += (s.empty() ? "" : ", ") + std::string(a);
  return s;
}

// The next role of the table reading the same source tensor as r (gpt-oss's gate and up from one
// gate_up_proj), or null.
const TensorRole* next_role_of_source(const ArchFamily& f, const TensorRole* r) {
  bool after = false;
  for (const TensorRole& x : f.roles) {
    if (after && x.hf && r->hf && std::string(x.hf) == r->hf) return &x;
    after |= &x == r;
  }
  return nullptr;
}

GgufModel map_checkpoint_to_gguf(const Checkpoint& ck, const MetadataOverride* metadata) {
  if (!ck.config) {
    throw ConvertError(ck.label, "", "no config.json: cannot tell the model's architecture and shape")
        .advise(kNoConfigAdvice);
  }
  const ModelConfig& c = *ck.config;
  const ArchFamily* fam = find_family(c);
  if (!fam || !fam->gguf_keys)
    throw refused(c.file, "architectures",
                       "'" + (c.architecture.empty() ? c.model_type : c.architecture) +
                           "' is not supported for GGUF export yet (supported: " + gguf_architecture_list() + ")");
  if (c.num_experts > 0 && !find_role(*fam, "ffn_gate_inp"))
    throw refused(c.file, c.raw.contains("num_local_experts") ? "num_local_experts" : "num_experts",
                  std::string("a mixture of experts: not written for ") + c.architecture + " yet (the MoE families: "
                  "Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, gpt-oss, Gemma 4)");
  if (c.has_qkv_bias && !find_role(*fam, "attn_q_b"))
    throw refused(c.file, c.raw.contains("attention_bias") ? "attention_bias" : "qkv_bias",
                    std::string("is true: llama.cpp's ") + fam->name +
                        " architecture takes no biases on the attention projections");
  if (c.dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0)
    throw ConvertError(c.file, "", "needs hidden_size, num_hidden_layers, num_attention_heads and num_key_value_heads");
  if (c.n_heads % c.n_kv_heads)
    throw key_error(c.file, "num_key_value_heads", "must divide num_attention_heads");
  if (!c.head_dim && c.dim % c.n_heads)
    throw key_error(c.file, "hidden_size", "must divide by num_attention_heads (or state head_dim)");

  GgufModel m;
  m.family = fam;
  m.name = model_name(ck.label);
  m.n_heads = c.n_heads;
  m.n_kv_heads = c.n_kv_heads;
  m.head_dim = c.head_dim ? c.head_dim : c.dim / c.n_heads;
  if (m.head_dim % 2 && fam->compute.rope != RopeKind::None) throw key_error(c.file, "head_dim", "must be even for RoPE");
  m.tied = c.tie_stated ? c.tie_word_embeddings : fam->tied_by_default;
  // ModelBase's GUESSED heuristic: the first 2-D BF16 / F16 tensor as indexed, in (shard, name)
  // order, before dequant_model. (An adapter merged while converting gives the checkpoint merged in
  // float32: F16, no 16-bit tensor.)
  const TensorRef* first16 = nullptr;
  for (const auto& [name, t] : ck.tensors)  // (by name: the first of a shard is its smallest)
    if (t.info.shape.size() >= 2 && (t.info.dtype == DType::BF16 || t.info.dtype == DType::F16) && (!first16 || t.shard < first16->shard))
      first16 = &t;
  if (first16 && ck.merged.empty()) m.auto_dtype = first16->info.dtype;

  // Vocabulary and FFN width come from the tensors, checked against the config.
  const TensorRef* emb = find_source(ck, *fam, role_of(*fam, "token_embd"), 0);
  if (!emb) throw ConvertError(ck.label, role_of(*fam, "token_embd").hf, "missing from the checkpoint");
  if (emb->info.shape.size() != 2 || emb->info.shape[1] != c.dim)
    throw ConvertError(ck.shard_name(emb->shard), emb->info.name,
                       "shape " + shape_string(emb->info.shape) + " contradicts " + c.file + " (" +
                           role_of(*fam, "token_embd").why + " " + std::to_string(c.dim) + ")");
  if (emb->info.shape[0] <= 0)  // nothing could be looked up in it
    throw ConvertError(ck.shard_name(emb->shard), emb->info.name, "has no rows: the vocabulary is empty");
  const bool headless = emb->info.name != role_of(*fam, "token_embd").hf;  // names missing tensors the same way
  ArchDims d;
  d.hidden = c.dim;
  d.vocab = emb->info.shape[0];
  if (c.vocab_size && c.vocab_size != d.vocab)
    throw ConvertError(ck.shard_name(emb->shard), emb->info.name,
                       "has " + std::to_string(d.vocab) + " rows but config.json's vocab_size is " +
                           std::to_string(c.vocab_size));
  d.ffn = c.hidden_dim;
  for (const TensorRole& r : fam->roles) {  // unstated (GPT-2's n_inner: null): from the tensor
    if (d.ffn) break;
    const TensorRef* t = find_source(ck, *fam, r, 0);
    for (size_t i = 0; t && i < r.shape.size() && i < t->info.shape.size(); ++i)
      if (r.shape[i] == Dim::Ffn || r.shape[i] == Dim::Ffn2)
        d.ffn = t->info.shape[i] / (r.shape[i] == Dim::Ffn2 ? 2 : 1);
  }
  d.kv = c.n_kv_heads * m.head_dim;
  d.q = c.n_heads * m.head_dim;
  d.head_dim = m.head_dim;
  d.positions = c.seq_len;
  d.n_layers = c.n_layers;
  d.experts = c.num_experts;
  d.heads = c.n_heads;
  if (d.experts > 0) {
    d.expert_ffn = config_int(c.raw, "moe_intermediate_size", c.hidden_dim);
    d.shexp_ffn = config_int(c.raw, "shared_expert_intermediate_size", 0);
  }
  if (fam->dims) fam->dims(c, d);
  m.vocab_rows = d.vocab;
  m.n_experts = d.experts;

  // Every source tensor is a role of the family or an error; in the converter's order (its
  // ModelBase.index_tensors): shard by shard in name order, by name within a shard (as
  // safetensors' safe_open lists them), not in data order; weights unpacked from integer codes
  // (GPTQ, pack-quantized) after all of them, as dequant_model adds its new_tensors last (BitNet's
  // replace their codes where they are: the same name).
  std::vector<std::string> order = ck.order;
  auto added = [&](const std::string& n) { auto p = ck.quant.packed.find(n); return p != ck.quant.packed.end() && p->second.codes != n; };
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    const bool pa = added(a), pb = added(b);
    const int sa = ck.find(a)->shard, sb = ck.find(b)->shard;
    return pa != pb ? pb : sa != sb ? sa < sb : a < b;
  });
  const TensorRole* classifier = find_role(*fam, "output");
  std::set<std::string> seen;
  // A mixture's experts, one tensor each, wait for the rest of their layer: the converter stacks
  // a layer's experts when the last of them arrives (its modify_tensors buffers them until it
  // holds experts x roles), role after role in the family's order, and writes them there.
  std::vector<const TensorRole*> expert_roles;
  for (const TensorRole& r : fam->roles)
    if (r.per_expert() && !r.nvfp4_only) expert_roles.push_back(&r);
  std::map<int64_t, std::map<std::pair<const TensorRole*, int64_t>, const TensorRef*>> waiting;  // layer -> (role, expert)
  auto stack_experts = [&](int64_t layer) {
    for (const TensorRole* r : expert_roles) {
      GgufWeight w;
      w.role = r;
      w.layer = layer;
      w.name = role_name(r->gguf, layer);
      w.shape = d.shape(r->shape, layer);
      w.shape.insert(w.shape.begin(), d.experts);  // [experts, rows, cols]
      for (int64_t e = 0; e < d.experts; ++e)
        w.recipe.add_source(ck, *waiting[layer].at({r, e}));
      w.recipe.then(Step::stack());
      w.keep_f32 = converter_keeps_f32(w.name, w.shape.size());
      seen.insert(w.name);
      m.weights.push_back(std::move(w));
    }
    waiting.erase(layer);
  };
  std::vector<GgufWeight> repacked;
  // NVFP4 weights, each with its per-tensor factors: the converter writes them before everything
  // else (prepare_tensors' _generate_nvfp4_tensors, before its main loop), blocks kept as they ship.
  std::vector<GgufWeight> nvfp4;
  auto add_nvfp4_factors = [&](const GgufWeight& w, const std::vector<float>& scale2, const std::vector<float>& input_scale, bool per_expert) {
    const std::string stem = w.name.substr(0, w.name.size() - 7);  // (new_name.replace(".weight", ...))
    for (const auto& [suffix, v] : {std::pair{".scale", &scale2}, std::pair{".input_scale", &input_scale}}) {
      // _write_scale_tensor: unless one value within 1e-6 of 1; _write_scales_tensor (experts):
      // unless np.allclose(v, 1.0, atol=1e-6) (|v - 1| <= 1e-6 + 1e-5)
      bool written = false;
      for (float x : *v) written |= per_expert ? !(std::fabs(double(x) - 1.0) <= 1e-6 + 1e-5 * 1.0) : nvfp4_factor_written(x);
      if (!written) continue;
      if (!w.role || !w.role->per_layer)  // (llama.cpp's generic pass loads the layers' factors only)
        m.warnings.push_back(w.name + " is NVFP4 with a factor other than 1: llama.cpp reads no " + stem + suffix +
                             " and will refuse the file (\"wrong number of tensors\"); llama.cpp's converter writes it so too");
      GgufWeight f;
      f.role = w.role;
      f.layer = w.layer;
      f.name = stem + suffix;
      f.shape = {int64_t(v->size())};
      f.recipe = Recipe::computed(*v);
      f.keep_f32 = true;
      nvfp4.push_back(std::move(f));
    }
  };
  std::map<std::pair<int64_t, const TensorRole*>, std::map<int64_t, const Nvfp4Weight*>> nvfp4_experts;
  // Gemma 4: a layer's router.per_expert_scale folded into its NVFP4 down experts' factors
  // (Gemma4Model._generate_nvfp4_tensors: scale_2 x per_expert_scale[e]) where every expert of
  // the layer has a weight_scale_2; the scale is then not written on its own. By layer: the
  // per_expert_scale's values, read when the layer's down experts are merged.
  const TensorRole* per_expert_scale = find_role(*fam, "ffn_down_exps_s");
  std::set<int64_t> folded;
  if (per_expert_scale) {
    // layer -> its NVFP4 down experts' weights, with whether each has a (ModelOpt) weight_scale_2
    std::map<int64_t, std::vector<std::pair<const Nvfp4Weight*, bool>>> down;
    for (const auto& [name, q] : ck.quant.nvfp4) {
      int64_t l = -1, e = 0;
      const TensorRole* r = source_role(*fam, name, &l, &e);
      if (r && r->nvfp4_only && std::string(r->role) == "ffn_down_exps") down[l].push_back({&q, ends_with(q.scale2_name, ".weight_scale_2")});
    }
    for (const auto& [l, experts] : down) {
      const int64_t n = std::count_if(experts.begin(), experts.end(), [](const auto& x) { return x.second; });
      if (n == 0) continue;
      for (const auto& [q, has] : experts)
        if (!has)
          throw ConvertError(ck.shard_name(ck.find(q->codes)->shard), q->codes + "_scale_2",
                             "is missing, where " + std::to_string(n) + " other down experts of layer " + std::to_string(l) +
                                 " have one: llama.cpp's converter folds per_expert_scale into all of them or none "
                                 "(\"partial NVFP4 quantization across experts\")");
      if (find_source(ck, *fam, *per_expert_scale, l)) folded.insert(l);
    }
  }
  auto per_expert_scale_of = [&](int64_t layer) {
    const TensorRef& t = *find_source(ck, *fam, *per_expert_scale, layer);
    const std::string& file = ck.shard_name(t.shard);
    const SourceDType& sd = source_dtype(t.info.dtype);
    if (!sd.is_float || sd.needs_scale || t.info.numel() != d.experts)
      throw ConvertError(file, t.info.name, std::string("is ") + sd.name + " " + shape_string(t.info.shape) + ": want " +
                                                std::to_string(d.experts) + " F32, F16 or BF16 values, one per expert");
    std::vector<uint8_t> raw(size_t(t.info.nbytes()));
    ck.sources()[size_t(t.shard)]->read_at(t.info.begin, raw.data(), raw.size());
    std::vector<float> v(size_t(d.experts));
    decode_to_f32(t.info.dtype, raw.data(), d.experts, v.data());
    for (float x : v)
      if (!std::isfinite(x)) throw ConvertError(file, t.info.name, "holds " + std::to_string(x) + ": an expert's scale must be finite");
    return v;
  };
  auto flush_nvfp4_experts = [&](int64_t layer, const TensorRole* role) {
    const auto& group = nvfp4_experts.at({layer, role});
    GgufWeight w;
    w.role = role;
    w.layer = layer;
    w.name = role_name(role->gguf, layer);
    w.shape = d.shape(role->shape, layer);
    w.shape.insert(w.shape.begin(), d.experts);
    std::vector<float> scale2, input_scale;
    const bool fold = folded.count(layer) && std::string(role->role) == "ffn_down_exps";
    const std::vector<float> pes = fold ? per_expert_scale_of(layer) : std::vector<float>();
    for (const auto& [e, q] : group) {  // (by expert: the converter sorts them)
      const int i = int(w.recipe.sources.size());
      w.recipe.sources.push_back(SourceTensor::of(ck, *ck.find(q->scale)));
      w.recipe.sources.push_back(nvfp4_codes_source(ck, *q));
      w.recipe.then(Step::mask_bytes(i, 0x7F)).then(Step::nibble_pairs(i + 1, 8));
      scale2.push_back(fold ? q->scale2 * pes[size_t(e)] : q->scale2);  // (f32 x f32, as torch: s() * r()[i])
      input_scale.push_back(q->input_scale);
    }
    Step stack = Step::stack();
    stack.count = 2;
    w.recipe.then(stack).then(Step::pass_through(QType::NVFP4));
    seen.insert(w.name);
    GgufWeight head;
    head.role = role, head.layer = layer, head.name = w.name;
    nvfp4.push_back(std::move(w));
    add_nvfp4_factors(head, scale2, input_scale, true);
    nvfp4_experts.erase({layer, role});
  };
  for (const std::string& name : order) {
    const TensorRef& t = *ck.find(name);
    int64_t layer = -1, expert = 0;
    if (converter_source_name(name).empty()) {  // a vision tower's, a projector's: not the language model's
      ++m.left_out;
      continue;
    }
    const TensorRole* first = source_role(*fam, name, &layer, &expert);
    if (!first) {
      bool ignorable = false;
      for (const char* pat : fam->ignorable) ignorable |= name.find(pat) != std::string::npos;
      if (ignorable) continue;
      throw ConvertError(ck.shard_name(t.shard), name,
                         std::string("is not a tensor of llama.cpp's ") + fam->name + " architecture" +
                             (name.find("bias") != std::string::npos ? " (a bias it does not take)" : ""));
    }
    static const std::regex kNvfp4Expert(R"(\.experts\.\d+\.(gate_proj|up_proj|down_proj)\.weight$)");
    if (auto nv = ck.quant.nvfp4.find(name); nv != ck.quant.nvfp4.end()) {
      const Nvfp4Weight& q = nv->second;
      const TensorRef& codes = *ck.find(q.codes);
      const std::string& file = ck.shard_name(codes.shard);
      const TensorRole* role = first;
      if (role->per_layer && layer >= c.n_layers)
        throw ConvertError(file, q.codes, "is layer " + std::to_string(layer) + " but config.json's num_hidden_layers is " + std::to_string(c.n_layers));
      if (role->per_expert() && !next_role_of_source(*fam, role) && role->transform == Transform::None &&
          std::regex_search(name, kNvfp4Expert)) {
        // _generate_nvfp4_tensors: a layer's experts of one projection, merged (by expert) when
        // the last of them arrives, as model.layers.{L}.mlp.experts.{proj}.weight
        if (expert >= d.experts)
          throw ConvertError(file, q.codes, "is expert " + std::to_string(expert) + " but " + c.file + " names " +
                                                std::to_string(d.experts) + " experts (num_local_experts / num_experts)");
        const std::vector<int64_t> want = d.shape(role->shape, layer);
        if (want != q.shape)
          throw ConvertError(file, q.codes, "holds an NVFP4 weight of shape " + shape_string(q.shape) + ", which contradicts " + c.file +
                                                " (" + role->why + " gives " + shape_string(want) + ")");
        auto& group = nvfp4_experts[{layer, role}];
        if (!group.emplace(expert, &q).second) throw ConvertError(file, q.codes, "is a second source of the same expert");
        if (int64_t(group.size()) == d.experts) flush_nvfp4_experts(layer, role);
        continue;
      }
      // Experts named otherwise (Mixtral's experts.{E}.w1 / w2 / w3): _generate_nvfp4_tensors
      // repacks each on its own under map_tensor_name, which maps no per-expert name: the
      // converter stops there ("Can not map tensor"), and so does this.
      if (role->per_expert())
        throw ConvertError(file, q.codes, "is one expert's NVFP4 weight, which llama.cpp's converter cannot take either: it merges NVFP4 "
                                          "experts named experts.{E}.gate_proj / up_proj / down_proj only, and maps no other expert's "
                                          "name (\"Can not map tensor\"); convert the bf16 checkpoint instead");
      if (next_role_of_source(*fam, role) ||
          (role->transform != Transform::None && role->transform != Transform::RopeHeads && role->transform != Transform::RopeKvHeads))
        throw UnsupportedError(file, q.codes, std::string("is an NVFP4 weight of ") + role->gguf +
                                                  ", which is not taken yet (NVFP4 is kept as blocks: fused and transposed weights are not)");
      if (role == classifier && m.tied) continue;
      const std::vector<int64_t> want = d.shape(role->shape, layer);
      if (want != q.shape)
        throw ConvertError(file, q.codes, "holds an NVFP4 weight of shape " + shape_string(q.shape) + " (from its scales " +
                                              q.scale + "), which contradicts " + c.file + " (" + role->why + " gives " + shape_string(want) + ")");
      GgufWeight w;
      w.role = role;
      w.layer = layer;
      w.name = role_name(role->gguf, layer);
      w.shape = q.shape;
      w.recipe.sources = {SourceTensor::of(ck, *ck.find(q.scale)), nvfp4_codes_source(ck, q)};
      w.recipe.then(Step::mask_bytes(0, 0x7F)).then(Step::nibble_pairs(1, 8));
      // LlamaModel._repack_nvfp4: q / k rows permuted (with their scales) before packing
      if (role->transform == Transform::RopeHeads) w.recipe.then(Step::permute_heads(1, c.n_heads));
      if (role->transform == Transform::RopeKvHeads) w.recipe.then(Step::permute_heads(1, c.n_kv_heads));
      w.recipe.then(Step::pass_through(QType::NVFP4));
      if (!seen.insert(w.name).second)
        throw ConvertError(file, q.codes, "is a second source of " + w.name + " (the checkpoint names it twice)");
      GgufWeight& added = nvfp4.emplace_back(std::move(w));
      GgufWeight copy_of_added;
      copy_of_added.role = added.role, copy_of_added.layer = added.layer, copy_of_added.name = added.name;
      add_nvfp4_factors(copy_of_added, {q.scale2}, {q.input_scale}, false);
      continue;
    }
    if (ck.quant.nvfp4_file && t.info.dtype == DType::U8 && !is_mxfp4(first->transform))
      throw ConvertError(ck.shard_name(t.shard), name, "is U8 " + shape_string(t.info.shape) + " in an NVFP4 checkpoint, without its " +
                                                           name + "_scale (F8_E4M3, one per 16 values): its NVFP4 codes cannot be read");
    if (first->nvfp4_only)
      throw ConvertError(ck.shard_name(t.shard), name, "is one expert's weight, and not NVFP4: llama.cpp's converter takes "
                                                       "these experts as one tensor per layer (experts.gate_up_proj, experts.down_proj), "
                                                       "or as NVFP4 (\"Can not map tensor\")");
    if (first == per_expert_scale && folded.count(layer)) continue;  // (in its NVFP4 down experts' factors)
    // every role the tensor plays (gpt-oss's gate_up_proj: gate and up), in the table's order
    for (const TensorRole* role = first; role; role = next_role_of_source(*fam, role)) {
      if (role->per_layer && layer >= c.n_layers)
        throw ConvertError(ck.shard_name(t.shard), name,
                           "is layer " + std::to_string(layer) + " but config.json's num_hidden_layers is " +
                               std::to_string(c.n_layers));
      if (role == classifier && m.tied) continue;  // tied: the embeddings are the classifier
      const std::vector<int64_t> want = d.shape(role->shape, layer);
      if (std::count(want.begin(), want.end(), 0))
        throw ConvertError(ck.shard_name(t.shard), name,
                           role->per_expert() || role->role == std::string("ffn_gate_inp")
                               ? "is an expert's tensor, but " + c.file + " names no experts (num_local_experts / num_experts)"
                               : "is not a tensor of this model: " + c.file + "'s " + role->why + " gives it no rows" +
                                     (d.experts > 0 ? " (every layer is a mixture of experts)" : ""));
      const std::vector<int64_t> want_source = role_source_shape(want, role->transform);
      if (t.info.shape != want_source)
        throw ConvertError(ck.shard_name(t.shard), name,
                           "shape " + shape_string(t.info.shape) + " contradicts " + c.file + " (" + role->why + " gives " +
                               (want_source.empty() ? shape_string(want) + ", not in whole MXFP4 blocks of 32" : shape_string(want_source)) + ")");
      if (is_mxfp4(role->transform) ? t.info.dtype != DType::U8 : !ck.holds_weights(t))
        throw ConvertError(ck.shard_name(t.shard), name,
                           std::string("dtype ") + dtype_name(t.info.dtype) +
                               (is_mxfp4(role->transform) ? ": MXFP4 blocks are bytes (U8)" : " is not a float type"));
      if (role->per_expert()) {
        if (expert >= d.experts)
          throw ConvertError(ck.shard_name(t.shard), name,
                             "is expert " + std::to_string(expert) + " but " + c.file + " names " +
                                 std::to_string(d.experts) + " experts (num_local_experts / num_experts)");
        if (!waiting[layer].emplace(std::pair{role, expert}, &t).second)
          throw ConvertError(ck.shard_name(t.shard), name, "is a second source of the same expert");
        if (int64_t(waiting[layer].size()) == d.experts * int64_t(expert_roles.size())) stack_experts(layer);
        continue;
      }
      GgufWeight w;
      w.role = role;
      w.layer = layer;
      w.name = role_name(role->gguf, layer);
      w.shape = role_shape(t.info.shape, role->transform);
      w.recipe = role_recipe(ck, t, role->transform, c.n_heads, c.n_kv_heads);
      const std::string& g = w.name;
      w.keep_f32 = !is_mxfp4(role->transform) && converter_keeps_f32(g, w.shape.size());
      if (!seen.insert(g).second)  // both names of a role (with and without the headless prefix)
        throw ConvertError(ck.shard_name(t.shard), name, "is a second source of " + g + " (the checkpoint names it twice)");
      // MXFP4 experts: the converter repacks them before its main loop (generate_extra_tensors)
      (is_mxfp4(role->transform) ? repacked : m.weights).push_back(std::move(w));
    }
  }
  for (const auto& [key, group] : nvfp4_experts) {  // (the converter would merge the experts it has: a broken file)
    int64_t e = 0;
    while (group.count(e)) ++e;
    throw ConvertError(ck.label, source_name(*fam, *key.second, key.first, headless, e),
                       "missing from the checkpoint: the other experts of its layer are NVFP4 (searched " + std::to_string(ck.shards.size()) + " shard(s))");
  }
  for (const TensorRole& r : fam->roles) {
    for (int64_t l = 0; l < (r.per_layer ? c.n_layers : 1); ++l) {
      if (d.may_lack(r, l)) continue;  // the classifier (present unless tied), a shared KV layer's k and v
      // fused gate and up experts, or the two merged from NVFP4 (Gemma 4)
      if (std::string(r.role) == "ffn_gate_up_exps" && seen.count(role_name(role_of(*fam, "ffn_gate_exps").gguf, l)) &&
          seen.count(role_name(role_of(*fam, "ffn_up_exps").gguf, l)))
        continue;
      if (&r == per_expert_scale && folded.count(l)) continue;  // (folded into the NVFP4 down experts' factors)
      const std::vector<int64_t> want = d.shape(r.shape, l);
      if (std::count(want.begin(), want.end(), 0)) continue;  // not in this model (Gemma 4 without per-layer inputs)
      if (seen.count(role_name(r.gguf, l))) continue;
      int64_t e = 0;  // the first expert missing (none: another role's is)
      while (r.per_expert() && waiting.count(l) && waiting[l].count({&r, e})) ++e;
      if (r.per_expert() && e == d.experts) continue;
      throw ConvertError(ck.label, source_name(*fam, r, l, headless, e),
                         "missing from the checkpoint (searched " + std::to_string(ck.shards.size()) + " shard(s))");
    }
  }
  // gguf-py's size_label: the parameter count, or for a mixture "<experts>x<count>" with every
  // stacked expert tensor counted once (get_total_parameter_count's shared + expert params)
  int64_t params = 0, per_expert = 0, total = 0;
  for (const std::vector<GgufWeight>* list : {&nvfp4, &repacked, &m.weights})
  for (const GgufWeight& w : *list) {
    int64_t n = 1;  // (its values as written: MXFP4's sources are bytes)
    for (int64_t x : w.shape) n *= x;
    const bool stacked = w.name.find("_exps.") != std::string::npos && w.shape.size() >= 3;  // (its rule, by name)
    (stacked ? per_expert : params) += stacked ? n / w.shape[0] : n;
    total += n;
  }
  GgufKeys k;  // the family's keys; tensors it computes come first in the file
  k.family = fam;
  k.head_dim = m.head_dim;
  fam->gguf_keys(c, d, k);
  // The converter's order: general.architecture, what it writes while preparing the tensors,
  // general.type and the general.* metadata, then the family's keys.
  m.kv.set_string("general.architecture", fam->name);
  for (const GgufKV& e : k.after_architecture.entries()) m.kv.set(e.key, e.value);
  m.kv.set_string("general.type", "model");
  // (the computed tensors, rope_freqs, are counted by the converter too: it counts what it wrote)
  for (const ComputedTensor& t : k.computed) total += std::accumulate(t.shape.begin(), t.shape.end(), int64_t(1), std::multiplies<>());
  set_general_metadata(m.kv, general_sources(ck, c.raw, total, per_expert > 0 ? std::to_string(d.experts) + "x" + size_label(params + per_expert)
                                                                        : size_label(params), &m.warnings, metadata), &m.warnings);
  if (const GgufValue* n = m.kv.find("general.name")) m.name = n->str();
  for (const GgufKV& e : k.kv.entries()) m.kv.set(e.key, e.value);
  m.warnings.insert(m.warnings.end(), k.warnings.begin(), k.warnings.end());
  m.notes = std::move(k.notes);
  if (m.left_out > 0)
    m.notes.push_back(std::to_string(m.left_out) + " tensors of " + c.architecture +
                      " are not the language model's (a vision tower, a projector): the file holds the language "
                      "model; llama.cpp reads images with a separate mmproj file");
  std::vector<GgufWeight> computed;
  for (ComputedTensor& t : k.computed) {
    GgufWeight w;
    w.name = t.name;
    w.shape = t.shape;
    w.recipe = Recipe::computed(std::move(t.values));
    w.keep_f32 = true;
    computed.push_back(std::move(w));
  }
  m.weights.insert(m.weights.begin(), std::make_move_iterator(repacked.begin()), std::make_move_iterator(repacked.end()));
  m.weights.insert(m.weights.begin(), std::make_move_iterator(computed.begin()), std::make_move_iterator(computed.end()));
  if (!repacked.empty()) m.float_file_type = 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE: the converter's for f32 / f16 / bf16
  m.weights.insert(m.weights.begin(), std::make_move_iterator(nvfp4.begin()), std::make_move_iterator(nvfp4.end()));
  if (ck.quant.nvfp4_file) m.float_file_type = 39;  // LLAMA_FTYPE_MOSTLY_NVFP4: the converter's _is_nvfp4 (for f32 / f16 / bf16)
  return m;
}

GgufModel map_lora_to_gguf(const Checkpoint& ck) {
  if (!ck.lora) throw ConvertError(ck.label, "", "internal: not a LoRA adapter");
  if (!ck.config)
    throw ConvertError(ck.label, "", "no config.json of the base model: give its folder (--model)")
        .advise("This folder is a LoRA adapter (adapter_config.json) without its base model's config.json. Drop it "
                "together with its base model's folder (or put the base model's config.json beside it) to convert the "
                "adapter, or convert the base model's folder.");
  const ModelConfig& c = *ck.config;
  const ArchFamily* fam = find_family(c);
  if (!fam || !fam->gguf_keys)
    throw refused(c.file, "architectures", "'" + (c.architecture.empty() ? c.model_type : c.architecture) +
                                               "' is not supported for GGUF export yet (supported: " + gguf_architecture_list() + ")");
  if (c.dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads)
    throw ConvertError(c.file, "", "needs hidden_size, num_hidden_layers, num_attention_heads and num_key_value_heads");
  GgufModel m;
  m.family = fam;
  m.name = model_name(ck.label);
  m.n_heads = c.n_heads;
  m.n_kv_heads = c.n_kv_heads;
  m.head_dim = c.head_dim ? c.head_dim : c.dim / c.n_heads;
  ArchDims d;  // the base's sizes, from its config (the adapter has no embeddings to count the vocabulary)
  d.hidden = c.dim, d.ffn = c.hidden_dim, d.vocab = c.vocab_size, d.head_dim = m.head_dim, d.heads = c.n_heads;
  d.kv = c.n_kv_heads * m.head_dim, d.q = c.n_heads * m.head_dim, d.positions = c.seq_len, d.n_layers = c.n_layers;
  d.experts = c.num_experts;
  if (fam->dims) fam->dims(c, d);

  // lora_A / lora_B pairs by the base tensor they adapt, in the converter's order (the adapter's
  // tensors by name: safetensors' load_file).
  struct Pair { const TensorRef* a = nullptr; const TensorRef* b = nullptr; };
  std::vector<std::string> bases;
  std::map<std::string, Pair> pairs;
  std::vector<std::string> names = ck.order;
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const TensorRef& t = *ck.find(name);
    const std::string& file = ck.shard_name(t.shard);
    if (name.find("lora_embedding_") != std::string::npos)
      throw ConvertError(file, name, "adapts the token embeddings (new tokens added in fine-tuning?): not taken yet");
    bool is_a = false;
    const std::string base = lora_base_name(name, &is_a);
    if (base.empty()) throw ConvertError(file, name, "is not a lora_A or lora_B tensor (llama.cpp's converter stops at it too)");
    if (!pairs.count(base)) bases.push_back(base);
    (is_a ? pairs[base].a : pairs[base].b) = &t;
  }
  for (const std::string& base : bases) {
    const Pair& p = pairs[base];
    const TensorRef* some = p.a ? p.a : p.b;
    const std::string& file = ck.shard_name(some->shard);
    if (!p.a || !p.b)
      throw ConvertError(file, some->info.name, std::string("has no ") + (p.a ? "lora_B" : "lora_A") + " beside it");
    int64_t layer = -1, expert = 0;
    const TensorRole* role = source_role(*fam, base, &layer, &expert);
    if (!role) throw ConvertError(file, p.a->info.name, "adapts " + base + ", which is not a tensor of llama.cpp's " + fam->name + " architecture");
    if (role->transform == Transform::Ternary)
      throw ConvertError(file, p.a->info.name, "adapts " + base + ", a BitNet projection the converter ternarizes as a whole: a separate adapter "
                                               "is not taken (llama.cpp would add it to the ternary weight); fold it in with --merge-lora, before the ternarization");
    if (role->per_expert() || (role->transform != Transform::None && role->transform != Transform::RopeHeads &&
                               role->transform != Transform::RopeKvHeads) || role->role == std::string("token_embd"))
      throw ConvertError(file, p.a->info.name, "adapts " + base + ": adapters of experts, embeddings and transposed or repacked weights are not taken yet");
    if (role->per_layer && layer >= c.n_layers)
      throw ConvertError(file, p.a->info.name, "is layer " + std::to_string(layer) + " but config.json's num_hidden_layers is " + std::to_string(c.n_layers));
    const std::vector<int64_t> want = d.shape(role->shape, layer);  // the base weight [out, in]
    const std::vector<int64_t>& sa = p.a->info.shape, &sb = p.b->info.shape;
    if (want.size() != 2 || sa.size() != 2 || sb.size() != 2 || sa[1] != want[1] || sb[0] != want[0] || sa[0] != sb[1] || sa[0] < 1)
      throw ConvertError(file, p.a->info.name, "A " + shape_string(sa) + " and B " + shape_string(sb) + " do not make a " +
                                                   shape_string(want) + " update of " + base + " (" + role->why + ")");
    for (const TensorRef* t : {p.a, p.b})
      if (!ck.holds_weights(*t)) throw ConvertError(file, t->info.name, std::string("dtype ") + dtype_name(t->info.dtype) + " is not a float type");
    const std::string g = role_name(role->gguf, layer);
    GgufWeight a, b;
    a.role = b.role = role;
    a.layer = b.layer = layer;
    a.name = g + ".lora_a";
    a.shape = sa;
    a.recipe = Recipe::of(ck, *p.a);
    b.name = g + ".lora_b";
    b.shape = sb;
    b.recipe = role_recipe(ck, *p.b, role->transform, c.n_heads, c.n_kv_heads);  // the permutation acts on B's rows
    m.weights.push_back(std::move(a));
    m.weights.push_back(std::move(b));
  }
  if (m.weights.empty()) throw ConvertError(ck.label, "", "the adapter has no lora_A / lora_B tensors");
  // convert_lora_to_gguf.py's keys: its LoraModel writes no family keys, only the alpha
  m.kv.set_string("general.architecture", fam->name);
  m.kv.set_string("general.type", "adapter");
  m.kv.set_string("adapter.type", "lora");
  // the adapter's size as gguf-py counts it: each pair as its B A product ([out, in]), negated (not exact)
  int64_t total = 0;
  for (size_t i = 0; i + 1 < m.weights.size(); i += 2) total += m.weights[i + 1].shape[0] * m.weights[i].shape[1];
  // (convert_lora_to_gguf.py reads the model card and config.json of the adapter's folder, not the base's)
  set_general_metadata(m.kv, general_sources(ck, ck.lora->folder_config, -total, "", &m.warnings), &m.warnings);
  if (const GgufValue* n = m.kv.find("general.name")) m.name = n->str();
  m.kv.set("adapter.lora.alpha", GgufValue::scalar(float(ck.lora->alpha)));
  return m;
}

}  // namespace leapconv
