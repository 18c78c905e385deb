#!/usr/bin/env bash
# Redis Sentinel fail-over (issue 29, decision 0020; bench/RESULTS.md,
# "Redis Sentinel"): time from SIGKILL of the master to Herald serving
# publishes again, over RUNS fresh deployments (a master, a replica, three
# sentinels, one node), and what a `WAIT 1 100` after each publish would cost.
# Bounded: each run stops 30 s after the kill at most; the WAIT part is N
# sequential publications.
#
#   bench/sentinel-failover.sh [RUNS] [N]      (defaults: 10 runs, N 5000)
#
# Needs redis-server (its --sentinel mode) and a herald build: release if
# there is one in cargo's target directory, else debug (or H=PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(scripts/target-dir)
H=${H:-$dir/release/herald}
[ -x "$H" ] || H=$dir/debug/herald
[ -x "$H" ] || { echo "no herald build (cargo build -p herald)"; exit 1; }
echo "herald: $H"
python3 bench/sentinel-failover.py failover "$H" "${1:-10}"
python3 bench/sentinel-failover.py wait "${2:-5000}"
