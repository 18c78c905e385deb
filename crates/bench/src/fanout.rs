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

use std::net::IpAddr;
use std::time::{Duration, Instant};

use herald_ws::Message;
use serde::Serialize;
use serde_json::{json, Value};

use crate::clock;
use crate::common::{CommonArgs, Transport};
use crate::duration::parse_duration;
use crate::engine::{CloseReason, ConnId, Engine, Handler, Io, Tick};
use crate::hclients::{run_id, HeraldClients};
use crate::herald_wire::{self, Incoming, Stamp};
use crate::latency::{Latency, LatencySummary};
use crate::output::RunRecord;
use crate::progress::Progress;
use crate::sysmon::Monitor;
use crate::target::Target;
use crate::BenchError;

/// Arguments of `fanout`.
#[derive(Debug, Clone, clap::Args)]
pub struct FanoutArgs {
    /// Herald's WebSocket URL, e.g. ws://127.0.0.1:8080/ws.
    pub url: String,
    /// Encoding: ws-json or ws-binary.
    #[arg(long, value_enum, default_value = "ws-json")]
    pub transport: Transport,
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
    /// Local (source) addresses, used round-robin.
    #[arg(short = 'l', long = "local-addr")]
    pub local_addr: Vec<IpAddr>,
    /// Connects in progress at once.
    #[arg(long, default_value_t = 128)]
    pub connect_concurrency: usize,
    /// Output, sampling and time-limit flags (--duration defaults to 10s:
    /// how long publishers publish).
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The resolved parameters, as written to the result file.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutParams {
    /// The URL.
    pub url: String,
    /// ws-json or ws-binary.
    pub transport: Transport,
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
    /// Channel names are `bench.<run>.<c>`.
    pub channel_prefix: String,
}

/// Totals of a fanout run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FanoutSummary {
    /// Messages published.
    pub sent: u64,
    /// Deliveries that should have happened (sent to a channel × its subscribers).
    pub expected: u64,
    /// Distinct deliveries received.
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
    /// Error replies the server sent.
    pub errors: u64,
    /// The largest lag of the sending loop behind the schedule, ms.
    pub max_send_lag_ms: f64,
    /// Delivery latency from the scheduled send time.
    pub latency: Option<LatencySummary>,
    /// Time to connect and subscribe everyone, seconds.
    pub setup_s: f64,
}

impl FanoutSummary {
    /// No loss, no duplicates, no reordering, no unreadable pushes, no errors.
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.out_of_order == 0
            && self.unreadable == 0
            && self.errors == 0
    }
}

/// One second of the run.
#[derive(Debug, Clone, Serialize)]
struct Interval {
    t: f64,
    sent: u64,
    delivered: u64,
    latency: Option<LatencySummary>,
}

/// Per subscriber and publisher: the highest sequence seen and which of the
/// 64 before it arrived (bit i: `last - 1 - i`).
#[derive(Debug, Clone, Copy, Default)]
struct SeqTrack {
    last: u64,
    window: u64,
}

/// What a delivery was.
enum Seen {
    InOrder,
    Gap,
    Late,
    Duplicate,
}

impl SeqTrack {
    fn see(&mut self, seq: u64) -> Seen {
        if seq > self.last {
            let shift = seq - self.last;
            self.window = if shift >= 64 { 0 } else { self.window << shift };
            if self.last > 0 && shift <= 64 {
                self.window |= 1 << (shift - 1);
            }
            let gap = shift > 1;
            self.last = seq;
            if gap {
                Seen::Gap
            } else {
                Seen::InOrder
            }
        } else if seq == self.last {
            Seen::Duplicate
        } else {
            let d = self.last - seq;
            if d > 64 {
                return Seen::Late;
            }
            let bit = 1u64 << (d - 1);
            if self.window & bit != 0 {
                Seen::Duplicate
            } else {
                self.window |= bit;
                Seen::Late
            }
        }
    }
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
    clients: HeraldClients,
    channel_names: Vec<String>,
    /// Publisher p's next sequence number per channel: `[p * C + c]`.
    next_seq: Vec<u64>,
    /// `[s * P + p]`.
    tracks: Vec<SeqTrack>,
    sent_per_channel: Vec<u64>,
    subs_per_channel: Vec<u64>,
    phase: Phase,
    phase_since: Instant,
    start: Instant,
    t0_ns: i64,
    next_m: u64,
    total_msgs: u64,
    payload: Vec<u8>,
    frame: Vec<u8>,
    dirty: Vec<bool>,
    sum: FanoutSummary,
    hist: Latency,
    interval_hist: Latency,
    interval_sent: u64,
    interval_delivered: u64,
    next_interval: Instant,
    timeline: Vec<Interval>,
    monitor: Monitor,
    progress: Progress,
    pending_error: Option<BenchError>,
}

impl Fanout {
    fn sched_ns(&self, m: u64) -> i64 {
        self.t0_ns + (m as f64 * 1e9 / self.p.rate) as i64
    }

    fn publish_due(&mut self, io: &mut Io) {
        let now_ns = clock::now_ns();
        let pubs = self.p.publishers;
        let chans = self.p.channels;
        let enc = self.clients.enc;
        let mut budget = 20_000;
        while self.next_m < self.total_msgs && budget > 0 {
            let m = self.next_m;
            let due = self.sched_ns(m);
            if due > now_ns {
                break;
            }
            let lag_ms = (now_ns - due) as f64 / 1e6;
            if lag_ms > self.sum.max_send_lag_ms {
                self.sum.max_send_lag_ms = lag_ms;
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
            herald_wire::stamp_payload(enc, stamp, self.p.payload, &mut self.payload);
            self.frame.clear();
            herald_wire::publish(
                enc,
                0,
                &self.channel_names[channel],
                &self.payload,
                &mut self.frame,
            );
            let conn = self.clients.clients[publisher].conn;
            io.queue(conn, herald_wire::opcode(enc), &self.frame);
            self.dirty[publisher] = true;
            self.sent_per_channel[channel] += 1;
            self.sum.sent += 1;
            self.interval_sent += 1;
            self.next_m += 1;
            budget -= 1;
        }
        for (publisher, dirty) in self.dirty.iter_mut().enumerate() {
            if *dirty {
                *dirty = false;
                io.flush(self.clients.clients[publisher].conn);
            }
        }
    }

    fn expected(&self) -> u64 {
        self.sent_per_channel
            .iter()
            .zip(&self.subs_per_channel)
            .map(|(s, n)| s * n)
            .sum()
    }

    fn on_pub(&mut self, sub: usize, data: &[u8], now_ns: i64) {
        let Some(stamp) = herald_wire::read_stamp(self.clients.enc, data) else {
            self.sum.unreadable += 1;
            return;
        };
        let slot = sub * self.p.publishers + stamp.publisher as usize;
        let Some(track) = self.tracks.get_mut(slot) else {
            self.sum.unreadable += 1;
            return;
        };
        match track.see(stamp.seq) {
            Seen::Duplicate => {
                self.sum.duplicated += 1;
                return;
            }
            Seen::Late => self.sum.out_of_order += 1,
            Seen::InOrder | Seen::Gap => {}
        }
        self.sum.delivered += 1;
        self.interval_delivered += 1;
        self.hist.record_ns(now_ns - stamp.time_ns);
        self.interval_hist.record_ns(now_ns - stamp.time_ns);
    }

    fn close_interval(&mut self, now: Instant) {
        self.timeline.push(Interval {
            t: (now - self.start).as_secs_f64(),
            sent: self.interval_sent,
            delivered: self.interval_delivered,
            latency: self.interval_hist.summary(),
        });
        self.interval_sent = 0;
        self.interval_delivered = 0;
        self.interval_hist.reset();
    }

    fn progress_text(&self, now: Instant) -> String {
        let what = match self.phase {
            Phase::Setup => format!(
                "setup {}/{}",
                self.clients.ready(),
                self.clients.clients.len()
            ),
            Phase::Publishing => "publishing".into(),
            Phase::Draining => "draining".into(),
            Phase::Done => "done".into(),
        };
        let p99 = self.hist.summary().map_or(0.0, |s| s.p99_ms);
        format!(
            "[{:>4.0}s] {what} · sent {} · delivered {}/{} · p99 {:.1}ms",
            (now - self.start).as_secs_f64(),
            self.sum.sent,
            self.sum.delivered,
            self.expected(),
            p99
        )
    }
}

impl Handler for Fanout {
    fn on_open(
        &mut self,
        io: &mut Io,
        _: ConnId,
        tag: u64,
        protocol: Option<&str>,
    ) -> Result<(), BenchError> {
        self.clients.on_open(io, tag, protocol)
    }

    fn on_message(
        &mut self,
        io: &mut Io,
        tag: u64,
        msg: Message<'_>,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        match self.clients.on_message(io, tag, msg)? {
            Some(Incoming::Pub { data }) => {
                let Some(sub) = (tag as usize).checked_sub(self.p.publishers) else {
                    self.sum.unreadable += 1;
                    return Ok(());
                };
                self.on_pub(sub, data, now_ns);
            }
            Some(Incoming::Error { .. }) => self.sum.errors += 1,
            _ => {}
        }
        Ok(())
    }

    fn on_close(&mut self, _: &mut Io, tag: u64, why: CloseReason) -> Result<(), BenchError> {
        Err(self.clients.on_close(tag, why))
    }

    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        if let Some(e) = self.pending_error.take() {
            return Err(e);
        }
        let mut next = now + Duration::from_millis(100);
        match self.phase {
            Phase::Setup => {
                self.clients.tick(io)?;
                if self.clients.all_ready() {
                    self.sum.setup_s = (now - self.phase_since).as_secs_f64();
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
                if self.next_m >= self.total_msgs {
                    self.phase = Phase::Draining;
                    self.phase_since = now;
                } else {
                    let wait = self.sched_ns(self.next_m) - clock::now_ns();
                    next = now + Duration::from_nanos(wait.max(0) as u64);
                }
            }
            Phase::Draining => {
                if self.sum.delivered >= self.expected()
                    || now - self.phase_since >= Duration::from_secs_f64(self.p.drain_s)
                {
                    self.phase = Phase::Done;
                }
            }
            Phase::Done => return Ok(Tick::Done),
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

/// Runs `fanout`; fails when a delivery was lost, duplicated or reordered
/// (unless `--allow-loss`), after writing the result files.
pub fn run(args: &FanoutArgs) -> Result<FanoutSummary, BenchError> {
    let (summary, record) = measure(args)?;
    if !record.passed {
        return Err(BenchError::Verification(format!(
            "{} lost, {} duplicated, {} out of order, {} unreadable of {} expected deliveries; {} error replies",
            summary.lost, summary.duplicated, summary.out_of_order, summary.unreadable, summary.expected, summary.errors
        )));
    }
    Ok(summary)
}

/// Runs `fanout` and returns its summary and record whether or not it was clean.
pub fn measure(args: &FanoutArgs) -> Result<(FanoutSummary, RunRecord), BenchError> {
    if args.publishers == 0 || args.channels == 0 || args.rate.is_nan() || args.rate <= 0.0 {
        return Err(BenchError::Args(
            "--publishers, --channels and --rate must be positive".into(),
        ));
    }
    let duration = args.common.duration.unwrap_or(Duration::from_secs(10));
    let target = Target::parse(&args.url)?;
    let run = run_id();
    let p = FanoutParams {
        url: args.url.clone(),
        transport: args.transport,
        publishers: args.publishers,
        subscribers: args.subscribers,
        channels: args.channels,
        rate: args.rate,
        payload: args.payload,
        duration_s: duration.as_secs_f64(),
        drain_s: args.drain.as_secs_f64(),
        channel_prefix: format!("bench.{run}"),
    };
    let mut clients = HeraldClients::new(
        &target,
        args.transport.encoding(),
        args.local_addr.clone(),
        args.connect_concurrency,
    );
    let channel_names: Vec<String> = (0..p.channels)
        .map(|c| format!("{}.{c}", p.channel_prefix))
        .collect();
    for _ in 0..p.publishers {
        clients.add(Vec::new());
    }
    let mut subs_per_channel = vec![0u64; p.channels];
    for s in 0..p.subscribers {
        let c = s % p.channels;
        subs_per_channel[c] += 1;
        clients.add(vec![channel_names[c].clone()]);
    }
    let start = Instant::now();
    let started_at = clock::now_secs_f64();
    let total_msgs = (p.rate * p.duration_s).round() as u64;
    let mut f = Fanout {
        next_seq: vec![0; p.publishers * p.channels],
        tracks: vec![SeqTrack::default(); p.subscribers * p.publishers],
        sent_per_channel: vec![0; p.channels],
        subs_per_channel,
        channel_names,
        clients,
        phase: Phase::Setup,
        phase_since: start,
        start,
        t0_ns: 0,
        next_m: 0,
        total_msgs,
        payload: Vec::with_capacity(p.payload + 64),
        frame: Vec::with_capacity(p.payload + 128),
        dirty: vec![false; p.publishers],
        sum: FanoutSummary::default(),
        hist: Latency::new(),
        interval_hist: Latency::new(),
        interval_sent: 0,
        interval_delivered: 0,
        next_interval: start,
        timeline: Vec::new(),
        monitor: Monitor::new(args.common.server_pid, &args.common.net_iface, start),
        progress: Progress::new(args.common.quiet, start),
        pending_error: None,
        p,
    };
    let mut engine = Engine::new(64 << 20)?;
    let result = engine.run(&mut f);
    f.progress.clear();
    let end = Instant::now();
    f.monitor.sample(end);
    if f.interval_sent > 0 || f.interval_delivered > 0 {
        f.close_interval(end);
    }

    let mut sum = f.sum.clone();
    sum.expected = f.expected();
    sum.lost = sum.expected.saturating_sub(sum.delivered);
    sum.delivered_per_s = sum.delivered as f64 / f.p.duration_s.max(1e-9);
    sum.latency = f.hist.summary();
    let passed = sum.clean() || args.allow_loss;

    let label = args.common.label.clone().unwrap_or_else(|| {
        format!(
            "fanout {} {}p {}s {}c {}/s",
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
    record.verification = Some(json!({
        "expected": sum.expected,
        "delivered": sum.delivered,
        "lost": sum.lost,
        "duplicated": sum.duplicated,
        "out_of_order": sum.out_of_order,
        "unreadable": sum.unreadable,
        "errors": sum.errors,
    }));
    record.passed = sum.clean();
    record.system = std::mem::take(&mut f.monitor.samples);
    record.write_after(
        result,
        args.common.out.as_deref(),
        args.common.csv.as_deref(),
    )?;

    print_summary(&f.p, &sum);
    record.passed = passed;
    Ok((sum, record))
}

fn print_summary(p: &FanoutParams, s: &FanoutSummary) {
    println!(
        "fanout {}: {} publishers -> {} subscribers on {} channels, {}/s for {:.0}s, {} B payloads",
        p.transport.as_str(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_tracking() {
        let mut t = SeqTrack::default();
        assert!(matches!(t.see(1), Seen::InOrder));
        assert!(matches!(t.see(2), Seen::InOrder));
        assert!(matches!(t.see(2), Seen::Duplicate));
        assert!(matches!(t.see(5), Seen::Gap));
        assert!(matches!(t.see(4), Seen::Late));
        assert!(matches!(t.see(4), Seen::Duplicate));
        assert!(matches!(t.see(3), Seen::Late));
        assert!(matches!(t.see(1), Seen::Duplicate));
        assert!(matches!(t.see(200), Seen::Gap));
        assert!(matches!(t.see(100), Seen::Late));
        assert!(matches!(t.see(199), Seen::Late));
        assert!(matches!(t.see(199), Seen::Duplicate));
    }
}
