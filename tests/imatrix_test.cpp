// --imatrix: llama-imatrix's files read as llama-quantize reads them (both formats, every
// refusal), and applied as it applies them: each quantized tensor's bytes are held to ggml's own
// quantize_<type>(..., quant_weights) (ggml-quants.c from the bundle) run on the file's source
// values with the weights this test works out from the file (imatrix_file.h).
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "core/byte_io.h"
#include "ggml_ref.h"
#include "gguf3_reader.h"
#include "imatrix_file.h"
#include "source/imatrix.h"
#include "test_support.h"

using namespace leapconv;

namespace {

Imatrix read_bytes(const std::vector<uint8_t>& b, const std::string& name = "m.imatrix") {
  MemorySource src(name, b);
  return read_imatrix(src, name);
}

void expect_weights(const Imatrix& im, const timx::Entry& e, bool legacy) {
  const ImatrixEntry* got = im.find(e.name);
  ASSERT_NE(got, nullptr) << e.name;
  const std::vector<float> want = timx::weights(e, legacy);
  ASSERT_EQ(got->weights->size(), want.size()) << e.name;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ((*got->weights)[i], want[i]) << e.name << " [" << i << "]";
}

TEST(ImatrixRead, LegacyDat) {
  const std::vector<timx::Entry> es = {timx::make_entry("blk.0.attn_q.weight", 64, 1, 1, 300),
                                       timx::make_entry("blk.0.ffn_down.weight", 160, 1, 2, 0),  // ncall 0: as stored
                                       timx::make_entry("output.weight", 64, 1, 3, 7)};
  const Imatrix im = read_bytes(timx::legacy_file(es, 42, "wiki.train.raw"));
  EXPECT_TRUE(im.legacy);
  EXPECT_EQ(im.chunk_count, 42);
  ASSERT_EQ(im.datasets.size(), 1u);
  EXPECT_EQ(im.datasets[0], "wiki.train.raw");
  EXPECT_EQ(im.entries.size(), 3u);
  for (const auto& e : es) expect_weights(im, e, true);
  // the trailer is optional
  const Imatrix bare = read_bytes(timx::legacy_file(es, -1, ""));
  EXPECT_EQ(bare.chunk_count, 0);
  EXPECT_TRUE(bare.datasets.empty());
}

TEST(ImatrixRead, GgufWithExperts) {
  const std::vector<timx::Entry> es = {timx::make_entry("blk.0.attn_k.weight", 64, 1, 4),
                                       timx::make_entry("blk.0.ffn_down_exps.weight", 32, 4, 5)};  // expert 1 never seen
  const Imatrix im = read_bytes(timx::gguf_file(es, 10, 512, {"calibration.txt", "more.txt"}));
  EXPECT_FALSE(im.legacy);
  EXPECT_EQ(im.chunk_count, 10);
  EXPECT_EQ(im.chunk_size, 512);
  EXPECT_EQ(im.datasets, (std::vector<std::string>{"calibration.txt", "more.txt"}));
  for (const auto& e : es) expect_weights(im, e, false);
  EXPECT_EQ(im.find("blk.0.ffn_down_exps.weight")->slices, 4);
  EXPECT_EQ((*im.find("blk.0.ffn_down_exps.weight")->weights)[32], 1.0f);  // the unseen expert
  // the lookup by tensor shape: cols x experts
  std::string why;
  EXPECT_NE(importance_for(im, "blk.0.ffn_down_exps.weight", {4, 64, 32}, &why), nullptr);
  EXPECT_EQ(importance_for(im, "blk.0.ffn_down_exps.weight", {64, 32}, &why), nullptr);
  EXPECT_NE(why.find("has 128 importance weights"), std::string::npos) << why;  // the tensor takes 32 x 1
  EXPECT_EQ(importance_for(im, "blk.9.attn_k.weight", {64, 64}, &why), nullptr);
  EXPECT_TRUE(why.empty());
}

// Every malformed file is refused with one error naming the file and what is wrong.
TEST(ImatrixRead, RefusesMalformedFiles) {
  const auto e = timx::make_entry("blk.0.attn_q.weight", 8, 1, 9);
  auto legacy = timx::legacy_file({e}, 1, "d");
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* expect;
  };
  std::vector<Case> cases;
  cases.push_back({"empty", {}, "truncated"});
  cases.push_back({"no entries", timx::legacy_file({}, 1, "d"), "entries"});
  {
    auto b = legacy;  // name length -5
    int32_t v = -5;
    std::memcpy(b.data() + 4, &v, 4);
    cases.push_back({"negative name length", b, "name of -5 bytes"});
  }
  {
    auto b = legacy;  // nval huge
    int32_t v = 1 << 30;
    std::memcpy(b.data() + 4 + 4 + e.name.size() + 4, &v, 4);
    cases.push_back({"values past the end", b, "1073741824 values"});
  }
  cases.push_back({"cut in the values", std::vector<uint8_t>(legacy.begin(), legacy.begin() + 40), "8 values; 5 bytes follow"});
  cases.push_back({"duplicate", timx::legacy_file({e, e}, 1, "d"), "appears twice"});
  {
    auto bad = e;
    bad.sums[3] = INFINITY;
    cases.push_back({"non-finite weight", timx::legacy_file({bad}, 1, "d"), "not finite"});
  }
  cases.push_back({"GGUF without metadata", timx::gguf_file({e}, 1, 512, {"d"}, false), "imatrix.datasets"});
  {
    auto bad = e;
    bad.counts[0] = NAN;
    cases.push_back({"NaN count", timx::gguf_file({bad}, 1, 512, {"d"}), "not a token count"});
  }
  {
    auto bad = e;  // 8 sums, 3 counts
    bad.counts = {1, 2, 3};
    bad.cols = 8;
    auto b = timx::gguf_file({bad}, 1, 512, {"d"});
    cases.push_back({"sums not whole rows", b, "not a whole number of rows"});
  }
  {
    // a GGUF with only the sums of an entry
    tg3::Raw kv, r;
    kv.str("imatrix.datasets").u32(9).u32(8).u64(1).str("d");
    kv.kv_u32("imatrix.chunk_count", 1).kv_u32("imatrix.chunk_size", 512);
    r.header(3, 1, 3);
    r.b.insert(r.b.end(), kv.b.begin(), kv.b.end());
    r.tensor("x.weight.in_sum2", {8, 1}, 0, 0).pad(32).zeros(32);
    cases.push_back({"sums without counts", r.b, "no .counts"});
  }
  for (const Case& c : cases) {
    try {
      read_bytes(c.bytes, "bad.imatrix");
      ADD_FAILURE() << c.what << ": accepted";
    } catch (const ConvertError& err) {
      const std::string m = err.what();
      EXPECT_NE(m.find("bad.imatrix"), std::string::npos) << c.what << ": " << m;
      EXPECT_NE(m.find(c.expect), std::string::npos) << c.what << ": " << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << c.what << ": " << m;
    }
  }
}

// ---- applied: files compared with ggml's weighted quantizers ----

class ImatrixFile : public tsup::TempDirTest {
 protected:
  struct Out {
    tg3::File f;
    std::vector<uint8_t> bytes;
    const tg3::Tensor* find(const std::string& n) const {
      for (const auto& t : f.tensors)
        if (t.name == n) return &t;
      return nullptr;
    }
  };
  Out read(const std::string& path) {
    Out o;
    o.bytes = tsup::slurp(path);
    o.f = tg3::parse(o.bytes);
    return o;
  }
  void make(const gen::Spec& s) {
    gen::write_checkpoint(dir + "/ck", s);
    const auto r = tsup::run_cli({dir + "/f32.gguf", "--model", dir + "/ck", "--outtype", "F32", "--no-vocab", "--quiet"}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    f32_ = read(dir + "/f32.gguf");
  }
  // An entry for every weight llama-imatrix sees (every 2-D or 3-D weight but the embeddings).
  std::vector<timx::Entry> entries(int64_t skip_every = 0) {
    std::vector<timx::Entry> es;
    uint32_t seed = 100;
    for (const auto& t : f32_.f.tensors) {
      if (t.ne.size() < 2 || t.name == "token_embd.weight") continue;
      if (skip_every && seed % skip_every == 0) { ++seed; continue; }
      es.push_back(timx::make_entry(t.name, t.ne[0], t.ne.size() >= 3 ? t.ne[2] : 1, seed++));
    }
    return es;
  }
  std::vector<float> source(const std::string& name) const {
    const tg3::Tensor* t = f32_.find(name);
    int64_t n = 1;
    for (int64_t d : t->ne) n *= d;
    std::vector<float> v(size_t(n), 0.0f);
    std::memcpy(v.data(), f32_.bytes.data() + f32_.f.data_start + t->offset, size_t(n) * 4);
    return v;
  }
  // Every tensor of `out` of a quantized type, re-quantized by ggml from the F32 file with the
  // entry's weights for its slice (llama-quantize's imatrix_for_row); returns how many took weights.
  // `from`: the source (and imatrix) name of an output tensor, when they differ (--prune-layers).
  int check_against_ggml(const Out& out, const std::map<std::string, std::vector<float>>& w,
                         const std::function<std::string(const std::string&)>& from = {}) {
    int weighted = 0;
    for (const auto& t : out.f.tensors) {
      const int64_t bs = ggml_ref_block_values(int(t.type)), bb = ggml_ref_block_bytes(int(t.type));
      if (t.type == 0 || t.type == 1 || t.type == 30 || bs <= 0) continue;  // F32, F16, BF16: no weights
      const std::string src = from ? from(t.name) : t.name;
      const std::vector<float> x = source(src);
      const int64_t cols = t.ne[0], rows = int64_t(x.size()) / cols, slices = t.ne.size() >= 3 ? t.ne[2] : 1;
      const int64_t row_bytes = cols / bs * bb;
      std::vector<uint8_t> want(size_t(rows * row_bytes));
      auto it = w.find(src);
      const float* qw = it == w.end() ? nullptr : it->second.data();
      for (int64_t s = 0; s < slices; ++s) {
        const int64_t r0 = s * rows / slices, n = rows / slices;
        EXPECT_EQ(ggml_ref_quantize_rows_w(int(t.type), x.data() + r0 * cols, want.data() + r0 * row_bytes, n, cols,
                                           qw ? qw + s * cols : nullptr), 0) << t.name;
      }
      weighted += qw != nullptr;
      const uint8_t* got = out.bytes.data() + out.f.data_start + t.offset;
      EXPECT_EQ(std::memcmp(got, want.data(), want.size()), 0) << t.name << " (ggml type " << t.type << ")";
    }
    return weighted;
  }
  Out f32_;
};

gen::Spec dense() {
  gen::Spec s;
  s.dim = 256; s.hidden = 512; s.layers = 4; s.heads = 8; s.kv_heads = 2; s.vocab = 256; s.dtype = "bf16";
  s.hf_init = true;
  return s;
}

TEST_F(ImatrixFile, EveryKPresetIsGgmlsWeightedQuantizer) {
  make(dense());
  const auto es = entries();
  std::map<std::string, std::vector<float>> w;
  for (const auto& e : es) w[e.name] = timx::weights(e, false);
  gen::write_file(dir + "/m.imatrix", timx::gguf_file(es, 33, 512, {"calib.txt"}));
  for (const char* preset : {"Q2_K", "Q3_K_M", "Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K"}) {
    SCOPED_TRACE(preset);
    const std::string out = dir + "/" + preset + ".gguf";
    const auto r = tsup::run_cli({out, "--model", dir + "/ck", "--type", preset, "--imatrix", dir + "/m.imatrix", "--no-vocab", "--quiet"}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Out o = read(out);
    EXPECT_GT(check_against_ggml(o, w), 20);
    EXPECT_EQ(tg3::item<uint32_t>(*o.f.find("quantize.imatrix.entries_count")), uint32_t(es.size()));
    EXPECT_EQ(tg3::item<uint32_t>(*o.f.find("quantize.imatrix.chunks_count")), 33u);
    EXPECT_EQ(o.f.find("quantize.imatrix.file")->items.at(0), dir + "/m.imatrix");
    EXPECT_EQ(o.f.find("quantize.imatrix.dataset")->items.at(0), "calib.txt");
  }
  // the weights matter: without them the bytes are ggml's unweighted ones, and differ
  const auto r = tsup::run_cli({dir + "/plain.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--no-vocab", "--quiet"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Out plain = read(dir + "/plain.gguf"), weighted = read(dir + "/Q4_K_M.gguf");
  EXPECT_EQ(check_against_ggml(plain, {}), 0);
  const tg3::Tensor *a = plain.find("blk.1.attn_q.weight"), *b = weighted.find("blk.1.attn_q.weight");
  EXPECT_NE(std::memcmp(plain.bytes.data() + plain.f.data_start + a->offset,
                        weighted.bytes.data() + weighted.f.data_start + b->offset, 256 * 256 / 256 * 144), 0);
}

// --prune-layers 1,2 of 4 blocks (llama-quant.cpp's remap_layer): blocks 1 and 2 left out, block 3
// written as blk.1 from block 3's weights with block 3's importance weights, block_count 2 set
// after llama-quantize's other keys; a list past the last block prunes nothing; misuse refused.
TEST_F(ImatrixFile, PruneLayersRenumbersTheBlocksAndKeepsTheirImportance) {
  make(dense());
  const auto es = entries();
  std::map<std::string, std::vector<float>> w;
  for (const auto& e : es) w[e.name] = timx::weights(e, false);
  gen::write_file(dir + "/m.imatrix", timx::gguf_file(es, 7, 512, {"calib.txt"}));
  const auto r = tsup::run_cli({dir + "/p.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--imatrix", dir + "/m.imatrix",
                                "--prune-layers", "2,1,2", "--no-vocab", "--quiet"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Out o = read(dir + "/p.gguf");
  std::set<std::string> blocks;
  for (const auto& t : o.f.tensors)
    if (t.name.rfind("blk.", 0) == 0) blocks.insert(t.name.substr(0, t.name.find('.', 4)));
  EXPECT_EQ(blocks, (std::set<std::string>{"blk.0", "blk.1"}));
  EXPECT_EQ(o.f.tensors.size(), f32_.f.tensors.size() - 2 * (f32_.f.tensors.size() - 3) / 4);
  const auto from = [](const std::string& n) { return n.rfind("blk.1.", 0) == 0 ? "blk.3." + n.substr(6) : n; };
  EXPECT_GT(check_against_ggml(o, w, from), 10);
  EXPECT_EQ(o.f.kv.back().key, "llama.block_count");
  EXPECT_EQ(tg3::item<uint32_t>(o.f.kv.back()), 2u);
  EXPECT_EQ(o.f.kv[o.f.kv.size() - 2].key, "quantize.imatrix.chunks_count");

  ASSERT_EQ(tsup::run_cli({dir + "/all.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--prune-layers", "9", "--no-vocab", "--quiet"}, dir).exit_code, 0);
  const Out all = read(dir + "/all.gguf");
  EXPECT_EQ(all.f.tensors.size(), f32_.f.tensors.size());
  EXPECT_EQ(tg3::item<uint32_t>(all.f.kv.back()), 4u);

  for (const char* bad : {"1,x", "1,", "-1"})
    tsup::expect_one_error(tsup::run_cli({dir + "/x.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--prune-layers", bad, "--no-vocab"}, dir),
                           {"--prune-layers", "not a layer number"}, dir + "/x.gguf");
  tsup::expect_one_error(tsup::run_cli({dir + "/x.gguf", "--model", dir + "/ck", "--outtype", "F16", "--prune-layers", "1", "--no-vocab"}, dir),
                         {"--prune-layers", "--type"}, dir + "/x.gguf");
}

// --include-weights / --exclude-weights (quantize.cpp's prepare_imatrix): the entries whose names
// contain one of the strings are the only ones used, or the ones left out; entries_count counts
// what is used; with none left the file is quantized as without --imatrix; the two together, or
// either without --imatrix, are refused.
TEST_F(ImatrixFile, IncludeAndExcludeWeightsPickTheEntries) {
  make(dense());
  const auto es = entries();
  gen::write_file(dir + "/m.imatrix", timx::gguf_file(es, 7, 512, {"calib.txt"}));
  auto run = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> args = {dir + "/f.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--imatrix", dir + "/m.imatrix",
                                     "--no-vocab", "--quiet"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = tsup::run_cli(args, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read(dir + "/f.gguf");
  };
  struct Case {
    std::vector<std::string> flags;
    std::function<bool(const std::string&)> kept;
  } const cases[] = {
      {{"--include-weights", "attn_q", "--include-weights", "blk.3.ffn"},
       [](const std::string& n) { return n.find("attn_q") != std::string::npos || n.rfind("blk.3.ffn", 0) == 0; }},
      {{"--exclude-weights", "ffn_down"}, [](const std::string& n) { return n.find("ffn_down") == std::string::npos; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags[1]);
    std::map<std::string, std::vector<float>> w;
    for (const auto& e : es)
      if (c.kept(e.name)) w[e.name] = timx::weights(e, false);
    ASSERT_GT(w.size(), 3u);
    ASSERT_LT(w.size(), es.size());
    const Out o = run(c.flags);
    EXPECT_EQ(check_against_ggml(o, w), int(w.size()));
    EXPECT_EQ(tg3::item<uint32_t>(*o.f.find("quantize.imatrix.entries_count")), uint32_t(w.size()));
  }
  const Out none = run({"--include-weights", "no.such.tensor"});
  EXPECT_EQ(check_against_ggml(none, {}), 0);
  EXPECT_EQ(none.f.find("quantize.imatrix.file"), nullptr);

  tsup::expect_one_error(tsup::run_cli({dir + "/x.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--imatrix", dir + "/m.imatrix",
                                        "--include-weights", "a", "--exclude-weights", "b", "--no-vocab"}, dir),
                         {"--include-weights", "--exclude-weights", "together"}, dir + "/x.gguf");
  tsup::expect_one_error(tsup::run_cli({dir + "/x.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--exclude-weights", "b", "--no-vocab"}, dir),
                         {"--exclude-weights", "--imatrix"}, dir + "/x.gguf");
}

// The codebook types through llama-quantize's --tensor-type: ggml's quantize_<type> with the
// entry's weights, byte for byte; refused where ggml would abort (no weights for the tensor) or
// llama-quantize refuses (no --imatrix at all).
TEST_F(ImatrixFile, CodebookTypesAreGgmlsWeightedQuantizer) {
  make(dense());
  const auto es = entries();
  std::map<std::string, std::vector<float>> w;
  for (const auto& e : es) w[e.name] = timx::weights(e, false);
  gen::write_file(dir + "/m.imatrix", timx::gguf_file(es, 33, 512, {"calib.txt"}));
  const std::vector<std::string> types = {"--tensor-type", "ffn_up=iq2_xxs", "--tensor-type", "ffn_gate=iq2_xs",
                                          "--tensor-type", "ffn_down=iq1_s", "--tensor-type", "attn_q=iq3_xxs",
                                          "--tensor-type", "attn_k=iq3_s", "--tensor-type", "attn_v=iq2_s",
                                          "--tensor-type", "attn_output=iq1_m"};
  std::vector<std::string> args = {dir + "/iq.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--imatrix",
                                   dir + "/m.imatrix", "--no-vocab", "--quiet"};
  args.insert(args.end(), types.begin(), types.end());
  const auto r = tsup::run_cli(args, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Out o = read(dir + "/iq.gguf");
  std::set<uint32_t> seen;
  for (const auto& t : o.f.tensors) seen.insert(t.type);
  for (uint32_t id : {16u, 17u, 18u, 19u, 21u, 22u, 29u}) EXPECT_TRUE(seen.count(id)) << "ggml type " << id;
  EXPECT_GT(check_against_ggml(o, w), 20);
  // token_embd has no entry (llama-imatrix never sees it): ggml cannot write it in IQ2_XXS
  std::vector<std::string> a2 = args;
  a2[0] = dir + "/emb.gguf";
  a2.insert(a2.end(), {"--token-embedding-type", "iq2_xxs"});
  const auto r2 = tsup::run_cli(a2, dir);
  EXPECT_NE(r2.exit_code, 0);
  EXPECT_NE(r2.err.find("token_embd.weight"), std::string::npos) << r2.err;
  EXPECT_NE(r2.err.find("without importance weights"), std::string::npos) << r2.err;
  // no --imatrix: llama-quantize refuses these types
  std::vector<std::string> a3 = {dir + "/no.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--no-vocab", "--quiet",
                                 "--tensor-type", "attn_q=iq3_xxs"};
  const auto r3 = tsup::run_cli(a3, dir);
  EXPECT_NE(r3.exit_code, 0);
  EXPECT_NE(r3.err.find("--imatrix"), std::string::npos) << r3.err;
}

// A legacy .dat with entries missing: those tensors are quantized without (a note says how many).
TEST_F(ImatrixFile, LegacyDatWithMissingEntries) {
  make(dense());
  const auto es = entries(5);  // (make_entry's 512 tokens: the ncall each value was scaled by)
  std::map<std::string, std::vector<float>> w;
  for (const auto& e : es) w[e.name] = timx::weights(e, true);
  gen::write_file(dir + "/m.dat", timx::legacy_file(es, 5, "x"));
  const auto r = tsup::run_cli({dir + "/o.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--imatrix", dir + "/m.dat", "--no-vocab"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no importance weights"), std::string::npos) << r.err;
  EXPECT_EQ(check_against_ggml(read(dir + "/o.gguf"), w), int(es.size()));
}

// Stacked experts: each expert's rows take that expert's slice of the entry.
TEST_F(ImatrixFile, ExpertsTakeTheirSlice) {
  gen::Spec s = dense();
  s.arch = "qwen3moe";
  s.experts = 4;
  s.experts_used = 2;
  s.expert_hidden = 256;
  s.head_dim = 32;
  make(s);
  const auto es = entries();
  std::map<std::string, std::vector<float>> w;
  for (const auto& e : es) w[e.name] = timx::weights(e, false);
  gen::write_file(dir + "/m.imatrix", timx::gguf_file(es, 3, 512, {"d"}));
  const auto r = tsup::run_cli({dir + "/o.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--imatrix", dir + "/m.imatrix", "--no-vocab", "--quiet"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Out o = read(dir + "/o.gguf");
  ASSERT_NE(o.find("blk.0.ffn_down_exps.weight"), nullptr);
  EXPECT_GT(check_against_ggml(o, w), 10);
}

TEST_F(ImatrixFile, VerifyTakesTheMatrix) {
  make(dense());
  const auto es = entries();
  gen::write_file(dir + "/m.imatrix", timx::gguf_file(es, 3, 512, {"d"}));
  ASSERT_EQ(tsup::run_cli({dir + "/o.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--imatrix", dir + "/m.imatrix", "--no-vocab", "--quiet"}, dir).exit_code, 0);
  const auto ok = tsup::run_cli({"--verify", dir + "/o.gguf", "--model", dir + "/ck", "--imatrix", dir + "/m.imatrix"}, dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("PASS"), std::string::npos) << ok.out;
  const auto without = tsup::run_cli({"--verify", dir + "/o.gguf", "--model", dir + "/ck"}, dir);
  EXPECT_NE(without.exit_code, 0);
  ASSERT_EQ(without.error_lines().size(), 1u) << without.describe();
  EXPECT_NE(without.error_lines()[0].find("--imatrix"), std::string::npos) << without.error_lines()[0];
}

TEST_F(ImatrixFile, RefusalsNameTheFileAndTensor) {
  make(dense());
  auto es = entries();
  for (auto& e : es)
    if (e.name == "blk.2.ffn_up.weight") e = timx::make_entry(e.name, 128, 1, 7);  // another model's width
  gen::write_file(dir + "/wrong.imatrix", timx::gguf_file(es, 3, 512, {"d"}));
  tsup::expect_one_error(tsup::run_cli({dir + "/o.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--imatrix", dir + "/wrong.imatrix", "--no-vocab"}, dir),
                         {"wrong.imatrix", "blk.2.ffn_up.weight", "128"}, dir + "/o.gguf");
  gen::write_file(dir + "/bad.imatrix", std::vector<uint8_t>{1, 0, 0, 0, 9});
  tsup::expect_one_error(tsup::run_cli({dir + "/o.gguf", "--model", dir + "/ck", "--type", "Q4_K_M", "--imatrix", dir + "/bad.imatrix", "--no-vocab"}, dir),
                         {"bad.imatrix", "1 entries"}, dir + "/o.gguf");
  // the converter's types take none
  gen::write_file(dir + "/m.imatrix", timx::gguf_file(entries(), 3, 512, {"d"}));
  tsup::expect_one_error(tsup::run_cli({dir + "/o.gguf", "--model", dir + "/ck", "--outtype", "BF16", "--imatrix", dir + "/m.imatrix", "--no-vocab"}, dir),
                         {"m.imatrix", "llama-quantize"}, dir + "/o.gguf");
}

}  // namespace
