"""One entry point over both encodings: pick JSON or binary by :class:`Encoding`.

A connection speaks one encoding for its whole life (docs/protocol.md §1):
JSON messages travel as text (``str``), binary ones as ``bytes``.
"""

from __future__ import annotations

import enum

from . import binary_codec, json_codec
from .messages import Command, ServerMessage

__all__ = ["Encoding", "decode_command", "decode_server", "encode"]


class Encoding(enum.StrEnum):
    """The two encodings, named as in ``Client(encoding=...)``."""

    JSON = "json"
    BINARY = "binary"

    @property
    def subprotocol(self) -> str:
        """The WebSocket subprotocol that selects this encoding."""
        return f"herald.{self.value}"


def encode(m: Command | ServerMessage, encoding: Encoding) -> str | bytes:
    """One message in ``encoding``: ``str`` for JSON, ``bytes`` for binary."""
    if encoding is Encoding.JSON:
        return json_codec.encode(m)
    return binary_codec.encode(m)


def decode_server(frame: str | bytes, encoding: Encoding) -> ServerMessage:
    """Decode one server -> client message; raises :class:`~.errors.DecodeError`."""
    if encoding is Encoding.JSON:
        return json_codec.decode_server(frame)
    if isinstance(frame, str):
        frame = frame.encode("utf-8")
    return binary_codec.decode_server(frame)


def decode_command(frame: str | bytes, encoding: Encoding) -> Command:
    """Decode one client -> server message; raises :class:`~.errors.DecodeError`."""
    if encoding is Encoding.JSON:
        return json_codec.decode_command(frame)
    if isinstance(frame, str):
        frame = frame.encode("utf-8")
    return binary_codec.decode_command(frame)
