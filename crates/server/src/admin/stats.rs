//! A node's stats, as its cluster heartbeat reports them (`/api/nodes`) and
//! as the dashboard's Nodes page shows them: one function, so the page of
//! any node shows every node alike.
//!
//! Counters are cumulative (publications, deliveries, the fan-out
//! histogram's buckets) and stamped with `at_ms`: the page turns two
//! samples into rates and a p99, so no node keeps a history for it.

use herald_core::metrics::{Transport, FANOUT_BUCKETS};
use herald_core::Node;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// What a node's stats are read from.
#[derive(Debug, Clone)]
pub struct StatsSource {
    /// The node: clients, channels, counters.
    pub node: Arc<Node>,
    /// The game engine (tables run here).
    pub games: Arc<herald_game::Engine>,
    /// Where it listens.
    pub listen: SocketAddr,
    /// Its role (`all`, `edge`, `game`).
    pub role: &'static str,
    /// Whether it is a cluster node (its Redis link state is reported).
    pub clustered: bool,
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The process's resident memory in bytes (Linux; 0 elsewhere).
fn resident_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

impl StatsSource {
    /// This node's stats now.
    pub fn stats(&self) -> Value {
        let n = &self.node;
        let m = &n.metrics;
        let transports: serde_json::Map<String, Value> = Transport::ALL
            .iter()
            .map(|t| (t.label().to_string(), json!(m.connections(*t))))
            .collect();
        let (fanout, _) = n.hub.fanout.snapshot();
        let redis = if self.clustered {
            if n.broker.healthy() {
                "up"
            } else {
                "down"
            }
        } else {
            "none"
        };
        json!({
            "listen": self.listen.to_string(),
            "clients": n.client_count(),
            "channels": n.hub.channel_count(),
            "publications": m.publications.get(),
            "uptime_s": n.now(),
            "version": n.config.version,
            // In a cluster, the tables this node owns (holds the lease of).
            "tables": if self.clustered {
                self.games.leases().len()
            } else {
                self.games.table_count()
            },
            "role": self.role,
            "transports": transports,
            "delivered": m.messages_out.get(),
            "memory_bytes": resident_bytes(),
            "redis": redis,
            "fanout": fanout,
            "at_ms": unix_ms(),
        })
    }
}

/// The upper bounds (seconds) of the `fanout` buckets in [`StatsSource::stats`].
pub fn fanout_bounds() -> Value {
    json!(FANOUT_BUCKETS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn resident_memory_is_read() {
        if cfg!(target_os = "linux") {
            assert!(super::resident_bytes() > 0);
        }
    }
}
