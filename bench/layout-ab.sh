#!/usr/bin/env bash
# Two server binaries alternated where a first bench/quiet.sh pass left a
# doubt (bench/RESULTS.md, "Server crate layout (issue 24): before and
# after"): SSE by consumers (1, 10, 50, 100; batch 50), before/after three
# times; then fan-out at 1 M deliveries/s for every pairing of server and
# bench binary, twice. Server on core 0, bench on core 1, a fresh server per
# run; every run bounded (3 s steps, 10 s fan-outs).
#
#   bench/layout-ab.sh BEFORE_BIN AFTER_BIN      (results: bench/results/layout/alt/)
set -u
cd "$(dirname "$0")/.."
A=$1
B=$2
OUT=bench/results/layout/alt
mkdir -p $OUT
PORT=18900
srv() { taskset -c 0 "$1" serve --listen 127.0.0.1:$PORT --rate-limit 0 >/dev/null 2>&1 & SP=$!; sleep 1; }
stop() { kill "$SP" 2>/dev/null; wait "$SP" 2>/dev/null; PORT=$((PORT+1)); }
for r in 1 2 3; do
  for w in before after; do
    bin=$A; [ $w = after ] && bin=$B
    srv $bin; echo "[$(date +%T) load $(cut -d' ' -f1 /proc/loadavg)] sse conc $w r$r"
    taskset -c 1 "$B" bench stream http://127.0.0.1:$PORT --transport sse -c 1,10,50,100 -b 50 --interval 1ms \
      --step-duration 3s --server-pid "$SP" --quiet --out $OUT/sse-conc-$w-r$r.json >/dev/null
    stop
  done
done
for r in 1 2; do
  for bench in after before; do
    for w in before after; do
      bin=$A; [ $w = after ] && bin=$B
      bb=$A; [ $bench = after ] && bb=$B
      srv $bin; echo "[$(date +%T) load $(cut -d' ' -f1 /proc/loadavg)] fanout 1M server=$w bench=$bench r$r"
      taskset -c 1 "$bb" bench fanout ws://127.0.0.1:$PORT/ws --transport ws-json -p 4 -n 1000 -C 10 \
        -r 10000 -s 128 --duration 10s --verify --quiet --server-pid "$SP" --out $OUT/fanout-$w-bench$bench-r$r.json | grep p50
      stop
    done
  done
done
echo end
