//! Tables on demand across the cluster (protocol §5f): the engine's
//! [`Matchmaker`] over Redis (`herald_redis::play`), so that players asking
//! on any nodes share one count of seats.
//!
//! A reservation that makes a table registers it in the cluster's registry
//! in the same script; this node then makes sure the table runs before the
//! player's seat command goes to it: a node that runs tables claims it at
//! once (as its keeper would at its next scan), another waits until some
//! game node's keeper has (its lease appears), so the seat command is not
//! answered "between owners, retry". The table is then an ordinary table
//! of the cluster: leased, saved, taken over when its node dies, routed to
//! from every node.

use crate::cluster_tables::{spec_json, ClusterTables};
use herald_game::play::{Ask, AskKind, BoxFuture, Matchmaker, PlayError, Reserved, SETTLE};
use herald_game::{Engine, EngineError, TableConfig, TableSpec};
use herald_redis::play::{Mode, NewTable, PlayStore, Reservation};
use herald_redis::tables::TableStore;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// How long a `play` that made a table waits for a game node to run it.
const RUNNING_WAIT: Duration = Duration::from_secs(10);

/// Tries at a fresh private code before giving up (a code in use).
const CODE_TRIES: usize = 8;

/// The cluster's play counts, for this node.
pub(crate) struct ClusterPlay {
    store: PlayStore,
    tables: TableStore,
    known: Arc<ClusterTables>,
    engine: Weak<Engine>,
    runs_tables: bool,
}

impl ClusterPlay {
    pub(crate) fn new(
        store: PlayStore,
        tables: TableStore,
        known: Arc<ClusterTables>,
        engine: &Arc<Engine>,
        runs_tables: bool,
    ) -> ClusterPlay {
        ClusterPlay {
            store,
            tables,
            known,
            engine: Arc::downgrade(engine),
            runs_tables,
        }
    }

    async fn reserve_now(&self, ask: &Ask) -> Result<Reserved, PlayError> {
        let engine = self.engine.upgrade().ok_or(PlayError::Disabled)?;
        let config = engine.play_config().clone();
        let (mode, key, spec) = match &ask.kind {
            AskKind::Join { key, spec } => (Mode::Join, key.as_str(), Some(spec.clone())),
            AskKind::Private { key, spec } => (Mode::Private, key.as_str(), Some(spec.clone())),
            AskKind::Code(code) => (Mode::Code, code.as_str(), None),
        };
        let mut spec = spec;
        for _ in 0..CODE_TRIES {
            let stored = spec.as_ref().map(|s| spec_json(&config_of(s)));
            let code = spec
                .as_ref()
                .and_then(herald_game::play::code_of)
                .unwrap_or_default();
            let new = NewTable {
                spec: stored.as_deref().unwrap_or("{}").as_bytes(),
                seats: spec.as_ref().map_or(0, |s| s.seats),
                configured: self.known.configured(),
                code: &code,
            };
            let got = self
                .store
                .reserve(
                    mode,
                    key,
                    &ask.user,
                    new,
                    config.max_tables,
                    config.max_tables_per_user,
                )
                .await
                .map_err(|e| PlayError::Unavailable(e.to_string()))?;
            return match got {
                Reservation::Seat {
                    table,
                    created,
                    code,
                } => {
                    match &spec {
                        Some(spec) if created => {
                            self.known.note_created(table, spec.clone());
                            self.running(&engine, table, spec).await?;
                        }
                        // Made a moment ago by another `play`, perhaps on
                        // another node still claiming it.
                        _ if !engine.runs_here(table) => self.owned(table).await?,
                        _ => {}
                    }
                    Ok(Reserved {
                        table,
                        created,
                        code: (!code.is_empty()).then_some(code),
                    })
                }
                Reservation::UnknownCode => Err(PlayError::UnknownCode(key.to_string())),
                Reservation::Full => Err(PlayError::Full),
                Reservation::TablesCap(_) => Err(PlayError::ServerCap(config.max_tables)),
                Reservation::UserCap(n) => Err(PlayError::UserCap(n as u32)),
                Reservation::CodeTaken => {
                    if let Some(s) = spec.as_mut() {
                        herald_game::play::recode(s);
                    }
                    continue;
                }
            };
        }
        Err(PlayError::Unavailable(
            "no free private code found; retry".into(),
        ))
    }

    /// Returns once `table`, just made, runs on some node: claimed here if
    /// this node runs tables, else claimed by a game node's keeper.
    async fn running(
        &self,
        engine: &Engine,
        table: u64,
        spec: &TableSpec,
    ) -> Result<(), PlayError> {
        if self.runs_tables {
            match engine.claim_table(table, spec).await {
                Ok(_) | Err(EngineError::AlreadyHere(_) | EngineError::Held(..)) => return Ok(()),
                Err(e) => {
                    tracing::warn!(table, %e, "cannot run the table play made; waiting for another node")
                }
            }
        }
        self.owned(table).await
    }

    /// Returns once some node runs `table`: another node holds its
    /// lease, or this one does and has started it (its claim may be
    /// between the lease and the table's start).
    async fn owned(&self, table: u64) -> Result<(), PlayError> {
        let deadline = Instant::now() + RUNNING_WAIT;
        loop {
            let here = || self.engine.upgrade().is_some_and(|e| e.runs_here(table));
            match self.tables.owner(table).await {
                Ok(Some((node, _))) if node != self.tables.node() || here() => return Ok(()),
                Ok(_) | Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                _ => {
                    return Err(PlayError::Unavailable(format!(
                        "table {table} was made but no game node runs it yet"
                    )))
                }
            }
        }
    }
}

/// A spec in the registry's form.
fn config_of(spec: &TableSpec) -> TableConfig {
    TableConfig {
        game: spec.game.clone(),
        count: 1,
        seats: spec.seats,
        timing: spec.timing.clone(),
        path: spec.path.clone(),
        params: spec.params.clone(),
    }
}

impl Matchmaker for ClusterPlay {
    fn reserve<'a>(&'a self, ask: &'a Ask) -> BoxFuture<'a, Result<Reserved, PlayError>> {
        Box::pin(self.reserve_now(ask))
    }

    fn release(&self, table: u64, seated: u32) {
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.release(table, seated, SETTLE).await {
                // The count settles to the table's own at its next report.
                tracing::debug!(table, %e, "play seat not given back");
            }
        });
    }

    fn retire(&self, table: u64) -> BoxFuture<'static, bool> {
        let store = self.store.clone();
        Box::pin(async move { store.retire(table, SETTLE).await.unwrap_or(false) })
    }
}
