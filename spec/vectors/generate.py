#!/usr/bin/env python3
"""Writes messages.json and invalid.json, Herald's wire-protocol test vectors.

Why a generator: it is a second, independent implementation of both encodings
(Python standard library only, written from docs/protocol.md), so the Rust
codec is checked against something other than itself. Edit the lists below and
run `python3 spec/vectors/generate.py`; the Rust test
(crates/proto/tests/vectors.rs) and the SDK tests read the JSON files.
"""

import base64
import json
import os

U53 = 2**53 - 1  # largest offset every JSON SDK can represent exactly
U64 = 2**64 - 1


# ------------------------------------------------------------ model helpers --
# A message is a dict in canonical key order, exactly as it appears in JSON,
# except that payloads are `bytes` under the key "data".


def msg(id, op, body):
    m = {}
    if id:
        m["id"] = id
    m[op] = body
    return m


def pos(epoch, offset):
    return {"epoch": epoch, "offset": offset}


def connect(id, token=None, name=None):
    b = {}
    if token is not None:
        b["token"] = token
    if name is not None:
        b["name"] = name
    return msg(id, "connect", b)


def subscribe(id, channel, recover=None, join_leave=False, token=None):
    b = {"channel": channel}
    if recover is not None:
        b["recover"] = recover
    if join_leave:
        b["join_leave"] = True
    if token is not None:
        b["token"] = token
    return msg(id, "subscribe", b)


def history(id, channel, since=None, limit=0):
    b = {"channel": channel}
    if since is not None:
        b["since"] = since
    if limit:
        b["limit"] = limit
    return msg(id, "history", b)


def item(offset, data):
    return {"offset": offset, "data": data}


def sub_reply(id, epoch, offset, recovered=False, pubs=()):
    b = {"epoch": epoch, "offset": offset}
    if recovered:
        b["recovered"] = True
    if pubs:
        b["publications"] = list(pubs)
    return msg(id, "subscribe", b)


def lobby(id, op, path=""):
    return msg(id, op, {"path": path} if path else {})


def sit(id, table, seat=None, data=b""):
    b = {"table": table}
    if seat is not None:
        b["seat"] = seat
    if data:
        b["data"] = data
    return msg(id, "sit", b)


def play(id, game="", seats=None, attrs=None, private=False, code=None, data=b""):
    b = {}
    if game:
        b["game"] = game
    if seats is not None:
        b["seats"] = seats
    if attrs is not None:
        b["attrs"] = attrs
    if private:
        b["private"] = True
    if code is not None:
        b["code"] = code
    if data:
        b["data"] = data
    return msg(id, "play", b)


def played(id, table, seat, code=None, created=False, data=b""):
    b = {"table": table, "seat": seat}
    if code is not None:
        b["code"] = code
    if created:
        b["created"] = True
    b["data"] = data
    return msg(id, "play", b)


def entry(table, path, seats, players, watchers, attrs=b"{}"):
    return {"table": table, "path": path, "seats": seats, "players": players,
            "watchers": watchers, "attrs": attrs}


def lobby_update(path, seq, tables=(), removed=()):
    return msg(0, "lobby_update", {"path": path, "seq": seq, "tables": list(tables),
                                   "removed": list(removed)})


STATUSES = ["sat", "left", "away", "back"]  # binary 0..3


# ------------------------------------------------------------------- JSON --


def is_json(data):
    """Payload bytes are embedded verbatim iff they are one JSON value with no
    surrounding whitespace (and valid UTF-8); otherwise they go as b64."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if not text or text[0] in " \t\r\n" or text[-1] in " \t\r\n":
        return False

    def reject(name):
        raise ValueError(name)

    try:
        json.loads(text, parse_constant=reject)
    except ValueError:
        return False
    return True


def dump(v):
    if isinstance(v, dict):
        parts = []
        for k, x in v.items():
            if k in ("info", "attrs") and isinstance(x, bytes):
                parts.append(dump(k) + ":" + x.decode("utf-8"))  # always JSON text
            elif k == "data" and isinstance(x, bytes):
                if is_json(x):
                    parts.append('"data":' + x.decode("utf-8"))
                else:
                    parts.append('"b64":"' + base64.b64encode(x).decode("ascii") + '"')
            else:
                parts.append(dump(k) + ":" + dump(x))
        return "{" + ",".join(parts) + "}"
    if isinstance(v, list):
        return "[" + ",".join(dump(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    raise TypeError(v)


# ----------------------------------------------------------------- binary --


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def blob(b):
    return varint(len(b)) + b


def s(text):
    return blob(text.encode("utf-8"))


def op_of(m):
    return next(k for k in m if k != "id")


def binary_client(m):
    id = m.get("id", 0)
    op = op_of(m)
    b = m[op]
    if op == "connect":
        flags = ("token" in b) | ("name" in b) << 1
        out = b"\x01" + varint(id) + bytes([flags])
        out += s(b["token"]) if "token" in b else b""
        out += s(b["name"]) if "name" in b else b""
        return out
    if op == "subscribe":
        flags = ("recover" in b) | ("join_leave" in b) << 1 | ("token" in b) << 2
        out = b"\x02" + varint(id) + bytes([flags]) + s(b["channel"])
        if "recover" in b:
            out += s(b["recover"]["epoch"]) + varint(b["recover"]["offset"])
        if "token" in b:
            out += s(b["token"])
        return out
    if op == "unsubscribe":
        return b"\x03" + varint(id) + s(b["channel"])
    if op == "publish":
        return b"\x04" + varint(id) + s(b["channel"]) + blob(b["data"])
    if op == "ping":
        return b"\x05" + varint(id)
    if op == "history":
        flags = "since" in b
        out = b"\x06" + varint(id) + bytes([flags]) + s(b["channel"]) + varint(b.get("limit", 0))
        if "since" in b:
            out += s(b["since"]["epoch"]) + varint(b["since"]["offset"])
        return out
    if op == "presence":
        return b"\x07" + varint(id) + s(b["channel"])
    if op == "presence_stats":
        return b"\x08" + varint(id) + s(b["channel"])
    if op == "lobby":
        return b"\x09" + varint(id) + s(b.get("path", ""))
    if op == "lobby_off":
        return b"\x0a" + varint(id) + s(b.get("path", ""))
    if op == "sit":
        out = b"\x0b" + varint(id) + bytes(["seat" in b]) + varint(b["table"])
        if "seat" in b:
            out += varint(b["seat"])
        return out + blob(b.get("data", b""))
    if op == "watch":
        return b"\x0c" + varint(id) + varint(b["table"])
    if op == "stand":
        return b"\x0d" + varint(id) + varint(b["table"])
    if op == "act":
        return b"\x0e" + varint(id) + varint(b["table"]) + blob(b["data"])
    if op == "play":
        flags = ("seats" in b) | (b.get("private", False) << 1) | (("code" in b) << 2)
        out = b"\x0f" + varint(id) + bytes([flags]) + s(b.get("game", ""))
        if "seats" in b:
            out += varint(b["seats"])
        out += blob(b.get("attrs", b"{}"))
        if "code" in b:
            out += s(b["code"])
        return out + blob(b.get("data", b""))
    raise ValueError(op)


def items(pubs):
    out = varint(len(pubs))
    for p in pubs:
        out += varint(p["offset"]) + blob(p["data"])
    return out


def entries(tables):
    out = varint(len(tables))
    for t in tables:
        out += (varint(t["table"]) + s(t["path"]) + varint(t["seats"]) + varint(t["players"])
                + varint(t["watchers"]) + blob(t["attrs"]))
    return out


def binary_server(m):
    id = m.get("id", 0)
    op = op_of(m)
    b = m[op]
    if op == "connect":
        return b"\x81" + varint(id) + s(b["client"]) + s(b["version"]) + varint(b["ping_interval"])
    if op == "subscribe":
        return (
            b"\x82" + varint(id) + bytes([b.get("recovered", False)]) + s(b["epoch"])
            + varint(b["offset"]) + items(b.get("publications", []))
        )
    if op == "unsubscribe":
        return b"\x83" + varint(id)
    if op == "publish":
        return b"\x84" + varint(id) + s(b["epoch"]) + varint(b["offset"])
    if op == "ping":
        return b"\x85" + varint(id)
    if op == "history":
        return b"\x86" + varint(id) + s(b["epoch"]) + varint(b["offset"]) + items(b["publications"])
    if op == "presence":
        out = b"\x87" + varint(id) + varint(len(b["clients"]))
        for c in b["clients"]:
            out += s(c["client"]) + s(c["user"]) + blob(c.get("info", b""))
        return out
    if op == "presence_stats":
        return b"\x88" + varint(id) + varint(b["clients"]) + varint(b["users"])
    if op == "error":
        return b"\xe0" + varint(id) + varint(b["code"]) + s(b["message"])
    if op == "pub":
        return b"\xa0" + s(b["channel"]) + varint(b["offset"]) + blob(b["data"])
    if op in ("join", "leave"):
        t = b"\xa1" if op == "join" else b"\xa2"
        return t + s(b["channel"]) + s(b["client"]) + s(b["user"]) + blob(b.get("info", b""))
    if op == "unsub":
        return b"\xa3" + s(b["channel"]) + varint(b["code"]) + s(b["reason"])
    if op == "disconnect":
        return b"\xa4" + varint(b["code"]) + s(b["reason"])
    if op == "lobby":
        return b"\x89" + varint(id) + varint(b["seq"]) + entries(b["tables"])
    if op == "lobby_off":
        return b"\x8a" + varint(id)
    if op == "sit":
        return b"\x8b" + varint(id) + varint(b["seat"]) + blob(b["data"])
    if op == "watch":
        return b"\x8c" + varint(id) + blob(b["data"])
    if op == "stand":
        return b"\x8d" + varint(id)
    if op == "act":
        return b"\x8e" + varint(id)
    if op == "play":
        flags = ("code" in b) | (b.get("created", False) << 1)
        out = b"\x8f" + varint(id) + bytes([flags]) + varint(b["table"]) + varint(b["seat"])
        if "code" in b:
            out += s(b["code"])
        return out + blob(b["data"])
    if op == "lobby_update":
        out = b"\xa5" + s(b["path"]) + varint(b["seq"]) + entries(b["tables"])
        out += varint(len(b["removed"])) + b"".join(varint(r) for r in b["removed"])
        return out
    if op == "game":
        return b"\xa6" + varint(b["table"]) + blob(b["data"])
    if op == "seat":
        return (b"\xa7" + varint(b["table"]) + varint(b["seat"]) + s(b["user"])
                + bytes([STATUSES.index(b["status"])]))
    if op == "unseat":
        return b"\xa8" + varint(b["table"]) + varint(b["code"]) + s(b["reason"])
    if op == "lobby_page":
        return b"\xa9" + s(b["path"]) + entries(b["tables"])
    raise ValueError(op)


# ---------------------------------------------------------------- vectors --

ODD = 'q"b\\s/\n\t\x01\x1f é€😀'  # escapes, control characters, non-ASCII
BIN = bytes([0x00, 0xFF, 0x10, 0x80, 0x7B])  # not UTF-8, so not JSON

CLIENT = [
    ("connect with token and name", connect(1, token="eyJhbGciOi.x.y", name="web")),
    ("connect with nothing", connect(2)),
    ("connect name only, id 0", connect(0, name="n")),
    ("connect token only, escaped", connect(3, token=ODD)),
    ("subscribe minimal", subscribe(4, "news")),
    ("subscribe with recover and join_leave", subscribe(5, "chat:1", pos("ep1", 42), True)),
    ("subscribe join_leave only", subscribe(6, "chat:*", join_leave=True)),
    ("subscribe recover, offset above 2^32", subscribe(7, "a", pos("", 2**32 + 5))),
    ("subscribe recover, offset 2^53-1", subscribe(8, "a", pos("e", U53))),
    ("subscribe non-ASCII channel", subscribe(9, "канал/é€😀")),
    ("subscribe with a subscribe token", subscribe(9, "private:1", token="eyJhbGciOiJIUzI1NiJ9.e30.c2ln")),
    ("subscribe with recover, join_leave and token", subscribe(9, "p:2", pos("e", 3), True, "t")),
    ("unsubscribe", msg(10, "unsubscribe", {"channel": "news"})),
    ("publish object", msg(11, "publish", {"channel": "news", "data": b'{"text":"hi","n":[1,2]}'})),
    ("publish fire-and-forget, id 0", msg(0, "publish", {"channel": "news", "data": b'"hello"'})),
    ("publish keeps inner whitespace", msg(12, "publish", {"channel": "c", "data": b'{"a": [1, 2],\n "b" : null}'})),
    ("publish null", msg(13, "publish", {"channel": "c", "data": b"null"})),
    ("publish number", msg(14, "publish", {"channel": "c", "data": b"-1.5e3"})),
    ("publish binary data as b64", msg(15, "publish", {"channel": "c", "data": BIN})),
    ("publish empty data as b64", msg(16, "publish", {"channel": "c", "data": b""})),
    ("publish JSON with surrounding space as b64", msg(17, "publish", {"channel": "c", "data": b" 1"})),
    ("publish escaped string data", msg(18, "publish", {"channel": ODD, "data": '"\\u00e9\\n"'.encode()})),
    ("ping", msg(19, "ping", {})),
    ("ping id 0", msg(0, "ping", {})),
    ("ping id 127", msg(127, "ping", {})),
    ("ping id 128, two-byte varint", msg(128, "ping", {})),
    ("ping id 300", msg(300, "ping", {})),
    ("ping id u32 max", msg(2**32 - 1, "ping", {})),
    ("history minimal", history(20, "news")),
    ("history with since and limit", history(21, "news", pos("ep1", 100), 50)),
    ("history limit only", history(22, "news", limit=2**32 - 1)),
    ("history since only", history(23, "news", since=pos("ep", 0))),
    ("presence", msg(24, "presence", {"channel": "room"})),
    ("presence_stats", msg(25, "presence_stats", {"channel": "room"})),
    ("lobby, whole lobby", lobby(26, "lobby")),
    ("lobby, a branch", lobby(27, "lobby", "holdem/10-seat")),
    ("lobby, non-ASCII and escaped path", lobby(28, "lobby", "игры/é€😀/" + ODD)),
    ("lobby id 0", lobby(0, "lobby", "chess")),
    ("lobby_off, whole lobby", lobby(29, "lobby_off")),
    ("lobby_off, a branch", lobby(30, "lobby_off", "holdem/10-seat")),
    ("sit any seat, no data", sit(31, 7)),
    ("sit chosen seat with JSON data", sit(32, 7, 2, b'{"buy_in":1000}')),
    ("sit seat 0 with binary data as b64", sit(33, 300, 0, BIN)),
    ("sit any seat with data", sit(34, 1, None, b'"x"')),
    ("sit seat u32 max, table 2^53-1", sit(35, U53, 2**32 - 1)),
    ("play join-or-create, game and seats", play(41, "holdem", 6)),
    ("play with attributes and buy-in", play(42, "holdem", 6, b'{"timing":"express","stakes":"1/2"}', data=b'{"buy_in":1000}')),
    ("play a new private table", play(43, "liars-dice", 4, private=True)),
    ("play a private table by code", play(44, code="K7F3QX")),
    ("play by code with binary data", play(45, code="ABCDEF", data=BIN)),
    ("watch", msg(36, "watch", {"table": 7})),
    ("watch table 0", msg(37, "watch", {"table": 0})),
    ("watch table 2^53-1", msg(38, "watch", {"table": U53})),
    ("stand", msg(39, "stand", {"table": 128})),
    ("act JSON data", msg(40, "act", {"table": 7, "data": b'{"action":"raise","amount":40}'})),
    ("act keeps inner whitespace", msg(41, "act", {"table": 7, "data": b'{"action": "fold"}'})),
    ("act binary data as b64", msg(42, "act", {"table": 7, "data": BIN})),
    ("act empty data as b64", msg(43, "act", {"table": 7, "data": b""})),
    ("act fire-and-forget, id 0", msg(0, "act", {"table": 9, "data": b'"check"'})),
]

CLIENT_BINARY_ONLY = [
    ("subscribe recover, offset u64 max", subscribe(1, "a", pos("e", U64))),
    ("history since offset 2^63", history(2, "a", pos("e", 2**63))),
    ("watch table u64 max", msg(3, "watch", {"table": U64})),
    ("sit table 2^53", sit(4, 2**53, 1)),
]

SERVER = [
    ("connect reply", msg(1, "connect", {"client": "c-8f3a", "version": "0.1.0", "ping_interval": 25})),
    ("subscribe reply minimal", sub_reply(2, "ep1", 0)),
    ("subscribe reply recovered with publications", sub_reply(3, "ep1", 7, True, [item(6, b'{"a":1}'), item(7, BIN)])),
    ("subscribe reply not recovered", sub_reply(4, "ep2", 2**40)),
    ("unsubscribe reply", msg(5, "unsubscribe", {})),
    ("publish reply", msg(6, "publish", {"epoch": "ep1", "offset": 8})),
    ("publish reply, offset 2^53-1", msg(7, "publish", {"epoch": "ep1", "offset": U53})),
    ("ping reply", msg(8, "ping", {})),
    ("ping reply id 0", msg(0, "ping", {})),
    ("history reply empty", msg(9, "history", {"epoch": "ep1", "offset": 0, "publications": []})),
    ("history reply with items", msg(10, "history", {"epoch": "ep1", "offset": 300, "publications": [item(299, b"[1,2]"), item(300, b"")]})),
    ("presence reply empty", msg(11, "presence", {"clients": []})),
    ("presence reply", msg(12, "presence", {"clients": [{"client": "c1", "user": "alice"}, {"client": "c2", "user": ""}]})),
    ("presence reply with connection info", msg(17, "presence", {"clients": [{"client": "c1", "user": "alice", "info": b'{"name":"Alice \u00e9"}'}, {"client": "c2", "user": "bob", "info": b'"mobile"'}]})),
    ("presence_stats reply empty", msg(14, "presence_stats", {"clients": 0, "users": 0})),
    ("presence_stats reply", msg(15, "presence_stats", {"clients": 1000000, "users": 3})),
    ("presence_stats reply, clients 2^53-1", msg(16, "presence_stats", {"clients": U53, "users": 300})),
    ("error", msg(13, "error", {"code": 109, "message": "invalid channel"})),
    ("error id 0", msg(0, "error", {"code": 103, "message": "bad request: " + ODD})),
    ("publication push", msg(0, "pub", {"channel": "news", "offset": 8, "data": b'{"text":"hi"}'})),
    ("publication push, binary data", msg(0, "pub", {"channel": "bin", "offset": 1, "data": BIN})),
    ("publication push, empty data", msg(0, "pub", {"channel": "c", "offset": 2, "data": b""})),
    ("publication push, offset 2^53-1", msg(0, "pub", {"channel": "c", "offset": U53, "data": b"true"})),
    ("publication push, escaped channel", msg(0, "pub", {"channel": ODD, "offset": 128, "data": b'"x"'})),
    ("join push", msg(0, "join", {"channel": "room", "client": "c1", "user": "alice"})),
    ("join push with connection info", msg(0, "join", {"channel": "room", "client": "c3", "user": "bob", "info": b'{"name":"Bob","seat":3}'})),
    ("leave push", msg(0, "leave", {"channel": "room", "client": "c2", "user": ""})),
    ("unsubscribed push", msg(0, "unsub", {"channel": "room", "code": 104, "reason": "permission denied"})),
    ("disconnect push", msg(0, "disconnect", {"code": 3001, "reason": "slow consumer"})),
    ("disconnect push going away", msg(0, "disconnect", {"code": 1001, "reason": ""})),
    ("lobby reply empty", msg(20, "lobby", {"seq": 0, "tables": []})),
    ("lobby reply with tables", msg(21, "lobby", {"seq": 12, "tables": [
        entry(7, "holdem/10-seat/express", 10, 3, 0, b'{"small_blind":1,"big_blind":2,"turn_seconds":20}'),
        entry(8, "holdem/6-seat", 6, 6, 1200, b'{"stakes": "1/2",\n "private" : false}'),
        entry(U53, "шахматы/é€😀", 2, 0, 2**32 - 1),
    ]})),
    ("lobby reply, empty path and zeros", msg(0, "lobby", {"seq": U53, "tables": [entry(0, "", 0, 0, 0)]})),
    ("lobby_off reply", msg(22, "lobby_off", {})),
    ("sit reply JSON snapshot", msg(23, "sit", {"seat": 2, "data": b'{"hand":["As","Kd"],"stack":1000}'})),
    ("sit reply binary snapshot as b64", msg(24, "sit", {"seat": 2**32 - 1, "data": BIN})),
    ("sit reply empty snapshot", msg(25, "sit", {"seat": 0, "data": b""})),
    ("watch reply", msg(26, "watch", {"data": b'{"board":[],"pot":0}'})),
    ("watch reply binary", msg(27, "watch", {"data": BIN})),
    ("play reply, joined", played(32, 7, 3, data=b'{"hand":[]}')),
    ("play reply, created private table", played(33, U53, 0, "K7F3QX", True, b'{"hand":[]}')),
    ("play reply, created public table, binary snapshot", played(34, 12, 2**32 - 1, None, True, BIN)),
    ("stand reply", msg(28, "stand", {})),
    ("act reply", msg(29, "act", {})),
    ("error unknown table", msg(30, "error", {"code": 115, "message": "unknown table"})),
    ("error seat unavailable", msg(31, "error", {"code": 116, "message": "seat 2 is taken"})),
    ("lobby_update push, whole lobby", lobby_update("", 13, [entry(7, "holdem/10-seat/express", 10, 4, 0, b'{"small_blind":1,"big_blind":2,"turn_seconds":20}')], [4, 5])),
    ("lobby_update push, removals only", lobby_update("holdem/10-seat", 14, [], [U53])),
    ("lobby_update push, empty", lobby_update("chess", 15)),
    ("lobby_update push, non-ASCII path and big ids", lobby_update("игры/é€😀", U53, [entry(U53, "игры/é€😀/1", 2**32 - 1, 2**32 - 1, 0, '{"名前":"テーブル"}'.encode())], [0, 127, 128])),
    ("game push JSON", msg(0, "game", {"table": 7, "data": b'{"event":"deal","cards":["As","Kd"]}'})),
    ("game push binary as b64", msg(0, "game", {"table": 7, "data": BIN})),
    ("game push empty data", msg(0, "game", {"table": U53, "data": b""})),
    ("seat push sat", msg(0, "seat", {"table": 7, "seat": 2, "user": "u1", "status": "sat"})),
    ("seat push left", msg(0, "seat", {"table": 7, "seat": 0, "user": "", "status": "left"})),
    ("seat push away", msg(0, "seat", {"table": 7, "seat": 2, "user": "u1", "status": "away"})),
    ("seat push back, escaped user", msg(0, "seat", {"table": U53, "seat": 2**32 - 1, "user": ODD, "status": "back"})),
    ("lobby_page push, whole lobby", msg(0, "lobby_page", {"path": "", "tables": [entry(7, "holdem/10-seat/express", 10, 4, 0, b'{"big_blind":2}'), entry(9, "dice/4-seat/normal", 4, 0, 1)]})),
    ("lobby_page push, a branch, empty", msg(0, "lobby_page", {"path": "holdem/6-seat", "tables": []})),
    ("unseat push", msg(0, "unseat", {"table": 7, "code": 115, "reason": "table closed"})),
    ("unseat push, disconnect code", msg(0, "unseat", {"table": 8, "code": 3000, "reason": ""})),
]

SERVER_BINARY_ONLY = [
    ("publication push, offset u64 max", msg(0, "pub", {"channel": "c", "offset": U64, "data": b"1"})),
    ("subscribe reply, offsets u64 max", sub_reply(1, "e", U64, True, [item(U64, b"x")])),
    ("publish reply, offset 2^63", msg(2, "publish", {"epoch": "e", "offset": 2**63})),
    ("game push table u64 max", msg(0, "game", {"table": U64, "data": b"1"})),
    ("lobby_update push, removed 2^63", lobby_update("", 1, [], [2**63])),
]


def vector(name, direction, m, binary_only=False):
    enc = binary_client if direction == "client" else binary_server
    v = {"name": name, "direction": direction}
    if not binary_only:
        v["json"] = dump(m)
        json.loads(v["json"])  # sanity: it is JSON
    v["binary"] = enc(m).hex()
    return v


def messages():
    out = []
    for name, m in CLIENT:
        out.append(vector(name, "client", m))
    for name, m in CLIENT_BINARY_ONLY:
        out.append(vector(name, "client", m, True))
    for name, m in SERVER:
        out.append(vector(name, "server", m))
    for name, m in SERVER_BINARY_ONLY:
        out.append(vector(name, "server", m, True))
    return out


# (name, direction, input as hex, error, id)
INVALID_BINARY = [
    ("empty message", "client", "", "malformed", 0),
    ("unknown type 0x00", "client", "0001", "unknown", 0),
    ("unknown type 0x10", "client", "1001", "unknown", 0),
    ("reply type sent as a command", "client", "8501", "unknown", 0),
    ("truncated id varint", "client", "0580", "malformed", 0),
    ("overlong id varint", "client", "058100", "malformed", 0),
    ("overlong zero id", "client", "058000", "malformed", 0),
    ("id above u32 max", "client", "0580808080" + "10", "invalid", 0),
    ("varint overflowing u64", "client", "05" + "ff" * 9 + "02", "malformed", 0),
    ("eleven-byte varint", "client", "05" + "ff" * 10 + "01", "malformed", 0),
    ("ping with trailing byte", "client", "050100", "malformed", 1),
    ("connect unknown flag bit", "client", "010104", "malformed", 1),
    ("connect token flag but no token", "client", "010101", "malformed", 1),
    ("connect token bad UTF-8", "client", "01010102c328", "invalid", 1),
    ("subscribe missing flags", "client", "0207", "malformed", 7),
    ("subscribe unknown flag bit", "client", "0207080161", "malformed", 7),
    ("subscribe token flag, no token", "client", "0207040161", "malformed", 7),
    ("subscribe channel length beyond buffer", "client", "0207000561626364", "malformed", 7),
    ("subscribe channel bad UTF-8", "client", "02070002c328", "invalid", 7),
    ("subscribe channel lone surrogate", "client", "02070003eda080", "invalid", 7),
    ("subscribe recover flag, no position", "client", "0207010161", "malformed", 7),
    ("subscribe recover overlong offset", "client", "020701016101658000", "malformed", 7),
    ("unsubscribe trailing bytes", "client", "030201610000", "malformed", 2),
    ("publish without data", "client", "04030163", "malformed", 3),
    ("publish data length beyond buffer", "client", "040301630501020304", "malformed", 3),
    ("publish data length huge", "client", "0403016380808080808080808001", "malformed", 3),
    ("history unknown flag bit", "client", "0604020163" + "00", "malformed", 4),
    ("history limit above u32 max", "client", "06040001638080808010", "invalid", 4),
    ("history since flag, no position", "client", "060401016300", "malformed", 4),
    ("presence truncated channel", "client", "07050361", "malformed", 5),
    ("presence_stats trailing bytes", "client", "0806016300", "malformed", 6),
    ("empty server message", "server", "", "malformed", 0),
    ("unknown reply type 0x80", "server", "8001", "unknown", 0),
    ("unknown reply type 0x9f", "server", "9f01", "unknown", 0),
    ("command type sent by server", "server", "0501", "unknown", 0),
    ("unknown push type 0xaa", "server", "aa", "unknown", 0),
    ("lobby_page push missing tables", "server", "a900", "malformed", 0),
    ("lobby_page push trailing byte", "server", "a900" + "00" + "00", "malformed", 0),
    ("unknown type 0xe1", "server", "e101", "unknown", 0),
    ("connect reply ping_interval above u32 max", "server", "81010163017680808080" + "10", "invalid", 1),
    ("subscribe reply unknown flag bit", "server", "82020201650000", "malformed", 2),
    ("subscribe reply count beyond buffer", "server", "820200016500050101", "malformed", 2),
    ("history reply item truncated", "server", "8603016501010105", "malformed", 3),
    ("history reply huge count", "server", "86030165" + "01" + "ffffffff0f", "malformed", 3),
    ("presence reply huge count", "server", "8704ffffffff0f", "malformed", 4),
    ("presence reply missing user", "server", "8704010163", "malformed", 4),
    ("presence reply missing info", "server", "8704010163" + "0175", "malformed", 4),
    ("presence reply info not JSON", "server", "87040101630175" + "027b7b", "invalid", 4),
    ("join push info not JSON", "server", "a101720163" + "0175" + "0120", "invalid", 0),
    ("presence_stats reply missing users", "server", "880705", "malformed", 7),
    ("presence_stats reply overlong clients", "server", "8807800000", "malformed", 7),
    ("error code above u16 max", "server", "e00580800401" + "6d", "invalid", 5),
    ("error missing message", "server", "e0056d", "malformed", 5),
    ("error id 0 trailing byte", "server", "e0006700" + "00", "malformed", 0),
    ("publication push truncated data", "server", "a00163010461", "malformed", 0),
    ("publication push channel bad UTF-8", "server", "a001ff0100", "invalid", 0),
    ("join push missing user", "server", "a10163016301", "malformed", 0),
    ("unsubscribed push code above u16 max", "server", "a301638080040100", "invalid", 0),
    ("disconnect push trailing byte", "server", "a4b91700" + "00", "malformed", 0),
    ("lobby truncated path", "client", "09010361", "malformed", 1),
    ("lobby trailing byte", "client", "09010000", "malformed", 1),
    ("lobby_off missing path", "client", "0a02", "malformed", 2),
    ("sit unknown flag bit", "client", "0b0302070000", "malformed", 3),
    ("sit seat flag, seat missing", "client", "0b030107", "malformed", 3),
    ("sit seat above u32 max", "client", "0b0301078080808010" + "00", "invalid", 3),
    ("sit missing data", "client", "0b030007", "malformed", 3),
    ("sit missing table", "client", "0b0300", "malformed", 3),
    ("play unknown flag bit", "client", "0f0708" + "00" + "027b7d" + "00", "malformed", 7),
    ("play seats flag, seats missing", "client", "0f0701" + "00", "malformed", 7),
    ("play attrs not an object", "client", "0f0700" + "00" + "025b5d" + "00", "invalid", 7),
    ("play code flag, code missing", "client", "0f0704" + "00" + "027b7d", "malformed", 7),
    ("play missing data", "client", "0f0700" + "00" + "027b7d", "malformed", 7),
    ("watch missing table", "client", "0c04", "malformed", 4),
    ("watch overlong table", "client", "0c048700", "malformed", 4),
    ("stand trailing byte", "client", "0d050700", "malformed", 5),
    ("act missing data", "client", "0e0607", "malformed", 6),
    ("act data length beyond buffer", "client", "0e06070361", "malformed", 6),
    ("lobby reply attrs not an object", "server", "8901" + "0c" + "01" + "07" + "00" + "0a" + "00" + "00" + "025b5d", "invalid", 1),
    # Two bytes after the empty attrs, so the count check (8 bytes per entry) passes
    # and the attrs check is what fails.
    ("lobby reply attrs empty", "server", "8901" + "0c" + "01" + "07" + "00" + "0a" + "00" + "00" + "00" + "0000", "invalid", 1),
    ("lobby reply attrs with trailing space", "server", "8901" + "0c" + "01" + "07" + "00" + "0a" + "00" + "00" + "037b7d20", "invalid", 1),
    ("lobby reply seats above u32 max", "server", "8901" + "0c" + "01" + "07" + "00" + "8080808010" + "00" + "00" + "027b7d", "invalid", 1),
    ("lobby reply huge count", "server", "8901" + "0c" + "ffffffff0f", "malformed", 1),
    ("lobby reply entry truncated", "server", "8901" + "0c" + "01" + "07" + "00" + "0a", "malformed", 1),
    ("lobby reply trailing byte", "server", "8901" + "0c" + "00" + "00", "malformed", 1),
    ("lobby_off reply trailing byte", "server", "8a0100", "malformed", 1),
    ("sit reply seat above u32 max", "server", "8b02" + "8080808010" + "00", "invalid", 2),
    ("sit reply missing data", "server", "8b0202", "malformed", 2),
    ("watch reply missing data", "server", "8c03", "malformed", 3),
    ("play reply unknown flag bit", "server", "8f04" + "04" + "07" + "00" + "00", "malformed", 4),
    ("play reply code flag, code missing", "server", "8f04" + "01" + "07" + "00", "malformed", 4),
    ("play reply missing data", "server", "8f04" + "00" + "07" + "00", "malformed", 4),
    ("stand reply trailing byte", "server", "8d0400", "malformed", 4),
    ("act reply trailing byte", "server", "8e0500", "malformed", 5),
    ("lobby_update push missing removed", "server", "a500" + "0d" + "00", "malformed", 0),
    ("lobby_update push huge removed count", "server", "a500" + "0d" + "00" + "ffffffff0f", "malformed", 0),
    ("lobby_update push attrs not JSON", "server", "a500" + "0d" + "01" + "07" + "00" + "0a" + "00" + "00" + "027b7b" + "00", "invalid", 0),
    ("lobby_update push trailing byte", "server", "a500" + "0d" + "00" + "00" + "00", "malformed", 0),
    ("game push missing data", "server", "a607", "malformed", 0),
    ("game push trailing byte", "server", "a607" + "0161" + "00", "malformed", 0),
    ("seat push bad status byte", "server", "a707" + "02" + "027531" + "04", "invalid", 0),
    ("seat push status 0xff", "server", "a707" + "02" + "027531" + "ff", "invalid", 0),
    ("seat push missing status", "server", "a707" + "02" + "027531", "malformed", 0),
    ("seat push seat above u32 max", "server", "a707" + "8080808010" + "027531" + "00", "invalid", 0),
    ("seat push user bad UTF-8", "server", "a707" + "02" + "02c328" + "00", "invalid", 0),
    ("unseat push code above u16 max", "server", "a807" + "808004" + "00", "invalid", 0),
    ("unseat push missing reason", "server", "a807" + "73", "malformed", 0),
]

INVALID_JSON = [
    ("empty input", "client", "", "malformed", 0),
    ("not JSON", "client", "ping", "malformed", 0),
    ("JSON array", "client", "[]", "malformed", 0),
    ("JSON number", "client", "5", "malformed", 0),
    ("JSON string", "client", '"ping"', "malformed", 0),
    ("JSON null", "client", "null", "malformed", 0),
    ("empty object", "client", "{}", "malformed", 0),
    ("id only", "client", '{"id":5}', "malformed", 5),
    ("unknown command", "client", '{"id":5,"frob":{}}', "unknown", 5),
    ("unknown command before id", "client", '{"frob":{},"zap":1,"id":6}', "unknown", 6),
    ("truncated object", "client", '{"id":5,"ping":{}', "malformed", 0),
    ("trailing characters", "client", '{"id":5,"ping":{}} x', "malformed", 0),
    ("two objects", "client", '{"id":5,"ping":{}}{}', "malformed", 0),
    ("id above u32 max", "client", '{"id":4294967296,"ping":{}}', "invalid", 0),
    ("negative id", "client", '{"id":-1,"ping":{}}', "invalid", 0),
    ("id as string", "client", '{"id":"5","ping":{}}', "invalid", 0),
    ("fractional id", "client", '{"id":1.5,"ping":{}}', "invalid", 0),
    ("duplicate id", "client", '{"id":1,"id":2,"ping":{}}', "malformed", 0),
    ("two commands", "client", '{"id":6,"ping":{},"presence":{"channel":"c"}}', "malformed", 6),
    ("ping body null", "client", '{"id":9,"ping":null}', "invalid", 9),
    ("ping body array", "client", '{"id":9,"ping":[]}', "invalid", 9),
    ("subscribe missing channel", "client", '{"id":7,"subscribe":{}}', "invalid", 7),
    ("subscribe channel null", "client", '{"id":7,"subscribe":{"channel":null}}', "invalid", 7),
    ("subscribe channel not a string", "client", '{"id":7,"subscribe":{"channel":5}}', "invalid", 7),
    ("subscribe body as array", "client", '{"id":7,"subscribe":["c"]}', "invalid", 7),
    ("subscribe join_leave not a boolean", "client", '{"id":7,"subscribe":{"channel":"c","join_leave":"yes"}}', "invalid", 7),
    ("subscribe recover missing offset", "client", '{"id":7,"subscribe":{"channel":"c","recover":{"epoch":"e"}}}', "invalid", 7),
    ("subscribe recover negative offset", "client", '{"id":7,"subscribe":{"channel":"c","recover":{"epoch":"e","offset":-1}}}', "invalid", 7),
    ("subscribe recover offset above u64 max", "client", '{"id":7,"subscribe":{"channel":"c","recover":{"epoch":"e","offset":18446744073709551616}}}', "invalid", 7),
    ("subscribe recover not an object", "client", '{"id":7,"subscribe":{"channel":"c","recover":5}}', "invalid", 7),
    ("publish without data", "client", '{"id":8,"publish":{"channel":"c"}}', "invalid", 8),
    ("publish without channel", "client", '{"id":8,"publish":{"data":1}}', "invalid", 8),
    ("publish with data and b64", "client", '{"id":8,"publish":{"channel":"c","data":1,"b64":"AA=="}}', "invalid", 8),
    ("publish bad base64", "client", '{"id":8,"publish":{"channel":"c","b64":"!!"}}', "invalid", 8),
    ("publish unpadded base64", "client", '{"id":8,"publish":{"channel":"c","b64":"AA"}}', "invalid", 8),
    ("publish b64 not a string", "client", '{"id":8,"publish":{"channel":"c","b64":5}}', "invalid", 8),
    ("publish data not JSON", "client", '{"id":8,"publish":{"channel":"c","data":01}}', "malformed", 0),
    ("history limit above u32 max", "client", '{"id":9,"history":{"channel":"c","limit":4294967296}}', "invalid", 9),
    ("history limit negative", "client", '{"id":9,"history":{"channel":"c","limit":-5}}', "invalid", 9),
    ("history since epoch not a string", "client", '{"id":9,"history":{"channel":"c","since":{"epoch":1,"offset":1}}}', "invalid", 9),
    ("duplicate key in body", "client", '{"id":12,"subscribe":{"channel":"a","channel":"b"}}', "malformed", 12),
    ("duplicate key in recover", "client", '{"id":12,"subscribe":{"channel":"a","recover":{"epoch":"e","epoch":"f","offset":1}}}', "malformed", 12),
    ("duplicate data", "client", '{"id":12,"publish":{"channel":"a","data":1,"data":2}}', "malformed", 12),
    ("presence missing channel", "client", '{"id":10,"presence":{"room":"c"}}', "invalid", 10),
    ("presence_stats missing channel", "client", '{"id":12,"presence_stats":{}}', "invalid", 12),
    ("server op sent by client", "client", '{"id":11,"pub":{"channel":"c","offset":1,"data":1}}', "unknown", 11),
    ("server: not an object", "server", "[1]", "malformed", 0),
    ("server: unknown op", "server", '{"frob":{}}', "unknown", 0),
    ("server: connect reply missing ping_interval", "server", '{"id":3,"connect":{"client":"c","version":"v"}}', "invalid", 3),
    ("server: publish reply without epoch", "server", '{"id":2,"publish":{"channel":"c","data":1}}', "invalid", 2),
    ("server: history reply without publications", "server", '{"id":4,"history":{"epoch":"e","offset":1}}', "invalid", 4),
    ("server: subscribe reply item as array", "server", '{"id":4,"subscribe":{"epoch":"e","offset":1,"publications":[[1,"x"]]}}', "invalid", 4),
    ("server: subscribe reply item without data", "server", '{"id":4,"subscribe":{"epoch":"e","offset":1,"publications":[{"offset":1}]}}', "invalid", 4),
    ("server: presence client without user", "server", '{"id":4,"presence":{"clients":[{"client":"a"}]}}', "invalid", 4),
    ("server: presence_stats users not a number", "server", '{"id":5,"presence_stats":{"clients":1,"users":"2"}}', "invalid", 5),
    ("server: presence_stats clients negative", "server", '{"id":6,"presence_stats":{"clients":-1,"users":0}}', "invalid", 6),
    ("server: error code above u16 max", "server", '{"id":4,"error":{"code":70000,"message":"m"}}', "invalid", 4),
    ("server: error without message", "server", '{"id":4,"error":{"code":100}}', "invalid", 4),
    ("server: publication without data", "server", '{"pub":{"channel":"c","offset":1}}', "invalid", 0),
    ("server: publication offset as string", "server", '{"pub":{"channel":"c","offset":"1","data":1}}', "invalid", 0),
    ("server: join without user", "server", '{"join":{"channel":"c","client":"a"}}', "invalid", 0),
    ("server: unsubscribed without reason", "server", '{"unsub":{"channel":"c","code":3000}}', "invalid", 0),
    ("server: disconnect code negative", "server", '{"disconnect":{"code":-1,"reason":""}}', "invalid", 0),
    ("lobby path not a string", "client", '{"id":13,"lobby":{"path":5}}', "invalid", 13),
    ("lobby body not an object", "client", '{"id":13,"lobby":"holdem"}', "invalid", 13),
    ("lobby_off path not a string", "client", '{"id":13,"lobby_off":{"path":[]}}', "invalid", 13),
    ("sit missing table", "client", '{"id":14,"sit":{"seat":2}}', "invalid", 14),
    ("sit table negative", "client", '{"id":14,"sit":{"table":-7}}', "invalid", 14),
    ("sit table as string", "client", '{"id":14,"sit":{"table":"7"}}', "invalid", 14),
    ("sit seat above u32 max", "client", '{"id":14,"sit":{"table":7,"seat":4294967296}}', "invalid", 14),
    ("sit seat fractional", "client", '{"id":14,"sit":{"table":7,"seat":1.5}}', "invalid", 14),
    ("sit with data and b64", "client", '{"id":14,"sit":{"table":7,"data":1,"b64":"AA=="}}', "invalid", 14),
    ("sit bad base64", "client", '{"id":14,"sit":{"table":7,"b64":"A"}}', "invalid", 14),
    ("sit duplicate seat", "client", '{"id":14,"sit":{"table":7,"seat":1,"seat":2}}', "malformed", 14),
    ("watch missing table", "client", '{"id":15,"watch":{}}', "invalid", 15),
    ("watch table above u64 max", "client", '{"id":15,"watch":{"table":18446744073709551616}}', "invalid", 15),
    ("stand missing table", "client", '{"id":16,"stand":{"seat":1}}', "invalid", 16),
    ("act missing data", "client", '{"id":17,"act":{"table":7}}', "invalid", 17),
    ("act missing table", "client", '{"id":17,"act":{"data":{}}}', "invalid", 17),
    ("game push sent by client", "client", '{"id":18,"game":{"table":7,"data":1}}', "unknown", 18),
    ("server: lobby reply without tables", "server", '{"id":5,"lobby":{"seq":1}}', "invalid", 5),
    ("server: lobby reply without seq", "server", '{"id":5,"lobby":{"tables":[]}}', "invalid", 5),
    ("server: lobby reply tables not an array", "server", '{"id":5,"lobby":{"seq":1,"tables":{}}}', "invalid", 5),
    ("server: lobby entry attrs not an object", "server", '{"id":5,"lobby":{"seq":1,"tables":[{"table":7,"path":"p","seats":2,"players":0,"watchers":0,"attrs":[1]}]}}', "invalid", 5),
    ("play attrs a string", "client", '{"id":7,"play":{"game":"holdem","seats":6,"attrs":"{}"}}', "invalid", 7),
    ("play seats negative", "client", '{"id":7,"play":{"game":"holdem","seats":-1}}', "invalid", 7),
    ("play private not a boolean", "client", '{"id":7,"play":{"game":"holdem","seats":6,"private":1}}', "invalid", 7),
    ("play code a number", "client", '{"id":7,"play":{"code":123456}}', "invalid", 7),
    ("server: play reply without seat", "server", '{"id":5,"play":{"table":7,"data":{}}}', "invalid", 5),
    ("server: lobby entry attrs a string", "server", '{"id":5,"lobby":{"seq":1,"tables":[{"table":7,"path":"p","seats":2,"players":0,"watchers":0,"attrs":"{}"}]}}', "invalid", 5),
    ("server: lobby entry without attrs", "server", '{"id":5,"lobby":{"seq":1,"tables":[{"table":7,"path":"p","seats":2,"players":0,"watchers":0}]}}', "invalid", 5),
    ("server: lobby entry without table", "server", '{"id":5,"lobby":{"seq":1,"tables":[{"path":"p","seats":2,"players":0,"watchers":0,"attrs":{}}]}}', "invalid", 5),
    ("server: lobby entry seats above u32 max", "server", '{"id":5,"lobby":{"seq":1,"tables":[{"table":7,"path":"p","seats":4294967296,"players":0,"watchers":0,"attrs":{}}]}}', "invalid", 5),
    ("server: lobby entry duplicate key in attrs", "server", '{"id":5,"lobby":{"seq":1,"tables":[{"table":7,"path":"p","seats":2,"players":0,"watchers":0,"attrs":{},"attrs":{}}]}}', "malformed", 5),
    ("server: sit reply without seat", "server", '{"id":6,"sit":{"data":{}}}', "invalid", 6),
    ("server: sit reply without data", "server", '{"id":6,"sit":{"seat":1}}', "invalid", 6),
    ("server: watch reply without data", "server", '{"id":6,"watch":{}}', "invalid", 6),
    ("server: lobby_update without removed", "server", '{"lobby_update":{"path":"","seq":1,"tables":[]}}', "invalid", 0),
    ("server: lobby_update without path", "server", '{"lobby_update":{"seq":1,"tables":[],"removed":[]}}', "invalid", 0),
    ("server: lobby_update removed not integers", "server", '{"lobby_update":{"path":"","seq":1,"tables":[],"removed":["4"]}}', "invalid", 0),
    ("server: lobby_update removed negative", "server", '{"lobby_update":{"path":"","seq":1,"tables":[],"removed":[-4]}}', "invalid", 0),
    ("server: game push without table", "server", '{"game":{"data":1}}', "invalid", 0),
    ("server: game push without data", "server", '{"game":{"table":7}}', "invalid", 0),
    ("server: seat push unknown status", "server", '{"seat":{"table":7,"seat":2,"user":"u1","status":"gone"}}', "invalid", 0),
    ("server: seat push status as number", "server", '{"seat":{"table":7,"seat":2,"user":"u1","status":2}}', "invalid", 0),
    ("server: seat push without status", "server", '{"seat":{"table":7,"seat":2,"user":"u1"}}', "invalid", 0),
    ("server: seat push seat above u32 max", "server", '{"seat":{"table":7,"seat":4294967296,"user":"u1","status":"sat"}}', "invalid", 0),
    ("server: unseat push without code", "server", '{"unseat":{"table":7,"reason":""}}', "invalid", 0),
]


def invalid():
    out = []
    for name, direction, hexin, error, id in INVALID_BINARY:
        bytes.fromhex(hexin)  # sanity: it is hex
        out.append({"name": name, "direction": direction, "encoding": "binary",
                    "input": hexin, "error": error, "id": id})
    for name, direction, text, error, id in INVALID_JSON:
        out.append({"name": name, "direction": direction, "encoding": "json",
                    "input": text, "error": error, "id": id})
    return out


def write(path, entries):
    with open(path, "w", encoding="utf-8") as f:
        f.write("[\n")
        f.write(",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in entries))
        f.write("\n]\n")


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    names = [n for n, _ in CLIENT + CLIENT_BINARY_ONLY + SERVER + SERVER_BINARY_ONLY]
    assert len(names) == len(set(names)), "vector names must be unique"
    write(os.path.join(here, "messages.json"), messages())
    write(os.path.join(here, "invalid.json"), invalid())
