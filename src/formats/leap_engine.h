// What LEAP's inference engine assumes about the files it loads (SPEC.md, LEAP section), checked
// when a LEAP file is planned, before any tensor data is read. Taken from LEAP's loader
// (TransformerFactory.cpp) and both forward passes (FloatTransformer.cpp runs version 1,
// QuantizedTransformer.cpp version 2), and checked by running the engine on this project's files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace leapconv {

constexpr int64_t kLeapDefaultSeqLen = 2048;  // what LEAP's own exporter writes
constexpr int kLeapMinGroupSize = 16;         // its SIMD dequantizer takes 16 values per scale
constexpr double kLeapRmsEps = 1e-5;          // hard-coded in its rmsnorm()
constexpr double kLeapRopeTheta = 500000.0;   // hard-coded in its precompute_freqs()

// The sizes the engine computes with. 0 = not known yet: every check that needs it passes.
struct LeapShape {
  int64_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab = 0, seq_len = 0;
  int64_t kv_dim() const { return n_heads > 0 ? dim * n_kv_heads / n_heads : 0; }
};

// What the user asked for; 0 = the default.
struct LeapChoice {
  int version = 1;
  int64_t seq_len = 0;
  int group_size = 0;
};

// The header's seq_len: the override, else 2048 (LEAP's exporter) or the model's own maximum
// (max_position_embeddings / max_seq_len) when that is smaller.
int64_t leap_seq_len(int64_t model_max, int64_t override_len);

// The largest of 64, 32, 16 that divides both dim and hidden_dim; 0 when none does.
int default_group_size(int64_t dim, int64_t hidden_dim);

// The version-2 group size: `requested` (0 = the default), refused with the reason where LEAP's
// engine would compute wrong results with it. `file` names where the shape came from;
// `asked` names the requested size in messages (the option, or a file's own group size).
int leap_group_size(const std::string& file, const LeapShape& s, int requested, const std::string& asked = "--group-size");

// One product LEAP's engine computes in a 32-bit int from the header's sizes.
struct LeapInt32Product {
  const char* factors;     // "n_layers × seq_len × kv_dim"
  const char* expression;  // as LEAP's source writes it
  const char* where;       // file and function
  unsigned versions;       // bit 0: version 1 (FloatTransformer), bit 1: version 2 (QuantizedTransformer)
  std::vector<int64_t> (*values)(const LeapShape&);
  enum Remedy { SeqLen, Version2, None } remedy;
};
const std::vector<LeapInt32Product>& leap_int32_products();

// Refuses (ConvertError naming `file`) a shape for which one of those products reaches 2^31
// in this version, saying which and what to do.
void check_leap_int32(const std::string& file, const LeapShape& s, int version);

// Every check for this choice; returns the group size (version 2; 0 for version 1).
int check_leap_engine(const std::string& file, const LeapShape& s, const LeapChoice& c);

// The two f32 KV caches the engine allocates whole at load: 2 × n_layers × seq_len × kv_dim × 4.
int64_t leap_kv_cache_bytes(const LeapShape& s);

// What the engine will do with the file, for summaries (--json, the page) and the CLI's note:
// seq_len and where it came from, the KV caches' size, and a sentence saying so.
nlohmann::json leap_engine_json(const LeapShape& s, const std::string& seq_len_from);

}  // namespace leapconv
