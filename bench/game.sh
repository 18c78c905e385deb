#!/usr/bin/env bash
# The game-server runs of bench/RESULTS.md ("Game server: seeds 003 and 000"),
# one sitting: the server pinned to core 0, the bench to core 1, a fresh
# server per run (anonymous bots' seats are held for the grace period after
# they disconnect). Results go to bench/results/game-*.json.
# Usage: bench/game.sh [seed003|seed000|all]   (after cargo build --release -p herald)
set -euo pipefail
cd "$(dirname "$0")/.."
H="$(scripts/target-dir)/release/herald"
WHAT="${1:-all}"
P=""
srv() {
  taskset -c 0 $H serve --listen 127.0.0.1:18300 --tcp-listen 127.0.0.1:18301 "$@" >/tmp/herald-game-srv.log 2>&1 &
  P=$!
  sleep 2
}
stop() { [ -n "$P" ] && kill "$P" 2>/dev/null; wait "$P" 2>/dev/null || true; P=""; }
trap stop EXIT
# A failed run (partial results are kept) does not stop the sitting.
b() { taskset -c 1 $H bench bots "$@" --server-pid "$P" || echo "run failed: $*" >&2; }
WS=ws://127.0.0.1:18300/ws
TCP=tcp://127.0.0.1:18301

if [ "$WHAT" = seed003 ] || [ "$WHAT" = all ]; then
  # Seed 003's singleton: its table mix, bots ramped by 2,000 to 18,000 (the
  # process file limit here is 20,000), every bot on the whole lobby, chatting.
  srv --config bench/game/seed003.toml
  b $WS --game holdem --transport ws-json -n 18000 --step-size 2000 --step-duration 20s \
    --think 1s --chat-rate 2 --label "seed 003 singleton, ws-json" --out bench/results/game-seed003-ws-json.json
  stop
fi

if [ "$WHAT" = seed000 ] || [ "$WHAT" = all ]; then
  # Seed 000 with real game actions: raw TCP binary vs WebSocket JSON, with
  # and without lobby traffic (--lobby-off-when-seated: bots leave the lobby once seated).
  for t in tcp ws-json; do
    url=$WS; [ $t = tcp ] && url=$TCP
    for lobby in all none; do
      flag=(); [ $lobby = none ] && flag=(--lobby-off-when-seated)
      srv --config bench/game/seed000.toml
      b $url --game holdem --transport $t -n 6000 --step-size 2000 --step-duration 20s \
        --think 1s --chat-rate 0 "${flag[@]}" --label "seed 000 $t, lobby $lobby" \
        --out bench/results/game-seed000-$t-lobby-$lobby.json
      stop
    done
  done
fi
