#!/usr/bin/env bash
# demo.sh — the flash-sale proof behind `make demo`.
#
# Runs bin/seckill demo: starts its own redis-server on a free loopback port
# (unless REDIS_URL is set), 3 `seckill serve` nodes sharing it and one
# SQLite file, seeds a voucher (STOCK), runs USERS users × DUP concurrent
# duplicate orders round-robin over the nodes with -lock local and then
# -lock redis (fresh data each time), prints the table side by side and one
# `mode=M orders=N duplicates=N oversold=N` line per mode. The table's lock
# rows (lock hit rate, wait p50/p99, renewal success) are scraped from each
# node's /metrics at the end of the mode and summed over the nodes ("n/a"
# under -lock local, which takes no lockgate lock). Then the chaos round:
# Redis flushed while the database stalls (2.5s) with 20 users' first
# orders inside their lock, the same users sent again through the other
# nodes, with the fence-ordered write and with `serve -unfenced`, side by
# side (about 3s each; only on the demo's own Redis, since it flushes it).
# Under -lock redis the nodes take a permit of the voucher's write
# semaphore around each order write (WRITE_LIMIT, seckill serve
# -write-limit, default 4; 0: none) and count the writes in progress; the
# demo prints their peak across the nodes against the limit and the orders
# that waited for a permit.
# Exits non-zero when the redis mode shows a duplicate, an oversell or more
# writes at once than the limit, or the fenced chaos round a duplicate.
#
# DEMO_HTTP picks the nodes' HTTP stack (seckill serve -http: fiber, the
# default, fiberv3, nethttp, chi, gin, echo or echov5), e.g. make demo
# DEMO_HTTP=gin.
#
# The orchestration is Go (cmd/seckill/demo.go); this script only locates or
# builds the binary and forwards Ctrl-C. The demo stops its nodes and its
# Redis at the end and on Ctrl-C/TERM, and its children die with it
# (parent-death signal) if it is killed outright.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${SECKILL_BIN:-$root/bin/seckill}"

if [ ! -x "$bin" ]; then
  echo "demo: building $bin" >&2
  mkdir -p "$(dirname "$bin")"
  (cd "$root/example" && go build -o "$bin" ./cmd/seckill)
fi

args=(demo -users "${USERS:-300}" -dup "${DUP:-8}" -stock "${STOCK:-200}")
if [ -n "${REDIS_URL:-}" ]; then
  args+=(-redis "$REDIS_URL")
fi
if [ -n "${WRITE_LIMIT:-}" ]; then
  args+=(-write-limit "$WRITE_LIMIT")
fi
if [ -n "${DEMO_HTTP:-}" ]; then
  args+=(-http "$DEMO_HTTP")
fi

"$bin" "${args[@]}" &
pid=$!
# Forward Ctrl-C / TERM to the demo, which stops everything it started.
trap 'kill -TERM "$pid" 2>/dev/null || true' INT
trap 'kill -TERM "$pid" 2>/dev/null || true' TERM
status=0
wait "$pid" || status=$?
# wait returns early when a trapped signal arrives: wait again for the demo
# to finish its cleanup (bounded by its own shutdown timeouts).
if kill -0 "$pid" 2>/dev/null; then
  wait "$pid" || status=$?
fi
exit "$status"
