"""The Lobby class and the game messages in the client: a snapshot plus every
newer update equals a fresh snapshot; stale, repeated and other-branch
updates change nothing; a snapshot in pages (with updates between them)
equals the fresh one too, in the Lobby class and in ``Client.lobby``; the
core hands game pushes over as they are."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from fake_server import FakeConn, FakeServer

from herald_client import Client, InvalidArgumentError, Lobby, LobbyPage, LobbyUpdate, TableEntry
from herald_client import messages as m
from herald_client.messages import ConnectReply, Game, LobbyReply, Seat, SitReply, Unseat
from herald_client.protocol import ClientCore, GamePush, ReplyReceived


def entry(table: int, players: int) -> TableEntry:
    return TableEntry(table, "holdem/10-seat/express", 10, players, 0, b"{}")


def update(
    seq: int, tables: tuple[TableEntry, ...] = (), removed: tuple[int, ...] = (), path: str = "holdem"
) -> LobbyUpdate:
    return LobbyUpdate(path, seq, tables, removed)


def test_newer_updates_apply_in_order_and_equal_a_fresh_snapshot() -> None:
    lobby = Lobby("holdem")
    lobby.reset(10, [entry(1, 0), entry(2, 5), entry(3, 9)])
    assert lobby.apply(update(11, (entry(1, 1), entry(4, 0)), (3,)))
    assert lobby.apply(update(14, (entry(1, 2),), (2,)))
    fresh = Lobby("holdem")
    fresh.reset(14, [entry(1, 2), entry(4, 0)])
    assert lobby.tables == fresh.tables
    assert lobby.seq == 14


def test_stale_repeated_early_and_foreign_updates_are_ignored() -> None:
    lobby = Lobby("holdem")
    assert not lobby.apply(update(1, (entry(9, 9),))), "before any snapshot"
    lobby.reset(10, [entry(1, 0)])
    assert not lobby.apply(update(10, (entry(1, 7),))), "not newer than the snapshot"
    assert not lobby.apply(update(9, (), (1,))), "older than the snapshot"
    assert not lobby.apply(update(12, (entry(1, 3),), path="chess")), "another branch"
    assert lobby.tables[1].players == 0
    assert lobby.apply(update(12, (entry(1, 3),)))
    assert not lobby.apply(update(12, (), (1,))), "the same seq twice"
    assert lobby.tables[1].players == 3


def test_reset_replaces_everything() -> None:
    lobby = Lobby()
    lobby.reset(5, [entry(1, 0), entry(2, 0)])
    lobby.reset(3, [entry(7, 1)])
    assert list(lobby.tables) == [7]
    assert lobby.seq == 3


def test_core_hands_game_pushes_over_and_routes_replies_by_id() -> None:
    core = ClientCore(token=None, name=None)
    connect = core.start_connect()
    core.receive(ConnectReply(connect.id, "c1", "v", 25))
    pushes: list[LobbyUpdate | Game | Seat | Unseat] = [
        update(1),
        Game(7, b"{}"),
        Seat(7, 2, "u1", "away"),
        Unseat(7, 115, "closed"),
    ]
    for p in pushes:
        assert core.receive(p) == [GamePush(p)]
    reply = SitReply(9, 2, b"{}")
    assert core.receive(reply) == [ReplyReceived(reply)]


# A snapshot in pages (§5e): pages and the updates between them apply in the
# order received, then the reply's entries; then newer updates only.


def page(*tables: TableEntry, path: str = "holdem") -> LobbyPage:
    return LobbyPage(path, tables)


def test_a_snapshot_in_pages_with_updates_between_them_equals_the_fresh_snapshot() -> None:
    lobby = Lobby("holdem")
    lobby.begin()
    assert lobby.loading and not lobby.ready
    # An update may come before the first page: the subscription has started.
    assert lobby.apply(update(21, (entry(8, 1),)))
    assert lobby.page(page(entry(1, 0), entry(2, 0), entry(3, 0)))
    assert lobby.apply(update(22, (entry(2, 5), entry(10, 0)), (3,)))
    assert lobby.page(page(entry(4, 0), entry(5, 0)))
    assert lobby.apply(update(23, (), (4,)))
    assert not lobby.ready, "not ready before the reply"
    # The reply's seq is below the interleaved updates'.
    lobby.finish(20, [entry(6, 0), entry(10, 2)])
    assert lobby.ready and not lobby.loading
    assert lobby.seq == 23, "the last seq applied, not the reply's"
    assert not lobby.apply(update(23, (entry(1, 9),))), "an update already applied"
    assert not lobby.apply(update(22, (), (1,))), "an older one"
    assert lobby.apply(update(24, (entry(1, 1),)))
    fresh = Lobby("holdem")
    fresh.reset(24, [entry(1, 1), entry(2, 5), entry(5, 0), entry(6, 0), entry(8, 1), entry(10, 2)])
    assert lobby.tables == fresh.tables
    assert lobby.seq == fresh.seq


def test_pages_without_updates_take_the_reply_seq_and_the_reply_adds_to_them() -> None:
    lobby = Lobby()
    lobby.begin()
    lobby.page(page(entry(1, 0), entry(2, 0), path=""))
    lobby.page(page(path=""))
    lobby.finish(7, [entry(3, 0)])
    assert sorted(lobby.tables) == [1, 2, 3]
    assert lobby.seq == 7
    assert lobby.ready


def test_foreign_or_unexpected_pages_are_ignored_and_begin_forgets_everything() -> None:
    lobby = Lobby("holdem")
    assert not lobby.page(page(entry(1, 0))), "no snapshot begun"
    lobby.begin()
    assert not lobby.page(page(entry(1, 0), path="chess")), "another branch"
    assert not lobby.apply(update(5, (entry(2, 0),), path="chess")), "another branch"
    lobby.finish(3, [entry(3, 0)])
    assert list(lobby.tables) == [3]
    assert not lobby.page(page(entry(4, 0))), "after the reply"
    # A new subscription (e.g. after a reconnect) starts over.
    lobby.begin()
    assert lobby.tables == {}
    assert lobby.seq == -1
    assert lobby.apply(update(2, (entry(5, 0),))), "a lower seq than before: a new snapshot"
    lobby.finish(1, [])
    assert list(lobby.tables) == [5]
    assert lobby.seq == 2


def test_finish_without_begin_is_reset() -> None:
    lobby = Lobby()
    lobby.reset(5, [entry(1, 0)])
    lobby.finish(6, [entry(2, 0)])
    assert list(lobby.tables) == [2]
    assert lobby.seq == 6


def test_core_hands_lobby_pages_over() -> None:
    core = ClientCore(token=None, name=None)
    connect = core.start_connect()
    core.receive(ConnectReply(connect.id, "c1", "v", 25))
    p = page(entry(1, 0))
    assert core.receive(p) == [GamePush(p)]


# Client.lobby against a scripted server: the pages, the updates between
# them, the reply and a later update, all written at once.

GATHERED = [(2, 4), (3, 0), (4, 0), (5, 0), (7, 1)]


def burst(id: int) -> list[m.ServerMessage]:
    return [
        update(11, (entry(9, 0),), path="other"),
        page(entry(1, 0), entry(2, 0)),
        update(12, (entry(2, 4), entry(7, 0)), (1,)),
        page(entry(3, 0), entry(4, 0)),
        LobbyReply(id, 10, (entry(5, 0), entry(7, 1))),
        update(13, (entry(3, 3),)),
    ]


async def lobby_script(conn: FakeConn) -> None:
    await conn.handshake()
    while True:
        cmd = await conn.recv()
        if isinstance(cmd, m.Lobby):
            for msg in burst(cmd.id):
                await conn.send(msg)


@pytest.mark.parametrize("encoding", ["json", "binary"])
async def test_client_lobby_gathers_pages_and_interleaved_updates(
    encoding: Literal["json", "binary"],
) -> None:
    pages: list[LobbyPage] = []
    updates: list[LobbyUpdate] = []
    async with FakeServer(lobby_script, encoding=encoding) as fake:
        client = Client(
            fake.url, encoding=encoding, on_lobby_page=pages.append, on_lobby_update=updates.append
        )
        async with client:
            snapshot = await client.lobby("holdem")
            assert snapshot.seq == 12, "the last interleaved update's seq, above the reply's"
            assert [(t.table, t.players) for t in snapshot.tables] == GATHERED
            lobby = Lobby("holdem")
            lobby.reset(snapshot.seq, snapshot.tables)
            for _ in range(100):
                if len(updates) == 3:
                    break
                await asyncio.sleep(0.01)
            assert len(pages) == 2
            assert [lobby.apply(u) for u in updates] == [False, False, True]
            assert lobby.tables[3].players == 3


@pytest.mark.parametrize("encoding", ["json", "binary"])
async def test_client_lobby_into_a_lobby(encoding: Literal["json", "binary"]) -> None:
    async with FakeServer(lobby_script, encoding=encoding) as fake:
        applied: list[int] = []
        lobby = Lobby("holdem")

        def on_update(u: LobbyUpdate) -> None:
            if lobby.apply(u):
                applied.append(u.seq)

        async with Client(fake.url, encoding=encoding, on_lobby_update=on_update) as client:
            with pytest.raises(InvalidArgumentError):
                await client.lobby("chess", into=lobby)
            snapshot = await client.lobby("holdem", into=lobby)
            assert snapshot.seq == 12
            assert [(t.table, t.players) for t in snapshot.tables] == GATHERED
            for _ in range(100):
                if lobby.seq == 13:
                    break
                await asyncio.sleep(0.01)
            # 12 was applied by the client while loading; 13 by the callback.
            assert applied == [13]
            assert lobby.ready
            assert sorted((k, t.players) for k, t in lobby.tables.items()) == [
                (2, 4),
                (3, 3),
                (4, 0),
                (5, 0),
                (7, 1),
            ]
