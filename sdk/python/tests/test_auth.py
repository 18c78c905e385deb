"""Authentication against the real server (docs/protocol.md §5d): a server
with an HS256 key and a private namespace (``private:*`` needs a grant).
Connection tokens, subscribe tokens (fixed, and a function asked before every
(re)subscribe), and each refusal's code, in both encodings over WebSocket and
raw TCP. Tokens are minted here with the standard library, and one with
``herald token``, so the SDK is checked against what the server's own minting
produces too."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Server, herald_bin
from helpers import FAST, SECRET, Proxy, jwt, user_token, wait_until

from herald_client import (
    Client,
    ClientClosedError,
    Join,
    PermissionDeniedError,
    Publication,
    State,
    Subscribed,
    TokenExpiredError,
    UnauthorizedError,
    Unsubscribed,
)

MODES = [("ws", "json"), ("ws", "binary"), ("tcp", "binary")]
IDS = [f"{t}-{e}" for t, e in MODES]


def sub_token(sub: str, channel: str, ttl: int = 3600) -> str:
    return jwt({"sub": sub, "channel": channel, "exp": int(time.time()) + ttl})


@pytest.fixture(scope="module")
def auth_server() -> Iterator[Server]:
    """A server that requires tokens, with ``private`` needing a grant to subscribe."""
    fd, name = tempfile.mkstemp(prefix="herald-auth-", suffix=".toml")
    with os.fdopen(fd, "w") as f:
        f.write(f'token_hmac_secret = "{SECRET}"\n\n[[namespaces]]\nname = "private"\nsubscribe = "grant"\n')
    s = Server(herald_bin(), extra=["--config", name])
    s.start()
    yield s
    s.stop()
    Path(name).unlink(missing_ok=True)


def url_of(server: Server, transport: str) -> str:
    return server.ws_url if transport == "ws" else server.tcp_url


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=IDS)
async def test_connect_without_a_token_is_refused(auth_server: Server, transport: str, encoding: str) -> None:
    """101 (then close 3500): final, no reconnect."""
    c = Client(url_of(auth_server, transport), encoding=encoding, reconnect=FAST)  # type: ignore[arg-type]
    with pytest.raises(UnauthorizedError) as e:
        await c.connect()
    assert e.value.code == 101
    assert c.state is State.CLOSED
    with pytest.raises(ClientClosedError):
        await c.ping()
    await c.close()


async def test_connect_with_a_forged_token_is_refused(auth_server: Server) -> None:
    c = Client(auth_server.ws_url, token=jwt({"sub": "eve"}, secret="x" * 40), reconnect=FAST)
    with pytest.raises(UnauthorizedError):
        await c.connect()
    await c.close()


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=IDS)
async def test_private_channel_needs_a_subscribe_token(
    auth_server: Server, transport: str, encoding: str
) -> None:
    channel = f"private:{transport}-{encoding}"
    url = url_of(auth_server, transport)
    got: list[Publication] = []
    async with (
        Client(url, encoding=encoding, token=user_token("alice")) as alice,  # type: ignore[arg-type]
        Client(auth_server.ws_url, token=user_token("bob")) as publisher,
    ):
        # Connected with a token: the server knows the user.
        await alice.subscribe(f"public-{transport}-{encoding}")
        members = await alice.presence(f"public-{transport}-{encoding}")
        assert [m.user for m in members] == ["alice"]

        # No subscribe token: 104, and the connection stays usable.
        with pytest.raises(PermissionDeniedError) as e:
            await alice.subscribe(channel)
        assert e.value.code == 104
        assert channel not in alice.subscriptions
        # A token for another channel, or another user's token: 104 too.
        with pytest.raises(PermissionDeniedError):
            await alice.subscribe(channel, token=sub_token("alice", "private:other"))
        with pytest.raises(PermissionDeniedError):
            await alice.subscribe(channel, token=sub_token("bob", channel))
        # An expired one: 112.
        with pytest.raises(TokenExpiredError) as expired:
            await alice.subscribe(channel, token=sub_token("alice", channel, ttl=-60))
        assert expired.value.code == 112
        assert alice.state is State.CONNECTED

        # With its subscribe token: subscribed, and publications arrive.
        await alice.subscribe(channel, got.append, token=sub_token("alice", channel))
        await publisher.publish(channel, {"n": 1})
        await wait_until(lambda: len(got) == 1, what="the publication")
        assert got[0].json() == {"n": 1}


async def test_subscribe_token_minted_by_herald_token(auth_server: Server) -> None:
    """`herald token --subscribe` mints what the server accepts, and the SDK carries it."""
    channel = "private:minted"

    def mint(*args: str) -> str:
        out = subprocess.run(
            [str(herald_bin()), "token", "--user", "carol", "--ttl", "10m", *args],
            env={**os.environ, "HERALD_TOKEN_HMAC_SECRET": SECRET},
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip()

    async with Client(auth_server.tcp_url, encoding="binary", token=mint()) as c:
        sub = await c.subscribe(channel, token=mint("--subscribe", "--channel", channel))
        assert sub.active


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=IDS)
async def test_info_claim_shows_in_presence_and_join(
    auth_server: Server, transport: str, encoding: str
) -> None:
    """The connection token's ``info`` claim (here minted by ``herald token
    --info``) is what presence and join pushes show beside the user id."""
    channel = f"info-{transport}-{encoding}"
    info = {"name": "Carol \u00e9", "seat": 3}
    minted = subprocess.run(
        [str(herald_bin()), "token", "--user", "carol", "--info", json.dumps(info)],
        env={**os.environ, "HERALD_TOKEN_HMAC_SECRET": SECRET},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    joins: list[Join] = []
    url = url_of(auth_server, transport)
    async with Client(url, encoding=encoding, token=user_token("watcher")) as watcher:  # type: ignore[arg-type]
        await watcher.subscribe(channel, join_leave=True, on_join=joins.append)
        async with Client(auth_server.ws_url, token=minted) as carol:
            await carol.subscribe(channel)
            await wait_until(lambda: len(joins) == 1, what="carol's join")
            assert (joins[0].user, joins[0].info_json()) == ("carol", info)
            members = {m.user: m.info_json() for m in await watcher.presence(channel)}
            assert members == {"carol": info, "watcher": None}
            stats = await watcher.presence_stats(channel)
            assert (stats.clients, stats.users) == (2, 2)


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=IDS)
async def test_subscribe_token_function_is_asked_on_every_resubscribe(
    auth_server: Server, transport: str, encoding: str
) -> None:
    """After a dropped connection the client re-subscribes with a fresh
    subscribe token (the first one may have expired meanwhile), and recovers."""
    channel = f"private:fresh-{transport}-{encoding}"
    proxy = Proxy(auth_server.http_port if transport == "ws" else auth_server.tcp_port)
    await proxy.start()
    url = f"ws://127.0.0.1:{proxy.port}/ws" if transport == "ws" else f"tcp://127.0.0.1:{proxy.port}"
    asked: list[str] = []

    async def fresh(ch: str) -> str:
        asked.append(ch)
        return sub_token("dave", ch)

    got: list[Publication] = []
    subscribed: list[Subscribed] = []
    c = Client(url, encoding=encoding, token=lambda: user_token("dave"), reconnect=FAST)  # type: ignore[arg-type]
    try:
        async with Client(auth_server.ws_url, token=user_token("pub")) as publisher:
            await c.connect()
            await c.subscribe(channel, got.append, token=fresh, on_subscribed=subscribed.append)
            assert asked == [channel]
            await publisher.publish(channel, {"n": 1})
            await wait_until(lambda: len(got) == 1, what="the first publication")

            await proxy.stop()
            await wait_until(lambda: c.state is not State.CONNECTED, what="the drop")
            await publisher.publish(channel, {"n": 2})  # missed while away: recovered
            await proxy.start()
            await wait_until(lambda: len(subscribed) == 2, what="the re-subscription")
            await publisher.publish(channel, {"n": 3})
            await wait_until(lambda: len(got) == 3, what="every publication")
        assert asked == [channel, channel]
        assert [p.json()["n"] for p in got] == [1, 2, 3]
        assert subscribed[1].recovered
    finally:
        await c.close()
        await proxy.stop()


async def test_failing_subscribe_token_function(auth_server: Server) -> None:
    """A token function that raises: subscribe() raises its error, nothing is sent."""

    def broken(channel: str) -> str:
        raise RuntimeError(f"no token for {channel}")

    async with Client(auth_server.ws_url, token=user_token("erin")) as c:
        with pytest.raises(RuntimeError, match="no token for private:x"):
            await c.subscribe("private:x", token=broken)
        assert "private:x" not in c.subscriptions
        with pytest.raises(TypeError):
            await c.subscribe("private:y", token=lambda ch: 42)  # type: ignore[arg-type,return-value]
        assert await c.ping() >= 0


async def test_subscribe_token_function_failing_on_resubscribe(auth_server: Server) -> None:
    """The function fails after a reconnect: the subscription ends, and
    ``on_unsubscribed`` says why (code 101); the client itself stays up."""
    proxy = Proxy(auth_server.http_port)
    await proxy.start()
    calls = 0

    def once(channel: str) -> str:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise RuntimeError("token service down")
        return sub_token("fay", channel)

    ended: list[Unsubscribed] = []
    c = Client(f"ws://127.0.0.1:{proxy.port}/ws", token=user_token("fay"), reconnect=FAST)
    try:
        await c.connect()
        sub = await c.subscribe("private:once", token=once, on_unsubscribed=ended.append)
        await proxy.stop()
        await wait_until(lambda: c.state is not State.CONNECTED, what="the drop")
        await proxy.start()
        await wait_until(lambda: sub.ended and len(ended) == 1, what="the subscription to end")
        assert ended[0].code == 101 and "token service down" in ended[0].reason
        assert "private:once" not in c.subscriptions
        assert c.state is State.CONNECTED
        assert await c.ping() >= 0
    finally:
        await c.close()
        await proxy.stop()
