// Finite weights too large for a type's 16-bit scales (or for F16 itself): the encoders report
// an infinite error, so a conversion refuses the tensor with one error line naming the file and
// the tensor instead of writing rows that decode to Inf or NaN; and --verify fails a file that
// holds such rows even when the writer's own arithmetic would reproduce them.
#include <gtest/gtest.h>

#include <cmath>

#include "formats/convert.h"
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
    if (t.id == QType::Int8Group) continue;  // f32 scales: any finite value fits
    SCOPED_TRACE(t.name);
    PlanItem it;
    it.shape = {2, 256};
    it.type = t.id;
    it.group_size = 64;
    finish_item_geometry(it);
    std::vector<float> w(512, 0.25f);
    // Finite, and past what any 16-bit scale can hold (past F16 too); BF16 overflows only at
    // the top of the float range. (Far larger values make some K-quants zero the block: a huge
    // but finite error, reported as such.)
    w[300] = t.id == QType::BF16 ? 3.4028235e38f : 1e12f;
    std::vector<uint8_t> bytes(size_t(it.size.total()));
    const RowRegions rr = row_regions(it, 0, it.rows);
    uint8_t* region[kMaxRegions] = {bytes.data(), bytes.data() + (rr.n > 1 ? rr.region[0].bytes : 0)};
    EXPECT_TRUE(std::isinf(encode_rows(it, w.data(), it.rows, region)));
    w[300] = 1000.0f;  // and an ordinary value is fine
    EXPECT_TRUE(std::isfinite(encode_rows(it, w.data(), it.rows, region)));
  }
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
  for (const char* type : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K_M", "Q6_K", "Q2_K"}) {
    SCOPED_TRACE(type);
    expect_refused({"--type", type}, path("out.gguf"), "too large for");
  }
  expect_refused({"--scheme", "q8"}, path("out.gguf-lite"), "too large for Q8_per_channel");
  // F32 stores it, and so does LEAP v2 (f32 group scales).
  const auto f32 = run_cli({path("ok.gguf"), "--model", path("model"), "--type", "F32", "--no-vocab", "--quiet"}, dir);
  EXPECT_EQ(f32.exit_code, 0) << f32.describe();
  const auto leap = run_cli({path("ok.bin"), "--model", path("model"), "--version", "2", "--quiet"}, dir);
  EXPECT_EQ(leap.exit_code, 0) << leap.describe();
}

TEST_F(OverflowCli, Q4GroupAndF16OverflowAreNamedAsSuch) {
  write_model(7.0e5f);
  expect_refused({"--scheme", "q4"}, path("out.gguf-lite"), "too large for Q4_per_group_64");
  write_model(70144.0f);  // a finite value past F16's 65504: it is not NaN or Inf
  expect_refused({"--type", "F16"}, path("out.gguf"), "70144");
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
    sink.write_at(0, pc.plan.header.data(), pc.plan.header.size());
    for (const FixedPiece& f : pc.plan.fixed) sink.write_at(f.offset, f.bytes.data(), f.bytes.size());
    for (const PlanItem& it : pc.plan.items) {  // every tensor encoded whatever the error
      const std::vector<float> w = ck.read_f32(*ck.find(it.source_name), it.permute_heads);
      std::vector<uint8_t> b(size_t(it.size.total()));
      const RowRegions rr = row_regions(it, 0, it.rows);
      uint8_t* region[kMaxRegions] = {b.data(), b.data() + (rr.n > 1 ? rr.region[0].bytes : 0)};
      const float err = encode_rows(it, w.data(), it.rows, region);
      if (it.source_name == kBig) {
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

}  // namespace
