"""Error replies raise the typed exception of their code; the client's own
failures raise the documented exceptions."""

from __future__ import annotations

import pytest
from conftest import Server, free_port

from herald_client import (
    AlreadySubscribedError,
    Client,
    ClientClosedError,
    ConnectError,
    ErrorCode,
    HeraldError,
    InvalidChannelError,
    NotAvailableError,
    NotSubscribedError,
    ReplyError,
    State,
)


@pytest.mark.parametrize("encoding", ["json", "binary"])
async def test_invalid_channel_raises_109(server: Server, encoding: str) -> None:
    async with Client(server.ws_url, encoding=encoding) as c:  # type: ignore[arg-type]
        with pytest.raises(InvalidChannelError) as info:
            await c.subscribe("bad name")
        assert info.value.code == ErrorCode.INVALID_CHANNEL
        assert int(ErrorCode.INVALID_CHANNEL) == 109
        assert isinstance(info.value, ReplyError) and isinstance(info.value, HeraldError)
        assert "bad name" not in c.subscriptions
        # A pattern is no concrete channel: publishing to one is 109 too.
        with pytest.raises(InvalidChannelError):
            await c.publish("news.*", 1)
        # The connection is still usable.
        await c.ping()


async def test_recover_on_a_pattern_is_not_available(server: Server) -> None:
    async with Client(server.tcp_url, encoding="binary") as c:
        with pytest.raises(NotAvailableError) as info:
            await c.subscribe("errors.*", since=("epoch", 1))
        assert info.value.code == 111


async def test_subscription_state_errors(server: Server) -> None:
    async with Client(server.ws_url) as c:
        with pytest.raises(NotSubscribedError) as info:
            await c.unsubscribe("errors.never")
        assert info.value.code == 106
        await c.subscribe("errors.twice")
        with pytest.raises(AlreadySubscribedError):
            await c.subscribe("errors.twice")
        await c.unsubscribe("errors.twice")
        await c.subscribe("errors.twice")  # allowed again


async def test_connect_error_when_nothing_listens() -> None:
    c = Client(f"ws://127.0.0.1:{free_port()}/ws", connect_timeout=2)
    with pytest.raises(ConnectError):
        await c.connect()
    with pytest.raises(ClientClosedError):
        await c.publish("x", 1)


async def test_closed_client_refuses_commands(server: Server) -> None:
    c = Client(server.ws_url)
    sub = await c.subscribe("errors.closed")  # the first command connects
    assert c.state is State.CONNECTED
    await c.close()
    assert sub.ended
    assert [p async for p in sub] == []
    with pytest.raises(ClientClosedError):
        await c.publish("errors.closed", 1)
    await c.close()  # idempotent
