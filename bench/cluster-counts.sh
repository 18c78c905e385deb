#!/usr/bin/env bash
# Per-process kernel counts for bench/cluster.sh's Redis setups (issue 15
# goal 5): syscalls (by kind), context switches and CPU time of redis-server
# and each node over 5 s of a 200,000 deliveries/s run, taken 3 s in
# (bench/RESULTS.md, "Cluster overhead, counted"). Compare setups run next
# to each other: a starved server finds more queued per wake, so the counts
# per publication fall as the machine's load rises.
#
#   H=PATH TAG=NAME [RATE=2000] bench/cluster-counts.sh one|three
#   bench/cluster-counts-sum.py TAG one|three
#
# Experiments: SCHED=1 (2 s of `perf sched record -C 0`, summarised by
# bench/cluster-sched-sum.py), SLICE=NS (bench/slice.py on every server),
# BATCH=1 (the nodes run SCHED_BATCH).
#
# Writes bench/results/clusterp99/{counts-TAG-MODE-PROC.csv,cs-TAG-MODE.txt,
# redis-TAG-MODE.txt,fanout-TAG-MODE.{json,log}}.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${H:-$(scripts/target-dir)/release/herald}
MODE=${1:-three}
TAG=${TAG:-x}
RATE=${RATE:-2000}
REDIS_PORT=18379
OUT=bench/results/clusterp99
mkdir -p $OUT
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap stop_all EXIT
taskset -c 0 redis-server --port $REDIS_PORT --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
pids+=($!)
for _ in $(seq 50); do redis-cli -p $REDIS_PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
ports=(18400)
[ "$MODE" = three ] && ports=(18400 18401 18402)
urls=()
for port in "${ports[@]}"; do
  taskset -c 0 $H serve --listen 127.0.0.1:"$port" --broker redis://127.0.0.1:$REDIS_PORT --rate-limit 0 >/dev/null 2>&1 &
  pids+=($!)
  urls+=("ws://127.0.0.1:$port/ws")
done
sleep 1
# SLICE=NS: the EEVDF slice of every server thread (Linux >= 6.12), an experiment.
[ -n "${SLICE:-}" ] && python3 bench/slice.py "$SLICE" "${pids[@]}"
# BATCH=1: the nodes run SCHED_BATCH (a woken node does not preempt Redis), an experiment.
if [ -n "${BATCH:-}" ]; then for p in "${pids[@]:1}"; do chrt -a -b -p 0 "$p"; done; fi
U=$(IFS=,; echo "${urls[*]}")
EV=raw_syscalls:sys_enter,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_sendto,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,task-clock,context-switches
redis-cli -p $REDIS_PORT config resetstat >/dev/null
taskset -c 1 $H bench fanout "$U" --publish-url ws://127.0.0.1:18400/ws -p 4 -n 1000 -C 10 -r "$RATE" -s 128 \
  --duration 10s --verify --quiet --server-pid "${pids[1]}" --out "$OUT/fanout-$TAG-$MODE.json" > "$OUT/fanout-$TAG-$MODE.log" &
b=$!
sleep 3
names=(redis)
for i in "${!ports[@]}"; do names+=("node$((i+1))"); done
cs() { for p in "${pids[@]}"; do awk '/^(non)?voluntary_ctxt/ {s[$1]+=$2} END {printf "%d %d ", s["voluntary_ctxt_switches:"], s["nonvoluntary_ctxt_switches:"]}' /proc/"$p"/task/*/status; done; echo; }
cs0=$(cs)
sp=()
for i in "${!pids[@]}"; do
  perf stat -x, -e $EV -p "${pids[$i]}" -o "$OUT/counts-$TAG-$MODE-${names[$i]}.csv" -- sleep 5 &
  sp+=($!)
done
for p in "${sp[@]}"; do wait "$p"; done
# SCHED=1: 3 s of scheduler events on core 0 (who ran while a server waited), an experiment.
if [ -n "${SCHED:-}" ]; then
  perf sched record -C 0 -o "$OUT/sched-$TAG-$MODE.data" -- sleep 2 >/dev/null 2>&1
  bench/cluster-sched-sum.py "$OUT/sched-$TAG-$MODE.data" > "$OUT/sched-$TAG-$MODE.txt"
  [ -n "${KEEP:-}" ] || rm -f "$OUT/sched-$TAG-$MODE.data" # ~1 MB each: the summary is kept
fi
# voluntary and involuntary context switches of each process (all threads) over the window
echo "${names[*]}" > "$OUT/cs-$TAG-$MODE.txt"; echo "$cs0" >> "$OUT/cs-$TAG-$MODE.txt"; cs >> "$OUT/cs-$TAG-$MODE.txt"
redis-cli -p $REDIS_PORT info commandstats > "$OUT/redis-$TAG-$MODE.txt"
wait $b
uptime >> "$OUT/fanout-$TAG-$MODE.log"
cat "$OUT/fanout-$TAG-$MODE.log" | tail -12
