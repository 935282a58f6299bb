#include "plan/recipe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/f16.h"
#include "core/torch_sum.h"
#include "quant/ggml_quants.h"
#include "source/checkpoint.h"

namespace leapconv {

// ---- construction ----

int64_t SourceTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SourceTensor SourceTensor::of(const Checkpoint& ck, const TensorRef& t) {
  return {t.info.name, ck.shard_name(t.shard), t.shard, t.info.begin, t.info.dtype, t.info.shape};
}

SourceTensor nvfp4_codes_source(const Checkpoint& ck, const Nvfp4Weight& w) {
  const TensorRef* t = ck.find(w.codes);
  if (!t) throw ConvertError(ck.label, w.codes, "internal: NVFP4 codes not in the checkpoint");
  SourceTensor s = SourceTensor::of(ck, *t);
  s.shape = {w.shape[0], w.shape[1] / 2};
  return s;
}

RowView RowView::of(const std::vector<int64_t>& shape) {
  RowView v;
  if (shape.empty()) return v;
  v.cols = shape.back();
  for (size_t i = 0; i + 1 < shape.size(); ++i) v.rows *= shape[i];
  return v;
}

Step Step::dequant(int source, int scale, int64_t block_rows, int64_t block_cols, int64_t matrix_rows) {
  Step s{StepKind::Dequant};
  s.source = source;
  s.scale = scale;
  s.block_rows = block_rows;
  s.block_cols = block_cols;
  s.matrix_rows = matrix_rows;
  return s;
}
Step Step::unpack(Packing packing, int source, int scale, int zeros, int group_index, int bits, int64_t group,
                  int zero_bias, int64_t weight_rows, int64_t weight_cols) {
  Step s{StepKind::Unpack};
  s.packing = packing;
  s.source = source;
  s.scale = scale;
  s.zeros = zeros;
  s.group_index = group_index;
  s.bits = bits;
  s.group = group;
  s.zero_bias = zero_bias;
  s.weight_rows = weight_rows;
  s.weight_cols = weight_cols;
  return s;
}
Step Step::low_rank(int source, int a, int b, float scale) {
  Step s{StepKind::LowRank};
  s.source = source;
  s.lora_a = a;
  s.lora_b = b;
  s.value = scale;
  return s;
}
Step Step::slice_rows(int source, int64_t start, int64_t count, int64_t stride) {
  Step s{StepKind::SliceRows};
  s.source = source;
  s.start = start;
  s.count = count;
  s.stride = stride;
  return s;
}
Step Step::permute_heads(int source, int64_t heads) {
  Step s{StepKind::PermuteHeads};
  s.source = source;
  s.heads = heads;
  return s;
}
Step Step::add(float value) {
  Step s{StepKind::AddConstant};
  s.value = value;
  return s;
}
Step Step::ternarize(DType dtype) {
  Step s{StepKind::Ternarize};
  s.dtype = dtype;
  return s;
}
Step Step::round_to(DType dtype) {
  Step s{StepKind::Round};
  s.dtype = dtype;
  return s;
}
Step Step::pass_through(QType type, int64_t start, int64_t stride) {
  Step s{StepKind::PassThrough};
  s.type = type;
  s.start = start;
  s.stride = stride;
  return s;
}

Step Step::nibble_pairs(int source, int64_t group_bytes) {
  Step s{StepKind::NibblePairs};
  s.source = source;
  s.count = group_bytes;
  return s;
}
Step Step::mask_bytes(int source, uint8_t mask) {
  Step s{StepKind::MaskBytes};
  s.source = source;
  s.bits = mask;
  return s;
}

Recipe Recipe::of(const Checkpoint& ck, const TensorRef& t) {
  Recipe r;
  r.add_source(ck, t);
  return r;
}

int Recipe::add_source(const Checkpoint& ck, const TensorRef& t) {
  const int i = int(sources.size());
  auto add = [&](const std::string& name) {  // a tensor read with the weight (by name; "": none)
    if (name.empty()) return -1;
    const TensorRef* r = ck.find(name);
    if (!r) throw ConvertError(ck.label, name, "internal: a quantized weight's tensor not in the checkpoint");
    sources.push_back(SourceTensor::of(ck, *r));
    return int(sources.size()) - 1;
  };
  if (auto p = ck.quant.packed.find(t.info.name); p != ck.quant.packed.end()) {  // codes, scales, zero points, group index
    const PackedWeight& pw = p->second;
    add(pw.codes);
    if (pw.codes == t.info.name) {  // BitNet: the checkpoint's entry is the weight it stands for; its codes are bytes
      sources.back().shape = {pw.shape[0] / 4, pw.shape[1]};
      sources.back().dtype = DType::U8;  // (I8 read as U8: torch's view(torch.uint8))
    }
    const int scale = add(pw.scale), zeros = add(pw.zeros), group_index = add(pw.group_index);
    then(Step::unpack(pw.packing, i, scale, zeros, group_index, pw.bits, pw.group, pw.zero_bias, pw.shape[0], pw.shape[1]));
    add_low_rank_of(ck, t, i);
    return i;
  }
  if (auto nv = ck.quant.nvfp4.find(t.info.name); nv != ck.quant.nvfp4.end()) {  // codes and scales, decoded (GGUF keeps the blocks)
    const Nvfp4Weight& w = nv->second;
    sources.push_back(nvfp4_codes_source(ck, w));
    const int scale = add(w.scale);
    Step u = Step::unpack(Packing::Nvfp4, i, scale, -1, -1, 4, 16, 0, w.shape[0], w.shape[1]);
    u.value = w.scale2;
    then(u);
    add_low_rank_of(ck, t, i);
    return i;
  }
  sources.push_back(SourceTensor::of(ck, t));
  auto q = ck.quant.scales.find(t.info.name);
  if (q != ck.quant.scales.end()) {
    const WeightScale& ws = q->second;
    add(ws.scale);
    if (!ws.scale_view.empty()) sources.back().shape = ws.scale_view;
    then(Step::dequant(i, i + 1, ws.block_rows, ws.block_cols, ws.matrix_rows));
  }
  add_low_rank_of(ck, t, i);
  return i;
}

void Recipe::add_low_rank_of(const Checkpoint& ck, const TensorRef& t, int i) {
  auto m = ck.merged.find(t.info.name);
  if (m == ck.merged.end()) return;
  sources.push_back(SourceTensor::of(ck, m->second.a));
  sources.push_back(SourceTensor::of(ck, m->second.b));
  then(Step::low_rank(i, int(sources.size()) - 2, int(sources.size()) - 1, m->second.scale));
}

Recipe Recipe::computed(std::vector<float> values) {
  Recipe r;
  r.constant = std::move(values);
  return r;
}

Recipe role_recipe(const Checkpoint& ck, const TensorRef& t, Transform transform, int64_t n_heads, int64_t n_kv_heads) {
  Recipe r = Recipe::of(ck, t);
  switch (transform) {
    case Transform::None: break;
    case Transform::RopeHeads: r.then(Step::permute_heads(0, n_heads)); break;
    case Transform::RopeKvHeads: r.then(Step::permute_heads(0, n_kv_heads)); break;
    case Transform::Transpose:
      if (t.info.shape.size() == 2) r.then(Step::transpose());
      break;
    case Transform::NormPlusOne: r.then(Step::add(1.0f)); break;
    case Transform::Ternary: {  // weight_quant sees the tensor as the converter holds it: F16 as it
      bool decoded = false;     // is stored, every other dtype (BF16, decoded ones) made float32 first
      for (const Step& s : r.steps) decoded |= s.kind == StepKind::Dequant || s.kind == StepKind::Unpack || s.kind == StepKind::LowRank;
      r.then(Step::ternarize(!decoded && r.sources[0].dtype == DType::F16 ? DType::F16 : DType::F32));
      break;
    }
    case Transform::Mxfp4: case Transform::Mxfp4EvenRows: case Transform::Mxfp4OddRows: {
      // ggml's block: the scale byte, then the 16 bytes of values (their nibbles reordered)
      const std::string blocks = t.info.name, scales = blocks.substr(0, blocks.rfind("_blocks")) + "_scales";
      const TensorRef* sc = blocks.size() > 7 && blocks.compare(blocks.size() - 7, 7, "_blocks") == 0 ? ck.find(scales) : nullptr;
      if (!sc) throw ConvertError(ck.label, scales, "missing from the checkpoint: the MXFP4 scales of " + blocks);
      std::vector<int64_t> want = t.info.shape;
      want.pop_back();
      if (sc->info.shape != want || sc->info.dtype != DType::U8)
        throw ConvertError(ck.shard_name(sc->shard), scales,
                           shape_string(sc->info.shape) + " " + dtype_name(sc->info.dtype) + ": the E8M0 scales of " +
                               blocks + " " + shape_string(t.info.shape) + " must be " + shape_string(want) + " U8");
      r.sources.insert(r.sources.begin(), SourceTensor::of(ck, *sc));
      const bool half = transform != Transform::Mxfp4;
      r.then(Step::nibble_pairs(1)).then(Step::pass_through(QType::MXFP4, transform == Transform::Mxfp4OddRows, half ? 2 : 1));
      break;
    }
    case Transform::EvenCols: case Transform::OddCols: {  // rows of one value, every other one, back in rows
      SourceTensor& src = r.sources[0];
      const int64_t n = src.numel();
      src.shape = {n, 1};
      r.then(Step::slice_rows(0, transform == Transform::OddCols, n / 2, 2)).then(Step::reshape());
      break;
    }
  }
  return r;
}

std::vector<int64_t> role_shape(const std::vector<int64_t>& shape, Transform transform) {
  if (transform == Transform::Transpose && shape.size() == 2) return {shape[1], shape[0]};
  if (is_mxfp4(transform) && shape.size() == 4)
    return {shape[0], shape[1] / (transform == Transform::Mxfp4 ? 1 : 2), shape[2] * 32};
  if ((transform == Transform::EvenCols || transform == Transform::OddCols) && !shape.empty()) {
    std::vector<int64_t> s = shape;
    s.back() /= 2;
    return s;
  }
  return shape;
}

const Step* Recipe::find(StepKind k) const {
  for (const Step& s : steps)
    if (s.kind == k) return &s;
  return nullptr;
}

const std::string& Recipe::source_name() const {
  static const std::string none;
  return sources.empty() ? none : sources.front().name;
}

std::string Recipe::describe() const {
  if (is_computed()) return "computed from the config";
  std::string d;
  for (const SourceTensor& s : sources) d += (d.empty() ? "" : " + ") + s.name + " (" + dtype_name(s.dtype) + ")";
  for (const Step& s : steps) {
    d += ", ";
    switch (s.kind) {
      case StepKind::Dequant: d += "times scales of " + sources[size_t(s.scale)].name; break;
      case StepKind::LowRank: d += "plus " + std::to_string(s.value) + " x " + sources[size_t(s.lora_b)].name + " x " + sources[size_t(s.lora_a)].name; break;
      case StepKind::Unpack:
        if (s.packing == Packing::Bitnet) {
          d += "ternary codes unpacked (BitNet), divided by " + sources[size_t(s.scale)].name;
          break;
        }
        d += s.packing == Packing::Nvfp4 ? "NVFP4 decoded" : std::to_string(s.bits) + "-bit codes unpacked";
        d += std::string(s.packing == Packing::GptqColumns ? " (GPTQ)" : "") + ", times scales of " + sources[size_t(s.scale)].name;
        break;
      case StepKind::SliceRows:
        d += "rows " + std::to_string(s.start) + (s.stride > 1 ? " step " + std::to_string(s.stride) : "") + " x" +
             std::to_string(s.count);
        break;
      case StepKind::PermuteHeads: d += "permute " + std::to_string(s.heads) + " heads"; break;
      case StepKind::Stack: d += "stacked"; break;
      case StepKind::ConcatRows: d += "rows concatenated"; break;
      case StepKind::Transpose: d += "transposed"; break;
      case StepKind::AddConstant: d += "plus " + std::to_string(s.value); break;
      case StepKind::PassThrough:
        d += std::string("blocks of ") + quant_name(s.type) + " as they are" +
             (s.stride > 1 ? " (rows " + std::to_string(s.start) + " step " + std::to_string(s.stride) + ")" : "");
        break;
      case StepKind::NibblePairs: d += "nibbles of " + sources[size_t(s.source)].name + " in ggml's order"; break;
      case StepKind::MaskBytes: {
        char m[8];
        std::snprintf(m, sizeof m, "0x%02X", unsigned(s.bits));
        d += "bytes of " + sources[size_t(s.source)].name + " AND " + m + (s.bits == 0x7F ? " (E4M3 -> UE4M3)" : "");
        break;
      }
      case StepKind::Reshape: d += "reshaped"; break;
      case StepKind::Ternarize: d += "ternarized by the mean of its |values| (BitNet)"; break;
      case StepKind::Round: d += std::string("rounded to ") + dtype_name(s.dtype); break;
    }
  }
  return d;
}

// ---- validate, then trust ----

// An Unpack step's sources against the shapes llama.cpp's dequant_gptq / dequant_packed read.
template <typename Fail>
void Recipe::check_unpack(const Step& s, const Fail& fail) const {
  const int n = int(sources.size());
  for (int i : {s.scale, s.zeros, s.group_index})
    if (i >= n) throw fail("", "internal: an unpack source out of range");
  const SourceTensor& q = sources[size_t(s.source)];
  const RowView& qv = views_[size_t(s.source)];
  const int per_word = s.bits >= 1 && s.bits <= 8 ? 32 / s.bits : 0;
  auto want = [&](int i, DType dt, bool any_float, const std::vector<int64_t>& shape) {
    if (i < 0) return;
    const SourceTensor& t = sources[size_t(i)];
    if (any_float ? !(dtype_is_float(t.dtype) && !source_dtype(t.dtype).needs_scale) : t.dtype != dt)
      throw fail(t.name, std::string("is ") + dtype_name(t.dtype) + "; " + (any_float ? "scales are F32, F16 or BF16" : "it must be I32") +
                             " (beside " + q.name + ")");
    if (t.shape != shape)
      throw fail(t.name, "shape " + shape_string(t.shape) + " does not fit " + q.name + " " + shape_string(q.shape) + " (want " +
                             shape_string(shape) + ")");
  };
  if (s.packing == Packing::Nvfp4) {  // codes U8 [rows, cols / 2], scales F8_E4M3 [rows, cols / 16]
    const int64_t rows = s.weight_rows, cols = s.weight_cols;
    if (q.dtype != DType::U8 || q.shape != std::vector<int64_t>{rows, cols / 2} || cols % 16)
      throw fail(q.name, std::string("is ") + dtype_name(q.dtype) + " " + shape_string(q.shape) + ": NVFP4 codes of a " +
                             std::to_string(rows) + " x " + std::to_string(cols) + " weight are U8 " + shape_string({rows, cols / 2}));
    if (s.scale < 0 || sources[size_t(s.scale)].dtype != DType::F8_E4M3 || sources[size_t(s.scale)].shape != std::vector<int64_t>{rows, cols / 16})
      throw fail(s.scale < 0 ? q.name : sources[size_t(s.scale)].name, "NVFP4 scales are F8_E4M3 " + shape_string({rows, cols / 16}) +
                                                                          " (one per 16 values of " + q.name + ")");
    if (!std::isfinite(s.value)) throw fail(q.name, "its NVFP4 weight_scale_2 is not finite");
    return;
  }
  if (s.packing == Packing::Bitnet) {  // codes U8 [rows / 4, cols], one scale
    const int64_t rows = s.weight_rows, cols = s.weight_cols;
    if (q.dtype != DType::U8 || rows % 4 || q.shape != std::vector<int64_t>{rows / 4, cols})
      throw fail(q.name, std::string("is ") + dtype_name(q.dtype) + " " + shape_string(q.shape) + ": BitNet codes of a " +
                             std::to_string(rows) + " x " + std::to_string(cols) + " weight are bytes " + shape_string({rows / 4, cols}));
    if (s.scale < 0 || sources[size_t(s.scale)].numel() != 1 || !dtype_is_float(sources[size_t(s.scale)].dtype) ||
        source_dtype(sources[size_t(s.scale)].dtype).needs_scale)
      throw fail(s.scale < 0 ? q.name : sources[size_t(s.scale)].name, "a BitNet weight's scale is one F32, F16 or BF16 value");
    return;
  }
  if (q.dtype != DType::I32 || q.shape.size() != 2 || per_word == 0)
    throw fail(q.name, std::string("is ") + dtype_name(q.dtype) + " " + shape_string(q.shape) + ": packed " +
                           std::to_string(s.bits) + "-bit codes are 2-D I32 words");
  if (s.packing == Packing::GptqColumns) {  // qweight [in / per_word, out]
    const int64_t out = qv.cols, in = qv.rows * per_word;
    if (s.weight_rows != out || s.weight_cols != in) throw fail(q.name, "internal: GPTQ shapes");
    const int64_t groups = s.zeros >= 0 ? RowView::of(sources[size_t(s.zeros)].shape).rows : 0;  // (qzeros: a row a group)
    if (out % per_word) throw fail(q.name, std::to_string(out) + " outputs do not pack into words of " + std::to_string(per_word) + " zero points");
    want(s.scale, DType::F32, true, {groups, out});
    want(s.zeros, DType::I32, false, {groups, out / per_word});
    want(s.group_index, DType::I32, false, {in});
    if (s.scale < 0 || s.zeros < 0 || s.group_index < 0) throw fail(q.name, "internal: GPTQ needs scales, zero points and g_idx");
  } else {  // weight_packed [rows, ceil(cols / per_word)]
    const int64_t rows = qv.rows, cols = s.weight_cols;
    if (s.weight_rows != rows || cols < 1 || (cols + per_word - 1) / per_word != qv.cols)
      throw fail(q.name, shape_string(q.shape) + " does not hold a " + std::to_string(s.weight_rows) + " x " + std::to_string(cols) +
                             " weight in words of " + std::to_string(per_word) + " codes");
    if (s.group < 1 || cols % s.group)
      throw fail(q.name, "rows of " + std::to_string(cols) + " values do not split into groups of " + std::to_string(s.group));
    want(s.scale, DType::F32, true, {rows, cols / s.group});
    want(s.zeros, DType::I32, false, {(rows + per_word - 1) / per_word, cols / s.group});
  }
}

void Recipe::check(const std::string& out, int64_t rows, int64_t cols) {
  checked_ = pass_ = transpose_ = ternary_ = false;
  round_ = DType::F32;
  reshape_ = 1;
  pass_start_ = 0, pass_stride_ = 1;
  nibble_pairs_.assign(sources.size(), 0);
  mask_.assign(sources.size(), 0xFF);
  pass_head_dim_ = 0;
  pass_parts_ = int(sources.size());
  pass_group_rows_ = rows;
  add_ = 0.0f;
  quantum_ = 1;
  rows_ = rows;
  cols_ = cols;
  ops_.clear();
  views_.clear();
  row_bytes_.clear();
  // An error names the source at fault (and its shard), or the output for the recipe as a whole.
  auto fail = [&](const std::string& source, const std::string& what) -> ConvertError {
    std::string file;
    for (const SourceTensor& s : sources)
      if (s.name == source) file = s.file;
    return ConvertError(file, source.empty() ? out : source, what);
  };
  if (is_computed()) {
    if (!steps.empty() || int64_t(constant.size()) != rows * cols)
      throw fail("", "internal: a computed tensor of " + std::to_string(constant.size()) + " values for " +
                         std::to_string(rows * cols));
    checked_ = true;
    return;
  }
  if (sources.empty()) throw fail("", "internal: a recipe without sources");
  const int n = int(sources.size());
  for (const SourceTensor& s : sources) {
    views_.push_back(RowView::of(s.shape));
    row_bytes_.push_back(dtype_bytes(s.dtype, views_.back().cols));
  }

  if (const Step* p = find(StepKind::PassThrough)) {  // the sources' bytes are the output's blocks
    const QuantType& t = quant_type(p->type);
    const Step* heads = nullptr;
    for (const Step& s : steps)
      if (s.kind == StepKind::NibblePairs || s.kind == StepKind::MaskBytes) {
        if (s.source < 0 || s.source >= n) throw fail("", "internal: a step's source out of range");
        if (s.kind == StepKind::MaskBytes) mask_[size_t(s.source)] &= uint8_t(s.bits);
        else nibble_pairs_[size_t(s.source)] = -1 - s.count;  // (resolved below: its part's bytes when 0)
      } else if (s.kind == StepKind::PermuteHeads) {
        if (heads) throw fail("", "internal: heads permuted twice");
        heads = &s;
      } else if (s.kind == StepKind::Stack) {  // groups of `count` sources, one after the other's rows (experts)
        if (s.count < 1 || n % s.count || rows % (n / s.count)) throw fail("", "internal: stacked pass-through groups");
        pass_parts_ = s.count;
      } else if (s.kind != StepKind::PassThrough) {
        throw fail("", "internal: pass-through takes no other step");
      }
    const int64_t groups = n / pass_parts_, group_rows = rows / groups;
    pass_group_rows_ = group_rows;
    if (heads) {
      if (heads->heads < 1 || rows % heads->heads || (rows / heads->heads) % 2 || p->stride != 1 || groups > 1)
        throw fail(sources[0].name, std::to_string(rows) + " rows do not split into " + std::to_string(heads->heads) +
                                        " heads of an even size (RoPE pairs)");
      pass_head_dim_ = rows / heads->heads;
      quantum_ = pass_head_dim_;
    }
    if (t.layout != Layout::Interleaved || t.span != BlockSpan::Fixed || cols % t.block_values)
      throw fail("", std::string("internal: ") + t.name + " blocks cannot be passed through for rows of " + std::to_string(cols));
    if (p->stride < 1 || p->start < 0 || p->start >= p->stride) throw fail("", "internal: pass-through rows out of range");
    pass_start_ = p->start;
    pass_stride_ = p->stride;
    // the sources hold stride x the output's rows (every stride-th row from start is the output's)
    // (stacked: each group's sources hold its rows)
    const int64_t blocks = group_rows * p->stride * (cols / t.block_values);
    int64_t block_bytes = 0;
    for (int i = 0; i < n; ++i) {
      const int64_t b = sources[size_t(i)].nbytes();
      if (b < 0 || blocks == 0 || b % blocks)
        throw fail(sources[size_t(i)].name, "holds " + std::to_string(b) + " bytes: not a whole number of bytes for each of " +
                                                std::to_string(blocks) + " " + t.name + " blocks");
      if (i < pass_parts_) block_bytes += b / blocks;
      else if (b != sources[size_t(i % pass_parts_)].nbytes())
        throw fail(sources[size_t(i)].name, "holds " + std::to_string(b) + " bytes; the tensor it is stacked with (" +
                                                sources[size_t(i % pass_parts_)].name + ") holds " +
                                                std::to_string(sources[size_t(i % pass_parts_)].nbytes()));
      views_[size_t(i)] = {group_rows * p->stride, cols};
      row_bytes_[size_t(i)] = b / (group_rows * p->stride);
      if (nibble_pairs_[size_t(i)]) {
        const int64_t g = nibble_pairs_[size_t(i)] == -1 ? b / blocks : -1 - nibble_pairs_[size_t(i)];
        if (b / blocks != t.block_values / 2 || g < 1 || (b / blocks) % g)
          throw fail(sources[size_t(i)].name, "internal: nibble pairs of a source that is not a block's packed values");
        nibble_pairs_[size_t(i)] = g;
      }
    }
    if (block_bytes != t.bytes_of(1, t.block_values, 0).total())
      throw fail(sources[0].name, "gives " + std::to_string(block_bytes) + " bytes a block; " + t.name + " blocks are " +
                                      std::to_string(t.bytes_of(1, t.block_values, 0).total()));
    pass_ = true;
    pass_type_ = p->type;
    checked_ = true;
    return;
  }

  // Which sources are scales, and the order of the steps.
  std::vector<bool> is_scale(size_t(n), false);
  for (const Step& s : steps) {
    if (s.kind == StepKind::LowRank)
      for (int aux : {s.lora_a, s.lora_b}) {
        if (aux < 0 || aux >= n || aux == s.source) throw fail("", "internal: a low-rank source out of range");
        is_scale[size_t(aux)] = true;
      }
    if (s.kind == StepKind::Dequant || s.kind == StepKind::Unpack) {
      for (int aux : {s.scale, s.zeros, s.group_index}) {
        if (aux == -1 && aux != s.scale) continue;  // (zero points, group index: optional)
        if (aux < 0 || aux >= n || aux == s.source) throw fail("", "internal: a scale source out of range");
        is_scale[size_t(aux)] = true;
      }
    }
  }
  std::vector<int> weights;
  for (int i = 0; i < n; ++i)
    if (!is_scale[size_t(i)]) weights.push_back(i);
  int phase = 0;  // 0: per-source steps, 1: joined, 2: whole-tensor steps
  const Step* join = nullptr;
  for (const Step& s : steps) {
    switch (s.kind) {
      case StepKind::Dequant: case StepKind::Unpack: case StepKind::LowRank: case StepKind::SliceRows: case StepKind::PermuteHeads:
        if (phase > 0) throw fail("", "internal: a per-source step after the sources were joined");
        if (s.source < 0 || s.source >= n || is_scale[size_t(s.source)]) throw fail("", "internal: a step's source out of range");
        break;
      case StepKind::Stack: case StepKind::ConcatRows:
        if (phase > 0) throw fail("", "internal: the sources are joined twice");
        phase = 1;
        join = &s;
        break;
      case StepKind::Transpose: transpose_ = true; phase = 2; break;
      case StepKind::AddConstant: add_ += s.value; phase = 2; break;
      case StepKind::Reshape: reshape_ = 0; phase = 2; break;  // (its factor once the joined tensor is known)
      case StepKind::Ternarize: ternary_ = true, ternary_dtype_ = s.dtype, phase = 2; break;
      case StepKind::Round:
        if (s.dtype != DType::F16 && s.dtype != DType::BF16) throw fail("", "internal: values rounded to F16 or BF16 only");
        round_ = s.dtype, phase = 2;
        break;
      case StepKind::PassThrough: case StepKind::NibblePairs: case StepKind::MaskBytes: break;  // handled above
    }
  }
  if (weights.size() > 1 && !join) throw fail("", "internal: several sources and no step joining them");

  // Each weight source, with its own steps, becomes an operand: rows of the joined tensor.
  int64_t joined_rows = 0, joined_cols = -1;
  for (int w : weights) {
    const SourceTensor& src = sources[size_t(w)];
    RowView v = views_[size_t(w)];  // (packed codes: the weight's rows and columns)
    const SourceDType& dt = source_dtype(src.dtype);
    if (row_bytes_[size_t(w)] < 0 || (v.rows > 1 && (v.cols * dt.bits) % 8))
      throw fail(src.name, "rows of " + std::to_string(v.cols) + " " + dt.name + " values do not fill whole bytes");
    Operand o;
    o.source = w;
    bool sliced = false, permuted = false, scaled = false;
    for (size_t i = 0; i < steps.size(); ++i)
      if (steps[i].kind == StepKind::Unpack && steps[i].source == w) {
        if (o.unpack >= 0) throw fail(src.name, "internal: unpacked twice");
        check_unpack(steps[i], fail);
        o.unpack = int(i);
        v = {steps[i].weight_rows, steps[i].weight_cols};
        scaled = true;
      }
    o.rows = v.rows;
    for (size_t i = 0; i < steps.size(); ++i)
      if (steps[i].kind == StepKind::LowRank && steps[i].source == w) {
        const Step& l = steps[i];
        const RowView &a = views_[size_t(l.lora_a)], &b = views_[size_t(l.lora_b)];
        if (o.low_rank >= 0) throw fail(src.name, "internal: two low-rank updates");
        if (a.cols != v.cols || b.rows != v.rows || a.rows != b.cols)
          throw fail(sources[size_t(l.lora_a)].name, "A " + shape_string(sources[size_t(l.lora_a)].shape) + " and B " +
                                                         shape_string(sources[size_t(l.lora_b)].shape) + " do not update " + src.name +
                                                         " [" + std::to_string(v.rows) + ", " + std::to_string(v.cols) + "]");
        for (int i2 : {l.lora_a, l.lora_b})
          if (!dtype_is_float(sources[size_t(i2)].dtype) || source_dtype(sources[size_t(i2)].dtype).needs_scale)
            throw fail(sources[size_t(i2)].name, "A and B are F32, F16 or BF16");
        o.low_rank = int(i);
      }
    for (const Step& s : steps) {
      if (s.source != w || (s.kind != StepKind::Dequant && s.kind != StepKind::SliceRows && s.kind != StepKind::PermuteHeads))
        continue;
      if (s.kind == StepKind::SliceRows) {
        if (sliced || permuted) throw fail(src.name, "internal: rows sliced twice, or after the heads were permuted");
        if (s.start < 0 || s.count < 1 || s.stride < 1 || s.start >= v.rows || (s.count - 1) > (v.rows - 1 - s.start) / s.stride)
          throw fail(src.name, "has " + std::to_string(v.rows) + " rows: cannot take " + std::to_string(s.count) +
                                   " from row " + std::to_string(s.start) + " in steps of " + std::to_string(s.stride));
        o.start = s.start;
        o.stride = s.stride;
        o.rows = s.count;
        sliced = true;
      } else if (s.kind == StepKind::PermuteHeads) {
        if (permuted) throw fail(src.name, "internal: heads permuted twice");
        if (s.heads < 1 || o.rows % s.heads || (o.rows / s.heads) % 2)
          throw fail(src.name, std::to_string(o.rows) + " rows do not split into " + std::to_string(s.heads) +
                                   " heads of an even size (RoPE pairs)");
        o.head_dim = o.rows / s.heads;
        permuted = true;
      } else {
        if (scaled) throw fail(src.name, "internal: two scale tensors");
        const SourceTensor& sc = sources[size_t(s.scale)];
        const RowView& sv = views_[size_t(s.scale)];
        if (s.block_rows < 1 || s.block_cols < 1) throw fail(src.name, "internal: an empty scale block");
        if (s.matrix_rows < 0 || (s.matrix_rows > 0 && v.rows % s.matrix_rows))
          throw fail(src.name, "internal: " + std::to_string(v.rows) + " rows are not matrices of " + std::to_string(s.matrix_rows));
        const int64_t per_matrix = s.matrix_rows > 0 ? s.matrix_rows : v.rows;  // (blocks restart at each matrix)
        const int64_t want_rows = (v.rows / std::max<int64_t>(per_matrix, 1)) * ((per_matrix + s.block_rows - 1) / s.block_rows),
                      want_cols = (v.cols + s.block_cols - 1) / s.block_cols;
        if (sv.rows != want_rows || sv.cols != want_cols)
          throw fail(sc.name, "shape " + shape_string(sc.shape) + " does not give one scale per " + std::to_string(s.block_rows) +
                                  " x " + std::to_string(s.block_cols) + " block of " + src.name + " " +
                                  shape_string(src.shape) + " (want " + std::to_string(want_rows) + " x " +
                                  std::to_string(want_cols) + ")");
        if (row_bytes_[size_t(s.scale)] < 0) throw fail(sc.name, "rows do not fill whole bytes");
        o.scale = s.scale;
        o.block_rows = s.block_rows;
        o.block_cols = s.block_cols;
        o.matrix_rows = s.matrix_rows;
        scaled = true;
      }
    }
    if (dt.needs_scale && !scaled)
      throw fail(src.name, std::string("dtype ") + dt.name +
                               " holds scaled values, and the checkpoint gives it no scale tensor (config.json's "
                               "quantization_config names none for it)");
    if (joined_cols >= 0 && v.cols != joined_cols)
      throw fail(src.name, "rows of " + std::to_string(v.cols) + " values cannot join rows of " + std::to_string(joined_cols));
    if (join && join->kind == StepKind::Stack && !ops_.empty() && o.rows != ops_.front().rows)
      throw fail(src.name, "has " + std::to_string(o.rows) + " rows; the tensors it is stacked with have " +
                               std::to_string(ops_.front().rows));
    joined_cols = v.cols;
    o.first_row = joined_rows;
    joined_rows += o.rows;
    ops_.push_back(o);
  }

  // The joined tensor [joined_rows, joined_cols] must be the output, or its transpose, or (reshaped)
  // hold its values in order in whole joined rows per output row.
  if (reshape_ == 0) {
    if (transpose_ || joined_cols <= 0 || cols % joined_cols || joined_rows * joined_cols != rows * cols)
      throw fail(sources[size_t(weights[0])].name,
                 "gives " + std::to_string(joined_rows) + " rows of " + std::to_string(joined_cols) + " values; " + out +
                     " needs " + std::to_string(rows) + " of " + std::to_string(cols) + " (reshaped)");
    reshape_ = cols / joined_cols;
  }
  const int64_t want_rows = transpose_ ? joined_cols : reshape_ > 1 ? joined_rows / reshape_ : joined_rows,
                want_cols = transpose_ ? joined_rows : reshape_ > 1 ? joined_cols * reshape_ : joined_cols;
  if (want_rows != rows || want_cols != cols)
    throw fail(sources[size_t(weights[0])].name,
               "gives " + std::to_string(want_rows) + " rows of " + std::to_string(want_cols) + " values; " + out +
                   " needs " + std::to_string(rows) + " of " + std::to_string(cols));
  if (transpose_ && (ops_.size() != 1 || ops_[0].head_dim || ops_[0].scale >= 0 || ops_[0].unpack >= 0 || ops_[0].low_rank >= 0))
    throw fail("", "internal: only a single source, unscaled and unpermuted, can be transposed");
  // Chunks start on whole heads of every permuted operand; a transposed tensor is read whole.
  for (const Operand& o : ops_)
    if (o.head_dim > 0) quantum_ = o.first_row % o.head_dim ? rows : std::lcm(quantum_, o.head_dim);
  if (transpose_ || ternary_) quantum_ = std::max<int64_t>(1, rows);  // (ternarized: by the whole tensor's mean)
  // A GPTQ weight's rows are columns of its codes (qweight [in / per_word, out]; scales [groups,
  // out]; qzeros [groups, out / per_word]): each is viewed as rows of one tile of per_word
  // columns, [in / per_word x out / per_word, per_word] and so on, so that rows [a, b) read one
  // strip of each row of them (Recipe::reads); chunks start on whole tiles.
  for (Operand& o : ops_) {
    if (o.unpack < 0 || steps[size_t(o.unpack)].packing != Packing::GptqColumns) continue;
    const Step& u = steps[size_t(o.unpack)];
    const int64_t pw = 32 / u.bits, tiles = u.weight_rows / pw;  // (check_unpack: out % per_word == 0)
    o.tile = pw;
    quantum_ = std::lcm(quantum_, pw);
    for (int i : {o.source, u.scale, u.zeros}) {
      RowView& v = views_[size_t(i)];
      v = {v.rows * tiles, v.cols / tiles};
      row_bytes_[size_t(i)] = dtype_bytes(sources[size_t(i)].dtype, v.cols);
    }
  }
  checked_ = true;
}

// ---- reads ----

std::vector<RowSpan> Recipe::reads(int64_t r0, int64_t r1) const {
  std::vector<RowSpan> spans;
  if (!checked_) throw ConvertError("", source_name(), "internal: a recipe read before it was checked");
  if (is_computed() || r0 >= r1) return spans;
  if (pass_) {
    if (pass_head_dim_ > 0)  // whole heads: a row's source is elsewhere in its head
      r0 = r0 / pass_head_dim_ * pass_head_dim_, r1 = std::min(rows_, (r1 + pass_head_dim_ - 1) / pass_head_dim_ * pass_head_dim_);
    const int64_t gr = pass_group_rows_;
    for (int64_t g = r0 / gr; g * gr < r1; ++g) {  // each group's rows in [r0, r1), in its own sources
      const int64_t a = std::max(r0, g * gr) - g * gr, b = std::min(r1, (g + 1) * gr) - g * gr;
      for (int i = int(g) * pass_parts_; i < int(g + 1) * pass_parts_; ++i)
        spans.push_back({i, pass_start_ + a * pass_stride_, pass_start_ + (b - 1) * pass_stride_ + 1});
    }
    return spans;
  }
  if (ternary_) r0 = 0, r1 = rows_;            // every value is scaled by the whole tensor's mean
  if (transpose_) r0 = 0, r1 = ops_[0].rows;  // output rows are columns of the whole operand
  r0 *= reshape_, r1 *= reshape_;
  for (const Operand& o : ops_) {
    int64_t a = std::max(r0, o.first_row) - o.first_row, b = std::min(r1, o.first_row + o.rows) - o.first_row;
    if (a >= b) continue;
    if (o.head_dim > 0) {  // whole heads: a row's source is elsewhere in its head
      a = a / o.head_dim * o.head_dim;
      b = std::min(o.rows, (b + o.head_dim - 1) / o.head_dim * o.head_dim);
    }
    const int64_t s0 = o.start + a * o.stride, s1 = o.start + (b - 1) * o.stride + 1;
    if (o.low_rank >= 0) {  // B's rows as the weight's, all of A (r rows)
      const Step& l = steps[size_t(o.low_rank)];
      spans.push_back({l.lora_b, s0, s1});
      spans.push_back({l.lora_a, 0, views_[size_t(l.lora_a)].rows});
    }
    if (o.unpack >= 0) {  // packed codes: the words, scales, zero points (and group index) they need
      const Step& u = steps[size_t(o.unpack)];
      auto whole = [&](int i) {
        if (i >= 0) spans.push_back({i, 0, views_[size_t(i)].rows});
      };
      if (u.packing == Packing::GptqColumns) {  // tiles t0..t1 of every row of the codes, scales and zero points
        const int64_t tiles = u.weight_rows / o.tile;
        const auto [t0, t1] = o.tiles_of(s0, s1);
        for (int i : {o.source, u.scale, u.zeros})
          if (t0 == 0 && t1 == tiles) whole(i);  // every tile: the tensor in one read
          else
            for (int64_t k = 0; k < views_[size_t(i)].rows / tiles; ++k) spans.push_back({i, k * tiles + t0, k * tiles + t1});
        whole(u.group_index);
      } else if (u.packing == Packing::Bitnet) {  // weight row q R + p is byte row p: each quarter's rows
        const int64_t R = views_[size_t(o.source)].rows;
        if (s1 - s0 >= R) whole(o.source);
        else
          for (int64_t q = s0 / R; q * R < s1; ++q) spans.push_back({o.source, std::max(s0, q * R) - q * R, std::min(s1, (q + 1) * R) - q * R});
        whole(u.scale);
      } else {
        const int64_t per_word = 32 / u.bits;
        spans.push_back({o.source, s0, s1});
        spans.push_back({u.scale, s0, s1});
        if (u.zeros >= 0) spans.push_back({u.zeros, s0 / per_word, (s1 - 1) / per_word + 1});
      }
      continue;
    }
    spans.push_back({o.source, s0, s1});
    if (o.scale >= 0) spans.push_back({o.scale, o.scale_row(s0), o.scale_row(s1 - 1) + 1});
  }
  return spans;
}

bool Recipe::reads_strips() const {
  return std::any_of(ops_.begin(), ops_.end(), [](const Operand& o) { return o.tile > 0; });
}

SourceRange Recipe::byte_range(const RowSpan& s) const {
  const SourceTensor& t = sources[size_t(s.source)];
  const int64_t rb = row_bytes_[size_t(s.source)];
  if (views_[size_t(s.source)].rows == 1 && rb < 0) return {t.shard, t.offset, t.nbytes()};
  return {t.shard, t.offset + s.row0 * rb, (s.row1 - s.row0) * rb};
}

int64_t Recipe::source_bytes() const {
  int64_t n = 0;
  for (const SourceTensor& s : sources) n += s.nbytes();
  return n;
}

// ---- realizing ----

BufferedRows::BufferedRows(const Recipe& r, const std::vector<RowSpan>& spans, const uint8_t* raw)
    : r_(r), spans_(spans), raw_(raw), at_(spans.size()) {
  int64_t at = 0;
  for (size_t i = 0; i < spans.size(); ++i) at_[i] = at, at += r.byte_range(spans[i]).size;
}

const uint8_t* BufferedRows::bytes(int s, int64_t r0, int64_t r1) {
  // From the span after the last one found, round once: a GPTQ strip's thousands of spans are
  // asked for in order.
  const size_t n = spans_.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_ + k) % n;
    const RowSpan& sp = spans_[i];
    if (sp.source == s && sp.row0 <= r0 && r1 <= sp.row1) {
      next_ = i + 1 == n ? 0 : i + 1;
      return raw_ + at_[i] + (r0 - sp.row0) * r_.source_row_bytes(s);
    }
  }
  throw ConvertError("", r_.sources[size_t(s)].name, "internal: rows " + std::to_string(r0) + ".." + std::to_string(r1) +
                                                         " were not read");
}

void BufferedRows::rows(int s, int64_t r0, int64_t r1, float* out) {
  const RowView& v = r_.source_view(s);
  decode_to_f32(r_.sources[size_t(s)].dtype, bytes(s, r0, r1), size_t((r1 - r0) * v.cols), out);
}

void SourceRows::segment(int s, int64_t r, int64_t cols, int64_t c0, int64_t c1, float* out) {
  std::vector<float> row(static_cast<size_t>(cols));
  rows(s, r, r + 1, row.data());
  std::copy(row.begin() + c0, row.begin() + c1, out);
}

void BufferedRows::segment(int s, int64_t r, int64_t cols, int64_t c0, int64_t c1, float* out) {
  const DType d = r_.sources[size_t(s)].dtype;
  if (dtype_bits(d) % 8) return SourceRows::segment(s, r, cols, c0, c1, out);
  decode_to_f32(d, bytes(s, r, r + 1) + c0 * (dtype_bits(d) / 8), size_t(c1 - c0), out);
}

// The decoded rows [a, b) of operand o (its rows after slicing and permuting) into out.
void Recipe::operand_rows(const Operand& o, int64_t a, int64_t b, SourceRows& src, float* out) const {
  const int64_t cols = views_[size_t(o.source)].cols;
  if (o.unpack >= 0) {
    unpack_rows(o, a, b, src, out);
    return add_low_rank(o, a, b, src, out);
  }
  if (o.head_dim == 0 && o.stride == 1) src.rows(o.source, o.start + a, o.start + b, out);
  else
    for (int64_t x = a; x < b; ++x) src.rows(o.source, o.source_row(x), o.source_row(x) + 1, out + (x - a) * cols);
  if (o.scale < 0) return add_low_rank(o, a, b, src, out);
  const int64_t scols = views_[size_t(o.scale)].cols;
  std::vector<float> scale(static_cast<size_t>(scols));
  int64_t have = -1;
  for (int64_t x = a; x < b; ++x) {
    const int64_t srow = o.scale_row(o.source_row(x));
    if (srow != have) {
      src.rows(o.scale, srow, srow + 1, scale.data()), have = srow;
      for (int64_t k = 0; k < scols; ++k)
        if (!std::isfinite(scale[size_t(k)]))
          throw ConvertError(sources[size_t(o.scale)].file, sources[size_t(o.scale)].name,
                             "scale " + std::to_string(srow * scols + k) + " is " + std::to_string(scale[size_t(k)]) +
                                 ": the weight " + sources[size_t(o.source)].name + " cannot be decoded");
    }
    float* row = out + (x - a) * cols;
    for (int64_t c0 = 0, k = 0; c0 < cols; c0 += o.block_cols, ++k) {  // a run of values per scale (no division per value)
      const float sk = scale[size_t(k)];
      for (int64_t c = c0, end = std::min(cols, c0 + o.block_cols); c < end; ++c) row[c] = row[c] * sk;  // in f32, as torch multiplies
    }
  }
  add_low_rank(o, a, b, src, out);
}

// Operand rows [a, b) (decoded, scaled) plus scale x (B A) where a LoRA adapter is merged: the sum
// over the rank in f32 in order, then times the scale, then added (as the tests' generator merges).
void Recipe::add_low_rank(const Operand& o, int64_t a, int64_t b, SourceRows& src, float* out) const {
  if (o.low_rank < 0) return;
  const Step& l = steps[size_t(o.low_rank)];
  const RowView &av = views_[size_t(l.lora_a)];
  const int64_t r = av.rows, cols = av.cols;
  std::vector<float> A(static_cast<size_t>(r * cols)), B(static_cast<size_t>(r));
  src.rows(l.lora_a, 0, r, A.data());
  for (int64_t x = a; x < b; ++x) {
    const int64_t sr = o.source_row(x);  // B's row: the weight's source row
    src.rows(l.lora_b, sr, sr + 1, B.data());
    float* row = out + (x - a) * cols;
    for (int64_t c = 0; c < cols; ++c) {
      float delta = 0.0f;
      for (int64_t k = 0; k < r; ++k) delta += B[size_t(k)] * A[size_t(k * cols + c)];
      row[c] += l.value * delta;
    }
  }
}

// Rows [a, b) of a packed operand (after slicing and permuting), as llama.cpp's converter
// computes them: float(code - zero point) times the f32 scale, one rounding (torch's int - int,
// then .float(), then one multiply).
void Recipe::unpack_rows(const Operand& o, int64_t a, int64_t b, SourceRows& src, float* out) const {
  const Step& u = steps[size_t(o.unpack)];
  const int64_t cols = u.weight_cols, per_word = 32 / u.bits;
  const uint32_t mask = (1u << u.bits) - 1;
  auto code = [&](const uint8_t* words, int64_t word, int64_t k) {  // code k of a little-endian word
    return int32_t((get_le<uint32_t>(words + word * 4) >> (k * u.bits)) & mask);
  };
  const SourceTensor& qs = sources[size_t(o.source)];
  if (u.packing == Packing::Nvfp4) {
    for (int64_t x = a; x < b; ++x) {
      const int64_t r = o.source_row(x);
      const uint8_t* q = src.bytes(o.source, r, r + 1);
      const uint8_t* sc = src.bytes(u.scale, r, r + 1);
      float* row = out + (x - a) * cols;
      for (int64_t g = 0; g < cols / 16; ++g) {
        // ggml's dequantize_row_nvfp4 on the converter's blocks (level x d), then the tensor's scale_2
        const float d = ggml::ue4m3_to_fp32(uint8_t(sc[g] & 0x7F));
        for (int64_t c = g * 16; c < g * 16 + 16; ++c) {
          const float v = float(ggml::kMxfp4Levels[(q[c / 2] >> (4 * (c % 2))) & 0x0F]) * d;
          row[c] = v * u.value;
        }
      }
    }
  } else if (u.packing == Packing::Bitnet) {
    // dequant_bitnet: ((byte >> 2q) & 3).float() - 1, then / scale.float() (a division, one rounding)
    const int64_t R = views_[size_t(o.source)].rows;
    float scale = 0.0f;
    src.rows(u.scale, 0, 1, &scale);
    for (int64_t x = a; x < b; ++x) {
      const int64_t r = o.source_row(x);
      const uint8_t* q = src.bytes(o.source, r % R, r % R + 1);
      const int shift = int(2 * (r / R));
      float* row = out + (x - a) * cols;
      for (int64_t c = 0; c < cols; ++c) row[c] = (float((q[c] >> shift) & 3) - 1.0f) / scale;
    }
  } else if (u.packing == Packing::GptqColumns) {
    // The strip of tiles t0..t1 holding source rows (qweight's columns) lo..hi: W columns of
    // each of qweight's in / per_word rows, of each group's scales, and W / per_word words of
    // each group's zero points (the views of check(): a row per tile).
    const int64_t tiles = u.weight_rows / o.tile;
    int64_t lo = o.source_row(a), hi = lo + 1;
    for (int64_t x = a; x < b; ++x) lo = std::min(lo, o.source_row(x)), hi = std::max(hi, o.source_row(x) + 1);
    const auto [t0, t1] = o.tiles_of(lo, hi);
    const int64_t W = (t1 - t0) * o.tile;
    const int64_t words = views_[size_t(o.source)].rows / tiles, groups = views_[size_t(u.scale)].rows / tiles;
    std::vector<const uint8_t*> q(static_cast<size_t>(words)), z(static_cast<size_t>(groups));
    for (int64_t k = 0; k < words; ++k) q[size_t(k)] = src.bytes(o.source, k * tiles + t0, k * tiles + t1);
    std::vector<float> scales(static_cast<size_t>(groups * W));  // (asked for in the order reads() lists them)
    for (int64_t k = 0; k < groups; ++k) src.rows(u.scale, k * tiles + t0, k * tiles + t1, scales.data() + k * W);
    for (int64_t k = 0; k < groups; ++k) z[size_t(k)] = src.bytes(u.zeros, k * tiles + t0, k * tiles + t1);
    const uint8_t* g = src.bytes(u.group_index, 0, 1);
    std::vector<int32_t> group(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c) {
      group[size_t(c)] = get_le<int32_t>(g + c * 4);
      if (group[size_t(c)] < 0 || group[size_t(c)] >= groups)
        throw ConvertError(sources[size_t(u.group_index)].file, sources[size_t(u.group_index)].name,
                           "entry " + std::to_string(c) + " is " + std::to_string(group[size_t(c)]) + ": outside the " +
                               std::to_string(groups) + " groups of " + sources[size_t(u.scale)].name);
    }
    for (int64_t x = a; x < b; ++x) {
      const int64_t r = o.source_row(x) - t0 * o.tile;  // an output (qweight column), in the strip
      float* row = out + (x - a) * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t gi = group[size_t(c)];
        const int32_t zero = code(z[size_t(gi)], r / per_word, r % per_word) + u.zero_bias;
        const int32_t v = code(q[size_t(c / per_word)], r, c % per_word);
        row[c] = scales[size_t(gi * W + r)] * float(v - zero);
      }
    }
  } else {
    const int64_t groups = cols / u.group;
    std::vector<float> scale(static_cast<size_t>(groups));
    for (int64_t x = a; x < b; ++x) {
      const int64_t r = o.source_row(x);
      const uint8_t* q = src.bytes(o.source, r, r + 1);
      const uint8_t* z = u.zeros >= 0 ? src.bytes(u.zeros, r / per_word, r / per_word + 1) : nullptr;
      src.rows(u.scale, r, r + 1, scale.data());
      float* row = out + (x - a) * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t gi = c / u.group;
        const int32_t zero = z ? code(z, gi, r % per_word) : int32_t(1) << (u.bits - 1);
        row[c] = float(code(q, c / per_word, c % per_word) - zero) * scale[size_t(gi)];
      }
    }
  }
  for (int64_t i = 0; i < (b - a) * cols; ++i)
    if (!std::isfinite(out[i]))
      throw ConvertError(qs.file, sources[size_t(u.scale)].name,
                         "gives " + std::to_string(out[i]) + " for " + qs.name + ": the scales must be finite");
}

// v as a tensor of dtype d holds it (torch's and numpy's casts: round to nearest, ties to even);
// F32 and wider: v.
static float as_dtype(float v, DType d) {
  return d == DType::F16 ? f16_to_f32(f32_to_f16(v)) : d == DType::BF16 ? bf16_to_f32(ggml::fp32_to_bf16(v)) : v;
}

void realize_rows(const Recipe& r, int64_t r0, int64_t r1, SourceRows& src, float* out) {
  if (!r.checked_) throw ConvertError("", r.source_name(), "internal: a recipe realized before it was checked");
  const int64_t cols = r.cols_;
  if (r.is_computed()) {
    std::copy(r.constant.begin() + r0 * cols, r.constant.begin() + r1 * cols, out);
    return;
  }
  if (r.pass_) {  // decoded by the type, only to be looked at
    const QuantType& t = quant_type(r.pass_type_);
    std::vector<uint8_t> bytes(static_cast<size_t>(t.bytes_of(r1 - r0, cols, 0).total()));
    pass_through_rows(r, r0, r1, src, bytes.data());
    const uint8_t* region[kMaxRegions] = {bytes.data()};
    t.decode(region, r1 - r0, cols, t.block_values, out);
    return;
  }
  if (r.ternary_ && (r0 != 0 || r1 != r.rows_)) {  // the mean is the whole tensor's: realize it all
    std::vector<float> all(static_cast<size_t>(r.rows_ * cols));
    realize_rows(r, 0, r.rows_, src, all.data());
    std::copy(all.begin() + r0 * cols, all.begin() + r1 * cols, out);
    return;
  }
  if (r.transpose_) {  // out[i, j] = operand[j, r0 + i]: columns r0..r1 of every operand row
    const Recipe::Operand& o = r.ops_[0];
    std::vector<float> seg(static_cast<size_t>(r1 - r0));
    for (int64_t j = 0; j < o.rows; ++j) {
      src.segment(o.source, o.start + j * o.stride, r.views_[size_t(o.source)].cols, r0, r1, seg.data());
      for (int64_t i = r0; i < r1; ++i) out[(i - r0) * cols + j] = seg[size_t(i - r0)];
    }
  } else {  // (reshaped: the same values as joined rows of cols / reshape_)
    const int64_t j0 = r0 * r.reshape_, j1 = r1 * r.reshape_, jcols = cols / r.reshape_;
    for (const Recipe::Operand& o : r.ops_) {
      const int64_t a = std::max(j0, o.first_row), b = std::min(j1, o.first_row + o.rows);
      if (a < b) r.operand_rows(o, a - o.first_row, b - o.first_row, src, out + (a - j0) * jcols);
    }
  }
  if (r.add_ != 0.0f)
    for (int64_t i = 0; i < (r1 - r0) * cols; ++i) out[i] += r.add_;
  if (r.ternary_) ternarize(out, (r1 - r0) * cols, r.ternary_dtype_, r.sources[0].file, r.source_name());
  if (r.round_ != DType::F32) {  // the values as the converter's 16-bit file holds them
    const bool f16 = r.round_ == DType::F16;
    for (int64_t i = 0; i < (r1 - r0) * cols; ++i) {
      const float v = as_dtype(out[i], r.round_);
      if (std::isinf(v) && std::isfinite(out[i])) {
        char what[160];
        std::snprintf(what, sizeof what, "holds %g (row %lld), past %s's largest value", double(out[i]),
                      static_cast<long long>(r0 + i / cols), f16 ? "F16" : "BF16");
        throw ConvertError(r.sources[0].file, r.source_name(),
                           std::string(what) + ": llama-quantize reads the converter's " + (f16 ? "F16" : "BF16") +
                               " file, where it is Inf; write the converter's F32 or Q8_0 file (--outtype) instead");
      }
      out[i] = v;
    }
  }
}

void ternarize(float* w, int64_t n, DType dtype, const std::string& file, const std::string& tensor) {
  const float sum = torch_float_sum([w](int64_t i) { return std::fabs(w[i]); }, n);
  float scale = sum / float(n);  // (torch's mean: the sum divided by the count as a float)
  if (!std::isfinite(scale))
    throw ConvertError(file, tensor, "has values that are not finite: BitNet's weight quantization divides by the mean of their magnitudes");
  scale = std::max(scale, 1e-5f);
  const float iscale = 1.0f / scale;
  for (int64_t i = 0; i < n; ++i) {
    float q = std::nearbyint(w[i] * iscale);  // (half to even, -0 kept, as torch.round)
    q = q < -1.0f ? -1.0f : q > 1.0f ? 1.0f : q;
    const float v = q / iscale;
    w[i] = as_dtype(v, dtype);  // (result.type(dtype))
  }
}

void pass_through_rows(const Recipe& r, int64_t r0, int64_t r1, SourceRows& src, uint8_t* dst) {
  const QuantType& t = quant_type(r.pass_type_);
  const int64_t blocks = r.cols_ / t.block_values, hd = r.pass_head_dim_;
  const int n = r.pass_parts_;  // the parts of a block (stacked: of one group's sources)
  std::vector<const uint8_t*> part(static_cast<size_t>(n));
  std::vector<int64_t> per_block(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) per_block[size_t(i)] = r.row_bytes_[size_t(i)] / blocks;
  for (int64_t row = r0; row < r1; ++row) {
    // its group, and its source row: the RoPE permutation (as Operand::source_row), then start + x stride
    const int64_t g = row / r.pass_group_rows_, local = row % r.pass_group_rows_;
    const int64_t x = hd > 0 ? local / hd * hd + (local % hd % 2) * (hd / 2) + local % hd / 2 : local;
    const int64_t srow = r.pass_start_ + x * r.pass_stride_;
    for (int i = 0; i < n; ++i) part[size_t(i)] = src.bytes(int(g) * n + i, srow, srow + 1);
    for (int64_t k = 0; k < blocks; ++k) {  // block k of the row: each part's bytes of it, in order
      for (int i0 = 0; i0 < n; ++i0) {
        const int i = int(g) * n + i0;
        const int64_t pb = per_block[size_t(i0)];
        const uint8_t* from = part[size_t(i0)] + k * pb;
        if (const int64_t g = r.nibble_pairs_[size_t(i)]) {  // element e at nibble e % 2 of byte e / 2 -> ggml's qs[j]: j | (j + g) << 4, per g bytes
          auto nib = [&](int64_t e) { return (from[e / 2] >> (4 * (e % 2))) & 0x0f; };
          for (int64_t j0 = 0; j0 < pb; j0 += g)
            for (int64_t j = 0; j < g; ++j) dst[j0 + j] = uint8_t(nib(2 * j0 + j) | nib(2 * j0 + j + g) << 4);
        } else {
          std::memcpy(dst, from, size_t(pb));
        }
        if (r.mask_[size_t(i)] != 0xFF)
          for (int64_t j = 0; j < pb; ++j) dst[j] &= r.mask_[size_t(i)];
        dst += pb;
      }
    }
  }
}

std::vector<float> realize_rows(const Recipe& r, int64_t r0, int64_t r1, const std::vector<ByteSource*>& shards) {
  const std::vector<RowSpan> spans = r.reads(r0, r1);
  int64_t total = 0;
  for (const RowSpan& s : spans) total += r.byte_range(s).size;
  std::vector<uint8_t> raw(static_cast<size_t>(total));
  uint8_t* at = raw.data();
  for (const RowSpan& s : spans) {
    const SourceRange b = r.byte_range(s);
    try {
      shards.at(size_t(b.shard))->read_at(b.offset, at, size_t(b.size));
    } catch (const ConvertError& e) {
      if (!e.tensor().empty()) throw;
      throw e.in_tensor(r.sources[size_t(s.source)].name);
    }
    at += b.size;
  }
  BufferedRows rows(r, spans, raw.data());
  std::vector<float> out(static_cast<size_t>((r1 - r0) * r.cols()));
  realize_rows(r, r0, r1, rows, out.data());
  return out;
}

}  // namespace leapconv
