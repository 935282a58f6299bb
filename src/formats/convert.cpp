#include "formats/convert.h"

#include "formats/leap_format.h"

namespace leapconv {

PlannedConversion plan_conversion(const Checkpoint& ck, const ConvertOptions& opt) {
  PlannedConversion pc;
  if (opt.format == "leap") {
    const LeapModel m = map_llama_to_leap(ck, opt.seq_len);
    LeapHeader h;
    pc.plan = plan_leap(m, opt.version, opt.group_size, &h);
    pc.format = h.version == 1 ? "leap-v1" : "leap-v2";
    pc.warnings = m.warnings;
    pc.header = {{"magic", "ak42"}, {"version", h.version}, {"dim", h.dim}, {"hidden_dim", h.hidden_dim},
                 {"n_layers", h.n_layers}, {"n_heads", h.n_heads}, {"n_kv_heads", h.n_kv_heads},
                 {"vocab_size", h.vocab_size}, {"seq_len", h.seq_len},
                 {"shared_classifier", h.shared_classifier}, {"group_size", h.group_size}};
    pc.predicted = make_breakdown(pc.format, pc.plan.items, kLeapHeaderBytes, 0, 0, ck.source_bytes);
  } else if (opt.format == "gguf-lite") {
    pc.plan = plan_gguf_lite(ck, opt.gguf);
    pc.format = "gguf-lite";
    for (const PlanItem& it : pc.plan.items)
      if (!it.note.empty()) pc.warnings.push_back("fallback: " + it.name + ": " + it.note);
    const int64_t meta = get_le<uint32_t>(pc.plan.header.data() + 12);
    const int64_t desc = int64_t(pc.plan.header.size()) - 16 - meta;
    pc.header = {{"magic", "GLFT"}, {"version", kGgufLiteVersion}, {"n_tensors", pc.plan.items.size()},
                 {"metadata_len", meta}};
    pc.predicted = make_breakdown(pc.format, pc.plan.items, 16, meta, desc, ck.source_bytes);
  } else {
    throw ConvertError("unknown format '" + opt.format + "' (use leap or gguf-lite)");
  }
  return pc;
}

nlohmann::json conversion_summary(const PlannedConversion& pc, const ConversionReport& rep) {
  nlohmann::json j;
  j["format"] = pc.format;
  j["header"] = pc.header;
  nlohmann::json tensors = nlohmann::json::array();
  for (size_t i = 0; i < pc.plan.items.size(); ++i) {
    const PlanItem& it = pc.plan.items[i];
    nlohmann::json t = {{"name", it.name}, {"source", it.source_name}, {"source_dtype", dtype_name(it.src_dtype)},
                        {"dtype", encoding_name(it.enc)}, {"shape", it.shape}, {"offset", tensor_start(it)},
                        {"bytes", it.size.total()}, {"values_bytes", it.size.values}, {"scales_bytes", it.size.scales}};
    if (it.permute_heads) t["rope_permuted_heads"] = it.permute_heads;
    if (i < rep.items.size()) t["max_quant_error"] = rep.items[i].max_err;
    if (!it.note.empty()) t["note"] = it.note;
    tensors.push_back(std::move(t));
  }
  j["tensors"] = std::move(tensors);
  j["total_bytes"] = pc.plan.total_bytes;
  j["max_quant_error"] = rep.max_err;
  j["worker_threads_used"] = rep.worker_threads_used;
  j["pipeline_buffer_bytes"] = rep.pipeline_buffer_bytes;
  j["read_seconds"] = rep.read_seconds;  // the caller reading shards (browser: this is the bound)
  j["wait_seconds"] = rep.wait_seconds;  // the caller waiting for worker threads
  j["warnings"] = pc.warnings;
  j["breakdown"] = breakdown_json(pc.predicted);
  return j;
}

}  // namespace leapconv
