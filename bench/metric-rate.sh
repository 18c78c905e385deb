#!/usr/bin/env bash
# Per-second rate of one counter of a node's /metrics, over a window: how
# bench/RESULTS.md counted the lobby updates an edge sends at seed 003's
# steady state (`herald_game_lobby_updates_total`).
#
# Usage: bench/metric-rate.sh PORT METRIC [SECONDS]   (default 10 s)
set -euo pipefail
port=$1 metric=$2 secs=${3:-10}
value() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$metric" '$1 == m {print $2}'; }
a=$(value); sleep "$secs"; b=$(value)
[ -n "$a" ] && [ -n "$b" ] || { echo "no $metric at 127.0.0.1:$port" >&2; exit 1; }
awk -v a="$a" -v b="$b" -v s="$secs" -v m="$metric" 'BEGIN {printf "%s: %.1f/s over %d s\n", m, (b - a) / s, s}'
