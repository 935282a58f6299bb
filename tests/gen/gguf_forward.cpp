// gguf_forward: the project's reference forward pass (src/check/forward.h) run on the
// dequantized weights of a GGUF file (Llama: llama_forward; every other family, or Llama with
// GGUF_FORWARD_DECODER set: decoder_forward with the spec llama.cpp reads from the file's keys),
// for comparing with llama.cpp.
//   gguf_forward <file.gguf> <out.f32> <token,token,...> [--ggml-gelu] [--n-ctx N] [--gelu-jitter X]
// (--ggml-gelu: GELU as llama.cpp's CPU backend rounds it, through f16; DecoderSpec::ggml_gelu;
// --n-ctx: llama.cpp's context per sequence, which picks longrope's factors: the tests' context
// of 64, padded by llama.cpp to 256, the default)
// writes T x V float32: log p(next token) at every position, computed in double.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "arch/arch_table.h"
#include "check/forward.h"
#include "formats/gguf/gguf_format.h"
#include "posix/posix_io.h"
#include "quant/codec.h"

using namespace leapconv;

namespace {

// The file's tensors under the forward pass's (LEAP's) names, through the architecture table.
class GgufWeights : public ModelWeights {
 public:
  GgufWeights(ByteSource& f, const InspectedFile& info) : f_(f) {
    for (const PlanItem& it : info.items) by_gguf_[it.name] = &it;
  }
  std::vector<float> tensor(const std::string& name) override { return read_tensor_f32(f_, get(name)); }
  std::vector<float> rows(const std::string& name, int64_t r0, int64_t r1) override {
    return read_rows_f32(f_, get(name), r0, r1);
  }
  bool has(const std::string& n) override { return find_gguf(n) != nullptr; }
  const PlanItem* find_gguf(const std::string& n) const {
    auto it = by_gguf_.find(n);
    return it == by_gguf_.end() ? nullptr : it->second;
  }

 private:
  const PlanItem& get(const std::string& leap_name) {
    if (const PlanItem* it = find_gguf(leap_name)) return *it;  // decoder_forward: GGUF names
    for (const TensorRole& r : llama_family().roles) {
      const int64_t l = match_role_name(r.leap, leap_name);
      if (l < 0) continue;
      if (const PlanItem* it = find_gguf(role_name(r.gguf, l))) return *it;
    }
    throw ConvertError(f_.name(), leap_name, "no such tensor in the file");
  }
  ByteSource& f_;
  std::map<std::string, const PlanItem*> by_gguf_;
};

}  // namespace

int main(int argc, char** argv) {
  bool ggml_gelu = false, bad = argc < 4;
  int64_t n_ctx = 256;
  float jitter = 0;
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ggml-gelu") ggml_gelu = true;
    else if (a == "--n-ctx" && i + 1 < argc) n_ctx = std::atoll(argv[++i]);
    else if (a == "--gelu-jitter" && i + 1 < argc) jitter = float(std::atof(argv[++i]));
    else bad = true;
  }
  if (bad) {
    std::fputs("usage: gguf_forward <file.gguf> <out.f32> <token,token,...> [--ggml-gelu]\n", stderr);
    return 2;
  }
  try {
    FileSource f(argv[1]);
    const InspectedFile info = inspect_gguf(f);
    const GgufFile g = read_gguf_file(f, GgufReadOptions{16, true});
    GgufWeights w(f, info);
    std::vector<int32_t> tokens;
    std::stringstream ss(argv[3]);
    for (std::string t; std::getline(ss, t, ',');) tokens.push_back(std::stoi(t));
    ForwardTrace tr;
    const int64_t vocab = w.find_gguf("token_embd.weight")->shape[0];
    // NVFP4's per-tensor factors (<stem>.scale), which llama.cpp multiplies into the matmul: the
    // general pass reads the weights by GGUF name, times them
    std::map<std::string, std::vector<float>> factors;
    for (const PlanItem& it : info.items)
      if (it.name.size() > 6 && it.name.compare(it.name.size() - 6, 6, ".scale") == 0) factors[it.name] = read_tensor_f32(f, it);
    if (info.architecture != "llama" || std::getenv("GGUF_FORWARD_DECODER") || g.kv.has("llama.expert_count") || !factors.empty()) {
      // every other family (and Llama on request): the general pass, spec from the file's keys
      ComputedTensors computed;
      for (const char* name : {"rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"})
        if (const PlanItem* t = w.find_gguf(name)) computed[name] = read_tensor_f32(f, *t);
      DecoderSpec s = gguf_decoder_spec(g.kv, vocab, w.find_gguf("output.weight") != nullptr, computed, n_ctx);
      s.ggml_gelu = ggml_gelu;
      // (as llama.cpp's CPU backend: MXFP4 experts multiply Q8_0-rounded inputs)
      const PlanItem* experts = w.find_gguf("blk.0.ffn_gate_exps.weight");
      s.q8_expert_inputs = ggml_gelu && experts && experts->type == QType::MXFP4;
      s.gelu_jitter = jitter;
      if (!s.not_run.empty()) throw ConvertError(argv[1], "", "the reference pass does not run " + s.not_run);
      FactorScaledWeights scaled(std::shared_ptr<ModelWeights>(&w, [](ModelWeights*) {}), factors, s.family);
      tr = decoder_forward(s, scaled, tokens, s.n_layers);
    } else {
      LlamaSpec s;
      s.dim = g.kv.get_u32("llama.embedding_length");
      s.hidden = g.kv.get_u32("llama.feed_forward_length");
      s.n_layers = g.kv.get_u32("llama.block_count");
      s.n_heads = g.kv.get_u32("llama.attention.head_count");
      s.n_kv_heads = g.kv.get_u32("llama.attention.head_count_kv");
      s.eps = g.kv.get_f32("llama.attention.layer_norm_rms_epsilon");
      s.rope_theta = g.kv.has("llama.rope.freq_base") ? g.kv.get_f32("llama.rope.freq_base") : 10000.0;
      s.vocab = vocab;
      s.shared_classifier = w.find_gguf("output.weight") == nullptr;
      s.interleaved_rope = true;  // the q/k rows are permuted as llama.cpp's converter does
      if (const PlanItem* rf = w.find_gguf("rope_freqs.weight")) s.rope_freq_factors = read_tensor_f32(f, *rf);
      tr = llama_forward(s, w, tokens, s.n_layers);
    }
    std::vector<float> out(tr.logits.size());
    for (size_t t = 0; t < tokens.size(); ++t) {
      const float* z = tr.logits.data() + t * size_t(vocab);
      double mx = -INFINITY, sum = 0;
      for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, double(z[v]));
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(z[v]) - mx);
      const double lse = mx + std::log(sum);
      for (int64_t v = 0; v < vocab; ++v) out[t * size_t(vocab) + size_t(v)] = float(double(z[v]) - lse);
    }
    std::ofstream o(argv[2], std::ios::binary);
    o.write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size() * 4));
    std::printf("%zu positions x %lld\n", tokens.size(), (long long)vocab);
    if (std::isfinite(tr.router_margin)) std::printf("router margin %.9g\n", tr.router_margin);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
