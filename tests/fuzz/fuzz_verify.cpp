// libFuzzer: --verify of a corrupted output. A small generated checkpoint is fixed; the input is
// a file that claims to be written from it (the seeds are real LEAP v1/v2, GGUF-lite and GGUF
// conversions of it), checked tensor by tensor and through the forward pass.
#include "fuzz_common.h"

#include "check/verify.h"

using namespace leapconv;

namespace {
const Checkpoint& checkpoint() {
  static const fuzz::CheckpointBytes b = fuzz::make_checkpoint_bytes(1);
  static const Checkpoint ck = open_checkpoint(fuzz::files_of(b));
  return ck;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Checkpoint& ck = checkpoint();
  try {
    MemorySource src("fuzz.out", std::vector<uint8_t>(data, data + size));
    VerifyOptions opt;
    opt.param_budget = 1 << 20;
    verify_file(src, ck, opt);
  } catch (const ConvertError&) {
  }
  return 0;
}
