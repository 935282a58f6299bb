#include "formats/convert.h"

namespace leapconv {

nlohmann::json conversion_summary(const PlannedConversion& pc, const ConversionReport& rep) {
  nlohmann::json j;
  j["format"] = pc.format;
  j["header"] = pc.header;
  nlohmann::json tensors = nlohmann::json::array();
  for (size_t i = 0; i < pc.plan.items.size(); ++i) {
    const PlanItem& it = pc.plan.items[i];
    nlohmann::json t = {{"name", it.name}, {"source", it.source_name}, {"source_dtype", dtype_name(it.src_dtype)},
                        {"dtype", it.qt().name}, {"shape", it.shape}, {"offset", it.offset},
                        {"bytes", it.size.total()}, {"values_bytes", it.size.values}, {"scales_bytes", it.size.scales}};
    if (it.permute_heads) t["rope_permuted_heads"] = it.permute_heads;
    if (it.transpose) t["transposed"] = true;    // GPT-2's Conv1D [in, out] written [out, in]
    if (it.add != 0.0f) t["value_offset"] = it.add;  // Gemma's norms: the file holds 1 + w
    if (i < rep.items.size()) t["max_quant_error"] = rep.items[i].max_err;
    if (!it.note.empty()) t["note"] = it.note;
    tensors.push_back(std::move(t));
  }
  for (const FixedPiece& f : pc.plan.fixed)  // tensors computed from the config (GGUF's rope_freqs)
    if (!f.name.empty())
      tensors.push_back({{"name", f.name}, {"source", ""}, {"computed", true}, {"dtype", "F32"},
                         {"shape", {int64_t(f.bytes.size() / 4)}}, {"offset", f.offset}, {"bytes", f.bytes.size()},
                         {"values_bytes", f.bytes.size()}, {"scales_bytes", 0},
                         {"note", "computed from config.json's rope_scaling, as llama.cpp's converter does"}});
  j["tensors"] = std::move(tensors);
  j["total_bytes"] = pc.plan.total_bytes;
  j["max_quant_error"] = rep.max_err;
  j["worker_threads_used"] = rep.worker_threads_used;
  j["pipeline_buffer_bytes"] = rep.pipeline_buffer_bytes;
  j["read_seconds"] = rep.read_seconds;  // the caller reading shards (browser: this is the bound)
  j["wait_seconds"] = rep.wait_seconds;  // the caller waiting for worker threads
  j["warnings"] = pc.warnings;
  if (!pc.engine.is_null()) j["engine"] = pc.engine;
  j["breakdown"] = breakdown_json(pc.predicted);
  return j;
}

}  // namespace leapconv
