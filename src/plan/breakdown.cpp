#include "plan/breakdown.h"

#include <cstdio>

#include <algorithm>

namespace leapconv {

const char* tensor_part(const std::string& name) {
  return name.find("_exps.") != std::string::npos    ? "experts"
         : name.find("_shexp.") != std::string::npos ? "shared expert"
         : name.find("ffn_gate_inp") != std::string::npos ? "router"
                                                          : "dense";
}

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
    const std::string name = it.qt().name;
    auto row = std::find_if(b.by_dtype.begin(), b.by_dtype.end(), [&](auto& r) { return r.dtype == name; });
    if (row == b.by_dtype.end()) row = b.by_dtype.insert(b.by_dtype.end(), DtypeBytes{name});
    const int64_t numel = it.rows * it.cols;
    row->tensors += 1;
    row->numel += numel;
    row->values += it.size.values;
    row->scales += it.size.scales;
    b.total += it.size.total();
    b.fp32_baseline += numel * 4;
    const std::string part = tensor_part(it.name);
    auto p = std::find_if(b.by_part.begin(), b.by_part.end(), [&](auto& r) { return r.part == part; });
    if (p == b.by_part.end()) p = b.by_part.insert(b.by_part.end(), PartBytes{part});
    p->tensors += 1;
    p->numel += numel;
    p->bytes += it.size.total();
  }
  if (b.by_part.size() == 1) b.by_part.clear();  // all dense: nothing to tell apart
  return b;
}

void add_vocabulary_and_padding(ByteBreakdown& b, int64_t vocabulary, int64_t padding) {
  b.vocabulary += vocabulary;
  b.padding += padding;
  b.total += vocabulary + padding;
}

void add_undecoded_tensor(ByteBreakdown& b, const std::string& dtype, int64_t numel, int64_t bytes) {
  auto row = std::find_if(b.by_dtype.begin(), b.by_dtype.end(), [&](auto& r) { return r.dtype == dtype; });
  if (row == b.by_dtype.end()) row = b.by_dtype.insert(b.by_dtype.end(), DtypeBytes{dtype});
  row->tensors += 1;
  row->numel += numel;
  row->values += bytes;
  b.total += bytes;
  b.fp32_baseline += numel * 4;
}

nlohmann::json breakdown_json(const ByteBreakdown& b) {
  nlohmann::json j;
  j["format"] = b.format;
  j["total_bytes"] = b.total;
  j["header_bytes"] = b.header;
  j["metadata_bytes"] = b.metadata;
  j["descriptor_bytes"] = b.descriptors;
  j["vocabulary_bytes"] = b.vocabulary;
  j["padding_bytes"] = b.padding;
  j["fp32_baseline_bytes"] = b.fp32_baseline;
  j["ratio_vs_fp32"] = b.total ? double(b.fp32_baseline) / double(b.total) : 0.0;
  if (!b.source_by_dtype.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& [d, n] : b.source_by_dtype) rows.push_back({{"dtype", d}, {"bytes", n}});
    j["source_by_dtype"] = rows;
  }
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
  nlohmann::json parts = nlohmann::json::array();
  for (const PartBytes& p : b.by_part)
    parts.push_back({{"part", p.part}, {"tensors", p.tensors}, {"numel", p.numel}, {"bytes", p.bytes},
                     {"share", b.total ? double(p.bytes) / double(b.total) : 0.0}});
  j["by_part"] = parts;
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
  for (const PartBytes& p : b.by_part) {  // a mixture of experts: the same bytes by part
    std::snprintf(line, sizeof line, "  %-14s %8lld %14s %14s %6.1f%%\n", p.part.c_str(), (long long)p.tensors,
                  mib(p.bytes).c_str(), "", 100.0 * double(p.bytes) / double(b.total));
    s += line;
  }
  const int64_t over = b.header + b.metadata + b.descriptors;
  std::snprintf(line, sizeof line, "%-16s %8s %14s %14s %6.1f%%  (header %lld, metadata %lld, descriptors %lld bytes)\n",
                "header+meta+desc", "", mib(over).c_str(), "", 100.0 * double(over) / double(b.total),
                (long long)b.header, (long long)b.metadata, (long long)b.descriptors);
  s += line;
  if (b.vocabulary) {
    std::snprintf(line, sizeof line, "%-16s %8s %14s %14s %6.1f%%\n", "vocabulary", "", mib(b.vocabulary).c_str(), "",
                  100.0 * double(b.vocabulary) / double(b.total));
    s += line;
  }
  if (b.padding) {
    std::snprintf(line, sizeof line, "%-16s %8s %14s %14s %6.1f%%  (%lld bytes)\n", "alignment", "", mib(b.padding).c_str(),
                  "", 100.0 * double(b.padding) / double(b.total), (long long)b.padding);
    s += line;
  }
  std::snprintf(line, sizeof line, "total %s (%lld bytes); FP32 baseline %s: %.2fx smaller", mib(b.total).c_str(),
                (long long)b.total, mib(b.fp32_baseline).c_str(), double(b.fp32_baseline) / double(b.total));
  s += line;
  if (b.source_bytes) {
    std::snprintf(line, sizeof line, "; source %s: %.2fx smaller", mib(b.source_bytes).c_str(),
                  double(b.source_bytes) / double(b.total));
    s += line;
  }
  if (!b.source_by_dtype.empty()) {
    s += "\nsource by dtype:";
    for (const auto& [d, n] : b.source_by_dtype) s += " " + d + " " + mib(n) + " (" + std::to_string(n) + " bytes)";
  }
  return s + "\n";
}

}  // namespace leapconv
