#!/usr/bin/env python3
"""Summarises a `perf sched record -C 0` file of bench/cluster-counts.sh
(SCHED=1): core 0's run time by kind of task, and how long server threads
(Herald's `tokio-rt-worker`, `redis-server`) waited between their wake-up and
running ("sch delay": p50, p99, max).

    bench/cluster-sched-sum.py FILE
"""
import subprocess, sys
out = subprocess.run(["perf", "sched", "timehist", "-i", sys.argv[1]], capture_output=True, text=True).stdout
run, delays, spans, waits = {}, {}, [], []
for line in out.splitlines()[3:]:
    f = line.split()
    if len(f) < 6:
        continue
    try:
        sch, rt = float(f[-2]), float(f[-1])
    except ValueError:
        continue
    name = " ".join(f[2:-3])
    kind = "herald" if name.startswith("tokio-rt-worker") or name.startswith("clusterp99") or name.startswith("herald") else \
        "redis" if name.startswith("redis-server") else "idle" if name.startswith("<idle>") else "other"
    run[kind] = run.get(kind, 0) + rt
    end = float(f[0]) * 1000  # ms
    spans.append((end - rt, end, kind, name))
    if kind in ("herald", "redis"):
        delays.setdefault(kind, []).append(sch)
        if sch >= 0.5:
            waits.append((end - rt - sch, end - rt, kind))
total = sum(run.values()) or 1
print("core 0 run time: " + ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(run.items())))
# What held core 0 while a server thread waited 0.5 ms or more to run.
held = {}
for a, b, _ in waits:
    for x, y, kind, name in spans:
        o = min(b, y) - max(a, x)
        if o > 0:
            who = "herald" if kind == "herald" else "redis" if kind == "redis" else "other"
            held[who] = held.get(who, 0) + o
tot = sum(held.values()) or 1
print(f"waits >= 0.5 ms: {len(waits)}; core 0 meanwhile: " + ", ".join(f"{k} {v / tot:.0%}" for k, v in sorted(held.items())))
for k, d in sorted(delays.items()):
    d.sort()
    q = lambda p: d[min(len(d) - 1, int(p * len(d)))]
    print(f"{k}: {len(d)} runs, sch delay p50 {q(0.5):.3f} ms, p99 {q(0.99):.3f} ms, max {d[-1]:.3f} ms")
