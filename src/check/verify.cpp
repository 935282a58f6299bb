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

// ---- the forward check's weights: realized from recipes, or read from the file ----

// Rows of a recipe's sources from a function (the file's own tensors, or the checkpoint's tensors
// quantized as a GGUF-lite file holds them): the forward weights of a file that holds the
// checkpoint's tensors as they are.
class FunctionRows : public SourceRows {
 public:
  using Fn = std::function<std::vector<float>(const SourceTensor& s, int64_t r0, int64_t r1)>;
  FunctionRows(const Recipe& r, Fn fn) : r_(r), fn_(std::move(fn)) {}
  void rows(int s, int64_t r0, int64_t r1, float* out) override {
    const std::vector<float> v = fn_(r_.sources[size_t(s)], r0, r1);
    std::copy(v.begin(), v.end(), out);
  }
  const uint8_t* bytes(int s, int64_t, int64_t) override {
    throw ConvertError("", r_.sources[size_t(s)].name, "internal: the bytes of a tensor read back from a file");
  }

 private:
  const Recipe& r_;
  Fn fn_;
};

// The model's weights by the names the forward pass reads them under, each made by its recipe:
// from the checkpoint, quantized as the file holds it or not ("the source as written", "the
// unquantized source"); or, with sources over a file, from the file's own tensors.
class RecipeWeights : public ModelWeights {
 public:
  struct Entry {
    const Recipe* recipe = nullptr;
    const PlanItem* layout = nullptr;  // fake-quantize the result like this; null: as it comes
  };
  RecipeWeights(std::vector<ByteSource*> shards, std::map<std::string, Entry> e, FunctionRows::Fn over = nullptr)
      : shards_(std::move(shards)), e_(std::move(e)), over_(std::move(over)) {}

  std::vector<float> tensor(const std::string& name) override {
    const Entry& e = get(name);
    std::vector<float> w = realize(*e.recipe, 0, e.recipe->rows());
    return e.layout ? fake_quantize(*e.layout, w.data()) : w;
  }
  std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1) override {
    const Entry& e = get(name);
    std::vector<float> w = realize(*e.recipe, r0, r1);
    return e.layout ? fake_quantize_rows(*e.layout, w.data(), r0, r1) : w;
  }
  bool has(const std::string& name) override { return e_.count(name) > 0; }

 private:
  std::vector<float> realize(const Recipe& r, int64_t r0, int64_t r1) {
    if (!over_) return realize_rows(r, r0, r1, shards_);
    FunctionRows src(r, over_);
    std::vector<float> out(size_t((r1 - r0) * r.cols()));
    realize_rows(r, r0, r1, src, out.data());
    return out;
  }
  const Entry& get(const std::string& name) {
    auto it = e_.find(name);
    if (it == e_.end()) throw ConvertError("", name, "no such weight for the forward check");
    return it->second;
  }
  std::vector<ByteSource*> shards_;
  std::map<std::string, Entry> e_;
  FunctionRows::Fn over_;
};

// The weights stored in a written file, decoded.
class FileWeights : public ModelWeights {
 public:
  FileWeights(std::vector<ByteSource*> parts, std::map<std::string, const PlanItem*> items)
      : parts_(std::move(parts)), items_(std::move(items)) {}
  std::vector<float> tensor(const std::string& name) override {
    const PlanItem& it = get(name);
    return read_tensor_f32(part(it), it);
  }
  std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1) override {
    const PlanItem& it = get(name);
    return read_rows_f32(part(it), it, r0, r1);
  }
  bool has(const std::string& name) override { return items_.count(name) > 0; }
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
    ByteSource& f = part(it);
    f.read_at(it.offset + r0 * it.cols, r.q.data(), r.q.size());  // values, then the scales
    // every group from the 16-value block of the first element to the one of the last
    const int64_t n = it.rows * it.cols, e0 = r0 * it.cols / 16 * 16;
    const int64_t e1 = std::min(n, (r1 * it.cols + 15) / 16 * 16);
    r.s0 = e0 / it.group_size;
    r.s.resize(size_t((e1 - 1) / it.group_size + 1 - r.s0));
    f.read_at(it.offset + n + r.s0 * 4, r.s.data(), r.s.size() * 4);
    return r;
  }

 private:
  const PlanItem& get(const std::string& name) {
    auto it = items_.find(name);
    if (it == items_.end()) throw ConvertError(parts_[0]->name(), name, "missing from the file");
    return *it->second;
  }
  ByteSource& part(const PlanItem& it) { return *parts_.at(size_t(it.file)); }
  std::vector<ByteSource*> parts_;
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
// source, the file's model (and LEAP's engine's W8A8 where the file has int8 groups); `done`
// compares them into fc. `soft`: a failure in a run becomes fc's note instead of an error (a file
// read through the family's recipes over its own tensors).
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
W8A8Check w8a8_check(const LlamaSpec& file_spec, ModelWeights& file_w, int group_size, const ForwardCheck& fc,
                     const ForwardTrace& ref, const ForwardTrace& src, const std::string& file_name) {
  W8A8Check w;
  w.group_size = group_size;
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

// The forward check of a file: the model the file model describes, run three times (as written,
// unquantized, from the file), its weights by name from the recipes and the file's tensors.
std::unique_ptr<ForwardRun> forward_check(const std::vector<ByteSource*>& parts, const InspectedFile& f, const FileModel& fm,
                                          const Checkpoint& ck, const VerifyOptions& opt, W8A8Check* w8a8) {
  if (fm.compute == FileModel::Compute::None) return note_only(fm.why_not);
  std::map<std::string, const PlanItem*> in_file;
  for (const PlanItem& it : f.items) in_file[it.name] = &it;
  const std::vector<FileTensor>& weights = fm.weights.empty() ? fm.tensors : fm.weights;
  std::map<std::string, RecipeWeights::Entry> as_written, unquantized;
  std::map<std::string, const PlanItem*> file_items;
  int64_t per_layer = 0;
  ComputedTensors computed;
  bool has_output = false;
  for (const FileTensor& w : weights) {
    if (w.recipe.is_computed()) computed[w.name] = w.recipe.constant;  // in the spec, not read as a weight
    has_output |= w.role && std::string(w.role->role) == "output";
    if (w.role && w.role->per_layer && w.layer == 0)
      for (const SourceTensor& s : w.recipe.sources) per_layer += s.numel();
    if (w.recipe.is_computed() || fm.weights_over_file) {
      as_written[w.name] = unquantized[w.name] = {&w.recipe, nullptr};
      // (a computed tensor the forward pass reads by name, Gemma 4's folded per_expert_scale: the
      // file's own too)
      if (const auto it = in_file.find(w.name); w.recipe.is_computed() && it != in_file.end()) file_items[w.name] = it->second;
      continue;
    }
    const auto it = in_file.find(w.name);
    if (it == in_file.end()) throw ConvertError(parts[0]->name(), w.name, "missing from the file");
    // (blocks kept as they ship, NVFP4's or MXFP4's: as written is the source; ggml's quantizer
    // would choose other NVFP4 scales than the checkpoint's)
    as_written[w.name] = {&w.recipe, w.recipe.find(StepKind::PassThrough) ? nullptr : it->second};
    unquantized[w.name] = {&w.recipe, nullptr};
    file_items[w.name] = it->second;
  }
  std::shared_ptr<ModelWeights> ref_w, src_w, file_w;
  src_w = std::make_shared<RecipeWeights>(ck.sources(), unquantized);
  if (fm.weights_over_file) {
    // The file holds each source tensor under its own name: the file's model reads them from it,
    // the source as written quantizes each as the file holds it.
    auto item = [parts, in_file](const SourceTensor& s) -> const PlanItem& {
      const auto it = in_file.find(s.name);
      if (it == in_file.end()) throw ConvertError(parts[0]->name(), s.name, "missing from the file");
      return *it->second;
    };
    const std::vector<ByteSource*> shards = ck.sources();
    ref_w = std::make_shared<RecipeWeights>(shards, as_written, [=](const SourceTensor& s, int64_t r0, int64_t r1) {
      Recipe whole;
      whole.sources.push_back(s);
      whole.check(s.name, item(s).rows, item(s).cols);
      const std::vector<float> w = realize_rows(whole, r0, r1, shards);
      return fake_quantize_rows(item(s), w.data(), r0, r1);
    });
    file_w = std::make_shared<RecipeWeights>(shards, as_written, [=](const SourceTensor& s, int64_t r0, int64_t r1) {
      const PlanItem& it = item(s);
      return read_rows_f32(*parts.at(size_t(it.file)), it, r0, r1);
    });
  } else {
    ref_w = std::make_shared<RecipeWeights>(ck.sources(), as_written);
    file_w = std::make_shared<FileWeights>(parts, file_items);
  }
  if (FactorScaledWeights::any(computed)) {  // NVFP4's .scale factors: llama.cpp multiplies them in
    const ArchFamily* fam = gguf_family(fm.kv);
    for (std::shared_ptr<ModelWeights>* w : {&ref_w, &src_w, &file_w}) *w = std::make_shared<FactorScaledWeights>(*w, computed, fam);
  }
  ForwardCheck fc;
  auto t = std::make_shared<Traces>();
  if (fm.compute == FileModel::Compute::Llama) {
    LlamaSpec s;
    const FileModel::LlamaDims& d = fm.llama;
    s.dim = d.dim; s.hidden = d.hidden; s.n_layers = d.n_layers; s.n_heads = d.n_heads;
    s.n_kv_heads = d.n_kv_heads; s.vocab = d.vocab; s.shared_classifier = d.shared_classifier;
    s.eps = d.eps; s.rope_theta = d.rope_theta;
    s.interleaved_rope = true;  // the recipes permute q and k (LEAP's engine and llama.cpp rotate interleaved pairs)
    fc.architecture = "llama";
    fc.n_layers = s.n_layers;
    fc.layers_run = layers_within(opt.param_budget, per_layer, s.n_layers);
    fc.tokens = probe_tokens(s.vocab);
    auto run = compared_passes(fc, t, {[=](const ForwardCheck& c) { return llama_forward(s, *ref_w, c.tokens, c.layers_run); },
                                        [=](const ForwardCheck& c) { return llama_forward(s, *src_w, c.tokens, c.layers_run); },
                                        [=](const ForwardCheck& c) { return llama_forward(s, *file_w, c.tokens, c.layers_run); }});
    ForwardCheck* out = &run->fc;
    if (fm.w8a8_group_size > 0) {
      const int group = fm.w8a8_group_size;
      const std::string name = parts[0]->name();
      run->passes.push_back([=] { *w8a8 = w8a8_check(s, *file_w, group, *out, (*t)[0], (*t)[1], name); });
    }
    return run;
  }
  const DecoderSpec s = gguf_decoder_spec(fm.kv, fm.vocab_rows, has_output, computed);
  fc.architecture = s.family->name;
  fc.n_layers = s.n_layers;
  fc.layers_run = layers_within(opt.param_budget, per_layer, s.n_layers);
  fc.tokens = probe_tokens(s.vocab);
  if (s.family->compute.rope == RopeKind::None && int64_t(fc.tokens.size()) > s.n_positions)
    fc.tokens.resize(size_t(s.n_positions));
  auto run = compared_passes(fc, t, {[=](const ForwardCheck& c) { return decoder_forward(s, *ref_w, c.tokens, c.layers_run); },
                                      [=](const ForwardCheck& c) { return decoder_forward(s, *src_w, c.tokens, c.layers_run); },
                                      [=](const ForwardCheck& c) { return decoder_forward(s, *file_w, c.tokens, c.layers_run); }});
  run->soft = fm.weights_over_file;
  return run;
}

// Shapes equal but for leading 1s (a split part's n_dims, as ggml's writer stores it, drops
// trailing 1s of ggml's order: [1, 64] reads back as [64]).
bool same_shape(std::vector<int64_t> a, std::vector<int64_t> b) {
  while (a.size() > 1 && a.front() == 1) a.erase(a.begin());
  while (b.size() > 1 && b.front() == 1) b.erase(b.begin());
  return a == b;
}

// How many verify steps the forward check takes (its runs; one for a note), known before it is set up.
int64_t forward_steps(const FileModel& fm) {
  if (fm.compute == FileModel::Compute::None) return 1;
  return fm.w8a8_group_size > 0 ? 4 : 3;
}

}  // namespace

// Everything a verify needs between steps: the file's layout, what the checkpoint makes of each
// of its tensors, and the report so far.
struct VerifyRun::State {
  std::vector<ByteSource*> parts;  // the file, or the parts of a split file
  const Checkpoint& ck;
  VerifyOptions opt;
  InspectedFile f;
  FileModel model;                          // the file's tensors as the checkpoint makes them
  std::vector<const FileTensor*> recipes;   // parallel to f.items
  VerifyReport rep;
  size_t next = 0;  // the next tensor to check
  std::unique_ptr<ForwardRun> forward;  // set up at the first forward step
  size_t pass = 0;                      // its next run
  bool forward_done = false;
  VerifyProgress progress;
  State(std::vector<ByteSource*> p, const Checkpoint& c, const VerifyOptions& o) : parts(std::move(p)), ck(c), opt(o) {}
  bool forward_wanted() const { return opt.forward && ck.config; }
};

// A file llama-quantize made with an importance matrix (its quantize.imatrix.file key) is checked
// against the source quantized with the same weights: each tensor whose type takes them gets its
// entry, as llama-quantize looked it up.
static void attach_importance(InspectedFile& f, const std::string& file, const Imatrix* im) {
  std::string used;
  for (const nlohmann::json& k : f.keys)
    if (k.value("key", "") == "quantize.imatrix.file" && k.contains("value") && k["value"].is_string()) used = k["value"];
  if (!im && !used.empty())
    throw ConvertError(file, "quantize.imatrix.file", "the file was quantized with an importance matrix (" + used +
                                                          "): give it to --verify with --imatrix");
  if (!im || used.empty()) return;  // (a file made without one is checked without, whatever is given)
  for (PlanItem& it : f.items) {
    if (!it.qt().encode_weighted) continue;
    std::string why;
    it.importance = importance_for(*im, it.name, it.shape, &why);
  }
}

VerifyRun::VerifyRun(ByteSource& file, const Checkpoint& ck, const VerifyOptions& opt)
    : VerifyRun(std::vector<ByteSource*>{&file}, ck, opt) {}

VerifyRun::VerifyRun(std::vector<ByteSource*> parts, const Checkpoint& ck, const VerifyOptions& opt)
    : s_(std::make_unique<State>(std::move(parts), ck, opt)) {
  State& st = *s_;
  st.f = inspect_files(st.parts);
  ByteSource& file = *st.parts[0];
  const InspectedFile& f = st.f;
  if (!f.undecodable.empty())
    throw ConvertError(file.name(), f.undecodable.front().name,
                       "is stored as ggml type " + f.undecodable.front().type + ", which this project cannot decode yet");
  st.rep.format = f.format;
  st.model = f.of->file_model(ck, f, file.name());
  // Every tensor of the file is one the checkpoint makes, of the same shape, and none is missing.
  std::map<std::string, const FileTensor*> by_name;
  for (FileTensor& t : st.model.tensors) {
    by_name[t.name] = &t;
    if (!t.recipe.checked()) {
      const RowView v = RowView::of(t.shape);
      t.recipe.check(t.name, v.rows, v.cols);
    }
  }
  for (FileTensor& t : st.model.weights) {
    const RowView v = RowView::of(t.shape);
    t.recipe.check(t.name, v.rows, v.cols);
  }
  for (const PlanItem& it : f.items) {
    auto t = by_name.find(it.name);
    if (t == by_name.end()) throw ConvertError(file.name(), it.name, "is not a tensor the checkpoint " + ck.label + " gives");
    if (!same_shape(t->second->shape, it.shape))
      throw ConvertError(file.name(), it.name, "shape " + shape_string(it.shape) + " differs from the source's " +
                                                   shape_string(t->second->shape));
    st.recipes.push_back(t->second);
    by_name.erase(t);
  }
  if (!by_name.empty()) throw ConvertError(file.name(), by_name.begin()->first, "is missing from the file");
  attach_importance(st.f, file.name(), opt.imatrix.get());
  st.progress.n_steps = int64_t(f.items.size()) + (st.forward_wanted() ? forward_steps(st.model) : 0);
}

VerifyRun::~VerifyRun() = default;

const VerifyProgress& VerifyRun::progress() const { return s_->progress; }

bool VerifyRun::step() {
  State& st = *s_;
  const InspectedFile& f = st.f;
  const Checkpoint& ck = st.ck;
  VerifyReport& rep = st.rep;
  if (st.next < f.items.size()) {  // one tensor: read back against the source quantized as written
    const size_t i = st.next++;
    const PlanItem& it = f.items[i];
    const Recipe& recipe = st.recipes[i]->recipe;
    const std::vector<float> src = realize_rows(recipe, 0, it.rows, ck.sources());
    float encode_err = 0.0f;
    // Blocks passed through as they are were not quantized here: they must read back as they decode.
    const std::vector<float> expect = recipe.passes_through() ? src : fake_quantize(it, src.data(), &encode_err);
    const std::vector<float> got = read_tensor_f32(*st.parts.at(size_t(it.file)), it);
    TensorCheck c;
    c.name = it.name;
    c.source_name = recipe.is_computed() ? "(from config.json)" : recipe.source_name();
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
    rep.w8a8.note = st.model.w8a8_note.empty() ? "only for LEAP version 2 files" : st.model.w8a8_note;
    if (!st.forward_wanted()) {
      rep.forward.note = ck.config ? "skipped" : "no config.json: no forward pass";
      st.forward_done = true;
      return false;
    }
    st.forward = forward_check(st.parts, f, st.model, ck, st.opt, &rep.w8a8);
  }
  ForwardRun& r = *st.forward;
  static const char* kRuns[] = {"forward pass: the source as written", "forward pass: the unquantized source",
                                "forward pass: the file's model", "forward pass: LEAP's engine (W8A8)"};
  if (st.pass < r.passes.size()) {
    st.progress.what = kRuns[std::min<size_t>(st.pass, 3)];
    try {
      r.passes[st.pass++]();
    } catch (const UnsupportedError& e) {
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
