#!/usr/bin/env python3
"""Redis Sentinel fail-over, measured (bench/RESULTS.md, "Redis Sentinel";
decision 0020). Driven by bench/sentinel-failover.sh; only 127.0.0.1.

  sentinel-failover.py failover HERALD RUNS
      RUNS times: a master, a replica, three sentinels (down-after 1000 ms,
      failover-timeout 3000 ms) and one Herald node on redis-sentinel://;
      publish over POST /api/publish every 5 ms, SIGKILL the master, and time
      (a) kill -> the sentinels name the new master (polled every 10 ms) and
      (b) kill -> the first publish Herald accepts again. Prints each run and
      p50/p99 (nearest rank) of both.

  sentinel-failover.py wait N
      A master and a replica; N publications through publish.lua, one at a
      time, without and with a following `WAIT 1 100`: the latency a WAIT
      option would add to each publish. Prints p50/p99 of both.
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

HERE = os.path.dirname(os.path.abspath(__file__))
LUA = os.path.join(HERE, "..", "crates", "redis", "src", "lua", "publish.lua")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def enc(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port, timeout=2.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise ConnectionError("closed")
            self.buf += d
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b"-"):
            return rest.decode() if t == b"+" else RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                d = self.s.recv(65536)
                if not d:
                    raise ConnectionError("closed")
                self.buf += d
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v.decode(errors="replace")
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise ValueError(line)

    def call(self, *args):
        self.s.sendall(enc(*args))
        return self._read()

    def close(self):
        self.s.close()


def cmd(port, *args):
    try:
        c = Conn(port, timeout=1.0)
        try:
            return c.call(*args)
        finally:
            c.close()
    except OSError:
        return None


def wait_port(port, within=10):
    end = time.time() + within
    while time.time() < end:
        if cmd(port, "PING") is not None:
            return
        time.sleep(0.02)
    sys.exit(f"nothing answers on {port}")


def redis(port, d, *extra):
    p = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", d, *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return p


def sentinel(port, master, d):
    conf = os.path.join(d, f"s{port}.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                f"sentinel monitor herald 127.0.0.1 {master} 2\n"
                "sentinel down-after-milliseconds herald 1000\n"
                "sentinel failover-timeout herald 3000\n")
    p = subprocess.Popen(["redis-server", conf, "--sentinel"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return p


def settled(sports):
    for sp in sports:
        v = cmd(sp, "SENTINEL", "MASTER", "herald")
        if not isinstance(v, list):
            return False
        m = dict(zip(v[::2], v[1::2]))
        if m.get("num-slaves") != "1" or m.get("num-other-sentinels") != "2":
            return False
    return True


def master_of(sports):
    for sp in sports:
        v = cmd(sp, "SENTINEL", "get-master-addr-by-name", "herald")
        if isinstance(v, list) and len(v) == 2:
            return int(v[1])
    return None


def pct(xs, p):
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, int(round(p / 100 * len(xs) + 0.5)) - 1))]


def publish(hp, i):
    try:
        c = http.client.HTTPConnection("127.0.0.1", hp, timeout=2)
        c.request("POST", "/api/publish", json.dumps({"channel": "bench", "data": i}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        c.close()
        return r.status == 200
    except OSError:
        return False


def one_failover(herald):
    d = tempfile.mkdtemp(prefix="herald-sentinel-bench-")
    procs = []
    try:
        m, r = free_port(), free_port()
        procs.append(redis(m, d))
        procs.append(redis(r, d, "--replicaof", "127.0.0.1", str(m)))
        sports = [free_port() for _ in range(3)]
        for sp in sports:
            procs.append(sentinel(sp, m, d))
        end = time.time() + 30
        while not settled(sports):
            if time.time() > end:
                sys.exit("the sentinels never settled")
            time.sleep(0.1)
        hp = free_port()
        url = "redis-sentinel://" + ",".join(f"127.0.0.1:{p}" for p in sports) + "/herald"
        procs.append(subprocess.Popen(
            [herald, "serve", "--listen", f"127.0.0.1:{hp}", "--broker", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        end = time.time() + 30
        i = 0
        while True:
            i += 1
            if publish(hp, i):
                break
            if time.time() > end:
                sys.exit("herald never served")
            time.sleep(0.05)
        for _ in range(100):  # 0.5 s of publishing first
            i += 1
            publish(hp, i)
            time.sleep(0.005)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        t0 = time.monotonic()
        switched = served = None
        refused = 0
        while served is None and time.monotonic() - t0 < 30:
            if switched is None and master_of(sports) == r:
                switched = time.monotonic() - t0
            i += 1
            if publish(hp, i):
                served = time.monotonic() - t0
            else:
                refused += 1
                time.sleep(0.005)
        if switched is None:
            switched = served
        return switched, served, refused
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)


def failover(herald, runs):
    sw, sv = [], []
    for n in range(runs):
        s, v, refused = one_failover(herald)
        if v is None:
            sys.exit(f"run {n + 1}: herald did not serve again within 30 s")
        sw.append(s)
        sv.append(v)
        print(f"run {n + 1}: sentinels switched after {s * 1000:.0f} ms, "
              f"herald served again after {v * 1000:.0f} ms ({refused} publishes refused meanwhile)",
              flush=True)
    herald_part = [v - s for s, v in zip(sw, sv)]
    print(f"kill -> sentinels name the new master: p50 {pct(sw, 50) * 1000:.0f} ms, "
          f"p99 {pct(sw, 99) * 1000:.0f} ms")
    print(f"kill -> herald serves again:           p50 {pct(sv, 50) * 1000:.0f} ms, "
          f"p99 {pct(sv, 99) * 1000:.0f} ms")
    print(f"switch -> herald serves (its share):   p50 {pct(herald_part, 50) * 1000:.0f} ms, "
          f"p99 {pct(herald_part, 99) * 1000:.0f} ms")


def wait_cost(n):
    d = tempfile.mkdtemp(prefix="herald-wait-bench-")
    procs = []
    try:
        m, r = free_port(), free_port()
        procs.append(redis(m, d))
        procs.append(redis(r, d, "--replicaof", "127.0.0.1", str(m)))
        end = time.time() + 10
        while "master_link_status:up" not in (cmd(r, "INFO", "replication") or ""):
            if time.time() > end:
                sys.exit("the replica never synced")
            time.sleep(0.05)
        c = Conn(m)
        sha = c.call("SCRIPT", "LOAD", open(LUA).read())
        data = json.dumps({"text": "x" * 100})
        for label, wait in (("publish", False), ("publish + WAIT 1 100", True)):
            lat = []
            acked = 0
            for i in range(n):
                t = time.perf_counter()
                c.call("EVALSHA", sha, 3, "b:{c}:m", "b:{c}:s", "herald:sentinel:epoch",
                       data, "e", 100, 300000, "b:c:c")
                if wait:
                    acked += 1 if c.call("WAIT", 1, 100) == 1 else 0
                lat.append(time.perf_counter() - t)
            extra = f", {acked}/{n} acknowledged by the replica" if wait else ""
            print(f"{label:22}: p50 {pct(lat, 50) * 1e6:.0f} us, p99 {pct(lat, 99) * 1e6:.0f} us"
                  f" over {n}{extra}", flush=True)
        c.close()
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "failover":
        failover(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "wait":
        wait_cost(int(sys.argv[2]))
    else:
        sys.exit(__doc__)
