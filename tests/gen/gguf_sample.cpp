// Test helper for tests/node/gguf_container.test.mjs, which reads what this writes with
// node-llama-cpp's GGUF parser and llama.cpp's own gguf.cpp:
//   gguf_sample write <out.gguf> <out.json> [alignment]   a file with many value types and a few
//       tensors of various ggml types (zero-filled data), and a JSON description of what it holds
//   gguf_sample hostile <dir>   the test suite's hostile files (tests/gguf3_reader.h) and
//       <dir>/manifest.json with what our reader and gguf.cpp should say of each
//   gguf_sample check <file>...  our reader's verdict on each file, one JSON line each
//   gguf_sample types   our ggml type table as JSON {id: [block size, bytes per block]}
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "container/gguf_file.h"
#include "gguf3_reader.h"
#include "posix/posix_io.h"

using namespace leapconv;
using json = nlohmann::json;

static void save(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  if (!f) throw ConvertError(path, "", "cannot write");
}

// Each element as JSON: 64-bit integers as decimal strings (exact in JavaScript), floats as
// doubles (an f32 widens exactly).
static json element_json(const GgufValue& v, uint64_t i) {
  switch (v.elem_type()) {
    case GgufType::UINT8: return v.get<uint8_t>(i);
    case GgufType::INT8: return v.get<int8_t>(i);
    case GgufType::UINT16: return v.get<uint16_t>(i);
    case GgufType::INT16: return v.get<int16_t>(i);
    case GgufType::UINT32: return v.get<uint32_t>(i);
    case GgufType::INT32: return v.get<int32_t>(i);
    case GgufType::FLOAT32: return double(v.get<float>(i));
    case GgufType::BOOL: return v.get<bool>(i);
    case GgufType::STRING: return v.str(i);
    case GgufType::UINT64: return std::to_string(v.get<uint64_t>(i));
    case GgufType::INT64: return std::to_string(v.get<int64_t>(i));
    case GgufType::FLOAT64: return v.get<double>(i);
    case GgufType::ARRAY: break;
  }
  return nullptr;
}

static int write_sample(const std::string& out, const std::string& out_json, uint32_t align) {
  GgufMetadata kv;
  kv.set_string("general.architecture", "llama");
  kv.set_string("general.name", "leapconv container sample \xe2\x9c\x93");
  if (align != kGgufDefaultAlignment) kv.set_alignment(align);
  kv.set_u32("llama.block_count", 2);
  kv.set_u32("llama.context_length", 4096);
  kv.set_u32("llama.embedding_length", 256);
  kv.set_f32("llama.rope.freq_base", 500000.0f);
  kv.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  kv.set_string("tokenizer.ggml.model", "gpt2");
  kv.set_string_array("tokenizer.ggml.tokens", {"<s>", "", "\xc4\xa0the", "\xe6\x97\xa5\xe6\x9c\xac", "a b\nc"});
  kv.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.5f, 3.25f, -1e-3f, 1e30f});
  kv.set_i32_array("tokenizer.ggml.token_type", {3, 1, 1, 1, 6});
  kv.set_u8("test.u8", 200);
  kv.set_i8("test.i8", -100);
  kv.set_u16("test.u16", 60000);
  kv.set_i16("test.i16", -30000);
  kv.set_u32("test.u32", 4000000000u);
  kv.set_i32("test.i32", -2000000000);
  kv.set_f32("test.f32", 0.1f);
  kv.set_bool("test.bool_true", true);
  kv.set_bool("test.bool_false", false);
  kv.set_u64("test.u64", std::numeric_limits<uint64_t>::max());
  kv.set_i64("test.i64", std::numeric_limits<int64_t>::min());
  kv.set_f64("test.f64", 2.718281828459045);
  kv.set_string("test.str_empty", "");
  kv.set_u8_array("test.array_u8", {0, 255});
  kv.set_i8_array("test.array_i8", {-128, 127});
  kv.set_u16_array("test.array_u16", {1, 65535});
  kv.set_i16_array("test.array_i16", {-32768, 32767});
  kv.set_u32_array("test.array_u32", {0, 4294967295u});
  kv.set_i64_array("test.array_i64", {-1, 9007199254740993});
  kv.set_u64_array("test.array_u64", {18446744073709551615ull, 42});
  kv.set_f64_array("test.array_f64", {0.1, -1e300});
  kv.set_bool_array("test.array_bool", {true, false, false, true});
  kv.set_f32_array("test.empty_f32", {});
  kv.set_string_array("test.empty_str", {});

  const std::vector<GgufTensorInfo> tensors = {
      {"token_embd.weight", {256, 5}, 8},          // q8_0
      {"output_norm.weight", {256}, 0},            // f32
      {"blk.0.attn_q.weight", {256, 256}, 12},     // q4_K
      {"blk.0.attn_k.weight", {256, 64}, 14},      // q6_K
      {"blk.0.ffn_up.weight", {256, 3}, 1},        // f16, 1536 bytes
      {"blk.0.attn_norm.weight", {3}, 0},          // f32, 12 bytes (padded)
      {"blk.1.attn_v.weight", {64, 2, 3}, 2},      // q4_0, 3-D
      {"blk.1.ffn_gate.weight", {32, 1, 1, 2}, 30},  // bf16, 4-D
      {"blk.1.ffn_down.weight", {256, 7}, 10},     // q2_K
      {"blk.1.attn_output.weight", {256, 2}, 13},  // q5_K
      {"blk.1.x_q5_0", {32, 3}, 6},                // q5_0
      {"blk.1.x_iq4_nl", {32, 1}, 20},             // iq4_nl
      {"rope_freqs.weight", {5}, 26},              // i32
  };
  const GgufLayout L = layout_gguf(kv, tensors, out);
  AtomicFileSink sink(out);
  write_gguf_header(sink, L);
  for (const GgufTensorInfo& t : L.tensors) {
    std::vector<uint8_t> zeros(size_t(t.nbytes), 0);
    sink.write_at(t.file_offset, zeros.data(), zeros.size());
  }
  write_gguf_padding(sink, L);
  sink.commit();

  json j;
  j["alignment"] = L.alignment;
  j["data_start"] = L.data_start;
  j["file_size"] = L.file_size;
  j["kv"] = json::array();
  for (const GgufKV& e : kv.entries()) {
    json v;
    v["key"] = e.key;
    v["type"] = gguf_type_name(e.value.type());
    v["elem"] = gguf_type_name(e.value.elem_type());
    if (e.value.is_array()) {
      v["value"] = json::array();
      for (uint64_t i = 0; i < e.value.size(); ++i) v["value"].push_back(element_json(e.value, i));
    } else {
      v["value"] = element_json(e.value, 0);
    }
    j["kv"].push_back(v);
  }
  j["tensors"] = json::array();
  for (const GgufTensorInfo& t : L.tensors)
    j["tensors"].push_back({{"name", t.name}, {"dims", t.dims}, {"type", t.type}, {"offset", t.offset},
                            {"file_offset", t.file_offset}, {"nbytes", t.nbytes}});
  std::ofstream(out_json) << j.dump(1) << "\n";
  return 0;
}

static int write_hostile(const std::string& dir) {
  json m = json::array();
  for (const tg3::Hostile& h : tg3::hostile_cases()) {
    const std::string path = dir + "/" + h.name + ".gguf";
    save(path, h.bytes);
    m.push_back({{"name", h.name}, {"path", path}, {"expect", h.expect}, {"gguf_cpp_accepts", h.gguf_cpp_accepts}});
  }
  const tg3::Base base;
  save(dir + "/base.gguf", base.bytes());
  m.push_back({{"name", "base"}, {"path", dir + "/base.gguf"}, {"expect", ""}, {"gguf_cpp_accepts", true}});
  std::ofstream(dir + "/manifest.json") << m.dump(1) << "\n";
  return 0;
}

static int check(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    json r = {{"path", argv[i]}};
    try {
      FileSource src(argv[i]);
      const GgufFile f = read_gguf_file(src);
      r["ok"] = true;
      r["tensors"] = f.tensors.size();
    } catch (const ConvertError& e) {
      r["ok"] = false;
      r["error"] = e.what();
    }
    std::printf("%s\n", r.dump().c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "write" && (argc == 4 || argc == 5))
      return write_sample(argv[2], argv[3], argc == 5 ? uint32_t(std::stoul(argv[4])) : kGgufDefaultAlignment);
    if (cmd == "hostile" && argc == 3) return write_hostile(argv[2]);
    if (cmd == "check") return check(argc, argv);
    if (cmd == "types" && argc == 2) {
      json j = json::object();
      for (uint32_t id = 0; id < 256; ++id)
        if (const GgmlTypeInfo* t = ggml_type_info(id)) j[std::to_string(id)] = {t->block_size, t->type_size};
      std::printf("%s\n", j.dump().c_str());
      return 0;
    }
    std::fprintf(stderr, "usage: gguf_sample write <out.gguf> <out.json> [alignment] | hostile <dir> | check <file>... | types\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
