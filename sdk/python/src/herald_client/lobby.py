"""The lobby's tables as the client knows them: a snapshot (the ``lobby``
reply, possibly preceded by ``lobby_page`` pushes) amended by ``lobby_update``
pushes, with no I/O.

Why a class of its own: the rules that make the deltas safe
(docs/protocol.md §5e) are easy to get subtly wrong in every application;
here they are written once, and the result equals a fresh snapshot:

* after the snapshot, apply an update only if its ``seq`` is above the last
  one applied;
* a large snapshot comes in parts: ``lobby_page`` pushes, possibly with
  ``lobby_update`` pushes between them (whose ``seq`` is above the reply's),
  then the reply with the last part. Between :meth:`Lobby.begin` and
  :meth:`Lobby.finish`, pages and updates are applied in the order received,
  then the reply's entries; the lobby's ``seq`` is then the highest of the
  reply's and the updates'.

:meth:`Client.lobby <herald_client.Client.lobby>` does the second part itself
and returns the whole snapshot, for :meth:`Lobby.reset`; ``begin``/``page``/
``finish`` are for code that reads the messages itself.
"""

from __future__ import annotations

from collections.abc import Iterable

from .messages import LobbyPage, LobbyUpdate, TableEntry

__all__ = ["Lobby"]


class Lobby:
    """Tables keyed by id, kept current by :meth:`reset` (or :meth:`begin`,
    :meth:`page`, :meth:`finish`) and :meth:`apply`."""

    __slots__ = ("loading", "path", "seq", "tables")

    def __init__(self, path: str = "") -> None:
        #: The branch this lobby follows ("" = all); messages for other paths are ignored.
        self.path = path
        #: The seq of the snapshot or update last applied (-1 before any
        #: snapshot; while loading, the seq of the last update applied, or -1).
        self.seq = -1
        #: The tables, keyed by table id.
        self.tables: dict[int, TableEntry] = {}
        #: A snapshot is being received: between :meth:`begin` and :meth:`finish`.
        self.loading = False

    @property
    def ready(self) -> bool:
        """Whether a whole snapshot has been applied (and no new one begun since)."""
        return not self.loading and self.seq >= 0

    def reset(self, seq: int, tables: Iterable[TableEntry]) -> None:
        """Replace everything with a whole snapshot (a ``lobby`` reply that came
        without pages, or what :meth:`Client.lobby` returns)."""
        self.tables = {t.table: t for t in tables}
        self.seq = seq
        self.loading = False

    def begin(self) -> None:
        """Start receiving a snapshot (call it when sending ``lobby``): forget
        everything; pages and updates then accumulate until :meth:`finish`."""
        self.tables = {}
        self.seq = -1
        self.loading = True

    def page(self, page: LobbyPage) -> bool:
        """Apply one page of the snapshot being received; returns whether it
        did (False when it is for another path or no snapshot was begun)."""
        if page.path != self.path or not self.loading:
            return False
        for t in page.tables:
            self.tables[t.table] = t
        return True

    def finish(self, seq: int, tables: Iterable[TableEntry]) -> None:
        """End the snapshot begun with :meth:`begin` with the ``lobby`` reply's
        seq and tables: they are applied over the pages and updates received
        so far. Without a ``begin``, the same as :meth:`reset`."""
        if not self.loading:
            self.reset(seq, tables)
            return
        for t in tables:
            self.tables[t.table] = t
        self.seq = max(self.seq, seq)
        self.loading = False

    def apply(self, update: LobbyUpdate) -> bool:
        """Apply one update; returns whether it changed anything (False when
        it is for another path, arrives before any snapshot was begun, or is
        not newer than the last one applied). While loading, updates for the
        path apply in the order received."""
        if update.path != self.path or update.seq <= self.seq:
            return False
        if not self.loading and self.seq < 0:
            return False
        for t in update.tables:
            self.tables[t.table] = t
        for table in update.removed:
            self.tables.pop(table, None)
        self.seq = update.seq
        return True
