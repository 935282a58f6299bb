// The block anatomies of the quant-type table (what the page's block view draws) against ggml
// itself: for every type, each element's value worked out from the description alone (fields,
// bit slices, offsets, the arithmetic, interpreted here) equals ggml's dequantize_row_* on random
// blocks, so the description cannot drift from the bytes. GGUF-lite's types, which ggml has not,
// are held to the project's decoder. The view built from the same bytes shows those values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "check/group_view.h"
#include "core/byte_io.h"
#include "core/error.h"
#include "ggml_ref.h"
#include "quant/quant_types.h"

namespace lc = leapconv;

namespace {

// This test's own reading of a StoredInt: slices concatenated low first, then two's complement
// or less the offset; not stored reads 1.
int read_int(const lc::StoredInt& s, const uint8_t* b) {
  if (s.n == 0) return 1;
  int64_t v = 0;
  int w = 0;
  for (int i = 0; i < s.n; ++i) {
    v |= int64_t((b[s.part[i].byte] >> s.part[i].shift) & ((1 << s.part[i].width) - 1)) << w;
    w += s.part[i].width;
  }
  if (s.is_signed && v >= (int64_t(1) << (w - 1))) return int(v - (int64_t(1) << w));
  return int(s.is_signed ? v : v - s.offset);
}
// A scale field as ggml reads it: an f16, or an E8M0 byte (GGML_E8M0_TO_FP32_HALF).
float scale_field(const lc::BlockAnatomy& a, const uint8_t* b, int at) {
  if (a.d_format == lc::ScaleFormat::E8M0Half) return ggml_ref_e8m0_to_fp32_half(b[at]);
  return ggml_ref_fp16_to_fp32(uint16_t(b[at] | (b[at + 1] << 8)));
}

// value = (d·sc)·q ± dmin·m, from the description only (q through the type's table if it has one).
float anatomy_value(const lc::BlockAnatomy& a, const uint8_t* b, int e) {
  lc::ElementBits eb;
  a.element(e, eb);
  const float scale = scale_field(a, b, a.d_at) * float(read_int(eb.sc, b));
  const int q = a.q_table ? a.q_table[read_int(eb.q, b)] : read_int(eb.q, b);
  float y = scale * float(q);
  if (a.dmin_at >= 0) {
    const float min = scale_field(a, b, a.dmin_at) * float(read_int(eb.m, b));
    y = a.min_sign > 0 ? y + min : y - min;
  }
  return y;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Random bytes, with the f16 fields set to finite halves of a realistic size (so that no value
// is NaN and every bit pattern of the integers appears), E8M0 ones to 2^-12 .. 2^2.
std::vector<uint8_t> random_block(const lc::BlockAnatomy& a, std::mt19937& rng) {
  std::vector<uint8_t> b(size_t(a.bytes));
  for (uint8_t& x : b) x = uint8_t(rng());
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (int at : {a.d_at, a.dmin_at}) {
    if (at < 0) continue;
    if (a.d_format == lc::ScaleFormat::E8M0Half) {
      b[size_t(at)] = uint8_t(116 + rng() % 15);
      continue;
    }
    const uint16_t h = ggml_ref_fp32_to_fp16(u(rng));
    b[size_t(at)] = uint8_t(h);
    b[size_t(at) + 1] = uint8_t(h >> 8);
  }
  return b;
}

// The type's decoder on one block as shown (split layouts: scale bytes, then values).
std::vector<float> project_decode(const lc::QuantType& t, const uint8_t* b) {
  const lc::BlockAnatomy& a = *t.anatomy;
  std::vector<float> out(size_t(a.values));
  const uint8_t* region[lc::kMaxRegions] = {b, b + t.scale_bytes};
  t.decode(region, 1, a.values, t.block(a.values, 0), out.data());
  return out;
}

std::vector<const lc::QuantType*> laid_open() {
  std::vector<const lc::QuantType*> v;
  for (const lc::QuantType& t : lc::quant_types())
    if (t.anatomy) v.push_back(&t);
  return v;
}

TEST(BlockAnatomy, EveryBlockTypeOfTheProjectHasOne) {
  std::set<std::string> names;
  for (const lc::QuantType* t : laid_open()) names.insert(t->name);
  for (const char* n : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "MXFP4",
                        "IQ4_NL", "IQ4_XS", "TQ2_0", "Q1_0", "Q2_0", "Q8_per_channel", "Q4_per_group_64"})
    EXPECT_TRUE(names.count(n)) << n;
  // TQ1_0's base-3 digits are no bit slices: it has none, and the block view says why
  EXPECT_EQ(lc::quant_type(lc::QType::TQ1_0).anatomy, nullptr);
  EXPECT_NE(lc::block_view_refusal(lc::quant_type(lc::QType::TQ1_0)).find("base-3"), std::string::npos);
  // nor the codebook types' grid indices, which the view lays open a grid point at a time instead
  for (lc::QType t : {lc::QType::IQ2_XXS, lc::QType::IQ2_XS, lc::QType::IQ2_S, lc::QType::IQ3_XXS, lc::QType::IQ3_S,
                      lc::QType::IQ1_S, lc::QType::IQ1_M}) {
    EXPECT_EQ(lc::quant_type(t).anatomy, nullptr);
    EXPECT_EQ(lc::block_view_refusal(lc::quant_type(t)), "");
  }
}

TEST(BlockAnatomy, FieldsTileTheBlockAndElementsUseEveryValueBitOnce) {
  for (const lc::QuantType* t : laid_open()) {
    const lc::BlockAnatomy& a = *t->anatomy;
    SCOPED_TRACE(t->name);
    if (t->ggml_type >= 0) {
      EXPECT_EQ(a.values, ggml_ref_block_values(t->ggml_type));
      EXPECT_EQ(a.bytes, ggml_ref_block_bytes(t->ggml_type));
    }
    EXPECT_EQ(a.bytes, t->scale_bytes + a.values * t->value_bits / 8);
    int at = 0;  // fields in byte order, no gap, no overlap
    std::vector<int> owner(size_t(a.bytes), -1);
    for (size_t f = 0; f < a.fields.size(); ++f) {
      for (int k = 0; k < a.fields[f].bytes; ++k) owner[size_t(a.fields[f].offset + k)] = int(f);
      at += a.fields[f].bytes;
    }
    EXPECT_EQ(at, a.bytes);
    for (int o : owner) EXPECT_GE(o, 0);
    // the elements' q bits: each bit of the block used at most once, value_bits per element
    std::vector<int> used(size_t(a.bytes) * 8, 0);
    for (int e = 0; e < a.values; ++e) {
      lc::ElementBits eb;
      a.element(e, eb);
      int width = 0;
      for (int i = 0; i < eb.q.n; ++i) {
        const lc::BitSlice& s = eb.q.part[i];
        ASSERT_TRUE(s.byte >= 0 && s.byte < a.bytes && s.shift + s.width <= 8);
        for (int k = 0; k < s.width; ++k) ++used[size_t(s.byte * 8 + s.shift + k)];
        width += s.width;
      }
      EXPECT_EQ(width, t->value_bits) << "element " << e;
      EXPECT_EQ(eb.sub, e / a.sub_values) << "element " << e;
    }
    int value_bits = 0;
    for (int u : used) {
      EXPECT_LE(u, 1);
      value_bits += u;
    }
    EXPECT_EQ(value_bits, a.values * t->value_bits);
  }
}

TEST(BlockAnatomy, EachElementFromTheDescriptionIsGgmlsDequantizedValue) {
  std::mt19937 rng(20261201);
  for (const lc::QuantType* t : laid_open()) {
    const lc::BlockAnatomy& a = *t->anatomy;
    SCOPED_TRACE(t->name);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<uint8_t> b = random_block(a, rng);
      std::vector<float> want(size_t(a.values));
      if (t->ggml_type >= 0)
        ASSERT_EQ(ggml_ref_dequantize_row(t->ggml_type, b.data(), want.data(), a.values), 0);
      else
        want = project_decode(*t, b.data());  // GGUF-lite: ggml has no such type
      for (int e = 0; e < a.values; ++e)
        ASSERT_EQ(bits_of(anatomy_value(a, b.data(), e)), bits_of(want[size_t(e)]))
            << "element " << e << " of trial " << trial << ": " << anatomy_value(a, b.data(), e) << " vs " << want[size_t(e)];
    }
  }
}

TEST(BlockAnatomy, ggmlQuantizedBlocksToo) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 0.02f);
  for (const lc::QuantType* t : laid_open()) {
    if (t->ggml_type < 0) continue;
    const lc::BlockAnatomy& a = *t->anatomy;
    SCOPED_TRACE(t->name);
    std::vector<float> x(size_t(a.values) * 8), back(x.size());
    for (float& v : x) v = n(rng);
    std::vector<uint8_t> y(size_t(a.bytes) * 8);
    ASSERT_EQ(ggml_ref_quantize_row(t->ggml_type, x.data(), y.data(), int64_t(x.size())), 0);
    ASSERT_EQ(ggml_ref_dequantize_row(t->ggml_type, y.data(), back.data(), int64_t(x.size())), 0);
    for (int blk = 0; blk < 8; ++blk)
      for (int e = 0; e < a.values; ++e)
        ASSERT_EQ(bits_of(anatomy_value(a, y.data() + blk * a.bytes, e)), bits_of(back[size_t(blk * a.values + e)]));
  }
}

TEST(BlockView, ShowsTheBytesIntegersAndGgmlsValues) {
  std::mt19937 rng(3);
  for (const lc::QuantType* t : laid_open()) {
    const lc::BlockAnatomy& a = *t->anatomy;
    SCOPED_TRACE(t->name);
    std::vector<uint8_t> b = random_block(a, rng);
    lc::BlockTensor bt{t, 3, a.values * 2, 1000, "w"};
    const nlohmann::json v = lc::block_view_bytes(bt, 2, 1, b.data(), nullptr);
    EXPECT_EQ(v["bytes"].get<std::vector<uint8_t>>(), b);
    EXPECT_EQ(v["blocks"], 2);
    std::vector<float> want = t->ggml_type >= 0 ? std::vector<float>(size_t(a.values)) : project_decode(*t, b.data());
    if (t->ggml_type >= 0) ggml_ref_dequantize_row(t->ggml_type, b.data(), want.data(), a.values);
    for (int e = 0; e < a.values; ++e) {
      EXPECT_EQ(bits_of(v["dequant"][size_t(e)].get<float>()), bits_of(want[size_t(e)]));
      lc::ElementBits eb;
      a.element(e, eb);
      EXPECT_EQ(v["elements"][size_t(e)]["q"].get<int>(), a.q_table ? a.q_table[read_int(eb.q, b.data())] : read_int(eb.q, b.data()));
      lc::StoredInt bits = eb.q;  // the stored bits as they are
      bits.is_signed = false;
      bits.offset = 0;
      EXPECT_EQ(v["elements"][size_t(e)]["raw"].get<int>(), read_int(bits, b.data()));
    }
    // the scale fields: where, how many bytes, stored how, and their values as ggml reads them
    const nlohmann::json& sf = v["scale_fields"];
    ASSERT_EQ(sf.size(), a.dmin_at >= 0 ? 2u : 1u);
    for (size_t k = 0; k < sf.size(); ++k) {
      const int at = k ? a.dmin_at : a.d_at;
      EXPECT_EQ(sf[k]["offset"], at);
      EXPECT_EQ(sf[k]["bytes"], a.d_format == lc::ScaleFormat::F16 ? 2 : 1);
      EXPECT_EQ(sf[k]["format"], a.d_format == lc::ScaleFormat::F16 ? "f16" : "E8M0");
      EXPECT_EQ(bits_of(sf[k]["value"].get<float>()), bits_of(scale_field(a, b.data(), at)));
    }
    // the pieces of block 1 of row 2: contiguous for ggml's types, scale then values for GGUF-lite
    const nlohmann::json p = lc::block_pieces(bt, 2, 1);
    int64_t size = 0;
    for (const auto& x : p) size += x["size"].get<int64_t>();
    EXPECT_EQ(size, a.bytes);
    if (t->layout == lc::Layout::Interleaved) EXPECT_EQ(p[0]["offset"], 1000 + (2 * 2 + 1) * a.bytes);
  }
}

// MXFP4 laid open by hand: e = 124 is d = 2^-4; qs[0] = 0x7f holds element 0 (nibble 15: level
// -12) and element 16 (nibble 7: level 12); the scale byte is one E8M0 byte, not an f16.
TEST(BlockView, Mxfp4ReadsItsLevelsThroughTheTable) {
  const lc::QuantType& t = lc::quant_type(lc::QType::MXFP4);
  std::vector<uint8_t> b(17, 0x21);  // every other element: nibble 1 (level 1) or 2 (level 2)
  b[0] = 124;
  b[1] = 0x7f;
  lc::BlockTensor bt{&t, 1, 64, 0, "w"};
  const nlohmann::json v = lc::block_view_bytes(bt, 0, 1, b.data(), nullptr);
  EXPECT_EQ(v["scale_fields"], nlohmann::json::parse(
      R"([{"name": "e", "offset": 0, "bytes": 1, "format": "E8M0", "hex": "0x7c", "value": 0.0625}])"));
  EXPECT_EQ(v["elements"][0]["raw"], 15);
  EXPECT_EQ(v["elements"][0]["q"], -12);
  EXPECT_EQ(v["elements"][0]["text"], "0.0625 × -12 = -0.75");
  EXPECT_EQ(v["elements"][16]["raw"], 7);
  EXPECT_EQ(v["elements"][16]["q"], 12);
  EXPECT_EQ(v["elements"][1]["q"], 1);
  EXPECT_EQ(v["elements"][17]["q"], 2);
  EXPECT_EQ(v["dequant"][0], -0.75);
  EXPECT_EQ(v["dequant"][17], 0.125);
  EXPECT_EQ(v["sub_blocks"].size(), 0u);
}

TEST(BlockView, ExamplesComeFromTheTypesOwnEncoder) {
  for (const lc::QuantType* t : laid_open()) {
    SCOPED_TRACE(t->name);
    const nlohmann::json v = lc::block_view_example(*t, 1, 1);
    const auto src = v["source_values"].get<std::vector<float>>();
    const auto deq = v["dequant"].get<std::vector<float>>();
    ASSERT_EQ(src.size(), deq.size());
    // the errors shown are |source − value| of the values shown
    float worst = 0.0f;
    for (size_t i = 0; i < src.size(); ++i) worst = std::max(worst, std::fabs(src[i] - deq[i]));
    EXPECT_EQ(v["max_error"].get<float>(), worst);
    // (a ternary or 1-bit value is 0 or +-d: the example's outlier sets d and the rest miss more)
    EXPECT_LT(worst, t->id == lc::QType::TQ2_0 || t->id == lc::QType::Q1_0 ? 2.0f : 0.5f);
  }
  EXPECT_THROW(lc::block_view_example(lc::quant_type(lc::QType::Q4_K), 0, 2), lc::ConvertError);
  EXPECT_THROW(lc::block_view_example(lc::quant_type(lc::QType::F16), 0, 0), lc::ConvertError);
}

TEST(BlockView, BadPlacesAreOneErrorNamingFileAndTensor) {
  // a Q8_0 tensor [2, 64] at offset 10 of a 100-byte file: row 1 ends at 10 + 4 * 34 = 146
  lc::MemorySource file("short.gguf", std::vector<uint8_t>(100, 0));
  const nlohmann::json entry = {{"name", "blk.0.attn_q.weight"}, {"dtype", "Q8_0"}, {"shape", {2, 64}}, {"offset", 10}};
  EXPECT_NO_THROW(lc::block_view_file(file, nullptr, entry, 0, 1));
  auto message = [&](const nlohmann::json& e, int64_t row, int64_t block) {
    try {
      lc::block_view_file(file, nullptr, e, row, block);
    } catch (const lc::ConvertError& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  for (const auto& [e, row, block] : std::vector<std::tuple<nlohmann::json, int, int>>{
           {entry, 1, 1}, {entry, 2, 0}, {entry, 0, -1}}) {
    const std::string m = message(e, row, block);
    EXPECT_NE(m.find("short.gguf"), std::string::npos) << m;
    EXPECT_NE(m.find("blk.0.attn_q.weight"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  nlohmann::json huge = entry;
  huge["shape"] = {int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_NE(message(huge, 0, 0).find("more than 2^48"), std::string::npos);
  huge["shape"] = {2, 64};
  huge["dtype"] = "F16";
  // an unquantized tensor is said to be one, plainly, with what to pick instead
  EXPECT_NE(message(huge, 0, 0).find("F16 is not quantized: each value is a plain 16-bit float, stored as it is, with no blocks "
                                     "or scales to lay open. Pick a quantized tensor"), std::string::npos) << message(huge, 0, 0);
}

}  // namespace

// The codebook types have no anatomy: the view lays their blocks open a grid index at a time
// (quant/codebook.h). On random blocks: every value is ggml's dequantize_row_<type>'s, each
// group's values are its scale times its grid point's coordinates with their signs (IQ1: plus
// the delta), every element's stored bits read back as its group's index, and the fields tile
// the block. IQ2_XXS's indices are read here from ggml's block_iq2_xxs layout directly.
TEST(BlockView, CodebookBlocksShowTheGridPointEachIndexPicksAndGgmlsValues) {
  std::mt19937 rng(28);
  int seen = 0;
  for (const lc::QuantType& t : lc::quant_types()) {
    if (t.anatomy || !lc::block_view_refusal(t).empty() || t.block_values != 256) continue;
    SCOPED_TRACE(t.name);
    ++seen;
    const int n = int(ggml_ref_block_bytes(t.ggml_type));
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<uint8_t> b(static_cast<size_t>(n));
      for (uint8_t& x : b) x = uint8_t(rng());
      if (std::string(t.name) == "IQ1_M") {  // d = 0x2c00 (0.0625) in the scale words' top nibbles
        for (int j = 0; j < 4; ++j) b[size_t(48 + 2 * j + 1)] = uint8_t((b[size_t(48 + 2 * j + 1)] & 0x0f) | ((0x2c00 >> 4 * j) & 0xf) << 4);
      } else {
        b[0] = 0x00;
        b[1] = 0x2c;
      }
      lc::BlockTensor bt{&t, 2, 512, 0, "w"};
      const nlohmann::json v = lc::block_view_bytes(bt, 1, 1, b.data(), nullptr);
      EXPECT_EQ(v["codebook"], true);
      std::vector<float> want(256);
      ggml_ref_dequantize_row(t.ggml_type, b.data(), want.data(), 256);
      int covered = 0;
      for (const auto& f : v["fields"]) {
        EXPECT_EQ(f["offset"].get<int>(), covered);
        covered += f["bytes"].get<int>();
      }
      EXPECT_EQ(covered, n);
      int next = 0;
      for (const auto& g : v["sub_blocks"]) {
        const int first = g["first"], size = g["size"];
        EXPECT_EQ(first, next);
        next += size;
        EXPECT_LT(g["grid_index"].get<int>(), 1 << g["index_bits"].get<int>());
        if (std::string(t.name) == "IQ2_XXS") {
          EXPECT_EQ(g["grid_index"].get<int>(), b[size_t(2 + 8 * (first / 32) + (first % 32) / 8)]);
          EXPECT_EQ(g["index_bits"], 8);
        }
        const float scale = g["scale"], delta = g["delta"];
        const int signs = g["signs"];
        for (int j = 0; j < size; ++j) {
          const int e = first + j, c = g["grid"][size_t(j)];
          const float x = signs < 0 ? scale * (float(c) + delta) : scale * float(c) * (signs & (1 << j) ? -1.f : 1.f);
          EXPECT_EQ(bits_of(x), bits_of(want[size_t(e)])) << "element " << e;
          EXPECT_EQ(bits_of(v["dequant"][size_t(e)].get<float>()), bits_of(want[size_t(e)])) << "element " << e;
          const auto& el = v["elements"][size_t(e)];
          EXPECT_EQ(el["raw"], g["grid_index"]);
          EXPECT_EQ(el["sub"], g["index"]);
          int64_t raw = 0, w = 0;
          for (const auto& s : el["bits"]) {
            raw |= int64_t((b[s["byte"].get<size_t>()] >> s["shift"].get<int>()) & ((1 << s["width"].get<int>()) - 1)) << w;
            w += s["width"].get<int>();
          }
          EXPECT_EQ(raw, g["grid_index"].get<int64_t>()) << "element " << e;
          EXPECT_EQ(w, g["index_bits"].get<int64_t>());
        }
      }
      EXPECT_EQ(next, 256);
    }
    // the built-in example: the type's own encoder (IQ2_XXS, IQ2_XS, IQ1_S with flat importance weights)
    const nlohmann::json ex = lc::block_view_example(t, 1, 1);
    EXPECT_EQ(ex["codebook"], true);
    for (const auto& x : ex["dequant"]) EXPECT_TRUE(std::isfinite(x.get<float>()));
    EXPECT_LT(ex["max_error"].get<float>(), 2.5f);
  }
  EXPECT_EQ(seen, 7);  // IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ3_S, IQ2_S, IQ1_M
}

// A type whose q is looked up (IQ4_NL, IQ4_XS: ggml's kvalues_iq4nl) gives the view its table,
// and each element's q is the table's entry at its stored bits.
TEST(BlockView, LevelTableTypesShowTheirTable) {
  std::mt19937 rng(4);
  for (lc::QType id : {lc::QType::IQ4_NL, lc::QType::IQ4_XS}) {
    const lc::QuantType& t = lc::quant_type(id);
    SCOPED_TRACE(t.name);
    const lc::BlockAnatomy& a = *t.anatomy;
    std::vector<uint8_t> b = random_block(a, rng);
    lc::BlockTensor bt{&t, 1, a.values, 0, "w"};
    const nlohmann::json v = lc::block_view_bytes(bt, 0, 0, b.data(), nullptr);
    EXPECT_EQ(v["q_table"], nlohmann::json::parse("[-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]"));
    for (const auto& e : v["elements"]) EXPECT_EQ(e["q"], v["q_table"][e["raw"].get<size_t>()]);
  }
  EXPECT_FALSE(lc::block_view_example(lc::quant_type(lc::QType::Q4_K), 0, 0).contains("q_table"));
}
