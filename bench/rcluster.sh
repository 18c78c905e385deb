#!/usr/bin/env bash
# Redis Cluster as the broker (issue 29, decision 0021; bench/RESULTS.md,
# "Redis Cluster"): publications per second of two Herald nodes against 1, 2
# and 3 Redis masters, with each redis-server's CPU; and the time from a
# master's SIGKILL to Herald serving publishes again, over RUNS fresh
# clusters (3 masters, 3 replicas, cluster-node-timeout 1000 ms).
# Bounded: each throughput run lasts SECONDS at the offered RATE; each
# fail-over run stops 30 s after the kill at most.
#
#   bench/rcluster.sh [RATE] [SECONDS] [RUNS]   (defaults: 20000, 10, 10)
#
# Needs redis-server and redis-cli (Debian's redis-server, redis-tools) and
# a herald build: release if there is one in cargo's target directory, else
# debug (or H=PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(scripts/target-dir)
H=${H:-$dir/release/herald}
[ -x "$H" ] || H=$dir/debug/herald
[ -x "$H" ] || { echo "no herald build (cargo build -p herald)"; exit 1; }
echo "herald: $H"
cat /proc/loadavg
python3 bench/rcluster.py throughput "$H" "${1:-20000}" "${2:-10}"
cat /proc/loadavg
python3 bench/rcluster.py failover "$H" "${3:-10}"
cat /proc/loadavg
