#!/usr/bin/env bash
# Herald's SSE endpoint read by the `eventsource` npm package, the client most
# Node services use (issue 14): versions 2.0.2 and 4.1.1 side by side connect,
# receive, lose their connection (cut by a TCP proxy; their node SIGKILLed and
# restarted on its port; their node SIGKILLed and the proxy moved to another
# node of a Redis cluster; their node restarted while it cannot reach Redis;
# cut before the first publication), reconnect with Last-Event-ID, and must
# receive every publication exactly once, in order (4.x is only reported in
# the last case: it ignores an id sent without data). The test itself is the
# npm package in eventsource/ (node:test); this script installs what it needs
# and runs it, and prints a summary line per version and scenario.
#
# Needs Node.js >= 20 with npm, and redis-server; installed with apt when
# missing and running as root. Missing and not installable: fails under
# CI=true, skips otherwise. HERALD_BIN: the server (tests/outside/run.sh sets
# it). About 20 s.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PKG="$HERE/eventsource"

# Missing tool: a failure in CI, a skip elsewhere.
missing() {
    if [ "${CI:-}" = "true" ]; then
        echo "eventsource: $* (CI=true: failing)" >&2
        exit 1
    fi
    echo "eventsource: SKIPPED: $*"
    exit 0
}

APT_UPDATED=""
# Installs Debian packages when we are root and have apt-get; false otherwise.
apt_install() {
    [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null || return 1
    if [ -z "$APT_UPDATED" ]; then
        apt-get update -q >/dev/null || return 1
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null
}

{ command -v node >/dev/null && command -v npm >/dev/null; } || apt_install nodejs npm \
    || missing "node and npm are not installed and cannot be (apt-get as root needed)"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
    || missing "Node.js >= 20 is needed (found $(node --version))"
command -v redis-server >/dev/null || apt_install redis-server \
    || missing "redis-server is not installed and cannot be (apt-get as root needed)"
[ -n "${HERALD_BIN:-}" ] && [ -x "$HERALD_BIN" ] \
    || { echo "eventsource: no server binary at HERALD_BIN=${HERALD_BIN:-} (tests/outside/run.sh sets it)" >&2; exit 1; }
HERALD_BIN="$(cd "$(dirname "$HERALD_BIN")" && pwd)/$(basename "$HERALD_BIN")"
export HERALD_BIN

export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
(cd "$PKG" && npm ci --loglevel=error >/dev/null) \
    || missing "npm ci failed in $PKG (no registry access?)"

cd "$PKG"
# Every wait inside is bounded; this bounds the whole, hung processes included.
timeout --kill-after=5 120 node --test-reporter=spec eventsource.test.mjs
