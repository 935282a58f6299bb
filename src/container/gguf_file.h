// The GGUF version 3 container (llama.cpp's format), as ggml's gguf.cpp writes and reads it:
//
//   "GGUF"  u32 version 3  u64 n_tensors  u64 n_kv
//   n_kv x      { string key, u32 value type, value }            (array: u32 elem type, u64 n, n values)
//   n_tensors x { string name, u32 n_dims, n_dims x i64 ne (ggml order), u32 ggml type, u64 offset }
//   zero padding to the alignment   <- data_start
//   every tensor's bytes, each followed by zero padding to the alignment (the last one too)
//
// Strings are u64 length + bytes (no NUL). Offsets are relative to data_start. The alignment is
// general.alignment (UINT32, a power of two) or 32 when the key is absent.
//
// Only the container lives here: typed metadata, the header writer (which knows every tensor's
// file offset before any data is written, so tensors can be streamed with positioned writes) and
// a validating reader that touches nothing but the header through ByteSource::read_at.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "container/ggml_types.h"
#include "core/byte_io.h"
#include "core/error.h"

namespace leapconv {

constexpr char kGgufMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kGgufVersion = 3;
constexpr uint32_t kGgufDefaultAlignment = 32;
constexpr const char* kGgufKeyAlignment = "general.alignment";
// gguf.cpp's limits.
constexpr uint64_t kGgufMaxStringLength = uint64_t(1) << 30;   // GGUF_MAX_STRING_LENGTH
constexpr uint64_t kGgufMaxArrayElements = uint64_t(1) << 30;  // GGUF_MAX_ARRAY_ELEMENTS
constexpr size_t kGgmlMaxName = 64;  // GGML_MAX_NAME: a tensor name has at most 63 bytes
constexpr uint32_t kGgmlMaxDims = 4;  // GGML_MAX_DIMS

// ---- ggml tensor types ----

// Bytes of a row of ne0 values (ne0 must be a multiple of the block size).
inline int64_t ggml_row_bytes(const GgmlTypeInfo& t, int64_t ne0) { return ne0 / t.block_size * t.type_size; }
// ggml order from a Hugging Face / PyTorch shape: reversed (ne[0] is the innermost dimension).
std::vector<int64_t> ggml_dims_from_shape(const std::vector<int64_t>& shape);

// ---- typed metadata ----

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
constexpr uint32_t kGgufTypeCount = 13;
const char* gguf_type_name(GgufType t);  // gguf.cpp's names: "u8", "i8", ..., "str", "arr", "f64"
// Bytes of one element on disk; 0 for STRING and ARRAY (variable / not an element type).
size_t gguf_type_size(GgufType t);

template <typename T> struct GgufTypeOf;
template <> struct GgufTypeOf<uint8_t> { static constexpr GgufType value = GgufType::UINT8; };
template <> struct GgufTypeOf<int8_t> { static constexpr GgufType value = GgufType::INT8; };
template <> struct GgufTypeOf<uint16_t> { static constexpr GgufType value = GgufType::UINT16; };
template <> struct GgufTypeOf<int16_t> { static constexpr GgufType value = GgufType::INT16; };
template <> struct GgufTypeOf<uint32_t> { static constexpr GgufType value = GgufType::UINT32; };
template <> struct GgufTypeOf<int32_t> { static constexpr GgufType value = GgufType::INT32; };
template <> struct GgufTypeOf<float> { static constexpr GgufType value = GgufType::FLOAT32; };
template <> struct GgufTypeOf<bool> { static constexpr GgufType value = GgufType::BOOL; };
template <> struct GgufTypeOf<uint64_t> { static constexpr GgufType value = GgufType::UINT64; };
template <> struct GgufTypeOf<int64_t> { static constexpr GgufType value = GgufType::INT64; };
template <> struct GgufTypeOf<double> { static constexpr GgufType value = GgufType::FLOAT64; };

// One value: a scalar of any type, or an array of any non-array type (gguf.cpp has no nested
// arrays: it writes none and rejects an array whose element type is ARRAY).
class GgufValue {
 public:
  GgufValue() : raw_{0} {}  // u8 0

  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  static GgufValue scalar(T v) {
    GgufValue x(GgufTypeOf<T>::value, false);
    x.count_ = 1;
    x.put(v);
    return x;
  }
  static GgufValue string(std::string s);
  template <typename T>
  static GgufValue array(const std::vector<T>& v) {
    GgufValue x(GgufTypeOf<T>::value, true);
    x.count_ = v.size();
    x.raw_.reserve(v.size() * sizeof(T));
    for (const T& e : v) x.put(T(e));
    return x;
  }
  static GgufValue array(const std::vector<bool>& v);
  static GgufValue string_array(std::vector<std::string> v);
  // An array of fixed-width elements from little-endian bytes (n x gguf_type_size(elem)).
  static GgufValue raw_array(GgufType elem, const void* data, uint64_t n);

  GgufType type() const { return is_array_ ? GgufType::ARRAY : elem_; }  // as on disk
  GgufType elem_type() const { return elem_; }  // the scalar's type, or the array's element type
  bool is_array() const { return is_array_; }
  uint64_t size() const { return count_; }  // elements in the file (1 for a scalar)
  // Elements held: fewer than size() when the reader was asked to keep only the first N.
  uint64_t kept() const { return elem_ == GgufType::STRING ? strings_.size() : raw_.size() / gguf_type_size(elem_); }
  bool complete() const { return kept() == count_; }

  // Element i (0 for a scalar); T must be exactly the stored type, or this throws ConvertError.
  template <typename T>
  T get(uint64_t i = 0) const {
    static_assert(std::is_arithmetic_v<T>, "use str() for strings");
    check_elem(GgufTypeOf<T>::value, i);
    if constexpr (std::is_same_v<T, bool>) return raw_[size_t(i)] != 0;  // gguf.cpp: != 0
    else return get_le<T>(raw_.data() + size_t(i) * sizeof(T));
  }
  const std::string& str(uint64_t i = 0) const;
  template <typename T>
  std::vector<T> elements() const {  // the kept elements
    std::vector<T> v;
    const uint64_t n = kept();
    for (uint64_t i = 0; i < n; ++i) v.push_back(get<T>(i));
    return v;
  }
  const std::vector<std::string>& strings() const { return strings_; }
  const std::vector<uint8_t>& raw() const { return raw_; }  // fixed-width elements, little-endian
  // A short human-readable rendering (arrays: the first few elements and the count).
  std::string summary(size_t max_elements = 8) const;

  // Appends the value as stored after its key: type (and element type + count), then the data.
  void serialize(std::vector<uint8_t>& out) const;
  // Bytes serialize() appends.
  uint64_t serialized_size() const;

  bool operator==(const GgufValue& o) const;
  bool operator!=(const GgufValue& o) const { return !(*this == o); }

 private:
  friend class GgufReaderImpl;
  GgufValue(GgufType elem, bool is_array) : elem_(elem), is_array_(is_array) {}
  template <typename T>
  void put(T v) {
    if constexpr (std::is_same_v<T, bool>) raw_.push_back(v ? 1 : 0);
    else { const size_t at = raw_.size(); raw_.resize(at + sizeof(T)); std::memcpy(raw_.data() + at, &v, sizeof(T)); }
  }
  void check_elem(GgufType want, uint64_t i) const;

  GgufType elem_ = GgufType::UINT8;
  bool is_array_ = false;
  uint64_t count_ = 1;
  std::vector<uint8_t> raw_;
  std::vector<std::string> strings_;
};

struct GgufKV {
  std::string key;
  GgufValue value;
};

// The key/value list, in insertion order. set_* replace an existing key the way gguf.cpp's
// gguf_set_val_* do: the old entry is removed and the new one appended at the end.
class GgufMetadata {
 public:
  std::string label;  // the file, for error messages

  void set(const std::string& key, GgufValue v);  // key non-empty; general.alignment: u32 power of 2
  void set_u8(const std::string& k, uint8_t v) { set(k, GgufValue::scalar(v)); }
  void set_i8(const std::string& k, int8_t v) { set(k, GgufValue::scalar(v)); }
  void set_u16(const std::string& k, uint16_t v) { set(k, GgufValue::scalar(v)); }
  void set_i16(const std::string& k, int16_t v) { set(k, GgufValue::scalar(v)); }
  void set_u32(const std::string& k, uint32_t v) { set(k, GgufValue::scalar(v)); }
  void set_i32(const std::string& k, int32_t v) { set(k, GgufValue::scalar(v)); }
  void set_f32(const std::string& k, float v) { set(k, GgufValue::scalar(v)); }
  void set_bool(const std::string& k, bool v) { set(k, GgufValue::scalar(v)); }
  void set_u64(const std::string& k, uint64_t v) { set(k, GgufValue::scalar(v)); }
  void set_i64(const std::string& k, int64_t v) { set(k, GgufValue::scalar(v)); }
  void set_f64(const std::string& k, double v) { set(k, GgufValue::scalar(v)); }
  void set_string(const std::string& k, std::string v) { set(k, GgufValue::string(std::move(v))); }
  void set_string_array(const std::string& k, std::vector<std::string> v) { set(k, GgufValue::string_array(std::move(v))); }
  void set_u8_array(const std::string& k, const std::vector<uint8_t>& v) { set(k, GgufValue::array(v)); }
  void set_i8_array(const std::string& k, const std::vector<int8_t>& v) { set(k, GgufValue::array(v)); }
  void set_u16_array(const std::string& k, const std::vector<uint16_t>& v) { set(k, GgufValue::array(v)); }
  void set_i16_array(const std::string& k, const std::vector<int16_t>& v) { set(k, GgufValue::array(v)); }
  void set_u32_array(const std::string& k, const std::vector<uint32_t>& v) { set(k, GgufValue::array(v)); }
  void set_i32_array(const std::string& k, const std::vector<int32_t>& v) { set(k, GgufValue::array(v)); }
  void set_f32_array(const std::string& k, const std::vector<float>& v) { set(k, GgufValue::array(v)); }
  void set_bool_array(const std::string& k, const std::vector<bool>& v) { set(k, GgufValue::array(v)); }
  void set_u64_array(const std::string& k, const std::vector<uint64_t>& v) { set(k, GgufValue::array(v)); }
  void set_i64_array(const std::string& k, const std::vector<int64_t>& v) { set(k, GgufValue::array(v)); }
  void set_f64_array(const std::string& k, const std::vector<double>& v) { set(k, GgufValue::array(v)); }
  // gguf-py's GGUFWriter.add_key_value: an existing key keeps its place and takes the new value
  // (and type); a new one is appended. llama.cpp's converter rewrites keys this way.
  void assign(const std::string& key, GgufValue v);
  // general.alignment as UINT32; a power of two.
  void set_alignment(uint32_t a) { set_u32(kGgufKeyAlignment, a); }
  bool remove(const std::string& key);

  const std::vector<GgufKV>& entries() const { return kv_; }
  size_t size() const { return kv_.size(); }
  bool empty() const { return kv_.empty(); }
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // The value, or ConvertError naming the file and the key when it is absent.
  const GgufValue& at(const std::string& key) const;

  // Typed getters: ConvertError naming the key when it is absent or of another type.
  uint8_t get_u8(const std::string& k) const { return scalar<uint8_t>(k); }
  int8_t get_i8(const std::string& k) const { return scalar<int8_t>(k); }
  uint16_t get_u16(const std::string& k) const { return scalar<uint16_t>(k); }
  int16_t get_i16(const std::string& k) const { return scalar<int16_t>(k); }
  uint32_t get_u32(const std::string& k) const { return scalar<uint32_t>(k); }
  int32_t get_i32(const std::string& k) const { return scalar<int32_t>(k); }
  float get_f32(const std::string& k) const { return scalar<float>(k); }
  bool get_bool(const std::string& k) const { return scalar<bool>(k); }
  uint64_t get_u64(const std::string& k) const { return scalar<uint64_t>(k); }
  int64_t get_i64(const std::string& k) const { return scalar<int64_t>(k); }
  double get_f64(const std::string& k) const { return scalar<double>(k); }
  const std::string& get_string(const std::string& k) const;
  // Arrays: the element count in the file, its element type, and the (kept) elements.
  uint64_t get_array_size(const std::string& k) const { return array_of(k).size(); }
  GgufType get_array_type(const std::string& k) const { return array_of(k).elem_type(); }
  template <typename T>
  std::vector<T> get_array(const std::string& k) const {
    const GgufValue& v = array_of(k, GgufTypeOf<T>::value);
    return v.elements<T>();
  }
  const std::vector<std::string>& get_string_array(const std::string& k) const {
    return array_of(k, GgufType::STRING).strings();
  }
  std::vector<float> get_f32_array(const std::string& k) const { return get_array<float>(k); }
  std::vector<int32_t> get_i32_array(const std::string& k) const { return get_array<int32_t>(k); }
  std::vector<uint32_t> get_u32_array(const std::string& k) const { return get_array<uint32_t>(k); }

  // general.alignment (validated: UINT32, a power of two), or 32 when absent.
  uint32_t alignment() const;

 private:
  friend class GgufReaderImpl;
  template <typename T>
  T scalar(const std::string& k) const {
    const GgufValue& v = scalar_of(k, GgufTypeOf<T>::value);
    return v.get<T>();
  }
  const GgufValue& scalar_of(const std::string& k, GgufType want) const;
  const GgufValue& array_of(const std::string& k) const;
  const GgufValue& array_of(const std::string& k, GgufType elem) const;
  [[noreturn]] void fail(const std::string& k, const std::string& what) const;
  void check(const std::string& key, const GgufValue& v) const;  // set's and assign's checks

  std::vector<GgufKV> kv_;
};

// ---- tensors and layout ----

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] = ne[0], the row length (HF shape reversed)
  uint32_t type = 0;          // ggml type id
  int64_t nbytes = -1;        // writer input: -1 = from the type table (a given value is checked)
  int64_t offset = 0;         // relative to the data section (as stored)
  int64_t file_offset = 0;    // absolute
  int64_t nelements() const;
};

// Where the header's bytes go (the breakdown).
struct GgufHeaderBytes {
  int64_t fixed = 24;          // magic, version, n_tensors, n_kv
  int64_t kv = 0;              // all key/value pairs
  int64_t tensor_info = 0;     // all tensor infos
  int64_t padding = 0;         // zero bytes from the end of the tensor infos to data_start
  int64_t data_padding = 0;    // zero bytes after the tensors (each padded to the alignment)
};

struct GgufLayout {
  std::vector<uint8_t> header;         // exactly data_start bytes: the header and its padding
  uint32_t alignment = kGgufDefaultAlignment;
  std::vector<GgufTensorInfo> tensors; // nbytes, offset and file_offset filled in
  int64_t data_start = 0;
  int64_t data_bytes = 0;              // the data section: every tensor padded to the alignment
  int64_t file_size = 0;               // data_start + data_bytes
  GgufHeaderBytes bytes;
};

// Lays out a GGUF v3 file exactly as gguf.cpp's gguf_write_to_file would: offsets are the
// running sum of each tensor's size padded to the alignment, in the order given. The tensors
// are checked like the reader checks them (so the file is one llama.cpp accepts); errors name
// `file` and the tensor. The header is written as given: gguf.cpp's writer stores
// n_dims = ggml_n_dims (trailing 1s dropped) while gguf-py stores len(shape); pass the dims you
// want on disk.
GgufLayout layout_gguf(const GgufMetadata& kv, std::vector<GgufTensorInfo> tensors, const std::string& file = "");
// Writes the header (at 0) and the zero padding after every tensor. Padding needs no writing
// when the sink starts zero-filled, but writing it costs < alignment bytes a tensor.
void write_gguf_header(ByteSink& out, const GgufLayout& layout);
void write_gguf_padding(ByteSink& out, const GgufLayout& layout);

// ---- reader ----

struct GgufReadOptions {
  // Keep at most this many elements of each array (the rest is still validated, then skipped):
  // bounds memory for a 128k-token vocabulary when only a summary is wanted.
  uint64_t max_array_elements = UINT64_MAX;
  // Require the padding after the last tensor (gguf.cpp's writer and gguf-py always write it,
  // and gguf.cpp reads it when it loads the data blob). false: only each tensor's bytes must lie
  // inside the file (llama.cpp's mmap loader check).
  bool require_trailing_padding = true;
};

struct GgufFile {
  std::string file;
  int64_t file_size = 0;
  uint32_t version = 0;
  uint32_t alignment = kGgufDefaultAlignment;
  GgufMetadata kv;
  std::vector<int64_t> kv_bytes;  // bytes of each key/value pair in the file, in kv order
  std::vector<GgufTensorInfo> tensors;
  int64_t data_start = 0;
  int64_t data_bytes = 0;  // every tensor padded to the alignment
  GgufHeaderBytes bytes;
  const GgufTensorInfo* find_tensor(const std::string& name) const;
};

// Reads and validates the header (never the tensor data) through ByteSource::read_at only;
// throws ConvertError naming the file and the key or tensor. Rejects everything gguf.cpp's
// gguf_init_from_file rejects: bad magic; version 0, 1, > 3 or byte-swapped; an empty or
// duplicate key; an unknown value type or array element type (nested arrays included); strings
// over 2^30 bytes or arrays over 2^30 elements; general.alignment not a u32 power of two; tensor
// names of 64+ bytes or duplicated; n_dims > 4; negative dims; element counts >= 2^63; unknown
// or removed ggml types; rows not a multiple of the block size; offsets other than the running
// sum of padded sizes (misaligned, overlapping, gaps, out of order); a data section start past
// the end. Stricter than gguf.cpp, on purpose (gguf.cpp accepts these):
//   - version 2 (same layout; llama.cpp still reads it): only version 3;
//   - n_dims 0 and zero dims (ggml never writes them): dims must be positive, n_dims 1..4;
//   - a NUL byte in a tensor name (ggml would cut the name there);
//   - a tensor whose bytes lie past the end of the file (gguf.cpp with no_alloc does not look;
//     llama.cpp's model loader refuses it later), and, unless require_trailing_padding is
//     false, a file missing the padding after the last tensor.
// Counts and lengths are checked against the bytes left in the file before anything is
// allocated for them.
GgufFile read_gguf_file(ByteSource& src, const GgufReadOptions& opt = {});

}  // namespace leapconv
