//! Game tables in a Herald cluster: tables that fail over mid-hand
//! (decision 0009).
//!
//! On a single node a table is one task in that node's memory (decision
//! 0006): the node dies, the table and its chips go with it. In a cluster
//! (`--broker redis://…`) every table is owned by one node at a time under
//! a fenced lease in Redis, saved before anything is sent, and taken over
//! by another game node, restored from its last save, when its owner dies.
//! This crate is everything that needs besides the engine
//! (`herald-game`, which knows only the `Router` and durable-store traits)
//! and the Redis scripts (`herald-redis`):
//!
//! - `cluster_tables`: which tables the cluster has (configured, created
//!   over HTTP, deleted) and the keeper that claims the free ones;
//! - `table_routes`: a player on any node plays at a table run by another
//!   (the edge → owner route), and deletes reach the owner; `wire`, its
//!   messages' format;
//! - `cluster_lobby`: one lobby across the nodes;
//! - `cluster_play`: tables on demand (`play`), seats counted in Redis for
//!   every node;
//! - [`directory`]: [`TableDirectory`], the small interface through which
//!   the server's `/api/tables` opens and closes tables without knowing
//!   Redis, and [`json`], a table as that API (and an owner's answer to a
//!   remote close) shows it.
//!
//! It is its own crate so that the server's transports and HTTP layer do
//! not carry 2,500 lines of cluster logic written against the concrete
//! `RedisBroker`: the server's composition root calls [`start`] and hands
//! the [`TableDirectory`] it gets to `/api/tables`.

mod cluster;
mod cluster_lobby;
mod cluster_play;
mod cluster_tables;
pub mod directory;
pub mod json;
mod table_routes;
mod wire;

pub use cluster::{start, Options};
pub use directory::{Closing, TableDirectory, Unreachable};
