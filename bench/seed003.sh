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
# Results: bench/results/seed003/ (OUT=...), with Redis's `info commandstats`
# of each clustered run (counted from the start of the load).
# Usage: bench/seed003.sh [max bots] [step s] [all|topologies|clustered|failover]
# (clustered: (b) and (c) only). PORT_BASE (default 18700) moves every port
# (nodes +0..+23, Redis +79) so that two copies can run side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD_BIN:-$(scripts/target-dir)/release/herald}
MAX="${1:-3000}"
STEP_S="${2:-15}"
STEP=1000
WHAT="${3:-all}"
OUT=${OUT:-bench/results/seed003}
PB=${PORT_BASE:-18700}
RP=$((PB + 79))
BROKER=redis://127.0.0.1:$RP
P() { echo $((PB + $1)); }
PY=bench/seed003.py
CFG=bench/game/seed003.toml
mkdir -p "$OUT"
PIDS=(); NAMES=(); S=""
start() { # name port args...
  local n=$1 port=$2; shift 2
  taskset -c 0 $H serve --listen 127.0.0.1:$port --config $CFG "$@" >/tmp/herald-seed003-$PB-$n.log 2>&1 &
  PIDS+=($!); NAMES+=("$n=$!")
}
redis() {
  taskset -c 0 redis-server --port $RP --save "" --appendonly no >/tmp/herald-seed003-$PB-redis.log 2>&1 &
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
  redis-cli -p $RP config resetstat >/dev/null 2>&1 || true
  saves >$OUT/$label-saves-before.txt
  taskset -c 1 python3 $PY sample $OUT/$label-cpu.jsonl "${NAMES[@]}" & S=$!
  taskset -c 1 $H bench bots "$urls" --game holdem --transport ws-json \
    -n "$MAX" --step-size $STEP --step-duration ${STEP_S}s --think 1s --chat-rate 2 \
    --server-pid "$spid" --label "seed003 $label" --out $OUT/$label.json >$OUT/$label.log 2>&1 \
    || echo "run failed: $label" >&2
  kill "$S"; wait "$S" 2>/dev/null || true; S=""
  redis-cli -p $RP info commandstats >$OUT/$label-redis.txt 2>/dev/null || true
  saves >$OUT/$label-saves-after.txt
  python3 $PY report $OUT/$label.json $OUT/$label-cpu.jsonl $OUT/$label-report.json
  grep -E 'evalsha|publish' $OUT/$label-redis.txt || true
  paste $OUT/$label-saves-before.txt $OUT/$label-saves-after.txt | awk '{print "  " $1, $2, $4 - $2}' || true
}
GAME_PORTS=""
saves() { # the durable tables' save counters of the nodes running tables
  for port in $GAME_PORTS; do
    curl -s 127.0.0.1:$port/metrics | grep -E '^herald_game_(saves|save_batches|grouped_messages|actions)_total' | sed "s/^/:$port-/" || true
  done
}

four() {
  redis
  start game1 $(P 20) --broker $BROKER --role game
  start game2 $(P 21) --broker $BROKER --role game
  start edge1 $(P 22) --broker $BROKER --role edge
  start edge2 $(P 23) --broker $BROKER --role edge
  sleep 8; check; owners $(P 20) $(P 21)
  GAME_PORTS="$(P 20) $(P 21)"
}
if [ "$WHAT" != failover ]; then
if [ "$WHAT" != clustered ]; then
# (a) singleton, tables in memory.
start a $(P 0); sleep 3; check
run singleton ws://127.0.0.1:$(P 0)/ws "$(pid_of a)"
stop
fi

# (b) two `all` nodes, durable tables; both started at once so that they
# split the 2,000 configured tables between them (each claims what is free).
redis
start all1 $(P 10) --broker $BROKER --role all
start all2 $(P 11) --broker $BROKER --role all
sleep 8; check; owners $(P 10) $(P 11)
GAME_PORTS="$(P 10) $(P 11)"
run dual ws://127.0.0.1:$(P 10)/ws,ws://127.0.0.1:$(P 11)/ws "$(pid_of all1)"
stop

# (c) two edges (the bots' only entry) and two game nodes.
# (c) two edges (the bots' only entry) and two game nodes.
four
run four ws://127.0.0.1:$(P 22)/ws,ws://127.0.0.1:$(P 23)/ws "$(pid_of game1)"
stop
fi
[ "$WHAT" = topologies ] || [ "$WHAT" = clustered ] && exit 0

# Fail-over on (c): 2,000 bots through the edges for 60 s; 20 s in, the
# game node that owns more of the tables in play is SIGKILLed (default lease
# 3,000 ms) and the other takes its tables over.
four
echo "== failover: load $(cat /proc/loadavg)"
taskset -c 1 python3 $PY sample $OUT/failover-cpu.jsonl "${NAMES[@]}" & S=$!
redis-cli -p $RP config resetstat >/dev/null 2>&1 || true
taskset -c 1 $H bench bots ws://127.0.0.1:$(P 22)/ws,ws://127.0.0.1:$(P 23)/ws --game holdem \
  --transport ws-json -n 2000 --step-size 2000 --step-duration 60s --think 1s --chat-rate 2 \
  --server-pid "$(pid_of edge1)" --label "seed003 failover" --out $OUT/failover.json >$OUT/failover.log 2>&1 &
B=$!
sleep 20
taskset -c 1 python3 $PY failover http://127.0.0.1:$(P 20) "$(pid_of game1)" http://127.0.0.1:$(P 21) "$(pid_of game2)" $OUT/failover-tables.json
wait $B || echo "run failed: failover" >&2
kill "$S"; wait "$S" 2>/dev/null || true; S=""
redis-cli -p $RP info commandstats >$OUT/failover-redis.txt 2>/dev/null || true
python3 $PY report $OUT/failover.json $OUT/failover-cpu.jsonl $OUT/failover-report.json
grep -ciE 'error|warn' /tmp/herald-seed003-$PB-edge*.log /tmp/herald-seed003-$PB-game2.log || true
stop
