// libFuzzer: an importance matrix in llama-imatrix's GGUF format (fuzz_imatrix_dat.cpp's target
// with the input's first four bytes made "GGUF").
#define FUZZ_IMATRIX_GGUF 1
#include "fuzz_imatrix_dat.cpp"
