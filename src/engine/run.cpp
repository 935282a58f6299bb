#include "engine/run.h"

namespace leapconv {

static int64_t source_bytes_of(const ConversionPlan& plan) {
  int64_t n = 0;
  for (const PlanItem& it : plan.items) n += it.rows * it.cols != 0 ? it.recipe.source_bytes() : 0;
  return n;
}

ConversionRun::ConversionRun(const ConversionPlan& plan, std::vector<ByteSource*> shards, PipelineOptions opt)
    : plan_(plan), pipe_(plan, std::move(shards), opt) {
  rep_.items.resize(plan.items.size());
  progress_.n_items = plan.items.size();
  progress_.source_total = rep_.source_bytes = source_bytes_of(plan);
  for (const PlanItem& it : plan.items) progress_.items_done += it.rows * it.cols == 0;  // no chunks
  if (!plan.items.empty()) progress_.name = &plan.items[0].name;
}

bool ConversionRun::next(ChunkResult& c) {
  if (!pipe_.next(c)) return false;
  ItemReport& ir = rep_.items[size_t(c.item)];
  ir.max_err = std::max(ir.max_err, c.max_err);
  rep_.max_err = std::max(rep_.max_err, c.max_err);
  progress_.item = size_t(c.item);
  progress_.items_done += c.row1 == plan_.items[size_t(c.item)].rows;  // its last chunk
  progress_.source_done += c.source_bytes;
  progress_.name = &plan_.items[size_t(c.item)].name;
  return true;
}

ConversionReport ConversionRun::report() const {
  ConversionReport r = rep_;
  r.bytes_written = plan_.total_bytes();
  r.pipeline_buffer_bytes = pipe_.peak_buffer_bytes();
  r.worker_threads_used = pipe_.workers_used();
  r.read_seconds = pipe_.caller_read_seconds();
  r.wait_seconds = pipe_.caller_wait_seconds();
  return r;
}

ConversionReport run_plan(const ConversionPlan& plan, std::vector<ByteSource*> shards,
                          const std::vector<ByteSink*>& sinks, PipelineOptions opt, const ProgressFn& progress) {
  if (sinks.size() != plan.files.size())
    throw ConvertError("internal: " + std::to_string(sinks.size()) + " sinks for " + std::to_string(plan.files.size()) + " files");
  for (size_t i = 0; i < plan.files.size(); ++i) {
    const PlanFile& f = plan.files[i];
    sinks[i]->write_at(0, f.header.data(), f.header.size());
    for (const FixedPiece& p : f.fixed) sinks[i]->write_at(p.offset, p.bytes.data(), p.bytes.size());
  }
  opt.sinks = sinks;  // used directly by the workers if they take concurrent writes
  ConversionRun run(plan, std::move(shards), opt);
  ChunkResult c;
  while (run.next(c)) {
    for (int i = 0; i < c.n_pieces; ++i)
      sinks[size_t(c.pieces[i].file)]->write_at(c.pieces[i].offset, c.pieces[i].data, c.pieces[i].size);
    if (progress && !progress(run.progress())) throw ConvertError("cancelled");
  }
  return run.report();
}

}  // namespace leapconv
