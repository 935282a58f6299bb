#include "plan/plan.h"

#include <numeric>

namespace leapconv {

RowRegions row_regions(const PlanItem& it, int64_t r0, int64_t r1) {
  const QuantType& t = it.qt();
  const EncodedSize before = t.bytes_of(r0, it.cols, it.group_size);
  const EncodedSize here = t.bytes_of(r1 - r0, it.cols, it.group_size);
  RowRegions rr;
  switch (t.layout) {
    case Layout::Plain:
    case Layout::Interleaved:
      rr.region[rr.n++] = {it.offset + before.total(), here.total()};
      break;
    case Layout::ValuesThenScales:
      rr.region[rr.n++] = {it.offset + before.values, here.values};
      rr.region[rr.n++] = {it.offset + it.size.values + before.scales, here.scales};
      break;
    case Layout::ScalesThenValues:
      rr.region[rr.n++] = {it.offset + before.scales, here.scales};
      rr.region[rr.n++] = {it.offset + it.size.scales + before.values, here.values};
      break;
  }
  return rr;
}

void finish_item_geometry(PlanItem& item) {
  int64_t numel = 1;
  for (int64_t d : item.shape) numel *= d;
  item.rows = item.shape.size() >= 2 ? item.shape[0] : 1;
  item.cols = item.rows ? numel / item.rows : 0;
  int64_t q = 1;
  if (item.permute_heads > 0) q = item.rows / item.permute_heads;  // whole heads per chunk
  // A transposed tensor's output rows are columns of the whole source: one chunk reads it all
  // (GPT-2's Conv1D weights: the largest, GPT-2 XL's c_fc, is 10 M values).
  if (item.transpose) q = std::max<int64_t>(1, item.rows);
  const int64_t block = item.block();
  if (block > 1 && item.cols > 0 && item.qt().span != BlockSpan::Row) {
    // chunk boundaries must fall on block boundaries of the flattened tensor
    const int64_t g = block / std::gcd<int64_t>(item.cols, block);
    q = std::lcm(q, g);
  }
  item.row_quantum = std::max<int64_t>(1, q);
  item.size = item.qt().bytes_of(item.rows, item.cols, item.group_size);
}

}  // namespace leapconv
