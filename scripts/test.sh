#!/usr/bin/env bash
# Runs every test: GoogleTest (native core and CLI), the same suite under ASan + UBSan, every
# fuzz target for a short fixed time (FUZZ_SECONDS each, default 5; any finding fails), Node
# (WebAssembly CLI vs native, byte for byte), browser end-to-end (Debian's Chromium through
# playwright-core).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-output
phase() {  # name, command...: runs it and says how long it took (the suite's time budget is 40 min)
  local name=$1 t0=$SECONDS; shift
  "$@"
  echo "test.sh: $name took $((SECONDS - t0)) s" | tee -a test-output/phases.txt
}
: > test-output/phases.txt
phase "native GoogleTest" bash -c 'cd build/native && ctest --output-on-failure -j2'
phase "sanitized GoogleTest" bash scripts/sanitize.sh
phase "fuzz" bash scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
phase "node and browser" node --test --test-concurrency=1 tests/node/ tests/browser/
