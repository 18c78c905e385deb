#!/usr/bin/env python3
"""Redis Cluster as Herald's broker, measured (bench/RESULTS.md, "Redis
Cluster"; decision 0021). Driven by bench/rcluster.sh; only 127.0.0.1.

  rcluster.py throughput HERALD RATE SECONDS
      For 1, 2 and 3 masters (no replicas; slots split evenly, joined with
      CLUSTER ADDSLOTSRANGE and CLUSTER MEET, since redis-cli --cluster
      create wants three masters at least): two Herald nodes on
      redis-cluster://, then `herald bench fanout` on both (8 publishers,
      64 subscribers on 64 channels, which spread over the masters) offering
      RATE publications/s for SECONDS. Prints publications/s sent and
      delivered, errors, latency p50/p99, and each redis-server's CPU over
      the run (from /proc/PID/stat).

  rcluster.py failover HERALD RUNS
      RUNS times: 3 masters with one replica each (cluster-node-timeout
      1000 ms), one Herald node; publish on channel `feed` over POST
      /api/publish every 5 ms, SIGKILL the master of feed's slot, and time
      (a) kill -> a node names a new master for the slot (polled every
      10 ms) and (b) kill -> the first publish Herald accepts again. Prints
      each run and p50/p99 (nearest rank) of both.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SLOTS = 16384


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def key_slot(key):
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return crc16(key) % SLOTS


def cli(port, *args, timeout=5):
    r = subprocess.run(["redis-cli", "-p", str(port), *map(str, args)],
                       capture_output=True, text=True, timeout=timeout)
    return r.stdout.strip()


class Cluster:
    def __init__(self, masters, replicas):
        self.dir = tempfile.mkdtemp(prefix="herald-rcluster-")
        self.procs = {}
        try:
            self._start(masters, replicas)
        except BaseException:
            self.stop()
            raise

    def _start(self, masters, replicas):
        self.bus = {}
        self.masters = []
        self.replicas = []
        for i in range(masters * (1 + replicas)):
            port = free_port()
            bus = free_port()
            d = os.path.join(self.dir, str(port))
            os.makedirs(d)
            p = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", d,
                 "--cluster-enabled", "yes", "--cluster-port", str(bus),
                 "--cluster-config-file", "nodes.conf",
                 "--cluster-node-timeout", "1000",
                 "--cluster-require-full-coverage", "no",
                 "--cluster-replica-validity-factor", "0"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs[port] = p
            self.bus[port] = bus
            (self.masters if i < masters else self.replicas).append(port)
        for port in self.procs:
            for _ in range(100):
                if cli(port, "PING") == "PONG":
                    break
                time.sleep(0.05)
        per = SLOTS // masters
        for i, port in enumerate(self.masters):
            a = i * per
            b = SLOTS - 1 if i == masters - 1 else (i + 1) * per - 1
            cli(port, "CLUSTER", "ADDSLOTSRANGE", a, b)
            cli(port, "CLUSTER", "SET-CONFIG-EPOCH", i + 1)
        first = self.masters[0]
        for port in list(self.procs)[1:]:
            cli(port, "CLUSTER", "MEET", "127.0.0.1", first, self.bus[first])
        self.wait(lambda: all(
            ("cluster_known_nodes:%d" % len(self.procs)) in cli(p, "CLUSTER", "INFO")
            for p in self.procs))
        for i, port in enumerate(self.replicas):
            master = self.masters[i % masters]
            mid = cli(master, "CLUSTER", "MYID")
            self.wait(lambda: mid in cli(port, "CLUSTER", "NODES"))
            cli(port, "CLUSTER", "REPLICATE", mid)
        self.wait(lambda: all(
            "cluster_state:ok" in cli(p, "CLUSTER", "INFO") for p in self.procs))
        for port in self.replicas:
            self.wait(lambda: "master_link_status:up" in cli(port, "INFO", "replication"))

    @staticmethod
    def wait(cond, within=30):
        deadline = time.time() + within
        while not cond():
            if time.time() > deadline:
                raise RuntimeError("cluster did not settle")
            time.sleep(0.05)

    def url(self):
        return "redis-cluster://" + ",".join("127.0.0.1:%d" % p for p in self.masters[:2])

    def owner(self, slot, ask=None):
        for port in ([ask] if ask else []) + list(self.procs):
            if self.procs[port].poll() is not None:
                continue
            text = cli(port, "CLUSTER", "NODES", timeout=2)
            for line in text.splitlines():
                f = line.split()
                if len(f) < 8 or "master" not in f[2] or "fail" in f[2]:
                    continue
                for r in f[8:]:
                    if r.startswith("["):
                        continue
                    a, _, b = r.partition("-")
                    if int(a) <= slot <= int(b or a):
                        return int(f[1].split("@")[0].rsplit(":", 1)[1])
            return None
        return None

    def cpu_ticks(self):
        out = {}
        for port, p in self.procs.items():
            try:
                with open("/proc/%d/stat" % p.pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                out[port] = int(fields[11]) + int(fields[12])
            except OSError:
                out[port] = 0
        return out

    def kill(self, port):
        self.procs[port].send_signal(signal.SIGKILL)
        self.procs[port].wait()

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_herald(herald, url):
    port = free_port()
    p = subprocess.Popen([herald, "serve", "--listen", "127.0.0.1:%d" % port,
                          "--broker", url, "--rate-limit", "0"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            pass
        if time.time() > deadline:
            p.kill()
            raise RuntimeError("herald not ready")
        time.sleep(0.1)


def throughput(herald, rate, seconds):
    tick = os.sysconf("SC_CLK_TCK")
    rows = []
    for masters in (1, 2, 3):
        c = Cluster(masters, 0)
        nodes = []
        try:
            nodes = [start_herald(herald, c.url()) for _ in range(2)]
            urls = ",".join("ws://127.0.0.1:%d/ws" % port for _, port in nodes)
            out = os.path.join(c.dir, "fanout.json")
            before = c.cpu_ticks()
            t0 = time.time()
            subprocess.run([herald, "bench", "fanout", urls, "-p", "8", "-n", "64",
                            "-C", "64", "-r", str(rate), "-s", "64",
                            "--duration", "%ds" % seconds, "--out", out],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=seconds + 120)
            wall = time.time() - t0
            after = c.cpu_ticks()
            with open(out) as f:
                s = json.load(f)["summary"]
            dur = seconds
            cpu = {p: 100.0 * (after[p] - before[p]) / tick / wall for p in c.masters}
            row = {
                "masters": masters,
                "sent_per_s": s["sent"] / dur,
                "delivered_per_s": s["delivered_per_s"],
                "errors": s["errors"],
                "lost": s["lost"],
                "p50_ms": s["latency"]["p50_ms"],
                "p99_ms": s["latency"]["p99_ms"],
                "redis_cpu_pct": [round(cpu[p], 1) for p in c.masters],
                "loadavg": open("/proc/loadavg").read().split()[:3],
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
        finally:
            for p, _ in nodes:
                p.kill()
                p.wait()
            c.stop()
    base = rows[0]["delivered_per_s"] or 1
    for r in rows:
        print("masters %d: %.0f pub/s offered, %.0f delivered/s (ratio %.2f), redis CPU %s %%, "
              "p50 %.1f ms p99 %.1f ms, errors %d, lost %d" % (
                  r["masters"], r["sent_per_s"], r["delivered_per_s"],
                  r["delivered_per_s"] / base, r["redis_cpu_pct"], r["p50_ms"], r["p99_ms"],
                  r["errors"], r["lost"]))


def publish(port, n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    body = json.dumps({"channel": "feed", "data": n})
    c.request("POST", "/api/publish", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    return r.status == 200


def pct(xs, p):
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, int(-(-p * len(xs) // 100)) - 1))]


def failover(herald, runs):
    promoted, serving = [], []
    slot = key_slot(b"herald:{feed}:m")
    for run in range(runs):
        c = Cluster(3, 1)
        node = None
        try:
            node = start_herald(herald, c.url())
            n = 0
            for _ in range(40):
                n += 1
                publish(node[1], n)
                time.sleep(0.005)
            old = c.owner(slot)
            t0 = time.time()
            c.kill(old)
            t_promoted = t_serving = None
            while time.time() - t0 < 30 and (t_promoted is None or t_serving is None):
                if t_serving is None:
                    n += 1
                    try:
                        # The master is dead: an accepted publish went to
                        # its promoted replica.
                        if publish(node[1], n):
                            t_serving = time.time() - t0
                    except OSError:
                        pass
                if t_promoted is None:
                    o = c.owner(slot)
                    if o is not None and o != old:
                        t_promoted = time.time() - t0
                time.sleep(0.005)
            print("run %d: promoted after %.3f s, Herald serving after %.3f s" % (
                run + 1, t_promoted or -1, t_serving or -1), flush=True)
            if t_promoted:
                promoted.append(t_promoted)
            if t_serving:
                serving.append(t_serving)
        finally:
            if node:
                node[0].kill()
                node[0].wait()
            c.stop()
    if promoted and serving:
        print("promotion: p50 %.3f s, p99 %.3f s; Herald serving: p50 %.3f s, p99 %.3f s (%d runs)" % (
            pct(promoted, 50), pct(promoted, 99), pct(serving, 50), pct(serving, 99), runs))


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "throughput":
        rate = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
        secs = int(sys.argv[4]) if len(sys.argv) > 4 else 10
        throughput(sys.argv[2], rate, secs)
    elif len(sys.argv) >= 3 and sys.argv[1] == "failover":
        failover(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 10)
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
