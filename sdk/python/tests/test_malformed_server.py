"""A server that misbehaves: malformed messages, replies of the wrong type,
oversized frames. The client never crashes: a message it cannot decode ends
that connection (commands in flight raise ConnectionLostError) and it
reconnects with recovery, so what the bad message carried is not lost; a reply
of the wrong type raises ProtocolError and the connection stays.

The real server never does any of this, hence the scripted fake
(tests/fake_server.py) speaking the real wire format over real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_server import FakeConn, FakeServer, answer
from helpers import FAST, wait_until

from herald_client import (
    Client,
    ConnectionLostError,
    Disconnected,
    ProtocolError,
    Publication,
    State,
    binary_codec,
    json_codec,
)
from herald_client.errors import DecodeError
from herald_client.messages import (
    Item,
    PingReply,
    Position,
    Publish,
    Subscribe,
    SubscribeReply,
)

MODES = [("ws", "json"), ("ws", "binary"), ("tcp", "binary")]
IDS = [f"{t}-{e}" for t, e in MODES]

#: Undecodable answers to a publish with id 2, per encoding.
GARBAGE: dict[str, list[str | bytes]] = {
    "json": [
        '{"id":2,"publish":{"epoch":',
        "not json",
        '{"id":2,"publish":{"epoch":"e"}}',
        "[]",
        # Nested deeper than any decoder recurses (the server sends such data as b64).
        '{"pub":{"channel":"c","offset":1,"data":' + "[" * 100_000 + "]" * 100_000 + "}}",
    ],
    # (not b"": on raw TCP an empty frame is a heartbeat)
    "binary": [
        b"\x84\x02",
        b"\xff\x02",
        b"\x84\x02\x01e\x01\x00",
        b"\x84",
        b"\x86\x02\x01e\x01\xff\xff\xff\xff\x0f",  # a history reply claiming 4 billion items
    ],
}


@pytest.fixture
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """Exceptions that escaped to the event loop (an unretrieved task failure):
    the client must leave none."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    old = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    yield errors
    loop.set_exception_handler(old)


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=IDS)
@pytest.mark.parametrize("garbage", range(5))
async def test_undecodable_reply_reconnects(
    transport: str, encoding: str, garbage: int, loop_errors: list[dict[str, Any]]
) -> None:
    async def script(conn: FakeConn) -> None:
        await conn.handshake()
        while True:
            cmd = await conn.recv()
            if isinstance(cmd, Publish) and conn.index == 0:
                await conn.send_raw(GARBAGE[encoding][garbage])
            else:
                await answer(conn, cmd)

    drops: list[Disconnected] = []
    async with (
        FakeServer(script, transport=transport, encoding=encoding) as fake,
        Client(fake.url, encoding=encoding, reconnect=FAST, on_disconnected=drops.append) as c,  # type: ignore[arg-type]
    ):
        with pytest.raises(ConnectionLostError):
            await c.publish("c", 1)
        # Reconnected by itself; the next command is answered.
        assert await c.publish("c", 1) == Position("e", 1)
        assert c.state is State.CONNECTED and len(fake.conns) == 2
        assert drops[0].reconnect and drops[0].code is None
    gc.collect()  # a task whose exception nobody retrieved reports it now
    await asyncio.sleep(0)
    assert loop_errors == []


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=IDS)
async def test_reply_of_the_wrong_type_raises_protocol_error(transport: str, encoding: str) -> None:
    async def script(conn: FakeConn) -> None:
        await conn.handshake()
        while True:
            cmd = await conn.recv()
            if isinstance(cmd, Publish):
                await conn.send(PingReply(cmd.id))  # not a publish reply
            else:
                await answer(conn, cmd)

    async with (
        FakeServer(script, transport=transport, encoding=encoding) as fake,
        Client(fake.url, encoding=encoding, reconnect=FAST) as c,  # type: ignore[arg-type]
    ):
        with pytest.raises(ProtocolError):
            await c.publish("c", 1)
        await c.ping()  # the same connection goes on
        assert len(fake.conns) == 1


#: A publication push that cannot be decoded, per encoding.
BAD_PUSH: dict[str, str | bytes] = {
    "json": '{"pub":{"channel":"c","offset":"7","data":2}}',
    "binary": b"\xa0\x01c\x07",
}


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=IDS)
async def test_undecodable_publication_is_recovered(transport: str, encoding: str) -> None:
    """A publication the client could not decode is not skipped: the client
    reconnects and recovers from the last offset it did deliver."""
    recovers: list[Position | None] = []

    async def script(conn: FakeConn) -> None:
        await conn.handshake()
        sub = await conn.recv()
        assert isinstance(sub, Subscribe)
        recovers.append(sub.recover)
        if conn.index == 0:
            await conn.send(SubscribeReply(sub.id, "e", 5))
            await conn.send(Publication("c", 6, b"6"))
            await conn.send_raw(BAD_PUSH[encoding])  # offset 7, undecodable
        else:
            await conn.send(SubscribeReply(sub.id, "e", 8, True, (Item(7, b"7"), Item(8, b"8"))))
            await conn.send(Publication("c", 9, b"9"))
        while True:
            await answer(conn, await conn.recv())

    got: list[Publication] = []
    async with (
        FakeServer(script, transport=transport, encoding=encoding) as fake,
        Client(fake.url, encoding=encoding, reconnect=FAST) as c,  # type: ignore[arg-type]
    ):
        sub = await c.subscribe("c", got.append)
        await wait_until(lambda: len(got) == 4, what="publications 6 to 9")
    assert [p.offset for p in got] == [6, 7, 8, 9]
    assert [p.data for p in got] == [b"6", b"7", b"8", b"9"]
    assert recovers == [None, Position("e", 6)]
    assert sub.position == Position("e", 9)


async def test_oversized_tcp_frame_is_not_read() -> None:
    """A length prefix above max_message_size ends the connection before any
    of it is read (and the client reconnects)."""

    async def script(conn: FakeConn) -> None:
        await conn.handshake()
        cmd = await conn.recv()
        if conn.index == 0:
            assert conn.writer is not None
            conn.writer.write(b"\xff\xff\xff\xff" + b"x" * 100)
            await conn.writer.drain()
        else:
            await answer(conn, cmd)
        while True:
            await answer(conn, await conn.recv())

    async with (
        FakeServer(script, transport="tcp") as fake,
        Client(fake.url, encoding="binary", reconnect=FAST, max_message_size=1 << 20) as c,
    ):
        with pytest.raises(ConnectionLostError):
            await c.ping()
        await c.ping()
        assert len(fake.conns) == 2


# ------------------------------------------------------------ decoder fuzz --

VECTORS = Path(__file__).resolve().parent / "../../../spec/vectors/messages.json"


def _mutations(data: bytes, rng: random.Random, n: int) -> Iterator[bytes]:
    for _ in range(n):
        b = bytearray(data)
        op = rng.randrange(4)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1 and b:
            del b[rng.randrange(len(b)) :]
        elif op == 2:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
        elif b:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        yield bytes(b)


def test_decoders_raise_only_decode_error_on_any_input() -> None:
    """Random corruptions of every vector: the server decoders either decode
    or raise DecodeError, never anything else (no crash on network input)."""
    import json

    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))
    rng = random.Random(20261123)
    tried = 0
    for v in vectors:
        for raw in _mutations(bytes.fromhex(v["binary"]), rng, 60):
            tried += 1
            with contextlib.suppress(DecodeError):
                binary_codec.decode_server(raw)
        if "json" in v:
            for raw in _mutations(v["json"].encode(), rng, 60):
                tried += 1
                with contextlib.suppress(DecodeError):
                    json_codec.decode_server(raw)
    assert tried > 5000
