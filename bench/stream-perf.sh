#!/usr/bin/env bash
# Where a streamed event's server cost goes, WebSocket (ws-json) vs SSE, at
# one point of seed 002's concurrency matrix (issue 15 goal 2;
# bench/RESULTS.md, "WebSocket vs SSE per event at 50-100 consumers").
# For each transport: `herald bench stream` at -c C -b B, and, 4 s into its
# step, `perf stat` on the server for 5 s (task-clock, context switches,
# syscalls; this machine has no hardware counters). Events in the window
# come from the server's `herald_publications_total` (one publication = B
# events to one consumer), read before and after it, so the per-event
# figures do not depend on the bench's own clock.
#
#   HERALD=path [C=100] [B=50] [REPS=2] [TAG=x] bench/stream-perf.sh
#   RECORD=1 ... also `perf record -g` once per transport (report in
#   bench/results/stream-perf/report-TAG-T.txt)
#
# Server on core 0, bench on core 1. Output: bench/results/stream-perf/.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD:-$(scripts/target-dir)/release/herald}
C=${C:-100} B=${B:-50} REPS=${REPS:-2} TAG=${TAG:-run} PORT=${PORT:-18791}
OUT=bench/results/stream-perf
mkdir -p $OUT
pid= bench=
stop() {
  if [ -n "$bench" ]; then wait "$bench" 2>/dev/null || true; bench=; fi
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi
}
trap stop EXIT
pubs() { curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^herald_publications_total/ {print $2}'; }
run() { # transport, rep, what to do meanwhile
  local t=$1 url
  if [ "$t" = sse ]; then url=http://127.0.0.1:$PORT; else url=ws://127.0.0.1:$PORT/ws; fi
  taskset -c 0 "$H" serve --listen 127.0.0.1:$PORT --rate-limit 0 >/dev/null 2>&1 &
  pid=$!
  sleep 1
  taskset -c 1 "$H" bench stream "$url" --transport "$t" -c "$C" -b "$B" --interval 1ms \
    --step-duration 12s --server-pid "$pid" --quiet --out "$OUT/bench-$TAG-$t-c$C-b$B-r$2.json" >/dev/null &
  bench=$!
  sleep 4
  "$3" "$t" "$2"
  stop
}
stat() {
  local f="$OUT/stat-$TAG-$1-c$C-b$B-r$2.txt" p0 p1
  p0=$(pubs)
  perf stat -e task-clock,context-switches,page-faults,raw_syscalls:sys_enter,syscalls:sys_enter_writev,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_recvfrom -p "$pid" -o "$f" -- sleep 5
  p1=$(pubs)
  echo "load $(cut -d' ' -f1-3 /proc/loadavg) publications $p0 $p1 events $(( (p1 - p0) * B ))" >> "$f"
  awk -v ev=$(( (p1 - p0) * B )) -v t="$TAG $1 r$2" '
    /task-clock/ {gsub(",","",$1); ms=$1}
    /context-switches/ {gsub(",","",$1); cs=$1}
    /raw_syscalls/ {gsub(",","",$1); sc=$1}
    /sys_enter_writev/ {gsub(",","",$1); wv=$1}
    /sys_enter_write / {gsub(",","",$1); w=$1}
    /page-faults/ {gsub(",","",$1); pf=$1}
    END {printf "%-22s events %9d  cpu ns/event %6.1f  syscalls/1k ev %6.2f  writev/1k ev %6.2f  write/1k ev %6.2f  cs/1k ev %6.2f  faults/1k ev %6.2f\n", t, ev, ms*1e6/ev, sc*1000/ev, wv*1000/ev, w*1000/ev, cs*1000/ev, pf*1000/ev}' "$f" | tee -a "$OUT/summary-$TAG.txt"
}
record() {
  local f="$OUT/report-$TAG-$1-c$C-b$B.txt" p0 p1
  p0=$(pubs)
  perf record -e cpu-clock -F 2000 -g -p "$pid" -o "/tmp/stream-perf-$TAG-$1.data" -- sleep 5 2>/dev/null
  p1=$(pubs)
  echo "load $(cut -d' ' -f1-3 /proc/loadavg) events $(( (p1 - p0) * B )) (samples at 2000/s: 0.5 ms each)" > "$f"
  perf report -i "/tmp/stream-perf-$TAG-$1.data" --no-children -n --percent-limit 0.3 --stdio -g none 2>/dev/null \
    | grep -v '^$' | grep -E '^ +[0-9]' >> "$f" || true
}
for rep in $(seq "$REPS"); do
  for t in ws-json sse; do run "$t" "$rep" stat; done
done
if [ -n "${RECORD:-}" ]; then
  for t in ws-json sse; do run "$t" 0 record; done
fi
