#!/usr/bin/env python3
"""Helpers for bench/seed003.sh (issue 17 item 6): per-process CPU sampling
from /proc (the bench's --server-pid watches one pid, a topology has up to
five processes), the per-topology report, and the fail-over run (snapshot
the victim's tables, SIGKILL it, poll the survivor until each table is
served again, compare chips and hand numbers).

Usage:
  seed003.py sample OUT NAME=PID ...   # every 0.5 s until killed
  seed003.py report BENCH.json SAMPLES OUT.json
  seed003.py failover URL1 PID1 URL2 PID2 OUT.json   # kills the busier one
  seed003.py capacity REPORT.json QUOTA_PCT   # bench/seed003-capacity.sh
"""
import json, os, signal, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor

TICK = os.sysconf("SC_CLK_TCK")


def ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[11]) + int(rest[12])  # utime + stime (fields 14, 15)
    except (OSError, IndexError, ValueError):
        return None


def core_ticks():
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            p = line.split()
            if p[0] in ("cpu0", "cpu1"):
                v = [int(x) for x in p[1:]]
                out[p[0]] = (sum(v), v[3] + v[4])  # total, idle + iowait
    return out


def sample(out, procs):
    names = dict(a.split("=", 1) for a in procs)
    with open(out, "w") as f:
        while True:
            rec = {"t": time.time(), "cores": core_ticks(),
                   "procs": {n: ticks(p) for n, p in names.items()}}
            f.write(json.dumps(rec) + "\n")
            f.flush()
            time.sleep(0.5)


def window(samples, t0, t1):
    inside = [s for s in samples if t0 <= s["t"] <= t1]
    if len(inside) < 2:
        return None
    a, b = inside[0], inside[-1]
    dt = b["t"] - a["t"]
    r = {"seconds": round(dt, 2), "cpu_pct": {}, "core_idle_pct": {}}
    for n, v in b["procs"].items():
        if v is not None and a["procs"].get(n) is not None:
            r["cpu_pct"][n] = round(100.0 * (v - a["procs"][n]) / TICK / dt, 1)
    for c in ("cpu0", "cpu1"):
        tot = b["cores"][c][0] - a["cores"][c][0]
        idle = b["cores"][c][1] - a["cores"][c][1]
        r["core_idle_pct"][c] = round(100.0 * idle / tot, 1) if tot else None
    return r


def report(bench, samples_path, out):
    d = json.load(open(bench))
    samples = [json.loads(l) for l in open(samples_path) if l.strip()]
    t0 = d["started_at"]
    rows = []
    for s in d["steps"]:
        r = {k: s.get(k) for k in ("bots", "players", "tables_in_play", "hands_per_min",
                                    "game_events_per_s", "actions_per_s", "errors",
                                    "refused", "act_errors", "timeouts", "auto_actions",
                                    "seat_conflicts", "rebuys", "resits",
                                    # the take-over and the hands' ledger (run-wide)
                                    "sat_back", "sit_back_refused", "hands_after_sit_back",
                                    "hands_started", "hands_finished", "hands_ended_unseen",
                                    "hands_lost", "hands_lost_at", "hands_replayed")}
        r["p50_ms"] = s["response"]["p50_ms"]
        r["p99_ms"] = s["response"]["p99_ms"]
        r["cpu"] = window(samples, t0 + s["started_s"], t0 + s["ended_s"])
        rows.append(r)
    json.dump({"label": d.get("label"), "bench": bench, "steps": rows}, open(out, "w"), indent=1)
    for r in rows:
        c = r["cpu"] or {}
        print(f"  {r['bots']:>5} bots tables {r['tables_in_play']:>4} hands/min {r['hands_per_min']:7.0f}"
              f" events/s {r['game_events_per_s']:8.0f} p50 {r['p50_ms']:.2f} p99 {r['p99_ms']:.1f}"
              f" err {r['errors']} cpu {c.get('cpu_pct')} idle {c.get('core_idle_pct')}")
        if r.get("hands_started") is not None:
            print(f"    hands started {r['hands_started']} finished {r['hands_finished']}"
                  f" ended unseen {r['hands_ended_unseen']} lost {r['hands_lost']} {r['hands_lost_at']}"
                  f" replayed {r['hands_replayed']};"
                  f" sat back {r['sat_back']} (refused {r['sit_back_refused']}),"
                  f" hands after sit-back {r['hands_after_sit_back']}, resits {r['resits']},"
                  f" auto actions {r['auto_actions']}, act errors {r['act_errors']}")


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def table_state(base, t):
    try:
        d = get(f"{base}/api/tables/{t}")
    except Exception as e:  # a dead or not-yet-owning node
        return {"error": str(e)}
    st = d.get("state") or {}
    seats = st.get("seats") or []
    chips = sum(s.get("stack", 0) for s in seats) + st.get("pot", 0)
    return {"hand": st.get("hand"), "street": st.get("street"), "chips": chips,
            "players": sum(1 for s in seats), "owner": (d.get("table") or {}).get("owner")}


def owned(base):
    return {t["table"]: t for t in get(f"{base}/api/tables")["tables"] if t.get("owner")}


def failover(url1, pid1, url2, pid2, out):
    # The victim is the game node that runs more of the tables in play.
    nodes = []
    for url, pid in ((url1, pid1), (url2, pid2)):
        mine = owned(url)
        busy = sorted(t for t, e in mine.items() if e.get("players", 0) > 0)
        nodes.append((len(busy), url, int(pid), mine, busy))
    nodes.sort(reverse=True)
    _, victim, vpid, mine, affected = nodes[0]
    survivor = nodes[1][1]
    print(f"victim {victim} owns {len(mine)} tables, {len(affected)} in play;"
          f" survivor {survivor} owns {len(nodes[1][3])}, {nodes[1][0]} in play")
    pool = ThreadPoolExecutor(16)
    before = dict(zip(affected, pool.map(lambda t: table_state(victim, t), affected)))
    t_kill = time.time()
    os.kill(vpid, signal.SIGKILL)
    resumed = {}
    while len(resumed) < len(affected) and time.time() - t_kill < 20:
        try:
            now = owned(survivor)
        except Exception:
            now = {}
        t = time.time()
        for tab in affected:
            if tab not in resumed and tab in now:
                resumed[tab] = t - t_kill
        time.sleep(0.05)
    after = dict(zip(affected, pool.map(lambda t: table_state(survivor, t), affected)))
    time.sleep(10)
    mid = dict(zip(affected, pool.map(lambda t: table_state(survivor, t), affected)))
    time.sleep(20)
    later = dict(zip(affected, pool.map(lambda t: table_state(survivor, t), affected)))
    lat = sorted(resumed.values())
    pct = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000) if lat else None
    same_chips = [t for t in affected if before[t].get("chips") == after[t].get("chips")]
    hand_kept = [t for t in affected if after[t].get("hand") is not None
                 and before[t].get("hand") is not None and after[t]["hand"] >= before[t]["hand"]]
    moved = lambda a, b: (a.get("hand"), a.get("street")) != (b.get("hand"), b.get("street"))
    advanced10 = [t for t in affected if moved(after[t], mid[t])]
    advanced30 = [t for t in affected if moved(after[t], later[t])]
    went_on = [t for t in affected if later[t].get("hand") is not None
               and before[t].get("hand") is not None and later[t]["hand"] > before[t]["hand"]]
    res = {
        "victim": victim, "survivor": survivor, "victim_tables_owned": len(mine),
        "survivor_tables_in_play_before": nodes[1][0], "affected_tables": len(affected),
        "resumed": len(resumed), "resume_ms_p50": pct(0.5), "resume_ms_p99": pct(0.99),
        "resume_ms_min": round(lat[0] * 1000) if lat else None,
        "resume_ms_max": round(lat[-1] * 1000) if lat else None,
        "chips_before": sum(before[t].get("chips") or 0 for t in affected),
        "chips_after": sum(after[t].get("chips") or 0 for t in affected),
        "tables_same_chips": len(same_chips),
        "tables_hand_not_back": len(hand_kept),
        "tables_hand_finished_after_30s": len(went_on),
        "tables_moved_on_after_10s": len(advanced10), "tables_moved_on_after_30s": len(advanced30),
        "chips_later": sum(later[t].get("chips") or 0 for t in affected),
        "kill_at": t_kill,
        "per_table": {t: {"before": before[t], "after": after[t], "mid": mid[t], "later": later[t],
                          "resume_ms": round(resumed[t] * 1000) if t in resumed else None}
                      for t in affected},
    }
    json.dump(res, open(out, "w"), indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "per_table"}))


def role(name):
    """A process's role from its name in seed003-capacity.sh."""
    return {"a": "all", "all": "all", "game": "game", "edge": "edge"}.get(name.rstrip("0123456789"), name)


def crossing(rows, names, quota, limit=90.0):
    """Players where the busiest of `names` first uses `limit` % of its quota
    (linear between steps), or None if no step reached it."""
    prev = None
    for r in rows:
        pct = max((100.0 * r["cpu"]["cpu_pct"].get(n, 0) / quota for n in names), default=0)
        if pct >= limit:
            if prev is None:
                return r["players"]
            (p0, c0) = prev
            return round(p0 + (r["players"] - p0) * (limit - c0) / (pct - c0))
        prev = (r["players"], pct)
    return None


def capacity(report_path, quota):
    quota = float(quota)
    rows = [r for r in json.load(open(report_path))["steps"] if r.get("cpu")]
    if not rows:
        print("no step with CPU samples")
        return
    names = sorted(rows[0]["cpu"]["cpu_pct"])
    nodes = [n for n in names if role(n) in ("all", "game", "edge")]
    print(f"  {'players':>7} {'hands/min':>9} {'events/s':>8} {'p50':>6} {'p99':>6} err  "
          + "  ".join(f"{n:>6}" for n in names) + "   (% of the node's quota; Redis: % of a quota)")
    for r in rows:
        c = r["cpu"]["cpu_pct"]
        print(f"  {r['players']:>7} {r['hands_per_min']:>9.0f} {r['game_events_per_s']:>8.0f}"
              f" {r['p50_ms']:>6.2f} {r['p99_ms']:>6.1f} {r['errors']:>3}  "
              + "  ".join(f"{100.0 * c.get(n, 0) / quota:>6.1f}" for n in names))
    res = {"quota_pct": quota}
    for what, sel in (("game", [n for n in nodes if role(n) in ("all", "game")]),
                      ("any node", nodes)):
        x = crossing(rows, sel, quota)
        res[what] = x
        busiest = max(100.0 * rows[-1]["cpu"]["cpu_pct"].get(n, 0) / quota for n in sel)
        print(f"  {what} cores under 10 % idle at: "
              + (f"{x} players" if x is not None else
                 f"not reached by {rows[-1]['players']} players (busiest at {busiest:.0f} % of its quota)"))
    json.dump(res, open(report_path.replace("-report.json", "-capacity.json"), "w"))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"sample": lambda: sample(args[0], args[1:]), "report": lambda: report(*args),
     "failover": lambda: failover(*args), "capacity": lambda: capacity(*args)}[cmd]()
