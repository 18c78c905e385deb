//! The [`RedisBroker`] itself: the state one node keeps about the cluster
//! (`Inner`: its two Redis links, the channels it follows, the names of its
//! keys), starting it, and the [`Broker`] contract: publish, attach a
//! subscriber after its history (see the crate docs), history and
//! positions, wildcard patterns.
//!
//! The other concerns are child modules rather than siblings because each
//! adds methods to `Inner` and reads its private fields, while `Inner` holds
//! their types (a child may use its parent; siblings using this module and
//! it using them would make a circle):
//!
//! - `live`: what the subscriber link receives, delivered in each channel's
//!   offset order, gaps filled from the stream.
//! - `presence`: cluster-wide presence and the transitions reported to the
//!   hub's observer.
//! - `nodes`: heartbeats, the node list, dead nodes, and the node-wide
//!   topics (control, a node's own, the lobby's).
//!
//! Among them, `live` uses `nodes` (node-wide topics arrive on the same
//! subscriber link) and `nodes` uses `presence` (a dead node's members are
//! forgotten), never the other way round.

mod live;
mod nodes;
mod presence;

use crate::conn::{Link, Target};
use crate::pubsub::Sink;
use crate::resp::Value;
use crate::shards::Subscriber;
use crate::{lua, registry, sentinel, tables, RedisConfig, UrlError};
use bytes::Bytes;
use herald_core::broker::{Attach, History, PatternReady};
use herald_core::memory::Retention;
use herald_core::{Broker, BrokerError, Completion, Hub};
use herald_proto::{HistoryItem, Position};
use nodes::heartbeats;
use presence::{transitions, Transition, TRANSITIONS_MAX};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::oneshot;

pub use nodes::{LobbyFn, NodeInfo, NodeMsgFn, StatsFn};

/// Reads an attach may make before giving up on a channel that keeps moving.
const ATTACH_ATTEMPTS: usize = 50;
/// How long an attach waits for its channel to be in sync.
const ATTACH_WAIT: Duration = Duration::from_secs(5);

/// One channel's link on this node.
struct Chan {
    name: Arc<str>,
    topic: Bytes,
    /// Subscribers attached (or attaching) through this node.
    attached: usize,
    /// Set when `attached` reached 0 and the link left the map.
    removed: bool,
    /// The channel's epoch and the last offset delivered to the hub.
    known: Option<(Bytes, u64)>,
    /// Publications are delivered as they arrive (else buffered).
    live: bool,
    /// A sync task runs.
    syncing: bool,
    /// The sync must (re)subscribe first.
    resubscribe: bool,
    /// The subscriber link its topic was last subscribed on
    /// ([`crate::pubsub::PubSub::id`]): that link's loss pauses it, that
    /// link's return resubscribes it (decision 0021, per shard).
    link: u64,
    buffer: Vec<(Bytes, u64, Bytes)>,
    waiters: Vec<oneshot::Sender<()>>,
}

type ChanRef = Arc<Mutex<Chan>>;

/// One Redis glob this node follows for its wildcard subscriptions.
struct Glob {
    /// Wildcard subscriptions to it on this node, those still waiting for
    /// `confirmed` included.
    subscribers: usize,
    /// Redis confirmed its `PSUBSCRIBE` on the classic link's current
    /// connection (and, in a Redis Cluster, the node is known to publish
    /// on pattern topics: see [`Inner::announce_patterns`]): a subscriber
    /// may be answered at once.
    confirmed: bool,
    /// The `PSUBSCRIBE` whose confirmation counts: a newer one, or the
    /// link's loss, makes an older one's stale.
    attempt: u64,
    /// Subscribers waiting for `confirmed`.
    waiters: Vec<oneshot::Sender<()>>,
}

/// The globs of this node's wildcard subscriptions.
#[derive(Default)]
struct Patterns {
    globs: HashMap<Bytes, Glob>,
    /// The last `Glob::attempt` given.
    attempts: u64,
    /// Bumped whenever `globs` becomes empty (the next heartbeat then takes
    /// the node out of `{P}:nodes:patterns`).
    emptied: u64,
    /// `emptied` as of the node's last announcement on the control topic
    /// (Redis Cluster): while it is current, the other nodes know.
    announced: Option<u64>,
}

impl Patterns {
    fn attempt(&mut self) -> u64 {
        self.attempts += 1;
        self.attempts
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unavailable(why: impl Into<String>) -> BrokerError {
    BrokerError::Unavailable(why.into())
}

/// Which Redis a node uses ([`RedisBroker::redis_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisStatus {
    /// `direct` (`redis://`), `sentinel` (`redis-sentinel://`) or
    /// `cluster` (`redis-cluster://`, decision 0021).
    pub mode: &'static str,
    /// The master's `host:port` as last learned (`None`: no sentinel has
    /// answered yet); in a cluster, the first master of the slot map (the
    /// whole map: [`RedisBroker::cluster_masters`]).
    pub master: Option<String>,
    /// Fail-overs seen (config epoch rises; in a cluster, replicas that
    /// became masters) since the node started.
    pub failovers: u64,
    /// The master's Sentinel config epoch as last learned (0 direct); in a
    /// cluster, the highest config epoch of its masters.
    pub epoch: u64,
    /// Why the master cannot be found, when it is something an operator
    /// must fix: "the sentinels refused the password" (`/readyz` shows it).
    pub problem: Option<&'static str>,
}

/// The Redis broker (and cluster presence). Create with [`RedisBroker::start`].
pub struct RedisBroker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBroker")
            .field("node", &self.inner.node_id)
            .field("prefix", &self.inner.cfg.prefix)
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// Itself, for the tasks the subscriber link's callbacks start.
    me: Weak<Inner>,
    cfg: RedisConfig,
    /// The prefix of node-wide and game keys: the key prefix, or in a
    /// Redis Cluster `{PREFIX}`, one slot for all of them (decision 0021).
    global: String,
    node_id: String,
    link: Arc<Link>,
    pubsub: OnceLock<Subscriber>,
    hub: Arc<Hub>,
    chans: Mutex<HashMap<Arc<str>, ChanRef>>,
    /// Wildcard subscriptions on this node, by their Redis glob.
    patterns: Mutex<Patterns>,
    nodes: Mutex<Vec<NodeInfo>>,
    stats: OnceLock<StatsFn>,
    /// Channels whose local subscribers were closed with 3004.
    lost: AtomicU64,
    /// Gaps filled from a stream.
    filled: AtomicU64,
    /// In a cluster: some node had a wildcard subscription at the last
    /// heartbeat (`{P}:nodes:patterns`), or announced one since on the
    /// control topic, so publications go to the classic pattern topic too.
    /// True until the first heartbeat tells.
    patterns_anywhere: std::sync::atomic::AtomicBool,
    /// Announcements of wildcard subscriptions heard on the control topic
    /// (a heartbeat that read `{P}:nodes:patterns` before one must not
    /// turn `patterns_anywhere` off after it).
    patterns_heard: AtomicU64,
    /// Joins and leaves whose cluster-wide transitions the hub's observer
    /// waits for, in the order they were sent (see [`transitions`]).
    transitions: tokio::sync::mpsc::Sender<Transition>,
    /// `P:ctl`, the topic every node follows for requests to all nodes
    /// ([`RedisBroker::close_everywhere`], [`Inner::announce_patterns`]);
    /// not a channel topic (`P:c:...`).
    control: Bytes,
    /// Receives what other nodes send to this one on its node topic (game
    /// commands and table events routed between nodes, decision 0009).
    node_msgs: OnceLock<NodeMsgFn>,
    /// This node's topic (`P:node:{ID}:cmd`).
    own_topic: Bytes,
    /// Receives the cluster lobby's messages (`None`: the link reconnected,
    /// some may have been missed).
    lobby_msgs: OnceLock<LobbyFn>,
    /// The cluster lobby's topic (`P:lobby`).
    lobby_topic: Bytes,
    /// Game-table saves wait for replicas (`--table-save-replicas`).
    save_wait: Option<Arc<tables::SaveWait>>,
}

fn random_id(n: usize) -> String {
    (0..n).map(|_| fastrand::alphanumeric()).collect()
}

impl RedisBroker {
    /// Starts the broker: connects in the background (the node serves while
    /// Redis is unreachable, with publishes failing) and delivers into `hub`.
    /// Must be called within a tokio runtime.
    pub fn start(cfg: RedisConfig, hub: Arc<Hub>) -> Result<Arc<RedisBroker>, UrlError> {
        let target = Target::parse(&cfg.url)?;
        let link = Link::start(target.clone(), lua::setup(), cfg.command_timeout);
        // Occupancy and user edges are the cluster's, reported from Redis.
        hub.set_cluster_events();
        let (tx, rx) = tokio::sync::mpsc::channel(TRANSITIONS_MAX);
        let cfg_prefix = cfg.prefix.clone();
        let node_id = random_id(12);
        let own_topic = Bytes::from(format!("{}:node:{node_id}:cmd", cfg.prefix));
        // One hash tag for every node-wide and game key in a cluster, so
        // no script spans slots (decision 0021); the plain prefix otherwise.
        let global = if target.cluster().is_some() {
            format!("{{{}}}", cfg.prefix)
        } else {
            cfg.prefix.clone()
        };
        let lobby_topic = Bytes::from(tables::lobby_keys(&global).2);
        let save_wait = (cfg.table_save_replicas > 0).then(|| {
            // Saves and their WAITs on a link of their own (SaveWait).
            let timeout = cfg
                .command_timeout
                .max(cfg.table_save_wait + Duration::from_secs(1));
            Arc::new(tables::SaveWait::new(
                cfg.table_save_replicas,
                cfg.table_save_wait,
                Link::start(target.clone(), lua::setup(), timeout),
            ))
        });
        let inner = Arc::new_cyclic(|me| Inner {
            me: me.clone(),
            save_wait,
            global,
            own_topic,
            lobby_msgs: OnceLock::new(),
            lobby_topic,
            node_id,
            cfg,
            link,
            pubsub: OnceLock::new(),
            hub,
            chans: Mutex::new(HashMap::new()),
            patterns: Mutex::new(Patterns::default()),
            nodes: Mutex::new(Vec::new()),
            stats: OnceLock::new(),
            lost: AtomicU64::new(0),
            filled: AtomicU64::new(0),
            patterns_anywhere: std::sync::atomic::AtomicBool::new(true),
            patterns_heard: AtomicU64::new(0),
            transitions: tx,
            control: Bytes::from(format!("{}:ctl", cfg_prefix)),
            node_msgs: OnceLock::new(),
        });
        tokio::spawn(transitions(Arc::downgrade(&inner), rx));
        let sink: Weak<dyn Sink> = Arc::downgrade(&(inner.clone() as Arc<dyn Sink>));
        let _ = inner.pubsub.set(Subscriber::start(target, sink));
        tokio::spawn(heartbeats(Arc::downgrade(&inner)));
        Ok(Arc::new(RedisBroker { inner }))
    }

    /// This node's id in the cluster.
    pub fn node_id(&self) -> &str {
        &self.inner.node_id
    }

    /// Which tables exist in the cluster (created over HTTP, deleted), on
    /// the broker's link (decision 0009).
    pub fn table_registry(&self) -> registry::TableRegistry {
        let registry = registry::TableRegistry::new(
            self.inner.link.clone(),
            self.inner.global.clone(),
            self.inner.node_id.clone(),
        );
        match &self.inner.save_wait {
            Some(w) => registry.with_wait(w.clone()),
            None => registry,
        }
    }

    /// Where websocket Bayeux `ack` sessions had got to (decision 0016),
    /// on the broker's link.
    pub fn acked_store(&self) -> crate::acked::AckedStore {
        crate::acked::AckedStore::new(self.inner.link.clone(), self.inner.cfg.prefix.clone())
    }

    /// The seat counts of tables made by `play` (protocol §5f), on the
    /// broker's link.
    pub fn play_store(&self) -> crate::play::PlayStore {
        crate::play::PlayStore::new(self.inner.link.clone(), self.inner.global.clone())
    }

    /// Game tables' leases and saves for this node, on the broker's link
    /// (decision 0009).
    pub fn table_store(&self) -> tables::TableStore {
        let store = tables::TableStore::new(
            self.inner.link.clone(),
            self.inner.global.clone(),
            self.inner.node_id.clone(),
        );
        match &self.inner.save_wait {
            Some(w) => store.with_wait(w.clone()),
            None => store,
        }
    }

    /// Game-table saves whose wait for replicas ended short
    /// ([`tables::SaveWait::short`]; 0 when saves do not wait).
    pub fn saves_unreplicated(&self) -> u64 {
        self.inner.save_wait.as_ref().map_or(0, |w| w.short())
    }

    /// Which Redis this node uses and, through Sentinel, what it has seen
    /// of fail-overs (`/readyz`, `/api/nodes`, `/metrics`).
    pub fn redis_status(&self) -> RedisStatus {
        let target = self.inner.link.target();
        if let Some(c) = target.cluster() {
            let map = c.map();
            return RedisStatus {
                mode: "cluster",
                master: target.master(),
                failovers: c.failovers(),
                epoch: map
                    .as_ref()
                    .and_then(|m| m.masters().iter().map(|m| m.epoch).max())
                    .unwrap_or(0),
                problem: None,
            };
        }
        let sentinel = target.sentinel();
        RedisStatus {
            mode: if sentinel.is_some() {
                "sentinel"
            } else {
                "direct"
            },
            master: target.master(),
            failovers: sentinel.map_or(0, |s| s.failovers()),
            epoch: sentinel.map_or(0, |s| s.epoch()),
            problem: sentinel
                .filter(|s| s.refused_password())
                .map(|_| "the sentinels refused the password"),
        }
    }

    /// In a Redis Cluster, its masters with their slots and config epochs
    /// as last learned (empty otherwise, or before the map is known).
    pub fn cluster_masters(&self) -> Vec<crate::cluster::Master> {
        self.inner
            .link
            .target()
            .cluster()
            .and_then(|c| c.map())
            .map(|m| m.masters().to_vec())
            .unwrap_or_default()
    }

    /// Channels whose local subscribers had to be closed with 3004, and gaps
    /// filled from a stream, since start.
    pub fn repairs(&self) -> (u64, u64) {
        (
            self.inner.lost.load(Ordering::Relaxed),
            self.inner.filled.load(Ordering::Relaxed),
        )
    }
}

impl Inner {
    fn me(&self) -> Option<Arc<Inner>> {
        self.me.upgrade()
    }

    fn pubsub(&self) -> Option<&Subscriber> {
        self.pubsub.get()
    }

    fn key(&self, channel: &str, kind: &str) -> String {
        format!("{}:{{{channel}}}:{kind}", self.cfg.prefix)
    }

    /// The set of occupied channels of `namespace` (what comes before the
    /// channel's first `:`, empty if none).
    fn occupied_key(&self, namespace: &str) -> String {
        format!("{}:occupied:{namespace}", self.global)
    }

    /// A channel's topic: `P:c:C`; in a Redis Cluster `P:c:{C}`, a shard
    /// channel in the slot of the channel's keys (decision 0021).
    fn topic(&self, channel: &str) -> Bytes {
        if self.clustered() {
            Bytes::from(format!("{}:c:{{{channel}}}", self.cfg.prefix))
        } else {
            self.pattern_topic(channel)
        }
    }

    /// The classic topic `P:c:C`, which wildcard subscriptions match; in a
    /// cluster published besides the shard channel only while some node
    /// has a pattern.
    fn pattern_topic(&self, channel: &str) -> Bytes {
        Bytes::from(format!("{}:c:{channel}", self.cfg.prefix))
    }

    /// `s` (`SPUBLISH`) in a cluster, else empty (`PUBLISH`): how the
    /// scripts publish on a channel's topic.
    fn publish_mode(&self) -> &'static [u8] {
        if self.clustered() {
            b"s"
        } else {
            b""
        }
    }

    /// The channel a topic is for (the inverse of [`Inner::topic`], or with
    /// `braced` false of [`Inner::pattern_topic`]).
    fn channel_of<'t>(&self, topic: &'t [u8], braced: bool) -> Option<&'t str> {
        let name = topic.get(self.cfg.prefix.len() + 3..)?;
        let name = if braced {
            name.strip_prefix(b"{")?.strip_suffix(b"}")?
        } else {
            name
        };
        std::str::from_utf8(name).ok()
    }

    /// A node's own topic, for messages routed to it.
    fn node_topic(&self, node: &str) -> Bytes {
        Bytes::from(format!("{}:node:{node}:cmd", self.cfg.prefix))
    }

    /// `P:nodes` (node stats) and `P:nodes:seen` (last heartbeats); in a
    /// Redis Cluster `{P}:nodes…`, one slot for the heartbeat script's two
    /// keys (decision 0021).
    fn nodes_key(&self, suffix: &str) -> String {
        format!("{}:nodes{suffix}", self.global)
    }

    /// Whether Redis is a Redis Cluster (`redis-cluster://`, decision
    /// 0021): scripts then take the fail-over epoch from the slot owner's
    /// config epoch ([`crate::cluster::SHARD_EPOCH`]) instead of the
    /// Sentinel epoch key, which lives in another slot.
    fn clustered(&self) -> bool {
        self.link.router().is_some()
    }

    /// The keys and the fail-over-epoch argument of `publish.lua` and
    /// `read.lua` for `channel`: `(numkeys, meta, stream, epoch key)`; the
    /// epoch key is left out in a cluster.
    fn channel_keys(&self, channel: &str) -> (&'static [u8], String, String, Option<&'static str>) {
        let m = self.key(channel, "m");
        let s = self.key(channel, "s");
        if self.clustered() {
            (b"2", m, s, None)
        } else {
            (b"3", m, s, Some(sentinel::EPOCH_KEY))
        }
    }

    fn members_key(&self, node: &str) -> String {
        format!("{}:node:{node}:members", self.global)
    }

    fn retention(&self, channel: &str) -> Retention {
        *self
            .cfg
            .by_namespace
            .get(herald_core::channel::namespace(channel))
            .unwrap_or(&self.cfg.retention)
    }

    fn ttl_ms(&self, channel: &str) -> String {
        self.retention(channel).ttl.as_millis().to_string()
    }

    /// Runs `read.lua`: the position and, with `since`, the publications after it.
    async fn read(
        &self,
        channel: &str,
        create: bool,
        since: Option<&Position>,
        entries: bool,
        limit: usize,
    ) -> Result<(Bytes, u64, Vec<HistoryItem>), BrokerError> {
        let (se, so) = match since {
            Some(p) => (p.epoch.clone(), p.offset.to_string()),
            None => (String::new(), String::new()),
        };
        let (n, m, s, epoch_key) = self.channel_keys(channel);
        let mut args: Vec<&[u8]> = vec![
            b"EVALSHA",
            lua::READ.sha().as_bytes(),
            n,
            m.as_bytes(),
            s.as_bytes(),
        ];
        args.extend(epoch_key.map(str::as_bytes));
        let (id, limit, ttl) = (random_id(16), limit.to_string(), self.ttl_ms(channel));
        args.extend([
            if create { b"1".as_slice() } else { b"0" },
            id.as_bytes(),
            if entries { b"1" } else { b"0" },
            se.as_bytes(),
            so.as_bytes(),
            limit.as_bytes(),
            ttl.as_bytes(),
            crate::cluster::SHARD_EPOCH,
            crate::cluster::SHARD_LINEAGE,
        ]);
        let v = self.link.call(&args).await?;
        let items = v.items();
        let bad = || unavailable("redis: unexpected reply to read");
        let epoch = items
            .first()
            .and_then(Value::bytes)
            .cloned()
            .ok_or_else(bad)?;
        let top = items.get(1).and_then(Value::int).ok_or_else(bad)?;
        let mut pubs = Vec::with_capacity(items.len().saturating_sub(2) / 2);
        for pair in items[2..].chunks(2) {
            let [o, d] = pair else { return Err(bad()) };
            let offset = o
                .int()
                .and_then(|o| u64::try_from(o).ok())
                .ok_or_else(bad)?;
            let data = d.bytes().cloned().ok_or_else(bad)?;
            pubs.push(HistoryItem { offset, data });
        }
        Ok((epoch, u64::try_from(top).unwrap_or(0), pubs))
    }

    /// Whether publications must reach wildcard subscribers through the
    /// classic pattern topic (a cluster node has a pattern, here or, as of
    /// the last heartbeat, elsewhere).
    fn patterns_in_use(&self) -> bool {
        self.patterns_anywhere.load(Ordering::SeqCst) || !lock(&self.patterns).globs.is_empty()
    }

    fn chan(&self, channel: &str) -> Option<ChanRef> {
        lock(&self.chans).get(channel).cloned()
    }

    /// One wildcard subscription to `glob` fewer: the last one unsubscribes.
    fn release_pattern(&self, glob: &Bytes) {
        let mut p = lock(&self.patterns);
        let Some(g) = p.globs.get_mut(glob) else {
            return;
        };
        g.subscribers = g.subscribers.saturating_sub(1);
        if g.subscribers == 0 {
            p.globs.remove(glob);
            if p.globs.is_empty() {
                p.emptied += 1;
            }
            if let Some(ps) = self.pubsub() {
                ps.punsubscribe(glob.clone());
            }
        }
    }

    /// Waits for the confirmation of `PSUBSCRIBE glob` (attempt `attempt`)
    /// and then, in a Redis Cluster, for the node's announcement
    /// ([`Inner::announce_patterns`]), before answering the glob's waiting
    /// subscribers. A failed confirmation (the link went down) answers
    /// nobody: the link's return subscribes again.
    async fn pattern_confirmed(
        self: Arc<Self>,
        glob: Bytes,
        attempt: u64,
        confirmed: oneshot::Receiver<()>,
    ) {
        if confirmed.await.is_err() {
            return;
        }
        let announce = {
            let p = lock(&self.patterns);
            (self.clustered() && p.announced != Some(p.emptied)).then_some(p.emptied)
        };
        if let Some(emptied) = announce {
            match self.announce_patterns().await {
                Ok(()) => {
                    let mut p = lock(&self.patterns);
                    if p.emptied == emptied {
                        p.announced = Some(emptied);
                    }
                }
                // Answered all the same: the heartbeat lists the node
                // within a second (as before announcements).
                Err(e) => tracing::debug!(error = %e, "cannot announce a wildcard subscription"),
            }
        }
        let mut p = lock(&self.patterns);
        if let Some(g) = p.globs.get_mut(&glob) {
            if g.attempt == attempt {
                g.confirmed = true;
                for w in g.waiters.drain(..) {
                    let _ = w.send(());
                }
            }
        }
    }
}

/// The Redis glob that receives every channel `pattern` matches (and some
/// more: Redis's `*` also crosses `.`; the hub's trie does the exact
/// matching). Channel names cannot hold glob characters; the prefix is
/// escaped.
fn glob(prefix: &str, pattern: &str) -> Bytes {
    let mut g = String::with_capacity(prefix.len() + pattern.len() + 4);
    for ch in prefix.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            g.push('\\');
        }
        g.push(ch);
    }
    g.push_str(":c:");
    let tokens: Vec<&str> = pattern
        .split('.')
        .map(|t| if t == ">" { "*" } else { t })
        .collect();
    g.push_str(&tokens.join("."));
    Bytes::from(g)
}

/// Whether `pubs` (read from the stream after `since`, oldest first) are
/// every publication after `since` up to `top` in `epoch`: the
/// [`History::complete`] of the contract. No position asks for nothing.
fn complete(since: Option<&Position>, epoch: &str, top: u64, pubs: &[HistoryItem]) -> bool {
    let Some(p) = since else { return true };
    !epoch.is_empty()
        && p.epoch == epoch
        && p.offset <= top
        && (p.offset == top || pubs.first().map(|x| x.offset) == Some(p.offset + 1))
}

/// Attaches one subscriber (see the module docs).
async fn attach(inner: Arc<Inner>, chan: ChanRef, since: Option<Position>, attach: Attach) {
    let name = lock(&chan).name.clone();
    for _ in 0..ATTACH_ATTEMPTS {
        let wait = {
            let mut c = lock(&chan);
            if c.removed {
                drop(c);
                return attach(Err(unavailable(
                    "unsubscribed before the subscription completed",
                )));
            }
            if c.live {
                None
            } else {
                let (tx, rx) = oneshot::channel();
                c.waiters.push(tx);
                Some(rx)
            }
        };
        if let Some(rx) = wait {
            match tokio::time::timeout(ATTACH_WAIT, rx).await {
                Ok(Ok(())) => {}
                _ => {
                    if !inner.link.is_up() {
                        return attach(Err(unavailable("redis: not connected")));
                    }
                    continue;
                }
            }
        }
        let (epoch, top, pubs) = match inner
            .read(&name, true, since.as_ref(), since.is_some(), 0)
            .await
        {
            Ok(r) => r,
            Err(e) => return attach(Err(e)),
        };
        let mut c = lock(&chan);
        if c.removed {
            drop(c);
            return attach(Err(unavailable(
                "unsubscribed before the subscription completed",
            )));
        }
        if !c.live {
            continue;
        }
        let Some((known, last)) = c.known.clone() else {
            continue;
        };
        if known != epoch {
            // The stream changed under the link: let it find out first.
            let chan2 = chan.clone();
            inner.start_sync(&mut c, &chan2);
            continue;
        }
        if top < last {
            continue; // read before the node's latest delivery: read again
        }
        // Only what the node has delivered: the rest arrives live.
        let epoch = String::from_utf8_lossy(&epoch).into_owned();
        let complete = complete(since.as_ref(), &epoch, last, &pubs);
        let publications: Vec<HistoryItem> =
            pubs.into_iter().filter(|p| p.offset <= last).collect();
        // Under the channel's lock: no publication is delivered between the
        // read's cut and the hub registration `attach` performs.
        attach(Ok(History {
            top: Position {
                epoch,
                offset: last,
            },
            publications,
            complete,
        }));
        return;
    }
    attach(Err(unavailable("channel too busy to attach; retry")))
}

impl Broker for RedisBroker {
    fn publish(&self, channel: &str, data: Bytes) -> Completion<Result<Position, BrokerError>> {
        let inner = &self.inner;
        let r = inner.retention(channel);
        // Queued now, so two publishes of one connection keep their order.
        let (n, m, s, epoch_key) = inner.channel_keys(channel);
        let mut args: Vec<&[u8]> = vec![
            b"EVALSHA",
            lua::PUBLISH.sha().as_bytes(),
            n,
            m.as_bytes(),
            s.as_bytes(),
        ];
        args.extend(epoch_key.map(str::as_bytes));
        let (id, size, ttl, topic) = (
            random_id(16),
            r.size.to_string(),
            r.ttl.as_millis().to_string(),
            inner.topic(channel),
        );
        let also = if inner.clustered() && inner.patterns_in_use() {
            inner.pattern_topic(channel)
        } else {
            Bytes::new()
        };
        args.extend([
            &data[..],
            id.as_bytes(),
            size.as_bytes(),
            ttl.as_bytes(),
            &topic[..],
            crate::cluster::SHARD_EPOCH,
            inner.publish_mode(),
            &also[..],
            crate::cluster::SHARD_LINEAGE,
        ]);
        let call = inner.link.call_later(&args);
        Completion::Pending(Box::pin(async move {
            let v = call?.await?;
            let items = v.items();
            match (
                items.first().and_then(Value::bytes),
                items.get(1).and_then(Value::int),
            ) {
                (Some(e), Some(o)) => Ok(Position {
                    epoch: String::from_utf8_lossy(e).into_owned(),
                    offset: u64::try_from(o).unwrap_or(0),
                }),
                _ => Err(unavailable("redis: unexpected reply to publish")),
            }
        }))
    }

    fn subscribe(&self, channel: &str, since: Option<&Position>, on_attach: Attach) {
        let inner = &self.inner;
        let chan = {
            let mut chans = lock(&inner.chans);
            let chan = chans
                .entry(Arc::from(channel))
                .or_insert_with(|| {
                    Arc::new(Mutex::new(Chan {
                        name: Arc::from(channel),
                        topic: inner.topic(channel),
                        attached: 0,
                        removed: false,
                        link: crate::pubsub::CLASSIC,
                        known: None,
                        live: false,
                        syncing: false,
                        resubscribe: true,
                        buffer: Vec::new(),
                        waiters: Vec::new(),
                    }))
                })
                .clone();
            let mut c = lock(&chan);
            c.attached += 1;
            if c.known.is_none() && !c.syncing {
                inner.start_sync(&mut c, &chan);
            }
            drop(c);
            chan
        };
        tokio::spawn(attach(inner.clone(), chan, since.cloned(), on_attach));
    }

    fn unsubscribe(&self, channel: &str) {
        let inner = &self.inner;
        let mut chans = lock(&inner.chans);
        let Some(chan) = chans.get(channel).cloned() else {
            return;
        };
        let mut c = lock(&chan);
        c.attached = c.attached.saturating_sub(1);
        if c.attached == 0 {
            c.removed = true;
            c.waiters.clear();
            chans.remove(channel);
            if let Some(ps) = inner.pubsub() {
                ps.unsubscribe_channel(c.topic.clone());
            }
        }
    }

    fn position(&self, channel: &str) -> Completion<Result<Position, BrokerError>> {
        let inner = self.inner.clone();
        let channel = channel.to_string();
        Completion::Pending(Box::pin(async move {
            let (epoch, top, _) = inner.read(&channel, false, None, false, 0).await?;
            Ok(Position {
                epoch: String::from_utf8_lossy(&epoch).into_owned(),
                offset: top,
            })
        }))
    }

    fn history(
        &self,
        channel: &str,
        since: Option<&Position>,
        limit: usize,
    ) -> Completion<Result<History, BrokerError>> {
        let inner = self.inner.clone();
        let channel = channel.to_string();
        let since = since.cloned();
        Completion::Pending(Box::pin(async move {
            let (epoch, top, pubs) = inner
                .read(&channel, false, since.as_ref(), true, limit)
                .await?;
            let epoch = String::from_utf8_lossy(&epoch).into_owned();
            let complete = complete(since.as_ref(), &epoch, top, &pubs);
            Ok(History {
                top: Position { epoch, offset: top },
                publications: pubs,
                complete,
            })
        }))
    }

    fn subscribe_pattern(&self, pattern: &str, ready: PatternReady) {
        let inner = &self.inner;
        let glob = glob(&inner.cfg.prefix, pattern);
        let waiting = {
            let mut p = lock(&inner.patterns);
            let attempt = p.attempt();
            let g = p.globs.entry(glob.clone()).or_insert_with(|| Glob {
                subscribers: 0,
                confirmed: false,
                attempt,
                waiters: Vec::new(),
            });
            g.subscribers += 1;
            if g.confirmed {
                None
            } else {
                if g.subscribers == 1 {
                    // The first here: subscribe. (Later ones wait for the
                    // same confirmation; a link that is down fails this
                    // one, and its return subscribes again.)
                    if let (Some(ps), Some(me)) = (inner.pubsub(), inner.me()) {
                        let confirmed = ps.psubscribe(glob.clone());
                        tokio::spawn(me.pattern_confirmed(glob.clone(), attempt, confirmed));
                    }
                }
                let (tx, rx) = oneshot::channel();
                g.waiters.push(tx);
                Some(rx)
            }
        };
        let Some(rx) = waiting else {
            return ready(Ok(()));
        };
        let inner = inner.clone();
        tokio::spawn(async move {
            // As long as an exact subscription waits for its channel.
            if let Ok(Ok(())) = tokio::time::timeout(ATTACH_WAIT, rx).await {
                return ready(Ok(()));
            }
            inner.release_pattern(&glob);
            ready(Err(unavailable(
                "redis: the wildcard subscription was not confirmed (subscriber link down)",
            )));
        });
    }

    fn unsubscribe_pattern(&self, pattern: &str) {
        self.inner
            .release_pattern(&glob(&self.inner.cfg.prefix, pattern));
    }

    fn healthy(&self) -> bool {
        self.inner.link.is_up() && self.inner.pubsub().is_some_and(|p| p.is_up())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_become_globs_that_match_at_least_as_much() {
        assert_eq!(&glob("h*x", "news.*")[..], br"h\*x:c:news.*");
        assert_eq!(&glob("herald", "news.>")[..], b"herald:c:news.*");
        assert_eq!(&glob("herald", "a.*.c")[..], b"herald:c:a.*.c");
    }
}
