// Runs a conversion plan: header first, then every chunk the pipeline produces (in source
// order, each at its planned offset) into a sink. Reports progress and per-tensor quantization error.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/pipeline.h"

namespace leapconv {

struct Progress {
  size_t item = 0, n_items = 0;  // tensor being written (its index in the file)
  size_t items_done = 0;         // tensors written completely (chunks come in source order)
  int64_t source_done = 0, source_total = 0;  // source bytes consumed / to consume
  const std::string* name = nullptr;
};
// Return false to cancel (the conversion then throws ConvertError "cancelled").
using ProgressFn = std::function<bool(const Progress&)>;

struct ItemReport {
  float max_err = 0.0f;
};

struct ConversionReport {
  std::vector<ItemReport> items;  // parallel to plan.items
  float max_err = 0.0f;
  int64_t bytes_written = 0;
  int64_t source_bytes = 0;
  int64_t pipeline_buffer_bytes = 0;
  int worker_threads_used = 0;
  double read_seconds = 0, wait_seconds = 0;  // the caller's time reading / waiting for workers
};

// One conversion in progress: the pipeline plus the bookkeeping of what it produced. The CLI
// drives it through run_plan; the browser drives it a chunk at a time from its worker.
class ConversionRun {
 public:
  ConversionRun(const ConversionPlan& plan, std::vector<ByteSource*> shards, PipelineOptions opt);
  // The next chunk in source order (pieces still to write, unless the pipeline wrote them);
  // false when done.
  bool next(ChunkResult& c);
  const Progress& progress() const { return progress_; }
  int64_t buffer_bytes() const { return pipe_.peak_buffer_bytes(); }
  std::vector<SourceRange> caller_read_order() const { return pipe_.caller_read_order(); }
  // The report, complete once next() has returned false.
  ConversionReport report() const;

 private:
  const ConversionPlan& plan_;
  Pipeline pipe_;
  Progress progress_;
  ConversionReport rep_;
};

// Writes every file of the plan into its sink (sinks[i] for plan.files[i]).
ConversionReport run_plan(const ConversionPlan& plan, std::vector<ByteSource*> shards,
                          const std::vector<ByteSink*>& sinks, PipelineOptions opt, const ProgressFn& progress);
// A plan of one file into one sink.
inline ConversionReport run_plan(const ConversionPlan& plan, std::vector<ByteSource*> shards, ByteSink& sink,
                                 PipelineOptions opt, const ProgressFn& progress) {
  return run_plan(plan, std::move(shards), std::vector<ByteSink*>{&sink}, std::move(opt), progress);
}

}  // namespace leapconv
