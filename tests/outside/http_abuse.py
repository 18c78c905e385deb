#!/usr/bin/env python3
"""Malformed HTTP requests against a running Herald, from raw sockets.

Part of tests/outside/http_abuse.test.sh (issue 14). slowhttptest covers the
slow attacks; this covers the malformed ones no library client would send:
garbage bytes, a missing HTTP version, absurd methods, a 1 MiB request line,
10,000 headers, a 1 MiB header line, invalid chunked encoding, Content-Length
too short, too long, negative, overflowing or doubled, header names with
spaces, and an h2c preface followed by a broken HEADERS frame — on each of
/api/publish, /sse, /poll and /ws.

Each case must get an HTTP 4xx or be closed, within the server's deadline
(--timeout: the handshake and request body timeouts it was started with) plus
a margin; a 2xx/3xx/5xx or a connection still open after that is a failure.
After every case the server must still answer /healthz and carry a
publication from /api/publish to an SSE subscriber (a round trip). Prints a
table of outcomes per case and path; exits 1 on any failure.

Standard library only: the point is bytes no client library would send.
"""

import argparse
import json
import random
import select
import socket
import sys
import threading
import time

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
MIB = 1024 * 1024


def request(method, target, headers=(), body=b"", version=b"HTTP/1.1"):
    head = method + b" " + target + b" " + version + b"\r\nhost: 127.0.0.1\r\n"
    for h in headers:
        head += h + b"\r\n"
    return head + b"\r\n" + body


def h2_broken_headers(path):
    """The h2c preface, an empty SETTINGS frame and a HEADERS frame for `path`
    whose header block ends in bytes HPACK cannot decode."""
    block = b"\x82\x86"  # :method GET, :scheme http (static table)
    block += b"\x41" + bytes([9]) + b"127.0.0.1"  # :authority, literal
    block += b"\x44" + bytes([len(path)]) + path  # :path, literal
    block += b"\xff\xff\xff\xff\xff\x7f"  # an index past any table
    frame = len(block).to_bytes(3, "big") + b"\x01\x05" + (1).to_bytes(4, "big") + block
    settings = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
    return H2_PREFACE + settings + frame


def cases(path, post_path, body_method=b"POST"):
    """(name, bytes to send) for one endpoint. Bodies go with `body_method`
    to `post_path` (a live poll session for /poll; GET for /sse)."""
    rnd = random.Random(14)
    garbage = bytes(rnd.randrange(256) for _ in range(4096))
    bad_json = b'[{"channel":'  # 12 bytes, not JSON, not a command batch
    return [
        ("garbage bytes", garbage),
        ("no HTTP version", b"GET " + path + b"\r\n\r\n"),
        ("unknown method", request(b"BREW", path)),
        ("5 KiB method", request(b"A" * 5000, path)),
        ("control bytes in target", request(b"GET", path + b"\x00\x07\x1b")),
        ("1 MiB request line", request(b"GET", path + b"?" + b"a" * MIB)),
        ("10,000 headers", request(b"GET", path, [b"x-h%d: v" % i for i in range(10000)])),
        ("1 MiB header line", request(b"GET", path, [b"x-big: " + b"b" * MIB])),
        ("space in header name", request(b"GET", path, [b"x bad: 1"])),
        (
            "invalid chunked",
            request(body_method, post_path, [b"transfer-encoding: chunked"], b"zz\r\nhello\r\n0\r\n\r\n"),
        ),
        (
            "chunk size overflow",
            request(body_method, post_path, [b"transfer-encoding: chunked"], b"fffffffffffffffffff\r\nx\r\n"),
        ),
        # Shorter than announced: only the body timeout ends it.
        ("Content-Length > body", request(body_method, post_path, [b"content-length: 100"], b"[1,2")),
        # Longer than announced: the rest is read as a next, malformed request.
        ("Content-Length < body", request(body_method, post_path, [b"content-length: 12"], bad_json + b" xx\r\n\r\n")),
        ("negative Content-Length", request(body_method, post_path, [b"content-length: -1"], b"{}")),
        (
            "overflowing Content-Length",
            request(body_method, post_path, [b"content-length: 99999999999999999999999"], b"{}"),
        ),
        (
            "two Content-Lengths",
            request(body_method, post_path, [b"content-length: 2", b"content-length: 7"], b"{}"),
        ),
        ("h2c preface + broken HEADERS", h2_broken_headers(path.split(b"?")[0])),
        ("h2c preface + garbage", H2_PREFACE + garbage[:512]),
    ]


def exchange(addr, payload, deadline):
    """Sends `payload` (while reading, so a server that answers early and
    closes is seen); returns (outcome, seconds to the first answer or the
    close). Outcome: the status codes of every answer, joined by '+'
    (pipelined bytes past a wrong Content-Length are a second request);
    'closed' (no HTTP answer; an h2 GOAWAY counts), 'reset', or 'HUNG' when
    the connection is still open at `deadline` seconds."""
    start = time.monotonic()
    s = socket.create_connection(addr, timeout=5)

    def send():
        try:
            s.sendall(payload)
        except OSError:
            pass  # the server closed early: what we read tells the outcome

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    got = b""
    first = None
    hung = False
    reset = False
    try:
        while True:
            left = deadline - (time.monotonic() - start)
            if left <= 0:
                hung = True
                break
            # Once answered, half a second of silence ends the wait: a
            # kept-alive connection is the server's to close (its idle
            # timeout is tested in crates/server/tests/slow_http.rs).
            ready, _, _ = select.select([s], [], [], min(left, 0.5) if got else left)
            if not ready:
                if got.startswith(b"HTTP/1.1 "):
                    break
                continue
            chunk = s.recv(65536)
            if first is None:
                first = time.monotonic() - start
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        reset = True
    except OSError as e:
        return "error " + type(e).__name__, time.monotonic() - start
    finally:
        s.close()
    secs = first if first is not None else time.monotonic() - start
    statuses = [
        got[i + 9 : i + 12].decode("ascii", "replace")
        for i in range(len(got))
        if got.startswith(b"HTTP/1.1 ", i) and (i == 0 or got[i - 2 : i] == b"\r\n")
    ]
    if hung:
        return "HUNG" + ("(" + "+".join(statuses) + ")" if statuses else ""), secs
    if statuses:
        return "+".join(statuses), secs
    if got.startswith(b"\x00\x00") or not got:
        return ("reset" if reset and not got else "closed"), secs  # h2: SETTINGS, GOAWAY
    return "junk " + repr(got[:20]), secs


def acceptable(outcome):
    if outcome in ("closed", "reset"):
        return True
    codes = outcome.split("+")
    return all(len(c) == 3 and c.startswith("4") for c in codes)


class RoundTrip:
    """A subscriber on /sse and a publisher on /api/publish: proves the server
    still serves after each case."""

    def __init__(self, addr):
        self.addr = addr
        self.n = 0
        self.sse = socket.create_connection(addr, timeout=5)
        self.sse.sendall(request(b"GET", b"/sse?channel=abuse.roundtrip"))
        self.buf = b""
        self._read_until(b"\r\n\r\n", 5)
        if not self.buf.startswith(b"HTTP/1.1 200"):
            raise SystemExit("round-trip subscriber refused: %r" % self.buf[:80])

    def _read_until(self, needle, secs):
        end = time.monotonic() + secs
        while needle not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                return False
            r, _, _ = select.select([self.sse], [], [], left)
            if r:
                chunk = self.sse.recv(65536)
                if not chunk:
                    return False
                self.buf += chunk
        return True

    def check(self):
        """(healthz ok, publication received)."""
        status, _ = http(self.addr, request(b"GET", b"/healthz", [b"connection: close"]))
        self.n += 1
        body = json.dumps({"channel": "abuse.roundtrip", "data": {"rt": self.n}}, separators=(",", ":")).encode()
        pub, _ = http(
            self.addr,
            request(
                b"POST",
                b"/api/publish",
                [b"content-type: application/json", b"content-length: %d" % len(body), b"connection: close"],
                body,
            ),
        )
        marker = b'{"rt":%d}' % self.n
        got = pub == 200 and self._read_until(marker, 5)
        return status == 200, got


def http(addr, raw):
    try:
        with socket.create_connection(addr, timeout=5) as s:
            s.sendall(raw)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return 0, b""
    if data.startswith(b"HTTP/1.1 ") and len(data) >= 12:
        return int(data[9:12]), data
    return 0, data


def poll_session(addr):
    status, body = http(addr, request(b"POST", b"/poll", [b"content-length: 0", b"connection: close"]))
    if status != 200:
        raise SystemExit("cannot open a poll session: %r" % body[:200])
    return json.loads(body.split(b"\r\n\r\n", 1)[1])["session"].encode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--timeout", type=float, required=True, help="server's handshake/body timeout, s")
    args = ap.parse_args()
    addr = ("127.0.0.1", args.port)
    paths = [
        (b"/api/publish", b"/api/publish", b"POST"),
        (b"/sse?channel=abuse", b"/sse?channel=abuse", b"GET"),
        (b"/poll", b"/poll/<session>", b"POST"),
        (b"/ws", b"/ws", b"POST"),
    ]
    rt = RoundTrip(addr)
    # Every deadline of the server, plus the 1 s it lingers after an answer,
    # plus room for a loaded machine.
    deadline = args.timeout + 3
    names = [c[0] for c in cases(b"/", b"/")]
    table = {}
    failures = []
    slowest = 0.0
    for path, post_path, method in paths:
        # A fresh poll session each time: an unpolled one expires.
        post_path = post_path.replace(b"<session>", poll_session(addr))
        for name, payload in cases(path, post_path, method):
            outcome, secs = exchange(addr, payload, deadline)
            slowest = max(slowest, secs)
            healthy, carried = rt.check()
            cell = outcome + ("" if healthy and carried else " !")
            table[(name, path)] = "%s %.1fs" % (cell, secs)
            if not acceptable(outcome):
                failures.append("%s on %s: %s after %.1f s" % (name, path.decode(), outcome, secs))
            if not (healthy and carried):
                failures.append(
                    "after %s on %s: healthz %s, round trip %s"
                    % (name, path.decode(), "ok" if healthy else "FAILED", "ok" if carried else "FAILED")
                )
    width = max(len(n) for n in names)
    cols = [p.split(b"?")[0].decode() for p, _, _ in paths]
    print("%-*s  %s" % (width, "case", "  ".join("%-14s" % c for c in cols)))
    for name in names:
        print("%-*s  %s" % (width, name, "  ".join("%-14s" % table[(name, p)] for p, _, _ in paths)))
    total = len(table)
    ok = total - sum(1 for v in table.values() if not acceptable(v.split()[0]))
    print(
        "malformed requests: %d/%d answered 4xx or closed; slowest %.1f s (deadline %.0f s); "
        "%d round trips (healthz + publish -> SSE) after them, %d ok"
        % (ok, total, slowest, deadline, rt.n, rt.n - sum(1 for f in failures if f.startswith("after ")))
    )
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
