"""The lobby's tables as the client knows them: a snapshot (the ``lobby``
reply) amended by ``lobby_update`` pushes, with no I/O.

Why a class of its own: the rule that makes the deltas safe — apply an update
only if its ``seq`` is above the last one applied (docs/protocol.md §5e) — is
easy to get subtly wrong in every application; here it is written once, and
the result equals a fresh snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable

from .messages import LobbyUpdate, TableEntry

__all__ = ["Lobby"]


class Lobby:
    """Tables keyed by id, kept current by :meth:`reset` and :meth:`apply`."""

    __slots__ = ("path", "seq", "tables")

    def __init__(self, path: str = "") -> None:
        #: The branch this lobby follows ("" = all); updates for other paths are ignored.
        self.path = path
        #: The seq of the snapshot or update last applied (-1 before any snapshot).
        self.seq = -1
        #: The tables, keyed by table id.
        self.tables: dict[int, TableEntry] = {}

    def reset(self, seq: int, tables: Iterable[TableEntry]) -> None:
        """Replace everything with a snapshot (a ``lobby`` reply's seq and tables)."""
        self.tables = {t.table: t for t in tables}
        self.seq = seq

    def apply(self, update: LobbyUpdate) -> bool:
        """Apply one update; returns whether it changed anything (False when
        it is for another path, arrives before a snapshot, or is not newer)."""
        if update.path != self.path or self.seq < 0 or update.seq <= self.seq:
            return False
        for t in update.tables:
            self.tables[t.table] = t
        for table in update.removed:
            self.tables.pop(table, None)
        self.seq = update.seq
        return True
