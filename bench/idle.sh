#!/usr/bin/env bash
# Idle memory per connection on every transport, two server binaries
# alternated in one sitting (bench/RESULTS.md, "Idle memory per connection
# by transport"; decision 0010).
#
#   bench/idle.sh BEFORE_BIN AFTER_BIN [TRANSPORT...]
#   REPS=2 N=10000 bench/idle.sh ...     (alternations; connections per run)
#   SETTLE=30s PORT=18520 SRC=1 LABEL=x  (wait before reading RSS; first port;
#                                        first source address; results named idle-x-...)
#
# TRANSPORT: ws-json ws-binary tcp sse poll (default: all). Server on core
# 0, bench on core 1 (the bench is the AFTER binary's); a fresh server per
# run; each run from its own source address (127.0.0.2, .3, ...) so that
# the previous run's TIME_WAIT sockets leave ports free. Results:
# bench/results/idle-{before,after}-TRANSPORT-rK.json and one line each.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=$1 AFTER=$2
shift 2
TRANSPORTS=("${@:-ws-json ws-binary tcp sse poll}")
# shellcheck disable=SC2206
TRANSPORTS=(${TRANSPORTS[*]})
REPS=${REPS:-1}
N=${N:-10000}
PORT=${PORT:-18520}
mkdir -p bench/results
pid=
src=${SRC:-1}
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap stop EXIT
for rep in $(seq "$REPS"); do
  for t in "${TRANSPORTS[@]}"; do
    for which in before after; do
      bin=$BEFORE
      [ "$which" = after ] && bin=$AFTER
      taskset -c 0 "$bin" serve --listen 127.0.0.1:$PORT --tcp-listen 127.0.0.1:$((PORT + 1)) >/dev/null 2>&1 &
      pid=$!
      sleep 1
      src=$((src + 1))
      case $t in
        ws-*) url=ws://127.0.0.1:$PORT/ws; extra=() ;;
        tcp) url=tcp://127.0.0.1:$((PORT + 1)); extra=() ;;
        sse) url=http://127.0.0.1:$PORT; extra=(--channels 1) ;;
        poll) url=http://127.0.0.1:$PORT; extra=() ;;
      esac
      out=bench/results/idle${LABEL:+-$LABEL}-$which-$t-r$rep.json
      taskset -c 1 "$AFTER" bench idle "$url" --transport "$t" "${extra[@]}" -n "$N" \
        -l "127.0.0.$src" --settle "${SETTLE:-12s}" --quiet --server-pid "$pid" --out "$out" >/dev/null
      stop
      printf '%s %-9s r%s  %s KiB/connection\n' "$which" "$t" "$rep" \
        "$(python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['steps'][-1]; print(round(s['kib_per_connection'],3), s['clients'])" "$out")"
    done
  done
done
