//! `stream`: the WebSocket-vs-SSE streaming test of seed 002 (Timeplus):
//! a server streams events to C consumers in batches of B events every
//! interval I; how many events per second arrive, and at what CPU cost, as
//! B and C grow.
//!
//! Method: Herald has no built-in event source, so the bench is the source,
//! through Herald's public protocol only: every consumer subscribes to its
//! own channel, and a publisher connection publishes, every interval, one
//! message per consumer channel holding B events (seed 002's row: a
//! 12-column JSON array, ~130 bytes; a 64-byte record in binary). The server
//! does what an event-streaming server does: receive, route and push each
//! batch to its consumer. Events per second = events received by consumers
//! per second of the step.
//!
//! Each combination of `--consumers` and `--batch-sizes` is one step of
//! `--step-duration`, followed by a short drain (not measured). The
//! schedule is open loop; if the publisher's connection has more than
//! `--max-backlog` bytes unsent (the server is not reading fast enough),
//! ticks are skipped and counted rather than queued without bound.
//! Batches carry a stamp (sequence number and send time), so lost batches
//! and batch latency are reported too. Client CPU is the bench's own
//! (publisher and consumers share its core), server CPU comes from
//! `--server-pid`.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use herald_proto::Encoding;
use serde::Serialize;
use serde_json::json;

use crate::clock;
use crate::common::{CommonArgs, Transport};
use crate::duration::parse_duration;
use crate::engine::{CloseReason, ConnId, Engine, Io, IoStats, Tick};
use crate::fanout::subscriber_kind;
use crate::hclients::{run_id, ClientKind, Event, HeraldClients};
use crate::herald_wire::{self, Stamp};
use crate::latency::{Latency, LatencySummary};
use crate::output::RunRecord;
use crate::progress::Progress;
use crate::scenario::{Adapter, Arrival, Scenario};
use crate::sysmon::{mean_between, Monitor};
use crate::target::{Scheme, Target};
use crate::BenchError;

/// Seed 002's event, one row of a streaming query result.
const JSON_ROW: &[u8] = br#"[0,"2022-03-29T20:35:56.581Z",1,116.9232297,40.676318,4745,"c00070",78,"32.07","1970-01-01T00:00:00Z","column 1","another field"]"#;

/// The binary event: a fixed 64-byte record.
const BINARY_ROW_LEN: usize = 64;

/// Arguments of `stream`.
#[derive(Debug, Clone, clap::Args)]
pub struct StreamArgs {
    /// Herald's URL: ws://127.0.0.1:8080/ws (http://… works too; for sse
    /// and poll only the host is used), or tcp://HOST:PORT for tcp.
    pub url: String,
    /// Consumers' transport: ws-json, ws-binary, tcp, sse or poll. The
    /// source publishes over WebSocket in the consumers' encoding (over raw
    /// TCP for tcp), so only the consumers' transport differs.
    #[arg(long, value_enum, default_value = "ws-json")]
    pub transport: Transport,
    /// Consumer counts to try (comma-separated).
    #[arg(short = 'c', long, value_delimiter = ',', default_value = "10")]
    pub consumers: Vec<usize>,
    /// Batch sizes (events per batch) to try (comma-separated).
    #[arg(
        short = 'b',
        long,
        value_delimiter = ',',
        default_value = "1,10,50,100,200,400,800"
    )]
    pub batch_sizes: Vec<usize>,
    /// Time between batches (per consumer).
    #[arg(short = 'i', long, default_value = "1ms", value_parser = parse_duration)]
    pub interval: Duration,
    /// How long each combination runs.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub step_duration: Duration,
    /// Pause between steps so queues drain (not measured).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub drain: Duration,
    /// Unsent bytes on the publisher connection above which ticks are skipped.
    #[arg(long, default_value_t = 8 << 20)]
    pub max_backlog: usize,
    /// Local (source) addresses, used round-robin.
    #[arg(short = 'l', long = "local-addr")]
    pub local_addr: Vec<IpAddr>,
    /// Output, sampling and time-limit flags (--duration caps the whole run).
    #[command(flatten)]
    pub common: CommonArgs,
}

/// One step of a stream run.
#[derive(Debug, Clone, Serialize)]
pub struct StreamStep {
    /// Consumers receiving.
    pub consumers: usize,
    /// Events per batch.
    pub batch_size: usize,
    /// Interval between batches, ms.
    pub interval_ms: f64,
    /// Consumers × batch size / interval.
    pub target_eps: f64,
    /// Events received per second.
    pub eps: f64,
    /// Batches received per second.
    pub batches_per_s: f64,
    /// Bytes per second received by the consumers (frames included).
    pub bytes_per_s: f64,
    /// Payload bytes of one batch.
    pub batch_bytes: usize,
    /// Batch latency from the send time.
    pub latency: Option<LatencySummary>,
    /// Batches missing by sequence number (over the step and its drain).
    pub lost_batches: u64,
    /// Ticks skipped because the publisher's backlog was full.
    pub skipped_ticks: u64,
    /// The bench's CPU (client), % of one core.
    pub client_cpu_pct: Option<f64>,
    /// The server's CPU, % of one core.
    pub server_cpu_pct: Option<f64>,
    /// Window, seconds since the start.
    pub started_s: f64,
    /// See `started_s`.
    pub ended_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Setup,
    Running,
    Draining,
    Done,
}

/// What consumers received, apart from the clients so that the clients'
/// event callbacks can borrow it.
struct Received {
    enc: Encoding,
    /// Counting (the step is running, not draining).
    running: bool,
    /// Per consumer: last sequence number received.
    recv_seq: Vec<u64>,
    lost: u64,
    events: u64,
    batches: u64,
    hist: Latency,
}

impl Received {
    fn on_batch(&mut self, consumer: usize, data: &[u8], now_ns: i64) {
        let Some(stamp) = herald_wire::read_stamp(self.enc, data) else {
            return;
        };
        if let Some(last) = self.recv_seq.get_mut(consumer) {
            if stamp.seq > *last + 1 {
                self.lost += stamp.seq - *last - 1;
            }
            *last = (*last).max(stamp.seq);
        }
        let n = match self.enc {
            Encoding::Binary => data
                .get(herald_wire::BINARY_STAMP_LEN..herald_wire::BINARY_STAMP_LEN + 4)
                .and_then(|b| b.try_into().ok())
                .map_or(0, |b: [u8; 4]| u64::from(u32::from_be_bytes(b))),
            Encoding::Json => herald_wire::find_key(data, b"\"n\"")
                .and_then(|at| {
                    let rest = data[at + 3..].trim_ascii_start().strip_prefix(b":")?;
                    let rest = rest.trim_ascii_start();
                    let len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                    std::str::from_utf8(&rest[..len]).ok()?.parse().ok()
                })
                .unwrap_or(0),
        };
        if self.running {
            self.events += n;
            self.batches += 1;
            self.hist.record_ns(now_ns - stamp.time_ns);
        }
    }
}

struct Stream {
    /// The publisher (tag 0).
    source: HeraldClients,
    /// The consumers (tags from 1).
    clients: HeraldClients,
    enc: Encoding,
    channels: Vec<String>,
    plan: Vec<(usize, usize)>,
    step: usize,
    interval_ns: i64,
    step_duration: Duration,
    drain: Duration,
    max_backlog: usize,
    deadline: Option<Instant>,
    phase: Phase,
    phase_since: Instant,
    start: Instant,
    t0_ns: i64,
    tick: u64,
    /// Per consumer: next sequence number to send.
    sent_seq: Vec<u64>,
    batches_in: Received,
    skipped: u64,
    window_stats: IoStats,
    steps: Vec<StreamStep>,
    payload: Vec<u8>,
    frame: Vec<u8>,
    monitor: Monitor,
    progress: Progress,
}

impl Stream {
    fn publisher(&self) -> ConnId {
        self.source.clients[0].conn
    }

    fn current(&self) -> (usize, usize) {
        self.plan.get(self.step).copied().unwrap_or((0, 0))
    }

    /// The batch payload: stamp, event count, events.
    fn build_batch(&mut self, consumer: usize, batch: usize, time_ns: i64) {
        self.payload.clear();
        let stamp = Stamp {
            publisher: consumer as u32,
            seq: self.sent_seq[consumer],
            time_ns,
        };
        match self.enc {
            Encoding::Json => {
                herald_wire::stamp_payload(self.enc, stamp, 0, &mut self.payload);
                // Replace the closing `}` of the stamp object with the events.
                self.payload.pop();
                self.payload.extend_from_slice(b",\"n\":");
                herald_wire::write_u64(&mut self.payload, batch as u64);
                self.payload.extend_from_slice(b",\"events\":[");
                for i in 0..batch {
                    if i > 0 {
                        self.payload.push(b',');
                    }
                    self.payload.extend_from_slice(JSON_ROW);
                }
                self.payload.extend_from_slice(b"]}");
            }
            Encoding::Binary => {
                herald_wire::stamp_payload(self.enc, stamp, 0, &mut self.payload);
                self.payload
                    .extend_from_slice(&(batch as u32).to_be_bytes());
                self.payload
                    .resize(self.payload.len() + batch * BINARY_ROW_LEN, 0x5a);
            }
        }
    }

    fn publish_due(&mut self, io: &mut Io) {
        let (consumers, batch) = self.current();
        let now_ns = clock::now_ns();
        let conn = self.publisher();
        let mut budget = 64;
        while budget > 0 {
            let due = self.t0_ns + self.tick as i64 * self.interval_ns;
            if due > now_ns {
                break;
            }
            self.tick += 1;
            budget -= 1;
            if io.pending(conn) > self.max_backlog {
                self.skipped += 1;
                continue;
            }
            for c in 0..consumers {
                self.sent_seq[c] += 1;
                self.build_batch(c, batch, due);
                self.frame.clear();
                let enc = self.source.enc;
                herald_wire::publish(enc, 0, &self.channels[c], &self.payload, &mut self.frame);
                io.queue(conn, herald_wire::opcode(enc), &self.frame);
            }
            io.flush(conn);
        }
    }

    fn begin_step(&mut self, io: &Io, now: Instant) {
        self.phase = Phase::Running;
        self.batches_in.running = true;
        self.phase_since = now;
        self.t0_ns = clock::now_ns();
        self.tick = 0;
        self.batches_in.events = 0;
        self.batches_in.batches = 0;
        self.skipped = 0;
        self.batches_in.lost = 0;
        self.window_stats = io.stats;
        self.batches_in.hist.reset();
    }

    fn finish_step(&mut self, io: &Io, now: Instant) {
        let (consumers, batch) = self.current();
        let secs = (now - self.phase_since).as_secs_f64().max(1e-9);
        let started = (self.phase_since - self.start).as_secs_f64();
        let ended = (now - self.start).as_secs_f64();
        self.monitor.sample(now);
        let samples = &self.monitor.samples;
        let interval_s = self.interval_ns as f64 / 1e9;
        let step = StreamStep {
            consumers,
            batch_size: batch,
            interval_ms: interval_s * 1e3,
            target_eps: consumers as f64 * batch as f64 / interval_s,
            eps: self.batches_in.events as f64 / secs,
            batches_per_s: self.batches_in.batches as f64 / secs,
            bytes_per_s: (io.stats.bytes_in - self.window_stats.bytes_in) as f64 / secs,
            batch_bytes: self.payload.len(),
            latency: self.batches_in.hist.summary(),
            lost_batches: 0,
            skipped_ticks: self.skipped,
            client_cpu_pct: mean_between(samples, started, ended, |s| Some(s.bench_cpu_pct)),
            server_cpu_pct: mean_between(samples, started, ended, |s| s.server_cpu_pct),
            started_s: started,
            ended_s: ended,
        };
        self.progress.clear();
        println!(
            "consumers: {:5}    batch: {:5}    target: {:10.0} ev/s    delivered: {:10.0} ev/s    p99: {:8.2}ms    client cpu: {:5.1}%    server cpu: {:5.1}%{}",
            step.consumers,
            step.batch_size,
            step.target_eps,
            step.eps,
            step.latency.as_ref().map_or(0.0, |l| l.p99_ms),
            step.client_cpu_pct.unwrap_or(f64::NAN),
            step.server_cpu_pct.unwrap_or(f64::NAN),
            if step.skipped_ticks > 0 {
                format!("    skipped ticks: {}", step.skipped_ticks)
            } else {
                String::new()
            }
        );
        self.steps.push(step);
    }
}

impl Scenario for Stream {
    const TAKES_HTTP: bool = true;

    fn group(&mut self, tag: u64) -> &mut HeraldClients {
        if self.clients.owns(tag) {
            &mut self.clients
        } else {
            &mut self.source
        }
    }

    fn on_arrival(&mut self, io: &mut Io, msg: Arrival<'_>) -> Result<(), BenchError> {
        let (tag, now_ns) = (msg.tag, msg.now_ns);
        // The source is always on WebSocket, so an HTTP message is a
        // consumer's.
        if !msg.is_http() && !self.clients.owns(tag) {
            return msg.feed(&mut self.source, io, &mut |_| {});
        }
        let consumer = tag.wrapping_sub(1) as usize;
        let batches = &mut self.batches_in;
        msg.feed(&mut self.clients, io, &mut |ev| {
            if let Event::Pub { data, .. } = ev {
                batches.on_batch(consumer, data, now_ns);
            }
        })
    }

    fn on_close(&mut self, tag: u64, why: CloseReason) -> Result<(), BenchError> {
        let (consumers, batch) = self.current();
        let too_big = matches!(why, CloseReason::ServerClose(Some(1009), _));
        let Err(e) = self.group(tag).on_close(tag, why) else {
            return Ok(());
        };
        let hint = if too_big {
            format!(
                "a batch of {batch} events is {} bytes: raise the server's message size limit (herald serve --max-message-size)",
                self.payload.len()
            )
        } else {
            "a server may disconnect consumers that fall behind".to_owned()
        };
        Err(BenchError::Client(format!(
            "{e} (at {consumers} consumers, batch size {batch}; {hint})"
        )))
    }

    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        let mut next = now + Duration::from_millis(50);
        let out_of_time = self.deadline.is_some_and(|d| now >= d);
        match self.phase {
            Phase::Setup => {
                self.source.tick(io)?;
                self.clients.tick(io)?;
                if self.source.all_ready() && self.clients.all_ready() {
                    self.begin_step(io, now);
                    self.publish_due(io);
                    next = now + Duration::from_nanos(self.interval_ns as u64);
                }
            }
            Phase::Running => {
                self.publish_due(io);
                if now - self.phase_since >= self.step_duration || out_of_time {
                    self.finish_step(io, now);
                    self.phase = Phase::Draining;
                    self.batches_in.running = false;
                    self.phase_since = now;
                } else {
                    let due = self.t0_ns + self.tick as i64 * self.interval_ns;
                    let wait = due - clock::now_ns();
                    next = next
                        .min(now + Duration::from_nanos(wait.max(0) as u64))
                        .min(self.phase_since + self.step_duration);
                }
            }
            Phase::Draining => {
                if now - self.phase_since >= self.drain {
                    if let Some(step) = self.steps.last_mut() {
                        step.lost_batches = self.batches_in.lost;
                    }
                    self.step += 1;
                    if self.step >= self.plan.len() || out_of_time {
                        self.phase = Phase::Done;
                    } else {
                        self.begin_step(io, now);
                        self.publish_due(io);
                        next = now + Duration::from_nanos(self.interval_ns as u64);
                    }
                } else {
                    next = self.phase_since + self.drain;
                }
            }
            Phase::Done => return Ok(Tick::Done),
        }
        let sample = self.monitor.tick(now);
        let (c, b) = self.current();
        let text = format!(
            "[{:>4.0}s] step {}/{} · {c} consumers × batch {b} · {} events",
            (now - self.start).as_secs_f64(),
            self.step + 1,
            self.plan.len(),
            self.batches_in.events
        );
        let show = self.progress.tick(now, || text);
        Ok(Tick::Continue(Some(next.min(sample).min(show))))
    }
}

/// Runs `stream`; returns its steps.
pub fn run(args: &StreamArgs) -> Result<Vec<StreamStep>, BenchError> {
    let max_consumers = args.consumers.iter().copied().max().unwrap_or(0);
    if max_consumers == 0 || args.batch_sizes.is_empty() || args.interval.is_zero() {
        return Err(BenchError::Args(
            "--consumers, --batch-sizes and --interval must be positive".into(),
        ));
    }
    let (kind, scheme) = subscriber_kind(args.transport);
    let target = Target::parse(&args.url)?;
    let enc = args.transport.encoding();
    // The source publishes over WebSocket (raw TCP for tcp consumers), in
    // the consumers' encoding, so only the consumers' transport varies.
    let (source_kind, source_target) = match args.transport {
        Transport::Tcp => (ClientKind::Tcp, target.with_scheme(Scheme::Tcp)?),
        _ => (ClientKind::Ws, target.with_scheme(Scheme::Ws)?),
    };
    let run = run_id();
    let local = args.local_addr.clone();
    let mut source = HeraldClients::with_kind(
        source_kind,
        std::slice::from_ref(&source_target),
        enc,
        local.clone(),
        1,
        0,
    );
    source.add(Vec::new());
    let consumer_target = target.with_scheme(scheme)?;
    let mut clients = HeraldClients::with_kind(
        kind,
        std::slice::from_ref(&consumer_target),
        enc,
        local,
        128,
        1,
    );
    let channels: Vec<String> = (0..max_consumers)
        .map(|c| format!("bench.{run}.stream.{c}"))
        .collect();
    for c in &channels {
        clients.add(vec![c.clone()]);
    }
    let plan: Vec<(usize, usize)> = args
        .consumers
        .iter()
        .flat_map(|&c| args.batch_sizes.iter().map(move |&b| (c, b)))
        .collect();
    let start = Instant::now();
    let started_at = clock::now_secs_f64();
    let mut s = Stream {
        source,
        clients,
        enc,
        channels,
        plan,
        step: 0,
        interval_ns: args.interval.as_nanos() as i64,
        step_duration: args.step_duration,
        drain: args.drain,
        max_backlog: args.max_backlog,
        deadline: args.common.duration.map(|d| start + d),
        phase: Phase::Setup,
        phase_since: start,
        start,
        t0_ns: 0,
        tick: 0,
        sent_seq: vec![0; max_consumers],
        batches_in: Received {
            enc,
            running: false,
            recv_seq: vec![0; max_consumers],
            lost: 0,
            events: 0,
            batches: 0,
            hist: Latency::new(),
        },
        skipped: 0,
        window_stats: IoStats::default(),
        steps: Vec::new(),
        payload: Vec::new(),
        frame: Vec::new(),
        monitor: Monitor::new(args.common.server_pid, &args.common.net_iface, start),
        progress: Progress::new(args.common.quiet, start),
    };
    let mut engine = Engine::new(256 << 20)?;
    let result = engine.run(&mut Adapter(&mut s));
    s.progress.clear();
    let end = Instant::now();
    s.monitor.sample(end);

    let label = args.common.label.clone().unwrap_or_else(|| {
        format!(
            "stream {} every {:?}",
            args.transport.as_str(),
            args.interval
        )
    });
    let mut record = RunRecord::new("stream", label, started_at);
    record.duration_s = (end - start).as_secs_f64();
    record.params = json!({
        "url": args.url,
        "transport": args.transport,
        "consumers": args.consumers,
        "batch_sizes": args.batch_sizes,
        "interval_ms": args.interval.as_secs_f64() * 1e3,
        "step_duration_s": args.step_duration.as_secs_f64(),
        "drain_s": args.drain.as_secs_f64(),
        "max_backlog": args.max_backlog,
    });
    record.steps = s
        .steps
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()
        .map_err(BenchError::Json)?;
    record.summary = json!({
        "max_eps": s.steps.iter().map(|x| x.eps).fold(0.0, f64::max),
        "steps": s.steps.len(),
        "lost_batches": s.steps.iter().map(|x| x.lost_batches).sum::<u64>(),
    });
    record.passed = s.steps.iter().all(|x| x.lost_batches == 0);
    record.system = std::mem::take(&mut s.monitor.samples);
    record.write_after(
        result,
        args.common.out.as_deref(),
        args.common.csv.as_deref(),
    )?;
    Ok(s.steps)
}
