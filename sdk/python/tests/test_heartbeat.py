"""Liveness: heartbeats keep an idle connection open, and a connection that
falls silent is detected and replaced (docs/protocol.md §1, §5)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from conftest import Server, herald_bin
from helpers import FAST, Proxy, wait_until

from herald_client import Client, Disconnected, Publication, Subscribed
from herald_client.codec import Encoding, decode_server, encode
from herald_client.messages import Connect, ConnectReply, Ping, PingReply
from herald_client.transport import TcpTransport


@pytest.fixture
def quick_server() -> Iterator[Server]:
    """Heartbeat after 1 s of client silence; closed (3000) 1 s after that."""
    s = Server(herald_bin(), extra=["--ping-interval", "1", "--pong-timeout", "1"])
    s.start()
    yield s
    s.stop()


async def test_idle_connections_stay_open(quick_server: Server) -> None:
    async def raw_tcp() -> None:
        # The raw TCP transport answers each zero-length heartbeat by itself:
        # an idle connection outlives ping_interval + pong_timeout.
        t = await TcpTransport.open("127.0.0.1", quick_server.tcp_port, open_timeout=5, max_size=1 << 20)
        await t.send(encode(Connect(1), Encoding.BINARY))
        assert isinstance(decode_server(await t.recv(), Encoding.BINARY), ConnectReply)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(t.recv(), 3.5)  # nothing but heartbeats, answered
        await t.send(encode(Ping(2), Encoding.BINARY))
        assert decode_server(await t.recv(), Encoding.BINARY) == PingReply(2)
        await t.close()

    async def clients() -> None:
        # Idle clients, on both transports, are never dropped.
        drops: list[Disconnected] = []
        async with (
            Client(quick_server.ws_url, on_disconnected=drops.append) as ws,
            Client(quick_server.tcp_url, encoding="binary", on_disconnected=drops.append) as tcp,
        ):
            ids = (ws.client_id, tcp.client_id)
            await asyncio.sleep(3.5)
            assert drops == [] and (ws.client_id, tcp.client_id) == ids

    await asyncio.gather(raw_tcp(), clients())


async def test_silent_connection_is_replaced_and_recovered(quick_server: Server) -> None:
    channel = "heartbeat.silent"
    proxy = Proxy(quick_server.tcp_port)
    await proxy.start()
    got: list[Publication] = []
    subscribed: list[Subscribed] = []
    drops: list[Disconnected] = []
    try:
        async with (
            Client(
                f"tcp://127.0.0.1:{proxy.port}",
                encoding="binary",
                reconnect=FAST,
                on_disconnected=drops.append,
            ) as c,
            Client(quick_server.ws_url) as publisher,
        ):
            await c.subscribe(channel, got.append, on_subscribed=subscribed.append)
            await publisher.publish(channel, 1)
            await wait_until(lambda: len(got) == 1, what="first publication")
            await proxy.freeze()  # the path goes silent; nothing is closed
            await publisher.publish(channel, 2)
            await publisher.publish(channel, 3)
            # ping_interval is 1 s: probed after 1 s of silence, dropped after 2 s.
            await wait_until(lambda: bool(drops), timeout=6, what="silence detected")
            assert drops[0].code is None and drops[0].reconnect
            await wait_until(lambda: len(subscribed) == 2, what="re-subscription")
            await publisher.publish(channel, 4)
            await wait_until(lambda: len(got) == 4, what="recovered and live publications")
            assert [p.json() for p in got] == [1, 2, 3, 4]
            assert subscribed[1].recovered
    finally:
        await proxy.stop()
