"""``python -m herald_client``: the command-line client other languages' tests spawn."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from conftest import Server

from herald_client import Client


async def cli(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "herald_client",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def read_json_line(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 10)
    assert line, "the CLI exited early"
    value: dict[str, Any] = json.loads(line)
    return value


@pytest.mark.parametrize("transport", ["ws", "tcp"])
async def test_subscribe_and_publish(server: Server, transport: str) -> None:
    url = server.ws_url if transport == "ws" else server.tcp_url
    channel = f"cli.{transport}"
    sub = await cli("subscribe", url, channel, "--count", "2")
    try:
        first = (await read_json_line(sub))["subscribed"]
        assert (first["channel"], first["offset"], first["recovered"]) == (channel, 0, False)

        pub = await cli("publish", url, channel, '{"text": "hi"}')
        out, err = await asyncio.wait_for(pub.communicate(), 10)
        assert pub.returncode == 0, err
        reply = json.loads(out)
        async with Client(server.ws_url) as c:
            await c.publish(channel, b"\x00binary")

        offset = reply["offset"]
        text = {"channel": channel, "offset": offset, "data": {"text": "hi"}}
        binary = {"channel": channel, "offset": offset + 1, "b64": "AGJpbmFyeQ=="}
        assert await read_json_line(sub) == {"pub": text}
        assert await read_json_line(sub) == {"pub": binary}
        assert await asyncio.wait_for(sub.wait(), 10) == 0
    finally:
        if sub.returncode is None:
            sub.kill()
            await sub.wait()


async def test_errors_exit_non_zero(server: Server) -> None:
    bad_channel = await cli("publish", server.ws_url, "bad channel", "1")
    _, err = await asyncio.wait_for(bad_channel.communicate(), 10)
    assert bad_channel.returncode == 1 and b"InvalidChannelError" in err

    not_json = await cli("publish", server.ws_url, "cli.x", "not json")
    _, err = await asyncio.wait_for(not_json.communicate(), 10)
    assert not_json.returncode == 2 and b"--text" in err

    usage = await cli("subscribe")
    await asyncio.wait_for(usage.communicate(), 10)
    assert usage.returncode == 2
