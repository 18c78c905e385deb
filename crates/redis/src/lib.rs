//! Herald's cluster broker: many nodes, one set of channels, through Redis.
//!
//! Decision 0003 (docs/decisions/0003-redis-cluster.md) says why it looks like
//! this; in short:
//!
//! - **Positions and history** live in Redis: per channel a meta hash (epoch,
//!   last offset) and a stream whose entry ids *are* the offsets, bounded by
//!   the channel's retention (`MAXLEN` by count, a time stamp per entry by
//!   age). One Lua script assigns the offset, appends to the stream and
//!   `PUBLISH`es the live message, atomically — so a publication is never live
//!   before it is in history, on any node ([`lua`]).
//! - **Live delivery**: each node holds *one* Redis subscription per channel
//!   that has subscribers on it, however many clients it has ([`pubsub`]).
//!   The node tracks, per channel, the last offset it delivered: duplicates
//!   are skipped, and a gap (a lost link, a slow subscriber link) is filled
//!   from the stream before anything newer is delivered, so a live client sees
//!   one unbroken offset sequence. When the gap cannot be filled (the stream
//!   was trimmed or lost, the epoch changed), the channel's local subscribers
//!   are closed with 3004 and their recovery says what was lost.
//! - **Attaching a subscriber** (the [`Broker::subscribe`] contract): read the
//!   stream after the client's position, then, under the channel's lock,
//!   keep only what the node has already delivered and register the client,
//!   so live delivery continues exactly after the history: no gap, no
//!   duplicate. A read older than what the node delivered is read again.
//! - **Commands** go through one pipelined connection ([`conn`]): everything
//!   queued while a write is in progress goes out in the next write.
//! - **Wildcard subscriptions** (`news.*`, `news.>`) add one `PSUBSCRIBE` per
//!   distinct pattern per node; publications of channels the node does not
//!   follow for exact subscribers arrive through it (live only, as patterns
//!   have no positions), the others through their channel's link.
//! - **Presence** is cluster-wide: a hash of members and a hash of per-user
//!   counts per channel (so `presence_stats` is two `HLEN`s), joins and leaves
//!   published on the channel's topic for other nodes' listeners, and a set
//!   per node so that the members of a dead node are removed (and announced
//!   as leaves) by whichever node notices first. The scripts that change
//!   them also decide the cluster-wide transitions (channel occupied or
//!   vacated, a user's first connection or last) and keep a set of occupied
//!   channels per namespace; the node that ran the script reports them to
//!   the hub's observer, so each is reported once in the cluster (decision
//!   0012, the Pusher webhooks and member events).
//! - **Nodes** heartbeat every second into a sorted set; one silent for
//!   [`RedisConfig::dead_after`] is forgotten. The list, with each node's
//!   stats, is `GET /api/nodes` and `/metrics`.
//!
//! - **Game tables** (decision 0009): a lease per table with a fencing
//!   token, and its saved state, written only by the lease holder
//!   ([`tables`]).
//!
//! Redis slow or down: publishes, history and presence queries fail at once
//! with [`BrokerError::Unavailable`] (error 114 to clients); clients stay
//! connected; when Redis returns, the node resubscribes every channel, fills
//! gaps from the streams, re-registers its presence members, and closes with
//! 3004 the subscribers of channels whose stream did not survive.
//!
//! Keys (prefix `P`, channel `C`): `P:{C}:m` meta, `P:{C}:s` stream, `P:{C}:p`
//! members, `P:{C}:u` user counts, `P:{C}:v` a pending vacate, topic
//! `P:c:C`; `P:nodes:seen` (zset), `P:nodes` (stats), `P:node:ID:members`
//! (set), topic `P:node:ID:cmd` (messages routed to a node: game commands
//! and table events, decision 0009), `P:occupied:NS` (set of the channels of
//! namespace `NS` with members), topic `P:ctl` (requests to every node:
//! [`RedisBroker::close_everywhere`]). The `{C}` hash tag keeps one
//! channel's keys in one slot; the node-wide scripts assume a single Redis
//! (or a primary with replicas), not Redis Cluster.

pub mod conn;
pub mod lua;
pub mod member;
pub mod pubsub;
pub mod registry;
pub mod resp;
pub mod tables;
pub mod testing;

use bytes::Bytes;
use conn::{Link, Target};
use herald_core::broker::{Attach, History};
use herald_core::memory::Retention;
use herald_core::{Broker, BrokerError, Client, Completion, Deliver, Hub, Presence, Publication};
use herald_proto::{ClientInfo, DisconnectCode, HistoryItem, Position};
use member::Message;
use pubsub::{Incoming, PubSub, Sink};
use resp::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::oneshot;

pub use conn::UrlError;

/// Publications buffered per channel while the node catches up with its
/// stream; beyond this the buffer is dropped and read again from the stream.
const BUFFER_MAX: usize = 10_000;
/// Reads an attach may make before giving up on a channel that keeps moving.
const ATTACH_ATTEMPTS: usize = 50;
/// How long an attach waits for its channel to be in sync.
const ATTACH_WAIT: Duration = Duration::from_secs(5);

/// Cluster settings.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// `redis://[:PASSWORD@]HOST:PORT[/DB]`.
    pub url: String,
    /// Prefix of every key and topic (default `herald`): several clusters can
    /// share one Redis.
    pub prefix: String,
    /// Retention of channels whose namespace has none of its own.
    pub retention: Retention,
    /// Retention by namespace.
    pub by_namespace: HashMap<String, Retention>,
    /// Time between two heartbeats of this node (default 1 s).
    pub heartbeat: Duration,
    /// A node silent this long is forgotten with its presence (default 5 s).
    pub dead_after: Duration,
    /// A Redis command not answered this long fails with error 114 (default
    /// 5 s): a stalled Redis delays publishes at most that long.
    pub command_timeout: Duration,
    /// How long a channel must stay vacated, cluster-wide, before the hub's
    /// observer hears it; occupied again sooner, neither the vacate nor the
    /// new occupation is reported (default zero: at once).
    pub vacated_delay: Duration,
}

impl RedisConfig {
    /// Settings for `url` with the defaults.
    pub fn new(url: impl Into<String>) -> RedisConfig {
        RedisConfig {
            url: url.into(),
            prefix: "herald".into(),
            retention: Retention {
                size: 100,
                ttl: Duration::from_secs(300),
            },
            by_namespace: HashMap::new(),
            heartbeat: Duration::from_secs(1),
            dead_after: Duration::from_secs(5),
            command_timeout: conn::CALL_TIMEOUT,
            vacated_delay: Duration::ZERO,
        }
    }
}

/// One node as the cluster sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    /// Its id.
    pub id: String,
    /// Milliseconds since its last heartbeat.
    pub last_seen_ms: u64,
    /// What it reported (clients, channels, uptime, ...).
    pub stats: serde_json::Value,
}

/// Reports a node's stats for its heartbeat.
pub type StatsFn = Box<dyn Fn() -> serde_json::Value + Send + Sync>;

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
    buffer: Vec<(Bytes, u64, Bytes)>,
    waiters: Vec<oneshot::Sender<()>>,
}

type ChanRef = Arc<Mutex<Chan>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unavailable(why: impl Into<String>) -> BrokerError {
    BrokerError::Unavailable(why.into())
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
    node_id: String,
    link: Arc<Link>,
    pubsub: OnceLock<Arc<PubSub>>,
    hub: Arc<Hub>,
    chans: Mutex<HashMap<Arc<str>, ChanRef>>,
    /// Wildcard subscriptions on this node, counted, by their Redis glob.
    patterns: Mutex<HashMap<Bytes, usize>>,
    nodes: Mutex<Vec<NodeInfo>>,
    stats: OnceLock<StatsFn>,
    /// Channels whose local subscribers were closed with 3004.
    lost: AtomicU64,
    /// Gaps filled from a stream.
    filled: AtomicU64,
    /// Joins and leaves whose cluster-wide transitions the hub's observer
    /// waits for, in the order they were sent (see [`transitions`]).
    transitions: tokio::sync::mpsc::Sender<Transition>,
    /// `P:ctl`, the topic every node follows for requests to all nodes
    /// ([`RedisBroker::close_everywhere`]); not a channel topic (`P:c:...`).
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
}

/// Receives the cluster lobby's messages (see [`RedisBroker::on_lobby`]).
pub type LobbyFn = Box<dyn Fn(Option<Bytes>) + Send + Sync>;

/// Receives the messages published on this node's topic.
pub type NodeMsgFn = Box<dyn Fn(Bytes) + Send + Sync>;

/// A join or leave sent to Redis, whose reply says which cluster-wide
/// transitions it made (`member.lua`).
struct Transition {
    channel: String,
    user: String,
    reply: std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, BrokerError>> + Send>>,
}

/// Joins and leaves waiting for their transitions, at most: beyond, the
/// observer misses some (and a warning says so) rather than memory growing.
const TRANSITIONS_MAX: usize = 65_536;

/// Hands the transitions `member.lua` and `forget.lua` report (1 occupied,
/// 2 vacated, 4 user added, 8 user removed; 16, occupied again within the
/// vacated delay, reports nothing) to the hub's observer, in the order a
/// channel goes through them. A vacate made by `member.lua` with a delay is
/// reported after it, if the channel was not occupied again meanwhile.
fn report(inner: &Arc<Inner>, channel: &str, flags: i64, user: &str, delayed: bool) {
    use herald_core::ChannelEvent as E;
    let hub = &inner.hub;
    if flags & 1 != 0 {
        hub.notify(channel, E::Occupied);
    }
    if flags & 4 != 0 {
        hub.notify(channel, E::UserAdded(user));
    }
    if flags & 8 != 0 {
        hub.notify(channel, E::UserRemoved(user));
    }
    if flags & 2 != 0 {
        let delay = inner.cfg.vacated_delay;
        if !delayed || delay.is_zero() {
            return hub.notify(channel, E::Vacated);
        }
        let (me, channel) = (Arc::downgrade(inner), channel.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let Some(inner) = me.upgrade() else { return };
            let key = inner.key(&channel, "v");
            match inner.link.call(&[b"DEL".as_slice(), key.as_bytes()]).await {
                Ok(v) if v.int() == Some(1) => inner.hub.notify(&channel, E::Vacated),
                Ok(_) => {} // occupied again in the meantime
                Err(e) => {
                    tracing::debug!(%channel, error = %e, "pending vacate not confirmed; its webhook is lost")
                }
            }
        });
    }
}

/// Awaits the replies of joins and leaves one after the other (they arrive
/// in that order on the one link) and reports their transitions.
async fn transitions(me: Weak<Inner>, mut rx: tokio::sync::mpsc::Receiver<Transition>) {
    while let Some(t) = rx.recv().await {
        let reply = t.reply.await;
        let Some(inner) = me.upgrade() else { return };
        match reply {
            Ok(v) => report(&inner, &t.channel, v.int().unwrap_or(0), &t.user, true),
            Err(e) => {
                tracing::debug!(channel = %t.channel, error = %e, "presence change not confirmed; its webhook is lost")
            }
        }
    }
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
        let lobby_topic = Bytes::from(tables::lobby_keys(&cfg.prefix).2);
        let inner = Arc::new_cyclic(|me| Inner {
            me: me.clone(),
            own_topic,
            lobby_msgs: OnceLock::new(),
            lobby_topic,
            node_id,
            cfg,
            link,
            pubsub: OnceLock::new(),
            hub,
            chans: Mutex::new(HashMap::new()),
            patterns: Mutex::new(HashMap::new()),
            nodes: Mutex::new(Vec::new()),
            stats: OnceLock::new(),
            lost: AtomicU64::new(0),
            filled: AtomicU64::new(0),
            transitions: tx,
            control: Bytes::from(format!("{}:ctl", cfg_prefix)),
            node_msgs: OnceLock::new(),
        });
        tokio::spawn(transitions(Arc::downgrade(&inner), rx));
        let sink: Weak<dyn Sink> = Arc::downgrade(&(inner.clone() as Arc<dyn Sink>));
        let _ = inner.pubsub.set(PubSub::start(target, sink));
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
        registry::TableRegistry::new(
            self.inner.link.clone(),
            self.inner.cfg.prefix.clone(),
            self.inner.node_id.clone(),
        )
    }

    /// Game tables' leases and saves for this node, on the broker's link
    /// (decision 0009).
    pub fn table_store(&self) -> tables::TableStore {
        tables::TableStore::new(
            self.inner.link.clone(),
            self.inner.cfg.prefix.clone(),
            self.inner.node_id.clone(),
        )
    }

    /// Hands every message published on this node's topic
    /// (`P:node:{ID}:cmd`) to `f`, on the subscriber link's task (so `f`
    /// must not block); set once. The topic is subscribed again after a
    /// reconnect; messages published while the link was down are lost
    /// (Redis pub/sub is at most once): the senders time out.
    pub fn on_node_messages(&self, f: NodeMsgFn) {
        if self.inner.node_msgs.set(f).is_ok() {
            if let Some(ps) = self.inner.pubsub() {
                drop(ps.subscribe(self.inner.own_topic.clone())); // confirmation not awaited
            }
        }
    }

    /// Hands every message of the cluster lobby's topic (`P:lobby`, written
    /// by `TableStore::publish_entry`) to `f`, on the subscriber link's
    /// task; `f(None)` after the link (re)connected, when messages may have
    /// been missed (read `TableStore::lobby_entries` then), called once
    /// Redis confirmed the subscription, so that a read then misses nothing
    /// published before it and the topic brings everything after. Set once.
    pub fn on_lobby(&self, f: LobbyFn) {
        if self.inner.lobby_msgs.set(f).is_ok() {
            if let Some(ps) = self.inner.pubsub() {
                let confirmed = ps.subscribe(self.inner.lobby_topic.clone());
                self.inner.lobby_subscribed(confirmed);
            }
        }
    }

    /// Publishes `payload` on node `node`'s topic, after every command this
    /// node queued before (one link, in order). At most once: nothing tells
    /// whether the node was there to receive it.
    pub fn send_to_node(&self, node: &str, payload: &[u8]) -> Result<(), BrokerError> {
        let topic = self.inner.node_topic(node);
        self.inner
            .link
            .fire(&[b"PUBLISH".as_slice(), &topic, payload])
    }

    /// Sets what this node reports in its heartbeats (once).
    pub fn set_stats(&self, stats: StatsFn) {
        let _ = self.inner.stats.set(stats);
    }

    /// The live nodes as of the last heartbeat (this one included once it has
    /// sent one).
    pub fn nodes(&self) -> Vec<NodeInfo> {
        lock(&self.inner.nodes).clone()
    }

    /// Channels whose local subscribers had to be closed with 3004, and gaps
    /// filled from a stream, since start.
    pub fn repairs(&self) -> (u64, u64) {
        (
            self.inner.lost.load(Ordering::Relaxed),
            self.inner.filled.load(Ordering::Relaxed),
        )
    }

    /// Closes the exact subscribers of `channel` with `code` on every node of
    /// the cluster (the Pusher API's `terminate_connections`): a message on
    /// the control topic, which every node, this one included, acts on when
    /// its subscriber link receives it. A node whose subscriber link is down
    /// at that moment misses it (Redis Pub/Sub keeps nothing). Fails when
    /// Redis cannot take the message.
    pub async fn close_everywhere(&self, channel: &str, code: u16) -> Result<(), BrokerError> {
        let msg = format!("close:{code}:{channel}");
        let control = self.inner.control.clone();
        self.inner
            .link
            .call(&[b"PUBLISH".as_slice(), &control, msg.as_bytes()])
            .await
            .map(|_| ())
    }

    /// Leaves the cluster now (on shutdown): removes this node and its
    /// presence members, announcing them as leaves.
    pub async fn leave_cluster(&self) -> Result<(), BrokerError> {
        self.inner
            .forget(&self.inner.node_id, "leave")
            .await
            .map(|_| ())
    }
}

impl Inner {
    fn me(&self) -> Option<Arc<Inner>> {
        self.me.upgrade()
    }

    /// Tells the lobby's handler to read what it missed once the lobby's
    /// subscription is confirmed (or failed: a reconnect follows, and
    /// reads again). Read before the subscription holds, an entry published
    /// in between would be missed with no gap in the numbers to show it
    /// (the first message a node receives has no predecessor to compare).
    fn lobby_subscribed(&self, confirmed: tokio::sync::oneshot::Receiver<()>) {
        let Some(me) = self.me() else { return };
        tokio::spawn(async move {
            let _ = confirmed.await;
            if let Some(f) = me.lobby_msgs.get() {
                f(None);
            }
        });
    }

    fn pubsub(&self) -> Option<&Arc<PubSub>> {
        self.pubsub.get()
    }

    fn key(&self, channel: &str, kind: &str) -> String {
        format!("{}:{{{channel}}}:{kind}", self.cfg.prefix)
    }

    /// The set of occupied channels of `namespace` (what comes before the
    /// channel's first `:`, empty if none).
    fn occupied_key(&self, namespace: &str) -> String {
        format!("{}:occupied:{namespace}", self.cfg.prefix)
    }

    fn topic(&self, channel: &str) -> Bytes {
        Bytes::from(format!("{}:c:{channel}", self.cfg.prefix))
    }

    /// The channel a topic is for (the inverse of [`Inner::topic`]).
    fn channel_of<'t>(&self, topic: &'t [u8]) -> Option<&'t str> {
        let name = topic.get(self.cfg.prefix.len() + 3..)?;
        std::str::from_utf8(name).ok()
    }

    /// A node's own topic, for messages routed to it.
    fn node_topic(&self, node: &str) -> Bytes {
        Bytes::from(format!("{}:node:{node}:cmd", self.cfg.prefix))
    }

    /// `P:nodes` (node stats) and `P:nodes:seen` (last heartbeats).
    fn nodes_key(&self, suffix: &str) -> String {
        format!("{}:nodes{suffix}", self.cfg.prefix)
    }

    fn members_key(&self, node: &str) -> String {
        format!("{}:node:{node}:members", self.cfg.prefix)
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
        let v = self
            .link
            .call(&[
                b"EVALSHA".as_slice(),
                lua::READ.sha().as_bytes(),
                b"2",
                self.key(channel, "m").as_bytes(),
                self.key(channel, "s").as_bytes(),
                if create { b"1" } else { b"0" },
                random_id(16).as_bytes(),
                if entries { b"1" } else { b"0" },
                se.as_bytes(),
                so.as_bytes(),
                limit.to_string().as_bytes(),
                self.ttl_ms(channel).as_bytes(),
            ])
            .await?;
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

    fn chan(&self, channel: &str) -> Option<ChanRef> {
        lock(&self.chans).get(channel).cloned()
    }

    /// Delivers a publication to the hub and records it.
    fn deliver(&self, c: &mut Chan, offset: u64, data: Bytes) {
        self.hub.deliver(&Publication {
            channel: c.name.clone(),
            offset,
            data,
            json: false,
        });
        if let Some((_, last)) = &mut c.known {
            *last = offset;
        }
    }

    /// The channel's stream is not the one its subscribers have been
    /// following: close them so they reconnect and learn what was lost.
    fn lose(&self, c: &mut Chan, epoch: Bytes, top: u64) {
        let n = self
            .hub
            .close_subscribers(&c.name, DisconnectCode::BrokerStateLost.code());
        self.lost.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(channel = %c.name, closed = n, "channel stream lost or out of retention; subscribers closed with 3004");
        c.known = Some((epoch, top));
    }

    /// Starts the channel's sync task unless one runs.
    fn start_sync(self: &Arc<Self>, c: &mut Chan, chan: &ChanRef) {
        c.live = false;
        if c.syncing {
            return;
        }
        c.syncing = true;
        tokio::spawn(sync(self.clone(), chan.clone()));
    }

    /// `forget.lua` for `node` in `mode` (`dead`, `leave` or `repair`).
    fn forget_args(&self, node: &str, mode: &str) -> Vec<Vec<u8>> {
        vec![
            b"EVALSHA".to_vec(),
            lua::FORGET.sha().as_bytes().to_vec(),
            b"3".to_vec(),
            self.nodes_key(":seen").into_bytes(),
            self.nodes_key("").into_bytes(),
            self.members_key(node).into_bytes(),
            node.as_bytes().to_vec(),
            self.cfg.prefix.as_bytes().to_vec(),
            mode.as_bytes().to_vec(),
        ]
    }

    /// Removes `node` (`dead` or `leave`) and its presence members, announcing
    /// them as leaves and reporting their cluster-wide transitions to the
    /// hub's observer; returns how many were removed.
    async fn forget(&self, node: &str, mode: &str) -> Result<i64, BrokerError> {
        let v = self.link.call(&self.forget_args(node, mode)).await?;
        let items = v.items();
        for t in items.get(1..).unwrap_or_default().chunks_exact(3) {
            let text = |v: &Value| v.bytes().map(|b| String::from_utf8_lossy(b).into_owned());
            if let (Some(channel), Some(flags), Some(user)) = (text(&t[0]), t[1].int(), text(&t[2]))
            {
                if let Some(me) = self.me() {
                    // A dead or leaving node's clients are gone for good.
                    report(&me, &channel, flags, &user, false);
                }
            }
        }
        Ok(items.first().and_then(Value::int).unwrap_or(0))
    }

    /// Records that `info` joined (or left) `channel` in Redis, announcing
    /// it to other nodes' listeners if `announce` and it changed anything.
    fn member(&self, join: bool, channel: &str, info: &ClientInfo, announce: bool) {
        let member = member::encode(info);
        let msg = member::presence_message(join, &self.node_id, &member);
        let namespace = channel.split_once(':').map_or("", |(ns, _)| ns);
        let (p, u) = (self.key(channel, "p"), self.key(channel, "u"));
        let (set, occupied) = (
            self.members_key(&self.node_id),
            self.occupied_key(namespace),
        );
        let (topic, entry) = (
            self.topic(channel),
            member::set_entry(channel, &info.client),
        );
        let vacating = self.key(channel, "v");
        let delay = self.cfg.vacated_delay.as_millis().to_string();
        let args: [&[u8]; 18] = [
            b"EVALSHA".as_slice(),
            lua::MEMBER.sha().as_bytes(),
            b"5",
            p.as_bytes(),
            u.as_bytes(),
            set.as_bytes(),
            occupied.as_bytes(),
            vacating.as_bytes(),
            if join { b"join" } else { b"leave" },
            info.client.as_bytes(),
            &member,
            info.user.as_bytes(),
            &topic,
            &msg,
            &entry,
            if announce { b"1" } else { b"0" },
            channel.as_bytes(),
            delay.as_bytes(),
        ];
        let args = &args[..];
        if !(announce && self.hub.observed()) {
            let _ = self.link.fire(args);
            return;
        }
        let Ok(reply) = self.link.call_later(args) else {
            return;
        };
        let t = Transition {
            channel: channel.to_string(),
            user: info.user.clone(),
            reply: Box::pin(reply),
        };
        if self.transitions.try_send(t).is_err() {
            tracing::warn!(
                channel,
                "too many presence changes awaiting Redis; a webhook is lost"
            );
        }
    }

    /// Replaces this node's presence members in Redis with the hub's (after
    /// the command link reconnected, when joins and leaves may have been
    /// lost, or after this node was taken for dead). Silent: listeners are
    /// not told about the repair; `presence` is right again once it is done.
    /// The commands are queued in order on the one link, so joins made after
    /// this call land after the wipe.
    fn repair_presence(&self) {
        let _ = self.link.fire(&self.forget_args(&self.node_id, "repair"));
        for channel in self.hub.channels() {
            for info in self.hub.presence(&channel) {
                self.member(true, &channel, &info, false);
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

/// Brings a channel's link in sync with its stream: (re)subscribes if needed,
/// reads what it missed, delivers it in order, then goes live.
async fn sync(inner: Arc<Inner>, chan: ChanRef) {
    let mut pause = Duration::from_millis(50);
    loop {
        let (name, topic, resubscribe, since) = {
            let mut c = lock(&chan);
            if c.removed {
                c.syncing = false;
                return;
            }
            let r = c.resubscribe;
            c.resubscribe = false;
            let since = c.known.as_ref().map(|(e, o)| Position {
                epoch: String::from_utf8_lossy(e).into_owned(),
                offset: *o,
            });
            (c.name.clone(), c.topic.clone(), r, since)
        };
        if resubscribe {
            let Some(ps) = inner.pubsub() else { return };
            if ps.subscribe(topic).await.is_err() {
                // The subscriber link is down; `reconnected` starts us again.
                let mut c = lock(&chan);
                c.resubscribe = true;
                c.syncing = false;
                return;
            }
        }
        let read = inner
            .read(&name, true, since.as_ref(), since.is_some(), 0)
            .await;
        let (epoch, top, pubs) = match read {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(channel = %name, error = %e, "sync: cannot read the stream; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let mut c = lock(&chan);
        if c.removed {
            c.syncing = false;
            return;
        }
        match c.known.clone() {
            None => c.known = Some((epoch.clone(), top)),
            Some((known, _)) if known != epoch => inner.lose(&mut c, epoch.clone(), top),
            Some((_, last)) => {
                if top > last {
                    if pubs.first().map(|p| p.offset) != Some(last + 1) {
                        inner.lose(&mut c, epoch.clone(), top);
                    } else {
                        inner.filled.fetch_add(1, Ordering::Relaxed);
                        for p in pubs {
                            if p.offset > last {
                                inner.deliver(&mut c, p.offset, p.data);
                            }
                        }
                    }
                }
            }
        }
        // Then what arrived meanwhile, as long as it continues the sequence.
        let buffered = std::mem::take(&mut c.buffer);
        let mut gap = false;
        for (e, offset, data) in buffered {
            let Some((known, last)) = c.known.clone() else {
                break;
            };
            if gap {
                c.buffer.push((e, offset, data));
                continue;
            }
            if e != known || offset <= last {
                continue; // another epoch's, or already delivered
            }
            if offset == last + 1 {
                inner.deliver(&mut c, offset, data);
            } else {
                gap = true;
                c.buffer.push((e, offset, data));
            }
        }
        if gap {
            drop(c);
            continue; // read again from the last delivered offset
        }
        c.live = true;
        c.syncing = false;
        for w in c.waiters.drain(..) {
            let _ = w.send(());
        }
        return;
    }
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

/// A request on the control topic: `close:CODE:CHANNEL` (see
/// [`RedisBroker::close_everywhere`]); `None` for anything else.
fn parse_control(payload: &[u8]) -> Option<(u16, &str)> {
    let text = std::str::from_utf8(payload).ok()?;
    let rest = text.strip_prefix("close:")?;
    let (code, channel) = rest.split_once(':')?;
    let code = code.parse().ok()?;
    (!channel.is_empty()).then_some((code, channel))
}

impl Inner {
    /// The messages of a node-wide topic (the control topic, this node's
    /// own topic, the cluster lobby's), in order; `false` (nothing taken)
    /// for any other topic, which is a channel's.
    fn node_wide<'a>(&self, topic: &[u8], payloads: impl Iterator<Item = &'a Bytes>) -> bool {
        if topic == self.control.as_ref() {
            for payload in payloads {
                match parse_control(payload) {
                    Some((code, channel)) => {
                        self.hub.close_subscribers(channel, code);
                    }
                    None => tracing::debug!("malformed message on the control topic"),
                }
            }
        } else if topic == self.own_topic.as_ref() {
            if let Some(f) = self.node_msgs.get() {
                payloads.for_each(|p| f(p.clone()));
            }
        } else if topic == self.lobby_topic.as_ref() {
            if let Some(f) = self.lobby_msgs.get() {
                payloads.for_each(|p| f(Some(p.clone())));
            }
        } else {
            return false;
        }
        true
    }

    /// A channel topic's messages of one read, in order: under one lock of
    /// the channel, the publications that continue its sequence are
    /// gathered and fanned out as one batch ([`Deliver::deliver_batch`]);
    /// a presence message first delivers what was gathered, so the order
    /// between them is kept. A gap or another epoch starts the sync as
    /// before, after what precedes it is delivered.
    fn channel_messages<'a>(&self, topic: &[u8], payloads: impl Iterator<Item = &'a Bytes>) {
        let Some(name) = self.channel_of(topic) else {
            return;
        };
        let Some(chan) = self.chan(name) else { return };
        let mut c = lock(&chan);
        let mut ready: Vec<Publication> = Vec::new();
        for payload in payloads {
            let Some(msg) = member::parse(payload) else {
                tracing::debug!(channel = name, "malformed message on a channel topic");
                continue;
            };
            match msg {
                Message::Presence {
                    join,
                    edge,
                    node,
                    info,
                } => {
                    self.deliver_ready(&mut ready);
                    let own = node == self.node_id.as_bytes();
                    self.hub.announce(&c.name, info, join, edge, own);
                }
                Message::Publication {
                    epoch,
                    offset,
                    data,
                } => {
                    if !c.live {
                        if c.buffer.len() >= BUFFER_MAX {
                            c.buffer.clear(); // read from the stream instead
                        }
                        c.buffer.push((epoch, offset, data));
                        continue;
                    }
                    let Some((known, last)) = &mut c.known else {
                        continue;
                    };
                    if epoch == *known && offset == *last + 1 {
                        *last = offset;
                        ready.push(Publication {
                            channel: c.name.clone(),
                            offset,
                            data,
                            json: false,
                        });
                    } else if epoch == *known && offset <= *last {
                        // Already delivered (from the stream).
                    } else {
                        // What came before the gap goes out first; the sync
                        // (which needs this lock) delivers what follows.
                        self.deliver_ready(&mut ready);
                        c.buffer.push((epoch, offset, data));
                        // A gap or another epoch: the sync decides which.
                        if let Some(me) = self.me() {
                            me.start_sync(&mut c, &chan);
                        }
                    }
                }
            }
        }
        self.deliver_ready(&mut ready);
    }

    /// Fans out the publications gathered for one channel, as one batch.
    fn deliver_ready(&self, ready: &mut Vec<Publication>) {
        if !ready.is_empty() {
            self.hub.deliver_batch(ready);
            ready.clear();
        }
    }

    /// Publications of channels the node does not follow, received through
    /// a pattern subscription (live only).
    fn pattern_messages<'a>(&self, topic: &[u8], payloads: impl Iterator<Item = &'a Bytes>) {
        let Some(name) = self.channel_of(topic) else {
            return;
        };
        // A channel followed here arrives as a plain message too, and its
        // link delivers it to pattern subscribers as well, in order.
        if self.chan(name).is_some() {
            return;
        }
        let channel: Arc<str> = Arc::from(name);
        let pubs: Vec<Publication> = payloads
            .filter_map(|payload| match member::parse(payload) {
                Some(Message::Publication { offset, data, .. }) => Some(Publication {
                    channel: channel.clone(),
                    offset,
                    data,
                    json: false,
                }),
                _ => None,
            })
            .collect();
        if !pubs.is_empty() {
            self.hub.deliver_batch(&pubs);
        }
    }
}

impl Sink for Inner {
    fn messages(&self, batch: &[Incoming]) {
        if let [m] = batch {
            let one = std::iter::once(&m.payload);
            return if m.pattern {
                self.pattern_messages(&m.topic, one)
            } else if !self.node_wide(&m.topic, one.clone()) {
                self.channel_messages(&m.topic, one)
            };
        }
        // Grouped by topic, each topic's messages in the order they came
        // (a stable sort): one channel's order is all that is promised.
        let mut order: Vec<&Incoming> = batch.iter().collect();
        order.sort_by(|a, b| (a.pattern, &a.topic).cmp(&(b.pattern, &b.topic)));
        for run in order.chunk_by(|a, b| a.pattern == b.pattern && a.topic == b.topic) {
            let Some(first) = run.first() else { continue };
            let payloads = run.iter().map(|m| &m.payload);
            if first.pattern {
                self.pattern_messages(&first.topic, payloads);
            } else if !self.node_wide(&first.topic, payloads.clone()) {
                self.channel_messages(&first.topic, payloads);
            }
        }
    }

    fn reconnected(&self) {
        if let Some(ps) = self.pubsub() {
            // Confirmation not awaited: requests sent before it are missed,
            // as by a node whose link is down.
            drop(ps.subscribe(self.control.clone()));
            if self.node_msgs.get().is_some() {
                drop(ps.subscribe(self.own_topic.clone())); // confirmation not awaited
            }
            if self.lobby_msgs.get().is_some() {
                let confirmed = ps.subscribe(self.lobby_topic.clone());
                self.lobby_subscribed(confirmed);
            }
            for glob in lock(&self.patterns).keys() {
                ps.psubscribe(glob.clone());
            }
        }
        let chans: Vec<ChanRef> = lock(&self.chans).values().cloned().collect();
        let Some(me) = self.me() else { return };
        for chan in chans {
            let mut c = lock(&chan);
            c.resubscribe = true;
            me.start_sync(&mut c, &chan);
        }
    }

    fn disconnected(&self) {
        for chan in lock(&self.chans).values() {
            let mut c = lock(chan);
            c.live = false;
            c.resubscribe = true;
        }
    }
}

impl Broker for RedisBroker {
    fn publish(&self, channel: &str, data: Bytes) -> Completion<Result<Position, BrokerError>> {
        let inner = &self.inner;
        let r = inner.retention(channel);
        // Queued now, so two publishes of one connection keep their order.
        let call = inner.link.call_later(&[
            b"EVALSHA".as_slice(),
            lua::PUBLISH.sha().as_bytes(),
            b"2",
            inner.key(channel, "m").as_bytes(),
            inner.key(channel, "s").as_bytes(),
            &data,
            random_id(16).as_bytes(),
            r.size.to_string().as_bytes(),
            r.ttl.as_millis().to_string().as_bytes(),
            &inner.topic(channel),
        ]);
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
                ps.unsubscribe(c.topic.clone());
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

    fn subscribe_pattern(&self, pattern: &str) {
        let glob = glob(&self.inner.cfg.prefix, pattern);
        let mut patterns = lock(&self.inner.patterns);
        let n = patterns.entry(glob.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            if let Some(ps) = self.inner.pubsub() {
                ps.psubscribe(glob);
            }
        }
    }

    fn unsubscribe_pattern(&self, pattern: &str) {
        let glob = glob(&self.inner.cfg.prefix, pattern);
        let mut patterns = lock(&self.inner.patterns);
        if let Some(n) = patterns.get_mut(&glob) {
            *n -= 1;
            if *n == 0 {
                patterns.remove(&glob);
                if let Some(ps) = self.inner.pubsub() {
                    ps.punsubscribe(glob);
                }
            }
        }
    }

    fn healthy(&self) -> bool {
        self.inner.link.is_up() && self.inner.pubsub().is_some_and(|p| p.is_up())
    }
}

impl Presence for RedisBroker {
    fn joined(&self, channel: &str, client: &Client) {
        self.inner.member(true, channel, &client.info(), true);
    }

    fn left(&self, channel: &str, client: &Client) {
        self.inner.member(false, channel, &client.info(), true);
    }

    fn list(&self, channel: &str) -> Completion<Result<Vec<ClientInfo>, BrokerError>> {
        let inner = self.inner.clone();
        let key = inner.key(channel, "p");
        Completion::Pending(Box::pin(async move {
            let v = inner
                .link
                .call(&[b"HGETALL".as_slice(), key.as_bytes()])
                .await?;
            Ok(v.items()
                .chunks(2)
                .filter_map(|kv| kv.get(1).and_then(Value::bytes).and_then(member::decode))
                .collect())
        }))
    }

    fn stats(&self, channel: &str) -> Completion<Result<(u64, u64), BrokerError>> {
        let inner = self.inner.clone();
        let (p, u) = (inner.key(channel, "p"), inner.key(channel, "u"));
        Completion::Pending(Box::pin(async move {
            let a = inner.link.call_later(&[b"HLEN".as_slice(), p.as_bytes()])?;
            let b = inner.link.call_later(&[b"HLEN".as_slice(), u.as_bytes()])?;
            let (a, b) = tokio::join!(a, b);
            let n = |v: Value| u64::try_from(v.int().unwrap_or(0)).unwrap_or(0);
            Ok((n(a?), n(b?)))
        }))
    }

    fn occupied(&self, namespace: &str) -> Completion<Result<Vec<String>, BrokerError>> {
        let inner = self.inner.clone();
        let key = inner.occupied_key(namespace);
        Completion::Pending(Box::pin(async move {
            let v = inner
                .link
                .call(&[b"SMEMBERS".as_slice(), key.as_bytes()])
                .await?;
            Ok(v.items()
                .iter()
                .filter_map(Value::bytes)
                .filter_map(|b| std::str::from_utf8(b).ok().map(str::to_string))
                .collect())
        }))
    }
}

/// Heartbeats, the node list, dead nodes, and keeping followed channels'
/// metadata from expiring.
async fn heartbeats(me: Weak<Inner>) {
    let Some(period) = me.upgrade().map(|i| i.cfg.heartbeat) else {
        return;
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut beats: u64 = 0;
    let mut generation = 0;
    loop {
        tick.tick().await;
        let Some(inner) = me.upgrade() else { return };
        if !inner.link.is_up() {
            continue;
        }
        let now = inner.link.generation();
        if now != generation {
            // Generation 1 is the first connection; any later one is a
            // reconnection (perhaps several since the last tick).
            if now > 1 {
                inner.repair_presence();
            }
            generation = now;
        }
        beats += 1;
        if let Err(e) = beat(&inner, beats).await {
            tracing::debug!(error = %e, "heartbeat failed");
        }
    }
}

async fn beat(inner: &Arc<Inner>, beats: u64) -> Result<(), BrokerError> {
    let stats = inner
        .stats
        .get()
        .map(|f| f())
        .unwrap_or(serde_json::Value::Null);
    let seen = inner.nodes_key(":seen");
    let hash = inner.nodes_key("");
    let v = inner
        .link
        .call(&[
            b"EVALSHA".as_slice(),
            lua::HEARTBEAT.sha().as_bytes(),
            b"2",
            seen.as_bytes(),
            hash.as_bytes(),
            inner.node_id.as_bytes(),
            stats.to_string().as_bytes(),
            inner.cfg.dead_after.as_millis().to_string().as_bytes(),
        ])
        .await?;
    let items = v.items();
    if items.first().and_then(Value::int) == Some(1) && beats > 1 {
        // We were taken for dead (and our members removed): register again.
        tracing::warn!(node = %inner.node_id, "this node was taken for dead by the cluster; re-registering its presence");
        inner.repair_presence();
    }
    for dead in items.iter().skip(1).filter_map(Value::bytes) {
        let id = String::from_utf8_lossy(dead).into_owned();
        if id != inner.node_id {
            let n = inner.forget(&id, "dead").await?;
            tracing::info!(node = %id, members = n, "forgot a silent node and its presence");
        }
    }
    // The node list, with the Redis clock's view of who is alive.
    let list = inner.link.call_later(&[
        b"ZRANGE".as_slice(),
        seen.as_bytes(),
        b"0",
        b"-1",
        b"WITHSCORES",
    ])?;
    let all = inner
        .link
        .call_later(&[b"HGETALL".as_slice(), hash.as_bytes()])?;
    let now = inner.link.call_later(&[b"TIME"])?;
    let (list, all, now) = tokio::join!(list, all, now);
    let (list, all, now) = (list?, all?, now?);
    let now_ms = now.items().first().and_then(Value::int).unwrap_or(0) * 1000
        + now.items().get(1).and_then(Value::int).unwrap_or(0) / 1000;
    let stats: HashMap<Bytes, serde_json::Value> = all
        .items()
        .chunks(2)
        .filter_map(|kv| {
            let k = kv.first()?.bytes()?.clone();
            let v = serde_json::from_slice(kv.get(1)?.bytes()?).ok()?;
            Some((k, v))
        })
        .collect();
    let nodes = list
        .items()
        .chunks(2)
        .filter_map(|kv| {
            let id = kv.first()?.bytes()?;
            let at = kv.get(1)?.int().or_else(|| {
                std::str::from_utf8(kv.get(1)?.bytes()?)
                    .ok()?
                    .parse::<f64>()
                    .ok()
                    .map(|f| f as i64)
            })?;
            Some(NodeInfo {
                id: String::from_utf8_lossy(id).into_owned(),
                last_seen_ms: u64::try_from(now_ms - at).unwrap_or(0),
                stats: stats.get(id).cloned().unwrap_or(serde_json::Value::Null),
            })
        })
        .collect();
    *lock(&inner.nodes) = nodes;
    // Channels followed here keep their epoch while anyone follows them.
    let every = refresh_every(inner);
    if every > 0 && beats.is_multiple_of(every) {
        let chans: Vec<Arc<str>> = lock(&inner.chans).keys().cloned().collect();
        for name in chans {
            let ttl = inner.ttl_ms(&name);
            if ttl != "0" {
                let _ = inner.link.fire(&[
                    b"PEXPIRE".as_slice(),
                    inner.key(&name, "m").as_bytes(),
                    ttl.as_bytes(),
                ]);
            }
        }
    }
    Ok(())
}

/// Heartbeats between two refreshes of followed channels' expiry: a third of
/// the shortest retention time (0: nothing expires).
fn refresh_every(inner: &Inner) -> u64 {
    let shortest = std::iter::once(&inner.cfg.retention)
        .chain(inner.cfg.by_namespace.values())
        .map(|r| r.ttl)
        .filter(|t| !t.is_zero())
        .min();
    match shortest {
        None => 0,
        Some(t) => {
            let beat = inner.cfg.heartbeat.as_millis().max(1);
            u64::try_from((t.as_millis() / 3 / beat).max(1)).unwrap_or(1)
        }
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

    #[test]
    fn control_requests_parse_or_are_ignored() {
        assert_eq!(
            parse_control(b"close:4009:pusher-1::server-to-user-a"),
            Some((4009, "pusher-1::server-to-user-a"))
        );
        for bad in [
            &b""[..],
            b"close:",
            b"close:4009:",
            b"close:x:c",
            b"close:70000:c",
            b"open:1:c",
            b"close:1:\xff",
        ] {
            assert_eq!(parse_control(bad), None, "{bad:?}");
        }
    }
}
