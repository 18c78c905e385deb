#!/usr/bin/env bash
# The quiet sitting of 2026-11-26 (bench/RESULTS.md: "stream (seed 002)" and
# "Quiet sitting of 2026-11-26"): WebSocket vs SSE streaming by batch size and
# concurrency, two alternated runs each, then the fan-out tail at 0.5-2 M
# deliveries/s, twice. Run it with nothing else on the machine: a neighbour on
# the server's core shows up directly in the tail.
#
#   HERALD=$(scripts/target-dir)/release/herald bench/quiet.sh
#   HERALD=BIN BENCH=BENCH_BIN OUT=DIR PORT=N bench/quiet.sh   (another server
#   binary under one bench; results in DIR; bench/compare-quiet.py compares)
#
# Server on core 0, bench on core 1, a fresh server per run; every run is
# bounded (3 s steps, 10 s fan-outs). Results: bench/results/quiet/*.json (or $OUT).
set -u
cd "$(dirname "$0")/.."
B=${HERALD:-$(scripts/target-dir)/release/herald}
# The load generator: the same binary unless BENCH names another (to compare
# two servers with one bench).
BENCH=${BENCH:-$B}
OUT=${OUT:-bench/results/quiet}
PORT=${PORT:-18700}
mkdir -p $OUT
log() { echo "[$(date +%T) load $(cut -d' ' -f1 /proc/loadavg)] $*"; }
srv() { taskset -c 0 "$B" serve --listen 127.0.0.1:$PORT --rate-limit 0 >/dev/null 2>&1 & SP=$!; sleep 1; }
stop() { kill "$SP" 2>/dev/null; wait "$SP" 2>/dev/null; }
trap stop EXIT
for r in 1 2; do
  for t in ws-json sse; do
    if [ $t = sse ]; then u=http://127.0.0.1:$PORT; else u=ws://127.0.0.1:$PORT/ws; fi
    srv; log "stream $t batch r$r"
    taskset -c 1 "$BENCH" bench stream $u --transport $t -c 10 -b 1,10,50,100,200,400 --interval 1ms \
      --step-duration 3s --server-pid "$SP" --quiet --out $OUT/stream-$t-batch-r$r.json
    stop
    srv; log "stream $t conc r$r"
    taskset -c 1 "$BENCH" bench stream $u --transport $t -c 1,10,50,100 -b 50 --interval 1ms \
      --step-duration 3s --server-pid "$SP" --quiet --out $OUT/stream-$t-conc-r$r.json
    stop
  done
done
for rates in "10000 7000 5000" "12500 15000 20000"; do
  for r in 1 2; do
    for rate in $rates; do
      srv; log "fanout $rate r$r"
      taskset -c 1 "$BENCH" bench fanout ws://127.0.0.1:$PORT/ws --transport ws-json -p 4 -n 1000 -C 10 \
        -r "$rate" -s 128 --duration 10s --verify --quiet --server-pid "$SP" --out $OUT/fanout-$rate-r$r.json
      stop
    done
  done
done
log done
