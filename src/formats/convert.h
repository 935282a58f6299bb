// What the user asked for, planned: the format's header, every tensor's encoding and offsets,
// warnings and the predicted byte breakdown; and the summary of a finished conversion.
#pragma once
#include <nlohmann/json.hpp>

#include "check/breakdown.h"
#include "engine/run.h"
#include "source/checkpoint.h"
#include "formats/gguf_lite.h"

namespace leapconv {

// What the user asked for, shared by the CLI and the browser.
struct ConvertOptions {
  std::string format = "leap";  // "leap" or "gguf-lite"
  int version = 1;              // LEAP: 1 fp32, 2 int8
  int64_t seq_len = 0;          // LEAP: 0 = from the config
  int group_size = 0;           // LEAP v2: 0 = default
  GgufPlanOptions gguf;
};

struct PlannedConversion {
  std::string format;  // "leap-v1", "leap-v2", "gguf-lite"
  ConversionPlan plan;
  nlohmann::json header;              // header fields, for summaries
  std::vector<std::string> warnings;  // RoPE assumptions, scheme fallbacks, ...
  ByteBreakdown predicted;            // exact: every size is known before writing
};

// Validates the checkpoint for the chosen format and fixes every byte offset.
PlannedConversion plan_conversion(const Checkpoint& ck, const ConvertOptions& opt);

// The machine-readable summary: header, tensors (name, source, dtype, shape, offset, bytes,
// max error, note), totals and the byte breakdown.
nlohmann::json conversion_summary(const PlannedConversion& pc, const ConversionReport& rep);

}  // namespace leapconv
