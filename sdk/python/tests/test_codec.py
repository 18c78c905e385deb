"""Codec behaviour beyond the shared vectors: tolerant JSON decoding (§3.1),
payload embedding (§3.3), and round trips of every message in both encodings."""

from __future__ import annotations

import pytest

from herald_client import binary_codec, json_codec
from herald_client.codec import Encoding, decode_command, decode_server, encode
from herald_client.errors import DecodeError
from herald_client.messages import (
    ClientInfo,
    Command,
    Connect,
    ConnectReply,
    Disconnect,
    ErrorReply,
    History,
    HistoryReply,
    Item,
    Join,
    Leave,
    Ping,
    PingReply,
    Position,
    Presence,
    PresenceReply,
    Publication,
    Publish,
    PublishReply,
    ServerMessage,
    Subscribe,
    SubscribeReply,
    Unsubscribe,
    Unsubscribed,
    UnsubscribeReply,
)


def test_json_decoding_is_tolerant() -> None:
    text = (
        ' { "subscribe" : { "join_leave": false, "x": [1, {"y": 2}], "channel" : "c",'
        ' "recover": {"offset": 3, "z": null, "epoch": "e"} }, "extra": 1, "id": 7 } '
    )
    assert json_codec.decode_command(text) == Subscribe(7, "c", Position("e", 3), False)
    assert json_codec.decode_command('{"id":null,"ping":{}}') == Ping(0)
    assert json_codec.decode_command('{"connect":{"token":null,"name":"n"}}') == Connect(0, None, "n")
    # A push's id is ignored.
    assert json_codec.decode_server('{"disconnect":{"code":1001,"reason":""},"id":3}') == Disconnect(1001, "")


def test_json_data_is_kept_verbatim() -> None:
    m = json_codec.decode_command('{"publish":{"channel":"c","data": {"b" : [1, 2.50] } }}')
    assert m == Publish(0, "c", b'{"b" : [1, 2.50] }')
    assert json_codec.decode_command('{"publish":{"channel":"c","data":null}}') == Publish(0, "c", b"null")
    deep = "[" * 300 + "]" * 300
    assert json_codec.decode_server(f'{{"pub":{{"channel":"c","offset":1,"data":{deep}}}}}') == Publication(
        "c", 1, deep.encode()
    )


@pytest.mark.parametrize(
    ("data", "verbatim"),
    [
        (b'{"a":1}', True),
        (b'"\xc3\xa9"', True),
        (b"-1.5e3", True),
        (b"true", True),
        (b"[" * 128 + b"]" * 128, True),
        (b"[" * 129 + b"]" * 129, False),  # deeper than the Rust encoder embeds
        (b"", False),
        (b" 1", False),
        (b"1 ", False),
        (b"NaN", False),
        (b"Infinity", False),
        (b"01", False),
        (b"1 2", False),
        (b'"\x00"', False),  # a raw control character in a string
        (b"\xff", False),
        (b"{'a':1}", False),
    ],
)
def test_payload_embedding(data: bytes, verbatim: bool) -> None:
    assert json_codec.is_json(data) is verbatim
    text = json_codec.encode(Publish(1, "c", data))
    assert ('"data":' in text) is verbatim
    assert json_codec.decode_command(text) == Publish(1, "c", data)


def test_json_strings_with_escapes_and_surrogates() -> None:
    assert json_codec.decode_command('{"subscribe":{"channel":"\\u00e9\\ud83d\\ude00"}}') == Subscribe(
        0, "é😀"
    )
    with pytest.raises(DecodeError) as info:
        json_codec.decode_command('{"id":2,"subscribe":{"channel":"\\ud800"}}')
    assert (info.value.kind, info.value.id) == ("invalid", 2)


COMMANDS: list[Command] = [
    Connect(1, "tok", "name"),
    Connect(0),
    Subscribe(2, "ch", Position("ep", 2**53 - 1), True),
    Subscribe(3, "ch"),
    Unsubscribe(4, "ch"),
    Publish(5, "ch", b"\x00\x01"),
    Publish(6, "ch", b'{"x":[1,2,3]}'),
    Ping(2**32 - 1),
    History(7, "ch", Position("ep", 0), 10),
    History(8, "ch"),
    Presence(9, "ch"),
]
SERVER: list[ServerMessage] = [
    ConnectReply(1, "c", "0.1.0", 25),
    SubscribeReply(2, "ep", 9, True, (Item(8, b"1"), Item(9, b"\xfe"))),
    SubscribeReply(3, "", 0),
    UnsubscribeReply(4),
    PublishReply(5, "ep", 10),
    PingReply(6),
    HistoryReply(7, "ep", 3, (Item(3, b""),)),
    HistoryReply(8, "ep", 0),
    PresenceReply(9, (ClientInfo("a", "u"), ClientInfo("b", ""))),
    PresenceReply(10),
    ErrorReply(11, 109, "invalid channel"),
    Publication("ch", 2**53 - 1, b"[]"),
    Join("ch", "c", "u"),
    Leave("ch", "c", "u"),
    Unsubscribed("ch", 3001, "slow"),
    Disconnect(1001, "going away"),
]


@pytest.mark.parametrize("encoding", list(Encoding))
@pytest.mark.parametrize("m", COMMANDS, ids=repr)
def test_command_round_trip(m: Command, encoding: Encoding) -> None:
    frame = encode(m, encoding)
    assert isinstance(frame, str if encoding is Encoding.JSON else bytes)
    assert decode_command(frame, encoding) == m


@pytest.mark.parametrize("encoding", list(Encoding))
@pytest.mark.parametrize("m", SERVER, ids=repr)
def test_server_round_trip(m: ServerMessage, encoding: Encoding) -> None:
    assert decode_server(encode(m, encoding), encoding) == m


def test_binary_examples_from_the_protocol_doc() -> None:
    assert binary_codec.encode(Ping(5)) == bytes.fromhex("0505")
    push = Publication("news", 8, b"hi")
    assert binary_codec.encode(push) == bytes.fromhex("a0 04 6e 65 77 73 08 02 68 69")
