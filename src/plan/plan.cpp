#include "plan/plan.h"

#include <numeric>

#include "quant/quantize.h"

namespace leapconv {

const char* encoding_name(Encoding e) {
  switch (e) {
    case Encoding::F32: return "F32";
    case Encoding::F16: return "F16";
    case Encoding::Int8Group: return "INT8";
    case Encoding::Q8Channel: return "Q8_per_channel";
    case Encoding::Q4Group64: return "Q4_per_group_64";
  }
  return "?";
}

EncodedSize encoded_size(Encoding e, int64_t rows, int64_t cols, int group_size) {
  const int64_t n = rows * cols;
  switch (e) {
    case Encoding::F32: return {n * 4, 0};
    case Encoding::F16: return {n * 2, 0};
    case Encoding::Int8Group: return {n, n / group_size * 4};
    case Encoding::Q8Channel: return {n, rows * 2};
    case Encoding::Q4Group64: return {n / 2, n / kQ4Group * 2};
  }
  return {};
}

void finish_item_geometry(PlanItem& item) {
  int64_t numel = 1;
  for (int64_t d : item.shape) numel *= d;
  item.rows = item.shape.size() >= 2 ? item.shape[0] : 1;
  item.cols = item.rows ? numel / item.rows : 0;
  int64_t q = 1;
  if (item.permute_heads > 0) q = item.rows / item.permute_heads;  // whole heads per chunk
  if (item.enc == Encoding::Int8Group && item.cols > 0) {
    // chunk boundaries must fall on group boundaries of the flattened tensor
    const int64_t g = item.group_size / std::gcd<int64_t>(item.cols, item.group_size);
    q = std::lcm(q, g);
  }
  item.row_quantum = std::max<int64_t>(1, q);
  item.size = encoded_size(item.enc, item.rows, item.cols, item.group_size);
}

}  // namespace leapconv
