#!/usr/bin/env bash
# Tests the TypeScript SDK and the web pages in one command: installs what is
# missing (Node >= 20 is expected; Debian's chromium; a virtualenv with the
# Python SDK for the end-to-end test's Python peer), builds the SDK and the
# pages, checks that the committed web/dist/ matches its sources, builds the
# server (which embeds web/dist/), then runs the SDK's tests (protocol
# vectors, real servers on free ports) and the end-to-end tests in headless
# Chromium (web/test/: the demo, the poker table, the games page against
# games/dist/). Screenshots land in web/artifacts/ (or $HERALD_ARTIFACTS).
#
# Usage: sdk/typescript/test.sh            (from anywhere; CI runs it from scripts/test.sh)
#   HERALD_BIN   server binary (default: debug/herald in cargo's target
#                directory, scripts/target-dir; built here)
#   CHROMIUM     browser (default: /usr/bin/chromium)
set -euo pipefail
SDK="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$SDK/../.." && pwd)"
WEB="$REPO/web"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
APT_UPDATED=""
apt_install() {
    command -v apt-get >/dev/null || { echo "cannot install $*: no apt-get" >&2; exit 1; }
    [ -n "$APT_UPDATED" ] || { $SUDO apt-get update -q; APT_UPDATED=1; }
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

# Node.js >= 20 with npm.
command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
    || { echo "Node.js >= 20 is needed (found $(node --version))" >&2; exit 1; }
# Debian's Chromium, for the end-to-end test (never a downloaded browser).
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] || apt_install chromium
export CHROMIUM
# Python with venv, for the Python SDK peer of the end-to-end test.
python3 -c 'import ensurepip, venv' 2>/dev/null || apt_install python3 python3-venv python3-pip

export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

echo "-- SDK: install, type-check and build"
# npm ci runs the package's prepare script (prepare.mjs), which builds dist/.
(cd "$SDK" && npm ci --loglevel=error)

echo "-- demo page: install, type-check and build; the committed web/dist/ must match"
(cd "$WEB" && npm ci --loglevel=error && npm run --silent build)
if git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$REPO" diff --exit-code --stat -- web/dist \
        || { echo "web/dist/ is stale: run 'npm run build' in web/ and commit it" >&2; exit 1; }
fi

echo "-- server binary (embeds web/dist/)"
if [ -z "${HERALD_BIN:-}" ]; then
    (cd "$REPO" && cargo build -q -p herald --locked)
    HERALD_BIN="$("$REPO/scripts/target-dir")/debug/herald"
fi
export HERALD_BIN

echo "-- Python SDK for the end-to-end test's peer"
VENV="$WEB/.venv"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install -q "$REPO/sdk/python"
export HERALD_E2E_PYTHON="$VENV/bin/python"

echo "-- SDK tests: protocol vectors, every transport against real servers, reconnect and recovery, fallback,"
echo "   and the README's install and quick start in a new project outside the SDK"
(cd "$SDK" && node --test --test-concurrency=1 --test-reporter=dot test/)

echo "-- end-to-end: the demo, poker and games pages in headless Chromium with Python and Node peers"
(cd "$WEB" && node --test --test-concurrency=1 --test-reporter=spec test/)
echo "screenshots: ${HERALD_ARTIFACTS:-$WEB/artifacts}"
