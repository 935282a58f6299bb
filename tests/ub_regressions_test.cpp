// Undefined behaviour the sanitizer build (scripts/sanitize.sh) catches, found by fuzzing: scale
// regions at odd offsets (a LEAP v2 file whose group size is odd puts the f32 scales right
// after an odd number of int8 values) must be read byte-wise, and empty tensors (no buffer at
// all) must not reach memcpy with a null pointer.
#include <gtest/gtest.h>

#include <cmath>

#include "plan/plan.h"
#include "quant/quantize.h"

using namespace leapconv;

namespace {

TEST(UndefinedBehaviour, Int8ScalesRightAfterAnOddNumberOfValues) {
  PlanItem it;
  it.shape = {3, 3};
  it.type = QType::Int8Group;
  it.group_size = 3;
  finish_item_geometry(it);
  ASSERT_EQ(it.size.values, 9);  // the scales start at byte 9 of the tensor
  const float w[9] = {1, -2, 3, 0.5f, 0.25f, -1, 7, 8, -9};
  std::vector<uint8_t> enc(size_t(it.size.total()));
  uint8_t* region[kMaxRegions] = {enc.data(), enc.data() + it.size.values};
  encode_rows(it, w, 0, it.rows, region);  // writes f32 scales at an odd address
  std::vector<uint8_t> file(1, 0xee);  // and the tensor itself at an odd offset in the file
  file.insert(file.end(), enc.begin(), enc.end());
  it.offset = 1;
  MemorySource src("odd.bin", file);
  const std::vector<float> back = read_tensor_f32(src, it);
  const std::vector<float> fq = fake_quantize(it, w);
  ASSERT_EQ(back.size(), 9u);
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(back[i], fq[i]) << i;
  EXPECT_EQ(back[2], 3.0f);  // the group's maximum is exact
}

TEST(UndefinedBehaviour, F16ScalesAtAnOddAddress) {
  const float w[64] = {1.0f, -0.5f};
  std::vector<uint8_t> buf(1 + 2 + 64 + 32);
  int8_t q[64];
  ASSERT_TRUE(std::isfinite(quantize_q8_rows(w, 1, 64, buf.data() + 1, q)));
  float out[64];
  dequantize_q8_rows(buf.data() + 1, q, 1, 64, out);
  EXPECT_NEAR(out[0], 1.0f, 1e-3f);
  ASSERT_TRUE(std::isfinite(quantize_q4_rows(w, 1, 64, buf.data() + 1, buf.data() + 3)));
  dequantize_q4_rows(buf.data() + 1, buf.data() + 3, 1, 64, out);
  EXPECT_NEAR(out[0], 1.0f, 1e-3f);
}

TEST(UndefinedBehaviour, EmptyTensorsHaveNoBuffers) {
  for (QType t : {QType::F32, QType::F16, QType::BF16, QType::Q8Channel, QType::Q8_0}) {
    SCOPED_TRACE(quant_name(t));
    PlanItem it;
    it.shape = {0, 64};
    it.type = t;
    finish_item_geometry(it);
    ASSERT_EQ(it.size.total(), 0);
    MemorySource src("empty", {});
    EXPECT_TRUE(read_tensor_f32(src, it).empty());
    EXPECT_TRUE(read_rows_f32(src, it, 0, 0).empty());
    EXPECT_TRUE(fake_quantize(it, nullptr).empty());
  }
  MemorySink sink;
  sink.write_at(0, nullptr, 0);
  EXPECT_TRUE(sink.bytes().empty());
}

}  // namespace
