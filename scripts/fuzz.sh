#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (ASan + UBSan, any report fatal) for SECONDS each:
#   scripts/fuzz.sh [SECONDS] [target ...]     (npm run fuzz -- 600; default 20 s, every target)
# Builds build/sanitize (clang) first, writes the seed corpora with the tests' generator, keeps
# what each target learns in build/sanitize/fuzz-corpus/<target> (so later runs start further),
# and writes anything it finds to test-output/fuzz/. Exits 1 on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-20}
shift || true
ALL=(safetensors checkpoint_json gguf_lite leap gguf verify tokenizer imatrix_dat imatrix_gguf model_card)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
JOBS=${JOBS:-$(nproc)}
B=build/sanitize

# ASan reserves terabytes of address space for its shadow memory: it cannot start under an
# address-space limit (the tests' 2 GiB RLIMIT_AS, a `ulimit -v`). Memory is bounded by
# libFuzzer's own -rss_limit_mb / -malloc_limit_mb below instead.
if [ "$(ulimit -v)" != unlimited ] && ! ulimit -v unlimited 2>/dev/null; then
  echo "fuzz: ASan cannot run under an address-space limit (ulimit -v is $(ulimit -v) KiB, hard limit" \
       "$(ulimit -H -v)); run without it" >&2
  exit 1
fi

if [ ! -f $B/CMakeCache.txt ] || ! grep -q "LEAPCONV_FUZZ:BOOL=ON" $B/CMakeCache.txt; then
  CC=clang CXX=clang++ cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLEAPCONV_FUZZ=ON >/dev/null
fi
cmake --build $B -j"$JOBS" --target make_fuzz_seeds $(printf 'fuzz_%s ' "${TARGETS[@]}") >/dev/null
rm -rf $B/fuzz-seeds
$B/tests/fuzz/make_fuzz_seeds $B/fuzz-seeds

OUT=test-output/fuzz
mkdir -p $OUT
# One target: its verdict goes to $OUT/<target>.verdict ("ok <execs> <line>" or "finding <execs> <line>").
fuzz_one() {
  local t=$1 log=$OUT/$1.log rc execs
  mkdir -p $B/fuzz-corpus/$t
  rm -f $OUT/$t-* $OUT/$t.verdict
  set +e
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=print_stacktrace=1 \
    $B/tests/fuzz/fuzz_$t -max_total_time="$SECONDS_EACH" -print_final_stats=1 -timeout=20 \
      -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=262144 -artifact_prefix="$OUT/$t-" \
      $B/fuzz-corpus/$t $B/fuzz-seeds/$t >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ $rc -ne 0 ] || ls $OUT/$t-* >/dev/null 2>&1; then
    echo "finding ${execs:-0} fuzz: $t: FINDING after ${execs:-0} executions (exit $rc); see $log and $OUT/$t-*" > $OUT/$t.verdict
  else
    echo "ok ${execs:-0} fuzz: $t: ${execs:-0} executions in ${SECONDS_EACH}s, no findings ($(ls $B/fuzz-corpus/$t | wc -l) corpus entries)" > $OUT/$t.verdict
  fi
}
# The targets run JOBS at a time (each is one process, one core): the phase takes half the time
# on two cores.
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
total=0
failed=()
for t in "${TARGETS[@]}"; do
  verdict=lost execs=0 line="fuzz: $t: ended without a verdict; see $OUT/$t.log"
  [ -f $OUT/$t.verdict ] && read -r verdict execs line < $OUT/$t.verdict
  total=$((total + execs))
  if [ "$verdict" = ok ]; then
    echo "$line"
  else
    failed+=("$t")
    echo "$line" >&2
    grep -m1 -E "ERROR|runtime error|deadly signal|uncaught|out-of-memory|timeout" "$OUT/$t.log" >&2 || true
  fi
done
echo "fuzz: $total executions over ${#TARGETS[@]} targets, ${#failed[@]} with findings"
[ ${#failed[@]} -eq 0 ]
