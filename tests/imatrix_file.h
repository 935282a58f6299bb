// The test suite's own importance-matrix files, written from llama.cpp's formats (common/
// imatrix-loader.cpp reads them; tools/imatrix writes them) with the raw GGUF builder of
// gguf3_reader.h, and the weights llama-quantize makes of them (tools/quantize/quantize.cpp's
// load_imatrix), worked out here independently of src/source/imatrix.cpp.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gguf3_reader.h"

namespace timx {

struct Entry {
  std::string name;
  int64_t cols = 0;
  std::vector<float> sums;    // slices x cols: sums of squared activations (legacy: (sum / count) * ncall)
  std::vector<float> counts;  // one per slice (GGUF); legacy: counts[0] is ncall
};

// Realistic entries: per column a mean square spanning orders of magnitude, seen `tokens` times
// (per slice: experts see different token counts, one never).
inline Entry make_entry(const std::string& name, int64_t cols, int64_t slices, uint32_t seed, float tokens = 512) {
  std::mt19937 g(seed);
  std::lognormal_distribution<float> ms(0.0f, 2.0f);
  Entry e{name, cols, {}, {}};
  for (int64_t s = 0; s < slices; ++s) {
    const float n = slices > 1 ? (s == 1 ? 0.0f : float(int(tokens) / int(s + 1))) : tokens;
    e.counts.push_back(n);
    for (int64_t c = 0; c < cols; ++c) e.sums.push_back(ms(g) * (n > 0 ? n : 1.0f));
  }
  return e;
}

// legacy .dat: i32 n, {i32 len, name, i32 ncall, i32 nval, f32[nval]}..., i32 chunks, i32 len, dataset
inline std::vector<uint8_t> legacy_file(const std::vector<Entry>& es, int32_t chunks, const std::string& dataset) {
  tg3::Raw r;
  r.le(int32_t(es.size()));
  for (const Entry& e : es) {
    r.le(int32_t(e.name.size())).bytes(e.name).le(int32_t(e.counts.at(0))).le(int32_t(e.sums.size()));
    for (float v : e.sums) r.le(v);
  }
  if (chunks >= 0) r.le(chunks).le(int32_t(dataset.size())).bytes(dataset);
  return r.b;
}

// GGUF: general.type, imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size; per entry
// <name>.in_sum2 [cols, slices] and <name>.counts [1, slices], F32.
inline std::vector<uint8_t> gguf_file(const std::vector<Entry>& es, uint32_t chunk_count, uint32_t chunk_size,
                                      const std::vector<std::string>& datasets, bool metadata = true) {
  tg3::Raw kv, infos, data;
  uint64_t n_kv = 0;
  kv.kv_str("general.type", "imatrix"), ++n_kv;
  if (metadata) {
    kv.str("imatrix.datasets").u32(9).u32(8).u64(datasets.size());
    for (const std::string& d : datasets) kv.str(d);
    kv.kv_u32("imatrix.chunk_count", chunk_count).kv_u32("imatrix.chunk_size", chunk_size);
    n_kv += 3;
  }
  auto add = [&](const std::string& name, std::vector<int64_t> ne, const std::vector<float>& v) {
    infos.tensor(name, ne, 0, data.size());
    for (float x : v) data.le(x);
    data.pad(32);
  };
  for (const Entry& e : es) {
    const int64_t slices = int64_t(e.counts.size());
    const int64_t n = int64_t(e.sums.size());  // (a malformed entry: 1-D when not a whole number of slices)
    add(e.name + ".in_sum2", n % slices == 0 ? std::vector<int64_t>{n / slices, slices} : std::vector<int64_t>{n}, e.sums);
    add(e.name + ".counts", {1, slices}, e.counts);
  }
  tg3::Raw r;
  r.header(3, es.size() * 2, n_kv);
  r.b.insert(r.b.end(), kv.b.begin(), kv.b.end());
  r.b.insert(r.b.end(), infos.b.begin(), infos.b.end());
  r.pad(32);
  r.b.insert(r.b.end(), data.b.begin(), data.b.end());
  return r.b;
}

// What llama-quantize quantizes with: GGUF sums / round(count) per slice (1 where a slice was
// never seen); legacy values / ncall (as stored when ncall <= 0).
inline std::vector<float> weights(const Entry& e, bool legacy) {
  std::vector<float> w(e.sums.size());
  if (legacy) {
    const int64_t ncall = int64_t(e.counts.at(0));
    for (size_t i = 0; i < w.size(); ++i) w[i] = ncall > 0 ? e.sums[i] / float(ncall) : e.sums[i];
    return w;
  }
  const size_t slices = e.counts.size(), cols = w.size() / slices;
  for (size_t s = 0; s < slices; ++s) {
    const float n = float(std::lround(e.counts[s]));
    for (size_t c = 0; c < cols; ++c) w[s * cols + c] = n > 0 ? e.sums[s * cols + c] / n : 1.0f;
  }
  return w;
}

}  // namespace timx
