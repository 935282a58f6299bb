// ggml's own dequantize_row_* on bytes of a file, for the browser tests' block view check:
//   ggml_dequant FILE OFFSET GGML_TYPE BLOCKS
// prints the values of BLOCKS blocks read at OFFSET as a JSON array (%.9g: float32 exactly).
#include <stdio.h>
#include <stdlib.h>

#include "ggml_ref.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: ggml_dequant FILE OFFSET GGML_TYPE BLOCKS\n");
    return 2;
  }
  const long long offset = atoll(argv[2]), blocks = atoll(argv[4]);
  const int type = atoi(argv[3]);
  const int64_t nv = ggml_ref_block_values(type), nb = ggml_ref_block_bytes(type);
  if (nv < 0 || blocks < 1 || blocks > 4096) {
    fprintf(stderr, "%s: type %d is not wired here, or bad block count\n", argv[1], type);
    return 2;
  }
  FILE* f = fopen(argv[1], "rb");
  unsigned char* bytes = malloc((size_t)(nb * blocks));
  float* out = malloc(sizeof(float) * (size_t)(nv * blocks));
  if (!f || !bytes || !out || fseek(f, offset, SEEK_SET) != 0 || fread(bytes, 1, (size_t)(nb * blocks), f) != (size_t)(nb * blocks)) {
    fprintf(stderr, "%s: cannot read %lld blocks at %lld\n", argv[1], blocks, offset);
    return 1;
  }
  ggml_ref_dequantize_row(type, bytes, out, nv * blocks);
  putchar('[');
  for (int64_t i = 0; i < nv * blocks; ++i) printf("%s%.9g", i ? "," : "", (double)out[i]);
  puts("]");
  return 0;
}
