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
            if k == "info" and isinstance(x, bytes):
                parts.append('"info":' + x.decode("utf-8"))  # always JSON text
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
    raise ValueError(op)


def items(pubs):
    out = varint(len(pubs))
    for p in pubs:
        out += varint(p["offset"]) + blob(p["data"])
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
]

CLIENT_BINARY_ONLY = [
    ("subscribe recover, offset u64 max", subscribe(1, "a", pos("e", U64))),
    ("history since offset 2^63", history(2, "a", pos("e", 2**63))),
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
]

SERVER_BINARY_ONLY = [
    ("publication push, offset u64 max", msg(0, "pub", {"channel": "c", "offset": U64, "data": b"1"})),
    ("subscribe reply, offsets u64 max", sub_reply(1, "e", U64, True, [item(U64, b"x")])),
    ("publish reply, offset 2^63", msg(2, "publish", {"epoch": "e", "offset": 2**63})),
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
    ("unknown type 0x0f", "client", "0f01", "unknown", 0),
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
    ("unknown reply type 0x8f", "server", "8f01", "unknown", 0),
    ("command type sent by server", "server", "0501", "unknown", 0),
    ("unknown push type 0xa9", "server", "a9", "unknown", 0),
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
