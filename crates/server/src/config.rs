//! `herald serve` options: command line, environment, TOML file, defaults.
//!
//! Every option can be given as a flag (`--max-connections 5000`), as an
//! environment variable (`HERALD_MAX_CONNECTIONS=5000`) or as a key of the TOML
//! file named by `--config` (`max_connections = 5000`); that is also the order
//! of precedence. Every option has a default, stated in its help text, so
//! `herald serve` needs no file at all.

use crate::auth::{self, NamespaceRule, Policy};
use herald_core::{NodeConfig, Retention};
use serde::Deserialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Options of `herald serve`. `None` means "not given here".
#[derive(Debug, Default, Clone, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeArgs {
    /// TOML file with any of these options as keys (e.g. `listen = "127.0.0.1:9000"`),
    /// and the per-namespace permission rules (`[[namespaces]]`, TOML only).
    #[arg(long, env = "HERALD_CONFIG")]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Address to listen on for HTTP and WebSocket [default: 127.0.0.1:8080].
    #[arg(long, env = "HERALD_LISTEN")]
    pub listen: Option<SocketAddr>,

    /// Also serve the raw TCP transport (binary encoding, 4-byte length prefix)
    /// on this address [default: off].
    #[arg(long, env = "HERALD_TCP_LISTEN")]
    pub tcp_listen: Option<SocketAddr>,

    /// PEM certificate chain: serve HTTPS/WSS (h2 and http/1.1 by ALPN) on
    /// `--listen` instead of plain HTTP; needs `--tls-key` [default: off].
    #[arg(long, env = "HERALD_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key for `--tls-cert` [default: off].
    #[arg(long, env = "HERALD_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Runtime worker threads; 0 = one per available core (respects taskset) [default: 0].
    #[arg(long, env = "HERALD_WORKERS")]
    pub workers: Option<usize>,

    /// Largest message a client may send, in bytes; larger ones close the
    /// connection with 1009 [default: 65536].
    #[arg(long, env = "HERALD_MAX_MESSAGE_SIZE")]
    pub max_message_size: Option<usize>,

    /// Bytes one connection's outbound queue may hold; a client that falls this
    /// far behind is disconnected with 3001 (slow consumer) [default: 1048576].
    #[arg(long, env = "HERALD_CLIENT_QUEUE_BYTES")]
    pub client_queue_bytes: Option<usize>,

    /// Most simultaneous connections; further ones get HTTP 503 [default: 100000].
    #[arg(long, env = "HERALD_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,

    /// Most subscriptions per connection [default: 1024].
    #[arg(long, env = "HERALD_MAX_SUBSCRIPTIONS")]
    pub max_subscriptions: Option<usize>,

    /// Publications retained per channel for history and recovery; 0 turns
    /// both off. 100 lets a client that was away for a reconnect (a few
    /// seconds) recover even on a channel publishing tens of messages a
    /// second. Memory: about 50 bytes plus the payload per retained
    /// publication, so at most ~6 KB + 100 payloads per channel that published
    /// within --history-ttl; channels with neither subscribers nor retained
    /// history are freed [default: 100].
    #[arg(long, env = "HERALD_HISTORY_SIZE")]
    pub history_size: Option<usize>,

    /// Seconds a publication stays in history; 0 = no time limit (then only
    /// --history-size bounds it, and a channel once published to keeps its
    /// history for good). 300 outlasts a network switch, a tunnel or a short
    /// laptop sleep, and lets quiet channels' history, then their state, be
    /// freed (expiry is checked lazily when a channel is used and by an
    /// incremental sweep driven by publications) [default: 300].
    #[arg(long, env = "HERALD_HISTORY_TTL")]
    pub history_ttl: Option<u64>,

    /// Seconds of client silence after which the server pings it [default: 25].
    #[arg(long, env = "HERALD_PING_INTERVAL")]
    pub ping_interval: Option<u32>,

    /// Further seconds without any answer after which the connection is closed
    /// with 3000 (no pong) [default: 10].
    #[arg(long, env = "HERALD_PONG_TIMEOUT")]
    pub pong_timeout: Option<u32>,

    /// Milliseconds after which an idle plain-TCP WebSocket or raw TCP
    /// connection (nothing queued, nothing being read or written) hibernates:
    /// its driver task ends and its socket waits in one shared epoll set
    /// until it is readable or something is sent to it (its first message
    /// then waits for it to resume: under a millisecond). An idle connection
    /// costs about 0.33 KiB hibernated instead of 0.9–1.0 KiB; 0 = never
    /// [default: 2000].
    #[arg(long, env = "HERALD_HIBERNATE_AFTER")]
    pub hibernate_after: Option<u64>,

    /// Seconds a long-poll request waits for messages before answering `[]`
    /// [default: 25].
    #[arg(long, env = "HERALD_POLL_TIMEOUT")]
    pub poll_timeout: Option<u64>,

    /// Seconds a new connection has to send its HTTP request head (else HTTP
    /// 408), and then, on WebSocket and raw TCP, its `connect` (else close
    /// 3003). On a kept-alive HTTP/1.1 connection each later request head has
    /// as long, counted from the previous response, so an idle keep-alive
    /// connection is closed after it too [default: 10].
    #[arg(long, env = "HERALD_HANDSHAKE_TIMEOUT")]
    pub handshake_timeout: Option<u64>,

    /// Seconds an HTTP request body (`POST /api/*`, `POST /poll/<id>`) has to
    /// arrive in full once its head is read; a slower one (a trickled body,
    /// a `Content-Length` larger than what is sent) is answered 408 and its
    /// connection closed. 10 s carries the largest body (a 64 KiB message)
    /// at under 7 KB/s [default: 10].
    #[arg(long, env = "HERALD_REQUEST_BODY_TIMEOUT")]
    pub request_body_timeout: Option<u64>,

    /// Seconds to drain connections on SIGINT/SIGTERM before exiting [default: 10].
    #[arg(long, env = "HERALD_SHUTDOWN_TIMEOUT")]
    pub shutdown_timeout: Option<u64>,

    /// Log format: `text` or `json` [default: text].
    #[arg(long, env = "HERALD_LOG_FORMAT")]
    pub log_format: Option<String>,

    /// Where channels, history and presence live: `memory` (this process
    /// only) or `redis://[:PASSWORD@]HOST:PORT[/DB]` (cluster mode: every
    /// node given the same Redis shares channels, history, recovery
    /// positions and presence); a URL with a password is better given by
    /// the environment or the TOML file, since command lines are visible to
    /// other local users [default: memory].
    #[arg(long, env = "HERALD_BROKER", hide_env_values = true)]
    pub broker: Option<String>,

    /// Prefix of every Redis key and topic, so that several clusters can
    /// share one Redis [default: herald].
    #[arg(long, env = "HERALD_REDIS_PREFIX")]
    pub redis_prefix: Option<String>,

    /// Publish this many synthetic rows a second (seed 002's car-sharing
    /// stream) to `demo.stream`, for the demo page at `/`; at most 10000;
    /// 0 = off [default: 0].
    #[arg(long, env = "HERALD_DEMO_RATE")]
    pub demo_rate: Option<u32>,
    /// HS256 secret (at least 32 bytes) that connection and subscribe tokens
    /// are signed with; prefer the environment or the TOML file, since
    /// command lines are visible to other local users [default: none].
    #[arg(long, env = "HERALD_TOKEN_HMAC_SECRET", hide_env_values = true)]
    pub token_hmac_secret: Option<String>,

    /// PEM public key (RSA for RS256, EC P-256 for ES256) that tokens are
    /// signed with [default: none].
    #[arg(long, env = "HERALD_TOKEN_PUBLIC_KEY")]
    pub token_public_key: Option<PathBuf>,

    /// JWKS file (RFC 7517) with the RSA/EC P-256 keys tokens are signed
    /// with; a token's `kid` picks the key [default: none].
    #[arg(long, env = "HERALD_TOKEN_JWKS_FILE")]
    pub token_jwks_file: Option<PathBuf>,

    /// Let clients connect without a token [default: true when no token key
    /// is configured, else false].
    #[arg(long, env = "HERALD_ALLOW_ANONYMOUS")]
    pub allow_anonymous: Option<bool>,

    /// Key the HTTP API (`/api/*`) requires as `Authorization: apikey KEY`;
    /// prefer the environment or the TOML file [default: none: the API is
    /// open to whoever reaches the listener].
    #[arg(long, env = "HERALD_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// Listen on a non-loopback address without a token key and an API key
    /// (anyone who reaches it may connect and publish) [default: false].
    #[arg(long, env = "HERALD_INSECURE", num_args = 0..=1, default_missing_value = "true")]
    pub insecure: Option<bool>,

    /// Origins (e.g. `https://app.example.com`) allowed to open WebSocket, SSE
    /// and long-poll connections from a browser; others get HTTP 403. Requests
    /// without an `Origin` header (non-browser clients) are not affected
    /// [default: any origin].
    #[arg(long, env = "HERALD_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Option<Vec<String>>,

    /// Most simultaneous connections from one IP address; further ones get
    /// HTTP 503 (raw TCP: disconnect 3503); 0 = no limit. Off by default
    /// because a NATed office or a load generator is one address; set it when
    /// exposed [default: 0].
    #[arg(long, env = "HERALD_MAX_CONNECTIONS_PER_IP")]
    pub max_connections_per_ip: Option<usize>,

    /// Messages per second one connection may send (token bucket); further
    /// ones are answered with error 108 and dropped; 0 = no limit
    /// [default: 10000].
    #[arg(long, env = "HERALD_RATE_LIMIT")]
    pub rate_limit: Option<u32>,

    /// Messages a connection may send at once above the rate (bucket size)
    /// [default: 20000].
    #[arg(long, env = "HERALD_RATE_BURST")]
    pub rate_burst: Option<u32>,

    /// Per-namespace rules; TOML only (`[[namespaces]]` tables with `name`
    /// (the part of channel names before the first `:`, `""` for names
    /// without one); `subscribe`, `publish`, `presence`, `history`, each one
    /// of `any`, `user`, `grant`, `none`; and `history_size`, `history_ttl`
    /// overriding the server-wide retention for that namespace's channels)
    /// [default: none: everything `any`, the server-wide retention].
    #[arg(skip)]
    #[serde(default)]
    pub namespaces: Vec<NamespaceRule>,

    /// Seconds a player who lost their connection keeps their seat at a game
    /// table; the game's timers act for them meanwhile [default: 60].
    #[arg(long, env = "HERALD_GAME_GRACE")]
    pub game_grace: Option<u64>,

    /// Milliseconds over which lobby changes are coalesced: at most one
    /// delta per table per interval reaches lobby subscribers [default: 250].
    #[arg(long, env = "HERALD_LOBBY_INTERVAL")]
    pub lobby_interval: Option<u64>,

    /// Milliseconds a game table's lease lasts in a cluster (`--broker
    /// redis://…`): a dead node's tables are taken over by another node this
    /// long after its last renewal; renewed every third of it (decision
    /// 0009) [default: 3000].
    #[arg(long, env = "HERALD_TABLE_LEASE")]
    pub table_lease: Option<u64>,

    /// What this node does in a cluster (decision 0009): `all` (holds
    /// client connections and runs game tables), `edge` (holds connections
    /// and serves the lobby; never runs a table: players' commands go to
    /// the table's owner) or `game` (runs tables; clients may still
    /// connect). `edge` and `game` need `--broker redis://…` [default: all].
    #[arg(long, env = "HERALD_ROLE")]
    pub role: Option<String>,

    /// Game tables created at start-up; TOML only (`[[tables]]` with `game`
    /// (e.g. `"holdem"`), `seats`, optional `count` (default 1), `timing`
    /// (default `"normal"`), `path` (lobby path, default
    /// `GAME/SEATS-seat/TIMING`), and any parameter of the game, e.g.
    /// `small_blind`, `big_blind`, `buy_in`) [default: none].
    #[arg(skip)]
    #[serde(default)]
    pub tables: Vec<TableConfig>,

    /// Test only, hidden from `--help`: also serve `/echo`, a WebSocket
    /// endpoint that sends every message back unchanged (text as text,
    /// binary as binary) over the same handshake and connection driver as
    /// `/ws`, for conformance tools (Autobahn|Testsuite, see
    /// `tests/outside/autobahn.test.sh`). It has no auth, so it is never on
    /// unless asked for; flag only, not read from the environment or the TOML
    /// file [default: false].
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    #[serde(skip)]
    pub test_echo_route: Option<bool>,
    /// The Pusher Channels endpoint (`/app/{key}`, `/apps/{id}/...`); TOML
    /// only (`[pusher]` with `activity_timeout`, `client_event_rate`,
    /// `max_event_size`, and `[[pusher.apps]]` tables with `id`, `key`, one
    /// of `secret_env` (an environment variable's name), `secret_file` or
    /// `secret`, `namespace` (default `pusher-<id>`) and `webhook_url`)
    /// [default: none: the endpoint answers 4001 to every key].
    #[arg(skip)]
    #[serde(default)]
    pub pusher: Option<crate::pusher::PusherArgs>,
}

/// One `[[tables]]` entry of the TOML file: `count` tables alike.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TableConfig {
    /// The game's name.
    pub game: String,
    /// How many such tables (default 1).
    #[serde(default = "one")]
    pub count: u32,
    /// Seats per table.
    pub seats: u32,
    /// Timing profile (default `normal`).
    #[serde(default = "normal")]
    pub timing: String,
    /// Lobby path (default `GAME/SEATS-seat/TIMING`).
    #[serde(default)]
    pub path: Option<String>,
    /// Every other key, for the game.
    #[serde(flatten)]
    pub params: serde_json::Map<String, serde_json::Value>,
}

fn one() -> u32 {
    1
}

fn normal() -> String {
    "normal".into()
}

impl TableConfig {
    /// The engine's spec for one of these tables.
    pub fn spec(&self) -> herald_game::TableSpec {
        herald_game::TableSpec {
            game: self.game.clone(),
            seats: self.seats,
            timing: self.timing.clone(),
            path: self.path.clone(),
            params: self.params.clone(),
        }
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file named by `--config` could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    #[error("invalid config file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: Box<toml::de::Error>,
    },
    /// A value is out of range.
    #[error("invalid option {0}")]
    Invalid(String),
}

/// The resolved configuration the server runs with.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Listen address.
    pub listen: SocketAddr,
    /// Raw TCP listen address, if any.
    pub tcp_listen: Option<SocketAddr>,
    /// TLS certificate chain (PEM), if TLS is on.
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM), if TLS is on.
    pub tls_key: Option<PathBuf>,
    /// Worker threads (0 = per core).
    pub workers: usize,
    /// Largest incoming message.
    pub max_message_size: usize,
    /// Most simultaneous connections.
    pub max_connections: usize,
    /// Time to pong before the connection is closed.
    pub pong_timeout: Duration,
    /// Time to send the HTTP request head (each one, on keep-alive).
    pub handshake_timeout: Duration,
    /// Time to send an HTTP request body once its head is read.
    pub request_body_timeout: Duration,
    /// Time a long poll waits.
    pub poll_timeout: Duration,
    /// Idle time after which a plain WebSocket or TCP connection hibernates
    /// (zero: never).
    pub hibernate_after: Duration,
    /// Time to drain on shutdown.
    pub shutdown_timeout: Duration,
    /// `text` or `json`.
    pub log_format: String,
    /// Synthetic rows per second for the demo page (0 = off).
    pub demo_rate: u32,
    /// The Redis URL in cluster mode (`None`: the in-memory broker).
    pub redis: Option<String>,
    /// Prefix of Redis keys and topics.
    pub redis_prefix: String,
    /// Key the HTTP API requires, if any.
    pub api_key: Option<Secret>,
    /// Browser origins allowed (empty: any).
    pub allowed_origins: Vec<String>,
    /// Most connections per IP (0: no limit).
    pub max_connections_per_ip: usize,
    /// Whether auth is configured, for the start-up message.
    pub auth_summary: String,
    /// Whether `/shootout` (a benchmark protocol without auth) is served:
    /// only while anonymous clients are allowed.
    pub shootout: bool,
    /// Whether the test-only `/echo` WebSocket endpoint is served
    /// (`--test-echo-route`, hidden; default false).
    pub test_echo_route: bool,
    /// Session settings.
    pub node: NodeConfig,
    /// Game engine settings.
    pub games: herald_game::EngineConfig,
    /// Tables created at start-up.
    pub tables: Vec<TableConfig>,
    /// A game table's lease in a cluster (`--table-lease`, default 3 s).
    pub table_lease: Duration,
    /// This node's role in a cluster (`--role`, default `all`).
    pub role: Role,
    /// Pusher apps and settings (no apps: the endpoint refuses every key).
    pub pusher: crate::pusher::PusherConfig,
}

/// A secret that never appears in `Debug` output (logs, panics).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Builds the token verifier and policy from the options.
fn policy(a: &ServeArgs) -> Result<Policy, ConfigError> {
    let mut keys = Vec::new();
    if let Some(path) = &a.token_public_key {
        let text = read(path)?;
        let key = auth::keys::public_key_pem(&text).map_err(|e| {
            ConfigError::Invalid(format!("token_public_key {}: {e}", path.display()))
        })?;
        keys.push(auth::keys::Jwk { kid: None, key });
    }
    if let Some(path) = &a.token_jwks_file {
        let text = read(path)?;
        keys.extend(auth::keys::jwks(&text).map_err(|e| {
            ConfigError::Invalid(format!("token_jwks_file {}: {e}", path.display()))
        })?);
    }
    if let Some(secret) = &a.token_hmac_secret {
        if secret.len() < 32 {
            return Err(ConfigError::Invalid(
                "token_hmac_secret must be at least 32 bytes (RFC 7518 §3.2)".into(),
            ));
        }
    }
    let verifier =
        auth::jwt::Verifier::new(a.token_hmac_secret.as_deref().map(str::as_bytes), keys);
    let mut seen = std::collections::HashSet::new();
    for r in &a.namespaces {
        if !seen.insert(r.name.as_str()) {
            return Err(ConfigError::Invalid(format!(
                "namespace {:?} is listed twice",
                r.name
            )));
        }
    }
    Ok(Policy::new(verifier, a.allow_anonymous, &a.namespaces))
}

fn read(path: &std::path::Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig::resolve(ServeArgs::default()).unwrap_or_else(|_| unreachable!())
    }
}

impl ServerConfig {
    /// Loads the file named in `args` (if any) and resolves every option.
    pub fn load(args: ServeArgs) -> Result<ServerConfig, ConfigError> {
        let Some(path) = args.config.clone() else {
            return ServerConfig::resolve(args);
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let file: ServeArgs = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.clone(),
            source: Box::new(e),
        })?;
        ServerConfig::resolve(args.or(file))
    }

    /// Applies defaults to whatever was not given.
    pub fn resolve(a: ServeArgs) -> Result<ServerConfig, ConfigError> {
        let d = NodeConfig::default();
        let log_format = a.log_format.clone().unwrap_or_else(|| "text".into());
        if log_format != "text" && log_format != "json" {
            return Err(ConfigError::Invalid(format!(
                "log_format = {log_format:?} (expected text or json)"
            )));
        }
        if a.tls_cert.is_some() != a.tls_key.is_some() {
            return Err(ConfigError::Invalid(
                "tls_cert and tls_key go together".into(),
            ));
        }
        let ping_interval = a.ping_interval.unwrap_or(d.ping_interval);
        if ping_interval == 0 {
            return Err(ConfigError::Invalid("ping_interval must be > 0".into()));
        }
        if a.handshake_timeout == Some(0) || a.request_body_timeout == Some(0) {
            return Err(ConfigError::Invalid(
                "handshake_timeout and request_body_timeout must be > 0".into(),
            ));
        }
        let demo_rate = a.demo_rate.unwrap_or(0);
        if demo_rate > 10_000 {
            return Err(ConfigError::Invalid(format!(
                "demo_rate = {demo_rate} (at most 10000)"
            )));
        }
        let redis = match a.broker.as_deref().map(str::trim) {
            None | Some("") | Some("memory") => None,
            Some(url) if url.starts_with("redis://") => Some(url.to_string()),
            Some(other) => {
                return Err(ConfigError::Invalid(format!(
                    "broker = {other:?}: expected `memory` or a redis://HOST:PORT URL"
                )))
            }
        };
        let redis_prefix = a.redis_prefix.clone().unwrap_or_else(|| "herald".into());
        if redis_prefix.is_empty() || redis_prefix.contains(['{', '}', ' ']) {
            return Err(ConfigError::Invalid(format!(
                "redis_prefix = {redis_prefix:?}: must be non-empty, without spaces or braces"
            )));
        }
        let pusher = crate::pusher::PusherConfig::resolve(a.pusher.as_ref())?;
        let policy = policy(&a)?
            .with_pusher_namespaces(pusher.apps.iter().map(|p| p.namespace.clone()).collect());
        let games = games_config(&a)?;
        let table_lease = Duration::from_millis(a.table_lease.unwrap_or(3_000));
        if table_lease < Duration::from_millis(100) || table_lease > Duration::from_secs(600) {
            return Err(ConfigError::Invalid(
                "table_lease must be 100 to 600000 ms".into(),
            ));
        }
        let role = match a.role.as_deref().map(str::trim) {
            None | Some("" | "all") => Role::All,
            Some("edge") => Role::Edge,
            Some("game") => Role::Game,
            Some(other) => {
                return Err(ConfigError::Invalid(format!(
                    "role = {other:?}: expected `all`, `edge` or `game`"
                )))
            }
        };
        if role != Role::All && redis.is_none() {
            return Err(ConfigError::Invalid(format!(
                "role = {:?} needs a cluster: give --broker redis://HOST:PORT \
                 (a single node always has role `all`)",
                role.name()
            )));
        }
        let listen = a
            .listen
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
        let exposed: Vec<SocketAddr> = [Some(listen), a.tcp_listen]
            .into_iter()
            .flatten()
            .filter(|addr| !addr.ip().is_loopback())
            .collect();
        let api_key = a.api_key.filter(|k| !k.is_empty()).map(Secret);
        if !exposed.is_empty() && !a.insecure.unwrap_or(false) {
            let mut missing = Vec::new();
            if !policy.has_keys() {
                missing
                    .push("a token key (token_hmac_secret, token_public_key or token_jwks_file)");
            }
            if api_key.is_none() {
                missing.push("an api_key");
            }
            if !missing.is_empty() {
                return Err(ConfigError::Invalid(format!(
                    "refusing to listen on non-loopback {} without {}: anyone reaching it could \
                     connect and publish. Configure them, or pass --insecure (HERALD_INSECURE=true) \
                     to accept that",
                    exposed
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    missing.join(" and ")
                )));
            }
        }
        let shootout = policy.allows_anonymous();
        let auth_summary = format!(
            "{}; HTTP API {}",
            herald_core::Authenticator::describe(&policy),
            if api_key.is_some() {
                "requires its API key"
            } else {
                "OPEN (no api_key)"
            }
        );
        Ok(ServerConfig {
            listen,
            tcp_listen: a.tcp_listen,
            tls_cert: a.tls_cert,
            tls_key: a.tls_key,
            workers: a.workers.unwrap_or(0),
            max_message_size: a.max_message_size.unwrap_or(65536),
            max_connections: a.max_connections.unwrap_or(100_000),
            pong_timeout: Duration::from_secs(u64::from(a.pong_timeout.unwrap_or(10))),
            handshake_timeout: Duration::from_secs(a.handshake_timeout.unwrap_or(10)),
            request_body_timeout: Duration::from_secs(a.request_body_timeout.unwrap_or(10)),
            poll_timeout: a
                .poll_timeout
                .map_or(crate::poll::DEFAULT_TIMEOUT, Duration::from_secs),
            shutdown_timeout: Duration::from_secs(a.shutdown_timeout.unwrap_or(10)),
            hibernate_after: Duration::from_millis(a.hibernate_after.unwrap_or(2000)),
            log_format,
            demo_rate,
            redis,
            redis_prefix,
            api_key,
            allowed_origins: a
                .allowed_origins
                .unwrap_or_default()
                .into_iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .filter(|o| !o.is_empty())
                .collect(),
            max_connections_per_ip: a.max_connections_per_ip.unwrap_or(0),
            auth_summary,
            shootout,
            test_echo_route: a.test_echo_route.unwrap_or(false),
            node: NodeConfig {
                max_subscriptions: a.max_subscriptions.unwrap_or(d.max_subscriptions),
                history_size: a.history_size.unwrap_or(d.history_size),
                history_ttl: a.history_ttl.map_or(d.history_ttl, Duration::from_secs),
                history_by_namespace: history_by_namespace(
                    &a.namespaces,
                    a.history_size.unwrap_or(d.history_size),
                    a.history_ttl.map_or(d.history_ttl, Duration::from_secs),
                ),
                client_queue_bytes: a.client_queue_bytes.unwrap_or(d.client_queue_bytes),
                ping_interval,
                version: d.version,
                auth: Arc::new(policy),
                rate_limit: a.rate_limit.unwrap_or(d.rate_limit),
                rate_burst: a.rate_burst.unwrap_or(d.rate_burst),
                client_id_base: d.client_id_base,
            },
            games,
            tables: a.tables,
            table_lease,
            role,
            pusher,
        })
    }
}

/// What a node does in a cluster (`--role`, decision 0009).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// Client connections, the lobby and game tables.
    #[default]
    All,
    /// Client connections and the lobby; never runs a table.
    Edge,
    /// Runs game tables (clients may still connect).
    Game,
}

impl Role {
    /// Its name, as in `--role` and `/api/nodes`.
    pub fn name(self) -> &'static str {
        match self {
            Role::All => "all",
            Role::Edge => "edge",
            Role::Game => "game",
        }
    }

    /// Whether this node claims and runs cluster tables.
    pub fn runs_tables(self) -> bool {
        self != Role::Edge
    }
}

impl ServeArgs {
    /// Each option from `self` if given, else from `other`.
    fn or(self, other: ServeArgs) -> ServeArgs {
        ServeArgs {
            config: self.config,
            listen: self.listen.or(other.listen),
            tcp_listen: self.tcp_listen.or(other.tcp_listen),
            tls_cert: self.tls_cert.or(other.tls_cert),
            tls_key: self.tls_key.or(other.tls_key),
            workers: self.workers.or(other.workers),
            max_message_size: self.max_message_size.or(other.max_message_size),
            client_queue_bytes: self.client_queue_bytes.or(other.client_queue_bytes),
            max_connections: self.max_connections.or(other.max_connections),
            max_subscriptions: self.max_subscriptions.or(other.max_subscriptions),
            history_size: self.history_size.or(other.history_size),
            history_ttl: self.history_ttl.or(other.history_ttl),
            ping_interval: self.ping_interval.or(other.ping_interval),
            pong_timeout: self.pong_timeout.or(other.pong_timeout),
            handshake_timeout: self.handshake_timeout.or(other.handshake_timeout),
            request_body_timeout: self.request_body_timeout.or(other.request_body_timeout),
            poll_timeout: self.poll_timeout.or(other.poll_timeout),
            hibernate_after: self.hibernate_after.or(other.hibernate_after),
            shutdown_timeout: self.shutdown_timeout.or(other.shutdown_timeout),
            log_format: self.log_format.or(other.log_format),
            demo_rate: self.demo_rate.or(other.demo_rate),
            broker: self.broker.or(other.broker),
            redis_prefix: self.redis_prefix.or(other.redis_prefix),
            token_hmac_secret: self.token_hmac_secret.or(other.token_hmac_secret),
            token_public_key: self.token_public_key.or(other.token_public_key),
            token_jwks_file: self.token_jwks_file.or(other.token_jwks_file),
            allow_anonymous: self.allow_anonymous.or(other.allow_anonymous),
            api_key: self.api_key.or(other.api_key),
            insecure: self.insecure.or(other.insecure),
            allowed_origins: self.allowed_origins.or(other.allowed_origins),
            max_connections_per_ip: self.max_connections_per_ip.or(other.max_connections_per_ip),
            rate_limit: self.rate_limit.or(other.rate_limit),
            rate_burst: self.rate_burst.or(other.rate_burst),
            namespaces: if self.namespaces.is_empty() {
                other.namespaces
            } else {
                self.namespaces
            },
            game_grace: self.game_grace.or(other.game_grace),
            lobby_interval: self.lobby_interval.or(other.lobby_interval),
            table_lease: self.table_lease.or(other.table_lease),
            role: self.role.or(other.role),
            tables: if self.tables.is_empty() {
                other.tables
            } else {
                self.tables
            },
            test_echo_route: self.test_echo_route.or(other.test_echo_route),
            pusher: self.pusher.or(other.pusher),
        }
    }
}

fn games_config(a: &ServeArgs) -> Result<herald_game::EngineConfig, ConfigError> {
    let d = herald_game::EngineConfig::default();
    let lobby_interval = a
        .lobby_interval
        .map_or(d.lobby_interval, Duration::from_millis);
    if lobby_interval.is_zero() || lobby_interval > Duration::from_secs(60) {
        return Err(ConfigError::Invalid(
            "lobby_interval must be 1 to 60000 ms".into(),
        ));
    }
    for t in &a.tables {
        if t.count == 0 || t.count > 100_000 {
            return Err(ConfigError::Invalid(format!(
                "[[tables]] count = {} (1 to 100000)",
                t.count
            )));
        }
    }
    Ok(herald_game::EngineConfig {
        grace: a.game_grace.map_or(d.grace, Duration::from_secs),
        lobby_interval,
        ..d
    })
}

/// The retention of each namespace that sets `history_size` or `history_ttl`,
/// the unset one taken from the server-wide default.
fn history_by_namespace(
    rules: &[NamespaceRule],
    size: usize,
    ttl: Duration,
) -> HashMap<String, Retention> {
    rules
        .iter()
        .filter(|r| r.history_size.is_some() || r.history_ttl.is_some())
        .map(|r| {
            let retention = Retention {
                size: r.history_size.unwrap_or(size),
                ttl: r.history_ttl.map_or(ttl, Duration::from_secs),
            };
            (r.name.clone(), retention)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_fills_gaps_and_flags_win() {
        let dir = std::env::temp_dir().join(format!("herald-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("herald.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:9999\"\nhistory_size = 7\nhistory_ttl = 60\n",
        )
        .unwrap();
        let args = ServeArgs {
            config: Some(path.clone()),
            history_size: Some(3),
            ..ServeArgs::default()
        };
        let c = ServerConfig::load(args).unwrap();
        assert_eq!(c.listen.port(), 9999);
        assert_eq!(c.node.history_size, 3);
        assert_eq!(c.node.history_ttl, Duration::from_secs(60));
        assert_eq!(c.max_message_size, 65536);

        std::fs::write(&path, "no_such_option = 1\n").unwrap();
        let err = ServerConfig::load(ServeArgs {
            config: Some(path),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("no_such_option"), "{err}");
    }

    #[test]
    fn a_role_other_than_all_needs_a_cluster() {
        let role = |role: &str, broker: Option<&str>| {
            ServerConfig::resolve(ServeArgs {
                role: Some(role.into()),
                broker: broker.map(str::to_string),
                ..ServeArgs::default()
            })
        };
        assert_eq!(role("all", None).unwrap().role, Role::All);
        for r in ["edge", "game"] {
            let err = role(r, None).unwrap_err().to_string();
            assert!(err.contains("needs a cluster"), "{err}");
            let c = role(r, Some("redis://127.0.0.1:6379")).unwrap();
            assert_eq!(c.role.name(), r);
        }
        let err = role("lobby", Some("redis://127.0.0.1:6379"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected `all`, `edge` or `game`"), "{err}");
        assert_eq!(
            ServerConfig::resolve(ServeArgs::default()).unwrap().role,
            Role::All
        );
    }

    #[test]
    fn the_broker_comes_from_the_toml_file_too() {
        let dir = std::env::temp_dir().join(format!("herald-broker-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("herald.toml");
        std::fs::write(
            &path,
            "broker = \"redis://127.0.0.1:6390/2\"\nredis_prefix = \"blue\"\n",
        )
        .unwrap();
        let c = ServerConfig::load(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(c.redis.as_deref(), Some("redis://127.0.0.1:6390/2"));
        assert_eq!(c.redis_prefix, "blue");
        assert_eq!(ServerConfig::default().redis, None, "memory by default");
        for (bad, why) in [("nats://x:1", "expected `memory`"), ("", "")] {
            std::fs::write(&path, format!("broker = \"{bad}\"\n")).unwrap();
            let r = ServerConfig::load(ServeArgs {
                config: Some(path.clone()),
                ..ServeArgs::default()
            });
            match why {
                "" => assert_eq!(r.unwrap().redis, None, "empty means memory"),
                why => assert!(r.unwrap_err().to_string().contains(why)),
            }
        }
        std::fs::write(&path, "redis_prefix = \"a{b}\"\n").unwrap();
        assert!(ServerConfig::load(ServeArgs {
            config: Some(path),
            ..ServeArgs::default()
        })
        .is_err());
    }

    #[test]
    fn history_is_on_by_default() {
        let c = ServerConfig::default();
        assert_eq!(c.node.history_size, 100);
        assert_eq!(c.node.history_ttl, Duration::from_secs(300));
    }

    #[test]
    fn non_loopback_needs_secrets_or_insecure() {
        let public = Some(SocketAddr::from(([0, 0, 0, 0], 8080)));
        let e = ServerConfig::resolve(ServeArgs {
            listen: public,
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("--insecure"), "{e}");
        let only_key = ServerConfig::resolve(ServeArgs {
            listen: public,
            token_hmac_secret: Some("x".repeat(32)),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(only_key.to_string().contains("api_key"), "{only_key}");
        let tcp = ServerConfig::resolve(ServeArgs {
            tcp_listen: public,
            ..ServeArgs::default()
        });
        assert!(tcp.is_err(), "the raw TCP listener counts too");
        assert!(ServerConfig::resolve(ServeArgs {
            listen: public,
            insecure: Some(true),
            ..ServeArgs::default()
        })
        .is_ok());
        let c = ServerConfig::resolve(ServeArgs {
            listen: public,
            token_hmac_secret: Some("x".repeat(32)),
            api_key: Some("k".into()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert!(
            c.auth_summary.contains("anonymous clients refused"),
            "{}",
            c.auth_summary
        );
        // Loopback needs nothing, and says anonymous clients are allowed.
        let d = ServerConfig::default();
        assert!(d.auth_summary.contains("ALLOWED"), "{}", d.auth_summary);
        assert!(!format!("{c:?}").contains("kkk"));
    }

    #[test]
    fn short_hmac_secrets_and_bad_keys_are_refused() {
        assert!(ServerConfig::resolve(ServeArgs {
            token_hmac_secret: Some("short".into()),
            ..ServeArgs::default()
        })
        .is_err());
        let dir = std::env::temp_dir().join(format!("herald-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.pem");
        std::fs::write(&bad, "not a key").unwrap();
        assert!(ServerConfig::resolve(ServeArgs {
            token_public_key: Some(bad.clone()),
            ..ServeArgs::default()
        })
        .is_err());
        assert!(ServerConfig::resolve(ServeArgs {
            token_jwks_file: Some(bad),
            ..ServeArgs::default()
        })
        .is_err());
    }

    #[test]
    fn game_tables_and_settings_from_toml() {
        let dir = std::env::temp_dir().join(format!("herald-tables-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("herald.toml");
        std::fs::write(
            &path,
            "game_grace = 5\nlobby_interval = 100\n\n\
             [[tables]]\ngame = \"holdem\"\ncount = 3\nseats = 10\ntiming = \"express\"\nbig_blind = 20\n\n\
             [[tables]]\ngame = \"holdem\"\nseats = 2\npath = \"heads-up\"\n",
        )
        .unwrap();
        let c = ServerConfig::load(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(c.games.grace, Duration::from_secs(5));
        assert_eq!(c.games.lobby_interval, Duration::from_millis(100));
        assert_eq!(c.tables.len(), 2);
        let spec = c.tables[0].spec();
        assert_eq!((c.tables[0].count, spec.seats), (3, 10));
        assert_eq!(spec.timing, "express");
        assert_eq!(spec.params["big_blind"], serde_json::json!(20));
        assert!(!spec.params.contains_key("count"));
        assert_eq!(c.tables[1].count, 1);
        assert_eq!(c.tables[1].timing, "normal");
        assert_eq!(c.tables[1].path.as_deref(), Some("heads-up"));
        for bad in [
            "[[tables]]\ngame = \"holdem\"\ncount = 0\nseats = 2\n",
            "[[tables]]\ngame = \"holdem\"\n",
            "lobby_interval = 0\n",
        ] {
            std::fs::write(&path, bad).unwrap();
            assert!(
                ServerConfig::load(ServeArgs {
                    config: Some(path.clone()),
                    ..ServeArgs::default()
                })
                .is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn namespaces_from_toml() {
        let dir = std::env::temp_dir().join(format!("herald-ns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("herald.toml");
        std::fs::write(
            &path,
            "[[namespaces]]\nname = \"private\"\nsubscribe = \"grant\"\n\n[[namespaces]]\nname = \"\"\npublish = \"user\"\n",
        )
        .unwrap();
        let c = ServerConfig::load(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert!(
            c.auth_summary.contains("1 namespace rule"),
            "{}",
            c.auth_summary
        );
        std::fs::write(
            &path,
            "[[namespaces]]\nname = \"x\"\nsubscribe = \"everyone\"\n",
        )
        .unwrap();
        assert!(ServerConfig::load(ServeArgs {
            config: Some(path),
            ..ServeArgs::default()
        })
        .is_err());
    }

    #[test]
    fn history_retention_per_namespace_from_toml() {
        let dir = std::env::temp_dir().join(format!("herald-hist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("herald.toml");
        std::fs::write(
            &path,
            "history_size = 50\nhistory_ttl = 60\n\n\
             [[namespaces]]\nname = \"chat\"\nhistory_size = 1000\n\n\
             [[namespaces]]\nname = \"ticks\"\nhistory_ttl = 5\n\n\
             [[namespaces]]\nname = \"private\"\nsubscribe = \"grant\"\n",
        )
        .unwrap();
        let c = ServerConfig::load(ServeArgs {
            config: Some(path),
            ..ServeArgs::default()
        })
        .unwrap();
        let keep = |size, secs| Retention {
            size,
            ttl: Duration::from_secs(secs),
        };
        assert_eq!(c.node.history_size, 50);
        assert_eq!(
            c.node.history_by_namespace,
            HashMap::from([
                ("chat".to_string(), keep(1000, 60)),
                ("ticks".to_string(), keep(50, 5)),
            ]),
            "unset fields come from the server-wide values; rules without history settings add nothing"
        );
    }

    #[test]
    fn bad_values_are_refused() {
        let e = ServerConfig::resolve(ServeArgs {
            log_format: Some("xml".into()),
            ..ServeArgs::default()
        });
        assert!(e.is_err());
        let e = ServerConfig::resolve(ServeArgs {
            request_body_timeout: Some(0),
            ..ServeArgs::default()
        });
        assert!(e.is_err(), "a zero body timeout would refuse every body");
    }
}
