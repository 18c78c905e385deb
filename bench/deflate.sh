#!/usr/bin/env bash
# permessage-deflate's cost and gain (issue 28, part 2): bytes on the wire
# and server CPU per delivered event, without the extension, with it
# compressed once per publication for every subscriber, and compressed by
# each connection's writer (clients limiting the server's window, so the
# shared bytes cannot be used), on seed 002's streaming rows.
#
#   bench/deflate.sh [HERALD_BIN]            (default target/release/herald)
#   ROWS="1 10 100" N=100 MESSAGES=2000 BROADCAST_N=10000 bench/deflate.sh
#
# Two workloads: N subscribers receiving MESSAGES pushes of ROWS rows each
# (seed 002: a few consumers of a query's stream, batched), and one
# broadcast of 10-row pushes to BROADCAST_N subscribers (BROADCAST_MESSAGES
# of them). A fresh server per run on core 0, the Node clients
# (bench/deflate-cost.mjs, `ws` from sdk/typescript: npm ci there first) on
# core 1. Results: bench/results/deflate-*.json, one JSON line per run.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/herald}
ROWS=${ROWS:-1 10 100}
N=${N:-100}
MESSAGES=${MESSAGES:-2000}
BROADCAST_N=${BROADCAST_N:-10000}
BROADCAST_MESSAGES=${BROADCAST_MESSAGES:-40}
PORT=${PORT:-18630}
mkdir -p bench/results
pid=
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap stop EXIT
run() { # MODE N ROWS MESSAGES NAME
  taskset -c 0 "$BIN" serve --listen 127.0.0.1:$PORT --tcp-listen 127.0.0.1:$((PORT + 1)) >/dev/null 2>&1 &
  pid=$!
  sleep 1
  taskset -c 1 timeout 600 node bench/deflate-cost.mjs "$PORT" "$pid" "$1" "$2" "$3" "$4" \
    | tee "bench/results/deflate-$5-$1.json"
  stop
  PORT=$((PORT + 2))
}
for rows in $ROWS; do
  for mode in plain deflate deflate-own; do
    run "$mode" "$N" "$rows" "$MESSAGES" "stream-r$rows-n$N"
  done
done
for mode in plain deflate deflate-own; do
  run "$mode" "$BROADCAST_N" 10 "$BROADCAST_MESSAGES" "broadcast-n$BROADCAST_N"
done
