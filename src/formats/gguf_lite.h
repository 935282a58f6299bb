// GGUF-lite (the lab's format, fixed by SPEC.md): header, "key=value" metadata, tensor
// descriptors with offsets into the data section, then the tensors' bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/plan.h"
#include "plan/schemes.h"
#include "source/checkpoint.h"

namespace leapconv {

constexpr uint32_t kGgufLiteMagic = 0x474C4654;  // "GLFT"
constexpr uint32_t kGgufLiteVersion = 1;

struct GgufPlanOptions {
  QType default_scheme = QType::F16;      // for tensors of 2 or more dims
  std::vector<SchemeRule> rules;            // first match wins, before the default
};

// Plans every tensor of the checkpoint, in checkpoint order. Ineligible choices fall back per
// SPEC (1-D -> F32, otherwise F16) and say so in PlanItem::note.
ConversionPlan plan_gguf_lite(const Checkpoint& ck, const GgufPlanOptions& opt);

struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;
  QType type = QType::F32;
  int64_t offset = 0;  // relative to the data section, as stored
  PlanItem layout;     // absolute offsets and 2-D geometry
};

struct GgufLiteFile {
  std::string file;
  int64_t file_size = 0;
  uint32_t version = 0;
  std::string metadata;
  std::vector<GgufTensor> tensors;
  int64_t header_bytes = 16, metadata_bytes = 0, descriptor_bytes = 0, data_start = 0;
};

// The header's fields as summaries and --inspect show them.
nlohmann::json gguf_lite_header_json(const GgufLiteFile& f);

// Reads and validates everything but the tensor data; throws ConvertError naming the problem.
GgufLiteFile read_gguf_lite(ByteSource& src);

// What GGUF-lite can describe, the one rule the writer and the reader share (so the writer
// never makes a file its reader rejects): at most 8 dims, each a u32, their running product at
// most 2^50 (zero-size tensors included). Returns why a shape cannot be stored, or "".
constexpr int kGgufLiteMaxDims = 8;
std::string gguf_lite_shape_refusal(const std::vector<int64_t>& shape);
}  // namespace leapconv
