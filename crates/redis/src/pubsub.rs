//! The subscriber link: one connection in Redis's subscribe mode, shared by
//! every channel of the node (one Redis subscription per channel per node,
//! however many clients subscribe to it).
//!
//! `SUBSCRIBE`, `UNSUBSCRIBE` (and their pattern forms) each name one topic, so Redis confirms each
//! with exactly one reply, in order: a FIFO of the commands sent matches every
//! confirmation to its command, and a subscribe is reported confirmed only by
//! its own confirmation (not by an older one for the same topic). Messages are
//! handed to the [`Sink`] on the reader task, in the order Redis sent them,
//! one batch per read of the socket: a batch never spans a confirmation (the
//! messages before it are handed over first), so "confirmed" still means
//! "what follows reaches the sink".
//!
//! When the connection fails the link reconnects (capped backoff) and calls
//! [`Sink::reconnected`]; the sink re-subscribes what it needs and fills the
//! gap from the streams. Pending confirmations of the old connection are
//! dropped, which their waiters see as an error.

use crate::pipe::{connect, moved_from, CONNECT_TIMEOUT, MAX_BACKOFF};
use crate::resp::{self, Value};
use crate::target::Target;
use crate::topology::Topology;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// Subscribe/unsubscribe commands that may wait for the writer.
const QUEUE: usize = 65_536;

/// One message the subscriber link read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    /// The topic it was published to.
    pub topic: Bytes,
    /// What was published.
    pub payload: Bytes,
    /// It came through a pattern subscription (`pmessage`).
    pub pattern: bool,
}

/// Receives what the subscriber link reads.
pub trait Sink: Send + Sync + 'static {
    /// The messages of one read of the link, in the order Redis sent them
    /// (never empty). Handing them over together lets the sink lock each
    /// channel once and fan a channel's messages out as one batch, so each
    /// local subscriber's writer is woken once per read rather than once
    /// per message (decision 0003, "Coalescing").
    fn messages(&self, batch: &[Incoming]);
    /// Link `link` ([`PubSub::id`]) (re)connected with no subscriptions:
    /// subscribe again what was on it.
    fn reconnected(&self, link: u64);
    /// Link `link` went down: its messages may be missed until
    /// `reconnected`.
    fn disconnected(&self, link: u64);
}

/// The id of the classic link ([`PubSub::start`]): node-wide topics, and
/// outside a Redis Cluster every channel. Sharded links have others.
pub const CLASSIC: u64 = 0;

enum Cmd {
    Subscribe(Bytes, oneshot::Sender<()>),
    Unsubscribe(Bytes),
    PSubscribe(Bytes, oneshot::Sender<()>),
    PUnsubscribe(Bytes),
}

/// The subscriber link.
pub struct PubSub {
    tx: mpsc::Sender<Cmd>,
    up: AtomicBool,
    id: u64,
}

/// A confirmation awaited: who waits for it, and whether it is for an
/// unsubscribe (a sharded `sunsubscribe` nobody asked for means the slot
/// moved).
type Pending = (Option<oneshot::Sender<()>>, bool);

impl std::fmt::Debug for PubSub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PubSub")
            .field("up", &self.is_up())
            .finish_non_exhaustive()
    }
}

impl PubSub {
    /// Starts the link; `sink` receives its messages.
    pub fn start(target: Target, sink: Weak<dyn Sink>) -> Arc<PubSub> {
        PubSub::start_with(target, sink, None)
    }

    /// Starts a sharded link (`SSUBSCRIBE`/`SUNSUBSCRIBE`, Redis Cluster)
    /// to the one Redis `target` names (`shards.rs`), with id `id` (not
    /// [`CLASSIC`]) in the sink's calls.
    /// A `-MOVED` answer to an `SSUBSCRIBE` corrects `topology` at once,
    /// so that the resubscription after the reconnect goes to the slot's
    /// new master, not to this one again until the next refresh.
    pub(crate) fn start_sharded(
        target: Target,
        sink: Weak<dyn Sink>,
        id: u64,
        topology: Arc<Topology>,
    ) -> Arc<PubSub> {
        PubSub::start_with(target, sink, Some((id, topology)))
    }

    fn start_with(
        target: Target,
        sink: Weak<dyn Sink>,
        sharded: Option<(u64, Arc<Topology>)>,
    ) -> Arc<PubSub> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let link = Arc::new(PubSub {
            tx,
            up: AtomicBool::new(false),
            id: sharded.as_ref().map_or(CLASSIC, |s| s.0),
        });
        tokio::spawn(run(Arc::downgrade(&link), target, sink, rx, sharded));
        link
    }

    /// This link's id in the sink's calls ([`CLASSIC`] for a classic link).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the connection is up.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// Subscribes to `topic`; the receiver completes when Redis confirmed it
    /// (messages published after that reach the sink), or fails if the link
    /// went down first.
    pub fn subscribe(&self, topic: Bytes) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        if self.is_up() {
            // A full queue drops `tx`: the caller sees the error.
            let _ = self.tx.try_send(Cmd::Subscribe(topic, tx));
        }
        rx
    }

    /// Unsubscribes from `topic` (best effort: a lost link has none anyway).
    pub fn unsubscribe(&self, topic: Bytes) {
        if self.is_up() {
            let _ = self.tx.try_send(Cmd::Unsubscribe(topic));
        }
    }

    /// Subscribes to the Redis glob `glob` (`PSUBSCRIBE`); the receiver
    /// completes when Redis confirmed it (messages matching it that are
    /// published after that reach the sink), or fails if the link is down
    /// or goes down first (after a reconnect the sink subscribes again).
    pub fn psubscribe(&self, glob: Bytes) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        if self.is_up() {
            // A full queue drops `tx`: the caller sees the error.
            let _ = self.tx.try_send(Cmd::PSubscribe(glob, tx));
        }
        rx
    }

    /// Undoes [`PubSub::psubscribe`].
    pub fn punsubscribe(&self, glob: Bytes) {
        if self.is_up() {
            let _ = self.tx.try_send(Cmd::PUnsubscribe(glob));
        }
    }
}

async fn run(
    link: Weak<PubSub>,
    target: Target,
    sink: Weak<dyn Sink>,
    mut rx: mpsc::Receiver<Cmd>,
    sharded: Option<(u64, Arc<Topology>)>,
) {
    let id = sharded.as_ref().map_or(CLASSIC, |s| s.0);
    let topology = sharded.map(|s| s.1);
    let mut backoff = Duration::from_millis(50);
    let mut switches = target.switches();
    loop {
        let (stream, addr) = match connect(&target, &[]).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "redis subscriber link: cannot connect");
                // A master that moved (Sentinel) is tried at once.
                tokio::select! {
                    _ = tokio::time::sleep(backoff.min(CONNECT_TIMEOUT)) => {}
                    _ = moved_from(&mut switches, &target, "") => {
                        backoff = Duration::from_millis(25);
                    }
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                if link.strong_count() == 0 {
                    return;
                }
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        // Commands queued for the old connection mean nothing on this one.
        while rx.try_recv().is_ok() {}
        let Some(l) = link.upgrade() else { return };
        l.up.store(true, Ordering::Release);
        drop(l);
        if let Some(s) = sink.upgrade() {
            s.reconnected(id);
        }
        let stop = tokio::select! {
            s = serve(stream, &mut rx, &sink, topology.as_deref()) => s,
            _ = moved_from(&mut switches, &target, &addr) => false,
        };
        if let Some(l) = link.upgrade() {
            l.up.store(false, Ordering::Release);
        }
        if let Some(s) = sink.upgrade() {
            s.disconnected(id);
        }
        if stop {
            return;
        }
        tracing::warn!(addr = %addr, "lost the redis subscriber link; reconnecting");
    }
}

/// Serves one connection; true when the link was dropped (stop for good).
/// `sharded`: the cluster's map, for a sharded link.
async fn serve(
    stream: tokio::net::TcpStream,
    rx: &mut mpsc::Receiver<Cmd>,
    sink: &Weak<dyn Sink>,
    sharded: Option<&Topology>,
) -> bool {
    let (mut read, mut write) = stream.into_split();
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let (sub, unsub): (&[u8], &[u8]) = if sharded.is_some() {
        (b"SSUBSCRIBE", b"SUNSUBSCRIBE")
    } else {
        (b"SUBSCRIBE", b"UNSUBSCRIBE")
    };
    let mut inbuf = BytesMut::with_capacity(64 * 1024);
    let mut out = BytesMut::new();
    let mut batch = Vec::with_capacity(64);
    let mut msgs: Vec<Incoming> = Vec::with_capacity(64);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, 512) => {
                if n == 0 {
                    return true;
                }
                out.clear();
                for cmd in batch.drain(..) {
                    match cmd {
                        Cmd::Subscribe(topic, done) => {
                            resp::encode(&[sub, &topic], &mut out);
                            pending.push_back((Some(done), false));
                        }
                        Cmd::Unsubscribe(topic) => {
                            resp::encode(&[unsub, &topic], &mut out);
                            pending.push_back((None, true));
                        }
                        Cmd::PSubscribe(glob, done) => {
                            resp::encode(&[&b"PSUBSCRIBE"[..], &glob], &mut out);
                            pending.push_back((Some(done), false));
                        }
                        Cmd::PUnsubscribe(glob) => {
                            resp::encode(&[&b"PUNSUBSCRIBE"[..], &glob], &mut out);
                            pending.push_back((None, true));
                        }
                    }
                }
                if write.write_all(&out).await.is_err() {
                    return false;
                }
            }
            r = read.read_buf(&mut inbuf) => {
                if !matches!(r, Ok(n) if n > 0) {
                    return false;
                }
                let Some(sink) = sink.upgrade() else { return true };
                let ok = loop {
                    match resp::decode(&mut inbuf) {
                        Ok(Some(v)) => {
                            if let (Value::Error(e), Some(t)) = (&v, sharded) {
                                crate::cluster::follow_moved(t, e);
                            }
                            if !dispatch(v, &mut pending, &mut msgs, &*sink) {
                                break false;
                            }
                        }
                        Ok(None) => break true,
                        Err(e) => {
                            tracing::warn!(error = %e, "redis subscriber link");
                            break false;
                        }
                    }
                };
                // What was read before a failure still goes to the sink.
                flush(&mut msgs, &*sink);
                if msgs.capacity() > 4096 {
                    msgs = Vec::with_capacity(64);
                }
                if !ok {
                    return false;
                }
            }
        }
    }
}

/// Hands the messages gathered so far to the sink.
fn flush(msgs: &mut Vec<Incoming>, sink: &dyn Sink) {
    if !msgs.is_empty() {
        sink.messages(msgs);
        msgs.clear();
    }
}

/// Handles one value read in subscribe mode: a message joins `msgs` (the
/// read's batch), a confirmation first hands `msgs` over; false if it makes
/// no sense.
fn dispatch(
    v: Value,
    pending: &mut VecDeque<Pending>,
    msgs: &mut Vec<Incoming>,
    sink: &dyn Sink,
) -> bool {
    let Value::Array(Some(mut items)) = v else {
        // `-MOVED` to an `SSUBSCRIBE` (the slot has another master), or
        // any other error: reconnect, and the sink subscribes again.
        tracing::warn!(reply = ?v, "redis subscriber link: unexpected reply; reconnecting");
        return false;
    };
    let kind = items.first().and_then(|k| k.bytes().cloned());
    match kind.as_deref() {
        Some(b"message" | b"smessage") if items.len() == 3 => {
            let payload = items
                .pop()
                .and_then(|p| p.bytes().cloned())
                .unwrap_or_default();
            if let Some(topic) = items.get(1).and_then(|t| t.bytes()) {
                msgs.push(Incoming {
                    topic: topic.clone(),
                    payload,
                    pattern: false,
                });
            }
            true
        }
        Some(b"pmessage") if items.len() == 4 => {
            let payload = items
                .pop()
                .and_then(|p| p.bytes().cloned())
                .unwrap_or_default();
            if let Some(topic) = items.get(2).and_then(|t| t.bytes()) {
                msgs.push(Incoming {
                    topic: topic.clone(),
                    payload,
                    pattern: true,
                });
            }
            true
        }
        Some(b"sunsubscribe") if !pending.front().is_some_and(|p| p.1) => {
            // Not ours: the slot moved to another master (resharding or
            // fail-over). Reconnect; the sink resubscribes by the new map.
            flush(msgs, sink);
            tracing::warn!("redis subscriber link: a slot moved away; resubscribing");
            false
        }
        Some(
            b"subscribe" | b"unsubscribe" | b"psubscribe" | b"punsubscribe" | b"ssubscribe"
            | b"sunsubscribe",
        ) => {
            flush(msgs, sink);
            match pending.pop_front() {
                Some((Some(done), _)) => {
                    let _ = done.send(());
                    true
                }
                Some((None, _)) => true,
                None => {
                    tracing::warn!("redis subscriber link: a confirmation nobody asked for");
                    false
                }
            }
        }
        _ => {
            tracing::warn!("redis subscriber link: unexpected message");
            false
        }
    }
}
