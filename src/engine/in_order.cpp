#include "engine/in_order.h"

#include <algorithm>

#include "core/error.h"

namespace leapconv {

namespace {
const uint8_t kZeros[64 << 10] = {};  // padding, handed out in pieces of at most this
}

std::string in_order_refusal(const ConversionPlan& plan) {
  if (plan.files.size() != 1) return "a split file is several files";
  struct Extent { int64_t offset, end; };
  std::vector<Extent> fixed = {{0, int64_t(plan.files[0].header.size())}};
  for (const FixedPiece& f : plan.files[0].fixed) fixed.push_back({f.offset, f.offset + int64_t(f.bytes.size())});
  std::sort(fixed.begin(), fixed.end(), [](const Extent& a, const Extent& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < fixed.size(); ++i)
    if (fixed[i].offset < fixed[i - 1].end) return "its fixed pieces overlap";
  int64_t end = 0;  // of the tensors so far
  for (const PlanItem& it : plan.items) {
    if (it.rows * it.cols == 0) continue;
    const RowRegions rr = row_regions(it, 0, it.rows);
    int with_bytes = 0;
    for (int i = 0; i < rr.n; ++i) with_bytes += rr.region[i].bytes > 0;
    if (with_bytes > 1) return "its tensors are written in several places each (" + it.name + ")";
    const RegionSpan& r = rr.region[0];
    if (r.offset < end) return "its tensors are not in file order (" + it.name + ")";
    for (const Extent& f : fixed)
      if (f.offset < r.offset + r.bytes && r.offset < f.end) return "a fixed piece lies inside " + it.name;
    end = r.offset + r.bytes;
  }
  return "";
}

InOrderOutput::InOrderOutput(const PlanFile& file) : file_(file) {
  for (const FixedPiece& f : file.fixed) fixed_.push_back(&f);
  std::sort(fixed_.begin(), fixed_.end(), [](const FixedPiece* a, const FixedPiece* b) { return a->offset < b->offset; });
}

void InOrderOutput::fill_to(int64_t offset, std::vector<OutputPiece>& out) {
  if (at_ == 0 && !file_.header.empty()) {
    out.push_back({0, 0, file_.header.data(), file_.header.size()});
    at_ = int64_t(file_.header.size());
  }
  for (;;) {
    const FixedPiece* f = next_fixed_ < fixed_.size() ? fixed_[next_fixed_] : nullptr;
    const int64_t to = f && f->offset < offset ? f->offset : offset;
    while (at_ < to) {  // zeros
      const int64_t n = std::min<int64_t>(to - at_, int64_t(sizeof kZeros));
      out.push_back({0, at_, kZeros, size_t(n)});
      at_ += n;
    }
    if (!f || f->offset >= offset) return;
    out.push_back({0, f->offset, f->bytes.data(), f->bytes.size()});
    at_ = f->offset + int64_t(f->bytes.size());
    ++next_fixed_;
  }
}

void InOrderOutput::put(const OutputPiece& p, std::vector<OutputPiece>& out) {
  fill_to(p.offset, out);
  if (p.offset != at_)
    throw ConvertError("internal: a piece at byte " + std::to_string(p.offset) + " of a file streamed front to back, at byte " +
                       std::to_string(at_));
  if (p.size) out.push_back(p);
  at_ += int64_t(p.size);
}

void InOrderOutput::finish(std::vector<OutputPiece>& out) {
  fill_to(file_.total_bytes, out);
  if (at_ != file_.total_bytes)
    throw ConvertError("internal: a file streamed front to back ended at byte " + std::to_string(at_) + " of " +
                       std::to_string(file_.total_bytes));
}

}  // namespace leapconv
