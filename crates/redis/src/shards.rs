//! The subscriber side of Redis Cluster (decision 0021): channel topics
//! over sharded pub/sub (`SSUBSCRIBE`), one subscriber connection per
//! master, each topic subscribed at the master owning its slot, which is
//! the channel's slot (topic `P:c:{CHANNEL}`, published with `SPUBLISH` by
//! the scripts that write the channel's keys). Sharded messages stay within
//! the shard (master and replicas): the cluster bus carries none of them,
//! which is what lets channel traffic grow with the masters.
//!
//! Node-wide topics (control, a node's own, the lobby) and wildcard
//! patterns stay on classic pub/sub on one connection to any node
//! ([`PubSub`] with the cluster target): classic `PUBLISH` reaches every
//! node of the cluster, patterns have no sharded form, and these topics
//! carry little. Pattern subscribers receive publications because the
//! publish script also `PUBLISH`es on the classic topic `P:c:CHANNEL` while
//! any node has a pattern (decision 0021).
//!
//! Following the map: a task keeps one sharded connection per master as
//! the shared [`Topology`] says (new masters get one, gone masters' are
//! dropped). A master that loses a slot tells its subscribers with a
//! `sunsubscribe` they did not ask for, and one that does not own a slot
//! answers `SSUBSCRIBE` with `-MOVED`: either way the connection is
//! dropped and reconnected, and the sink resubscribes the channels that
//! were on it (now routed by the refreshed map) and fills their gaps from
//! the streams, as after any reconnection.
//!
//! Per shard: each connection has its own id in the sink's calls
//! ([`Sink::reconnected`], [`Sink::disconnected`]), and each channel
//! remembers the connection it subscribed on, so a master's death pauses
//! and resynchronises only the channels of that master; the others'
//! live delivery goes on.

use crate::pubsub::{PubSub, Sink};
use crate::slot;
use crate::target::Target;
use crate::topology::Topology;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::oneshot;

/// The link of a channel whose slot had no master when it subscribed:
/// every sharded link's `reconnected` resubscribes it.
pub(crate) const NO_LINK: u64 = u64::MAX;

/// How often the sharded connections are matched with the map.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One sharded subscriber connection per master.
pub(crate) struct Shards {
    topology: Arc<Topology>,
    target: Target,
    sink: Weak<dyn Sink>,
    subs: Mutex<HashMap<String, Arc<PubSub>>>,
    /// The next connection's id (ids are never reused: a channel still
    /// naming a dropped connection's id is resubscribed, not confused
    /// with a new one's).
    next_id: AtomicU64,
}

impl Shards {
    fn start(target: Target, topology: Arc<Topology>, sink: Weak<dyn Sink>) -> Arc<Shards> {
        let s = Arc::new(Shards {
            topology,
            target,
            sink,
            subs: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(crate::pubsub::CLASSIC + 1),
        });
        tokio::spawn(follow(Arc::downgrade(&s)));
        s
    }

    /// Matches the connections with the map's masters. A master gone from
    /// the map (failed, its slots uncovered or taken by a replica) takes
    /// its connection with it; the sink then resubscribes the channels
    /// that were on it, by the new map (a new master's connection
    /// resubscribes those that could not reach it yet when it comes up).
    fn sync(&self) {
        let Some(map) = self.topology.map() else {
            return;
        };
        let dropped: Vec<u64> = {
            let mut subs = lock(&self.subs);
            let mut dropped = Vec::new();
            subs.retain(|a, ps| {
                let keep = map.masters().iter().any(|m| &m.addr == a);
                if !keep {
                    dropped.push(ps.id());
                }
                keep
            });
            for m in map.masters() {
                if !subs.contains_key(&m.addr) {
                    let mut t = self.target.clone();
                    t.addr = m.addr.clone();
                    t.cluster = None;
                    t.sentinel = None;
                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                    subs.insert(
                        m.addr.clone(),
                        PubSub::start_sharded(t, self.sink.clone(), id, self.topology.clone()),
                    );
                }
            }
            dropped
        };
        if let Some(sink) = self.sink.upgrade() {
            for id in dropped {
                sink.reconnected(id);
            }
        }
    }

    /// Whether connection `id` is one of the map's and up.
    fn link_up(&self, id: u64) -> bool {
        lock(&self.subs).values().any(|p| p.id() == id && p.is_up())
    }

    /// The connection of the master owning `topic`'s slot.
    fn of(&self, topic: &[u8]) -> Option<Arc<PubSub>> {
        let map = self.topology.map()?;
        let owner = map.owner(slot::slot(topic))?;
        if let Some(ps) = lock(&self.subs).get(&owner.addr) {
            return Some(ps.clone());
        }
        self.sync();
        lock(&self.subs).get(&owner.addr).cloned()
    }

    fn is_up(&self) -> bool {
        let Some(map) = self.topology.map() else {
            return false;
        };
        let subs = lock(&self.subs);
        !map.masters().is_empty()
            && map
                .masters()
                .iter()
                .all(|m| subs.get(&m.addr).is_some_and(|p| p.is_up()))
    }
}

async fn follow(me: Weak<Shards>) {
    loop {
        let Some(s) = me.upgrade() else { return };
        s.sync();
        drop(s);
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

/// The broker's subscriber links: classic pub/sub on one connection, and
/// in a Redis Cluster the sharded connections for channel topics.
pub(crate) struct Subscriber {
    classic: Arc<PubSub>,
    shards: Option<Arc<Shards>>,
}

impl Subscriber {
    /// Starts the links for `target`; `sink` receives every message.
    pub(crate) fn start(target: Target, sink: Weak<dyn Sink>) -> Subscriber {
        let shards = target
            .cluster()
            .cloned()
            .map(|t| Shards::start(target.clone(), t, sink.clone()));
        Subscriber {
            classic: PubSub::start(target, sink),
            shards,
        }
    }

    /// Subscribes to a channel's topic (sharded in a cluster): the id of
    /// the link it goes on (whose `reconnected` must resubscribe it), and
    /// the confirmation, which fails if that link is down or goes down
    /// first.
    pub(crate) fn subscribe_channel(&self, topic: Bytes) -> (u64, oneshot::Receiver<()>) {
        match &self.shards {
            None => (self.classic.id(), self.classic.subscribe(topic)),
            Some(s) => match s.of(&topic) {
                Some(ps) => (ps.id(), ps.subscribe(topic)),
                // No owner: fails at once; the new master's link
                // resubscribes every channel left on an unknown link.
                None => (NO_LINK, oneshot::channel().1),
            },
        }
    }

    /// Whether link `id` (from [`Subscriber::subscribe_channel`]) is up.
    pub(crate) fn link_up(&self, id: u64) -> bool {
        if id == self.classic.id() {
            return self.classic.is_up();
        }
        self.shards.as_ref().is_some_and(|s| s.link_up(id))
    }

    /// Unsubscribes from a channel's topic.
    pub(crate) fn unsubscribe_channel(&self, topic: Bytes) {
        match &self.shards {
            None => self.classic.unsubscribe(topic),
            Some(s) => {
                if let Some(ps) = s.of(&topic) {
                    ps.unsubscribe(topic);
                }
            }
        }
    }

    /// Subscribes to a node-wide topic (classic pub/sub).
    pub(crate) fn subscribe(&self, topic: Bytes) -> oneshot::Receiver<()> {
        self.classic.subscribe(topic)
    }

    /// `PSUBSCRIBE` (classic pub/sub): the confirmation, which fails if
    /// the classic link is down or goes down first.
    pub(crate) fn psubscribe(&self, glob: Bytes) -> oneshot::Receiver<()> {
        self.classic.psubscribe(glob)
    }

    /// `PUNSUBSCRIBE`.
    pub(crate) fn punsubscribe(&self, glob: Bytes) {
        self.classic.punsubscribe(glob);
    }

    /// Every link is up.
    pub(crate) fn is_up(&self) -> bool {
        self.classic.is_up() && self.shards.as_ref().is_none_or(|s| s.is_up())
    }
}
