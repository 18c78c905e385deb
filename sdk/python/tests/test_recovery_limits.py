"""Where recovery ends (docs/protocol.md §5b) and how the client says so:
more publications missed than the server retains, and a graceful server
restart (close 1001 "going away": reconnect, but the new process has new
epochs). In both the client reconnects by itself, calls ``on_resync``, and
live delivery goes on without duplicates."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from conftest import Server, herald_bin
from helpers import FAST, Proxy, wait_until

from herald_client import Client, DisconnectCode, Disconnected, Publication, State, Subscribed

MODES = [("ws", "json"), ("ws", "binary"), ("tcp", "binary")]
IDS = [f"{t}-{e}" for t, e in MODES]


@pytest.fixture
def short_history() -> Iterator[Server]:
    """A server that retains only 3 publications per channel."""
    s = Server(herald_bin(), extra=["--history-size", "3"])
    s.start()
    yield s
    s.stop()


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=IDS)
async def test_too_many_missed_publications(short_history: Server, transport: str, encoding: str) -> None:
    channel = f"limits.{transport}.{encoding}"
    proxy = Proxy(short_history.http_port if transport == "ws" else short_history.tcp_port)
    await proxy.start()
    url = f"ws://127.0.0.1:{proxy.port}/ws" if transport == "ws" else f"tcp://127.0.0.1:{proxy.port}"
    got: list[Publication] = []
    subscribed: list[Subscribed] = []
    resyncs: list[Subscribed] = []
    try:
        async with (
            Client(short_history.ws_url) as publisher,
            Client(url, encoding=encoding, reconnect=FAST) as c,  # type: ignore[arg-type]
        ):
            await c.subscribe(channel, got.append, on_subscribed=subscribed.append, on_resync=resyncs.append)
            await publisher.publish(channel, 1)
            await wait_until(lambda: len(got) == 1, what="the first publication")

            await proxy.stop()
            await wait_until(lambda: c.state is not State.CONNECTED, what="the drop")
            for n in range(2, 8):  # 6 missed; the server keeps the last 3
                await publisher.publish(channel, n)
            await proxy.start()

            await wait_until(lambda: len(resyncs) == 1, what="on_resync")
            await publisher.publish(channel, 8)
            await wait_until(lambda: len(got) == 5, what="the retained tail and the live one")
            await c.ping()
        # The gap (2, 3, 4) is reported, not hidden; what was retained is delivered once.
        assert [p.json() for p in got] == [1, 5, 6, 7, 8]
        event = resyncs[0]
        assert not event.recovered and event.recovery_requested and event.needs_resync
        assert event.epoch == subscribed[0].epoch  # the same stream, with a hole
        assert len(subscribed) == 2
    finally:
        await proxy.stop()


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=IDS)
async def test_graceful_restart(own_server: Server, transport: str, encoding: str) -> None:
    channel = "limits.restart"
    url = own_server.ws_url if transport == "ws" else own_server.tcp_url
    drops: list[Disconnected] = []
    resyncs: list[Subscribed] = []
    got: list[Publication] = []
    async with Client(url, encoding=encoding, reconnect=FAST, on_disconnected=drops.append) as c:  # type: ignore[arg-type]
        await c.subscribe(channel, got.append, on_resync=resyncs.append)
        await c.publish(channel, "before")
        await wait_until(lambda: len(got) == 1, what="the first publication")

        await asyncio.to_thread(own_server.stop, graceful=True)  # SIGTERM: close 1001
        await wait_until(lambda: bool(drops), what="on_disconnected")
        assert drops[0].code == DisconnectCode.GOING_AWAY and drops[0].reconnect
        own_server.start()
        await wait_until(lambda: len(resyncs) == 1, timeout=15, what="on_resync")
        assert not resyncs[0].recovered  # a new process: new epochs

        after = await c.publish(channel, "after")
        await wait_until(lambda: len(got) == 2, what="the publication after the restart")
        assert got[-1].offset == after.offset == 1
        assert c.state is State.CONNECTED


@pytest.fixture
def small_queue() -> Iterator[Server]:
    """A server whose per-connection outbound queue holds 64 KiB."""
    s = Server(herald_bin(), extra=["--client-queue-bytes", "65536"])
    s.start()
    yield s
    s.stop()


@pytest.mark.parametrize(
    ("transport", "encoding"), [("ws", "json"), ("tcp", "binary")], ids=["ws-json", "tcp-binary"]
)
async def test_missed_more_than_the_outbound_queue_holds(
    small_queue: Server, transport: str, encoding: str
) -> None:
    """A recovery reply must fit in the server's outbound queue: when the
    missed publications do not, the server sends the newest that fit in half
    of it and says recovered: false (before, it closed the connection with
    3001 on every re-subscription and recovery never ended)."""
    channel = f"limits.queue.{transport}"
    proxy = Proxy(small_queue.http_port if transport == "ws" else small_queue.tcp_port)
    await proxy.start()
    url = f"ws://127.0.0.1:{proxy.port}/ws" if transport == "ws" else f"tcp://127.0.0.1:{proxy.port}"
    got: list[Publication] = []
    resyncs: list[Subscribed] = []
    drops: list[Disconnected] = []
    payload = b"x" * 15_000  # not JSON: base64 in the JSON encoding
    try:
        async with (
            Client(url, encoding=encoding, reconnect=FAST, on_disconnected=drops.append) as c,  # type: ignore[arg-type]
            Client(small_queue.ws_url, encoding="binary") as publisher,
        ):
            await c.subscribe(channel, got.append, on_resync=resyncs.append)
            await proxy.stop()
            await wait_until(lambda: c.state is not State.CONNECTED, what="the drop")
            for _ in range(10):  # 150 KB missed, all retained
                await publisher.publish(channel, payload)
            await proxy.start()
            await wait_until(lambda: len(resyncs) == 1, what="on_resync")
            await publisher.publish(channel, b"live")
            await wait_until(lambda: len(got) == 3, what="the tail and the live publication")
            await c.ping()
        assert [d.code for d in drops] == [None], "no 3001 after reconnecting"
        assert not resyncs[0].recovered
        assert [p.offset for p in got] == [9, 10, 11]  # (15,000 + 64) x 2 <= 32 KiB
        assert got[-1].data == b"live"
    finally:
        await proxy.stop()
