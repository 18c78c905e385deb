#!/usr/bin/env bash
# The broadcast table of bench/RESULTS.md in one sitting: Herald's /shootout
# and the Node `ws` peer, JSON and binary, each measured with `herald bench
# broadcast` (rtt, all-received, server CPU, exactly-once verification) and
# with the websocket-shootout's own Go tool (`websocket-bench broadcast`: rtt
# and its own exactly-once count after 250 ms).
#
#   bench/shootout.sh                      all of it (about 25 minutes)
#   SERVERS="herald" MODES="json" TOOLS="go" bench/shootout.sh    a part
#   HERALD_BEFORE=/path/to/old/herald      also measure an older build ("before")
#   WSBENCH=/path/to/websocket-bench       the Go tool (default: websocket-bench on PATH)
#
# The Go tool is built from hashrocket/websocket-shootout outside this tree
# (go/src/hashrocket/websocket-bench; add a go.mod with golang.org/x/net and
# spf13/cobra, `go build ./cmd/websocket-bench`); none of its code is here.
# Server on core 0, load generator on core 1; results in bench/results/
# (broadcast-MODE-SERVER.json, shootout-go-MODE-SERVER.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
H="$(scripts/target-dir)/release/herald"
WSBENCH="${WSBENCH:-websocket-bench}"
SERVERS="${SERVERS:-herald node-ws}"
[ -n "${HERALD_BEFORE:-}" ] && SERVERS="$SERVERS herald-before"
MODES="${MODES:-json binary}"
TOOLS="${TOOLS:-herald go}"
PORT=18103
# Same flags for both tools: the seeds' method (4 in flight, 100 samples,
# 200 bytes of padding), 1,000 clients then +2,000 per step, up to 19,000
# clients (one process may open 20,000 files). `herald bench` stops at the
# first step past the 500 ms p95 limit unless --total-steps is given; the Go
# tool ignores the limit once --total-steps is set, and connects the clients
# of step N+1 before it checks its exactly-once count, so it gets 9.
COMMON=(--initial-clients 1000 --step-size 2000 --concurrent 4 --sample-size 100 --payload-padding 200)
mkdir -p bench/results
ulimit -n 20000
pid=""
stop() { [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; pid=""; }
trap stop EXIT

start() { # start SERVER -> URL on stdout
  case "$1" in
    herald) taskset -c 0 $H serve --listen 127.0.0.1:$PORT >/dev/null 2>&1 & pid=$! ; url=ws://127.0.0.1:$PORT/shootout ;;
    herald-before) taskset -c 0 "$HERALD_BEFORE" serve --listen 127.0.0.1:$PORT >/dev/null 2>&1 & pid=$! ; url=ws://127.0.0.1:$PORT/shootout ;;
    node-ws)
      (cd bench/peers/node-ws && [ -d node_modules ] || npm install --silent >/dev/null)
      taskset -c 0 node bench/peers/node-ws/server.js $PORT 127.0.0.1 >/dev/null 2>&1 & pid=$! ; url=ws://127.0.0.1:$PORT/ ;;
    *) echo "unknown server $1" >&2; exit 2 ;;
  esac
  for _ in $(seq 100); do
    (echo >/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$1 did not start" >&2; exit 1
}

for mode in $MODES; do
  for server in $SERVERS; do
    for tool in $TOOLS; do
      start "$server"
      sleep 1
      echo "== $server $mode ($tool)"
      case "$tool" in
        herald)
          taskset -c 1 $H bench broadcast "$url" --server-type "$mode" "${COMMON[@]}" \
            --total-steps 10 --server-pid "$pid" -l 127.0.0.2 \
            --out "bench/results/broadcast-$mode-$server.json" || echo "(exit $?)"
          ;;
        go)
          out="bench/results/shootout-go-$mode-$server.txt"
          { echo "# $WSBENCH broadcast $url --server-type $mode ${COMMON[*]} --total-steps 9 -l 127.0.0.3"
            taskset -c 1 "$WSBENCH" broadcast "$url" --server-type "$mode" "${COMMON[@]}" \
              --total-steps 9 -l 127.0.0.3 2>&1 && echo "# exit 0" || echo "# exit $?"
          } | tee "$out"
          ;;
      esac
      stop
      sleep 2
    done
  done
done
