//! `bots --game NAME --module FILE`: load-tests any scripted game (a game
//! module in JavaScript, docs/games.md) with the `bot` its module exports,
//! the way `--game holdem` ([`crate::holdem`]) load-tests Texas Hold'em.
//!
//! The bench loads the module itself (`herald_script::bots`, QuickJS, the
//! module's default limits) and runs one bot of it per connection; the
//! server runs the same module as `[[games]] name = "NAME"`. Each bot is one
//! connection (WebSocket JSON, the natural encoding since modules speak
//! JSON; WebSocket binary or raw TCP also work, the game data being the same
//! JSON text in bytes) that sends `connect`, subscribes to the lobby branch
//! `NAME` (the tables under `NAME/`, the server's default paths; `--lobby`
//! chooses another branch) and takes the fullest table with a free seat
//! ([`crate::seating`], shared with the poker bots; 116 makes it try
//! another, none free makes it look again every half second). Seated, it
//! creates the module's bot for its seat (`bot.init(seat)`) and feeds it
//! the `sit` reply's snapshot (`on(memory, "snapshot", data)`) and the data
//! of every `game` push of its table (`on(memory, "game", data)`); whatever
//! the bot returns is sent as an `act` with that `data` (JSON verbatim,
//! protocol §3.3), after a think time uniform below `--think` (0: at
//! once). Every action a bot returns is sent, in order. Taken off its table
//! (`unseat`, any code, counted by code) it drops its bot and sits again at
//! another table.
//!
//! Steps, settling and the measured window are the poker bots' ([`crate::
//! ramp`]). Per step:
//! - players seated; tables where they sit; tables playing (those that sent
//!   the bots at least one `game` push in the window);
//! - actions sent per second, and their response time: from sending `act`
//!   to its reply (accepted or refused; replies on a connection come in the
//!   order of its commands), p50/p99/max from the HDR histogram;
//! - refused actions (error 118: the module refused the action, e.g. out of
//!   turn: part of a game, not fatal), every `act` error by code, `unseat`
//!   pushes by code, `sit` conflicts (116);
//! - game events received per second (every `game` push to every bot);
//! - hands per minute from the server's `/metrics`
//!   (`herald_game_hands_total`, every game of the node(s); a scripted
//!   game counts a hand at each `ctx.handEnded()`), read at the window's
//!   edges from each WebSocket URL's host (a blocking GET of at most half a
//!   second each); absent over raw TCP or when `/metrics` cannot be read;
//! - server CPU and its idle share ([`crate::sysmon`], `--server-pid`), and
//!   bytes per second in and out on the bench's sockets;
//! - `bot_faults`: calls into the module's bot that threw, ran too long or
//!   returned what is not JSON (the first one's message is in the result
//!   file's summary); `errors`: unreadable messages and unexpected replies.
//!
//! Nothing a server or a module does can panic the bench. A lost connection
//! ends the run, as in the other scenarios.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use herald_proto::{Command, Encoding, Push, Reply, ServerMsg};
use herald_script::bots::{Bot as Brain, Bots as Module, Event as BotEvent};
use herald_script::Limits;
use serde::Serialize;
use serde_json::json;

use crate::bots::{BotGame, BotsArgs};
use crate::clock;
use crate::engine::{ConnId, Io};
use crate::hclients::{HeraldClients, FIRST_SCENARIO_ID};
use crate::holdem::wire::{self, GamePush};
use crate::latency::{Latency, LatencySummary};
use crate::ramp::{game_clients, play, GameBots, Ramp, Window};
use crate::scenario::{Got, Inbox};
use crate::seating::LobbyView;
use crate::target::Scheme;
use crate::BenchError;

/// Command ids, one per kind (`act` replies are told apart by order).
const LOBBY_ID: u32 = FIRST_SCENARIO_ID + 1;
const SIT_ID: u32 = FIRST_SCENARIO_ID + 2;
const ACT_ID: u32 = FIRST_SCENARIO_ID + 3;

/// How long a bot with no free table waits before looking again.
const RETRY_NS: i64 = 500_000_000;

/// Timer kinds in the heap (the low bit of a token).
const T_ACT: u64 = 0;
const T_CHOOSE: u64 = 1;

/// How long reading `/metrics` may take, per server.
const METRICS_TIMEOUT: Duration = Duration::from_millis(500);

/// One step of a `bots --game NAME` run.
#[derive(Debug, Clone, Serialize)]
pub struct ScriptStep {
    /// Bots running.
    pub bots: usize,
    /// Bots seated at the end of the step.
    pub players: usize,
    /// Tables where at least one bot sits, at the end of the step.
    pub tables_seated: usize,
    /// Tables that sent the bots a `game` push in the window.
    pub tables_playing: usize,
    /// Actions (`act`) sent per second.
    pub actions_per_s: f64,
    /// Action response time: `act` sent to its reply (accepted or not).
    pub response: Option<LatencySummary>,
    /// `act` answered 118 (refused by the module).
    pub refused: u64,
    /// Every error answer to `act`, by code (JSON keys are the codes).
    pub act_errors: BTreeMap<u16, u64>,
    /// `unseat` pushes to the bots, by code.
    pub unseats: BTreeMap<u16, u64>,
    /// `sit` answered 116 (the seat went to someone else, or refused).
    pub seat_conflicts: u64,
    /// `game` pushes received per second, all bots together.
    pub game_events_per_s: f64,
    /// Hands finished per minute on the server(s), from `/metrics`
    /// (`herald_game_hands_total`); absent when it could not be read.
    pub hands_per_min: Option<f64>,
    /// Calls into the module's bot that failed (threw, too long, not JSON).
    pub bot_faults: u64,
    /// Unexpected: unreadable messages, undecodable replies.
    pub errors: u64,
    /// Time to connect and seat this step's new bots, seconds.
    pub connect_s: f64,
    /// The measured window: its time, server CPU, bandwidth in and out.
    #[serde(flatten)]
    pub window: Window,
}

/// Where a bot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Connecting (`connect` not answered yet).
    Setup,
    /// `lobby` sent.
    Lobby,
    /// Needs a table (a `T_CHOOSE` timer is set).
    Free,
    /// `sit` sent to this table.
    Sitting(u64),
    /// Seated.
    Seated(u64),
}

/// One bot: a connection and, while seated, the module's bot.
struct Player {
    at: At,
    /// The module's bot for its seat (none when its `init` failed).
    brain: Option<Brain>,
    /// Tables that refused it (116) or unseated it since it last sat.
    tried: Vec<u64>,
    /// Bumped to invalidate its timers (when it leaves a table).
    gen: u64,
    /// Actions waiting for their think time, in order.
    pending: VecDeque<Bytes>,
    /// Send times of its `act`s awaiting their replies, in order.
    in_flight: VecDeque<i64>,
}

/// The counters of a measurement window.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    acts: u64,
    refused: u64,
    seat_conflicts: u64,
    game_events: u64,
    bot_faults: u64,
    errors: u64,
}

struct Scripted {
    clients: HeraldClients,
    enc: Encoding,
    module: Module,
    bots: Vec<Player>,
    /// (due ns, bot, token = gen << 1 | kind).
    heap: BinaryHeap<Reverse<(i64, usize, u64)>>,
    lobby_path: String,
    lobby: LobbyView,
    think_ms: u64,
    /// Where `/metrics` is read (the WebSocket URLs' servers).
    metrics: Vec<SocketAddr>,
    /// `herald_game_hands_total` at the window's start.
    hands_from: Option<u64>,
    ramp: Ramp,
    c: Counters,
    act_errors: BTreeMap<u16, u64>,
    unseats: BTreeMap<u16, u64>,
    tables_playing: HashSet<u64>,
    response: Latency,
    /// The first bot fault's message.
    first_fault: Option<String>,
    steps: Vec<ScriptStep>,
    inbox: Inbox,
    frame: Vec<u8>,
    rng: fastrand::Rng,
}

impl Scripted {
    fn conn(&self, b: usize) -> ConnId {
        self.clients.clients[b].conn
    }

    fn send_frame(&mut self, io: &mut Io, b: usize) {
        let conn = self.conn(b);
        io.send(conn, crate::herald_wire::opcode(self.enc), &self.frame);
    }

    fn send_command(&mut self, io: &mut Io, b: usize, id: u32, cmd: Command) {
        self.frame.clear();
        wire::command(self.enc, id, cmd, &mut self.frame);
        self.send_frame(io, b);
    }

    fn schedule(&mut self, b: usize, due_ns: i64, kind: u64) {
        let gen = self.bots[b].gen;
        self.heap.push(Reverse((due_ns, b, gen << 1 | kind)));
    }

    /// Bot `b` is connected: it subscribes to the lobby.
    fn ask_lobby(&mut self, io: &mut Io, b: usize) {
        self.bots[b].at = At::Lobby;
        let path = self.lobby_path.clone();
        self.send_command(io, b, LOBBY_ID, Command::Lobby { path });
    }

    /// Bot `b` picks a table and sends `sit`, or waits for one to free up.
    fn choose(&mut self, io: &mut Io, b: usize, now_ns: i64) {
        match self.lobby.pick(&self.bots[b].tried) {
            Some(table) => {
                self.bots[b].at = At::Sitting(table);
                self.lobby.claim(table);
                self.send_command(io, b, SIT_ID, wire::sit(table));
            }
            None => {
                let bot = &mut self.bots[b];
                bot.at = At::Free;
                // Tables that refused may have a seat later.
                bot.tried.clear();
                bot.gen += 1;
                let jitter = self.rng.i64(0..RETRY_NS / 2);
                self.schedule(b, now_ns + RETRY_NS + jitter, T_CHOOSE);
            }
        }
    }

    /// Bot `b` is no longer at `table`: it drops its bot and looks for
    /// another table.
    fn left_table(&mut self, io: &mut Io, b: usize, table: u64, now_ns: i64) {
        self.lobby.release(table);
        let bot = &mut self.bots[b];
        bot.gen += 1;
        bot.brain = None;
        bot.pending.clear();
        self.choose(io, b, now_ns);
    }

    /// Bot `b` sits at `table`: its module bot is made and sees the
    /// snapshot.
    fn seated(&mut self, io: &mut Io, b: usize, table: u64, seat: u32, snapshot: &[u8], now: i64) {
        let bot = &mut self.bots[b];
        bot.at = At::Seated(table);
        bot.tried.clear();
        bot.gen += 1;
        match self.module.bot(seat) {
            Ok(brain) => {
                bot.brain = Some(brain);
                self.tell(io, b, BotEvent::Snapshot, snapshot, now);
            }
            Err(f) => self.fault(f),
        }
    }

    fn fault(&mut self, f: herald_script::Fault) {
        self.c.bot_faults += 1;
        if self.first_fault.is_none() {
            self.first_fault = Some(f.to_string());
        }
    }

    /// Tells bot `b`'s module bot about `msg`; queues the action it returns.
    fn tell(&mut self, io: &mut Io, b: usize, event: BotEvent, msg: &[u8], now_ns: i64) {
        let Some(brain) = self.bots[b].brain.as_mut() else {
            return;
        };
        match brain.on(event, msg) {
            Ok(Some(action)) if self.think_ms == 0 => self.act(io, b, &action, now_ns),
            Ok(Some(action)) => {
                self.bots[b].pending.push_back(action);
                let think = self.rng.u64(0..self.think_ms) as i64;
                self.schedule(b, now_ns + think * 1_000_000, T_ACT);
            }
            Ok(None) => {}
            Err(f) => self.fault(f),
        }
    }

    /// Sends bot `b`'s action `data` to its table.
    fn act(&mut self, io: &mut Io, b: usize, data: &[u8], now_ns: i64) {
        let At::Seated(table) = self.bots[b].at else {
            return;
        };
        self.bots[b].in_flight.push_back(now_ns);
        self.c.acts += 1;
        self.frame.clear();
        wire::act(self.enc, ACT_ID, table, data, &mut self.frame);
        self.send_frame(io, b);
    }

    fn on_reply(&mut self, io: &mut Io, b: usize, id: u32, msg: &[u8], now_ns: i64) {
        match (id, self.bots[b].at) {
            (LOBBY_ID, At::Lobby) => {
                if self.lobby.on_reply(self.enc, msg) {
                    self.choose(io, b, now_ns);
                } else {
                    self.c.errors += 1;
                    self.ask_lobby(io, b);
                }
            }
            (SIT_ID, At::Sitting(table)) => match self.enc.decode_server(msg) {
                Ok(ServerMsg::Reply {
                    reply: Reply::Sit { seat, data },
                    ..
                }) => self.seated(io, b, table, seat, &data, now_ns),
                _ => {
                    self.c.errors += 1;
                    self.left_table(io, b, table, now_ns);
                }
            },
            (ACT_ID, _) => {
                if let Some(sent) = self.bots[b].in_flight.pop_front() {
                    self.response.record_ns(now_ns - sent);
                }
            }
            _ => self.c.errors += 1,
        }
    }

    fn on_error(
        &mut self,
        io: &mut Io,
        b: usize,
        id: u32,
        code: u16,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        match (id, self.bots[b].at) {
            (LOBBY_ID, _) => {
                return Err(BenchError::Client(format!(
                    "bot {}: the server refused `lobby` (error {code}); does it run game tables?",
                    b + 1
                )))
            }
            (SIT_ID, At::Sitting(table)) => {
                match code {
                    116 => {
                        self.c.seat_conflicts += 1;
                        self.bots[b].tried.push(table);
                    }
                    115 => self.lobby.remove(table),
                    _ => self.c.errors += 1,
                }
                self.left_table(io, b, table, now_ns);
            }
            (ACT_ID, _) => {
                if let Some(sent) = self.bots[b].in_flight.pop_front() {
                    self.response.record_ns(now_ns - sent);
                }
                if code == 118 {
                    self.c.refused += 1;
                }
                *self.act_errors.entry(code).or_insert(0) += 1;
            }
            _ => self.c.errors += 1,
        }
        Ok(())
    }

    fn on_push(&mut self, io: &mut Io, b: usize, msg: &[u8], now_ns: i64) {
        match wire::push_kind(self.enc, msg) {
            GamePush::Game => {
                self.c.game_events += 1;
                match wire::game(self.enc, msg) {
                    Some((table, data)) => self.on_game(io, b, table, &data, now_ns),
                    None => self.c.errors += 1,
                }
            }
            GamePush::LobbyUpdate => {
                if !self.lobby.on_update(self.enc, msg) {
                    self.c.errors += 1;
                }
            }
            GamePush::Unseat => match self.enc.decode_server(msg) {
                Ok(ServerMsg::Push(Push::Unseat { table, code, .. })) => {
                    if self.bots[b].at == At::Seated(table) {
                        *self.unseats.entry(code).or_insert(0) += 1;
                        // Elsewhere first: this table may be closing.
                        self.bots[b].tried.push(table);
                        self.left_table(io, b, table, now_ns);
                    }
                }
                _ => self.c.errors += 1,
            },
            GamePush::Seat | GamePush::Other => {}
        }
    }

    /// A `game` push from `table` to bot `b`.
    fn on_game(&mut self, io: &mut Io, b: usize, table: u64, data: &[u8], now_ns: i64) {
        self.tables_playing.insert(table);
        if self.bots[b].at == At::Seated(table) {
            self.tell(io, b, BotEvent::Game, data, now_ns);
        }
    }

    /// Runs the timers that are due.
    fn run_timers(&mut self, io: &mut Io) {
        let now_ns = clock::now_ns();
        while let Some(&Reverse((due, b, token))) = self.heap.peek() {
            if due > now_ns {
                break;
            }
            self.heap.pop();
            let Some(bot) = self.bots.get_mut(b) else {
                continue;
            };
            if token >> 1 != bot.gen {
                continue;
            }
            match (token & 1, bot.at) {
                (T_ACT, At::Seated(_)) => {
                    if let Some(action) = bot.pending.pop_front() {
                        self.act(io, b, &action, now_ns);
                    }
                }
                (T_CHOOSE, At::Free) => self.choose(io, b, now_ns),
                _ => {}
            }
        }
    }

    /// `herald_game_hands_total` summed over the servers, if every one
    /// answered.
    fn hands(&self) -> Option<u64> {
        if self.metrics.is_empty() {
            return None;
        }
        self.metrics
            .iter()
            .map(|&addr| read_counter(addr, "herald_game_hands_total"))
            .sum()
    }
}

impl GameBots for Scripted {
    fn parts(&mut self) -> (&mut HeraldClients, &mut Inbox, &mut Ramp) {
        (&mut self.clients, &mut self.inbox, &mut self.ramp)
    }

    fn bots(&self) -> usize {
        self.bots.len()
    }

    fn on_got(
        &mut self,
        io: &mut Io,
        b: usize,
        got: Got,
        msg: &[u8],
        now_ns: i64,
    ) -> Result<(), BenchError> {
        match got {
            Got::Reply(id) => self.on_reply(io, b, id, msg, now_ns),
            Got::Error(id, code) => self.on_error(io, b, id, code, now_ns)?,
            Got::Other => self.on_push(io, b, msg, now_ns),
            Got::Pub => {}
            Got::Unreadable => self.c.errors += 1,
        }
        Ok(())
    }

    fn on_ready(&mut self, io: &mut Io, b: usize) {
        if self.bots[b].at == At::Setup {
            self.ask_lobby(io, b);
        }
    }

    fn run_due(&mut self, io: &mut Io) -> Option<i64> {
        self.run_timers(io);
        self.heap.peek().map(|&Reverse((due, _, _))| due)
    }

    /// All bots connected and either seated or waiting for a free table.
    fn settled(&self) -> bool {
        self.clients.all_ready()
            && self
                .bots
                .iter()
                .all(|b| matches!(b.at, At::Seated(_) | At::Free))
    }

    fn players(&self) -> usize {
        self.bots
            .iter()
            .filter(|b| matches!(b.at, At::Seated(_)))
            .count()
    }

    fn reset_window(&mut self, _: &Io) {
        self.c = Counters::default();
        self.act_errors.clear();
        self.unseats.clear();
        self.tables_playing.clear();
        self.response.reset();
        self.hands_from = self.hands();
    }

    fn finish_step(&mut self, io: &Io, now: Instant, more: bool) {
        let hands = self.hands_from.zip(self.hands());
        let w = self.ramp.window(io, now, more);
        let c = self.c;
        let seated: HashSet<u64> = self
            .bots
            .iter()
            .filter_map(|b| match b.at {
                At::Seated(t) => Some(t),
                _ => None,
            })
            .collect();
        let step = ScriptStep {
            bots: self.bots.len(),
            players: self.players(),
            tables_seated: seated.len(),
            tables_playing: self.tables_playing.len(),
            actions_per_s: c.acts as f64 / w.secs,
            response: self.response.summary(),
            refused: c.refused,
            act_errors: self.act_errors.clone(),
            unseats: self.unseats.clone(),
            seat_conflicts: c.seat_conflicts,
            game_events_per_s: c.game_events as f64 / w.secs,
            hands_per_min: hands.map(|(a, b)| b.saturating_sub(a) as f64 * 60.0 / w.secs),
            bot_faults: c.bot_faults,
            errors: c.errors,
            connect_s: self.ramp.connect_s,
            window: w,
        };
        let r = step.response.as_ref();
        println!(
            "bots: {:6}    players: {:6}    tables: {:5}    actions/s: {:8.0}    response p50: {:7.2}ms    p99: {:7.2}ms    max: {:7.2}ms    refused: {}    events/s: {:8.0}    hands/min: {}    server cpu: {:5.1}%    unseats: {:?}    errors: {}",
            step.bots,
            step.players,
            step.tables_playing,
            step.actions_per_s,
            r.map_or(0.0, |r| r.p50_ms),
            r.map_or(0.0, |r| r.p99_ms),
            r.map_or(0.0, |r| r.max_ms),
            step.refused,
            step.game_events_per_s,
            step.hands_per_min.map_or("-".into(), |h| format!("{h:.1}")),
            w.server_cpu_pct.unwrap_or(f64::NAN),
            step.unseats,
            step.errors + step.bot_faults,
        );
        self.steps.push(step);
    }

    fn add_step(&mut self) {
        for _ in 0..self.ramp.new_bots(self.bots.len()) {
            self.clients.add(Vec::new());
            self.bots.push(Player {
                at: At::Setup,
                brain: None,
                tried: Vec::new(),
                gen: 0,
                pending: VecDeque::new(),
                in_flight: VecDeque::new(),
            });
        }
    }

    fn progress(&self, now: Instant) -> String {
        format!(
            "[{:>4.0}s] {} bots ({} ready, {} seated) · {} actions this step",
            self.ramp.elapsed(now),
            self.bots.len(),
            self.clients.ready(),
            self.players(),
            self.c.acts
        )
    }
}

/// Reads counter `name` (no labels) from `GET /metrics` of the server at
/// `addr`; `None` if it cannot be read within [`METRICS_TIMEOUT`].
fn read_counter(addr: SocketAddr, name: &str) -> Option<u64> {
    let mut s = TcpStream::connect_timeout(&addr, METRICS_TIMEOUT).ok()?;
    s.set_read_timeout(Some(METRICS_TIMEOUT)).ok()?;
    s.set_write_timeout(Some(METRICS_TIMEOUT)).ok()?;
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).ok()?;
    let text = String::from_utf8_lossy(&body);
    if !text.starts_with("HTTP/1.1 200") {
        return None;
    }
    text.lines().find_map(|l| {
        let value = l.strip_prefix(name)?.strip_prefix(' ')?;
        value.trim().parse::<f64>().ok().map(|v| v as u64)
    })
}

/// Runs `bots --game NAME --module FILE`; returns its steps.
pub fn run(args: &BotsArgs) -> Result<Vec<ScriptStep>, BenchError> {
    let BotGame::Script(name) = &args.game else {
        return Err(BenchError::Args(format!(
            "--game {} is not a scripted game",
            args.game.name()
        )));
    };
    let Some(path) = &args.module else {
        return Err(BenchError::Args(format!(
            "--game {name} names a scripted game: give its module with --module FILE (its `bot` export plays)"
        )));
    };
    if args.bots == 0 {
        return Err(BenchError::Args("--bots must be positive".into()));
    }
    let module =
        Module::load(path, Limits::default()).map_err(|e| BenchError::Args(e.to_string()))?;
    let (clients, targets) = game_clients(args, "scripted game bots")?;
    let metrics = if targets.iter().all(|t| t.scheme == Scheme::Ws) {
        let mut addrs: Vec<SocketAddr> = targets.iter().map(|t| t.addr).collect();
        addrs.sort_unstable();
        addrs.dedup();
        addrs
    } else {
        Vec::new()
    };
    let mut s = Scripted {
        clients,
        enc: args.transport.encoding(),
        module,
        bots: Vec::new(),
        heap: BinaryHeap::new(),
        lobby_path: args.lobby.clone().unwrap_or_else(|| name.clone()),
        lobby: LobbyView::default(),
        think_ms: args.think.as_millis() as u64,
        metrics,
        hands_from: None,
        ramp: Ramp::new(args),
        c: Counters::default(),
        act_errors: BTreeMap::new(),
        unseats: BTreeMap::new(),
        tables_playing: HashSet::new(),
        response: Latency::new(),
        first_fault: None,
        steps: Vec::new(),
        inbox: Inbox::default(),
        frame: Vec::with_capacity(256),
        rng: fastrand::Rng::new(),
    };
    let result = play(&mut s)?;
    let label = format!("{name} bots {}", args.transport.as_str());
    let extra = json!({
        "module": path.display().to_string(),
        "lobby": s.lobby_path,
    });
    let mut record = s.ramp.record("bots-script", args, label, &s.steps, extra)?;
    let last = s.steps.last();
    record.summary = json!({
        "steps": s.steps.len(),
        "players": last.map(|s| s.players),
        "max_actions_per_s": s.steps.iter().map(|s| s.actions_per_s).fold(0.0, f64::max),
        "refused": s.steps.iter().map(|s| s.refused).sum::<u64>(),
        "errors": s.steps.iter().map(|s| s.errors).sum::<u64>(),
        "bot_faults": s.steps.iter().map(|s| s.bot_faults).sum::<u64>(),
        "first_fault": s.first_fault,
        "tables_seen": s.lobby.len(),
    });
    record.write_after(
        result,
        args.common.out.as_deref(),
        args.common.csv.as_deref(),
    )?;
    Ok(s.steps)
}
