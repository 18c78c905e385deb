"""Several URLs, with the real server: an attempt that does not get through
goes on to the next URL at once, and only a whole round of failed attempts
(every URL in a row) waits the backoff delay — the rule of the TypeScript SDK
(docs/decisions/0005-sdk-client-state-machine.md). The rule itself, with its
delays, is unit-tested without I/O in test_protocol.py (``Rotation``)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from conftest import Server, free_port
from helpers import Proxy, wait_until

from herald_client import Client, ConnectError, ReconnectPolicy, State


@dataclass(frozen=True)
class RecordingPolicy(ReconnectPolicy):
    """Records the attempt number of every backoff wait; waits ``wait`` seconds
    if given, else the policy's own delay."""

    waits: list[int] = field(default_factory=list)
    wait: float | None = None

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        self.waits.append(attempt)
        return super().delay(attempt, rand) if self.wait is None else self.wait


class CountingDeadNode:
    """Accepts TCP connections and resets them at once (a WebSocket handshake
    never completes); records, for each, how many backoff waits came before it."""

    def __init__(self, waits: list[int]) -> None:
        self.waits = waits
        self.seen: list[int] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"ws://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/ws"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.seen.append(len(self.waits))
        writer.transport.abort()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()


async def test_a_dead_first_url_costs_no_backoff_delay(server: Server) -> None:
    """[dead, live]: the first connect goes on to the live URL at once, without
    waiting the (large) initial backoff delay."""
    dead = f"ws://127.0.0.1:{free_port()}/ws"
    policy = RecordingPolicy(initial_delay=5.0, max_delay=5.0)
    started = time.monotonic()
    async with Client([dead, server.ws_url], reconnect=policy) as c:
        elapsed = time.monotonic() - started
        assert c.url == server.ws_url
        assert policy.waits == [], "no backoff delay within the first round"
        assert elapsed < 2.0, f"connected in {elapsed:.2f}s, not after a 5 s backoff delay"
        await c.ping()


async def test_first_connect_fails_after_one_round_without_waiting() -> None:
    """No URL reachable: connect() raises ConnectError once every URL failed
    once, with no backoff delay in between."""
    dead = [f"ws://127.0.0.1:{free_port()}/ws" for _ in range(2)]
    policy = RecordingPolicy(initial_delay=5.0, max_delay=5.0)
    c = Client(dead, reconnect=policy, connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(ConnectError) as info:
        await c.connect()
    assert time.monotonic() - started < 2.0
    assert policy.waits == []
    assert all(u in str(info.value) for u in dead)
    assert c.state is State.CLOSED
    await c.close()


async def test_a_whole_round_of_failures_waits_the_backoff_delay(server: Server) -> None:
    """[dead node A, node B through a proxy]. Connected on B, the proxy stops:
    the drop waits the delay; then A and B fail in a row — one round — before
    each next delay, whose attempt number grows by one per round (not per
    URL). B back: the client reconnects there."""
    policy = RecordingPolicy(initial_delay=5.0, max_delay=5.0, wait=0.05)
    node_a = CountingDeadNode(policy.waits)
    url_a = await node_a.start()
    proxy = Proxy(server.http_port)
    await proxy.start()
    url_b = f"ws://127.0.0.1:{proxy.port}/ws"
    c = Client([url_a, url_b], reconnect=policy)
    try:
        await c.connect()
        assert c.url == url_b and node_a.seen == [0] and policy.waits == []

        await proxy.stop()
        await wait_until(lambda: len(policy.waits) >= 5, what="five backoff waits")
        waits, seen = list(policy.waits), list(node_a.seen)
        # The n-th wait is the n-th consecutive failed round (attempt n), and
        # node A is tried exactly once between two waits: after the drop's
        # wait, A then B fail at once, then the next wait.
        assert waits == list(range(len(waits)))
        assert seen[: len(waits)] == list(range(len(waits)))

        await proxy.start()  # the same port
        await wait_until(lambda: c.state is State.CONNECTED, what="the reconnect to B")
        assert c.url == url_b
        await c.ping()
    finally:
        await c.close()
        await proxy.stop()
        node_a.close()
