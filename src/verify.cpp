#include "verify.h"

#include <cmath>
#include <set>

#include "breakdown.h"
#include "llama.h"

namespace leapconv {

static float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    const float d = std::fabs(a[i] - b[i]);
    if (std::isnan(d)) return INFINITY;  // a NaN against a number
    m = d > m ? d : m;
  }
  return m;
}

VerifyReport verify_file(ByteSource& file, const Checkpoint& ck) {
  InspectedFile f = inspect_file(file);
  VerifyReport rep;
  rep.format = f.format;
  std::vector<const TensorRef*> sources;
  std::vector<int> permute;
  if (f.format == "gguf-lite") {
    for (const PlanItem& it : f.items) {
      const TensorRef* t = ck.find(it.name);
      if (!t) throw ConvertError(file.name(), it.name, "not found in the checkpoint " + ck.label);
      if (t->info.shape != it.shape)
        throw ConvertError(file.name(), it.name, "shape " + shape_string(it.shape) + " differs from the source's " +
                                                     shape_string(t->info.shape));
      sources.push_back(t);
      permute.push_back(0);
    }
    if (f.items.size() != ck.order.size()) {  // every source tensor must be in the file
      std::set<std::string> in_file;
      for (const PlanItem& it : f.items) in_file.insert(it.name);
      for (const std::string& name : ck.order)
        if (!in_file.count(name))
          throw ConvertError(file.name(), name, "is in the checkpoint but missing from the file");
    }
  } else {
    const LeapModel m = map_llama_to_leap(ck, 0);
    const nlohmann::json& h = f.header;
    if (h["dim"] != m.dim || h["hidden_dim"] != m.hidden_dim || h["n_layers"] != m.n_layers ||
        h["n_heads"] != m.n_heads || h["n_kv_heads"] != m.n_kv_heads ||
        h["shared_classifier"] != m.shared_classifier || std::abs(h["vocab_size"].get<int>()) != m.vocab_size)
      throw ConvertError(file.name(), "", "LEAP header does not describe the checkpoint " + ck.label);
    for (const LeapWeight& w : m.weights) {
      sources.push_back(w.src);
      permute.push_back(w.permute_heads);
    }
  }
  for (size_t i = 0; i < f.items.size(); ++i) {
    const PlanItem& it = f.items[i];
    const std::vector<float> src = ck.read_f32(*sources[i], permute[i]);
    const std::vector<float> expect = fake_quantize(it, src.data());
    const std::vector<float> got = read_tensor_f32(file, it);
    TensorCheck c;
    c.name = it.name;
    c.source_name = sources[i]->info.name;
    c.encoding = encoding_name(it.enc);
    c.numel = int64_t(got.size());
    c.max_vs_fake_quant = max_abs_diff(got, expect);
    c.max_vs_source = max_abs_diff(got, src);
    rep.ok = rep.ok && c.max_vs_fake_quant == 0.0f;
    rep.tensors.push_back(std::move(c));
  }
  return rep;
}

}  // namespace leapconv
