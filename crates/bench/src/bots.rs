//! `bots`: the game-server load test of the Cubeia Firebase reports (seeds
//! 000 and 003), over Herald's protocol.
//!
//! N bots each perform one action per second (`--rate`) and wait for the
//! server's answer before their next one. An action is a `publish` with a
//! reply id to the bot's table channel; the `publish` reply is the answer,
//! so the response time is the publish round trip (the server has accepted,
//! ordered and fanned out the action when it answers). With `--table-size T`
//! (> 1) bots sit at tables of T, subscribe to their table, and receive
//! every other bot's actions, like players at a poker table.
//!
//! Bots are added in steps (`--step-size` every `--step-duration`); each
//! new bot starts at a random phase within its period so the load is
//! smooth. A bot whose answer is late sends its next action as soon as the
//! answer arrives, which is why throughput trails off when the server
//! saturates, as in the seeds' charts.
//!
//! Per step: the theoretical events/s (bots × rate) against the actual
//! answers/s, mean and p95 response time, the server's CPU (and its idle
//! share of one core), the system's idle %, and bandwidth in and out of the
//! server (counted by the bench on its sockets).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::clock;
use crate::common::{CommonArgs, Transport};
use crate::duration::parse_duration;
use crate::engine::{Engine, Io, IoStats, Tick};
use crate::hclients::{run_id, ClientKind, Event, HeraldClients, FIRST_SCENARIO_ID};
use crate::herald_wire::{self, Stamp};
use crate::latency::{Latency, LatencySummary};
use crate::output::RunRecord;
use crate::progress::Progress;
use crate::scenario::{Adapter, Arrival, Scenario};
use crate::sysmon::{mean_between, Monitor};
use crate::target::{Scheme, Target};
use crate::BenchError;

/// Arguments of `bots`.
#[derive(Debug, Clone, clap::Args)]
pub struct BotsArgs {
    /// Herald's URL: ws://127.0.0.1:8080/ws, or tcp://HOST:PORT (the
    /// server's --tcp-listen address) for --transport tcp. Several,
    /// comma-separated (a cluster's nodes): bot i connects to URL i % n.
    pub url: String,
    /// Transport: ws-json, ws-binary or tcp (binary encoding over raw TCP:
    /// seed 000's "binary socket vs WebSocket").
    #[arg(long, value_enum, default_value = "ws-json")]
    pub transport: Transport,
    /// Bots at the last step.
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub bots: usize,
    /// Bots added per step (0: a tenth of --bots).
    #[arg(long, default_value_t = 0)]
    pub step_size: usize,
    /// How long each step runs once its bots are connected.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub step_duration: Duration,
    /// Actions per bot per second.
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
    /// Bots per table; with more than 1, bots subscribe to their table and
    /// receive each other's actions.
    #[arg(long, default_value_t = 1)]
    pub table_size: usize,
    /// Bytes per action payload.
    #[arg(short = 's', long, default_value_t = 100)]
    pub payload: usize,
    /// What the bots do: `publish` actions to a table channel (the
    /// default, above), play `holdem` on the server's game tables
    /// (crate::holdem), or play the scripted game of that name with the
    /// `bot` of its module (`--game NAME --module FILE`, crate::scripted);
    /// --rate, --table-size and --payload apply to `publish` only.
    #[arg(long, default_value = "publish", value_parser = BotGame::parse)]
    pub game: BotGame,
    /// --game NAME (a scripted game): the game's module, whose `bot` export
    /// plays (docs/games.md); required for a scripted game, refused
    /// otherwise.
    #[arg(long)]
    pub module: Option<std::path::PathBuf>,
    /// --game holdem or a scripted game: the lobby branch the bots
    /// subscribe to and pick tables from ("" = every table) [default: ""
    /// for holdem, "NAME" for a scripted game, whose tables are then the
    /// ones under NAME/].
    #[arg(long)]
    pub lobby: Option<String>,
    /// --game holdem: each bot leaves the lobby (`lobby_off`) once seated, so
    /// the measured play carries no lobby traffic (seed 000 left it out); a
    /// bot that must find another table subscribes again.
    #[arg(long)]
    pub lobby_off_when_seated: bool,
    /// --game holdem: the longest think time; each answer waits a uniform
    /// random time below it (and below 3/4 of the turn's timeout).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub think: Duration,
    /// --game holdem: share of turns a bot leaves unanswered, so that the
    /// server's timer acts (0 to 1).
    #[arg(long, default_value_t = 0.02)]
    pub timeout_share: f64,
    /// --game holdem: chat messages per seated bot per minute, published to
    /// the table's chat channel `table:{id}` (0: no chat).
    #[arg(long, default_value_t = 2.0)]
    pub chat_rate: f64,
    /// Local (source) addresses, used round-robin.
    #[arg(short = 'l', long = "local-addr")]
    pub local_addr: Vec<IpAddr>,
    /// Connects in progress at once.
    #[arg(long, default_value_t = 128)]
    pub connect_concurrency: usize,
    /// Output, sampling and time-limit flags (--duration caps the whole run).
    #[command(flatten)]
    pub common: CommonArgs,
}

/// What the bots do: `--game publish|holdem|NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BotGame {
    /// Publish actions to a table channel and wait for each reply (seed
    /// 003's one action per bot per second).
    Publish,
    /// Play Texas Hold'em at the server's tables (`crate::holdem`).
    Holdem,
    /// Play the scripted game of this name (`[[games]] name` on the
    /// server) with its module's `bot` (`crate::scripted`).
    Script(String),
}

impl BotGame {
    /// `--game`'s parser: `publish`, `holdem`, or any other game name
    /// (the characters a lobby path segment may hold).
    pub fn parse(s: &str) -> Result<BotGame, String> {
        match s {
            "publish" => Ok(BotGame::Publish),
            "holdem" => Ok(BotGame::Holdem),
            "" => Err("a game name: publish, holdem, or a scripted game's name".into()),
            name if name.contains('/') || name.chars().any(char::is_whitespace) => Err(format!(
                "{name:?} is not a game name (no '/' or spaces: it is the first segment of the game's lobby paths)"
            )),
            name => Ok(BotGame::Script(name.to_string())),
        }
    }

    /// `--module` goes with a scripted game only.
    pub(crate) fn refuse_module(args: &BotsArgs) -> Result<(), BenchError> {
        match (&args.game, &args.module) {
            (BotGame::Script(_), _) | (_, None) => Ok(()),
            (game, Some(_)) => Err(BenchError::Args(format!(
                "--module is for a scripted game's bots, not --game {}",
                game.name()
            ))),
        }
    }

    /// The name as given to `--game`.
    pub fn name(&self) -> &str {
        match self {
            BotGame::Publish => "publish",
            BotGame::Holdem => "holdem",
            BotGame::Script(name) => name,
        }
    }
}

/// In result files: the name as given to `--game`.
impl Serialize for BotGame {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// One step of a bots run.
#[derive(Debug, Clone, Serialize)]
pub struct BotsStep {
    /// Bots running.
    pub bots: usize,
    /// Bots × rate.
    pub theoretical_eps: f64,
    /// Answers per second.
    pub actual_eps: f64,
    /// Actions sent per second.
    pub sent_eps: f64,
    /// Response time (action to answer).
    pub response: Option<LatencySummary>,
    /// Table pushes received per second (table size > 1).
    pub pushes_per_s: f64,
    /// Server CPU, % of one core.
    pub server_cpu_pct: Option<f64>,
    /// 100 − server CPU %, floored at 0: the idle share of the server's core.
    pub server_idle_pct: Option<f64>,
    /// Idle share of the whole machine, %.
    pub system_idle_pct: Option<f64>,
    /// Bytes per second into the server (sent by the bots).
    pub bandwidth_in_bps: f64,
    /// Bytes per second out of the server (received by the bots).
    pub bandwidth_out_bps: f64,
    /// Error replies in the step.
    pub errors: u64,
    /// Time to connect this step's new bots, seconds.
    pub connect_s: f64,
    /// Measurement window, seconds since the start.
    pub started_s: f64,
    /// See `started_s`.
    pub ended_s: f64,
}

/// One bot.
#[derive(Debug, Clone, Copy, Default)]
struct Bot {
    table: usize,
    /// The scheduled time of its next action.
    due_ns: i64,
    /// Send time of the action awaiting its answer.
    outstanding: Option<i64>,
    /// Its next action is due but waits for the outstanding answer.
    blocked: bool,
    seq: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Connecting,
    Running,
    Done,
}

struct Bots {
    clients: HeraldClients,
    bots: Vec<Bot>,
    /// (due, bot) of bots waiting for their next action.
    heap: BinaryHeap<Reverse<(i64, usize)>>,
    /// Table channels are `<prefix>.t<table>`.
    prefix: String,
    table_size: usize,
    /// Bots whose schedule has started (the others are still connecting).
    started: usize,
    period_ns: i64,
    payload_len: usize,
    max_bots: usize,
    step_size: usize,
    step_duration: Duration,
    deadline: Option<Instant>,
    phase: Phase,
    phase_since: Instant,
    start: Instant,
    connect_s: f64,
    window_start_stats: IoStats,
    answers: u64,
    sent: u64,
    pushes: u64,
    errors: u64,
    response: Latency,
    steps: Vec<BotsStep>,
    payload: Vec<u8>,
    frame: Vec<u8>,
    /// Scratch for the channel name (no allocation per action).
    channel: String,
    rng: fastrand::Rng,
    monitor: Monitor,
    progress: Progress,
    /// Bots answered in the current message (reused, never shrunk).
    answered: Vec<usize>,
}

impl Bots {
    fn add_step(&mut self) {
        let have = self.bots.len();
        let n = self.step_size.min(self.max_bots - have);
        for i in have..have + n {
            let table = i / self.table_size;
            let subs = if self.table_size > 1 {
                vec![format!("{}.t{table}", self.prefix)]
            } else {
                Vec::new()
            };
            self.clients.add(subs);
            self.bots.push(Bot {
                table,
                ..Bot::default()
            });
        }
    }

    /// Sends bot `b`'s action now.
    fn act(&mut self, io: &mut Io, b: usize, now_ns: i64) {
        let enc = self.clients.enc;
        let Some(bot) = self.bots.get_mut(b) else {
            return;
        };
        bot.seq += 1;
        bot.outstanding = Some(now_ns);
        bot.blocked = false;
        let stamp = Stamp {
            publisher: b as u32,
            seq: bot.seq,
            time_ns: now_ns,
        };
        let table = bot.table;
        self.payload.clear();
        herald_wire::stamp_payload(enc, stamp, self.payload_len, &mut self.payload);
        self.frame.clear();
        self.channel.clear();
        self.channel.push_str(&self.prefix);
        self.channel.push_str(".t");
        self.channel.push_str(itoa(table, &mut [0u8; 20]));
        herald_wire::publish(
            enc,
            FIRST_SCENARIO_ID + b as u32,
            &self.channel,
            &self.payload,
            &mut self.frame,
        );
        io.send(
            self.clients.clients[b].conn,
            herald_wire::opcode(enc),
            &self.frame,
        );
        self.sent += 1;
    }

    /// Bot `b`'s action was answered at `now_ns`.
    fn on_answer(&mut self, io: &mut Io, b: usize, now_ns: i64) {
        let Some(bot) = self.bots.get_mut(b) else {
            return;
        };
        let Some(sent) = bot.outstanding.take() else {
            return;
        };
        self.response.record_ns(now_ns - sent);
        self.answers += 1;
        if bot.blocked {
            // Its next action was due while it waited: act now.
            self.act(io, b, clock::now_ns());
            let due = self.bots[b].due_ns;
            self.heap.push(Reverse((due, b)));
        }
    }

    fn run_due(&mut self, io: &mut Io) {
        let now_ns = clock::now_ns();
        while let Some(&Reverse((due, b))) = self.heap.peek() {
            if due > now_ns {
                break;
            }
            self.heap.pop();
            let Some(bot) = self.bots.get_mut(b) else {
                continue;
            };
            bot.due_ns = due + self.period_ns;
            if bot.outstanding.is_some() {
                bot.blocked = true;
            } else {
                self.act(io, b, now_ns);
                self.heap.push(Reverse((self.bots[b].due_ns, b)));
            }
        }
    }

    /// Starts the schedules of the bots connected since the last call, each
    /// at a random phase within its period.
    fn start_new_bots(&mut self) {
        let now_ns = clock::now_ns();
        let from = self.started;
        self.started = self.bots.len();
        for b in from..self.bots.len() {
            let phase = self.rng.i64(0..self.period_ns.max(1));
            self.bots[b].due_ns = now_ns + phase;
            self.heap.push(Reverse((now_ns + phase, b)));
        }
    }

    fn finish_step(&mut self, io: &Io, now: Instant) {
        let started = (self.phase_since - self.start).as_secs_f64();
        let ended = (now - self.start).as_secs_f64();
        let secs = (now - self.phase_since).as_secs_f64().max(1e-9);
        self.monitor.sample(now);
        let samples = &self.monitor.samples;
        let cpu = mean_between(samples, started, ended, |s| s.server_cpu_pct);
        let step = BotsStep {
            bots: self.bots.len(),
            theoretical_eps: self.bots.len() as f64 * 1e9 / self.period_ns as f64,
            actual_eps: self.answers as f64 / secs,
            sent_eps: self.sent as f64 / secs,
            response: self.response.summary(),
            pushes_per_s: self.pushes as f64 / secs,
            server_cpu_pct: cpu,
            server_idle_pct: cpu.map(|c| (100.0 - c).max(0.0)),
            system_idle_pct: mean_between(samples, started, ended, |s| s.system_idle_pct),
            bandwidth_in_bps: (io.stats.bytes_out - self.window_start_stats.bytes_out) as f64
                / secs,
            bandwidth_out_bps: (io.stats.bytes_in - self.window_start_stats.bytes_in) as f64 / secs,
            errors: self.errors,
            connect_s: self.connect_s,
            started_s: started,
            ended_s: ended,
        };
        self.progress.clear();
        let r = step.response.clone();
        println!(
            "bots: {:6}    theoretical: {:8.0}/s    actual: {:8.0}/s    response mean: {:7.2}ms    p95: {:7.2}ms    server cpu: {:5.1}%    in: {:6.0} KiB/s    out: {:6.0} KiB/s",
            step.bots,
            step.theoretical_eps,
            step.actual_eps,
            r.as_ref().map_or(0.0, |r| r.mean_ms),
            r.as_ref().map_or(0.0, |r| r.p95_ms),
            step.server_cpu_pct.unwrap_or(f64::NAN),
            step.bandwidth_in_bps / 1024.0,
            step.bandwidth_out_bps / 1024.0,
        );
        self.steps.push(step);
        self.answers = 0;
        self.sent = 0;
        self.pushes = 0;
        self.errors = 0;
        self.response.reset();
    }
}

impl Scenario for Bots {
    fn group(&mut self, _: u64) -> &mut HeraldClients {
        &mut self.clients
    }

    fn on_arrival(&mut self, io: &mut Io, msg: Arrival<'_>) -> Result<(), BenchError> {
        let now_ns = msg.now_ns;
        // Replies are collected first: answering one sends the bot's next
        // action, which needs the clients the callback is borrowed from.
        let mut answered = std::mem::take(&mut self.answered);
        let (pushes, errors) = (&mut self.pushes, &mut self.errors);
        msg.feed(&mut self.clients, io, &mut |ev| match ev {
            Event::Reply { id, .. } if id >= FIRST_SCENARIO_ID => {
                answered.push((id - FIRST_SCENARIO_ID) as usize)
            }
            Event::Error { .. } => *errors += 1,
            Event::Pub { .. } => *pushes += 1,
            _ => {}
        })?;
        for &b in &answered {
            self.on_answer(io, b, now_ns);
        }
        answered.clear();
        self.answered = answered;
        Ok(())
    }

    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        let mut next = now + Duration::from_millis(20);
        match self.phase {
            Phase::Connecting => {
                self.clients.tick(io)?;
                self.run_due(io);
                if self.clients.all_ready() {
                    self.connect_s = (now - self.phase_since).as_secs_f64();
                    self.start_new_bots();
                    self.phase = Phase::Running;
                    self.phase_since = now;
                    self.window_start_stats = io.stats;
                    self.answers = 0;
                    self.sent = 0;
                    self.pushes = 0;
                    self.errors = 0;
                    self.response.reset();
                }
            }
            Phase::Running => {
                self.run_due(io);
                let out_of_time = self.deadline.is_some_and(|d| now >= d);
                if now - self.phase_since >= self.step_duration || out_of_time {
                    self.finish_step(io, now);
                    if self.bots.len() >= self.max_bots || out_of_time {
                        self.phase = Phase::Done;
                    } else {
                        self.add_step();
                        self.phase = Phase::Connecting;
                        self.phase_since = now;
                    }
                } else {
                    next = next.min(self.phase_since + self.step_duration);
                }
            }
            Phase::Done => return Ok(Tick::Done),
        }
        if let Some(&Reverse((due, _))) = self.heap.peek() {
            let wait = due - clock::now_ns();
            next = next.min(now + Duration::from_nanos(wait.max(0) as u64));
        }
        let sample = self.monitor.tick(now);
        let text = format!(
            "[{:>4.0}s] {} bots ({} ready) · {} answers this step",
            (now - self.start).as_secs_f64(),
            self.bots.len(),
            self.clients.ready(),
            self.answers
        );
        let show = self.progress.tick(now, || text);
        Ok(Tick::Continue(Some(next.min(sample).min(show))))
    }
}

/// The bots' clients (`ws-json`, `ws-binary` or `tcp`; with several URLs,
/// bot i connects to URL i % n), and the servers; `why` says in the error
/// for other transports why they cannot serve.
pub(crate) fn bot_clients(
    args: &BotsArgs,
    why: &str,
) -> Result<(HeraldClients, Vec<Target>), BenchError> {
    let (kind, scheme) = match args.transport {
        Transport::WsJson | Transport::WsBinary => (ClientKind::Ws, Scheme::Ws),
        Transport::Tcp => (ClientKind::Tcp, Scheme::Tcp),
        Transport::Sse | Transport::Poll => {
            return Err(BenchError::Args(format!(
                "{why}: use ws-json, ws-binary or tcp, not {}",
                args.transport.as_str()
            )))
        }
    };
    let targets = crate::fanout::parse_urls(std::slice::from_ref(&args.url), scheme)?;
    let clients = HeraldClients::with_kind(
        kind,
        &targets,
        args.transport.encoding(),
        args.local_addr.clone(),
        args.connect_concurrency,
        0,
    );
    Ok((clients, targets))
}

/// Runs `bots` in publish mode; returns its steps. `--game holdem` runs
/// with [`crate::holdem::run`] instead (`herald bench bots` dispatches).
pub fn run(args: &BotsArgs) -> Result<Vec<BotsStep>, BenchError> {
    if args.game != BotGame::Publish {
        return Err(BenchError::Args(format!(
            "--game {} runs with holdem::run or scripted::run, not bots::run",
            args.game.name()
        )));
    }
    BotGame::refuse_module(args)?;
    if args.bots == 0 || args.rate.is_nan() || args.rate <= 0.0 {
        return Err(BenchError::Args(
            "--bots and --rate must be positive".into(),
        ));
    }
    let (clients, _) = bot_clients(args, "bots publish and wait for each answer")?;
    let run = run_id();
    let step_size = if args.step_size == 0 {
        (args.bots / 10).max(1)
    } else {
        args.step_size
    };
    let table_size = args.table_size.max(1);
    let start = Instant::now();
    let started_at = clock::now_secs_f64();
    let mut bots = Bots {
        clients,
        bots: Vec::new(),
        heap: BinaryHeap::new(),
        prefix: format!("bench.{run}.bots"),
        table_size,
        started: 0,
        period_ns: (1e9 / args.rate) as i64,
        payload_len: args.payload,
        max_bots: args.bots,
        step_size,
        step_duration: args.step_duration,
        deadline: args.common.duration.map(|d| start + d),
        phase: Phase::Connecting,
        phase_since: start,
        start,
        connect_s: 0.0,
        window_start_stats: IoStats::default(),
        answers: 0,
        sent: 0,
        pushes: 0,
        errors: 0,
        response: Latency::new(),
        steps: Vec::new(),
        payload: Vec::with_capacity(args.payload + 64),
        frame: Vec::with_capacity(args.payload + 128),
        channel: String::with_capacity(64),
        rng: fastrand::Rng::new(),
        monitor: Monitor::new(args.common.server_pid, &args.common.net_iface, start),
        progress: Progress::new(args.common.quiet, start),
        answered: Vec::with_capacity(16),
    };
    bots.add_step();
    let mut engine = Engine::new(1 << 20)?;
    let result = engine.run(&mut Adapter(&mut bots));
    bots.progress.clear();
    let end = Instant::now();
    bots.monitor.sample(end);

    let label = args.common.label.clone().unwrap_or_else(|| {
        format!(
            "bots {} table {} {}/s",
            args.transport.as_str(),
            table_size,
            args.rate
        )
    });
    let mut record = RunRecord::new("bots", label, started_at);
    record.duration_s = (end - start).as_secs_f64();
    record.params = json!({
        "url": args.url,
        "transport": args.transport,
        "bots": args.bots,
        "step_size": step_size,
        "step_duration_s": args.step_duration.as_secs_f64(),
        "rate": args.rate,
        "table_size": table_size,
        "payload": args.payload,
    });
    record.steps = bots
        .steps
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()
        .map_err(BenchError::Json)?;
    let last = bots.steps.last();
    record.summary = json!({
        "steps": bots.steps.len(),
        "max_actual_eps": bots.steps.iter().map(|s| s.actual_eps).fold(0.0, f64::max),
        "bots": last.map(|s| s.bots),
    });
    record.system = std::mem::take(&mut bots.monitor.samples);
    record.write_after(
        result,
        args.common.out.as_deref(),
        args.common.csv.as_deref(),
    )?;
    Ok(bots.steps)
}

/// The decimal form of `n`, written into `buf`.
fn itoa(n: usize, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[i..]).unwrap_or("0")
}
