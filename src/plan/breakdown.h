// Where an output file's bytes go: by dtype (values vs scales), header, metadata and
// descriptors, against the source checkpoint and an FP32 baseline (numel x 4, what an fp32
// state-dict save stores). Built from a plan (before/after writing) or from a file on disk.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace leapconv {

struct DtypeBytes {
  std::string dtype;
  int64_t tensors = 0, numel = 0, values = 0, scales = 0;
};

// A mixture of experts' tensors by part (by GGUF name: the stacked routed experts "_exps.", the
// shared expert "_shexp.", the routers "ffn_gate_inp"; the rest: "dense"); empty for a dense model.
struct PartBytes {
  std::string part;
  int64_t tensors = 0, numel = 0, bytes = 0;
};
// The part of a tensor by its name ("experts", "shared expert", "router", "dense").
const char* tensor_part(const std::string& name);

struct ByteBreakdown {
  std::string format;  // "leap-v1", "leap-v2", "gguf-lite"
  std::vector<DtypeBytes> by_dtype;
  std::vector<PartBytes> by_part;
  int64_t header = 0, metadata = 0, descriptors = 0;
  int64_t vocabulary = 0;  // GGUF: the tokenizer.* keys (counted apart from the other metadata)
  int64_t padding = 0;     // GGUF: zero bytes that align the data section and every tensor
  int64_t total = 0;
  int64_t fp32_baseline = 0;
  int64_t source_bytes = 0;  // 0 when unknown
  // The source's stored bytes by its dtype (every tensor of its shards: a quantized checkpoint's
  // scales and packed codes too); empty when unknown.
  std::vector<std::pair<std::string, int64_t>> source_by_dtype;
};

ByteBreakdown make_breakdown(const std::string& format, const std::vector<PlanItem>& items,
                             int64_t header, int64_t metadata, int64_t descriptors,
                             int64_t source_bytes);
// Adds the vocabulary and padding bytes (GGUF) to a breakdown and its total.
void add_vocabulary_and_padding(ByteBreakdown& b, int64_t vocabulary, int64_t padding);
// Adds a tensor of a type whose values and scales cannot be told apart here (a GGUF IQ type):
// its bytes count as values.
void add_undecoded_tensor(ByteBreakdown& b, const std::string& dtype, int64_t numel, int64_t bytes);
nlohmann::json breakdown_json(const ByteBreakdown& b);
std::string breakdown_text(const ByteBreakdown& b);

}  // namespace leapconv
