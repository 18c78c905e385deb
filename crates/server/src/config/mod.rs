//! `herald serve` options: command line, environment, TOML file, defaults.
//!
//! Every option can be given as a flag (`--max-connections 5000`), as an
//! environment variable (`HERALD_MAX_CONNECTIONS=5000`) or as a key of the TOML
//! file named by `--config` (`max_connections = 5000`); that is also the order
//! of precedence. Every option has a default, stated in its help text, so
//! `herald serve` needs no file at all.

//!
//! - [`args`]: [`ServeArgs`], the options as given (flags, environment, file).
//! - [`resolve`]: defaults and checks, giving a [`ServerConfig`].
//! - [`defaults`]: one constant per default.
//! - [`error`], [`secret`], [`tables`]: leaves other modules import alone.

pub mod args;
pub mod defaults;
pub mod error;
pub mod games;
mod resolve;
pub mod secret;
pub mod tables;

pub use args::ServeArgs;
pub use error::ConfigError;
pub use games::GameModule;
pub use secret::Secret;
pub use tables::TableConfig;

use herald_core::NodeConfig;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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
    /// permessage-deflate on WebSocket endpoints (see [`crate::transport::ws::Deflate`]).
    pub ws_deflate: crate::transport::ws::Deflate,
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
    /// Game modules in JavaScript (`[[games]]`), loaded at start-up.
    pub game_modules: Vec<GameModule>,
    /// Tables created at start-up.
    pub tables: Vec<TableConfig>,
    /// A game table's lease in a cluster (`--table-lease`, default 3 s).
    pub table_lease: Duration,
    /// Replicas that acknowledge each table save (`--table-save-replicas`,
    /// default 0).
    pub table_save_replicas: u32,
    /// How long a save waits for them (`--table-save-wait`, default 100 ms).
    pub table_save_wait: Duration,
    /// This node's role in a cluster (`--role`, default `all`).
    pub role: Role,
    /// Pusher apps and settings (no apps: the endpoint refuses every key).
    pub pusher: crate::pusher::PusherConfig,
    /// The Bayeux endpoint's settings (`[bayeux]`).
    pub bayeux: crate::bayeux::BayeuxConfig,
    /// The admin dashboard (`[admin]`); `None`: off.
    pub admin: Option<crate::admin::config::AdminConfig>,
    /// What gives memory back while the node is quiet: set by the binary,
    /// which knows its allocator (none from flags or files).
    pub reclaim: Option<crate::reclaim::Reclaim>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::Retention;
    use std::collections::HashMap;

    /// Every option's help ends with `[default: …]`; this is what
    /// `resolve` makes of an option not given, rendered as the help states
    /// it (secs, ms, or a word for "not set").
    fn resolved_defaults() -> std::collections::HashMap<&'static str, String> {
        let c = ServerConfig::default();
        let n = &c.node;
        let word = |unset: bool, w: &str| {
            assert!(unset, "{w}: the default should be unset");
            w.to_string()
        };
        let secs = |d: Duration| d.as_secs().to_string();
        let ms = |d: Duration| d.as_millis().to_string();
        [
            ("listen", c.listen.to_string()),
            ("tcp-listen", word(c.tcp_listen.is_none(), "off")),
            ("tls-cert", word(c.tls_cert.is_none(), "off")),
            ("tls-key", word(c.tls_key.is_none(), "off")),
            ("workers", c.workers.to_string()),
            ("max-message-size", c.max_message_size.to_string()),
            ("ws-deflate", c.ws_deflate.enabled.to_string()),
            ("ws-deflate-threshold", c.ws_deflate.threshold.to_string()),
            ("ws-deflate-shootout", c.ws_deflate.shootout.to_string()),
            ("client-queue-bytes", n.client_queue_bytes.to_string()),
            ("max-connections", c.max_connections.to_string()),
            ("max-subscriptions", n.max_subscriptions.to_string()),
            ("history-size", n.history_size.to_string()),
            ("history-ttl", secs(n.history_ttl)),
            ("ping-interval", n.ping_interval.to_string()),
            ("pong-timeout", secs(c.pong_timeout)),
            ("hibernate-after", ms(c.hibernate_after)),
            ("poll-timeout", secs(c.poll_timeout)),
            ("handshake-timeout", secs(c.handshake_timeout)),
            ("request-body-timeout", secs(c.request_body_timeout)),
            ("shutdown-timeout", secs(c.shutdown_timeout)),
            ("log-format", c.log_format.clone()),
            ("broker", word(c.redis.is_none(), "memory")),
            ("redis-prefix", c.redis_prefix.clone()),
            ("demo-rate", c.demo_rate.to_string()),
            // No token key: anonymous clients (and so /shootout) allowed.
            ("token-hmac-secret", word(c.shootout, "none")),
            ("token-public-key", word(c.shootout, "none")),
            ("token-jwks-file", word(c.shootout, "none")),
            (
                "allow-anonymous",
                word(
                    c.shootout,
                    "true when no token key is configured, else false",
                ),
            ),
            (
                "api-key",
                word(
                    c.api_key.is_none(),
                    "none: the API is open to whoever reaches the listener",
                ),
            ),
            ("insecure", "false".into()),
            (
                "allowed-origins",
                word(c.allowed_origins.is_empty(), "any origin"),
            ),
            (
                "max-connections-per-ip",
                c.max_connections_per_ip.to_string(),
            ),
            ("rate-limit", n.rate_limit.to_string()),
            ("rate-burst", n.rate_burst.to_string()),
            ("game-grace", secs(c.games.grace)),
            ("lobby-interval", ms(c.games.lobby_interval)),
            ("play", c.games.play.enabled.to_string()),
            ("play-max-tables", c.games.play.max_tables.to_string()),
            (
                "play-max-tables-per-user",
                c.games.play.max_tables_per_user.to_string(),
            ),
            ("play-empty-close", secs(c.games.play.empty_close)),
            ("table-lease", ms(c.table_lease)),
            ("table-save-replicas", c.table_save_replicas.to_string()),
            ("table-save-wait", ms(c.table_save_wait)),
            ("role", c.role.name().to_string()),
            ("test-echo-route", c.test_echo_route.to_string()),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn help_states_the_defaults_resolve_uses() {
        use clap::Args;
        let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
        let mut want = resolved_defaults();
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if long == "config" {
                continue;
            }
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(ToString::to_string)
                .unwrap_or_default();
            let said = help
                .rsplit_once("[default: ")
                .and_then(|(_, d)| d.strip_suffix(']'))
                .unwrap_or_else(|| panic!("--{long}: no [default: …] at the end of {help:?}"));
            let resolved = want
                .remove(long)
                .unwrap_or_else(|| panic!("--{long}: add it to resolved_defaults()"));
            assert_eq!(said, resolved, "--{long}: --help and resolve disagree");
        }
        assert!(want.is_empty(), "no such options: {:?}", want.keys());
    }

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
        let sentinel = "redis-sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster";
        std::fs::write(&path, format!("broker = \"{sentinel}\"\n")).unwrap();
        let c = ServerConfig::load(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(c.redis.as_deref(), Some(sentinel));
        let cluster = "redis-cluster://127.0.0.1:7000,127.0.0.1:7001";
        std::fs::write(&path, format!("broker = \"{cluster}\"\n")).unwrap();
        let c = ServerConfig::load(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(c.redis.as_deref(), Some(cluster));
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
