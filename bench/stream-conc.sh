#!/usr/bin/env bash
# Seed 002's concurrency matrix, WebSocket (ws-json) vs SSE, with one binary
# (bench/RESULTS.md, "stream (seed 002)" and "WebSocket vs SSE per event at
# 50-100 consumers"): for each rep and transport, alternated, a fresh server
# pinned on core 0 and
#
#   herald bench stream URL --transport T -c 1,10,50,100 -b 50 --interval 1ms --step-duration 3s --server-pid PID
#
# on core 1. Prints one line per step: events/s, server CPU, CPU ns/event
# (server_cpu_pct x 10^7 / events per s), p99, skipped ticks, lost batches,
# and the load average when the run started. To compare two binaries,
# alternate them yourself in one sitting:
#
#   for b in before after before after; do HERALD=/work/bin/wsstream-$b TAG=$b REPS=1 bench/stream-conc.sh; done
#
#   HERALD=path [REPS=2] [TAG=x] [CONSUMERS=1,10,50,100] [BATCH=50] [STEP=3s] bench/stream-conc.sh
#
# Raw files: bench/results/stream-conc/TAG-T-rN.json.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD:-$(scripts/target-dir)/release/herald}
REPS=${REPS:-2} TAG=${TAG:-run} PORT=${PORT:-18792}
CONSUMERS=${CONSUMERS:-1,10,50,100} BATCH=${BATCH:-50} STEP=${STEP:-3s}
OUT=bench/results/stream-conc
mkdir -p $OUT
pid=
stop() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi
}
trap stop EXIT
for rep in $(seq "$REPS"); do
  for t in ws-json sse; do
    if [ "$t" = sse ]; then url=http://127.0.0.1:$PORT; else url=ws://127.0.0.1:$PORT/ws; fi
    taskset -c 0 "$H" serve --listen 127.0.0.1:$PORT --rate-limit 0 >/dev/null 2>&1 &
    pid=$!
    sleep 1
    load=$(cut -d' ' -f1 /proc/loadavg)
    f="$OUT/$TAG-$t-r$rep.json"
    taskset -c 1 "$H" bench stream "$url" --transport "$t" -c "$CONSUMERS" -b "$BATCH" \
      --interval 1ms --step-duration "$STEP" --server-pid "$pid" --quiet --out "$f" >/dev/null
    stop
    python3 - "$f" "$TAG" "$t" "$rep" "$load" <<'PY'
import json, sys
f, tag, t, rep, load = sys.argv[1:]
for s in json.load(open(f))["steps"]:
    cpu = s.get("server_cpu_pct") or 0
    ns = cpu * 1e7 / s["eps"] if s["eps"] else 0
    p99 = (s.get("latency") or {}).get("p99_ms")
    print(f"{tag:>10} {t:>7} r{rep} c={s['consumers']:<4} b={s['batch_size']:<4} "
          f"{s['eps']:>12,.0f} ev/s  server {cpu:5.1f} %  {ns:6.0f} ns/event  "
          f"p99 {p99} ms  skipped {s['skipped_ticks']}  lost {s['lost_batches']}  load {load}")
PY
  done
done
