//! Herald's game engine, apart from any game's rules.
//!
//! A *table* runs one instance of a game. The engine owns everything a game
//! should not have to write: seats and watchers, who may act for a seat (the
//! user id from the connection's token), a dropped player's grace period,
//! timers, the lobby entry, and delivery to every transport. A game's rules
//! implement [`Game`] and never do I/O: the engine tells them what happened
//! (a player asks to sit, sits, acts, drops, a timer fires) and they answer by
//! recording effects in a [`Ctx`] (send to one seat, to the table, to
//! watchers; set or cancel a timer; change a lobby attribute; report a
//! finished hand). Because rules see no clock and no socket, they are unit
//! tested with [`testing::Harness`], whose clock only moves when the test says.
//!
//! Game data is opaque to the engine, as in Cubeia Firebase: bytes in, bytes
//! out. The engine never parses what a game sends or receives.
//!
//! - [`engine`]: factories, the table registry, the [`herald_core::games::Games`]
//!   face that sessions call, metrics.
//! - `table`: one task per table: seats, watchers, grace periods, timers,
//!   applying a game's effects (encoded once per encoding).
//! - [`durable`]: what a table saves in a cluster, and the store contract
//!   (leases with fencing tokens; decision 0009).
//! - [`lobby`]: table entries, snapshots and coalesced deltas.
//! - [`play`]: tables on demand (`play`): matching, seat counts, caps,
//!   private codes, and the [`play::Matchmaker`] a cluster counts in.
//! - [`testing`] (feature `test-util`, off in release builds): a fake-clock
//!   harness for a game's unit tests.

pub mod durable;
pub mod engine;
pub mod lobby;
pub mod play;
mod table;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;

pub use engine::{Engine, EngineConfig, EngineError, GameMetrics, Router, TableConfig, TableSpec};
pub use table::TableInfo;

use bytes::Bytes;
use serde_json::{Map, Value};
use std::time::Duration;

/// A seat number at a table, from 0 to `seats - 1`.
pub type Seat = u32;

/// A game's rules. One value per table; the engine calls it from the table's
/// single task, one event at a time, so it needs no locks.
///
/// Contract: every method returns promptly (no blocking, no I/O). Effects
/// recorded in `ctx` are applied in the order recorded once the call returns.
/// The engine guarantees the seat numbers it passes are occupied (for
/// [`Game::sat`], [`Game::left`], [`Game::dropped`], [`Game::returned`],
/// [`Game::act`]) and that a seat is vacated only after [`Game::left`].
pub trait Game: Send + 'static {
    /// Called once, right after the table is created, before anyone sits:
    /// the place to set lobby attributes and any idle timer.
    fn created(&mut self, ctx: &mut Ctx) {
        let _ = ctx;
    }

    /// A player asks to sit at the free seat `seat`, sending `data` with the
    /// request (e.g. a buy-in; may be empty). `Err` refuses with a reason the
    /// player sees. Must not change state: [`Game::sat`] follows on success.
    fn can_sit(&self, seat: Seat, user: &str, data: &[u8]) -> Result<(), String>;

    /// The player now holds `seat`.
    fn sat(&mut self, ctx: &mut Ctx, seat: Seat, user: &str, data: &[u8]);

    /// The player at `seat` leaves for good (stood up, or a dropped player's
    /// grace period ended). Once this returns the seat is free. A game that
    /// keeps chips must account for the leaver's (e.g. fold them first).
    fn left(&mut self, ctx: &mut Ctx, seat: Seat);

    /// The player at `seat` lost their connection. The seat stays theirs for
    /// the table's grace period; the game's own timers act for them meanwhile.
    fn dropped(&mut self, ctx: &mut Ctx, seat: Seat) {
        let _ = (ctx, seat);
    }

    /// The dropped player at `seat` is back (on any transport). The engine
    /// sends them [`Game::snapshot`] for their seat right after this.
    fn returned(&mut self, ctx: &mut Ctx, seat: Seat) {
        let _ = (ctx, seat);
    }

    /// The player at `seat` acts with `data` (opaque, the game's own format).
    /// `Err` refuses the action (out of turn, illegal amount, malformed): the
    /// player gets the error and nothing changes.
    fn act(&mut self, ctx: &mut Ctx, seat: Seat, data: &[u8]) -> Result<(), ActionError>;

    /// The timer set with `key` fired (see [`Ctx::set_timer`]).
    fn timer(&mut self, ctx: &mut Ctx, key: u64);

    /// What the table looks like to `seat` (its private view, e.g. with its
    /// own hole cards) or, for `None`, to a watcher. Sent when someone sits,
    /// watches or returns, so they can draw the table and go on from there.
    fn snapshot(&self, seat: Option<Seat>) -> Bytes;

    /// The game's whole state, for another node to go on from it after this
    /// one died ([`GameFactory::restore`], decision 0009): everything the
    /// rules will ever read again, a hand in progress included (its deck,
    /// cards, bets, whose turn), and the state of any random generator. Not
    /// the engine's part: seats' user ids and pending timers are saved by the
    /// engine beside it. `None` (the default): this game cannot be restored,
    /// so a cluster closes its tables instead of failing them over.
    ///
    /// Contract: `restore(save())` followed by the same calls behaves exactly
    /// as this game would (same messages, same effects).
    fn save(&self) -> Option<Vec<u8>> {
        None
    }

    /// Why this game can no longer run, if it failed without panicking (a
    /// scripted game threw, ran past its CPU budget or memory cap, or sent
    /// something that is not JSON): the engine checks it after every call,
    /// [`Game::save`] included, and closes the table as for a panic
    /// (everyone gets `unseat` with code 100). A game that reports a fault
    /// must not be relied on afterwards: the engine calls it no more.
    /// Default: never.
    fn fault(&self) -> Option<String> {
        None
    }
}

/// Why a game refused an action. The message reaches the player.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionError {
    /// Not this seat's turn, or nothing to act on now.
    OutOfTurn(String),
    /// The action is not allowed now (e.g. a check facing a bet, an amount
    /// below the minimum raise).
    Illegal(String),
    /// The data could not be understood.
    Malformed(String),
}

impl std::fmt::Display for ActionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActionError::OutOfTurn(m) => write!(f, "out of turn: {m}"),
            ActionError::Illegal(m) => write!(f, "illegal action: {m}"),
            ActionError::Malformed(m) => write!(f, "malformed action: {m}"),
        }
    }
}

impl std::error::Error for ActionError {}

/// Makes the [`Game`] of a new table. One factory per game name, registered
/// with the engine at start-up.
pub trait GameFactory: Send + Sync + 'static {
    /// The name tables are configured with (`game = "holdem"`).
    fn name(&self) -> &'static str;

    /// A new game for a table, or why these parameters are refused (the
    /// operator sees it: a config error or an HTTP 400).
    fn create(&self, params: &TableParams) -> Result<Box<dyn Game>, String>;

    /// The game of a table created with `params`, from what its
    /// [`Game::save`] returned (read back from Redis: outside data, so a
    /// malformed or inconsistent state is an `Err`, never a panic). The
    /// default refuses: a game without `save` has nothing to restore.
    fn restore(&self, params: &TableParams, state: &[u8]) -> Result<Box<dyn Game>, String> {
        let _ = (params, state);
        Err(format!("{} tables cannot be restored", self.name()))
    }
}

/// What a table was created with.
#[derive(Debug, Clone, PartialEq)]
pub struct TableParams {
    /// The table's id (unique on the server).
    pub id: u64,
    /// Number of seats.
    pub seats: u32,
    /// The timing profile's name (`normal`, `express`, `super-express`, or
    /// whatever the game accepts); the game chooses what it means.
    pub timing: String,
    /// Every other parameter from the config or the HTTP request (stakes,
    /// buy-in, ...), a JSON object; the game reads what it knows.
    pub params: Map<String, Value>,
}

/// One effect a game asked for. Applied by the engine in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send to the player at one seat only (private state, e.g. hole cards).
    ToSeat(Seat, Bytes),
    /// Send to every player and watcher (public state).
    ToTable(Bytes),
    /// Send to every seated player, not to watchers.
    ToPlayers(Bytes),
    /// Send to watchers only.
    ToWatchers(Bytes),
    /// Fire [`Game::timer`] with this key after this delay; replaces a
    /// pending timer with the same key.
    SetTimer(u64, Duration),
    /// Cancel the pending timer with this key (nothing if none).
    CancelTimer(u64),
    /// Set (or, with `Value::Null`, remove) one of the table's lobby
    /// attributes.
    Attr(String, Value),
    /// A hand (round, match) finished: counted in the metrics.
    HandFinished,
    /// Stand the player at this seat up (e.g. busted with no rebuy): the
    /// engine calls [`Game::left`] and tells the player why.
    Unseat(Seat, String),
}

/// Where a game records its effects during one call.
#[derive(Debug, Default)]
pub struct Ctx {
    effects: Vec<Effect>,
}

impl Ctx {
    /// An empty context.
    pub fn new() -> Ctx {
        Ctx::default()
    }

    /// Sends `data` to the player at `seat` only.
    pub fn send_to(&mut self, seat: Seat, data: impl Into<Bytes>) {
        self.effects.push(Effect::ToSeat(seat, data.into()));
    }

    /// Sends `data` to every player and watcher.
    pub fn send_table(&mut self, data: impl Into<Bytes>) {
        self.effects.push(Effect::ToTable(data.into()));
    }

    /// Sends `data` to every seated player.
    pub fn send_players(&mut self, data: impl Into<Bytes>) {
        self.effects.push(Effect::ToPlayers(data.into()));
    }

    /// Sends `data` to watchers only.
    pub fn send_watchers(&mut self, data: impl Into<Bytes>) {
        self.effects.push(Effect::ToWatchers(data.into()));
    }

    /// Fires [`Game::timer`] with `key` after `after` (replacing a pending
    /// timer with the same key).
    pub fn set_timer(&mut self, key: u64, after: Duration) {
        self.effects.push(Effect::SetTimer(key, after));
    }

    /// Cancels the pending timer with `key`.
    pub fn cancel_timer(&mut self, key: u64) {
        self.effects.push(Effect::CancelTimer(key));
    }

    /// Sets a lobby attribute of the table (`Value::Null` removes it).
    pub fn set_attr(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        self.effects.push(Effect::Attr(key.into(), value.into()));
    }

    /// Reports a finished hand.
    pub fn hand_finished(&mut self) {
        self.effects.push(Effect::HandFinished);
    }

    /// Stands the player at `seat` up, telling them `reason`.
    pub fn unseat(&mut self, seat: Seat, reason: impl Into<String>) {
        self.effects.push(Effect::Unseat(seat, reason.into()));
    }

    /// The effects recorded so far, in order.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Takes the recorded effects, leaving the context empty.
    pub fn take(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }
}
