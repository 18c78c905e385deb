//! A node: the hub, the broker, the registry of connected clients and the
//! settings every session obeys.

use crate::auth::{AllowAll, Authenticator, Expiries};
use crate::broker::Broker;
use crate::client::Client;
use crate::games::Games;
use crate::hub::Hub;
use crate::memory::{MemoryBroker, Retention};
use crate::metrics::Metrics;
use crate::presence::{LocalPresence, Presence};
use crate::shard::Sharded;
use herald_proto::Encoding;
use std::borrow::Borrow;
use std::collections::HashMap;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const REGISTRY_SHARDS: usize = 16;

/// A boxed task, handed to the node's spawner.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs tasks on the server's runtime; the core stays runtime-agnostic.
pub type Spawner = Arc<dyn Fn(Task) + Send + Sync>;

/// Per-session settings. Each field's default is in [`NodeConfig::default`].
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Subscriptions one connection may hold (default 1024).
    pub max_subscriptions: usize,
    /// Publications retained per channel by the in-memory broker, for history
    /// and recovery (default 100; 0 turns history, and so recovery, off).
    pub history_size: usize,
    /// How long a publication stays in history (default 300 s; zero: no time
    /// limit, only `history_size` bounds it). See [`crate::memory`] for why
    /// this also bounds memory.
    pub history_ttl: Duration,
    /// Retention for the channels of a namespace (the part of a channel name
    /// before the first `:`), overriding the two above (default: none).
    pub history_by_namespace: HashMap<String, Retention>,
    /// Bytes one connection's outbound queue may hold before the client is
    /// disconnected as a slow consumer (default 1 MiB).
    pub client_queue_bytes: usize,
    /// Seconds between server heartbeats, announced in the connect reply
    /// (default 25).
    pub ping_interval: u32,
    /// The version string announced in the connect reply.
    pub version: String,
    /// Verifies tokens and decides permissions (default: [`AllowAll`],
    /// anonymous clients may do everything).
    pub auth: Arc<dyn Authenticator>,
    /// Messages per second one connection may send, refilled continuously
    /// (token bucket); further messages are answered with error 108 and
    /// dropped (default 10000: enough for `herald bench fanout -r 10000` from
    /// one publisher; lower it for browser-facing deployments; 0 = no limit).
    pub rate_limit: u32,
    /// Messages a connection may send in a burst above `rate_limit`: the
    /// bucket's size (default 20000; at least `rate_limit`).
    pub rate_burst: u32,
    /// Client ids start after this (default 0). A cluster node sets a random
    /// base in the high bits so that ids, which presence shows to every node,
    /// stay unique across nodes.
    pub client_id_base: u64,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            max_subscriptions: 1024,
            history_size: 100,
            history_ttl: Duration::from_secs(300),
            history_by_namespace: HashMap::new(),
            client_queue_bytes: 1 << 20,
            ping_interval: 25,
            version: env!("CARGO_PKG_VERSION").to_string(),
            auth: Arc::new(AllowAll::default()),
            rate_limit: 10_000,
            rate_burst: 20_000,
            client_id_base: 0,
        }
    }
}

/// A registered client, found by its id: the registry is a set of these.
/// A `HashMap<u64, Arc<Client>>` slot is 16 bytes (the id is already in the
/// client); this one is 8, which halves the registry's tables: 16 bytes per
/// connection at 10,000 (decision 0010, "Hibernation").
struct Registered(Arc<Client>);

impl Hash for Registered {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `u64`'s own hash, so that lookups by id (`Borrow<u64>`) agree.
        self.0.id.hash(state)
    }
}

impl PartialEq for Registered {
    fn eq(&self, other: &Registered) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for Registered {}

impl Borrow<u64> for Registered {
    fn borrow(&self) -> &u64 {
        &self.0.id
    }
}

/// One Herald node.
pub struct Node {
    /// Settings.
    pub config: NodeConfig,
    /// The local subscription index.
    pub hub: Arc<Hub>,
    /// Offsets, history, cross-node delivery.
    pub broker: Arc<dyn Broker>,
    /// Who is subscribed where (this node's hub, or the cluster's).
    pub presence: Arc<dyn Presence>,
    spawner: Spawner,
    next_id: AtomicU64,
    registry: Sharded<Registered, ()>,
    started: Instant,
    /// Connections whose tokens expire (closed with 3002 by the server).
    pub expiries: Expiries,
    /// Counters for `/metrics`.
    pub metrics: Metrics,
    /// The game engine, when the server runs one (set once at start-up).
    games: OnceLock<Arc<dyn Games>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// A node with the in-memory broker.
    pub fn with_memory_broker(config: NodeConfig, spawner: Spawner) -> Arc<Node> {
        let hub = Arc::new(Hub::new());
        let broker = Arc::new(MemoryBroker::with_retention(
            Retention {
                size: config.history_size,
                ttl: config.history_ttl,
            },
            config.history_by_namespace.clone(),
            hub.clone(),
        ));
        let presence = Arc::new(LocalPresence::new(hub.clone()));
        Node::new(config, hub, broker, presence, spawner)
    }

    /// A node over any broker that delivers into `hub`, with `presence`
    /// answering who is subscribed.
    pub fn new(
        config: NodeConfig,
        hub: Arc<Hub>,
        broker: Arc<dyn Broker>,
        presence: Arc<dyn Presence>,
        spawner: Spawner,
    ) -> Arc<Node> {
        Arc::new(Node {
            next_id: AtomicU64::new(config.client_id_base.wrapping_add(1)),
            config,
            hub,
            broker,
            presence,
            spawner,
            registry: Sharded::new(REGISTRY_SHARDS),
            started: Instant::now(),
            expiries: Expiries::default(),
            metrics: Metrics::default(),
            games: OnceLock::new(),
        })
    }

    /// Gives the node its game engine (once, before clients connect; a
    /// second call is ignored). Without one, game commands get error 111.
    pub fn set_games(&self, games: Arc<dyn Games>) {
        let _ = self.games.set(games);
    }

    /// The game engine, if any.
    pub fn games(&self) -> Option<&Arc<dyn Games>> {
        self.games.get()
    }

    /// Seconds since the node started: the clock of heartbeats.
    pub fn now(&self) -> u32 {
        self.started.elapsed().as_secs() as u32
    }

    /// Milliseconds since the node started: the clock of rate limits.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Runs a task on the server's runtime.
    pub fn spawn(&self, task: Task) {
        (self.spawner)(task)
    }

    /// Creates and registers a client.
    pub fn new_client(&self, encoding: Encoding) -> Arc<Client> {
        self.register(|id, queue, now| Client::new(id, encoding, queue, now))
    }

    /// [`Node::new_client`] for a WebSocket that negotiated
    /// permessage-deflate with a full window (`deflate`): publication
    /// pushes reach it compressed once by the hub ([`Client::deflate`]).
    pub fn new_client_deflating(&self, encoding: Encoding, deflate: bool) -> Arc<Client> {
        self.register(|id, queue, now| Client::new(id, encoding, queue, now).with_deflate(deflate))
    }

    /// Creates and registers a client that receives publications unrendered
    /// (SSE).
    pub fn new_raw_client(&self) -> Arc<Client> {
        self.register(Client::new_raw)
    }

    /// Creates and registers a client of another protocol (Pusher), whose
    /// pushes `render` renders.
    pub fn new_rendered_client(&self, render: Arc<dyn crate::Render>) -> Arc<Client> {
        self.register(|id, queue, now| Client::new_rendered(id, render, queue, now))
    }

    fn register(&self, make: impl FnOnce(u64, usize, u32) -> Client) -> Arc<Client> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let client = Arc::new(make(id, self.config.client_queue_bytes, self.now()));
        self.registry
            .lock(&id)
            .insert(Registered(client.clone()), ());
        client
    }

    /// Forgets a client (its connection ended).
    pub fn remove_client(&self, id: u64) {
        self.registry.lock(&id).remove(&id);
    }

    /// Number of connected clients.
    pub fn client_count(&self) -> usize {
        self.registry.len()
    }

    /// Calls `f` on every connected client, one registry shard at a time (the
    /// shard's lock is held during `f`, so `f` must be quick and must not call
    /// back into the registry).
    pub fn for_each_client(&self, mut f: impl FnMut(&Arc<Client>)) {
        self.registry.for_each_key(|r| f(&r.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry slot is one pointer: the id is read from the client.
    #[test]
    fn the_registry_is_a_set_of_pointers() {
        assert_eq!(std::mem::size_of::<(Registered, ())>(), 8);
        let node = Node::with_memory_broker(NodeConfig::default(), Arc::new(|_| {}));
        let clients: Vec<Arc<Client>> = (0..100).map(|_| node.new_client(Encoding::Json)).collect();
        assert_eq!(node.client_count(), 100);
        for c in clients.iter().step_by(2) {
            node.remove_client(c.id);
        }
        node.remove_client(u64::MAX);
        assert_eq!(node.client_count(), 50);
        let mut seen = Vec::new();
        node.for_each_client(|c| seen.push(c.id));
        seen.sort_unstable();
        let odd: Vec<u64> = clients.iter().skip(1).step_by(2).map(|c| c.id).collect();
        assert_eq!(seen, odd);
        // What the registry held is released with it.
        node.remove_client(clients[1].id);
        assert_eq!(Arc::strong_count(&clients[1]), 1);
        assert_eq!(Arc::strong_count(&clients[3]), 2);
    }
}
