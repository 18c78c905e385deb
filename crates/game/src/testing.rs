//! A table without a runtime, for unit tests of a game's rules.
//!
//! [`Harness`] plays the engine's part the way the engine does (seats, the
//! order of calls, applying effects, `Unseat`), with a clock that moves only
//! when the test calls [`Harness::advance`]: timers fire in deadline order
//! (ties in the order they were set), each with the clock at its deadline.
//! What the game sent is kept per recipient so tests can read it.
//!
//! [`client`] and [`drain`] are for tests of the engine itself: a signed-in
//! connection without a socket, and what the engine queued to it, decoded.

use crate::{ActionError, Ctx, Effect, Game, Seat};
use bytes::Bytes;
use herald_core::{Client, Identity};
use herald_proto::{Encoding, ServerMsg};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Who a message went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To {
    /// One seat.
    Seat(Seat),
    /// Players and watchers.
    Table,
    /// Seated players.
    Players,
    /// Watchers.
    Watchers,
}

/// One game, driven by hand.
pub struct Harness {
    game: Box<dyn Game>,
    seats: BTreeMap<Seat, String>,
    /// key → (deadline, order set), so ties fire in the order they were set.
    timers: BTreeMap<u64, (Duration, u64)>,
    set_count: u64,
    now: Duration,
    /// Everything sent, in order.
    pub sent: Vec<(To, Bytes)>,
    /// Lobby attributes as the game last set them.
    pub attrs: Map<String, Value>,
    /// Hands reported finished.
    pub hands: u64,
    /// Seats the game stood up, with the reason.
    pub unseated: Vec<(Seat, String)>,
    /// The game's [`Game::fault`], once it reported one: as in the engine,
    /// the game is not called again (the table would be closed).
    pub fault: Option<String>,
}

impl Harness {
    /// Wraps a game and calls [`Game::created`].
    pub fn new(game: Box<dyn Game>) -> Harness {
        let mut h = Harness {
            game,
            seats: BTreeMap::new(),
            timers: BTreeMap::new(),
            set_count: 0,
            now: Duration::ZERO,
            sent: Vec::new(),
            attrs: Map::new(),
            hands: 0,
            unseated: Vec::new(),
            fault: None,
        };
        h.with_ctx(|g, ctx| g.created(ctx));
        h
    }

    /// The game itself (to read its state in assertions).
    pub fn game(&self) -> &dyn Game {
        &*self.game
    }

    /// Puts `game` in the place of the current one, keeping the seats, the
    /// pending timers and the clock: what a node taking a table over does
    /// with a game restored from [`Game::save`] (the engine saves seats and
    /// timers itself). Returns the game replaced.
    pub fn replace_game(&mut self, game: Box<dyn Game>) -> Box<dyn Game> {
        std::mem::replace(&mut self.game, game)
    }

    /// Time since the harness started.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Seated players by seat.
    pub fn seats(&self) -> &BTreeMap<Seat, String> {
        &self.seats
    }

    /// Pending timers: key → time until it fires.
    pub fn pending_timers(&self) -> Vec<(u64, Duration)> {
        let mut v: Vec<_> = self
            .timers
            .iter()
            .map(|(k, (at, _))| (*k, at.saturating_sub(self.now)))
            .collect();
        v.sort_by_key(|(k, d)| (*d, *k));
        v
    }

    /// Asks to sit `user` at `seat`, as the engine would (the seat must be
    /// free; the game may refuse).
    pub fn sit(&mut self, seat: Seat, user: &str, data: &[u8]) -> Result<(), String> {
        if self.seats.contains_key(&seat) {
            return Err("seat taken".into());
        }
        if self.fault.is_some() {
            return Err("the table failed".into());
        }
        let allowed = self.game.can_sit(seat, user, data);
        if self.check_fault() {
            return Err("the table failed".into());
        }
        allowed?;
        self.seats.insert(seat, user.to_string());
        let user = user.to_string();
        let data = data.to_vec();
        self.with_ctx(|g, ctx| g.sat(ctx, seat, &user, &data));
        Ok(())
    }

    /// The player at `seat` leaves.
    pub fn leave(&mut self, seat: Seat) {
        if self.seats.contains_key(&seat) {
            self.with_ctx(|g, ctx| g.left(ctx, seat));
            self.seats.remove(&seat);
        }
    }

    /// The player at `seat` drops.
    pub fn drop_seat(&mut self, seat: Seat) {
        if self.seats.contains_key(&seat) {
            self.with_ctx(|g, ctx| g.dropped(ctx, seat));
        }
    }

    /// The dropped player at `seat` returns.
    pub fn return_seat(&mut self, seat: Seat) {
        if self.seats.contains_key(&seat) {
            self.with_ctx(|g, ctx| g.returned(ctx, seat));
        }
    }

    /// The player at `seat` acts.
    pub fn act(&mut self, seat: Seat, data: &[u8]) -> Result<(), ActionError> {
        if !self.seats.contains_key(&seat) {
            return Err(ActionError::OutOfTurn("not seated".into()));
        }
        if self.fault.is_some() {
            return Err(ActionError::OutOfTurn("the table failed".into()));
        }
        let mut ctx = Ctx::new();
        let r = self.game.act(&mut ctx, seat, data);
        if !self.check_fault() {
            self.apply(ctx);
        }
        r
    }

    /// The game's view for `seat` (a watcher's for `None`), as the engine
    /// would send it.
    pub fn snapshot(&mut self, seat: Option<Seat>) -> Bytes {
        let view = self.game.snapshot(seat);
        self.check_fault();
        view
    }

    /// The game's [`Game::save`], as the engine takes it after each message
    /// in a cluster.
    pub fn save(&mut self) -> Option<Vec<u8>> {
        let saved = self.game.save();
        self.check_fault();
        saved
    }

    /// Records the game's fault, if it reports one now; true if it failed.
    fn check_fault(&mut self) -> bool {
        if self.fault.is_none() {
            self.fault = self.game.fault();
        }
        self.fault.is_some()
    }

    /// Moves the clock forward by `d`, firing every timer that falls due,
    /// in deadline order.
    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        while let Some((key, at)) = self.next_timer(end) {
            self.timers.remove(&key);
            self.now = at;
            self.with_ctx(|g, ctx| g.timer(ctx, key));
        }
        self.now = end;
    }

    /// Fires the next pending timer, whenever it is due; false if none.
    pub fn fire_next(&mut self) -> bool {
        match self.next_timer(Duration::MAX) {
            Some((key, at)) => {
                self.timers.remove(&key);
                self.now = self.now.max(at);
                self.with_ctx(|g, ctx| g.timer(ctx, key));
                true
            }
            None => false,
        }
    }

    /// Messages sent so far to exactly this recipient.
    pub fn sent_to(&self, to: To) -> Vec<&Bytes> {
        self.sent
            .iter()
            .filter(|(t, _)| *t == to)
            .map(|(_, b)| b)
            .collect()
    }

    /// Messages the player at `seat` would have received (its own, the
    /// table's and the players').
    pub fn received_by(&self, seat: Seat) -> Vec<&Bytes> {
        self.sent
            .iter()
            .filter(|(t, _)| matches!(t, To::Table | To::Players) || *t == To::Seat(seat))
            .map(|(_, b)| b)
            .collect()
    }

    /// Forgets the messages recorded so far.
    pub fn clear_sent(&mut self) {
        self.sent.clear();
    }

    fn next_timer(&self, until: Duration) -> Option<(u64, Duration)> {
        self.timers
            .iter()
            .filter(|(_, (at, _))| *at <= until)
            .min_by_key(|(_, (at, order))| (*at, *order))
            .map(|(k, (at, _))| (*k, *at))
    }

    fn with_ctx(&mut self, f: impl FnOnce(&mut dyn Game, &mut Ctx)) {
        if self.fault.is_some() {
            return;
        }
        let mut ctx = Ctx::new();
        f(&mut *self.game, &mut ctx);
        if !self.check_fault() {
            self.apply(ctx);
        }
    }

    fn apply(&mut self, mut ctx: Ctx) {
        for e in ctx.take() {
            match e {
                Effect::ToSeat(s, b) => self.sent.push((To::Seat(s), b)),
                Effect::ToTable(b) => self.sent.push((To::Table, b)),
                Effect::ToPlayers(b) => self.sent.push((To::Players, b)),
                Effect::ToWatchers(b) => self.sent.push((To::Watchers, b)),
                Effect::SetTimer(k, d) => {
                    self.set_count += 1;
                    self.timers.insert(k, (self.now + d, self.set_count));
                }
                Effect::CancelTimer(k) => {
                    self.timers.remove(&k);
                }
                Effect::Attr(k, Value::Null) => {
                    self.attrs.remove(&k);
                }
                Effect::Attr(k, v) => {
                    self.attrs.insert(k, v);
                }
                Effect::HandFinished => self.hands += 1,
                Effect::Unseat(s, reason) => {
                    if self.seats.contains_key(&s) {
                        self.unseated.push((s, reason));
                        self.with_ctx(|g, ctx| g.left(ctx, s));
                        self.seats.remove(&s);
                    }
                }
            }
        }
    }
}

/// A connection signed in as `user`, speaking `encoding`, with an id of its
/// own and a 1 MiB outbox; nothing reads it but [`drain`].
pub fn client(user: &str, encoding: Encoding) -> Arc<Client> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let c = Arc::new(Client::new(
        NEXT.fetch_add(1, Ordering::Relaxed),
        encoding,
        1 << 20,
        0,
    ));
    c.set_identity(Arc::new(Identity {
        user: user.into(),
        expires_at: None,
        grants: Vec::new(),
        info: Bytes::new(),
    }));
    c
}

/// Everything queued to `c` so far, decoded; the queue is emptied.
///
/// # Panics
/// On a frame that does not decode: the engine queued a malformed message.
pub fn drain(c: &Client) -> Vec<ServerMsg> {
    let frames: Vec<Vec<u8>> = c.outbox.with_queue(|q| {
        let v = q.frames.iter().map(|f| f.payload().to_vec()).collect();
        let n = q.frames.len();
        q.advance(n, 0);
        v
    });
    frames
        .iter()
        .map(|f| c.encoding.decode_server(f).expect("server message decodes"))
        .collect()
}
