#!/usr/bin/env bash
# Tests the Python SDK in one command: a virtualenv, the package installed from
# this directory with its dev extras, the real server binary, then ruff,
# mypy --strict and pytest.
#
# Usage: sdk/python/test.sh [pytest args...]      (from anywhere)
#   HERALD_BIN   server binary to test against (default: debug/herald in
#                cargo's target directory, scripts/target-dir; built with
#                `cargo build -p herald` if missing)
#   HERALD_PY_VENV  the virtualenv to use or create (default: sdk/python/.venv)
# Works on a fresh Debian machine as root: installs python3-venv if missing.
set -euo pipefail
SDK="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$SDK/../.." && pwd)"
VENV="${HERALD_PY_VENV:-$SDK/.venv}"

# Python >= 3.11 with venv and pip. Debian ships the venv module (and the pip
# that venv bootstraps) separately, as python3-venv.
install_python() {
    command -v apt-get >/dev/null || { echo "python3 >= 3.11 with the venv module is needed" >&2; exit 1; }
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -q
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3 python3-venv python3-pip
}
command -v python3 >/dev/null || install_python
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed")'
if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$VENV"
    if ! python3 -m venv "$VENV"; then
        rm -rf "$VENV"
        install_python
        python3 -m venv "$VENV"
    fi
fi
PY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Dependencies (idempotent), then the package itself, rebuilt from the source
# tree every run and installed as a user would (not editable), so the tests
# exercise the installed package, py.typed included.
"$PY" -m pip install -q "$SDK[dev]"
"$PY" -m pip install -q --force-reinstall --no-deps "$SDK"

if [ -z "${HERALD_BIN:-}" ]; then
    HERALD_BIN="$("$REPO/scripts/target-dir")/debug/herald"
    [ -x "$HERALD_BIN" ] || (cd "$REPO" && cargo build -p herald)
fi
[ -x "$HERALD_BIN" ] || { echo "HERALD_BIN=$HERALD_BIN is not an executable" >&2; exit 1; }
export HERALD_BIN

cd "$SDK"
echo "-- ruff"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
echo "-- mypy --strict"
"$VENV/bin/mypy"
echo "-- pytest (server: $HERALD_BIN)"
"$PY" -m pytest -q "$@"
