#!/usr/bin/env bash
# One node of seed 003 at steady state: CPU, sends, Redis reads and lobby
# updates per second once every bot is seated (bench/RESULTS.md, "Seed
# 003's three topologies in one sitting"). Seating a one-step ramp of
# thousands of bots takes 20-55 s here, and until it ends the lobby is
# busy; a fixed delay measured seating as often as play, so this waits for
# the bench's own log to say every bot is seated, then 10 s more.
#
# Usage: bench/seed003-steady.sh TOPOLOGY BOTS PORT LABEL
#   TOPOLOGY a|b|c and BOTS as bench/seed003-capacity.sh (one step of BOTS);
#   PORT the node to measure (18850 the singleton, 18855 edge 1 of (c),
#   18851 node 1 of (b)); env MONITOR_AT=S also captures 6 s of Redis's
#   MONITOR S seconds in and counts the lobby publications, and those equal
#   to their table's previous one ((b) and (c) only). Needs root and perf.
set -euo pipefail
cd "$(dirname "$0")/.."
T=$1 BOTS=$2 PORT=$3 LABEL=$4
LOG=bench/results/seed003/cap-$LABEL-$T.log
rm -f "$LOG"
LABEL=$LABEL bench/seed003-capacity.sh "$T" "$BOTS" "$BOTS" 110 >"/tmp/herald-steady-$LABEL.log" 2>&1 &
RAMP=$!
if [ -n "${MONITOR_AT:-}" ]; then
  sleep "$MONITOR_AT"
  timeout 6 redis-cli -p 18879 MONITOR >"/tmp/herald-steady-$LABEL.monitor" || true
  python3 - "/tmp/herald-steady-$LABEL.monitor" <<'PY'
import re, sys
last, n, same = {}, 0, 0
for line in open(sys.argv[1], errors="replace"):
    if '"EVALSHA"' in line and ':lobby:seq"' in line:
        a = re.findall(r'"((?:[^"\\]|\\.)*)"', line)
        table, entry = a[8], a[9]  # EVALSHA sha 4 lease seq hash epoch holder TABLE ENTRY ...
        n += 1
        same += last.get(table) == entry
        last[table] = entry
print(f"lobby publications in 6 s: {n} for {len(last)} tables, {same} equal to their table's previous one")
PY
fi
for _ in $(seq 150); do grep -q "($BOTS ready, $BOTS seated)" "$LOG" 2>/dev/null && break; sleep 1; done
grep -m1 "($BOTS ready, $BOTS seated)" "$LOG" || { echo "not all seated in time" >&2; wait $RAMP; exit 1; }
sleep 10
PID=$(pgrep -f "serve --listen 127.0.0.1:$PORT " | head -1)
bench/metric-rate.sh "$PORT" herald_game_lobby_updates_total 10 &
perf stat -e syscalls:sys_enter_writev,syscalls:sys_enter_recvfrom,task-clock,context-switches \
  -p "$PID" -- sleep 10 2>&1 | grep -E "writev|recvfrom|task-clock|context-switches"
wait %2 || true
wait $RAMP || true
