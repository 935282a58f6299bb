#include "container/gguf_file.h"

#include "core/byte_cursor.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <new>
#include <stdexcept>
#include <unordered_set>

namespace leapconv {

// ---- ggml types ----

// A name as errors show it: control bytes (a NUL, a newline) escaped, so the error stays one
// readable line.
static std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) { char b[8]; std::snprintf(b, sizeof b, "\\x%02x", c); o += b; }
    else o += char(c);
  }
  return o;
}

static std::string unknown_type_text(uint32_t id) {
  std::string s = "unknown ggml type id " + std::to_string(int32_t(id));
  if (id == 4 || id == 5 || (id >= 31 && id <= 33) || (id >= 36 && id <= 38))
    s += " (a type ggml has removed)";
  else if (id >= kGgmlTypeCount)
    s += " (ggml defines 0.." + std::to_string(kGgmlTypeCount - 1) + ")";
  return s;
}

std::vector<int64_t> ggml_dims_from_shape(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.rbegin(), shape.rend());
}

int64_t GgufTensorInfo::nelements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// ---- value types ----

const char* gguf_type_name(GgufType t) {
  static const char* names[kGgufTypeCount] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                              "bool", "str", "arr", "u64", "i64", "f64"};
  return uint32_t(t) < kGgufTypeCount ? names[uint32_t(t)] : "?";
}

size_t gguf_type_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    case GgufType::STRING: case GgufType::ARRAY: return 0;
  }
  return 0;
}

static std::string type_text(const GgufValue& v) {
  return v.is_array() ? std::string("arr[") + gguf_type_name(v.elem_type()) + "]" : gguf_type_name(v.elem_type());
}

GgufValue GgufValue::string(std::string s) {
  GgufValue x(GgufType::STRING, false);
  x.count_ = 1;
  x.strings_.push_back(std::move(s));
  return x;
}

GgufValue GgufValue::array(const std::vector<bool>& v) {
  GgufValue x(GgufType::BOOL, true);
  x.count_ = v.size();
  for (bool b : v) x.put(b);
  return x;
}

GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue x(GgufType::STRING, true);
  x.count_ = v.size();
  x.strings_ = std::move(v);
  return x;
}

GgufValue GgufValue::raw_array(GgufType elem, const void* data, uint64_t n) {
  const size_t es = gguf_type_size(elem);
  if (es == 0) throw ConvertError(std::string("internal: raw_array of ") + gguf_type_name(elem));
  GgufValue x(elem, true);
  x.count_ = n;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  x.raw_.assign(p, p + size_t(n) * es);
  if (elem == GgufType::BOOL)
    for (uint8_t& b : x.raw_) b = b != 0;
  return x;
}

void GgufValue::check_elem(GgufType want, uint64_t i) const {
  if (want != elem_)
    throw ConvertError(std::string("value is ") + type_text(*this) + ", not " + gguf_type_name(want));
  if (i >= kept())
    throw ConvertError("element " + std::to_string(i) + " of " + std::to_string(count_) +
                       (complete() ? "" : " (" + std::to_string(kept()) + " kept)") + " is out of range");
}

const std::string& GgufValue::str(uint64_t i) const {
  check_elem(GgufType::STRING, i);
  return strings_[size_t(i)];
}

static std::string element_text(const GgufValue& v, uint64_t i) {
  char b[64];
  switch (v.elem_type()) {
    case GgufType::UINT8: return std::to_string(v.get<uint8_t>(i));
    case GgufType::INT8: return std::to_string(v.get<int8_t>(i));
    case GgufType::UINT16: return std::to_string(v.get<uint16_t>(i));
    case GgufType::INT16: return std::to_string(v.get<int16_t>(i));
    case GgufType::UINT32: return std::to_string(v.get<uint32_t>(i));
    case GgufType::INT32: return std::to_string(v.get<int32_t>(i));
    case GgufType::UINT64: return std::to_string(v.get<uint64_t>(i));
    case GgufType::INT64: return std::to_string(v.get<int64_t>(i));
    case GgufType::FLOAT32: std::snprintf(b, sizeof b, "%.9g", double(v.get<float>(i))); return b;
    case GgufType::FLOAT64: std::snprintf(b, sizeof b, "%.17g", v.get<double>(i)); return b;
    case GgufType::BOOL: return v.get<bool>(i) ? "true" : "false";
    case GgufType::STRING: {
      std::string s = v.str(i);
      if (s.size() > 60) s = s.substr(0, 57) + "...";
      std::string q = "\"";
      for (char c : s) q += (c == '\n') ? std::string("\\n") : (c == '"') ? std::string("\\\"") : std::string(1, c);
      return q + "\"";
    }
    case GgufType::ARRAY: break;
  }
  return "?";
}

std::string GgufValue::summary(size_t max_elements) const {
  if (!is_array_) return element_text(*this, 0);
  std::string s = "[";
  const uint64_t n = std::min<uint64_t>(kept(), max_elements);
  for (uint64_t i = 0; i < n; ++i) s += (i ? ", " : "") + element_text(*this, i);
  if (n < count_) s += std::string(n ? ", " : "") + "... (" + std::to_string(count_) + " " + gguf_type_name(elem_) + ")";
  return s + "]";
}

uint64_t GgufValue::serialized_size() const {
  uint64_t n = 4 + (is_array_ ? 12 : 0);
  if (elem_ == GgufType::STRING)
    for (const std::string& s : strings_) n += 8 + s.size();
  else
    n += raw_.size();
  return n;
}

void GgufValue::serialize(std::vector<uint8_t>& out) const {
  if (!complete())
    throw ConvertError("internal: an array read with only " + std::to_string(kept()) + " of its " +
                       std::to_string(count_) + " elements kept cannot be written");
  if (is_array_) {
    put_le<uint32_t>(out, uint32_t(GgufType::ARRAY));
    put_le<uint32_t>(out, uint32_t(elem_));
    put_le<uint64_t>(out, count_);
  } else {
    put_le<uint32_t>(out, uint32_t(elem_));
  }
  if (elem_ == GgufType::STRING) {
    for (const std::string& s : strings_) {
      put_le<uint64_t>(out, s.size());
      out.insert(out.end(), s.begin(), s.end());
    }
  } else {
    out.insert(out.end(), raw_.begin(), raw_.end());
  }
}

bool GgufValue::operator==(const GgufValue& o) const {
  return elem_ == o.elem_ && is_array_ == o.is_array_ && count_ == o.count_ && raw_ == o.raw_ &&
         strings_ == o.strings_;
}

// ---- metadata ----

static bool power_of_two(uint64_t a) { return a != 0 && (a & (a - 1)) == 0; }

void GgufMetadata::fail(const std::string& k, const std::string& what) const {
  throw ConvertError(label, "", "key '" + printable(k) + "': " + what);
}

void GgufMetadata::check(const std::string& key, const GgufValue& v) const {
  if (key.empty()) throw ConvertError(label, "", "a GGUF key must not be empty");
  if (key == kGgufKeyAlignment) {  // gguf.cpp's gguf_check_reserved_keys
    if (v.type() != GgufType::UINT32) fail(key, std::string("must be u32, not ") + type_text(v));
    if (!power_of_two(v.get<uint32_t>())) fail(key, std::to_string(v.get<uint32_t>()) + " is not a power of 2");
  }
}

void GgufMetadata::set(const std::string& key, GgufValue v) {
  check(key, v);
  remove(key);
  kv_.push_back({key, std::move(v)});
}

void GgufMetadata::assign(const std::string& key, GgufValue v) {
  check(key, v);
  for (GgufKV& e : kv_)
    if (e.key == key) {
      e.value = std::move(v);
      return;
    }
  kv_.push_back({key, std::move(v)});
}

bool GgufMetadata::remove(const std::string& key) {
  for (auto it = kv_.begin(); it != kv_.end(); ++it)
    if (it->key == key) { kv_.erase(it); return true; }
  return false;
}

const GgufValue* GgufMetadata::find(const std::string& key) const {
  for (const GgufKV& e : kv_)
    if (e.key == key) return &e.value;
  return nullptr;
}

const GgufValue& GgufMetadata::at(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(key, "missing");
  return *v;
}

const GgufValue& GgufMetadata::scalar_of(const std::string& k, GgufType want) const {
  const GgufValue& v = at(k);
  if (v.type() != want) fail(k, std::string("is ") + type_text(v) + ", expected " + gguf_type_name(want));
  return v;
}

const std::string& GgufMetadata::get_string(const std::string& k) const {
  return scalar_of(k, GgufType::STRING).str();
}

const GgufValue& GgufMetadata::array_of(const std::string& k) const {
  const GgufValue& v = at(k);
  if (!v.is_array()) fail(k, std::string("is ") + type_text(v) + ", expected an array");
  return v;
}

const GgufValue& GgufMetadata::array_of(const std::string& k, GgufType elem) const {
  const GgufValue& v = array_of(k);
  if (v.elem_type() != elem)
    fail(k, std::string("is ") + type_text(v) + ", expected arr[" + gguf_type_name(elem) + "]");
  return v;
}

static uint32_t alignment_of(const GgufMetadata& kv, const std::string& file) {
  const GgufValue* v = kv.find(kGgufKeyAlignment);
  if (!v) return kGgufDefaultAlignment;
  const std::string k = std::string("key '") + kGgufKeyAlignment + "': ";
  if (v->type() != GgufType::UINT32)
    throw ConvertError(file, "", k + "must be u32 but is " + type_text(*v));
  const uint32_t a = v->get<uint32_t>();
  if (!power_of_two(a)) throw ConvertError(file, "", k + "alignment " + std::to_string(a) + " is not a power of 2");
  return a;
}

uint32_t GgufMetadata::alignment() const { return alignment_of(*this, label); }

// ---- checks shared by the writer and the reader ----

static int64_t pad_to(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

static std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + ")";
}

// Checks one tensor's name, dims and type as gguf.cpp does (and dims > 0, n_dims >= 1, no NUL
// in the name); returns its byte size. `err` throws with the message.
template <typename Fail>
static int64_t check_tensor(const std::string& name, const std::vector<int64_t>& dims, uint32_t type, Fail err) {
  if (name.size() >= kGgmlMaxName)
    err("name of " + std::to_string(name.size()) + " bytes is too long (ggml allows at most " +
        std::to_string(kGgmlMaxName - 1) + ")");
  if (name.find('\0') != std::string::npos) err("name contains a NUL byte");
  if (dims.empty() || dims.size() > kGgmlMaxDims)
    err("n_dims " + std::to_string(dims.size()) + " is not in 1.." + std::to_string(kGgmlMaxDims));
  int64_t ne[kGgmlMaxDims] = {1, 1, 1, 1};
  for (size_t j = 0; j < dims.size(); ++j) {
    if (dims[j] <= 0) err("dimension " + std::to_string(j) + " is " + std::to_string(dims[j]) + " (must be positive)");
    ne[j] = dims[j];
  }
  // gguf.cpp's test: the element count must stay below INT64_MAX.
  if (INT64_MAX / ne[1] <= ne[0] || INT64_MAX / ne[2] <= ne[0] * ne[1] || INT64_MAX / ne[3] <= ne[0] * ne[1] * ne[2])
    err("shape " + dims_text(dims) + " has too many elements (>= 2^63)");
  const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
  const GgmlTypeInfo* t = ggml_type_info(type);
  if (!t) err(unknown_type_text(type));
  if (ne[0] % t->block_size != 0)
    err(std::string("type ") + t->name + ": row length " + std::to_string(ne[0]) +
        " is not a multiple of the block size " + std::to_string(t->block_size));
  if (n / t->block_size > INT64_MAX / t->type_size)
    err("shape " + dims_text(dims) + " of " + t->name + " is more than 2^63 bytes");
  return n / t->block_size * t->type_size;
}

// ---- writer ----

static void put_string(std::vector<uint8_t>& b, const std::string& s) {
  put_le<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

GgufLayout layout_gguf(const GgufMetadata& kv, std::vector<GgufTensorInfo> tensors, const std::string& file) {
  GgufLayout L;
  L.alignment = alignment_of(kv, file);
  const int64_t align = L.alignment;

  std::vector<uint8_t>& h = L.header;
  h.insert(h.end(), kGgufMagic, kGgufMagic + 4);
  put_le<uint32_t>(h, kGgufVersion);
  put_le<uint64_t>(h, tensors.size());
  put_le<uint64_t>(h, kv.size());

  for (const GgufKV& e : kv.entries()) {
    const GgufValue& v = e.value;
    auto bad = [&](const std::string& what) { throw ConvertError(file, "", "key '" + printable(e.key) + "': " + what); };
    if (e.key.empty()) bad("empty key");
    if (e.key.size() > kGgufMaxStringLength) bad("key longer than 1 GiB");
    if (v.elem_type() == GgufType::ARRAY || uint32_t(v.elem_type()) >= kGgufTypeCount) bad("invalid value type");
    if (v.is_array() && v.size() > kGgufMaxArrayElements)
      bad("array of " + std::to_string(v.size()) + " elements exceeds gguf.cpp's limit of 2^30");
    if (!v.complete()) bad("array holds only " + std::to_string(v.kept()) + " of its " + std::to_string(v.size()) +
                           " elements (read with max_array_elements): cannot be written");
    for (const std::string& s : v.strings())
      if (s.size() > kGgufMaxStringLength) bad("string longer than gguf.cpp's limit of 1 GiB");
    put_string(h, e.key);
    v.serialize(h);
  }
  L.bytes.kv = int64_t(h.size()) - L.bytes.fixed;

  std::unordered_set<std::string> names;
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    GgufTensorInfo& t = tensors[i];
    auto bad = [&](const std::string& what) {
      throw ConvertError(file, t.name.empty() ? "#" + std::to_string(i) : printable(t.name), what);
    };
    const int64_t nbytes = check_tensor(t.name, t.dims, t.type, bad);
    if (!names.insert(t.name).second) bad("duplicate tensor name");
    if (t.nbytes >= 0 && t.nbytes != nbytes)
      bad("byte size " + std::to_string(t.nbytes) + " does not match " + dims_text(t.dims) + " x " +
          ggml_type_info(t.type)->name + " = " + std::to_string(nbytes));
    t.nbytes = nbytes;
    t.offset = offset;
    if (nbytes > INT64_MAX - 2 * align - offset) bad("the data section would exceed 2^63 bytes");
    offset += pad_to(nbytes, align);

    put_string(h, t.name);
    put_le<uint32_t>(h, uint32_t(t.dims.size()));
    for (int64_t d : t.dims) put_le<int64_t>(h, d);
    put_le<uint32_t>(h, t.type);
    put_le<uint64_t>(h, uint64_t(t.offset));
  }
  L.bytes.tensor_info = int64_t(h.size()) - L.bytes.fixed - L.bytes.kv;
  // gguf.cpp pads the header to the alignment even when there are no tensors.
  L.data_start = pad_to(int64_t(h.size()), align);
  L.bytes.padding = L.data_start - int64_t(h.size());
  h.resize(size_t(L.data_start), 0);
  if (L.data_start > INT64_MAX - offset) throw ConvertError(file, "", "the file would exceed 2^63 bytes");
  for (GgufTensorInfo& t : tensors) {
    t.file_offset = L.data_start + t.offset;
    L.bytes.data_padding += pad_to(t.nbytes, align) - t.nbytes;
  }
  L.data_bytes = offset;
  L.file_size = L.data_start + offset;
  L.tensors = std::move(tensors);
  return L;
}

void write_gguf_header(ByteSink& out, const GgufLayout& L) { out.write_at(0, L.header.data(), L.header.size()); }

void write_gguf_padding(ByteSink& out, const GgufLayout& L) {
  static const uint8_t zeros[256] = {};
  for (const GgufTensorInfo& t : L.tensors) {
    int64_t at = t.file_offset + t.nbytes;
    int64_t n = pad_to(t.nbytes, L.alignment) - t.nbytes;
    while (n > 0) {
      const size_t k = size_t(std::min<int64_t>(n, int64_t(sizeof zeros)));
      out.write_at(at, zeros, k);
      at += int64_t(k);
      n -= int64_t(k);
    }
  }
}

// ---- reader ----

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  for (const GgufTensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// Reads the header through a small window (so a 128k-token vocabulary costs a few dozen
// read_at calls, not hundreds of thousands), never past the end of the file, and checks every
// count and length against the bytes left before anything is allocated for it.
class GgufReaderImpl {
 public:
  GgufReaderImpl(ByteSource& src, const GgufReadOptions& opt)
      : opt_(opt), file_(src.name()), size_(src.size()),
        cur_(src, 0, size_, [this](uint64_t n, const std::string& what) {
          fail("truncated: " + what + " (" + std::to_string(n) + " bytes at offset " + std::to_string(cur_.pos()) +
               ") runs past the end of the file (" + std::to_string(size_) + " bytes)");
        }) {}

  GgufFile run();

 private:
  [[noreturn]] void fail(const std::string& what) const {
    if (!key_.empty()) throw ConvertError(file_, "", "key '" + key_ + "': " + what);
    throw ConvertError(file_, tensor_, what);
  }
  int64_t remaining() const { return cur_.remaining(); }
  void need(uint64_t n, const std::string& what) const { cur_.need(n, what); }
  void read(void* dst, size_t n, const std::string& what) { cur_.read(dst, n, what); }
  void skip(uint64_t n, const std::string& what) { cur_.skip(n, what); }
  template <typename T>
  T get(const char* what) { return cur_.get<T>(what); }
  uint64_t get_length(const std::string& what) {
    const uint64_t n = get<uint64_t>("string length");
    if (n > kGgufMaxStringLength)
      fail(what + " length " + std::to_string(n) + " exceeds gguf.cpp's limit of 2^30 bytes");
    need(n, what + " of " + std::to_string(n) + " bytes");
    return n;
  }
  std::string get_string(const std::string& what) {
    const uint64_t n = get_length(what);
    std::string s(size_t(n), '\0');
    read(s.data(), size_t(n), what);
    return s;
  }
  GgufValue read_value(GgufType type);

  const GgufReadOptions& opt_;
  std::string file_;
  int64_t size_;
  ByteCursor cur_;
  std::string key_, tensor_;  // what errors name
};

GgufValue GgufReaderImpl::read_value(GgufType type) {
  const bool is_array = type == GgufType::ARRAY;
  GgufType elem = type;
  uint64_t n = 1;
  if (is_array) {
    const uint32_t e = get<uint32_t>("array element type");
    if (e == uint32_t(GgufType::ARRAY)) fail("nested arrays are not allowed (gguf.cpp rejects an array of arrays)");
    if (e >= kGgufTypeCount) fail("unknown array element type " + std::to_string(int32_t(e)));
    elem = GgufType(e);
    n = get<uint64_t>("array length");
    if (n > kGgufMaxArrayElements)
      fail("array of " + std::to_string(n) + " elements exceeds gguf.cpp's limit of 2^30");
  }
  const uint64_t es = elem == GgufType::STRING ? 8 : gguf_type_size(elem);
  if (n > uint64_t(remaining()) / es)  // before anything is allocated
    fail(std::string(is_array ? "array of " : "value of ") + std::to_string(n) + " x " + gguf_type_name(elem) +
         " needs at least " + std::to_string(n * es) + " bytes, only " + std::to_string(remaining()) + " remain");
  const uint64_t keep = is_array ? std::min(n, opt_.max_array_elements) : 1;
  // keep x es <= the file's size, but on wasm32 it may still not fit a size_t.
  if (keep * es > uint64_t(PTRDIFF_MAX) / 2)
    fail("array of " + std::to_string(n) + " x " + gguf_type_name(elem) +
         " is too large to hold in memory here; read it with max_array_elements");
  GgufValue v(elem, is_array);
  v.count_ = n;
  if (elem == GgufType::STRING) {
    v.strings_.reserve(size_t(std::min<uint64_t>(keep, 1 << 16)));  // grows with what is really read
    for (uint64_t i = 0; i < n; ++i) {
      const std::string what = is_array ? "string " + std::to_string(i) + " of the array" : std::string("string value");
      if (i < keep) v.strings_.push_back(get_string(what));
      else skip(get_length(what), what);
    }
  } else {
    v.raw_.resize(size_t(keep * es));
    read(v.raw_.data(), v.raw_.size(), is_array ? "array data" : "value");
    skip((n - keep) * es, "array data");
    if (elem == GgufType::BOOL)  // gguf.cpp reads a bool as int8 != 0
      for (uint8_t& b : v.raw_) b = b != 0;
  }
  return v;
}

GgufFile GgufReaderImpl::run() {
  GgufFile f;
  f.file = file_;
  f.file_size = size_;
  f.kv.label = file_;
  if (size_ < 4) fail("too small to be a GGUF file (" + std::to_string(size_) + " bytes)");
  char magic[4];
  read(magic, 4, "magic");
  if (std::memcmp(magic, kGgufMagic, 4) != 0) {
    std::string m;
    for (char c : magic) m += (c >= 32 && c < 127) ? c : '?';
    fail("not a GGUF file (magic '" + m + "', expected 'GGUF')");
  }
  f.version = get<uint32_t>("version");
  if (f.version != kGgufVersion) {
    const uint32_t v = f.version;
    if (v == 0) fail("bad GGUF version 0");
    if ((v & 0xFFFF) == 0)
      fail("GGUF version " + std::to_string(v) + " (0x" + [&] { char b[16]; std::snprintf(b, sizeof b, "%08x", v); return std::string(b); }() +
           ") looks byte-swapped: a big-endian GGUF file? Only little-endian version 3 is read");
    if (v == 1) fail("GGUF version 1 (the first draft: 32-bit counts and lengths; llama.cpp no longer reads it): only version 3 is read");
    if (v == 2)
      fail("GGUF version 2 (older writers: the layout of version 3, which only added big-endian files; llama.cpp still "
           "reads it): only version 3 is read; re-save the file with a current gguf-py or llama.cpp");
    fail("GGUF version " + std::to_string(v) + " is newer than 3, the version this reader knows");
  }
  const uint64_t n_tensors = get<uint64_t>("tensor count");
  const uint64_t n_kv = get<uint64_t>("key/value count");
  // A key/value pair takes at least 14 bytes (u64 length, a 1-byte key, u32 type, a u8 value);
  // a tensor info at least 32 (u64 length, empty name, u32 n_dims, one i64 dim, u32 type, u64 offset).
  const uint64_t rem = uint64_t(remaining());
  if (n_kv > rem / 14)
    fail("key/value count " + std::to_string(n_kv) + " is more than the file can hold (" + std::to_string(rem) +
         " bytes left)");
  if (n_tensors > rem / 32 || n_kv * 14 + n_tensors * 32 > rem)
    fail("tensor count " + std::to_string(n_tensors) + " is more than the file can hold (" + std::to_string(rem) +
         " bytes left after the counts)");

  std::unordered_set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const int64_t start = cur_.pos();
    key_ = "#" + std::to_string(i);
    std::string key = get_string("key");
    if (key.empty()) fail("empty key");
    key_ = printable(key);
    if (!keys.insert(key).second) fail("duplicate key");
    const uint32_t t = get<uint32_t>("value type");
    if (t >= kGgufTypeCount) fail("unknown value type " + std::to_string(int32_t(t)));
    GgufValue v = read_value(GgufType(t));
    f.kv.kv_.push_back({key, std::move(v)});
    f.kv_bytes.push_back(cur_.pos() - start);
  }
  key_.clear();
  f.bytes.kv = cur_.pos() - f.bytes.fixed;
  f.alignment = f.kv.alignment();
  const int64_t align = f.alignment;

  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    tensor_ = "#" + std::to_string(i);
    GgufTensorInfo t;
    const uint64_t len = get<uint64_t>("tensor name length");
    if (len >= kGgmlMaxName)
      fail("name of " + std::to_string(len) + " bytes is too long (ggml allows at most " +
           std::to_string(kGgmlMaxName - 1) + ")");
    t.name.resize(size_t(len));
    read(t.name.data(), size_t(len), "tensor name");
    if (!t.name.empty()) tensor_ = printable(t.name);
    if (!names.insert(t.name).second) fail("duplicate tensor name");
    const uint32_t n_dims = get<uint32_t>("n_dims");
    if (n_dims == 0 || n_dims > kGgmlMaxDims)
      fail("n_dims " + std::to_string(n_dims) + " is not in 1.." + std::to_string(kGgmlMaxDims));
    for (uint32_t j = 0; j < n_dims; ++j) t.dims.push_back(get<int64_t>("dimension"));
    t.type = get<uint32_t>("ggml type");
    t.nbytes = check_tensor(t.name, t.dims, t.type, [&](const std::string& what) { fail(what); });
    const uint64_t off = get<uint64_t>("tensor offset");
    t.offset = off > uint64_t(INT64_MAX) ? -1 : int64_t(off);  // checked below
    if (t.offset < 0) fail("offset " + std::to_string(off) + " lies outside any file");
    f.tensors.push_back(std::move(t));
  }
  tensor_.clear();
  const int64_t info_end = cur_.pos();
  f.bytes.tensor_info = info_end - f.bytes.fixed - f.bytes.kv;
  // gguf.cpp aligns the data section only when there are tensors.
  f.data_start = n_tensors > 0 ? pad_to(info_end, align) : info_end;
  f.bytes.padding = f.data_start - info_end;
  if (f.data_start > size_)
    fail("truncated: the padding before the data section (to offset " + std::to_string(f.data_start) +
         ") runs past the end of the file (" + std::to_string(size_) + " bytes)");

  // gguf.cpp accepts exactly one layout: tensors in header order, each at the running sum of the
  // previous sizes padded to the alignment.
  const int64_t data_len = size_ - f.data_start;
  int64_t expect = 0;
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    GgufTensorInfo& t = f.tensors[i];
    tensor_ = t.name.empty() ? "#" + std::to_string(i) : printable(t.name);
    const std::string prev = i ? "'" + printable(f.tensors[i - 1].name) + "'" : "";
    if (t.offset % align != 0)
      fail("offset " + std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(align));
    if (t.offset < expect)
      fail("data at offset " + std::to_string(t.offset) + " overlaps tensor " + prev + " (which ends at " +
           std::to_string(f.tensors[i - 1].offset + f.tensors[i - 1].nbytes) + ")");
    if (t.offset > expect)
      fail("offset " + std::to_string(t.offset) + ", expected " + std::to_string(expect) +
           (i ? " right after tensor " + prev : std::string(" for the first tensor")) +
           " (gguf.cpp requires the tensors in header order, each padded to the alignment, no gaps)");
    if (t.offset > data_len || t.nbytes > data_len - t.offset)
      fail("data [" + std::to_string(f.data_start + t.offset) + ", " + std::to_string(f.data_start + t.offset) + " + " +
           std::to_string(t.nbytes) + ") runs past the end of the file (" + std::to_string(size_) +
           " bytes): truncated?");
    t.file_offset = f.data_start + t.offset;
    expect = t.offset + pad_to(t.nbytes, align);
    f.bytes.data_padding += pad_to(t.nbytes, align) - t.nbytes;
  }
  f.data_bytes = expect;
  if (opt_.require_trailing_padding && expect > data_len)
    fail("truncated: the padding after the last tensor (to offset " + std::to_string(f.data_start + expect) +
         ") runs past the end of the file (" + std::to_string(size_) + " bytes)");
  tensor_.clear();
  return f;
}

GgufFile read_gguf_file(ByteSource& src, const GgufReadOptions& opt) {
  GgufReaderImpl r(src, opt);
  try {
    return r.run();
  } catch (const std::bad_alloc&) {  // a header that holds more than memory does (wasm32: 2 GB)
    throw ConvertError(src.name(), "", "out of memory reading the GGUF header; try max_array_elements");
  } catch (const std::length_error&) {
    throw ConvertError(src.name(), "", "out of memory reading the GGUF header; try max_array_elements");
  }
}

}  // namespace leapconv
