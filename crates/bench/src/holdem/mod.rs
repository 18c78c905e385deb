//! `bots --game holdem`: the Cubeia Firebase poker load test (seed 003)
//! over Herald's game engine, with bots that really play Texas Hold'em.
//!
//! Each bot is one connection (WebSocket JSON or binary, or raw TCP) that
//! sends `connect`, subscribes to the lobby (`lobby`, `--lobby` branch,
//! every table by default, as the seed's bots did: the lobby's traffic is
//! part of the load), picks a table with a free seat and sends `sit`. Then
//! it plays: on a `turn` event for its own seat it waits a random think
//! time (uniform below `--think`, and below 3/4 of the turn's `timeout_ms`)
//! and answers with a legal random action ([`decide`]); a share of turns
//! (`--timeout-share`) it leaves to the server's timer, like players who
//! time out. Busted, it rebuys its first stack; if the rebuy is refused it
//! stands up and sits again elsewhere. Taken off a table with `unseat` 115
//! (the table moved to another node, or the bot's node lost messages from
//! it: protocol §5e, "What a player sees") it sits again at the same table
//! and seat, as the protocol tells players to: the seat is still its own,
//! the reply's snapshot is the restored hand, and a turn the snapshot gives
//! it is answered like a `turn` event. Only if that `sit` is refused (the
//! table was closed: 115 again; the seat is gone: 116; 114 "retry" for
//! longer than [`RETURN_TRIES`] half-seconds) does it look for another
//! table; any other `unseat` sends it to another table at once.
//! Seated bots subscribe to their table's chat channel `table:{id}` and
//! publish to it (`--chat-rate` messages a minute each).
//!
//! Picking a table ([`crate::seating`], shared with the scripted games'
//! bots): the bench keeps one view of the lobby and counts the seats its
//! own bots have asked for; a bot takes the fullest table that still has a
//! free seat, lowest id first; error 116 (the seat went to someone else)
//! makes it try another table; when none is free it looks again every half
//! second.
//!
//! Per step (`--step-size` bots added every `--step-duration`, measured
//! from 3 s after the new bots are connected and seated or waiting, so that
//! the lobby deltas of the seating burst have drained):
//! - players seated, and tables with at least two of them;
//! - hands per minute: `result` events, each counted once per (table,
//!   hand) however many bots see it;
//! - game events received per second (every `game` push to every bot);
//! - action response time: from sending `act` to the first `game` push of
//!   type `action` for the bot's seat, i.e. until the game applied the
//!   action and the bot heard of it (the `act` reply comes before, but
//!   says only that the game accepted it); answers the timer made instead
//!   (`auto`) are not counted;
//! - server CPU and its idle share, from `/proc` ([`crate::sysmon`]);
//! - bytes per second in and out (counted on the bench's sockets, the
//!   lobby included), and the lobby's own bytes per second (`lobby`
//!   replies and `lobby_update` pushes, message bytes without framing) and
//!   share of the bytes out of the server, with the snapshots (`lobby`
//!   replies) also counted apart;
//! - the hands' ledger, over the whole run: every hand a bot saw start (a
//!   `hand` event, or a snapshot with the hand in progress) must be seen to
//!   end (its `result`) by some bot, through a take-over included; one not
//!   seen to end but that the table is known to be past (a later hand seen,
//!   an idle snapshot) is `hands_ended_unseen`; the rest, apart from the
//!   hand still in play at a table where bots sit, is `hands_lost`; a hand
//!   number a bot sees start again, or a snapshot going back below what it
//!   saw, is `hands_replayed` (decision 0009's promise "a node loss costs
//!   no hand", checked from what the players see);
//! - counts of what went wrong: `errors` (messages that cannot be read,
//!   undecodable game JSON, unexpected errors or replies), `refused`
//!   (every error answered to an `act`: mostly 118, answers that arrived
//!   after the timer acted), `act_errors` (the same, split by error code:
//!   a fail-over shows 114, a table between owners), `seat_conflicts`
//!   (116), and turns left to the timer.
//!
//! Nothing a server sends can panic the bench: bad messages are counted as
//! errors. A lost connection ends the run, as in the other scenarios.

pub mod decide;
pub mod wire;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet};
use std::time::Instant;

use herald_proto::{Command, Encoding, Push, Reply, ServerMsg};
use serde::Serialize;
use serde_json::json;

use crate::bots::BotsArgs;
use crate::clock;
use crate::engine::{ConnId, Io};
use crate::hclients::{HeraldClients, FIRST_SCENARIO_ID};
use crate::herald_wire;
use crate::latency::{Latency, LatencySummary};
use crate::ramp::{game_clients, play, GameBots, Ramp};
use crate::scenario::{Got, Inbox};
use crate::seating::LobbyView;
use crate::BenchError;

use decide::{Decision, Kind, Turn};
use wire::GamePush;

/// Command ids, one per kind: a bot has at most one of each in flight
/// (chat publishes aside, whose replies need no telling apart).
const LOBBY_ID: u32 = FIRST_SCENARIO_ID + 1;
const SIT_ID: u32 = FIRST_SCENARIO_ID + 2;
const ACT_ID: u32 = FIRST_SCENARIO_ID + 3;
const REBUY_ID: u32 = FIRST_SCENARIO_ID + 4;
const STAND_ID: u32 = FIRST_SCENARIO_ID + 5;
const CHAT_ID: u32 = FIRST_SCENARIO_ID + 6;
const SUB_ID: u32 = FIRST_SCENARIO_ID + 7;
const UNSUB_ID: u32 = FIRST_SCENARIO_ID + 8;
const LOBBY_OFF_ID: u32 = FIRST_SCENARIO_ID + 9;

/// How long a bot with no free table waits before looking again.
const RETRY_NS: i64 = 500_000_000;
/// How many times a bot sitting back into its seat after `unseat` 115 tries
/// again when answered 114 ("retry": the table is between owners, or its
/// owner did not answer in time), half a second apart, before it gives the
/// seat up and looks for another table. 20: ten seconds, several leases.
pub const RETURN_TRIES: u32 = 20;

/// Timer kinds in the heap (the low two bits of a token).
const T_DECIDE: u64 = 0;
const T_CHAT: u64 = 1;
const T_CHOOSE: u64 = 2;
const T_RETURN: u64 = 3;

/// One step of a `bots --game holdem` run.
#[derive(Debug, Clone, Serialize)]
pub struct HoldemStep {
    /// Bots running.
    pub bots: usize,
    /// Bots seated at the end of the step.
    pub players: usize,
    /// Tables where at least two of the bots sit (where hands are dealt).
    pub tables_in_play: usize,
    /// Hands finished per minute (`result` events, once per table and hand).
    pub hands_per_min: f64,
    /// `game` pushes received per second, all bots together.
    pub game_events_per_s: f64,
    /// Actions sent per second.
    pub actions_per_s: f64,
    /// Action response time: `act` sent to the bot's own `action` event.
    pub response: Option<LatencySummary>,
    /// Turns left to the server's timer on purpose (--timeout-share).
    pub timeouts: u64,
    /// `action` events for the bots' seats made by the timer (`auto`).
    pub auto_actions: u64,
    /// Chat messages published per second.
    pub chat_sent_per_s: f64,
    /// Chat messages received per second (every seated bot reads its table's).
    pub chat_received_per_s: f64,
    /// Rebuys asked for.
    pub rebuys: u64,
    /// Bots that looked for another table after losing their seat: an
    /// `unseat` other than 115, or a sit-back refused.
    pub resits: u64,
    /// Bots that sat back into their own seat after `unseat` 115 (the table
    /// moved to another node, or messages from it were lost), since the
    /// start of the run (as are the next two: a take-over is one event,
    /// which may come before a step's measured window).
    pub sat_back: u64,
    /// Sit-backs refused (the bot then looked for another table: counted in
    /// `resits` too).
    pub sit_back_refused: u64,
    /// Hands finished (`result`, once per table and hand) at tables a bot
    /// sat back at, from the hand its snapshot showed on: the play that
    /// resumed after a take-over.
    pub hands_after_sit_back: u64,
    /// Hands a bot saw start, since the start of the run (see the module
    /// doc: the hands' ledger).
    pub hands_started: u64,
    /// Of those, the hands whose `result` a bot saw.
    pub hands_finished: u64,
    /// Of those not seen to end, the hands the table is known to be past
    /// (a later hand seen to start, an idle snapshot after it) with no
    /// hand number going back: they ended while no bot watched (e.g.
    /// between an `unseat` and the sit-back). Not lost, not seen either.
    pub hands_ended_unseen: u64,
    /// The rest: hands seen to start and neither seen to end nor passed,
    /// apart from the last hand of each table where bots sit (it may be in
    /// play): 0 is the promise. A table all bots left mid-hand counts its
    /// hand here (nobody can tell how it ended).
    pub hands_lost: u64,
    /// The first lost hands, as (table, hand), to look at.
    pub hands_lost_at: Vec<(u64, u64)>,
    /// A hand number a bot saw start again, or a snapshot whose hand is
    /// below one the bot saw (the table went back), since the start of the
    /// run: 0 is the promise.
    pub hands_replayed: u64,
    /// `sit` answered 116 (the seat went to someone else, or full).
    pub seat_conflicts: u64,
    /// Lobby snapshots received (`lobby` replies) and their bytes per
    /// second; the rest of `lobby_bps` is `lobby_update` pushes.
    pub lobby_snapshots: u64,
    /// See `lobby_snapshots`.
    pub lobby_snapshot_bps: f64,
    /// Lobby bytes (snapshots and deltas) the bots received while this
    /// step's new bots connected and sat down, before the measured window:
    /// the cost of seating, which the steady window does not show.
    pub seating_lobby_bytes: u64,
    /// All bytes the bots received in that seating phase.
    pub seating_bytes_out: u64,
    /// Error replies to `act` (118: refused by the game; 114 while a
    /// table changes owner; any other code).
    pub refused: u64,
    /// `refused` split by error code (JSON keys are the codes).
    pub act_errors: BTreeMap<u16, u64>,
    /// Unexpected: unreadable messages, undecodable game data, unexpected
    /// errors and replies.
    pub errors: u64,
    /// Server CPU, % of one core.
    pub server_cpu_pct: Option<f64>,
    /// 100 − server CPU %, floored at 0: the idle share of the server's core.
    pub server_idle_pct: Option<f64>,
    /// Idle share of the whole machine, %.
    pub system_idle_pct: Option<f64>,
    /// Bytes per second into the server (sent by the bots).
    pub bandwidth_in_bps: f64,
    /// Bytes per second out of the server (received by the bots), lobby included.
    pub bandwidth_out_bps: f64,
    /// Lobby bytes per second (`lobby` replies and `lobby_update` pushes).
    pub lobby_bps: f64,
    /// `lobby_bps` / `bandwidth_out_bps`, %.
    pub lobby_share_pct: f64,
    /// Time to connect and seat this step's new bots, seconds.
    pub connect_s: f64,
    /// Measurement window, seconds since the start.
    pub started_s: f64,
    /// See `started_s`.
    pub ended_s: f64,
}

/// Where a bot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Connecting (`connect` not answered yet).
    Setup,
    /// `lobby` sent.
    Lobby,
    /// Needs a table (a `T_CHOOSE` timer is set when none was free).
    Free,
    /// `sit` sent to this table.
    Sitting(u64),
    /// Seated.
    Seated { table: u64, seat: u32 },
    /// `stand` sent (its rebuy was refused).
    Standing(u64),
    /// `sit` sent back to its own seat after `unseat` 115.
    Returning { table: u64, seat: u32 },
}

/// One bot.
#[derive(Debug, Clone)]
struct Bot {
    at: At,
    /// The stack it sat down with: what it rebuys.
    buyin: u64,
    /// Tables that answered 116 since it last sat (skipped when choosing).
    tried: Vec<u64>,
    /// The turn awaiting its decision (validated by `gen`).
    turn: Option<Turn>,
    /// Bumped to invalidate its pending decision or table search.
    gen: u64,
    /// Bumped to invalidate its chat timer (when it leaves a table).
    chat_gen: u64,
    /// When its last `act` was sent, until its own `action` event arrives.
    act_sent_ns: Option<i64>,
    /// Chat messages sent (numbers the text).
    chats: u64,
    /// Subscribed to the lobby (a bot that found a new table from the
    /// bench's shared view did not subscribe again).
    in_lobby: bool,
    /// 114 answers to its sit-back so far.
    return_tries: u32,
    /// The last hand it saw at a table: (table, hand, whether it ended).
    /// Kept through a sit-back, so that a table going back is seen.
    view: Option<(u64, u64, bool)>,
}

/// What the bots saw of one table's hands (the ledger, module doc).
#[derive(Debug, Default)]
struct Hands {
    started: BTreeSet<u64>,
    finished: BTreeSet<u64>,
    /// The highest hand number the table is known to be past: a `result`
    /// seen, a later hand seen to start, an idle snapshot.
    passed: u64,
}

impl Hands {
    fn pass(&mut self, hand: u64) {
        self.passed = self.passed.max(hand);
    }
}

/// Hands lost listed per step at most (for a look at the tables).
const LOST_LISTED: usize = 20;

/// The ledger's counts (see `HoldemStep::hands_started` and after).
#[derive(Debug, Default)]
struct Ledger {
    started: u64,
    finished: u64,
    ended_unseen: u64,
    lost: u64,
    lost_at: Vec<(u64, u64)>,
}

/// The counters of a measurement window.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    hands: u64,
    game_events: u64,
    acts: u64,
    timeouts: u64,
    auto_actions: u64,
    chat_sent: u64,
    chat_received: u64,
    rebuys: u64,
    resits: u64,
    seat_conflicts: u64,
    refused: u64,
    errors: u64,
    lobby_bytes: u64,
    lobby_snapshots: u64,
    lobby_snapshot_bytes: u64,
}

/// The counters of a take-over, over the whole run (a take-over is one
/// event, which may fall before a step's measured window).
#[derive(Debug, Clone, Copy, Default)]
struct RunCounters {
    sat_back: u64,
    sit_back_refused: u64,
    hands_after_sit_back: u64,
    hands_replayed: u64,
}

struct Poker {
    clients: HeraldClients,
    enc: Encoding,
    bots: Vec<Bot>,
    /// (due ns, bot, token = gen << 2 | kind).
    heap: BinaryHeap<Reverse<(i64, usize, u64)>>,
    lobby_path: String,
    /// (lobby bytes, all bytes in) of the last seating phase.
    seating: (u64, u64),
    /// The same counters when that phase began (the end of the last step).
    seating_from: (u64, u64),
    /// `--lobby-off-when-seated`.
    lobby_off_when_seated: bool,
    lobby: LobbyView,
    /// The last hand counted per table.
    hands_seen: HashMap<u64, u64>,
    /// The hands' ledger, per table, over the whole run.
    ledger: HashMap<u64, Hands>,
    /// Tables a bot sat back at, with the hand its snapshot showed.
    resumed: HashMap<u64, u64>,
    think_ms: u64,
    timeout_share: f64,
    /// Mean time between one bot's chat messages (0: no chat).
    chat_period_ns: i64,
    /// Steps, windows, the server's CPU, the progress line.
    ramp: Ramp,
    c: Counters,
    /// Since the start of the run.
    run: RunCounters,
    /// Error replies to `act` by code, this step (apart from `Counters`,
    /// which is `Copy`).
    act_errors: BTreeMap<u16, u64>,
    response: Latency,
    steps: Vec<HoldemStep>,
    /// Messages reported by the clients' callback.
    inbox: Inbox,
    frame: Vec<u8>,
    data: Vec<u8>,
    channel: String,
    rng: fastrand::Rng,
}

impl Poker {
    fn conn(&self, b: usize) -> ConnId {
        self.clients.clients[b].conn
    }

    fn send_frame(&mut self, io: &mut Io, b: usize) {
        let conn = self.conn(b);
        io.send(conn, herald_wire::opcode(self.enc), &self.frame);
    }

    fn schedule(&mut self, b: usize, due_ns: i64, kind: u64) {
        let bot = &self.bots[b];
        let gen = if kind == T_CHAT {
            bot.chat_gen
        } else {
            bot.gen
        };
        self.heap.push(Reverse((due_ns, b, gen << 2 | kind)));
    }

    /// Bot `b` is connected: it subscribes to the lobby.
    fn ask_lobby(&mut self, io: &mut Io, b: usize) {
        self.bots[b].at = At::Lobby;
        self.bots[b].in_lobby = true;
        self.frame.clear();
        let cmd = Command::Lobby {
            path: self.lobby_path.clone(),
        };
        wire::command(self.enc, LOBBY_ID, cmd, &mut self.frame);
        self.send_frame(io, b);
    }

    /// Bot `b` picks a table and sends `sit`, or waits for one to free up.
    fn choose(&mut self, io: &mut Io, b: usize, now_ns: i64) {
        let bot = &mut self.bots[b];
        match self.lobby.pick(&bot.tried) {
            Some(table) => {
                bot.at = At::Sitting(table);
                self.lobby.claim(table);
                self.frame.clear();
                wire::command(self.enc, SIT_ID, wire::sit(table), &mut self.frame);
                self.send_frame(io, b);
            }
            None => {
                bot.at = At::Free;
                // Tables that refused may have a seat later.
                bot.tried.clear();
                bot.gen += 1;
                let jitter = self.rng.i64(0..RETRY_NS / 2);
                self.schedule(b, now_ns + RETRY_NS + jitter, T_CHOOSE);
            }
        }
    }

    /// Bot `b` is no longer at `table` (stood up, unseated, refused): it
    /// leaves the chat channel and looks for a table again.
    fn left_table(&mut self, io: &mut Io, b: usize, table: u64, was_seated: bool, now_ns: i64) {
        self.lobby.release(table);
        let bot = &mut self.bots[b];
        bot.gen += 1;
        bot.chat_gen += 1;
        bot.turn = None;
        bot.act_sent_ns = None;
        if was_seated {
            self.chat_channel(table);
            self.frame.clear();
            herald_wire::unsubscribe(self.enc, UNSUB_ID, &self.channel, &mut self.frame);
            self.send_frame(io, b);
        }
        self.choose(io, b, now_ns);
    }

    /// Bot `b` was unseated with 115 from `seat` of `table`: it leaves the
    /// chat channel (the `sit` reply subscribes it again) and sits back.
    fn sit_back(&mut self, io: &mut Io, b: usize, table: u64, seat: u32) {
        let bot = &mut self.bots[b];
        bot.gen += 1;
        bot.chat_gen += 1;
        bot.turn = None;
        bot.act_sent_ns = None;
        bot.return_tries = 0;
        bot.at = At::Returning { table, seat };
        self.chat_channel(table);
        self.frame.clear();
        herald_wire::unsubscribe(self.enc, UNSUB_ID, &self.channel, &mut self.frame);
        self.send_frame(io, b);
        self.send_sit_back(io, b, table, seat);
    }

    fn send_sit_back(&mut self, io: &mut Io, b: usize, table: u64, seat: u32) {
        self.frame.clear();
        let cmd = Command::Sit {
            table,
            seat: Some(seat),
            data: bytes::Bytes::new(),
        };
        wire::command(self.enc, SIT_ID, cmd, &mut self.frame);
        self.send_frame(io, b);
    }

    /// The sit-back of bot `b` to `table` was refused for good: it looks
    /// for another table.
    fn give_up_seat(&mut self, io: &mut Io, b: usize, table: u64, now_ns: i64) {
        self.run.sit_back_refused += 1;
        self.c.resits += 1;
        self.left_table(io, b, table, false, now_ns);
    }

    fn chat_channel(&mut self, table: u64) {
        self.channel.clear();
        self.channel.push_str("table:");
        let mut buf = Vec::with_capacity(20);
        herald_wire::write_u64(&mut buf, table);
        self.channel
            .push_str(std::str::from_utf8(&buf).unwrap_or("0"));
    }

    fn on_reply(&mut self, io: &mut Io, b: usize, id: u32, msg: &[u8], now_ns: i64) {
        match (id, self.bots[b].at) {
            (LOBBY_ID, At::Lobby) => {
                self.c.lobby_bytes += msg.len() as u64;
                self.c.lobby_snapshots += 1;
                self.c.lobby_snapshot_bytes += msg.len() as u64;
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
                    self.left_table(io, b, table, false, now_ns);
                }
            },
            (SIT_ID, At::Returning { table, .. }) => match self.enc.decode_server(msg) {
                Ok(ServerMsg::Reply {
                    reply: Reply::Sit { seat, data },
                    ..
                }) => {
                    self.run.sat_back += 1;
                    self.seated(io, b, table, seat, &data, now_ns);
                    // The hands from the snapshot's on are the resumed play.
                    if let Some((_, hand, ended)) = self.bots[b].view.filter(|v| v.0 == table) {
                        let first = hand + u64::from(ended);
                        let from = self.resumed.entry(table).or_insert(first);
                        *from = (*from).min(first);
                    }
                }
                _ => {
                    self.c.errors += 1;
                    self.give_up_seat(io, b, table, now_ns);
                }
            },
            (STAND_ID, At::Standing(table)) => self.left_table(io, b, table, true, now_ns),
            (ACT_ID | REBUY_ID | CHAT_ID | SUB_ID | UNSUB_ID | LOBBY_OFF_ID, _) => {}
            // A reply to a `sit` or `stand` of a table the bot has left
            // meanwhile (unseated) cannot happen: a reply comes first.
            _ => self.c.errors += 1,
        }
    }

    fn seated(
        &mut self,
        io: &mut Io,
        b: usize,
        table: u64,
        seat: u32,
        snapshot: &[u8],
        now_ns: i64,
    ) {
        let bot = &mut self.bots[b];
        bot.at = At::Seated { table, seat };
        bot.tried.clear();
        bot.gen += 1;
        bot.chat_gen += 1;
        match decide::parse(snapshot) {
            Ok(ev) => {
                if let Some(stack) = ev.stack_of(seat) {
                    bot.buyin = bot.buyin.max(stack);
                }
                if let Some((hand, in_play)) = ev.snapshot_hand() {
                    // Below what this bot saw at this table, or a hand it
                    // saw end shown in play again: the table went back.
                    if let Some((_, seen, ended)) = bot.view.filter(|v| v.0 == table) {
                        if hand < seen || (hand == seen && ended && in_play) {
                            self.run.hands_replayed += 1;
                        }
                    }
                    bot.view = Some((table, hand, !in_play));
                    let h = self.ledger.entry(table).or_default();
                    if in_play {
                        h.started.insert(hand);
                        h.pass(hand.saturating_sub(1));
                    } else {
                        h.pass(hand);
                    }
                }
                // Sitting back into a hand where it is to act: no `turn`
                // event comes, the snapshot is its turn.
                if let Some(turn) = ev.snapshot_turn(seat) {
                    bot.turn = Some(turn);
                    let think = decide::think_ms(self.think_ms, 0, &mut self.rng);
                    self.schedule(b, now_ns + think as i64 * 1_000_000, T_DECIDE);
                }
            }
            Err(_) => self.c.errors += 1,
        }
        if self.lobby_off_when_seated && std::mem::take(&mut self.bots[b].in_lobby) {
            self.frame.clear();
            let cmd = Command::LobbyOff {
                path: self.lobby_path.clone(),
            };
            wire::command(self.enc, LOBBY_OFF_ID, cmd, &mut self.frame);
            self.send_frame(io, b);
        }
        self.chat_channel(table);
        self.frame.clear();
        herald_wire::subscribe_from(self.enc, SUB_ID, &self.channel, None, &mut self.frame);
        self.send_frame(io, b);
        if self.chat_period_ns > 0 {
            let phase = self.rng.i64(0..self.chat_period_ns);
            self.schedule(b, now_ns + phase, T_CHAT);
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
                    "bot {}: the server refused `lobby` (error {code}{}); does it run game tables?",
                    b + 1,
                    if code == 111 {
                        ": games not available"
                    } else {
                        ""
                    }
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
                self.left_table(io, b, table, false, now_ns);
            }
            (SIT_ID, At::Returning { table, .. }) => {
                let bot = &mut self.bots[b];
                if code == 114 && bot.return_tries < RETURN_TRIES {
                    // Between owners, or the owner did not answer: again.
                    bot.return_tries += 1;
                    bot.gen += 1;
                    let jitter = self.rng.i64(0..RETRY_NS / 4);
                    self.schedule(b, now_ns + RETRY_NS / 2 + jitter, T_RETURN);
                } else {
                    if code == 115 {
                        self.lobby.remove(table); // closed
                    }
                    self.give_up_seat(io, b, table, now_ns);
                }
            }
            (ACT_ID, _) => {
                self.c.refused += 1;
                *self.act_errors.entry(code).or_insert(0) += 1;
                self.bots[b].act_sent_ns = None;
            }
            (REBUY_ID, At::Seated { table, .. }) => {
                // No rebuy: stand up and sit again with a fresh buy-in.
                self.bots[b].at = At::Standing(table);
                self.frame.clear();
                wire::command(
                    self.enc,
                    STAND_ID,
                    Command::Stand { table },
                    &mut self.frame,
                );
                self.send_frame(io, b);
            }
            (STAND_ID, At::Standing(table)) => {
                // 117: the game stood it up already.
                self.left_table(io, b, table, true, now_ns);
            }
            (REBUY_ID, _) => {}
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
                self.c.lobby_bytes += msg.len() as u64;
                if !self.lobby.on_update(self.enc, msg) {
                    self.c.errors += 1;
                }
            }
            GamePush::Unseat => match self.enc.decode_server(msg) {
                Ok(ServerMsg::Push(Push::Unseat { table, code, .. })) => match self.bots[b].at {
                    // The table moved (or messages from it were lost): the
                    // seat is still the bot's, it sits back (protocol §5e).
                    At::Seated { table: t, seat } if t == table && code == 115 => {
                        self.sit_back(io, b, table, seat);
                    }
                    At::Seated { table: t, .. } | At::Standing(t) if t == table => {
                        self.c.resits += 1;
                        self.left_table(io, b, table, true, now_ns);
                    }
                    _ => {}
                },
                _ => self.c.errors += 1,
            },
            GamePush::Seat | GamePush::Other => {}
        }
    }

    /// A `game` push from `table` to bot `b`.
    fn on_game(&mut self, io: &mut Io, b: usize, table: u64, data: &[u8], now_ns: i64) {
        let Ok(ev) = decide::parse(data) else {
            self.c.errors += 1;
            return;
        };
        if ev.t == Kind::Result {
            match ev.hand {
                Some(hand) => {
                    if self.hands_seen.get(&table).is_none_or(|&seen| hand > seen) {
                        self.hands_seen.insert(table, hand);
                        self.c.hands += 1;
                        if self.resumed.get(&table).is_some_and(|&from| hand >= from) {
                            self.run.hands_after_sit_back += 1;
                        }
                    }
                    let h = self.ledger.entry(table).or_default();
                    h.finished.insert(hand);
                    h.pass(hand);
                }
                None => self.c.errors += 1,
            }
        }
        let At::Seated { table: at, seat } = self.bots[b].at else {
            return;
        };
        if at != table {
            return;
        }
        match (ev.t, ev.hand) {
            (Kind::Hand, Some(hand)) => {
                let bot = &mut self.bots[b];
                // Each bot sees its table's hands in order: a number it has
                // seen already is a hand dealt again.
                if bot
                    .view
                    .is_some_and(|(t, seen, _)| t == table && hand <= seen)
                {
                    self.run.hands_replayed += 1;
                }
                bot.view = Some((table, hand, false));
                let h = self.ledger.entry(table).or_default();
                h.started.insert(hand);
                h.pass(hand.saturating_sub(1));
            }
            (Kind::Result, Some(hand)) => self.bots[b].view = Some((table, hand, true)),
            (Kind::Hand, None) => self.c.errors += 1,
            _ => {}
        }
        match ev.t {
            Kind::Turn if ev.seat == Some(seat) => {
                let Some(turn) = ev.turn() else {
                    self.c.errors += 1;
                    return;
                };
                let bot = &mut self.bots[b];
                bot.gen += 1;
                if self.rng.f64() < self.timeout_share {
                    bot.turn = None;
                    self.c.timeouts += 1;
                    return;
                }
                bot.turn = Some(turn);
                let think = decide::think_ms(self.think_ms, turn.timeout_ms, &mut self.rng);
                self.schedule(b, now_ns + think as i64 * 1_000_000, T_DECIDE);
            }
            Kind::Action if ev.seat == Some(seat) => {
                let bot = &mut self.bots[b];
                bot.turn = None;
                if ev.auto {
                    self.c.auto_actions += 1;
                    bot.act_sent_ns = None;
                } else if let Some(sent) = bot.act_sent_ns.take() {
                    self.response.record_ns(now_ns - sent);
                }
            }
            // Busted: rebuy its first stack, or, when that is unknown,
            // stand and sit again.
            Kind::Result if ev.stack_of(seat) == Some(0) => {
                let buyin = self.bots[b].buyin;
                self.frame.clear();
                if buyin > 0 {
                    self.c.rebuys += 1;
                    self.data.clear();
                    decide::write_rebuy(buyin, &mut self.data);
                    wire::act(self.enc, REBUY_ID, table, &self.data, &mut self.frame);
                } else {
                    self.bots[b].at = At::Standing(table);
                    wire::command(
                        self.enc,
                        STAND_ID,
                        Command::Stand { table },
                        &mut self.frame,
                    );
                }
                self.send_frame(io, b);
            }
            _ => {}
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
            let gen = if token & 3 == T_CHAT {
                bot.chat_gen
            } else {
                bot.gen
            };
            if token >> 2 != gen {
                continue;
            }
            match (token & 3, bot.at) {
                (T_DECIDE, At::Seated { table, .. }) => {
                    let Some(turn) = bot.turn.take() else {
                        continue;
                    };
                    let d: Decision = decide::decide(&turn, &mut self.rng);
                    bot.act_sent_ns = Some(now_ns);
                    self.c.acts += 1;
                    self.data.clear();
                    decide::write_decision(d, &mut self.data);
                    self.frame.clear();
                    wire::act(self.enc, ACT_ID, table, &self.data, &mut self.frame);
                    self.send_frame(io, b);
                }
                (T_CHAT, At::Seated { table, .. }) => {
                    bot.chats += 1;
                    let n = bot.chats;
                    self.c.chat_sent += 1;
                    self.data.clear();
                    self.data.extend_from_slice(b"{\"chat\":\"bot ");
                    herald_wire::write_u64(&mut self.data, b as u64);
                    self.data.extend_from_slice(b": nice hand #");
                    herald_wire::write_u64(&mut self.data, n);
                    self.data.extend_from_slice(b"\"}");
                    self.chat_channel(table);
                    self.frame.clear();
                    herald_wire::publish(
                        self.enc,
                        CHAT_ID,
                        &self.channel,
                        &self.data,
                        &mut self.frame,
                    );
                    self.send_frame(io, b);
                    let next =
                        self.chat_period_ns / 2 + self.rng.i64(0..self.chat_period_ns.max(1));
                    self.schedule(b, now_ns + next, T_CHAT);
                }
                (T_CHOOSE, At::Free) => self.choose(io, b, now_ns),
                (T_RETURN, At::Returning { table, seat }) => {
                    self.send_sit_back(io, b, table, seat);
                }
                _ => {}
            }
        }
    }

    /// The ledger's counts over the run so far: hands seen to start, of
    /// those seen to end, of the rest those the table is past, and the
    /// others lost (all but the last hand of a table where a bot sits or is
    /// sitting back, which may be in play).
    fn hand_ledger(&self) -> Ledger {
        let here: HashSet<u64> = self
            .bots
            .iter()
            .filter_map(|b| match b.at {
                At::Seated { table, .. } | At::Returning { table, .. } => Some(table),
                At::Sitting(table) | At::Standing(table) => Some(table),
                At::Setup | At::Lobby | At::Free => None,
            })
            .collect();
        let mut l = Ledger::default();
        let mut tables: Vec<_> = self.ledger.iter().collect();
        tables.sort_unstable_by_key(|(t, _)| **t);
        for (table, h) in tables {
            l.started += h.started.len() as u64;
            let last = h.started.last().copied();
            for &n in &h.started {
                if h.finished.contains(&n) {
                    l.finished += 1;
                } else if n <= h.passed {
                    l.ended_unseen += 1;
                } else if Some(n) == last && here.contains(table) {
                    // In play, maybe.
                } else {
                    l.lost += 1;
                    if l.lost_at.len() < LOST_LISTED {
                        l.lost_at.push((*table, n));
                    }
                }
            }
        }
        l
    }
}

impl GameBots for Poker {
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
            Got::Pub => self.c.chat_received += 1,
            Got::Other => self.on_push(io, b, msg, now_ns),
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
                .all(|b| matches!(b.at, At::Seated { .. } | At::Free))
    }

    fn players(&self) -> usize {
        self.bots
            .iter()
            .filter(|b| matches!(b.at, At::Seated { .. }))
            .count()
    }

    fn reset_window(&mut self, io: &Io) {
        self.seating = (
            self.c.lobby_bytes.saturating_sub(self.seating_from.0),
            io.stats.bytes_in.saturating_sub(self.seating_from.1),
        );
        self.c = Counters::default();
        self.act_errors.clear();
        self.response.reset();
    }

    fn finish_step(&mut self, io: &Io, now: Instant, more: bool) {
        self.seating_from = (self.c.lobby_bytes, io.stats.bytes_in);
        let w = self.ramp.window(io, now, more);
        let secs = w.secs;
        let out_bps = w.bandwidth_out_bps;
        let lobby_bps = self.c.lobby_bytes as f64 / secs;
        let c = self.c;
        let ledger = self.hand_ledger();
        let step = HoldemStep {
            bots: self.bots.len(),
            players: self.players(),
            tables_in_play: self.lobby.ours_with(2),
            hands_per_min: c.hands as f64 * 60.0 / secs,
            game_events_per_s: c.game_events as f64 / secs,
            actions_per_s: c.acts as f64 / secs,
            response: self.response.summary(),
            timeouts: c.timeouts,
            auto_actions: c.auto_actions,
            chat_sent_per_s: c.chat_sent as f64 / secs,
            chat_received_per_s: c.chat_received as f64 / secs,
            rebuys: c.rebuys,
            resits: c.resits,
            sat_back: self.run.sat_back,
            sit_back_refused: self.run.sit_back_refused,
            hands_after_sit_back: self.run.hands_after_sit_back,
            hands_started: ledger.started,
            hands_finished: ledger.finished,
            hands_ended_unseen: ledger.ended_unseen,
            hands_lost: ledger.lost,
            hands_lost_at: ledger.lost_at,
            hands_replayed: self.run.hands_replayed,
            seat_conflicts: c.seat_conflicts,
            lobby_snapshots: c.lobby_snapshots,
            seating_lobby_bytes: self.seating.0,
            seating_bytes_out: self.seating.1,
            lobby_snapshot_bps: c.lobby_snapshot_bytes as f64 / secs,
            refused: c.refused,
            act_errors: self.act_errors.clone(),
            errors: c.errors,
            server_cpu_pct: w.server_cpu_pct,
            server_idle_pct: w.server_idle_pct,
            system_idle_pct: w.system_idle_pct,
            bandwidth_in_bps: w.bandwidth_in_bps,
            bandwidth_out_bps: out_bps,
            lobby_bps,
            lobby_share_pct: if out_bps > 0.0 {
                100.0 * lobby_bps / out_bps
            } else {
                0.0
            },
            connect_s: self.ramp.connect_s,
            started_s: w.started_s,
            ended_s: w.ended_s,
        };
        let r = step.response.as_ref();
        println!(
            "bots: {:6}    players: {:6}    hands/min: {:8.1}    events/s: {:8.0}    response p50: {:7.2}ms    p99: {:7.2}ms    server cpu: {:5.1}%    out: {:6.0} KiB/s (lobby {:4.1}%)    errors: {}{}",
            step.bots,
            step.players,
            step.hands_per_min,
            step.game_events_per_s,
            r.map_or(0.0, |r| r.p50_ms),
            r.map_or(0.0, |r| r.p99_ms),
            step.server_cpu_pct.unwrap_or(f64::NAN),
            step.bandwidth_out_bps / 1024.0,
            step.lobby_share_pct,
            step.errors,
            if step.sat_back + step.resits + step.hands_lost + step.hands_replayed > 0 {
                format!(
                    "    sat back: {}    resits: {}    hands lost: {} {:?}    replayed: {}",
                    step.sat_back,
                    step.resits,
                    step.hands_lost,
                    step.hands_lost_at,
                    step.hands_replayed
                )
            } else {
                String::new()
            },
        );
        self.steps.push(step);
    }

    fn add_step(&mut self) {
        let have = self.bots.len();
        let n = self.ramp.new_bots(have);
        for _ in 0..n {
            self.clients.add(Vec::new());
            self.bots.push(Bot {
                at: At::Setup,
                buyin: 0,
                tried: Vec::new(),
                turn: None,
                gen: 0,
                chat_gen: 0,
                act_sent_ns: None,
                chats: 0,
                in_lobby: false,
                return_tries: 0,
                view: None,
            });
        }
    }

    fn progress(&self, now: Instant) -> String {
        format!(
            "[{:>4.0}s] {} bots ({} ready, {} seated) · {} hands this step",
            self.ramp.elapsed(now),
            self.bots.len(),
            self.clients.ready(),
            self.players(),
            self.c.hands
        )
    }
}

/// Runs `bots --game holdem`; returns its steps.
pub fn run(args: &BotsArgs) -> Result<Vec<HoldemStep>, BenchError> {
    crate::bots::BotGame::refuse_module(args)?;
    if args.bots == 0 {
        return Err(BenchError::Args("--bots must be positive".into()));
    }
    if !(0.0..=1.0).contains(&args.timeout_share) {
        return Err(BenchError::Args("--timeout-share must be 0 to 1".into()));
    }
    if args.chat_rate.is_nan() || args.chat_rate < 0.0 {
        return Err(BenchError::Args("--chat-rate must be 0 or more".into()));
    }
    let (clients, _) = game_clients(args, "poker bots")?;
    let enc = args.transport.encoding();
    let mut poker = Poker {
        clients,
        enc,
        bots: Vec::new(),
        heap: BinaryHeap::new(),
        lobby_path: args.lobby.clone().unwrap_or_default(),
        seating: (0, 0),
        seating_from: (0, 0),
        lobby_off_when_seated: args.lobby_off_when_seated,
        lobby: LobbyView::default(),
        hands_seen: HashMap::new(),
        ledger: HashMap::new(),
        resumed: HashMap::new(),
        think_ms: args.think.as_millis() as u64,
        timeout_share: args.timeout_share,
        chat_period_ns: if args.chat_rate > 0.0 {
            (60e9 / args.chat_rate) as i64
        } else {
            0
        },
        ramp: Ramp::new(args),
        c: Counters::default(),
        run: RunCounters::default(),
        act_errors: BTreeMap::new(),
        response: Latency::new(),
        steps: Vec::new(),
        inbox: Inbox::default(),
        frame: Vec::with_capacity(256),
        data: Vec::with_capacity(128),
        channel: String::with_capacity(32),
        rng: fastrand::Rng::new(),
    };
    let result = play(&mut poker)?;
    let label = format!("holdem bots {}", args.transport.as_str());
    let extra = json!({
        "lobby": poker.lobby_path,
        "lobby_off_when_seated": args.lobby_off_when_seated,
        "timeout_share": args.timeout_share,
        "chat_rate": args.chat_rate,
    });
    let mut record = poker
        .ramp
        .record("bots-holdem", args, label, &poker.steps, extra)?;
    let last = poker.steps.last();
    record.summary = json!({
        "steps": poker.steps.len(),
        "players": last.map(|s| s.players),
        "max_hands_per_min": poker.steps.iter().map(|s| s.hands_per_min).fold(0.0, f64::max),
        "errors": poker.steps.iter().map(|s| s.errors).sum::<u64>(),
        "hands_lost": last.map(|s| s.hands_lost),
        "hands_replayed": last.map(|s| s.hands_replayed),
        "sat_back": last.map(|s| s.sat_back),
        "tables_seen": poker.lobby.len(),
    });
    record.write_after(
        result,
        args.common.out.as_deref(),
        args.common.csv.as_deref(),
    )?;
    Ok(poker.steps)
}
