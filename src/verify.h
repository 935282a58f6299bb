// Round-trip check (the lab's Block C): read a written file back and compare every tensor
// with what the writer was supposed to store (fake-quant of the source: must match exactly)
// and with the unquantized source (the cost of quantization).
#pragma once
#include <string>
#include <vector>

#include "checkpoint.h"

namespace leapconv {

struct TensorCheck {
  std::string name, source_name, encoding;
  int64_t numel = 0;
  float max_vs_fake_quant = 0.0f;  // must be exactly 0
  float max_vs_source = 0.0f;
};

struct VerifyReport {
  std::string format;
  std::vector<TensorCheck> tensors;
  bool ok = true;  // every max_vs_fake_quant == 0
};

// Works on LEAP (.bin) and GGUF-lite files; throws ConvertError when the file does not fit
// the checkpoint (missing tensor, shape or header mismatch).
VerifyReport verify_file(ByteSource& file, const Checkpoint& ck);

}  // namespace leapconv
