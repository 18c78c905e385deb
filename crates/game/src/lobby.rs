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
//!
//! Large branches (protocol §5e, "Large lobbies"): a snapshot over
//! [`PAGE_BYTES`] would not fit a connection's queue (50,000 tables are
//! ~9 MB of JSON; the queue holds 1 MiB), so it goes in pages: the
//! subscription starts at once (deltas flow as usual), and [`page`] sends
//! `lobby_page` pushes of the entries as they are at that moment, each
//! once the client has drained most of its queue, then the `lobby` reply
//! with the last page and the seq of the moment it subscribed. Why pages
//! of the live lobby rather than a frozen snapshot: nothing is held per
//! subscriber, and a page is never older than a delta queued before it,
//! so applying everything in order ends where a fresh snapshot would.

use bytes::Bytes;
use herald_core::Client;
use herald_proto::{Encoding, Push, Reply, ServerMsg, TableEntry};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Whether a table at `path` belongs to the branch `branch`.
pub fn in_branch(path: &str, branch: &str) -> bool {
    branch.is_empty()
        || (path.starts_with(branch)
            && (path.len() == branch.len() || path.as_bytes()[branch.len()] == b'/'))
}

/// Entries' bytes in one message of a snapshot (estimated: path, attrs
/// and the numbers' text); a branch over it is sent in pages.
pub const PAGE_BYTES: usize = 64 << 10;

/// How often a paging subscriber's queue is looked at while it is fuller
/// than half its bound.
const DRAIN_POLL: Duration = Duration::from_millis(5);

fn entry_bytes(e: &TableEntry) -> usize {
    e.path.len() + e.attrs.len() + 80
}

/// What [`Lobby::subscribe`] did.
#[derive(Debug)]
pub enum Subscribed {
    /// Subscribed; the snapshot was queued (one reply).
    Done,
    /// Subscribed; the snapshot is too large for one message: run [`page`]
    /// with this.
    Paging(Pager),
    /// The client was already subscribed to the branch.
    Already,
}

/// A subscriber whose snapshot goes in pages.
#[derive(Debug)]
pub struct Pager {
    client: Arc<Client>,
    id: u32,
    branch: String,
    /// The lobby's seq when it subscribed: the reply's.
    seq: u64,
}

/// What one [`Lobby::next_page`] sent.
enum Paged {
    /// A `lobby_page` ending at this table id.
    Page(u64),
    /// The reply: the snapshot is complete.
    Last,
    /// Nothing: the client unsubscribed meanwhile.
    Gone,
}

/// Sends `p`'s snapshot in pages, each once the client has drained its
/// queue below half its bound; ends with the `lobby` reply, or early if
/// the client unsubscribes or its connection closes.
pub async fn page(lobby: &Lobby, p: Pager) {
    let mut after = None;
    loop {
        let bound = p.client.outbox.max_bytes() / 2;
        while p.client.outbox.queued_bytes() > bound {
            if p.client.outbox.is_closing() {
                return;
            }
            tokio::time::sleep(DRAIN_POLL).await;
        }
        if p.client.outbox.is_closing() {
            return;
        }
        match lobby.next_page(&p, after) {
            Paged::Page(last) => after = Some(last),
            Paged::Last | Paged::Gone => return,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    entries: BTreeMap<u64, TableEntry>,
    /// Each entry's JSON, made when a page for a JSON client first needs
    /// it and dropped when the entry changes: every bot of seed 003 asks
    /// for the whole lobby, so an entry is copied into many pages between
    /// two changes, and encoding it (its `attrs` checked) each time was a
    /// quarter of an edge node's CPU (bench/RESULTS.md, "Where an edge's
    /// CPU goes").
    json: HashMap<u64, Bytes>,
    seq: u64,
    changed: BTreeSet<u64>,
    removed: Vec<u64>,
    /// In a cluster: the lobby sequence number of each table's entry.
    cluster_seq: HashMap<u64, u64>,
    /// Subscribers by branch, by client id (a disconnect removes its
    /// client without scanning everyone).
    subscribers: BTreeMap<String, HashMap<u64, Arc<Client>>>,
}

impl State {
    /// The entries of `branch` after table `after`, in order, up to
    /// [`PAGE_BYTES`] (at least one): as JSON pieces for a JSON client
    /// (made once per entry change, then shared), else as entries. True
    /// with them when more follow. `whole`: give up at once when they do
    /// not fit (a snapshot that must go in pages).
    fn part(
        &mut self,
        encoding: Encoding,
        branch: &str,
        after: Option<u64>,
        whole: bool,
    ) -> (Part, bool) {
        let from = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let json = encoding == Encoding::Json;
        let mut part = if json {
            Part::Json(Vec::new(), None)
        } else {
            Part::Entries(Vec::new())
        };
        let mut bytes = 0;
        let State {
            entries,
            json: cache,
            ..
        } = self;
        for e in entries
            .range((from, std::ops::Bound::Unbounded))
            .map(|(_, e)| e)
            .filter(|e| in_branch(&e.path, branch))
        {
            bytes += entry_bytes(e);
            if bytes > PAGE_BYTES && (whole || !part.is_empty()) {
                return (part, true);
            }
            match &mut part {
                Part::Json(pieces, last) => {
                    let piece = cache
                        .entry(e.table)
                        .or_insert_with(|| herald_proto::json::table_json(e));
                    pieces.push(piece.clone());
                    *last = Some(e.table);
                }
                Part::Entries(tables) => tables.push(e.clone()),
            }
        }
        (part, false)
    }
}

/// Entries for one lobby message.
enum Part {
    /// Each entry's JSON, and the last entry's table.
    Json(Vec<Bytes>, Option<u64>),
    Entries(Vec<TableEntry>),
}

impl Part {
    fn is_empty(&self) -> bool {
        match self {
            Part::Json(p, _) => p.is_empty(),
            Part::Entries(t) => t.is_empty(),
        }
    }

    /// The last entry's table.
    fn last(&self) -> Option<u64> {
        match self {
            Part::Json(_, last) => *last,
            Part::Entries(t) => t.last().map(|e| e.table),
        }
    }

    /// The `lobby` reply to command `id` holding these entries.
    fn reply(self, encoding: Encoding, id: u32, seq: u64) -> Bytes {
        match self {
            Part::Json(pieces, _) => herald_proto::json::lobby_reply_from(id, seq, &pieces),
            Part::Entries(tables) => encoding.encode_server_bytes(&ServerMsg::Reply {
                id,
                reply: Reply::Lobby { seq, tables },
            }),
        }
    }

    /// A `lobby_page` push of these entries.
    fn page(self, encoding: Encoding, path: &str) -> Bytes {
        match self {
            Part::Json(pieces, _) => herald_proto::json::lobby_page_from(path, &pieces),
            Part::Entries(tables) => {
                encoding.encode_server_bytes(&ServerMsg::Push(Push::LobbyPage {
                    path: path.to_string(),
                    tables,
                }))
            }
        }
    }
}

/// The lobby of one node.
#[derive(Debug, Default)]
pub struct Lobby {
    state: Mutex<State>,
    /// Held by a flush from taking its changes until every delta is
    /// queued, and by a page from reading the entries until it is queued:
    /// so a page is never queued before a delta computed earlier (older
    /// values after newer ones). Taken before `state`.
    sending: Mutex<()>,
}

impl Lobby {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave an entry half
        // written (every update is one insert), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets a table's entry (added or changed); sent at the next flush. The
    /// same entry again changes nothing and sends nothing.
    pub fn put(&self, entry: TableEntry) {
        let mut s = self.state();
        if s.entries.get(&entry.table) == Some(&entry) {
            return;
        }
        s.changed.insert(entry.table);
        s.json.remove(&entry.table);
        s.entries.insert(entry.table, entry);
    }

    /// Sets a table's entry as published in the cluster with sequence
    /// number `seq`; ignored (false) if the entry held is as new or newer.
    /// An entry equal to the one held only moves the number on: nothing is
    /// sent (as in [`Lobby::put`]: an entry back where the lobby shows it is
    /// no change to anyone).
    pub fn put_seq(&self, entry: TableEntry, seq: u64) -> bool {
        let mut s = self.state();
        let known = s.cluster_seq.entry(entry.table).or_default();
        if *known >= seq {
            return false;
        }
        *known = seq;
        if s.entries.get(&entry.table) == Some(&entry) {
            return true;
        }
        s.changed.insert(entry.table);
        s.json.remove(&entry.table);
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
        s.json.remove(&table);
        if s.entries.remove(&table).is_some() {
            s.changed.remove(&table);
            s.removed.push(table);
        }
        true
    }

    /// Removes a table; sent at the next flush.
    pub fn remove(&self, table: u64) {
        let mut s = self.state();
        s.json.remove(&table);
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

    /// Subscribes `client` to `branch` and, under the same lock, answers
    /// command `id` with the snapshot, or, for a branch over
    /// [`PAGE_BYTES`], says to send it in pages ([`page`]).
    pub fn subscribe(&self, client: &Arc<Client>, id: u32, branch: &str) -> Subscribed {
        let mut s = self.state();
        let subs = s.subscribers.entry(branch.to_string()).or_default();
        if subs.contains_key(&client.id) {
            return Subscribed::Already;
        }
        subs.insert(client.id, client.clone());
        let seq = s.seq;
        let (part, more) = s.part(client.encoding, branch, None, true);
        if more {
            return Subscribed::Paging(Pager {
                client: client.clone(),
                id,
                branch: branch.to_string(),
                seq,
            });
        }
        client.send(part.reply(client.encoding, id, seq));
        Subscribed::Done
    }

    /// Queues `p`'s next part: the entries of its branch after table
    /// `after` as they are now, up to [`PAGE_BYTES`]; a `lobby_page` if
    /// more remain, else the `lobby` reply.
    fn next_page(&self, p: &Pager, after: Option<u64>) -> Paged {
        let _order = self.sending.lock().unwrap_or_else(|e| e.into_inner());
        let mut s = self.state();
        if !s
            .subscribers
            .get(&p.branch)
            .is_some_and(|subs| subs.contains_key(&p.client.id))
        {
            return Paged::Gone;
        }
        let (part, more) = s.part(p.client.encoding, &p.branch, after, false);
        drop(s);
        match (more, part.last()) {
            (true, Some(last)) => {
                p.client.send(part.page(p.client.encoding, &p.branch));
                Paged::Page(last)
            }
            _ => {
                p.client.send(part.reply(p.client.encoding, p.id, p.seq));
                Paged::Last
            }
        }
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
        let _order = self.sending.lock().unwrap_or_else(|e| e.into_inner());
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

    /// An entry put again unchanged, locally or from the cluster, is no
    /// update: the next flush sends nothing; a changed one is sent.
    #[test]
    fn an_unchanged_entry_is_no_update() {
        let entry = |players: u32| TableEntry {
            table: 7,
            path: "g".into(),
            seats: 6,
            players,
            watchers: 0,
            attrs: Bytes::from_static(b"{}"),
        };
        let lobby = Lobby::default();
        let c = crate::testing::client("u", Encoding::Json);
        lobby.put(entry(1));
        lobby.subscribe(&c, 1, "");
        assert_eq!(lobby.flush(), 1);
        lobby.put(entry(1));
        assert_eq!(lobby.flush(), 0);
        let cluster = Lobby::default();
        cluster.subscribe(&c, 2, "");
        assert!(cluster.put_seq(entry(1), 1));
        assert_eq!(cluster.flush(), 1);
        assert!(cluster.put_seq(entry(1), 2));
        assert_eq!(cluster.flush(), 0);
        assert!(!cluster.put_seq(entry(3), 2), "an older number is ignored");
        assert!(cluster.put_seq(entry(3), 3));
        assert_eq!(cluster.flush(), 1);
    }

    /// A snapshot in pages with changes, removals and flushes between the
    /// pages: applying everything in order, as §5e says, ends with the
    /// lobby's entries.
    #[test]
    fn pages_and_deltas_in_order_end_with_the_lobby() {
        use crate::testing::{client, drain};
        let entry = |table: u64, players: u32| TableEntry {
            table,
            path: format!("g/{}", table % 3),
            seats: 6,
            players,
            watchers: 0,
            attrs: Bytes::from(format!(r#"{{"pad":"{}"}}"#, "x".repeat(200))),
        };
        let lobby = Lobby::default();
        for t in 1..=2_000 {
            lobby.put(entry(t, 0));
        }
        lobby.flush();
        let c = client("u", Encoding::Json);
        let Subscribed::Paging(pager) = lobby.subscribe(&c, 9, "") else {
            panic!("2,000 entries of ~300 B need pages");
        };
        let mut after = None;
        let mut round = 0u64;
        loop {
            // Between pages: tables ahead of and behind the cursor change,
            // some go, one is added, and a flush sends the delta.
            round += 1;
            lobby.put(entry(round * 7 % 2_000 + 1, round as u32));
            lobby.put(entry(2_000 - round, 5));
            lobby.remove(round * 13 % 2_000 + 1);
            lobby.put(entry(10_000 + round, 1));
            lobby.flush();
            match lobby.next_page(&pager, after) {
                Paged::Page(last) => after = Some(last),
                Paged::Last => break,
                Paged::Gone => panic!("still subscribed"),
            }
        }
        assert!(round > 3, "pages: {round}");
        let mut map = BTreeMap::new();
        let mut seq = None;
        for m in drain(&c) {
            match m {
                ServerMsg::Push(Push::LobbyPage { tables, .. }) => {
                    assert!(seq.is_none());
                    map.extend(tables.into_iter().map(|t| (t.table, t)));
                }
                ServerMsg::Push(Push::LobbyUpdate {
                    tables,
                    removed,
                    seq: s,
                    ..
                }) => {
                    if seq.is_some_and(|last| s <= last) {
                        continue;
                    }
                    map.extend(tables.into_iter().map(|t| (t.table, t)));
                    for id in removed {
                        map.remove(&id);
                    }
                    if seq.is_some() {
                        seq = Some(s);
                    }
                }
                ServerMsg::Reply {
                    id: 9,
                    reply: Reply::Lobby { seq: s, tables },
                } => {
                    map.extend(tables.into_iter().map(|t| (t.table, t)));
                    seq = Some(s);
                }
                other => panic!("{other:?}"),
            }
        }
        // Whatever changed after the last page comes in the next flush.
        lobby.put(entry(1, 99));
        lobby.flush();
        for m in drain(&c) {
            if let ServerMsg::Push(Push::LobbyUpdate {
                tables, removed, ..
            }) = m
            {
                map.extend(tables.into_iter().map(|t| (t.table, t)));
                for id in removed {
                    map.remove(&id);
                }
            }
        }
        let want: BTreeMap<u64, TableEntry> =
            lobby.entries().into_iter().map(|e| (e.table, e)).collect();
        assert_eq!(map, want);
        // Unsubscribed midway: the pager stops.
        let d = client("v", Encoding::Binary);
        let Subscribed::Paging(pager) = lobby.subscribe(&d, 1, "") else {
            panic!("pages");
        };
        assert!(lobby.unsubscribe(d.id, ""));
        assert!(matches!(lobby.next_page(&pager, None), Paged::Gone));
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
