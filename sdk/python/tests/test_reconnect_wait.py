"""While the client is reconnecting, new commands wait for the connection
(up to request_timeout) instead of failing; a policy with max_attempts gives
up for good."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Server
from helpers import FAST, Proxy, wait_until

from herald_client import (
    Client,
    ClientClosedError,
    ConnectionLostError,
    Publication,
    ReconnectPolicy,
    RequestTimeoutError,
    State,
)


async def test_commands_wait_for_the_reconnect(server: Server) -> None:
    proxy = Proxy(server.tcp_port)
    await proxy.start()
    got: list[Publication] = []
    try:
        async with Client(f"tcp://127.0.0.1:{proxy.port}", encoding="binary", reconnect=FAST) as c:
            await proxy.stop()
            await wait_until(lambda: c.state is not State.CONNECTED, what="the drop")
            # Issued while disconnected: they wait.
            publish = asyncio.create_task(c.publish("wait.channel", "queued"))
            subscribe = asyncio.create_task(c.subscribe("wait.other", got.append))
            await asyncio.sleep(0.3)
            assert not publish.done() and not subscribe.done()
            await proxy.start()
            position = await asyncio.wait_for(publish, 10)
            sub = await asyncio.wait_for(subscribe, 10)
            assert position.offset >= 1 and sub.active
            await c.publish("wait.other", 1)
            await wait_until(lambda: len(got) == 1, what="a publication on the new subscription")
    finally:
        await proxy.stop()


async def test_request_timeout_while_disconnected(server: Server) -> None:
    proxy = Proxy(server.http_port)
    await proxy.start()
    try:
        async with Client(f"ws://127.0.0.1:{proxy.port}/ws", reconnect=FAST, request_timeout=0.5) as c:
            await proxy.stop()
            await wait_until(lambda: c.state is not State.CONNECTED, what="the drop")
            with pytest.raises(RequestTimeoutError):
                await c.ping()
            assert isinstance(RequestTimeoutError("x"), TimeoutError)
            await proxy.start()
            await wait_until(lambda: c.state is State.CONNECTED, what="the reconnect")
            await c.ping()
    finally:
        await proxy.stop()


async def test_gives_up_after_max_attempts(own_server: Server) -> None:
    policy = ReconnectPolicy(initial_delay=0.01, max_delay=0.05, max_attempts=3)
    c = Client(own_server.ws_url, reconnect=policy)
    await c.connect()
    sub = await c.subscribe("giveup.channel")
    own_server.stop()
    await wait_until(lambda: c.state is State.CLOSED, what="giving up")
    assert sub.ended
    with pytest.raises(ClientClosedError) as info:
        await c.ping()
    assert isinstance(info.value.__cause__, ConnectionLostError)
    assert "3 attempts" in str(info.value.__cause__)
    await c.close()
