#!/usr/bin/env bash
# Seed 003's capacity point — "max players before the game cores fall under
# 10 % idle" — for its three topologies (issue 17 item 6), on a 2-core box.
#
# Why quotas: one Herald node holds 18,000 bots on one core with 58 % of it
# idle (bench/RESULTS.md, issue 13) and a process may hold only 20,000 files
# here, so no topology can be driven to saturation on whole cores. Instead
# every node runs in its own cgroup with a CPU quota, its "machine": QUOTA %
# of one core (default 20), enforced by the kernel's CFS bandwidth control
# with a short period (10 ms, so a throttled node pauses at most ~8 ms at a
# time). A node's idle is then (quota - its CPU) / quota, and the ramp finds
# where the busiest node of each role crosses 90 % of its quota. Redis gets
# no quota (in Firebase the replication had no process of its own): its CPU
# is reported beside, in the same unit. All the quota'd groups have a high
# cpu.shares, so a neighbour (a compile) cannot take a node's quota away;
# everything else of the machine competes as usual.
#
# Pinning: every node and Redis on core 0, the bench and the sampler on core 1.
# Topologies, as bench/seed003.sh: (a) singleton (tables in memory);
# (b) two `all` nodes on one Redis (durable tables, fail-over);
# (c) two `edge` + two `game` nodes on one Redis, bots through the edges.
# Needs root (cgroup v1 cpu controller at /sys/fs/cgroup/cpu).
#
# Usage: bench/seed003-capacity.sh [topologies: a,b,c] [max bots] [step bots] [step s]
#   env: QUOTA (% of a core per node, default 20), HERALD_BIN, LABEL (file prefix),
#        BOTS_EXTRA (more `herald bench bots` options, e.g. --lobby-off-when-seated)
# Results: bench/results/seed003/cap-$LABEL-{a,b,c}*.json, summary printed by
# bench/seed003.py capacity.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HERALD_BIN:-$(scripts/target-dir)/release/herald}
WHICH="${1:-a,b,c}"
MAX="${2:-12000}"
STEP="${3:-1000}"
STEP_S="${4:-15}"
QUOTA=${QUOTA:-20}
LABEL=${LABEL:-q$QUOTA}
OUT=bench/results/seed003
PY=bench/seed003.py
CFG=bench/game/seed003.toml
CG=/sys/fs/cgroup/cpu/herald-cap
PORT=18850
RPORT=18879
mkdir -p "$OUT" "$CG"
PERIOD=10000
QUSEC=$((PERIOD * QUOTA / 100))

group() { # name quota_usec|-1 -> path of a fresh cgroup
  local g=$CG/$1
  mkdir -p "$g"
  echo $PERIOD >"$g/cpu.cfs_period_us"
  echo "$2" >"$g/cpu.cfs_quota_us"
  echo 8192 >"$g/cpu.shares"
  echo "$g"
}
PIDS=(); NAMES=(); S=""
launch() { # name cgroup core cmd...: starts cmd inside the cgroup, pinned
  local n=$1 g=$2 core=$3; shift 3
  sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec taskset -c "$@"' _ "$g" "$core" "$@" \
    >/tmp/herald-cap-$n.log 2>&1 &
  PIDS+=($!); NAMES+=("$n=$!")
}
node() { # name port args...
  local n=$1 port=$2; shift 2
  launch "$n" "$(group "$n" $QUSEC)" 0 $H serve --listen 127.0.0.1:$port --config $CFG "$@"
}
redis() {
  launch redis "$(group redis -1)" 0 redis-server --port $RPORT --save "" --appendonly no
  sleep 1
}
stop() {
  [ -n "$S" ] && { kill "$S" 2>/dev/null || true; wait "$S" 2>/dev/null || true; S=""; }
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PIDS=(); NAMES=()
}
cleanup() { stop; for g in "$CG"/*/; do [ -d "$g" ] && rmdir "$g" 2>/dev/null; done; rmdir "$CG" 2>/dev/null || true; }
trap cleanup EXIT
check() { for p in "${PIDS[@]}"; do kill -0 "$p" || { echo "a process did not start (port taken?)" >&2; exit 1; }; done; }
run() { # topology urls name-of-the-process-the-bench-watches
  local t=$1 urls=$2 f=$OUT/cap-$LABEL-$1 spid=""
  for x in "${NAMES[@]}"; do [ "${x%%=*}" = "$3" ] && spid=${x#*=}; done
  local bench; bench=$(group bench -1)
  echo "== ($t) quota $QUOTA % of a core per node: load $(cat /proc/loadavg)"
  launch sampler "$bench" 1 python3 $PY sample $f-cpu.jsonl "${NAMES[@]}"
  S=${PIDS[-1]}; unset 'PIDS[-1]'; unset 'NAMES[-1]'
  sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec taskset -c 1 "$@"' _ "$bench" \
    $H bench bots "$urls" --game holdem --transport ws-json -n "$MAX" --step-size "$STEP" \
    --step-duration ${STEP_S}s --think 1s --chat-rate 2 --server-pid "$spid" ${BOTS_EXTRA:-} \
    --label "seed003 capacity ($t) quota $QUOTA" --out $f.json >$f.log 2>&1 \
    || echo "run failed: ($t)" >&2
  kill "$S"; wait "$S" 2>/dev/null || true; S=""
  for g in "$CG"/*/; do echo "  $(basename "$g"): $(tr '\n' ' ' <"$g/cpu.stat")"; done
  python3 $PY report $f.json $f-cpu.jsonl $f-report.json >/dev/null
  python3 $PY capacity $f-report.json "$QUOTA"
}

for t in ${WHICH//,/ }; do
  case $t in
  a)
    node a $PORT; sleep 3; check
    run a ws://127.0.0.1:$PORT/ws a ;;
  b)
    redis
    node all1 $((PORT + 1)) --broker redis://127.0.0.1:$RPORT --role all
    node all2 $((PORT + 2)) --broker redis://127.0.0.1:$RPORT --role all
    sleep 8; check
    run b ws://127.0.0.1:$((PORT + 1))/ws,ws://127.0.0.1:$((PORT + 2))/ws all1 ;;
  c)
    redis
    node game1 $((PORT + 3)) --broker redis://127.0.0.1:$RPORT --role game
    node game2 $((PORT + 4)) --broker redis://127.0.0.1:$RPORT --role game
    node edge1 $((PORT + 5)) --broker redis://127.0.0.1:$RPORT --role edge
    node edge2 $((PORT + 6)) --broker redis://127.0.0.1:$RPORT --role edge
    sleep 8; check
    run c ws://127.0.0.1:$((PORT + 5))/ws,ws://127.0.0.1:$((PORT + 6))/ws edge1 ;;
  *) echo "unknown topology $t (a, b or c)" >&2; exit 2 ;;
  esac
  stop
  for g in "$CG"/*/; do rmdir "$g" 2>/dev/null || true; done
done
