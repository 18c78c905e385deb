#!/usr/bin/env bash
# Slow and malformed HTTP against the real server (issue 14, "Bad input"):
# Autobahn fuzzes the WebSocket framing; this does the HTTP side.
#
# 1. slowhttptest (Debian's, an independent tool) attacks /api/publish, /sse
#    and /poll/<id> in three phases of three parallel runs, 300 connections
#    each: slow headers (-H, slowloris), slow bodies (-B, R-U-Dead-Yet) and
#    slow reads (-X). Herald runs with --handshake-timeout and
#    --request-body-timeout of $T s; the test checks, from the server's own
#    open file descriptors, that it held the attackers' connections and let
#    go of them within ramp-up + T + 3 s, and from slowhttptest's report
#    that the service stayed available throughout. (Slow readers of an event
#    stream are subscribers, bounded by the slow-consumer queue, and may stay
#    until the tool hangs up.)
# 2. Meanwhile a well-behaved publisher (curl, every 100 ms) publishes
#    numbered messages and a subscriber (curl -N on /sse) receives them:
#    every publication must succeed and arrive, in order.
# 3. http_abuse.py sends malformed requests from raw sockets (garbage, no
#    version, absurd methods, a 1 MiB request line, 10,000 headers, a 1 MiB
#    header, bad chunking, wrong/negative/overflowing Content-Length, h2c
#    preface + garbage) to /api/publish, /sse, /poll and /ws: each must get a
#    4xx or be closed, and a healthz and publish->SSE round trip must succeed
#    after each.
# Reports (slowhttptest CSV/HTML, logs) go to $HERALD_ARTIFACTS/http_abuse.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
HERALD_BIN="${HERALD_BIN:-$("$REPO/scripts/target-dir")/debug/herald}"
ART="${HERALD_ARTIFACTS:-$REPO/target/outside}/http_abuse"
T=3      # the server's handshake and request body timeouts here, seconds
CONNS=300 RATE=150   # per slowhttptest run; three run at once
mkdir -p "$ART"
rm -f "$ART"/*

missing() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $1 is missing and could not be installed" >&2
    exit 1
  fi
  echo "SKIP: $1 is missing (apt-get install $2); set CI=true to make this a failure"
  exit 0
}
if ! command -v slowhttptest >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -qq slowhttptest >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq slowhttptest >/dev/null 2>&1; } || true
  fi
  command -v slowhttptest >/dev/null || missing slowhttptest slowhttptest
fi
command -v curl >/dev/null || missing curl curl
command -v python3 >/dev/null || missing python3 python3
[ -x "$HERALD_BIN" ] || { echo "FAIL: no server binary at $HERALD_BIN" >&2; exit 1; }

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
URL="http://127.0.0.1:$port"
"$HERALD_BIN" serve --listen "127.0.0.1:$port" --handshake-timeout "$T" \
  --request-body-timeout "$T" --poll-timeout 2 --max-connections 5000 \
  >"$ART/herald.log" 2>&1 &
server=$!
pids+=("$server")
for _ in $(seq 100); do
  curl -sf "$URL/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "$URL/healthz" >/dev/null || { echo "FAIL: herald did not start" >&2; tail "$ART/herald.log" >&2; exit 1; }

fds() { ls "/proc/$server/fd" 2>/dev/null | wc -l; }
poll_session() { curl -sf -X POST "$URL/poll" | python3 -c 'import json, sys; print(json.load(sys.stdin)["session"])'; }

# The well-behaved clients.
curl -sN "$URL/sse?channel=witness" >"$ART/witness.sse" 2>/dev/null &
pids+=($!)
sleep 0.5
(
  n=0 ok=0 failed=0
  while [ ! -e "$ART/stop" ]; do
    n=$((n + 1))
    if curl -sf --max-time 5 -H 'content-type: application/json' \
      -d "{\"channel\":\"witness\",\"data\":$n}" "$URL/api/publish" >/dev/null 2>&1; then
      ok=$((ok + 1))
    else
      failed=$((failed + 1))
      echo "publish $n failed at $(date +%T.%N)" >>"$ART/publisher.log"
    fi
    sleep 0.1
  done
  echo "$n $ok $failed" >"$ART/publisher.counts"
) &
publisher=$!
pids+=("$publisher")

sleep 1
base="$(fds)"
failures=()
summary=()

# phase NAME HOLD EXTRA CLOSES -- SPECS...: slowhttptest runs at once (a spec
# is "label|options"), then the peak of the server's fds and when they are
# back to baseline (+ HOLD connections allowed to stay), which must be within
# ramp-up + T + EXTRA + 3 s. CLOSES=1: slowhttptest must also report that the
# server closed every connection before the run's time limit.
phase() {
  local name="$1" hold="$2" extra="$3" closes="$4"
  shift 5
  local start=$SECONDS runs=() spec label opts
  for spec in "$@"; do
    label="${spec%%|*}" opts="${spec#*|}"
    # shellcheck disable=SC2086
    slowhttptest $opts -c "$CONNS" -r "$RATE" -p 3 -g -o "$ART/$name-$label" >"$ART/$name-$label.log" 2>&1 &
    runs+=($!)
    pids+=($!)
  done
  local ramp=$(((CONNS + RATE - 1) / RATE)) peak=0 now back=""
  local limit=$((ramp + T + extra + 3)) held=$((base + 10 + hold))
  local t0 ms
  t0="$(date +%s%N)"
  while :; do
    now="$(fds)"
    [ "$now" -gt "$peak" ] && peak="$now"
    ms=$((($(date +%s%N) - t0) / 1000000))
    echo "$ms $now" >>"$ART/$name.fds"
    if [ "$peak" -gt $((base + CONNS)) ] && [ "$now" -le "$held" ]; then
      back="$ms"
      break
    fi
    [ "$ms" -gt $(((limit + 2) * 1000)) ] && break
    sleep 0.2
  done
  for p in "${runs[@]}"; do wait "$p" || true; done
  if [ "$peak" -le $((base + CONNS)) ]; then
    failures+=("$name: the server never held the attack's connections (peak $peak fds, baseline $base)")
  elif [ -z "$back" ] || [ "$back" -gt $((limit * 1000)) ]; then
    failures+=("$name: server fds still above $held after ${back:-more than $(((limit + 2) * 1000))} ms (limit: ramp $ramp s + timeout $T s + $extra s + 3 s)")
  fi
  local avail="" r exit
  for spec in "$@"; do
    label="${spec%%|*}"
    r="$ART/$name-$label"
    exit="$(sed 's/\x1b\[[0-9;]*m//g' "$r.log" | sed -n 's/^Exit status: *//p' | tail -1)"
    # A row per second: Seconds,Closed,Pending,Connected,Service Available (0 = unavailable).
    local down
    down="$(awk -F, 'NR > 1 && $5 == 0 {n++} END {print n + 0}' "$r.csv" 2>/dev/null || echo missing)"
    local secs
    secs="$(awk -F, 'END {print $1}' "$r.csv" 2>/dev/null || echo '?')"
    avail+="  $label: ${exit:-no exit status}, ${secs}s, unavailable ${down}s;"
    if [ "$down" != 0 ]; then failures+=("$name $label: service unavailable for $down s (slowhttptest)"); fi
    if [ "$closes" = 1 ] && [ "$exit" != "No open connections left" ]; then
      failures+=("$name $label: slowhttptest ended with \"$exit\", not with every connection closed by the server")
    fi
  done
  summary+=("$(printf '%-12s peak %4d fds (baseline %d), back to baseline after %5s ms (limit %d s);%s' \
    "$name" "$peak" "$base" "${back:--}" "$limit" "$avail")")
}

session="$(poll_session)"
phase slow-headers 0 0 1 -- \
  "publish|-H -t POST -i 1 -l 15 -u $URL/api/publish" \
  "sse|-H -i 1 -l 15 -u $URL/sse?channel=attack" \
  "poll|-H -i 1 -l 15 -u $URL/poll/$session"
session="$(poll_session)"
phase slow-body 0 0 1 -- \
  "publish|-B -i 1 -s 8192 -l 15 -f application/json -u $URL/api/publish" \
  "sse|-B -t GET -i 1 -s 8192 -l 15 -u $URL/sse?channel=attack" \
  "poll|-B -i 1 -s 8192 -l 15 -f application/json -u $URL/poll/$session"
session="$(poll_session)"
# Slow readers of the live witness stream are subscribers: they may stay. A
# slow reader's long poll is answered at the poll timeout (2 s) and written at
# the reader's pace (1 s more allowed); then its connection idles out like
# any other.
phase slow-read "$CONNS" 3 0 -- \
  "publish|-X -k 10 -n 1 -w 1 -y 64 -z 5 -l 10 -u $URL/api/publish" \
  "sse|-X -k 1 -n 1 -w 1 -y 64 -z 5 -l 10 -u $URL/sse?channel=witness" \
  "poll|-X -k 1 -n 1 -w 1 -y 64 -z 5 -l 10 -u $URL/poll/$session"

echo "== malformed requests"
python3 "$HERE/http_abuse.py" --port "$port" --timeout "$T" || failures+=("malformed requests (table above)")

# The witnesses: every publication succeeded and arrived, in order.
touch "$ART/stop"
wait "$publisher" || true
sleep 1
read -r sent ok failed <"$ART/publisher.counts"
received="$(grep -c '^data:' "$ART/witness.sse" || true)"
in_order="$(python3 - "$ART/witness.sse" "$ok" <<'EOF'
import sys
try:
    got = [int(l[5:]) for l in open(sys.argv[1]) if l.startswith("data:")]
except ValueError:
    got = None
print("yes" if got == list(range(1, int(sys.argv[2]) + 1)) else "no")
EOF
)"
[ "$failed" = 0 ] || failures+=("well-behaved publisher: $failed of $sent publications failed (publisher.log)")
[ "$received" = "$ok" ] && [ "$in_order" = yes ] ||
  failures+=("well-behaved subscriber: received $received of $ok publications (in order: $in_order)")
kill -0 "$server" 2>/dev/null || failures+=("the server exited")

echo "== http_abuse summary (server timeouts: handshake $T s, request body $T s; $CONNS connections per slowhttptest run, 3 at once)"
for s in "${summary[@]}"; do echo "$s"; done
echo "witnesses: publisher $ok/$sent ok, $failed failed; SSE subscriber received $received, in order: $in_order"
if [ "${#failures[@]}" -gt 0 ]; then
  for f in "${failures[@]}"; do echo "FAIL: $f"; done
  exit 1
fi
echo "http_abuse: ok"
