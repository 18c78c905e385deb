//! `idle`: open N connections that then do nothing, and report how long
//! connecting took and how much the server's memory grew per connection.
//!
//! Method (the one behind the memory figures in `bench/RESULTS.md`, "Figures
//! measured on this machine"): read the server's `VmRSS` from
//! `/proc/PID/status` before connecting; open the clients (in steps, if
//! `--step-size` is given); after each step wait `--settle` for the server
//! to finish its own bookkeeping, read `VmRSS` again, and divide the growth
//! by the number of connections. With `--channels K` every client also
//! subscribes to one of K channels, which measures a subscription's cost.
//!
//! On Herald's `/ws` each client sends `connect` (a server may close
//! connections that never do) and waits for its reply; on any other path
//! (e.g. `/shootout`, or a peer server) clients only do the WebSocket
//! upgrade, unless `--herald` says otherwise. Clients answer the server's
//! pings, so they stay connected through `--duration`.
//!
//! With `--protocol pusher` clients speak Pusher Channels 7 on
//! `/app/KEY?protocol=7` of the URL's server instead: each waits for
//! `pusher:connection_established` (and, with `--channels`, subscribes to a
//! public Pusher channel), so the figure is a Pusher connection's cost.
//!
//! One process holds at most ~19,000 connections here (20,000 open files);
//! so does a single-process server, so `idle` runs in one process.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::clock;
use crate::common::{CommonArgs, Protocol, PusherFlags, Transport};
use crate::duration::parse_duration;
use crate::engine::{Engine, Io, Tick};
use crate::fanout::subscriber_kind;
use crate::hclients::{run_id, ClientKind, HeraldClients};
use crate::output::RunRecord;
use crate::progress::Progress;
use crate::scenario::{Adapter, Arrival, Scenario};
use crate::sysmon::{rss_kib, Monitor};
use crate::target::Target;
use crate::BenchError;

/// Arguments of `idle`.
#[derive(Debug, Clone, clap::Args)]
pub struct IdleArgs {
    /// The server's URL: ws://127.0.0.1:8080/ws, tcp://HOST:PORT for tcp,
    /// http://127.0.0.1:8080 for sse and poll.
    pub url: String,
    /// Connections to open.
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub clients: usize,
    /// Transport: ws-json, ws-binary, tcp, sse (needs --channels) or poll
    /// (idle sessions that keep a long-poll open, as CometD's clients do).
    #[arg(long, value_enum, default_value = "ws-json")]
    pub transport: Transport,
    /// Speak Herald's protocol (connect, subscribe). Default: when the URL
    /// path is /ws.
    #[arg(long)]
    pub herald: Option<bool>,
    /// Subscribe each client to one of this many channels (0: none).
    #[arg(long, default_value_t = 0)]
    pub channels: usize,
    /// Connect in steps of this many, measuring after each (0: one step).
    #[arg(long, default_value_t = 0)]
    pub step_size: usize,
    /// Wait after each step before reading the server's memory.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub settle: Duration,
    /// Local (source) addresses, used round-robin.
    #[arg(short = 'l', long = "local-addr")]
    pub local_addr: Vec<IpAddr>,
    /// Connects in progress at once.
    #[arg(long, default_value_t = 128)]
    pub connect_concurrency: usize,
    /// The clients' protocol (herald or pusher) and the Pusher app.
    #[command(flatten)]
    pub pusher: PusherFlags,
    /// Output, sampling and time-limit flags (--duration: how long to hold
    /// the connections open after the last step; default 0).
    #[command(flatten)]
    pub common: CommonArgs,
}

/// One step of an idle run.
#[derive(Debug, Clone, Serialize)]
pub struct IdleStep {
    /// Connections open.
    pub clients: usize,
    /// Time to open this step's connections (and set them up), seconds.
    pub connect_s: f64,
    /// Connections per second in this step.
    pub connects_per_s: f64,
    /// Server RSS after the settle delay, KiB.
    pub rss_kib: Option<u64>,
    /// Growth since before the first connection, KiB.
    pub rss_growth_kib: Option<i64>,
    /// That growth per open connection, KiB.
    pub kib_per_connection: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Connecting,
    Settling,
    Holding,
    Done,
}

struct Idle {
    clients: HeraldClients,
    pid: Option<u32>,
    baseline: Option<u64>,
    target_total: usize,
    step_size: usize,
    settle: Duration,
    hold: Duration,
    channels: Vec<String>,
    phase: Phase,
    phase_since: Instant,
    start: Instant,
    steps: Vec<IdleStep>,
    step_connect_s: f64,
    step_clients: usize,
    messages: u64,
    monitor: Monitor,
    progress: Progress,
}

impl Idle {
    fn queue_step(&mut self) {
        let have = self.clients.clients.len();
        let n = self.step_size.min(self.target_total - have);
        for i in have..have + n {
            let subs = match self.channels.len() {
                0 => Vec::new(),
                k => vec![self.channels[i % k].clone()],
            };
            self.clients.add(subs);
        }
        self.step_clients = n;
    }
}

impl Scenario for Idle {
    const TAKES_HTTP: bool = true;

    fn group(&mut self, _: u64) -> &mut HeraldClients {
        &mut self.clients
    }

    fn on_arrival(&mut self, io: &mut Io, msg: Arrival<'_>) -> Result<(), BenchError> {
        let messages = &mut self.messages;
        msg.feed(&mut self.clients, io, &mut |_| *messages += 1)
    }

    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        let mut next = now + Duration::from_millis(50);
        match self.phase {
            Phase::Connecting => {
                self.clients.tick(io)?;
                if self.clients.all_ready() {
                    self.step_connect_s = (now - self.phase_since).as_secs_f64();
                    self.phase = Phase::Settling;
                    self.phase_since = now;
                    next = now + self.settle;
                }
            }
            Phase::Settling => {
                if now - self.phase_since >= self.settle {
                    let clients = self.clients.clients.len();
                    let rss = self.pid.and_then(rss_kib);
                    let growth = match (rss, self.baseline) {
                        (Some(r), Some(b)) => Some(r as i64 - b as i64),
                        _ => None,
                    };
                    let step = IdleStep {
                        clients,
                        connect_s: self.step_connect_s,
                        connects_per_s: self.step_clients as f64 / self.step_connect_s.max(1e-9),
                        rss_kib: rss,
                        rss_growth_kib: growth,
                        kib_per_connection: growth.map(|g| g as f64 / clients.max(1) as f64),
                    };
                    self.progress.clear();
                    match step.kib_per_connection {
                        Some(k) => println!(
                            "clients: {:6}    connect: {:7.3}s ({:6.0}/s)    server RSS: {:8} KiB    growth: {:8} KiB    per connection: {:.3} KiB",
                            step.clients,
                            step.connect_s,
                            step.connects_per_s,
                            step.rss_kib.unwrap_or(0),
                            step.rss_growth_kib.unwrap_or(0),
                            k
                        ),
                        None => println!(
                            "clients: {:6}    connect: {:7.3}s ({:6.0}/s)    (give --server-pid for memory figures)",
                            step.clients, step.connect_s, step.connects_per_s
                        ),
                    }
                    self.steps.push(step);
                    if clients < self.target_total {
                        self.queue_step();
                        self.phase = Phase::Connecting;
                    } else {
                        self.phase = Phase::Holding;
                        next = now + self.hold;
                    }
                    self.phase_since = now;
                } else {
                    next = self.phase_since + self.settle;
                }
            }
            Phase::Holding => {
                if now - self.phase_since >= self.hold {
                    self.phase = Phase::Done;
                } else {
                    next = self.phase_since + self.hold;
                }
            }
            Phase::Done => return Ok(Tick::Done),
        }
        let sample = self.monitor.tick(now);
        let (ready, total) = (self.clients.ready(), self.target_total);
        let elapsed = (now - self.start).as_secs_f64();
        let show = self.progress.tick(now, || {
            format!("[{elapsed:>4.0}s] {ready}/{total} connections open")
        });
        Ok(Tick::Continue(Some(next.min(sample).min(show))))
    }
}

/// Runs `idle`; returns its steps.
pub fn run(args: &IdleArgs) -> Result<Vec<IdleStep>, BenchError> {
    if args.clients == 0 {
        return Err(BenchError::Args("--clients must be at least 1".into()));
    }
    let (mut kind, scheme) = subscriber_kind(args.transport);
    let mut target = Target::parse(&args.url)?.with_scheme(scheme)?;
    let pusher = args.pusher.protocol == Protocol::Pusher;
    if pusher {
        if args.transport != Transport::WsJson {
            return Err(BenchError::Args(
                "--protocol pusher needs --transport ws-json".into(),
            ));
        }
        kind = ClientKind::Pusher;
        target = target.with_path(&args.pusher.path());
    }
    let herald = args
        .herald
        .unwrap_or(kind != ClientKind::Ws || target.path.split('?').next() == Some("/ws"))
        || pusher;
    if kind == ClientKind::Sse && args.channels == 0 {
        return Err(BenchError::Args(
            "an SSE stream needs a channel: give --channels".into(),
        ));
    }
    if !herald && kind != ClientKind::Ws {
        return Err(BenchError::Args(
            "--herald false is for plain WebSocket endpoints only".into(),
        ));
    }
    let enc = args.transport.encoding();
    let mut clients = HeraldClients::with_kind(
        kind,
        std::slice::from_ref(&target),
        enc,
        args.local_addr.clone(),
        args.connect_concurrency,
        0,
    );
    if !herald {
        clients = clients.handshake_only();
    }
    let run = run_id();
    let start = Instant::now();
    let started_at = clock::now_secs_f64();
    let baseline = args.common.server_pid.and_then(rss_kib);
    let mut idle = Idle {
        clients,
        pid: args.common.server_pid,
        baseline,
        target_total: args.clients,
        step_size: if args.step_size == 0 {
            args.clients
        } else {
            args.step_size
        },
        settle: args.settle,
        hold: args.common.duration.unwrap_or(Duration::ZERO),
        channels: (0..args.channels)
            .map(|c| format!("bench.{run}.idle.{c}"))
            .collect(),
        phase: Phase::Connecting,
        phase_since: start,
        start,
        steps: Vec::new(),
        step_connect_s: 0.0,
        step_clients: 0,
        messages: 0,
        monitor: Monitor::new(args.common.server_pid, &args.common.net_iface, start),
        progress: Progress::new(args.common.quiet, start),
    };
    idle.queue_step();
    let mut engine = Engine::new(1 << 20)?;
    let result = engine.run(&mut Adapter(&mut idle));
    idle.progress.clear();
    let end = Instant::now();
    idle.monitor.sample(end);

    let last = idle.steps.last().cloned();
    let label = args.common.label.clone().unwrap_or_else(|| {
        format!(
            "idle {} {}",
            if pusher {
                "pusher"
            } else if herald {
                args.transport.as_str()
            } else {
                "ws"
            },
            args.url
        )
    });
    let mut record = RunRecord::new("idle", label, started_at);
    record.duration_s = (end - start).as_secs_f64();
    record.params = json!({
        "url": args.url,
        "clients": args.clients,
        "transport": args.transport,
        "herald_protocol": herald && !pusher,
        "protocol": args.pusher.protocol,
        "pusher_key": pusher.then(|| args.pusher.pusher_key.clone()),
        "channels": args.channels,
        "step_size": idle.step_size,
        "settle_s": args.settle.as_secs_f64(),
        "hold_s": idle.hold.as_secs_f64(),
        "local_addrs": args.local_addr.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "server_pid": args.common.server_pid,
    });
    record.steps = idle
        .steps
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()
        .map_err(BenchError::Json)?;
    record.summary = json!({
        "clients": last.as_ref().map(|s| s.clients),
        "baseline_rss_kib": baseline,
        "rss_kib": last.as_ref().and_then(|s| s.rss_kib),
        "kib_per_connection": last.as_ref().and_then(|s| s.kib_per_connection),
        "connect_s": idle.steps.iter().map(|s| s.connect_s).sum::<f64>(),
        "messages_received": idle.messages,
    });
    record.system = std::mem::take(&mut idle.monitor.samples);
    record.write_after(
        result,
        args.common.out.as_deref(),
        args.common.csv.as_deref(),
    )?;
    Ok(idle.steps)
}
