#include "formats/gguf/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "source/model_config.h"

namespace leapconv {

namespace {

using json = nlohmann::json;

// A config key llama.cpp would not read as Hugging Face means it: "config.json: key 'x': ...".
ConvertError key_error(const std::string& file, const std::string& key, const std::string& what) {
  return ConvertError(file, "", "key '" + key + "': " + what);
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

double num(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// config.json's rope_scaling (or transformers' newer rope_parameters), {} when absent.
json rope_parameters(const ModelConfig& c) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = c.raw.find(key);
    if (it != c.raw.end() && it->is_object()) return *it;
    if (it != c.raw.end() && !it->is_null())
      throw key_error(c.file, key, "is neither an object nor null");
  }
  return json::object();
}

std::string rope_type_of(const ModelConfig& c, const json& rp) {
  for (const char* key : {"rope_type", "type"}) {
    auto it = rp.find(key);
    if (it == rp.end()) continue;
    if (!it->is_string()) throw key_error(c.file, std::string("rope_scaling.") + key, "is not a string");
    return it->get<std::string>();
  }
  return "";
}

double need_positive(const ModelConfig& c, const json& rp, const char* key) {
  auto it = rp.find(key);
  if (it == rp.end() || !it->is_number() || !(it->get<double>() > 0))
    throw key_error(c.file, std::string("rope_scaling.") + key, "is missing or not a positive number");
  return it->get<double>();
}

uint32_t u32_of(const ModelConfig& c, const char* key, int64_t v) {
  if (v <= 0 || v > int64_t(UINT32_MAX)) throw key_error(c.file, key, "must be a positive 32-bit number");
  return uint32_t(v);
}

// Llama (LLM_ARCH_LLAMA): the keys llama.cpp's loader reads, as TextModel.set_gguf_parameters and
// LlamaModel.set_gguf_parameters write them; rope scaling as keys or as rope_freqs.
void llama_keys(const ModelConfig& c, const ArchDims& d, GgufModel& m) {
  GgufMetadata& kv = m.kv;
  const std::string a = "llama.";
  kv.set_u32(a + "block_count", u32_of(c, "num_hidden_layers", c.n_layers));
  if (c.seq_len <= 0)
    throw key_error(c.file, "max_position_embeddings",
                       "is missing: llama.cpp needs llama.context_length (the trained context)");
  kv.set_u32(a + "context_length", u32_of(c, "max_position_embeddings", c.seq_len));
  kv.set_u32(a + "embedding_length", u32_of(c, "hidden_size", d.hidden));
  kv.set_u32(a + "feed_forward_length", u32_of(c, "intermediate_size", d.ffn));
  kv.set_u32(a + "attention.head_count", u32_of(c, "num_attention_heads", c.n_heads));
  kv.set_u32(a + "attention.head_count_kv", u32_of(c, "num_key_value_heads", c.n_kv_heads));

  const json rp = rope_parameters(c);
  const double theta = num(rp, "rope_theta", c.rope_theta);
  const std::string type = rope_type_of(c, rp);
  if (type == "linear") {
    kv.set_string(a + "rope.scaling.type", "linear");
    kv.set_f32(a + "rope.scaling.factor", float(need_positive(c, rp, "factor")));
  } else if (type == "yarn") {
    kv.set_string(a + "rope.scaling.type", "yarn");
    kv.set_f32(a + "rope.scaling.factor", float(need_positive(c, rp, "factor")));
    kv.set_u32(a + "rope.scaling.original_context_length",
               u32_of(c, "rope_scaling.original_max_position_embeddings",
                      int64_t(need_positive(c, rp, "original_max_position_embeddings"))));
    const std::pair<const char*, const char*> yarn[] = {{"extrapolation_factor", "yarn_ext_factor"},
                                                        {"attention_factor", "yarn_attn_factor"},
                                                        {"beta_fast", "yarn_beta_fast"},
                                                        {"beta_slow", "yarn_beta_slow"}};
    for (const auto& [hf, key] : yarn)
      if (rp.contains(hf) && rp[hf].is_number()) kv.set_f32(a + "rope.scaling." + key, rp[hf].get<float>());
  } else if (type == "llama3") {
    GgufWeight w;
    w.name = "rope_freqs.weight";
    w.shape = {m.head_dim / 2};
    w.values = llama3_rope_factors(theta, m.head_dim, num(rp, "factor", 8.0), num(rp, "low_freq_factor", 1.0),
                                   num(rp, "high_freq_factor", 4.0),
                                   num(rp, "original_max_position_embeddings", 8192.0));
    w.keep_f32 = true;
    m.weights.insert(m.weights.begin(), std::move(w));  // generate_extra_tensors come first
  } else if (!type.empty() && type != "default") {
    throw key_error(c.file, "rope_scaling.rope_type",
                       "'" + type + "' is not a rope scaling llama.cpp's llama architecture runs (linear, yarn, llama3)");
  }
  if (c.rope_theta_stated || rp.contains("rope_theta")) kv.set_f32(a + "rope.freq_base", float(theta));
  kv.set_f32(a + "attention.layer_norm_rms_epsilon", float(c.norm_eps));
  if (c.head_dim) {
    kv.set_u32(a + "attention.key_length", u32_of(c, "head_dim", c.head_dim));
    kv.set_u32(a + "attention.value_length", u32_of(c, "head_dim", c.head_dim));
  }
  kv.set_u32(a + "vocab_size", u32_of(c, "vocab_size", d.vocab));
  kv.set_u32(a + "rope.dimension_count", u32_of(c, "head_dim", m.head_dim));
}

// The families GGUF export takes: a row each (the architecture table holds their tensors).
struct GgufFamily {
  const char* family;  // ArchFamily::name = general.architecture
  void (*keys)(const ModelConfig&, const ArchDims&, GgufModel&);
};
const GgufFamily kGgufFamilies[] = {
    {"llama", llama_keys},
};

const GgufFamily* gguf_family(const ArchFamily* f) {
  if (!f) return nullptr;
  for (const GgufFamily& g : kGgufFamilies)
    if (std::string(g.family) == f->name) return &g;
  return nullptr;
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
  for (const GgufFamily& g : kGgufFamilies)
    for (const char* a : find_family_by_name(g.family)->architectures) s += (s.empty() ? "" : ", ") + std::string(a);
  return s;
}

std::vector<float> llama3_rope_factors(double theta, int64_t head_dim, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_context) {
  // float32 throughout, in the order torch evaluates convert_hf_to_gguf.py's expressions
  const float dim = float(head_dim), base = float(theta), two_pi = float(2 * M_PI);
  const float old_ctx = float(original_context), f = float(factor), low = float(low_freq_factor);
  const float span = float(high_freq_factor - low_freq_factor);
  const float low_wavelen = float(original_context / low_freq_factor);
  const float high_wavelen = float(original_context / high_freq_factor);
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const float freq = 1.0f / std::pow(base, float(i) / dim);
    const float wavelen = two_pi / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(f);
    } else {
      const float smooth = (old_ctx / wavelen - low) / span;
      out.push_back(1.0f / ((1.0f - smooth) / f + smooth));
    }
  }
  return out;
}

GgufModel map_checkpoint_to_gguf(const Checkpoint& ck) {
  if (!ck.config) throw ConvertError(ck.label, "", "no config.json: cannot tell the model's architecture and shape");
  const ModelConfig& c = *ck.config;
  const ArchFamily* fam = find_family(c);
  const GgufFamily* gf = gguf_family(fam);
  if (!gf)
    throw key_error(c.file, "architectures",
                       "'" + (c.architecture.empty() ? c.model_type : c.architecture) +
                           "' is not supported for GGUF export yet (supported: " + gguf_architecture_list() + ")");
  if (c.num_experts > 0) throw key_error(c.file, "num_local_experts", "mixture-of-experts models are not supported yet");
  if (c.has_qkv_bias) throw key_error(c.file, "attention_bias", "attention biases are not supported yet");
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
  if (m.head_dim % 2) throw key_error(c.file, "head_dim", "must be even for RoPE");

  // Vocabulary and FFN width come from the tensors, checked against the config.
  const TensorRef* emb = ck.find(role_of(*fam, "token_embd").hf);
  if (!emb) throw ConvertError(ck.label, role_of(*fam, "token_embd").hf, "missing from the checkpoint");
  if (emb->info.shape.size() != 2 || emb->info.shape[1] != c.dim)
    throw ConvertError(ck.shard_name(emb->shard), emb->info.name,
                       "shape " + shape_string(emb->info.shape) + " contradicts the config (hidden_size " +
                           std::to_string(c.dim) + ")");
  ArchDims d;
  d.hidden = c.dim;
  d.vocab = emb->info.shape[0];
  if (c.vocab_size && c.vocab_size != d.vocab)
    throw ConvertError(ck.shard_name(emb->shard), emb->info.name,
                       "has " + std::to_string(d.vocab) + " rows but config.json's vocab_size is " +
                           std::to_string(c.vocab_size));
  const TensorRef* gate = ck.find(role_name(role_of(*fam, "ffn_gate").hf, 0));
  d.ffn = c.hidden_dim ? c.hidden_dim : gate && gate->info.shape.size() == 2 ? gate->info.shape[0] : 0;
  d.kv = c.n_kv_heads * m.head_dim;
  d.q = c.n_heads * m.head_dim;
  m.vocab_rows = d.vocab;

  m.kv.set_string("general.architecture", fam->name);
  m.kv.set_string("general.type", "model");
  m.kv.set_string("general.name", m.name);

  // Every source tensor, in checkpoint order, is a role of the family or an error.
  const TensorRole& classifier = role_of(*fam, "output");
  std::set<std::string> seen;
  for (const std::string& name : ck.order) {
    const TensorRef& t = *ck.find(name);
    const TensorRole* role = nullptr;
    int64_t layer = -1;
    for (const TensorRole& r : fam->roles)
      if ((layer = match_role_name(r.hf, name)) >= 0) { role = &r; break; }
    if (!role) {
      bool ignorable = false;
      for (const char* pat : fam->ignorable) ignorable |= name.find(pat) != std::string::npos;
      if (ignorable) continue;
      throw ConvertError(ck.shard_name(t.shard), name,
                         std::string("is not a tensor of llama.cpp's ") + fam->name + " architecture" +
                             (name.find("bias") != std::string::npos ? " (a bias it does not take)" : ""));
    }
    if (role->per_layer && layer >= c.n_layers)
      throw ConvertError(ck.shard_name(t.shard), name,
                         "is layer " + std::to_string(layer) + " but config.json's num_hidden_layers is " +
                             std::to_string(c.n_layers));
    if (role == &classifier && c.tie_word_embeddings) continue;  // tied: the embeddings are the classifier
    const std::vector<int64_t> want = d.shape(role->shape);
    if (t.info.shape != want)
      throw ConvertError(ck.shard_name(t.shard), name,
                         "shape " + shape_string(t.info.shape) + " contradicts the config (" + role->why + " gives " +
                             shape_string(want) + ")");
    if (!dtype_is_float(t.info.dtype))
      throw ConvertError(ck.shard_name(t.shard), name,
                         std::string("dtype ") + dtype_name(t.info.dtype) + " is not a float type");
    GgufWeight w;
    w.role = role;
    w.layer = layer;
    w.name = role_name(role->gguf, layer);
    w.src = &t;
    w.shape = t.info.shape;
    w.permute_heads = role->transform == Transform::RopeHeads     ? int(c.n_heads)
                      : role->transform == Transform::RopeKvHeads ? int(c.n_kv_heads)
                                                                  : 0;
    const std::string& g = w.name;
    w.keep_f32 = w.shape.size() <= 1 || (g.size() >= 12 && g.compare(g.size() - 12, 12, "_norm.weight") == 0);
    seen.insert(g);
    m.weights.push_back(std::move(w));
  }
  for (const TensorRole& r : fam->roles) {
    if (r.optional) continue;  // the classifier: present unless tied
    for (int64_t l = 0; l < (r.per_layer ? c.n_layers : 1); ++l)
      if (!seen.count(role_name(r.gguf, l)))
        throw ConvertError(ck.label, role_name(r.hf, l),
                           "missing from the checkpoint (searched " + std::to_string(ck.shards.size()) + " shard(s))");
  }
  int64_t params = 0;
  for (const GgufWeight& w : m.weights) params += w.src ? w.src->info.numel() : 0;
  m.kv.set_string("general.size_label", size_label(params));
  gf->keys(c, d, m);
  return m;
}

}  // namespace leapconv
