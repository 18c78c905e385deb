"""The protocol's messages as plain immutable values (docs/protocol.md §2).

Why dataclasses with no behaviour: the codecs (:mod:`.json_codec`,
:mod:`.binary_codec`) turn these into bytes and back, the client state machine
(:mod:`.protocol`) reacts to them, and tests compare them with ``==``. Payloads
(``data``) are always ``bytes``: in the JSON encoding they are the JSON text
exactly as written, never re-serialized.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

__all__ = [
    "ClientInfo",
    "Command",
    "Connect",
    "ConnectReply",
    "Disconnect",
    "ErrorReply",
    "History",
    "HistoryReply",
    "Item",
    "Join",
    "Leave",
    "Ping",
    "PingReply",
    "Position",
    "Presence",
    "PresenceReply",
    "PresenceStats",
    "PresenceStatsReply",
    "Publication",
    "Publish",
    "PublishReply",
    "Push",
    "Reply",
    "ServerMessage",
    "Subscribe",
    "SubscribeReply",
    "Unsubscribe",
    "UnsubscribeReply",
    "Unsubscribed",
]

U16_MAX = 0xFFFF
U32_MAX = 0xFFFF_FFFF
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF


class Position(NamedTuple):
    """A position in a channel's stream: the stream's ``epoch`` and an offset in it.

    A tuple, so ``epoch, offset = await client.publish(...)`` works.
    """

    epoch: str
    offset: int


@dataclass(frozen=True, slots=True)
class Item:
    """One retained publication in a subscribe (recovery) or history reply."""

    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """One connection present in a channel."""

    client: str
    user: str
    info: bytes = b""
    """Connection info: the ``info`` claim of its token as JSON text (empty:
    none); :meth:`info_json` parses it."""

    def info_json(self) -> Any:
        """The connection info as a JSON value (None when there is none)."""
        return json.loads(self.info) if self.info else None


# ------------------------------------------------------------- commands --


@dataclass(frozen=True, slots=True)
class Connect:
    id: int
    token: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Subscribe:
    id: int
    channel: str
    recover: Position | None = None
    join_leave: bool = False
    token: str | None = None


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    id: int
    channel: str


@dataclass(frozen=True, slots=True)
class Publish:
    id: int
    channel: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Ping:
    id: int


@dataclass(frozen=True, slots=True)
class History:
    id: int
    channel: str
    since: Position | None = None
    limit: int = 0


@dataclass(frozen=True, slots=True)
class Presence:
    id: int
    channel: str


@dataclass(frozen=True, slots=True)
class PresenceStats:
    id: int
    channel: str


Command: TypeAlias = Connect | Subscribe | Unsubscribe | Publish | Ping | History | Presence | PresenceStats

# -------------------------------------------------------------- replies --


@dataclass(frozen=True, slots=True)
class ConnectReply:
    id: int
    client: str
    version: str
    ping_interval: int


@dataclass(frozen=True, slots=True)
class SubscribeReply:
    id: int
    epoch: str
    offset: int
    recovered: bool = False
    publications: tuple[Item, ...] = ()


@dataclass(frozen=True, slots=True)
class UnsubscribeReply:
    id: int


@dataclass(frozen=True, slots=True)
class PublishReply:
    id: int
    epoch: str
    offset: int


@dataclass(frozen=True, slots=True)
class PingReply:
    id: int


@dataclass(frozen=True, slots=True)
class HistoryReply:
    id: int
    epoch: str
    offset: int
    publications: tuple[Item, ...] = ()


@dataclass(frozen=True, slots=True)
class PresenceReply:
    id: int
    clients: tuple[ClientInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class PresenceStatsReply:
    """How many connections, and distinct non-empty user ids, a channel has."""

    id: int
    clients: int
    users: int


@dataclass(frozen=True, slots=True)
class ErrorReply:
    id: int
    code: int
    message: str


Reply: TypeAlias = (
    ConnectReply
    | SubscribeReply
    | UnsubscribeReply
    | PublishReply
    | PingReply
    | HistoryReply
    | PresenceReply
    | PresenceStatsReply
    | ErrorReply
)

# ---------------------------------------------------------------- pushes --


@dataclass(frozen=True, slots=True)
class Publication:
    """A publication on ``channel`` at ``offset``; ``data`` is the payload bytes."""

    channel: str
    offset: int
    data: bytes

    def json(self) -> Any:
        """The payload parsed as JSON (raises ``ValueError`` if it is not JSON)."""
        return json.loads(self.data)


@dataclass(frozen=True, slots=True)
class Join:
    channel: str
    client: str
    user: str
    info: bytes = b""
    """Connection info (JSON text, empty: none); see :meth:`ClientInfo.info_json`."""

    def info_json(self) -> Any:
        """The connection info as a JSON value (None when there is none)."""
        return json.loads(self.info) if self.info else None


@dataclass(frozen=True, slots=True)
class Leave:
    channel: str
    client: str
    user: str
    info: bytes = b""
    """Connection info (JSON text, empty: none); see :meth:`ClientInfo.info_json`."""

    def info_json(self) -> Any:
        """The connection info as a JSON value (None when there is none)."""
        return json.loads(self.info) if self.info else None


@dataclass(frozen=True, slots=True)
class Unsubscribed:
    """The server ended a subscription; ``code`` is an error or disconnect code."""

    channel: str
    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class Disconnect:
    """The server is ending the connection (non-WebSocket transports)."""

    code: int
    reason: str


Push: TypeAlias = Publication | Join | Leave | Unsubscribed | Disconnect

ServerMessage: TypeAlias = Reply | Push
