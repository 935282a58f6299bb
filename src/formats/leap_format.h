// LEAP .bin: a 256-byte header, then the weights in LEAP's grouped order (SPEC.md).
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/leap_engine.h"
#include "formats/leap_model.h"
#include "plan/plan.h"

namespace leapconv {

constexpr uint32_t kLeapMagic = 0x616B3432;  // "ak42"
constexpr int kLeapHeaderBytes = 256;

struct LeapHeader {
  int32_t version = 1;
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0;
  int32_t vocab_size = 0;  // as stored: negative for an unshared classifier in version 1
  int32_t seq_len = 0;
  bool shared_classifier = true;
  int32_t group_size = 0;  // version 2 only
};

std::vector<uint8_t> encode_leap_header(const LeapHeader& h);
// The sizes LEAP's engine computes with, as the header states them.
LeapShape leap_shape(const LeapHeader& h);
// The header's fields as summaries and --inspect show them.
nlohmann::json leap_header_json(const LeapHeader& h);
// Parses and sanity-checks a header; throws ConvertError naming `file`.
LeapHeader decode_leap_header(const std::string& file, const uint8_t* bytes, size_t n);

// version 1 (fp32) or 2 (int8 groups); group_size 0 = default (leap_engine.h). Throws where
// LEAP's engine would compute wrong results for the file (group size, 32-bit products).
ConversionPlan plan_leap(const LeapModel& m, int version, int group_size, LeapHeader* header_out);

// The file size a header implies, computed without building the layout (so a lying header
// cannot make a reader allocate per-layer tables); -1 if it overflows.
int64_t leap_implied_size(const LeapHeader& h);

// The LEAP weights a header implies, in file order, with their encodings and offsets: what a
// reader (inspect, verify, tests) walks. Shapes follow the header, names are LEAP's.
std::vector<PlanItem> leap_layout(const LeapHeader& h);

}  // namespace leapconv
