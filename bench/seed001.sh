#!/usr/bin/env bash
# Seed 001 rerun (bench/RESULTS.md, "Seed 001 rerun: Bayeux, Herald vs
# CometD"): CometD's own benchmark over Bayeux, Herald's /cometd against
# CometD 8's Java server (bench/peers/cometd-java) in one sitting: latency
# by message rate on long-polling and websocket, then clients per GiB idle
# (every client holding /meta/connect, advice timeout 30 s on both).
#
#   bench/seed001.sh                   (defaults below)
#   N=2000 ROOMS=20 RATES=1000,5000,10000,20000 IDLE_N=5000 bench/seed001.sh
#   TAG=q bench/seed001.sh             (files named q-seed001-*)
#   ONLY=herald bench/seed001.sh       (skip the Java peer)
#   PIN=0 bench/seed001.sh             (no taskset: on a machine busy with
#                                       other work, pinning each side to one
#                                       contended core only adds waiting)
#
# Needs $HERALD, or release/herald in cargo's target directory
# (cargo build --release -p herald), Java 17 and Maven (the peer is built
# here from Maven Central). Server on core 0, bench on core 1; a fresh
# server per run (a failed run, e.g. one that lost deliveries, is reported
# and the sitting goes on); each server and transport gets an unrecorded warm-up run
# first (the JVM's JIT). Results: bench/results/*seed001-*.json.
set -uo pipefail
cd "$(dirname "$0")/.."
H=${HERALD:-$(scripts/target-dir)/release/herald}
[ -x "$H" ] || { echo "seed001: no $H (cargo build --release -p herald, or set HERALD)" >&2; exit 1; }
N=${N:-2000}
ROOMS=${ROOMS:-20}
PUBS=${PUBS:-4}
RATES=${RATES:-1000,5000,10000,20000}
STEP=${STEP:-10s}
IDLE_N=${IDLE_N:-5000}
HOLD=${HOLD:-35s}
JVM_OPTS=${JVM_OPTS:--Xmx2g}
TAG=${TAG:+$TAG-}
ONLY=${ONLY:-}
if [ "${PIN:-1}" = 1 ]; then CORE0="taskset -c 0" CORE1="taskset -c 1"; else CORE0= CORE1=; fi
PORT=18501
PEER=bench/peers/cometd-java
mkdir -p bench/results
pid=
# Each run connects from its own source address (127.0.0.2, .3, …), so
# one run's TIME_WAIT sockets never exhaust the next one's ports.
src=1
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap stop EXIT

if [ "$ONLY" != herald ]; then
  (cd $PEER && mvn -q -B package) || { echo "seed001: cannot build the CometD peer (Maven artifacts missing?)" >&2; exit 1; }
fi

serve() { # serve herald|cometd
  case $1 in
    herald) $CORE0 "$H" serve --listen 127.0.0.1:$PORT --rate-limit 0 >/dev/null 2>&1 & pid=$! ;;
    # shellcheck disable=SC2086
    cometd) $CORE0 java $JVM_OPTS -cp "$PEER/target/classes:$PEER/target/lib/*" herald.peer.CometDPeer $PORT >/dev/null 2>&1 & pid=$! ;;
  esac
  for _ in $(seq 100); do
    curl -s -o /dev/null -X POST -H 'content-type: application/json' -d '[]' http://127.0.0.1:$PORT/cometd && return 0
    sleep 0.2
  done
  echo "seed001: $1 did not start" >&2; exit 1
}

servers=(herald cometd)
[ -n "$ONLY" ] && servers=("$ONLY")
for server in "${servers[@]}"; do
  for t in long-polling websocket; do
    serve "$server"
    src=$((src + 1))
    $CORE1 "$H" bench cometd http://127.0.0.1:$PORT/cometd --transport $t -l "127.0.0.$src" \
      -n "$N" --rooms "$ROOMS" -p "$PUBS" --rates 2000 --step 5s --quiet >/dev/null || true
    src=$((src + 1))
    $CORE1 "$H" bench cometd http://127.0.0.1:$PORT/cometd --transport $t -l "127.0.0.$src" \
      -n "$N" --rooms "$ROOMS" -p "$PUBS" --rates "$RATES" --step "$STEP" --quiet \
      --label "$server $t" --server-pid "$pid" --out "bench/results/${TAG}seed001-$server-$t.json" \
      | sed "s/^/$server /" || echo "$server $t: the run failed (see its result file)"
    stop
  done
  for t in long-polling websocket; do
    serve "$server"
    src=$((src + 1))
    $CORE1 "$H" bench cometd http://127.0.0.1:$PORT/cometd --transport $t -l "127.0.0.$src" \
      -n "$IDLE_N" --rooms "$ROOMS" --idle --hold "$HOLD" --quiet \
      --label "$server $t idle" --server-pid "$pid" --out "bench/results/${TAG}seed001-$server-$t-idle.json" \
      | sed "s/^/$server /" || echo "$server $t: the run failed (see its result file)"
    stop
  done
done
