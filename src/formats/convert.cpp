#include "formats/convert.h"

namespace leapconv {

nlohmann::json conversion_summary(const PlannedConversion& pc, const ConversionReport& rep) {
  nlohmann::json j;
  j["format"] = pc.format;
  j["header"] = pc.header;
  nlohmann::json tensors = nlohmann::json::array();
  for (size_t i = 0; i < pc.plan.items.size(); ++i) {
    const PlanItem& it = pc.plan.items[i];
    const Recipe& r = it.recipe;
    nlohmann::json t = {{"name", it.name}, {"source", r.source_name()},
                        {"source_dtype", r.sources.empty() ? "" : dtype_name(r.sources[0].dtype)},
                        {"dtype", it.qt().name}, {"shape", it.shape}, {"offset", it.offset},
                        {"bytes", it.size.total()}, {"values_bytes", it.size.values}, {"scales_bytes", it.size.scales}};
    if (!pc.plan.files[0].suffix.empty()) t["file"] = it.file;  // a split file's part
    if (r.is_computed()) t["computed"] = true;  // from the config (GGUF's rope_freqs)
    if (const Step* p = r.find(StepKind::PermuteHeads)) t["rope_permuted_heads"] = p->heads;
    if (r.find(StepKind::Transpose)) t["transposed"] = true;  // GPT-2's Conv1D [in, out] written [out, in]
    if (const Step* a = r.find(StepKind::AddConstant)) t["value_offset"] = a->value;  // Gemma's norms: the file holds 1 + w
    if (!r.steps.empty() || r.sources.size() > 1) t["recipe"] = r.describe();
    if (i < rep.items.size()) t["max_quant_error"] = rep.items[i].max_err;
    if (!it.note.empty()) t["note"] = it.note;
    tensors.push_back(std::move(t));
  }
  j["tensors"] = std::move(tensors);
  j["total_bytes"] = pc.plan.total_bytes();
  if (!pc.plan.files[0].suffix.empty()) {  // the parts of a split file
    nlohmann::json files = nlohmann::json::array();
    for (const PlanFile& f : pc.plan.files) files.push_back({{"suffix", f.suffix}, {"total_bytes", f.total_bytes}});
    j["files"] = files;
  }
  j["max_quant_error"] = rep.max_err;
  j["worker_threads_used"] = rep.worker_threads_used;
  j["pipeline_buffer_bytes"] = rep.pipeline_buffer_bytes;
  j["read_seconds"] = rep.read_seconds;  // the caller reading shards (browser: this is the bound)
  j["wait_seconds"] = rep.wait_seconds;  // the caller waiting for worker threads
  j["warnings"] = pc.warnings;
  j["notes"] = pc.notes;
  if (!pc.engine.is_null()) j["engine"] = pc.engine;
  j["breakdown"] = breakdown_json(pc.predicted);
  return j;
}

}  // namespace leapconv
