"""A "do not reconnect" code ends the client for good: a message above the
server's maximum size is answered with 1009 (WebSocket close code, or a
``disconnect`` push on raw TCP), and retrying it unchanged would fail again."""

from __future__ import annotations

import pytest
from conftest import Server
from helpers import FAST, wait_until

from herald_client import (
    Client,
    ClientClosedError,
    ConnectionLostError,
    DisconnectCode,
    Disconnected,
    State,
    should_reconnect,
)

MODES = [("ws", "json"), ("ws", "binary"), ("tcp", "binary")]


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=[f"{t}-{e}" for t, e in MODES])
async def test_message_too_big_closes_for_good(server: Server, transport: str, encoding: str) -> None:
    url = server.ws_url if transport == "ws" else server.tcp_url
    events: list[Disconnected] = []
    c = Client(url, encoding=encoding, reconnect=FAST, on_disconnected=events.append)  # type: ignore[arg-type]
    await c.connect()
    sub = await c.subscribe("big.channel")
    with pytest.raises((ConnectionLostError, ClientClosedError)):
        await c.publish("big.channel", b"x" * 100_000)  # the server's default maximum is 65536
    await wait_until(lambda: bool(events), what="on_disconnected")
    assert events[0].code == DisconnectCode.MESSAGE_TOO_BIG
    assert int(DisconnectCode.MESSAGE_TOO_BIG) == 1009
    assert not events[0].reconnect and not should_reconnect(1009)
    assert c.state is State.CLOSED
    assert sub.ended
    with pytest.raises(ClientClosedError):
        await c.ping()
    await c.close()
