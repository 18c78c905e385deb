#!/usr/bin/env python3
"""Summarises bench/cluster-counts.sh's files: per publication (5 s at RATE/s)
each process's syscalls by kind, context switches and CPU µs.

    bench/cluster-counts-sum.py TAG MODE [RATE]
"""
import csv, glob, sys
tag, mode = sys.argv[1], sys.argv[2]
rate = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
pubs = rate * 5
short = {"raw_syscalls:sys_enter": "sys", "task-clock": "cpu_us", "context-switches": "cs"}
rows, tot = [], {}
for f in sorted(glob.glob(f"bench/results/clusterp99/counts-{tag}-{mode}-*.csv")):
    who = f.rsplit("-", 1)[1][:-4]
    d = {}
    for r in csv.reader(l for l in open(f) if l.strip() and not l.startswith("#")):
        if len(r) < 3 or not r[0].replace(".", "").isdigit():
            continue
        name = r[2]
        k = short.get(name, name.replace("syscalls:sys_enter_", ""))
        v = float(r[0])
        if k == "cpu_us":
            v *= 1000  # msec -> µs
        d[k] = v / pubs
        tot[k] = tot.get(k, 0) + v / pubs
    rows.append((who, d))
try:
    lines = open(f"bench/results/clusterp99/cs-{tag}-{mode}.txt").read().split("\n")
    names, a, b = lines[0].split(), list(map(int, lines[1].split())), list(map(int, lines[2].split()))
    for i, n in enumerate(names):
        for j, k in enumerate(("vcs", "ivcs")):
            v = (b[2 * i + j] - a[2 * i + j]) / pubs
            next(d for w, d in rows if w == n)[k] = v
            tot[k] = tot.get(k, 0) + v
except (OSError, IndexError, ValueError, StopIteration):
    pass
rows.append(("total", tot))
keys = ["cpu_us", "cs", "vcs", "ivcs", "sys", "write", "writev", "sendto", "read", "recvfrom", "epoll_wait", "futex"]
print(f"{tag} {mode}: per publication (100 deliveries)")
print("proc   " + " ".join(f"{k:>10}" for k in keys))
for who, d in rows:
    print(f"{who:6} " + " ".join(f"{d.get(k, 0):10.2f}" for k in keys))
