#!/usr/bin/env bash
# The publish API under h2load (nghttp2's load generator, not ours): publishes
# per second over HTTP/1.1, h2c (prior knowledge) and h2 over TLS (ALPN), in
# one sitting, interleaved (bench/RESULTS.md, "The publish API over HTTP/1.1,
# h2c and h2").
#
#   bench/h2load.sh                 (N=100000 requests a run, REPS=3)
#   H=/path/to/herald N=50000 REPS=5 bench/h2load.sh
#
# Needs a release build (default release/herald in cargo's target
# directory), h2load (Debian: nghttp2-client) and openssl. The server is pinned to core 0 and h2load to
# core 1, as in every other sitting. The channel has no subscriber: this
# measures the HTTP path and the publish itself. For each run it prints
# h2load's req/s, the server's CPU use over the run (from /proc), h2load's,
# and publishes per second of server CPU. A server below ~90% CPU was
# disturbed (or h2load was the bottleneck: then h2load is near 100%).
set -euo pipefail
cd "$(dirname "$0")/.."
H="${H:-$(scripts/target-dir)/release/herald}"
N="${N:-100000}"
REPS="${REPS:-3}"
WORK="$(mktemp -d)"
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap stop_all EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 1 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1
printf '{"channel":"bench","data":{"n":1}}' >"$WORK/body.json"

# serve NAME ARGS...: a pinned server on a free port; sets PID and ADDR.
serve() {
  local log="$WORK/$1.log"; shift
  taskset -c 0 "$H" serve --listen 127.0.0.1:0 --log-format json "$@" >"$log" 2>&1 &
  PID=$!
  pids+=("$PID")
  ADDR=""
  for _ in $(seq 100); do
    ADDR="$(grep -o '"addr":"[^"]*"' "$log" | head -1 | cut -d'"' -f4 || true)"
    [ -n "$ADDR" ] && return 0
    sleep 0.1
  done
  cat "$log" >&2
  exit 1
}
serve plain
PLAIN_PID=$PID PLAIN=$ADDR
serve tls --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem"
TLS_PID=$PID TLS=$ADDR

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ="$(getconf CLK_TCK)"

# label | pid | h2load arguments (URL last)
RUNS=(
  "HTTP/1.1 -c 4 -m 1|$PLAIN_PID|--h1 -c 4 -m 1 http://$PLAIN/api/publish"
  "HTTP/1.1 -c 400 -m 1|$PLAIN_PID|--h1 -c 400 -m 1 http://$PLAIN/api/publish"
  "HTTP/1.1 -c 4 -m 100 (pipelined)|$PLAIN_PID|--h1 -c 4 -m 100 http://$PLAIN/api/publish"
  "h2c -c 4 -m 100|$PLAIN_PID|-c 4 -m 100 http://$PLAIN/api/publish"
  "HTTP/1.1 + TLS -c 4 -m 1|$TLS_PID|--h1 -c 4 -m 1 https://$TLS/api/publish"
  "HTTP/1.1 + TLS -c 4 -m 100 (pipelined)|$TLS_PID|--h1 -c 4 -m 100 https://$TLS/api/publish"
  "h2 (TLS) -c 4 -m 100|$TLS_PID|-c 4 -m 100 https://$TLS/api/publish"
)
echo "N=$N per run, REPS=$REPS; server: taskset -c 0 $H serve; h2load: taskset -c 1"
for rep in $(seq "$REPS"); do
  for run in "${RUNS[@]}"; do
    IFS='|' read -r label pid args <<<"$run"
    before="$(cpu_ticks "$pid")"
    t0="$(date +%s.%N)"
    # shellcheck disable=SC2086
    out="$( { TIMEFORMAT='%P'; time taskset -c 1 h2load -n "$N" -H 'content-type: application/json' \
      -d "$WORK/body.json" $args; } 2>&1)"
    t1="$(date +%s.%N)"
    after="$(cpu_ticks "$pid")"
    grep -q "^requests: $N total, $N started, $N done, $N succeeded, 0 failed, 0 errored, 0 timeout" <<<"$out" \
      || { echo "$out" >&2; echo "errors in: $label" >&2; exit 1; }
    rps="$(grep -o '^finished in [^,]*, [0-9.]* req/s' <<<"$out" | awk '{print $4}')"
    server="$(awk -v a="$before" -v b="$after" -v t0="$t0" -v t1="$t1" -v hz="$HZ" 'BEGIN {printf "%.0f", 100 * (b - a) / hz / (t1 - t0)}')"
    # Publishes per second of server CPU: steadier than req/s when other
    # work steals the server's core.
    per_cpu="$(awk -v a="$before" -v b="$after" -v n="$N" -v hz="$HZ" 'BEGIN {printf "%.0f", (b > a) ? n * hz / (b - a) : 0}')"
    client="$(tail -1 <<<"$out")"
    printf '%d\t%s\t%s req/s\tserver %s%%\th2load %s%%\t%s per server CPU-s\n' \
      "$rep" "$label" "$rps" "$server" "$client" "$per_cpu"
  done
done
