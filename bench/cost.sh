#!/usr/bin/env bash
# Server CPU per delivered broadcast at a fixed client count (issue 15, goal 4):
# Herald's /shootout against the Node `ws` and Go gorilla peers, JSON and
# binary. For each server two runs of `herald bench broadcast` at N clients
# (one step), with S1 and S2 samples; the server's CPU time (utime+stime from
# /proc/PID/stat) over each whole run is read, and the difference between the
# two runs divided by the difference in deliveries gives the marginal CPU per
# delivery — connecting N clients costs the same in both runs and cancels out.
#
#   bench/cost.sh                 N=9000 S1=200 S2=1200, all servers, both modes
#   SERVERS="herald go-gorilla" MODES=binary bench/cost.sh
#   GO_GORILLA=/path/to/go-gorilla   (go build in bench/peers/go-gorilla)
#
# Server on core 0, load generator on core 1; one line per server and mode.
set -euo pipefail
cd "$(dirname "$0")/.."
H="$(scripts/target-dir)/release/herald"
N="${N:-9000}" S1="${S1:-200}" S2="${S2:-1200}"
SERVERS="${SERVERS:-herald node-ws go-gorilla}"
MODES="${MODES:-json binary}"
GO_GORILLA="${GO_GORILLA:-go-gorilla}"
PORT=18130
ulimit -n 20000
tk=$(getconf CLK_TCK)
src=40
pid=""
stop() { [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; pid=""; }
trap stop EXIT
start() {
  case "$1" in
    herald) taskset -c 0 $H serve --listen 127.0.0.1:$PORT >/dev/null 2>&1 & pid=$!; url=ws://127.0.0.1:$PORT/shootout ;;
    node-ws) taskset -c 0 node bench/peers/node-ws/server.js $PORT 127.0.0.1 >/dev/null 2>&1 & pid=$!; url=ws://127.0.0.1:$PORT/ ;;
    go-gorilla) taskset -c 0 "$GO_GORILLA" -port $PORT -host 127.0.0.1 >/dev/null 2>&1 & pid=$!; url=ws://127.0.0.1:$PORT/ ;;
  esac
  for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && return 0; sleep 0.1; done
  echo "$1 did not start" >&2; exit 1
}
run() { # run SERVER MODE SAMPLES -> "cpu_seconds deliveries"
  start "$1"; sleep 1
  src=$((src + 1))
  local t0 t1 out
  t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  out=$(taskset -c 1 $H bench broadcast "$url" --server-type "$2" --initial-clients "$N" --total-steps 1 \
        --concurrent 4 --sample-size "$3" --payload-padding 200 -l 127.0.0.$src 2>&1 | grep -o 'verified: [0-9]*' | grep -o '[0-9]*' || echo 0)
  t1=$(awk '{print $14+$15}' /proc/$pid/stat)
  stop; sleep 2
  echo "$(echo "($t1 - $t0) / $tk" | bc -l) $out"
}
for mode in $MODES; do
  for server in $SERVERS; do
    read -r c1 d1 < <(run "$server" "$mode" "$S1")
    read -r c2 d2 < <(run "$server" "$mode" "$S2")
    if [ "$d1" = 0 ] || [ "$d2" = 0 ]; then echo "$server $mode: a run failed verification"; continue; fi
    echo "$server $mode: $(echo "($c2 - $c1) / ($d2 - $d1) * 1000000" | bc -l | cut -c1-5) s per million deliveries (cpu $(printf %.2f "$c1") s / $d1, $(printf %.2f "$c2") s / $d2)"
  done
done
