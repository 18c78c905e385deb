#!/usr/bin/env bash
# Herald's Pusher Channels endpoint (issue 16) checked with Pusher's own
# libraries from npm: pusher-js (client), laravel-echo (on pusher-js, in Node
# and in headless Chromium through playwright-core) and pusher (server SDK),
# at the versions pinned by tests/outside/pusher/package-lock.json. Needs
# node and npm (installed with apt when missing and run as root) and
# Debian's chromium ($CHROMIUM, default /usr/bin/chromium; the web e2e tests
# need it too); under CI=true a missing tool fails the test, elsewhere the
# test (or, without Chromium, its browser case) skips. cluster.test.mjs adds
# two nodes on a real redis-server (skipped, or failed under CI, without one).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
: "${HERALD_BIN:?HERALD_BIN must name the herald binary}"

missing() {
  if [ "${CI:-}" = "true" ]; then echo "pusher: $1 missing and not installable" >&2; exit 1; fi
  echo "pusher: SKIPPED ($1 missing)"; exit 0
}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -qq nodejs npm >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq nodejs npm >/dev/null 2>&1; } || true
  fi
  command -v node >/dev/null && command -v npm >/dev/null || missing "node/npm"
fi

cd "$HERE/pusher"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
  timeout 300 npm ci --no-audit --no-fund --loglevel=error >/dev/null || missing "npm packages (npm ci failed)"
fi
# Each test waits at most 5 s for any one thing; the whole run is bounded.
# --test-force-exit: after a 40xx close (terminateUserConnections' 4009),
# pusher-js closes its already closed socket again and faye-websocket arms a
# 30 s close timer that nothing clears; the tests are done by then.
files=(pusher.test.mjs)
if command -v redis-server >/dev/null; then
  files+=(cluster.test.mjs)
elif [ "${CI:-}" = "true" ]; then
  echo "pusher: redis-server missing (scripts/test.sh installs it)" >&2; exit 1
else
  echo "pusher: cluster case SKIPPED (redis-server missing)"
fi
timeout 150 node --test --test-force-exit --test-concurrency=1 --test-timeout=30000 --test-reporter=spec "${files[@]}"
