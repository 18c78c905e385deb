"""The JSON encoding of docs/protocol.md §3: one message <-> text.

Why a hand-written reader instead of ``json.loads``: the protocol needs three
things the standard parser does not give — the *exact text* of each ``data``
payload (§3.3: payloads are bytes, never re-serialized), duplicate keys seen
rather than silently merged (§3.1), and integers told apart from fractions and
exponents. So :class:`_Parser` reads the message's top levels itself, keeping
every key/value pair with the value's text span, and hands anything nested
deeper than the protocol's own structure to the C-accelerated standard
scanner, which only has to confirm it is valid JSON.

The encoder writes the canonical form of §3.4 (key order of §3.2, no
whitespace, minimal escaping as ``json.dumps(..., ensure_ascii=False)``), and
embeds a payload verbatim iff it is exactly one JSON value (:func:`is_json`),
else writes it as ``"b64"``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from typing import Any, NoReturn

from .errors import DecodeError
from .messages import (
    SEAT_STATUSES,
    U16_MAX,
    U32_MAX,
    U64_MAX,
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

__all__ = ["decode_command", "decode_server", "encode", "is_json"]

#: Deepest nesting a payload may have to be embedded verbatim; deeper (but
#: valid) payloads are written as b64, as the Rust encoder does (§3.3 allows it).
MAX_DEPTH = 128

# ------------------------------------------------------------ JSON text --

_WS = " \t\n\r"
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_SKIP_WS = re.compile(r"[ \t\n\r]*")
#: How deep the hand-written reader goes before delegating to the standard
#: scanner: envelope (0) > body (1) > publications array (2) > item (3).
_STRUCTURAL_DEPTH = 4


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


_SCANNER = json.JSONDecoder(parse_constant=_reject_constant)
#: The standard library's (C) string scanner: (text, index after the opening
#: quote, strict) -> (value, index after the closing quote).
scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class _Obj:
    """A JSON object as read: every pair in order, duplicates kept, each value
    with the span of its text."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, Any, int, int]]) -> None:
        self.pairs = pairs


class _Num:
    """A JSON number as read: its text, and whether it is a plain integer."""

    __slots__ = ("is_int", "text")

    def __init__(self, text: str, is_int: bool) -> None:
        self.text = text
        self.is_int = is_int


class _Arr:
    __slots__ = ("items",)

    def __init__(self, items: list[Any]) -> None:
        self.items = items


class _Opaque:
    """A value nested deeper than the protocol looks: checked, not kept."""

    __slots__ = ()


_OPAQUE = _Opaque()


class _Parser:
    """Reads one JSON text; raises ``ValueError`` on any syntax error."""

    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s

    def ws(self, i: int) -> int:
        m = _SKIP_WS.match(self.s, i)
        assert m is not None
        return m.end()

    def value(self, i: int, depth: int) -> tuple[Any, int]:
        s = self.s
        if i >= len(s):
            raise ValueError("unexpected end")
        c = s[i]
        if c == '"':
            return scanstring(s, i + 1, True)
        if c in "{[" and depth >= _STRUCTURAL_DEPTH:
            _, end = _SCANNER.raw_decode(s, i)
            return _OPAQUE, end
        if c == "{":
            return self.obj(i + 1, depth)
        if c == "[":
            return self.arr(i + 1, depth)
        if s.startswith("true", i):
            return True, i + 4
        if s.startswith("false", i):
            return False, i + 5
        if s.startswith("null", i):
            return None, i + 4
        m = _NUMBER.match(s, i)
        if m is None:
            raise ValueError(f"unexpected character at {i}")
        return _Num(m.group(), m.group(1) is None and m.group(2) is None), m.end()

    def obj(self, i: int, depth: int) -> tuple[_Obj, int]:
        s = self.s
        pairs: list[tuple[str, Any, int, int]] = []
        i = self.ws(i)
        if s.startswith("}", i):
            return _Obj(pairs), i + 1
        while True:
            if not s.startswith('"', i):
                raise ValueError("expected a key")
            key, i = scanstring(s, i + 1, True)
            i = self.ws(i)
            if not s.startswith(":", i):
                raise ValueError("expected ':'")
            start = self.ws(i + 1)
            v, end = self.value(start, depth + 1)
            pairs.append((key, v, start, end))
            i = self.ws(end)
            if s.startswith(",", i):
                i = self.ws(i + 1)
            elif s.startswith("}", i):
                return _Obj(pairs), i + 1
            else:
                raise ValueError("expected ',' or '}'")

    def arr(self, i: int, depth: int) -> tuple[_Arr, int]:
        s = self.s
        items: list[Any] = []
        i = self.ws(i)
        if s.startswith("]", i):
            return _Arr(items), i + 1
        while True:
            v, i = self.value(i, depth + 1)
            items.append(v)
            i = self.ws(i)
            if s.startswith(",", i):
                i = self.ws(i + 1)
            elif s.startswith("]", i):
                return _Arr(items), i + 1
            else:
                raise ValueError("expected ',' or ']'")

    def document(self) -> Any:
        i = self.ws(0)
        v, i = self.value(i, 0)
        if self.ws(i) != len(self.s):
            raise ValueError("trailing characters")
        return v


def _depth_ok(text: str) -> bool:
    """Whether no array/object in ``text`` (valid JSON) nests deeper than MAX_DEPTH."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return True
    depth = 0
    in_str = escaped = False
    for c in text:
        if in_str:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif c in "]}":
            depth -= 1
    return True


def is_json(data: bytes) -> bool:
    """Whether payload bytes are exactly one JSON value (RFC 8259), valid
    UTF-8, with no whitespace before or after, nested at most MAX_DEPTH deep:
    such payloads are embedded verbatim as ``"data"``, all others go as b64."""
    if not data or data[0] in b" \t\r\n" or data[-1] in b" \t\r\n":
        return False
    try:
        text = data.decode("utf-8")
        _, end = _SCANNER.raw_decode(text, 0)
    except (ValueError, RecursionError):
        return False
    return end == len(text) and _depth_ok(text)


# ------------------------------------------------------------- encoding --


def _info(info: bytes) -> str:
    """``,"info":<json>`` when there is connection info (JSON text only)."""
    return f',"info":{info.decode("utf-8")}' if info and is_json(info) else ""


def _s(v: str) -> str:
    return json.dumps(v, ensure_ascii=False)


def _payload(data: bytes) -> str:
    if is_json(data):
        return '"data":' + data.decode("utf-8")
    return '"b64":"' + base64.b64encode(data).decode("ascii") + '"'


def _pos(p: Position) -> str:
    return f'{{"epoch":{_s(p.epoch)},"offset":{p.offset}}}'


def _items(items: tuple[Item, ...]) -> str:
    return ",".join(f'{{"offset":{it.offset},{_payload(it.data)}}}' for it in items)


def is_json_object(b: bytes) -> bool:
    """Whether bytes are one JSON object with nothing around it (attrs)."""
    return b[:1] == b"{" and is_json(b)


def attrs_or_empty(attrs: bytes) -> bytes:
    """Attrs (a lobby entry's, ``play``'s) as written: the text when it is a
    JSON object, else ``{}`` (as every encoder does)."""
    return attrs if is_json_object(attrs) else b"{}"


def _attrs(attrs: bytes) -> str:
    return attrs_or_empty(attrs).decode("utf-8")


#: An empty JSON object's text (whitespace allowed): ``play`` leaves such attrs out.
_EMPTY_OBJECT = re.compile(r"[ \t\r\n{}]*")


def _tables(tables: tuple[TableEntry, ...]) -> str:
    return ",".join(
        f'{{"table":{t.table},"path":{_s(t.path)},"seats":{t.seats},"players":{t.players},'
        f'"watchers":{t.watchers},"attrs":{_attrs(t.attrs)}}}'
        for t in tables
    )


def _body(m: Command | ServerMessage) -> tuple[int, str, str]:
    """(id, operation key, body text) of a message."""
    match m:
        case Connect(id, token, name):
            parts = []
            if token is not None:
                parts.append(f'"token":{_s(token)}')
            if name is not None:
                parts.append(f'"name":{_s(name)}')
            return id, "connect", ",".join(parts)
        case Subscribe(id, channel, recover, join_leave, token):
            b = f'"channel":{_s(channel)}'
            if recover is not None:
                b += f',"recover":{_pos(recover)}'
            if join_leave:
                b += ',"join_leave":true'
            if token is not None:
                b += f',"token":{_s(token)}'
            return id, "subscribe", b
        case Unsubscribe(id, channel):
            return id, "unsubscribe", f'"channel":{_s(channel)}'
        case Publish(id, channel, data):
            return id, "publish", f'"channel":{_s(channel)},{_payload(data)}'
        case Ping(id):
            return id, "ping", ""
        case History(id, channel, since, limit):
            b = f'"channel":{_s(channel)}'
            if since is not None:
                b += f',"since":{_pos(since)}'
            if limit:
                b += f',"limit":{limit}'
            return id, "history", b
        case Presence(id, channel):
            return id, "presence", f'"channel":{_s(channel)}'
        case PresenceStats(id, channel):
            return id, "presence_stats", f'"channel":{_s(channel)}'
        case ConnectReply(id, client, version, ping_interval):
            return (
                id,
                "connect",
                f'"client":{_s(client)},"version":{_s(version)},"ping_interval":{ping_interval}',
            )
        case SubscribeReply(id, epoch, offset, recovered, publications):
            b = f'"epoch":{_s(epoch)},"offset":{offset}'
            if recovered:
                b += ',"recovered":true'
            if publications:
                b += f',"publications":[{_items(publications)}]'
            return id, "subscribe", b
        case UnsubscribeReply(id):
            return id, "unsubscribe", ""
        case PublishReply(id, epoch, offset):
            return id, "publish", f'"epoch":{_s(epoch)},"offset":{offset}'
        case PingReply(id):
            return id, "ping", ""
        case HistoryReply(id, epoch, offset, publications):
            return (
                id,
                "history",
                f'"epoch":{_s(epoch)},"offset":{offset},"publications":[{_items(publications)}]',
            )
        case PresenceReply(id, clients):
            cs = ",".join(f'{{"client":{_s(c.client)},"user":{_s(c.user)}{_info(c.info)}}}' for c in clients)
            return id, "presence", f'"clients":[{cs}]'
        case PresenceStatsReply(id, clients, users):
            return id, "presence_stats", f'"clients":{clients},"users":{users}'
        case ErrorReply(id, code, message):
            return id, "error", f'"code":{code},"message":{_s(message)}'
        case Publication(channel, offset, data):
            return 0, "pub", f'"channel":{_s(channel)},"offset":{offset},{_payload(data)}'
        case Join(channel, client, user, info):
            return 0, "join", f'"channel":{_s(channel)},"client":{_s(client)},"user":{_s(user)}{_info(info)}'
        case Leave(channel, client, user, info):
            return 0, "leave", f'"channel":{_s(channel)},"client":{_s(client)},"user":{_s(user)}{_info(info)}'
        case Unsubscribed(channel, code, reason):
            return 0, "unsub", f'"channel":{_s(channel)},"code":{code},"reason":{_s(reason)}'
        case Disconnect(code, reason):
            return 0, "disconnect", f'"code":{code},"reason":{_s(reason)}'
        case Lobby(id, path):
            return id, "lobby", f'"path":{_s(path)}' if path else ""
        case LobbyOff(id, path):
            return id, "lobby_off", f'"path":{_s(path)}' if path else ""
        case Sit(id, table, seat, data):
            b = f'"table":{table}'
            if seat is not None:
                b += f',"seat":{seat}'
            if data:
                b += f",{_payload(data)}"
            return id, "sit", b
        case Watch(id, table):
            return id, "watch", f'"table":{table}'
        case Stand(id, table):
            return id, "stand", f'"table":{table}'
        case Act(id, table, data):
            return id, "act", f'"table":{table},{_payload(data)}'
        case Play(id, game, seats, attrs, private, code, data):
            # Every field optional, in §3.2's order; attrs only when not {}.
            parts = []
            if game:
                parts.append(f'"game":{_s(game)}')
            if seats is not None:
                parts.append(f'"seats":{seats}')
            if not _EMPTY_OBJECT.fullmatch(_attrs(attrs)):
                parts.append(f'"attrs":{_attrs(attrs)}')
            if private:
                parts.append('"private":true')
            if code is not None:
                parts.append(f'"code":{_s(code)}')
            if data:
                parts.append(_payload(data))
            return id, "play", ",".join(parts)
        case LobbyReply(id, seq, tables):
            return id, "lobby", f'"seq":{seq},"tables":[{_tables(tables)}]'
        case LobbyOffReply(id):
            return id, "lobby_off", ""
        case SitReply(id, seat, data):
            return id, "sit", f'"seat":{seat},{_payload(data)}'
        case WatchReply(id, data):
            return id, "watch", _payload(data)
        case StandReply(id):
            return id, "stand", ""
        case ActReply(id):
            return id, "act", ""
        case PlayReply(id, table, seat, data, code, created):
            b = f'"table":{table},"seat":{seat}'
            if code is not None:
                b += f',"code":{_s(code)}'
            if created:
                b += ',"created":true'
            return id, "play", f"{b},{_payload(data)}"
        case LobbyUpdate(path, seq, tables, removed):
            ids = ",".join(str(t) for t in removed)
            return (
                0,
                "lobby_update",
                f'"path":{_s(path)},"seq":{seq},"tables":[{_tables(tables)}],"removed":[{ids}]',
            )
        case LobbyPage(path, tables):
            return 0, "lobby_page", f'"path":{_s(path)},"tables":[{_tables(tables)}]'
        case Game(table, data):
            return 0, "game", f'"table":{table},{_payload(data)}'
        case Seat(table, seat, user, status):
            return 0, "seat", f'"table":{table},"seat":{seat},"user":{_s(user)},"status":"{status}"'
        case Unseat(table, code, reason):
            return 0, "unseat", f'"table":{table},"code":{code},"reason":{_s(reason)}'
    raise TypeError(f"not a Herald message: {m!r}")


def encode(m: Command | ServerMessage) -> str:
    """The canonical JSON text (§3.4) of any message."""
    id, op, body = _body(m)
    if id:
        return f'{{"id":{id},"{op}":{{{body}}}}}'
    return f'{{"{op}":{{{body}}}}}'


# ------------------------------------------------------------- decoding --

_COMMANDS = frozenset(
    {
        "connect",
        "subscribe",
        "unsubscribe",
        "publish",
        "ping",
        "history",
        "presence",
        "presence_stats",
        "lobby",
        "lobby_off",
        "sit",
        "watch",
        "stand",
        "act",
        "play",
    }
)
_SERVER_OPS = frozenset(
    {
        "connect",
        "subscribe",
        "unsubscribe",
        "publish",
        "ping",
        "history",
        "presence",
        "presence_stats",
        "error",
        "pub",
        "join",
        "leave",
        "unsub",
        "disconnect",
        "lobby",
        "lobby_off",
        "sit",
        "watch",
        "stand",
        "act",
        "play",
        "lobby_update",
        "lobby_page",
        "game",
        "seat",
        "unseat",
    }
)


class _Fields:
    """The fields of one JSON object of the protocol, read with §3.1's rules;
    failures carry the message id."""

    __slots__ = ("id", "spans", "text", "values")

    def __init__(self, text: str, id: int, obj: Any, what: str) -> None:
        self.text = text
        self.id = id
        if not isinstance(obj, _Obj):
            raise DecodeError("invalid", f"{what} is not an object", id)
        self.values: dict[str, Any] = {}
        self.spans: dict[str, tuple[int, int]] = {}
        for key, v, start, end in obj.pairs:
            if key in self.values:
                raise DecodeError("malformed", f"duplicate key {key!r} in {what}", id)
            self.values[key] = v
            self.spans[key] = (start, end)

    def invalid(self, why: str) -> DecodeError:
        return DecodeError("invalid", why, self.id)

    def present(self, key: str) -> bool:
        return self.values.get(key) is not None

    def string(self, key: str) -> str:
        v = self.values.get(key)
        if v is None:
            raise self.invalid(f"missing {key!r}")
        if not isinstance(v, str):
            raise self.invalid(f"{key!r} is not a string")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise self.invalid(f"{key!r} holds a lone surrogate") from None
        return v

    def opt_str(self, key: str) -> str | None:
        return self.string(key) if self.present(key) else None

    def uint(self, key: str, limit: int, default: int | None = None) -> int:
        v = self.values.get(key)
        if v is None:
            if default is None:
                raise self.invalid(f"missing {key!r}")
            return default
        if not isinstance(v, _Num) or not v.is_int:
            raise self.invalid(f"{key!r} is not an integer")
        n = int(v.text)
        if not 0 <= n <= limit:
            raise self.invalid(f"{key!r} out of range")
        return n

    def flag(self, key: str) -> bool:
        v = self.values.get(key)
        if v is None:
            return False
        if not isinstance(v, bool):
            raise self.invalid(f"{key!r} is not a boolean")
        return v

    def nested(self, key: str) -> _Fields:
        return _Fields(self.text, self.id, self.values.get(key), repr(key))

    def position(self, key: str) -> Position | None:
        if not self.present(key):
            return None
        p = self.nested(key)
        return Position(p.string("epoch"), p.uint("offset", U64_MAX))

    def info(self) -> bytes:
        """Connection info: the raw JSON text of 'info' (empty when absent or null)."""
        if not self.present("info"):
            return b""
        start, end = self.spans["info"]
        try:
            return self.text[start:end].encode("utf-8")
        except UnicodeEncodeError:
            raise self.invalid("'info' holds a lone surrogate") from None

    def data(self) -> bytes:
        has_data = "data" in self.values  # null is a payload like any other
        has_b64 = self.present("b64")
        if has_data == has_b64:
            raise self.invalid("exactly one of 'data' and 'b64' is required")
        if has_data:
            start, end = self.spans["data"]
            try:
                return self.text[start:end].encode("utf-8")
            except UnicodeEncodeError:
                raise self.invalid("'data' holds a lone surrogate") from None
        b64 = self.values["b64"]
        if not isinstance(b64, str):
            raise self.invalid("'b64' is not a string")
        try:
            raw = base64.b64decode(b64.encode("ascii"), validate=True)
        except (ValueError, binascii.Error):
            raise self.invalid("bad base64") from None
        if base64.b64encode(raw).decode("ascii") != b64:
            raise self.invalid("non-canonical base64")
        return raw

    def array(self, key: str, required: bool) -> list[Any]:
        v = self.values.get(key)
        if v is None:
            if required:
                raise self.invalid(f"missing {key!r}")
            return []
        if not isinstance(v, _Arr):
            raise self.invalid(f"{key!r} is not an array")
        return v.items

    def opt_data(self) -> bytes:
        """A payload that may be left out (absent = empty), as in ``sit``."""
        return self.data() if "data" in self.values or self.present("b64") else b""

    def attrs(self, default: bytes | None = None) -> bytes:
        """Attrs: a JSON object, kept as its exact text; ``default`` when
        absent (a lobby entry has none, ``play``'s is ``{}``)."""
        if "attrs" not in self.values and default is not None:
            return default
        if not self.present("attrs"):
            raise self.invalid("missing 'attrs'")
        start, end = self.spans["attrs"]
        try:
            raw = self.text[start:end].encode("utf-8")
        except UnicodeEncodeError:
            raise self.invalid("'attrs' holds a lone surrogate") from None
        if not is_json_object(raw):
            raise self.invalid("'attrs' is not a JSON object")
        return raw

    def tables(self, key: str) -> tuple[TableEntry, ...]:
        out = []
        for raw in self.array(key, required=True):
            f = _Fields(self.text, self.id, raw, "lobby entry")
            out.append(
                TableEntry(
                    f.uint("table", U64_MAX),
                    f.string("path"),
                    f.uint("seats", U32_MAX),
                    f.uint("players", U32_MAX),
                    f.uint("watchers", U32_MAX),
                    f.attrs(),
                )
            )
        return tuple(out)

    def removed(self, key: str) -> tuple[int, ...]:
        out = []
        for v in self.array(key, required=True):
            if not isinstance(v, _Num) or not v.is_int or not 0 <= int(v.text) <= U64_MAX:
                raise self.invalid(f"{key!r} holds something other than a table id")
            out.append(int(v.text))
        return tuple(out)

    def status(self, key: str) -> SeatStatus:
        v = self.string(key)
        for s in SEAT_STATUSES:
            if s == v:
                return s
        raise self.invalid(f"{key!r} is not sat, left, away or back")

    def items(self, key: str, required: bool) -> tuple[Item, ...]:
        out = []
        for raw in self.array(key, required):
            f = _Fields(self.text, self.id, raw, "publication item")
            out.append(Item(f.uint("offset", U64_MAX), f.data()))
        return tuple(out)


def _envelope(
    message: str | bytes | bytearray | memoryview, ops: frozenset[str]
) -> tuple[str, int, str, _Fields]:
    """Parse the text and find (text, id, operation, body fields)."""
    if isinstance(message, str):
        text = message
    else:
        try:
            text = bytes(message).decode("utf-8")
        except UnicodeDecodeError:
            raise DecodeError("malformed", "not UTF-8") from None
    try:
        root = _Parser(text).document()
    except (ValueError, RecursionError) as e:
        raise DecodeError("malformed", f"not JSON: {e}") from None
    if not isinstance(root, _Obj):
        raise DecodeError("malformed", "not a JSON object")
    ids = [v for k, v, _, _ in root.pairs if k == "id"]
    if len(ids) > 1:
        raise DecodeError("malformed", 'repeated "id"')
    id = 0
    if ids and ids[0] is not None:
        v = ids[0]
        if not isinstance(v, _Num) or not v.is_int or not 0 <= int(v.text) <= U32_MAX:
            raise DecodeError("invalid", '"id" is not a u32')
        id = int(v.text)
    found = [(k, v) for k, v, _, _ in root.pairs if k in ops]
    if len(found) > 1:
        raise DecodeError("malformed", "more than one operation key", id)
    if not found:
        other = next((k for k, _, _, _ in root.pairs if k != "id"), None)
        if other is not None:
            raise DecodeError("unknown", f"unknown operation {other!r}", id)
        raise DecodeError("malformed", "no operation key", id)
    op, body = found[0]
    return text, id, op, _Fields(text, id, body, f"{op!r} body")


def decode_command(message: str | bytes | bytearray | memoryview) -> Command:
    """Decode a client -> server message (a command)."""
    _, id, op, b = _envelope(message, _COMMANDS)
    if op == "connect":
        return Connect(id, b.opt_str("token"), b.opt_str("name"))
    if op == "subscribe":
        channel = b.string("channel")
        return Subscribe(id, channel, b.position("recover"), b.flag("join_leave"), b.opt_str("token"))
    if op == "unsubscribe":
        return Unsubscribe(id, b.string("channel"))
    if op == "publish":
        return Publish(id, b.string("channel"), b.data())
    if op == "ping":
        return Ping(id)
    if op == "history":
        channel = b.string("channel")
        since = b.position("since")
        return History(id, channel, since, b.uint("limit", U32_MAX, 0))
    if op == "presence":
        return Presence(id, b.string("channel"))
    if op == "presence_stats":
        return PresenceStats(id, b.string("channel"))
    if op == "lobby":
        return Lobby(id, b.opt_str("path") or "")
    if op == "lobby_off":
        return LobbyOff(id, b.opt_str("path") or "")
    if op == "sit":
        table = b.uint("table", U64_MAX)
        seat = b.uint("seat", U32_MAX) if b.present("seat") else None
        return Sit(id, table, seat, b.opt_data())
    if op == "watch":
        return Watch(id, b.uint("table", U64_MAX))
    if op == "stand":
        return Stand(id, b.uint("table", U64_MAX))
    if op == "act":
        return Act(id, b.uint("table", U64_MAX), b.data())
    return Play(
        id,
        b.opt_str("game") or "",
        b.uint("seats", U32_MAX) if b.present("seats") else None,
        b.attrs(default=b"{}"),
        b.flag("private"),
        b.opt_str("code"),
        b.opt_data(),
    )


def decode_server(message: str | bytes | bytearray | memoryview) -> ServerMessage:
    """Decode a server -> client message (a reply, an error or a push)."""
    _, id, op, b = _envelope(message, _SERVER_OPS)
    if op == "connect":
        return ConnectReply(id, b.string("client"), b.string("version"), b.uint("ping_interval", U32_MAX))
    if op == "subscribe":
        return SubscribeReply(
            id,
            b.string("epoch"),
            b.uint("offset", U64_MAX),
            b.flag("recovered"),
            b.items("publications", required=False),
        )
    if op == "unsubscribe":
        return UnsubscribeReply(id)
    if op == "publish":
        return PublishReply(id, b.string("epoch"), b.uint("offset", U64_MAX))
    if op == "ping":
        return PingReply(id)
    if op == "history":
        return HistoryReply(
            id, b.string("epoch"), b.uint("offset", U64_MAX), b.items("publications", required=True)
        )
    if op == "presence":
        clients = []
        for raw in b.array("clients", required=True):
            f = _Fields(b.text, id, raw, "presence client")
            clients.append(ClientInfo(f.string("client"), f.string("user"), f.info()))
        return PresenceReply(id, tuple(clients))
    if op == "presence_stats":
        return PresenceStatsReply(id, b.uint("clients", U64_MAX), b.uint("users", U64_MAX))
    if op == "error":
        return ErrorReply(id, b.uint("code", U16_MAX), b.string("message"))
    if op == "pub":
        return Publication(b.string("channel"), b.uint("offset", U64_MAX), b.data())
    if op in ("join", "leave"):
        cls = Join if op == "join" else Leave
        return cls(b.string("channel"), b.string("client"), b.string("user"), b.info())
    if op == "unsub":
        return Unsubscribed(b.string("channel"), b.uint("code", U16_MAX), b.string("reason"))
    if op == "disconnect":
        return Disconnect(b.uint("code", U16_MAX), b.string("reason"))
    if op == "lobby":
        return LobbyReply(id, b.uint("seq", U64_MAX), b.tables("tables"))
    if op == "lobby_off":
        return LobbyOffReply(id)
    if op == "sit":
        return SitReply(id, b.uint("seat", U32_MAX), b.data())
    if op == "watch":
        return WatchReply(id, b.data())
    if op == "stand":
        return StandReply(id)
    if op == "act":
        return ActReply(id)
    if op == "play":
        table = b.uint("table", U64_MAX)
        seat = b.uint("seat", U32_MAX)
        code = b.opt_str("code")
        return PlayReply(id, table, seat, b.data(), code, b.flag("created"))
    if op == "lobby_update":
        return LobbyUpdate(b.string("path"), b.uint("seq", U64_MAX), b.tables("tables"), b.removed("removed"))
    if op == "lobby_page":
        return LobbyPage(b.string("path"), b.tables("tables"))
    if op == "game":
        return Game(b.uint("table", U64_MAX), b.data())
    if op == "seat":
        return Seat(b.uint("table", U64_MAX), b.uint("seat", U32_MAX), b.string("user"), b.status("status"))
    return Unseat(b.uint("table", U64_MAX), b.uint("code", U16_MAX), b.string("reason"))
