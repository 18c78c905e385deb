"""The server is killed and restarted on the same ports: the client reconnects
by itself; the channel's epoch changed, so recovery is impossible and the
application is told to resync (``on_resync``), then live delivery goes on."""

from __future__ import annotations

import pytest
from conftest import Server
from helpers import FAST, wait_until

from herald_client import Client, Publication, State, Subscribed

MODES = [("ws", "json"), ("tcp", "binary")]


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=[f"{t}-{e}" for t, e in MODES])
async def test_resync_after_server_restart(own_server: Server, transport: str, encoding: str) -> None:
    channel = "restart.news"
    url = own_server.ws_url if transport == "ws" else own_server.tcp_url
    got: list[Publication] = []
    resyncs: list[Subscribed] = []
    connects: list[str] = []
    async with Client(
        url,
        encoding=encoding,  # type: ignore[arg-type]
        reconnect=FAST,
        on_connected=lambda r: connects.append(r.client),
    ) as c:
        sub = await c.subscribe(channel, got.append, on_resync=resyncs.append)
        before = [await c.publish(channel, i) for i in range(3)]
        await wait_until(lambda: len(got) == 3, what="publications before the restart")
        assert sub.position == before[-1]

        own_server.stop()  # SIGKILL: no close frame, no disconnect push
        await wait_until(lambda: c.state is not State.CONNECTED, what="the drop")
        own_server.start()
        await wait_until(lambda: len(resyncs) == 1, timeout=15, what="on_resync")

        event = resyncs[0]
        assert event.epoch != before[-1].epoch
        assert event.resubscribed and event.recovery_requested and not event.recovered
        assert event.needs_resync
        assert c.state is State.CONNECTED and len(connects) == 2

        # The new epoch starts again at offset 1, and it is delivered.
        after = await c.publish(channel, "after")
        assert after == (event.epoch, 1)
        await wait_until(lambda: len(got) == 4, what="the publication after the restart")
        assert got[-1] == Publication(channel, 1, b'"after"')
        assert sub.position == after
