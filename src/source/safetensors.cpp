#include "source/safetensors.h"

#include <cstring>

#include "core/byte_spans.h"

#include <algorithm>
#include <set>
#include <nlohmann/json.hpp>


namespace leapconv {

using json = nlohmann::json;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// An offset as int64, or an error: values past the file (including those >= 2^63, which
// would wrap negative) are rejected here rather than trusted.
static int64_t get_offset(const json& v, const std::string& file, const std::string& name,
                          int64_t limit) {
  if (!v.is_number_integer()) throw ConvertError(file, name, "data_offsets must be integers");
  if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(limit) : (v.get<int64_t>() < 0 || v.get<int64_t>() > limit))
    throw ConvertError(file, name, "data_offsets " + v.dump() + " lie outside the file (" +
                                       std::to_string(limit) + " data bytes): truncated shard?")
        .advise(file + " is shorter than its own header says: the download was cut off. Download it again.");
  return v.get<int64_t>();
}

// The dtypes the source-dtype table reads, for a message: "F64, F32, ..., BOOL".
static std::string source_dtype_names() {
  std::string s;
  for (const SourceDType& t : source_dtypes()) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

static TensorInfo parse_entry(const std::string& file, const std::string& name, const json& e,
                              int64_t data_start, int64_t file_size) {
  if (!e.is_object()) throw ConvertError(file, name, "header entry is not an object");
  TensorInfo t;
  t.name = name;
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) throw ConvertError(file, name, "missing dtype");
  const SourceDType* st = find_source_dtype(dt->get<std::string>());
  if (!st) {
    throw ConvertError(file, name, "unsupported dtype '" + dt->get<std::string>() + "'")
        .advise("This checkpoint stores weights as " + one_line_text(dt->get<std::string>(), 32) +
                ", which the converter does not read: it reads " + source_dtype_names() + ".");
  }
  t.dtype = st->id;
  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) throw ConvertError(file, name, "missing shape");
  // The element count, multiplied out left to right with overflow checked at every step (as
  // the safetensors library does): a zero-size tensor of shape [2^40, 2^40, 0] is refused, not
  // a product that wraps in the planner later.
  int64_t numel = 1;
  for (const json& d : *sh) {
    if (!d.is_number_integer() || (d.is_number_unsigned() ? d.get<uint64_t>() > uint64_t(INT64_MAX) : d.get<int64_t>() < 0))
      throw ConvertError(file, name, "shape entries must be non-negative integers");
    const int64_t v = d.get<int64_t>();
    t.shape.push_back(v);
    if (__builtin_mul_overflow(numel, v, &numel))
      throw ConvertError(file, name, "the product of its shape's dimensions overflows (at dimension " +
                                         std::to_string(t.shape.size()) + ", " + d.dump() + ")");
  }
  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2)
    throw ConvertError(file, name, "data_offsets must be [begin, end]");
  const int64_t limit = file_size - data_start;
  const int64_t b = get_offset((*off)[0], file, name, limit), en = get_offset((*off)[1], file, name, limit);
  if (b > en) throw ConvertError(file, name, "data_offsets begin > end");
  if (en > file_size - data_start)
    throw ConvertError(file, name,
                       "data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                           "] run past the end of the file (" + std::to_string(file_size) +
                           " bytes): truncated shard?");
  if (dtype_bytes(t.dtype, numel) != en - b)
    throw ConvertError(file, name,
                       "byte length " + std::to_string(en - b) + " does not match shape " +
                           shape_string(t.shape) + " x " + dtype_name(t.dtype));
  t.begin = data_start + b;
  t.end = data_start + en;
  return t;
}

SafetensorsHeader read_safetensors_header(ByteSource& src) {
  SafetensorsHeader h;
  h.file = src.name();
  h.file_size = src.size();
  if (h.file_size < 8)
    throw ConvertError(h.file, "", "too small to be a safetensors file (" +
                                       std::to_string(h.file_size) + " bytes)");
  uint8_t lenbuf[8];
  src.read_at(0, lenbuf, 8);
  // A clone without git-lfs holds ~130-byte text pointers where the weights should be.
  static const char kLfs[] = "version https://git-lfs";
  if (h.file_size < 1024 && h.file_size >= int64_t(sizeof kLfs - 1)) {
    char head[sizeof kLfs - 1];
    src.read_at(0, head, sizeof head);
    if (std::memcmp(head, kLfs, sizeof head) == 0)
      throw ConvertError(h.file, "", "is a Git LFS pointer (" + std::to_string(h.file_size) +
                                         " bytes), not the weights: fetch them with `git lfs pull`");
  }
  const uint64_t n = get_le<uint64_t>(lenbuf);
  if (n > uint64_t(kMaxSafetensorsHeader))
    throw ConvertError(h.file, "", "header length " + std::to_string(n) +
                                       " exceeds the 100 MB limit: not a safetensors file?");
  if (int64_t(n) > h.file_size - 8)
    throw ConvertError(h.file, "", "header length " + std::to_string(n) +
                                       " runs past the end of the file (" +
                                       std::to_string(h.file_size) + " bytes): truncated?");
  std::string text(size_t(n), '\0');
  src.read_at(8, text.data(), text.size());
  h.data_start = 8 + int64_t(n);

  // Duplicate keys are refused, as the safetensors library refuses them (a JSON parser would
  // keep the last, so two readers could see different tensors).
  std::vector<std::set<std::string>> keys;  // one set per object being parsed
  std::string entry, duplicate, dup_entry;  // the top-level key being parsed; the first duplicate
  bool has_duplicate = false;
  const json::parser_callback_t on_event = [&](int, json::parse_event_t ev, json& v) {
    if (ev == json::parse_event_t::object_start) keys.emplace_back();
    else if (ev == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    else if (ev == json::parse_event_t::key && !keys.empty()) {
      const std::string k = v.get<std::string>();
      if (keys.size() == 1) entry = k;
      if (!keys.back().insert(k).second && !has_duplicate) {
        has_duplicate = true;
        duplicate = k;
        dup_entry = keys.size() == 1 ? "" : entry;
      }
    }
    return true;
  };
  json j = json::parse(text, on_event, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ConvertError(h.file, "", "header is not valid JSON");
  if (has_duplicate)
    throw dup_entry.empty()
        ? ConvertError(h.file, duplicate, "appears twice in the header (duplicate JSON key)")
        : ConvertError(h.file, dup_entry, "its entry has the key '" + duplicate + "' twice (duplicate JSON key)");
  if (!j.is_object()) throw ConvertError(h.file, "", "header JSON is not an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw ConvertError(h.file, "", "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (m->is_string()) h.metadata[m.key()] = m->get<std::string>();
      continue;
    }
    h.tensors.push_back(parse_entry(h.file, it.key(), *it, h.data_start, h.file_size));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::vector<ByteSpan> spans;
  for (const TensorInfo& t : h.tensors) spans.push_back({t.begin, t.end, &t.name});
  check_no_overlap(h.file, std::move(spans));
  return h;
}

}  // namespace leapconv
