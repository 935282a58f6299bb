#include "source/imatrix.h"

#include <cmath>
#include <cstring>
#include <iterator>

#include "container/gguf_file.h"
#include "core/byte_cursor.h"
#include "core/error.h"
#include "core/text.h"

namespace leapconv {

namespace {

constexpr char kInSum2[] = ".in_sum2";
constexpr char kCounts[] = ".counts";

// Weights llama-quantize would refuse ("imatrix contains non-finite value"), named here.
void check_finite(const std::string& file, const std::string& name, const std::vector<float>& w) {
  for (size_t i = 0; i < w.size(); ++i)
    if (!std::isfinite(w[i]))
      throw ConvertError(file, name, "importance weight " + std::to_string(i) + " is not finite (" +
                                         std::to_string(w[i]) + "): llama-quantize refuses such a matrix");
}

// legacy .dat (common_imatrix_load_legacy)
Imatrix read_legacy(ByteSource& src, Imatrix im) {
  const std::string& f = src.name();
  std::string at = "";  // the entry being read, for a truncation message
  ByteCursor c(src, 0, src.size(), [&](uint64_t n, const std::string& what) {
    throw ConvertError(f, at, "truncated: " + what + " needs " + std::to_string(n) + " more bytes (not a GGUF file, so read as a legacy .dat importance matrix)");
  });
  const int32_t n_entries = c.get<int32_t>("the entry count");
  // each entry takes at least 12 bytes and one value
  if (n_entries < 1 || int64_t(n_entries) > c.remaining() / 16)
    throw ConvertError(f, "", "the legacy importance matrix says it has " + std::to_string(n_entries) +
                                  " entries; " + std::to_string(c.remaining()) + " bytes follow (not an importance matrix?)");
  for (int32_t i = 0; i < n_entries; ++i) {
    at = "entry " + std::to_string(i);
    const int32_t len = c.get<int32_t>("the name's length");
    if (len < 1 || len > c.remaining()) throw ConvertError(f, at, "has a name of " + std::to_string(len) + " bytes");
    std::string name(size_t(len), '\0');
    c.read(name.data(), size_t(len), "the name");
    if (name.find('\0') != std::string::npos) throw ConvertError(f, at, "has a NUL byte in its name");
    at = name;
    const int32_t ncall = c.get<int32_t>("the call count");
    const int32_t nval = c.get<int32_t>("the value count");
    if (nval < 1 || int64_t(nval) > c.remaining() / 4)
      throw ConvertError(f, name, "says it has " + std::to_string(nval) + " values; " + std::to_string(c.remaining()) + " bytes follow");
    if (im.entries.count(name)) throw ConvertError(f, name, "appears twice in the importance matrix");
    std::vector<float> w(static_cast<size_t>(nval));
    c.read(w.data(), w.size() * 4, "the values");  // little-endian f32 (as the file; every target here is LE)
    if (ncall > 0)  // "sums contain (raw/count)*ncall, divide by ncall"
      for (float& x : w) x = x / float(ncall);
    check_finite(f, name, w);
    im.entries[name].weights = std::make_shared<const std::vector<float>>(std::move(w));
  }
  // the trailing chunk count and dataset are optional; a partial trailer is ignored, as llama.cpp does
  at = "";
  if (c.remaining() >= 4) {
    im.chunk_count = c.get<int32_t>("the chunk count");
    if (c.remaining() >= 4) {
      const int32_t len = c.get<int32_t>("the dataset name's length");
      if (len > 0 && len <= c.remaining()) {
        std::string ds(size_t(len), '\0');
        c.read(ds.data(), size_t(len), "the dataset name");
        ds.resize(std::strlen(ds.c_str()));  // (read as a C string)
        im.datasets.push_back(ds);
      }
    }
  }
  im.legacy = true;
  return im;
}

// GGUF (common_imatrix_load, then load_imatrix's per-slice normalisation)
Imatrix read_gguf_imatrix(ByteSource& src, Imatrix im) {
  const std::string& f = src.name();
  const GgufFile g = read_gguf_file(src);
  if (g.tensors.empty()) throw ConvertError(f, "", "holds no tensors: not an importance matrix");
  const GgufMetadata& kv = g.kv;
  // llama-quantize refuses a GGUF matrix without its metadata ("missing imatrix metadata")
  for (const char* key : {"imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"})
    if (!kv.has(key))
      throw ConvertError(f, key, "is missing: not an importance matrix from llama-imatrix (its GGUF files have imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size)");
  if (kv.at("imatrix.datasets").is_array() && kv.get_array_type("imatrix.datasets") == GgufType::STRING)
    im.datasets = kv.get_string_array("imatrix.datasets");
  im.chunk_count = int32_t(kv.get_u32("imatrix.chunk_count"));
  im.chunk_size = int32_t(kv.get_u32("imatrix.chunk_size"));

  struct Pair {
    const GgufTensorInfo *sums = nullptr, *counts = nullptr;
  };
  std::map<std::string, Pair> pairs;
  for (const GgufTensorInfo& t : g.tensors) {
    if (ends_with(t.name, kInSum2)) pairs[t.name.substr(0, t.name.size() - std::strlen(kInSum2))].sums = &t;
    else if (ends_with(t.name, kCounts)) pairs[t.name.substr(0, t.name.size() - std::strlen(kCounts))].counts = &t;
  }
  if (pairs.empty()) throw ConvertError(f, "", "has no <name>.in_sum2 / <name>.counts tensors: not an importance matrix");
  constexpr uint32_t kF32 = 0;
  for (const auto& [name, p] : pairs) {
    if (!p.sums || !p.counts) throw ConvertError(f, name, std::string("has ") + (p.sums ? kInSum2 : kCounts) + " but no " + (p.sums ? kCounts : kInSum2));
    if (p.sums->type != kF32 || p.counts->type != kF32) throw ConvertError(f, name, "sums and counts must be F32");
    const int64_t nval = p.sums->nelements(), ncounts = p.counts->nelements();
    if (ncounts < 1 || nval % ncounts != 0)
      throw ConvertError(f, name, std::to_string(nval) + " sums are not a whole number of rows for " + std::to_string(ncounts) + " counts");
    std::vector<float> sums(static_cast<size_t>(nval)), counts(static_cast<size_t>(ncounts));
    src.read_at(p.sums->file_offset, sums.data(), sums.size() * 4);
    src.read_at(p.counts->file_offset, counts.data(), counts.size() * 4);
    const int64_t ne0 = nval / ncounts;
    for (int64_t j = 0; j < ncounts; ++j) {
      if (!(std::fabs(counts[size_t(j)]) < 0x1p62f))  // NaN, Inf, or past lround's int64
        throw ConvertError(f, name, "count " + std::to_string(j) + " is " + std::to_string(counts[size_t(j)]) + ": not a token count");
      const float count = float(std::lround(counts[size_t(j)]));  // (an int64 in llama.cpp, then a float)
      for (int64_t i = 0; i < ne0; ++i) {
        float& e = sums[size_t(j * ne0 + i)];
        e = count > 0.0f ? e / count : 1.0f;
      }
    }
    check_finite(f, name, sums);
    ImatrixEntry& e = im.entries[name];
    e.weights = std::make_shared<const std::vector<float>>(std::move(sums));
    e.slices = ncounts;
  }
  return im;
}

}  // namespace

std::shared_ptr<const std::vector<float>> importance_for(const Imatrix& im, const std::string& name,
                                                         const std::vector<int64_t>& shape, std::string* why) {
  why->clear();
  const ImatrixEntry* e = im.find(name);
  if (!e) return nullptr;
  const int64_t ne0 = shape.empty() ? 1 : shape.back(), ne2 = shape.size() >= 3 ? shape[shape.size() - 3] : 1;
  if (int64_t(e->weights->size()) == ne0 * ne2) return e->weights;
  *why = "has " + std::to_string(e->weights->size()) + " importance weights in " + im.file + " but the tensor takes " +
         std::to_string(ne0 * ne2) + " (" + std::to_string(ne0) + " columns x " + std::to_string(ne2) + (ne2 > 1 ? " experts)" : ")");
  return nullptr;
}

void filter_imatrix(Imatrix& im, const std::vector<std::string>& include, const std::vector<std::string>& exclude) {
  auto contains_one = [](const std::string& name, const std::vector<std::string>& parts) {
    for (const std::string& p : parts)
      if (name.find(p) != std::string::npos) return true;
    return false;
  };
  for (auto it = im.entries.begin(); it != im.entries.end();) {
    const bool drop = include.empty() ? contains_one(it->first, exclude) : !contains_one(it->first, include);
    it = drop ? im.entries.erase(it) : std::next(it);
  }
}

Imatrix read_imatrix(ByteSource& src, const std::string& as_given) {
  Imatrix im;
  im.file = as_given;
  char magic[4] = {};
  if (src.size() >= 4) src.read_at(0, magic, 4);
  // llama.cpp tries GGUF first and reads anything else as legacy
  return std::memcmp(magic, "GGUF", 4) == 0 ? read_gguf_imatrix(src, std::move(im)) : read_legacy(src, std::move(im));
}

}  // namespace leapconv
