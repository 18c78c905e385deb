#!/usr/bin/env bash
# The edge -> owner hop (issue 17, decision 0009): seed 003's table mix run
# by one `game` node, with one `edge` node beside it, both on one Redis;
# the same poker bots connect either to the game node itself ("direct": no
# hop) or to the edge ("edge": every sit and action published to the owner
# on its node topic, every reply and event published back). Alternated in
# one sitting, a fresh Redis and fresh nodes per run; Redis and both nodes
# pinned to core 0, the bench to core 1.
# Results: bench/results/gameroutes-{direct,edge}-N.json.
# Usage: bench/gameroutes.sh [rounds] [bots] [first round number]
#   (after cargo build --release -p herald)
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD_BIN:-$(scripts/target-dir)/release/herald}
ROUNDS="${1:-2}"
BOTS="${2:-2000}"
FIRST="${3:-1}"
G=""; E=""; R=""
up() {
  taskset -c 0 redis-server --port 18679 --save "" --appendonly no >/tmp/herald-gameroutes-redis.log 2>&1 &
  R=$!
  sleep 1
  taskset -c 0 $H serve --listen 127.0.0.1:18640 --config bench/game/seed003.toml \
    --broker redis://127.0.0.1:18679 --role game >/tmp/herald-gameroutes-game.log 2>&1 &
  G=$!
  taskset -c 0 $H serve --listen 127.0.0.1:18641 --config bench/game/seed003.toml \
    --broker redis://127.0.0.1:18679 --role edge >/tmp/herald-gameroutes-edge.log 2>&1 &
  E=$!
  # The game node claims the 2,000 tables; the edge's lobby fills from Redis.
  sleep 8
  kill -0 "$G" && kill -0 "$E" || { echo "a node did not start (port taken?)" >&2; exit 1; }
}
stop() {
  for p in "$G" "$E" "$R"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true
  done
  G=""; E=""; R=""
}
trap stop EXIT
b() { taskset -c 1 $H bench bots "$1" --game holdem --transport ws-json \
  -n "$BOTS" --step-size "$BOTS" --step-duration 20s --think 1s --chat-rate 0 --server-pid "$2" "${@:3}" \
  || echo "run failed: $*" >&2; }
cpu() { echo "cpu: game $(ps -o cputime= -p "$G") edge $(ps -o cputime= -p "$E") redis $(ps -o cputime= -p "$R")"; }
for i in $(seq "$FIRST" $((FIRST + ROUNDS - 1))); do
  echo "load: $(cat /proc/loadavg)"
  up
  b ws://127.0.0.1:18640/ws "$G" --label "direct $i" --out bench/results/gameroutes-direct-$i.json
  cpu
  stop
  up
  b ws://127.0.0.1:18641/ws "$E" --label "edge $i" --out bench/results/gameroutes-edge-$i.json
  cpu
  stop
done
