//! Which tables a cluster has, and who runs them (decision 0009).
//!
//! A cluster's tables are its configured `[[tables]]` (the same file on
//! every node, numbered 1..N in the order of the file) plus those created
//! over HTTP on any node, kept in Redis's registry
//! (`herald_redis::registry`: spec per id, ids from a cluster counter above
//! N), minus the deleted ones (a set in Redis, and a lease sentinel that no
//! claim can win). Every node reads the registry every scan, for its
//! routes (which ids exist) and, on a node that runs tables (`all`,
//! `game`), for its keeper, which claims every table nobody holds. At
//! start-up the first node claims them; when a node dies, its tables'
//! leases expire and the surviving nodes' keepers take them over, restored
//! from their last save, within the lease plus one scan. A table created
//! over HTTP is claimed at the next scan of any game node (at once on the
//! node that created it, if it runs tables); with no game node in the
//! cluster it waits, listed in the registry, and commands for it get 114,
//! as for a configured table nobody runs.
//!
//! Deleting (`DELETE /api/tables/{id}`, any node): the delete script marks
//! the table deleted and publishes its lobby removal; its owner, told over
//! its node topic ([`crate::table_routes::Routes::close_remote`]) or by its
//! own keeper's next scan (the message may be lost), closes it as a single
//! node does (players get `unseat` 115 "the table was closed") and turns
//! its lease into the sentinel ([`ClusterTables::close_here`]). A keeper
//! that claimed a table just before it was deleted (its scan was a little
//! old) closes it the same way at its next scan.
//!
//! A keeper's scan first reads the leases of the tables it does not run
//! (one `MGET` per 512) and claims only the free ones: claiming every table
//! blindly was a script call per table per node per scan, most of Redis's
//! load in seed 003's clustered runs (bench/RESULTS.md), whatever the play.
//!
//! Spreading tables over the game nodes: a free table is claimed at once
//! only by its *preferred* node, the live table-running node (a heartbeat
//! within two periods) that ranks first for it by rendezvous hashing of
//! node id and table id; another node claims it once it has stayed free
//! for [`GRACE_SCANS`] scans (the preferred node is slow, or gone but still
//! listed). And a keeper claims nothing for its first [`SETTLE`], so nodes
//! started together see each other before the first claims: without both,
//! the node that started first took every table and ran every table in
//! play while the other idled (seed 003's (b), bench/RESULTS.md). A node
//! that joins a running cluster takes only tables that become free; nothing
//! is moved to it.

use herald_game::{Engine, EngineError, TableConfig, TableInfo, TableSpec};
use herald_redis::registry::{Deletion, TableRegistry};
use herald_redis::tables::{TableStore, TableStoreError};
use herald_redis::{NodeInfo, RedisBroker};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// The cluster's tables as this node knows them.
pub(crate) struct ClusterTables {
    registry: TableRegistry,
    /// Leases, read before claiming.
    store: TableStore,
    engine: Weak<Engine>,
    /// The configured tables, ids 1..=N.
    configured: Vec<(u64, TableSpec)>,
    /// Tables created over HTTP (the registry at the last scan).
    created: RwLock<HashMap<u64, TableSpec>>,
    /// Deleted ids (at the last scan, plus those deleted here since).
    deleted: RwLock<HashSet<u64>>,
    /// Wakes the keeper before its next tick (a table created here).
    scan_now: Notify,
    /// The cluster's live nodes (heartbeats), for the preferred node.
    broker: Weak<RedisBroker>,
    /// This node's id.
    me: String,
}

/// Scans a free table waits for its preferred node before another claims it.
pub(crate) const GRACE_SCANS: u32 = 2;

/// Time after start before a keeper claims anything.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// A node heartbeating within this many periods counts as live.
const LIVE_BEATS: u64 = 2;

/// The nodes' heartbeat period (`RedisConfig::heartbeat`'s default; the
/// server does not change it).
const BEAT_MS: u64 = 1000;

/// Rendezvous weight of `table` on `node` (FNV-1a over both, then a
/// finaliser): the same on every node of the same build.
fn weight(node: &str, table: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes().chain(table.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// The live nodes that run tables: those of `nodes` whose last heartbeat
/// is recent and whose role is `all` or `game`, and `me`.
fn live_keepers(nodes: &[NodeInfo], me: &str, beat_ms: u64) -> Vec<String> {
    let mut live: Vec<String> = nodes
        .iter()
        .filter(|n| n.last_seen_ms <= LIVE_BEATS * beat_ms)
        .filter(|n| matches!(n.stats["role"].as_str(), Some("all" | "game")))
        .map(|n| n.id.clone())
        .collect();
    if !live.iter().any(|n| n == me) {
        live.push(me.to_string());
    }
    live
}

/// Whether `me` is `table`'s preferred node among `live`.
fn preferred(table: u64, me: &str, live: &[String]) -> bool {
    live.iter()
        .max_by_key(|n| (weight(n, table), n.as_str()))
        .is_some_and(|n| n == me)
}

impl std::fmt::Debug for ClusterTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTables")
            .field("configured", &self.configured.len())
            .finish_non_exhaustive()
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

impl ClusterTables {
    /// Checks the configured tables and starts reading the registry; when
    /// `keep` (the node runs tables), the keeper claims tables too. Both
    /// end with the engine.
    pub(crate) fn start(
        broker: &Arc<RedisBroker>,
        engine: &Arc<Engine>,
        tables: &[TableConfig],
        lease: Duration,
        keep: bool,
    ) -> Result<Arc<ClusterTables>, EngineError> {
        let mut configured = Vec::new();
        let mut id = 1u64;
        for t in tables {
            let spec = t.spec();
            engine.check_spec(&spec)?;
            for _ in 0..t.count {
                configured.push((id, spec.clone()));
                id += 1;
            }
        }
        let every = (lease / 3).clamp(Duration::from_millis(50), Duration::from_secs(1));
        tracing::info!(
            tables = configured.len(),
            lease_ms = lease.as_millis() as u64,
            keep,
            "cluster tables: claimed by whichever game node finds them free"
        );
        let ct = Arc::new(ClusterTables {
            registry: broker.table_registry(),
            store: broker.table_store(),
            engine: Arc::downgrade(engine),
            configured,
            created: RwLock::new(HashMap::new()),
            deleted: RwLock::new(HashSet::new()),
            scan_now: Notify::new(),
            broker: Arc::downgrade(broker),
            me: broker.node_id().to_string(),
        });
        tokio::spawn(scan(Arc::downgrade(&ct), every, keep));
        Ok(ct)
    }

    /// How many tables are configured (ids 1..=N).
    pub(crate) fn configured(&self) -> u64 {
        self.configured.len() as u64
    }

    /// Whether `table` is known deleted.
    pub(crate) fn is_deleted(&self, table: u64) -> bool {
        read(&self.deleted).contains(&table)
    }

    /// Whether `table` is a table of the cluster as of the last scan.
    pub(crate) fn knows(&self, table: u64) -> bool {
        !self.is_deleted(table)
            && ((1..=self.configured()).contains(&table)
                || read(&self.created).contains_key(&table))
    }

    /// Whether `table` is in Redis's registry now (a table created since
    /// the last scan).
    pub(crate) async fn is_listed(&self, table: u64) -> Result<bool, TableStoreError> {
        self.registry.is_listed(table).await
    }

    /// Creates `count` tables of `spec` (checked by the caller) in the
    /// registry; returns their ids. A game node claims them at its next
    /// scan (this node's keeper at once).
    pub(crate) async fn create(
        &self,
        spec: &TableConfig,
        count: u32,
    ) -> Result<Vec<u64>, TableStoreError> {
        let stored = spec_json(spec);
        let first = self
            .registry
            .create(self.configured(), count, stored.as_bytes())
            .await?;
        let ids: Vec<u64> = (first..first + u64::from(count)).collect();
        {
            let mut created = write(&self.created);
            let spec = spec.spec();
            for id in &ids {
                created.insert(*id, spec.clone());
            }
        }
        self.scan_now.notify_one();
        Ok(ids)
    }

    /// `table` was made in the registry by another path (a `play`): known
    /// here at once, and the keeper scans now.
    pub(crate) fn note_created(&self, table: u64, spec: TableSpec) {
        write(&self.created).insert(table, spec);
        self.scan_now.notify_one();
    }

    /// Deletes `table` in Redis (see `table_delete.lua`).
    pub(crate) async fn delete(&self, table: u64) -> Result<Deletion, TableStoreError> {
        let d = self.registry.delete(table, self.configured()).await?;
        if matches!(d, Deletion::Deleted { .. }) {
            write(&self.deleted).insert(table);
            write(&self.created).remove(&table);
        }
        Ok(d)
    }

    /// Owner side of a delete: closes `table` if it runs here (its players
    /// are told as on a single node), waits for its task to end, then
    /// retires its lease (the sentinel: never claimed again). Its last
    /// state, or `None` when it does not run here.
    pub(crate) async fn close_here(&self, table: u64) -> Option<TableInfo> {
        let engine = self.engine.upgrade()?;
        let token = engine.leases().get(&table)?.token;
        let info = engine.close_table_and_wait(table).await.ok()?;
        match self.registry.retire(table, token).await {
            Ok(true) => tracing::info!(table, token, "deleted table closed"),
            Ok(false) => tracing::warn!(table, "deleted table closed; its lease moved meanwhile"),
            Err(err) => tracing::warn!(table, %err, "deleted table closed; lease not retired"),
        }
        Some(info)
    }

    /// Reads the registry (created and deleted tables) if its version is
    /// not `seen`; returns the version read.
    async fn refresh(&self, seen: Option<u64>) -> Result<u64, TableStoreError> {
        let version = self.registry.version().await?;
        if seen == Some(version) {
            return Ok(version);
        }
        let (listed, gone) = self.registry.list().await?;
        let mut created = HashMap::with_capacity(listed.len());
        for (id, raw) in listed {
            match serde_json::from_slice::<TableConfig>(&raw) {
                Ok(c) => {
                    created.insert(id, c.spec());
                }
                Err(err) => {
                    tracing::error!(table = id, %err, "unreadable table spec in the registry")
                }
            }
        }
        *write(&self.created) = created;
        write(&self.deleted).extend(gone);
        Ok(version)
    }
}

/// A spec as the registry keeps it: the `POST` body's shape, one table.
/// A spec as the registry keeps it (JSON, as `POST /api/tables` takes it).
pub(crate) fn spec_json(spec: &TableConfig) -> String {
    let mut v = serde_json::Map::new();
    for (k, x) in &spec.params {
        v.insert(k.clone(), x.clone());
    }
    v.insert("game".into(), spec.game.clone().into());
    v.insert("seats".into(), spec.seats.into());
    v.insert("timing".into(), spec.timing.clone().into());
    if let Some(p) = &spec.path {
        v.insert("path".into(), p.clone().into());
    }
    serde_json::Value::Object(v).to_string()
}

async fn scan(ct: Weak<ClusterTables>, every: Duration, keep: bool) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Tables whose save cannot be restored: reported once, left closed.
    let mut broken = HashSet::new();
    let mut seen = None;
    // Consecutive scans each free table not preferred here was seen free.
    let mut waited: HashMap<u64, u32> = HashMap::new();
    let started = tokio::time::Instant::now();
    loop {
        let Some(notify) = ct.upgrade() else {
            return;
        };
        let woken = async move { notify.scan_now.notified().await };
        tokio::select! {
            _ = tick.tick() => {}
            _ = woken => {}
        }
        let Some(ct) = ct.upgrade() else {
            return;
        };
        let Some(e) = ct.engine.upgrade() else {
            return;
        };
        // Read in full again when it changed (a version read before the
        // list: a change between the two is read again next time).
        match ct.refresh(seen).await {
            Ok(v) => seen = Some(v),
            Err(err) => {
                tracing::debug!(%err, "cannot read the table registry now");
                continue;
            }
        }
        if !keep {
            continue;
        }
        // Deleted tables still running here (the owner's message lost, or
        // claimed just before the delete): closed now.
        let stale: Vec<u64> = e
            .leases()
            .keys()
            .copied()
            .filter(|t| ct.is_deleted(*t))
            .collect();
        for t in stale {
            ct.close_here(t).await;
        }
        if started.elapsed() < SETTLE {
            continue; // let nodes started together see each other first
        }
        // The tables this node might claim (cloned: no lock across the
        // claims' awaits).
        let wanted = |id: &u64| !ct.is_deleted(*id) && !broken.contains(id) && !e.runs_here(*id);
        let candidates: Vec<(u64, TableSpec)> = ct
            .configured
            .iter()
            .filter(|(id, _)| wanted(id))
            .cloned()
            .chain(
                read(&ct.created)
                    .iter()
                    .filter(|(id, _)| wanted(id))
                    .map(|(id, s)| (*id, s.clone())),
            )
            .collect();
        if candidates.is_empty() {
            continue;
        }
        let ids: Vec<u64> = candidates.iter().map(|(id, _)| *id).collect();
        let leases = match ct.store.owners(&ids).await {
            Ok(l) => l,
            Err(err) => {
                tracing::debug!(%err, "cannot read the tables' leases now");
                continue;
            }
        };
        let live = match ct.broker.upgrade() {
            Some(b) => live_keepers(&b.nodes(), &ct.me, BEAT_MS),
            None => return,
        };
        let mut free_now = HashMap::new();
        for ((id, spec), lease) in candidates.iter().zip(leases) {
            if let Some((_, token)) = lease {
                e.saw_token(*id, token);
                continue; // held (or a deleted table's marker)
            }
            if !preferred(*id, &ct.me, &live) {
                let n = waited.get(id).copied().unwrap_or(0) + 1;
                free_now.insert(*id, n);
                if n <= GRACE_SCANS {
                    continue; // its preferred node claims it first
                }
            }
            match e.claim_table(*id, spec).await {
                Ok(o) => tracing::info!(
                    table = id,
                    token = o.lease.token,
                    restored = o.restored,
                    save_age_ms = o.save_age.as_millis() as u64,
                    "table claimed"
                ),
                Err(EngineError::Held(..) | EngineError::AlreadyHere(_)) => {}
                Err(EngineError::Store(err)) => {
                    tracing::debug!(%err, "cannot claim tables now");
                    break;
                }
                Err(err) => {
                    tracing::error!(table = id, %err, "table left closed");
                    broken.insert(*id);
                }
            }
        }
        waited = free_now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, role: &str, last_seen_ms: u64) -> NodeInfo {
        NodeInfo {
            id: id.into(),
            last_seen_ms,
            stats: serde_json::json!({ "role": role }),
        }
    }

    #[test]
    fn tables_spread_evenly_and_each_has_one_preferred_node() {
        let live: Vec<String> = ["a1b2", "c3d4", "e5f6"].map(String::from).to_vec();
        let mut per = HashMap::new();
        for t in 1..=3000u64 {
            let winners: Vec<&String> = live.iter().filter(|n| preferred(t, n, &live)).collect();
            assert_eq!(winners.len(), 1, "table {t}");
            *per.entry(winners[0].clone()).or_insert(0) += 1;
        }
        for (n, c) in &per {
            assert!((800..=1200).contains(c), "{n} preferred for {c} of 3000");
        }
    }

    #[test]
    fn a_node_leaving_moves_only_its_own_tables() {
        let three: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let two: Vec<String> = ["a", "b"].map(String::from).to_vec();
        for t in 1..=1000u64 {
            for n in ["a", "b"] {
                if preferred(t, n, &three) {
                    assert!(preferred(t, n, &two), "table {t} left {n}");
                }
            }
        }
    }

    #[test]
    fn only_recent_table_running_nodes_count_and_this_one_always() {
        let nodes = [
            node("g1", "game", 500),
            node("e1", "edge", 100),
            node("a1", "all", 100),
            node("dead", "game", 5_000),
        ];
        let mut live = live_keepers(&nodes, "me", 1000);
        live.sort();
        assert_eq!(live, ["a1", "g1", "me"]);
        assert_eq!(live_keepers(&nodes, "g1", 1000).len(), 2);
    }
}
