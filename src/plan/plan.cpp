#include "plan/plan.h"

#include <numeric>

namespace leapconv {

int64_t ConversionPlan::total_bytes() const {
  int64_t n = 0;
  for (const PlanFile& f : files) n += f.total_bytes;
  return n;
}

void finish_item_geometry(PlanItem& item) {
  const RowView v = RowView::of(item.shape);
  item.rows = v.rows;
  item.cols = v.cols;
  int64_t q = 1;
  if (!item.recipe.empty()) {
    item.recipe.check(item.name, item.rows, item.cols);
    q = item.recipe.row_quantum();
    if (item.recipe.passes_through() && item.recipe.find(StepKind::PassThrough)->type != item.type)
      throw ConvertError(item.recipe.sources[0].file, item.recipe.source_name(),
                         std::string("holds ") + quant_name(item.recipe.find(StepKind::PassThrough)->type) + " blocks, which cannot be written as " +
                             item.qt().name + " without decoding them");
  }
  const int64_t block = item.block();
  if (block > 1 && item.cols > 0 && item.qt().span != BlockSpan::Row) {
    // chunk boundaries must fall on block boundaries of the flattened tensor
    const int64_t g = block / std::gcd<int64_t>(item.cols, block);
    q = std::lcm(q, g);
  }
  item.row_quantum = std::max<int64_t>(1, q);
  item.size = item.qt().bytes_of(item.rows, item.cols, item.group_size);
}

std::vector<float> fake_quantize_rows(const PlanItem& it, const float* w, int64_t r0, int64_t r1) {
  PlanItem part = it;  // the same type over just these rows
  part.shape = {r1 - r0, it.cols};
  part.recipe = Recipe();
  finish_item_geometry(part);
  TensorCodec c = part;
  c.slice_rows = TensorCodec(it).slice_rows;  // the whole tensor's slices
  return fake_quantize(c, w, nullptr, r0);
}

}  // namespace leapconv
