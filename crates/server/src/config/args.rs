//! The options of `herald serve` as given: every field `None` unless the
//! flag, the environment or the TOML file named it. clap reads the first
//! two, serde the third, [`ServeArgs::or`] stacks them; [`super::resolve`]
//! turns the result into a [`super::ServerConfig`]. The `[default: …]` each
//! help text states is checked against [`super::defaults`] by a test.

use super::games::GameModule;
use super::tables::TableConfig;
use crate::auth::NamespaceRule;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;

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

    /// Negotiate permessage-deflate (RFC 7692, no context takeover either
    /// way) with WebSocket clients that offer it, on `/ws` and `/app/{key}`
    /// [default: true].
    #[arg(long, env = "HERALD_WS_DEFLATE", num_args = 0..=1, default_missing_value = "true")]
    pub ws_deflate: Option<bool>,

    /// Outgoing WebSocket messages shorter than this many bytes are sent
    /// uncompressed (RSV1 clear) even to clients that negotiated
    /// permessage-deflate: below it compression saves too little to pay for
    /// itself; at most 65535 [default: 256].
    #[arg(long, env = "HERALD_WS_DEFLATE_THRESHOLD")]
    pub ws_deflate_threshold: Option<usize>,

    /// Also negotiate permessage-deflate on `/shootout` (needs `--ws-deflate`);
    /// off because the shootout's reference servers compress nothing
    /// [default: false].
    #[arg(long, env = "HERALD_WS_DEFLATE_SHOOTOUT", num_args = 0..=1, default_missing_value = "true")]
    pub ws_deflate_shootout: Option<bool>,

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
    /// freed (expiry is checked when a channel is used and by a sweep of
    /// the channel map, one 64th of it every 250 ms) [default: 300].
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
    /// positions and presence), or
    /// `redis-sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB][?sentinel_password=P]`
    /// (the same, with the master found and followed through Redis
    /// Sentinel; the password is the master's, `sentinel_password` the
    /// sentinels' own), or
    /// `redis-cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...]` (seed nodes of
    /// a Redis Cluster: channels spread over its masters by slot; game
    /// tables and presence not yet, decision 0021); a URL with a password is better given by
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

    /// Whether players may ask for tables on demand with `play` (protocol
    /// §5f) [default: true].
    #[arg(long, env = "HERALD_PLAY")]
    pub play: Option<bool>,

    /// Tables made by `play` open at once on this server (in a cluster: in
    /// the cluster); a `play` that would make one more gets 107
    /// [default: 10000].
    #[arg(long, env = "HERALD_PLAY_MAX_TABLES")]
    pub play_max_tables: Option<u32>,

    /// Tables made by `play` that one user created and that are still open
    /// [default: 5].
    #[arg(long, env = "HERALD_PLAY_MAX_TABLES_PER_USER")]
    pub play_max_tables_per_user: Option<u32>,

    /// Seconds a table made by `play` stays open with nobody seated
    /// [default: 60].
    #[arg(long, env = "HERALD_PLAY_EMPTY_CLOSE")]
    pub play_empty_close: Option<u64>,

    /// Milliseconds a game table's lease lasts in a cluster (`--broker
    /// redis://…`): a dead node's tables are taken over by another node this
    /// long after its last renewal; renewed every third of it (decision
    /// 0009) [default: 3000].
    #[arg(long, env = "HERALD_TABLE_LEASE")]
    pub table_lease: Option<u64>,

    /// Replicas of the Redis master that must acknowledge each game-table
    /// save before the action it saves is answered (`WAIT`; decision
    /// 0021): with 1, an acknowledged action survives the master's death
    /// (Sentinel, Redis Cluster). 0: Redis's asynchronous replication
    /// alone [default: 0].
    #[arg(long, env = "HERALD_TABLE_SAVE_REPLICAS")]
    pub table_save_replicas: Option<u32>,

    /// Milliseconds a save waits for those replicas; past it the action is
    /// answered anyway and `herald_cluster_table_saves_unreplicated_total` counts
    /// it [default: 100].
    #[arg(long, env = "HERALD_TABLE_SAVE_WAIT")]
    pub table_save_wait: Option<u64>,

    /// What this node does in a cluster (decision 0009): `all` (holds
    /// client connections and runs game tables), `edge` (holds connections
    /// and serves the lobby; never runs a table: players' commands go to
    /// the table's owner) or `game` (runs tables; clients may still
    /// connect). `edge` and `game` need `--broker redis://…` [default: all].
    #[arg(long, env = "HERALD_ROLE")]
    pub role: Option<String>,

    /// Game modules in JavaScript; TOML only (`[[games]]` with `name`,
    /// `module` (the file), and optional `cpu_ms` (100), `memory_mb` (16),
    /// `max_message` (65536), `max_state` (1048576), `shards` (one per
    /// core); docs/games.md) [default: none].
    #[arg(skip)]
    #[serde(default)]
    pub games: Vec<GameModule>,

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
    /// The Bayeux (CometD) endpoint; TOML only (`[bayeux]` with `path`,
    /// `timeout_ms`, `interval_ms`, `max_interval_ms`, `max_batch`; see
    /// docs/bayeux.md) [default: served at `/cometd`].
    #[arg(skip)]
    #[serde(default)]
    pub bayeux: Option<crate::bayeux::BayeuxArgs>,
    /// The admin dashboard at `/admin`; TOML only (`[admin]` with
    /// `password_hash` from `herald admin-hash`, and/or `api_key = true` to
    /// accept the API key as the password; `user`,
    /// `login_attempts_per_minute`, `session_hours`) [default: off].
    #[arg(skip)]
    #[serde(default)]
    pub admin: Option<crate::admin::config::AdminArgs>,
}

impl ServeArgs {
    /// Each option from `self` if given, else from `other`.
    pub(super) fn or(self, other: ServeArgs) -> ServeArgs {
        ServeArgs {
            config: self.config,
            listen: self.listen.or(other.listen),
            tcp_listen: self.tcp_listen.or(other.tcp_listen),
            tls_cert: self.tls_cert.or(other.tls_cert),
            tls_key: self.tls_key.or(other.tls_key),
            workers: self.workers.or(other.workers),
            max_message_size: self.max_message_size.or(other.max_message_size),
            ws_deflate: self.ws_deflate.or(other.ws_deflate),
            ws_deflate_threshold: self.ws_deflate_threshold.or(other.ws_deflate_threshold),
            ws_deflate_shootout: self.ws_deflate_shootout.or(other.ws_deflate_shootout),
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
            play: self.play.or(other.play),
            play_max_tables: self.play_max_tables.or(other.play_max_tables),
            play_max_tables_per_user: self
                .play_max_tables_per_user
                .or(other.play_max_tables_per_user),
            play_empty_close: self.play_empty_close.or(other.play_empty_close),
            table_lease: self.table_lease.or(other.table_lease),
            table_save_replicas: self.table_save_replicas.or(other.table_save_replicas),
            table_save_wait: self.table_save_wait.or(other.table_save_wait),
            role: self.role.or(other.role),
            games: if self.games.is_empty() {
                other.games
            } else {
                self.games
            },
            tables: if self.tables.is_empty() {
                other.tables
            } else {
                self.tables
            },
            test_echo_route: self.test_echo_route.or(other.test_echo_route),
            pusher: self.pusher.or(other.pusher),
            bayeux: self.bayeux.or(other.bayeux),
            admin: self.admin.or(other.admin),
        }
    }
}
