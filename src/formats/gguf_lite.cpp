#include "formats/gguf_lite.h"

#include <algorithm>

#include "core/byte_cursor.h"
#include "core/byte_spans.h"

namespace leapconv {

static std::string one_line(std::string v) {
  for (char& ch : v) if (ch == '\n' || ch == '\r') ch = ' ';
  return v;
}

// The folder or file name only: the same checkpoint gives the same bytes from the CLI (which
// sees a path) and from the browser (which sees a name).
static std::string source_name(std::string label) {
  while (label.size() > 1 && label.back() == '/') label.pop_back();
  const size_t slash = label.find_last_of('/');
  return slash == std::string::npos ? label : label.substr(slash + 1);
}

static std::string build_metadata(const Checkpoint& ck, const GgufPlanOptions& opt) {
  std::vector<std::string> lines = {"format=gguf-lite", "creator=leapconv",
                                    "source=" + one_line(source_name(ck.label)),
                                    std::string("scheme.default=") + quant_type(opt.default_scheme).short_name};
  for (size_t i = 0; i < opt.rules.size(); ++i)
    lines.push_back("scheme.rule." + std::to_string(i) + "=" + one_line(opt.rules[i].pattern) + " -> " +
                    quant_type(opt.rules[i].type).short_name);
  if (ck.config) {
    for (auto it = ck.config->raw.begin(); it != ck.config->raw.end(); ++it) {
      if (it->is_structured()) continue;
      lines.push_back("config." + one_line(it.key()) + "=" +
                      one_line(it->is_string() ? it->get<std::string>() : it->dump()));
    }
  }
  std::string s;
  for (size_t i = 0; i < lines.size(); ++i) s += (i ? "\n" : "") + lines[i];
  return s;
}

// Picks the type for one tensor: rules, then the default; then SPEC's fallbacks.
static QType choose(const TensorInfo& t, bool weight, const GgufPlanOptions& opt, std::string* note) {
  if (!weight) {  // (holds_weights: integer codes with their scales are a quantized checkpoint's weight)
    *note = std::string("carried as F32 (source dtype ") + dtype_name(t.dtype) + ")";
    return QType::F32;
  }
  QType want = t.shape.size() >= 2 ? opt.default_scheme : QType::F32;
  const int rule = matching_rule(opt.rules, t.name);
  if (rule >= 0) want = opt.rules[size_t(rule)].type;
  const std::string why = quant_type_refusal(quant_type(want), t.shape);
  if (why.empty()) return want;
  const QType fb = t.shape.size() <= 1 ? QType::F32 : QType::F16;
  *note = std::string(quant_type(want).short_name) + " -> " + quant_type(fb).short_name + " (" + why + ")";
  return fb;
}

ConversionPlan plan_gguf_lite(const Checkpoint& ck, const GgufPlanOptions& opt) {
  ConversionPlan plan;
  plan.files.emplace_back();
  PlanFile& file = plan.files.back();
  const std::string meta = build_metadata(ck, opt);
  std::vector<uint8_t> desc;
  int64_t data_off = 0;
  for (const std::string& name : ck.order) {
    const TensorRef& t = *ck.find(name);
    if (name.size() > 0xffff) throw ConvertError(ck.shard_name(t.shard), name, "name too long");
    const std::string why = gguf_lite_shape_refusal(t.info.shape);
    if (!why.empty()) throw ConvertError(ck.shard_name(t.shard), name, "GGUF-lite cannot store its shape: " + why);
    PlanItem it;
    it.name = name;
    it.recipe = Recipe::of(ck, t);
    it.shape = t.info.shape;
    it.type = choose(t.info, ck.holds_weights(t), opt, &it.note);
    finish_item_geometry(it);

    put_le<uint16_t>(desc, uint16_t(name.size()));
    desc.insert(desc.end(), name.begin(), name.end());
    put_u8(desc, uint8_t(it.shape.size()));
    for (int64_t d : it.shape) put_le<uint32_t>(desc, uint32_t(d));
    put_u8(desc, uint8_t(it.qt().gguf_lite_code));
    put_le<uint64_t>(desc, uint64_t(data_off));
    it.offset = data_off;  // relative for now
    data_off += it.size.total();
    plan.items.push_back(std::move(it));
  }
  std::vector<uint8_t>& h = file.header;
  put_le<uint32_t>(h, kGgufLiteMagic);
  put_le<uint32_t>(h, kGgufLiteVersion);
  put_le<uint32_t>(h, uint32_t(plan.items.size()));
  put_le<uint32_t>(h, uint32_t(meta.size()));
  h.insert(h.end(), meta.begin(), meta.end());
  h.insert(h.end(), desc.begin(), desc.end());
  const int64_t data_start = int64_t(h.size());
  for (PlanItem& it : plan.items) it.offset += data_start;
  file.total_bytes = data_start + data_off;
  return plan;
}

std::string gguf_lite_shape_refusal(const std::vector<int64_t>& shape) {
  if (shape.size() > size_t(kGgufLiteMaxDims))
    return std::to_string(shape.size()) + " dims (at most " + std::to_string(kGgufLiteMaxDims) + ")";
  int64_t numel = 1;
  for (int64_t v : shape) {
    if (v < 0 || v > 0xffffffffLL) return "dimension " + std::to_string(v) + " exceeds u32";
    if (v && numel > (int64_t(1) << 50) / v) return "the product of " + shape_string(shape) + " exceeds 2^50";
    numel *= v;
  }
  return "";
}

// ---- reader ----

GgufLiteFile read_gguf_lite(ByteSource& src) {
  GgufLiteFile f;
  f.file = src.name();
  f.file_size = src.size();
  ByteCursor cur(src, 0, f.file_size, [&](uint64_t, const std::string& what) {
    throw ConvertError(f.file, "", "truncated: " + what + " runs past the end of the file");
  });
  if (f.file_size < 16) throw ConvertError(f.file, "", "too small for a GGUF-lite header");
  if (cur.get<uint32_t>("magic") != kGgufLiteMagic) throw ConvertError(f.file, "", "not a GGUF-lite file (bad magic)");
  f.version = cur.get<uint32_t>("version");
  if (f.version != kGgufLiteVersion)
    throw ConvertError(f.file, "", "unsupported GGUF-lite version " + std::to_string(f.version));
  const uint32_t n_tensors = cur.get<uint32_t>("n_tensors");
  const uint32_t meta_len = cur.get<uint32_t>("metadata_len");
  if (int64_t(meta_len) > f.file_size - 16)
    throw ConvertError(f.file, "", "metadata_len " + std::to_string(meta_len) + " runs past the end of the file");
  f.metadata.resize(meta_len);
  cur.read(f.metadata.data(), meta_len, "metadata");
  f.metadata_bytes = meta_len;
  // A descriptor takes at least 12 bytes: n_tensors cannot exceed what the file could hold.
  if (int64_t(n_tensors) > (f.file_size - cur.pos()) / 12)
    throw ConvertError(f.file, "", "n_tensors " + std::to_string(n_tensors) + " is more than the file can hold");
  for (uint32_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    const uint16_t name_len = cur.get<uint16_t>("tensor name length");
    t.name.resize(name_len);
    cur.read(t.name.data(), name_len, "tensor name");
    const std::string label = t.name.empty() ? "#" + std::to_string(i) : t.name;
    const uint8_t n_dims = cur.get<uint8_t>("n_dims");
    if (n_dims > kGgufLiteMaxDims)
      throw ConvertError(f.file, label, "n_dims " + std::to_string(n_dims) + " is implausible (> 8)");
    for (uint8_t d = 0; d < n_dims; ++d) t.dims.push_back(cur.get<uint32_t>("dims"));
    const std::string why = gguf_lite_shape_refusal(t.dims);
    if (!why.empty()) throw ConvertError(f.file, label, "dims overflow: " + why);
    const uint8_t code = cur.get<uint8_t>("dtype");
    const QuantType* qt = quant_type_by_gguf_lite_code(code);
    if (!qt) throw ConvertError(f.file, label, "unknown dtype " + std::to_string(code));
    t.type = qt->id;
    t.offset = int64_t(cur.get<uint64_t>("offset"));
    if (t.offset < 0) throw ConvertError(f.file, label, "offset out of range");
    if (qt->needs_matrix && n_dims != 2) throw ConvertError(f.file, label, std::string(qt->name) + " needs a 2-D tensor");
    if (!quant_type_refusal(*qt, t.dims).empty())
      throw ConvertError(f.file, label, std::string(qt->name) + " needs in % " + std::to_string(qt->block_values) + " == 0");
    t.layout.name = t.name;
    t.layout.shape = t.dims;
    t.layout.type = t.type;
    finish_item_geometry(t.layout);
    f.tensors.push_back(std::move(t));
  }
  f.data_start = cur.pos();
  f.descriptor_bytes = f.data_start - 16 - f.metadata_bytes;
  const int64_t data_len = f.file_size - f.data_start;
  std::vector<ByteSpan> spans;
  for (GgufTensor& t : f.tensors) {
    if (t.offset > data_len || t.layout.size.total() > data_len - t.offset)
      throw ConvertError(f.file, t.name, "offset " + std::to_string(t.offset) + " + " +
                                             std::to_string(t.layout.size.total()) +
                                             " bytes runs past the end of the data section (" +
                                             std::to_string(data_len) + " bytes): truncated or corrupt");
    t.layout.offset = f.data_start + t.offset;
    spans.push_back({t.offset, t.offset + t.layout.size.total(), &t.name});
  }
  check_no_overlap(f.file, std::move(spans));
  return f;
}

nlohmann::json gguf_lite_header_json(const GgufLiteFile& f) {
  return {{"version", f.version}, {"n_tensors", f.tensors.size()}, {"metadata_len", f.metadata_bytes}};
}


}  // namespace leapconv
