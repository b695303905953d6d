#!/usr/bin/env bash
# Runs every libFuzzer target in DIR for SECONDS each, keeping corpora in DIR/../corpus, JOBS
# targets at a time (default: one per core). Fails if any target crashes (the crashing input
# is kept in DIR/../crashes, its log beside it).
# Usage: scripts/run-fuzzers.sh build-fuzz/fuzz 30 [JOBS]
set -euo pipefail
dir=${1:?fuzz binary directory}
seconds=${2:-30}
jobs=${3:-$(nproc)}
corpus_root=$(dirname "$dir")/corpus
crashes=$(dirname "$dir")/crashes
mkdir -p "$corpus_root" "$crashes"

# One target; prints its verdict, exits non-zero when it crashed.
run_one() {
  local fuzzer=$1 name
  name=$(basename "$fuzzer")
  mkdir -p "$corpus_root/$name"
  if "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
      -artifact_prefix="$crashes/$name-" "$corpus_root/$name" > "$crashes/$name.log" 2>&1; then
    echo "fuzz: $name ok ($(grep -c '' "$crashes/$name.log") log lines, corpus $(ls "$corpus_root/$name" | wc -l))"
  else
    echo "fuzz: $name FAILED; see $crashes/$name.log"
    tail -n 30 "$crashes/$name.log"
    return 1
  fi
}

status=0
running=0
for fuzzer in "$dir"/fuzz_*; do
  [[ -x $fuzzer ]] || continue
  if (( running >= jobs )); then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_one "$fuzzer" &
  running=$((running + 1))
done
while (( running > 0 )); do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
