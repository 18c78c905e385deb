"""Publish/subscribe, history, presence and ping against the real server,
in both encodings, over WebSocket and raw TCP."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from conftest import Server
from helpers import wait_until

from herald_client import Client, InvalidChannelError, Join, Leave, PresenceStatsResult, Publication, State

MODES = [("ws", "json"), ("ws", "binary"), ("tcp", "binary")]


def url_of(server: Server, transport: str) -> str:
    return server.ws_url if transport == "ws" else server.tcp_url


@pytest.mark.parametrize(("transport", "encoding"), MODES, ids=[f"{t}-{e}" for t, e in MODES])
async def test_publish_and_receive(server: Server, transport: str, encoding: str) -> None:
    channel = f"pubsub.{transport}.{encoding}"
    got: list[Publication] = []
    async with Client(url_of(server, transport), encoding=encoding) as c:  # type: ignore[arg-type]
        assert c.state is State.CONNECTED
        sub = await c.subscribe(channel, got.append)
        first = await c.publish(channel, {"text": "hi", "n": [1, 2]})
        second = await c.publish(channel, b"\x00\xff binary")
        third = await c.publish(channel, "a string")
        assert first.epoch == second.epoch == third.epoch
        assert [first.offset + 1, first.offset + 2] == [second.offset, third.offset]
        await wait_until(lambda: len(got) == 3, what="three publications")
        assert [p.data for p in got] == [b'{"text":"hi","n":[1,2]}', b"\x00\xff binary", b'"a string"']
        assert [p.offset for p in got] == [first.offset, second.offset, third.offset]
        assert got[0].json() == {"text": "hi", "n": [1, 2]}
        assert sub.position == (third.epoch, third.offset)


async def test_json_and_binary_clients_see_the_same_bytes(server: Server) -> None:
    channel = "pubsub.cross"
    async with (
        Client(server.ws_url, encoding="json") as j,
        Client(server.ws_url, encoding="binary") as b,
        Client(server.tcp_url, encoding="binary") as t,
    ):
        subs = [await c.subscribe(channel) for c in (j, b, t)]
        payloads = [b'{"a": [1, 2]}', b"\x00\x01\x02", b"", b"not json", b"12"]
        for i, data in enumerate(payloads):
            await (j, b, t)[i % 3].publish(channel, data)
        for sub in subs:
            seen = []
            async with asyncio.timeout(5):
                async for pub in sub:
                    seen.append(pub.data)
                    if len(seen) == len(payloads):
                        break
            assert seen == payloads


async def test_async_iteration_ends_on_unsubscribe(server: Server) -> None:
    async with Client(server.ws_url) as c:
        sub = await c.subscribe("pubsub.iter")
        await c.publish("pubsub.iter", 1)
        await c.publish("pubsub.iter", 2)

        async def consume() -> list[object]:
            return [p.json() async for p in sub]

        task = asyncio.create_task(consume())
        await wait_until(lambda: sub._pubs.empty(), what="publications consumed")
        await c.unsubscribe("pubsub.iter")
        assert await asyncio.wait_for(task, 5) == [1, 2]
        assert sub.ended and "pubsub.iter" not in c.subscriptions


async def test_history_presence_ping(server: Server) -> None:
    channel = "pubsub.history"
    async with Client(server.tcp_url, encoding="binary", name="tester") as c:
        positions = [await c.publish(channel, {"i": i}) for i in range(5)]
        h = await c.history(channel)
        assert (h.epoch, h.offset) == positions[-1]
        assert [p.json() for p in h.publications] == [{"i": i} for i in range(5)]
        since = await c.history(channel, since=positions[1], limit=2)
        assert [p.offset for p in since.publications] == [positions[2].offset, positions[3].offset]

        await c.subscribe(channel)
        clients = await c.presence(channel)
        assert c.client_id in [x.client for x in clients]
        assert await c.ping() >= 0


@pytest.mark.parametrize("encoding", ["json", "binary"])
async def test_presence_stats(server: Server, encoding: Literal["json", "binary"]) -> None:
    channel = f"pubsub.stats.{encoding}"
    async with Client(server.ws_url, encoding=encoding) as a, Client(server.tcp_url, encoding="binary") as b:
        assert await a.presence_stats(channel) == PresenceStatsResult(0, 0)
        await a.subscribe(channel)
        await b.subscribe(channel)
        assert await a.presence_stats(channel) == PresenceStatsResult(2, 0)  # anonymous: no users
        await b.unsubscribe(channel)
        assert await a.presence_stats(channel) == PresenceStatsResult(1, 0)
        with pytest.raises(InvalidChannelError):
            await a.presence_stats("pubsub.*")


async def test_wildcard_subscription(server: Server) -> None:
    got: list[Publication] = []
    async with Client(server.ws_url) as watcher, Client(server.ws_url, encoding="binary") as other:
        await watcher.subscribe("wild.*", got.append)
        await other.publish("wild.room", 1)
        await other.publish("wild.other", 2)
        await other.publish("wild.deep.no", 3)
        await other.publish("tame.room", 4)
        # Through the pattern: wild.room and wild.other only.
        await wait_until(lambda: len(got) == 2, what="pattern publications")
        await asyncio.sleep(0.1)
        assert sorted((p.channel, p.json()) for p in got) == [("wild.other", 2), ("wild.room", 1)]


async def test_join_and_leave(server: Server) -> None:
    joins: list[Join] = []
    leaves: list[Leave] = []
    async with Client(server.ws_url) as watcher:
        await watcher.subscribe("room.1", join_leave=True, on_join=joins.append, on_leave=leaves.append)
        other = Client(server.tcp_url, encoding="binary")
        await other.connect()
        await other.subscribe("room.1")
        other_id = other.client_id
        await wait_until(lambda: any(j.client == other_id for j in joins), what="join")
        await other.close()
        await wait_until(lambda: any(x.client == other_id for x in leaves), what="leave")


async def test_subscribe_from_a_saved_position(server: Server) -> None:
    channel = "pubsub.since"
    async with Client(server.ws_url) as c:
        positions = [await c.publish(channel, i) for i in range(4)]
        got: list[Publication] = []
        sub = await c.subscribe(channel, got.append, since=positions[1])
        await wait_until(lambda: len(got) == 2, what="recovered publications")
        assert [p.json() for p in got] == [2, 3]
        assert sub.position == positions[-1]


async def test_slow_application_loses_nothing(server: Server) -> None:
    """A subscription whose application reads slowly: its bounded queue
    (max_queue) fills, the client waits for it, and every publication still
    arrives once, in order."""
    channel = "pubsub.slow"
    async with (
        Client(server.tcp_url, encoding="binary", max_queue=4) as c,
        Client(server.ws_url) as publisher,
    ):
        sub = await c.subscribe(channel)
        for i in range(50):
            await publisher.publish(channel, i)
        await wait_until(lambda: sub._pubs.full(), what="a full queue")
        assert sub._pubs.qsize() == 4 and sub._inbox.qsize() <= 4  # bounded
        seen = []
        async with asyncio.timeout(10):
            async for pub in sub:
                seen.append(pub.json())
                await asyncio.sleep(0.001)
                if len(seen) == 50:
                    break
        assert seen == list(range(50))
        await c.ping()


async def test_close_from_a_callback(server: Server) -> None:
    """close() called inside a subscription's own callback does not wait for itself."""
    c = Client(server.ws_url)
    closed = asyncio.Event()

    async def on_pub(pub: Publication) -> None:
        await c.close()
        closed.set()

    await c.subscribe("pubsub.close.inside", on_pub)
    async with Client(server.ws_url) as publisher:
        await publisher.publish("pubsub.close.inside", 1)
    await asyncio.wait_for(closed.wait(), 0.9)  # close() waits up to 1 s for other tasks
    assert c.state is State.CLOSED


async def test_unsubscribing_a_full_subscription_does_not_block(server: Server) -> None:
    """The reader waits for a full subscription queue, but not for one the
    application dropped: unsubscribe() and other commands go on, and the
    iterator still yields what was queued, in order, then ends."""
    channel = "pubsub.abandoned"
    async with (
        Client(server.tcp_url, encoding="binary", max_queue=2, request_timeout=5) as c,
        Client(server.ws_url) as publisher,
    ):
        sub = await c.subscribe(channel)
        for i in range(20):
            await publisher.publish(channel, i)
        await wait_until(lambda: sub._inbox.full() and sub._pubs.full(), what="full queues")
        await asyncio.wait_for(c.unsubscribe(channel), 3)
        await asyncio.wait_for(c.ping(), 3)
        rest = [p.json() async for p in sub]
        assert 4 <= len(rest) < 20 and rest == list(range(len(rest)))
        assert sub.ended and c.subscriptions == {}


@pytest.mark.parametrize("url", ["ws", "tcp"])
async def test_connect_with_a_token(server: Server, url: str) -> None:
    """A server without authentication configured accepts any token (and the
    user of every connection is "")."""
    encoding = "json" if url == "ws" else "binary"
    async with Client(url_of(server, url), encoding=encoding, token="some.jwt.token", name="n") as c:  # type: ignore[arg-type]
        await c.subscribe(f"pubsub.token.{url}")
        clients = await c.presence(f"pubsub.token.{url}")
        assert [(x.client, x.user) for x in clients] == [(c.client_id, "")]
