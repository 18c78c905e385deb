# Shared by the tests/outside/*.test.sh scripts (sourced, not run).

# need COMMAND PACKAGE: install the Debian package with apt when root; if the
# command is still missing, fail under CI=true and skip (exit 0) elsewhere.
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing $2 for $1"
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" ||
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2"; }; } >/dev/null 2>&1 || true
  fi
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $1 is missing and could not be installed (package $2)" >&2
    exit 1
  fi
  echo "SKIP: $1 is not installed (apt-get install $2)"
  exit 0
}

# work_dir NAME: a scratch folder in $WORK and a list PIDS of processes that
# are killed and waited for, and the folder removed, on exit.
work_dir() {
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/herald-$1.XXXXXX")"
  PIDS=()
  trap cleanup EXIT
}
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
fail() { echo "FAIL: $*" >&2; exit 1; }
