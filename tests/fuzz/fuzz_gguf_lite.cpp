// libFuzzer: a GGUF-lite file. Its header and descriptors are read and validated, then --inspect
// runs on it and every tensor up to 1 MiB is decoded (any bytes: f16 NaNs, odd lengths).
#include "fuzz_common.h"

#include "formats/gguf_lite.h"

using namespace leapconv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() >= 4) std::memcpy(bytes.data(), "TFLG", 4);  // GGUF-lite's magic, little-endian "GLFT"
  try {
    MemorySource src("fuzz.gguf-lite", bytes);
    const GgufLiteFile g = read_gguf_lite(src);
    const InspectedFile info = inspect_file(src);
    int64_t budget = 1 << 20;
    for (const PlanItem& it : info.items) {
      if (it.size.total() > budget) continue;
      budget -= it.size.total();
      read_tensor_f32(src, it);
      if (it.rows > 1) read_rows_f32(src, it, 0, std::min<int64_t>(it.rows, 2) / it.row_quantum * it.row_quantum);
    }
    (void)g;
  } catch (const ConvertError&) {
  }
  return 0;
}
