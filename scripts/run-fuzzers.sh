#!/usr/bin/env bash
# Runs every libFuzzer target in DIR for SECONDS each, keeping corpora in DIR/../corpus.
# Fails if any target crashes (the crashing input is kept in DIR/../crashes).
# Usage: scripts/run-fuzzers.sh build-fuzz/fuzz 30
set -euo pipefail
dir=${1:?fuzz binary directory}
seconds=${2:-30}
corpus_root=$(dirname "$dir")/corpus
crashes=$(dirname "$dir")/crashes
mkdir -p "$corpus_root" "$crashes"
status=0
for fuzzer in "$dir"/fuzz_*; do
  [[ -x $fuzzer ]] || continue
  name=$(basename "$fuzzer")
  mkdir -p "$corpus_root/$name"
  if "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 -artifact_prefix="$crashes/$name-" \
      "$corpus_root/$name" > "$crashes/$name.log" 2>&1; then
    echo "fuzz: $name ok ($(grep -c '' "$crashes/$name.log") log lines, corpus $(ls "$corpus_root/$name" | wc -l))"
  else
    echo "fuzz: $name FAILED; see $crashes/$name.log"
    tail -n 30 "$crashes/$name.log"
    status=1
  fi
done
exit $status
