//! `cometd`: seed 001, CometD's own benchmark, over Bayeux against any
//! Bayeux server (Herald's `/cometd`, CometD's Java server in
//! `bench/peers/cometd-java`), on `--transport long-polling` or `websocket`.
//!
//! Method (the seed's): N clients in R rooms, each subscribed to its room's
//! channel `/bench/<run>/r<K>`; publishers (Bayeux clients too) publish
//! 50-byte messages into the rooms round-robin at a rate; every message
//! carries its due time, and a subscriber's latency is arrival − due time.
//! Each `--rates` step is a target of *delivered* messages per second (what
//! CometD's graphs call messages/s): the publish rate is the step's rate
//! divided by the room size. Per step: median and p99 latency, delivered
//! and lost. With `--idle`, no publishers: N clients hold `/meta/connect`
//! (the server's advice timeout, 30 s on both servers) for `--hold`, and
//! the server's RSS growth per client gives clients per GiB.
//!
//! The client keeps Bayeux's meaning, as CometD's own clients do:
//! - a handshake naming only the chosen connection type; then one batch
//!   with the first `/meta/connect` (`advice.timeout: 0`, answered at once)
//!   and the `/meta/subscribe`; every `/meta/connect` reply is followed by
//!   the next `/meta/connect`, which the server holds;
//! - long-polling: each request is an HTTP/1.1 POST of a batch on a
//!   keep-alive connection; a client's held connect has its own connection,
//!   and a publisher sends its publishes on a second one, one POST in
//!   flight, all publishes that fell due meanwhile in its batch (CometD's
//!   client uses two connections per origin the same way); deliveries come
//!   in the held connect's answer;
//! - websocket: one socket per client; every batch is one text frame
//!   (several messages per frame: the setup batch, a publisher's due
//!   publishes), deliveries arrive as soon as published.
//!
//! A message's due time is its stamp even when a long-polling publisher
//! could only send it later (its POST still in flight): the wait is part
//! of the latency a publisher sees, the same for every server.
//!
//! Bounded: at most 19,000 clients (one process, 20,000 open files), at most
//! 50 steps of at most 10 minutes, at most 10,000 publishes queued per
//! publisher (more is an error: the server is not keeping up), and a setup
//! that does not finish in `--setup-timeout` is an error.

pub mod wire;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use herald_ws::{Message, OpCode};
use serde::Serialize;
use serde_json::json;

use crate::clock;
use crate::common::CommonArgs;
use crate::duration::parse_duration;
use crate::engine::{CloseReason, ConnId, Engine, Framing, Handler, HttpMsg, Io, Tick};
use crate::hclients::run_id;
use crate::http1;
use crate::latency::{Latency, LatencySummary};
use crate::output::RunRecord;
use crate::progress::Progress;
use crate::sysmon::{rss_kib, Monitor};
use crate::target::{Scheme, Target};
use crate::BenchError;
pub use wire::BayeuxTransport;
use wire::{Incoming, Stamp};

/// Most clients one process may hold here (20,000 open files).
const MAX_CLIENTS: usize = 19_000;
/// Most rate steps.
const MAX_STEPS: usize = 50;
/// Longest step.
const MAX_STEP: Duration = Duration::from_secs(600);
/// Most publishes a publisher may have queued before the run fails.
const MAX_QUEUED: usize = 10_000;
/// Most publishes in one long-polling POST (Herald's and CometD's default
/// batch limit is 100 messages).
const MAX_BATCH: usize = 100;

/// Arguments of `cometd`.
#[derive(Debug, Clone, clap::Args)]
pub struct CometdArgs {
    /// The server's Bayeux endpoint, e.g. http://127.0.0.1:8080/cometd
    /// (websocket upgrades the same path).
    pub url: String,
    /// Bayeux connection type: long-polling or websocket.
    #[arg(long, value_enum, default_value = "websocket")]
    pub transport: BayeuxTransport,
    /// Subscribing clients.
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub clients: usize,
    /// Rooms (channels); client i is in room i mod R.
    #[arg(long, default_value_t = 10)]
    pub rooms: usize,
    /// Publishing clients (not counted in --clients).
    #[arg(short = 'p', long, default_value_t = 2)]
    pub publishers: usize,
    /// Delivered messages per second, one step each (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    pub rates: Vec<u64>,
    /// How long each rate step publishes.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub step: Duration,
    /// The start of each step that is not measured.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// After each step, wait at most this long for its messages to arrive.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub drain: Duration,
    /// Bytes of each message's `data` (the seed: 50).
    #[arg(long, default_value_t = 50)]
    pub payload: usize,
    /// Idle mode: no publishers; hold the clients' /meta/connect for --hold
    /// and report the server's memory per client.
    #[arg(long)]
    pub idle: bool,
    /// Idle mode: how long to hold after setup (longer than the server's
    /// connect timeout, so every client re-issues /meta/connect).
    #[arg(long, default_value = "35s", value_parser = parse_duration)]
    pub hold: Duration,
    /// Idle mode: wait this long after setup before the first RSS reading.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub settle: Duration,
    /// Setup (handshake, subscribe, first connect of every client) must end
    /// within this.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub setup_timeout: Duration,
    /// Handshakes in progress at once.
    #[arg(long, default_value_t = 64)]
    pub connect_concurrency: usize,
    /// Local (source) addresses, used round-robin.
    #[arg(short = 'l', long = "local-addr")]
    pub local_addr: Vec<IpAddr>,
    /// Output, sampling and labelling flags (--duration is not used: the
    /// run's length is the steps', or --hold).
    #[command(flatten)]
    pub common: CommonArgs,
}

/// One rate step's result.
#[derive(Debug, Clone, Serialize)]
pub struct CometdStep {
    /// Target delivered messages per second.
    pub rate: u64,
    /// Messages published.
    pub published: u64,
    /// Publishes per second achieved.
    pub publish_per_s: f64,
    /// Deliveries the published messages should make.
    pub expected: u64,
    /// Deliveries that arrived (by the end of the drain).
    pub delivered: u64,
    /// Deliveries per second over the step.
    pub delivered_per_s: f64,
    /// `expected − delivered`.
    pub lost: u64,
    /// Latency of the measured deliveries (after the warm-up).
    pub latency: Option<LatencySummary>,
    /// Mean server CPU over the step, percent of one core.
    pub server_cpu: Option<f64>,
}

/// The idle mode's result.
#[derive(Debug, Clone, Serialize)]
pub struct CometdIdle {
    /// Clients holding a connect.
    pub clients: usize,
    /// Seconds to set them all up.
    pub setup_s: f64,
    /// Server RSS before the first client, KiB.
    pub baseline_rss_kib: Option<u64>,
    /// Server RSS after the settle delay, KiB.
    pub settled_rss_kib: Option<u64>,
    /// Server RSS at the end of the hold, KiB.
    pub end_rss_kib: Option<u64>,
    /// (max(settled, end) − baseline) / clients, KiB.
    pub kib_per_client: Option<f64>,
    /// 1 GiB / that.
    pub clients_per_gib: Option<f64>,
    /// `/meta/connect` replies during the hold (each client's held connect
    /// answered at its timeout).
    pub connect_cycles: u64,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct CometdSummary {
    /// Rate steps (empty in idle mode).
    pub steps: Vec<CometdStep>,
    /// The idle result (idle mode only).
    pub idle: Option<CometdIdle>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// Not yet opened.
    New,
    /// TCP connect or upgrade in progress.
    Opening,
    /// Handshake sent.
    Handshaking,
    /// Setup batch (first connect, subscribe) sent.
    Setup,
    /// Connected (and subscribed, for subscribers).
    Ready,
}

struct Client {
    st: St,
    /// The socket (websocket) or the held-connect connection (long-polling).
    conn: Option<ConnId>,
    /// Long-polling publishers: the connection for publishes.
    side: Option<ConnId>,
    side_open: bool,
    /// A POST is in flight on `side`.
    side_busy: bool,
    client_id: String,
    /// Subscribers: the room; publishers: `None`.
    room: Option<usize>,
    next_id: u64,
    subscribed: bool,
    connected: bool,
    /// Publishes not yet sent, comma-separated messages.
    queued: Vec<u8>,
    queued_count: usize,
}

impl Client {
    fn new(room: Option<usize>) -> Client {
        Client {
            st: St::New,
            conn: None,
            side: None,
            side_open: false,
            side_busy: false,
            client_id: String::new(),
            room,
            next_id: 1,
            subscribed: false,
            connected: false,
            queued: Vec::new(),
            queued_count: 0,
        }
    }

    fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Setup,
    /// Idle mode: waiting `settle`, then holding.
    Settling,
    Holding,
    /// Publishing step `i`.
    Publish(usize),
    /// Waiting for step `i`'s deliveries.
    Drain(usize),
    Done,
}

/// Per-step counters.
struct StepAcc {
    published: u64,
    expected: u64,
    delivered: u64,
    latency: Latency,
    /// Deliveries stamped before this are not measured.
    measure_from_ns: i64,
    started: Option<Instant>,
    ended: Option<Instant>,
}

struct Bench {
    transport: BayeuxTransport,
    ws: Target,
    http: Target,
    clients: Vec<Client>,
    publishers: Vec<usize>,
    room_sizes: Vec<u64>,
    rooms: Vec<String>,
    opening: usize,
    next_open: usize,
    ready: usize,
    concurrency: usize,
    local: Vec<IpAddr>,
    payload: usize,
    rates: Vec<u64>,
    step_len: Duration,
    warmup: Duration,
    drain: Duration,
    idle: bool,
    hold: Duration,
    settle: Duration,
    setup_timeout: Duration,
    phase: Phase,
    phase_since: Instant,
    start: Instant,
    setup_s: f64,
    steps: Vec<StepAcc>,
    /// Publishes sent in the current step.
    due_sent: u64,
    /// Round-robin position over rooms and publishers.
    seq: u64,
    pid: Option<u32>,
    settled_rss: Option<u64>,
    end_rss: Option<u64>,
    connect_cycles: u64,
    scratch: Vec<u8>,
    monitor: Monitor,
    progress: Progress,
}

/// Connection tags: client index × 2, + 1 for a publisher's side connection.
fn tag_of(client: usize, side: bool) -> u64 {
    (client as u64) * 2 + u64::from(side)
}

impl Bench {
    fn fail(&self, i: usize, what: impl std::fmt::Display) -> BenchError {
        BenchError::Client(format!("client {i}: {what}"))
    }

    /// Sends `self.scratch` as one batch on client `i`'s main connection.
    fn send_main(&mut self, io: &mut Io, i: usize) -> Result<(), BenchError> {
        let conn = self.clients[i]
            .conn
            .ok_or(BenchError::Internal("no connection"))?;
        let ok = match self.transport {
            BayeuxTransport::Websocket => io.send(conn, OpCode::Text, &self.scratch),
            BayeuxTransport::LongPolling => {
                let mut req = Vec::with_capacity(self.scratch.len() + 160);
                post(&mut req, &self.http, &self.scratch);
                io.send_raw(conn, &req)
            }
        };
        if !ok {
            return Err(self.fail(i, "the connection is closed"));
        }
        Ok(())
    }

    /// Opens clients while fewer than `concurrency` are being set up.
    fn open_more(&mut self, io: &mut Io) -> Result<(), BenchError> {
        while self.opening < self.concurrency && self.next_open < self.clients.len() {
            let i = self.next_open;
            self.next_open += 1;
            self.opening += 1;
            let local = (!self.local.is_empty()).then(|| self.local[i % self.local.len()]);
            let conn = match self.transport {
                BayeuxTransport::Websocket => io.connect(&self.ws, local, tag_of(i, false))?,
                BayeuxTransport::LongPolling => {
                    io.connect_plain(self.http.addr, Framing::Http, local, tag_of(i, false))?
                }
            };
            let c = &mut self.clients[i];
            c.conn = Some(conn);
            c.st = St::Opening;
        }
        Ok(())
    }

    fn on_open_client(&mut self, io: &mut Io, i: usize, side: bool) -> Result<(), BenchError> {
        if side {
            self.clients[i].side_open = true;
            return self.flush_side(io, i);
        }
        let id = self.clients[i].id();
        self.scratch.clear();
        wire::handshake(&mut self.scratch, id, self.transport);
        self.clients[i].st = St::Handshaking;
        self.send_main(io, i)
    }

    /// One received batch on client `i`'s main (or side) connection.
    fn on_batch(
        &mut self,
        io: &mut Io,
        i: usize,
        body: &[u8],
        now_ns: i64,
    ) -> Result<(), BenchError> {
        let batch = wire::parse_batch(body).map_err(|e| self.fail(i, e))?;
        let mut reconnect = false;
        for m in &batch {
            if !m.is_meta() {
                if let Some(stamp) = m.stamp() {
                    self.on_delivery(stamp, now_ns);
                } else if m.successful == Some(false) {
                    return Err(self.fail(i, refused("publish", m)));
                }
                continue;
            }
            if m.successful != Some(true) {
                return Err(self.fail(i, refused(&m.channel, m)));
            }
            match &*m.channel {
                "/meta/handshake" => {
                    let Some(cid) = m.client_id.as_deref() else {
                        return Err(self.fail(i, "handshake reply without clientId"));
                    };
                    self.clients[i].client_id = cid.to_owned();
                    self.send_setup(io, i)?;
                }
                "/meta/subscribe" => {
                    self.clients[i].subscribed = true;
                }
                "/meta/connect" => {
                    if self.clients[i].connected {
                        if matches!(self.phase, Phase::Holding) {
                            self.connect_cycles += 1;
                        }
                    } else {
                        self.clients[i].connected = true;
                    }
                    reconnect = true;
                }
                _ => {}
            }
        }
        let c = &mut self.clients[i];
        if c.st == St::Setup && c.connected && (c.subscribed || c.room.is_none()) {
            c.st = St::Ready;
            self.ready += 1;
            self.opening = self.opening.saturating_sub(1);
        }
        if reconnect {
            // The next connect, which the server holds.
            let c = &mut self.clients[i];
            let id = c.id();
            self.scratch.clear();
            self.scratch.push(b'[');
            wire::connect(&mut self.scratch, id, &c.client_id, self.transport, false);
            self.scratch.push(b']');
            self.send_main(io, i)?;
        }
        Ok(())
    }

    /// After the handshake: the first connect (answered at once) and, for a
    /// subscriber, its subscribe, in one batch. A long-polling publisher
    /// also opens its second connection.
    fn send_setup(&mut self, io: &mut Io, i: usize) -> Result<(), BenchError> {
        let transport = self.transport;
        let c = &mut self.clients[i];
        c.st = St::Setup;
        self.scratch.clear();
        self.scratch.push(b'[');
        let id = c.id();
        wire::connect(&mut self.scratch, id, &c.client_id, transport, true);
        if let Some(room) = c.room {
            self.scratch.push(b',');
            let id = c.id();
            wire::subscribe(&mut self.scratch, id, &c.client_id, &self.rooms[room]);
        }
        self.scratch.push(b']');
        if c.room.is_none() && transport == BayeuxTransport::LongPolling {
            let local = (!self.local.is_empty()).then(|| self.local[i % self.local.len()]);
            c.side =
                Some(io.connect_plain(self.http.addr, Framing::Http, local, tag_of(i, true))?);
        }
        self.send_main(io, i)
    }

    fn on_delivery(&mut self, stamp: Stamp, now_ns: i64) {
        if let Some(acc) = self.steps.get_mut(stamp.s as usize) {
            acc.delivered += 1;
            if stamp.t >= acc.measure_from_ns {
                acc.latency.record_ns(now_ns - stamp.t);
            }
        }
    }

    /// Sends a long-polling publisher's queued publishes (one POST at a time).
    fn flush_side(&mut self, io: &mut Io, i: usize) -> Result<(), BenchError> {
        let c = &mut self.clients[i];
        if !c.side_open || c.side_busy || c.queued.is_empty() {
            return Ok(());
        }
        let Some(side) = c.side else {
            return Ok(());
        };
        // At most MAX_BATCH messages: cut after the MAX_BATCH-th message.
        let cut = if c.queued_count > MAX_BATCH {
            nth_top_level_comma(&c.queued, MAX_BATCH).unwrap_or(c.queued.len())
        } else {
            c.queued.len()
        };
        let mut body = Vec::with_capacity(cut + 2);
        body.push(b'[');
        body.extend_from_slice(&c.queued[..cut]);
        body.push(b']');
        let rest = c
            .queued
            .get(cut + 1..)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        c.queued = rest;
        c.queued_count = c.queued_count.saturating_sub(MAX_BATCH);
        c.side_busy = true;
        let mut req = Vec::with_capacity(body.len() + 160);
        post(&mut req, &self.http, &body);
        if !io.send_raw(side, &req) {
            return Err(self.fail(i, "the publish connection is closed"));
        }
        Ok(())
    }

    /// Publishes what fell due in step `s` since the last tick.
    fn publish_due(&mut self, io: &mut Io, s: usize, now: Instant) -> Result<(), BenchError> {
        let rate = self.rates[s];
        let Some(started) = self.steps[s].started else {
            return Ok(());
        };
        let elapsed = (now - started).min(self.step_len).as_secs_f64();
        let per_room = (self.clients_count() as f64 / self.room_sizes.len() as f64).max(1.0);
        let due = (elapsed * rate as f64 / per_room) as u64;
        if due <= self.due_sent {
            return Ok(());
        }
        let now_ns = clock::now_ns();
        let n_pub = self.publishers.len();
        let mut touched = vec![false; n_pub];
        while self.due_sent < due {
            let seq = self.seq;
            self.seq += 1;
            self.due_sent += 1;
            let room = (seq % self.rooms.len() as u64) as usize;
            let p = (seq % n_pub as u64) as usize;
            let i = self.publishers[p];
            let c = &mut self.clients[i];
            if c.queued_count >= MAX_QUEUED {
                return Err(BenchError::Stalled(format!(
                    "publisher {p} has {MAX_QUEUED} publishes queued: the server is not keeping up at {rate}/s"
                )));
            }
            if !c.queued.is_empty() {
                c.queued.push(b',');
            }
            let id = c.id();
            let stamp = Stamp {
                s: s as u32,
                t: now_ns,
            };
            wire::publish(
                &mut c.queued,
                id,
                &c.client_id,
                &self.rooms[room],
                stamp,
                self.payload,
            );
            c.queued_count += 1;
            touched[p] = true;
            let acc = &mut self.steps[s];
            acc.published += 1;
            acc.expected += self.room_sizes[room];
        }
        for (p, t) in touched.into_iter().enumerate() {
            if !t {
                continue;
            }
            let i = self.publishers[p];
            match self.transport {
                BayeuxTransport::LongPolling => self.flush_side(io, i)?,
                BayeuxTransport::Websocket => {
                    let c = &mut self.clients[i];
                    self.scratch.clear();
                    self.scratch.push(b'[');
                    self.scratch.append(&mut c.queued);
                    self.scratch.push(b']');
                    c.queued_count = 0;
                    self.send_main(io, i)?;
                }
            }
        }
        Ok(())
    }

    fn clients_count(&self) -> usize {
        self.room_sizes.iter().sum::<u64>() as usize
    }

    fn start_step(&mut self, s: usize, now: Instant) {
        self.phase = Phase::Publish(s);
        self.phase_since = now;
        self.due_sent = 0;
        let acc = &mut self.steps[s];
        acc.started = Some(now);
        acc.measure_from_ns = clock::now_ns() + self.warmup.as_nanos() as i64;
    }

    fn print_step(&self, s: usize) {
        let st = self.step_result(s);
        let lat = st.latency.as_ref();
        let f = |v: Option<f64>| v.map_or("-".to_owned(), |x| format!("{x:.1}"));
        println!(
            "{} rate: {:6}/s    published: {:7.1}/s    delivered: {:8.1}/s    median: {:>7} ms    p99: {:>7} ms    max: {:>7} ms    lost: {}",
            self.transport.as_str(),
            st.rate,
            st.publish_per_s,
            st.delivered_per_s,
            f(lat.map(|l| l.p50_ms)),
            f(lat.map(|l| l.p99_ms)),
            f(lat.map(|l| l.max_ms)),
            st.lost
        );
    }

    fn step_result(&self, s: usize) -> CometdStep {
        let acc = &self.steps[s];
        let secs = match (acc.started, acc.ended) {
            (Some(a), Some(b)) => (b - a).as_secs_f64().max(1e-9),
            _ => self.step_len.as_secs_f64().max(1e-9),
        };
        let server_cpu = match (acc.started, acc.ended) {
            (Some(a), Some(b)) => self.monitor.mean(
                (a - self.start).as_secs_f64(),
                (b - self.start).as_secs_f64(),
                |x| x.server_cpu_pct,
            ),
            _ => None,
        };
        CometdStep {
            rate: self.rates[s],
            published: acc.published,
            publish_per_s: acc.published as f64 / secs,
            expected: acc.expected,
            delivered: acc.delivered,
            delivered_per_s: acc.delivered as f64 / secs,
            lost: acc.expected.saturating_sub(acc.delivered),
            latency: acc.latency.summary(),
            server_cpu,
        }
    }
}

/// Appends a POST of `body` to the endpoint (keep-alive, JSON).
fn post(out: &mut Vec<u8>, http: &Target, body: &[u8]) {
    http1::write_request(
        out,
        "POST",
        &http.host,
        &http.path,
        &[("Content-Type", "application/json;charset=UTF-8")],
        Some(body),
    );
}

/// The byte offset of the comma after the `n`-th top-level message in a
/// comma-separated list of JSON objects (strings are skipped).
fn nth_top_level_comma(list: &[u8], n: usize) -> Option<usize> {
    let (mut depth, mut in_str, mut esc, mut seen) = (0i32, false, false, 0usize);
    for (k, &b) in list.iter().enumerate() {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            b',' if depth == 0 => {
                seen += 1;
                if seen == n {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// Describes an unsuccessful reply.
fn refused(what: &str, m: &Incoming<'_>) -> String {
    format!(
        "{what} refused: {} (advice reconnect {})",
        m.error.as_deref().unwrap_or("no error given"),
        m.advice
            .as_ref()
            .and_then(|a| a.reconnect.as_deref())
            .unwrap_or("-")
    )
}

impl Handler for Bench {
    fn on_open(
        &mut self,
        io: &mut Io,
        _id: ConnId,
        tag: u64,
        _protocol: Option<&str>,
    ) -> Result<(), BenchError> {
        self.on_open_client(io, (tag / 2) as usize, tag % 2 == 1)
    }

    fn on_message(
        &mut self,
        io: &mut Io,
        tag: u64,
        msg: Message<'_>,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        match msg {
            Message::Text(d) => self.on_batch(io, (tag / 2) as usize, d, now_ns),
            Message::Binary(_) => Err(self.fail((tag / 2) as usize, "binary frame")),
            _ => Ok(()),
        }
    }

    fn on_http(
        &mut self,
        io: &mut Io,
        tag: u64,
        msg: HttpMsg<'_>,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        let (i, side) = ((tag / 2) as usize, tag % 2 == 1);
        let HttpMsg::Response { status, body } = msg else {
            return Err(self.fail(i, "an event stream where a Bayeux answer was expected"));
        };
        if status != 200 {
            return Err(self.fail(
                i,
                format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&body[..body.len().min(200)])
                ),
            ));
        }
        if side {
            self.clients[i].side_busy = false;
            // Publish replies (and nothing else: publishers do not subscribe).
            self.on_batch_side(i, body, now_ns)?;
            return self.flush_side(io, i);
        }
        self.on_batch(io, i, body, now_ns)
    }

    fn on_close(&mut self, _io: &mut Io, tag: u64, why: CloseReason) -> Result<(), BenchError> {
        Err(self.fail((tag / 2) as usize, format!("connection ended: {why}")))
    }

    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        let mut next = now + Duration::from_millis(100);
        match self.phase {
            Phase::Setup => {
                self.open_more(io)?;
                if self.ready == self.clients.len() {
                    self.setup_s = (now - self.start).as_secs_f64();
                    self.progress.clear();
                    eprintln!(
                        "{} clients set up over {} in {:.1}s",
                        self.clients.len(),
                        self.transport.as_str(),
                        self.setup_s
                    );
                    if self.idle {
                        self.phase = Phase::Settling;
                        self.phase_since = now;
                        next = now + self.settle;
                    } else {
                        self.start_step(0, now);
                        next = now;
                    }
                } else if now - self.start > self.setup_timeout {
                    return Err(BenchError::Stalled(format!(
                        "{} of {} clients set up after {:?}",
                        self.ready,
                        self.clients.len(),
                        self.setup_timeout
                    )));
                }
            }
            Phase::Settling => {
                if now - self.phase_since >= self.settle {
                    self.settled_rss = self.pid.and_then(rss_kib);
                    self.phase = Phase::Holding;
                    self.phase_since = now;
                    next = now + self.hold;
                } else {
                    next = self.phase_since + self.settle;
                }
            }
            Phase::Holding => {
                if now - self.phase_since >= self.hold {
                    self.end_rss = self.pid.and_then(rss_kib);
                    self.phase = Phase::Done;
                    return Ok(Tick::Done);
                }
                next = self.phase_since + self.hold;
            }
            Phase::Publish(s) => {
                self.publish_due(io, s, now)?;
                if now - self.phase_since >= self.step_len {
                    self.steps[s].ended = Some(now);
                    self.phase = Phase::Drain(s);
                    self.phase_since = now;
                } else {
                    next = now + Duration::from_millis(2);
                }
            }
            Phase::Drain(s) => {
                let acc = &self.steps[s];
                let queued: usize = self
                    .publishers
                    .iter()
                    .map(|&i| self.clients[i].queued_count)
                    .sum();
                if (acc.delivered >= acc.expected && queued == 0)
                    || now - self.phase_since >= self.drain
                {
                    self.progress.clear();
                    self.print_step(s);
                    if s + 1 < self.rates.len() {
                        self.start_step(s + 1, now);
                        next = now;
                    } else {
                        self.phase = Phase::Done;
                        return Ok(Tick::Done);
                    }
                } else {
                    next = now + Duration::from_millis(20);
                }
            }
            Phase::Done => return Ok(Tick::Done),
        }
        let sample = self.monitor.tick(now);
        let elapsed = (now - self.start).as_secs_f64();
        let (ready, total, phase) = (self.ready, self.clients.len(), self.phase);
        let show = self.progress.tick(now, || match phase {
            Phase::Setup => format!("[{elapsed:>4.0}s] {ready}/{total} clients set up"),
            Phase::Publish(s) | Phase::Drain(s) => format!("[{elapsed:>4.0}s] step {}", s + 1),
            _ => format!("[{elapsed:>4.0}s] holding {total} clients"),
        });
        Ok(Tick::Continue(Some(next.min(sample).min(show))))
    }
}

impl Bench {
    /// A long-polling publisher's publish replies.
    fn on_batch_side(&mut self, i: usize, body: &[u8], now_ns: i64) -> Result<(), BenchError> {
        let batch = wire::parse_batch(body).map_err(|e| self.fail(i, e))?;
        for m in &batch {
            if m.successful == Some(false) {
                return Err(self.fail(i, refused(&m.channel, m)));
            }
            if let Some(stamp) = m.stamp() {
                self.on_delivery(stamp, now_ns);
            }
        }
        Ok(())
    }
}

/// The idle mode's figures from the run's RSS readings; printed.
fn idle_result(args: &CometdArgs, b: &Bench, baseline: Option<u64>) -> CometdIdle {
    let top = match (b.settled_rss, b.end_rss) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    let per = match (top, baseline) {
        (Some(t), Some(base)) => Some((t as f64 - base as f64) / args.clients as f64),
        _ => None,
    };
    let i = CometdIdle {
        clients: args.clients,
        setup_s: b.setup_s,
        baseline_rss_kib: baseline,
        settled_rss_kib: b.settled_rss,
        end_rss_kib: b.end_rss,
        kib_per_client: per,
        clients_per_gib: per.filter(|k| *k > 0.0).map(|k| 1024.0 * 1024.0 / k),
        connect_cycles: b.connect_cycles,
    };
    let f = |v: Option<f64>, d: usize| v.map_or("-".to_owned(), |x| format!("{x:.d$}"));
    println!(
        "{} idle: clients: {}    setup: {:.1}s    server RSS: {} -> {} KiB    per client: {} KiB    clients per GiB: {}    connect cycles in hold: {}",
        args.transport.as_str(),
        i.clients,
        i.setup_s,
        i.baseline_rss_kib.map_or("-".into(), |v| v.to_string()),
        i.end_rss_kib.map_or("-".into(), |v| v.to_string()),
        f(i.kib_per_client, 2),
        f(i.clients_per_gib, 0),
        i.connect_cycles
    );
    i
}

/// Checks the arguments against the bounds.
fn check(args: &CometdArgs) -> Result<(), BenchError> {
    let bad = |s: &str| Err(BenchError::Args(s.to_owned()));
    if args.clients == 0 || args.clients + args.publishers > MAX_CLIENTS {
        return bad("--clients (plus --publishers) must be 1..=19000 (one process)");
    }
    if args.rooms == 0 || args.rooms > args.clients {
        return bad("--rooms must be 1..=--clients");
    }
    if !args.idle {
        if args.publishers == 0 {
            return bad("--publishers must be at least 1 (or give --idle)");
        }
        if args.rates.is_empty() || args.rates.len() > MAX_STEPS || args.rates.contains(&0) {
            return bad("--rates: 1 to 50 positive rates");
        }
        if args.step.is_zero() || args.step > MAX_STEP {
            return bad("--step must be more than 0 and at most 10m");
        }
    } else if args.hold > MAX_STEP {
        return bad("--hold must be at most 10m");
    }
    if args.connect_concurrency == 0 {
        return bad("--connect-concurrency must be at least 1");
    }
    Ok(())
}

/// Runs `cometd`.
pub fn run(args: &CometdArgs) -> Result<CometdSummary, BenchError> {
    check(args)?;
    let base = Target::parse(&args.url)?;
    let http = base.with_scheme(Scheme::Http)?;
    let ws = base.with_scheme(Scheme::Ws)?;
    let run = run_id();
    let rooms: Vec<String> = (0..args.rooms)
        .map(|r| format!("/bench/{run}/r{r}"))
        .collect();
    let mut room_sizes = vec![0u64; args.rooms];
    let mut clients: Vec<Client> = (0..args.clients)
        .map(|i| {
            room_sizes[i % args.rooms] += 1;
            Client::new(Some(i % args.rooms))
        })
        .collect();
    let n_pub = if args.idle { 0 } else { args.publishers };
    let publishers: Vec<usize> = (args.clients..args.clients + n_pub).collect();
    clients.extend((0..n_pub).map(|_| Client::new(None)));
    let start = Instant::now();
    let started_at = clock::now_secs_f64();
    let baseline = args.common.server_pid.and_then(rss_kib);
    let mut b = Bench {
        transport: args.transport,
        ws,
        http: http.clone(),
        clients,
        publishers,
        room_sizes,
        rooms,
        opening: 0,
        next_open: 0,
        ready: 0,
        concurrency: args.connect_concurrency,
        local: args.local_addr.clone(),
        payload: args.payload,
        rates: if args.idle {
            Vec::new()
        } else {
            args.rates.clone()
        },
        step_len: args.step,
        warmup: args.warmup,
        drain: args.drain,
        idle: args.idle,
        hold: args.hold,
        settle: args.settle,
        setup_timeout: args.setup_timeout,
        phase: Phase::Setup,
        phase_since: start,
        start,
        setup_s: 0.0,
        steps: Vec::new(),
        due_sent: 0,
        seq: 0,
        pid: args.common.server_pid,
        settled_rss: None,
        end_rss: None,
        connect_cycles: 0,
        scratch: Vec::with_capacity(4096),
        monitor: Monitor::new(args.common.server_pid, &args.common.net_iface, start),
        progress: Progress::new(args.common.quiet, start),
    };
    b.steps = b
        .rates
        .iter()
        .map(|_| StepAcc {
            published: 0,
            expected: 0,
            delivered: 0,
            latency: Latency::new(),
            measure_from_ns: i64::MAX,
            started: None,
            ended: None,
        })
        .collect();
    let mut engine = Engine::new(1 << 20)?;
    let result = engine.run(&mut b);
    b.progress.clear();
    let end = Instant::now();
    b.monitor.sample(end);

    let steps: Vec<CometdStep> = (0..b.steps.len())
        .filter(|&s| b.steps[s].ended.is_some())
        .map(|s| b.step_result(s))
        .collect();
    let idle = args.idle.then(|| idle_result(args, &b, baseline));
    let label = args.common.label.clone().unwrap_or_else(|| {
        format!(
            "cometd {}{} {}",
            args.transport.as_str(),
            if args.idle { " idle" } else { "" },
            args.url
        )
    });
    let mut record = RunRecord::new("cometd", label, started_at);
    record.duration_s = (end - start).as_secs_f64();
    record.params = json!({
        "url": args.url,
        "transport": args.transport,
        "clients": args.clients,
        "rooms": args.rooms,
        "publishers": n_pub,
        "rates": args.rates,
        "step_s": args.step.as_secs_f64(),
        "warmup_s": args.warmup.as_secs_f64(),
        "payload": args.payload,
        "idle": args.idle,
        "hold_s": args.hold.as_secs_f64(),
        "server_pid": args.common.server_pid,
    });
    record.steps = steps
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()
        .map_err(BenchError::Json)?;
    record.summary = json!({ "idle": idle });
    record.passed = steps.iter().all(|s| s.lost == 0);
    record.system = std::mem::take(&mut b.monitor.samples);
    record.write_after(
        result,
        args.common.out.as_deref(),
        args.common.csv.as_deref(),
    )?;
    if let Some(s) = steps.iter().find(|s| s.lost > 0) {
        return Err(BenchError::Verification(format!(
            "{} of {} deliveries lost at {}/s",
            s.lost, s.expected, s.rate
        )));
    }
    Ok(CometdSummary { steps, idle })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn batch_cut_counts_top_level_messages_only() {
        let list = br#"{"a":"x,y","b":[1,2]},{"c":{"d":","}},{"e":"\",\""}"#;
        let first = nth_top_level_comma(list, 1).unwrap();
        assert_eq!(&list[..first], br#"{"a":"x,y","b":[1,2]}"#);
        let second = nth_top_level_comma(list, 2).unwrap();
        assert_eq!(&list[first + 1..second], br#"{"c":{"d":","}}"#);
        assert_eq!(nth_top_level_comma(list, 3), None);
    }
}
