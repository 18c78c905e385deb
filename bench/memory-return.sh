#!/usr/bin/env bash
# Memory given back once traffic stops (issue 30, part 5): RSS of a release
# herald before a churn of one-off channels (bench/churn-oneoff.mjs: 3 rounds
# of 2,000 subscribers, each on its own channel, one publication each), right
# after it, and after history_ttl plus one full housekeeping sweep (16 s)
# with no traffic at all; and `herald_broker_channels` at each point.
# Usage: bench/memory-return.sh [TTL_SECONDS=10] [BIN=target/release/herald]
# Needs `npm ci` in sdk/typescript (the `ws` package).
set -euo pipefail
cd "$(dirname "$0")/.."
TTL="${1:-10}"
BIN="${2:-target/release/herald}"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$BIN" serve --listen "127.0.0.1:$PORT" --history-ttl "$TTL" >/tmp/memory-return.log 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.05; done
rss() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$PID/status"; }
chans() { curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^herald_broker_channels / {print $2}'; }
sleep 2
echo "before:           RSS $(rss) MB, broker channels $(chans)"
node bench/churn-oneoff.mjs "$PORT" 2000 3 >/dev/null
echo "after the churn:  RSS $(rss) MB, broker channels $(chans)"
sleep $((TTL + 20))
echo "ttl + 20 s later: RSS $(rss) MB, broker channels $(chans)"
