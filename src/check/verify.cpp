#include "check/verify.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "arch/arch_table.h"
#include "check/forward.h"
#include "formats/formats.h"
#include "formats/gguf/gguf_model.h"
#include "formats/leap_engine.h"
#include "formats/leap_model.h"
#include "quant/codec.h"
#include "source/model_config.h"

#include <array>
#include <functional>
#include <map>
#include <memory>

namespace leapconv {

static float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    const float d = std::fabs(a[i] - b[i]);
    if (std::isnan(d)) return INFINITY;  // a NaN against a number
    m = d > m ? d : m;
  }
  return m;
}

namespace {

// v (of a tensor shaped `shape`) as a file stores it: RoPE-permuted rows, then transposed, then
// offset (Checkpoint::read_f32's transforms, on values already read).
std::vector<float> transformed(std::vector<float> v, const std::vector<int64_t>& shape, int permute_heads,
                               bool transpose, float add) {
  if ((permute_heads > 0 || transpose) && shape.size() == 2) {
    const int64_t rows = shape[0], cols = shape[1];
    std::vector<float> u(v.size());
    if (permute_heads > 0) {
      const int64_t hd = rows / permute_heads;
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(v.begin() + rope_source_row(r, hd) * cols, cols, u.begin() + r * cols);
      v.swap(u);
    }
    if (transpose) {
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) u[size_t(j * rows + i)] = v[size_t(i * cols + j)];
      v.swap(u);
    }
  }
  if (add != 0.0f)
    for (float& x : v) x += add;
  return v;
}

// A file's weights under other names, transformed as they are read (a GGUF-lite file holds the
// checkpoint's tensors as they are; decoder_forward takes them as a GGUF file holds them).
class RenamedWeights : public ModelWeights {
 public:
  struct Entry {
    std::string name;  // in the file
    std::vector<int64_t> shape;
    int permute_heads = 0;
    bool transpose = false;
    float add = 0.0f;
  };
  RenamedWeights(ModelWeights& inner, std::map<std::string, Entry> e) : inner_(inner), e_(std::move(e)) {}
  std::vector<float> tensor(const std::string& name) override {
    const Entry& e = get(name);
    return transformed(inner_.tensor(e.name), e.shape, e.permute_heads, e.transpose, e.add);
  }
  std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1) override {
    const Entry& e = get(name);
    if (e.permute_heads || e.transpose) throw ConvertError("", name, "internal: rows of a permuted or transposed weight");
    return transformed(inner_.rows(e.name, r0, r1), {}, 0, false, e.add);
  }

 private:
  const Entry& get(const std::string& name) {
    auto it = e_.find(name);
    if (it == e_.end()) throw ConvertError("", name, "no such weight for the forward check");
    return it->second;
  }
  ModelWeights& inner_;
  std::map<std::string, Entry> e_;
};

// The source checkpoint's weights, under the names the forward pass uses, optionally
// fake-quantized with the layout a file gives each tensor ("the source as written").
class CheckpointWeights : public ModelWeights {
 public:
  struct Binding {
    const TensorRef* src = nullptr;
    int permute_heads = 0;           // the file holds the RoPE-permuted tensor
    const PlanItem* layout = nullptr;  // fake-quantize like this; null = unquantized
    // decoder_forward's weights: as a GGUF file holds them (permuted, transposed, offset), kept
    // so. `after`: the file holds the source untransformed (GGUF-lite), so the transforms come
    // after its quantization.
    bool gguf_layout = false, after = false, transpose = false;
    float add = 0.0f;
  };
  CheckpointWeights(const Checkpoint& ck, std::map<std::string, Binding> b) : ck_(ck), b_(std::move(b)) {}

  std::vector<float> tensor(const std::string& name) override {
    const Binding& b = get(name);
    if (b.gguf_layout) {
      std::vector<float> w = b.after ? ck_.read_f32(*b.src) : ck_.read_f32(*b.src, b.permute_heads, b.transpose, b.add);
      if (b.layout) w = fake_quantize(*b.layout, w.data());
      if (b.after) w = transformed(std::move(w), b.src->info.shape, b.permute_heads, b.transpose, b.add);
      return w;
    }
    std::vector<float> w = ck_.read_f32(*b.src, b.permute_heads);
    if (b.layout) w = fake_quantize(*b.layout, w.data());
    if (b.permute_heads > 0) {  // back to HF's layout: quantized exactly as the file holds it
      const int64_t rows = b.src->info.shape[0], cols = b.src->info.shape[1], hd = rows / b.permute_heads;
      std::vector<float> u(w.size());
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(w.begin() + r * cols, cols, u.begin() + rope_source_row(r, hd) * cols);
      w.swap(u);
    }
    return w;
  }

  std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1) override {
    const Binding& b = get(name);
    const int64_t cols = b.src->info.numel() / b.src->info.shape[0];
    if (b.gguf_layout && (b.permute_heads || b.transpose))
      throw ConvertError(ck_.label, name, "internal: rows of a permuted or transposed weight");
    std::vector<float> w = ck_.read_rows_f32(*b.src, r0, r1);
    if (b.gguf_layout && !b.after) w = transformed(std::move(w), {}, 0, false, b.add);
    if (b.layout) {
      PlanItem part = *b.layout;  // the same type over just these rows
      part.shape = {r1 - r0, cols};
      finish_item_geometry(part);
      w = fake_quantize(part, w.data());
    }
    if (b.gguf_layout && b.after) w = transformed(std::move(w), {}, 0, false, b.add);
    return w;
  }

 private:
  const Binding& get(const std::string& name) {
    auto it = b_.find(name);
    if (it == b_.end()) throw ConvertError(ck_.label, name, "no such weight for the forward check");
    return it->second;
  }
  const Checkpoint& ck_;
  std::map<std::string, Binding> b_;
};

// The weights stored in a written file, decoded.
class FileWeights : public ModelWeights {
 public:
  FileWeights(ByteSource& f, std::map<std::string, const PlanItem*> items) : f_(f), items_(std::move(items)) {}
  std::vector<float> tensor(const std::string& name) override { return read_tensor_f32(f_, get(name)); }
  std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1) override {
    return read_rows_f32(f_, get(name), r0, r1);
  }
  Int8Rows int8_rows(const std::string& name, int64_t r0, int64_t r1) override {
    const PlanItem& it = get(name);
    if (it.type != QType::Int8Group) return ModelWeights::int8_rows(name, r0, r1);
    Int8Rows r;
    r.r0 = r0;
    r.rows = r1 - r0;
    r.cols = it.cols;
    r.total_rows = it.rows;
    r.group_size = it.group_size;
    r.q.resize(size_t(r.rows * r.cols));
    f_.read_at(it.offset + r0 * it.cols, r.q.data(), r.q.size());  // values, then the scales
    // every group from the 16-value block of the first element to the one of the last
    const int64_t n = it.rows * it.cols, e0 = r0 * it.cols / 16 * 16;
    const int64_t e1 = std::min(n, (r1 * it.cols + 15) / 16 * 16);
    r.s0 = e0 / it.group_size;
    r.s.resize(size_t((e1 - 1) / it.group_size + 1 - r.s0));
    f_.read_at(it.offset + n + r.s0 * 4, r.s.data(), r.s.size() * 4);
    return r;
  }

 private:
  const PlanItem& get(const std::string& name) {
    auto it = items_.find(name);
    if (it == items_.end()) throw ConvertError(f_.name(), name, "missing from the file");
    return *it->second;
  }
  ByteSource& f_;
  std::map<std::string, const PlanItem*> items_;
};


void compare(ForwardCheck& fc, const ForwardTrace& ref, const ForwardTrace& file, const ForwardTrace& src) {
  for (size_t l = 0; l < ref.layers.size(); ++l)
    fc.layers.push_back({"layer " + std::to_string(l), max_abs_diff(ref.layers[l], file.layers[l]),
                         max_abs_diff(ref.layers[l], src.layers[l])});
  if (ref.has_logits)
    fc.layers.push_back({"logits", max_abs_diff(ref.logits, file.logits), max_abs_diff(ref.logits, src.logits)});
  for (const LayerCheck& l : fc.layers) fc.ok = fc.ok && l.file_vs_reference <= kForwardTolerance;
}

std::vector<int32_t> probe_tokens(int64_t vocab) {
  std::vector<int32_t> t;
  if (vocab <= 0) throw ConvertError("the model has an empty vocabulary: no tokens to run the forward check on");
  for (int64_t x : {1, 7, 42, 3, 1000, 5, 11, 2})
    t.push_back(int32_t(x % vocab));
  return t;
}

size_t argmax(const float* v, int64_t n) {
  return size_t(std::max_element(v, v + n) - v);
}

// The forward check as model runs, one verify step each: the source as written, the unquantized
// source, the file's model (and, LEAP v2, the engine's W8A8); `done` compares them into fc.
// `soft`: a failure in a run becomes fc's note instead of an error (a GGUF-lite file of a family
// without a GGUF mapping).
struct ForwardRun {
  ForwardCheck fc;
  std::vector<std::function<void()>> passes;
  std::function<void()> done;
  bool soft = false;
};
using Traces = std::array<ForwardTrace, 3>;  // the source as written, the unquantized source, the file's
using Pass = std::function<ForwardTrace(const ForwardCheck&)>;

// A forward check's three passes, in Traces' order, each writing its trace into t, then the
// comparison of the file's model with the source's.
std::unique_ptr<ForwardRun> compared_passes(const ForwardCheck& fc, const std::shared_ptr<Traces>& t, const std::array<Pass, 3>& pass) {
  auto run = std::make_unique<ForwardRun>();
  run->fc = fc;
  ForwardCheck* out = &run->fc;  // the run owns it, on the heap: the passes may keep the pointer
  for (size_t i = 0; i < 3; ++i) run->passes.push_back([=, p = pass[i]] { (*t)[i] = p(*out); });
  run->done = [=] {
    compare(*out, (*t)[0], (*t)[2], (*t)[1]);
    out->ran = true;
  };
  return run;
}

std::unique_ptr<ForwardRun> note_only(const std::string& note) {
  auto r = std::make_unique<ForwardRun>();
  r->fc.note = note;
  return r;
}

// LEAP's engine on a version-2 file, emulated, against the fp32 model as written and the source.
W8A8Check w8a8_check(const LlamaSpec& file_spec, ModelWeights& file_w, const InspectedFile& f, const ForwardCheck& fc,
                     const ForwardTrace& ref, const ForwardTrace& src, const std::string& file_name) {
  W8A8Check w;
  w.group_size = f.header.value("group_size", 0);
  std::string broken;  // a file written before the engine's group-size rule was known
  LeapShape shape;
  shape.dim = file_spec.dim;
  shape.hidden_dim = file_spec.hidden;
  try {
    leap_group_size(file_name, shape, w.group_size, "its group size");
  } catch (const ConvertError& e) {
    broken = "this file breaks LEAP's engine (" + e.detail() + "); ";
  }
  LlamaSpec es = file_spec;
  es.w8a8 = true;
  const ForwardTrace emu = llama_forward(es, file_w, fc.tokens, fc.layers_run);
  for (size_t l = 0; l < emu.layers.size(); ++l)
    w.layers.push_back({"layer " + std::to_string(l), max_abs_diff(emu.layers[l], ref.layers[l]),
                        max_abs_diff(emu.layers[l], src.layers[l])});
  if (emu.has_logits) {
    w.layers.push_back({"logits", max_abs_diff(emu.logits, ref.logits), max_abs_diff(emu.logits, src.logits)});
    const int64_t V = file_spec.vocab;
    w.positions = int64_t(fc.tokens.size());
    for (int64_t t = 0; t < w.positions; ++t) {
      const size_t e = argmax(emu.logits.data() + t * V, V);
      w.top1_same_as_written += e == argmax(ref.logits.data() + t * V, V);
      w.top1_same_as_source += e == argmax(src.logits.data() + t * V, V);
    }
    for (float x : ref.logits) w.max_abs_logit = std::max(w.max_abs_logit, std::fabs(x));
  }
  w.ran = true;
  w.note = broken + "int8 weights times activations quantized to int8 in groups of " + std::to_string(w.group_size) +
           " (int32 dot products per group), emulated as LEAP's QuantizedTransformer computes them, with the "
           "model's own rms eps and rope theta; informative, not part of PASS/FAIL";
  return w;
}

int64_t layers_within(int64_t budget, int64_t per_layer, int64_t n_layers) {
  return std::max<int64_t>(1, std::min<int64_t>(n_layers, budget / std::max<int64_t>(1, per_layer)));
}

// Llama: the file's model (interleaved RoPE when the file is LEAP) against the source; for a
// LEAP v2 file also LEAP's engine's W8A8 arithmetic (into *w8a8).
std::unique_ptr<ForwardRun> llama_check(ByteSource& file, const InspectedFile& f, const Checkpoint& ck,
                                        const VerifyOptions& opt, W8A8Check* w8a8) {
  const LeapModel m = map_llama_to_leap(ck, 0);
  // LEAP and GGUF store q/k RoPE-permuted (interleaved pairs); GGUF-lite as the checkpoint does.
  const bool permuted = f.names != InspectedFile::Names::Source;
  std::map<std::string, const PlanItem*> by_name;
  for (const PlanItem& it : f.items) by_name[it.name] = &it;
  std::map<std::string, CheckpointWeights::Binding> as_written, unquantized;
  std::map<std::string, const PlanItem*> file_items;  // LEAP names -> file layouts
  for (const LeapWeight& w : m.weights) {
    const std::string in_file = f.names == InspectedFile::Names::Leap   ? w.leap_name
                                : f.names == InspectedFile::Names::Gguf ? role_name(w.role->gguf, w.layer)
                                                                        : w.src->info.name;
    const PlanItem* item = by_name[in_file];
    if (!item) throw ConvertError(file.name(), in_file, "missing from the file");
    file_items[w.leap_name] = item;
    as_written[w.leap_name] = {w.src, permuted ? w.permute_heads : 0, item};
    unquantized[w.leap_name] = {w.src, 0, nullptr};
  }
  if (m.shared_classifier == false && !file_items.count("output")) throw ConvertError(file.name(), "output", "missing");
  LlamaSpec s;
  s.dim = m.dim; s.hidden = m.hidden_dim; s.n_layers = m.n_layers; s.n_heads = m.n_heads;
  s.n_kv_heads = m.n_kv_heads; s.vocab = m.vocab_size; s.shared_classifier = m.shared_classifier;
  s.eps = ck.config->norm_eps; s.rope_theta = ck.config->rope_theta;
  ForwardCheck fc;
  fc.architecture = "llama";
  fc.n_layers = m.n_layers;
  const int64_t per_layer = s.dim * s.dim * 2 + 2 * s.dim * s.n_kv_heads * (s.dim / s.n_heads) + 3 * s.dim * s.hidden;
  fc.layers_run = layers_within(opt.param_budget, per_layer, s.n_layers);
  fc.tokens = probe_tokens(s.vocab);
  auto ref_w = std::make_shared<CheckpointWeights>(ck, as_written), src_w = std::make_shared<CheckpointWeights>(ck, unquantized);
  auto file_w = std::make_shared<FileWeights>(file, file_items);
  auto t = std::make_shared<Traces>();
  LlamaSpec fs = s;
  fs.interleaved_rope = permuted;  // LEAP's engine and llama.cpp rotate interleaved pairs of the permuted weights
  auto run = compared_passes(fc, t, {[=](const ForwardCheck& c) { return llama_forward(s, *ref_w, c.tokens, c.layers_run); },
                                      [=](const ForwardCheck& c) { return llama_forward(s, *src_w, c.tokens, c.layers_run); },
                                      [=](const ForwardCheck& c) { return llama_forward(fs, *file_w, c.tokens, c.layers_run); }});
  ForwardCheck* out = &run->fc;
  if (f.format == "leap-v2")
    run->passes.push_back([=, &f, &file] { *w8a8 = w8a8_check(fs, *file_w, f, *out, (*t)[0], (*t)[1], file.name()); });
  return run;
}

std::unique_ptr<ForwardRun> gpt2_check(ByteSource& file, const InspectedFile& f, const Checkpoint& ck,
                                       const VerifyOptions& opt) {
  const nlohmann::json& c = ck.config->raw;
  const std::string& cfg = ck.config->file;
  Gpt2Spec s;
  try {
    s.dim = config_int(c, "n_embd", 0);
    s.n_layers = config_int(c, "n_layer", 0);
    s.n_heads = config_int(c, "n_head", 0);
    s.vocab = config_int(c, "vocab_size", 0);
    s.n_positions = config_int(c, "n_positions", 0);
    s.ffn = config_int(c, "n_inner", 0);
  } catch (const ConvertError& e) {
    throw ConvertError(cfg, "", e.detail());
  }
  if (s.ffn == 0 && s.dim > 0 && s.dim <= (int64_t(1) << 40)) s.ffn = 4 * s.dim;  // n_inner: null means 4 x n_embd
  auto eps = c.find("layer_norm_epsilon");
  if (eps != c.end() && eps->is_number()) s.eps = eps->get<double>();
  const std::pair<const char*, int64_t> need[] = {{"n_embd", s.dim},       {"n_layer", s.n_layers},
                                                  {"n_head", s.n_heads},     {"vocab_size", s.vocab},
                                                  {"n_positions", s.n_positions}, {"n_inner", s.ffn}};
  for (const auto& [key, v] : need)
    if (v <= 0)
      throw ConvertError(cfg, "", std::string("'") + key + "' is " + (c.contains(key) ? c[key].dump() : "missing") +
                                      ": the GPT-2 forward check needs a positive number");
  if (s.dim % s.n_heads) throw ConvertError(cfg, "", "'n_embd' does not divide by 'n_head'");
  // Every tensor the forward pass reads must have the shape the config gives it: it indexes
  // them by the config's sizes.
  const ArchFamily& fam = *find_family_by_name("gpt2");
  ArchDims d;
  d.hidden = s.dim;
  d.ffn = s.ffn;
  d.vocab = s.vocab;
  d.positions = s.n_positions;
  std::map<std::string, const PlanItem*> by_name;
  for (const PlanItem& it : f.items) by_name[it.name] = &it;
  // gpt2_forward reads the table's names; the checkpoint (and so the file) may hold the headless ones
  std::map<std::string, CheckpointWeights::Binding> as_written, unquantized;
  std::map<std::string, const PlanItem*> file_items;
  for (const TensorRole& r : fam.roles)
    for (int64_t l = 0; l < (r.per_layer ? s.n_layers : 1); ++l) {
      const TensorRef* t = find_source(ck, fam, r, l);
      if (!t && r.optional) continue;  // an untied classifier, when there is one
      if (!t) throw ConvertError(ck.label, role_name(r.hf, l), "missing from the checkpoint (the GPT-2 forward check needs it)");
      const std::string& name = t->info.name;
      const std::vector<int64_t> want = d.shape(r.shape);
      if (t->info.shape != want)
        throw ConvertError(ck.shard_name(t->shard), name, "shape " + shape_string(t->info.shape) + " contradicts " + cfg +
                                                              " (" + r.why + " gives " + shape_string(want) + ")");
      if (!dtype_is_float(t->info.dtype))
        throw ConvertError(ck.shard_name(t->shard), name, std::string("dtype ") + dtype_name(t->info.dtype) +
                                                              " is not a float type");
      const auto it = by_name.find(name);
      if (it == by_name.end()) continue;  // the tensor check has named what the file lacks
      const std::string as = role_name(r.hf, l);
      file_items[as] = it->second;
      as_written[as] = {t, 0, it->second};
      unquantized[as] = {t, 0, nullptr};
    }
  ForwardCheck fc;
  fc.architecture = "gpt2";
  fc.n_layers = s.n_layers;
  fc.layers_run = layers_within(opt.param_budget, 12 * s.dim * s.dim, s.n_layers);
  fc.tokens = probe_tokens(s.vocab);
  if (int64_t(fc.tokens.size()) > s.n_positions) fc.tokens.resize(size_t(s.n_positions));
  auto ref_w = std::make_shared<CheckpointWeights>(ck, as_written), src_w = std::make_shared<CheckpointWeights>(ck, unquantized);
  auto file_w = std::make_shared<FileWeights>(file, file_items);
  auto t = std::make_shared<Traces>();
  return compared_passes(fc, t, {[=](const ForwardCheck& c) { return gpt2_forward(s, *ref_w, c.tokens, c.layers_run); },
                                 [=](const ForwardCheck& c) { return gpt2_forward(s, *src_w, c.tokens, c.layers_run); },
                                 [=](const ForwardCheck& c) { return gpt2_forward(s, *file_w, c.tokens, c.layers_run); }});
}

// Every family but Llama (and GPT-2 in a GGUF-lite file): the model as its GGUF file holds it,
// run by decoder_forward with the spec llama.cpp reads from the keys the GGUF writer gives this
// checkpoint; the file's model against the source's, quantized as the file holds it and not.
std::unique_ptr<ForwardRun> decoder_check(ByteSource& file, const InspectedFile& f, const Checkpoint& ck,
                                          const VerifyOptions& opt) {
  const GgufModel m = map_checkpoint_to_gguf(ck);
  std::vector<float> rope_freqs;
  bool has_output = false;
  for (const GgufWeight& w : m.weights) {
    if (!w.src && w.name == "rope_freqs.weight") rope_freqs = w.values;
    has_output |= w.name == "output.weight";
  }
  const DecoderSpec s = gguf_decoder_spec(m.kv, m.vocab_rows, has_output, rope_freqs);
  const bool gguf = f.names == InspectedFile::Names::Gguf;
  std::map<std::string, const PlanItem*> by_name;
  for (const PlanItem& it : f.items) by_name[it.name] = &it;
  std::map<std::string, CheckpointWeights::Binding> as_written, unquantized;
  std::map<std::string, const PlanItem*> file_items;
  std::map<std::string, RenamedWeights::Entry> renamed;
  int64_t per_layer = 0;
  for (const GgufWeight& w : m.weights) {
    if (!w.src) continue;  // computed from the config: in the spec
    const std::string in_file = gguf ? w.name : w.src->info.name;
    const auto it = by_name.find(in_file);
    if (it == by_name.end()) throw ConvertError(file.name(), in_file, "missing from the file");
    CheckpointWeights::Binding b{w.src, w.permute_heads, it->second, true, !gguf, w.transpose, w.add};
    as_written[w.name] = b;
    b.layout = nullptr;
    b.after = false;
    unquantized[w.name] = b;
    file_items[gguf ? w.name : in_file] = it->second;
    renamed[w.name] = {in_file, w.src->info.shape, w.permute_heads, w.transpose, w.add};
    if (w.role && w.role->per_layer && w.layer == 0) per_layer += w.src->info.numel();
  }
  ForwardCheck fc;
  fc.architecture = m.family->name;
  fc.n_layers = s.n_layers;
  fc.layers_run = layers_within(opt.param_budget, per_layer, s.n_layers);
  fc.tokens = probe_tokens(s.vocab);
  if (s.family->compute.rope == RopeKind::None && int64_t(fc.tokens.size()) > s.n_positions)
    fc.tokens.resize(size_t(s.n_positions));
  auto ref_w = std::make_shared<CheckpointWeights>(ck, as_written), src_w = std::make_shared<CheckpointWeights>(ck, unquantized);
  auto file_w = std::make_shared<FileWeights>(file, file_items);
  auto lite_w = std::make_shared<RenamedWeights>(*file_w, renamed);  // reads through file_w: captured with it
  ModelWeights* got_w = gguf ? static_cast<ModelWeights*>(file_w.get()) : lite_w.get();
  auto t = std::make_shared<Traces>();
  return compared_passes(fc, t, {[=](const ForwardCheck& c) { return decoder_forward(s, *ref_w, c.tokens, c.layers_run); },
                                 [=](const ForwardCheck& c) { return decoder_forward(s, *src_w, c.tokens, c.layers_run); },
                                 [=](const ForwardCheck& c) {
                                   (void)file_w, (void)lite_w;  // got_w reads through them: held with it
                                   return decoder_forward(s, *got_w, c.tokens, c.layers_run);
                                 }});
}

// The forward check for this file and checkpoint: its runs, or a note saying why there are none.
std::unique_ptr<ForwardRun> forward_check(ByteSource& file, const InspectedFile& f, const Checkpoint& ck,
                                          const VerifyOptions& opt, W8A8Check* w8a8) {
  const std::string type = ck.config ? ck.config->model_type : "";
  const std::string arch = ck.config ? ck.config->architecture : "";
  const ArchFamily* family = ck.config ? find_family(*ck.config) : nullptr;
  if (f.names == InspectedFile::Names::Leap || family == &llama_family()) return llama_check(file, f, ck, opt, w8a8);
  if (family && std::string(family->name) == "gpt2" && f.names == InspectedFile::Names::Source)
    return gpt2_check(file, f, ck, opt);
  if (family && f.names == InspectedFile::Names::Gguf) return decoder_check(file, f, ck, opt);
  if (family) {  // GGUF-lite: the family's model as GGUF export would map it, if it does
    try {
      std::unique_ptr<ForwardRun> r = decoder_check(file, f, ck, opt);
      r->soft = true;
      return r;
    } catch (const ConvertError& e) {
      return note_only("no reference forward pass for this checkpoint: " + std::string(e.what()));
    }
  }
  return note_only("no reference forward pass for architecture '" + (arch.empty() ? type : arch) + "'");
}

// How many verify steps the forward check takes (its runs; one for a note), known before it is set up.
int64_t forward_steps(const InspectedFile& f, const Checkpoint& ck) {
  const ArchFamily* family = ck.config ? find_family(*ck.config) : nullptr;
  if (f.names == InspectedFile::Names::Leap || family == &llama_family()) return f.format == "leap-v2" ? 4 : 3;
  return family ? 3 : 1;
}

}  // namespace

// Everything a verify needs between steps: the file's layout, each tensor's source and
// transforms, and the report so far.
struct VerifyRun::State {
  ByteSource& file;
  const Checkpoint& ck;
  VerifyOptions opt;
  InspectedFile f;
  std::vector<const TensorRef*> sources;  // null: a tensor computed from the config
  std::vector<int> permute;
  std::vector<std::pair<bool, float>> transpose_add;  // GGUF: the other transforms of the source
  std::vector<const std::vector<float>*> computed;
  GgufModel gguf;  // GGUF: the checkpoint as the GGUF writer maps it (computed tensors included)
  VerifyReport rep;
  size_t next = 0;  // the next tensor to check
  std::unique_ptr<ForwardRun> forward;  // set up at the first forward step
  size_t pass = 0;                      // its next run
  bool forward_done = false;
  VerifyProgress progress;
  State(ByteSource& fl, const Checkpoint& c, const VerifyOptions& o) : file(fl), ck(c), opt(o) {}
  bool forward_wanted() const { return opt.forward && ck.config; }
};

VerifyRun::VerifyRun(ByteSource& file, const Checkpoint& ck, const VerifyOptions& opt)
    : s_(std::make_unique<State>(file, ck, opt)) {
  State& st = *s_;
  st.f = inspect_file(file);
  const InspectedFile& f = st.f;
  if (!f.undecodable.empty())
    throw ConvertError(file.name(), f.undecodable.front().name,
                       "is stored as ggml type " + f.undecodable.front().type + ", which this project cannot decode yet");
  st.rep.format = f.format;
  std::vector<const TensorRef*>& sources = st.sources;
  std::vector<int>& permute = st.permute;
  std::vector<std::pair<bool, float>>& transpose_add = st.transpose_add;
  std::vector<const std::vector<float>*>& computed = st.computed;
  GgufModel& gguf = st.gguf;
  if (f.names == InspectedFile::Names::Gguf) {
    gguf = map_checkpoint_to_gguf(ck);
    if (f.architecture != gguf.family->name)
      throw ConvertError(file.name(), "general.architecture",
                         "is '" + f.architecture + "' but the checkpoint is " + gguf.family->name);
    std::map<std::string, const GgufWeight*> by_name;
    for (const GgufWeight& w : gguf.weights) by_name[w.name] = &w;
    for (const PlanItem& it : f.items) {
      auto w = by_name.find(it.name);
      if (w == by_name.end()) throw ConvertError(file.name(), it.name, "is not a tensor the checkpoint " + ck.label + " gives");
      if (w->second->shape != it.shape)
        throw ConvertError(file.name(), it.name, "shape " + shape_string(it.shape) + " differs from the source's " +
                                                     shape_string(w->second->shape));
      sources.push_back(w->second->src);
      permute.push_back(w->second->permute_heads);
      transpose_add.emplace_back(w->second->transpose, w->second->add);
      computed.push_back(w->second->src ? nullptr : &w->second->values);
      by_name.erase(w);
    }
    if (!by_name.empty())
      throw ConvertError(file.name(), by_name.begin()->first, "is missing from the file");
  } else if (f.names == InspectedFile::Names::Source) {
    for (const PlanItem& it : f.items) {
      const TensorRef* t = ck.find(it.name);
      if (!t) throw ConvertError(file.name(), it.name, "not found in the checkpoint " + ck.label);
      if (t->info.shape != it.shape)
        throw ConvertError(file.name(), it.name, "shape " + shape_string(it.shape) + " differs from the source's " +
                                                     shape_string(t->info.shape));
      sources.push_back(t);
      permute.push_back(0);
    }
    if (f.items.size() != ck.order.size()) {  // every source tensor must be in the file
      std::set<std::string> in_file;
      for (const PlanItem& it : f.items) in_file.insert(it.name);
      for (const std::string& name : ck.order)
        if (!in_file.count(name))
          throw ConvertError(file.name(), name, "is in the checkpoint but missing from the file");
    }
  } else {
    const LeapModel m = map_llama_to_leap(ck, 0);
    const nlohmann::json& h = f.header;
    if (h["dim"] != m.dim || h["hidden_dim"] != m.hidden_dim || h["n_layers"] != m.n_layers ||
        h["n_heads"] != m.n_heads || h["n_kv_heads"] != m.n_kv_heads ||
        h["shared_classifier"] != m.shared_classifier || std::abs(h["vocab_size"].get<int>()) != m.vocab_size)
      throw ConvertError(file.name(), "", "LEAP header does not describe the checkpoint " + ck.label);
    for (const LeapWeight& w : m.weights) {
      sources.push_back(w.src);
      permute.push_back(w.permute_heads);
    }
  }
  st.progress.n_steps = int64_t(f.items.size()) + (st.forward_wanted() ? forward_steps(f, ck) : 0);
}

VerifyRun::~VerifyRun() = default;

const VerifyProgress& VerifyRun::progress() const { return s_->progress; }

bool VerifyRun::step() {
  State& st = *s_;
  const InspectedFile& f = st.f;
  const Checkpoint& ck = st.ck;
  ByteSource& file = st.file;
  VerifyReport& rep = st.rep;
  if (st.next < f.items.size()) {  // one tensor: read back against the source quantized as written
    const size_t i = st.next++;
    const PlanItem& it = f.items[i];
    const auto [transpose, add] =
        i < st.transpose_add.size() ? st.transpose_add[i] : std::pair<bool, float>(false, 0.0f);
    const std::vector<float> src =
        st.sources[i] ? ck.read_f32(*st.sources[i], st.permute[i], transpose, add) : *st.computed[i];
    float encode_err = 0.0f;
    const std::vector<float> expect = fake_quantize(it, src.data(), &encode_err);
    const std::vector<float> got = read_tensor_f32(file, it);
    TensorCheck c;
    c.name = it.name;
    c.source_name = st.sources[i] ? st.sources[i]->info.name : "(from config.json)";
    c.encoding = it.qt().name;
    c.numel = int64_t(got.size());
    c.max_vs_fake_quant = max_abs_diff(got, expect);
    c.max_vs_source = max_abs_diff(got, src);
    for (size_t k = 0; k < got.size(); ++k) c.nonfinite += !std::isfinite(got[k]) && std::isfinite(src[k]);
    c.unencodable = std::isinf(encode_err);
    if (c.nonfinite || c.unencodable) c.max_vs_fake_quant = c.max_vs_source = INFINITY;
    rep.ok = rep.ok && c.max_vs_fake_quant == 0.0f;
    rep.tensors.push_back(std::move(c));
    st.progress.step = int64_t(st.next);
    st.progress.what = "tensor " + std::to_string(st.next) + " of " + std::to_string(f.items.size()) + ": " + it.name;
    return true;
  }
  if (st.forward_done) return false;
  if (!st.forward) {  // the first forward step: set the runs up
    rep.w8a8.note = f.format == "leap-v1" ? "LEAP version 1: LEAP's engine runs it in fp32, as the forward check does"
                    : f.format == "leap-v2" ? "not run (no forward check)"
                                            : "only for LEAP version 2 files";
    if (!st.forward_wanted()) {
      rep.forward.note = ck.config ? "skipped" : "no config.json: no forward pass";
      st.forward_done = true;
      return false;
    }
    st.forward = forward_check(file, f, ck, st.opt, &rep.w8a8);
  }
  ForwardRun& r = *st.forward;
  static const char* kRuns[] = {"forward pass: the source as written", "forward pass: the unquantized source",
                                "forward pass: the file's model", "forward pass: LEAP's engine (W8A8)"};
  if (st.pass < r.passes.size()) {
    st.progress.what = kRuns[std::min<size_t>(st.pass, 3)];
    try {
      r.passes[st.pass++]();
    } catch (const ConvertError& e) {
      if (!r.soft) throw;
      st.forward = note_only("no reference forward pass for this checkpoint: " + std::string(e.what()));
      return step_forward_end(st);
    }
  }
  if (st.pass < st.forward->passes.size()) {
    st.progress.step = std::min(st.progress.n_steps - 1, st.progress.step + 1);
    return true;
  }
  return step_forward_end(st);
}

// The forward check's last step: its runs compared, its note, the verdict.
bool VerifyRun::step_forward_end(State& st) {
  ForwardRun& r = *st.forward;
  if (r.done) r.done();
  ForwardCheck& fc = r.fc;
  if (fc.ran)
    fc.note = fc.layers_run < fc.n_layers
                  ? "ran " + std::to_string(fc.layers_run) + " of " + std::to_string(fc.n_layers) +
                        " layers (parameter budget); logits not compared"
                  : "ran all " + std::to_string(fc.n_layers) + " layers and the logits";
  else
    st.progress.what = "forward pass: " + fc.note;
  st.rep.forward = std::move(fc);
  st.rep.ok = st.rep.ok && st.rep.forward.ok;
  st.forward_done = true;
  st.progress.step = st.progress.n_steps;
  return true;
}

VerifyReport VerifyRun::finish() {
  while (step()) {
  }
  return std::move(s_->rep);
}

VerifyReport verify_file(ByteSource& file, const Checkpoint& ck, const VerifyOptions& opt) {
  return VerifyRun(file, ck, opt).finish();
}

nlohmann::json verify_report_json(const VerifyReport& rep) {
  nlohmann::json t = nlohmann::json::array();
  for (const TensorCheck& c : rep.tensors)
    t.push_back({{"name", c.name}, {"source", c.source_name}, {"dtype", c.encoding}, {"numel", c.numel},
                 {"max_abs_vs_fake_quant", c.max_vs_fake_quant}, {"max_abs_vs_source", c.max_vs_source},
                 {"nonfinite_where_source_finite", c.nonfinite}, {"source_unencodable", c.unencodable}});
  const ForwardCheck& fc = rep.forward;
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerCheck& l : fc.layers)
    layers.push_back({{"name", l.name}, {"max_abs_file_vs_reference", l.file_vs_reference},
                      {"max_abs_quantized_vs_source", l.quantized_vs_source}});
  nlohmann::json fwd = {{"ran", fc.ran}, {"architecture", fc.architecture}, {"note", fc.note},
                        {"tokens", fc.tokens}, {"layers_run", fc.layers_run}, {"n_layers", fc.n_layers},
                        {"tolerance", kForwardTolerance}, {"ok", fc.ok}, {"layers", layers}};
  const W8A8Check& w = rep.w8a8;
  nlohmann::json wl = nlohmann::json::array();
  for (const W8A8Layer& l : w.layers)
    wl.push_back({{"name", l.name}, {"max_abs_vs_as_written", l.vs_as_written}, {"max_abs_vs_source", l.vs_source}});
  nlohmann::json w8 = {{"ran", w.ran}, {"informative", true}, {"group_size", w.group_size}, {"note", w.note},
                       {"layers", wl}};
  if (w.positions > 0)
    w8.update({{"positions", w.positions}, {"top1_same_as_written", w.top1_same_as_written},
               {"top1_same_as_source", w.top1_same_as_source}, {"max_abs_logit_as_written", w.max_abs_logit}});
  return {{"format", rep.format}, {"ok", rep.ok}, {"tensors", t}, {"forward", fwd}, {"w8a8", w8}};
}

}  // namespace leapconv
