#!/usr/bin/env bash
# Runs a GoogleTest binary as one shard per core (GoogleTest's own sharding), side by side, each
# shard one process: what a test builds once per process (ggml's IQ search grids, a second or
# more each, for ours and for the reference) is built once a shard, not once a test as ctest's
# process per test would. A shard that fails, or runs past LIMIT seconds (default 1800), fails.
#   scripts/gtest.sh BINARY NAME [gtest filter]      (each shard: test-output/NAME-<k>.xml and .log)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1 name=$2 filter=${3:-}
JOBS=${JOBS:-$(nproc)}
mkdir -p test-output
pids=()
for ((k = 0; k < JOBS; k++)); do
  GTEST_TOTAL_SHARDS=$JOBS GTEST_SHARD_INDEX=$k timeout "${LIMIT:-1800}" \
    "$bin" --gtest_brief=1 ${filter:+--gtest_filter="$filter"} --gtest_output=xml:test-output/$name-$k.xml \
    > test-output/$name-$k.log 2>&1 &
  pids+=($!)
done
fail=0
for k in "${!pids[@]}"; do
  wait "${pids[$k]}" || { fail=1; echo "$name: shard $k failed (exit $?)"; }
  cat test-output/$name-$k.log
done
exit $fail
