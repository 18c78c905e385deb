//! One lobby across the cluster (decision 0009, issue 17): every node,
//! edge or game, serves the same tables in its lobby, built from what the
//! tables' owners publish through Redis (`TableStore::publish_entry`: one
//! script numbers each entry with the cluster's lobby sequence, keeps it in
//! a hash and publishes it on `P:lobby`).
//!
//! Redis delivers the topic's messages to every node in the order of that
//! sequence, so every node applies the same entries in the same order and
//! shows the same snapshot once it has seen the same messages. A message
//! lost on the way (the subscriber link dropped, seen as a reconnect or a
//! gap in the sequence) is made up by reading the hash again; an entry
//! older than the one a node has is ignored, so the reload and the live
//! messages may interleave. When a table changes owner its entry stays
//! until the new owner publishes one, with a higher number. A deleted
//! table's removal is a message with an empty entry, numbered and kept in
//! the hash like an entry, so a node that missed it still removes the table
//! when it reads the hash again.

use herald_game::Engine;
use herald_redis::tables::{parse_lobby, TableStore};
use herald_redis::RedisBroker;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Starts filling `engine`'s lobby from the cluster's.
pub(crate) fn start(broker: &Arc<RedisBroker>, engine: &Arc<Engine>) {
    let store = broker.table_store();
    let engine = Arc::downgrade(engine);
    let last = Arc::new(AtomicU64::new(0));
    let (e, s) = (engine.clone(), store.clone());
    broker.on_lobby(Box::new(move |msg| {
        let Some(msg) = msg else {
            // (Re)connected: what was published meanwhile is in the hash.
            return reload(e.clone(), s.clone());
        };
        let Some((seq, table, entry)) = parse_lobby(&msg) else {
            tracing::debug!("malformed lobby message");
            return;
        };
        let before = last.swap(seq, Ordering::Relaxed);
        if before != 0 && seq != before + 1 {
            tracing::debug!(seq, before, "gap in the lobby sequence: reading it again");
            reload(e.clone(), s.clone());
        }
        if let Some(engine) = e.upgrade() {
            apply(&engine, seq, table, &entry);
        }
    }));
    reload(engine, store);
}

/// How often a failed read of the lobby's hash is tried again.
const RETRY: std::time::Duration = std::time::Duration::from_millis(200);

/// Applies every entry in Redis's lobby hash (newer ones only), trying
/// again until the read succeeds: a node's subscriber link may come up
/// before its command link, and a read given up then lost every entry
/// published before it for good (the live messages after it show no gap:
/// the first one has nothing to compare with). Measured: an edge started
/// with a game node of 100 tables listed 47–95 of them in about one start
/// in ten (bench/RESULTS.md, 2026-11-26 session 2).
fn reload(engine: Weak<Engine>, store: TableStore) {
    tokio::spawn(async move {
        let entries = loop {
            match store.lobby_entries().await {
                Ok(e) => break e,
                Err(e) => {
                    tracing::debug!(error = %e, "cannot read the cluster lobby now; retrying");
                    if engine.strong_count() == 0 {
                        return;
                    }
                    tokio::time::sleep(RETRY).await;
                }
            }
        };
        let Some(engine) = engine.upgrade() else {
            return;
        };
        for msg in entries {
            if let Some((seq, table, entry)) = parse_lobby(&msg) {
                apply(&engine, seq, table, &entry);
            }
        }
    });
}

/// One lobby message: an entry, or (empty) a deleted table's removal.
fn apply(engine: &Engine, seq: u64, table: u64, entry: &[u8]) {
    if entry.is_empty() {
        engine.remove_lobby(seq, table);
    } else {
        engine.apply_lobby(seq, entry);
    }
}
