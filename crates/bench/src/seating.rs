//! The lobby as game bots see it, and the choice of a table: shared by the
//! poker bots ([`crate::holdem`]) and the bots of scripted games
//! ([`crate::scripted`]).
//!
//! The bench keeps one view of the lobby (the snapshot and every newer
//! `lobby_update` any bot receives, applied by `seq` as docs/protocol.md
//! §5e tells clients: all bots subscribe to the same branch, so it is the
//! view each of them has) and counts the seats its own bots have asked for,
//! which the lobby only shows after its coalescing interval. A bot takes
//! the fullest table that still has a free seat (so tables fill and play,
//! rather than one bot waiting at each), lowest id first.

use std::cmp::Reverse;
use std::collections::HashMap;

use herald_proto::{Encoding, Push, Reply, ServerMsg, TableEntry};

/// One table of the lobby view.
#[derive(Debug, Clone, Copy)]
struct LobbyTable {
    seats: u32,
    players: u32,
}

/// The bench's view of the lobby, and the seats its bots hold or asked for.
#[derive(Debug, Default)]
pub(crate) struct LobbyView {
    seq: Option<u64>,
    tables: HashMap<u64, LobbyTable>,
    /// Seats the bots hold or asked for, per table.
    ours: HashMap<u64, u32>,
    /// A `lobby_page` came since the last reply: the reply ends a snapshot
    /// in pages (protocol §5e) and adds to the view rather than replace it.
    paged: bool,
}

impl LobbyView {
    /// A `lobby` reply (`msg`, one whole message): replaces the view if it
    /// is newer. `false` if it is not a readable `lobby` reply.
    pub fn on_reply(&mut self, enc: Encoding, msg: &[u8]) -> bool {
        match enc.decode_server(msg) {
            Ok(ServerMsg::Reply {
                reply: Reply::Lobby { seq, tables },
                ..
            }) => {
                if self.seq.is_none_or(|s| seq > s) {
                    if !self.paged {
                        self.tables.clear();
                    }
                    self.apply(seq, &tables);
                }
                self.paged = false;
                true
            }
            _ => false,
        }
    }

    /// A `lobby_update` push: applied if newer than the view (its `seq` is
    /// read first, so an update the view has already costs nothing more);
    /// or a `lobby_page` push, whose entries are applied. `false` if it
    /// cannot be read.
    pub fn on_update(&mut self, enc: Encoding, msg: &[u8]) -> bool {
        let seq = crate::herald_wire::lobby_update_seq(enc, msg);
        if seq.is_some() && seq <= self.seq {
            return true; // this view has it already
        }
        match enc.decode_server(msg) {
            Ok(ServerMsg::Push(Push::LobbyUpdate {
                seq,
                tables,
                removed,
                ..
            })) => {
                if self.seq.is_none_or(|s| seq > s) {
                    for id in removed {
                        self.tables.remove(&id);
                    }
                    self.apply(seq, &tables);
                }
                true
            }
            Ok(ServerMsg::Push(Push::LobbyPage { tables, .. })) => {
                self.paged = true;
                for t in tables {
                    self.tables.insert(
                        t.table,
                        LobbyTable {
                            seats: t.seats,
                            players: t.players,
                        },
                    );
                }
                true
            }
            _ => false,
        }
    }

    fn apply(&mut self, seq: u64, tables: &[TableEntry]) {
        self.seq = Some(seq);
        for t in tables {
            self.tables.insert(
                t.table,
                LobbyTable {
                    seats: t.seats,
                    players: t.players,
                },
            );
        }
    }

    /// The fullest table with a free seat (counting the seats the bots
    /// asked for), lowest id first, apart from those in `skip`.
    pub fn pick(&self, skip: &[u64]) -> Option<u64> {
        let mut best: Option<(u32, Reverse<u64>)> = None;
        for (&id, t) in &self.tables {
            if skip.contains(&id) {
                continue;
            }
            let taken = t.players.max(self.ours.get(&id).copied().unwrap_or(0));
            if taken >= t.seats {
                continue;
            }
            let key = (taken, Reverse(id));
            if best.is_none_or(|k| key > k) {
                best = Some(key);
            }
        }
        best.map(|(_, Reverse(id))| id)
    }

    /// A bot asked for a seat at `table`.
    pub fn claim(&mut self, table: u64) {
        *self.ours.entry(table).or_insert(0) += 1;
    }

    /// A bot left `table` (or its `sit` was refused).
    pub fn release(&mut self, table: u64) {
        if let Some(n) = self.ours.get_mut(&table) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.ours.remove(&table);
            }
        }
    }

    /// `table` is gone (a `sit` answered 115).
    pub fn remove(&mut self, table: u64) {
        self.tables.remove(&table);
    }

    /// Tables where at least `n` of the bots sit or asked to.
    pub fn ours_with(&self, n: u32) -> usize {
        self.ours.values().filter(|&&c| c >= n).count()
    }

    /// Tables in the view.
    pub fn len(&self) -> usize {
        self.tables.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(table: u64, seats: u32, players: u32) -> TableEntry {
        TableEntry {
            table,
            path: "g/2-seat/normal".into(),
            seats,
            players,
            watchers: 0,
            attrs: bytes::Bytes::from_static(b"{}"),
        }
    }

    #[test]
    fn picks_the_fullest_free_table_and_counts_claims() {
        let mut v = LobbyView::default();
        v.apply(1, &[entry(1, 2, 0), entry(2, 2, 1), entry(3, 2, 2)]);
        assert_eq!(v.pick(&[]), Some(2));
        // The lobby's player may be this bot: one claim does not fill it,
        // a second does (the larger of the two counts is what is taken).
        v.claim(2);
        assert_eq!(v.pick(&[]), Some(2));
        v.claim(2);
        assert_eq!(v.pick(&[]), Some(1));
        assert_eq!(v.pick(&[1]), None);
        v.release(2);
        assert_eq!(v.pick(&[]), Some(2));
        v.release(2);
        v.remove(2);
        assert_eq!((v.pick(&[]), v.len()), (Some(1), 2));
        v.claim(1);
        v.claim(1);
        assert_eq!(v.ours_with(2), 1);
    }
}
