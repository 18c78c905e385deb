//! One constant per default of `herald serve`, used by [`super::resolve`]
//! (and so by the TOML reader, which goes through it). The defaults of
//! session settings live in `herald_core::NodeConfig::default`, those of the
//! game engine in `herald_game::EngineConfig::default`; the `[default: …]`
//! every help text states is checked against all three by
//! `config::tests::help_states_the_defaults_resolve_uses`.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// `--listen`: loopback only, so a fresh `herald serve` is not exposed.
pub const LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));
/// `--workers`: 0 = one per available core.
pub const WORKERS: usize = 0;
/// `--max-message-size`, bytes.
pub const MAX_MESSAGE_SIZE: usize = 65536;
/// `--ws-deflate`: browsers all offer permessage-deflate.
pub const WS_DEFLATE: bool = true;
/// `--ws-deflate-threshold`, bytes. Measured with
/// `cargo bench -p herald-ws --bench deflate` (lobby-row JSON pushes): a
/// compression costs about 16 µs whatever the size (resetting the
/// compressor dominates), and saves 28 B of a 138 B push, 170 B of a 300 B
/// one, 398 B of 543 B. From about 256 B on, it saves over half the bytes
/// for a cost paid once per publication; below, a few dozen bytes of a
/// packet that is sent anyway.
pub const WS_DEFLATE_THRESHOLD: usize = 256;
/// `--ws-deflate-shootout`: the shootout's reference servers compress nothing.
pub const WS_DEFLATE_SHOOTOUT: bool = false;
/// `--max-connections`.
pub const MAX_CONNECTIONS: usize = 100_000;
/// `--pong-timeout`, seconds.
pub const PONG_TIMEOUT: u32 = 10;
/// `--handshake-timeout`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// `--request-body-timeout`.
pub const REQUEST_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// `--poll-timeout`: under the 30 s many proxies allow an idle response.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(25);
/// `--shutdown-timeout`.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// `--hibernate-after`.
pub const HIBERNATE_AFTER: Duration = Duration::from_millis(2000);
/// `--log-format`.
pub const LOG_FORMAT: &str = "text";
/// `--redis-prefix`.
pub const REDIS_PREFIX: &str = "herald";
/// `--demo-rate`, rows a second (0 = off).
pub const DEMO_RATE: u32 = 0;
/// The largest `--demo-rate` accepted.
pub const DEMO_RATE_MAX: u32 = 10_000;
/// `--max-connections-per-ip` (0 = no limit).
pub const MAX_CONNECTIONS_PER_IP: usize = 0;
/// `--table-lease` (decision 0009).
pub const TABLE_LEASE: Duration = Duration::from_millis(3_000);
/// How long a game-table save waits for its replicas (`--table-save-wait`).
pub const TABLE_SAVE_WAIT: Duration = Duration::from_millis(100);
/// The most tables one `[[tables]]` entry may ask for.
pub const TABLES_PER_ENTRY_MAX: u32 = 100_000;
