// The test suite's own LEAP .bin reader, written from SPEC.md (not from src/leap_format.*):
// the grouped weight order, names mapped to the HF checkpoint, sizes from the generator's shapes.
#pragma once
#include <string>
#include <vector>

#include "test_support.h"

namespace tleap {

struct Entry {
  std::string leap, hf;
  bool norm = false;
  int64_t permute_heads = 0;  // wq: n_heads, wk: n_kv_heads
};

// SPEC: attention_norm*, ffn_norm*, norm, tok_embeddings, wq*, wk*, wv*, wo*, w1*, w2*, w3*, output.
inline std::vector<Entry> expected_order(int64_t layers, int64_t heads, int64_t kv_heads, bool tied) {
  std::vector<Entry> v;
  auto L = [](int64_t l, const std::string& s) { return "model.layers." + std::to_string(l) + "." + s; };
  for (int64_t l = 0; l < layers; ++l)
    v.push_back({"layers." + std::to_string(l) + ".attention_norm", L(l, "input_layernorm.weight"), true, 0});
  for (int64_t l = 0; l < layers; ++l)
    v.push_back({"layers." + std::to_string(l) + ".ffn_norm", L(l, "post_attention_layernorm.weight"), true, 0});
  v.push_back({"norm", "model.norm.weight", true, 0});
  v.push_back({"tok_embeddings", "model.embed_tokens.weight", false, 0});
  const std::pair<const char*, const char*> kinds[] = {
      {"wq", "self_attn.q_proj.weight"}, {"wk", "self_attn.k_proj.weight"}, {"wv", "self_attn.v_proj.weight"},
      {"wo", "self_attn.o_proj.weight"}, {"w1", "mlp.gate_proj.weight"},    {"w2", "mlp.down_proj.weight"},
      {"w3", "mlp.up_proj.weight"}};
  for (auto& k : kinds)
    for (int64_t l = 0; l < layers; ++l) {
      const std::string kind = k.first;
      v.push_back({"layers." + std::to_string(l) + "." + kind, L(l, k.second), false,
                   kind == "wq" ? heads : kind == "wk" ? kv_heads : 0});
    }
  if (!tied) v.push_back({"output", "lm_head.weight", false, 0});
  return v;
}

struct Header {
  uint32_t magic = 0;
  int32_t version = 0, dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0,
          seq_len = 0;
  uint8_t shared = 0;
  int32_t group_size = 0;
};

inline Header read_header(const std::vector<uint8_t>& b) {
  Header h;
  h.magic = tsup::le<uint32_t>(b, 0);
  h.version = tsup::le<int32_t>(b, 4);
  int32_t* f[] = {&h.dim, &h.hidden_dim, &h.n_layers, &h.n_heads, &h.n_kv_heads, &h.vocab_size, &h.seq_len};
  for (int i = 0; i < 7; ++i) *f[i] = tsup::le<int32_t>(b, size_t(8 + 4 * i));
  h.shared = tsup::le<uint8_t>(b, 0x24);
  h.group_size = tsup::le<int32_t>(b, 0x25);
  return h;
}

struct Item {
  Entry e;
  std::vector<int64_t> shape;
  size_t offset = 0;            // first byte
  size_t bytes = 0;             // bytes occupied
  std::vector<float> f32;       // v1 tensors and all norms
  std::vector<int8_t> q;        // v2 values
  std::vector<float> scales;    // v2 scales
  std::vector<float> dequant;   // v2: q * scale (v1: == f32)
};

struct File {
  Header h;
  std::vector<uint8_t> bytes;
  std::vector<Item> items;
  size_t end = 0;  // one past the last byte the expected layout accounts for
};

// Walks the file with the layout SPEC implies for these source tensors. version and group_size
// are what the test expects (not what the header says).
inline File read_leap(const std::string& path, const std::vector<gen::Tensor>& src, const gen::Spec& s,
                      int version, int group_size) {
  File f;
  f.bytes = tsup::slurp(path);
  f.h = read_header(f.bytes);
  size_t off = 256;
  for (const Entry& e : expected_order(s.layers, s.heads, s.kv_heads, s.tied)) {
    Item it;
    it.e = e;
    it.shape = tsup::find_tensor(src, e.hf).shape;
    const size_t n = size_t(tsup::numel(it.shape));
    it.offset = off;
    if (e.norm || version == 1) {
      it.f32.resize(n);
      if (off + 4 * n > f.bytes.size()) throw std::runtime_error("LEAP file too short at " + e.leap);
      std::memcpy(it.f32.data(), f.bytes.data() + off, 4 * n);
      it.dequant = it.f32;
      it.bytes = 4 * n;
    } else {
      const size_t ng = n / size_t(group_size);
      if (off + n + 4 * ng > f.bytes.size()) throw std::runtime_error("LEAP file too short at " + e.leap);
      it.q.resize(n);
      std::memcpy(it.q.data(), f.bytes.data() + off, n);
      it.scales.resize(ng);
      std::memcpy(it.scales.data(), f.bytes.data() + off + n, 4 * ng);
      it.dequant.resize(n);
      for (size_t i = 0; i < n; ++i) it.dequant[i] = float(it.q[i]) * it.scales[i / size_t(group_size)];
      it.bytes = n + 4 * ng;
    }
    off += it.bytes;
    f.items.push_back(std::move(it));
  }
  f.end = off;
  return f;
}

// HF rotate-half rows -> interleaved rows, straight from the index formula:
// out row h*hd + 2*i + j == source row h*hd + j*hd/2 + i.
inline std::vector<float> permute_rope(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t heads) {
  const int64_t hd = rows / heads;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t o = h * hd + 2 * i + j, sr = h * hd + j * (hd / 2) + i;
        for (int64_t c = 0; c < cols; ++c) out[size_t(o * cols + c)] = w[size_t(sr * cols + c)];
      }
  return out;
}

// The values the converter should have started from for an entry (RoPE-permuted where due).
inline std::vector<float> expected_source(const Entry& e, const std::vector<gen::Tensor>& src) {
  const gen::Tensor& t = tsup::find_tensor(src, e.hf);
  if (!e.permute_heads) return t.values;
  return permute_rope(t.values, t.shape[0], t.shape[1], e.permute_heads);
}

}  // namespace tleap
