"""A dropped connection while the server keeps running: the client reconnects,
re-subscribes with recovery, and delivers every publication exactly once, in
order — the missed ones (recovered) before the live ones."""

from __future__ import annotations

import pytest
from conftest import Server, free_port
from helpers import FAST, Proxy, wait_until

from herald_client import Client, Disconnected, Publication, State, Subscribed

MODES = [("ws", "json"), ("ws", "binary"), ("tcp", "binary")]


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=[f"{t}-{e}" for t, e in MODES])
async def test_recovery_after_a_dropped_connection(server: Server, transport: str, encoding: str) -> None:
    channel = f"drop.{transport}.{encoding}"
    proxy = Proxy(server.http_port if transport == "ws" else server.tcp_port)
    await proxy.start()
    url = f"ws://127.0.0.1:{proxy.port}/ws" if transport == "ws" else f"tcp://127.0.0.1:{proxy.port}"

    got: list[Publication] = []
    subscribed: list[Subscribed] = []
    resyncs: list[Subscribed] = []
    drops: list[Disconnected] = []
    sub_client = Client(url, encoding=encoding, reconnect=FAST, on_disconnected=drops.append)  # type: ignore[arg-type]
    try:
        async with Client(server.ws_url, encoding="binary") as publisher:
            await sub_client.connect()
            await sub_client.subscribe(
                channel, got.append, on_subscribed=subscribed.append, on_resync=resyncs.append
            )
            for i in range(1, 4):
                await publisher.publish(channel, {"n": i})
            await wait_until(lambda: len(got) == 3, what="live publications")

            await proxy.stop()
            await wait_until(lambda: sub_client.state is not State.CONNECTED, what="the drop")
            for i in range(4, 7):
                await publisher.publish(channel, {"n": i})  # missed while away

            await proxy.start()  # the same port
            await wait_until(lambda: len(subscribed) == 2, what="re-subscription")
            for i in range(7, 10):
                await publisher.publish(channel, {"n": i})
            await wait_until(lambda: len(got) >= 9, what="all publications")
            await sub_client.ping()  # anything duplicated would have arrived by now

        assert [p.json()["n"] for p in got] == list(range(1, 10))
        offsets = [p.offset for p in got]
        assert offsets == list(range(offsets[0], offsets[0] + 9))
        assert drops and drops[0].code is None and drops[0].reconnect
        again = subscribed[1]
        assert again.resubscribed and again.recovery_requested and again.recovered
        assert not again.needs_resync and resyncs == []
    finally:
        await sub_client.close()
        await proxy.stop()


async def test_tries_the_next_url(server: Server) -> None:
    """A list of URLs is tried in turn: a dead first one does not stop the client."""
    dead = f"ws://127.0.0.1:{free_port()}/ws"
    async with Client([dead, server.ws_url], reconnect=FAST) as c:
        assert c.url == server.ws_url
        await c.ping()
