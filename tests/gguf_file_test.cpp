// The GGUF v3 container: typed metadata round trips, the layout (offsets and padding exactly as
// gguf.cpp writes them, checked with the test suite's own reader), and the reader's rejection of
// hostile input (every truncation, absurd counts, bad types, bad offsets), which must always be a
// ConvertError naming the file and the key or tensor, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "container/gguf_file.h"
#include "gguf3_reader.h"

using namespace leapconv;

namespace {

// Runs the reader on bytes; returns the error text, or "" when it accepted them.
std::string reject_text(const std::vector<uint8_t>& b, const GgufReadOptions& opt = {}) {
  MemorySource src("hostile.gguf", b);
  try {
    read_gguf_file(src, opt);
  } catch (const ConvertError& e) {
    return e.what();
  }
  return "";
}

GgufFile read_bytes(const std::vector<uint8_t>& b, const GgufReadOptions& opt = {}) {
  MemorySource src("t.gguf", b);
  return read_gguf_file(src, opt);
}

// A metadata list with every value type, scalar and array, and the awkward cases.
GgufMetadata every_type() {
  GgufMetadata kv;
  kv.set_string("general.architecture", "llama");
  kv.set_u8("t.u8", 255);
  kv.set_i8("t.i8", -128);
  kv.set_u16("t.u16", 65535);
  kv.set_i16("t.i16", -32768);
  kv.set_u32("t.u32", 4000000000u);
  kv.set_i32("t.i32", std::numeric_limits<int32_t>::min());
  kv.set_f32("t.f32", 1e-5f);
  kv.set_f32("t.f32_neg0", -0.0f);
  kv.set_f32("t.f32_denorm", std::numeric_limits<float>::denorm_min());
  kv.set_bool("t.true", true);
  kv.set_bool("t.false", false);
  kv.set_u64("t.u64", std::numeric_limits<uint64_t>::max());
  kv.set_i64("t.i64", std::numeric_limits<int64_t>::min());
  kv.set_f64("t.f64", 3.141592653589793);
  kv.set_string("t.str_empty", "");
  kv.set_string("t.str_utf8", "h\xc3\xa9llo \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\xa6\x99");
  kv.set_string("t.str_nul", std::string("a\0b", 3));
  kv.set_u8_array("t.a_u8", {0, 1, 255});
  kv.set_i8_array("t.a_i8", {-1, 0, 127});
  kv.set_u16_array("t.a_u16", {1, 65535});
  kv.set_i16_array("t.a_i16", {-2, 2});
  kv.set_u32_array("t.a_u32", {7});
  kv.set_i32_array("t.a_i32", {-5, 0, 5, 1 << 30});
  kv.set_f32_array("t.a_f32", {0.5f, -1.25f, 3e38f});
  kv.set_bool_array("t.a_bool", {true, false, true});
  kv.set_u64_array("t.a_u64", {0, std::numeric_limits<uint64_t>::max()});
  kv.set_i64_array("t.a_i64", {-1, std::numeric_limits<int64_t>::max()});
  kv.set_f64_array("t.a_f64", {1e300, -1e-300});
  kv.set_string_array("t.a_str", {"", "<s>", "\xe2\x96\x81the", std::string(300, 'x')});
  kv.set_f32_array("t.empty_f32", {});
  kv.set_string_array("t.empty_str", {});
  kv.set_bool_array("t.empty_bool", {});
  return kv;
}

}  // namespace

TEST(GgufFileTypes, TableMatchesGgml) {
  // (id, block size, bytes per block) from ggml.h and the block structs of ggml-common.h;
  // the Node test checks the same against the ggml inside node-llama-cpp's prebuilt binary.
  const int64_t want[][3] = {
      {0, 1, 4},      {1, 1, 2},      {2, 32, 18},    {3, 32, 20},    {6, 32, 22},    {7, 32, 24},
      {8, 32, 34},    {9, 32, 36},    {10, 256, 84},  {11, 256, 110}, {12, 256, 144}, {13, 256, 176},
      {14, 256, 210}, {15, 256, 292}, {16, 256, 66},  {17, 256, 74},  {18, 256, 98},  {19, 256, 50},
      {20, 32, 18},   {21, 256, 110}, {22, 256, 82},  {23, 256, 136}, {24, 1, 1},     {25, 1, 2},
      {26, 1, 4},     {27, 1, 8},     {28, 1, 8},     {29, 256, 56},  {30, 1, 2},     {34, 256, 54},
      {35, 256, 66},  {39, 32, 17},   {40, 64, 36},   {41, 128, 18},  {42, 64, 18}};
  for (const auto& w : want) {
    const GgmlTypeInfo* t = ggml_type_info(uint32_t(w[0]));
    ASSERT_NE(t, nullptr) << w[0];
    EXPECT_EQ(t->id, uint32_t(w[0]));
    EXPECT_EQ(t->block_size, w[1]) << t->name;
    EXPECT_EQ(t->type_size, w[2]) << t->name;
  }
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u, 0xFFFFFFFFu})
    EXPECT_EQ(ggml_type_info(removed), nullptr) << removed;
  EXPECT_STREQ(ggml_type_info(12)->name, "q4_K");
  EXPECT_STREQ(ggml_type_info(30)->name, "bf16");
  EXPECT_EQ(ggml_row_bytes(*ggml_type_info(14), 4096), 16 * 210);
  EXPECT_EQ(ggml_dims_from_shape({4096, 11008}), (std::vector<int64_t>{11008, 4096}));
}

TEST(GgufFileValues, RoundTripEveryType) {
  const GgufMetadata kv = every_type();
  const GgufLayout L = layout_gguf(kv, {});
  const GgufFile f = read_bytes(L.header);
  ASSERT_EQ(f.kv.size(), kv.size());
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(f.kv.entries()[i].key, kv.entries()[i].key);
    EXPECT_TRUE(f.kv.entries()[i].value == kv.entries()[i].value)
        << kv.entries()[i].key << ": " << f.kv.entries()[i].value.summary() << " vs " << kv.entries()[i].value.summary();
  }
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.alignment, 32u);
  EXPECT_TRUE(f.tensors.empty());
  // The typed getters.
  EXPECT_EQ(f.kv.get_u8("t.u8"), 255);
  EXPECT_EQ(f.kv.get_i8("t.i8"), -128);
  EXPECT_EQ(f.kv.get_u16("t.u16"), 65535);
  EXPECT_EQ(f.kv.get_i16("t.i16"), -32768);
  EXPECT_EQ(f.kv.get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(f.kv.get_i32("t.i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f.kv.get_f32("t.f32"), 1e-5f);
  EXPECT_TRUE(std::signbit(f.kv.get_f32("t.f32_neg0")));
  EXPECT_EQ(f.kv.get_f32("t.f32_denorm"), std::numeric_limits<float>::denorm_min());
  EXPECT_TRUE(f.kv.get_bool("t.true"));
  EXPECT_FALSE(f.kv.get_bool("t.false"));
  EXPECT_EQ(f.kv.get_u64("t.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.kv.get_i64("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.kv.get_f64("t.f64"), 3.141592653589793);
  EXPECT_EQ(f.kv.get_string("t.str_empty"), "");
  EXPECT_EQ(f.kv.get_string("t.str_utf8"), "h\xc3\xa9llo \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\xa6\x99");
  EXPECT_EQ(f.kv.get_string("t.str_nul"), std::string("a\0b", 3));
  EXPECT_EQ(f.kv.get_array<uint8_t>("t.a_u8"), (std::vector<uint8_t>{0, 1, 255}));
  EXPECT_EQ(f.kv.get_array<int8_t>("t.a_i8"), (std::vector<int8_t>{-1, 0, 127}));
  EXPECT_EQ(f.kv.get_array<uint16_t>("t.a_u16"), (std::vector<uint16_t>{1, 65535}));
  EXPECT_EQ(f.kv.get_array<int16_t>("t.a_i16"), (std::vector<int16_t>{-2, 2}));
  EXPECT_EQ(f.kv.get_u32_array("t.a_u32"), (std::vector<uint32_t>{7}));
  EXPECT_EQ(f.kv.get_i32_array("t.a_i32"), (std::vector<int32_t>{-5, 0, 5, 1 << 30}));
  EXPECT_EQ(f.kv.get_f32_array("t.a_f32"), (std::vector<float>{0.5f, -1.25f, 3e38f}));
  EXPECT_EQ(f.kv.get_array<bool>("t.a_bool"), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(f.kv.get_array<uint64_t>("t.a_u64"), (std::vector<uint64_t>{0, std::numeric_limits<uint64_t>::max()}));
  EXPECT_EQ(f.kv.get_array<int64_t>("t.a_i64"), (std::vector<int64_t>{-1, std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(f.kv.get_array<double>("t.a_f64"), (std::vector<double>{1e300, -1e-300}));
  EXPECT_EQ(f.kv.get_string_array("t.a_str"),
            (std::vector<std::string>{"", "<s>", "\xe2\x96\x81the", std::string(300, 'x')}));
  EXPECT_EQ(f.kv.get_array_size("t.empty_f32"), 0u);
  EXPECT_EQ(f.kv.get_array_type("t.empty_f32"), GgufType::FLOAT32);
  EXPECT_EQ(f.kv.get_array_size("t.empty_str"), 0u);
  EXPECT_EQ(f.kv.get_array_type("t.empty_bool"), GgufType::BOOL);
  EXPECT_EQ(f.kv.at("t.a_str").type(), GgufType::ARRAY);
  // kv_bytes adds up to the KV section.
  int64_t sum = 0;
  for (int64_t n : f.kv_bytes) sum += n;
  EXPECT_EQ(sum, f.bytes.kv);
  EXPECT_EQ(L.bytes.kv, f.bytes.kv);
}

TEST(GgufFileValues, BytesAsTheSpecSays) {
  // The independent reader sees every pair with the right type codes and element bytes.
  const GgufMetadata kv = every_type();
  const tg3::File t = tg3::parse(layout_gguf(kv, {}).header);
  EXPECT_EQ(t.version, 3u);
  EXPECT_EQ(t.n_kv, kv.size());
  EXPECT_EQ(t.n_tensors, 0u);
  const tg3::KV* e = t.find("t.u32");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, 4u);
  EXPECT_EQ(tg3::item<uint32_t>(*e), 4000000000u);
  e = t.find("t.true");
  EXPECT_EQ(e->type, 7u);
  EXPECT_EQ(e->items.at(0), std::string(1, '\1'));
  e = t.find("t.f64");
  EXPECT_EQ(e->type, 12u);
  EXPECT_EQ(tg3::item<double>(*e), 3.141592653589793);
  e = t.find("t.a_str");
  EXPECT_EQ(e->type, 9u);
  EXPECT_EQ(e->elem, 8u);
  EXPECT_EQ(e->n, 4u);
  EXPECT_EQ(e->items.at(2), "\xe2\x96\x81the");
  e = t.find("t.empty_str");
  EXPECT_EQ(e->type, 9u);
  EXPECT_EQ(e->elem, 8u);
  EXPECT_EQ(e->n, 0u);
  e = t.find("t.a_i64");
  EXPECT_EQ(e->elem, 11u);
  EXPECT_EQ(tg3::item<int64_t>(*e, 1), std::numeric_limits<int64_t>::max());
  const uint32_t types[] = {0, 1, 2, 3, 4, 5, 6};
  const char* keys[] = {"t.u8", "t.i8", "t.u16", "t.i16", "t.u32", "t.i32", "t.f32"};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(t.find(keys[i])->type, types[i]) << keys[i];
  EXPECT_EQ(t.find("t.u64")->type, 10u);
  EXPECT_EQ(t.find("t.i64")->type, 11u);
  EXPECT_EQ(t.find("t.str_utf8")->type, 8u);
}

TEST(GgufFileValues, SetReplacesLikeGgufCpp) {
  GgufMetadata kv;
  kv.set_u32("a", 1);
  kv.set_u32("b", 2);
  kv.set_string("a", "x");  // gguf.cpp: remove, then append
  ASSERT_EQ(kv.size(), 2u);
  EXPECT_EQ(kv.entries()[0].key, "b");
  EXPECT_EQ(kv.entries()[1].key, "a");
  EXPECT_EQ(kv.get_string("a"), "x");
  EXPECT_TRUE(kv.remove("b"));
  EXPECT_FALSE(kv.remove("b"));
  EXPECT_THROW(kv.set_u32("", 1), ConvertError);
  EXPECT_THROW(kv.set_u64(kGgufKeyAlignment, 32), ConvertError);  // must be u32
  EXPECT_THROW(kv.set_alignment(48), ConvertError);               // power of 2
  EXPECT_THROW(kv.set_alignment(0), ConvertError);
  kv.set_alignment(64);
  EXPECT_EQ(kv.alignment(), 64u);
}

TEST(GgufFileValues, GettersNameTheKeyAndType) {
  GgufMetadata kv;
  kv.label = "model.gguf";
  kv.set_u32("llama.block_count", 2);
  kv.set_f32_array("tokenizer.ggml.scores", {1, 2});
  try {
    kv.get_string("llama.block_count");
    FAIL();
  } catch (const ConvertError& e) {
    EXPECT_EQ(std::string(e.what()), "model.gguf: key 'llama.block_count': is u32, expected str");
  }
  try {
    kv.get_u32("llama.context_length");
    FAIL();
  } catch (const ConvertError& e) {
    EXPECT_EQ(std::string(e.what()), "model.gguf: key 'llama.context_length': missing");
  }
  EXPECT_THROW(kv.get_i32_array("tokenizer.ggml.scores"), ConvertError);
  EXPECT_THROW(kv.get_array_size("llama.block_count"), ConvertError);
  EXPECT_THROW(kv.get_u32("tokenizer.ggml.scores"), ConvertError);
  EXPECT_EQ(kv.get_array_size("tokenizer.ggml.scores"), 2u);
  EXPECT_EQ(kv.at("llama.block_count").summary(), "2");
  EXPECT_EQ(kv.at("tokenizer.ggml.scores").summary(), "[1, 2]");
  EXPECT_THROW(kv.at("llama.block_count").get<int32_t>(), ConvertError);
}

TEST(GgufFileLayout, ExactBytesOfATinyFile) {
  // Written out by hand from gguf.h: one u8 KV, one f32 tensor of 4 values.
  GgufMetadata kv;
  kv.set_u8("a", 7);
  const GgufLayout L = layout_gguf(kv, {{"t", {4}, 0}});
  tg3::Raw want;
  want.header(3, 1, 1).str("a").u32(0).u8(7);        // 24 + 14
  want.str("t").u32(1).i64(4).u32(0).u64(0);          // + 33 = 71
  want.pad(32);                                       // 96
  EXPECT_EQ(want.size(), 96u);
  EXPECT_EQ(L.header, want.b);
  EXPECT_EQ(L.data_start, 96);
  EXPECT_EQ(L.tensors[0].nbytes, 16);
  EXPECT_EQ(L.tensors[0].offset, 0);
  EXPECT_EQ(L.tensors[0].file_offset, 96);
  EXPECT_EQ(L.data_bytes, 32);  // 16 bytes + 16 of padding after the last tensor
  EXPECT_EQ(L.file_size, 128);
  EXPECT_EQ(L.bytes.fixed, 24);
  EXPECT_EQ(L.bytes.kv, 14);
  EXPECT_EQ(L.bytes.tensor_info, 33);
  EXPECT_EQ(L.bytes.padding, 25);
  EXPECT_EQ(L.bytes.data_padding, 16);
  // No tensors: gguf.cpp's writer still pads the header.
  const GgufLayout E = layout_gguf(kv, {});
  EXPECT_EQ(E.header.size(), 64u);
  EXPECT_EQ(E.file_size, 64);
}

namespace {

std::vector<GgufTensorInfo> mixed_tensors() {
  return {
      {"token_embd.weight", {64, 10}, 8},        // q8_0: 10 rows x 2 blocks x 34 = 680
      {"output_norm.weight", {3}, 0},            // f32: 12
      {"blk.0.attn_q.weight", {256, 3}, 12},     // q4_K: 3 x 144 = 432
      {"blk.0.ffn_down.weight", {5, 1, 1, 2}, 1},  // f16: 20
      {"blk.0.attn_k.weight", {32, 4, 2}, 2},    // q4_0: 8 x 18 = 144
      {"blk.0.x.bf16", {7}, 30},                 // bf16: 14
      {"blk.0.q6", {256, 1}, 14},                // q6_K: 210
      {"i32", {1}, 26},                          // i32: 4
  };
}

void check_layout(uint32_t align) {
  SCOPED_TRACE("alignment " + std::to_string(align));
  GgufMetadata kv = every_type();
  if (align != 32) kv.set_alignment(align);
  const GgufLayout L = layout_gguf(kv, mixed_tensors(), "out.gguf");
  const int64_t sizes[] = {680, 12, 432, 20, 144, 14, 210, 4};
  EXPECT_EQ(L.alignment, align);
  EXPECT_EQ(int64_t(L.header.size()), L.data_start);
  EXPECT_EQ(L.data_start % align, 0);
  int64_t off = 0, pad = 0;
  for (size_t i = 0; i < L.tensors.size(); ++i) {
    const GgufTensorInfo& t = L.tensors[i];
    EXPECT_EQ(t.nbytes, sizes[i]) << t.name;
    EXPECT_EQ(t.offset, off) << t.name;
    EXPECT_EQ(t.offset % align, 0) << t.name;
    EXPECT_EQ(t.file_offset, L.data_start + off) << t.name;
    const int64_t padded = (sizes[i] + align - 1) / align * align;
    pad += padded - sizes[i];
    off += padded;
  }
  EXPECT_EQ(L.data_bytes, off);
  EXPECT_EQ(L.file_size, L.data_start + off);  // the last tensor is padded too
  EXPECT_EQ(L.bytes.data_padding, pad);
  EXPECT_EQ(L.bytes.fixed + L.bytes.kv + L.bytes.tensor_info + L.bytes.padding, L.data_start);

  // The independent reader agrees on every tensor info and where the data starts.
  const tg3::File t = tg3::parse(L.header);
  EXPECT_EQ(t.alignment, align);
  EXPECT_EQ(int64_t(t.data_start), L.data_start);
  ASSERT_EQ(t.tensors.size(), L.tensors.size());
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    EXPECT_EQ(t.tensors[i].name, L.tensors[i].name);
    EXPECT_EQ(t.tensors[i].ne, L.tensors[i].dims);
    EXPECT_EQ(t.tensors[i].type, L.tensors[i].type);
    EXPECT_EQ(int64_t(t.tensors[i].offset), L.tensors[i].offset);
  }

  // A whole file: header, each tensor's bytes (a pattern), the padding; sink pre-filled with
  // 0xEE so unwritten padding would show.
  MemorySink sink;
  sink.bytes().assign(size_t(L.file_size), 0xEE);
  write_gguf_header(sink, L);
  for (const GgufTensorInfo& ti : L.tensors) {
    std::vector<uint8_t> data(size_t(ti.nbytes), uint8_t(0x10 + (&ti - L.tensors.data())));
    sink.write_at(ti.file_offset, data.data(), data.size());
  }
  write_gguf_padding(sink, L);
  const std::vector<uint8_t>& b = sink.bytes();
  ASSERT_EQ(int64_t(b.size()), L.file_size);
  for (int64_t p = int64_t(L.header.size()) - L.bytes.padding; p < L.data_start; ++p) EXPECT_EQ(b[size_t(p)], 0);
  for (size_t i = 0; i < L.tensors.size(); ++i) {
    const GgufTensorInfo& ti = L.tensors[i];
    const int64_t end = i + 1 < L.tensors.size() ? L.tensors[i + 1].file_offset : L.file_size;
    EXPECT_EQ(b[size_t(ti.file_offset)], uint8_t(0x10 + i));
    EXPECT_EQ(b[size_t(ti.file_offset + ti.nbytes - 1)], uint8_t(0x10 + i));
    for (int64_t p = ti.file_offset + ti.nbytes; p < end; ++p) ASSERT_EQ(b[size_t(p)], 0) << ti.name << " at " << p;
  }

  // And our reader gives the same back.
  const GgufFile f = read_bytes(b);
  EXPECT_EQ(f.alignment, align);
  EXPECT_EQ(f.data_start, L.data_start);
  EXPECT_EQ(f.data_bytes, L.data_bytes);
  EXPECT_EQ(f.bytes.kv, L.bytes.kv);
  EXPECT_EQ(f.bytes.tensor_info, L.bytes.tensor_info);
  EXPECT_EQ(f.bytes.padding, L.bytes.padding);
  EXPECT_EQ(f.bytes.data_padding, L.bytes.data_padding);
  ASSERT_EQ(f.tensors.size(), L.tensors.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    EXPECT_EQ(f.tensors[i].name, L.tensors[i].name);
    EXPECT_EQ(f.tensors[i].dims, L.tensors[i].dims);
    EXPECT_EQ(f.tensors[i].type, L.tensors[i].type);
    EXPECT_EQ(f.tensors[i].nbytes, L.tensors[i].nbytes);
    EXPECT_EQ(f.tensors[i].offset, L.tensors[i].offset);
    EXPECT_EQ(f.tensors[i].file_offset, L.tensors[i].file_offset);
  }
  EXPECT_EQ(f.find_tensor("blk.0.q6")->type, 14u);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  for (size_t i = 0; i < kv.size(); ++i) EXPECT_TRUE(f.kv.entries()[i].value == kv.entries()[i].value);
}

}  // namespace

TEST(GgufFileLayout, OffsetsAndPaddingAlignment32) { check_layout(32); }
TEST(GgufFileLayout, OffsetsAndPaddingAlignment64) { check_layout(64); }
TEST(GgufFileLayout, OffsetsAndPaddingAlignment1) { check_layout(1); }
TEST(GgufFileLayout, OffsetsAndPaddingAlignment4096) { check_layout(4096); }

TEST(GgufFileLayout, WriterRefusesWhatLlamaCppWouldReject) {
  const GgufMetadata kv;
  auto refuse = [&](std::vector<GgufTensorInfo> ts, const std::string& tensor, const std::string& piece) {
    try {
      layout_gguf(kv, ts, "out.gguf");
      ADD_FAILURE() << "accepted, expected: " << piece;
    } catch (const ConvertError& e) {
      EXPECT_EQ(e.file(), "out.gguf");
      EXPECT_EQ(e.tensor(), tensor);
      EXPECT_NE(e.detail().find(piece), std::string::npos) << e.what();
    }
  };
  refuse({{"a", {4}, 0}, {"a", {4}, 0}}, "a", "duplicate tensor name");
  refuse({{std::string(64, 'n'), {4}, 0}}, std::string(64, 'n'), "too long");
  EXPECT_NO_THROW(layout_gguf(kv, {{std::string(63, 'n'), {4}, 0}}));
  refuse({{"a", {}, 0}}, "a", "n_dims 0");
  refuse({{"a", {1, 1, 1, 1, 1}, 0}}, "a", "n_dims 5");
  refuse({{"a", {4, 0}, 0}}, "a", "must be positive");
  refuse({{"a", {-4}, 0}}, "a", "must be positive");
  refuse({{"a", {4}, 4}}, "a", "removed");
  refuse({{"a", {4}, 43}}, "a", "unknown ggml type id 43");
  refuse({{"a", {33}, 2}}, "a", "block size 32");
  refuse({{"a", {32}, 2, 20}}, "a", "does not match");
  refuse({{"a", {int64_t(1) << 32, int64_t(1) << 32}, 0}}, "a", "too many elements");
  EXPECT_EQ(layout_gguf(kv, {{"a", {32}, 2, 18}}).tensors[0].nbytes, 18);
}

TEST(GgufFileReader, ArraysCanBeKeptShort) {
  GgufMetadata kv;
  std::vector<std::string> toks;
  std::vector<float> scores;
  for (int i = 0; i < 131072; ++i) {
    toks.push_back("tok" + std::to_string(i));
    scores.push_back(float(i));
  }
  kv.set_string_array("tokenizer.ggml.tokens", toks);
  kv.set_f32_array("tokenizer.ggml.scores", scores);
  kv.set_u32("after", 9);
  const GgufLayout L = layout_gguf(kv, {{"t", {8}, 0}});
  MemorySink sink;
  write_gguf_header(sink, L);
  sink.bytes().resize(size_t(L.file_size), 0);

  // A source that counts read_at calls: the window keeps them few.
  struct Counting : MemorySource {
    using MemorySource::MemorySource;
    int calls = 0;
    void read_at(int64_t o, void* d, size_t n) override { ++calls; MemorySource::read_at(o, d, n); }
  } src("big.gguf", sink.bytes());
  GgufReadOptions opt;
  opt.max_array_elements = 4;
  const GgufFile f = read_gguf_file(src, opt);
  EXPECT_LT(src.calls, 100);
  const GgufValue& t = f.kv.at("tokenizer.ggml.tokens");
  EXPECT_EQ(t.size(), 131072u);
  EXPECT_EQ(t.kept(), 4u);
  EXPECT_FALSE(t.complete());
  EXPECT_EQ(t.str(3), "tok3");
  EXPECT_THROW(t.str(4), ConvertError);
  EXPECT_EQ(f.kv.get_array_size("tokenizer.ggml.scores"), 131072u);
  EXPECT_EQ(f.kv.get_f32_array("tokenizer.ggml.scores"), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(f.kv.get_u32("after"), 9u);
  EXPECT_NE(t.summary().find("131072"), std::string::npos);
  EXPECT_EQ(f.tensors.at(0).file_offset, L.tensors[0].file_offset);
  // A short-kept array cannot be written back.
  EXPECT_THROW(layout_gguf(f.kv, {}), ConvertError);
  // All of it, by default.
  const GgufFile full = read_bytes(sink.bytes());
  EXPECT_EQ(full.kv.get_string_array("tokenizer.ggml.tokens"), toks);
}

TEST(GgufFileReader, ReadsOnlyTheHeaderOfAHugeFile) {
  // 40 GB claimed; the source holds only the header and fails any read past it.
  GgufMetadata kv;
  kv.set_string("general.architecture", "llama");
  const GgufLayout L = layout_gguf(kv, {{"token_embd.weight", {8192, 128256}, 8},
                                        {"blk.0.ffn_up.weight", {8192, 28672, 4}, 1}});
  ASSERT_GT(L.file_size, int64_t(2) << 30);
  // A source of that size: the header, then zeros; it records how far the reader went.
  struct HeaderThenZeros : ByteSource {
    std::string n = "huge.gguf";
    std::vector<uint8_t> h;
    int64_t total = 0, furthest = 0;
    int calls = 0;
    const std::string& name() const override { return n; }
    int64_t size() const override { return total; }
    void read_at(int64_t o, void* d, size_t k) override {
      if (o < 0 || o + int64_t(k) > total) throw std::runtime_error("read outside the file");
      ++calls;
      furthest = std::max(furthest, o + int64_t(k));
      uint8_t* p = static_cast<uint8_t*>(d);
      for (size_t i = 0; i < k; ++i) p[i] = o + int64_t(i) < int64_t(h.size()) ? h[size_t(o) + i] : 0;
    }
  } src;
  src.h = L.header;
  src.total = L.file_size;
  const GgufFile f = read_gguf_file(src);
  EXPECT_LE(src.furthest, int64_t(L.header.size()) + 64 * 1024);  // at most one read window past it
  EXPECT_EQ(src.calls, 1);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[1].nbytes, int64_t(8192) * 28672 * 4 * 2);
  EXPECT_EQ(f.tensors[1].file_offset, L.tensors[1].file_offset);
  EXPECT_EQ(f.data_bytes, L.data_bytes);
}

TEST(GgufFileHostile, EveryCaseIsAClearError) {
  for (const tg3::Hostile& h : tg3::hostile_cases()) {
    SCOPED_TRACE(h.name);
    const std::string err = reject_text(h.bytes);
    ASSERT_FALSE(err.empty()) << "accepted";
    EXPECT_EQ(err.rfind("hostile.gguf: ", 0), 0u) << err;
    EXPECT_NE(err.find(h.expect), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
}

TEST(GgufFileHostile, ErrorsNameTheKeyOrTensor) {
  auto cases = tg3::hostile_cases();
  auto get = [&](const std::string& n) -> const tg3::Hostile& {
    for (const auto& h : cases) if (h.name == n) return h;
    throw std::runtime_error("no case " + n);
  };
  MemorySource s1("x.gguf", get("duplicate_key").bytes);
  try { read_gguf_file(s1); FAIL(); } catch (const ConvertError& e) {
    EXPECT_EQ(std::string(e.what()), "x.gguf: key 'test.u32': duplicate key");
  }
  MemorySource s2("x.gguf", get("overlap").bytes);
  try { read_gguf_file(s2); FAIL(); } catch (const ConvertError& e) {
    EXPECT_EQ(e.tensor(), "b");
    EXPECT_NE(e.detail().find("overlaps tensor 'a'"), std::string::npos);
  }
  MemorySource s3("x.gguf", get("unknown_value_type").bytes);
  try { read_gguf_file(s3); FAIL(); } catch (const ConvertError& e) {
    EXPECT_EQ(std::string(e.what()), "x.gguf: key 'test.x': unknown value type 13");
  }
  MemorySource s4("x.gguf", get("ggml_type_43").bytes);
  try { read_gguf_file(s4); FAIL(); } catch (const ConvertError& e) { EXPECT_EQ(e.tensor(), "a"); }
  MemorySource s5("x.gguf", get("version2").bytes);
  try { read_gguf_file(s5); FAIL(); } catch (const ConvertError& e) {
    EXPECT_NE(e.detail().find("only version 3"), std::string::npos);
  }
}

TEST(GgufFileHostile, TheBaseIsValidAndOptionsRelaxPadding) {
  const tg3::Base base;
  EXPECT_EQ(reject_text(base.bytes()), "");
  const GgufFile f = read_bytes(base.bytes());
  EXPECT_EQ(f.data_start, 224);
  EXPECT_EQ(f.file_size, 352);
  EXPECT_EQ(f.tensors[1].file_offset, 256);
  EXPECT_EQ(f.tensors[1].nbytes, 68);
  // Missing padding after the last tensor: accepted only when asked.
  std::vector<uint8_t> b = base.bytes();
  b.resize(b.size() - 28);
  GgufReadOptions lax;
  lax.require_trailing_padding = false;
  EXPECT_EQ(reject_text(b, lax), "");
  EXPECT_NE(reject_text(b), "");
  b.pop_back();  // now the last tensor's own bytes are short
  EXPECT_NE(reject_text(b, lax).find("runs past the end"), std::string::npos);
}

TEST(GgufFileHostile, TruncatedAtEveryPosition) {
  // A file with every value type, several tensor types and a custom alignment.
  GgufMetadata kv = every_type();
  kv.set_alignment(64);
  const GgufLayout L = layout_gguf(kv, mixed_tensors());
  std::vector<uint8_t> full = L.header;
  full.resize(size_t(L.file_size), 0);
  ASSERT_EQ(reject_text(full), "");
  for (size_t n = 0; n < full.size(); ++n) {
    const std::vector<uint8_t> cut(full.begin(), full.begin() + long(n));
    const std::string err = reject_text(cut);
    ASSERT_FALSE(err.empty()) << "a prefix of " << n << " of " << full.size() << " bytes was accepted";
  }
}

TEST(GgufFileHostile, RandomCorruptionNeverCrashes) {
  tg3::Base base;
  const std::vector<uint8_t> good = base.bytes();
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int it = 0; it < 3000; ++it) {
    std::vector<uint8_t> b = good;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % 224;  // in the header
      b[at] = (rng() % 3 == 0) ? 0xFF : uint8_t(rng());
    }
    try {
      MemorySource src("fuzz.gguf", b);
      read_gguf_file(src);
    } catch (const ConvertError&) {
      ++rejected;
    }
    // anything else (std::bad_alloc, std::length_error, a crash) fails the test
  }
  EXPECT_GT(rejected, 1000);
}
