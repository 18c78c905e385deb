//! One table: a single task that owns the game, the seats, the watchers and
//! the timers, and handles one message at a time.
//!
//! Why one task per table: a game's rules are a state machine that must see
//! events in one order (an action, then the timer that would have acted for
//! the same seat, never both at once). A task with a mailbox gives that order
//! without any lock, and tables never wait on each other. Nothing here awaits
//! anything but the mailbox and the next timer; sending to a client only
//! queues bytes in its bounded outbox.
//!
//! Order towards a client: whoever sits, watches or returns gets its reply
//! (with the game's snapshot, taken after the game handled the event) before
//! anything the table sends afterwards, and nothing from before it; the
//! snapshot stands for everything earlier. `act` is answered before the
//! effects of the action are sent, so a player's reply always precedes the
//! broadcast of what it did.
//!
//! A durable table (decision 0009) saves before it sends anything. Saving
//! is a round trip to the store, so what reaches the mailbox during one
//! save is handled as one group after it (up to [`GROUP`] messages, each in
//! order, as if one by one), saved once, and only then is everything the
//! group produced sent, in the order produced (group commit). There is no
//! added wait: an idle table saves each message alone. A table in memory
//! (no cluster) has nothing to wait for and handles one message at a time.
//!
//! A game that panics closes its own table (everyone gets `unseat` with code
//! 100); other tables go on.

use crate::durable::{
    Claimed, Head, Lease, SavedTimer, Saver, StoreError, TableStore, RECORD_VERSION,
};
use crate::engine::Shared;
use crate::play::{Demand, PlaySeat};
use crate::{Ctx, Effect, Game, Seat, TableParams};
use bytes::Bytes;
use herald_core::Client;
use herald_proto::{Encoding, ErrorCode, Push, Reply, SeatStatus, ServerMsg, TableEntry};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// What a table's mailbox carries.
pub(crate) enum TableMsg {
    Sit {
        client: Arc<Client>,
        id: u32,
        seat: Option<u32>,
        data: Bytes,
        /// A `play`'s seat, reserved (counted) by the engine.
        play: Option<PlaySeat>,
    },
    Watch {
        client: Arc<Client>,
        id: u32,
    },
    Stand {
        client: Arc<Client>,
        id: u32,
    },
    Act {
        client: Arc<Client>,
        id: u32,
        data: Bytes,
        at: Instant,
    },
    /// The client's connection ended.
    Gone {
        client: u64,
    },
    Info {
        reply: oneshot::Sender<TableInfo>,
    },
    Close {
        reply: oneshot::Sender<TableInfo>,
    },
    /// The engine's batched renewal found the lease with this token lost:
    /// take it back if nobody else holds it, else stop.
    LeaseLost {
        token: u64,
    },
}

/// A table's state as the HTTP API shows it.
#[derive(Debug, Clone)]
pub struct TableInfo {
    /// The lobby entry.
    pub entry: TableEntry,
    /// Occupied seats: number, user id, whether the player is away (dropped,
    /// within the grace period).
    pub seats: Vec<(Seat, String, bool)>,
    /// The game's public snapshot (what a watcher sees).
    pub state: Bytes,
}

/// Who holds a seat.
struct Holder {
    user: Arc<str>,
    /// `None` while the player is away (dropped, within the grace period).
    client: Option<Arc<Client>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TimerKey {
    Game(u64),
    Grace(Seat),
    /// A table made by `play` with nobody seated closes when this fires.
    Empty,
}

/// Whether the task goes on after a message.
#[derive(PartialEq)]
enum Flow {
    Continue,
    Stop,
}

pub(crate) struct Table {
    id: u64,
    path: String,
    game: Box<dyn Game>,
    seats: Vec<Option<Holder>>,
    watchers: Vec<Arc<Client>>,
    timers: HashMap<TimerKey, Instant>,
    attrs: Map<String, Value>,
    shared: Arc<Shared>,
    /// The lobby entry needs sending.
    dirty: bool,
    /// The game panicked: close at the end of this message.
    failed: bool,
    /// What the current message (or group of messages) produced for
    /// clients, sent once it is handled (and, on a durable table, saved).
    out: Vec<(Arc<Client>, Bytes)>,
    /// The parameters it was created with (saved in its record).
    params: TableParams,
    game_name: String,
    /// In a cluster: the lease and where to save (decision 0009).
    durable: Option<DurableTable>,
    /// The current message may have changed the durable state.
    touched: bool,
    /// Restored from a save: `Game::created` was called by its first owner.
    restored: bool,
    /// The game timer being fired and its deadline, while its call runs:
    /// the same timer set again from it counts from that deadline, not
    /// from now, so a periodic timer keeps its rate (a 20 Hz tick stays
    /// 20 Hz however late each firing is) as the fake-clock harness does.
    firing: Option<(u64, Instant)>,
    /// Made by `play` (protocol §5f): seated through `play` only, counted,
    /// closed once empty for a while.
    demand: Option<Demand>,
    /// The empty-table timer fired: check and close after this message.
    empty_due: bool,
}

/// A durable table's lease and store.
pub(crate) struct DurableTable {
    pub(crate) store: Arc<dyn TableStore>,
    /// The node's save queue: this table's saves go out in the node's
    /// batches.
    pub(crate) saver: Saver,
    pub(crate) lease: Lease,
    pub(crate) lease_time: Duration,
    /// When the last renewal (or save, or claim) that succeeded was sent.
    pub(crate) confirmed: Instant,
}

/// Time between two attempts to save while the store is unreachable.
const SAVE_RETRY: Duration = Duration::from_millis(100);

/// Messages handled before one save at most (group commit): what queued in
/// the mailbox while the table was saving is handled together, saved once,
/// then everything it produced is sent, in order.
pub(crate) const GROUP: usize = 64;

/// The user id a seat belongs to: the token's subject, or for anonymous
/// clients (when allowed) one made from the connection, which therefore
/// cannot reclaim the seat from another connection.
pub(crate) fn user_of(client: &Client) -> Arc<str> {
    let user = client.user();
    if user.is_empty() {
        format!("~{}", client.wire_id()).into()
    } else {
        user.into()
    }
}

impl Table {
    pub(crate) fn new(
        params: &TableParams,
        path: String,
        game: Box<dyn Game>,
        game_name: &str,
        shared: Arc<Shared>,
    ) -> Table {
        let mut attrs = Map::new();
        attrs.insert("game".into(), Value::from(game_name));
        attrs.insert("timing".into(), Value::from(params.timing.clone()));
        let demand = Demand::of(&params.params);
        if let Some(d) = &demand {
            attrs.insert("play".into(), Value::Bool(true));
            if d.code.is_some() {
                attrs.insert("private".into(), Value::Bool(true));
            }
        }
        Table {
            id: params.id,
            path,
            game,
            seats: (0..params.seats).map(|_| None).collect(),
            watchers: Vec::new(),
            timers: HashMap::new(),
            attrs,
            shared,
            dirty: true,
            failed: false,
            out: Vec::new(),
            params: params.clone(),
            game_name: game_name.to_string(),
            durable: None,
            touched: true,
            restored: false,
            firing: None,
            demand,
            empty_due: false,
        }
    }

    /// Makes the table durable: it saves before anything it sends.
    pub(crate) fn durable(mut self, d: DurableTable) -> Table {
        self.durable = Some(d);
        self
    }

    /// A table taken over from a save made `elapsed` ago: the seats are
    /// held by their users, all away (their connections were elsewhere;
    /// each gets the grace period to come back), the timers resume with
    /// what they had left.
    pub(crate) fn restore(
        head: &Head,
        game: Box<dyn Game>,
        shared: Arc<Shared>,
        elapsed: Duration,
    ) -> Table {
        let params = TableParams {
            id: head.id,
            seats: head.seats,
            timing: head.timing.clone(),
            params: head.params.clone(),
        };
        let mut t = Table::new(&params, head.path.clone(), game, &head.game, shared);
        t.attrs = head.attrs.clone();
        t.restored = true;
        let now = Instant::now();
        let left = |ms: u64| now + Duration::from_millis(ms).saturating_sub(elapsed);
        for timer in &head.timers {
            match *timer {
                SavedTimer::Game { key, left_ms } => {
                    t.timers.insert(TimerKey::Game(key), left(left_ms));
                }
                SavedTimer::Grace { seat, left_ms } => {
                    t.timers.insert(TimerKey::Grace(seat), left(left_ms));
                }
            }
        }
        let grace = t.shared.config.grace;
        for (seat, user) in head.users.iter().enumerate() {
            let (Some(user), Some(slot)) = (user, t.seats.get_mut(seat)) else {
                continue;
            };
            *slot = Some(Holder {
                user: user.as_str().into(),
                client: None,
            });
            t.shared.metrics.players.add(1);
            t.timers
                .entry(TimerKey::Grace(seat as Seat))
                .or_insert(now + grace);
        }
        t
    }

    /// The engine's part of the record and the game's save.
    fn record(&self) -> Result<Bytes, String> {
        let game = self
            .game
            .save()
            .ok_or_else(|| format!("{} tables cannot be saved", self.game_name))?;
        let now = Instant::now();
        // The empty-table timer is not saved: a new owner starts it again.
        let mut timers: Vec<SavedTimer> = self
            .timers
            .iter()
            .filter_map(|(k, at)| {
                let left_ms = at.saturating_duration_since(now).as_millis() as u64;
                match *k {
                    TimerKey::Game(key) => Some(SavedTimer::Game { key, left_ms }),
                    TimerKey::Grace(seat) => Some(SavedTimer::Grace { seat, left_ms }),
                    TimerKey::Empty => None,
                }
            })
            .collect();
        timers.sort_by_key(|t| match t {
            SavedTimer::Game { key, .. } => (0, *key),
            SavedTimer::Grace { seat, .. } => (1, u64::from(*seat)),
        });
        let head = Head {
            v: RECORD_VERSION,
            id: self.id,
            game: self.game_name.clone(),
            seats: self.params.seats,
            timing: self.params.timing.clone(),
            path: self.path.clone(),
            params: self.params.params.clone(),
            users: self
                .seats
                .iter()
                .map(|h| h.as_ref().map(|h| h.user.to_string()))
                .collect(),
            timers,
            attrs: self.attrs.clone(),
        };
        crate::durable::encode(&head, &game)
    }

    /// Saves the table if the last message may have changed it, before
    /// anything it produced is sent. False: the lease is lost (another node
    /// may own the table): nothing may be sent, the table must stop.
    async fn persist(&mut self) -> bool {
        let touched = std::mem::take(&mut self.touched);
        if !touched || self.durable.is_none() {
            return true;
        }
        let record = self.record();
        if self.faulted() {
            // The game's state cannot be saved (a scripted game's state is
            // not JSON, or too large): close the table as failed, now.
            self.close(ErrorCode::Internal, "the table failed and was closed");
            self.flush();
            if self.durable.is_some() {
                self.shared.durable_failed(self.id);
            }
            return false;
        }
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(table = self.id, "cannot save the table: {e}");
                return false;
            }
        };
        loop {
            let Some(d) = self.durable.as_mut() else {
                return true;
            };
            let sent = Instant::now();
            match d.saver.save(d.lease, record.clone()).await {
                Ok(_) => {
                    d.confirmed = sent;
                    return true;
                }
                // The lease expired and nobody took it (Redis was away
                // longer than the lease, or lost its data): this node may
                // take it back if nobody saved since its own last save.
                Err(StoreError::Fenced(None)) => {
                    if !self.reclaim_lease().await {
                        return false;
                    }
                }
                Err(StoreError::Fenced(holder)) => {
                    tracing::warn!(
                        table = self.id,
                        token = d.lease.token,
                        ?holder,
                        "table lease lost: fenced"
                    );
                    return false;
                }
                Err(StoreError::Unavailable(e)) => {
                    // Nothing is sent until the state is saved; the lease
                    // check in the store decides whether this node may go on
                    // once the store is back.
                    tracing::debug!(table = self.id, "save failed, retrying: {e}");
                    tokio::time::sleep(SAVE_RETRY).await;
                }
            }
        }
    }

    /// Claims the table again after its lease expired with nobody holding
    /// it. True if this node holds it again and its in-memory state is the
    /// latest: the last save is its own, or there is none (Redis lost its
    /// data; the memory of this node is all there is, so it is written
    /// back rather than lost).
    async fn reclaim_lease(&mut self) -> bool {
        let Some(d) = self.durable.as_mut() else {
            return false;
        };
        let sent = Instant::now();
        match d.store.claim(self.id, d.lease.token, d.lease_time).await {
            Ok(Claimed::Won { lease, saved, .. }) => {
                let ours = saved.as_ref().is_none_or(|s| s.token == d.lease.token);
                tracing::warn!(
                    table = self.id,
                    old = d.lease.token,
                    token = lease.token,
                    ours,
                    lost_data = saved.is_none(),
                    "table lease expired: claimed again"
                );
                if !ours {
                    return false;
                }
                d.lease = lease;
                d.confirmed = sent;
                self.shared.leased(lease);
                true
            }
            Ok(Claimed::Held(by)) => {
                tracing::warn!(table = self.id, %by, "table lease lost");
                false
            }
            Err(StoreError::Fenced(_)) => false,
            // Try the save (and so this) again after a pause.
            Err(StoreError::Unavailable(_)) => {
                tokio::time::sleep(SAVE_RETRY).await;
                true
            }
        }
    }

    /// The engine's renewal found the lease with `token` lost: false if
    /// the table must stop (another node may hold it).
    async fn lease_lost(&mut self, token: u64) -> bool {
        let current = self
            .durable
            .as_ref()
            .is_some_and(|d| d.lease.token == token);
        !current || self.renew().await
    }

    /// Renews the lease; false if it is lost.
    async fn renew(&mut self) -> bool {
        let Some(d) = self.durable.as_mut() else {
            return true;
        };
        let sent = Instant::now();
        match d.store.renew(d.lease, d.lease_time).await {
            Ok(true) => {
                d.confirmed = sent;
                true
            }
            // Expired (and perhaps taken): take it back only if nobody else
            // holds it and nobody saved since this node did.
            Ok(false) | Err(StoreError::Fenced(_)) => self.reclaim_lease().await,
            // Unreachable: try again at the next tick; a save will tell.
            Err(StoreError::Unavailable(_)) => true,
        }
    }

    /// This node lost the table to another: its local players and watchers
    /// are told (the game goes on at the new owner), nothing else is sent.
    fn lost(&mut self) {
        self.out.clear();
        let reason = "the table moved to another node: sit again to get your seat back";
        let clients: Vec<Arc<Client>> = self
            .seats
            .iter()
            .flatten()
            .filter_map(|h| h.client.clone())
            .chain(self.watchers.drain(..))
            .collect();
        for c in clients {
            self.unseat(&c, ErrorCode::UnknownTable, reason);
        }
        let players = self.seats.iter().flatten().count() as i64;
        self.shared.metrics.players.add(-players);
        self.flush();
    }

    /// The current lobby entry.
    pub(crate) fn entry(&self) -> TableEntry {
        TableEntry {
            table: self.id,
            path: self.path.clone(),
            seats: self.seats.len() as u32,
            players: self.seats.iter().flatten().count() as u32,
            watchers: self.watchers.len() as u32,
            attrs: Bytes::from(Value::Object(self.attrs.clone()).to_string()),
        }
    }

    /// Runs the table until it is closed or its game fails.
    pub(crate) async fn run(mut self, mut rx: mpsc::Receiver<TableMsg>) {
        if !self.restored {
            self.call(|g, ctx| g.created(ctx));
        }
        if !self.persist().await {
            self.lost();
            self.shared.table_ended(self.id);
            return;
        }
        self.after_message();
        // The lease is renewed by the engine, for all of the node's tables
        // in one call; this table hears only of a lost one (`LeaseLost`).
        'run: loop {
            let next = self.timers.values().min().copied();
            let mut flow = tokio::select! {
                msg = rx.recv() => match msg {
                    Some(TableMsg::LeaseLost { token }) => {
                        if !self.lease_lost(token).await {
                            self.lost();
                            break 'run;
                        }
                        Flow::Continue
                    }
                    Some(m) => {
                        self.touched |= !matches!(m, TableMsg::Info { .. });
                        self.handle(m)
                    }
                    None => Flow::Stop,
                },
                _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                    self.touched = true;
                    self.fire_due();
                    Flow::Continue
                }
            };
            // Group commit: what else is already queued (it arrived while
            // the last save was in flight) is handled now and saved with
            // this message, in one save; its output waits for that save.
            // A table in memory (no save) handles one message at a time.
            let group = if self.durable.is_some() { GROUP } else { 1 };
            let mut handled = 1;
            while flow == Flow::Continue && !self.failed && handled < group {
                let Ok(m) = rx.try_recv() else { break };
                handled += 1;
                flow = match m {
                    TableMsg::LeaseLost { token } => {
                        if !self.lease_lost(token).await {
                            self.lost();
                            break 'run;
                        }
                        Flow::Continue
                    }
                    m => {
                        self.touched |= !matches!(m, TableMsg::Info { .. });
                        self.handle(m)
                    }
                };
            }
            if handled > 1 {
                self.shared.metrics.grouped.add(handled as u64 - 1);
            }
            if self.failed {
                self.close(ErrorCode::Internal, "the table failed and was closed");
                self.flush();
                if self.durable.is_some() {
                    self.shared.durable_failed(self.id);
                }
                break;
            }
            if std::mem::take(&mut self.empty_due) && self.close_if_empty().await {
                break;
            }
            if !self.persist().await {
                self.lost();
                break;
            }
            self.after_message();
            if flow == Flow::Stop {
                break;
            }
        }
        self.shared.table_ended(self.id);
    }

    /// The empty-table timer fired: a table made by `play` with nobody
    /// seated closes if the count agrees (no seat reserved on its way
    /// here); true if it closed. Watchers get `unseat` 115; in a cluster
    /// the table is deleted for good (no take-over).
    async fn close_if_empty(&mut self) -> bool {
        if self.demand.is_none() || self.seated() > 0 {
            return false;
        }
        if !self.shared.play_retire(self.id).await {
            let again = Instant::now() + self.shared.config.play.empty_close;
            self.timers.insert(TimerKey::Empty, again);
            return false;
        }
        tracing::info!(table = self.id, "table made by play closed: empty");
        self.close(ErrorCode::UnknownTable, "the table was closed");
        self.flush();
        if self.durable.is_some() {
            self.shared.durable_failed(self.id);
        }
        true
    }

    /// Seats held (away players included).
    fn seated(&self) -> u32 {
        self.seats.iter().flatten().count() as u32
    }

    /// Starts the empty-table timer of a table made by `play` when its
    /// last player left, stops it when one sits.
    fn arm_empty(&mut self) {
        if self.demand.is_none() {
            return;
        }
        if self.seated() > 0 {
            self.timers.remove(&TimerKey::Empty);
        } else if !self.timers.contains_key(&TimerKey::Empty) {
            let at = Instant::now() + self.shared.config.play.empty_close;
            self.timers.insert(TimerKey::Empty, at);
        }
    }

    fn after_message(&mut self) {
        self.arm_empty();
        self.flush();
        if self.dirty {
            self.dirty = false;
            match &self.durable {
                // Every node's lobby, this one's included, gets it from
                // Redis, in the cluster's order (decision 0009).
                Some(d) => d
                    .store
                    .publish_entry(d.lease, crate::lobby::encode_entry(&self.entry())),
                None => self.shared.lobby.put(self.entry()),
            }
        }
    }

    fn handle(&mut self, msg: TableMsg) -> Flow {
        match msg {
            TableMsg::Sit {
                client,
                id,
                seat,
                data,
                play,
            } => self.sit(client, id, seat, &data, play),
            TableMsg::Watch { client, id } => self.watch(client, id),
            TableMsg::Stand { client, id } => self.stand(&client, id),
            TableMsg::Act {
                client,
                id,
                data,
                at,
            } => self.act(&client, id, &data, at),
            TableMsg::Gone { client } => self.gone(client),
            TableMsg::LeaseLost { .. } => {} // handled in `run`
            TableMsg::Info { reply } => {
                let _ = reply.send(self.info());
            }
            TableMsg::Close { reply } => {
                let info = self.info();
                self.close(ErrorCode::UnknownTable, "the table was closed");
                let _ = reply.send(info);
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    fn info(&mut self) -> TableInfo {
        TableInfo {
            entry: self.entry(),
            seats: self
                .seats
                .iter()
                .enumerate()
                .filter_map(|(i, h)| {
                    h.as_ref()
                        .map(|h| (i as Seat, h.user.to_string(), h.client.is_none()))
                })
                .collect(),
            state: self.snapshot(None),
        }
    }

    fn seat_of_client(&self, client: u64) -> Option<Seat> {
        self.seats
            .iter()
            .position(|h| {
                h.as_ref()
                    .and_then(|h| h.client.as_ref())
                    .is_some_and(|c| c.id == client)
            })
            .map(|i| i as Seat)
    }

    fn seat_of_user(&self, user: &str) -> Option<Seat> {
        self.seats
            .iter()
            .position(|h| h.as_ref().is_some_and(|h| &*h.user == user))
            .map(|i| i as Seat)
    }

    fn sit(
        &mut self,
        client: Arc<Client>,
        id: u32,
        wanted: Option<u32>,
        data: &[u8],
        play: Option<PlaySeat>,
    ) {
        // A `play`'s seat was counted before it came: unless it becomes a
        // new seat here, the count is given back.
        let counted = play.is_some();
        if self.watchers.iter().any(|c| c.id == client.id) {
            self.uncount(counted);
            return self.error(
                &client,
                id,
                ErrorCode::AlreadyAtTable,
                "watching this table: stand first",
            );
        }
        let user = user_of(&client);
        if let Some(seat) = self.seat_of_user(&user) {
            self.uncount(counted);
            return self.reclaim(client, id, seat, wanted, play);
        }
        if self.demand.is_some() && !counted {
            return self.error(
                &client,
                id,
                ErrorCode::SeatUnavailable,
                "a table made by play: join it with play",
            );
        }
        let refuse = |t: &mut Table, client: &Arc<Client>, code: ErrorCode, why: &str| {
            t.uncount(counted);
            t.error(client, id, code, why);
        };
        let seat = match wanted {
            Some(s) if s as usize >= self.seats.len() => {
                return refuse(self, &client, ErrorCode::SeatUnavailable, "no such seat");
            }
            Some(s) if self.seats[s as usize].is_some() => {
                return refuse(self, &client, ErrorCode::SeatUnavailable, "seat taken");
            }
            Some(s) => s,
            None => match self.seats.iter().position(Option::is_none) {
                Some(s) => s as Seat,
                None => return refuse(self, &client, ErrorCode::SeatUnavailable, "table full"),
            },
        };
        let refused =
            std::panic::catch_unwind(AssertUnwindSafe(|| self.game.can_sit(seat, &user, data)));
        match refused {
            Ok(_) if self.faulted() => {
                return refuse(self, &client, ErrorCode::Internal, "the table failed");
            }
            Ok(Ok(())) => {}
            Ok(Err(reason)) => {
                return refuse(self, &client, ErrorCode::SeatUnavailable, &reason);
            }
            Err(_) => {
                self.fail("the game panicked");
                return refuse(self, &client, ErrorCode::Internal, "the table failed");
            }
        }
        self.seats[seat as usize] = Some(Holder {
            user: user.clone(),
            client: None,
        });
        self.shared.metrics.players.add(1);
        self.dirty = true;
        self.seat_push(seat, &user, SeatStatus::Sat);
        self.call(|g, ctx| g.sat(ctx, seat, &user, data));
        self.attach(seat, client, id, play);
    }

    /// A `play`'s counted seat did not become a new seat here: the count
    /// is given back.
    fn uncount(&self, counted: bool) {
        if counted {
            self.shared.play_release(self.id, self.seated());
        }
    }

    /// The user already holds `seat`: this connection takes it (a return
    /// after a drop, or the same user from a new connection).
    fn reclaim(
        &mut self,
        client: Arc<Client>,
        id: u32,
        seat: Seat,
        wanted: Option<u32>,
        play: Option<PlaySeat>,
    ) {
        if wanted.is_some_and(|w| w != seat) {
            return self.error(
                &client,
                id,
                ErrorCode::AlreadyAtTable,
                &format!("already seated here, at seat {seat}"),
            );
        }
        let Some(holder) = self.seats[seat as usize].as_mut() else {
            return;
        };
        let user = holder.user.clone();
        match holder.client.take() {
            // `play` again from a seated connection: its seat, again
            // (what `play` promises is a seat; it has one).
            Some(old) if old.id == client.id && play.is_some() => {
                holder.client = Some(old);
                self.attach(seat, client, id, play);
            }
            Some(old) if old.id == client.id => {
                holder.client = Some(old);
                self.error(
                    &client,
                    id,
                    ErrorCode::AlreadyAtTable,
                    "already seated at this table",
                )
            }
            Some(old) => {
                // The same user on a new connection: the old one loses the
                // seat's messages (it is probably dead and not yet noticed).
                self.unseat(
                    &old,
                    ErrorCode::NotAtTable,
                    "your seat moved to another connection",
                );
                self.attach(seat, client, id, play);
            }
            None => {
                self.timers.remove(&TimerKey::Grace(seat));
                self.seat_push(seat, &user, SeatStatus::Back);
                self.call(|g, ctx| g.returned(ctx, seat));
                self.attach(seat, client, id, play);
            }
        }
    }

    /// Gives `seat` to `client` and answers its `sit` with the private
    /// snapshot: the first thing it hears from this table.
    fn attach(&mut self, seat: Seat, client: Arc<Client>, id: u32, play: Option<PlaySeat>) {
        let data = self.snapshot(Some(seat));
        let reply = match play {
            Some(p) => Reply::Play {
                table: self.id,
                seat,
                code: p.code,
                created: p.created,
                data,
            },
            None => Reply::Sit { seat, data },
        };
        self.reply(&client, id, reply);
        if let Some(h) = self.seats[seat as usize].as_mut() {
            h.client = Some(client);
        }
    }

    fn watch(&mut self, client: Arc<Client>, id: u32) {
        if self.demand.as_ref().is_some_and(|d| d.code.is_some()) {
            return self.error(
                &client,
                id,
                ErrorCode::PermissionDenied,
                "a private table: join it with its code",
            );
        }
        if self.watchers.iter().any(|c| c.id == client.id)
            || self.seat_of_client(client.id).is_some()
        {
            return self.error(
                &client,
                id,
                ErrorCode::AlreadyAtTable,
                "already at this table",
            );
        }
        let data = self.snapshot(None);
        self.reply(&client, id, Reply::Watch { data });
        self.watchers.push(client);
        self.dirty = true;
    }

    fn stand(&mut self, client: &Arc<Client>, id: u32) {
        if let Some(seat) = self.seat_of_client(client.id) {
            self.vacate(seat);
            return self.reply(client, id, Reply::Stand);
        }
        let before = self.watchers.len();
        self.watchers.retain(|c| c.id != client.id);
        if self.watchers.len() != before {
            self.dirty = true;
            return self.reply(client, id, Reply::Stand);
        }
        self.error(client, id, ErrorCode::NotAtTable, "not at this table")
    }

    /// The player at `seat` leaves for good: the game is told, then the seat
    /// is freed and everyone told.
    fn vacate(&mut self, seat: Seat) {
        self.call(|g, ctx| g.left(ctx, seat));
        self.timers.remove(&TimerKey::Grace(seat));
        if let Some(h) = self.seats[seat as usize].take() {
            self.shared.metrics.players.add(-1);
            self.dirty = true;
            self.seat_push(seat, &h.user, SeatStatus::Left);
            if self.demand.is_some() {
                self.shared.play_release(self.id, self.seated());
            }
        }
    }

    fn act(&mut self, client: &Arc<Client>, id: u32, data: &[u8], at: Instant) {
        self.shared.metrics.actions.inc();
        let Some(seat) = self.seat_of_client(client.id) else {
            return self.error(
                client,
                id,
                ErrorCode::NotAtTable,
                "not seated at this table",
            );
        };
        let mut ctx = Ctx::new();
        let game = &mut *self.game;
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| game.act(&mut ctx, seat, data)));
        match result {
            Ok(_) if self.faulted() => {
                self.error(client, id, ErrorCode::Internal, "the table failed")
            }
            Ok(Ok(())) => {
                self.reply(client, id, Reply::Act);
                self.shared.metrics.action_latency.observe(at.elapsed());
                self.apply(ctx);
            }
            Ok(Err(e)) => self.error(client, id, ErrorCode::ActionRefused, &e.to_string()),
            Err(_) => {
                self.fail("the game panicked");
                self.error(client, id, ErrorCode::Internal, "the table failed");
            }
        }
    }

    fn gone(&mut self, client: u64) {
        let before = self.watchers.len();
        self.watchers.retain(|c| c.id != client);
        if self.watchers.len() != before {
            self.dirty = true;
        }
        while let Some(seat) = self.seat_of_client(client) {
            let Some(h) = self.seats[seat as usize].as_mut() else {
                break;
            };
            h.client = None;
            let user = h.user.clone();
            let grace = self.shared.config.grace;
            self.timers
                .insert(TimerKey::Grace(seat), Instant::now() + grace);
            self.seat_push(seat, &user, SeatStatus::Away);
            self.call(|g, ctx| g.dropped(ctx, seat));
        }
    }

    fn fire_due(&mut self) {
        let now = Instant::now();
        let mut due: Vec<(Instant, TimerKey)> = self
            .timers
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, at)| (*at, *k))
            .collect();
        due.sort_by_key(|(at, k)| {
            (
                *at,
                match k {
                    TimerKey::Game(n) => (0, *n),
                    TimerKey::Grace(s) => (1, u64::from(*s)),
                    TimerKey::Empty => (2, 0),
                },
            )
        });
        for (at, key) in due {
            // An earlier timer's effects may have cancelled or moved it.
            if self.timers.get(&key) != Some(&at) {
                continue;
            }
            self.timers.remove(&key);
            match key {
                TimerKey::Game(k) => {
                    self.firing = Some((k, at));
                    self.call(|g, ctx| g.timer(ctx, k));
                    self.firing = None;
                }
                TimerKey::Empty => self.empty_due = true,
                TimerKey::Grace(seat) => {
                    if self.seats[seat as usize]
                        .as_ref()
                        .is_some_and(|h| h.client.is_none())
                    {
                        self.vacate(seat);
                    }
                }
            }
            if self.failed {
                return;
            }
        }
    }

    /// Calls the game, then applies what it asked for.
    fn call(&mut self, f: impl FnOnce(&mut dyn Game, &mut Ctx)) {
        if self.failed {
            return;
        }
        let mut ctx = Ctx::new();
        let game = &mut *self.game;
        if std::panic::catch_unwind(AssertUnwindSafe(|| f(game, &mut ctx))).is_err() {
            self.fail("the game panicked");
            return;
        }
        if self.faulted() {
            return;
        }
        self.apply(ctx);
    }

    /// Marks the table failed (closed at the end of this message), once:
    /// logged and counted.
    fn fail(&mut self, why: &str) {
        if !self.failed {
            tracing::error!(table = self.id, game = %self.game_name, "{why}; closing the table");
            self.shared.metrics.failed.inc();
            self.failed = true;
        }
    }

    /// True if the game has failed, by a panic earlier or by reporting a
    /// [`Game::fault`] now (then the table is marked failed).
    fn faulted(&mut self) -> bool {
        if !self.failed {
            if let Some(why) = self.game.fault() {
                self.fail(&format!("the game failed: {why}"));
            }
        }
        self.failed
    }

    /// The game's view for `seat`; empty if the game panics or faults (the
    /// fault closes the table at the end of this message).
    fn snapshot(&mut self, seat: Option<Seat>) -> Bytes {
        let view = std::panic::catch_unwind(AssertUnwindSafe(|| self.game.snapshot(seat)));
        match view {
            Ok(v) if !self.faulted() => v,
            Ok(_) => Bytes::new(),
            Err(_) => {
                self.fail("the game panicked");
                Bytes::new()
            }
        }
    }

    fn apply(&mut self, mut ctx: Ctx) {
        for effect in ctx.take() {
            match effect {
                Effect::ToSeat(seat, data) => {
                    if let Some(c) = self
                        .seats
                        .get(seat as usize)
                        .and_then(|h| h.as_ref())
                        .and_then(|h| h.client.clone())
                    {
                        let msg = game_push(self.id, data);
                        let bytes = c.encoding.encode_server_bytes(&msg);
                        self.out.push((c, bytes));
                        self.shared.metrics.events.inc();
                    }
                }
                Effect::ToTable(data) => self.broadcast(data, true, true),
                Effect::ToPlayers(data) => self.broadcast(data, true, false),
                Effect::ToWatchers(data) => self.broadcast(data, false, true),
                Effect::SetTimer(key, after) => {
                    let due = timer_due(self.firing, key, after, Instant::now());
                    self.timers.insert(TimerKey::Game(key), due);
                }
                Effect::CancelTimer(key) => {
                    self.timers.remove(&TimerKey::Game(key));
                }
                Effect::Attr(key, Value::Null) => {
                    self.dirty |= self.attrs.remove(&key).is_some();
                }
                Effect::Attr(key, value) => {
                    if self.attrs.get(&key) != Some(&value) {
                        self.attrs.insert(key, value);
                        self.dirty = true;
                    }
                }
                Effect::HandFinished => self.shared.metrics.hands.inc(),
                Effect::Unseat(seat, reason) => {
                    let client = self
                        .seats
                        .get(seat as usize)
                        .and_then(|h| h.as_ref())
                        .map(|h| h.client.clone());
                    if let Some(client) = client {
                        self.vacate(seat);
                        if let Some(c) = client {
                            self.unseat(&c, ErrorCode::NotAtTable, &reason);
                        }
                    }
                }
            }
        }
    }

    /// Sends game data to players and/or watchers, encoded once per encoding.
    fn broadcast(&mut self, data: Bytes, players: bool, watchers: bool) {
        let msg = game_push(self.id, data);
        let mut encoded = Encoded::default();
        let mut n = 0;
        if players {
            for c in self
                .seats
                .iter()
                .flatten()
                .filter_map(|h| h.client.as_ref())
            {
                self.out.push((c.clone(), encoded.get(c.encoding, &msg)));
                n += 1;
            }
        }
        if watchers {
            for c in &self.watchers {
                self.out.push((c.clone(), encoded.get(c.encoding, &msg)));
                n += 1;
            }
        }
        self.shared.metrics.events.add(n);
    }

    fn seat_push(&mut self, seat: Seat, user: &str, status: SeatStatus) {
        let msg = ServerMsg::Push(Push::Seat {
            table: self.id,
            seat,
            user: user.to_string(),
            status,
        });
        let mut encoded = Encoded::default();
        let players = self
            .seats
            .iter()
            .flatten()
            .filter_map(|h| h.client.as_ref());
        for c in players.chain(&self.watchers) {
            self.out.push((c.clone(), encoded.get(c.encoding, &msg)));
        }
    }

    /// Queues a reply to `client`'s command `id` (none for id 0).
    fn reply(&mut self, client: &Arc<Client>, id: u32, reply: Reply) {
        if id != 0 {
            let msg = ServerMsg::Reply { id, reply };
            let bytes = client.encoding.encode_server_bytes(&msg);
            self.out.push((client.clone(), bytes));
        }
    }

    /// Queues an error reply.
    fn error(&mut self, client: &Arc<Client>, id: u32, code: ErrorCode, message: &str) {
        let bytes = client
            .encoding
            .encode_server_bytes(&error_msg(id, code, message));
        self.out.push((client.clone(), bytes));
    }

    /// Queues an `unseat` push.
    fn unseat(&mut self, client: &Arc<Client>, code: ErrorCode, reason: &str) {
        let msg = unseat_msg(self.id, code, reason);
        let bytes = client.encoding.encode_server_bytes(&msg);
        self.out.push((client.clone(), bytes));
    }

    /// Sends what the last message produced, in order: every client's
    /// bytes go to its bounded outbox.
    fn flush(&mut self) {
        for (c, bytes) in self.out.drain(..) {
            c.send(bytes);
        }
    }

    /// Takes everyone off the table, telling them why.
    fn close(&mut self, code: ErrorCode, reason: &str) {
        for seat in 0..self.seats.len() as Seat {
            let client = self.seats[seat as usize]
                .as_ref()
                .and_then(|h| h.client.clone());
            if self.seats[seat as usize].is_some() {
                // A failed game is not called again (`call` skips it); its
                // seats just empty.
                self.vacate(seat);
            }
            if let Some(c) = client {
                self.unseat(&c, code, reason);
            }
        }
        for c in std::mem::take(&mut self.watchers) {
            self.unseat(&c, code, reason);
        }
        self.timers.clear();
        self.shared.lobby.remove(self.id);
        self.dirty = false;
    }
}

/// When game timer `key` set to fire `after` now is due: from the deadline
/// of its own firing if it is being set again from it (`firing`), so that
/// a periodic timer keeps its rate, unless that is already past (an
/// overloaded table skips rather than bursts to catch up); else from now.
fn timer_due(firing: Option<(u64, Instant)>, key: u64, after: Duration, now: Instant) -> Instant {
    match firing {
        Some((k, at)) if k == key && at + after > now => at + after,
        _ => now + after,
    }
}

/// One message encoded at most once per encoding.
#[derive(Default)]
struct Encoded([Option<Bytes>; 2]);

impl Encoded {
    fn get(&mut self, encoding: Encoding, msg: &ServerMsg) -> Bytes {
        let slot = match encoding {
            Encoding::Json => 0,
            Encoding::Binary => 1,
        };
        self.0[slot]
            .get_or_insert_with(|| encoding.encode_server_bytes(msg))
            .clone()
    }
}

fn game_push(table: u64, data: Bytes) -> ServerMsg {
    ServerMsg::Push(Push::Game { table, data })
}

pub(crate) fn reply(client: &Client, id: u32, reply: Reply) {
    if id != 0 {
        let msg = ServerMsg::Reply { id, reply };
        client.send(client.encoding.encode_server_bytes(&msg));
    }
}

pub(crate) fn error(client: &Client, id: u32, code: ErrorCode, message: &str) {
    client.send(
        client
            .encoding
            .encode_server_bytes(&error_msg(id, code, message)),
    );
}

fn error_msg(id: u32, code: ErrorCode, message: &str) -> ServerMsg {
    ServerMsg::Error {
        id,
        code: code.code(),
        message: message.to_string(),
    }
}

fn unseat_msg(table: u64, code: ErrorCode, reason: &str) -> ServerMsg {
    ServerMsg::Push(Push::Unseat {
        table,
        code: code.code(),
        reason: reason.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::timer_due;
    use std::time::Duration;
    use tokio::time::Instant;

    #[test]
    fn a_timer_set_again_from_its_own_firing_keeps_its_rate() {
        let ms = Duration::from_millis;
        let at = Instant::now();
        // Fired 3 ms late: the next is due 50 ms after the missed deadline.
        assert_eq!(timer_due(Some((7, at)), 7, ms(50), at + ms(3)), at + ms(50));
        // Another timer, or none firing: from now.
        assert_eq!(timer_due(Some((7, at)), 8, ms(50), at + ms(3)), at + ms(53));
        assert_eq!(timer_due(None, 7, ms(50), at + ms(3)), at + ms(53));
        // Later than a whole period: skip, no burst of catch-up firings.
        assert_eq!(
            timer_due(Some((7, at)), 7, ms(50), at + ms(80)),
            at + ms(130)
        );
    }
}
