"""``play`` (docs/protocol.md §5f) through :meth:`Client.play` against the real
server, in both encodings, over WebSocket and raw TCP: join or create fills a
table and opens another only when it is full; a private table is joined by
its code and by nobody else; each refusal raises its numbered
:class:`ReplyError` (121 unknown code, 120 unknown game, 116 full or a
``sit`` at a table made by ``play``, 103 bad arguments, 107 a cap: the
:class:`LimitExceededError` leaf); and a played seat, held by the token's
user, outlives a dropped connection and is taken back with ``sit``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import Server, herald_bin
from helpers import FAST, SECRET, Proxy, user_token, wait_until

from herald_client import Client, ErrorCode, LimitExceededError, PlayReply, ReplyError, Seat, State

# Each mode plays at its own timing profile (another attribute, so other
# tables): the modes share one server.
MODES = [("ws", "json", "normal"), ("ws", "binary", "express"), ("tcp", "binary", "super-express")]
IDS = [f"{t}-{e}" for t, e, _ in MODES]
CODE = re.compile(r"[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{6}")


@contextlib.asynccontextmanager
async def clients(server: Server, transport: str, encoding: Any, n: int) -> AsyncIterator[list[Client]]:
    url = server.ws_url if transport == "ws" else server.tcp_url
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(Client(url, encoding=encoding)) for _ in range(n)]


async def refused(call: Any, code: int) -> None:
    with pytest.raises(ReplyError) as info:
        await call
    assert info.value.code == code, info.value


@pytest.mark.parametrize(("transport", "encoding", "timing"), MODES, ids=IDS)
async def test_seven_players_fill_one_six_seat_table_and_open_another(
    server: Server, transport: str, encoding: str, timing: str
) -> None:
    async with clients(server, transport, encoding, 7) as players:
        attrs = {"timing": timing}
        got = await asyncio.gather(*(p.play("holdem", 6, attrs=attrs) for p in players))
        by_table: dict[int, list[PlayReply]] = {}
        for r in got:
            by_table.setdefault(r.table, []).append(r)
        assert len(by_table) == 2, got
        full, second = sorted(by_table.values(), key=len, reverse=True)
        assert len(full) == 6 and len(second) == 1
        assert len({r.seat for r in full}) == 6
        assert sum(r.created for r in full) == 1
        assert second[0].created
        for r in got:
            assert r.code is None
            assert json.loads(r.data)["t"] == "state"
        lobby = await players[0].lobby(f"holdem/6-seat/{timing}")
        assert {t.table for t in lobby.tables} == set(by_table)
        assert all(t.attrs_json()["play"] is True for t in lobby.tables)
        # A `sit` at a table made by play is refused although it has free
        # seats; `stand` gives a played seat up like any other.
        who = players[got.index(full[0])]
        await refused(who.sit(second[0].table), ErrorCode.SEAT_UNAVAILABLE)
        await who.stand(full[0].table)
        await refused(who.stand(full[0].table), ErrorCode.NOT_AT_TABLE)
        again = await who.play("holdem", 6, attrs=attrs)
        assert not again.created
        assert again.table in by_table


@pytest.mark.parametrize(("transport", "encoding", "timing"), MODES, ids=IDS)
async def test_a_private_table_is_joined_by_its_code_only(
    server: Server, transport: str, encoding: str, timing: str
) -> None:
    async with clients(server, transport, encoding, 4) as (owner, friend, stranger, third):
        mine = await owner.play("holdem", 2, attrs={"timing": timing}, private=True, data={"buyin": 500})
        assert mine.created
        assert mine.code is not None and CODE.fullmatch(mine.code)
        state = json.loads(mine.data)
        assert [s["stack"] for s in state["seats"] if s["seat"] == mine.seat] == [500]
        joined = await friend.play(code=mine.code)
        assert (joined.table, joined.created, joined.code) == (mine.table, False, mine.code)
        assert joined.seat != mine.seat
        other = await stranger.play("holdem", 2, attrs={"timing": timing})
        assert other.table != mine.table and other.created
        await refused(third.play(code=mine.code), ErrorCode.SEAT_UNAVAILABLE)
        await refused(third.watch(mine.table), ErrorCode.PERMISSION_DENIED)


@pytest.mark.parametrize(("transport", "encoding", "timing"), MODES, ids=IDS)
async def test_refusals_raise_their_codes(server: Server, transport: str, encoding: str, timing: str) -> None:
    async with clients(server, transport, encoding, 1) as (p,):
        # No code has a 0, an O, a 1 or an I: this one is nobody's.
        await refused(p.play(code="0O1I00"), ErrorCode.UNKNOWN_CODE)
        await refused(p.play("no-such-game", 2), ErrorCode.UNKNOWN_GAME)
        await refused(p.play("holdem", 0), ErrorCode.BAD_REQUEST)
        await refused(p.play("holdem", 65), ErrorCode.BAD_REQUEST)
        await refused(p.play("holdem"), ErrorCode.BAD_REQUEST)
        await refused(p.play("holdem", 2, code="ABCDEF"), ErrorCode.BAD_REQUEST)
        await refused(p.play("holdem", 2, attrs={"timing": "no-such-timing"}), ErrorCode.BAD_REQUEST)
        await refused(p.play("holdem", 2, attrs={"nested": {"a": 1}}), ErrorCode.BAD_REQUEST)  # type: ignore[dict-item]
        assert await p.ping() >= 0


async def test_arguments_the_protocol_cannot_carry_raise_before_sending(server: Server) -> None:
    async with Client(server.ws_url) as p:
        with pytest.raises(TypeError):
            await p.play(6)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await p.play("holdem", 2, attrs=[("timing", "normal")])  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            await p.play("holdem", -1)
        with pytest.raises(ValueError):
            await p.play(code="\ud800")


async def test_the_per_user_cap_raises_limit_exceeded_and_joining_is_not_capped() -> None:
    capped = Server(herald_bin(), extra=["--play-max-tables-per-user", "1"])
    capped.start()
    try:
        async with clients(capped, "ws", "json", 2) as (p, friend):
            made = await p.play("holdem", 3, private=True)
            with pytest.raises(LimitExceededError) as info:
                await p.play("holdem", 3, private=True)
            assert info.value.code == ErrorCode.LIMIT_EXCEEDED
            joined = await friend.play(code=made.code)
            assert joined.table == made.table
    finally:
        capped.stop()


async def test_a_played_seat_outlives_a_dropped_connection_and_is_taken_back_with_sit() -> None:
    server = Server(herald_bin(), extra=["--token-hmac-secret", SECRET])
    server.start()
    proxy = Proxy(server.http_port)
    await proxy.start()
    seen: list[str] = []
    connects = 0

    def on_seat(s: Seat) -> None:
        seen.append(s.status)

    def on_connected(_: object) -> None:
        nonlocal connects
        connects += 1

    alice = Client(
        f"ws://127.0.0.1:{proxy.port}/ws",
        token=user_token("alice"),
        reconnect=FAST,
        on_connected=on_connected,
    )
    try:
        async with Client(server.ws_url, token=user_token("bob"), on_seat=on_seat) as bob:
            await alice.connect()
            mine = await alice.play("holdem", 3, private=True)
            assert mine.code is not None
            theirs = await bob.play(code=mine.code)
            assert theirs.table == mine.table
            await proxy.stop()  # every connection reset
            await wait_until(lambda: "away" in seen, what="bob seeing alice away")
            await proxy.start()
            await wait_until(lambda: connects == 2 and alice.state is State.CONNECTED, what="alice back")
            back = await alice.sit(mine.table)
            assert back.seat == mine.seat
            await wait_until(lambda: "back" in seen, what="bob seeing alice back")
    finally:
        await alice.close()
        await proxy.stop()
        server.stop()
