//! The composition root: [`build`] makes every piece of state a server has
//! once, and hands each handler only its slice (the HTTP layer its
//! endpoints' states, each transport its own); then accepting connections,
//! heartbeats and graceful shutdown.
//!
//! Nothing else in the crate imports this module: the handlers never see
//! [`Server`], so the file graph has no circle (scripts/module-cycles.py).
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

use crate::api::Api;
use crate::config::ServerConfig;
use crate::http::{serve_connection, Http};
use crate::limits::{ConnectDeadlines, PerIp};
use crate::metrics::Scrape;
use crate::pusher::api::PusherApi;
use crate::pusher::Apps;
use crate::tables::TablesApi;
use crate::transport::poll::Polls;
use crate::transport::sse::Streams;
use crate::transport::ws::shootout::ShootoutGroup;
use crate::transport::ws::upgrade::Upgrades;
use crate::transport::Drivers;
use herald_core::outbox::Frame;
use herald_core::{Node, Task};
use herald_game_cluster::directory::TableDirectory;
use herald_proto::DisconnectCode;
use herald_redis::RedisBroker;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// One server's state, as the accept loop, heartbeats and shutdown see it.
/// Handlers get their slices from it ([`Http`], [`Drivers`]), never it.
pub struct Server {
    /// The HTTP layer and every endpoint's state.
    pub http: Arc<Http>,
    /// Starting socket drivers (the raw TCP listener uses it directly).
    drivers: Arc<Drivers>,
    /// The node: hub, broker, sessions.
    node: Arc<Node>,
    /// Long-poll sessions (reaped by the heartbeat sweep).
    polls: Arc<Polls>,
    /// Pusher apps (their occupancy counts run beside the server).
    pusher: Arc<Apps>,
    /// Bayeux sessions (reaped every second beside the server).
    bayeux: Arc<crate::bayeux::Bayeux>,
    /// The Redis broker in cluster mode.
    cluster: Option<Arc<herald_redis::RedisBroker>>,
    /// Connections per IP address.
    per_ip: Arc<PerIp>,
    /// The resolved configuration (caps, timeouts, heartbeats, demo).
    config: ServerConfig,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("config", &self.config)
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
    /// A `[[games]]` module could not be loaded.
    #[error("[[games]]: {0}")]
    Module(#[from] herald_script::LoadError),
}

/// Builds every piece of a server's state for `config`, on the current tokio
/// runtime: the node and its broker, the game engine (with `games`, the
/// games it can run tables of, chosen by the binary) and in a cluster its
/// tables, the Pusher apps, the parking place, and each endpoint's slice.
pub fn build(
    config: ServerConfig,
    games: Vec<Arc<dyn herald_game::GameFactory>>,
) -> Result<Arc<Server>, ServerError> {
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(crate::tls::acceptor(cert, key)?),
        _ => None,
    };
    let (scripts, games) = crate::scripts::load(&config.game_modules, games)?;
    let scripts = Arc::new(scripts);
    let (node, cluster) = node(&config)?;
    if config.ws_deflate.enabled {
        // Publication pushes compressed once for every permessage-deflate
        // WebSocket client (`herald_core::Deflater`).
        node.hub.set_deflater(herald_core::Deflater {
            compress: herald_ws::deflate::compress_pieces,
            threshold: config.ws_deflate.threshold,
        });
    }
    let (games, table_directory) = engine(&config, &node, cluster.as_ref(), games)?;
    let pusher = pusher_apps(&config, &node, cluster.is_some());
    let tracker = TaskTracker::new();
    let parker = parker(&config, &tracker);
    let stopping = CancellationToken::new();
    let admin_actions = Arc::new(crate::admin::actions::Actions::default());
    let stats = Arc::new(crate::admin::stats::StatsSource {
        node: node.clone(),
        games: games.clone(),
        listen: config.listen,
        role: config.role.name(),
        clustered: cluster.is_some(),
    });
    let admin = crate::admin::Admin::new(
        config.admin.clone(),
        stats.clone(),
        cluster.clone(),
        TablesApi {
            games: games.clone(),
            cluster: table_directory.clone(),
            request_body_timeout: config.request_body_timeout,
        },
        pusher.clone(),
        tls.is_some(),
        config.max_message_size,
        config.request_body_timeout,
        stopping.clone(),
        admin_actions.clone(),
    );
    let drivers = Arc::new(Drivers {
        node: node.clone(),
        tracker: tracker.clone(),
        parker: parker.clone(),
        deadlines: ConnectDeadlines::default(),
        max_message_size: config.max_message_size,
        handshake_timeout: config.handshake_timeout,
    });
    let polls = Arc::new(Polls::new(
        node.clone(),
        config.poll_timeout,
        config.max_message_size,
        config.request_body_timeout,
    ));
    let mut bayeux = crate::bayeux::Bayeux::new(
        config.bayeux.clone(),
        node.clone(),
        config.max_message_size,
        config.request_body_timeout,
    );
    if let Some(c) = &cluster {
        bayeux = bayeux.with_positions(Arc::new(c.acked_store()));
    }
    let bayeux = Arc::new(bayeux);
    let http = Arc::new(Http {
        node: node.clone(),
        tls,
        handshake_timeout: config.handshake_timeout,
        ping_interval: Duration::from_secs(u64::from(config.node.ping_interval)),
        pong_timeout: config.pong_timeout,
        allowed_origins: config.allowed_origins.clone(),
        api_key: config.api_key.clone(),
        stopping: stopping.clone(),
        tracker: tracker.clone(),
        handshaking: AtomicUsize::new(0),
        upgrades: Upgrades {
            drivers: drivers.clone(),
            shootout: Arc::new(ShootoutGroup::default()),
            pusher: pusher.clone(),
            bayeux: bayeux.clone(),
            shootout_enabled: config.shootout,
            echo_enabled: config.test_echo_route,
            deflate: config.ws_deflate,
        },
        streams: Streams {
            node: node.clone(),
            max_subscriptions: config.node.max_subscriptions,
            handshake_timeout: config.handshake_timeout,
            tracker: tracker.clone(),
        },
        polls: polls.clone(),
        api: Api {
            node: node.clone(),
            cluster: cluster.clone(),
            listen: config.listen,
            max_message_size: config.max_message_size,
            request_body_timeout: config.request_body_timeout,
            stopping,
            stats,
        },
        metrics: Scrape {
            node: node.clone(),
            parker,
            cluster: cluster.clone(),
            games: games.clone(),
            scripts: scripts.clone(),
            admin: admin_actions,
        },
        scripts,
        tables: TablesApi {
            games,
            cluster: table_directory,
            request_body_timeout: config.request_body_timeout,
        },
        pusher: PusherApi {
            apps: pusher.clone(),
            node: node.clone(),
            cluster: cluster.clone(),
        },
        bayeux: bayeux.clone(),
        admin,
    });
    Ok(Arc::new(Server {
        http,
        drivers,
        node,
        polls,
        pusher,
        bayeux,
        cluster,
        per_ip: Arc::new(PerIp::new(config.max_connections_per_ip)),
        config,
    }))
}

/// The node and, in cluster mode, its Redis broker.
fn node(config: &ServerConfig) -> Result<(Arc<Node>, Option<Arc<RedisBroker>>), ServerError> {
    let spawner = Arc::new(|task: Task| {
        tokio::spawn(task);
    });
    Ok(match &config.redis {
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
            cfg.table_save_replicas = config.table_save_replicas;
            cfg.table_save_wait = config.table_save_wait;
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
    })
}

/// The game engine and, in a cluster, the directory of its tables.
type Games = (Arc<herald_game::Engine>, Option<Arc<dyn TableDirectory>>);

/// The game engine with the binary's `games`, and the tables it starts
/// with: created here on one node; in a cluster durable, claimed by the
/// keeper (decision 0009), and reached by `/api/tables` through the
/// returned directory.
fn engine(
    config: &ServerConfig,
    node: &Arc<Node>,
    cluster: Option<&Arc<RedisBroker>>,
    games: Vec<Arc<dyn herald_game::GameFactory>>,
) -> Result<Games, ServerError> {
    let factories = games;
    let games = match cluster {
        // In a cluster, tables (configured, or created over HTTP on any
        // node) are durable and owned by one node at a time (decision
        // 0009): the keeper claims them.
        Some(broker) => herald_game::Engine::with_durability(
            config.games.clone(),
            factories,
            herald_game::durable::Durability {
                store: Arc::new(broker.table_store()),
                lease: config.table_lease,
            },
        ),
        None => herald_game::Engine::new(config.games.clone(), factories),
    };
    let mut table_directory = None;
    match cluster {
        Some(broker) => {
            // The stats the admin dashboard shows (crate::admin::stats),
            // through weak handles: the broker holds this closure.
            let weak = Arc::downgrade(node);
            let engine = Arc::downgrade(&games);
            let listen = config.listen;
            let role = config.role.name();
            broker.set_stats(Box::new(move || match (weak.upgrade(), engine.upgrade()) {
                (Some(node), Some(games)) => crate::admin::stats::StatsSource {
                    node,
                    games,
                    listen,
                    role,
                    clustered: true,
                }
                .stats(),
                _ => serde_json::Value::Null,
            }));
            // Tables owned by one node at a time, routes to their owners
            // from every node, one lobby (decision 0009).
            let directory = herald_game_cluster::start(
                broker,
                &games,
                &config.tables,
                herald_game_cluster::Options {
                    lease: config.table_lease,
                    runs_tables: config.role.runs_tables(),
                    queue_bytes: config.node.client_queue_bytes,
                },
            )?;
            table_directory = Some(directory);
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
    node.set_games(games.clone());
    Ok((games, table_directory))
}

/// The Pusher apps, hooked to the hub when they send webhooks or counts.
fn pusher_apps(config: &ServerConfig, node: &Arc<Node>, cluster: bool) -> Arc<Apps> {
    let pusher = Arc::new(crate::pusher::Apps::new(&config.pusher, cluster));
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
    pusher
}

/// The parking place of idle connections, unless `--hibernate-after 0` (or
/// it cannot start: then connections just stay on the runtime).
fn parker(config: &ServerConfig, tracker: &TaskTracker) -> Option<Arc<crate::hibernate::Parker>> {
    if config.hibernate_after.is_zero() {
        None
    } else {
        match crate::hibernate::Parker::start(config.hibernate_after, tracker.clone()) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!(error = %e, "idle connections cannot hibernate");
                None
            }
        }
    }
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

/// Serves `listeners` until `shutdown` is cancelled, then drains; `games`
/// are the games the server can run tables of (the binary's choice,
/// [`build`]).
pub async fn run(
    listeners: impl Into<Listeners>,
    config: ServerConfig,
    games: Vec<Arc<dyn herald_game::GameFactory>>,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let listeners = listeners.into();
    let mut config = config;
    // The address actually bound (`--listen 127.0.0.1:0`, tests): `/api/nodes`
    // and the cluster's node list show where each node can be reached.
    if let Ok(addr) = listeners.http.local_addr() {
        config.listen = addr;
    }
    let server = build(config, games)?;
    let sweeper = tokio::spawn(heartbeats(server.clone(), shutdown.clone()));
    let demo = tokio::spawn(crate::demo::stream(
        server.node.clone(),
        server.config.demo_rate,
        shutdown.clone(),
    ));
    let deadlines = tokio::spawn(deadlines(server.clone(), shutdown.clone()));
    let housekeeping = tokio::spawn(housekeeping(server.clone(), shutdown.clone()));
    let bayeux = tokio::spawn(crate::bayeux::reaper(
        server.bayeux.clone(),
        shutdown.clone(),
    ));
    let counts = tokio::spawn(crate::pusher::count::run(
        server.pusher.clone(),
        server.node.clone(),
        shutdown.clone(),
    ));
    if let Some(cluster) = &server.cluster {
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
        .map(|l| tokio::spawn(accept_loop(l, Kind::Tcp, server.clone(), shutdown.clone())));
    accept_loop(listeners.http, Kind::Http, server.clone(), shutdown.clone()).await;
    if let Some(t) = tcp {
        let _ = t.await;
    }
    sweeper.abort();
    demo.abort();
    deadlines.abort();
    housekeeping.abort();
    counts.abort();
    bayeux.abort();
    server.http.stopping.cancel();
    drain(&server).await;
    server.bayeux.close_all();
    if let Some(cluster) = &server.cluster {
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
    server: Arc<Server>,
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
        let open = server.node.client_count() + server.http.handshaking.load(Ordering::Relaxed);
        if open >= server.config.max_connections {
            tracing::debug!(%peer, open, "connection refused: connection limit");
            refuse(stream, kind, &server, "too many connections\n");
            continue;
        }
        let Ok(slot) = server.per_ip.acquire(peer.ip()) else {
            tracing::debug!(%peer, "connection refused: per-IP limit");
            refuse(
                stream,
                kind,
                &server,
                "too many connections from your address\n",
            );
            continue;
        };
        match kind {
            Kind::Http => {
                tokio::spawn(serve_connection(stream, server.http.clone(), slot));
            }
            Kind::Tcp => crate::transport::tcp::serve_tcp(stream, &server.drivers, slot),
        }
    }
}

/// Turns a connection away at a connection limit: HTTP 503 (a plaintext
/// answer means nothing to a TLS client, which is just closed), or a
/// `disconnect` push with 3503 on raw TCP.
fn refuse(mut stream: tokio::net::TcpStream, kind: Kind, server: &Server, why: &'static str) {
    server.node.metrics.refused.inc();
    if server.http.tls.is_some() && matches!(kind, Kind::Http) {
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
            crate::http::h1::linger(stream).await;
        });
        return;
    }
    tokio::spawn(async move {
        let head = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{why}",
            why.len()
        );
        let _ = stream.write_all(head.as_bytes()).await;
        crate::http::h1::linger(stream).await;
    });
}

/// Once a second: closes connections whose token expired (3002) and those that
/// completed their handshake but did not `connect` within the handshake
/// timeout (3003). Both are queues ordered by deadline: each tick looks at
/// the due entries only, never at every connection.
async fn deadlines(server: Arc<Server>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        for c in server.node.expiries.due(herald_core::auth::unix_now()) {
            c.outbox.close(DisconnectCode::TokenExpired.code(), false);
        }
        for c in server.drivers.deadlines.overdue(server.node.now()) {
            c.outbox.close(DisconnectCode::ConnectTimeout.code(), false);
        }
    }
}

/// Every [`herald_core::broker::HOUSEKEEPING`]: the broker's housekeeping
/// (the in-memory broker sweeps one shard: expired history and idle
/// channels go even when no traffic comes to sweep them), and the reclaim
/// hook when the node is quiet or a wave of parks is over
/// ([`crate::reclaim`]).
async fn housekeeping(server: Arc<Server>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(herald_core::broker::HOUSEKEEPING);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let activity = || crate::reclaim::activity(&server.node.metrics);
    let mut quiet = crate::reclaim::Quiet::new(activity(), Instant::now());
    let parked = || server.drivers.parker.as_ref().map_or(0, |p| p.parked());
    let mut wave = crate::reclaim::ParkWave::new(parked());
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {
                server.node.broker.housekeep();
                if let Some(r) = &server.config.reclaim {
                    let now = Instant::now();
                    let quiet_due = quiet.tick(activity(), now);
                    if wave.tick(parked(), now) || quiet_due {
                        (r.0)();
                    }
                }
            }
        }
    }
}

/// Asks every client to go away and waits, bounded, for their drivers.
async fn drain(server: &Server) {
    let clients = server.node.client_count();
    tracing::info!(clients, "shutting down: closing connections with 1001");
    server
        .node
        .for_each_client(|c| c.outbox.close(DisconnectCode::GoingAway.code(), false));
    // Parked connections resume to send their close (and any not yet in the
    // registry see the shutdown as running drivers do).
    if let Some(p) = &server.drivers.parker {
        p.resume_all();
    }
    server.drivers.tracker.close();
    if tokio::time::timeout(
        server.config.shutdown_timeout,
        server.drivers.tracker.wait(),
    )
    .await
    .is_err()
    {
        tracing::warn!(
            left = server.node.client_count(),
            "shutdown timeout: dropping remaining connections"
        );
    }
    if let Some(p) = &server.drivers.parker {
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
/// the interval has passed in silence once more. A parked connection is
/// pinged where it is parked, and stays parked ([`crate::hibernate::ping_parked`]).
async fn heartbeats(server: Arc<Server>, shutdown: CancellationToken) {
    let interval = server.config.node.ping_interval;
    let timeout = server.config.pong_timeout.as_secs() as u32;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = server.node.now();
        server.node.for_each_client(|c| {
            let silent = now.saturating_sub(c.last_seen());
            if silent >= interval + timeout {
                c.outbox.close(DisconnectCode::NoPong.code(), true);
            } else if silent >= ping_due(interval, c.id) && !crate::hibernate::ping_parked(c) {
                // Not parked (or its socket is full): queued, which resumes
                // a parked connection.
                c.outbox.push(Frame::Ping);
            }
        });
        server.polls.reap(now, timeout.max(1));
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
