#!/usr/bin/env bash
# h2load (nghttp2, an HTTP/2 client nobody here wrote) against Herald's HTTP
# endpoints: POST /api/publish and GET /sse over HTTP/1.1, h2c (prior
# knowledge) and h2 over TLS (ALPN), many concurrent streams on few
# connections. Passes when
#   - every h2load run reports its protocol, zero failed/errored/timed-out
#     requests and only 2xx answers;
#   - every subscriber received exactly the publications h2load made, in
#     order, ids 1..N: curl streams (HTTP/1.1, h2c, h2), a long-poll session
#     over h2c/h2 drained by curl, and 200 SSE streams that h2load itself
#     holds on 2 connections (their body bytes must equal 200 times the curl
#     stream's: same events, then the `disconnect` 1001 event at shutdown);
#   - /metrics counts the same publications and no slow-consumer drop;
#   - curl --http2 / --http2-prior-knowledge get the documented publish body
#     and SSE event over HTTP/2.
# Needs h2load (Debian: nghttp2-client), curl, openssl, python3.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
HERALD_BIN="${HERALD_BIN:-$("$REPO/scripts/target-dir")/debug/herald}"

# shellcheck source=lib.sh
. "$HERE/lib.sh"
need h2load nghttp2-client
need curl curl
need openssl openssl
need python3 python3

work_dir h2load

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 1 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1 \
  || fail "openssl could not make a self-signed certificate"
printf '{"channel":"load","data":{"n":1}}' >"$WORK/body.json"

# start_server NAME ARGS...: starts herald on a free port (the kernel picks it:
# --listen 127.0.0.1:0, the bound address read from the JSON log); sets
# SERVER_PID and ADDR.
start_server() {
  local log="$WORK/$1.log"; shift
  "$HERALD_BIN" serve --listen 127.0.0.1:0 --log-format json --ping-interval 60 "$@" >"$log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  ADDR=""
  for _ in $(seq 100); do
    ADDR="$(grep -o '"addr":"[^"]*"' "$log" | head -1 | cut -d'"' -f4 || true)"
    [ -n "$ADDR" ] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log" >&2
  fail "server did not start"
}

# metric NAME_WITH_LABELS: its value from /metrics (plain URL base in $BASE).
metric() {
  curl -sf "${CURL_TLS[@]}" "$BASE/metrics" | awk -v m="$1" '$1 == m {print $2}'
}

# wait_for CMD...: retries a check for up to 15 s.
wait_for() {
  for _ in $(seq 150); do "$@" && return 0; sleep 0.1; done
  return 1
}
sse_count_is() { [ "$(metric 'herald_connections{transport="sse"}')" = "$1" ]; }
data_lines_are() { [ "$(grep -c '^data: ' "$1" || true)" = "$2" ]; }

# publish_load LABEL H2LOAD_ARGS...: one h2load run of publishes; checks
# protocol and zero errors; adds to $PUBLISHED.
publish_load() {
  local label="$1" proto="$2" n="$3"; shift 3
  local out="$WORK/pub-$label.txt"
  h2load -n "$n" -H 'content-type: application/json' -d "$WORK/body.json" "$@" >"$out" 2>&1 \
    || { cat "$out" >&2; fail "$label: h2load exited non-zero"; }
  grep -q "^Application protocol: $proto\$" "$out" || { cat "$out" >&2; fail "$label: not $proto"; }
  grep -q "^requests: $n total, $n started, $n done, $n succeeded, 0 failed, 0 errored, 0 timeout" "$out" \
    || { cat "$out" >&2; fail "$label: requests failed"; }
  grep -q "^status codes: $n 2xx, 0 3xx, 0 4xx, 0 5xx" "$out" || { cat "$out" >&2; fail "$label: non-2xx"; }
  PUBLISHED=$((PUBLISHED + n))
  SUMMARY+=("$label: $n publishes, $(grep -o '^finished in [^,]*' "$out" | cut -c13-) ($proto, $*)")
}

# check_stream FILE N: exactly N publication events, ids E:1..E:N in order.
check_stream() {
  python3 - "$1" "$2" <<'EOF' || fail "stream $1 did not carry publications 1..$2"
import sys
path, n = sys.argv[1], int(sys.argv[2])
# Publications only: the starting position comes first as an id alone.
events = [e for e in open(path).read().split("\n\n") if e.startswith("id: ") and "\ndata: " in e]
offsets = [int(e.split("\n")[0].rsplit(":", 1)[1]) for e in events]
datas = [e.split("\n")[1] for e in events]
if offsets != list(range(1, n + 1)) or any(d != 'data: {"n":1}' for d in datas):
    sys.exit(f"{path}: {len(offsets)} events, offsets {offsets[:3]}..{offsets[-3:]}")
EOF
}

# poll_open CURL_ARGS...: a long-poll session subscribed to `load`; sets SESSION.
poll_open() {
  SESSION="$(curl -sf "$@" -X POST "$BASE/poll" | python3 -c 'import json,sys; print(json.load(sys.stdin)["session"])')"
  curl -sf "$@" -X POST "$BASE/poll/$SESSION" -d '[{"id":1,"connect":{}},{"id":2,"subscribe":{"channel":"load"}}]' >/dev/null
  curl -sf "$@" "$BASE/poll/$SESSION" >"$WORK/poll-first.json"
  grep -q '"id":2,"subscribe"' "$WORK/poll-first.json" || fail "poll session did not subscribe"
}

# poll_drain N CURL_ARGS...: polls until N publications arrived; checks 1..N.
poll_drain() {
  local n="$1"; shift
  python3 - "$n" "$BASE/poll/$SESSION" "$@" <<'EOF' || fail "long-poll over HTTP/2 did not get publications 1..$n"
import json, subprocess, sys
n, url, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
got = []
for _ in range(100):
    out = subprocess.run(["curl", "-sf", "--max-time", "10", *args, url], capture_output=True, check=True).stdout
    got += [m["pub"]["offset"] for m in json.loads(out) if "pub" in m]
    if len(got) >= n:
        break
if got != list(range(1, n + 1)):
    sys.exit(f"poll: {len(got)} publications, {got[:3]}..{got[-3:]}")
EOF
}

# run_round NAME SCHEME PUBLISHER: on the running server, every subscriber,
# then PUBLISHER (a function of publish_load runs), then the counts.
run_round() {
  local name="$1" scheme="$2"; shift 2
  PUBLISHED=0
  BASE="$scheme://$ADDR"
  local sse="$BASE/sse?channel=load"
  # Subscribers: curl over HTTP/1.1 and HTTP/2, and 200 streams held by h2load
  # on 2 connections (h2load counts each as done when the server ends it).
  curl -sN "${CURL_TLS[@]}" --http1.1 "$sse" >"$WORK/$name-curl-h1.txt" &
  local curl_h1=$!
  curl -sN "${CURL_TLS[@]}" "${CURL_H2[@]}" "$sse" >"$WORK/$name-curl-h2.txt" &
  local curl_h2=$!
  PIDS+=("$curl_h1" "$curl_h2")
  h2load -n 200 -c 2 -m 100 "$sse" >"$WORK/$name-h2load-sse.txt" 2>&1 &
  local holder=$!
  PIDS+=("$holder")
  wait_for sse_count_is 202 || fail "$name: SSE streams did not all open ($(metric 'herald_connections{transport="sse"}'))"
  poll_open "${CURL_TLS[@]}" "${CURL_H2[@]}"

  "$@"

  wait_for data_lines_are "$WORK/$name-curl-h1.txt" "$PUBLISHED" || true
  wait_for data_lines_are "$WORK/$name-curl-h2.txt" "$PUBLISHED" || true
  check_stream "$WORK/$name-curl-h1.txt" "$PUBLISHED"
  check_stream "$WORK/$name-curl-h2.txt" "$PUBLISHED"
  poll_drain "$PUBLISHED" "${CURL_TLS[@]}" "${CURL_H2[@]}"
  [ "$(metric herald_publications_total)" = "$PUBLISHED" ] || fail "$name: /metrics publications $(metric herald_publications_total) != $PUBLISHED"
  [ "$(metric 'herald_drops_total{reason="slow_consumer"}')" = 0 ] || fail "$name: slow-consumer drops"

  # Shutdown ends every stream with its disconnect event: h2load's 200 streams
  # must then have carried exactly what curl's HTTP/2 stream carried.
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" || fail "$name: server exited with an error"
  # The streams have ended: wait until curl and h2load have written them out.
  wait "$holder" "$curl_h1" "$curl_h2" || true
  local out="$WORK/$name-h2load-sse.txt"
  grep -q '^requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, 0 errored, 0 timeout' "$out" \
    || { cat "$out" >&2; fail "$name: h2load's SSE streams failed"; }
  grep -q "^Application protocol: $H2" "$out" || fail "$name: h2load SSE not over $H2"
  local per bytes
  per="$(wc -c <"$WORK/$name-curl-h2.txt")"
  bytes="$(grep -o '^traffic: .* (\([0-9]*\)) data' "$out" | sed 's/.*(\([0-9]*\)) data$/\1/')"
  tail -c 80 "$WORK/$name-curl-h2.txt" | grep -q '"disconnect":{"code":1001' || fail "$name: curl stream had no disconnect event"
  [ "$bytes" = "$((per * 200))" ] || fail "$name: h2load SSE streams got $bytes bytes, expected 200 x $per"
  SUMMARY+=("$name: $PUBLISHED publications delivered to curl (HTTP/1.1, $H2), a long-poll session over $H2 and 200 h2load $H2 SSE streams on 2 connections ($bytes bytes)")
}

SUMMARY=()
start=$SECONDS

# --- cleartext: HTTP/1.1 and h2c (prior knowledge)
start_server plain
CURL_TLS=(); CURL_H2=(--http2-prior-knowledge); H2=h2c
BASE="http://$ADDR"
# curl over h2c: the documented publish body and the SSE event.
curl -sN --http2-prior-knowledge --max-time 5 "$BASE/sse?channel=curl" >"$WORK/curl-h2c-sse.txt" &
PIDS+=($!)
wait_for sse_count_is 1 || fail "curl h2c SSE did not open"
body="$(curl -sf --http2-prior-knowledge -w ' %{http_version} %{http_code}' -H 'content-type: application/json' \
  -d '{"channel":"curl","data":{"text":"hi"}}' "$BASE/api/publish")"
[[ "$body" =~ ^\{\"epoch\":\"[A-Za-z0-9_-]+\",\"offset\":1\}\ 2\ 200$ ]] || fail "h2c publish answered: $body"
wait_for grep -q '^data: {"text":"hi"}$' "$WORK/curl-h2c-sse.txt" || fail "curl h2c SSE did not stream the event"
grep -q '^id: [A-Za-z0-9_-]*:1$' "$WORK/curl-h2c-sse.txt" || fail "h2c SSE event id"
SUMMARY+=("curl --http2-prior-knowledge: publish 200 $body; SSE event received")
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || fail "server exited with an error"

start_server plain
BASE="http://$ADDR"
round_plain() {
  publish_load h1 http/1.1 2000 --h1 -c 4 -m 10 "$BASE/api/publish"
  publish_load h2c h2c 5000 -c 4 -m 100 "$BASE/api/publish"
}
run_round cleartext http round_plain

# --- TLS: h2 and http/1.1 by ALPN
start_server tls --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem"
CURL_TLS=(--cacert "$WORK/cert.pem"); CURL_H2=(--http2); H2=h2
BASE="https://$ADDR"
curl -sN --http2 --cacert "$WORK/cert.pem" --max-time 5 "$BASE/sse?channel=curl" >"$WORK/curl-h2-sse.txt" &
PIDS+=($!)
wait_for sse_count_is 1 || fail "curl h2 SSE did not open"
body="$(curl -sf --http2 --cacert "$WORK/cert.pem" -w ' %{http_version} %{http_code}' -H 'content-type: application/json' \
  -d '{"channel":"curl","data":{"text":"hi"}}' "$BASE/api/publish")"
[[ "$body" =~ ^\{\"epoch\":\"[A-Za-z0-9_-]+\",\"offset\":1\}\ 2\ 200$ ]] || fail "h2 publish answered: $body"
wait_for grep -q '^data: {"text":"hi"}$' "$WORK/curl-h2-sse.txt" || fail "curl h2 SSE did not stream the event"
SUMMARY+=("curl --http2 (TLS, ALPN h2): publish 200 $body; SSE event received")
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || fail "server exited with an error"

start_server tls --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem"
BASE="https://$ADDR"
round_tls() {
  publish_load tls-h1 http/1.1 1000 --h1 -c 4 -m 10 "$BASE/api/publish"
  publish_load tls-h2 h2 5000 -c 4 -m 100 "$BASE/api/publish"
}
run_round tls https round_tls

printf '  %s\n' "${SUMMARY[@]}"
echo "h2load: all publications delivered, no errors ($((SECONDS - start)) s)"
