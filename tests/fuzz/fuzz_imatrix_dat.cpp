// libFuzzer: an importance matrix through read_imatrix, then every entry looked up for a few
// tensor shapes as --imatrix does. This target reads llama-imatrix's legacy .dat format (any
// bytes not starting "GGUF"); fuzz_imatrix_gguf.cpp builds it for the GGUF format (the input's
// first four bytes made "GGUF").
#include "fuzz_common.h"

#include "source/imatrix.h"

using namespace leapconv;

#ifndef FUZZ_IMATRIX_GGUF
#define FUZZ_IMATRIX_GGUF 0
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  const bool gguf = bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0;
  if (FUZZ_IMATRIX_GGUF && bytes.size() >= 4) std::memcpy(bytes.data(), "GGUF", 4);
  if (!FUZZ_IMATRIX_GGUF && gguf) bytes[0] = 0;  // (the GGUF target reads those)
  try {
    MemorySource src("fuzz.imatrix", bytes);
    const Imatrix im = read_imatrix(src, "fuzz.imatrix");
    std::string why;
    for (const auto& [name, e] : im.entries) {
      const int64_t n = int64_t(e.weights->size());
      importance_for(im, name, {n}, &why);
      importance_for(im, name, {e.slices, 3, n / (e.slices > 0 ? e.slices : 1)}, &why);
    }
  } catch (const ConvertError&) {
  }
  return 0;
}
