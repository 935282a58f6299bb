#!/usr/bin/env bash
# Runs every test: GoogleTest (native core and CLI), the same suite under ASan + UBSan, every
# fuzz target for a short fixed time (FUZZ_SECONDS each, default 5; any finding fails), Node
# (WebAssembly CLI vs native, byte for byte), browser end-to-end (Debian's Chromium through
# playwright-core).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-output
(cd build/native && ctest --output-on-failure -j2)
bash scripts/sanitize.sh
bash scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
node --test --test-concurrency=1 tests/node/ tests/browser/
