#!/usr/bin/env python3
"""Before/after tables from bench/quiet.sh runs of two binaries.

    bench/compare-quiet.py DIR_A DIR_B [DIR_A2 DIR_B2 ...]

Each DIR holds one bench/quiet.sh run (OUT=DIR HERALD=BIN bench/quiet.sh):
fanout-RATE-rN.json and stream-{ws-json,sse}-{batch,conc}-rN.json. Pairs of
directories are labelled by their names; the tables are markdown, one row
per (step, run) with the figures side by side:

- fan-out: delivered/expected, lost, p50, p99, p99.9, mean server CPU;
- stream: events/s reached, server CPU, p99, per batch size or consumers.
"""
import glob
import json
import os
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cpu(d):
    xs = [s["server_cpu_pct"] for s in d.get("system") or [] if "server_cpu_pct" in s]
    xs = xs[1:] or xs  # the first second includes set-up
    return sum(xs) / len(xs) if xs else float("nan")


def fanout(dirs):
    print("| deliveries/s | run | " + " | ".join(
        f"{os.path.basename(d)}: lost, p50 / p99 / p99.9 ms, server CPU" for d in dirs) + " |")
    print("|---|---|" + "---|" * len(dirs))
    files = sorted(glob.glob(os.path.join(dirs[0], "fanout-*.json")),
                   key=lambda p: (int(p.split("-")[-2]), p))
    for f in files:
        name = os.path.basename(f)
        rate = int(name.split("-")[1]) * 100
        run = name.split("-")[2][:-5]
        cells = []
        for d in dirs:
            p = os.path.join(d, name)
            if not os.path.exists(p):
                cells.append("—")
                continue
            x = load(p)
            s = x["summary"]
            lat = s["latency"]
            cells.append(f"{s['lost']}, {lat['p50_ms']:.2f} / {lat['p99_ms']:.1f} / "
                         f"{lat['p999_ms']:.1f}, {cpu(x):.0f} %")
        print(f"| {rate:,} | {run} | " + " | ".join(cells) + " |")


def stream(dirs):
    print("| transport | step | run | " + " | ".join(
        f"{os.path.basename(d)}: events/s, server CPU, p99 ms" for d in dirs) + " |")
    print("|---|---|---|" + "---|" * len(dirs))
    for f in sorted(glob.glob(os.path.join(dirs[0], "stream-*.json"))):
        name = os.path.basename(f)
        parts = name[:-5].split("-")
        transport, kind, run = "-".join(parts[1:-2]), parts[-2], parts[-1]
        per = []
        for d in dirs:
            p = os.path.join(d, name)
            per.append(load(p)["steps"] if os.path.exists(p) else None)
        for i, step in enumerate(per[0]):
            label = (f"{step['consumers']} consumers" if kind == "conc"
                     else f"batch {step['batch_size']}")
            cells = []
            for steps in per:
                if not steps or i >= len(steps):
                    cells.append("—")
                    continue
                s = steps[i]
                cells.append(f"{s['eps']:,.0f}, {s['server_cpu_pct']:.0f} %, "
                             f"{s['latency']['p99_ms']:.1f}")
            print(f"| {transport} | {label} | {run} | " + " | ".join(cells) + " |")


def main():
    dirs = sys.argv[1:]
    if len(dirs) < 2:
        print(__doc__)
        return 2
    fanout(dirs)
    print()
    stream(dirs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
