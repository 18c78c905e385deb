#!/usr/bin/env bash
# Game modules in JavaScript (decision 0014, bench/RESULTS.md "Game modules"):
# memory per idle table in a real server, a scripted game against Hold'em,
# 10,000 tables each, one fresh server per game.
#
#   bench/scripted.sh [HERALD_BIN]      (default: target/release/herald)
#   N=10000 PORT=18560 MODULE=games/dist/liars-dice.js bench/scripted.sh
#
# For each game: starts `herald serve` with the module in `[[games]]` and an
# API key, reads its RSS, creates N four-seat tables with `POST /api/tables`
# (count ≤ 10,000 per request), waits 2 s, reads the RSS again, and prints
# KiB per table. Nobody sits: an idle table is what a lobby of open tables
# holds. Only 127.0.0.1; the server is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/herald}
N=${N:-10000}
PORT=${PORT:-18560}
MODULE=${MODULE:-games/dist/liars-dice.js}
KEY=bench-key
dir=$(mktemp -d)
pid=
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap 'stop; rm -rf "$dir"' EXIT
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
cat > "$dir/herald.toml" <<TOML
api_key = "$KEY"
[[games]]
name = "dice"
module = "$(realpath "$MODULE")"
TOML
for game in dice holdem; do
  "$BIN" serve --config "$dir/herald.toml" --listen 127.0.0.1:$PORT >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
  before=$(rss $pid)
  left=$N
  start=$(date +%s.%N)
  while [ "$left" -gt 0 ]; do
    c=$(( left > 10000 ? 10000 : left ))
    curl -sf -H "authorization: apikey $KEY" -d "{\"game\":\"$game\",\"seats\":4,\"count\":$c}" \
      "http://127.0.0.1:$PORT/api/tables" >/dev/null
    left=$((left - c))
  done
  took=$(echo "$(date +%s.%N) - $start" | bc)
  sleep 2
  after=$(rss $pid)
  echo "$game: $N tables, RSS $before -> $after KiB: $(echo "scale=2; ($after - $before) / $N" | bc) KiB per idle table; created in ${took}s"
  stop
done
