#!/usr/bin/env bash
# Server CPU per action, a game module against a Rust game of similar
# weight (decision 0014, bench/RESULTS.md "Game modules in JavaScript"):
# 400 bots at 100 four-seat tables of Liar's Dice (games/dist/liars-dice.js,
# QuickJS), then 400 at 100 of Texas Hold'em, alternated ROUNDS times, one
# fresh server per run (core 0), the bench on core 1. Over the same 15 s
# window of each run (from 8 s after the start, all bots seated) the server's
# CPU time (/proc/PID/stat) is divided by the actions its tables handled
# (`herald_game_actions_total` in /metrics): everything the server does per
# action (the game, replies, pushes to every player, the lobby, sockets).
# Usage: bench/scripted-cpu.sh [ROUNDS]   (after cargo build --release -p herald)
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD_BIN:-$(scripts/target-dir)/release/herald}
ROUNDS=${1:-2}
PORT=${PORT:-18580}
P=""; B=""
stop() {
  [ -n "$B" ] && kill "$B" 2>/dev/null; wait "$B" 2>/dev/null || true; B=""
  [ -n "$P" ] && kill "$P" 2>/dev/null; wait "$P" 2>/dev/null || true; P=""
}
trap stop EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
actions() { curl -sf "http://127.0.0.1:$PORT/metrics" | awk '/^herald_game_actions_total/ {print $2}'; }
for i in $(seq 1 "$ROUNDS"); do
  for game in dice holdem; do
    taskset -c 0 "$H" serve --listen 127.0.0.1:$PORT --config bench/game/scripted.toml >/tmp/herald-scripted-cpu.log 2>&1 &
    P=$!
    sleep 2
    extra=(--game holdem --lobby holdem)
    [ "$game" = dice ] && extra=(--game dice --module games/dist/liars-dice.js)
    taskset -c 1 "$H" bench bots ws://127.0.0.1:$PORT/ws "${extra[@]}" -n 400 --step-size 400 \
      --step-duration 30s --think 300ms --server-pid "$P" --label "$game $i" \
      --out bench/results/scripted-cpu-$game-$i.json >/tmp/herald-scripted-cpu-$game-$i.txt 2>&1 &
    B=$!
    sleep 8
    c0=$(cpu_ticks "$P"); a0=$(actions)
    sleep 15
    c1=$(cpu_ticks "$P"); a1=$(actions)
    wait "$B" || echo "run failed: $game $i" >&2
    B=""
    stop
    echo "$game round $i: $((a1 - a0)) actions in 15 s, server CPU $(( (c1 - c0) * 10 )) ms:" \
      "$(echo "scale=1; ($c1 - $c0) * 10000 / ($a1 - $a0)" | bc) us per action"
  done
done
