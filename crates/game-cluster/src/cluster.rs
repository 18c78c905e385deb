//! Starting the game cluster on a node, and the [`TableDirectory`] the
//! server's `/api/tables` reaches it through.

use crate::cluster_tables::ClusterTables;
use crate::directory::{Closing, DirectoryFuture, TableDirectory, Unreachable};
use crate::table_routes::Routes;
use herald_game::{Engine, EngineError, TableConfig};
use herald_redis::registry::Deletion;
use herald_redis::RedisBroker;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How a node takes part in the game cluster.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// A table's lease (`--table-lease`): how long a dead owner's tables
    /// wait before another node takes them over.
    pub lease: Duration,
    /// Whether this node runs tables (role `all` or `game`): its keeper
    /// claims free tables. Every node routes and serves the lobby.
    pub runs_tables: bool,
    /// A remote player's stand-in's outbox bound (the node's client queue).
    pub queue_bytes: usize,
}

/// Starts this node's part of the game cluster over `broker`, for
/// `engine`: the tables (`tables`, the configured `[[tables]]`, checked
/// against the engine's games first) and their keeper, the cluster-wide
/// lobby, and routes to the tables' owners (every node may serve players
/// of any table). Everything it starts ends with the engine.
pub fn start(
    broker: &Arc<RedisBroker>,
    engine: &Arc<Engine>,
    tables: &[TableConfig],
    options: Options,
) -> Result<Arc<dyn TableDirectory>, EngineError> {
    let known = ClusterTables::start(broker, engine, tables, options.lease, options.runs_tables)?;
    // A table whose game failed here is deleted for the whole cluster, as
    // `DELETE /api/tables/{id}` would: its lease would otherwise expire
    // and another node restore it, and fail it again if the fault comes
    // back.
    let deleting = Arc::downgrade(&known);
    engine.set_on_failed(Arc::new(move |table| {
        let Some(known) = deleting.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            match known.delete(table).await {
                Ok(_) => tracing::info!(table, "failed table deleted from the cluster"),
                Err(e) => tracing::warn!(table, "cannot delete the failed table: {e}"),
            }
        });
    }));
    engine.set_matchmaker(Arc::new(crate::cluster_play::ClusterPlay::new(
        broker.play_store(),
        broker.table_store(),
        known.clone(),
        engine,
        options.runs_tables,
    )));
    crate::cluster_lobby::start(broker, engine);
    let routes = Routes::start(
        broker,
        engine,
        known.clone(),
        options.lease,
        options.queue_bytes,
    );
    Ok(Arc::new(Cluster {
        known,
        routes,
        me: broker.node_id().to_string(),
    }))
}

/// The cluster's tables and the routes to their owners.
#[derive(Debug)]
struct Cluster {
    known: Arc<ClusterTables>,
    routes: Arc<Routes>,
    /// This node's id.
    me: String,
}

impl TableDirectory for Cluster {
    fn open<'a>(
        &'a self,
        spec: &'a TableConfig,
        count: u32,
    ) -> DirectoryFuture<'a, Result<Vec<u64>, Unreachable>> {
        Box::pin(async move {
            self.known
                .create(spec, count)
                .await
                .map_err(Unreachable::new)
        })
    }

    fn close(&self, table: u64) -> DirectoryFuture<'_, Result<Closing, Unreachable>> {
        Box::pin(async move {
            let holder = match self.known.delete(table).await {
                Err(e) => return Err(Unreachable::new(e)),
                Ok(Deletion::Unknown) => return Ok(Closing::Unknown),
                Ok(Deletion::Deleted { holder }) => holder,
            };
            let closed = match holder {
                None => None,
                Some((node, _)) if node == self.me => self
                    .known
                    .close_here(table)
                    .await
                    .map(|i| crate::json::info_json(&i)),
                Some((node, _)) => self
                    .routes
                    .close_remote(&node, table)
                    .await
                    .flatten()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok()),
            };
            Ok(closed.map_or(Closing::Deleted, Closing::Closed))
        })
    }
}
