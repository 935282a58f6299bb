#include "formats/gguf_lite.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "quant/quantize.h"

namespace leapconv {

uint8_t gguf_dtype_code(Encoding e) {
  switch (e) {
    case Encoding::F32: return 0;
    case Encoding::F16: return 1;
    case Encoding::Q8Channel: return 2;
    case Encoding::Q4Group64: return 3;
    default: throw ConvertError(std::string("internal: no GGUF-lite dtype for ") + encoding_name(e));
  }
}

static bool encoding_from_code(uint8_t c, Encoding* e) {
  static const Encoding map[] = {Encoding::F32, Encoding::F16, Encoding::Q8Channel, Encoding::Q4Group64};
  if (c > 3) return false;
  *e = map[c];
  return true;
}

bool parse_scheme(const std::string& s, Encoding* out) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  if (l == "f32") *out = Encoding::F32;
  else if (l == "f16") *out = Encoding::F16;
  else if (l == "q8" || l == "q8_per_channel") *out = Encoding::Q8Channel;
  else if (l == "q4" || l == "q4_per_group_64") *out = Encoding::Q4Group64;
  else return false;
  return true;
}

const char* scheme_short_name(Encoding e) {
  switch (e) {
    case Encoding::F32: return "f32";
    case Encoding::F16: return "f16";
    case Encoding::Q8Channel: return "q8";
    case Encoding::Q4Group64: return "q4";
    case Encoding::Int8Group: return "int8";
  }
  return "?";
}

bool glob_match(const std::string& p, const std::string& s) {
  size_t pi = 0, si = 0, star = std::string::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) { ++pi; ++si; }
    else if (pi < p.size() && p[pi] == '*') { star = pi++; mark = si; }
    else if (star != std::string::npos) { pi = star + 1; si = ++mark; }
    else return false;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::vector<SchemeRule> parse_scheme_rules(const std::string& file, const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw ConvertError(file, "", "not valid JSON");
  if (j.is_object() && j.contains("rules")) j = j["rules"];
  std::vector<SchemeRule> rules;
  auto add = [&](const nlohmann::json& pat, const nlohmann::json& sch) {
    Encoding e;
    if (!pat.is_string() || !sch.is_string() || !parse_scheme(sch.get<std::string>(), &e))
      throw ConvertError(file, "", "each rule needs a string pattern and a scheme of f32, f16, q8, q4");
    rules.push_back({pat.get<std::string>(), e});
  };
  if (j.is_array()) {
    for (const auto& r : j) {
      if (!r.is_object() || !r.contains("pattern") || !r.contains("scheme"))
        throw ConvertError(file, "", "rules must be objects {\"pattern\": ..., \"scheme\": ...}");
      add(r["pattern"], r["scheme"]);
    }
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) add(nlohmann::json(it.key()), *it);
  } else {
    throw ConvertError(file, "", "expected a list of rules");
  }
  return rules;
}

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
                                    std::string("scheme.default=") + scheme_short_name(opt.default_scheme)};
  for (size_t i = 0; i < opt.rules.size(); ++i)
    lines.push_back("scheme.rule." + std::to_string(i) + "=" + one_line(opt.rules[i].pattern) + " -> " +
                    scheme_short_name(opt.rules[i].enc));
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

// Picks the encoding for one tensor: rules, then the default; then SPEC's fallbacks.
static Encoding choose(const TensorInfo& t, const GgufPlanOptions& opt, std::string* note) {
  if (!dtype_is_float(t.dtype)) {
    *note = std::string("carried as F32 (source dtype ") + dtype_name(t.dtype) + ")";
    return Encoding::F32;
  }
  const bool matrix = t.shape.size() == 2;
  Encoding want = t.shape.size() >= 2 ? opt.default_scheme : Encoding::F32;
  for (const SchemeRule& r : opt.rules)
    if (glob_match(r.pattern, t.name)) { want = r.enc; break; }
  const bool quant = want == Encoding::Q8Channel || want == Encoding::Q4Group64;
  std::string why;
  if (quant && !matrix) why = std::to_string(t.shape.size()) + "-D";
  else if (want == Encoding::Q4Group64 && t.shape[1] % kQ4Group)
    why = "in=" + std::to_string(t.shape[1]) + " is not a multiple of 64";
  if (why.empty()) return want;
  const Encoding fb = t.shape.size() <= 1 ? Encoding::F32 : Encoding::F16;
  *note = std::string(scheme_short_name(want)) + " -> " + scheme_short_name(fb) + " (" + why + ")";
  return fb;
}

ConversionPlan plan_gguf_lite(const Checkpoint& ck, const GgufPlanOptions& opt) {
  ConversionPlan plan;
  const std::string meta = build_metadata(ck, opt);
  std::vector<uint8_t> desc;
  int64_t data_off = 0;
  for (const std::string& name : ck.order) {
    const TensorRef& t = *ck.find(name);
    if (name.size() > 0xffff) throw ConvertError(ck.shard_name(t.shard), name, "name too long");
    if (t.info.shape.size() > 255) throw ConvertError(ck.shard_name(t.shard), name, "too many dims");
    PlanItem it;
    it.name = it.source_name = name;
    it.shard = t.shard;
    it.src_dtype = t.info.dtype;
    it.src_offset = t.info.begin;
    it.shape = t.info.shape;
    for (int64_t d : it.shape)
      if (d > 0xffffffffLL) throw ConvertError(ck.shard_name(t.shard), name, "dimension exceeds u32");
    it.enc = choose(t.info, opt, &it.note);
    finish_item_geometry(it);

    put_le<uint16_t>(desc, uint16_t(name.size()));
    desc.insert(desc.end(), name.begin(), name.end());
    put_u8(desc, uint8_t(it.shape.size()));
    for (int64_t d : it.shape) put_le<uint32_t>(desc, uint32_t(d));
    put_u8(desc, gguf_dtype_code(it.enc));
    put_le<uint64_t>(desc, uint64_t(data_off));
    it.values_offset = data_off;  // relative for now
    data_off += it.size.total();
    plan.items.push_back(std::move(it));
  }
  std::vector<uint8_t>& h = plan.header;
  put_le<uint32_t>(h, kGgufLiteMagic);
  put_le<uint32_t>(h, kGgufLiteVersion);
  put_le<uint32_t>(h, uint32_t(plan.items.size()));
  put_le<uint32_t>(h, uint32_t(meta.size()));
  h.insert(h.end(), meta.begin(), meta.end());
  h.insert(h.end(), desc.begin(), desc.end());
  const int64_t data_start = int64_t(h.size());
  for (PlanItem& it : plan.items) {
    const int64_t base = data_start + it.values_offset;
    it.scales_offset = base;                 // quantized tensors: scales first ...
    it.values_offset = base + it.size.scales;  // ... then values
  }
  plan.total_bytes = data_start + data_off;
  return plan;
}

// ---- reader ----

namespace {

class Cursor {
 public:
  Cursor(ByteSource& src, int64_t pos, int64_t limit) : src_(src), pos_(pos), limit_(limit) {}
  void read(void* dst, size_t n, const char* what) {
    if (int64_t(n) > limit_ - pos_)
      throw ConvertError(src_.name(), "", std::string("truncated: ") + what + " runs past the end of the file");
    src_.read_at(pos_, dst, n);
    pos_ += int64_t(n);
  }
  template <typename T>
  T get(const char* what) {
    uint8_t b[sizeof(T)];
    read(b, sizeof(T), what);
    return get_le<T>(b);
  }
  int64_t pos() const { return pos_; }

 private:
  ByteSource& src_;
  int64_t pos_, limit_;
};

}  // namespace

GgufLiteFile read_gguf_lite(ByteSource& src) {
  GgufLiteFile f;
  f.file = src.name();
  f.file_size = src.size();
  Cursor cur(src, 0, f.file_size);
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
    if (n_dims > 8) throw ConvertError(f.file, label, "n_dims " + std::to_string(n_dims) + " is implausible (> 8)");
    int64_t numel = 1;
    for (uint8_t d = 0; d < n_dims; ++d) {
      const int64_t v = cur.get<uint32_t>("dims");
      t.dims.push_back(v);
      if (v && numel > (int64_t(1) << 50) / v) throw ConvertError(f.file, label, "dims overflow");
      numel *= v;
    }
    const uint8_t code = cur.get<uint8_t>("dtype");
    if (!encoding_from_code(code, &t.enc)) throw ConvertError(f.file, label, "unknown dtype " + std::to_string(code));
    t.offset = int64_t(cur.get<uint64_t>("offset"));
    if (t.offset < 0) throw ConvertError(f.file, label, "offset out of range");
    if ((t.enc == Encoding::Q8Channel || t.enc == Encoding::Q4Group64) && n_dims != 2)
      throw ConvertError(f.file, label, std::string(encoding_name(t.enc)) + " needs a 2-D tensor");
    if (t.enc == Encoding::Q4Group64 && t.dims[1] % kQ4Group)
      throw ConvertError(f.file, label, "Q4_per_group_64 needs in % 64 == 0");
    t.layout.name = t.name;
    t.layout.shape = t.dims;
    t.layout.enc = t.enc;
    finish_item_geometry(t.layout);
    f.tensors.push_back(std::move(t));
  }
  f.data_start = cur.pos();
  f.descriptor_bytes = f.data_start - 16 - f.metadata_bytes;
  const int64_t data_len = f.file_size - f.data_start;
  std::vector<const GgufTensor*> by_off;
  for (GgufTensor& t : f.tensors) {
    if (t.offset > data_len || t.layout.size.total() > data_len - t.offset)
      throw ConvertError(f.file, t.name, "offset " + std::to_string(t.offset) + " + " +
                                             std::to_string(t.layout.size.total()) +
                                             " bytes runs past the end of the data section (" +
                                             std::to_string(data_len) + " bytes): truncated or corrupt");
    const int64_t base = f.data_start + t.offset;
    t.layout.scales_offset = base;
    t.layout.values_offset = base + t.layout.size.scales;
    by_off.push_back(&t);
  }
  std::sort(by_off.begin(), by_off.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  const GgufTensor* furthest = nullptr;  // see read_safetensors_header: same check
  auto end_of = [](const GgufTensor* t) { return t->offset + t->layout.size.total(); };
  for (const GgufTensor* t : by_off) {
    if (t->layout.size.total() == 0) continue;
    if (furthest && t->offset < end_of(furthest))
      throw ConvertError(f.file, t->name, "data overlaps tensor '" + furthest->name + "'");
    if (!furthest || end_of(t) > end_of(furthest)) furthest = t;
  }
  return f;
}

std::vector<float> read_gguf_tensor(ByteSource& src, const GgufTensor& t) { return read_tensor_f32(src, t.layout); }

}  // namespace leapconv
