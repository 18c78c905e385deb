"""The Lobby class and the game messages in the client: a snapshot plus every
newer update equals a fresh snapshot; stale, repeated and other-branch
updates change nothing; the core hands game pushes over as they are."""

from __future__ import annotations

from herald_client import Lobby, LobbyUpdate, TableEntry
from herald_client.messages import ConnectReply, Game, Seat, SitReply, Unseat
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
