"""Server behaviour the SDK cannot work around, pinned so that it is noticed
when it changes. Each test is a strict xfail: it fails today for the reason
given, and the day the server is fixed it passes, which fails the suite until
the marker is removed.

**A recovery reply larger than the server's outbound queue** (reported to the
lead with this reproduction): the server admits no single frame larger than
``--client-queue-bytes`` (crates/core/src/outbox.rs charges the whole frame
against the bound, even on an empty queue). A subscribe reply carrying the
missed publications is one frame, so a client that missed more bytes than the
bound (default 1 MiB: e.g. 100 publications of 16 KiB, within the default
``--history-size``) is closed with 3001 on every re-subscription: it can never
recover, although every missed publication is retained. The client keeps
reconnecting (backing off, see test_backoff.py) and never loses or
duplicates anything, but never gets past the gap either.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import Server, herald_bin
from helpers import FAST, Proxy, wait_until

from herald_client import Client, Disconnected, Publication, State


@pytest.fixture
def small_queue() -> Iterator[Server]:
    s = Server(herald_bin(), extra=["--client-queue-bytes", "65536"])
    s.start()
    yield s
    s.stop()


@pytest.mark.xfail(
    strict=True, reason="server: a recovery reply larger than --client-queue-bytes is refused with 3001"
)
async def test_recovery_reply_larger_than_the_outbound_queue(small_queue: Server) -> None:
    proxy = Proxy(small_queue.tcp_port)
    await proxy.start()
    got: list[Publication] = []
    drops: list[Disconnected] = []
    payload = b"x" * 16384
    try:
        async with (
            Client(
                f"tcp://127.0.0.1:{proxy.port}",
                encoding="binary",
                reconnect=FAST,
                on_disconnected=drops.append,
            ) as c,
            Client(small_queue.ws_url, encoding="binary") as publisher,
        ):
            await c.subscribe("big.recovery", got.append)
            await proxy.stop()
            await wait_until(lambda: c.state is not State.CONNECTED, what="the drop")
            for _ in range(10):  # 160 KiB missed, all retained (history 100)
                await publisher.publish("big.recovery", payload)
            await proxy.start()
            await wait_until(lambda: len(got) == 10 or len(drops) >= 4, what="recovery, or repeated 3001")
            assert [d.code for d in drops[1:]] == [], "closed again (3001) after reconnecting"
            assert [p.offset for p in got] == list(range(1, 11))
    finally:
        await proxy.stop()
