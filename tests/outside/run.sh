#!/usr/bin/env bash
# Runs Herald against the field's own tools (issue 14): every
# tests/outside/*.test.sh in name order, each a self-contained test that
# installs what it needs, starts real servers on free 127.0.0.1 ports, prints
# a short summary and exits non-zero on failure. Under CI=true a missing tool
# that cannot be installed is a failure; elsewhere the test says so and skips.
#
# Usage: tests/outside/run.sh [NAME ...]   (NAME: a test's file name without
#        .test.sh; default: all).  HERALD_BIN: server binary
#        (default debug/herald in cargo's target directory, as
#        scripts/target-dir prints it; built by scripts/test.sh).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
export HERALD_BIN="${HERALD_BIN:-$("$REPO/scripts/target-dir")/debug/herald}"
[ -x "$HERALD_BIN" ] || { echo "no server binary at $HERALD_BIN (cargo build -p herald)" >&2; exit 1; }
if [ "$#" -gt 0 ]; then
  tests=(); for n in "$@"; do tests+=("$HERE/$n.test.sh"); done
else
  shopt -s nullglob; tests=("$HERE"/*.test.sh)
fi
failed=()
for t in "${tests[@]}"; do
  name="$(basename "$t" .test.sh)"
  echo "-- outside: $name"
  start=$SECONDS
  if bash "$t"; then
    echo "-- outside: $name ok ($((SECONDS - start)) s)"
  else
    echo "-- outside: $name FAILED ($((SECONDS - start)) s)"
    failed+=("$name")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "outside yardsticks failed: ${failed[*]}" >&2
  exit 1
fi
