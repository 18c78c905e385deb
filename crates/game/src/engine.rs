//! The engine: game factories, the table registry, the lobby, and the
//! [`Games`] face that sessions call.
//!
//! A session hands every game command to [`Engine`] (through the core's
//! [`Games`] trait). Lobby commands are answered here, at once; table
//! commands go to the table's mailbox without waiting (a full mailbox is
//! answered with 108, "too many requests"), and the table answers through
//! the client's outbox. The engine remembers which tables each client
//! touched, so that when its connection ends only those tables hear of it.

use crate::durable::{Claimed, Durability, Lease, Saver, StoreError};
use crate::lobby::Lobby;
use crate::play::{Ask, BoxFuture, Matchmaker, PlayConfig, PlayError, PlaySeat, Pools, Reserved};
pub use crate::spec::{TableConfig, TableSpec};
use crate::table::{error, user_of, DurableTable, Table, TableInfo, TableMsg};
use crate::{GameFactory, TableParams};
use bytes::Bytes;
use herald_core::games::Games;
use herald_core::metrics::{Counter, Histogram};
use herald_core::Client;
use herald_proto::{Command, ErrorCode, TableEntry};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Engine settings. Each field's default is in [`EngineConfig::default`].
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How long a player who lost their connection keeps the seat
    /// (default 60 s); the game's timers act for them meanwhile.
    pub grace: Duration,
    /// Lobby deltas are coalesced over this interval: at most one change
    /// per table per interval reaches subscribers (default 250 ms).
    pub lobby_interval: Duration,
    /// Messages a table's mailbox holds before commands to it are refused
    /// with 108 (default 1024).
    pub mailbox: usize,
    /// Tables on demand (`play`): caps and the empty-table timer.
    pub play: PlayConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            grace: Duration::from_secs(60),
            lobby_interval: Duration::from_millis(250),
            mailbox: 1024,
            play: PlayConfig::default(),
        }
    }
}

/// A gauge that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    /// Adds `n` (may be negative).
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The engine's counters for `/metrics`.
#[derive(Debug, Default)]
pub struct GameMetrics {
    /// Players seated (away players included).
    pub players: Gauge,
    /// `act` commands that reached a table.
    pub actions: Counter,
    /// Game messages queued to clients (one per recipient).
    pub events: Counter,
    /// Hands (rounds) finished, as reported by games.
    pub hands: Counter,
    /// Lobby deltas queued to clients (one per recipient).
    pub lobby_updates: Counter,
    /// From an `act` reaching its table to its reply being queued.
    pub action_latency: Histogram,
    /// Durable tables' saves sent to the store (one per table and group of
    /// messages).
    pub saves: Counter,
    /// Store calls those saves went in (group commit across tables).
    pub save_batches: Counter,
    /// Messages a durable table handled in a group after the first, i.e.
    /// saved by another message's save (group commit per table).
    pub grouped: Counter,
    /// Tables closed because their game failed (a panic, or a
    /// [`crate::Game::fault`]: a scripted game's exception, time-out,
    /// memory cap or malformed output).
    pub failed: Counter,
}

/// Why a table could not be created or found.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    /// No factory has this name.
    #[error("unknown game {0:?}")]
    UnknownGame(String),
    /// The game refused the parameters.
    #[error("bad table parameters: {0}")]
    BadParams(String),
    /// No table has this id.
    #[error("unknown table {0}")]
    UnknownTable(u64),
    /// The engine has no [`Durability`] (not in a cluster).
    #[error("tables are not durable on this node")]
    NotDurable,
    /// Another node holds the table's lease (`NODE:TOKEN`).
    #[error("table {0} is owned by {1}")]
    Held(u64, String),
    /// The table runs here already.
    #[error("table {0} already runs on this node")]
    AlreadyHere(u64),
    /// The store is unreachable.
    #[error("{0}")]
    Store(StoreError),
    /// The table's save could not be restored (corrupt, another game, a
    /// game that cannot restore); its chips are in the record for the log.
    #[error("table {0} cannot be restored: {1}")]
    Restore(u64, String),
}

/// Carries game commands for tables that run on another node of the
/// cluster to their owner (decision 0009; `table_routes` in herald-game-cluster).
///
/// Contract: both methods return at once; [`Router::forward`] answers the
/// command (reply or error with its id, exactly once) whatever happens, as
/// [`Games::command`] must.
pub trait Router: Send + Sync + 'static {
    /// `cmd` (`sit`, `watch`, `stand` or `act`) for `table`, which does not
    /// run here. False: `table` is not a table of the cluster (the engine
    /// answers 115).
    fn forward(&self, client: &Arc<Client>, id: u32, table: u64, cmd: Command) -> bool;
    /// A `play`'s seat at `table`, which does not run here, as
    /// [`Router::forward`] does a `sit` (the owner answers with the `play`
    /// reply; see [`Engine::play_here`]).
    fn forward_play(
        &self,
        client: &Arc<Client>,
        id: u32,
        table: u64,
        data: Bytes,
        play: PlaySeat,
    ) -> bool;
    /// The client's connection ended: the owners of the tables it was
    /// routed to are told.
    fn gone(&self, client: &Arc<Client>);
}

/// A table this node now owns (see [`Engine::claim_table`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    /// The lease, with its fencing token.
    pub lease: Lease,
    /// Restored from a save (a take-over), or created fresh.
    pub restored: bool,
    /// How long ago, on the store's clock, the restored save was made.
    pub save_age: Duration,
}

pub(crate) struct Shared {
    pub(crate) config: EngineConfig,
    pub(crate) lobby: Lobby,
    pub(crate) metrics: GameMetrics,
    factories: HashMap<&'static str, Arc<dyn GameFactory>>,
    tables: RwLock<HashMap<u64, mpsc::Sender<TableMsg>>>,
    /// Tables each client sent `sit` or `watch` to, by client id.
    visits: Mutex<HashMap<u64, Vec<u64>>>,
    next_id: AtomicU64,
    /// In a cluster: where tables save (decision 0009).
    durable: Option<Durability>,
    /// In a cluster: the node's save queue (group commit across tables).
    saver: Option<Saver>,
    /// The highest fencing token seen per table: the floor of the next
    /// claim, so tokens grow even if the store lost its counter.
    tokens: Mutex<HashMap<u64, u64>>,
    /// Leases of the durable tables running here.
    owned: Mutex<HashMap<u64, Lease>>,
    /// Tables being claimed here: their lease may already name this node
    /// while the table is not started yet, so a command routed here for
    /// one waits for the claim instead of being sent back (see
    /// [`Engine::when_claimed`]).
    claiming: Mutex<std::collections::HashSet<u64>>,
    /// Where commands for tables of other nodes go (a cluster's edge).
    router: std::sync::OnceLock<Arc<dyn Router>>,
    /// Told of a durable table whose game failed (see
    /// [`Engine::set_on_failed`]).
    on_failed: std::sync::OnceLock<Arc<dyn Fn(u64) + Send + Sync>>,
    /// Seat counts of the tables made by `play` on this node (no cluster).
    pools: Mutex<Pools>,
    /// In a cluster: where those counts are instead.
    matchmaker: std::sync::OnceLock<Arc<dyn Matchmaker>>,
}

impl Shared {
    /// A durable table's game failed and the table closed here: the
    /// cluster is told, so that no other node takes it over.
    pub(crate) fn durable_failed(&self, table: u64) {
        if let Some(f) = self.on_failed.get() {
            f(table);
        }
    }

    /// A counted seat of `table` (made by `play`) is free again, `seated`
    /// players remain (see [`Matchmaker::release`]).
    pub(crate) fn play_release(&self, table: u64, seated: u32) {
        match self.matchmaker.get() {
            Some(m) => m.release(table, seated),
            None => lock(&self.pools).release(table, seated, tokio::time::Instant::now()),
        }
    }

    /// Whether the empty `table` (made by `play`) may close now.
    pub(crate) fn play_retire(&self, table: u64) -> BoxFuture<'static, bool> {
        match self.matchmaker.get() {
            Some(m) => m.retire(table),
            None => {
                let ok = lock(&self.pools).retire(table, tokio::time::Instant::now());
                Box::pin(std::future::ready(ok))
            }
        }
    }
}

impl Shared {
    /// A table here holds `lease` (a new one after a re-claim).
    pub(crate) fn leased(&self, lease: Lease) {
        lock(&self.owned).insert(lease.table, lease);
        let mut tokens = lock(&self.tokens);
        let seen = tokens.entry(lease.table).or_default();
        *seen = (*seen).max(lease.token);
    }

    pub(crate) fn table_ended(&self, id: u64) {
        write(&self.tables).remove(&id);
        let durable = lock(&self.owned).remove(&id).is_some();
        // A durable table lost here goes on at another node: its entry
        // stays until the new owner publishes one.
        if !durable {
            self.lobby.remove(id);
            lock(&self.pools).forget(id);
        }
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    // Every critical section is a single map operation: nothing half done
    // survives a panic, so poisoning is ignored.
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

/// The game engine of one node.
pub struct Engine {
    shared: Arc<Shared>,
}

/// The longest a command routed here waits for this node's claim of its
/// table to finish (a claim is a Redis round trip and a restore).
const CLAIM_WAIT: Duration = Duration::from_secs(5);

/// Marks a table as being claimed here for as long as it lives.
struct Claiming<'a> {
    shared: &'a Shared,
    table: u64,
}

impl<'a> Claiming<'a> {
    fn new(shared: &'a Shared, table: u64) -> Claiming<'a> {
        lock(&shared.claiming).insert(table);
        Claiming { shared, table }
    }
}

impl Drop for Claiming<'_> {
    fn drop(&mut self) {
        lock(&self.shared.claiming).remove(&self.table);
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.shared.config)
            .field("tables", &read(&self.shared.tables).len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine that knows `factories`. Must be called inside a tokio
    /// runtime: it starts the lobby's flush task (which ends when the engine
    /// is dropped).
    pub fn new(config: EngineConfig, factories: Vec<Arc<dyn GameFactory>>) -> Arc<Engine> {
        Engine::build(config, factories, None)
    }

    /// An engine whose tables, claimed with [`Engine::claim_table`], are
    /// durable in `durability`'s store (a cluster node).
    pub fn with_durability(
        config: EngineConfig,
        factories: Vec<Arc<dyn GameFactory>>,
        durability: Durability,
    ) -> Arc<Engine> {
        Engine::build(config, factories, Some(durability))
    }

    fn build(
        config: EngineConfig,
        factories: Vec<Arc<dyn GameFactory>>,
        durable: Option<Durability>,
    ) -> Arc<Engine> {
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| {
            let weak = weak.clone();
            let saver = durable.as_ref().map(|d| {
                Saver::start(d.store.clone(), move |saves| {
                    if let Some(s) = weak.upgrade() {
                        s.metrics.saves.add(saves as u64);
                        s.metrics.save_batches.inc();
                    }
                })
            });
            Shared {
                durable,
                saver,
                tokens: Mutex::new(HashMap::new()),
                owned: Mutex::new(HashMap::new()),
                claiming: Mutex::new(std::collections::HashSet::new()),
                router: std::sync::OnceLock::new(),
                on_failed: std::sync::OnceLock::new(),
                pools: Mutex::new(Pools::default()),
                matchmaker: std::sync::OnceLock::new(),
                lobby: Lobby::default(),
                metrics: GameMetrics::default(),
                factories: factories.into_iter().map(|f| (f.name(), f)).collect(),
                tables: RwLock::new(HashMap::new()),
                visits: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
                config,
            }
        });
        tokio::spawn(flush_lobby(Arc::downgrade(&shared)));
        if shared.durable.is_some() {
            tokio::spawn(renew_leases(Arc::downgrade(&shared)));
        }
        Arc::new(Engine { shared })
    }

    /// Routes the commands for tables not running here through `router`
    /// (set once).
    pub fn set_router(&self, router: Arc<dyn Router>) {
        let _ = self.shared.router.set(router);
    }

    /// Sets what is called with a durable table's id when its game fails
    /// (a panic or a [`crate::Game::fault`]) and the table closes here
    /// (its players got `unseat` 100). Without it the table's lease would
    /// expire and another node would restore it from its last save, where
    /// a fault that comes back (a timer's) would fail it again, node after
    /// node: the game cluster deletes the table instead. Set once; later
    /// calls are ignored.
    pub fn set_on_failed(&self, f: Arc<dyn Fn(u64) + Send + Sync>) {
        let _ = self.shared.on_failed.set(f);
    }

    /// Counts the seats of tables made by `play` in `m` (a cluster's,
    /// shared by every node) instead of this node's memory. Set once,
    /// before the first `play`.
    pub fn set_matchmaker(&self, m: Arc<dyn Matchmaker>) {
        let _ = self.shared.matchmaker.set(m);
    }

    /// The `play` settings (caps, empty-table time).
    pub fn play_config(&self) -> &PlayConfig {
        &self.shared.config.play
    }

    /// Tables made by `play` counted on this node (no cluster).
    pub fn play_tables(&self) -> usize {
        lock(&self.shared.pools).len()
    }

    /// Handles a table command (`sit`, `watch`, `stand`, `act`) for a table
    /// that must run here (one routed from another node): never routed
    /// again. A table not here is answered with `missing` (the node that
    /// sent it retries elsewhere).
    pub fn command_here(&self, client: &Arc<Client>, id: u32, cmd: Command, missing: ErrorCode) {
        let Some(table) = table_of(&cmd) else {
            return error(client, id, ErrorCode::UnknownCommand, "not a table command");
        };
        if !self.runs_here(table) {
            let c = client.clone();
            return self.when_claimed(table, client, id, missing, move |e| {
                e.command_here(&c, id, cmd, missing);
            });
        }
        self.local(client, id, cmd);
    }

    /// A command routed here for `table`, which does not run here: if this
    /// node is claiming it (its lease may already name this node, which is
    /// why the command came), `then` runs once the claim is over (bounded
    /// by [`CLAIM_WAIT`]), and finds the table running or answers as
    /// below; otherwise the client is answered `missing` at once (the node
    /// that sent it retries elsewhere).
    fn when_claimed(
        &self,
        table: u64,
        client: &Arc<Client>,
        id: u32,
        missing: ErrorCode,
        then: impl FnOnce(&Engine) + Send + 'static,
    ) {
        if !lock(&self.shared.claiming).contains(&table) {
            return error(client, id, missing, "the table is not on this node: retry");
        }
        let shared = self.shared.clone();
        let client = client.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + CLAIM_WAIT;
            while lock(&shared.claiming).contains(&table) && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let engine = Engine { shared };
            if lock(&engine.shared.claiming).contains(&table) {
                return error(&client, id, missing, "the table is not on this node: retry");
            }
            then(&engine);
        });
    }

    /// A cluster lobby entry published with sequence number `seq` (see
    /// `TableStore::publish_entry`): it goes into this node's lobby unless
    /// the lobby already has a newer one. False if malformed or older.
    pub fn apply_lobby(&self, seq: u64, entry: &[u8]) -> bool {
        match crate::lobby::decode_entry(entry) {
            Some(e) => self.shared.lobby.put_seq(e, seq),
            None => false,
        }
    }

    /// The engine's counters.
    pub fn metrics(&self) -> &GameMetrics {
        &self.shared.metrics
    }

    /// Tables running.
    pub fn table_count(&self) -> usize {
        read(&self.shared.tables).len()
    }

    /// Every table's lobby entry, by id.
    pub fn tables(&self) -> Vec<TableEntry> {
        self.shared.lobby.entries()
    }

    /// Number of lobby subscriptions.
    pub fn lobby_subscriptions(&self) -> usize {
        self.shared.lobby.subscriptions()
    }

    /// Creates a table and starts its task; returns its id. Its lobby entry
    /// is visible at once.
    pub fn create_table(&self, spec: &TableSpec) -> Result<u64, EngineError> {
        let (factory, path) = self.vet(spec)?;
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let params = table_params(spec, id);
        let game = factory
            .create(&game_params(&params))
            .map_err(EngineError::BadParams)?;
        let table = Table::new(&params, path, game, factory.name(), self.shared.clone());
        self.shared.lobby.put(table.entry());
        let (tx, rx) = mpsc::channel(self.shared.config.mailbox);
        write(&self.shared.tables).insert(id, tx);
        tokio::spawn(table.run(rx));
        Ok(id)
    }

    /// Claims table `id` in the cluster and runs it here: restored from
    /// its last save if it has one (a take-over: the hand goes on where the
    /// previous owner's last acknowledged change left it), else created
    /// from `spec`. Fails with [`EngineError::Held`] while another node
    /// holds its lease.
    pub async fn claim_table(&self, id: u64, spec: &TableSpec) -> Result<Owned, EngineError> {
        let d = self.shared.durable.clone().ok_or(EngineError::NotDurable)?;
        if read(&self.shared.tables).contains_key(&id) {
            return Err(EngineError::AlreadyHere(id));
        }
        let _claiming = Claiming::new(&self.shared, id);
        let floor = lock(&self.shared.tokens).get(&id).copied().unwrap_or(0);
        let claimed = d
            .store
            .claim(id, floor, d.lease)
            .await
            .map_err(EngineError::Store)?;
        let claimed_at = tokio::time::Instant::now();
        let (lease, now_ms, saved) = match claimed {
            Claimed::Held(by) => {
                if let Some(tok) = by.rsplit_once(':').and_then(|(_, t)| t.parse::<u64>().ok()) {
                    let mut tokens = lock(&self.shared.tokens);
                    let seen = tokens.entry(id).or_default();
                    *seen = (*seen).max(tok);
                }
                return Err(EngineError::Held(id, by));
            }
            Claimed::Won {
                lease,
                now_ms,
                saved,
            } => (lease, now_ms, saved),
        };
        {
            let mut tokens = lock(&self.shared.tokens);
            let seen = tokens.entry(id).or_default();
            *seen = (*seen).max(lease.token);
        }
        let saver = self.shared.saver.clone().ok_or(EngineError::NotDurable)?;
        let durable = DurableTable {
            store: d.store.clone(),
            saver,
            lease,
            lease_time: d.lease,
            confirmed: claimed_at,
        };
        let (table, restored, save_age) = match saved {
            Some(saved) => {
                let (head, state) =
                    crate::durable::decode(&saved.data).map_err(|e| EngineError::Restore(id, e))?;
                if head.id != id {
                    return Err(EngineError::Restore(
                        id,
                        format!("the save is table {}'s", head.id),
                    ));
                }
                let factory = self
                    .shared
                    .factories
                    .get(head.game.as_str())
                    .ok_or_else(|| {
                        EngineError::Restore(id, format!("unknown game {:?}", head.game))
                    })?;
                let params = TableParams {
                    id,
                    seats: head.seats,
                    timing: head.timing.clone(),
                    params: head.params.clone(),
                };
                let game = factory
                    .restore(&game_params(&params), state)
                    .map_err(|e| EngineError::Restore(id, e))?;
                let age = Duration::from_millis(now_ms.saturating_sub(saved.at_ms));
                let table = Table::restore(&head, game, self.shared.clone(), age);
                (table, true, age)
            }
            // The table existed (this node saw a token for it) but nothing
            // is saved: Redis lost its data. Starting it afresh would reset
            // its chips silently; it stays closed instead.
            None if floor > 0 => {
                return Err(EngineError::Restore(
                    id,
                    format!(
                        "no saved state, though token {floor} held it: the store lost its data; \
                         not started afresh (its chips are unknown)"
                    ),
                ));
            }
            None => {
                let factory = self.factory(spec)?;
                let params = table_params(spec, id);
                let game = factory
                    .create(&game_params(&params))
                    .map_err(EngineError::BadParams)?;
                if game.save().is_none() {
                    return Err(EngineError::BadParams(format!(
                        "{} tables cannot be saved, so not run in a cluster",
                        spec.game
                    )));
                }
                let path = spec.path.clone().unwrap_or_else(|| {
                    format!("{}/{}-seat/{}", spec.game, spec.seats, spec.timing)
                });
                let table = Table::new(&params, path, game, factory.name(), self.shared.clone());
                (table, false, Duration::ZERO)
            }
        };
        // Its lobby entry is published once its first save holds (run).
        let table = table.durable(durable);
        let (tx, rx) = mpsc::channel(self.shared.config.mailbox);
        write(&self.shared.tables).insert(id, tx);
        lock(&self.shared.owned).insert(id, lease);
        self.shared
            .next_id
            .fetch_max(id.saturating_add(1), Ordering::Relaxed);
        tokio::spawn(table.run(rx));
        Ok(Owned {
            lease,
            restored,
            save_age,
        })
    }

    /// This node's id in the cluster, when its tables are durable.
    pub fn node_id(&self) -> Option<&str> {
        self.shared.durable.as_ref().map(|d| d.store.node())
    }

    /// The leases of the durable tables running here, by table.
    pub fn leases(&self) -> HashMap<u64, Lease> {
        lock(&self.shared.owned).clone()
    }

    /// `spec`'s game.
    fn factory(&self, spec: &TableSpec) -> Result<&Arc<dyn GameFactory>, EngineError> {
        self.shared
            .factories
            .get(spec.game.as_str())
            .ok_or_else(|| EngineError::UnknownGame(spec.game.clone()))
    }

    /// What every new table is checked for first (its game, seats and
    /// path): its factory and the path it gets in the lobby.
    fn vet(&self, spec: &TableSpec) -> Result<(&Arc<dyn GameFactory>, String), EngineError> {
        let factory = self.factory(spec)?;
        if spec.seats == 0 || spec.seats > 64 {
            return Err(EngineError::BadParams(format!(
                "seats must be 1 to 64, not {}",
                spec.seats
            )));
        }
        let path = match &spec.path {
            Some(p) if p.is_empty() || p.len() > 255 => {
                return Err(EngineError::BadParams("path must be 1 to 255 bytes".into()))
            }
            Some(p) => p.clone(),
            None => format!("{}/{}-seat/{}", spec.game, spec.seats, spec.timing),
        };
        Ok((factory, path))
    }

    /// Whether a table could be created from `spec` (the game exists and
    /// takes its parameters), without creating it.
    pub fn check_spec(&self, spec: &TableSpec) -> Result<(), EngineError> {
        self.factory(spec)?
            .create(&game_params(&table_params(spec, 0)))
            .map(|_| ())
            .map_err(EngineError::BadParams)
    }

    /// Whether table `id` runs on this node.
    pub fn runs_here(&self, id: u64) -> bool {
        read(&self.shared.tables).contains_key(&id)
    }

    /// Another node was seen holding `id`'s lease with `token` (a keeper
    /// that reads leases before claiming): this node's next claim of the
    /// table passes at least that token, as after a refused claim.
    pub fn saw_token(&self, id: u64, token: u64) {
        let mut tokens = lock(&self.shared.tokens);
        let seen = tokens.entry(id).or_default();
        *seen = (*seen).max(token);
    }

    /// A table's state: its entry, seats and public snapshot.
    pub async fn table(&self, id: u64) -> Result<TableInfo, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.deliver(id, TableMsg::Info { reply }).await?;
        rx.await.map_err(|_| EngineError::UnknownTable(id))
    }

    /// Closes a table: everyone on it is told (`unseat`, code 115), the
    /// game sees every player leave, the lobby drops it. Returns its last
    /// state.
    pub async fn close_table(&self, id: u64) -> Result<TableInfo, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.deliver(id, TableMsg::Close { reply }).await?;
        rx.await.map_err(|_| EngineError::UnknownTable(id))
    }

    /// Closes a table as [`Engine::close_table`] does and returns once its
    /// task has ended (its last save written, nothing more to come from
    /// it): a cluster deleting the table may then retire its lease
    /// (decision 0009) without fencing the table's last save.
    pub async fn close_table_and_wait(&self, id: u64) -> Result<TableInfo, EngineError> {
        let tx = read(&self.shared.tables)
            .get(&id)
            .cloned()
            .ok_or(EngineError::UnknownTable(id))?;
        let (reply, rx) = oneshot::channel();
        tx.send(TableMsg::Close { reply })
            .await
            .map_err(|_| EngineError::UnknownTable(id))?;
        let info = rx.await.map_err(|_| EngineError::UnknownTable(id))?;
        tx.closed().await;
        Ok(info)
    }

    /// Whether a table could be created from `spec` exactly as
    /// [`Engine::create_table`] checks it (game, seats, path, the game's
    /// parameters) and, on a durable engine, saved (a cluster runs only
    /// games that can be restored). Creates nothing.
    pub fn check_new_table(&self, spec: &TableSpec) -> Result<(), EngineError> {
        let (factory, _) = self.vet(spec)?;
        let game = factory
            .create(&game_params(&table_params(spec, 0)))
            .map_err(EngineError::BadParams)?;
        if self.shared.durable.is_some() && game.save().is_none() {
            return Err(EngineError::BadParams(format!(
                "{} tables cannot be saved, so not run in a cluster",
                spec.game
            )));
        }
        Ok(())
    }

    /// A cluster lobby removal (a deleted table, decision 0009) published
    /// with sequence number `seq`: the table leaves this node's lobby
    /// unless the lobby has a newer entry for it. False if older.
    pub fn remove_lobby(&self, seq: u64, table: u64) -> bool {
        self.shared.lobby.remove_seq(table, seq)
    }

    async fn deliver(&self, id: u64, msg: TableMsg) -> Result<(), EngineError> {
        let tx = read(&self.shared.tables)
            .get(&id)
            .cloned()
            .ok_or(EngineError::UnknownTable(id))?;
        tx.send(msg)
            .await
            .map_err(|_| EngineError::UnknownTable(id))
    }

    fn to_table(&self, client: &Arc<Client>, id: u32, table: u64, msg: TableMsg) {
        let tx = read(&self.shared.tables).get(&table).cloned();
        let Some(tx) = tx else {
            return error(client, id, ErrorCode::UnknownTable, "unknown table");
        };
        match tx.try_send(msg) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => error(
                client,
                id,
                ErrorCode::TooManyRequests,
                "the table is busy: command dropped",
            ),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                error(client, id, ErrorCode::UnknownTable, "unknown table")
            }
        }
    }

    /// A table command for a table of this node.
    fn local(&self, client: &Arc<Client>, id: u32, cmd: Command) {
        match cmd {
            Command::Sit { table, seat, data } => {
                self.visit(client.id, table);
                let msg = TableMsg::Sit {
                    client: client.clone(),
                    id,
                    seat,
                    data,
                    play: None,
                };
                self.to_table(client, id, table, msg);
            }
            Command::Watch { table } => {
                self.visit(client.id, table);
                let msg = TableMsg::Watch {
                    client: client.clone(),
                    id,
                };
                self.to_table(client, id, table, msg);
            }
            Command::Stand { table } => {
                let msg = TableMsg::Stand {
                    client: client.clone(),
                    id,
                };
                self.to_table(client, id, table, msg);
            }
            Command::Act { table, data } => {
                let msg = TableMsg::Act {
                    client: client.clone(),
                    id,
                    data,
                    at: tokio::time::Instant::now(),
                };
                self.to_table(client, id, table, msg);
            }
            _ => error(client, id, ErrorCode::UnknownCommand, "not a game command"),
        }
    }

    /// Checks what a `play` would make before anything is counted: its
    /// game exists, `play` is on, and the game takes the parameters (the
    /// same check `POST /api/tables` makes).
    fn vet_ask(&self, ask: Ask) -> Result<Ask, PlayError> {
        if !self.shared.config.play.enabled {
            return Err(PlayError::Disabled);
        }
        if let Some(spec) = ask.kind.spec() {
            self.check_new_table(spec).map_err(play_error)?;
        }
        Ok(ask)
    }

    /// Reserves a seat for `ask` (here, or in the cluster's matchmaker),
    /// then sends the player to it.
    fn play(&self, client: &Arc<Client>, id: u32, ask: Ask, data: Bytes) {
        if let Some(m) = self.shared.matchmaker.get().cloned() {
            let engine = Engine {
                shared: self.shared.clone(),
            };
            let client = client.clone();
            tokio::spawn(async move {
                match m.reserve(&ask).await {
                    Ok(r) => engine.seat_play(&client, id, r, data),
                    Err(e) => error(&client, id, e.code(), &e.to_string()),
                }
            });
            return;
        }
        match self.reserve_here(&ask) {
            Ok(r) => self.seat_play(client, id, r, data),
            Err(e) => error(client, id, e.code(), &e.to_string()),
        }
    }

    /// A seat for `ask` at a table of this node, counted in its pools; the
    /// table is made (under the same lock) if none has room.
    fn reserve_here(&self, ask: &Ask) -> Result<Reserved, PlayError> {
        let now = tokio::time::Instant::now();
        let mut pools = lock(&self.shared.pools);
        if let Some(r) = pools.pick(ask, now)? {
            return Ok(r);
        }
        pools.may_create(&ask.user, &self.shared.config.play)?;
        let Some(spec) = ask.kind.spec() else {
            return Err(PlayError::Full);
        };
        let mut spec = spec.clone();
        while let Some(code) = crate::play::code_of(&spec) {
            if !pools.code_taken(&code) {
                break;
            }
            crate::play::recode(&mut spec);
        }
        let table = self.create_table(&spec).map_err(play_error)?;
        pools.add(table, &spec, now);
        Ok(Reserved {
            table,
            created: true,
            code: crate::play::code_of(&spec),
        })
    }

    /// Sends a player with a reserved seat to its table (here, or through
    /// the router to the node that runs it). A seat command that cannot
    /// be delivered is answered with an error; its count settles (see
    /// [`crate::play::SETTLE`]).
    fn seat_play(&self, client: &Arc<Client>, id: u32, r: Reserved, data: Bytes) {
        let play = PlaySeat {
            code: r.code,
            created: r.created,
        };
        if self.runs_here(r.table) {
            self.visit(client.id, r.table);
            let msg = TableMsg::Sit {
                client: client.clone(),
                id,
                seat: None,
                data,
                play: Some(play),
            };
            return self.to_table(client, id, r.table, msg);
        }
        match self.shared.router.get() {
            Some(router) => {
                if !router.forward_play(client, id, r.table, data, play) {
                    error(client, id, ErrorCode::UnknownTable, "unknown table");
                }
            }
            None => error(client, id, ErrorCode::UnknownTable, "unknown table"),
        }
    }

    /// A `play`'s seat command routed from another node, for table `table`
    /// that must run here (see [`Engine::command_here`]).
    pub fn play_here(
        &self,
        client: &Arc<Client>,
        id: u32,
        table: u64,
        data: Bytes,
        play: PlaySeat,
        missing: ErrorCode,
    ) {
        if !self.runs_here(table) {
            let (c, d) = (client.clone(), data);
            return self.when_claimed(table, client, id, missing, move |e| {
                e.play_here(&c, id, table, d, play, missing);
            });
        }
        self.visit(client.id, table);
        let msg = TableMsg::Sit {
            client: client.clone(),
            id,
            seat: None,
            data,
            play: Some(play),
        };
        self.to_table(client, id, table, msg);
    }

    fn visit(&self, client: u64, table: u64) {
        let mut v = self.shared.visits.lock().unwrap_or_else(|p| p.into_inner());
        let tables = v.entry(client).or_default();
        if !tables.contains(&table) {
            tables.push(table);
        }
    }
}

impl Games for Engine {
    fn command(&self, client: &Arc<Client>, id: u32, cmd: Command) {
        match cmd {
            Command::Lobby { path } => match self.shared.lobby.subscribe(client, id, &path) {
                crate::lobby::Subscribed::Done => {}
                crate::lobby::Subscribed::Paging(pager) => {
                    let shared = self.shared.clone();
                    tokio::spawn(async move { crate::lobby::page(&shared.lobby, pager).await });
                }
                crate::lobby::Subscribed::Already => error(
                    client,
                    id,
                    ErrorCode::AlreadySubscribed,
                    "already subscribed to this lobby branch",
                ),
            },
            Command::LobbyOff { path } => {
                if self.shared.lobby.unsubscribe(client.id, &path) {
                    crate::table::reply(client, id, herald_proto::Reply::LobbyOff);
                } else {
                    error(
                        client,
                        id,
                        ErrorCode::NotSubscribed,
                        "not subscribed to this lobby branch",
                    );
                }
            }
            Command::Play {
                game,
                seats,
                attrs,
                private,
                code,
                data,
            } => {
                let user = user_of(client);
                let ask = crate::play::ask(&user, &game, seats, &attrs, private, code.as_deref())
                    .and_then(|ask| self.vet_ask(ask));
                match ask {
                    Ok(ask) => self.play(client, id, ask, data),
                    Err(e) => error(client, id, e.code(), &e.to_string()),
                }
            }
            cmd => {
                let Some(table) = table_of(&cmd) else {
                    return error(client, id, ErrorCode::UnknownCommand, "not a game command");
                };
                if !self.runs_here(table) {
                    if let Some(router) = self.shared.router.get() {
                        if !router.forward(client, id, table, cmd) {
                            error(client, id, ErrorCode::UnknownTable, "unknown table");
                        }
                        return;
                    }
                }
                self.local(client, id, cmd);
            }
        }
    }

    fn gone(&self, client: &Arc<Client>) {
        self.shared.lobby.forget(client.id);
        if let Some(router) = self.shared.router.get() {
            router.gone(client);
        }
        let tables = self
            .shared
            .visits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&client.id)
            .unwrap_or_default();
        for table in tables {
            let tx = read(&self.shared.tables).get(&table).cloned();
            let Some(tx) = tx else { continue };
            let msg = TableMsg::Gone { client: client.id };
            // A departure must not be lost to a full mailbox: the seat would
            // never become "away". Wait for room in a task instead.
            if let Err(mpsc::error::TrySendError::Full(msg)) = tx.try_send(msg) {
                tokio::spawn(async move {
                    let _ = tx.send(msg).await;
                });
            }
        }
    }
}

/// The table a table command is for.
fn table_of(cmd: &Command) -> Option<u64> {
    match cmd {
        Command::Sit { table, .. }
        | Command::Watch { table }
        | Command::Stand { table }
        | Command::Act { table, .. } => Some(*table),
        _ => None,
    }
}

/// Renews the leases of every durable table of this node, in one store
/// call, every third of the lease (decision 0009: per-table renewals were
/// most of the Redis load); a table whose lease was lost is told, and takes
/// it back or stops. A store that cannot be reached is tried again at the
/// next tick (a table's saves tell it if its lease was lost meanwhile).
async fn renew_leases(shared: Weak<Shared>) {
    let Some(lease) = shared
        .upgrade()
        .and_then(|s| s.durable.as_ref().map(|d| d.lease))
    else {
        return;
    };
    let mut tick = tokio::time::interval((lease / 3).max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(s) = shared.upgrade() else {
            return;
        };
        let Some(d) = s.durable.clone() else {
            return;
        };
        let leases: Vec<Lease> = lock(&s.owned).values().copied().collect();
        drop(s);
        if leases.is_empty() {
            continue;
        }
        let lost = match d.store.renew_all(leases, d.lease).await {
            Ok(lost) => lost,
            Err(err) => {
                tracing::debug!(%err, "lease renewal failed; trying again");
                continue;
            }
        };
        let Some(s) = shared.upgrade() else {
            return;
        };
        for l in lost {
            let Some(tx) = read(&s.tables).get(&l.table).cloned() else {
                continue;
            };
            let msg = TableMsg::LeaseLost { token: l.token };
            if let Err(mpsc::error::TrySendError::Full(msg)) = tx.try_send(msg) {
                tokio::spawn(async move {
                    let _ = tx.send(msg).await;
                });
            }
        }
    }
}

async fn flush_lobby(shared: Weak<Shared>) {
    let interval = match shared.upgrade() {
        Some(s) => s.config.lobby_interval,
        None => return,
    };
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let n = shared.lobby.flush();
        shared.metrics.lobby_updates.add(n as u64);
    }
}

/// Why a `play` could not make its table: the engine's refusal as the
/// player sees it (120 for an unknown game, else 103 with the reason).
fn play_error(e: EngineError) -> PlayError {
    match e {
        EngineError::UnknownGame(g) => PlayError::UnknownGame(g),
        e => PlayError::Bad(e.to_string()),
    }
}

/// What a game is given of a table's parameters: all but the engine's own
/// ([`crate::play::DEMAND_PARAM`]).
fn game_params(params: &TableParams) -> TableParams {
    let mut p = params.clone();
    p.params.remove(crate::play::DEMAND_PARAM);
    p
}

/// The parameters a table of `spec` is created with, as table `id`.
fn table_params(spec: &TableSpec, id: u64) -> TableParams {
    TableParams {
        id,
        seats: spec.seats,
        timing: spec.timing.clone(),
        params: spec.params.clone(),
    }
}

#[cfg(test)]
mod claim_tests {
    use super::*;
    use crate::testing::{client, drain};
    use herald_proto::{Encoding, ServerMsg};

    fn codes(c: &Client) -> Vec<u16> {
        drain(c)
            .into_iter()
            .filter_map(|m| match m {
                ServerMsg::Error { code, .. } => Some(code),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_command_routed_here_during_this_nodes_claim_waits_for_it() {
        let e = Engine::new(EngineConfig::default(), Vec::new());
        let missing = ErrorCode::BrokerUnavailable;
        // Not claimed here: answered at once, for the sender to retry.
        let c = client("ann", Encoding::Json);
        e.command_here(&c, 1, Command::Watch { table: 77 }, missing);
        assert_eq!(codes(&c), [missing as u16]);
        // Being claimed here: nothing until the claim is over.
        let claim = Claiming::new(&e.shared, 77);
        e.command_here(&c, 2, Command::Watch { table: 77 }, missing);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(codes(&c).is_empty(), "answered during the claim");
        // The claim ends without the table (another node won): answered then.
        drop(claim);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while got.is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
            got = codes(&c);
        }
        assert_eq!(got, [missing as u16]);
    }
}
