// Tensor recipes (plan/recipe.h) on real safetensors bytes, each step held to the tests' own
// arithmetic: decoding every source dtype, RoPE head permutation, transpose, add, stacking
// experts, concatenating and slicing rows, scales per tensor / row / 2-D block, pass-through
// blocks; the rows a realization reads; the pipeline streaming a stacked tensor expert by
// expert in bounded memory; and the errors a wrong recipe gets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "checkpoint_gen.h"
#include "core/f16.h"
#include "engine/run.h"
#include "plan/plan.h"
#include "quant/ggml_quants.h"
#include "source/checkpoint.h"

using namespace leapconv;

namespace {

// A checkpoint of these tensors, one shard in memory.
Checkpoint in_memory(const std::vector<gen::RawTensor>& ts) {
  const std::string p = ::testing::TempDir() + "recipe-" + std::to_string(::getpid()) + ".safetensors";
  gen::write_safetensors(p, ts);
  CheckpointFiles f;
  f.label = "mem";
  f.shards.push_back(std::make_unique<MemorySource>("model.safetensors", gen::read_file(p)));
  std::remove(p.c_str());
  return open_checkpoint(std::move(f));
}

gen::RawTensor f32_tensor(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
  gen::RawTensor t{name, "F32", std::move(shape), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

std::vector<float> iota(size_t n, float start = 0.0f, float step = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * float(i);
  return v;
}

Recipe checked(Recipe r, int64_t rows, int64_t cols) {
  r.check("out", rows, cols);
  return r;
}

std::vector<float> realize(const Checkpoint& ck, const Recipe& r, int64_t r0, int64_t r1) {
  return realize_rows(r, r0, r1, ck.sources());
}

// The error a lambda throws, or "" when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ConvertError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(SourceDTypes, RowsAreInEnumOrderAndDecodeAsTheirFormatsSay) {
  for (size_t i = 0; i < source_dtypes().size(); ++i) EXPECT_EQ(size_t(source_dtypes()[i].id), i);
  for (const SourceDType& t : source_dtypes()) EXPECT_EQ(find_source_dtype(t.name), &t);
  // every byte of the 8-bit floats, against the formulas of their definitions
  for (int b = 0; b < 256; ++b) {
    const uint8_t x = uint8_t(b);
    float got[3];
    decode_to_f32(DType::F8_E4M3, &x, 1, &got[0]);
    decode_to_f32(DType::F8_E5M2, &x, 1, &got[1]);
    decode_to_f32(DType::F8_E8M0, &x, 1, &got[2]);
    const double sign = b & 0x80 ? -1.0 : 1.0;
    {  // E4M3FN: 4 exponent bits, bias 7, 3 mantissa bits, S.1111.111 NaN, no infinities
      const int e = (b >> 3) & 15, m = b & 7;
      if (e == 15 && m == 7) EXPECT_TRUE(std::isnan(got[0])) << b;
      else EXPECT_EQ(double(got[0]), sign * (e ? std::pow(2.0, e - 7) * (1 + m / 8.0) : std::pow(2.0, -6) * m / 8.0)) << b;
    }
    {  // E5M2: 5 exponent bits, bias 15, 2 mantissa bits, IEEE infinities and NaNs
      const int e = (b >> 2) & 31, m = b & 3;
      if (e == 31) EXPECT_TRUE(m ? std::isnan(got[1]) : std::isinf(got[1])) << b;
      else EXPECT_EQ(double(got[1]), sign * (e ? std::pow(2.0, e - 15) * (1 + m / 4.0) : std::pow(2.0, -14) * m / 4.0)) << b;
    }
    if (b == 255) EXPECT_TRUE(std::isnan(got[2]));
    else EXPECT_EQ(double(got[2]), std::pow(2.0, b - 127)) << b;
  }
  // float4 E2M1, two a byte, the first in the low nibble
  const uint8_t packed[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe};
  float f4[16];
  decode_to_f32(DType::F4, packed, 16, f4);
  for (int n = 0; n < 16; ++n) {
    const int e = (n >> 1) & 3, m = n & 1;
    const double v = (n & 8 ? -1.0 : 1.0) * (e ? std::pow(2.0, e - 1) * (1 + m / 2.0) : 0.5 * m);
    EXPECT_EQ(double(f4[n]), v) << n;
  }
  EXPECT_EQ(dtype_bytes(DType::F4, 3), -1);  // half a byte left over
  EXPECT_EQ(dtype_bytes(DType::F4, 4), 2);
  EXPECT_EQ(dtype_bytes(DType::BF16, 5), 10);
}

TEST(Recipes, PermuteTransposeAndAddAreTheirArithmetic) {
  const int64_t heads = 3, hd = 4, cols = 5;
  const std::vector<float> w = iota(size_t(heads * hd * cols));
  const Checkpoint ck = in_memory({f32_tensor("q", {heads * hd, cols}, w), f32_tensor("c", {cols, 7}, iota(35, 1.0f)),
                                   f32_tensor("n", {6}, iota(6, -1.0f, 0.25f))});
  // HF's rotate-half rows [heads, 2, hd/2] -> interleaved [heads, hd/2, 2]
  Recipe p = checked(Recipe::of(ck, *ck.find("q")).then(Step::permute_heads(0, heads)), heads * hd, cols);
  EXPECT_EQ(p.row_quantum(), hd);
  const std::vector<float> got = realize(ck, p, 0, heads * hd);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t c = 0; c < cols; ++c)
          EXPECT_EQ(got[size_t((h * hd + 2 * i + j) * cols + c)], w[size_t((h * hd + j * hd / 2 + i) * cols + c)]);
  // a chunk of whole heads reads the rows of those heads only
  const std::vector<float> head1 = realize(ck, p, hd, 2 * hd);
  EXPECT_TRUE(std::equal(head1.begin(), head1.end(), got.begin() + hd * cols));
  ASSERT_EQ(p.reads(hd, 2 * hd).size(), 1u);
  EXPECT_EQ(p.reads(hd, 2 * hd)[0].row0, hd);
  EXPECT_EQ(p.reads(hd, 2 * hd)[0].row1, 2 * hd);

  Recipe t = checked(Recipe::of(ck, *ck.find("c")).then(Step::transpose()), 7, cols);
  EXPECT_EQ(t.row_quantum(), 7);  // read whole
  const std::vector<float> tt = realize(ck, t, 2, 5);  // output rows 2..4 = source columns 2..4
  for (int64_t r = 2; r < 5; ++r)
    for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(tt[size_t((r - 2) * cols + c)], 1.0f + float(c * 7 + r));

  Recipe a = checked(Recipe::of(ck, *ck.find("n")).then(Step::add(1.0f)), 1, 6);
  const std::vector<float> aa = realize(ck, a, 0, 1);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(aa[size_t(i)], (-1.0f + 0.25f * float(i)) + 1.0f);
}

TEST(Recipes, ExpertsStackConcatAndSliceRowsAsIndexed) {
  const int64_t E = 4, R = 3, C = 8;
  std::vector<gen::RawTensor> ts;
  for (int64_t e = 0; e < E; ++e)
    ts.push_back(f32_tensor("experts." + std::to_string(e), {R, C}, iota(size_t(R * C), float(100 * e))));
  ts.push_back(f32_tensor("gate_up", {6, C}, iota(size_t(6 * C), 1000.0f)));
  const Checkpoint ck = in_memory(ts);
  Recipe s;
  for (int64_t e = 0; e < E; ++e) s.sources.push_back(SourceTensor::of(ck, *ck.find("experts." + std::to_string(e))));
  s.then(Step::stack());
  s.check("blk.0.ffn_up_exps.weight", E * R, C);  // [E, R, C] as rows of C
  const std::vector<float> all = realize(ck, s, 0, E * R);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t i = 0; i < R * C; ++i) EXPECT_EQ(all[size_t(e * R * C + i)], float(100 * e + i));
  // rows 2..7 span experts 0, 1 and 2: one read of each, only the rows asked for
  const std::vector<RowSpan> spans = s.reads(2, 7);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].source, 0);
  EXPECT_EQ(spans[0].row0, 2);
  EXPECT_EQ(spans[1].row0, 0);
  EXPECT_EQ(spans[1].row1, 3);
  EXPECT_EQ(spans[2].row1, 1);
  const std::vector<float> part = realize(ck, s, 2, 7);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + 2 * C));

  // gate = rows 0, 2, 4 and up = rows 1, 3, 5 of a fused tensor (stride 2), then concatenated back
  Recipe g;
  g.sources = {SourceTensor::of(ck, *ck.find("gate_up")), SourceTensor::of(ck, *ck.find("gate_up"))};
  g.then(Step::slice_rows(0, 0, 3, 2)).then(Step::slice_rows(1, 1, 3, 2)).then(Step::concat_rows());
  g.check("out", 6, C);
  const std::vector<float> gu = realize(ck, g, 0, 6);
  const int64_t order[6] = {0, 2, 4, 1, 3, 5};
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(gu[size_t(r * C + c)], 1000.0f + float(order[r] * C + c));
}

TEST(Recipes, ScalesPerTensorPerRowAndPerBlockMultiplyInF32) {
  // F8_E4M3 weights [5, 6] with scales per 2 x 4 block (partial blocks at the edges: [3, 2])
  std::mt19937 rng(3);
  std::vector<uint8_t> w8(30);
  for (uint8_t& b : w8) b = uint8_t(rng() % 0x7e);  // no NaN (0x7f / 0xff)
  const std::vector<float> s_block = {0.5f, 2.0f, 0.125f, 3.0f, 1.5f, 0.25f};
  const std::vector<float> s_row = iota(5, 0.5f, 0.5f);
  const Checkpoint ck = in_memory({gen::RawTensor{"w", "F8_E4M3", {5, 6}, w8}, f32_tensor("w_scale_inv", {3, 2}, s_block),
                                   f32_tensor("row_scale", {5, 1}, s_row), f32_tensor("one_scale", {}, {0.75f})});
  float dec[30];
  decode_to_f32(DType::F8_E4M3, w8.data(), 30, dec);
  auto with = [&](const char* scale, int64_t br, int64_t bc) {
    Recipe r;
    r.sources = {SourceTensor::of(ck, *ck.find("w")), SourceTensor::of(ck, *ck.find(scale))};
    r.then(Step::dequant(0, 1, br, bc));
    r.check("out", 5, 6);
    return realize(ck, r, 0, 5);
  };
  const std::vector<float> b = with("w_scale_inv", 2, 4), rw = with("row_scale", 1, 6), t = with("one_scale", 5, 6);
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t c = 0; c < 6; ++c) {
      const float x = dec[r * 6 + c];
      EXPECT_EQ(b[size_t(r * 6 + c)], x * s_block[size_t(r / 2 * 2 + c / 4)]);
      EXPECT_EQ(rw[size_t(r * 6 + c)], x * s_row[size_t(r)]);
      EXPECT_EQ(t[size_t(r * 6 + c)], x * 0.75f);
    }
  // a chunk of rows 3..4 reads scale row 1..2 of the block scales, nothing more
  Recipe r;
  r.sources = {SourceTensor::of(ck, *ck.find("w")), SourceTensor::of(ck, *ck.find("w_scale_inv"))};
  r.then(Step::dequant(0, 1, 2, 4)).check("out", 5, 6);
  const std::vector<RowSpan> spans = r.reads(3, 5);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[1].source, 1);
  EXPECT_EQ(spans[1].row0, 1);
  EXPECT_EQ(spans[1].row1, 3);
  // a scale tensor of the wrong shape is named
  const std::string e = error_of([&] {
    Recipe x;
    x.sources = {SourceTensor::of(ck, *ck.find("w")), SourceTensor::of(ck, *ck.find("row_scale"))};
    x.then(Step::dequant(0, 1, 2, 4)).check("out", 5, 6);
  });
  EXPECT_NE(e.find("tensor 'row_scale'"), std::string::npos) << e;
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  // a scaled dtype without its scale is refused, naming the tensor
  const std::string f = error_of([&] { Recipe::of(ck, *ck.find("w")).check("out", 5, 6); });
  EXPECT_NE(f.find("tensor 'w'"), std::string::npos) << f;
  EXPECT_NE(f.find("F8_E4M3"), std::string::npos) << f;
}

TEST(Recipes, PassThroughBlocksAreCopiedAndDecodeAsTheirType) {
  // Q8_0 blocks split the way a quantized checkpoint may store them: scales in one tensor,
  // values in another. The recipe joins them block by block into ggml's {d, qs[32]}.
  const int64_t rows = 3, cols = 64, blocks = rows * cols / 32;
  std::vector<float> x(size_t(rows * cols));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  std::vector<uint8_t> q(size_t(blocks * ggml::kQ8_0BlockBytes));
  ggml::quantize_row_q8_0(x.data(), q.data(), rows * cols);
  std::vector<uint8_t> d, qs;
  for (int64_t b = 0; b < blocks; ++b) {
    d.insert(d.end(), q.begin() + b * 34, q.begin() + b * 34 + 2);
    qs.insert(qs.end(), q.begin() + b * 34 + 2, q.begin() + b * 34 + 34);
  }
  const Checkpoint ck = in_memory({gen::RawTensor{"w.d", "U8", {rows, 2, 2}, d}, gen::RawTensor{"w.qs", "U8", {rows, 2, 32}, qs}});
  PlanItem it;
  it.name = "w";
  it.shape = {rows, cols};
  it.type = QType::Q8_0;
  it.recipe.sources = {SourceTensor::of(ck, *ck.find("w.d")), SourceTensor::of(ck, *ck.find("w.qs"))};
  it.recipe.then(Step::pass_through(QType::Q8_0));
  finish_item_geometry(it);
  ConversionPlan plan;
  plan.files.push_back({"", {}, {}, it.size.total()});
  plan.items.push_back(it);
  MemorySink sink;
  PipelineOptions po;
  po.threads = 1;
  po.chunk_bytes = 64 * 4;  // a row a chunk
  run_plan(plan, ck.sources(), sink, po, nullptr);
  EXPECT_EQ(sink.bytes(), q);  // ggml's blocks, byte for byte
  std::vector<float> back(x.size());
  ggml::dequantize_row_q8_0(q.data(), back.data(), rows * cols);
  EXPECT_EQ(realize(ck, it.recipe, 0, rows), back);
  // written as another type it would have to be decoded first: refused
  it.type = QType::Q4_0;
  const std::string e = error_of([&] { finish_item_geometry(it); });
  EXPECT_NE(e.find("Q8_0 blocks"), std::string::npos) << e;
}

TEST(Recipes, AStackedTensorStreamsExpertByExpertInBoundedMemory) {
  // 64 experts of [32, 256] bf16 stacked into one tensor: the pipeline's buffers hold a chunk's
  // worth, not the tensor, and the bytes equal the experts' own quantized one after another.
  const int64_t E = 64, R = 32, C = 256;
  std::vector<gen::RawTensor> ts;
  std::mt19937 rng(9);
  std::vector<std::vector<float>> want;
  for (int64_t e = 0; e < E; ++e) {
    gen::RawTensor t{"e." + std::to_string(e), "BF16", {R, C}, std::vector<uint8_t>(size_t(R * C * 2))};
    std::vector<float> v(size_t(R * C));
    for (int64_t i = 0; i < R * C; ++i) {
      const uint16_t h = uint16_t(0x3c00 + rng() % 0x400 - 0x200) | (rng() & 1 ? 0x8000 : 0);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
      v[size_t(i)] = bf16_to_f32(h);
    }
    want.push_back(v);
    ts.push_back(std::move(t));
  }
  const Checkpoint ck = in_memory(ts);
  PlanItem it;
  it.name = "blk.0.ffn_down_exps.weight";
  it.shape = {E, R, C};
  it.type = QType::Q8_0;
  for (int64_t e = 0; e < E; ++e) it.recipe.sources.push_back(SourceTensor::of(ck, *ck.find("e." + std::to_string(e))));
  it.recipe.then(Step::stack());
  finish_item_geometry(it);
  EXPECT_EQ(it.rows, E * R);
  EXPECT_EQ(it.cols, C);
  ConversionPlan plan;
  plan.files.push_back({"", {}, {}, it.size.total()});
  plan.items.push_back(it);
  MemorySink sink;
  PipelineOptions po;
  po.threads = 2;
  po.chunk_bytes = 64 << 10;  // 64 KiB of f32 a chunk: two experts
  ConversionRun run(plan, ck.sources(), po);
  EXPECT_LT(run.buffer_bytes(), 4 * (64 << 10) * 2);  // slots x (raw + f32 + out), far below the tensor's 2 MiB
  ChunkResult c;
  while (run.next(c))
    for (int i = 0; i < c.n_pieces; ++i) sink.write_at(c.pieces[i].offset, c.pieces[i].data, c.pieces[i].size);
  const int64_t expert_bytes = R * C / 32 * ggml::kQ8_0BlockBytes;
  ASSERT_EQ(int64_t(sink.bytes().size()), E * expert_bytes);
  for (int64_t e = 0; e < E; e += 21) {
    std::vector<uint8_t> q(static_cast<size_t>(expert_bytes));
    ggml::quantize_row_q8_0(want[size_t(e)].data(), q.data(), R * C);
    EXPECT_TRUE(std::equal(q.begin(), q.end(), sink.bytes().begin() + e * expert_bytes)) << "expert " << e;
  }
}

TEST(Recipes, WrongRecipesAreRefusedNamingTheTensor) {
  const Checkpoint ck = in_memory({f32_tensor("a", {4, 6}, iota(24)), f32_tensor("b", {3, 6}, iota(18)),
                                   f32_tensor("c", {4, 5}, iota(20))});
  auto fails = [&](Recipe r, int64_t rows, int64_t cols) {
    return error_of([&] { r.check("out.weight", rows, cols); });
  };
  Recipe stack;
  stack.sources = {SourceTensor::of(ck, *ck.find("a")), SourceTensor::of(ck, *ck.find("b"))};
  stack.then(Step::stack());
  EXPECT_NE(fails(stack, 7, 6).find("tensor 'b'"), std::string::npos);  // 3 rows stacked with 4
  Recipe concat;
  concat.sources = {SourceTensor::of(ck, *ck.find("a")), SourceTensor::of(ck, *ck.find("c"))};
  concat.then(Step::concat_rows());
  EXPECT_NE(fails(concat, 8, 6).find("tensor 'c'"), std::string::npos);  // rows of 5 cannot join rows of 6
  EXPECT_NE(fails(Recipe::of(ck, *ck.find("a")).then(Step::slice_rows(0, 2, 2, 2)), 2, 6).find("cannot take"),
            std::string::npos);
  EXPECT_NE(fails(Recipe::of(ck, *ck.find("a")).then(Step::permute_heads(0, 4)), 4, 6).find("heads"),
            std::string::npos);  // heads of one row: no RoPE pairs
  EXPECT_NE(fails(Recipe::of(ck, *ck.find("a")), 6, 4).find("needs 6 of 4"), std::string::npos);
}
