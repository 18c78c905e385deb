#!/usr/bin/env bash
# Seed 003's topologies on this machine (issue 17 item 6, decision 0009):
#   (a) singleton: one node, tables in memory (Firebase's "Singleton");
#   (b) two `all` nodes on one Redis, tables durable with fail-over ("Dual");
#   (c) two `edge` + two `game` nodes on one Redis ("4 Nodes": 2 client + 2 game);
# the same bot load on each (seed 003's table mix, bench/game/seed003.toml,
# every bot on the whole lobby, chatting), in steps of players; then a
# fail-over run on (c): bots playing through the edges, one game node
# SIGKILLed mid-run, the survivor takes its tables over.
# Pinning: Redis and every node on core 0, the bench and the samplers on
# core 1 (2 cores here: read ratios between topologies, not capacity; on
# real machines each node, Redis and the bots would have their own machine).
# Every process's CPU is sampled from /proc (bench/seed003.py sample).
# Results: bench/results/seed003/.
# Usage: bench/seed003.sh [max bots] [step s] [all|topologies|failover]
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD_BIN:-./target/release/herald}
MAX="${1:-3000}"
STEP_S="${2:-15}"
STEP=1000
WHAT="${3:-all}"
OUT=bench/results/seed003
PY=bench/seed003.py
CFG=bench/game/seed003.toml
mkdir -p "$OUT"
PIDS=(); NAMES=(); S=""
start() { # name port args...
  local n=$1 port=$2; shift 2
  taskset -c 0 $H serve --listen 127.0.0.1:$port --config $CFG "$@" >/tmp/herald-seed003-$n.log 2>&1 &
  PIDS+=($!); NAMES+=("$n=$!")
}
redis() {
  taskset -c 0 redis-server --port 18779 --save "" --appendonly no >/tmp/herald-seed003-redis.log 2>&1 &
  PIDS+=($!); NAMES+=("redis=$!")
  sleep 1
}
stop() {
  [ -n "$S" ] && { kill "$S" 2>/dev/null || true; }; wait "$S" 2>/dev/null || true; S=""
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PIDS=(); NAMES=()
}
trap stop EXIT
pid_of() { for x in "${NAMES[@]}"; do [ "${x%%=*}" = "$1" ] && echo "${x#*=}"; done; }
check() { for p in "${PIDS[@]}"; do kill -0 "$p" || { echo "a process did not start (port taken?)" >&2; exit 1; }; done; }
owners() { # how many tables each game-running node owns
  for port in "$@"; do
    echo "  node :$port owns $(curl -s 127.0.0.1:$port/api/tables | python3 -c 'import json,sys;print(sum(1 for t in json.load(sys.stdin)["tables"] if t.get("owner")))') tables"
  done
}
run() { # label urls server-pid
  local label=$1 urls=$2 spid=$3
  echo "== $label: load $(cat /proc/loadavg)"
  taskset -c 1 python3 $PY sample $OUT/$label-cpu.jsonl "${NAMES[@]}" & S=$!
  taskset -c 1 $H bench bots "$urls" --game holdem --transport ws-json \
    -n "$MAX" --step-size $STEP --step-duration ${STEP_S}s --think 1s --chat-rate 2 \
    --server-pid "$spid" --label "seed003 $label" --out $OUT/$label.json >$OUT/$label.log 2>&1 \
    || echo "run failed: $label" >&2
  kill "$S"; wait "$S" 2>/dev/null || true; S=""
  python3 $PY report $OUT/$label.json $OUT/$label-cpu.jsonl $OUT/$label-report.json
}

four() {
  redis
  start game1 18720 --broker redis://127.0.0.1:18779 --role game
  start game2 18721 --broker redis://127.0.0.1:18779 --role game
  start edge1 18722 --broker redis://127.0.0.1:18779 --role edge
  start edge2 18723 --broker redis://127.0.0.1:18779 --role edge
  sleep 8; check; owners 18720 18721
}
if [ "$WHAT" != failover ]; then
# (a) singleton, tables in memory.
start a 18700; sleep 3; check
run singleton ws://127.0.0.1:18700/ws "$(pid_of a)"
stop

# (b) two `all` nodes, durable tables; both started at once so that they
# split the 2,000 configured tables between them (each claims what is free).
redis
start all1 18710 --broker redis://127.0.0.1:18779 --role all
start all2 18711 --broker redis://127.0.0.1:18779 --role all
sleep 8; check; owners 18710 18711
run dual ws://127.0.0.1:18710/ws,ws://127.0.0.1:18711/ws "$(pid_of all1)"
stop

# (c) two edges (the bots' only entry) and two game nodes.
# (c) two edges (the bots' only entry) and two game nodes.
four
run four ws://127.0.0.1:18722/ws,ws://127.0.0.1:18723/ws "$(pid_of game1)"
stop
fi
[ "$WHAT" = topologies ] && exit 0

# Fail-over on (c): 2,000 bots through the edges for 60 s; 20 s in, the
# game node that owns more of the tables in play is SIGKILLed (default lease
# 3,000 ms) and the other takes its tables over.
four
echo "== failover: load $(cat /proc/loadavg)"
taskset -c 1 python3 $PY sample $OUT/failover-cpu.jsonl "${NAMES[@]}" & S=$!
taskset -c 1 $H bench bots ws://127.0.0.1:18722/ws,ws://127.0.0.1:18723/ws --game holdem \
  --transport ws-json -n 2000 --step-size 2000 --step-duration 60s --think 1s --chat-rate 2 \
  --server-pid "$(pid_of edge1)" --label "seed003 failover" --out $OUT/failover.json >$OUT/failover.log 2>&1 &
B=$!
sleep 20
taskset -c 1 python3 $PY failover http://127.0.0.1:18720 "$(pid_of game1)" http://127.0.0.1:18721 "$(pid_of game2)" $OUT/failover-tables.json
wait $B || echo "run failed: failover" >&2
kill "$S"; wait "$S" 2>/dev/null || true; S=""
python3 $PY report $OUT/failover.json $OUT/failover-cpu.jsonl $OUT/failover-report.json
grep -ciE 'error|warn' /tmp/herald-seed003-edge*.log /tmp/herald-seed003-game2.log || true
stop
