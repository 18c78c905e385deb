#!/usr/bin/env bash
# What durable tables cost (issue 17, decision 0009): seed 003's table mix
# played by 2,000 poker bots on one node, without Redis (tables in memory)
# and with Redis (--broker: every acknowledged change saved, fenced, before
# the reply), alternated in one sitting. The server and redis-server are
# pinned to core 0, the bench to core 1; a fresh server (and Redis) per run.
# Results: bench/results/gamecluster-{memory,durable}-N.json.
# Usage: bench/gamecluster.sh [rounds]   (after cargo build --release -p herald)
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD_BIN:-$(scripts/target-dir)/release/herald}
ROUNDS="${1:-2}"
P=""; R=""
srv() {
  taskset -c 0 $H serve --listen 127.0.0.1:18400 --config bench/game/seed003.toml "$@" >/tmp/herald-gamecluster-srv.log 2>&1 &
  P=$!
  sleep 3
}
redis() {
  taskset -c 0 redis-server --port 18479 --save "" --appendonly no >/tmp/herald-gamecluster-redis.log 2>&1 &
  R=$!
  sleep 1
}
stop() {
  [ -n "$P" ] && kill "$P" 2>/dev/null; wait "$P" 2>/dev/null || true; P=""
  [ -n "$R" ] && kill "$R" 2>/dev/null; wait "$R" 2>/dev/null || true; R=""
}
trap stop EXIT
b() { taskset -c 1 $H bench bots ws://127.0.0.1:18400/ws --game holdem --transport ws-json \
  -n 2000 --step-size 2000 --step-duration 20s --think 1s --chat-rate 0 --server-pid "$P" "$@" \
  || echo "run failed: $*" >&2; }
for i in $(seq 1 "$ROUNDS"); do
  srv
  b --label "memory $i" --out bench/results/gamecluster-memory-$i.json
  stop
  redis
  srv --broker redis://127.0.0.1:18479
  b --label "durable $i" --out bench/results/gamecluster-durable-$i.json
  echo "redis: $(redis-cli -p 18479 info commandstats | grep -E 'evalsha' || true)"
  echo "redis cpu: $(ps -o cputime= -p "$R")"
  stop
done
