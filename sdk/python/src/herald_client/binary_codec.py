"""The binary encoding of docs/protocol.md §4: one message <-> bytes.

No I/O: the transports find message boundaries (a WebSocket binary frame, a
length-prefixed TCP frame) and hand over one whole message. Decoders reject
everything §4.1 says to reject — truncated, overlong or overflowing varints,
out-of-range values, bad UTF-8, unknown flag bits, trailing bytes — so that
every message has exactly one encoding, and report the id once it was read.
"""

from __future__ import annotations

from .errors import DecodeError
from .json_codec import attrs_or_empty, is_json, is_json_object
from .messages import (
    SEAT_STATUSES,
    U16_MAX,
    U32_MAX,
    Act,
    ActReply,
    ClientInfo,
    Command,
    Connect,
    ConnectReply,
    Disconnect,
    ErrorReply,
    Game,
    History,
    HistoryReply,
    Item,
    Join,
    Leave,
    Lobby,
    LobbyOff,
    LobbyOffReply,
    LobbyPage,
    LobbyReply,
    LobbyUpdate,
    Ping,
    PingReply,
    Play,
    PlayReply,
    Position,
    Presence,
    PresenceReply,
    PresenceStats,
    PresenceStatsReply,
    Publication,
    Publish,
    PublishReply,
    Seat,
    SeatStatus,
    ServerMessage,
    Sit,
    SitReply,
    Stand,
    StandReply,
    Subscribe,
    SubscribeReply,
    TableEntry,
    Unseat,
    Unsubscribe,
    Unsubscribed,
    UnsubscribeReply,
    Watch,
    WatchReply,
)

__all__ = ["decode_command", "decode_server", "encode"]

# ------------------------------------------------------------- encoding --


def _varint(out: bytearray, n: int) -> None:
    if n < 0:
        raise ValueError("negative integer cannot be encoded")
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _bytes(out: bytearray, b: bytes) -> None:
    _varint(out, len(b))
    out += b


def _str(out: bytearray, s: str) -> None:
    _bytes(out, s.encode("utf-8"))


def _items(out: bytearray, items: tuple[Item, ...]) -> None:
    _varint(out, len(items))
    for it in items:
        _varint(out, it.offset)
        _bytes(out, it.data)


def _tables(out: bytearray, tables: tuple[TableEntry, ...]) -> None:
    _varint(out, len(tables))
    for t in tables:
        _varint(out, t.table)
        _str(out, t.path)
        _varint(out, t.seats)
        _varint(out, t.players)
        _varint(out, t.watchers)
        _bytes(out, attrs_or_empty(t.attrs))


def encode(m: Command | ServerMessage) -> bytes:
    """The binary encoding of any message (command, reply, error or push)."""
    out = bytearray()
    match m:
        case Connect(id, token, name):
            out.append(0x01)
            _varint(out, id)
            out.append((token is not None) | (name is not None) << 1)
            if token is not None:
                _str(out, token)
            if name is not None:
                _str(out, name)
        case Subscribe(id, channel, recover, join_leave, token):
            out.append(0x02)
            _varint(out, id)
            out.append((recover is not None) | join_leave << 1 | (token is not None) << 2)
            _str(out, channel)
            if recover is not None:
                _str(out, recover.epoch)
                _varint(out, recover.offset)
            if token is not None:
                _str(out, token)
        case Unsubscribe(id, channel):
            out.append(0x03)
            _varint(out, id)
            _str(out, channel)
        case Publish(id, channel, data):
            out.append(0x04)
            _varint(out, id)
            _str(out, channel)
            _bytes(out, data)
        case Ping(id):
            out.append(0x05)
            _varint(out, id)
        case History(id, channel, since, limit):
            out.append(0x06)
            _varint(out, id)
            out.append(since is not None)
            _str(out, channel)
            _varint(out, limit)
            if since is not None:
                _str(out, since.epoch)
                _varint(out, since.offset)
        case Presence(id, channel):
            out.append(0x07)
            _varint(out, id)
            _str(out, channel)
        case PresenceStats(id, channel):
            out.append(0x08)
            _varint(out, id)
            _str(out, channel)
        case ConnectReply(id, client, version, ping_interval):
            out.append(0x81)
            _varint(out, id)
            _str(out, client)
            _str(out, version)
            _varint(out, ping_interval)
        case SubscribeReply(id, epoch, offset, recovered, publications):
            out.append(0x82)
            _varint(out, id)
            out.append(bool(recovered))
            _str(out, epoch)
            _varint(out, offset)
            _items(out, publications)
        case UnsubscribeReply(id):
            out.append(0x83)
            _varint(out, id)
        case PublishReply(id, epoch, offset):
            out.append(0x84)
            _varint(out, id)
            _str(out, epoch)
            _varint(out, offset)
        case PingReply(id):
            out.append(0x85)
            _varint(out, id)
        case HistoryReply(id, epoch, offset, publications):
            out.append(0x86)
            _varint(out, id)
            _str(out, epoch)
            _varint(out, offset)
            _items(out, publications)
        case PresenceReply(id, clients):
            out.append(0x87)
            _varint(out, id)
            _varint(out, len(clients))
            for c in clients:
                _str(out, c.client)
                _str(out, c.user)
                _bytes(out, c.info)
        case PresenceStatsReply(id, clients, users):
            out.append(0x88)
            _varint(out, id)
            _varint(out, clients)
            _varint(out, users)
        case ErrorReply(id, code, message):
            out.append(0xE0)
            _varint(out, id)
            _varint(out, code)
            _str(out, message)
        case Publication(channel, offset, data):
            out.append(0xA0)
            _str(out, channel)
            _varint(out, offset)
            _bytes(out, data)
        case Join(channel, client, user, info):
            out.append(0xA1)
            _str(out, channel)
            _str(out, client)
            _str(out, user)
            _bytes(out, info)
        case Leave(channel, client, user, info):
            out.append(0xA2)
            _str(out, channel)
            _str(out, client)
            _str(out, user)
            _bytes(out, info)
        case Unsubscribed(channel, code, reason):
            out.append(0xA3)
            _str(out, channel)
            _varint(out, code)
            _str(out, reason)
        case Disconnect(code, reason):
            out.append(0xA4)
            _varint(out, code)
            _str(out, reason)
        case Lobby(id, path) | LobbyOff(id, path):
            out.append(0x09 if isinstance(m, Lobby) else 0x0A)
            _varint(out, id)
            _str(out, path)
        case Sit(id, table, seat, data):
            out.append(0x0B)
            _varint(out, id)
            out.append(seat is not None)
            _varint(out, table)
            if seat is not None:
                _varint(out, seat)
            _bytes(out, data)
        case Watch(id, table) | Stand(id, table):
            out.append(0x0C if isinstance(m, Watch) else 0x0D)
            _varint(out, id)
            _varint(out, table)
        case Act(id, table, data):
            out.append(0x0E)
            _varint(out, id)
            _varint(out, table)
            _bytes(out, data)
        case Play(id, game, seats, attrs, private, code, data):
            out.append(0x0F)
            _varint(out, id)
            out.append((seats is not None) | private << 1 | (code is not None) << 2)
            _str(out, game)
            if seats is not None:
                _varint(out, seats)
            _bytes(out, attrs_or_empty(attrs))
            if code is not None:
                _str(out, code)
            _bytes(out, data)
        case LobbyReply(id, seq, tables):
            out.append(0x89)
            _varint(out, id)
            _varint(out, seq)
            _tables(out, tables)
        case LobbyOffReply(id):
            out.append(0x8A)
            _varint(out, id)
        case SitReply(id, seat, data):
            out.append(0x8B)
            _varint(out, id)
            _varint(out, seat)
            _bytes(out, data)
        case WatchReply(id, data):
            out.append(0x8C)
            _varint(out, id)
            _bytes(out, data)
        case StandReply(id):
            out.append(0x8D)
            _varint(out, id)
        case ActReply(id):
            out.append(0x8E)
            _varint(out, id)
        case PlayReply(id, table, seat, data, code, created):
            out.append(0x8F)
            _varint(out, id)
            out.append((code is not None) | created << 1)
            _varint(out, table)
            _varint(out, seat)
            if code is not None:
                _str(out, code)
            _bytes(out, data)
        case LobbyUpdate(path, seq, tables, removed):
            out.append(0xA5)
            _str(out, path)
            _varint(out, seq)
            _tables(out, tables)
            _varint(out, len(removed))
            for t in removed:
                _varint(out, t)
        case Game(table, data):
            out.append(0xA6)
            _varint(out, table)
            _bytes(out, data)
        case Seat(table, seat, user, status):
            out.append(0xA7)
            _varint(out, table)
            _varint(out, seat)
            _str(out, user)
            out.append(SEAT_STATUSES.index(status))
        case Unseat(table, code, reason):
            out.append(0xA8)
            _varint(out, table)
            _varint(out, code)
            _str(out, reason)
        case LobbyPage(path, tables):
            out.append(0xA9)
            _str(out, path)
            _tables(out, tables)
        case _:
            raise TypeError(f"not a Herald message: {m!r}")
    return bytes(out)


# ------------------------------------------------------------- decoding --


class _Reader:
    """A cursor over one message; every failure is a :class:`DecodeError`
    carrying the id once :meth:`id` has read it."""

    __slots__ = ("buf", "msg_id", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 1  # byte 0 is the type
        self.msg_id = 0

    def malformed(self, why: str) -> DecodeError:
        return DecodeError("malformed", why, self.msg_id)

    def invalid(self, why: str) -> DecodeError:
        return DecodeError("invalid", why, self.msg_id)

    def varint(self) -> int:
        buf, pos, n = self.buf, self.pos, len(self.buf)
        result = 0
        for i in range(10):
            if pos >= n:
                raise self.malformed("truncated varint")
            b = buf[pos]
            pos += 1
            if i == 9 and b > 1:
                raise self.malformed("varint overflows u64")
            result |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                if b == 0 and i > 0:
                    raise self.malformed("overlong varint")
                self.pos = pos
                return result
        raise self.malformed("varint longer than 10 bytes")  # pragma: no cover - unreachable

    def bounded(self, limit: int, what: str) -> int:
        v = self.varint()
        if v > limit:
            raise self.invalid(f"{what} out of range")
        return v

    def id(self) -> int:
        self.msg_id = self.bounded(U32_MAX, "id")
        return self.msg_id

    def flags(self, defined: int) -> int:
        if self.pos >= len(self.buf):
            raise self.malformed("missing flags")
        f = self.buf[self.pos]
        self.pos += 1
        if f & ~defined:
            raise self.malformed("undefined flag bit")
        return f

    def blob(self) -> bytes:
        n = self.varint()
        if n > len(self.buf) - self.pos:
            raise self.malformed("length beyond the message")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(b)

    def info(self) -> bytes:
        """Connection info: JSON text, or empty for none."""
        b = self.blob()
        if b and not is_json(b):
            raise self.invalid("info is not JSON text")
        return b

    def string(self) -> str:
        raw = self.blob()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.invalid("string is not valid UTF-8") from None

    def count(self) -> int:
        n = self.varint()
        # Every item takes at least 2 bytes: check before allocating anything.
        if n * 2 > len(self.buf) - self.pos:
            raise self.malformed("count beyond the message")
        return n

    def tables(self) -> tuple[TableEntry, ...]:
        n = self.varint()
        # A lobby entry takes at least 8 bytes (§4.1): check before allocating.
        if n * 8 > len(self.buf) - self.pos:
            raise self.malformed("count beyond the message")
        out = []
        for _ in range(n):
            table = self.varint()
            path = self.string()
            seats = self.bounded(U32_MAX, "seats")
            players = self.bounded(U32_MAX, "players")
            watchers = self.bounded(U32_MAX, "watchers")
            out.append(TableEntry(table, path, seats, players, watchers, self.attrs()))
        return tuple(out)

    def attrs(self) -> bytes:
        """Attrs: a JSON object's text."""
        attrs = self.blob()
        if not is_json_object(attrs):
            raise self.invalid("attrs is not a JSON object")
        return attrs

    def removed(self) -> tuple[int, ...]:
        n = self.varint()
        if n > len(self.buf) - self.pos:
            raise self.malformed("count beyond the message")
        return tuple(self.varint() for _ in range(n))

    def status(self) -> SeatStatus:
        if self.pos >= len(self.buf):
            raise self.malformed("missing status")
        b = self.buf[self.pos]
        self.pos += 1
        if b >= len(SEAT_STATUSES):
            raise self.invalid("seat status is not 0..3")
        return SEAT_STATUSES[b]

    def items(self) -> tuple[Item, ...]:
        return tuple(Item(self.varint(), self.blob()) for _ in range(self.count()))

    def position(self) -> Position:
        return Position(self.string(), self.varint())

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise self.malformed("trailing bytes")


def _as_bytes(buf: bytes | bytearray | memoryview) -> bytes:
    return buf if isinstance(buf, bytes) else bytes(buf)


def decode_command(buf: bytes | bytearray | memoryview) -> Command:
    """Decode a client -> server message (a command)."""
    buf = _as_bytes(buf)
    if not buf:
        raise DecodeError("malformed", "empty message")
    t = buf[0]
    if not 0x01 <= t <= 0x0F:
        raise DecodeError("unknown", f"unknown command type 0x{t:02x}")
    r = _Reader(buf)
    id = r.id()
    m: Command
    if t == 0x01:
        f = r.flags(0b11)
        token = r.string() if f & 1 else None
        name = r.string() if f & 2 else None
        m = Connect(id, token, name)
    elif t == 0x02:
        f = r.flags(0b111)
        channel = r.string()
        recover = r.position() if f & 1 else None
        token = r.string() if f & 4 else None
        m = Subscribe(id, channel, recover, bool(f & 2), token)
    elif t == 0x03:
        m = Unsubscribe(id, r.string())
    elif t == 0x04:
        m = Publish(id, r.string(), r.blob())
    elif t == 0x05:
        m = Ping(id)
    elif t == 0x06:
        f = r.flags(0b1)
        channel = r.string()
        limit = r.bounded(U32_MAX, "limit")
        since = r.position() if f & 1 else None
        m = History(id, channel, since, limit)
    elif t == 0x07:
        m = Presence(id, r.string())
    elif t == 0x08:
        m = PresenceStats(id, r.string())
    elif t == 0x09:
        m = Lobby(id, r.string())
    elif t == 0x0A:
        m = LobbyOff(id, r.string())
    elif t == 0x0B:
        f = r.flags(0b1)
        table = r.varint()
        seat = r.bounded(U32_MAX, "seat") if f & 1 else None
        m = Sit(id, table, seat, r.blob())
    elif t == 0x0C:
        m = Watch(id, r.varint())
    elif t == 0x0D:
        m = Stand(id, r.varint())
    elif t == 0x0E:
        m = Act(id, r.varint(), r.blob())
    else:
        f = r.flags(0b111)
        game = r.string()
        seats = r.bounded(U32_MAX, "seats") if f & 1 else None
        attrs = r.attrs()
        code = r.string() if f & 4 else None
        m = Play(id, game, seats, attrs, bool(f & 2), code, r.blob())
    r.end()
    return m


def decode_server(buf: bytes | bytearray | memoryview) -> ServerMessage:
    """Decode a server -> client message (a reply, an error or a push)."""
    buf = _as_bytes(buf)
    if not buf:
        raise DecodeError("malformed", "empty message")
    t = buf[0]
    r = _Reader(buf)
    m: ServerMessage
    if 0x81 <= t <= 0x8F or t == 0xE0:
        id = r.id()
        if t == 0x81:
            m = ConnectReply(id, r.string(), r.string(), r.bounded(U32_MAX, "ping_interval"))
        elif t == 0x82:
            f = r.flags(0b1)
            m = SubscribeReply(id, r.string(), r.varint(), bool(f & 1), r.items())
        elif t == 0x83:
            m = UnsubscribeReply(id)
        elif t == 0x84:
            m = PublishReply(id, r.string(), r.varint())
        elif t == 0x85:
            m = PingReply(id)
        elif t == 0x86:
            m = HistoryReply(id, r.string(), r.varint(), r.items())
        elif t == 0x87:
            m = PresenceReply(
                id, tuple(ClientInfo(r.string(), r.string(), r.info()) for _ in range(r.count()))
            )
        elif t == 0x88:
            m = PresenceStatsReply(id, r.varint(), r.varint())
        elif t == 0x89:
            m = LobbyReply(id, r.varint(), r.tables())
        elif t == 0x8A:
            m = LobbyOffReply(id)
        elif t == 0x8B:
            m = SitReply(id, r.bounded(U32_MAX, "seat"), r.blob())
        elif t == 0x8C:
            m = WatchReply(id, r.blob())
        elif t == 0x8D:
            m = StandReply(id)
        elif t == 0x8E:
            m = ActReply(id)
        elif t == 0x8F:
            f = r.flags(0b11)
            table = r.varint()
            seat = r.bounded(U32_MAX, "seat")
            code = r.string() if f & 1 else None
            m = PlayReply(id, table, seat, r.blob(), code, bool(f & 2))
        else:
            m = ErrorReply(id, r.bounded(U16_MAX, "code"), r.string())
    elif t == 0xA0:
        m = Publication(r.string(), r.varint(), r.blob())
    elif t == 0xA1:
        m = Join(r.string(), r.string(), r.string(), r.info())
    elif t == 0xA2:
        m = Leave(r.string(), r.string(), r.string(), r.info())
    elif t == 0xA3:
        m = Unsubscribed(r.string(), r.bounded(U16_MAX, "code"), r.string())
    elif t == 0xA4:
        m = Disconnect(r.bounded(U16_MAX, "code"), r.string())
    elif t == 0xA5:
        m = LobbyUpdate(r.string(), r.varint(), r.tables(), r.removed())
    elif t == 0xA6:
        m = Game(r.varint(), r.blob())
    elif t == 0xA7:
        m = Seat(r.varint(), r.bounded(U32_MAX, "seat"), r.string(), r.status())
    elif t == 0xA8:
        m = Unseat(r.varint(), r.bounded(U16_MAX, "code"), r.string())
    elif t == 0xA9:
        m = LobbyPage(r.string(), r.tables())
    else:
        raise DecodeError("unknown", f"unknown message type 0x{t:02x}")
    r.end()
    return m
