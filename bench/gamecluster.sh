#!/usr/bin/env bash
# What durable tables cost (issue 17, decision 0009): seed 003's table mix
# played by 2,000 poker bots on one node, without Redis (tables in memory)
# and with Redis (--broker: every acknowledged change saved, fenced, before
# the reply), alternated in one sitting. The server and redis-server are
# pinned to core 0, the bench to core 1; a fresh server (and Redis) per run.
# Results: bench/results/gamecluster-{memory,durable}-N.json.
# With MODES="durable wait": "wait" is durable with a replica of that Redis
# (also on core 0) and --table-save-replicas 1: each save acknowledged by
# the replica (WAIT) before the reply (decision 0021);
# bench/results/gamecluster-wait-N.json.
# Usage: [MODES="memory durable"] bench/gamecluster.sh [rounds]
#        (after cargo build --release -p herald)
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD_BIN:-$(scripts/target-dir)/release/herald}
ROUNDS="${1:-2}"
MODES="${MODES:-memory durable}"
P=""; R=""; Q=""
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
replica() {
  taskset -c 0 redis-server --port 18480 --dir /tmp --save "" --appendonly no --replicaof 127.0.0.1 18479 >/tmp/herald-gamecluster-replica.log 2>&1 &
  Q=$!
  for _ in $(seq 1 50); do
    redis-cli -p 18480 info replication | grep -q "master_link_status:up" && break
    sleep 0.1
  done
}
stop() {
  [ -n "$P" ] && kill "$P" 2>/dev/null; wait "$P" 2>/dev/null || true; P=""
  [ -n "$Q" ] && kill "$Q" 2>/dev/null; wait "$Q" 2>/dev/null || true; Q=""
  [ -n "$R" ] && kill "$R" 2>/dev/null; wait "$R" 2>/dev/null || true; R=""
}
trap stop EXIT
b() { taskset -c 1 $H bench bots ws://127.0.0.1:18400/ws --game holdem --transport ws-json \
  -n 2000 --step-size 2000 --step-duration 20s --think 1s --chat-rate 0 --server-pid "$P" "$@" \
  || echo "run failed: $*" >&2; }
for i in $(seq 1 "$ROUNDS"); do
  for m in $MODES; do
    case $m in
      memory) srv ;;
      durable) redis; srv --broker redis://127.0.0.1:18479 ;;
      wait) redis; replica; srv --broker redis://127.0.0.1:18479 --table-save-replicas 1 ;;
      *) echo "unknown mode $m" >&2; exit 2 ;;
    esac
    b --label "$m $i" --out bench/results/gamecluster-$m-$i.json
    if [ -n "$R" ]; then
      echo "redis: $(redis-cli -p 18479 info commandstats | grep -E 'evalsha|wait' || true)"
      echo "redis cpu: $(ps -o cputime= -p "$R")"
      curl -s http://127.0.0.1:18400/metrics | grep -E "^herald_cluster_table_saves_unreplicated_total" || true
    fi
    stop
  done
done
