"""The codes of docs/protocol.md §7 drive the client: every disconnect code of
the "reconnect" range is followed by a reconnect, every other one closes the
client for good; ``connect`` refusals and tokens (§7.1: 101, 112).

The server picks its own close codes and has no authentication yet, so a
scripted fake (tests/fake_server.py) sends each code over real sockets: a
WebSocket close frame, or on raw TCP a ``disconnect`` push and a close.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from fake_server import FakeConn, FakeServer, Script, answer, serve_forever
from helpers import FAST, wait_until

from herald_client import (
    Client,
    ClientClosedError,
    DisconnectCode,
    Disconnected,
    DisconnectedError,
    ErrorCode,
    State,
    TokenExpiredError,
    UnauthorizedError,
    should_reconnect,
)
from herald_client.messages import Connect, ConnectReply, Disconnect, ErrorReply

RECONNECT = [1001, 3000, 3001, 3002, 3003, 3004, 3499]
FINAL = [1002, 1007, 1009, 3500, 3501, 3502, 3503, 3999]


def test_the_rule_matches_the_table() -> None:
    assert all(should_reconnect(c) for c in RECONNECT)
    assert not any(should_reconnect(c) for c in FINAL)
    assert should_reconnect(None)  # dropped without a code
    for code in DisconnectCode:
        assert should_reconnect(code) is (code == 1001 or 3000 <= code < 3500), code
    assert [int(c) for c in ErrorCode] == list(range(100, 122))


async def close_with(conn: FakeConn, code: int) -> None:
    if conn.ws is not None:
        await conn.close(code, "test")
    else:
        await conn.send(Disconnect(code, "test"))
        await conn.close()


@pytest.mark.parametrize("transport", ["ws", "tcp"])
@pytest.mark.parametrize("code", RECONNECT + FINAL)
async def test_disconnect_code(transport: str, code: int) -> None:
    async def script(conn: FakeConn) -> None:
        if conn.index > 0:
            await serve_forever(conn)
            return
        await conn.handshake()
        await close_with(conn, code)

    encoding = "json" if transport == "ws" else "binary"
    events: list[Disconnected] = []
    async with FakeServer(script, transport=transport, encoding=encoding) as fake:
        c = Client(fake.url, encoding=encoding, reconnect=FAST, on_disconnected=events.append)  # type: ignore[arg-type]
        try:
            await c.connect()
            await wait_until(lambda: bool(events), what="on_disconnected")
            assert events[0].code == code
            if should_reconnect(code):
                assert events[0].reconnect
                await wait_until(
                    lambda: len(fake.conns) == 2 and c.state is State.CONNECTED, what="reconnect"
                )
                await c.ping()
            else:
                assert not events[0].reconnect
                assert c.state is State.CLOSED
                with pytest.raises(ClientClosedError) as info:
                    await c.ping()
                cause = info.value.__cause__
                assert isinstance(cause, DisconnectedError) and cause.code == code
                await asyncio.sleep(0.3)  # FAST backoff would have reconnected by now
                assert len(fake.conns) == 1
        finally:
            await c.close()


async def test_token_is_sent_and_refreshed_on_reconnect() -> None:
    """A token function is called for every connection: after 3002 (token
    expired) the client reconnects with a fresh token."""
    counter = itertools.count(1)

    async def fresh_token() -> str:
        return f"token-{next(counter)}"

    async def script(conn: FakeConn) -> None:
        if conn.index > 0:
            await serve_forever(conn)
            return
        await conn.handshake()
        await close_with(conn, DisconnectCode.TOKEN_EXPIRED)

    async with FakeServer(script) as fake, Client(fake.url, token=fresh_token, reconnect=FAST) as c:
        await wait_until(lambda: len(fake.conns) == 2 and c.state is State.CONNECTED, what="reconnect")
        await c.ping()
    sent = [conn.commands[0] for conn in fake.conns]
    assert [m.token if isinstance(m, Connect) else m for m in sent] == ["token-1", "token-2"]


async def test_static_token_and_name() -> None:
    async with (
        FakeServer(serve_forever, transport="tcp") as fake,
        Client(fake.url, encoding="binary", token="secret", name="me") as c,
    ):
        await c.ping()
    first = fake.conns[0].commands[0]
    assert isinstance(first, Connect) and (first.token, first.name) == ("secret", "me")


def refuse(code: int, times: int) -> Script:
    """Refuse ``connect`` with ``code`` on the first ``times`` connections."""

    async def script(conn: FakeConn) -> None:
        cmd = await conn.recv()
        assert isinstance(cmd, Connect)
        if conn.index < times:
            await conn.send(ErrorReply(cmd.id, code, "no"))
            await conn.recv()  # the client closes
            return
        await conn.send(ConnectReply(cmd.id, "fake", "fake", 25))
        while True:
            await answer(conn, await conn.recv())

    return script


async def test_unauthorized_connect_is_final() -> None:
    async with FakeServer(refuse(101, 99)) as fake:
        c = Client(fake.url, token="bad", reconnect=FAST)
        with pytest.raises(UnauthorizedError) as info:
            await c.connect()
        assert info.value.code == ErrorCode.UNAUTHORIZED
        assert c.state is State.CLOSED
        await asyncio.sleep(0.3)
        assert len(fake.conns) == 1
        await c.close()


async def test_expired_token_refusal() -> None:
    # A fixed token cannot be refreshed: 112 is final...
    async with FakeServer(refuse(112, 1)) as fake:
        c = Client(fake.url, token="old", reconnect=FAST)
        with pytest.raises(TokenExpiredError):
            await c.connect()
        await c.close()
    # ...a token function is asked again, and the next attempt succeeds.
    tokens = iter(["old", "new"])
    async with (
        FakeServer(refuse(112, 1)) as fake,
        Client(fake.url, token=lambda: next(tokens), reconnect=FAST) as c,
    ):
        await c.ping()
        sent = [conn.commands[0] for conn in fake.conns]
        assert [m.token for m in sent if isinstance(m, Connect)] == ["old", "new"]
