//! `fanout`: P publishers at a total rate of R messages per second to N
//! subscribers spread over C channels, over Herald's protocol.
//!
//! Open loop on a fixed schedule: message `m` (from 0) is due at
//! `t0 + m / R`, is sent by publisher `m % P` to channel `(m / P) % C`, and
//! carries its *scheduled* time. Latency is measured from that scheduled
//! time, not from when the bench got round to sending it, so a server (or
//! bench) stall shows up in the latency of every message it delayed instead
//! of silently lowering the send rate (coordinated omission). Messages due
//! while the loop was busy are sent in a burst as soon as it is free. The
//! loop wakes at millisecond granularity, so at high rates messages leave in
//! small batches (one write per publisher per wake-up); that lateness is
//! included in the latency, and the largest sending lag is reported.
//!
//! Subscriber `i` subscribes to channel `i % C`. Each payload carries the
//! publisher's index and a sequence number counted per publisher and
//! channel, so each subscriber checks, per publisher, that sequence numbers
//! arrive once and in order (a 64-message window tells a late message from a
//! duplicate). At the end, after a drain, every subscriber should have
//! received every message sent to its channel exactly once, in order:
//! anything else is reported as lost, duplicated or out of order, and fails
//! the run unless `--allow-loss`.
//!
//! Publishers use id 0 (no reply wanted); error replies are counted.
//!
//! # Transports
//! Subscribers use `--transport`: `ws-json`, `ws-binary`, `tcp` (raw TCP,
//! a `tcp://` URL), `sse` or `poll` (an `http://` URL; `ws://` works too,
//! only its host is used). Publishers use `--publish-via`, by default the
//! same transport for `ws-json`, `ws-binary` and `tcp`, and the HTTP publish
//! API (`POST /api/publish`, pipelined on keep-alive connections) for `sse`
//! and `poll`, which cannot publish. Payloads carry the subscribers'
//! stamp encoding (binary for `ws-binary` and `tcp`, JSON otherwise), so a
//! binary stamp needs a binary publisher.
//!
//! # Churn, recovery and fail-over
//! With `--churn F`, a fraction F of the subscribers, spread evenly over the
//! publishing time, drop their connection, stay away `--churn-downtime`,
//! and reconnect subscribing with `recover` from their last position (SSE:
//! `Last-Event-ID`; long-polling: a new session). With history on, the
//! server sends what they missed, so lost and duplicated must stay 0;
//! publications received through recovery are counted as `recovered` (and
//! kept out of the latency histogram), recoveries the server could not
//! complete as `failed_recoveries`. Several URLs (`URL,URL` or `--url`
//! repeated) spread subscribers round-robin; a subscriber that loses its
//! connection (with `--reconnect`, implied by `--churn` and by several URLs)
//! reconnects to the next URL and recovers the same way. Publishers use the
//! first URL (`--publish-url` to choose) and losing one is fatal.
//!
//! # The Pusher protocol
//! With `--protocol pusher`, subscribers speak Pusher Channels 7 on
//! `/app/KEY?protocol=7` of the same server and subscribe to the public
//! Pusher channel `bench.<run>.<c>`; publishers stay on Herald's protocol
//! and publish the same payloads to its Herald channel
//! `pusher-ID:bench.<run>.<c>` (docs/pusher.md). The publish side is thus the
//! same in both runs and a comparison isolates the delivery path. The
//! payload is not a Pusher envelope, so it reaches Pusher clients as event
//! `message` with the payload's text as the data string; the stamp is read
//! from that string in place. Pusher has no recovery: `--churn`,
//! `--reconnect` and several URLs are refused.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use herald_proto::Encoding;
use serde::Serialize;
use serde_json::{json, Value};

use crate::clock;
use crate::common::{CommonArgs, Protocol, PusherFlags, Transport};
use crate::delivery::{Checker, SeqTrack, SubCounts};
use crate::duration::parse_duration;
use crate::engine::{Engine, Io, Tick};
use crate::hclients::{run_id, ClientKind, Event, HeraldClients, ReconnectStats};
use crate::herald_wire::{self, Stamp};
use crate::http1;
use crate::latency::{Latency, LatencySummary};
use crate::output::RunRecord;
use crate::progress::Progress;
use crate::scenario::{Adapter, Arrival, Scenario};
use crate::sysmon::Monitor;
use crate::target::{Scheme, Target};
use crate::BenchError;

/// Tags of subscriber connections start here (publishers' at 0).
const SUB_TAGS: u64 = 1 << 40;

/// How publishers reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PublishVia {
    /// WebSocket, JSON.
    WsJson,
    /// WebSocket, binary.
    WsBinary,
    /// Raw TCP (binary).
    Tcp,
    /// `POST /api/publish`, pipelined on keep-alive connections.
    Http,
}

impl PublishVia {
    /// The default for subscribers on `t`.
    pub fn default_for(t: Transport) -> PublishVia {
        match t {
            Transport::WsJson => PublishVia::WsJson,
            Transport::WsBinary => PublishVia::WsBinary,
            Transport::Tcp => PublishVia::Tcp,
            Transport::Sse | Transport::Poll => PublishVia::Http,
        }
    }

    fn kind(self) -> (ClientKind, Encoding, Scheme) {
        match self {
            PublishVia::WsJson => (ClientKind::Ws, Encoding::Json, Scheme::Ws),
            PublishVia::WsBinary => (ClientKind::Ws, Encoding::Binary, Scheme::Ws),
            PublishVia::Tcp => (ClientKind::Tcp, Encoding::Binary, Scheme::Tcp),
            PublishVia::Http => (ClientKind::Api, Encoding::Json, Scheme::Http),
        }
    }
}

/// The client kind and URL scheme of subscribers on `t`.
pub(crate) fn subscriber_kind(t: Transport) -> (ClientKind, Scheme) {
    match t {
        Transport::WsJson | Transport::WsBinary => (ClientKind::Ws, Scheme::Ws),
        Transport::Tcp => (ClientKind::Tcp, Scheme::Tcp),
        Transport::Sse => (ClientKind::Sse, Scheme::Http),
        Transport::Poll => (ClientKind::Poll, Scheme::Http),
    }
}

/// Parses the URLs (each may be a comma-separated list) for `scheme`.
pub(crate) fn parse_urls(urls: &[String], scheme: Scheme) -> Result<Vec<Target>, BenchError> {
    let mut out = Vec::new();
    for u in urls.iter().flat_map(|u| u.split(',')) {
        let u = u.trim();
        if !u.is_empty() {
            out.push(Target::parse(u)?.with_scheme(scheme)?);
        }
    }
    if out.is_empty() {
        return Err(BenchError::Args("give at least one server URL".into()));
    }
    Ok(out)
}

/// Arguments of `fanout`.
#[derive(Debug, Clone, clap::Args)]
pub struct FanoutArgs {
    /// Herald's URL(s): ws://127.0.0.1:8080/ws for WebSocket, tcp://HOST:PORT
    /// for raw TCP, http://127.0.0.1:8080 for sse and poll. Several
    /// (comma-separated, or with --url): subscriber i starts at URL i % n.
    #[arg(value_delimiter = ',')]
    pub url: Vec<String>,
    /// More server URLs (repeatable), after the positional ones.
    #[arg(long = "url", value_delimiter = ',')]
    pub more_urls: Vec<String>,
    /// Subscribers' transport: ws-json, ws-binary, tcp, sse or poll.
    #[arg(long, value_enum, default_value = "ws-json")]
    pub transport: Transport,
    /// Publishers' path: ws-json, ws-binary, tcp or http (the publish API).
    /// Default: the subscribers' transport; http for sse and poll.
    #[arg(long, value_enum)]
    pub publish_via: Option<PublishVia>,
    /// Where publishers connect (default: the first URL, converted to the
    /// publishers' scheme; needed when that is raw TCP and the other is not).
    #[arg(long)]
    pub publish_url: Option<String>,
    /// Publishing connections.
    #[arg(short = 'p', long, default_value_t = 1)]
    pub publishers: usize,
    /// Subscribing connections.
    #[arg(short = 'n', long, default_value_t = 100)]
    pub subscribers: usize,
    /// Channels; subscriber i takes channel i % C.
    #[arg(short = 'C', long, default_value_t = 1)]
    pub channels: usize,
    /// Total publish rate, messages per second, over all publishers.
    #[arg(short = 'r', long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Payload size in bytes (at least the stamp: ~40 in JSON, 22 in binary).
    #[arg(short = 's', long, default_value_t = 64)]
    pub payload: usize,
    /// Longest wait after the last publish for deliveries to arrive.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub drain: Duration,
    /// Report loss, duplicates and reordering without failing the run.
    #[arg(long)]
    pub allow_loss: bool,
    /// Also report lost, duplicated and out-of-order deliveries per
    /// subscriber (result file `verification.subscribers`; the worst on stderr).
    #[arg(long)]
    pub verify: bool,
    /// Fraction of subscribers (0 to 1) that disconnect once during the
    /// run, spread over it, and reconnect recovering what they missed.
    #[arg(long, default_value_t = 0.0)]
    pub churn: f64,
    /// How long a churned subscriber stays away.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    pub churn_downtime: Duration,
    /// Subscribers that lose their connection reconnect (to the next URL)
    /// and recover instead of failing the run (implied by --churn and by
    /// several URLs).
    #[arg(long)]
    pub reconnect: bool,
    /// Local (source) addresses, used round-robin.
    #[arg(short = 'l', long = "local-addr")]
    pub local_addr: Vec<IpAddr>,
    /// Connects in progress at once.
    #[arg(long, default_value_t = 128)]
    pub connect_concurrency: usize,
    /// The subscribers' protocol (herald or pusher) and the Pusher app.
    #[command(flatten)]
    pub pusher: PusherFlags,
    /// Output, sampling and time-limit flags (--duration defaults to 10s:
    /// how long publishers publish).
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The resolved parameters, as written to the result file.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutParams {
    /// The URLs, in subscriber order.
    pub urls: Vec<String>,
    /// The first URL (kept for older reports).
    pub url: String,
    /// Subscribers' transport.
    pub transport: Transport,
    /// Subscribers' protocol.
    pub protocol: Protocol,
    /// The Pusher app key (`--protocol pusher`).
    pub pusher_key: Option<String>,
    /// Publishers' path.
    pub publish_via: PublishVia,
    /// Where publishers connect.
    pub publish_url: String,
    /// Publishing connections.
    pub publishers: usize,
    /// Subscribing connections.
    pub subscribers: usize,
    /// Channels.
    pub channels: usize,
    /// Messages per second, all publishers together.
    pub rate: f64,
    /// Payload bytes.
    pub payload: usize,
    /// Publishing time, seconds.
    pub duration_s: f64,
    /// Drain limit, seconds.
    pub drain_s: f64,
    /// Fraction of subscribers churned.
    pub churn: f64,
    /// Churn downtime, seconds.
    pub churn_downtime_s: f64,
    /// Subscribers reconnect when their connection is lost.
    pub reconnect: bool,
    /// Channel names are `bench.<run>.<c>` (with `--protocol pusher`,
    /// Pusher names; publishers use `pusher-ID:bench.<run>.<c>`).
    pub channel_prefix: String,
}

/// Totals of a fanout run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FanoutSummary {
    /// Messages published.
    pub sent: u64,
    /// Deliveries that should have happened (sent to a channel × its subscribers).
    pub expected: u64,
    /// Distinct deliveries received (live and recovered).
    pub delivered: u64,
    /// Deliveries per second over the publishing time.
    pub delivered_per_s: f64,
    /// Expected deliveries never received.
    pub lost: u64,
    /// Deliveries received more than once.
    pub duplicated: u64,
    /// Deliveries that arrived after a later one of the same publisher and channel.
    pub out_of_order: u64,
    /// Pushes whose payload carried no readable stamp.
    pub unreadable: u64,
    /// Error replies the server sent (API publishers: non-2xx answers).
    pub errors: u64,
    /// The code of the first error (API publishers: the HTTP status).
    pub first_error_code: Option<u16>,
    /// Publications received through recovery after a reconnect (SSE:
    /// those scheduled before the resuming request, an approximation).
    pub recovered: u64,
    /// Recovering subscribes the server could not complete.
    pub failed_recoveries: u64,
    /// Subscriber connection losses, churns and reconnects.
    pub reconnects: ReconnectStats,
    /// The largest lag of the sending loop behind the schedule, ms.
    pub max_send_lag_ms: f64,
    /// Delivery latency from the scheduled send time (live deliveries).
    pub latency: Option<LatencySummary>,
    /// Time to connect and subscribe everyone, seconds.
    pub setup_s: f64,
}

impl FanoutSummary {
    /// No loss, no duplicates, no reordering, no unreadable pushes, no
    /// errors, no failed recovery.
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.out_of_order == 0
            && self.unreadable == 0
            && self.errors == 0
            && self.failed_recoveries == 0
    }
}

/// One subscriber's verification.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SubscriberCheck {
    /// Its index.
    pub subscriber: usize,
    /// Its channel.
    pub channel: usize,
    /// Publications sent to its channel.
    pub expected: u64,
    /// Distinct ones received.
    pub delivered: u64,
    /// Never received.
    pub lost: u64,
    /// Received more than once.
    pub duplicated: u64,
    /// Received after a later one.
    pub out_of_order: u64,
    /// Received through recovery.
    pub recovered: u64,
    /// Recoveries the server could not complete.
    pub failed_recoveries: u64,
}

/// One second of the run.
#[derive(Debug, Clone, Serialize)]
struct Interval {
    t: f64,
    sent: u64,
    delivered: u64,
    latency: Option<LatencySummary>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Setup,
    Publishing,
    Draining,
    Done,
}

struct Fanout {
    p: FanoutParams,
    pubs: HeraldClients,
    subs: HeraldClients,
    pub_enc: Encoding,
    publish_host: String,
    channel_names: Vec<String>,
    /// Publisher p's next sequence number per channel: `[p * C + c]`.
    next_seq: Vec<u64>,
    sent_per_channel: Vec<u64>,
    subs_per_channel: Vec<u64>,
    check: Checker,
    phase: Phase,
    phase_since: Instant,
    start: Instant,
    t0_ns: i64,
    next_m: u64,
    total_msgs: u64,
    churn_total: usize,
    churn_next: usize,
    payload: Vec<u8>,
    body: Vec<u8>,
    frame: Vec<u8>,
    dirty: Vec<bool>,
    next_interval: Instant,
    timeline: Vec<Interval>,
    monitor: Monitor,
    progress: Progress,
}

impl Fanout {
    fn sched_ns(&self, m: u64) -> i64 {
        self.t0_ns + (m as f64 * 1e9 / self.p.rate) as i64
    }

    fn publish_due(&mut self, io: &mut Io) {
        let now_ns = clock::now_ns();
        let pubs = self.p.publishers;
        let chans = self.p.channels;
        let stamp_enc = self.check.enc;
        let mut budget = 20_000;
        while self.next_m < self.total_msgs && budget > 0 {
            let m = self.next_m;
            let due = self.sched_ns(m);
            if due > now_ns {
                break;
            }
            let lag_ms = (now_ns - due) as f64 / 1e6;
            if lag_ms > self.check.sum.max_send_lag_ms {
                self.check.sum.max_send_lag_ms = lag_ms;
            }
            let publisher = (m % pubs as u64) as usize;
            let channel = ((m / pubs as u64) % chans as u64) as usize;
            let seq_slot = publisher * chans + channel;
            self.next_seq[seq_slot] += 1;
            let stamp = Stamp {
                publisher: publisher as u32,
                seq: self.next_seq[seq_slot],
                time_ns: due,
            };
            self.payload.clear();
            herald_wire::stamp_payload(stamp_enc, stamp, self.p.payload, &mut self.payload);
            let conn = self.pubs.clients[publisher].conn;
            let name = &self.channel_names[channel];
            self.frame.clear();
            if self.pubs.kind == ClientKind::Api {
                self.body.clear();
                herald_wire::api_publish_body(name, &self.payload, &mut self.body);
                http1::write_request(
                    &mut self.frame,
                    "POST",
                    &self.publish_host,
                    "/api/publish",
                    &[("Content-Type", "application/json")],
                    Some(&self.body),
                );
                io.queue_raw(conn, &self.frame);
            } else {
                herald_wire::publish(self.pub_enc, 0, name, &self.payload, &mut self.frame);
                io.queue(conn, herald_wire::opcode(self.pub_enc), &self.frame);
            }
            self.dirty[publisher] = true;
            self.sent_per_channel[channel] += 1;
            self.check.sum.sent += 1;
            self.check.interval_sent += 1;
            self.next_m += 1;
            budget -= 1;
        }
        for (publisher, dirty) in self.dirty.iter_mut().enumerate() {
            if *dirty {
                *dirty = false;
                io.flush(self.pubs.clients[publisher].conn);
            }
        }
    }

    /// The scheduled time of churn `k`: spread evenly over the publishing time.
    fn churn_due_ns(&self, k: usize) -> i64 {
        let span = self.p.duration_s * 1e9;
        self.t0_ns + ((k as f64 + 0.5) / self.churn_total as f64 * span) as i64
    }

    fn churn_due(&mut self, io: &mut Io) {
        let now_ns = clock::now_ns();
        let down = Duration::from_secs_f64(self.p.churn_downtime_s);
        while self.churn_next < self.churn_total && self.churn_due_ns(self.churn_next) <= now_ns {
            let sub = self.churn_next * self.p.subscribers / self.churn_total;
            let c = &self.subs.clients[sub];
            // A subscriber with no position yet (an SSE stream before its
            // first event) could not resume: wait for it.
            if c.position.is_none() && c.state == crate::hclients::State::Ready {
                break;
            }
            self.subs.churn(io, sub, down);
            self.churn_next += 1;
        }
    }

    fn expected(&self) -> u64 {
        self.sent_per_channel
            .iter()
            .zip(&self.subs_per_channel)
            .map(|(s, n)| s * n)
            .sum()
    }

    fn close_interval(&mut self, now: Instant) {
        let c = &mut self.check;
        self.timeline.push(Interval {
            t: (now - self.start).as_secs_f64(),
            sent: c.interval_sent,
            delivered: c.interval_delivered,
            latency: c.interval_hist.summary(),
        });
        c.interval_sent = 0;
        c.interval_delivered = 0;
        c.interval_hist.reset();
    }

    fn progress_text(&self, now: Instant) -> String {
        let what = match self.phase {
            Phase::Setup => format!(
                "setup {}/{}",
                self.pubs.ready() + self.subs.ready(),
                self.pubs.clients.len() + self.subs.clients.len()
            ),
            Phase::Publishing => "publishing".into(),
            Phase::Draining => "draining".into(),
            Phase::Done => "done".into(),
        };
        let p99 = self.check.hist.summary().map_or(0.0, |s| s.p99_ms);
        format!(
            "[{:>4.0}s] {what} · sent {} · delivered {}/{} · p99 {:.1}ms",
            (now - self.start).as_secs_f64(),
            self.check.sum.sent,
            self.check.sum.delivered,
            self.expected(),
            p99
        )
    }

    fn sub_index(&self, tag: u64) -> usize {
        (tag - SUB_TAGS) as usize
    }
}

impl Scenario for Fanout {
    const TAKES_HTTP: bool = true;

    fn group(&mut self, tag: u64) -> &mut HeraldClients {
        if self.subs.owns(tag) {
            &mut self.subs
        } else {
            &mut self.pubs
        }
    }

    fn on_arrival(&mut self, io: &mut Io, msg: Arrival<'_>) -> Result<(), BenchError> {
        let (tag, now_ns) = (msg.tag, msg.now_ns);
        if self.subs.owns(tag) {
            let sub = self.sub_index(tag);
            let check = &mut self.check;
            msg.feed(&mut self.subs, io, &mut |ev| {
                check.on_sub_event(sub, ev, now_ns);
            })
        } else {
            // Only the publish API's answers are counted: the drain waits
            // for them (WebSocket and TCP publishers' replies are not).
            let api = msg.is_http();
            let check = &mut self.check;
            msg.feed(&mut self.pubs, io, &mut |ev| match ev {
                Event::Error { code, .. } => check.error(code),
                Event::Reply { .. } if api => check.api_answers += 1,
                _ => {}
            })
        }
    }

    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        let mut next = now + Duration::from_millis(100);
        self.subs.tick(io)?;
        match self.phase {
            Phase::Setup => {
                self.pubs.tick(io)?;
                if self.pubs.all_ready() && self.subs.all_ready() {
                    self.check.sum.setup_s = (now - self.phase_since).as_secs_f64();
                    self.phase = Phase::Publishing;
                    self.phase_since = now;
                    // Start on a clean slate a little later, so the first
                    // messages do not queue behind setup traffic.
                    self.t0_ns = clock::now_ns() + 50_000_000;
                    self.next_interval = now + Duration::from_millis(1050);
                    next = now + Duration::from_millis(50);
                }
            }
            Phase::Publishing => {
                self.publish_due(io);
                self.churn_due(io);
                if self.next_m >= self.total_msgs && self.churn_next >= self.churn_total {
                    self.phase = Phase::Draining;
                    self.phase_since = now;
                } else {
                    let mut wait = i64::MAX;
                    if self.next_m < self.total_msgs {
                        wait = self.sched_ns(self.next_m) - clock::now_ns();
                    }
                    if self.churn_next < self.churn_total {
                        let c = self.churn_due_ns(self.churn_next) - clock::now_ns();
                        wait = wait.min(c.max(1_000_000));
                    }
                    next = next.min(now + Duration::from_nanos(wait.max(0) as u64));
                }
            }
            Phase::Draining => {
                let complete = self.check.sum.delivered >= self.expected()
                    && self.subs.all_ready()
                    && (self.pubs.kind != ClientKind::Api
                        || self.check.api_answers + self.check.sum.errors >= self.check.sum.sent);
                if complete || now - self.phase_since >= Duration::from_secs_f64(self.p.drain_s) {
                    self.phase = Phase::Done;
                }
            }
            Phase::Done => return Ok(Tick::Done),
        }
        if let Some(r) = self.subs.next_retry() {
            next = next.min(r.max(now + Duration::from_millis(1)));
        }
        if matches!(self.phase, Phase::Publishing | Phase::Draining) && now >= self.next_interval {
            self.close_interval(now);
            self.next_interval += Duration::from_secs(1);
        }
        if matches!(self.phase, Phase::Publishing | Phase::Draining) {
            next = next.min(self.next_interval);
        }
        let sample = self.monitor.tick(now);
        let show = {
            let text = self.progress_text(now);
            self.progress.tick(now, || text)
        };
        Ok(Tick::Continue(Some(next.min(sample).min(show))))
    }
}

/// Runs `fanout`; fails when a delivery was lost, duplicated or reordered,
/// or a recovery failed (unless `--allow-loss`), after writing the result files.
pub fn run(args: &FanoutArgs) -> Result<FanoutSummary, BenchError> {
    let (summary, record) = measure(args)?;
    if !record.passed {
        return Err(BenchError::Verification(format!(
            "{} lost, {} duplicated, {} out of order, {} unreadable of {} expected deliveries; {} error replies; {} failed recoveries",
            summary.lost, summary.duplicated, summary.out_of_order, summary.unreadable, summary.expected, summary.errors, summary.failed_recoveries
        )));
    }
    Ok(summary)
}

/// Runs `fanout` and returns its summary and record whether or not it was clean.
pub fn measure(args: &FanoutArgs) -> Result<(FanoutSummary, RunRecord), BenchError> {
    let plan = plan(args)?;
    let (mut f, started_at) = build(args, plan);
    let mut engine = Engine::new(64 << 20)?;
    let result = engine.run(&mut Adapter(&mut f));
    f.progress.clear();
    let end = Instant::now();
    f.monitor.sample(end);
    if f.check.interval_sent > 0 || f.check.interval_delivered > 0 {
        f.close_interval(end);
    }

    finish(args, f, result, started_at, end)
}

/// What `fanout` connects to and how, checked and worked out from its
/// arguments before anything connects.
struct Plan {
    /// The run's parameters, as recorded.
    p: FanoutParams,
    /// The subscribers' servers (with Pusher's path when `pusher`).
    targets: Vec<Target>,
    /// The subscribers' transport.
    sub_kind: ClientKind,
    /// The subscribers' encoding, and so the stamps'.
    stamp_enc: Encoding,
    /// The publishers' transport.
    pub_kind: ClientKind,
    /// The publishers' encoding.
    pub_enc: Encoding,
    /// The publishers' server.
    pub_target: Target,
    /// Subscribers speak Pusher's protocol.
    pusher: bool,
}

/// Checks `fanout`'s arguments and works out its [`Plan`].
fn plan(args: &FanoutArgs) -> Result<Plan, BenchError> {
    if args.publishers == 0 || args.channels == 0 || args.rate.is_nan() || args.rate <= 0.0 {
        return Err(BenchError::Args(
            "--publishers, --channels and --rate must be positive".into(),
        ));
    }
    if !(0.0..=1.0).contains(&args.churn) {
        return Err(BenchError::Args("--churn must be between 0 and 1".into()));
    }
    let duration = args.common.duration.unwrap_or(Duration::from_secs(10));
    let pusher = args.pusher.protocol == Protocol::Pusher;
    let (mut sub_kind, sub_scheme) = subscriber_kind(args.transport);
    let mut all_urls = args.url.clone();
    all_urls.extend(args.more_urls.iter().cloned());
    let targets = parse_urls(&all_urls, sub_scheme)?;
    let stamp_enc = args.transport.encoding();
    let via = args
        .publish_via
        .unwrap_or_else(|| PublishVia::default_for(args.transport));
    let (pub_kind, pub_enc, pub_scheme) = via.kind();
    if stamp_enc == Encoding::Binary && pub_enc == Encoding::Json {
        return Err(BenchError::Args(format!(
            "--transport {} carries binary payloads: publish with ws-binary or tcp, not {via:?}",
            args.transport.as_str()
        )));
    }
    let pub_target = match &args.publish_url {
        Some(u) => Target::parse(u)?.with_scheme(pub_scheme)?,
        None => targets[0]
            .with_scheme(pub_scheme)
            .map_err(|e| BenchError::Args(format!("publishers need --publish-url: {e}")))?,
    };
    let reconnect = args.reconnect || args.churn > 0.0 || targets.len() > 1;
    let targets = if pusher {
        if args.transport != Transport::WsJson || reconnect {
            return Err(BenchError::Args(
                "--protocol pusher needs --transport ws-json, one URL, and no --churn or --reconnect (Pusher has no recovery)".into(),
            ));
        }
        sub_kind = ClientKind::Pusher;
        let path = args.pusher.path();
        targets.iter().map(|t| t.with_path(&path)).collect()
    } else {
        targets
    };
    let run = run_id();
    let p = FanoutParams {
        urls: all_urls
            .iter()
            .flat_map(|u| u.split(','))
            .map(str::to_owned)
            .collect(),
        url: all_urls.first().cloned().unwrap_or_default(),
        transport: args.transport,
        protocol: args.pusher.protocol,
        pusher_key: pusher.then(|| args.pusher.pusher_key.clone()),
        publish_via: via,
        publish_url: format!(
            "{:?}://{}{}",
            pub_target.scheme, pub_target.host, pub_target.path
        )
        .to_lowercase(),
        publishers: args.publishers,
        subscribers: args.subscribers,
        channels: args.channels,
        rate: args.rate,
        payload: args.payload,
        duration_s: duration.as_secs_f64(),
        drain_s: args.drain.as_secs_f64(),
        churn: args.churn,
        churn_downtime_s: args.churn_downtime.as_secs_f64(),
        reconnect,
        channel_prefix: format!("bench.{run}"),
    };
    Ok(Plan {
        p,
        targets,
        sub_kind,
        stamp_enc,
        pub_kind,
        pub_enc,
        pub_target,
        pusher,
    })
}

/// Builds the publishers, the subscribers and the scenario for `plan`;
/// also returns the wall-clock start (Unix seconds) for the record.
fn build(args: &FanoutArgs, plan: Plan) -> (Fanout, f64) {
    let p = plan.p;
    let (pusher, reconnect) = (plan.pusher, p.reconnect);
    let mut pubs = HeraldClients::with_kind(
        plan.pub_kind,
        std::slice::from_ref(&plan.pub_target),
        plan.pub_enc,
        args.local_addr.clone(),
        args.connect_concurrency,
        0,
    );
    let mut subs = HeraldClients::with_kind(
        plan.sub_kind,
        &plan.targets,
        plan.stamp_enc,
        args.local_addr.clone(),
        args.connect_concurrency,
        SUB_TAGS,
    );
    // Subscribers' names; publishers' are Herald's (the same with Herald's
    // protocol, the Pusher app's namespace in front with Pusher's).
    let sub_channels: Vec<String> = (0..p.channels)
        .map(|c| format!("{}.{c}", p.channel_prefix))
        .collect();
    let channel_names: Vec<String> = if pusher {
        sub_channels
            .iter()
            .map(|n| args.pusher.herald_channel(n))
            .collect()
    } else {
        sub_channels.clone()
    };
    for _ in 0..p.publishers {
        pubs.add(Vec::new());
    }
    let mut subs_per_channel = vec![0u64; p.channels];
    for s in 0..p.subscribers {
        let c = s % p.channels;
        subs_per_channel[c] += 1;
        let i = subs.add(vec![sub_channels[c].clone()]);
        subs.clients[i].resilient = reconnect;
    }
    let start = Instant::now();
    let started_at = clock::now_secs_f64();
    let total_msgs = (p.rate * p.duration_s).round() as u64;
    let churn_total = (p.churn * p.subscribers as f64).round() as usize;
    let f = Fanout {
        next_seq: vec![0; p.publishers * p.channels],
        sent_per_channel: vec![0; p.channels],
        subs_per_channel,
        check: Checker {
            enc: plan.stamp_enc,
            pusher,
            publishers: p.publishers,
            tracks: vec![SeqTrack::default(); p.subscribers * p.publishers],
            subs: vec![SubCounts::default(); p.subscribers],
            sum: FanoutSummary::default(),
            hist: Latency::new(),
            interval_hist: Latency::new(),
            interval_sent: 0,
            interval_delivered: 0,
            api_answers: 0,
        },
        channel_names,
        pubs,
        subs,
        pub_enc: plan.pub_enc,
        publish_host: plan.pub_target.host.clone(),
        phase: Phase::Setup,
        phase_since: start,
        start,
        t0_ns: 0,
        next_m: 0,
        total_msgs,
        churn_total,
        churn_next: 0,
        payload: Vec::with_capacity(p.payload + 64),
        body: Vec::with_capacity(p.payload + 128),
        frame: Vec::with_capacity(p.payload + 256),
        dirty: vec![false; p.publishers],
        next_interval: start,
        timeline: Vec::new(),
        monitor: Monitor::new(args.common.server_pid, &args.common.net_iface, start),
        progress: Progress::new(args.common.quiet, start),
        p,
    };
    (f, started_at)
}

/// Sums up a finished run (`result` is the engine's), writes the result
/// files and prints the summary.
fn finish(
    args: &FanoutArgs,
    mut f: Fanout,
    result: Result<(), BenchError>,
    started_at: f64,
    end: Instant,
) -> Result<(FanoutSummary, RunRecord), BenchError> {
    let start = f.start;
    let pusher = f.check.pusher;
    let mut sum = f.check.sum.clone();
    sum.expected = f.expected();
    sum.lost = sum.expected.saturating_sub(sum.delivered);
    sum.delivered_per_s = sum.delivered as f64 / f.p.duration_s.max(1e-9);
    sum.latency = f.check.hist.summary();
    sum.reconnects = f.subs.stats;
    let passed = sum.clean() || args.allow_loss;

    let per_sub: Vec<SubscriberCheck> = f
        .check
        .subs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let channel = i % f.p.channels;
            let expected = f.sent_per_channel[channel];
            SubscriberCheck {
                subscriber: i,
                channel,
                expected,
                delivered: c.delivered,
                lost: expected.saturating_sub(c.delivered),
                duplicated: c.duplicated,
                out_of_order: c.out_of_order,
                recovered: c.recovered,
                failed_recoveries: c.failed_recoveries,
            }
        })
        .collect();

    let label = args.common.label.clone().unwrap_or_else(|| {
        let proto = if pusher { " pusher" } else { "" };
        format!(
            "fanout {}{proto} {}p {}s {}c {}/s",
            f.p.transport.as_str(),
            f.p.publishers,
            f.p.subscribers,
            f.p.channels,
            f.p.rate
        )
    });
    let mut record = RunRecord::new("fanout", label, started_at);
    record.duration_s = (end - start).as_secs_f64();
    record.params = serde_json::to_value(&f.p).map_err(BenchError::Json)?;
    record.steps = f
        .timeline
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<Value>, _>>()
        .map_err(BenchError::Json)?;
    record.summary = serde_json::to_value(&sum).map_err(BenchError::Json)?;
    let mut verification = json!({
        "expected": sum.expected,
        "delivered": sum.delivered,
        "lost": sum.lost,
        "duplicated": sum.duplicated,
        "out_of_order": sum.out_of_order,
        "unreadable": sum.unreadable,
        "errors": sum.errors,
        "recovered": sum.recovered,
        "failed_recoveries": sum.failed_recoveries,
        "subscribers_with_loss": per_sub.iter().filter(|s| s.lost > 0).count(),
        "subscribers_with_duplicates": per_sub.iter().filter(|s| s.duplicated > 0).count(),
        "subscribers_out_of_order": per_sub.iter().filter(|s| s.out_of_order > 0).count(),
    });
    if args.verify {
        verification["subscribers"] = serde_json::to_value(&per_sub).map_err(BenchError::Json)?;
    }
    record.verification = Some(verification);
    record.passed = sum.clean();
    record.system = std::mem::take(&mut f.monitor.samples);
    record.write_after(
        result,
        args.common.out.as_deref(),
        args.common.csv.as_deref(),
    )?;

    print_summary(&f.p, &sum);
    if args.verify {
        print_subscribers(&per_sub, args.common.quiet);
    }
    record.passed = passed;
    Ok((sum, record))
}

/// The per-subscriber verification on stderr: counts, and the worst ten.
fn print_subscribers(per_sub: &[SubscriberCheck], quiet: bool) {
    if quiet {
        return;
    }
    let bad: Vec<&SubscriberCheck> = per_sub
        .iter()
        .filter(|s| s.lost + s.duplicated + s.out_of_order + s.failed_recoveries > 0)
        .collect();
    eprintln!(
        "verify: {} of {} subscribers received every publication of their channel exactly once, in order",
        per_sub.len() - bad.len(),
        per_sub.len()
    );
    let mut worst = bad;
    worst.sort_by_key(|s| std::cmp::Reverse(s.lost + s.duplicated + s.out_of_order));
    for s in worst.iter().take(10) {
        eprintln!(
            "  subscriber {:6} (channel {}): expected {} delivered {} lost {} duplicated {} out-of-order {} recovered {} failed recoveries {}",
            s.subscriber, s.channel, s.expected, s.delivered, s.lost, s.duplicated, s.out_of_order, s.recovered, s.failed_recoveries
        );
    }
}

fn print_summary(p: &FanoutParams, s: &FanoutSummary) {
    let proto = match p.protocol {
        Protocol::Herald => "",
        Protocol::Pusher => " over the Pusher protocol",
    };
    println!(
        "fanout {}{proto} (publishers via {:?}): {} publishers -> {} subscribers on {} channels, {}/s for {:.0}s, {} B payloads",
        p.transport.as_str(),
        p.publish_via,
        p.publishers,
        p.subscribers,
        p.channels,
        p.rate,
        p.duration_s,
        p.payload
    );
    println!(
        "sent: {}    delivered: {}/{} ({:.0}/s)    lost: {}    duplicated: {}    out-of-order: {}    errors: {}",
        s.sent, s.delivered, s.expected, s.delivered_per_s, s.lost, s.duplicated, s.out_of_order, s.errors
    );
    let r = &s.reconnects;
    if r.lost + r.churned > 0 {
        println!(
            "reconnects: {} churned    {} lost    {} reconnected    {} to another URL    recovered: {}    failed recoveries: {}",
            r.churned, r.lost, r.reconnected, r.failovers, s.recovered, s.failed_recoveries
        );
    }
    if let Some(l) = &s.latency {
        println!(
            "latency from schedule: min {:.2}ms    p50 {:.2}ms    p90 {:.2}ms    p99 {:.2}ms    p99.9 {:.2}ms    max {:.2}ms",
            l.min_ms, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms
        );
    }
    if s.max_send_lag_ms > 50.0 {
        eprintln!(
            "note: the sending loop fell up to {:.0}ms behind schedule (included in the latency)",
            s.max_send_lag_ms
        );
    }
}
