//! `herald bench`: the load generator that reproduces the field's push-server
//! benchmarks against Herald or any peer server.
//!
//! Why it is built this way: a load generator that is slower than the server
//! measures itself. On the 2-core machines these benchmarks run on, the bench
//! gets one core, so every scenario runs on one readiness loop per process
//! ([`engine`]) with the project's own sans-I/O WebSocket codec, a read buffer
//! shared by all connections and no allocation per received message. Above
//! ~19,000 connections (the per-process file limit) the shootout scenarios
//! spread their clients over worker processes.
//!
//! Scenarios (subcommands):
//! - `broadcast`, `echo` ([`shootout`]): the websocket-shootout method,
//!   step by step, with all-received latency and exactly-once verification.
//! - `fanout` ([`fanout`]): publishers at a fixed total rate to subscribers
//!   over Herald's protocol; open-loop latency, loss, duplicates, reordering.
//! - `bots` ([`bots`]): the game-server load test (one action per bot per
//!   second, answered), ramped in steps; with `--game holdem` ([`holdem`])
//!   the bots play Texas Hold'em at the server's game tables instead, and
//!   with `--game NAME --module FILE` ([`scripted`]) any scripted game,
//!   played by its module's `bot` export.
//! - `stream` ([`stream`]): batches of events to consumers at an interval,
//!   max events/s as batch size and consumers grow.
//! - `idle` ([`idle`]): many idle connections; server memory per connection.
//! - `cometd` ([`cometd`]): seed 001 over Bayeux (long-polling, websocket)
//!   against Herald's `/cometd` or CometD's own server.
//! - `report` ([`report`]): result files to one HTML page of SVG charts.
//! - `__autobahn-client` ([`autobahn`], hidden): the WebSocket client as the
//!   testee of Autobahn|Testsuite, for `tests/outside/autobahn.test.sh`.
//!
//! Every scenario writes the same result file shape ([`output`]) and samples
//! the server from `/proc` ([`sysmon`]).

pub mod autobahn;
pub mod bots;
mod clock;
pub mod cometd;
pub mod common;
pub(crate) mod delivery;
pub mod duration;
pub(crate) mod engine;
pub mod fanout;
pub(crate) mod hclients;
pub(crate) mod herald_wire;
pub mod holdem;
pub(crate) mod http1;
pub mod idle;
pub mod latency;
pub mod output;
pub mod progress;
pub mod ramp;
pub mod report;
pub(crate) mod scenario;
pub mod scripted;
pub(crate) mod seating;
pub mod shootout;
pub mod stream;
pub mod sysmon;
pub mod target;

use std::net::SocketAddr;

pub use common::{CommonArgs, Transport};

/// Arguments of `herald bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The scenario to run.
    #[command(subcommand)]
    pub scenario: Scenario,
}

/// The scenarios.
#[derive(Debug, clap::Subcommand)]
pub enum Scenario {
    /// Broadcast stress test (websocket-shootout): every step adds clients
    /// and measures broadcast round trips until the RTT limit.
    Broadcast(shootout::ShootoutArgs),
    /// Echo stress test (websocket-shootout): round trips of echoes from
    /// random clients as clients are added.
    Echo(shootout::ShootoutArgs),
    /// Publishers at a fixed total rate to subscribers on channels
    /// (Herald protocol); open-loop latency, loss, duplicates, reordering.
    Fanout(fanout::FanoutArgs),
    /// Game-server load test: N bots, one answered action per second each,
    /// or (--game holdem) playing Texas Hold'em at the server's tables, or
    /// (--game NAME --module FILE) playing a scripted game with its
    /// module's bot, ramped in steps (Herald protocol).
    Bots(bots::BotsArgs),
    /// Event streaming: batches of B events to C consumers at an interval;
    /// max events/s as B and C grow (Herald protocol).
    Stream(stream::StreamArgs),
    /// Opens N idle connections; reports connect time and the server's
    /// memory per connection.
    Idle(idle::IdleArgs),
    /// Seed 001 (CometD's benchmark) over Bayeux: clients in rooms, a
    /// publish rate per step, median and p99 latency, on long-polling or
    /// websocket; with --idle, server memory per client holding
    /// /meta/connect.
    Cometd(cometd::CometdArgs),
    /// Draws result files (--out) as one HTML page of SVG charts.
    Report(report::ReportArgs),
    /// Internal: a worker process holding some of a run's clients.
    #[command(name = "__worker", hide = true)]
    Worker,
    /// Test only: the bench's WebSocket client as the testee of
    /// Autobahn|Testsuite's fuzzingserver (`tests/outside/autobahn.test.sh`).
    #[command(name = "__autobahn-client", hide = true)]
    AutobahnClient(autobahn::AutobahnArgs),
}

/// Why a bench run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The arguments do not make sense together.
    #[error("invalid arguments: {0}")]
    Args(String),
    /// The URL cannot be used.
    #[error("bad URL {0}")]
    Url(String),
    /// A socket could not be created or connected.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The server address.
        addr: SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The event loop failed.
    #[error("event loop: {0}")]
    Poll(std::io::Error),
    /// A client connection failed, was closed, or received garbage.
    #[error("{0}")]
    Client(String),
    /// Nothing happened for too long.
    #[error("stalled: {0}")]
    Stalled(String),
    /// The server lost, duplicated or invented messages.
    #[error("verification failed: {0}")]
    Verification(String),
    /// A result file could not be written or read.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// JSON (de)serialization of results or worker messages failed.
    #[error("JSON: {0}")]
    Json(serde_json::Error),
    /// A worker process failed.
    #[error("worker: {0}")]
    Worker(String),
    /// A bug in the bench.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

/// Runs one `herald bench` invocation to completion. Synchronous: each
/// scenario builds its own event loop.
pub fn run(args: BenchArgs) -> Result<(), BenchError> {
    match args.scenario {
        Scenario::Broadcast(a) => shootout::run(&a, true).map(drop),
        Scenario::Echo(a) => shootout::run(&a, false).map(drop),
        Scenario::Fanout(a) => fanout::run(&a).map(drop),
        Scenario::Bots(a) => match a.game {
            bots::BotGame::Publish => bots::run(&a).map(drop),
            bots::BotGame::Holdem => holdem::run(&a).map(drop),
            bots::BotGame::Script(_) => scripted::run(&a).map(drop),
        },
        Scenario::Stream(a) => stream::run(&a).map(drop),
        Scenario::Idle(a) => idle::run(&a).map(drop),
        Scenario::Cometd(a) => cometd::run(&a).map(drop),
        Scenario::Report(a) => report::run(&a),
        Scenario::Worker => shootout::workers::run_worker(),
        Scenario::AutobahnClient(a) => autobahn::run(&a),
    }
}
