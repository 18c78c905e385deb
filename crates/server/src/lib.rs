//! Herald's server: transports, HTTP routing, configuration and `herald serve`.
//!
//! The crate is layered so that its file graph has no circle
//! (`scripts/module-cycles.py` checks it): leaves at the bottom, handlers
//! that take only their slice of state in the middle, the HTTP layer that
//! routes between them above, and the composition root ([`server`]) on top,
//! which alone builds the state and knows every piece.
//!
//! - [`server`]: the composition root; accept loop, connection cap,
//!   heartbeats, graceful shutdown.
//! - [`config`]: options, environment, TOML file, defaults.
//! - [`http`]: request heads, the lean HTTP/1.1 path, hyper's path
//!   ([`http::service`]).
//! - [`routes`]: the one route table both HTTP paths consult.
//! - [`transport`]: one folder per transport — WebSocket, raw TCP, SSE,
//!   long-polling — each with its own state.
//! - [`api`]: `/healthz`, `/readyz`, `/api/publish`, `/api/nodes`.
//! - [`tables`]: `/api/tables` (list, open and close game tables; in a
//!   cluster through `herald_game_cluster`'s `TableDirectory`).
//! - [`metrics`]: `/metrics` in the Prometheus text format.
//! - [`pusher`]: the Pusher Channels protocol (`/app/{key}`, `/apps/{id}/...`).
//! - [`demo`]: the demo page at `/` and its synthetic stream (`--demo-rate`).
//! - [`conn`]: the connection driver every socket transport shares.
//! - [`hibernate`]: idle plain-TCP connections parked off tokio, in one epoll set.
//! - [`respond`]: HTTP answers and bounded body reads (a leaf).
//! - [`auth`]: JWT verification, namespace permission rules, the API key.
//! - [`limits`]: connections per IP, the connect deadline, the Origin allowlist.
//! - [`tls`]: loading certificates for HTTPS/WSS.
//! - [`rewind`]: replaying bytes already read to hyper.

pub(crate) mod api;
pub mod auth;
pub mod bayeux;
pub mod config;
pub mod conn;
pub(crate) mod demo;
pub(crate) mod hibernate;
pub mod http;
pub(crate) mod limits;
pub(crate) mod metrics;
pub mod pusher;
pub mod reclaim;
pub(crate) mod respond;
pub(crate) mod rewind;
pub(crate) mod routes;
pub(crate) mod scripts;
pub mod server;
pub(crate) mod tables;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod tls;
pub mod transport;

pub use config::{ConfigError, ServeArgs, ServerConfig};
pub use server::{run, Listeners, ServerError};
