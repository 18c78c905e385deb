#!/usr/bin/env bash
# One node vs three nodes on Redis: fan-out latency and throughput at the
# same load, on one machine (bench/RESULTS.md, "One node vs three nodes on
# Redis"). Bounded: each run is --duration long with a fixed client count.
#
#   bench/cluster.sh [RATE...]          (default rates: 500 2000)
#   FAILOVER=1 bench/cluster.sh         (also: seed 003's fail-over run)
#   REP=2 bench/cluster.sh              (a repetition: files get a -r2 suffix)
#   SLICE=100000 bench/cluster.sh       (an experiment: every server process,
#                                        Redis included, asks the kernel for a
#                                        100 µs EEVDF slice, Linux >= 6.12;
#                                        bench/slice.py; files get -sSLICE)
#
# Needs release/herald in cargo's target directory (cargo build --release;
# or H=PATH to another build) and redis-server.
# Servers and Redis share core 0, the load generator runs on core 1, as in
# every other sitting; results go to bench/results/cluster-*.json.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${H:-$(scripts/target-dir)/release/herald}
RATES=("${@:-500 2000}")
# shellcheck disable=SC2206
RATES=(${RATES[*]})
REDIS_PORT=18379
N=1000 C=10 P=4 S=128 D=10s
mkdir -p bench/results
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap stop_all EXIT

slice() { if [ -n "${SLICE:-}" ]; then python3 bench/slice.py "$SLICE" "$1"; fi; }
redis() {
  taskset -c 0 redis-server --port $REDIS_PORT --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
  pids+=($!)
  slice $!
  for _ in $(seq 50); do redis-cli -p $REDIS_PORT ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "redis did not start"; exit 1
}
node() { # node PORT [broker]
  taskset -c 0 $H serve --listen 127.0.0.1:"$1" ${2:+--broker "$2"} --rate-limit 0 >/dev/null 2>&1 &
  pids+=($!)
  sleep 1
  slice $!
}
bench() { # bench NAME URLS RATE [more args]
  local name=$1 urls=$2 rate=$3; shift 3
  taskset -c 1 $H bench fanout "$urls" -p $P -n $N -C $C -r "$rate" -s $S --duration $D --verify \
    "$@" --out "bench/results/cluster-$name-$rate${REP:+-r$REP}${SLICE:+-s$SLICE}.json"
}

for r in "${RATES[@]}"; do
  node 18400; bench one-memory ws://127.0.0.1:18400/ws "$r" --server-pid "${pids[0]}"; stop_all
  redis; node 18400 redis://127.0.0.1:$REDIS_PORT
  bench one-redis ws://127.0.0.1:18400/ws "$r" --server-pid "${pids[1]}"; stop_all
  redis
  for port in 18400 18401 18402; do node $port redis://127.0.0.1:$REDIS_PORT; done
  # Subscribers spread over the three nodes, publishers on the first.
  bench three-redis ws://127.0.0.1:18400/ws,ws://127.0.0.1:18401/ws,ws://127.0.0.1:18402/ws "$r" \
    --publish-url ws://127.0.0.1:18400/ws --server-pid "${pids[1]}"
  stop_all
done

if [ "${FAILOVER:-0}" = 1 ]; then
  # Seed 003's dual-server fail-over: subscribers on two nodes, publishers on
  # a third; node 1 is killed (SIGKILL) 8 s into a 20 s run. Its subscribers
  # reconnect to node 2 and recover; --verify counts what was lost.
  redis
  for port in 18400 18401 18402; do node $port redis://127.0.0.1:$REDIS_PORT; done
  victim=${pids[1]}
  ( sleep 8; kill -9 "$victim" ) &
  killer=$!
  taskset -c 1 $H bench fanout ws://127.0.0.1:18400/ws,ws://127.0.0.1:18401/ws -p 2 -n 1000 -C 50 -r 2000 \
    --duration 20s --verify --publish-url ws://127.0.0.1:18402/ws --out bench/results/cluster-failover.json
  wait "$killer"
  stop_all
fi
