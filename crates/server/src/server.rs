//! Accepting connections, heartbeats and graceful shutdown.
//!
//! One [`run`] serves a listener until its [`CancellationToken`] fires; the
//! binary and the integration tests both use it (tests on port 0). A counter
//! caps connections (over the cap: HTTP 503); accept errors back off instead of
//! spinning (e.g. out of file descriptors). Every connection driver, and every
//! connection hyper serves (SSE streams and long-polls are clients too), runs
//! on a [`TaskTracker`], so shutdown is: stop accepting, ask every client to
//! go away (close 1001, or the last SSE event, after whatever is already
//! queued), and wait for the drivers, at most `shutdown_timeout`.
//!
//! Heartbeats use one sweeper task, not a timer per connection: every
//! `ping_interval` it pings clients that have been silent that long and closes
//! (3000, no pong) those silent for `ping_interval + pong_timeout`.

use crate::config::ServerConfig;
use crate::http::serve_connection;
use crate::ws::shootout::ShootoutGroup;
use herald_core::outbox::Frame;
use herald_core::{Node, Task};
use herald_proto::DisconnectCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// State shared by every connection of one server.
pub struct Shared {
    /// Resolved configuration.
    pub config: ServerConfig,
    /// The node: hub, broker, sessions.
    pub node: Arc<Node>,
    /// The `/shootout` broadcast group.
    pub shootout: Arc<ShootoutGroup>,
    /// Tracks connection drivers for shutdown.
    pub tracker: TaskTracker,
    /// Connections accepted but not yet registered as clients.
    pub handshaking: AtomicUsize,
    /// Long-poll sessions.
    pub polls: crate::poll::Polls,
    /// TLS for the HTTP listener, when configured.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Connections per IP address.
    pub per_ip: Arc<crate::limits::PerIp>,
    /// Clients that must still send `connect` (closed with 3003 if late).
    pub deadlines: crate::limits::ConnectDeadlines,
    /// Cancelled when shutdown starts (`/readyz` answers 503 from then on).
    pub stopping: CancellationToken,
    /// The Redis broker in cluster mode (node list, repairs).
    pub cluster: Option<Arc<herald_redis::RedisBroker>>,
    /// The game engine: tables, seats, lobby (`/api/tables`).
    pub games: Arc<herald_game::Engine>,
    /// In a cluster: which tables exist (configured, created over HTTP,
    /// deleted) and the routes to their owners (`/api/tables`).
    pub cluster_tables: Option<(
        Arc<crate::cluster_tables::ClusterTables>,
        Arc<crate::table_routes::Routes>,
    )>,
    /// Pusher apps (`/app/{key}`, `/apps/{id}/...`).
    pub pusher: Arc<crate::pusher::Apps>,
    /// Where idle plain-TCP connections hibernate (`None`: they never do).
    pub parker: Option<Arc<crate::hibernate::Parker>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listener could not be used.
    #[error("listener failed: {0}")]
    Listener(#[from] std::io::Error),
    /// The TLS certificate or key could not be loaded.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The Redis URL is not one.
    #[error(transparent)]
    Redis(#[from] herald_redis::UrlError),
    /// A configured table could not be created.
    #[error("[[tables]]: {0}")]
    Table(#[from] herald_game::EngineError),
}

/// The games every server can run tables of.
pub fn game_factories() -> Vec<Arc<dyn herald_game::GameFactory>> {
    vec![herald_holdem::factory()]
}

/// Builds the shared state for `config` on the current tokio runtime.
pub fn shared(config: ServerConfig) -> Result<Arc<Shared>, ServerError> {
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(crate::tls::acceptor(cert, key)?),
        _ => None,
    };
    let spawner = Arc::new(|task: Task| {
        tokio::spawn(task);
    });
    let (node, cluster) = match &config.redis {
        None => (Node::with_memory_broker(config.node.clone(), spawner), None),
        Some(url) => {
            let hub = Arc::new(herald_core::Hub::new());
            let mut cfg = herald_redis::RedisConfig::new(url.clone());
            cfg.prefix = config.redis_prefix.clone();
            cfg.retention = herald_core::Retention {
                size: config.node.history_size,
                ttl: config.node.history_ttl,
            };
            cfg.by_namespace = config.node.history_by_namespace.clone();
            cfg.vacated_delay = config.pusher.vacated_delay;
            let broker = herald_redis::RedisBroker::start(cfg, hub.clone())?;
            let mut node_config = config.node.clone();
            // Client ids are shown to every node (presence): a random base in
            // the high bits keeps them unique across the cluster.
            node_config.client_id_base = fastrand::u64(1..1 << 23) << 40;
            let node = Node::new(node_config, hub, broker.clone(), broker.clone(), spawner);
            tracing::info!(
                node = broker.node_id(),
                "cluster mode: channels, history and presence in redis"
            );
            (node, Some(broker))
        }
    };
    let games = match &cluster {
        // In a cluster, tables (configured, or created over HTTP on any
        // node) are durable and owned by one node at a time (decision
        // 0009): the keeper claims them.
        Some(broker) => herald_game::Engine::with_durability(
            config.games.clone(),
            game_factories(),
            herald_game::durable::Durability {
                store: Arc::new(broker.table_store()),
                lease: config.table_lease,
            },
        ),
        None => herald_game::Engine::new(config.games.clone(), game_factories()),
    };
    let mut cluster_tables = None;
    match &cluster {
        Some(broker) => {
            let weak = Arc::downgrade(&node);
            let engine = Arc::downgrade(&games);
            let listen = config.listen.to_string();
            let role = config.role.name();
            broker.set_stats(Box::new(move || match weak.upgrade() {
                Some(n) => serde_json::json!({
                    "listen": listen,
                    "clients": n.client_count(),
                    "channels": n.hub.channel_count(),
                    "publications": n.metrics.publications.get(),
                    "uptime_s": n.now(),
                    "version": n.config.version,
                    "tables": engine.upgrade().map_or(0, |e| e.leases().len()),
                    "role": role,
                }),
                None => serde_json::Value::Null,
            }));
            let known = crate::cluster_tables::ClusterTables::start(
                broker,
                &games,
                &config.tables,
                config.table_lease,
                config.role.runs_tables(),
            )?;
            crate::cluster_lobby::start(broker, &games);
            // Every node may serve players of any table (decision 0009).
            let routes = crate::table_routes::Routes::start(
                broker,
                &games,
                known.clone(),
                config.table_lease,
                config.node.client_queue_bytes,
            );
            cluster_tables = Some((known, routes));
        }
        None => {
            for t in &config.tables {
                let spec = t.spec();
                for _ in 0..t.count {
                    games.create_table(&spec)?;
                }
            }
            if !config.tables.is_empty() {
                tracing::info!(tables = games.table_count(), "game tables created");
            }
        }
    }
    node.set_games(games.clone());
    let pusher = Arc::new(crate::pusher::Apps::new(&config.pusher, cluster.is_some()));
    if pusher.has_webhooks() {
        let apps = pusher.clone();
        node.hub
            .set_observer(Box::new(move |channel, event| apps.observe(channel, event)));
    }
    if pusher.counts.is_some() {
        let apps = pusher.clone();
        node.hub
            .set_count_hook(Box::new(move |channel| apps.count_changed(channel)));
    }
    let tracker = TaskTracker::new();
    let parker = if config.hibernate_after.is_zero() {
        None
    } else {
        match crate::hibernate::Parker::start(config.hibernate_after, tracker.clone()) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!(error = %e, "idle connections cannot hibernate");
                None
            }
        }
    };
    Ok(Arc::new(Shared {
        parker,
        pusher,
        games,
        cluster_tables,
        cluster,
        per_ip: Arc::new(crate::limits::PerIp::new(config.max_connections_per_ip)),
        deadlines: crate::limits::ConnectDeadlines::default(),
        stopping: CancellationToken::new(),
        config,
        node,
        shootout: Arc::new(ShootoutGroup::default()),
        tracker,
        handshaking: AtomicUsize::new(0),
        polls: crate::poll::Polls::default(),
        tls,
    }))
}

/// The sockets a server serves.
#[derive(Debug)]
pub struct Listeners {
    /// HTTP and WebSocket.
    pub http: TcpListener,
    /// The raw TCP transport, if enabled.
    pub tcp: Option<TcpListener>,
}

impl From<TcpListener> for Listeners {
    fn from(http: TcpListener) -> Listeners {
        Listeners { http, tcp: None }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Http,
    Tcp,
}

/// How long a cluster node waits for its Redis links before it accepts
/// connections anyway ([`run`]).
const READY_WAIT: Duration = Duration::from_secs(3);

/// Serves `listeners` until `shutdown` is cancelled, then drains.
pub async fn run(
    listeners: impl Into<Listeners>,
    config: ServerConfig,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let listeners = listeners.into();
    let mut config = config;
    // The address actually bound (`--listen 127.0.0.1:0`, tests): `/api/nodes`
    // and the cluster's node list show where each node can be reached.
    if let Ok(addr) = listeners.http.local_addr() {
        config.listen = addr;
    }
    let shared = shared(config)?;
    let sweeper = tokio::spawn(heartbeats(shared.clone(), shutdown.clone()));
    let demo = tokio::spawn(crate::demo::stream(
        shared.node.clone(),
        shared.config.demo_rate,
        shutdown.clone(),
    ));
    let deadlines = tokio::spawn(deadlines(shared.clone(), shutdown.clone()));
    let counts = tokio::spawn(crate::pusher::count::run(
        shared.pusher.clone(),
        shared.node.clone(),
        shutdown.clone(),
    ));
    if let Some(cluster) = &shared.cluster {
        // Accept once the Redis links are up (bounded): a client that
        // connects to a node that is just starting waits in the listen
        // backlog for a moment instead of having its first publishes and
        // subscribes refused with 114. With Redis down, the node serves
        // after the bound and answers 114 until Redis comes back.
        let ready = async {
            while !herald_core::broker::Broker::healthy(cluster.as_ref()) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            () = ready => {}
            () = tokio::time::sleep(READY_WAIT) => {
                tracing::warn!("redis not reachable yet; serving, commands that need it answer 114");
            }
            () = shutdown.cancelled() => {}
        }
    }
    let tcp = listeners
        .tcp
        .map(|l| tokio::spawn(accept_loop(l, Kind::Tcp, shared.clone(), shutdown.clone())));
    accept_loop(listeners.http, Kind::Http, shared.clone(), shutdown.clone()).await;
    if let Some(t) = tcp {
        let _ = t.await;
    }
    sweeper.abort();
    demo.abort();
    deadlines.abort();
    counts.abort();
    shared.stopping.cancel();
    drain(&shared).await;
    if let Some(cluster) = &shared.cluster {
        // Leave at once rather than be found dead later: the node list and
        // presence are right again immediately.
        let left = tokio::time::timeout(Duration::from_secs(2), cluster.leave_cluster()).await;
        if !matches!(left, Ok(Ok(()))) {
            tracing::warn!(
                "could not leave the cluster cleanly; the other nodes will forget this one"
            );
        }
    }
    Ok(())
}

/// Accepts until `shutdown`; each connection is handed to its transport.
async fn accept_loop(
    listener: TcpListener,
    kind: Kind,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) {
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => {
                backoff = Duration::from_millis(5);
                a
            }
            Err(e) => {
                // EMFILE and friends: wait instead of spinning on the error.
                tracing::warn!(error = %e, "accept failed; backing off {backoff:?}");
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // The cap counts registered clients plus handshakes in progress: no
        // per-connection permit object, so it costs idle connections nothing.
        let open = shared.node.client_count() + shared.handshaking.load(Ordering::Relaxed);
        if open >= shared.config.max_connections {
            tracing::debug!(%peer, open, "connection refused: connection limit");
            refuse(stream, kind, &shared, "too many connections\n");
            continue;
        }
        let Ok(slot) = shared.per_ip.acquire(peer.ip()) else {
            tracing::debug!(%peer, "connection refused: per-IP limit");
            refuse(
                stream,
                kind,
                &shared,
                "too many connections from your address\n",
            );
            continue;
        };
        match kind {
            Kind::Http => {
                tokio::spawn(serve_connection(stream, shared.clone(), slot));
            }
            Kind::Tcp => crate::tcp::serve_tcp(stream, &shared, slot),
        }
    }
}

/// Turns a connection away at a connection limit: HTTP 503 (a plaintext
/// answer means nothing to a TLS client, which is just closed), or a
/// `disconnect` push with 3503 on raw TCP.
fn refuse(mut stream: tokio::net::TcpStream, kind: Kind, shared: &Shared, why: &'static str) {
    shared.node.metrics.refused.inc();
    if shared.tls.is_some() && matches!(kind, Kind::Http) {
        return;
    }
    if matches!(kind, Kind::Tcp) {
        tokio::spawn(async move {
            let mut msg = bytes::BytesMut::new();
            herald_proto::Encoding::Binary.encode_server(
                &herald_proto::ServerMsg::Push(herald_proto::Push::Disconnect {
                    code: DisconnectCode::ConnectionLimit.code(),
                    reason: DisconnectCode::ConnectionLimit.reason().into(),
                }),
                &mut msg,
            );
            let _ = stream.write_all(&(msg.len() as u32).to_be_bytes()).await;
            let _ = stream.write_all(&msg).await;
            linger(stream).await;
        });
        return;
    }
    tokio::spawn(async move {
        let head = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{why}",
            why.len()
        );
        let _ = stream.write_all(head.as_bytes()).await;
        linger(stream).await;
    });
}

/// Once a second: closes connections whose token expired (3002) and those that
/// completed their handshake but did not `connect` within the handshake
/// timeout (3003). Both are queues ordered by deadline: each tick looks at
/// the due entries only, never at every connection.
async fn deadlines(shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        for c in shared.node.expiries.due(herald_core::auth::unix_now()) {
            c.outbox.close(DisconnectCode::TokenExpired.code(), false);
        }
        for c in shared.deadlines.overdue(shared.node.now()) {
            c.outbox.close(DisconnectCode::ConnectTimeout.code(), false);
        }
    }
}

/// Half-closes `stream` and reads whatever the peer still sends (bounded), so
/// that closing does not reset the connection before the peer has read our answer.
pub(crate) async fn linger<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut stream: S) {
    use tokio::io::AsyncReadExt;
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// Asks every client to go away and waits, bounded, for their drivers.
async fn drain(shared: &Shared) {
    let clients = shared.node.client_count();
    tracing::info!(clients, "shutting down: closing connections with 1001");
    shared
        .node
        .for_each_client(|c| c.outbox.close(DisconnectCode::GoingAway.code(), false));
    // Parked connections resume to send their close (and any not yet in the
    // registry see the shutdown as running drivers do).
    if let Some(p) = &shared.parker {
        p.resume_all();
    }
    shared.tracker.close();
    if tokio::time::timeout(shared.config.shutdown_timeout, shared.tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            left = shared.node.client_count(),
            "shutdown timeout: dropping remaining connections"
        );
    }
    if let Some(p) = &shared.parker {
        p.stop();
    }
}

/// Pings clients silent for their share of `ping_interval` and closes those
/// silent for `ping_interval` + `pong_timeout` (3000).
///
/// A client is pinged after between half and all of `ping_interval` of
/// silence, the point set by its id ([`ping_due`]): clients that connected
/// together (a load test, a mass reconnect after a deploy) would otherwise
/// be pinged at the same sweep for as long as they stay connected, and
/// every one of them woken from hibernation at once, its task and I/O
/// registration allocated again together (measured: 1.25 KiB per idle
/// connection at that moment instead of 0.53, bench/RESULTS.md
/// "Hibernation"). The sweep runs every second, so the spread is kept
/// and every silence is seen between the two thresholds: a client gets its
/// ping before it can be closed. (Sweeping once per `ping_interval` closed
/// clients that fell silent just after a sweep without ever pinging them.)
/// A client that answers a ping is not pinged again before its share of
/// the interval has passed in silence once more.
async fn heartbeats(shared: Arc<Shared>, shutdown: CancellationToken) {
    let interval = shared.config.node.ping_interval;
    let timeout = shared.config.pong_timeout.as_secs() as u32;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = shared.node.now();
        shared.node.for_each_client(|c| {
            let silent = now.saturating_sub(c.last_seen());
            if silent >= interval + timeout {
                c.outbox.close(DisconnectCode::NoPong.code(), true);
            } else if silent >= ping_due(interval, c.id) {
                c.outbox.push(Frame::Ping);
            }
        });
        shared.polls.reap(now, timeout.max(1));
    }
}

/// After how many seconds of silence client `id` is pinged: between half of
/// `interval` and all of it, spread over the clients by id (see
/// `heartbeats`).
fn ping_due(interval: u32, id: u64) -> u32 {
    let spread = u64::from(interval / 2).max(1);
    interval - (id % spread) as u32
}

#[cfg(test)]
mod tests {
    use super::ping_due;

    #[test]
    fn pings_are_spread_over_the_second_half_of_the_interval() {
        for interval in [1, 2, 3, 25, 60] {
            let dues: std::collections::BTreeSet<u32> =
                (0..1000).map(|id| ping_due(interval, id)).collect();
            assert!(dues
                .iter()
                .all(|d| *d <= interval && *d * 2 >= interval && *d >= 1));
            // Clients with consecutive ids are pinged at different seconds.
            assert_eq!(
                dues.len() as u32,
                (interval / 2).max(1),
                "{interval}: {dues:?}"
            );
        }
    }
}
