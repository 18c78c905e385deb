//! Flags every scenario shares, and the transport choice.

use std::path::PathBuf;
use std::time::Duration;

use crate::duration::parse_duration;

/// How a scenario reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// WebSocket, JSON text frames (subprotocol `herald.json`).
    WsJson,
    /// WebSocket, binary frames (subprotocol `herald.binary`).
    WsBinary,
    /// Raw TCP, binary encoding in length-prefixed frames (`tcp://` URL:
    /// the server's `--tcp-listen` address).
    Tcp,
    /// Server-Sent Events (`GET /sse`), JSON payloads; receive only.
    Sse,
    /// HTTP long-polling (`/poll`), JSON.
    Poll,
}

impl Transport {
    /// The protocol encoding this transport carries.
    pub fn encoding(self) -> herald_proto::Encoding {
        match self {
            Transport::WsJson | Transport::Sse | Transport::Poll => herald_proto::Encoding::Json,
            Transport::WsBinary | Transport::Tcp => herald_proto::Encoding::Binary,
        }
    }

    /// `ws-json`, `ws-binary`, `tcp`, `sse` or `poll`.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::WsJson => "ws-json",
            Transport::WsBinary => "ws-binary",
            Transport::Tcp => "tcp",
            Transport::Sse => "sse",
            Transport::Poll => "poll",
        }
    }
}

/// Output, sampling and time-limit flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CommonArgs {
    /// Run for this long (e.g. 30s, 2m). Each scenario documents its
    /// default; for broadcast and echo it caps the whole run (the current
    /// step finishes first).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Write the results as JSON (schema `herald-bench/1`, see the README).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write one CSV row per step.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Sample this process's CPU and memory once a second (the server).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Network interface whose byte counters are sampled.
    #[arg(long, default_value = "lo")]
    pub net_iface: String,
    /// A name for this run in reports (default: scenario, mode and URL).
    #[arg(long)]
    pub label: Option<String>,
    /// No progress line and no commentary on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Which protocol subscribers (and idle clients) speak over WebSocket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Herald's own (docs/protocol.md), on the URL given.
    #[default]
    Herald,
    /// Pusher Channels protocol 7 on `/app/KEY?protocol=7` of the URL's
    /// server (docs/pusher.md): public channels, no recovery.
    Pusher,
}

/// Flags of `--protocol pusher`.
#[derive(Debug, Clone, clap::Args)]
pub struct PusherFlags {
    /// Subscribers' protocol: herald (Herald's own) or pusher (Pusher
    /// Channels 7 on /app/KEY?protocol=7; publishers stay on Herald's).
    #[arg(long, value_enum, default_value = "herald")]
    pub protocol: Protocol,
    /// The Pusher app key (in the subscribers' URL); bench/pusher.toml
    /// configures it.
    #[arg(long, default_value = "herald-bench")]
    pub pusher_key: String,
    /// The Pusher app id: Pusher channel NAME is Herald channel
    /// `pusher-ID:NAME`, where the publishers publish.
    #[arg(long, default_value = "bench")]
    pub pusher_app_id: String,
}

impl PusherFlags {
    /// The path of the app's Pusher WebSocket endpoint.
    pub fn path(&self) -> String {
        format!("/app/{}?protocol=7", self.pusher_key)
    }

    /// The Herald channel of Pusher channel `name` (the app's default
    /// namespace; Pusher names with `;` are not used by the bench).
    pub fn herald_channel(&self, name: &str) -> String {
        format!("pusher-{}:{name}", self.pusher_app_id)
    }
}
