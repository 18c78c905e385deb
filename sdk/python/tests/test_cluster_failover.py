"""Cluster fail-over with real processes: a redis-server and two Herald nodes
sharing it (``--broker redis://…``). A client given [node A, node B] is
subscribed on A while a publisher on B publishes continuously; A is killed
(SIGKILL), the client moves to B and recovers there what it missed (channel
positions live in Redis, so the epoch is the same on both nodes): every
publication arrives exactly once, in order, offsets 1..N.

To make the missed stretch certain rather than a matter of timing, the
client reaches B through a proxy that refuses connections until the
publisher has published a few more on B; the publisher keeps going while the
client recovers, so recovery also races live publications.

Needs ``redis-server`` on PATH: skipped without it, failed without it when
the ``CI`` environment variable is set."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Server, free_port, herald_bin
from helpers import FAST, Proxy, wait_until

from herald_client import Client, Disconnected, Position, Publication, State, Subscribed


@pytest.fixture
def redis_port() -> Iterator[int]:
    """A throw-away redis-server (no persistence) on a free port."""
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server is not installed (Debian: apt-get install redis-server)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; it is required when CI is set")
        pytest.skip(message)
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="herald-redis-", suffix=".log", delete=False)  # noqa: SIM115
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    try:
        deadline = time.monotonic() + 15
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {Path(log.name).read_text()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not accept connections in 15 s")
            time.sleep(0.05)
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=20)
        Path(log.name).unlink(missing_ok=True)


@pytest.fixture
def nodes(redis_port: int) -> Iterator[tuple[Server, Server]]:
    """Two cluster nodes on the same Redis; their logs are printed if the test fails."""
    broker = ["--broker", f"redis://127.0.0.1:{redis_port}"]
    a, b = Server(herald_bin(), extra=broker), Server(herald_bin(), extra=broker)
    try:
        a.start()
        b.start()
        yield a, b
    finally:
        for name, s in (("A", a), ("B", b)):
            if s.log is not None and s.log.exists():
                print(f"--- node {name} log\n{s.log.read_text()}")
            s.stop()


async def test_failover_to_another_node_recovers_every_publication(nodes: tuple[Server, Server]) -> None:
    a, b = nodes
    channel = "cluster.failover"
    proxy_b = Proxy(b.http_port)
    await proxy_b.start()
    url_a, url_b = a.ws_url, f"ws://127.0.0.1:{proxy_b.port}/ws"

    got: list[Publication] = []
    subscribed: list[Subscribed] = []
    resyncs: list[Subscribed] = []
    drops: list[Disconnected] = []
    urls: list[str | None] = []
    published: list[Position] = []
    client = Client([url_a, url_b], reconnect=FAST, on_disconnected=drops.append)
    publisher = Client(b.ws_url)
    stop = asyncio.Event()

    async def publish_continuously() -> None:
        while not stop.is_set():
            published.append(await publisher.publish(channel, {"n": len(published) + 1}))
            await asyncio.sleep(0.005)

    pump: asyncio.Task[None] | None = None
    try:
        await client.connect()
        urls.append(client.url)
        assert client.url == url_a, "the first URL first"
        await client.subscribe(channel, got.append, on_subscribed=subscribed.append, on_resync=resyncs.append)
        await publisher.connect()

        # Published on B, delivered to the client on A: the nodes share the channel.
        pump = asyncio.create_task(publish_continuously())
        await wait_until(lambda: len(got) >= 10, what="publications from B through A")

        assert a.proc is not None
        a.proc.kill()  # SIGKILL: no close frame, no disconnect push (the log is kept until teardown)
        a.proc.wait(timeout=20)
        await proxy_b.stop()  # B refuses the client for a while
        await wait_until(lambda: client.state is not State.CONNECTED, what="the loss of A")
        killed_at = len(published)
        await wait_until(lambda: len(published) >= killed_at + 10, what="publications while away")
        missed_upto = len(published)
        await proxy_b.start()  # the same port: the client reaches B

        await wait_until(lambda: len(subscribed) == 2, timeout=15, what="re-subscription on B")
        urls.append(client.url)
        after = len(published)
        await wait_until(lambda: len(published) >= after + 10, what="publications after the fail-over")
        stop.set()
        await pump
        pump = None
        await wait_until(lambda: len(got) >= len(published), what="every publication")
        await client.ping()  # anything duplicated would have arrived by now

        n = len(published)
        print(f"published {n}; A killed after {killed_at}; {missed_upto - killed_at}+ published while away")
        assert [p.offset for p in published] == list(range(1, n + 1))
        assert len({p.epoch for p in published}) == 1
        assert [p.offset for p in got] == list(range(1, n + 1)), "offsets 1..N, no gap, no duplicate"
        assert [p.json()["n"] for p in got] == list(range(1, n + 1))
        assert all(p.channel == channel for p in got)
        assert killed_at < missed_upto, "some publications were made while the client was away"

        assert urls == [url_a, url_b]
        assert len(drops) == 1 and drops[0].code is None and drops[0].reconnect
        first, again = subscribed
        assert not first.resubscribed and first.offset == 0
        assert again.resubscribed and again.recovery_requested and again.recovered
        assert not again.needs_resync and resyncs == []
        assert again.epoch == first.epoch == published[0].epoch, "the same epoch on both nodes"
        assert client.state is State.CONNECTED
    finally:
        stop.set()
        if pump is not None:
            pump.cancel()
            with contextlib.suppress(BaseException):
                await pump
        await client.close()
        await publisher.close()
        await proxy_b.stop()
