// libFuzzer: a LEAP .bin file through the LEAP reader and the --inspect path: the header is
// decoded and checked against the file size, the layout built, and every tensor up to 1 MiB
// decoded.
#include "fuzz_common.h"

#include "formats/leap_format.h"

using namespace leapconv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() >= 4) std::memcpy(bytes.data(), "24ka", 4);  // LEAP's magic, little-endian "ak42"
  try {
    MemorySource src("fuzz.bin", bytes);
    const InspectedFile info = inspect_file(src);
    int64_t budget = 1 << 20;
    for (const PlanItem& it : info.items) {
      if (it.size.total() > budget) continue;
      budget -= it.size.total();
      read_tensor_f32(src, it);
    }
  } catch (const ConvertError&) {
  }
  return 0;
}
