"""Transports: move whole messages over a socket, and nothing else.

Why so thin: a transport knows nothing of channels or commands (the state
machine in :mod:`.protocol` does). It sends one encoded message, receives the
next one, and reports how the connection ended — a close code, or ``None`` for
a drop — as :class:`TransportClosed`. Two of them, behind one shape:

* :class:`WebSocketTransport` (``ws://`` / ``wss://``), on the ``websockets``
  package, offering the subprotocol ``herald.json`` or ``herald.binary``; one
  message per frame.
* :class:`TcpTransport` (``tcp://host:port``), on asyncio streams: a 4-byte
  big-endian length, then the message (binary encoding only). A zero-length
  frame is the server's heartbeat and is answered with one.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import ssl
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.typing import Subprotocol

from .codec import Encoding

__all__ = [
    "TcpTransport",
    "Transport",
    "TransportClosed",
    "TransportError",
    "WebSocketTransport",
    "open_transport",
]

_HEARTBEAT = b"\x00\x00\x00\x00"


class TransportClosed(Exception):
    """The connection ended: ``code`` is the close code (WebSocket close frame),
    or ``None`` when it dropped without one."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        super().__init__(f"connection closed: {code} {reason}".rstrip())
        self.code = code
        self.reason = reason


class TransportError(ConnectionError):
    """A transport could not be opened (refused, handshake failed, bad URL).

    Internal: the client retries, and reports a first connect that failed on
    every URL as :class:`~.errors.ConnectError` with this as its cause."""


class Transport(abc.ABC):
    """One open connection that carries whole messages."""

    encoding: Encoding

    @abc.abstractmethod
    async def send(self, message: str | bytes) -> None:
        """Send one message; raises :class:`TransportClosed` if the connection is gone."""

    @abc.abstractmethod
    async def recv(self) -> str | bytes:
        """The next message; raises :class:`TransportClosed` when the connection ends."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close cleanly (WebSocket close 1000; TCP FIN)."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Drop the connection at once, without a closing handshake."""


class WebSocketTransport(Transport):
    def __init__(self, ws: ClientConnection, encoding: Encoding) -> None:
        self._ws = ws
        self.encoding = encoding

    @classmethod
    async def open(
        cls,
        url: str,
        encoding: Encoding,
        *,
        open_timeout: float,
        max_size: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> WebSocketTransport:
        """``ssl_context`` applies to ``wss://`` only (default: the system's
        trusted CAs)."""
        extra = {"ssl": ssl_context} if ssl_context is not None and url.startswith("wss:") else {}
        try:
            ws = await ws_connect(
                url,
                **extra,  # type: ignore[arg-type]
                subprotocols=[Subprotocol(encoding.subprotocol)],
                compression=None,
                open_timeout=open_timeout,
                max_size=max_size,
                close_timeout=2,
            )
        except (InvalidHandshake, InvalidURI, TimeoutError) as e:
            raise TransportError(f"{url}: {e}") from e
        # A server that selects no subprotocol speaks JSON (docs/protocol.md §1).
        selected = ws.subprotocol or Encoding.JSON.subprotocol
        if selected != encoding.subprotocol:
            await ws.close()
            raise TransportError(f"{url}: server selected subprotocol {selected!r}")
        return cls(ws, encoding)

    async def send(self, message: str | bytes) -> None:
        try:
            await self._ws.send(message)
        except ConnectionClosed as e:
            raise _closed(e) from None

    async def recv(self) -> str | bytes:
        try:
            return await self._ws.recv()
        except ConnectionClosed as e:
            raise _closed(e) from None

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._ws.close()

    def abort(self) -> None:
        self._ws.transport.abort()


def _closed(e: ConnectionClosed) -> TransportClosed:
    if e.rcvd is not None:
        return TransportClosed(e.rcvd.code, e.rcvd.reason)
    return TransportClosed(None, "connection dropped")


class TcpTransport(Transport):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_size: int) -> None:
        self._reader = reader
        self._writer = writer
        self._max_size = max_size
        self._lock = asyncio.Lock()
        self.encoding = Encoding.BINARY

    @classmethod
    async def open(cls, host: str, port: int, *, open_timeout: float, max_size: int) -> TcpTransport:
        try:
            async with asyncio.timeout(open_timeout):
                reader, writer = await asyncio.open_connection(host, port)
        except TimeoutError as e:
            raise TransportError(f"tcp://{host}:{port}: connect timed out") from e
        return cls(reader, writer, max_size)

    async def send(self, message: str | bytes) -> None:
        if isinstance(message, str):
            raise TypeError("the raw TCP transport carries the binary encoding only")
        await self._write(len(message).to_bytes(4, "big") + message)

    async def _write(self, frame: bytes) -> None:
        try:
            async with self._lock:
                self._writer.write(frame)
                await self._writer.drain()
        except (ConnectionError, OSError) as e:
            raise TransportClosed(None, str(e)) from None

    async def recv(self) -> bytes:
        try:
            while True:
                head = await self._reader.readexactly(4)
                n = int.from_bytes(head, "big")
                if n == 0:
                    # The server's heartbeat: any input answers it; send one back.
                    await self._write(_HEARTBEAT)
                    continue
                if n > self._max_size:
                    self.abort()
                    raise TransportClosed(None, f"server message of {n} bytes is too big")
                return await self._reader.readexactly(n)
        except asyncio.IncompleteReadError:
            raise TransportClosed(None, "connection closed by the server") from None
        except (ConnectionError, OSError) as e:
            raise TransportClosed(None, str(e)) from None

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()
            async with asyncio.timeout(2):
                await self._writer.wait_closed()

    def abort(self) -> None:
        self._writer.transport.abort()


async def open_transport(
    url: str,
    encoding: Encoding,
    *,
    open_timeout: float = 10.0,
    max_size: int = 16 << 20,
    ssl_context: ssl.SSLContext | None = None,
) -> Transport:
    """Open the transport ``url`` names: ``ws://``, ``wss://`` or ``tcp://host:port``."""
    parts = urlsplit(url)
    try:
        if parts.scheme in ("ws", "wss"):
            return await WebSocketTransport.open(
                url, encoding, open_timeout=open_timeout, max_size=max_size, ssl_context=ssl_context
            )
        if parts.scheme == "tcp":
            if encoding is not Encoding.BINARY:
                raise TransportError("tcp:// carries the binary encoding only")
            if parts.hostname is None or parts.port is None:
                raise TransportError(f"{url}: expected tcp://host:port")
            return await TcpTransport.open(
                parts.hostname, parts.port, open_timeout=open_timeout, max_size=max_size
            )
    except OSError as e:
        raise TransportError(f"{url}: {e}") from e
    raise TransportError(f"{url}: unsupported scheme (use ws://, wss:// or tcp://)")
