// The test suite's own GGUF-lite reader, dequantizer, writer and reference fake-quant, written
// from SPEC.md (not from src/gguf_lite.* or src/quantize.*).
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "test_support.h"

namespace tgguf {

enum Code : uint8_t { F32 = 0, F16 = 1, Q8 = 2, Q4 = 3 };

inline const char* code_name(int c) {
  static const char* n[] = {"F32", "F16", "Q8_per_channel", "Q4_per_group_64"};
  return c >= 0 && c < 4 ? n[c] : "?";
}

struct Desc {
  std::string name;
  std::vector<int64_t> dims;
  uint8_t dtype = 0;
  uint64_t offset = 0;
  size_t desc_pos = 0;  // where the descriptor starts in the file
};

struct File {
  std::vector<uint8_t> bytes;
  uint32_t magic = 0, version = 0, n_tensors = 0, metadata_len = 0;
  std::string metadata;
  std::vector<Desc> descs;
  size_t data_start = 0;
};

inline int64_t rows_of(const std::vector<int64_t>& dims) { return dims.size() >= 2 ? dims[0] : 1; }

// Bytes a tensor occupies, per SPEC.
inline size_t tensor_bytes(uint8_t dtype, const std::vector<int64_t>& dims) {
  const size_t n = size_t(tsup::numel(dims));
  switch (dtype) {
    case F32: return n * 4;
    case F16: return n * 2;
    case Q8: return size_t(rows_of(dims)) * 2 + n;
    case Q4: return n / 64 * 2 + n / 2;
  }
  throw std::runtime_error("test reader: unknown dtype");
}

inline File read(const std::string& path) {
  File f;
  f.bytes = tsup::slurp(path);
  const auto& b = f.bytes;
  f.magic = tsup::le<uint32_t>(b, 0);
  f.version = tsup::le<uint32_t>(b, 4);
  f.n_tensors = tsup::le<uint32_t>(b, 8);
  f.metadata_len = tsup::le<uint32_t>(b, 12);
  if (16 + size_t(f.metadata_len) > b.size()) throw std::runtime_error("test reader: metadata past end");
  f.metadata.assign(reinterpret_cast<const char*>(b.data()) + 16, f.metadata_len);
  size_t p = 16 + f.metadata_len;
  for (uint32_t i = 0; i < f.n_tensors; ++i) {
    Desc d;
    d.desc_pos = p;
    const uint16_t nl = tsup::le<uint16_t>(b, p);
    p += 2;
    if (p + nl > b.size()) throw std::runtime_error("test reader: name past end");
    d.name.assign(reinterpret_cast<const char*>(b.data()) + p, nl);
    p += nl;
    const uint8_t nd = tsup::le<uint8_t>(b, p);
    p += 1;
    for (int k = 0; k < nd; ++k, p += 4) d.dims.push_back(tsup::le<uint32_t>(b, p));
    d.dtype = tsup::le<uint8_t>(b, p);
    p += 1;
    d.offset = tsup::le<uint64_t>(b, p);
    p += 8;
    f.descs.push_back(std::move(d));
  }
  f.data_start = p;
  return f;
}

inline float half(const std::vector<uint8_t>& b, size_t off) { return tsup::half_to_float(tsup::le<uint16_t>(b, off)); }

// Dequantizes one tensor with the test's own code.
inline std::vector<float> dequant(const File& f, const Desc& d) {
  const size_t n = size_t(tsup::numel(d.dims));
  const size_t base = f.data_start + size_t(d.offset);
  if (base + tensor_bytes(d.dtype, d.dims) > f.bytes.size()) throw std::runtime_error("test reader: data past end");
  std::vector<float> out(n);
  const auto& b = f.bytes;
  switch (d.dtype) {
    case F32:
      for (size_t i = 0; i < n; ++i) out[i] = tsup::le<float>(b, base + 4 * i);
      break;
    case F16:
      for (size_t i = 0; i < n; ++i) out[i] = half(b, base + 2 * i);
      break;
    case Q8: {
      const size_t rows = size_t(d.dims[0]), cols = size_t(d.dims[1]);
      for (size_t r = 0; r < rows; ++r) {
        const float s = half(b, base + 2 * r);
        for (size_t c = 0; c < cols; ++c)
          out[r * cols + c] = float(int8_t(b[base + rows * 2 + r * cols + c])) * s;
      }
      break;
    }
    case Q4: {
      const size_t groups = n / 64;
      const size_t vals = base + groups * 2;
      for (size_t i = 0; i < n; ++i) {
        const float s = half(b, base + 2 * (i / 64));
        const uint8_t byte = b[vals + i / 2];
        int nib = (i % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
        if (nib >= 8) nib -= 16;
        out[i] = float(nib) * s;
      }
      break;
    }
    default:
      throw std::runtime_error("test reader: unknown dtype");
  }
  return out;
}

// ---- reference fake-quant from SPEC ----
inline std::vector<float> fake_quant(uint8_t dtype, const std::vector<int64_t>& dims, const std::vector<float>& w) {
  std::vector<float> out(w.size());
  if (dtype == F32) return w;
  if (dtype == F16) {
    for (size_t i = 0; i < w.size(); ++i) out[i] = tsup::round_f16(w[i]);
    return out;
  }
  const size_t cols = size_t(dims[1]);
  const size_t span = dtype == Q8 ? cols : 64;
  const float div = dtype == Q8 ? 127.0f : 7.0f, lo = dtype == Q8 ? -127.0f : -8.0f, hi = dtype == Q8 ? 127.0f : 7.0f;
  for (size_t g = 0; g < w.size() / span; ++g) {
    float amax = 0.0f;
    for (size_t i = 0; i < span; ++i) amax = std::max(amax, std::fabs(w[g * span + i]));
    const float s = tsup::round_f16(amax / div);
    for (size_t i = 0; i < span; ++i) {
      const size_t k = g * span + i;
      const float q = s == 0.0f ? 0.0f : std::min(hi, std::max(lo, std::nearbyint(w[k] / s)));
      out[k] = q * s;
    }
  }
  return out;
}

// The f16 scale of each row (Q8) or group (Q4), for error bounds.
inline std::vector<float> ref_scales(uint8_t dtype, const std::vector<int64_t>& dims, const std::vector<float>& w) {
  const size_t span = dtype == Q8 ? size_t(dims[1]) : 64;
  std::vector<float> s;
  for (size_t g = 0; g < w.size() / span; ++g) {
    float amax = 0.0f;
    for (size_t i = 0; i < span; ++i) amax = std::max(amax, std::fabs(w[g * span + i]));
    s.push_back(tsup::round_f16(amax / (dtype == Q8 ? 127.0f : 7.0f)));
  }
  return s;
}

// Which encoding SPEC gives a tensor under a scheme: 1-D always F32; Q4 needs in % 64 == 0
// (else F16); everything else takes the scheme.
inline uint8_t expected_code(uint8_t scheme, const std::vector<int64_t>& dims) {
  if (dims.size() <= 1) return F32;
  if (scheme == Q4 && dims[1] % 64) return F16;
  return scheme;
}

// ---- a GGUF-lite writer for hand-made files (corrupt-input tests) ----
struct WTensor {
  std::string name;
  std::vector<int64_t> dims;
  uint8_t dtype = F32;
  uint64_t offset = 0;
};
inline std::vector<uint8_t> write(const std::string& metadata, const std::vector<WTensor>& ts, size_t data_bytes) {
  std::vector<uint8_t> b;
  auto u32 = [&](uint32_t v) { for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i))); };
  u32(0x474C4654);
  u32(1);
  u32(uint32_t(ts.size()));
  u32(uint32_t(metadata.size()));
  b.insert(b.end(), metadata.begin(), metadata.end());
  for (const WTensor& t : ts) {
    b.push_back(uint8_t(t.name.size()));
    b.push_back(uint8_t(t.name.size() >> 8));
    b.insert(b.end(), t.name.begin(), t.name.end());
    b.push_back(uint8_t(t.dims.size()));
    for (int64_t d : t.dims) u32(uint32_t(d));
    b.push_back(t.dtype);
    for (int i = 0; i < 8; ++i) b.push_back(uint8_t(t.offset >> (8 * i)));
  }
  b.resize(b.size() + data_bytes, 0);
  return b;
}

}  // namespace tgguf
