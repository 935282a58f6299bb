// Finite weights too large for a type's 16-bit scales (or for F16 itself): the encoders report
// an infinite error, so a conversion refuses the tensor with one error line naming the file and
// the tensor instead of writing rows that decode to Inf or NaN; and --verify fails a file that
// holds such rows even when the writer's own arithmetic would reproduce them.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "formats/convert.h"
#include "ggml_ref.h"
#include "quant/ggml_quants.h"
#include "quant/codec.h"
#include "quant/quantize.h"
#include "check/verify.h"
#include "test_support.h"

using namespace leapconv;
using tsup::run_cli;

namespace {

const char* kBig = "model.layers.1.mlp.down_proj.weight";

// Every type with 16-bit scales, and F16 / BF16 themselves, refuses a row holding a huge value.
TEST(Overflow, EveryScaledTypeReportsAnInfiniteErrorForAHugeFiniteValue) {
  for (const QuantType& t : quant_types()) {
    if (!t.quantizes && t.id != QType::F16 && t.id != QType::BF16) continue;
    // f32 scales, E8M0 exponents (2^-128 .. 2^127): any finite value fits (below)
    if (t.id == QType::Int8Group || t.id == QType::MXFP4) continue;
    SCOPED_TRACE(t.name);
    PlanItem it;
    it.shape = {2, 256};
    it.type = t.id;
    it.group_size = 64;
    finish_item_geometry(it);
    std::vector<float> w(512, 0.25f);
    // IQ2_XXS, IQ2_XS and IQ1_S are written with importance weights only (their encode refuses
    // every tensor): through their encode_weighted
    if (t.id == QType::IQ2_XXS || t.id == QType::IQ2_XS || t.id == QType::IQ1_S)
      it.importance = std::make_shared<const std::vector<float>>(256, 1.0f);
    // Finite, and past what any 16-bit scale can hold (past F16 too); BF16 overflows only at
    // the top of the float range. (Far larger values make some K-quants zero the block: a huge
    // but finite error, reported as such.)
    w[300] = t.id == QType::BF16 ? 3.4028235e38f : 1e12f;
    std::vector<uint8_t> bytes(size_t(it.size.total()));
    const RowRegions rr = row_regions(it, 0, it.rows);
    uint8_t* region[kMaxRegions] = {bytes.data(), bytes.data() + (rr.n > 1 ? rr.region[0].bytes : 0)};
    EXPECT_TRUE(std::isinf(encode_rows(it, w.data(), 0, it.rows, region)));
    w[300] = 1000.0f;  // and an ordinary value is fine (NVFP4 holds up to 2688)
    EXPECT_TRUE(std::isfinite(encode_rows(it, w.data(), 0, it.rows, region)));
  }
}

// MXFP4's scale is a power of two up to 2^124 at the largest floats: no finite row overflows it
// (the largest level, 12 · 2^124, is finite), only NaN and Inf are refused.
TEST(Overflow, Mxfp4TakesEveryFiniteValue) {
  PlanItem it;
  it.shape = {2, 256};
  it.type = QType::MXFP4;
  finish_item_geometry(it);
  std::vector<uint8_t> bytes(size_t(it.size.total()));
  uint8_t* region[kMaxRegions] = {bytes.data(), nullptr};
  for (float big : {1e12f, FLT_MAX, -FLT_MAX}) {
    std::vector<float> w(512, 0.25f);
    w[300] = big;
    EXPECT_TRUE(std::isfinite(encode_rows(it, w.data(), 0, it.rows, region))) << big;
  }
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    std::vector<float> w(512, 0.25f);
    w[300] = bad;
    EXPECT_TRUE(std::isinf(encode_rows(it, w.data(), 0, it.rows, region))) << bad;
  }
}

// NVFP4's largest scale (UE4M3 448, read 224) times its largest level (12) is 2688: a row up to
// it is written as ggml writes it, a row past it (which ggml would clip) refused.
TEST(Overflow, Nvfp4RefusesWhatItsScaleWouldClip) {
  PlanItem it;
  it.shape = {1, 256};
  it.type = QType::NVFP4;
  finish_item_geometry(it);
  std::vector<uint8_t> bytes(size_t(it.size.total()));
  uint8_t* region[kMaxRegions] = {bytes.data(), nullptr};
  std::vector<float> w(256, 0.25f);
  w[70] = -2688.0f;
  EXPECT_EQ(encode_rows(it, w.data(), 0, 1, region), 0.25f);  // (0.25 reads 0 under scale 224)
  std::vector<float> back(256);
  quant_type(QType::NVFP4).decode(std::array<const uint8_t*, 1>{bytes.data()}.data(), 1, 256, 0, back.data());
  EXPECT_EQ(back[70], -2688.0f);
  w[70] = std::nextafter(-2688.0f, -INFINITY);
  EXPECT_TRUE(std::isinf(encode_rows(it, w.data(), 0, 1, region)));
}

TEST(Overflow, ThresholdsOfTheF16Scales) {
  // Q8 per channel: scale = f16(max / 127); 65504 * 127 = 8319008 is the largest that fits.
  float w[64] = {};
  uint16_t s = 0;
  int8_t q[64];
  w[5] = 8.0e6f;
  EXPECT_TRUE(std::isfinite(quantize_q8_rows(w, 1, 64, &s, q)));
  w[5] = 1.0e7f;
  EXPECT_TRUE(std::isinf(quantize_q8_rows(w, 1, 64, &s, q)));
  // Q4 per group of 64: scale = f16(max / 7).
  uint8_t packed[32];
  w[5] = 4.0e5f;
  EXPECT_TRUE(std::isfinite(quantize_q4_rows(w, 1, 64, &s, packed)));
  w[5] = 5.0e5f;
  EXPECT_TRUE(std::isinf(quantize_q4_rows(w, 1, 64, &s, packed)));
}

// Q3_K and Q6_K weigh values by x^2: past kQ3_KSearchLimit / kQ6_KSearchLimit ggml's own search
// (the oracle, tests/ggml_ref) sums Inf * 0 = NaN and writes a finite, meaningless block that no
// f16 check sees; one float below, the same block has an Inf f16 scale, caught as before.
TEST(Overflow, Q3KAndQ6KSearchLimitsAreWhereGgmlsOwnSearchOverflows) {
  const float c = ggml::kCubeOverflow, below_c = std::nextafter(c, 0.0f);
  EXPECT_TRUE(std::isinf((c * c) * c));  // the smallest float whose cube overflows
  EXPECT_TRUE(std::isfinite((below_c * below_c) * below_c));
  struct Case {
    QType type;
    int ggml_type, nmax, d_at;
    float limit;
  };
  for (const Case& k : {Case{QType::Q3_K, 11, 4, 108, ggml::kQ3_KSearchLimit},
                        Case{QType::Q6_K, 14, 32, 208, ggml::kQ6_KSearchLimit}}) {
    SCOPED_TRACE(quant_name(k.type));
    EXPECT_EQ(k.limit, 2 * k.nmax * c);
    const int64_t bytes = ggml_ref_block_bytes(k.ggml_type);
    // The oracle on one block {max, second}: is its f16 d Inf, and how far does it read back?
    auto oracle = [&](float max, float second, bool* d_inf) {
      std::vector<float> x(256, 0.0f), back(256);
      x[0] = max;
      x[1] = second;
      std::vector<uint8_t> y(static_cast<size_t>(bytes));
      ggml_ref_quantize_row(k.ggml_type, x.data(), y.data(), 256);
      ggml_ref_dequantize_row(k.ggml_type, y.data(), back.data(), 256);
      *d_inf = ((y[size_t(k.d_at)] | (y[size_t(k.d_at) + 1] << 8)) & 0x7c00) == 0x7c00;
      float err = 0.0f;
      for (int i = 0; i < 256; ++i) err = std::fmax(err, std::fabs(x[i] - back[i]));
      return err;
    };
    PlanItem it;
    it.shape = {1, 256};
    it.type = k.type;
    finish_item_geometry(it);
    std::vector<uint8_t> out(size_t(it.size.total()));
    uint8_t* region[kMaxRegions] = {out.data(), nullptr};
    auto ours = [&](float max, float second) {
      std::vector<float> x(256, 0.0f);
      x[0] = max;
      x[1] = second;
      return encode_rows(it, x.data(), 0, 1, region);
    };
    bool d_inf = true;
    // At the limit, c sits at level 0: ggml's d is finite and the block means nothing.
    const float err = oracle(k.limit, c, &d_inf);
    EXPECT_FALSE(d_inf);
    EXPECT_GE(err, 0.75f * k.limit);
    EXPECT_TRUE(std::isinf(ours(k.limit, c)));
    // One float below, c has level 1 and the largest level-0 value has a finite cube: no NaN,
    // and the oracle's d is Inf (refused as any scale overflow).
    const float below = std::nextafter(k.limit, 0.0f);
    for (const float second : {c, below / float(2 * k.nmax)}) {
      oracle(below, second, &d_inf);
      EXPECT_TRUE(d_inf) << second;
      EXPECT_TRUE(std::isinf(ours(below, second))) << second;
    }
  }
}

// Whatever the magnitude, every quantized type either stores a block that reads back within
// 3/4 of its largest value or refuses it: never a finite, meaningless block (ggml's search
// overflowing into a zero block) reported as a large but finite error.
TEST(Overflow, NoTypeStoresAMeaninglessBlockForAnyFiniteValue) {
  std::vector<float> magnitudes;
  for (double m = 1e3; m < double(FLT_MAX); m *= 1.3) magnitudes.push_back(float(m));
  magnitudes.push_back(FLT_MAX);
  for (const QuantType& t : quant_types()) {
    if (!t.quantizes || t.id == QType::Int8Group) continue;  // (LEAP's f32 scales hold any finite value)
    // Q1_0 stores signs and d = mean |x|: a lone large value is never within 3/4 of itself, at
    // any magnitude (its huge ones are refused by the f16 d like the other types')
    if (t.id == QType::Q1_0) continue;
    // IQ1_M (ternary grid points under 3-bit sub-block scales, fit by ggml to the whole block)
    // reads a small value next to a lone large one back as large as that one (0.36 as 1446 for
    // max 1300): ggml's bytes at any magnitude, not an overflow (its f16 d refuses the huge ones)
    if (t.id == QType::IQ1_M) continue;
    SCOPED_TRACE(t.name);
    PlanItem it;
    it.shape = {1, 256};
    it.type = t.id;
    it.group_size = 64;
    finish_item_geometry(it);
    std::vector<uint8_t> bytes(size_t(it.size.total()));
    const RowRegions rr = row_regions(it, 0, it.rows);
    uint8_t* region[kMaxRegions] = {bytes.data(), bytes.data() + (rr.n > 1 ? rr.region[0].bytes : 0)};
    int bad = 0;
    for (const float m : magnitudes)
      for (int pattern = 0; pattern < 5; ++pattern) {
        std::vector<float> w(256);
        for (int i = 0; i < 256; ++i) w[i] = 0.01f * float((i * 37) % 101 - 50);
        if (pattern == 4)
          for (int i = 0; i < 256; ++i) w[i] = (i & 1 ? m : -m) * (0.5f + float(i % 7) / 14);
        w[37] = m;
        if (pattern == 1) w[38] = m / 70;   // a level-0 value whose cube overflows first (Q6_K)
        if (pattern == 2) w[38] = -m / 10;  // the same for Q3_K
        if (pattern == 3) w[100] = m / 1000;
        const float err = encode_rows(it, w.data(), 0, 1, region);
        if (!(std::isinf(err) || err <= 0.75f * m) && bad++ < 3)
          ADD_FAILURE() << "max " << m << ", pattern " << pattern << ": error " << err << " accepted";
      }
    EXPECT_EQ(bad, 0);
  }
}

class OverflowCli : public tsup::TempDirTest {
 protected:
  // An f32 checkpoint with one huge weight in kBig.
  void write_model(float value) {
    gen::Spec spec;
    spec.dtype = "f32";
    spec.dim = 64;
    spec.hidden = 256;  // rows of 256: every K-quant takes them
    gen::write_checkpoint(path("model"), spec);
    tsup::Shard s = tsup::read_shard(path("model/model.safetensors"));
    for (gen::RawTensor& t : s.tensors)
      if (t.name == kBig) std::memcpy(t.bytes.data() + 4 * 77, &value, 4);
    gen::write_safetensors(path("model/model.safetensors"), s.tensors);
  }
  void expect_refused(const std::vector<std::string>& extra, const std::string& out, const std::string& what) {
    std::vector<std::string> args = {out, "--model", path("model"), "--quiet", "--no-vocab"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args, dir);
    ASSERT_FALSE(r.signaled) << r.describe();
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
    const std::string line = r.error_lines()[0];
    for (const std::string& n : {std::string("model.safetensors"), std::string(kBig), what})
      EXPECT_NE(line.find(n), std::string::npos) << "'" << n << "' not in: " << line;
    EXPECT_FALSE(tsup::exists(out));
    EXPECT_FALSE(tsup::exists(out + ".partial"));
  }
};

TEST_F(OverflowCli, GgufAndGgufLiteRefuseAWeightTheirScalesCannotHold) {
  write_model(1.0e10f);  // (1e7 already overflows Q8_0's d; the K-quants' scales go further)
  // llama-quantize's types read the converter's F16 file (an f32 checkpoint's --outtype auto),
  // where 1e10 is already Inf: named as such; each type's own scale overflow is the next test's
  for (const char* type : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K_M", "Q6_K", "Q2_K"}) {
    SCOPED_TRACE(type);
    expect_refused({"--type", type}, path("out.gguf"), "holds 1e+10 (row 0), past F16's largest value: llama-quantize reads the converter's F16 file");
  }
  expect_refused({"--outtype", "Q8_0"}, path("out.gguf"), "too large for");
  expect_refused({"--scheme", "q8"}, path("out.gguf-lite"), "too large for Q8_per_channel");
  // F32 stores it, and so does LEAP v2 (f32 group scales).
  const auto f32 = run_cli({path("ok.gguf"), "--model", path("model"), "--outtype", "F32", "--no-vocab", "--quiet"}, dir);
  EXPECT_EQ(f32.exit_code, 0) << f32.describe();
  const auto leap = run_cli({path("ok.bin"), "--model", path("model"), "--version", "2", "--quiet"}, dir);
  EXPECT_EQ(leap.exit_code, 0) << leap.describe();
}

// ~1e20: past every K-quant's f16 scales and past where Q3_K's and Q6_K's float search overflows
// (ggml would write a zero block and the run exited 0); refused like any scale overflow, naming
// the value and its row. FLT_MAX too.
TEST_F(OverflowCli, KQuantsRefuseValuesPastWhereTheirSearchOverflows) {
  for (const float value : {1.0e20f, FLT_MAX}) {
    write_model(value);
    char v[32];
    std::snprintf(v, sizeof v, "holds %g (row ", double(value));
    for (const char* type : {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"}) {
      SCOPED_TRACE(std::string(type) + " " + v);
      std::string rules = R"([{"pattern": "blk.1.ffn_down.weight", "scheme": ")" + std::string(type) + R"("}])";
      gen::write_text(path("rules.json"), rules);
      expect_refused({"--outtype", "Q8_0", "--schemes", path("rules.json")}, path("out.gguf"), v);
    }
  }
}

TEST_F(OverflowCli, Q4GroupAndF16OverflowAreNamedAsSuch) {
  write_model(7.0e5f);
  expect_refused({"--scheme", "q4"}, path("out.gguf-lite"), "too large for Q4_per_group_64");
  write_model(70144.0f);  // a finite value past F16's 65504: it is not NaN or Inf
  expect_refused({"--outtype", "F16"}, path("out.gguf"), "70144");
  expect_refused({"--scheme", "f16"}, path("out.gguf-lite"), "too large for F16");
}

// A file written the way the old writer did (ggml's bytes, the overflowed scale kept): verify
// must not call it a PASS, although decode(encode(source)) gives the same NaN/Inf rows.
TEST_F(OverflowCli, VerifyFailsAFileWhoseRowsReadBackAsInfOrNaN) {
  write_model(1.0e7f);
  CheckpointFiles files;
  files.label = path("model");
  files.config_json = tsup::slurp_text(path("model/config.json"));
  files.shards.push_back(
      std::make_unique<MemorySource>(path("model/model.safetensors"), tsup::slurp(path("model/model.safetensors"))));
  const Checkpoint ck = open_checkpoint(std::move(files));
  for (const char* fmt : {"gguf", "gguf-lite"}) {
    SCOPED_TRACE(fmt);
    ConvertOptions opt;
    opt.format = fmt;
    opt.vocab.allow_no_vocab = true;
    opt.gguf.default_scheme = std::string(fmt) == "gguf" ? QType::Q8_0 : QType::Q4Group64;
    const PlannedConversion pc = plan_conversion(ck, opt);
    MemorySink sink;
    sink.write_at(0, pc.plan.files[0].header.data(), pc.plan.files[0].header.size());
    for (const FixedPiece& f : pc.plan.files[0].fixed) sink.write_at(f.offset, f.bytes.data(), f.bytes.size());
    for (const PlanItem& it : pc.plan.items) {  // every tensor encoded whatever the error
      const std::vector<float> w = realize_rows(it.recipe, 0, it.rows, ck.sources());
      std::vector<uint8_t> b(size_t(it.size.total()));
      const RowRegions rr = row_regions(it, 0, it.rows);
      uint8_t* region[kMaxRegions] = {b.data(), b.data() + (rr.n > 1 ? rr.region[0].bytes : 0)};
      const float err = encode_rows(it, w.data(), 0, it.rows, region);
      if (it.source_name() == kBig) {
        EXPECT_TRUE(std::isinf(err));
        if (std::string(fmt) == "gguf-lite") {  // the old Q4 encoder wrote the overflowed f16 scale and went on
          std::fill(b.begin(), b.end(), 0);
          uint16_t inf = 0x7c00;
          std::memcpy(b.data() + 2 * (77 / 64), &inf, 2);
        }
      }
      sink.write_at(it.offset, b.data(), b.size());
    }
    MemorySource file("written." + std::string(fmt), sink.bytes());
    const VerifyReport rep = verify_file(file, ck);
    EXPECT_FALSE(rep.ok);
    bool named = false;
    for (const TensorCheck& c : rep.tensors)
      if (c.source_name == kBig) {
        named = true;
        EXPECT_GT(c.nonfinite, 0);
        EXPECT_TRUE(std::isinf(c.max_vs_fake_quant));
      } else {
        EXPECT_EQ(c.nonfinite, 0) << c.name;
      }
    EXPECT_TRUE(named);
  }
}

// A file holding the meaningless block ggml's search writes for 1e20 (as the old writer kept
// it): decode(encode(source)) reproduces it exactly, yet --verify must fail, naming the tensor.
TEST_F(OverflowCli, VerifyFailsAFileHoldingABlockGgmlsSearchOverflowedInto) {
  write_model(1.0e20f);
  CheckpointFiles files;
  files.label = path("model");
  files.config_json = tsup::slurp_text(path("model/config.json"));
  files.shards.push_back(
      std::make_unique<MemorySource>(path("model/model.safetensors"), tsup::slurp(path("model/model.safetensors"))));
  const Checkpoint ck = open_checkpoint(std::move(files));
  ConvertOptions opt;
  opt.format = "gguf";
  opt.vocab.allow_no_vocab = true;
  opt.gguf.default_scheme = QType::Q8_0;
  opt.gguf.rules = {{"blk.1.ffn_down.weight", QType::Q6_K}};
  const PlannedConversion pc = plan_conversion(ck, opt);
  MemorySink sink;
  sink.write_at(0, pc.plan.files[0].header.data(), pc.plan.files[0].header.size());
  for (const FixedPiece& f : pc.plan.files[0].fixed) sink.write_at(f.offset, f.bytes.data(), f.bytes.size());
  std::string big_name;
  for (const PlanItem& it : pc.plan.items) {
    const std::vector<float> w = realize_rows(it.recipe, 0, it.rows, ck.sources());
    std::vector<uint8_t> b(size_t(it.size.total()));
    uint8_t* region[kMaxRegions] = {b.data(), nullptr};
    if (it.source_name() == kBig) {  // ggml's bytes, row by row, as llama-quantize writes them
      ASSERT_EQ(it.type, QType::Q6_K);
      big_name = it.name;
      const int64_t row_bytes = it.cols / 256 * ggml::kQ6_KBlockBytes;
      for (int64_t r = 0; r < it.rows; ++r) ggml::quantize_row_q6_K(w.data() + r * it.cols, b.data() + r * row_bytes, it.cols);
      std::vector<float> back(w.size());
      ggml::dequantize_row_q6_K(b.data(), back.data(), int64_t(back.size()));
      for (const float f : back) ASSERT_TRUE(std::isfinite(f));  // no Inf or NaN to catch
      EXPECT_TRUE(std::isinf(encode_rows(it, w.data(), 0, it.rows, region)));  // what the writer says now
    } else {
      ASSERT_TRUE(std::isfinite(encode_rows(it, w.data(), 0, it.rows, region))) << it.name;
    }
    sink.write_at(it.offset, b.data(), b.size());
  }
  ASSERT_FALSE(big_name.empty());
  {
    MemorySource file("written.gguf", sink.bytes());
    const VerifyReport rep = verify_file(file, ck);
    EXPECT_FALSE(rep.ok);
    for (const TensorCheck& c : rep.tensors) {
      EXPECT_EQ(c.unencodable, c.source_name == kBig) << c.name;
      if (c.source_name == kBig) EXPECT_TRUE(std::isinf(c.max_vs_fake_quant));
    }
  }
  gen::write_file(path("written.gguf"), sink.bytes());
  const auto r = run_cli({"--verify", path("written.gguf"), "--model", path("model")}, dir);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.out.find(big_name + ": the source holds values Q6_K cannot store"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.describe();
}

}  // namespace
