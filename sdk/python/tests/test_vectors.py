"""The shared protocol vectors (spec/vectors, docs/protocol.md §9), both encodings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from herald_client import binary_codec, json_codec
from herald_client.errors import DecodeError

VECTORS = Path(__file__).resolve().parent / "../../../spec/vectors"


def _load(name: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    return data


MESSAGES = _load("messages.json")
INVALID = _load("invalid.json")


def test_vector_files_are_not_empty() -> None:
    assert len(MESSAGES) > 50
    assert len(INVALID) > 100


@pytest.mark.parametrize("v", MESSAGES, ids=[v["name"] for v in MESSAGES])
def test_message_vector(v: dict[str, Any]) -> None:
    client = v["direction"] == "client"
    bin_decode = binary_codec.decode_command if client else binary_codec.decode_server
    json_decode = json_codec.decode_command if client else json_codec.decode_server

    raw = bytes.fromhex(v["binary"])
    from_binary = bin_decode(raw)
    assert binary_codec.encode(from_binary) == raw

    if "json" in v:
        text = v["json"]
        from_json = json_decode(text)
        assert from_json == from_binary
        assert json_codec.encode(from_json) == text
        # The same text as UTF-8 bytes decodes the same.
        assert json_decode(text.encode("utf-8")) == from_binary


@pytest.mark.parametrize("v", INVALID, ids=[f"{v['encoding']}: {v['name']}" for v in INVALID])
def test_invalid_vector(v: dict[str, Any]) -> None:
    client = v["direction"] == "client"
    if v["encoding"] == "binary":
        decode = binary_codec.decode_command if client else binary_codec.decode_server
        arg: str | bytes = bytes.fromhex(v["input"])
    else:
        decode = json_codec.decode_command if client else json_codec.decode_server  # type: ignore[assignment]
        arg = v["input"]
    with pytest.raises(DecodeError) as info:
        decode(arg)  # type: ignore[arg-type]
    assert info.value.kind == v["error"], str(info.value)
    assert info.value.id == v["id"], str(info.value)
