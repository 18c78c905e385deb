#!/usr/bin/env bash
# The HTTP side of Herald exactly as README.md and docs/protocol.md show it,
# driven with plain curl: the publish API, Server-Sent Events (formats, ids,
# resume, the `unrecovered` notice, heartbeats, the final disconnect),
# long-polling, /api/nodes, /api/tables, /healthz, /readyz, /metrics, the
# API key, tokens from `herald token` on SSE, and the documented limits
# (413/110, 403/104, 408, 401/101); every SSE example, README's table watch
# included, must send its first byte within 3 s. Where a doc shows exact bytes the answer
# must be those bytes; where it shows a variable (an epoch, `…`), its shape.
# README's WebSocket exchange is replayed over long-polling (curl speaks no
# WebSocket; the session and its JSON are the same) and compared line by line
# with the lines of README.md itself.
# Needs curl and python3.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
HERALD_BIN="${HERALD_BIN:-$("$REPO/scripts/target-dir")/debug/herald}"

# shellcheck source=lib.sh
. "$HERE/lib.sh"
need curl curl
need python3 python3

work_dir curl
CHECKS=0
ok() { CHECKS=$((CHECKS + 1)); }

# start_server NAME ARGS...: herald on a port the kernel picks (--listen
# 127.0.0.1:0; the bound address is read from the JSON log); sets SERVER_PID,
# ADDR and BASE.
start_server() {
  local log="$WORK/$1.log"; shift
  "$HERALD_BIN" serve --listen 127.0.0.1:0 --log-format json "$@" >"$log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  ADDR=""
  for _ in $(seq 100); do
    ADDR="$(grep -o '"addr":"[^"]*"' "$log" | head -1 | cut -d'"' -f4 || true)"
    [ -n "$ADDR" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$ADDR" ] || { cat "$log" >&2; fail "server did not start"; }
  BASE="http://$ADDR"
}

# req METHOD PATH [CURL_ARGS...]: sets STATUS, CTYPE and BODY (exact bytes).
req() {
  local method="$1" path="$2"; shift 2
  local meta
  meta="$(curl -s -o "$WORK/body" -w '%{http_code} %{content_type}' -X "$method" "$@" "$BASE$path")"
  STATUS="${meta%% *}"
  CTYPE="${meta#* }"
  BODY="$(cat "$WORK/body"; printf x)"
  BODY="${BODY%x}"
}
# expect STATUS BODY_REGEX WHAT: the last answer's status, and its whole body
# matching the (anchored, extended) regex.
expect() {
  [ "$STATUS" = "$1" ] || fail "$3: status $STATUS, expected $1 (body: $BODY)"
  [[ "$BODY" =~ ^$2$ ]] || fail "$3: body $(printf %q "$BODY") does not match $2"
  ok
}
JSON=application/json
# jcheck STATUS PYTHON_EXPR WHAT: the last answer's status, and its body as
# JSON (`v`) satisfying the expression (for answers whose key order no doc
# fixes).
jcheck() {
  [ "$STATUS" = "$1" ] || fail "$3: status $STATUS, expected $1 (body: $BODY)"
  python3 -c "import json,sys; v = json.load(sys.stdin); sys.exit(0 if ($2) else 1)" <"$WORK/body" \
    || fail "$3: body $BODY"
  ok
}
EPOCH='[A-Za-z0-9_-]+'
# The documented error body, {"error":{"code":C,"message":"..."}}.
ERR() { printf '\\{"error":\\{"code":%s,"message":"([^"\\\\]|\\\\.)+"\\}\\}' "$1"; }

# SSE streams: sse_open NAME QUERY [CURL_ARGS...] runs curl -N in the
# background into $WORK/NAME.sse; sse_wait NAME REGEX waits for its text
# (all of it, as one string) to match.
sse_open() {
  local name="$1" query="$2"; shift 2
  curl -sN "$@" "$BASE/sse?$query" >"$WORK/$name.sse" &
  PIDS+=($!)
}
sse_wait() {
  python3 - "$WORK/$1.sse" "$2" <<'EOF' || fail "SSE stream $1 never matched: $2 (got: $(cat "$WORK/$1.sse"))"
import re, sys, time
path, pattern = sys.argv[1], sys.argv[2]
for _ in range(100):
    if re.fullmatch(pattern, open(path).read(), re.S):
        sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
EOF
  ok
}
# SSE streams answer once subscribed; a short wait for curl to get there.
# Ready once subscribed: the stream's starting position comes as an id
# alone (protocol.md §5b), before any publication.
sse_ready() { sse_wait "$1" 'retry: 2000\n: herald\n\nid: [^\n]*\n\n.*'; }
publish() { curl -sf -H 'content-type: application/json' -d "$1" "$BASE/api/publish" >/dev/null || fail "publish $1"; }

start=$SECONDS

# ---------------------------------------------------------------- default server
start_server open --handshake-timeout 1 --allowed-origins https://app.example.com

# README: the WebSocket exchange, line by line, over a long-poll session (the
# first client of a fresh server, so its id is "1" as shown).
python3 - "$REPO/README.md" "$BASE" <<'EOF' || fail "README's exchange differs (above)"
import json, re, subprocess, sys
readme, base = sys.argv[1], sys.argv[2]
lines = [l.strip() for l in open(readme, encoding="utf-8")]
first = next(i for i, l in enumerate(lines) if l.startswith("→ "))
script = []
for l in lines[first:]:
    if not (l.startswith("→ ") or l.startswith("← ")):
        break
    script.append((l[0], l[2:]))
def curl(*args):
    return subprocess.run(["curl", "-sf", "--max-time", "5", *args],
                          capture_output=True, check=True).stdout.decode()
def shape(doc):
    # A string with `…` stands for any value (an epoch); the version is the
    # build's; everything else must match byte for byte.
    rx = "".join(r'"[^"]+"' if re.fullmatch(r'"[^"]*…"', p) else re.escape(p)
                 for p in re.split(r'("[^"]*…")', doc))
    return rx.replace(re.escape('"version":"0.1.0"'), r'"version":"[0-9]+\.[0-9]+\.[0-9]+[^"]*"')
def elements(text):
    # The exact bytes of each element of a poll's JSON array.
    dec, out, i = json.JSONDecoder(), [], 1
    while text[i] != "]":
        _, end = dec.raw_decode(text, i)
        out.append(text[i:end])
        i = end + 1 if text[end] == "," else end
    return out
session = json.loads(curl("-X", "POST", f"{base}/poll"))["session"]
got, bad, n = [], False, 0
for i, (d, doc) in enumerate(script):
    if d == "→":
        curl("-X", "POST", "-d", doc, f"{base}/poll/{session}")
        want = len(got)
        for d2, _ in script[i + 1:]:
            if d2 != "←":
                break
            want += 1
        while len(got) < want:
            got += elements(curl(f"{base}/poll/{session}"))
        continue
    line = got.pop(0)
    n += 1
    if not re.fullmatch(shape(doc), line):
        print(f"README:  {doc}\nserver:  {line}", file=sys.stderr)
        bad = True
if n < 4:
    sys.exit(f"only {n} lines of README's exchange found")
sys.exit(1 if bad else 0)
EOF
ok
# protocol.md §1 and crates/server/src/transport/poll/: long-polling, step by step.
req POST /poll
expect 200 '\{"session":"[0-9a-f]{32}","timeout":25\}' "POST /poll opens a session"
[ "$CTYPE" = "$JSON" ] || fail "POST /poll content-type $CTYPE"
SID="$(echo "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["session"])')"
req POST "/poll/$SID" -d '[{"id":1,"connect":{}},{"id":2,"subscribe":{"channel":"chat"}}]'
expect 202 '\{\}' "POST /poll/<id> takes a JSON array of commands"
req GET "/poll/$SID"
expect 200 "\\[\\{\"id\":1,\"connect\":\\{\"client\":\"[0-9]+\",\"version\":\"[^\"]+\",\"ping_interval\":25\\}\\},\\{\"id\":2,\"subscribe\":\\{\"epoch\":\"$EPOCH\",\"offset\":1\\}\\}\\]" "GET /poll/<id>: the queued replies, oldest first"
req POST "/poll/$SID" -d '{"id":3,"publish":{"channel":"chat","data":{"text":"hi"}}}'
expect 202 '\{\}' "POST /poll/<id> takes one command"
req GET "/poll/$SID"
expect 200 "\\[\\{\"pub\":\\{\"channel\":\"chat\",\"offset\":2,\"data\":\\{\"text\":\"hi\"\\}\\}\\},\\{\"id\":3,\"publish\":\\{\"epoch\":\"$EPOCH\",\"offset\":2\\}\\}\\]" "GET /poll/<id>: publication, then reply"
req DELETE "/poll/$SID"
[ "${STATUS:0:1}" = 2 ] || fail "DELETE /poll/<id>: $STATUS"
ok
req GET "/poll/$SID"
expect 404 "$(ERR 103)" "a deleted session is gone (404)"
req GET /poll/0123456789abcdef0123456789abcdef
expect 404 "$(ERR 103)" "an unknown session id gets 404"

# README / protocol.md §1: the publish API.
req POST /api/publish -H 'content-type: application/json' -d '{"channel":"chat","data":{"text":"hi"}}'
expect 200 "\\{\"epoch\":\"$EPOCH\",\"offset\":3\\}" 'POST /api/publish {"channel":"chat","data":{...}}'
[ "$CTYPE" = "$JSON" ] || fail "publish content-type $CTYPE"
req POST /api/publish -d '{"channel":"chat","b64":"AP8="}'
expect 200 "\\{\"epoch\":\"$EPOCH\",\"offset\":4\\}" 'POST /api/publish with "b64"'
req POST /api/publish -d 'not json'
expect 400 "$(ERR 103)" "a malformed publish body (400, code 103)"
req POST /api/publish -d '{"channel":"no spaces","data":1}'
expect 400 "$(ERR 109)" "a bad channel name (code 109)"
big="$(head -c 70000 /dev/zero | tr '\0' x)"
req POST /api/publish -d "{\"channel\":\"chat\",\"data\":\"$big\"}"
expect 413 "$(ERR 110)" "a message over the size limit (HTTP 413, code 110)"

# protocol.md §1: SSE events.
sse_open one 'channel=news'
sse_open two 'channel=news&channel=sport'
sse_ready one; sse_ready two
publish '{"channel":"news","data":{"a":
1}}'
publish '{"channel":"sport","data":"go"}'
publish '{"channel":"news","b64":"AP8="}'
publish '{"channel":"sport","b64":"AP8="}'
E="$EPOCH"
sse_wait one "retry: 2000\n: herald\n\nid: ($E):0\n\nid: \\1:1\ndata: \\{\"a\":\ndata: 1\\}\n\nid: \\1:2\nevent: b64\ndata: AP8=\n\n"
sse_wait two "retry: 2000\n: herald\n\nid: ($E):0,($E):0\n\nid: \\1:1,\\2:0\nevent: news\ndata: \\{\"a\":\ndata: 1\\}\n\nid: \\1:1,\\2:1\nevent: sport\ndata: \"go\"\n\nid: \\1:2,\\2:1\nevent: news#b64\ndata: AP8=\n\nid: \\1:2,\\2:2\nevent: sport#b64\ndata: AP8=\n\n"
NEWS_EPOCH="$(grep -m1 -o '^id: [^:]*' "$WORK/one.sse" | cut -c5-)"

# protocol.md §5b: resuming with Last-Event-ID or lastEventId=; the
# unrecovered notice; an id that does not parse is ignored.
sse_open resume 'channel=news' -H "Last-Event-ID: $NEWS_EPOCH:1"
sse_wait resume "retry: 2000\n: herald\n\nid: $NEWS_EPOCH:2\nevent: b64\ndata: AP8=\n\n"
sse_open resume2 "channel=news&lastEventId=$NEWS_EPOCH:0"
sse_wait resume2 "retry: 2000\n: herald\n\nid: $NEWS_EPOCH:1\ndata: \\{\"a\":\ndata: 1\\}\n\nid: $NEWS_EPOCH:2\nevent: b64\ndata: AP8=\n\n"
sse_open lost 'channel=news' -H 'Last-Event-ID: an-old-epoch:7'
sse_wait lost "retry: 2000\n: herald\n\nid: $NEWS_EPOCH:2\nevent: herald\ndata: \\{\"unrecovered\":\\{\"channel\":\"news\",\"epoch\":\"$NEWS_EPOCH\",\"offset\":2\\}\\}\n\n"
sse_open junk 'channel=news' -H 'Last-Event-ID: not an id'
sse_ready junk
publish '{"channel":"news","data":3}'
sse_wait junk "retry: 2000\n: herald\n\nid: $NEWS_EPOCH:2\n\nid: $NEWS_EPOCH:3\ndata: 3\n\n"
sse_wait lost "retry: 2000\n: herald\n\nid: $NEWS_EPOCH:2\nevent: herald\ndata: .*\n\nid: $NEWS_EPOCH:3\ndata: 3\n\n"

# Limits: Origin allowlist (403, code 104) on SSE and long-poll; a request
# head not sent in time (408).
req GET '/sse?channel=news' -H 'Origin: https://evil.example'
expect 403 "$(ERR 104)" "SSE from a disallowed Origin"
req POST /poll -H 'Origin: https://evil.example'
expect 403 "$(ERR 104)" "long-poll from a disallowed Origin"
req POST /poll -H 'Origin: https://app.example.com'
expect 200 '\{"session":"[0-9a-f]{32}","timeout":25\}' "long-poll from an allowed Origin"
exec 3<>"/dev/tcp/${ADDR%:*}/${ADDR#*:}"
head408="$(timeout 5 head -1 <&3 || true)"
exec 3<&-
[ "${head408%$'\r'}" = "HTTP/1.1 408 Request Timeout" ] || fail "silent connection got: $head408"
ok

# Health, readiness, metrics, nodes (README "Observability", "Run a cluster").
req GET /healthz
expect 200 '.*' "GET /healthz"
req GET /readyz
expect 200 '.*' "GET /readyz"
req GET /metrics
expect 200 '.*' "GET /metrics"
for line in '# TYPE herald_connections gauge' 'herald_connections{transport="sse"} [0-9]+' \
  '# TYPE herald_publications_total counter' 'herald_fanout_duration_seconds_bucket{le="\+Inf"} [0-9]+'; do
  grep -Eqx "$line" "$WORK/body" || fail "/metrics has no line $line"
done
[[ "$CTYPE" == text/plain* ]] || fail "/metrics content-type $CTYPE"
nodes="$(curl -s "http://$ADDR/api/nodes")"
python3 - "$nodes" "$ADDR" <<'EOF' || fail "/api/nodes: $nodes"
import json, sys
v = json.loads(sys.argv[1])
assert v["broker"] == "memory" and len(v["nodes"]) == 1, v
s = v["nodes"][0]["stats"]
assert s["listen"] == sys.argv[2], s
assert isinstance(s["clients"], int) and isinstance(s["channels"], int) and s["channels"] >= 2, s
EOF
ok

# README "Game server": tables over HTTP with the documented body, and SSE
# watching a table and a lobby branch.
req POST /api/tables -d '{"game":"holdem","seats":6,"timing":"normal","count":10}'
expect 201 '\{"tables":\[[0-9]+(,[0-9]+){9}\]\}' "POST /api/tables (README's body)"
TABLE="$(echo "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tables"][0])')"
req GET /api/tables
expect 200 '\{"tables":\[.*\]\}' "GET /api/tables"
[ "$(echo "$BODY" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tables"]))')" = 10 ] || fail "GET /api/tables: $BODY"
req GET "/api/tables/$TABLE"
jcheck 200 "v['table']['table'] == $TABLE and v['table']['seats'] == 6 and 'state' in v and v['seats'] == []" "GET /api/tables/{id}"
sse_open watch "table=$TABLE&lobby=holdem"
sse_wait watch 'retry: 2000\n: herald\n\n(event: herald\ndata: \{"id":[0-9]+,"(watch|lobby)":\{.*\}\}\n\n){2}.*'
req DELETE "/api/tables/$TABLE"
jcheck 200 "v['table']['table'] == $TABLE" "DELETE /api/tables/{id}"
req GET "/api/tables/$TABLE"
expect 404 "$(ERR 115)" "a closed table is gone (404, code 115)"

# Shutdown (README: SIGTERM closes clients with 1001): an SSE stream ends
# with the disconnect as an `event: herald` (protocol.md §1, §3.2).
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "server exited with an error"
sse_wait one '.*\n\nevent: herald\ndata: \{"disconnect":\{"code":1001,"reason":"[^"]+"\}\}\n\n'

# ---------------------------------------------------------------- SSE answers at once
# README "Game server": SSE can watch (`GET /sse?table=7&lobby=holdem`). Every
# SSE example must answer (status and headers, then its stream) at once, not
# when some timeout runs out: on a server with the default 10 s handshake
# timeout, the first byte must come within 3 s (curl's time_starttransfer;
# 0 when nothing came before --max-time).
start_server sse --handshake-timeout 10
req POST /api/tables -d '{"game":"holdem","seats":6,"timing":"normal","count":10}'
jcheck 201 "1 in v['tables'] and 7 in v['tables']" "tables 1 and 7 for the SSE examples"
slow=()
for query in 'table=7&lobby=holdem' 'table=1&channel=chat' 'table=1' 'channel=chat&lobby=holdem'; do
  meta="$(curl -s -o /dev/null --max-time 3 -w '%{http_code} %{time_starttransfer}' "$BASE/sse?$query" || true)"
  code="${meta%% *}" first="${meta#* }"
  if [ "$code" = 200 ] && python3 -c "import sys; t = float(sys.argv[1]); sys.exit(0 if 0 < t < 3 else 1)" "$first"; then
    echo "  GET /sse?$query: first byte after ${first} s"
    ok
  else
    echo "  GET /sse?$query: status $code, first byte after ${first} s (0: none within 3 s)" >&2
    slow+=("$query")
  fi
done
[ "${#slow[@]}" = 0 ] || fail "SSE examples with no answer within 3 s: ${slow[*]}"
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true

# ---------------------------------------------------------------- heartbeats
# protocol.md §1: an idle SSE stream gets `: ping` comments; a long-poll
# session not polled for ping_interval + pong timeout expires (its last poll
# may still carry the disconnect, 3000), then its id gets 404.
start_server ping --ping-interval 1 --pong-timeout 1
req POST /poll
SID="$(echo "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["session"])')"
sse_open idle 'channel=quiet'
sse_wait idle 'retry: 2000\n: herald\n\nid: [^\n]*\n\n: ping\n\n.*'
sleep 3
req GET "/poll/$SID"
if [ "$STATUS" = 200 ]; then
  expect 200 '\[\{"disconnect":\{"code":3000,"reason":"[^"]+"\}\}\]' "an expired session's last poll"
  req GET "/poll/$SID"
fi
expect 404 "$(ERR 103)" "an expired poll session (404)"
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true

# ---------------------------------------------------------------- "Safe to expose"
rc=0
timeout 5 "$HERALD_BIN" serve --listen 0.0.0.0:0 >"$WORK/exposed.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "herald serve --listen 0.0.0.0:0 without keys did not refuse (exit $rc)"
ok
SECRET=0123456789abcdef0123456789abcdef-secret
API_KEY=k-$RANDOM$RANDOM
# README: "a development token for user u1, granting chat:1, valid one hour"
TOKEN="$("$HERALD_BIN" token --user u1 --channel chat:1 --ttl 1h --secret "$SECRET")"
[[ "$TOKEN" =~ ^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$ ]] || fail "herald token printed: $TOKEN"
ok
start_server secure --token-hmac-secret "$SECRET" --api-key "$API_KEY"
req POST /api/publish -d '{"channel":"chat:1","data":1}'
expect 401 "$(ERR 101)" "/api/* without the API key (401, code 101)"
req GET /api/nodes -H 'Authorization: apikey wrong'
expect 401 "$(ERR 101)" "/api/* with a wrong API key"
req GET '/sse?channel=chat:1'
expect 401 "$(ERR 101)" "SSE without a token"
req GET '/sse?channel=chat:1&token=not.a.token'
expect 401 "$(ERR 101)" "SSE with a bad token"
sse_open bearer 'channel=chat:1' -H "Authorization: Bearer $TOKEN"
sse_open query "channel=chat:1&token=$TOKEN"
sse_ready bearer; sse_ready query
req POST /api/publish -H "Authorization: apikey $API_KEY" -d '{"channel":"chat:1","data":{"text":"hi"}}'
expect 200 "\\{\"epoch\":\"$EPOCH\",\"offset\":1\\}" "publish with Authorization: apikey KEY"
sse_wait bearer "retry: 2000\n: herald\n\nid: $EPOCH:0\n\nid: $EPOCH:1\ndata: \\{\"text\":\"hi\"\\}\n\n"
sse_wait query "retry: 2000\n: herald\n\nid: $EPOCH:0\n\nid: $EPOCH:1\ndata: \\{\"text\":\"hi\"\\}\n\n"

echo "curl_readme: $CHECKS checks as documented ($((SECONDS - start)) s)"
