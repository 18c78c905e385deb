//! [`TableDirectory`]: the cluster's tables as `/api/tables` sees them.
//!
//! On a single node `/api/tables` asks the engine alone. In a cluster a
//! table is not this node's to make or end: it is written into Redis's
//! registry, claimed by whichever game node finds it free, and closed by
//! whichever node owns it. The server reaches all that only through this
//! trait, so its handlers name no Redis type (a leaf: it imports nothing
//! from the rest of the crate).

use herald_game::TableConfig;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// A future a [`TableDirectory`] returns (boxed: the trait is used as
/// `dyn`).
pub type DirectoryFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The cluster's tables, for `POST` and `DELETE /api/tables`.
///
/// Contract:
/// - [`open`](TableDirectory::open) makes `count` tables of a spec the
///   caller has already checked against its engine
///   (`Engine::check_new_table`), and answers once they are written where
///   every node sees them: their ids, new ones, never reused. It does not
///   wait for a node to run them (a game node claims them within a scan;
///   with none in the cluster they wait, and commands for them get 114).
/// - [`close`](TableDirectory::close) deletes a table for good (it never
///   runs again, on any node, even after a restart), removes it from every
///   node's lobby and asks its owner to close it; it answers the owner's
///   last state when the owner did so in time.
/// - Both fail with [`Unreachable`] only when the shared store could not
///   be reached; an answer that came at once then means nothing changed,
///   one after a timeout may have changed it.
pub trait TableDirectory: Send + Sync + std::fmt::Debug {
    /// Creates `count` tables of `spec`; their ids.
    fn open<'a>(
        &'a self,
        spec: &'a TableConfig,
        count: u32,
    ) -> DirectoryFuture<'a, Result<Vec<u64>, Unreachable>>;

    /// Deletes `table` and has its owner close it (see [`Closing`]).
    fn close(&self, table: u64) -> DirectoryFuture<'_, Result<Closing, Unreachable>>;
}

/// What [`TableDirectory::close`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Closing {
    /// No such table (never made, or already deleted).
    Unknown,
    /// Deleted and closed by its owner (its players got `unseat` 115):
    /// its last state, as `GET /api/tables/{id}` shows a table
    /// ([`crate::json::info_json`]).
    Closed(Value),
    /// Deleted, but nobody ran it or its owner did not answer in time: it
    /// never runs again, its last save stays in the store, and an owner
    /// that is alive closes it at its keeper's next scan.
    Deleted,
}

/// The shared store (Redis) could not be reached; displays the store's
/// own error.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Unreachable(Box<dyn std::error::Error + Send + Sync>);

impl Unreachable {
    /// Wraps the store's error.
    pub fn new(err: impl std::error::Error + Send + Sync + 'static) -> Unreachable {
        Unreachable(Box::new(err))
    }
}
