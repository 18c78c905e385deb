#!/usr/bin/env bash
# Herald's Bayeux endpoint (issue 27) checked with CometD's own JavaScript
# client: the `cometd` npm package in Node through `cometd-nodejs-client`,
# and in headless Chromium through playwright-core, at the versions pinned
# by tests/outside/bayeux/package-lock.json, against real herald processes
# on free 127.0.0.1 ports (bayeux/bayeux.test.mjs). Needs node and npm
# (installed with apt when missing and run as root) and Debian's chromium
# ($CHROMIUM, default /usr/bin/chromium); under CI=true a missing tool fails
# the test, elsewhere the test (or, without Chromium, its browser case)
# skips.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
: "${HERALD_BIN:?HERALD_BIN must name the herald binary}"

. "$HERE/lib.sh"
need node nodejs
need npm npm

cd "$HERE/bayeux"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
  timeout 300 npm ci --no-audit --no-fund --loglevel=error >/dev/null || {
    [ "${CI:-}" = true ] && fail "npm ci failed in tests/outside/bayeux"
    echo "SKIP: npm ci failed in tests/outside/bayeux"; exit 0
  }
fi
# Each test waits at most 5 s for any one thing; the whole run is bounded.
timeout 150 node --test --test-force-exit --test-concurrency=1 --test-timeout=30000 --test-reporter=spec bayeux.test.mjs
