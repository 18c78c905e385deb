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
from typing import Any, Literal, NamedTuple, TypeAlias

__all__ = [
    "SEAT_STATUSES",
    "Act",
    "ActReply",
    "ClientInfo",
    "Command",
    "Connect",
    "ConnectReply",
    "Disconnect",
    "ErrorReply",
    "Game",
    "History",
    "HistoryReply",
    "Item",
    "Join",
    "Leave",
    "Lobby",
    "LobbyOff",
    "LobbyOffReply",
    "LobbyPage",
    "LobbyReply",
    "LobbyUpdate",
    "Ping",
    "PingReply",
    "Play",
    "PlayReply",
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
    "Seat",
    "SeatStatus",
    "ServerMessage",
    "Sit",
    "SitReply",
    "Stand",
    "StandReply",
    "Subscribe",
    "SubscribeReply",
    "TableEntry",
    "Unseat",
    "Unsubscribe",
    "UnsubscribeReply",
    "Unsubscribed",
    "Watch",
    "WatchReply",
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


@dataclass(frozen=True, slots=True)
class TableEntry:
    """One table as the lobby shows it (docs/protocol.md §5e)."""

    table: int
    path: str
    seats: int
    players: int
    watchers: int
    attrs: bytes = b"{}"
    """A JSON object's text: timing, stakes, the game's own attributes;
    :meth:`attrs_json` parses it."""

    def attrs_json(self) -> Any:
        """The attributes as a JSON value (a dict)."""
        return json.loads(self.attrs)


SeatStatus: TypeAlias = Literal["sat", "left", "away", "back"]
#: The seat statuses in their binary order (0..3).
SEAT_STATUSES: tuple[SeatStatus, ...] = ("sat", "left", "away", "back")

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


@dataclass(frozen=True, slots=True)
class Lobby:
    """Subscribe to the lobby (path "" = every table) or a branch of it."""

    id: int
    path: str = ""


@dataclass(frozen=True, slots=True)
class LobbyOff:
    id: int
    path: str = ""


@dataclass(frozen=True, slots=True)
class Sit:
    """Take a seat (``seat`` None = any free seat); ``data`` for the game."""

    id: int
    table: int
    seat: int | None = None
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class Watch:
    id: int
    table: int


@dataclass(frozen=True, slots=True)
class Stand:
    id: int
    table: int


@dataclass(frozen=True, slots=True)
class Act:
    id: int
    table: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Play:
    """A seat at a table made on demand (docs/protocol.md §5f): join or create
    (``game``, ``seats``, ``attrs``), a new private table (the same with
    ``private``), or the private table of ``code`` (``game`` "", ``seats``
    None). ``attrs`` is a JSON object's text; ``data`` goes to the game as in
    :class:`Sit`."""

    id: int
    game: str = ""
    seats: int | None = None
    attrs: bytes = b"{}"
    private: bool = False
    code: str | None = None
    data: bytes = b""


Command: TypeAlias = (
    Connect
    | Subscribe
    | Unsubscribe
    | Publish
    | Ping
    | History
    | Presence
    | PresenceStats
    | Lobby
    | LobbyOff
    | Sit
    | Watch
    | Stand
    | Act
    | Play
)

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


@dataclass(frozen=True, slots=True)
class LobbyReply:
    """The lobby snapshot, or its last part after :class:`LobbyPage` pushes (§5e):
    apply :class:`LobbyUpdate` pushes with a higher ``seq``."""

    id: int
    seq: int
    tables: tuple[TableEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class LobbyOffReply:
    id: int


@dataclass(frozen=True, slots=True)
class SitReply:
    """The seat taken and the game's private snapshot for it."""

    id: int
    seat: int
    data: bytes


@dataclass(frozen=True, slots=True)
class WatchReply:
    """The game's public snapshot."""

    id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class StandReply:
    id: int


@dataclass(frozen=True, slots=True)
class ActReply:
    """The game accepted the action."""

    id: int


@dataclass(frozen=True, slots=True)
class PlayReply:
    """The table and seat ``play`` gave, the game's private snapshot for the
    seat (as a :class:`SitReply`'s), the private table's ``code`` (None for a
    public one), and whether this ``play`` ``created`` the table."""

    id: int
    table: int
    seat: int
    data: bytes
    code: str | None = None
    created: bool = False


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
    | LobbyReply
    | LobbyOffReply
    | SitReply
    | WatchReply
    | StandReply
    | ActReply
    | PlayReply
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


@dataclass(frozen=True, slots=True)
class LobbyUpdate:
    """Lobby tables added or changed, and ids removed; ``path`` = the subscribed branch."""

    path: str
    seq: int
    tables: tuple[TableEntry, ...] = ()
    removed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class LobbyPage:
    """Part of a lobby snapshot too large for one message, sent before the
    ``lobby`` reply that ends it (§5e); ``path`` = the subscribed branch."""

    path: str
    tables: tuple[TableEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class Game:
    """Game data from a table (opaque bytes; JSON text for Hold'em)."""

    table: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Seat:
    """A seat changed at a table the client sits at or watches."""

    table: int
    seat: int
    user: str
    status: SeatStatus


@dataclass(frozen=True, slots=True)
class Unseat:
    """The server took the client off a table; ``code`` is an error or disconnect code."""

    table: int
    code: int
    reason: str


Push: TypeAlias = (
    Publication | Join | Leave | Unsubscribed | Disconnect | LobbyUpdate | LobbyPage | Game | Seat | Unseat
)

ServerMessage: TypeAlias = Reply | Push
