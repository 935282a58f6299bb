#include "check/breakdown.h"

#include <cstdio>

#include "formats/gguf_lite.h"
#include "formats/leap_format.h"

namespace leapconv {

ByteBreakdown make_breakdown(const std::string& format, const std::vector<PlanItem>& items,
                             int64_t header, int64_t metadata, int64_t descriptors,
                             int64_t source_bytes) {
  ByteBreakdown b;
  b.format = format;
  b.header = header;
  b.metadata = metadata;
  b.descriptors = descriptors;
  b.source_bytes = source_bytes;
  b.total = header + metadata + descriptors;
  for (const PlanItem& it : items) {
    const std::string name = encoding_name(it.enc);
    auto row = std::find_if(b.by_dtype.begin(), b.by_dtype.end(), [&](auto& r) { return r.dtype == name; });
    if (row == b.by_dtype.end()) row = b.by_dtype.insert(b.by_dtype.end(), DtypeBytes{name});
    const int64_t numel = it.rows * it.cols;
    row->tensors += 1;
    row->numel += numel;
    row->values += it.size.values;
    row->scales += it.size.scales;
    b.total += it.size.total();
    b.fp32_baseline += numel * 4;
  }
  return b;
}

nlohmann::json breakdown_json(const ByteBreakdown& b) {
  nlohmann::json j;
  j["format"] = b.format;
  j["total_bytes"] = b.total;
  j["header_bytes"] = b.header;
  j["metadata_bytes"] = b.metadata;
  j["descriptor_bytes"] = b.descriptors;
  j["fp32_baseline_bytes"] = b.fp32_baseline;
  j["ratio_vs_fp32"] = b.total ? double(b.fp32_baseline) / double(b.total) : 0.0;
  if (b.source_bytes) {
    j["source_bytes"] = b.source_bytes;
    j["ratio_vs_source"] = b.total ? double(b.source_bytes) / double(b.total) : 0.0;
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const DtypeBytes& r : b.by_dtype)
    rows.push_back({{"dtype", r.dtype}, {"tensors", r.tensors}, {"numel", r.numel},
                    {"values_bytes", r.values}, {"scales_bytes", r.scales},
                    {"share", b.total ? double(r.values + r.scales) / double(b.total) : 0.0}});
  j["by_dtype"] = rows;
  return j;
}

static std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1 << 20));
  return buf;
}

std::string breakdown_text(const ByteBreakdown& b) {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line, "%-16s %8s %14s %14s %7s\n", "dtype", "tensors", "values", "scales", "share");
  s += line;
  for (const DtypeBytes& r : b.by_dtype) {
    std::snprintf(line, sizeof line, "%-16s %8lld %14s %14s %6.1f%%\n", r.dtype.c_str(), (long long)r.tensors,
                  mib(r.values).c_str(), mib(r.scales).c_str(), 100.0 * double(r.values + r.scales) / double(b.total));
    s += line;
  }
  const int64_t over = b.header + b.metadata + b.descriptors;
  std::snprintf(line, sizeof line, "%-16s %8s %14s %14s %6.1f%%  (header %lld, metadata %lld, descriptors %lld bytes)\n",
                "header+meta+desc", "", mib(over).c_str(), "", 100.0 * double(over) / double(b.total),
                (long long)b.header, (long long)b.metadata, (long long)b.descriptors);
  s += line;
  std::snprintf(line, sizeof line, "total %s (%lld bytes); FP32 baseline %s: %.2fx smaller", mib(b.total).c_str(),
                (long long)b.total, mib(b.fp32_baseline).c_str(), double(b.fp32_baseline) / double(b.total));
  s += line;
  if (b.source_bytes) {
    std::snprintf(line, sizeof line, "; source %s: %.2fx smaller", mib(b.source_bytes).c_str(),
                  double(b.source_bytes) / double(b.total));
    s += line;
  }
  return s + "\n";
}

InspectedFile inspect_file(ByteSource& src) {
  InspectedFile f;
  uint8_t head[kLeapHeaderBytes] = {};
  const size_t n = size_t(std::min<int64_t>(src.size(), kLeapHeaderBytes));
  src.read_at(0, head, n);
  const uint32_t magic = n >= 4 ? get_le<uint32_t>(head) : 0;
  if (magic == kLeapMagic) {
    const LeapHeader h = decode_leap_header(src.name(), head, n);
    f.format = h.version == 1 ? "leap-v1" : "leap-v2";
    const int64_t want = leap_implied_size(h);
    if (want < 0) throw ConvertError(src.name(), "", "LEAP header implies an impossibly large file");
    if (src.size() != want)
      throw ConvertError(src.name(), "", "file is " + std::to_string(src.size()) + " bytes but its header implies " +
                                             std::to_string(want) + (src.size() < want ? ": truncated" : ""));
    f.items = leap_layout(h);
    f.header = {{"version", h.version}, {"dim", h.dim}, {"hidden_dim", h.hidden_dim}, {"n_layers", h.n_layers},
                {"n_heads", h.n_heads}, {"n_kv_heads", h.n_kv_heads}, {"vocab_size", h.vocab_size},
                {"seq_len", h.seq_len}, {"shared_classifier", h.shared_classifier}, {"group_size", h.group_size}};
    f.breakdown = make_breakdown(f.format, f.items, kLeapHeaderBytes, 0, 0, 0);
  } else if (magic == kGgufLiteMagic) {
    GgufLiteFile g = read_gguf_lite(src);
    f.format = "gguf-lite";
    for (GgufTensor& t : g.tensors) f.items.push_back(t.layout);
    f.metadata = g.metadata;
    f.header = {{"version", g.version}, {"n_tensors", g.tensors.size()}, {"metadata_len", g.metadata_bytes}};
    f.breakdown = make_breakdown(f.format, f.items, 16, g.metadata_bytes, g.descriptor_bytes, 0);
    f.breakdown.total = src.size();  // any trailing bytes count too
  } else {
    throw ConvertError(src.name(), "", "neither a LEAP .bin nor a GGUF-lite file (unknown magic)");
  }
  return f;
}

}  // namespace leapconv
