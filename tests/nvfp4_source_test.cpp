// NVFP4 checkpoints in (issue 27): NVIDIA ModelOpt NVFP4 and compressed-tensors
// nvfp4-pack-quantized, as llama.cpp's converter writes them (conversion/base.py
// _generate_nvfp4_tensors): no dequantize / requantize. Debian's torch has no float8 dtypes, so
// the converter cannot run here: the oracle is its code written again below, apart from the
// project's recipe steps (_nvfp4_pack: the nibbles of each 16 values, j low and j + 8 high; the
// E4M3 scale bytes & 0x7F; 4 scales then 32 bytes a 64-value block; LlamaModel._repack_nvfp4:
// q / k rows and their scale rows through LlamaModel.permute first), and every other tensor must
// be byte for byte what the decoded twin (tests/gen) gives. Then bad inputs: one line naming the
// file and the tensor or key, nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "gguf3_reader.h"
#include "test_support.h"

using nlohmann::json;

namespace {

// base.py's _nvfp4_pack, from its code: weight U8 [out, n_blocks x 8], scale (E4M3 bytes) [out, n_blocks].
std::vector<uint8_t> nvfp4_pack(const std::vector<uint8_t>& weight, const std::vector<uint8_t>& scale, int64_t out, int64_t n_blocks) {
  // w = weight.reshape(out, n_blocks, 8); vals = stack([w & 0x0F, w >> 4], -1).reshape(out, n_blocks, 16)
  // d_ue = scale.view(uint8) & 0x7F; qs = vals[:, :, :8] | (vals[:, :, 8:] << 4)
  // raw = concatenate([d_ue.reshape(out, n_super, 4), qs.reshape(out, n_super, 32)], -1)
  const int64_t n_super = n_blocks / 4;
  std::vector<uint8_t> raw;
  for (int64_t o = 0; o < out; ++o)
    for (int64_t s = 0; s < n_super; ++s) {
      for (int64_t b = 4 * s; b < 4 * s + 4; ++b) raw.push_back(uint8_t(scale[size_t(o * n_blocks + b)] & 0x7F));
      for (int64_t b = 4 * s; b < 4 * s + 4; ++b) {
        uint8_t vals[16];
        for (int k = 0; k < 8; ++k) {
          const uint8_t w = weight[size_t((o * n_blocks + b) * 8 + k)];
          vals[2 * k] = w & 0x0F, vals[2 * k + 1] = uint8_t(w >> 4);
        }
        for (int j = 0; j < 8; ++j) raw.push_back(uint8_t(vals[j] | (vals[j + 8] << 4)));
      }
    }
  return raw;
}

// LlamaModel.permute(w, n_head, n_head_kv) on rows of `row_bytes`: reshape(n_head, 2, rows / n_head / 2,
// ...).swapaxes(1, 2).reshape(rows, ...)
std::vector<uint8_t> permute_rows(const std::vector<uint8_t>& w, int64_t rows, int64_t row_bytes, int64_t n_head) {
  std::vector<uint8_t> out(w.size());
  const int64_t half = rows / n_head / 2;
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t to = (h * half + i) * 2 + j, from = (h * 2 + j) * half + i;
        std::memcpy(&out[size_t(to * row_bytes)], &w[size_t(from * row_bytes)], size_t(row_bytes));
      }
  return out;
}

struct Gguf {
  std::vector<uint8_t> b;
  tg3::File f;
  explicit Gguf(const std::string& p) : b(tsup::slurp(p)), f(tg3::parse(b)) {}
  std::vector<uint8_t> data(size_t i, size_t n) const {
    const size_t a = f.data_start + f.tensors[i].offset;
    return std::vector<uint8_t>(b.begin() + int64_t(a), b.begin() + int64_t(a + n));
  }
  int index(const std::string& name) const {
    for (size_t i = 0; i < f.tensors.size(); ++i)
      if (f.tensors[i].name == name) return int(i);
    return -1;
  }
  uint32_t file_type() const { return tg3::item<uint32_t>(*f.find("general.file_type")); }
};

class Nvfp4Source : public tsup::TempDirTest {
 protected:
  // An NVFP4 checkpoint at <dir>/<name>/M, its decoded twin at <dir>/<name>-ref/M.
  std::string make(const std::string& name, const std::string& kind, int64_t hidden = 192) {
    gen::Spec s;
    s.arch = "llama";
    s.hf_init = true;
    s.dim = 128, s.hidden = hidden, s.heads = 4, s.kv_heads = 2;
    gen::write_checkpoint(path(name + "/M"), s);
    EXPECT_EQ(gen::quantize_checkpoint(path(name + "/M"), kind, 16, path(name + "-ref/M")), 14);
    return path(name + "/M");
  }
  void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& names, const std::string& out) {
    tsup::expect_one_error(tsup::run_cli(args, dir, 60.0), names, out);
  }
};

const std::vector<std::pair<std::string, std::string>> kProj = {
    {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"}, {"self_attn.v_proj", "attn_v"}, {"self_attn.o_proj", "attn_output"},
    {"mlp.gate_proj", "ffn_gate"},  {"mlp.up_proj", "ffn_up"},      {"mlp.down_proj", "ffn_down"}};

float f32_of(const std::vector<uint8_t>& b) {
  float v;
  std::memcpy(&v, b.data(), 4);
  return v;
}

// One NVFP4 tensor the converter writes: its GGUF name, the HF stems it packs (experts: one each,
// stacked), the heads its rows are permuted in (0: none).
struct Expect {
  std::string gguf;
  std::vector<std::string> hf;
  int heads = 0;
};

// A dense Llama's (q / k permuted), by name within the shard as the converter iterates them.
std::vector<Expect> llama_expect(int layers) {
  std::vector<Expect> e;
  for (int l = 0; l < layers; ++l) {
    std::vector<std::pair<std::string, std::string>> p;
    for (const auto& [hf, gg] : kProj) p.push_back({"model.layers." + std::to_string(l) + "." + hf, "blk." + std::to_string(l) + "." + gg});
    std::sort(p.begin(), p.end());
    for (const auto& [hf, gg] : p) e.push_back({gg, {hf}, gg.find("attn_q") != std::string::npos ? 4 : gg.find("attn_k") != std::string::npos ? 2 : 0});
  }
  return e;
}

void check_file(const std::string& file, const std::string& ref_file, const std::string& shard, bool ct, bool q8,
                const std::vector<Expect>& expect) {
  const Gguf g(file), r(ref_file);
  const tsup::Shard sh = tsup::read_shard(shard);
  auto tensor = [&](const std::string& n) -> const gen::RawTensor* {
    for (const gen::RawTensor& t : sh.tensors)
      if (t.name == n) return &t;
    return nullptr;
  };
  EXPECT_EQ(g.file_type(), q8 ? 7u : 39u) << file;  // MOSTLY_NVFP4 for f32 / f16 / bf16, as the converter sets it
  // the NVFP4 weights first, in the converter's order, each with its factors
  std::vector<std::string> want_first;
  for (const Expect& x : expect) {
    std::vector<uint8_t> want;
    std::vector<float> s2v, inv;
    int64_t out = 0, nb = 0;
    for (const std::string& hf : x.hf) {
      const gen::RawTensor* codes = tensor(hf + (ct ? ".weight_packed" : ".weight"));
      const gen::RawTensor* sc = tensor(hf + ".weight_scale");
      if (!codes || !sc) { ADD_FAILURE() << hf; return; }
      out = codes->shape[0], nb = sc->shape[1];
      std::vector<uint8_t> cw = codes->bytes, cs = sc->bytes;
      if (x.heads) cw = permute_rows(cw, out, nb * 8, x.heads), cs = permute_rows(cs, out, nb, x.heads);
      const std::vector<uint8_t> one = nvfp4_pack(cw, cs, out, nb);
      want.insert(want.end(), one.begin(), one.end());  // (experts: np.stack)
      // scale_2 (ct: 1 / weight_global_scale), input_scale (ct: 1 / input_global_scale); 1 when missing
      const gen::RawTensor* s2 = tensor(hf + (ct ? ".weight_global_scale" : ".weight_scale_2"));
      const gen::RawTensor* in = tensor(hf + (ct ? ".input_global_scale" : ".input_scale"));
      s2v.push_back(s2 ? (ct ? 1.0f / f32_of(s2->bytes) : f32_of(s2->bytes)) : 1.0f);
      inv.push_back(in ? (ct ? 1.0f / f32_of(in->bytes) : f32_of(in->bytes)) : 1.0f);
    }
    const std::string gg = x.gguf;
    const int i = g.index(gg + ".weight");
    if (i < 0) { ADD_FAILURE() << gg; return; }
    const bool experts = x.hf.size() > 1;
    EXPECT_EQ(g.f.tensors[size_t(i)].type, 40u) << gg;
    const std::vector<int64_t> ne = experts ? std::vector<int64_t>{nb * 16, out, int64_t(x.hf.size())} : std::vector<int64_t>{nb * 16, out};
    EXPECT_TRUE(g.f.tensors[size_t(i)].ne == ne) << gg;
    EXPECT_TRUE(g.data(size_t(i), want.size()) == want) << file << ": " << gg << " is not _nvfp4_pack's bytes";
    want_first.push_back(gg + ".weight");
    for (const auto& [suffix, v] : {std::pair{".scale", &s2v}, std::pair{".input_scale", &inv}}) {
      // _write_scale_tensor: unless |v - 1| < 1e-6; experts' _write_scales_tensor: unless np.allclose(v, 1, atol=1e-6)
      bool written = false;
      for (float f : *v) written |= experts ? std::fabs(double(f) - 1.0) > 1e-6 + 1e-5 : !(std::fabs(double(f) - 1.0) < 1e-6);
      const int k = g.index(gg + suffix);
      if (!written) {
        EXPECT_LT(k, 0) << gg << suffix << " is 1: not written";
        continue;
      }
      if (k < 0) { ADD_FAILURE() << gg + suffix; return; }
      EXPECT_EQ(g.f.tensors[size_t(k)].type, 0u);
      EXPECT_TRUE((g.f.tensors[size_t(k)].ne == std::vector<int64_t>{int64_t(v->size())}));
      std::vector<uint8_t> vb(v->size() * 4);
      std::memcpy(vb.data(), v->data(), vb.size());
      EXPECT_TRUE(g.data(size_t(k), vb.size()) == vb) << gg << suffix;
      want_first.push_back(gg + suffix);
    }
  }
  ASSERT_GE(g.f.tensors.size(), want_first.size());
  for (size_t i = 0; i < want_first.size(); ++i) EXPECT_EQ(g.f.tensors[i].name, want_first[i]) << file << " tensor " << i;
  // then the others, as the decoded twin gives them (same order, same bytes)
  std::vector<size_t> rest;
  for (size_t i = 0; i < r.f.tensors.size(); ++i) {
    bool nv = false;
    for (const Expect& x : expect) nv |= r.f.tensors[i].name == x.gguf + ".weight";
    if (!nv) rest.push_back(i);
  }
  ASSERT_EQ(g.f.tensors.size(), want_first.size() + rest.size());
  for (size_t k = 0; k < rest.size(); ++k) {
    const tg3::Tensor& a = g.f.tensors[want_first.size() + k];
    const tg3::Tensor& b = r.f.tensors[rest[k]];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type) << a.name;
    const size_t n = rest[k] + 1 < r.f.tensors.size() ? size_t(r.f.tensors[rest[k] + 1].offset - b.offset) : r.b.size() - r.f.data_start - b.offset;
    const size_t m = std::min(n, g.b.size() - g.f.data_start - a.offset);
    EXPECT_TRUE(g.data(want_first.size() + k, m) == r.data(rest[k], m)) << a.name;
  }
}

TEST_F(Nvfp4Source, WrittenAsTheConvertersNvfp4Blocks) {
  struct Case { std::string kind; bool ct; };
  for (const Case& c : {Case{"modelopt-nvfp4", false}, Case{"modelopt-nvfp4-hf", false}, Case{"ct-nvfp4", true}}) {
    const std::string d = make(c.kind, c.kind), ref = path(c.kind + "-ref/M");
    // sign bits on some E4M3 scale bytes (the converter strips them: & 0x7F); one weight_scale_2 of 1
    // and one input_scale missing (neither is written: _scale_is_trivial)
    tsup::Shard sh = tsup::read_shard(d + "/model.safetensors");
    for (gen::RawTensor& t : sh.tensors) {
      if (t.name == "model.layers.0.self_attn.q_proj.weight_scale")
        for (size_t i = 0; i < t.bytes.size(); i += 3) t.bytes[i] |= 0x80;
      if (!c.ct && t.name == "model.layers.1.mlp.up_proj.weight_scale_2") t.bytes = {0, 0, 0x80, 0x3F};
    }
    std::erase_if(sh.tensors, [&](const gen::RawTensor& t) { return t.name == (c.ct ? "model.layers.1.mlp.up_proj.input_global_scale" : "model.layers.1.mlp.up_proj.input_scale"); });
    gen::write_safetensors(d + "/model.safetensors", sh.tensors);
    std::vector<std::vector<std::string>> runs;
    for (const std::string& t : {"F32", "BF16", "Q8_0"})
      for (const std::string& m : {d, ref}) runs.push_back({m + "." + t + ".gguf", "--model", m, "--outtype", t, "--no-vocab", "--quiet"});
    for (const tsup::RunResult& x : tsup::run_many(runs, dir, 120.0)) ASSERT_EQ(x.exit_code, 0) << x.describe();
    for (const std::string& t : {"F32", "BF16", "Q8_0"}) {
      SCOPED_TRACE(c.kind + " " + t);
      check_file(d + "." + t + ".gguf", ref + "." + t + ".gguf", d + "/model.safetensors", c.ct, t == "Q8_0", llama_expect(2));
    }
  }
  // --verify: the file's NVFP4 blocks are the source's, and the forward pass (each weight times its
  // .scale, as llama.cpp multiplies it in) agrees
  const tsup::RunResult v = tsup::run_cli({"--verify", path("modelopt-nvfp4/M.F32.gguf"), "--model", path("modelopt-nvfp4/M")}, dir, 120.0);
  EXPECT_EQ(v.exit_code, 0) << v.describe();
  EXPECT_NE(v.out.find("PASS"), std::string::npos) << v.describe();
  // --inspect of the checkpoint says how it is stored
  const tsup::RunResult r = tsup::run_cli({"--inspect", path("ct-nvfp4/M"), "--json"}, dir, 60.0);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const json j = json::parse(r.out);
  EXPECT_EQ(j["quantization"]["method"], "compressed-tensors");
  EXPECT_EQ(j["quantization"]["nvfp4_weights"], 14);
}

// A mixture of experts (Qwen3-MoE): a layer's experts of one projection merged into one NVFP4
// tensor when the last of them arrives (_flush_nvfp4_experts), their factors per expert; no
// q / k permutation (Qwen3 is not a LlamaModel).
TEST_F(Nvfp4Source, ExpertsMergedAsTheConverterMergesThem) {
  gen::Spec s;
  s.arch = "qwen3moe";
  s.hf_init = true;
  s.dim = 128, s.hidden = 192, s.heads = 4, s.kv_heads = 2, s.experts = 4, s.experts_used = 2;
  const std::string d = path("moe/M"), ref = path("moe-ref/M");
  gen::write_checkpoint(d, s);
  ASSERT_EQ(gen::quantize_checkpoint(d, "modelopt-nvfp4", 16, ref), 2 * (4 + 3 * 4));
  std::vector<std::vector<std::string>> runs;
  for (const std::string& m : {d, ref}) runs.push_back({m + ".F16.gguf", "--model", m, "--outtype", "F16", "--no-vocab", "--quiet"});
  for (const tsup::RunResult& x : tsup::run_many(runs, dir, 120.0)) ASSERT_EQ(x.exit_code, 0) << x.describe();
  std::vector<Expect> e;
  for (int l = 0; l < 2; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".", B = "blk." + std::to_string(l) + ".";
    for (const auto& [proj, gg] : {std::pair{"down_proj", "ffn_down_exps"}, std::pair{"gate_proj", "ffn_gate_exps"}, std::pair{"up_proj", "ffn_up_exps"}}) {
      Expect x{B + gg, {}, 0};
      for (int k = 0; k < 4; ++k) x.hf.push_back(L + "mlp.experts." + std::to_string(k) + "." + proj);
      e.push_back(x);
    }
    for (const auto& [proj, gg] : {std::pair{"k_proj", "attn_k"}, std::pair{"o_proj", "attn_output"}, std::pair{"q_proj", "attn_q"}, std::pair{"v_proj", "attn_v"}})
      e.push_back({B + gg, {L + "self_attn." + proj}, 0});
  }
  check_file(d + ".F16.gguf", ref + ".F16.gguf", d + "/model.safetensors", false, false, e);
  // an expert missing: refused, naming it
  std::vector<gen::RawTensor> t = tsup::read_shard(d + "/model.safetensors").tensors;
  std::erase_if(t, [](const gen::RawTensor& x) { return x.name.rfind("model.layers.1.mlp.experts.2.up_proj.", 0) == 0; });
  gen::write_safetensors(d + "/model.safetensors", t);
  expect_refused({path("o.gguf"), "--model", d, "--no-vocab", "--quiet"}, {"model.layers.1.mlp.experts.2.up_proj.weight", "missing"}, path("o.gguf"));
}

// Mixtral's experts (block_sparse_moe.experts.{E}.w1 / w2 / w3) in NVFP4: llama.cpp's converter
// merges only experts.{E}.gate_proj / up_proj / down_proj and stops at the others ("Can not map
// tensor"), so they are refused, naming the first, with nothing written.
TEST_F(Nvfp4Source, MixtralExpertsAreRefusedAsTheConverterRefusesThem) {
  gen::Spec s;
  s.arch = "mixtral";
  s.hf_init = true;
  s.dim = 128, s.hidden = 128, s.heads = 4, s.kv_heads = 2, s.experts = 4, s.experts_used = 2;
  const std::string d = path("mixtral/M");
  gen::write_checkpoint(d, s);
  ASSERT_GT(gen::quantize_checkpoint(d, "modelopt-nvfp4", 16, path("mixtral-ref/M")), 0);
  expect_refused({path("o.gguf"), "--model", d, "--no-vocab", "--quiet"},
                 {"model.safetensors", "model.layers.0.block_sparse_moe.experts.0.w1.weight", "Can not map tensor", "gate_proj"},
                 path("o.gguf"));
}

// Gemma 4's mixture as ModelOpt saves it in NVFP4 (each expert its own Linear): the experts merged
// as the converter merges them (ffn_gate_exps / ffn_up_exps / ffn_down_exps, no fused gate and
// up), and each layer's router.per_expert_scale folded into its down experts' factors
// (Gemma4Model._generate_nvfp4_tensors: weight_scale_2 x per_expert_scale[e], in f32), so not
// written on its own; where the down experts have no weight_scale_2 it is (ffn_down_exps.scale).
// Some with one and some without, or unfused experts that are not NVFP4: refused, naming them.
TEST_F(Nvfp4Source, Gemma4ExpertsMergedWithTheirPerExpertScaleFolded) {
  gen::Spec s;
  s.arch = "gemma4";
  s.hf_init = true;
  s.unfused_experts = true;
  s.dim = 128, s.hidden = 192, s.layers = 2, s.heads = 4, s.kv_heads = 2, s.head_dim = 32;
  s.config_patch = R"({"attention_k_eq_v": true, "num_global_key_value_heads": 1, "hidden_size_per_layer_input": 0,
                       "num_kv_shared_layers": 0, "use_double_wide_mlp": false, "enable_moe_block": true,
                       "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 64})";
  const std::string d = path("g4/M");
  gen::write_checkpoint(path("bf16/M"), s);
  expect_refused({path("o.gguf"), "--model", path("bf16/M"), "--no-vocab", "--quiet"},
                 {"model.layers.0.experts.0.down_proj.weight", "not NVFP4", "experts.gate_up_proj"}, path("o.gguf"));
  gen::write_checkpoint(d, s);
  ASSERT_GT(gen::quantize_checkpoint(d, "modelopt-nvfp4", 16, path("g4-ref/M")), 0);
  ASSERT_EQ(tsup::run_cli({path("g4.gguf"), "--model", d, "--outtype", "F16", "--no-vocab", "--quiet"}, dir, 60.0).exit_code, 0);
  const tsup::RunResult v = tsup::run_cli({"--verify", path("g4.gguf"), "--model", d}, dir, 60.0);
  EXPECT_EQ(v.exit_code, 0) << v.describe();  // (its forward pass reads the folded scale from the file)
  const Gguf g(path("g4.gguf"));
  const tsup::Shard sh = tsup::read_shard(d + "/model.safetensors");
  auto tensor = [&](const std::string& n) -> const gen::RawTensor& {
    for (const gen::RawTensor& t : sh.tensors)
      if (t.name == n) return t;
    throw std::runtime_error("no " + n);
  };
  auto bf16 = [](const uint8_t* b) {
    const uint32_t w = uint32_t(b[0] | b[1] << 8) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  };
  int scales = 0;
  for (const tg3::Tensor& t : g.f.tensors) scales += t.name == "blk.1.ffn_down_exps.scale";
  EXPECT_EQ(scales, 1) << "per_expert_scale is folded, not written beside the factors";
  for (int l = 0; l < 2; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".", B = "blk." + std::to_string(l) + ".";
    for (const char* gg : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
      const int i = g.index(B + gg + ".weight");
      ASSERT_GE(i, 0) << gg;
      EXPECT_EQ(g.f.tensors[size_t(i)].type, 40u) << gg;  // NVFP4
    }
    EXPECT_LT(g.index(B + "ffn_gate_up_exps.weight"), 0);
    const gen::RawTensor& pes = tensor(L + "router.per_expert_scale");
    std::vector<float> want;
    for (int e = 0; e < 4; ++e)
      want.push_back(f32_of(tensor(L + "experts." + std::to_string(e) + ".down_proj.weight_scale_2").bytes) * bf16(&pes.bytes[size_t(2 * e)]));
    const int k = g.index(B + "ffn_down_exps.scale");
    ASSERT_GE(k, 0);
    std::vector<uint8_t> wb(16);
    std::memcpy(wb.data(), want.data(), 16);
    EXPECT_TRUE(g.data(size_t(k), 16) == wb) << B << "ffn_down_exps.scale is not weight_scale_2 x per_expert_scale";
  }
  // some down experts with a weight_scale_2 and some without: refused (the converter's assert)
  std::vector<gen::RawTensor> t = sh.tensors;
  std::erase_if(t, [](const gen::RawTensor& x) { return x.name == "model.layers.1.experts.2.down_proj.weight_scale_2"; });
  gen::write_safetensors(d + "/model.safetensors", t);
  expect_refused({path("o.gguf"), "--model", d, "--no-vocab", "--quiet"},
                 {"model.layers.1.experts.2.down_proj.weight_scale_2", "missing", "3 other down experts of layer 1", "partial NVFP4 quantization"},
                 path("o.gguf"));
  // none: the scale on its own, as the checkpoint has it
  std::erase_if(t, [](const gen::RawTensor& x) { return x.name.find("down_proj.weight_scale_2") != std::string::npos; });
  gen::write_safetensors(d + "/model.safetensors", t);
  ASSERT_EQ(tsup::run_cli({path("none.gguf"), "--model", d, "--outtype", "F16", "--no-vocab", "--quiet"}, dir, 60.0).exit_code, 0);
  const Gguf n(path("none.gguf"));
  const int k = n.index("blk.0.ffn_down_exps.scale");
  ASSERT_GE(k, 0);
  std::vector<uint8_t> pb;
  const gen::RawTensor& pes = tensor("model.layers.0.router.per_expert_scale");
  for (int e = 0; e < 4; ++e) {
    const float f = bf16(&pes.bytes[size_t(2 * e)]);
    const uint8_t* c = reinterpret_cast<const uint8_t*>(&f);
    pb.insert(pb.end(), c, c + 4);
  }
  EXPECT_TRUE(n.data(size_t(k), 16) == pb) << "per_expert_scale as it is (F32)";
}

// ModelOpt's mixed precision (quant_algo MIXED_PRECISION, quantized_layers: NVFP4 and FP8 layers):
// the NVFP4 weights kept as blocks, an FP8 one (a scalar weight_scale) decoded as dequant_model
// decodes it; and W4A16_NVFP4 is NVFP4 too.
TEST_F(Nvfp4Source, MixedPrecisionAndW4A16) {
  const std::string d = make("mixed", "modelopt-nvfp4");
  std::remove((d + "/hf_quant_config.json").c_str());
  std::vector<gen::RawTensor> t = tsup::read_shard(d + "/model.safetensors").tensors;
  const std::string v = "model.layers.1.self_attn.v_proj";
  std::erase_if(t, [&](const gen::RawTensor& x) { return x.name.rfind(v + ".", 0) == 0; });
  t.push_back({v + ".weight", "F8_E4M3", {64, 128}, std::vector<uint8_t>(64 * 128, 0x38)});  // E4M3 1.0
  t.push_back({v + ".weight_scale", "F32", {}, {0, 0, 0x80, 0x3E}});                        // 0.25
  t.push_back({v + ".input_scale", "F32", {}, {0, 0, 0x80, 0x3F}});
  gen::write_safetensors(d + "/model.safetensors", t);
  json c = json::parse(tsup::slurp_text(d + "/config.json"));
  json layers = json::object();
  for (int l = 0; l < 2; ++l)
    for (const auto& [hf, gg] : kProj) {
      const std::string n = "model.layers." + std::to_string(l) + "." + hf;
      layers[n] = {{"quant_algo", n == v ? "FP8" : "NVFP4"}};
    }
  c["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "MIXED_PRECISION"}, {"quantized_layers", layers}};
  gen::write_text(d + "/config.json", c.dump());
  ASSERT_EQ(tsup::run_cli({d + ".gguf", "--model", d, "--outtype", "F32", "--no-vocab", "--quiet"}, dir, 60.0).exit_code, 0);
  const Gguf g(d + ".gguf");
  EXPECT_EQ(g.file_type(), 39u);
  int nv = 0;
  for (const tg3::Tensor& x : g.f.tensors) nv += x.type == 40;
  EXPECT_EQ(nv, 13);
  const int i = g.index("blk.1.attn_v.weight");
  ASSERT_GE(i, 0);
  EXPECT_EQ(g.f.tensors[size_t(i)].type, 0u);
  const std::vector<uint8_t> b = g.data(size_t(i), 64 * 128 * 4);
  bool all = true;
  for (size_t k = 0; k < b.size(); k += 4) all &= f32_of(std::vector<uint8_t>(b.begin() + int64_t(k), b.begin() + int64_t(k) + 4)) == 0.25f;
  EXPECT_TRUE(all) << "the FP8 weight decoded: 1.0 x 0.25";
  EXPECT_LT(g.index("blk.1.attn_v.scale"), 0);
  EXPECT_LT(g.index("blk.1.attn_v.input_scale"), 0);
  // W4A16_NVFP4: the same file as NVFP4 gives
  const std::string w = make("w4a16", "modelopt-nvfp4");
  std::remove((w + "/hf_quant_config.json").c_str());
  ASSERT_EQ(tsup::run_cli({w + ".a.gguf", "--model", w, "--outtype", "F16", "--no-vocab", "--quiet"}, dir, 60.0).exit_code, 0);
  json cw = json::parse(tsup::slurp_text(w + "/config.json"));
  cw["quantization_config"]["quant_algo"] = "W4A16_NVFP4";
  gen::write_text(w + "/config.json", cw.dump());
  ASSERT_EQ(tsup::run_cli({w + ".b.gguf", "--model", w, "--outtype", "F16", "--no-vocab", "--quiet"}, dir, 60.0).exit_code, 0);
  EXPECT_TRUE(tsup::slurp(w + ".a.gguf") == tsup::slurp(w + ".b.gguf"));
}

// Bad NVFP4 inputs: one line naming the file and the tensor or key; nothing written.
// The outputs that do not keep ggml's NVFP4 blocks (LEAP, GGUF-lite) take the weights decoded as
// llama.cpp computes them from the converter's blocks: each value E2M1 x its UE4M3 scale (ggml's
// dequantize_row_nvfp4), times the tensor's scale_2 (what llama.cpp multiplies the product by).
// The oracle: the generator's own decoded twin (tests/gen: level x E4M3 x scale_2, in f32), whose
// files must be byte for byte the same. A scale byte's sign bit is dropped, as the converter drops
// it (the twin's scales have none).
TEST_F(Nvfp4Source, DecodedForTheOutputsThatDoNotKeepBlocks) {
  for (const std::string kind : {"modelopt-nvfp4", "ct-nvfp4"}) {
    SCOPED_TRACE(kind);
    const std::string d = make("dec-" + kind, kind), ref = path("dec-" + kind + "-ref/M");
    std::vector<std::vector<std::string>> runs;
    for (const std::string& m : {d, ref}) {
      runs.push_back({m + ".bin", "--meta-llama", m, "--quiet"});
      runs.push_back({m + ".q8.gguf-lite", "--model", m, "--scheme", "q8", "--quiet"});
      runs.push_back({m + ".f16.gguf-lite", "--model", m, "--scheme", "f16", "--quiet"});
    }
    for (const tsup::RunResult& x : tsup::run_many(runs, dir, 120.0)) ASSERT_EQ(x.exit_code, 0) << x.describe();
    // (compressed-tensors' weights come last in a GGUF-lite file, as the converter orders them:
    // there, LEAP's fixed layout is compared)
    for (const std::string ext : {".bin", ".q8.gguf-lite", ".f16.gguf-lite"})
      if (kind != "ct-nvfp4" || ext == ".bin") EXPECT_TRUE(tsup::slurp(d + ext) == tsup::slurp(ref + ext)) << ext << ": not the decoded twin's bytes";
    // GGUF-lite quantizes them as weights (Q8 per channel), not carried as F32 like integer tensors
    const tsup::RunResult i = tsup::run_cli({"--inspect", d + ".q8.gguf-lite"}, dir, 60.0);
    EXPECT_NE(i.out.find("Q8_per_channel         16"), std::string::npos) << i.describe();
    const tsup::RunResult v = tsup::run_cli({"--verify", d + ".bin", "--meta-llama", d}, dir, 120.0);
    EXPECT_EQ(v.exit_code, 0) << v.describe();
    EXPECT_NE(v.out.find("PASS"), std::string::npos) << v.describe();
  }
}

TEST_F(Nvfp4Source, BadInputsAreRefused) {
  const std::string d = make("q", "modelopt-nvfp4");
  const std::string shard = d + "/model.safetensors", out = path("o.gguf");
  const std::vector<std::string> args = {out, "--model", d, "--no-vocab", "--quiet"};
  const tsup::Shard orig = tsup::read_shard(shard);
  const std::string orig_hq = tsup::slurp_text(d + "/hf_quant_config.json");
  auto with_tensors = [&](const std::function<void(std::vector<gen::RawTensor>&)>& fn) { tsup::rewrite_shard(shard, orig, fn); };
  auto find = tsup::tensor_named;
  const std::string w = "model.layers.1.self_attn.k_proj.weight", s = w + "_scale";
  // the block scales: of the wrong shape, not E4M3, missing
  with_tensors([&](auto& t) { find(t, s).shape = {64, 4}; find(t, s).bytes.resize(256); });
  expect_refused(args, {"model.safetensors", s, "[64, 4]", "one scale per 16 values"}, out);
  with_tensors([&](auto& t) { find(t, s).dtype = "BF16"; find(t, s).shape = {64, 4}; });
  expect_refused(args, {"model.safetensors", s, "BF16", "F8_E4M3"}, out);
  with_tensors([&](auto& t) { std::erase_if(t, [&](auto& x) { return x.name == s; }); });
  expect_refused(args, {"model.safetensors", w, "U8", "_scale"}, out);
  // the codes: not U8
  with_tensors([&](auto& t) { find(t, w).dtype = "I8"; });
  expect_refused(args, {"model.safetensors", w, "I8", "U8"}, out);
  // weight_scale_2: two values; not finite
  with_tensors([&](auto& t) { find(t, w + "_scale_2").shape = {2}; find(t, w + "_scale_2").bytes.resize(8); });
  expect_refused(args, {"model.safetensors", w + "_scale_2", "one F32"}, out);
  with_tensors([&](auto& t) {
    const float inf = INFINITY;
    std::memcpy(find(t, w + "_scale_2").bytes.data(), &inf, 4);
  });
  expect_refused(args, {"model.safetensors", w + "_scale_2", "finite"}, out);
  gen::write_safetensors(shard, orig.tensors);
  // a group size that is not 16
  json hq = json::parse(orig_hq);
  hq["quantization"]["group_size"] = 32;
  gen::write_text(d + "/hf_quant_config.json", hq.dump());
  expect_refused(args, {"hf_quant_config.json", "quantization.group_size", "32"}, out);
  gen::write_text(d + "/hf_quant_config.json", "{\"quantization\": ");
  expect_refused(args, {"hf_quant_config.json"}, out);
  gen::write_text(d + "/hf_quant_config.json", orig_hq);
  // types llama-quantize would requantize them to
  expect_refused({out, "--model", d, "--type", "Q4_K_M", "--no-vocab", "--quiet"}, {"Q4_K_M", "NVFP4"}, out);
  EXPECT_EQ(tsup::run_cli(args, dir, 60.0).exit_code, 0);  // and the restored checkpoint converts
  std::filesystem::remove(out);
  // rows that are not whole blocks of 64 (the converter's reshape into super-blocks fails)
  const std::string odd = make("odd", "modelopt-nvfp4", 144);
  expect_refused({out, "--model", odd, "--no-vocab", "--quiet"}, {"model.safetensors", "down_proj.weight", "144", "64"}, out);
  // compressed-tensors: a global scale of 0
  const std::string ct = make("ct", "ct-nvfp4");
  std::vector<gen::RawTensor> t = tsup::read_shard(ct + "/model.safetensors").tensors;
  find(t, "model.layers.0.mlp.up_proj.weight_global_scale").bytes = {0, 0, 0, 0};
  gen::write_safetensors(ct + "/model.safetensors", t);
  expect_refused({out, "--model", ct, "--no-vocab", "--quiet"}, {"model.safetensors", "model.layers.0.mlp.up_proj.weight_global_scale", "0"}, out);
}

}  // namespace
