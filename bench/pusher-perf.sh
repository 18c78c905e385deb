#!/usr/bin/env bash
# Where a Pusher delivery's cost goes, next to a Herald one (bench/RESULTS.md,
# "Pusher protocol vs Herald's own, second sitting"): the fan-out of
# bench/pusher.sh at one rate, alternating protocols, with `perf stat` on
# the server for 5 s in the middle of each run (CPU time
# per delivery depends far less on what else shares the machine than
# latency; this machine has no hardware counters, so CPU time it is),
# then one `perf record` per protocol for the symbols.
#
#   bench/pusher-perf.sh [RATE]     (messages/s; default 2000 = 200,000 deliveries/s)
#   REPS=3 bench/pusher-perf.sh     (alternations; default 2)
#
# Needs perf, and $HERALD or release/herald in cargo's target directory. Server on
# core 0, bench on core 1; output in bench/results/pusher-perf-*.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD:-$(scripts/target-dir)/release/herald}
RATE=${1:-2000}
REPS=${REPS:-2}
PORT=18463
N=1000 C=10 P=4 S=128
mkdir -p bench/results
pid= bench=
src=100
stop() {
  if [ -n "$bench" ]; then wait "$bench" 2>/dev/null || true; bench=; fi
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi
}
trap stop EXIT
run() { # proto, what to do with the server's pid meanwhile
  taskset -c 0 $H serve --config bench/pusher.toml --listen 127.0.0.1:$PORT --rate-limit 0 >/dev/null 2>&1 &
  pid=$!
  sleep 1
  src=$((src + 1))
  taskset -c 1 $H bench fanout ws://127.0.0.1:$PORT/ws --protocol "$1" -l "127.0.0.$src" \
    -p $P -n $N -C $C -r "$RATE" -s $S --duration 12s --quiet >/dev/null &
  bench=$!
  sleep 4
  "$2" "$1"
  stop
}
stat() {
  perf stat -e task-clock,context-switches -p "$pid" -o "bench/results/pusher-perf-stat-$1-$RATE-r$rep.txt" -- sleep 5
}
record() {
  perf record -e cpu-clock -F 2000 -g -p "$pid" -o "/tmp/pusher-perf-$1.data" -- sleep 5 2>/dev/null
  perf report -i "/tmp/pusher-perf-$1.data" --no-children --percent-limit 1.5 --stdio 2>/dev/null \
    | grep -v '^$' | grep -E '^ +[0-9]' > "bench/results/pusher-perf-report-$1-$RATE.txt" || true
}
for rep in $(seq "$REPS"); do
  for proto in herald pusher; do run "$proto" stat; done
done
rep=0
for proto in herald pusher; do run "$proto" record; done
for f in bench/results/pusher-perf-stat-*-"$RATE"-r*.txt; do
  echo "== $f"; grep -E "task-clock|context-switches" "$f"
done
