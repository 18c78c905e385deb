//! [`RedisConfig`]: the cluster settings `herald serve` fills from its
//! flags and TOML file, and their defaults. A leaf: it only names what the
//! broker reads.

use crate::pipe;
use herald_core::memory::Retention;
use std::collections::HashMap;
use std::time::Duration;

/// Cluster settings.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// `redis://[:PASSWORD@]HOST:PORT[/DB]`, or
    /// `redis-sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB][?sentinel_password=P]`
    /// (decision 0020).
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
    /// Replicas that must acknowledge each game-table save before it is
    /// answered (`WAIT`; default 0: none, Redis replicates asynchronously).
    pub table_save_replicas: u32,
    /// How long a save waits for them (default 100 ms); a wait that times
    /// out is counted, and the save stands on the master alone.
    pub table_save_wait: Duration,
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
            command_timeout: pipe::CALL_TIMEOUT,
            vacated_delay: Duration::ZERO,
            table_save_replicas: 0,
            table_save_wait: Duration::from_millis(100),
        }
    }
}
