//! The live lobby: every table's entry, a snapshot for a new subscriber,
//! then coalesced deltas with sequence numbers.
//!
//! Why coalesce: in seed 003's load test every bot subscribes to the whole
//! lobby, so each change of a table's entry is multiplied by every client.
//! Tables only *mark* their entry changed ([`Lobby::put`], [`Lobby::remove`]);
//! a flush every `interval` (250 ms by default) sends, per subscribed branch,
//! one `lobby_update` holding the current entry of every table changed since
//! the last flush — at most one delta per table per interval, however often
//! it changed, and none when nothing changed. Each delta is encoded once per
//! (branch, encoding) and the bytes shared by every subscriber of that branch.
//!
//! Sequence numbers: the lobby's `seq` grows by one per flush that changed
//! something. A snapshot carries the current entries and the current `seq`
//! (entries changed since the last flush are already in it; the next delta
//! repeats them, which is harmless because entries are whole values). So a
//! client that applies, on top of its snapshot, every delta whose `seq` is
//! above the snapshot's, ends with exactly what a fresh snapshot would show.
//! Snapshot and subscription happen under one lock, so no delta falls
//! between them.
//!
//! Branches: a table's path is like `holdem/10-seat/express`; a subscription
//! to `holdem` sees every table whose path is `holdem` or starts with
//! `holdem/`; the empty path sees everything.

use bytes::Bytes;
use herald_core::Client;
use herald_proto::{Encoding, Push, Reply, ServerMsg, TableEntry};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// Whether a table at `path` belongs to the branch `branch`.
pub fn in_branch(path: &str, branch: &str) -> bool {
    branch.is_empty()
        || (path.starts_with(branch)
            && (path.len() == branch.len() || path.as_bytes()[branch.len()] == b'/'))
}

#[derive(Debug, Default)]
struct State {
    entries: BTreeMap<u64, TableEntry>,
    seq: u64,
    changed: BTreeSet<u64>,
    removed: Vec<u64>,
    /// Subscribers by branch, by client id (a disconnect removes its
    /// client without scanning everyone).
    subscribers: BTreeMap<String, HashMap<u64, Arc<Client>>>,
}

/// The lobby of one node.
#[derive(Debug, Default)]
pub struct Lobby {
    state: Mutex<State>,
}

impl Lobby {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave an entry half
        // written (every update is one insert), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets a table's entry (added or changed); sent at the next flush.
    pub fn put(&self, entry: TableEntry) {
        let mut s = self.state();
        s.changed.insert(entry.table);
        s.entries.insert(entry.table, entry);
    }

    /// Removes a table; sent at the next flush.
    pub fn remove(&self, table: u64) {
        let mut s = self.state();
        if s.entries.remove(&table).is_some() {
            s.changed.remove(&table);
            s.removed.push(table);
        }
    }

    /// The current entries (for `GET /api/tables`).
    pub fn entries(&self) -> Vec<TableEntry> {
        self.state().entries.values().cloned().collect()
    }

    /// Number of tables.
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    /// Whether there are no tables.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Subscribes `client` to `branch` and answers command `id` with the
    /// snapshot, under one lock. False if it was already subscribed there.
    pub fn subscribe(&self, client: &Arc<Client>, id: u32, branch: &str) -> bool {
        let mut s = self.state();
        let subs = s.subscribers.entry(branch.to_string()).or_default();
        if subs.contains_key(&client.id) {
            return false;
        }
        subs.insert(client.id, client.clone());
        let tables = s
            .entries
            .values()
            .filter(|e| in_branch(&e.path, branch))
            .cloned()
            .collect();
        let msg = ServerMsg::Reply {
            id,
            reply: Reply::Lobby { seq: s.seq, tables },
        };
        client.send(client.encoding.encode_server_bytes(&msg));
        true
    }

    /// Ends `client`'s subscription to `branch`; false if it had none.
    pub fn unsubscribe(&self, client_id: u64, branch: &str) -> bool {
        let mut s = self.state();
        let Some(subs) = s.subscribers.get_mut(branch) else {
            return false;
        };
        let found = subs.remove(&client_id).is_some();
        if subs.is_empty() {
            s.subscribers.remove(branch);
        }
        found
    }

    /// Ends every subscription of `client_id`.
    pub fn forget(&self, client_id: u64) {
        let mut s = self.state();
        s.subscribers.retain(|_, subs| {
            subs.remove(&client_id);
            !subs.is_empty()
        });
    }

    /// Number of lobby subscriptions (for metrics and tests).
    pub fn subscriptions(&self) -> usize {
        self.state().subscribers.values().map(HashMap::len).sum()
    }

    /// Sends one delta per branch with changes; returns how many messages
    /// were queued. Called every lobby interval.
    pub fn flush(&self) -> usize {
        let (seq, changed, removed, sends) = {
            let mut s = self.state();
            if s.changed.is_empty() && s.removed.is_empty() {
                return 0;
            }
            s.seq += 1;
            let changed: Vec<TableEntry> = std::mem::take(&mut s.changed)
                .into_iter()
                .filter_map(|t| s.entries.get(&t).cloned())
                .collect();
            let removed = std::mem::take(&mut s.removed);
            // Clients are cloned out so that encoding and queueing happen
            // without the lock.
            let sends: Vec<(String, Vec<Arc<Client>>)> = s
                .subscribers
                .iter()
                .map(|(b, c)| (b.clone(), c.values().cloned().collect()))
                .collect();
            (s.seq, changed, removed, sends)
        };
        let mut queued = 0;
        for (branch, clients) in sends {
            let tables: Vec<TableEntry> = changed
                .iter()
                .filter(|e| in_branch(&e.path, &branch))
                .cloned()
                .collect();
            // A removed table's path is gone; every branch hears of it
            // (an unknown id is a no-op for the client).
            if tables.is_empty() && removed.is_empty() {
                continue;
            }
            let msg = ServerMsg::Push(Push::LobbyUpdate {
                path: branch,
                seq,
                tables,
                removed: removed.clone(),
            });
            let mut encoded: [Option<Bytes>; 2] = [None, None];
            for c in &clients {
                let slot = match c.encoding {
                    Encoding::Json => 0,
                    Encoding::Binary => 1,
                };
                let bytes = encoded[slot]
                    .get_or_insert_with(|| c.encoding.encode_server_bytes(&msg))
                    .clone();
                c.send(bytes);
                queued += 1;
            }
        }
        queued
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branches() {
        assert!(in_branch("holdem/10-seat/express", ""));
        assert!(in_branch("holdem/10-seat/express", "holdem"));
        assert!(in_branch("holdem/10-seat/express", "holdem/10-seat"));
        assert!(in_branch(
            "holdem/10-seat/express",
            "holdem/10-seat/express"
        ));
        assert!(!in_branch("holdem/10-seat/express", "holdem/10"));
        assert!(!in_branch("holdem2/x", "holdem"));
        assert!(!in_branch("holdem", "holdem/10-seat"));
    }
}
