#!/usr/bin/env bash
# test.sh (make test): go vet and go test -race in every Go module given as
# an argument, TEST_JOBS modules at a time (default 1), the longest first as
# given. Each module's go test -json goes through testprogress (its path in
# TESTPROGRESS), so every line names its package; a module's own lines say
# when its vet and tests end and how long they took. Most of a module's test
# time is waiting (timeouts, TTLs, a paused server), so modules running side
# by side share the cores rather than queue for them. Exits 1 if any module
# failed, after all have run; closes with the failed tests' names and first
# messages, then the test counts of all modules.
set -uo pipefail
jobs=${TEST_JOBS:-1}
# Tests that call t.Parallel run this many at a time in each package: most
# of a fault test's time is waiting, not computing.
parallel=${TEST_PARALLEL:-8}
tp=${TESTPROGRESS:?TESTPROGRESS names the built testprogress}
go=${GO:-go}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
start=$SECONDS
since=$(date +%s)

# beat says every 10s that what $1 names is still going (go vet prints
# nothing until it ends).
beat() {
  local t=$SECONDS
  while sleep 10; do echo "== $1 still running ($((SECONDS - t))s)"; done
}

# one runs module $1: vet, then the tests; its counts go to $dir/<n>.totals
# and a failure leaves $dir/<n>.failed.
one() {
  local m=$1 n=$2 t=$SECONDS
  echo "== $m: go vet"
  beat "$m: go vet" &
  local b=$!
  # -race: vet then compiles what go test -race builds next, and the build
  # cache serves the tests (a plain vet compiled every package twice).
  (cd "$m" && $go vet -race ./...)
  local rc=$?
  kill "$b" 2>/dev/null
  wait "$b" 2>/dev/null
  if [ "$rc" -ne 0 ]; then
    echo "== $m: go vet FAILED"
    touch "$dir/$n.failed"
    return
  fi
  echo "== $m: go vet ok ($((SECONDS - t))s); go test -race"
  t=$SECONDS
  if (cd "$m" && $go test -race -count=1 -parallel "$parallel" -timeout 25m -json ./... 2>&1) | "$tp" -since "$since" -totals "$dir/$n.totals" -recap "$dir/$n.recap"; then
    echo "== $m: go test ok ($((SECONDS - t))s, building included)"
  else
    echo "== $m: go test FAILED ($((SECONDS - t))s)"
    touch "$dir/$n.failed"
  fi
}

n=0
for m in "$@"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
    wait -n
  done
  n=$((n + 1))
  one "$m" "$n" &
done
wait

p=0 f=0 s=0
for t in "$dir"/*.totals; do
  [ -e "$t" ] || continue
  read -r a b c <"$t"
  p=$((p + a)) f=$((f + b)) s=$((s + c))
done
failed=$(find "$dir" -name '*.failed' | wc -l)
# The failed tests again, each with its first messages, last: a long run's
# output is often seen only by its tail.
if compgen -G "$dir/*.recap" >/dev/null; then
  echo "== failed tests (their whole output is above):"
  cat "$dir"/*.recap
fi
if [ "$failed" -gt 0 ]; then
  echo "== $failed module(s) FAILED (see above) after $((SECONDS - start))s"
else
  echo "== all modules passed in $((SECONDS - start))s"
fi
echo "tests: $p passed, $f failed, $s skipped"
[ "$failed" -eq 0 ]
