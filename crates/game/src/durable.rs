//! Durable tables (decision 0009): what a table saves, and the store it
//! saves to.
//!
//! In a cluster each table has one owner at a time, the node holding its
//! lease; every state change the owner acknowledges is first saved, through
//! a write that only the current lease holder can make (a fencing token),
//! so when the owner dies another node claims the lease, restores the table
//! from the last save and goes on with the same hand. The engine does not
//! know Redis: it talks to a [`TableStore`] (the server adapts
//! `herald_redis::tables::TableStore` to it), so the rules of ownership are
//! written once, here and in the table task.
//!
//! A *record* is the engine's part of a table (its parameters, which user
//! holds each seat, the pending timers as time left, the lobby attributes)
//! followed by the game's own [`crate::Game::save`]: a 4-byte big-endian
//! length, the engine's part as JSON, then the game's bytes.

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// A boxed future, as the store's methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A table's lease held by this node, with its fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The table.
    pub table: u64,
    /// The token of this claim (grows with every claim of the table).
    pub token: u64,
}

/// Why a store operation failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    /// The lease is not (or no longer) this node's: `holder` has it, or
    /// nobody (`None`, it expired).
    #[error("lease lost (held by {0:?})")]
    Fenced(Option<String>),
    /// The store is unreachable; nothing is known to be written.
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

/// A table's last save as the store returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// Token of the owner that wrote it.
    pub token: u64,
    /// When, on the store's clock (ms).
    pub at_ms: u64,
    /// The record.
    pub data: Bytes,
}

/// What a claim got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The lease is ours.
    Won {
        /// The lease and its new token.
        lease: Lease,
        /// The store's clock at the claim (ms).
        now_ms: u64,
        /// The table's last save, if any.
        saved: Option<Saved>,
    },
    /// Another node holds it (`NODE:TOKEN`).
    Held(String),
}

/// Leases and saves of tables (decision 0009's contract): a claim succeeds
/// for one node at a time, and `save` succeeds only while the lease given is
/// the table's current one.
pub trait TableStore: Send + Sync + 'static {
    /// This node's id.
    fn node(&self) -> &str;
    /// Claims `table` for `lease`; the token will be above `floor`.
    fn claim(
        &self,
        table: u64,
        floor: u64,
        lease: Duration,
    ) -> BoxFuture<'_, Result<Claimed, StoreError>>;
    /// Saves `record` if `lease` is still the table's lease; returns the
    /// store's time of the write (ms).
    fn save(&self, lease: Lease, record: Bytes) -> BoxFuture<'_, Result<u64, StoreError>>;
    /// Saves several tables' records at once (group commit, decision 0009:
    /// the engine sends every save queued while the previous batch was in
    /// flight), each under its own lease: one table found fenced fails
    /// alone. Returns one result per save, in the order given; `Err` for
    /// the whole batch when the store could not be reached (nothing is
    /// known to be written). Default: one [`TableStore::save`] each.
    fn save_all(
        &self,
        saves: Vec<(Lease, Bytes)>,
    ) -> BoxFuture<'_, Result<Vec<Result<u64, StoreError>>, StoreError>> {
        Box::pin(async move {
            let mut results = Vec::with_capacity(saves.len());
            for (lease, record) in saves {
                match self.save(lease, record).await {
                    Err(StoreError::Unavailable(e)) if results.is_empty() => {
                        return Err(StoreError::Unavailable(e))
                    }
                    r => results.push(r),
                }
            }
            Ok(results)
        })
    }
    /// Extends `lease` by `time`; false if it is no longer held.
    fn renew(&self, lease: Lease, time: Duration) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// Extends every lease of `leases` by `time`, in as few calls as the
    /// store can (the engine renews all of a node's tables at once);
    /// returns the leases no longer held. Default: one [`TableStore::renew`]
    /// each.
    fn renew_all(
        &self,
        leases: Vec<Lease>,
        time: Duration,
    ) -> BoxFuture<'_, Result<Vec<Lease>, StoreError>> {
        Box::pin(async move {
            let mut lost = Vec::new();
            for l in leases {
                if !self.renew(l, time).await? {
                    lost.push(l);
                }
            }
            Ok(lost)
        })
    }
    /// Publishes the table's lobby entry (encoded by
    /// [`crate::lobby::encode_entry`]) to every node's lobby, if `lease`
    /// still holds; queued at once so one table's entries keep their order,
    /// never awaited (a lost one is replaced by the next). Default: nothing
    /// (a store without a shared lobby).
    fn publish_entry(&self, lease: Lease, entry: Bytes) {
        let _ = (lease, entry);
    }
}

/// Saves sent to the store in one [`TableStore::save_all`] at most.
pub const SAVE_BATCH: usize = 256;
/// Bytes of records in one batch at most (a batch holds one save even if
/// that is larger).
pub const SAVE_BATCH_BYTES: usize = 1 << 20;

/// One table's save waiting for the node's next batch.
struct SaveRequest {
    lease: Lease,
    record: Bytes,
    done: oneshot::Sender<Result<u64, StoreError>>,
}

/// The node's save queue (group commit across tables, decision 0009): each
/// table hands its save here and waits for the result; one task sends
/// everything queued as one [`TableStore::save_all`], one batch in flight
/// at a time, and whatever queued meanwhile forms the next batch. No added
/// delay: an idle node's save goes out at once, alone; a busy node's saves
/// share the store's round trips and script calls.
#[derive(Clone)]
pub(crate) struct Saver {
    tx: mpsc::UnboundedSender<SaveRequest>,
}

impl Saver {
    /// Starts the queue's task for `store`; it ends when every `Saver` is
    /// dropped. The queue is unbounded in type only: each table has at most
    /// one save queued (it waits for the result), so it holds at most one
    /// save per table of the node.
    /// `sent(n)` is called for every batch of `n` saves (metrics).
    pub(crate) fn start(
        store: Arc<dyn TableStore>,
        sent: impl Fn(usize) + Send + 'static,
    ) -> Saver {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run_saver(store, rx, sent));
        Saver { tx }
    }

    /// Saves `record` under `lease` in the node's next batch.
    pub(crate) async fn save(&self, lease: Lease, record: Bytes) -> Result<u64, StoreError> {
        let (done, rx) = oneshot::channel();
        self.tx
            .send(SaveRequest {
                lease,
                record,
                done,
            })
            .map_err(|_| StoreError::Unavailable("the save queue stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Unavailable("the save queue dropped the save".into()))?
    }
}

async fn run_saver(
    store: Arc<dyn TableStore>,
    mut rx: mpsc::UnboundedReceiver<SaveRequest>,
    sent: impl Fn(usize),
) {
    let mut next: Option<SaveRequest> = None;
    loop {
        let first = match next.take() {
            Some(r) => r,
            None => match rx.recv().await {
                Some(r) => r,
                None => return,
            },
        };
        let mut bytes = first.record.len();
        let mut batch = vec![first];
        while batch.len() < SAVE_BATCH {
            let Ok(r) = rx.try_recv() else { break };
            if bytes + r.record.len() > SAVE_BATCH_BYTES {
                next = Some(r);
                break;
            }
            bytes += r.record.len();
            batch.push(r);
        }
        let (saves, waiting): (Vec<(Lease, Bytes)>, Vec<_>) = batch
            .into_iter()
            .map(|r| ((r.lease, r.record), r.done))
            .unzip();
        let n = saves.len();
        sent(n);
        match store.save_all(saves).await {
            Ok(results) if results.len() == n => {
                for (done, r) in waiting.into_iter().zip(results) {
                    let _ = done.send(r);
                }
            }
            Ok(results) => {
                let e = format!("the store answered {} results for {n} saves", results.len());
                for done in waiting {
                    let _ = done.send(Err(StoreError::Unavailable(e.clone())));
                }
            }
            Err(e) => {
                for done in waiting {
                    let _ = done.send(Err(e.clone()));
                }
            }
        }
    }
}

/// How an engine's tables are made durable.
#[derive(Clone)]
pub struct Durability {
    /// Where leases and saves go.
    pub store: Arc<dyn TableStore>,
    /// A lease's length (default 3 s): a dead owner's tables are taken over
    /// this long after its last renewal. Renewed every third of it.
    pub lease: Duration,
}

impl std::fmt::Debug for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durability")
            .field("node", &self.store.node())
            .field("lease", &self.lease)
            .finish()
    }
}

/// A pending timer in a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum SavedTimer {
    /// The game's timer with this key.
    Game { key: u64, left_ms: u64 },
    /// A dropped player's grace period at this seat.
    Grace { seat: u32, left_ms: u64 },
}

/// The engine's part of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Head {
    pub(crate) v: u32,
    pub(crate) id: u64,
    pub(crate) game: String,
    pub(crate) seats: u32,
    pub(crate) timing: String,
    pub(crate) path: String,
    pub(crate) params: Map<String, Value>,
    /// The user holding each seat.
    pub(crate) users: Vec<Option<String>>,
    pub(crate) timers: Vec<SavedTimer>,
    pub(crate) attrs: Map<String, Value>,
}

/// Layout version of the engine's part.
pub(crate) const RECORD_VERSION: u32 = 1;

/// A record: the engine's part, then the game's state.
pub(crate) fn encode(head: &Head, game: &[u8]) -> Result<Bytes, String> {
    let head = serde_json::to_vec(head).map_err(|e| e.to_string())?;
    let len = u32::try_from(head.len()).map_err(|_| "record head too large".to_string())?;
    let mut b = BytesMut::with_capacity(4 + head.len() + game.len());
    b.put_u32(len);
    b.put_slice(&head);
    b.put_slice(game);
    Ok(b.freeze())
}

/// Reads a record back (outside data: every malformation is an `Err`).
pub(crate) fn decode(record: &[u8]) -> Result<(Head, &[u8]), String> {
    let (len, rest) = record
        .split_first_chunk::<4>()
        .ok_or("record shorter than its length")?;
    let len = u32::from_be_bytes(*len) as usize;
    if rest.len() < len {
        return Err("record shorter than its head".into());
    }
    let (head, game) = rest.split_at(len);
    let head: Head =
        serde_json::from_slice(head).map_err(|e| format!("malformed record head: {e}"))?;
    if head.v != RECORD_VERSION {
        return Err(format!(
            "record version {} (this server reads {RECORD_VERSION})",
            head.v
        ));
    }
    if head.users.len() != head.seats as usize {
        return Err("record seats and users differ".into());
    }
    Ok((head, game))
}
