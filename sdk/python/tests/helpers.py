"""Shared test helpers: waiting for a condition, a TCP proxy that can be
killed and restarted to drop connections while the server keeps running, and
HS256 tokens for a server started with :data:`SECRET`."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

from herald_client import ReconnectPolicy

#: The HS256 secret of the test servers that require tokens.
SECRET = "python-sdk-test-secret-python-sdk-test-secret"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def jwt(claims: dict[str, Any], secret: str = SECRET) -> str:
    """An HS256 JWT (RFC 7519) with ``claims``."""
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    sig = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(sig)}"


def user_token(sub: str) -> str:
    """A connection token for user ``sub``, valid for an hour."""
    return jwt({"sub": sub, "exp": int(time.time()) + 3600})


#: Quick reconnects, so the tests do not wait for production backoff.
FAST = ReconnectPolicy(initial_delay=0.05, max_delay=0.2)


async def wait_until(cond: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class Proxy:
    """Forwards 127.0.0.1:port to a target port, byte for byte.

    :meth:`stop` closes the listener and aborts every forwarded connection
    (both sides, with a reset), as a network failure would; :meth:`start`
    listens again on the same port.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def freeze(self) -> None:
        """Stop forwarding on the open connections but keep them open — a
        silent network path. New connections are forwarded as usual."""
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        with contextlib.suppress(OSError):
            dst.close()
