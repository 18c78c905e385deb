#!/usr/bin/env bash
# Server CPU per action, a game module against a Rust game of similar
# weight (decision 0014, bench/RESULTS.md "Game modules in JavaScript"):
# 400 bots at 100 four-seat tables of Liar's Dice (games/dist/liars-dice.js,
# QuickJS), then 400 at 100 of Texas Hold'em, alternated ROUNDS times, one
# fresh server per run (core 0), the bench on core 1. CPU per action is the
# server's CPU time over the actions its bots had answered in the step.
# Usage: bench/scripted-cpu.sh [ROUNDS]   (after cargo build --release -p herald)
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD_BIN:-$(scripts/target-dir)/release/herald}
ROUNDS=${1:-2}
PORT=${PORT:-18580}
P=""
stop() { [ -n "$P" ] && kill "$P" 2>/dev/null; wait "$P" 2>/dev/null || true; P=""; }
trap stop EXIT
mkdir -p bench/results
for i in $(seq 1 "$ROUNDS"); do
  for game in dice holdem; do
    taskset -c 0 "$H" serve --listen 127.0.0.1:$PORT --config bench/game/scripted.toml >/tmp/herald-scripted-cpu.log 2>&1 &
    P=$!
    sleep 2
    extra=(--game holdem --lobby holdem)
    [ "$game" = dice ] && extra=(--game dice --module games/dist/liars-dice.js)
    taskset -c 1 "$H" bench bots ws://127.0.0.1:$PORT/ws "${extra[@]}" -n 400 --step-size 400 \
      --step-duration 20s --think 300ms --server-pid "$P" --label "$game $i" \
      --out bench/results/scripted-cpu-$game-$i.json >/tmp/herald-scripted-cpu-$game-$i.txt 2>&1 \
      || echo "run failed: $game $i" >&2
    stop
  done
done
python3 - "$ROUNDS" <<'PY'
import json, sys
for game in ("dice", "holdem"):
    for i in range(1, int(sys.argv[1]) + 1):
        r = json.load(open(f"bench/results/scripted-cpu-{game}-{i}.json"))
        s = r["steps"][-1] if "steps" in r else r
        print(game, i, {k: s.get(k) for k in ("actions_per_sec", "server_cpu_percent", "hands_per_min", "players") if k in s})
PY
