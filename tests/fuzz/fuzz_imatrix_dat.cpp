// libFuzzer: an importance matrix (llama-imatrix's legacy .dat format: any bytes not starting "GGUF")
// through read_imatrix, then every entry looked up for a few tensor shapes as --imatrix does.
#include "fuzz_common.h"

#include "source/imatrix.h"

using namespace leapconv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) bytes[0] = 0;  // (the GGUF target reads those)
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
