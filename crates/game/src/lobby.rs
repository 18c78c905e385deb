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
//! In a cluster (decision 0009) the durable tables' entries reach every
//! node's lobby from their owners through Redis ([`Lobby::put_seq`]), each
//! numbered by the cluster's lobby sequence: every node applies them in that
//! one order, and an entry older than the one it has (a reload after a lost
//! message) is ignored. Each node's `seq` stays its own: a client that moves
//! to another node takes a fresh snapshot, as after any reconnect.
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
    /// In a cluster: the lobby sequence number of each table's entry.
    cluster_seq: HashMap<u64, u64>,
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

    /// Sets a table's entry as published in the cluster with sequence
    /// number `seq`; ignored (false) if the entry held is as new or newer.
    pub fn put_seq(&self, entry: TableEntry, seq: u64) -> bool {
        let mut s = self.state();
        let known = s.cluster_seq.entry(entry.table).or_default();
        if *known >= seq {
            return false;
        }
        *known = seq;
        s.changed.insert(entry.table);
        s.entries.insert(entry.table, entry);
        true
    }

    /// Removes a table as the cluster published with sequence number
    /// `seq` (a deleted table); ignored (false) if the entry held is newer.
    pub fn remove_seq(&self, table: u64, seq: u64) -> bool {
        let mut s = self.state();
        let known = s.cluster_seq.entry(table).or_default();
        if *known >= seq {
            return false;
        }
        *known = seq;
        if s.entries.remove(&table).is_some() {
            s.changed.remove(&table);
            s.removed.push(table);
        }
        true
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

/// A lobby entry as the bytes a cluster publishes (JSON:
/// `{"table","path","seats","players","watchers","attrs"}`).
pub fn encode_entry(e: &TableEntry) -> Bytes {
    let attrs = serde_json::from_slice::<serde_json::Value>(&e.attrs)
        .unwrap_or_else(|_| serde_json::json!({}));
    let v = serde_json::json!({
        "table": e.table,
        "path": e.path,
        "seats": e.seats,
        "players": e.players,
        "watchers": e.watchers,
        "attrs": attrs,
    });
    Bytes::from(v.to_string())
}

/// The inverse of [`encode_entry`]; `None` for anything else (it comes
/// from Redis: outside data).
pub fn decode_entry(b: &[u8]) -> Option<TableEntry> {
    let v: serde_json::Value = serde_json::from_slice(b).ok()?;
    let num = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
    let attrs = v.get("attrs").filter(|a| a.is_object())?;
    Some(TableEntry {
        table: num("table")?,
        path: v.get("path")?.as_str()?.to_string(),
        seats: u32::try_from(num("seats")?).ok()?,
        players: u32::try_from(num("players")?).ok()?,
        watchers: u32::try_from(num("watchers")?).ok()?,
        attrs: Bytes::from(attrs.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_older_ones_are_ignored() {
        let e = TableEntry {
            table: 7,
            path: "holdem/6-seat/normal".into(),
            seats: 6,
            players: 2,
            watchers: 1,
            attrs: Bytes::from_static(br#"{"game":"holdem"}"#),
        };
        let back = decode_entry(&encode_entry(&e)).expect("decodes");
        assert_eq!(back, e);
        for bad in [&b""[..], b"{}", b"[1]", br#"{"table":-1}"#] {
            assert!(decode_entry(bad).is_none());
        }
        let lobby = Lobby::default();
        assert!(lobby.put_seq(e.clone(), 5));
        let older = TableEntry {
            players: 0,
            ..e.clone()
        };
        assert!(!lobby.put_seq(older.clone(), 4));
        assert!(!lobby.put_seq(older, 5));
        assert_eq!(lobby.entries(), vec![e]);
    }

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
