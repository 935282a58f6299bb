#!/usr/bin/env bash
# Runs every test: GoogleTest (native core and CLI), Node (WebAssembly CLI vs native, byte for
# byte), browser end-to-end (Debian's Chromium through playwright-core).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-output
(cd build/native && ctest --output-on-failure -j2)
node --test --test-concurrency=1 tests/node/ tests/browser/
