"""A scriptable stand-in for a Herald server, for what the real one never does.

Why a fake here, when every other test runs the real server: the real server
never sends a malformed message, a reply of the wrong type, or refuses
``connect`` (it has no authentication yet), and it chooses its own close codes.
These tests check that the client survives exactly those, so they need a peer
that misbehaves on purpose. It speaks the real wire format (the SDK's codec,
which the shared vectors pin) over real sockets: WebSocket (``websockets``)
or raw TCP (4-byte length prefix).

A test gives a ``script(conn)`` coroutine, run once per accepted connection;
``conn.index`` counts connections from 0, ``conn.commands`` records every
command received on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from herald_client.codec import Encoding, decode_command, encode
from herald_client.messages import (
    Command,
    Connect,
    ConnectReply,
    Ping,
    PingReply,
    Publish,
    PublishReply,
    ServerMessage,
)


@dataclass(eq=False)
class FakeConn:
    index: int
    encoding: Encoding
    commands: list[Command] = field(default_factory=list)
    ws: ServerConnection | None = None
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None

    async def recv(self) -> Command:
        """The next command (raises on a closed connection)."""
        if self.ws is not None:
            frame: str | bytes = await self.ws.recv()
        else:
            assert self.reader is not None
            while True:
                n = int.from_bytes(await self.reader.readexactly(4), "big")
                if n:
                    break
            frame = await self.reader.readexactly(n)
        cmd = decode_command(frame, self.encoding)
        self.commands.append(cmd)
        return cmd

    async def send_raw(self, frame: str | bytes) -> None:
        """Send anything, well-formed or not."""
        if self.ws is not None:
            await self.ws.send(frame)
        else:
            assert self.writer is not None
            data = frame.encode() if isinstance(frame, str) else frame
            self.writer.write(len(data).to_bytes(4, "big") + data)
            await self.writer.drain()

    async def send(self, m: ServerMessage) -> None:
        await self.send_raw(encode(m, self.encoding))

    async def handshake(self) -> Connect:
        """Receive ``connect`` and answer it."""
        cmd = await self.recv()
        assert isinstance(cmd, Connect), cmd
        await self.send(ConnectReply(cmd.id, f"fake-{self.index}", "fake", 25))
        return cmd

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.ws is not None:
            await self.ws.close(code, reason)
        elif self.writer is not None:
            self.writer.close()


Script = Callable[[FakeConn], Awaitable[None]]


class FakeServer:
    """Accepts connections on 127.0.0.1 (port 0) and runs ``script`` on each."""

    def __init__(self, script: Script, *, transport: str = "ws", encoding: str = "json") -> None:
        self.script = script
        self.transport = transport
        self.encoding = Encoding(encoding)
        self.conns: list[FakeConn] = []
        self.port = 0
        self._ws_server: Server | None = None
        self._tcp_server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        if self.transport == "ws":
            return f"ws://127.0.0.1:{self.port}/ws"
        return f"tcp://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeServer:
        if self.transport == "ws":
            self._ws_server = await serve(
                self._ws,
                "127.0.0.1",
                0,
                subprotocols=[self.encoding.subprotocol],  # type: ignore[list-item]
            )
            self.port = self._ws_server.sockets[0].getsockname()[1]
        else:
            self._tcp_server = await asyncio.start_server(self._tcp, "127.0.0.1", 0)
            self.port = self._tcp_server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._ws_server is not None:
            self._ws_server.close()
            await self._ws_server.wait_closed()
        if self._tcp_server is not None:
            self._tcp_server.close()
            for c in self.conns:
                if c.writer is not None:
                    c.writer.transport.abort()
            await self._tcp_server.wait_closed()

    async def _run(self, conn: FakeConn) -> None:
        self.conns.append(conn)
        with contextlib.suppress(ConnectionClosed, asyncio.IncompleteReadError, ConnectionError):
            await self.script(conn)

    async def _ws(self, ws: ServerConnection) -> None:
        await self._run(FakeConn(len(self.conns), self.encoding, ws=ws))

    async def _tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._run(FakeConn(len(self.conns), Encoding.BINARY, reader=reader, writer=writer))
        writer.close()


async def answer(conn: FakeConn, cmd: Command) -> None:
    """What a well-behaved server answers to ``ping`` and ``publish`` (other
    commands are recorded, not answered)."""
    if isinstance(cmd, Ping):
        await conn.send(PingReply(cmd.id))
    elif isinstance(cmd, Publish):
        await conn.send(PublishReply(cmd.id, "e", 1))


async def serve_forever(conn: FakeConn) -> None:
    """Answer ``connect``, then ``ping`` and ``publish`` until the client leaves."""
    await conn.handshake()
    while True:
        await answer(conn, await conn.recv())
