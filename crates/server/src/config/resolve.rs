//! From what was given to what the server runs with: the TOML file under the
//! flags and environment, then every default (from [`super::defaults`],
//! `NodeConfig::default` and `EngineConfig::default`) and every check.

use super::{defaults, ConfigError, Role, Secret, ServeArgs, ServerConfig};
use crate::auth::{self, NamespaceRule, Policy};
use herald_core::{NodeConfig, Retention};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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
        let log_format = a
            .log_format
            .clone()
            .unwrap_or_else(|| defaults::LOG_FORMAT.into());
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
        let demo_rate = a.demo_rate.unwrap_or(defaults::DEMO_RATE);
        if demo_rate > defaults::DEMO_RATE_MAX {
            return Err(ConfigError::Invalid(format!(
                "demo_rate = {demo_rate} (at most {})",
                defaults::DEMO_RATE_MAX
            )));
        }
        let (redis, redis_prefix) = broker(&a)?;
        let pusher = crate::pusher::PusherConfig::resolve(a.pusher.as_ref())?;
        let bayeux = crate::bayeux::BayeuxConfig::resolve(a.bayeux.as_ref())?;
        let policy = policy(&a)?
            .with_pusher_namespaces(pusher.apps.iter().map(|p| p.namespace.clone()).collect());
        let games = games_config(&a)?;
        let table_lease = a
            .table_lease
            .map_or(defaults::TABLE_LEASE, Duration::from_millis);
        if table_lease < Duration::from_millis(100) || table_lease > Duration::from_secs(600) {
            return Err(ConfigError::Invalid(
                "table_lease must be 100 to 600000 ms".into(),
            ));
        }
        let table_save_replicas = a.table_save_replicas.unwrap_or(0);
        let table_save_wait = a
            .table_save_wait
            .map_or(defaults::TABLE_SAVE_WAIT, Duration::from_millis);
        if table_save_replicas > 16 {
            return Err(ConfigError::Invalid(
                "table_save_replicas must be 0 to 16".into(),
            ));
        }
        if table_save_wait < Duration::from_millis(1) || table_save_wait > Duration::from_secs(10) {
            return Err(ConfigError::Invalid(
                "table_save_wait must be 1 to 10000 ms".into(),
            ));
        }
        let role = role(a.role.as_deref(), redis.is_some())?;
        let listen = a.listen.unwrap_or(defaults::LISTEN);
        let api_key = a.api_key.clone().filter(|k| !k.is_empty()).map(Secret);
        exposure(&a, listen, &policy, api_key.is_some())?;
        let admin = crate::admin::config::AdminConfig::resolve(a.admin.as_ref(), api_key.as_ref())?;
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
        let node = node_config(&a, d, ping_interval, policy);
        let secs = |v: Option<u64>, default| v.map_or(default, Duration::from_secs);
        Ok(ServerConfig {
            listen,
            tcp_listen: a.tcp_listen,
            workers: a.workers.unwrap_or(defaults::WORKERS),
            max_message_size: a.max_message_size.unwrap_or(defaults::MAX_MESSAGE_SIZE),
            ws_deflate: crate::transport::ws::Deflate {
                enabled: a.ws_deflate.unwrap_or(defaults::WS_DEFLATE),
                threshold: match a.ws_deflate_threshold {
                    // Kept per connection as a u16 (herald_ws::deflate::Agreement).
                    Some(t) if t > usize::from(u16::MAX) => {
                        return Err(ConfigError::Invalid(format!(
                            "ws_deflate_threshold {t} is above 65535 bytes"
                        )))
                    }
                    t => t.unwrap_or(defaults::WS_DEFLATE_THRESHOLD),
                },
                shootout: a
                    .ws_deflate_shootout
                    .unwrap_or(defaults::WS_DEFLATE_SHOOTOUT),
            },
            max_connections: a.max_connections.unwrap_or(defaults::MAX_CONNECTIONS),
            pong_timeout: Duration::from_secs(u64::from(
                a.pong_timeout.unwrap_or(defaults::PONG_TIMEOUT),
            )),
            handshake_timeout: secs(a.handshake_timeout, defaults::HANDSHAKE_TIMEOUT),
            request_body_timeout: secs(a.request_body_timeout, defaults::REQUEST_BODY_TIMEOUT),
            poll_timeout: secs(a.poll_timeout, defaults::POLL_TIMEOUT),
            shutdown_timeout: secs(a.shutdown_timeout, defaults::SHUTDOWN_TIMEOUT),
            hibernate_after: a
                .hibernate_after
                .map_or(defaults::HIBERNATE_AFTER, Duration::from_millis),
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
            max_connections_per_ip: a
                .max_connections_per_ip
                .unwrap_or(defaults::MAX_CONNECTIONS_PER_IP),
            auth_summary,
            shootout,
            test_echo_route: a.test_echo_route.unwrap_or(false),
            tls_cert: a.tls_cert,
            tls_key: a.tls_key,
            node,
            games,
            game_modules: a.games,
            tables: a.tables,
            table_lease,
            table_save_replicas,
            table_save_wait,
            role,
            pusher,
            bayeux,
            admin,
            reclaim: None,
        })
    }
}

/// `--broker` and `--redis-prefix`: the Redis URL (`None`: in memory) and
/// the key prefix.
fn broker(a: &ServeArgs) -> Result<(Option<String>, String), ConfigError> {
    let redis = match a.broker.as_deref().map(str::trim) {
        None | Some("" | "memory") => None,
        Some(url)
            if url.starts_with("redis://")
                || url.starts_with("redis-sentinel://")
                || url.starts_with("redis-cluster://") =>
        {
            Some(url.to_string())
        }
        Some(other) => {
            return Err(ConfigError::Invalid(format!(
                "broker = {other:?}: expected `memory`, a redis://HOST:PORT URL, redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER or redis-cluster://HOST:PORT[,HOST:PORT...]"
            )))
        }
    };
    let redis_prefix = a
        .redis_prefix
        .clone()
        .unwrap_or_else(|| defaults::REDIS_PREFIX.into());
    if redis_prefix.is_empty() || redis_prefix.contains(['{', '}', ' ']) {
        return Err(ConfigError::Invalid(format!(
            "redis_prefix = {redis_prefix:?}: must be non-empty, without spaces or braces"
        )));
    }
    Ok((redis, redis_prefix))
}

/// `--role`; anything but `all` needs a cluster.
fn role(given: Option<&str>, cluster: bool) -> Result<Role, ConfigError> {
    let role = match given.map(str::trim) {
        None | Some("" | "all") => Role::All,
        Some("edge") => Role::Edge,
        Some("game") => Role::Game,
        Some(other) => {
            return Err(ConfigError::Invalid(format!(
                "role = {other:?}: expected `all`, `edge` or `game`"
            )))
        }
    };
    if role != Role::All && !cluster {
        return Err(ConfigError::Invalid(format!(
            "role = {:?} needs a cluster: give --broker redis://HOST:PORT \
             (a single node always has role `all`)",
            role.name()
        )));
    }
    Ok(role)
}

/// Refuses a non-loopback listener without a token key and an API key,
/// unless `--insecure`.
fn exposure(
    a: &ServeArgs,
    listen: SocketAddr,
    policy: &Policy,
    api_key: bool,
) -> Result<(), ConfigError> {
    let exposed: Vec<SocketAddr> = [Some(listen), a.tcp_listen]
        .into_iter()
        .flatten()
        .filter(|addr| !addr.ip().is_loopback())
        .collect();
    if exposed.is_empty() || a.insecure.unwrap_or(false) {
        return Ok(());
    }
    let mut missing = Vec::new();
    if !policy.has_keys() {
        missing.push("a token key (token_hmac_secret, token_public_key or token_jwks_file)");
    }
    if !api_key {
        missing.push("an api_key");
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(ConfigError::Invalid(format!(
        "refusing to listen on non-loopback {} without {}: anyone reaching it could \
         connect and publish. Configure them, or pass --insecure (HERALD_INSECURE=true) \
         to accept that",
        exposed
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        missing.join(" and ")
    )))
}

/// Session settings: `NodeConfig::default` under what was given.
fn node_config(a: &ServeArgs, d: NodeConfig, ping_interval: u32, policy: Policy) -> NodeConfig {
    let history_size = a.history_size.unwrap_or(d.history_size);
    let history_ttl = a.history_ttl.map_or(d.history_ttl, Duration::from_secs);
    NodeConfig {
        max_subscriptions: a.max_subscriptions.unwrap_or(d.max_subscriptions),
        history_size,
        history_ttl,
        history_by_namespace: history_by_namespace(&a.namespaces, history_size, history_ttl),
        client_queue_bytes: a.client_queue_bytes.unwrap_or(d.client_queue_bytes),
        ping_interval,
        version: d.version,
        auth: Arc::new(policy),
        rate_limit: a.rate_limit.unwrap_or(d.rate_limit),
        rate_burst: a.rate_burst.unwrap_or(d.rate_burst),
        client_id_base: d.client_id_base,
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
    for (i, g) in a.games.iter().enumerate() {
        if g.name.is_empty() || a.games[..i].iter().any(|o| o.name == g.name) {
            return Err(ConfigError::Invalid(format!(
                "[[games]] name = {:?}: empty or given twice",
                g.name
            )));
        }
        if g.cpu_ms == Some(0) || g.memory_mb == Some(0) || g.shards == Some(0) {
            return Err(ConfigError::Invalid(format!(
                "[[games]] {}: cpu_ms, memory_mb and shards are at least 1",
                g.name
            )));
        }
    }
    for t in &a.tables {
        if t.count == 0 || t.count > defaults::TABLES_PER_ENTRY_MAX {
            return Err(ConfigError::Invalid(format!(
                "[[tables]] count = {} (1 to 100000)",
                t.count
            )));
        }
    }
    let p = d.play.clone();
    let play = herald_game::play::PlayConfig {
        enabled: a.play.unwrap_or(p.enabled),
        max_tables: a.play_max_tables.unwrap_or(p.max_tables),
        max_tables_per_user: a.play_max_tables_per_user.unwrap_or(p.max_tables_per_user),
        empty_close: a
            .play_empty_close
            .map_or(p.empty_close, Duration::from_secs),
    };
    if play.max_tables == 0 || play.max_tables_per_user == 0 || play.empty_close.is_zero() {
        return Err(ConfigError::Invalid(
            "play_max_tables, play_max_tables_per_user and play_empty_close are at least 1".into(),
        ));
    }
    Ok(herald_game::EngineConfig {
        grace: a.game_grace.map_or(d.grace, Duration::from_secs),
        lobby_interval,
        play,
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
