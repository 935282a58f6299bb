// Round-trip check (the lab's Block C): read a written file back and compare every tensor
// with what the writer was supposed to store (fake-quant of the source: must match exactly)
// and with the unquantized source (the cost of quantization).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "source/checkpoint.h"
#include "source/imatrix.h"

namespace leapconv {

struct TensorCheck {
  std::string name, source_name, encoding;
  int64_t numel = 0;
  float max_vs_fake_quant = 0.0f;  // must be exactly 0 (+inf when `nonfinite`)
  float max_vs_source = 0.0f;
  // Values that read back as Inf or NaN where the source is finite (an overflowed f16 scale):
  // the file does not hold the model, even when the writer's own arithmetic would agree.
  int64_t nonfinite = 0;
  // The source holds values its type cannot store (NaN, Inf, or too large for its scales): the
  // writer refuses it, so whatever the file holds there is not the model.
  bool unencodable = false;
};

// One layer (or the logits) of the forward-pass check.
struct LayerCheck {
  std::string name;             // "layer 0", ..., "logits"
  float file_vs_reference = 0;  // max |model from the file - source model as written|: <= 1e-3
  float quantized_vs_source = 0;  // max |source model as written - unquantized source|: the cost
};

struct ForwardCheck {
  bool ran = false;
  std::string architecture;  // "llama" or "gpt2"
  std::string note;          // why it did not run, or what it covered
  std::vector<int32_t> tokens;
  int64_t layers_run = 0, n_layers = 0;
  std::vector<LayerCheck> layers;
  bool ok = true;
};

constexpr float kForwardTolerance = 1e-3f;  // the lab's bar, per layer

// LEAP version 2: what LEAP's engine computes with the file. Its QuantizedTransformer runs
// W8A8 (int8 weights times activations quantized to int8 in groups); verify emulates it
// (check/leap_w8a8.h) over the same layers and tokens as the forward check and compares it with
// the fp32 model. Informative: it never makes verify fail.
struct W8A8Layer {
  std::string name;         // "layer 0", ..., "logits"
  float vs_as_written = 0;  // max |engine's W8A8 - fp32 model with the file's weights|
  float vs_source = 0;      // max |engine's W8A8 - unquantized source model|
};

struct W8A8Check {
  bool ran = false;
  int group_size = 0;
  std::string note;  // what ran, or why not; says so when the file breaks the engine's rules
  std::vector<W8A8Layer> layers;
  // Positions whose most likely next token (argmax of the logits) is the same (logits only).
  int64_t positions = 0, top1_same_as_written = 0, top1_same_as_source = 0;
  float max_abs_logit = 0;  // of the fp32 model as written: the scale of the logit distances
};

struct VerifyReport {
  std::string format;
  std::vector<TensorCheck> tensors;
  ForwardCheck forward;
  W8A8Check w8a8;
  bool ok = true;  // every max_vs_fake_quant == 0 and the forward check within tolerance
};

struct VerifyOptions {
  bool forward = true;
  // The forward check runs as many layers as fit in this many parameters (weights are read one
  // tensor at a time, so this bounds time and memory for a 70B model as for a small one).
  int64_t param_budget = 256ll << 20;
  // The importance matrix a llama-quantize file was made with (--imatrix): its tensors are
  // expected as quantized with these weights.
  std::shared_ptr<const Imatrix> imatrix;
};

// Where a verify is: `step` of `n_steps` done (one step per tensor, then one per run of the
// forward check: the source as written, the unquantized source, the file's model, LEAP v2's
// W8A8), and what the last step was ("tensor 3 of 201: blk.0.attn_q.weight").
struct VerifyProgress {
  int64_t step = 0, n_steps = 0;
  std::string what;
};

// A verify in steps, like a conversion: the page draws progress and can stop between steps.
// The constructor reads the file's header and matches it to the checkpoint (throws ConvertError
// when it does not fit); step() checks one tensor, or runs the forward check, and returns false
// once nothing is left; finish() runs what is left and returns the report. `file` and `ck` must
// outlive it.
class VerifyRun {
 public:
  VerifyRun(ByteSource& file, const Checkpoint& ck, const VerifyOptions& opt = {});
  // A split GGUF's parts (any order: inspect_files puts them in order).
  VerifyRun(std::vector<ByteSource*> parts, const Checkpoint& ck, const VerifyOptions& opt = {});
  ~VerifyRun();
  bool step();
  const VerifyProgress& progress() const;
  VerifyReport finish();

 private:
  struct State;
  static bool step_forward_end(State& st);
  std::unique_ptr<State> s_;
};

// Works on GGUF, LEAP (.bin) and GGUF-lite files; throws ConvertError when the file does not fit
// the checkpoint (missing tensor, shape or header mismatch) or holds a type the project cannot
// decode. The same as VerifyRun's steps, run to the end.
VerifyReport verify_file(ByteSource& file, const Checkpoint& ck, const VerifyOptions& opt = {});

// The report as the CLI's --json and the page show it.
nlohmann::json verify_report_json(const VerifyReport& rep);

}  // namespace leapconv
