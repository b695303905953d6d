# Shell helpers for the kubectl scenarios; the runner sources this file into every step
# (BASH_ENV). They wait on conditions with a deadline instead of sleeping for fixed times.

# until_ok CMD...: runs CMD until it succeeds (quietly), at most 20 s; then runs it once more
# with its output. For state that a controller creates asynchronously.
until_ok() {
  local i
  for ((i = 0; i < 400; i++)); do
    "$@" >/dev/null 2>&1 && break
    sleep 0.05
  done
  "$@"
}

# watch_then LINES WRITES CMD...: runs the watching kubectl command CMD in the background,
# waits until its watch request has been answered (kubectl -v=6 logs the response:
# "GET ...watch=true 200 OK" up to 1.32, "...watch=true" status="200 OK" from 1.33 on),
# evaluates WRITES, waits until CMD has printed LINES lines, then stops CMD and prints what it
# printed. Each wait gives up after 20 s (the printed lines then show what was missing).
watch_then() {
  local lines=$1 writes=$2 i
  shift 2
  local out err
  out=$(mktemp) err=$(mktemp)
  "$@" -v=6 >"$out" 2>"$err" &
  local pid=$!
  for ((i = 0; i < 400; i++)); do
    grep -qE 'watch=true.*200 OK' "$err" && break
    sleep 0.05
  done
  eval "$writes"
  for ((i = 0; i < 400; i++)); do
    [ "$(wc -l <"$out")" -ge "$lines" ] && break
    sleep 0.05
  done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  cat "$out"
  rm -f "$out" "$err"
}
