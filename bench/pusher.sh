#!/usr/bin/env bash
# Pusher protocol vs Herald's own on one node (bench/RESULTS.md, "Pusher
# protocol vs Herald's own, one node (issue 16)"): the same fan-out
# delivered through each protocol, alternating, a fresh server per run, and
# idle memory per connection for both.
#
#   bench/pusher.sh [RATE...]      (messages/s; default 2000 5000, i.e.
#                                   200,000 and 500,000 deliveries/s)
#   REPS=2 bench/pusher.sh         (alternations per rate; files get -rK)
#   TAG=q IDLE=0 bench/pusher.sh   (files named q-pusher-*; no idle runs)
#
# Needs $HERALD, or release/herald in cargo's target directory (scripts/target-dir)
# (cargo build --release -p herald). Server on core 0, bench on core 1;
# results go to bench/results/pusher-*.json. Publishers use Herald's
# protocol in both runs (the subscribers' protocol is the only change).
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD:-$(scripts/target-dir)/release/herald}
RATES=("${@:-2000 5000}")
# shellcheck disable=SC2206
RATES=(${RATES[*]})
REPS=${REPS:-2}
TAG=${TAG:+$TAG-}
PORT=18462
N=1000 C=10 P=4 S=128 D=10s
mkdir -p bench/results
pid=
# Each run connects from its own source address (127.0.0.2, .3, …): 10,000
# idle connections to one port leave as many in TIME_WAIT, and the next
# run from the same address would run out of ephemeral ports.
src=1
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap stop EXIT
serve() {
  taskset -c 0 $H serve --config bench/pusher.toml --listen 127.0.0.1:$PORT --rate-limit 0 >/dev/null 2>&1 &
  pid=$!
  sleep 1
}
for rep in $(seq "$REPS"); do
  for rate in "${RATES[@]}"; do
    for proto in herald pusher; do
      serve; src=$((src + 1))
      taskset -c 1 $H bench fanout ws://127.0.0.1:$PORT/ws --protocol $proto -l "127.0.0.$src" \
        -p $P -n $N -C $C -r "$rate" -s $S --duration $D --verify --quiet \
        --server-pid "$pid" --out "bench/results/${TAG}pusher-fanout-$proto-$rate-r$rep.json"
      stop
    done
  done
  [ "${IDLE:-1}" = 1 ] || continue
  for proto in herald pusher; do
    serve; src=$((src + 1))
    taskset -c 1 $H bench idle ws://127.0.0.1:$PORT/ws --protocol $proto -n 10000 -l "127.0.0.$src" \
      --quiet --server-pid "$pid" --out "bench/results/${TAG}pusher-idle-$proto-r$rep.json"
    stop
  done
done
