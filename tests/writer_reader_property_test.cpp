// Writer <=> reader, as a property: many random but valid checkpoints (random shapes, zero-size
// and odd-shaped tensors, 0 to 8 dims, every source dtype, random schemes and rules, random
// chunk sizes and thread counts) are written in every format, and each file is read back by
// the project's reader and by the tests' own independent reader (tests/gguf_reader.h,
// tests/leap_reader.h, tests/gguf3_reader.h): both must take it, agree on every descriptor, and
// decode every tensor to exactly what the source quantizes to. Shapes the writer refuses must
// be shapes the reader rejects: the file the writer would have made is built by hand and read.
#include <gtest/gtest.h>

#include <random>

#include "core/f16.h"
#include "formats/convert.h"
#include "quant/ggml_quants.h"
#include "container/gguf_file.h"
#include "formats/gguf_lite.h"
#include "gguf3_reader.h"
#include "gguf_reader.h"
#include "leap_reader.h"
#include "quant/codec.h"
#include "test_support.h"

using namespace leapconv;

namespace {

struct Rand {
  std::mt19937_64 g;
  explicit Rand(uint64_t seed) : g(seed) {}
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); }
  template <typename T>
  const T& of(const std::vector<T>& v) { return v[size_t(pick(0, int64_t(v.size()) - 1))]; }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(g); }
};

// A value exactly representable in the dtype, |v| < 2^10 (no type's scale can overflow).
float value(Rand& r, const std::string& dtype) {
  const int bits = dtype == "F32" ? 24 : dtype == "F16" ? 11 : 8;
  const int64_t m = r.pick(-(int64_t(1) << (bits - 1)), (int64_t(1) << (bits - 1)) - 1);
  return std::ldexp(float(m), int(r.pick(-20, 10 - bits)));
}
void put_value(std::vector<uint8_t>& b, size_t i, float v, const std::string& dtype) {
  if (dtype == "F32") {
    std::memcpy(&b[4 * i], &v, 4);
    return;
  }
  uint16_t h;
  if (dtype == "BF16") {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    h = uint16_t(u >> 16);
  } else {
    h = tsup::float_to_half(v);
  }
  std::memcpy(&b[2 * i], &h, 2);
}

struct Source {
  gen::RawTensor raw;
  std::vector<float> values;
};

Source random_tensor(Rand& r, const std::string& name, std::vector<int64_t> shape) {
  Source s;
  s.raw.name = name;
  s.raw.dtype = r.of<std::string>({"F32", "F16", "BF16"});
  s.raw.shape = shape;
  const size_t n = size_t(tsup::numel(shape));
  const size_t es = s.raw.dtype == "F32" ? 4 : 2;
  s.raw.bytes.resize(n * es);
  for (size_t i = 0; i < n; ++i) {
    const float v = value(r, s.raw.dtype);
    put_value(s.raw.bytes, i, v, s.raw.dtype);
    s.values.push_back(v);
  }
  return s;
}

std::vector<int64_t> random_shape(Rand& r, int max_dims, int64_t max_numel) {
  for (;;) {
    std::vector<int64_t> s(size_t(r.pick(0, max_dims)));
    for (int64_t& d : s) d = r.coin(0.1) ? 0 : r.of<int64_t>({1, 2, 3, 5, 7, 16, 31, 64, 65, 128});
    const int64_t n = tsup::numel(s);
    if (n <= max_numel) return s;
  }
}

Checkpoint in_memory(std::vector<std::pair<std::string, std::vector<uint8_t>>> shards, const std::string& config = "") {
  CheckpointFiles f;
  f.label = "prop";
  for (auto& [name, bytes] : shards) f.shards.push_back(std::make_unique<MemorySource>(name, std::move(bytes)));
  if (!config.empty()) f.config_json = config;
  return open_checkpoint(std::move(f));
}

std::vector<uint8_t> write(const Checkpoint& ck, const ConvertOptions& opt, Rand& r) {
  const PlannedConversion pc = plan_conversion(ck, opt);
  MemorySink sink;
  PipelineOptions po;
  po.threads = int(r.pick(0, 2));
  po.chunk_bytes = r.of<int64_t>({256, 4096, 1 << 20});
  run_plan(pc.plan, ck.sources(), sink, po, nullptr);
  sink.bytes().resize(size_t(pc.plan.total_bytes()));
  return sink.bytes();
}

std::vector<uint8_t> shard_bytes(const std::vector<gen::RawTensor>& ts) {
  const std::string p = ::testing::TempDir() + "prop-" + std::to_string(::getpid()) + ".safetensors";
  gen::write_safetensors(p, ts);
  std::vector<uint8_t> b = gen::read_file(p);
  std::remove(p.c_str());
  return b;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

bool same_values(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

TEST(WriterReaderProperty, GgufLite) {
  Rand r(20261201);
  int written = 0, refused = 0;
  for (int iter = 0; iter < 60; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    std::vector<Source> src;
    const int n = int(r.pick(1, 6));
    for (int i = 0; i < n; ++i)
      src.push_back(random_tensor(r, "t" + std::to_string(i) + (r.coin() ? ".mlp.w" : ".attn.w"), random_shape(r, 8, 4096)));
    const bool nine = r.coin(0.1);  // sometimes a shape GGUF-lite cannot describe
    if (nine) src.push_back(random_tensor(r, "nine", {1, 1, 1, 1, 1, 1, 1, 1, 2}));
    std::vector<gen::RawTensor> raws;
    for (const Source& s : src) raws.push_back(s.raw);
    const Checkpoint ck = in_memory({{"prop.safetensors", shard_bytes(raws)}});
    ConvertOptions opt;
    opt.format = "gguf-lite";
    opt.gguf.default_scheme = r.of<QType>({QType::F32, QType::F16, QType::Q8Channel, QType::Q4Group64});
    if (r.coin(0.3)) opt.gguf.rules = parse_scheme_rules("rules", R"([{"pattern": "*.mlp.*", "scheme": "q4"}])",
                                                         [](const QuantType& t) { return t.gguf_lite_code >= 0; });
    std::vector<uint8_t> file;
    try {
      file = write(ck, opt, r);
    } catch (const ConvertError& e) {
      ASSERT_TRUE(nine) << "refused a valid checkpoint: " << e.what();
      ++refused;
      // the file it would have written: its reader must reject it too
      std::vector<tgguf::WTensor> d;
      uint64_t off = 0;
      for (const Source& s : src) {
        d.push_back({s.raw.name, s.raw.shape, tgguf::F32, off});
        off += uint64_t(tsup::numel(s.raw.shape)) * 4;
      }
      MemorySource hand("hand.gguf-lite", tgguf::write("format=gguf-lite", d, size_t(off)));
      EXPECT_THROW(read_gguf_lite(hand), ConvertError);
      continue;
    }
    ASSERT_FALSE(nine) << "wrote a 9-D tensor";
    ++written;
    MemorySource f("prop.gguf-lite", file);
    const GgufLiteFile g = read_gguf_lite(f);
    const std::string path = ::testing::TempDir() + "prop-" + std::to_string(::getpid()) + ".gguf-lite";
    gen::write_file(path, file);
    const tgguf::File t = tgguf::read(path);
    std::remove(path.c_str());
    ASSERT_EQ(g.tensors.size(), src.size());
    ASSERT_EQ(t.descs.size(), src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      SCOPED_TRACE(src[i].raw.name + " " + shape_string(src[i].raw.shape));
      EXPECT_EQ(g.tensors[i].name, src[i].raw.name);
      EXPECT_EQ(t.descs[i].name, src[i].raw.name);
      EXPECT_EQ(g.tensors[i].dims, src[i].raw.shape);
      EXPECT_EQ(t.descs[i].dims, src[i].raw.shape);
      EXPECT_EQ(int(quant_type(g.tensors[i].type).gguf_lite_code), int(t.descs[i].dtype));
      EXPECT_EQ(uint64_t(g.tensors[i].offset), t.descs[i].offset);
      const std::vector<float> ours = read_tensor_f32(f, g.tensors[i].layout);
      const std::vector<float> theirs = tgguf::dequant(t, t.descs[i]);
      EXPECT_TRUE(same_bits(ours, theirs)) << "the two readers decode differently";
      if (src[i].values.empty()) {  // (the reference fake-quant divides by the row length)
        EXPECT_TRUE(ours.empty());
        continue;
      }
      // (by value: the reference fake-quant may give -0 where an int8 0 is stored)
      EXPECT_TRUE(same_values(theirs, tgguf::fake_quant(t.descs[i].dtype, src[i].raw.shape, src[i].values)))
          << "not what the source quantizes to";
    }
  }
  EXPECT_GT(written, 40);
  EXPECT_GT(refused, 0);
}

TEST(WriterReaderProperty, Leap) {
  Rand r(7001);
  for (int iter = 0; iter < 30; ++iter) {
    gen::Spec s;
    s.heads = r.of<int64_t>({1, 2, 4});
    s.kv_heads = r.of<int64_t>({1, 2, 4});
    if (s.heads % s.kv_heads) s.kv_heads = 1;
    s.dim = s.heads * r.of<int64_t>({2, 4, 8, 16});
    s.hidden = r.of<int64_t>({16, 32, 48, 96});
    s.layers = r.pick(1, 3);
    s.vocab = r.pick(1, 40);
    s.tied = r.coin();
    s.dtype = r.of<std::string>({"f32", "f16", "bf16"});
    s.seed = uint64_t(iter) + 1;
    const int version = int(r.pick(1, 2));
    int group = 0;
    for (int gs : {64, 32, 16})
      if (!group && s.dim % gs == 0 && s.hidden % gs == 0) group = gs;
    SCOPED_TRACE("iteration " + std::to_string(iter) + " dim " + std::to_string(s.dim) + " v" + std::to_string(version));
    const std::string dir = ::testing::TempDir() + "prop-leap-" + std::to_string(::getpid());
    const std::vector<gen::Tensor> src = gen::write_checkpoint(dir, s);
    std::vector<std::pair<std::string, std::vector<uint8_t>>> shards = {
        {dir + "/model.safetensors", gen::read_file(dir + "/model.safetensors")}};
    const std::vector<uint8_t> cfg = gen::read_file(dir + "/config.json");
    const Checkpoint ck = in_memory(std::move(shards), std::string(cfg.begin(), cfg.end()));
    ConvertOptions opt;
    opt.format = "leap";
    opt.version = version;
    std::vector<uint8_t> file;
    try {
      file = write(ck, opt, r);
    } catch (const ConvertError& e) {
      // only version 2 may refuse, and only for want of a group size (dim / hidden not multiples of 16)
      EXPECT_TRUE(version == 2 && group == 0) << e.what();
      std::filesystem::remove_all(dir);
      continue;
    }
    MemorySource f("prop.bin", file);
    const InspectedFile info = inspect_file(f);  // the project's reader
    const std::string path = dir + "/out.bin";
    gen::write_file(path, file);
    const tleap::File t = tleap::read_leap(path, src, s, version, group);  // the tests' own
    EXPECT_EQ(t.end, file.size());
    ASSERT_EQ(info.items.size(), t.items.size());
    for (size_t i = 0; i < t.items.size(); ++i) {
      SCOPED_TRACE(t.items[i].e.leap);
      EXPECT_EQ(info.items[i].name, t.items[i].e.leap);
      EXPECT_EQ(size_t(info.items[i].offset), t.items[i].offset);
      EXPECT_EQ(info.items[i].shape, t.items[i].shape);
      EXPECT_TRUE(same_bits(read_tensor_f32(f, info.items[i]), t.items[i].dequant));
      EXPECT_TRUE(same_bits(fake_quantize(info.items[i], tleap::expected_source(t.items[i].e, src).data()),
                            t.items[i].dequant));
    }
    std::filesystem::remove_all(dir);
  }
}

// GGUF: tensor infos through both readers; every tensor decodes to what its source quantizes to.
TEST(WriterReaderProperty, Gguf) {
  Rand r(4242);
  for (int iter = 0; iter < 16; ++iter) {
    gen::Spec s;
    s.heads = r.of<int64_t>({1, 2, 4});
    s.kv_heads = s.heads == 1 ? 1 : r.of<int64_t>({1, s.heads});
    s.dim = s.heads * r.of<int64_t>({8, 16, 32, 64});
    s.hidden = r.of<int64_t>({32, 64, 96, 256});
    s.layers = r.pick(1, 2);
    s.vocab = r.pick(2, 40);
    s.tied = r.coin();
    s.dtype = r.of<std::string>({"f32", "f16", "bf16"});
    s.seed = uint64_t(iter) + 99;
    const std::string type = r.of<std::string>({"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q5_1", "Q4_K_M", "Q6_K"});
    SCOPED_TRACE("iteration " + std::to_string(iter) + " " + type + " dim " + std::to_string(s.dim));
    const std::string dir = ::testing::TempDir() + "prop-gguf-" + std::to_string(::getpid());
    gen::write_checkpoint(dir, s);
    const std::vector<uint8_t> cfg = gen::read_file(dir + "/config.json");
    const Checkpoint ck = in_memory({{dir + "/model.safetensors", gen::read_file(dir + "/model.safetensors")}},
                                    std::string(cfg.begin(), cfg.end()));
    ConvertOptions opt;
    opt.format = "gguf";
    opt.vocab.allow_no_vocab = true;
    set_format_file_type(*find_format("gguf"), type, "--type", opt);
    const PlannedConversion pc = plan_conversion(ck, opt);
    const std::vector<uint8_t> file = write(ck, opt, r);
    MemorySource f("prop.gguf", file);
    const GgufFile g = read_gguf_file(f);
    const tg3::File t = tg3::parse(file);
    ASSERT_EQ(g.tensors.size(), t.tensors.size());
    for (size_t i = 0; i < t.tensors.size(); ++i) {
      EXPECT_EQ(g.tensors[i].name, t.tensors[i].name);
      EXPECT_EQ(g.tensors[i].type, t.tensors[i].type);
      EXPECT_EQ(std::vector<int64_t>(g.tensors[i].dims.begin(), g.tensors[i].dims.end()), t.tensors[i].ne);
      EXPECT_EQ(uint64_t(g.tensors[i].file_offset), t.data_start + t.tensors[i].offset);
    }
    const InspectedFile info = inspect_file(f);
    std::map<std::string, const PlanItem*> planned;
    for (const PlanItem& it : pc.plan.items) planned[it.name] = &it;
    for (const PlanItem& it : info.items) {
      SCOPED_TRACE(it.name);
      auto p = planned.find(it.name);
      if (p == planned.end()) continue;  // computed from the config (rope_freqs)
      EXPECT_EQ(it.type, p->second->type);
      EXPECT_EQ(it.offset, p->second->offset);
      // the source's values, RoPE-permuted by the tests' own code where the plan permutes them
      const Recipe& r = p->second->recipe;
      if (r.is_computed()) continue;
      Recipe plain = Recipe::of(ck, *ck.find(r.source_name()));
      plain.check(r.source_name(), RowView::of(r.sources[0].shape).rows, RowView::of(r.sources[0].shape).cols);
      std::vector<float> w = realize_rows(plain, 0, RowView::of(r.sources[0].shape).rows, ck.sources());
      if (const Step* s = r.find(StepKind::PermuteHeads)) w = tleap::permute_rope(w, it.rows, it.cols, s->heads);
      if (const Step* rs = r.find(StepKind::Round)) {  // llama-quantize's input: the converter's 16-bit file
        EXPECT_EQ(rs->dtype, s.dtype == "bf16" ? DType::BF16 : DType::F16) << "the converter's --outtype auto";
        for (float& x : w) x = rs->dtype == DType::F16 ? f16_to_f32(f32_to_f16(x)) : bf16_to_f32(ggml::fp32_to_bf16(x));
      }
      EXPECT_TRUE(same_bits(read_tensor_f32(f, it), fake_quantize(*p->second, w.data())));
    }
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
