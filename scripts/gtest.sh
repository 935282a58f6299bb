#!/usr/bin/env bash
# Runs a GoogleTest binary as one shard per core, side by side, each shard one process: what a
# test builds once per process (ggml's IQ search grids, a second or more each, for ours and for
# the reference) is built once a shard, not once a test as ctest's process per test would. The
# tests are dealt to the shards by weight (scripts/gtest_shards.mjs; the heaviest tests' seconds
# under the sanitizers are in scripts/gtest_weights.txt): GoogleTest's own sharding, test i to
# shard i mod N, left one shard 80 s behind the other under the sanitizers. A shard that fails,
# or runs past LIMIT seconds (default 1800), fails.
#   scripts/gtest.sh BINARY NAME [gtest filter]      (each shard: test-output/NAME-<k>.xml and .log)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1 name=$2 filter=${3:-}
JOBS=${JOBS:-$(nproc)}
mkdir -p test-output
list=$("$bin" --gtest_list_tests ${filter:+--gtest_filter="$filter"})
mapfile -t shards < <(node scripts/gtest_shards.mjs "$JOBS" scripts/gtest_weights.txt <<< "$list")
pids=()
for ((k = 0; k < JOBS; k++)); do
  rm -f test-output/$name-$k.xml test-output/$name-$k.log
  [ -n "${shards[$k]:-}" ] || continue
  timeout "${LIMIT:-1800}" "$bin" --gtest_brief=1 --gtest_filter="${shards[$k]}" --gtest_output=xml:test-output/$name-$k.xml \
    > test-output/$name-$k.log 2>&1 &
  pids[$k]=$!
done
fail=0
for k in "${!pids[@]}"; do
  wait "${pids[$k]}" || { rc=$?; fail=1; echo "$name: shard $k failed (exit $rc)"; }
  cat test-output/$name-$k.log
done
exit $fail
