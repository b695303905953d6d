#!/usr/bin/env bash
# Runs every libFuzzer target in DIR for SECONDS each, keeping corpora in DIR/../corpus, JOBS
# targets at a time (default: one per core). Fails if any target crashes (the crashing input
# is kept in DIR/../crashes, its log beside it).
# First, before any fuzzing, each target runs the inputs it once failed on
# (test/fuzz/regressions/<target>/, committed): a defect fixed stays fixed, whatever the
# fuzzing finds in its seconds. (They do not seed the fuzzing: a 64 KiB input would raise
# libFuzzer's input size limit to 64 KiB and slow a target down thirtyfold.)
# Usage: scripts/run-fuzzers.sh build-fuzz/fuzz 30 [JOBS]
set -euo pipefail
dir=${1:?fuzz binary directory}
seconds=${2:-30}
jobs=${3:-$(nproc)}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
regressions=$root/test/fuzz/regressions
corpus_root=$(dirname "$dir")/corpus
crashes=$(dirname "$dir")/crashes
mkdir -p "$corpus_root" "$crashes"

# libFuzzer's limits, the same for regressions and fuzzing: an input that takes 10 s or 2 GiB is
# a defect (a loop or an allocation the input controls), not a slow machine.
limits=(-timeout=10 -rss_limit_mb=2048)

# The committed inputs of every target, each run once; prints the failures.
run_regressions() {
  local failed=0 fuzzer name
  for fuzzer in "$dir"/fuzz_*; do
    [[ -x $fuzzer ]] || continue
    name=$(basename "$fuzzer")
    [[ -d $regressions/$name ]] || continue
    local inputs=("$regressions/$name"/*)
    if "$fuzzer" "${limits[@]}" "${inputs[@]}" > "$crashes/$name.regressions.log" 2>&1; then
      echo "fuzz: $name regressions ok (${#inputs[@]} inputs)"
    else
      echo "fuzz: $name FAILED on a committed regression input; see $crashes/$name.regressions.log"
      tail -n 30 "$crashes/$name.regressions.log"
      failed=1
    fi
  done
  for name in "$regressions"/*/; do
    name=$(basename "$name")
    [[ -x $dir/$name ]] || { echo "fuzz: regressions for $name, but no such target in $dir"; failed=1; }
  done
  return $failed
}

# One target; prints its verdict, exits non-zero when it crashed.
run_one() {
  local fuzzer=$1 name
  name=$(basename "$fuzzer")
  mkdir -p "$corpus_root/$name"
  if "$fuzzer" -max_total_time="$seconds" "${limits[@]}" -print_final_stats=0 \
      -artifact_prefix="$crashes/$name-" "$corpus_root/$name" > "$crashes/$name.log" 2>&1; then
    echo "fuzz: $name ok ($(grep -c '' "$crashes/$name.log") log lines, corpus $(ls "$corpus_root/$name" | wc -l))"
  else
    echo "fuzz: $name FAILED; see $crashes/$name.log"
    tail -n 30 "$crashes/$name.log"
    echo "fuzz: once fixed, keep the input as a regression: cp $crashes/$name-<crash file>" \
      "test/fuzz/regressions/$name/<what it shows>"
    return 1
  fi
}

status=0
run_regressions || status=1
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
