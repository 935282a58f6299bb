// The test suite's own GGUF v3 code, written from gguf.h's format description (not from
// src/formats/gguf/): a raw byte builder for hand-made files, a tiny reader, and the hostile
// files both the unit tests and the Node test (through gguf_sample) run our reader and
// llama.cpp's gguf.cpp on. Standalone: no GoogleTest, no src/ headers.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace tg3 {

// ---- raw builder ----
struct Raw {
  std::vector<uint8_t> b;
  template <typename T>
  Raw& le(T v) {
    uint8_t t[sizeof(T)];
    std::memcpy(t, &v, sizeof(T));
    b.insert(b.end(), t, t + sizeof(T));
    return *this;
  }
  Raw& u8(uint8_t v) { return le(v); }
  Raw& u32(uint32_t v) { return le(v); }
  Raw& u64(uint64_t v) { return le(v); }
  Raw& i64(int64_t v) { return le(v); }
  Raw& bytes(const std::string& s) { b.insert(b.end(), s.begin(), s.end()); return *this; }
  Raw& str(const std::string& s) { return u64(s.size()).bytes(s); }
  Raw& zeros(size_t n) { b.resize(b.size() + n, 0); return *this; }
  Raw& pad(size_t a) { while (b.size() % a) b.push_back(0); return *this; }
  Raw& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return bytes("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  Raw& kv_u32(const std::string& k, uint32_t v) { return str(k).u32(4).u32(v); }
  Raw& kv_str(const std::string& k, const std::string& v) { return str(k).u32(8).str(v); }
  Raw& kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
    str(k).u32(9).u32(5).u64(v.size());
    for (int32_t x : v) le(x);
    return *this;
  }
  Raw& tensor(const std::string& name, const std::vector<int64_t>& ne, uint32_t type, uint64_t offset) {
    str(name).u32(uint32_t(ne.size()));
    for (int64_t d : ne) i64(d);
    return u32(type).u64(offset);
  }
  size_t size() const { return b.size(); }
};

// ---- tiny reader ----
struct KV {
  std::string key;
  uint32_t type = 0, elem = 0;  // elem: the array's element type, or == type for a scalar
  uint64_t n = 1;
  std::vector<std::string> items;  // each element's bytes (a string's bytes without its length)
  size_t pos = 0;                  // where the pair starts in the file
};
struct Tensor {
  std::string name;
  std::vector<int64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;
};
struct File {
  uint32_t version = 0;
  uint64_t n_tensors = 0, n_kv = 0;
  std::vector<KV> kv;
  std::vector<Tensor> tensors;
  uint32_t alignment = 32;
  size_t info_end = 0, data_start = 0;
  const KV* find(const std::string& k) const {
    for (const KV& e : kv) if (e.key == k) return &e;
    return nullptr;
  }
};

inline size_t elem_size(uint32_t t) {
  static const size_t s[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  if (t >= 13 || t == 8 || t == 9) throw std::runtime_error("test reader: not a fixed-size type");
  return s[t];
}

inline File parse(const std::vector<uint8_t>& b) {
  size_t p = 0;
  auto take = [&](size_t n) {
    if (n > b.size() - p) throw std::runtime_error("test reader: past the end at " + std::to_string(p));
    std::string s(reinterpret_cast<const char*>(b.data()) + p, n);
    p += n;
    return s;
  };
  auto num = [&](auto v) { const std::string s = take(sizeof v); std::memcpy(&v, s.data(), sizeof v); return v; };
  auto str = [&] { return take(size_t(num(uint64_t(0)))); };
  File f;
  if (take(4) != "GGUF") throw std::runtime_error("test reader: magic");
  f.version = num(uint32_t(0));
  f.n_tensors = num(uint64_t(0));
  f.n_kv = num(uint64_t(0));
  for (uint64_t i = 0; i < f.n_kv; ++i) {
    KV e;
    e.pos = p;
    e.key = str();
    e.type = e.elem = num(uint32_t(0));
    if (e.type == 9) { e.elem = num(uint32_t(0)); e.n = num(uint64_t(0)); }
    if (e.n > b.size()) throw std::runtime_error("test reader: array too long");
    for (uint64_t j = 0; j < e.n; ++j) e.items.push_back(e.elem == 8 ? str() : take(elem_size(e.elem)));
    if (e.key == "general.alignment") std::memcpy(&f.alignment, e.items.at(0).data(), 4);
    f.kv.push_back(std::move(e));
  }
  for (uint64_t i = 0; i < f.n_tensors; ++i) {
    Tensor t;
    t.name = str();
    const uint32_t nd = num(uint32_t(0));
    if (nd > 4) throw std::runtime_error("test reader: n_dims");
    for (uint32_t j = 0; j < nd; ++j) t.ne.push_back(num(int64_t(0)));
    t.type = num(uint32_t(0));
    t.offset = num(uint64_t(0));
    f.tensors.push_back(std::move(t));
  }
  f.info_end = p;
  f.data_start = (p + f.alignment - 1) / f.alignment * f.alignment;
  return f;
}

template <typename T>
T item(const KV& e, size_t i = 0) {
  const std::string& s = e.items.at(i);
  if (s.size() != sizeof(T)) throw std::runtime_error("test reader: element size");
  T v;
  std::memcpy(&v, s.data(), sizeof v);
  return v;
}

// ---- hostile files ----
// The base: 3 KVs; tensor "a" f32 (8) = 32 bytes at 0, tensor "b" q8_0 (32, 2) = 68 bytes at 32,
// padded to 96; alignment 32; file = data_start + 128.
struct Base {
  uint32_t version = 3;
  uint64_t n_tensors = 2, n_kv = 3;
  Raw kvs, infos;
  size_t data_bytes = 128;
  Base() {
    kvs.kv_str("general.architecture", "llama").kv_u32("test.u32", 7).kv_i32s("test.arr", {1, 2, 3});
    infos.tensor("a", {8}, 0, 0).tensor("b", {32, 2}, 8, 32);
  }
  std::vector<uint8_t> bytes(size_t alignment = 32) const {
    Raw r;
    r.header(version, n_tensors, n_kv);
    r.b.insert(r.b.end(), kvs.b.begin(), kvs.b.end());
    r.b.insert(r.b.end(), infos.b.begin(), infos.b.end());
    r.pad(alignment).zeros(data_bytes);
    return r.b;
  }
};

struct Hostile {
  std::string name;
  std::vector<uint8_t> bytes;
  std::string expect;           // a piece of our reader's error message
  bool gguf_cpp_accepts = false;  // llama.cpp's gguf.cpp (no_alloc, as llama.cpp loads) reads it
};

inline std::vector<Hostile> hostile_cases() {
  std::vector<Hostile> v;
  auto add = [&](std::string name, std::vector<uint8_t> b, std::string expect, bool accepts = false) {
    v.push_back({std::move(name), std::move(b), std::move(expect), accepts});
  };
  auto with_kvs = [](Raw kvs, uint64_t n_kv) { Base x; x.kvs = std::move(kvs); x.n_kv = n_kv; return x.bytes(); };
  auto with_infos = [](Raw infos, uint64_t n_tensors, size_t data = 128) {
    Base x; x.infos = std::move(infos); x.n_tensors = n_tensors; x.data_bytes = data; return x.bytes();
  };
  const Base base;
  { Base x; x.version = 1; add("version1", x.bytes(), "version 1"); }
  { Base x; x.version = 2; add("version2", x.bytes(), "version 2", true); }
  { Base x; x.version = 4; add("version4", x.bytes(), "newer than 3"); }
  { Base x; x.version = 0x03000000; add("big_endian", x.bytes(), "byte-swapped"); }
  { auto b = base.bytes(); b[3] = 'X'; add("bad_magic", b, "not a GGUF file"); }
  { Base x; x.n_tensors = uint64_t(1) << 63; add("n_tensors_2p63", x.bytes(), "tensor count"); }
  { Base x; x.n_kv = uint64_t(1) << 63; add("n_kv_2p63", x.bytes(), "key/value count"); }
  { Base x; x.n_kv = ~uint64_t(0); add("n_kv_max", x.bytes(), "key/value count"); }
  { Base x; x.n_tensors = 1000; add("n_tensors_past_end", x.bytes(), "tensor count"); }
  add("key_length_past_end", with_kvs(Raw().u64(5000).bytes("general"), 1), "truncated");
  add("key_length_2p40", with_kvs(Raw().u64(uint64_t(1) << 40).bytes("general"), 1), "limit of 2^30");
  add("string_past_end", with_kvs(Raw().str("general.name").u32(8).u64(5000).bytes("x"), 1), "truncated");
  add("unknown_value_type", with_kvs(Raw().str("test.x").u32(13).u32(0), 1), "unknown value type 13");
  add("value_type_minus1", with_kvs(Raw().str("test.x").u32(0xFFFFFFFF).u32(0), 1), "unknown value type -1");
  add("nested_array", with_kvs(Raw().str("test.x").u32(9).u32(9).u64(1).u32(4).u64(1).u32(0), 1), "nested");
  add("unknown_elem_type", with_kvs(Raw().str("test.x").u32(9).u32(13).u64(1).u32(0), 1), "unknown array element type 13");
  add("array_2p31", with_kvs(Raw().str("test.x").u32(9).u32(0).u64(uint64_t(1) << 31), 1), "limit of 2^30");
  add("array_past_end", with_kvs(Raw().str("test.x").u32(9).u32(10).u64(4000).u64(0), 1), "needs at least");
  add("string_array_past_end", with_kvs(Raw().str("test.x").u32(9).u32(8).u64(4000).str("a"), 1), "needs at least");
  add("duplicate_key", with_kvs(Raw().kv_u32("test.u32", 1).kv_u32("test.u32", 2), 2), "duplicate key");
  add("empty_key", with_kvs(Raw().kv_u32("", 1), 1), "empty key");
  add("alignment_u64", with_kvs(Raw().str("general.alignment").u32(10).u64(32), 1), "must be u32");
  add("alignment_48", with_kvs(Raw().kv_u32("general.alignment", 48), 1), "not a power of 2");
  add("alignment_0", with_kvs(Raw().kv_u32("general.alignment", 0), 1), "not a power of 2");
  add("ggml_type_4", with_infos(Raw().tensor("a", {8}, 4, 0).tensor("b", {32, 2}, 8, 32), 2), "removed");
  add("ggml_type_43", with_infos(Raw().tensor("a", {8}, 43, 0).tensor("b", {32, 2}, 8, 32), 2), "unknown ggml type id 43");
  add("ggml_type_minus1", with_infos(Raw().tensor("a", {8}, 0xFFFFFFFF, 0).tensor("b", {32, 2}, 8, 32), 2), "unknown ggml type id -1");
  add("row_not_block_multiple", with_infos(Raw().tensor("a", {8}, 0, 0).tensor("b", {33, 2}, 8, 32), 2), "block size 32");
  add("n_dims_5", with_infos(Raw().tensor("a", {8, 1, 1, 1, 1}, 0, 0).tensor("b", {32, 2}, 8, 32), 2), "n_dims 5");
  add("n_dims_0", with_infos(Raw().tensor("a", {}, 0, 0).tensor("b", {32, 2}, 8, 32), 2), "n_dims 0", true);
  add("dim_zero", with_infos(Raw().tensor("a", {8, 0}, 0, 0).tensor("b", {32, 2}, 8, 0), 2), "must be positive", true);
  add("dim_negative", with_infos(Raw().tensor("a", {-8}, 0, 0).tensor("b", {32, 2}, 8, 32), 2), "must be positive");
  add("element_overflow", with_infos(Raw().tensor("a", {int64_t(1) << 32, int64_t(1) << 32}, 0, 0).tensor("b", {32, 2}, 8, 32), 2), "too many elements");
  add("name_64", with_infos(Raw().tensor(std::string(64, 'n'), {8}, 0, 0).tensor("b", {32, 2}, 8, 32), 2), "too long");
  add("name_nul", with_infos(Raw().tensor(std::string("a\0z", 3), {8}, 0, 0).tensor("b", {32, 2}, 8, 32), 2), "NUL", true);
  add("duplicate_tensor", with_infos(Raw().tensor("a", {8}, 0, 0).tensor("a", {32, 2}, 8, 32), 2), "duplicate tensor name");
  add("misaligned_offset", with_infos(Raw().tensor("a", {8}, 0, 0).tensor("b", {32, 2}, 8, 36), 2), "not a multiple of the alignment");
  add("overlap", with_infos(Raw().tensor("a", {8}, 0, 0).tensor("b", {32, 2}, 8, 0), 2), "overlaps tensor 'a'");
  add("gap", with_infos(Raw().tensor("a", {8}, 0, 0).tensor("b", {32, 2}, 8, 64), 2, 160), "expected 32");
  add("out_of_order", with_infos(Raw().tensor("a", {8}, 0, 96).tensor("b", {32, 2}, 8, 0), 2), "expected 0");
  add("offset_2p63", with_infos(Raw().tensor("a", {8}, 0, 0).tensor("b", {32, 2}, 8, uint64_t(1) << 63), 2), "outside");
  add("tensor_past_eof", with_infos(Raw().tensor("a", {8}, 0, 0).tensor("b", {32, 2000}, 8, 32), 2), "runs past the end", true);
  { auto b = base.bytes(); b.resize(b.size() - 28); add("no_trailing_padding", b, "padding after the last tensor", true); }
  return v;
}

}  // namespace tg3
