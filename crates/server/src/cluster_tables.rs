//! The `[[tables]]` of a cluster (decision 0009): every node given the same
//! configuration knows the same tables, numbered 1.. in the order of the
//! file, and a keeper task on each node claims every one that nobody holds.
//! At start-up the first node claims them; when a node dies, its tables'
//! leases expire and the surviving nodes' keepers take them over, restored
//! from their last save, within the lease plus one scan.
//!
//! A scan first reads the leases of the tables it does not run (one `MGET`
//! per 512) and claims only the free ones: claiming every table blindly
//! was a script call per table per node per second, most of Redis's load
//! in seed 003's clustered runs (bench/RESULTS.md), whatever the play.

use crate::config::TableConfig;
use herald_game::{Engine, EngineError, TableSpec};
use herald_redis::tables::TableStore;
use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Checks the tables and starts the keeper (it ends with the engine).
pub fn start(
    engine: &Arc<Engine>,
    store: TableStore,
    tables: &[TableConfig],
    lease: Duration,
) -> Result<(), EngineError> {
    let mut specs = Vec::new();
    let mut id = 1u64;
    for t in tables {
        let spec = t.spec();
        engine.check_spec(&spec)?;
        for _ in 0..t.count {
            specs.push((id, spec.clone()));
            id += 1;
        }
    }
    let every = (lease / 3).clamp(Duration::from_millis(50), Duration::from_secs(1));
    tracing::info!(
        tables = specs.len(),
        lease_ms = lease.as_millis() as u64,
        "cluster tables: claimed by whichever node finds them free"
    );
    tokio::spawn(keep(Arc::downgrade(engine), store, specs, every));
    Ok(())
}

async fn keep(
    engine: Weak<Engine>,
    store: TableStore,
    specs: Vec<(u64, TableSpec)>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Tables whose save cannot be restored: reported once, left closed.
    let mut broken = HashSet::new();
    loop {
        tick.tick().await;
        let Some(e) = engine.upgrade() else {
            return;
        };
        let candidates: Vec<&(u64, TableSpec)> = specs
            .iter()
            .filter(|(id, _)| !broken.contains(id) && !e.runs_here(*id))
            .collect();
        if candidates.is_empty() {
            continue;
        }
        let ids: Vec<u64> = candidates.iter().map(|(id, _)| *id).collect();
        let leases = match store.owners(&ids).await {
            Ok(l) => l,
            Err(err) => {
                tracing::debug!(%err, "cannot read the tables' leases now");
                continue;
            }
        };
        for ((id, spec), lease) in candidates.into_iter().zip(leases) {
            if let Some((_, token)) = lease {
                e.saw_token(*id, token);
                continue; // held: its owner renews it
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
    }
}
