#!/usr/bin/env bash
# Builds the native CLI + tests (build/native) and the WebAssembly modules (build/wasm), then
# copies the browser modules next to the page (web/dist). Incremental: reruns are cheap.
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=/usr/share/nodejs  # Debian's Emscripten finds acorn there
JOBS=${JOBS:-$(nproc)}

[ -f build/native/CMakeCache.txt ] || cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native -j"$JOBS"

if [ "${SKIP_WASM:-0}" != 1 ]; then
  [ -f build/wasm/CMakeCache.txt ] || emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CROSSCOMPILING_EMULATOR=/usr/bin/node >/dev/null
  cmake --build build/wasm -j"$JOBS"
  mkdir -p web/dist
  for f in build/wasm/converter-mt.{js,wasm,worker.js} build/wasm/converter-st.{js,wasm}; do
    cmp -s "$f" "web/dist/$(basename "$f")" || cp "$f" web/dist/
  done
fi

# "Try it"'s vendored files (wllama, jinja) next to the page too, so that web/ is a complete static
# site (npm start serves them from node_modules under the same names: scripts/serve.mjs VENDOR).
node --input-type=module -e "import { VENDOR } from './scripts/serve.mjs';
  for (const [url, file] of Object.entries(VENDOR)) console.log(url.slice(1) + ' ' + file);" |
while read -r rel src; do
  mkdir -p "web/$(dirname "$rel")"
  cmp -s "$src" "web/$rel" || cp "$src" "web/$rel"
done

# The Hub's JavaScript client (npm @huggingface/hub, its browser build) for input from the Hub
# (web/hub.js): its one bare import, the Xet upload hasher it never uses here, points at a stub.
HUB_JS=node_modules/@huggingface/hub/dist/browser/index.mjs
sed 's#from "@huggingface/xetchunk-wasm"#from "../hub_xet_stub.js"#' $HUB_JS > web/vendor/hub.js.new
if grep -q 'from "@' web/vendor/hub.js.new; then echo "build.sh: $HUB_JS has another bare import" >&2; exit 1; fi
cmp -s web/vendor/hub.js.new web/vendor/hub.js && rm web/vendor/hub.js.new || mv web/vendor/hub.js.new web/vendor/hub.js

# The page's built-in demo checkpoints: small, generated, in the real HF layout, with a real
# 400-piece SentencePiece BPE tokenizer (tests/data), so that they convert to GGUFs llama.cpp loads:
# a bf16 Llama, and the same model as an FP8 checkpoint ships (E4M3 weights, 128 x 128 block
# scales, quant_method fp8, as DeepSeek V3 and Qwen3-FP8 save theirs).
# 256 wide (rows of 256 and 768): every K-quant and IQ preset writes its own blocks, no fallback.
DEMO=web/demo/tiny-llama
shape=(--dim 256 --hidden 768 --layers 4 --heads 4 --kv-heads 2 --vocab 400 --seq-len 256 --dtype bf16 --seed 7)
if [ ! -f $DEMO-fp8/model.safetensors ] || [ build/native/make_checkpoint -nt $DEMO-fp8/model.safetensors ] ||
   ! cmp -s tests/data/tiny_sp_bpe.model $DEMO/tokenizer.model || [ "$(cat web/demo/shape 2>/dev/null)" != "${shape[*]}" ]; then
  rm -rf $DEMO $DEMO-fp8
  build/native/make_checkpoint $DEMO "${shape[@]}" >/dev/null
  build/native/make_checkpoint $DEMO-fp8 "${shape[@]}" --quant fp8-block --quant-block 128 --quant-ref "" >/dev/null
  cp tests/data/tiny_sp_bpe.model $DEMO/tokenizer.model
  cp tests/data/tiny_sp_bpe.model $DEMO-fp8/tokenizer.model
  files='["config.json", "model.safetensors", "tokenizer.model"]'
  printf '{"demos": [{"button": "demo", "folder": "tiny-llama", "files": %s},\n  {"button": "demo-fp8", "folder": "tiny-llama-fp8", "files": %s}]}\n' \
    "$files" "$files" > web/demo/manifest.json
  echo "${shape[*]}" > web/demo/shape
fi
echo "build.sh: took $SECONDS s"
