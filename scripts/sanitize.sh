#!/usr/bin/env bash
# The GoogleTest suite built with ASan + UBSan (clang, build/sanitize, -fno-sanitize-recover:
# any report fails its test), the CLI it drives included. ASan cannot start under the 2 GiB
# address-space limit the tests put on CLI children, so in this build they bound memory
# through ASan's own options instead (tests/test_support.h).
#   scripts/sanitize.sh [gtest filter]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
B=build/sanitize
# (configured each time, a second when it already is: a target added since, fuzz_all, is then known)
CC=clang CXX=clang++ cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLEAPCONV_FUZZ=ON >/dev/null
cmake --build $B -j"$JOBS" --target unit_tests export fuzz_all >/dev/null  # (fuzz_all: scripts/fuzz.sh's, built alongside)
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} UBSAN_OPTIONS=print_stacktrace=1 \
  exec bash scripts/gtest.sh $B/tests/unit_tests sanitize "${1:-}"
