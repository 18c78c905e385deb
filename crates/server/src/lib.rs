//! Herald's server: transports, HTTP routing, configuration and `herald serve`.
//!
//! Transports only move frames: each adapts its socket to the transport-neutral
//! [`herald_core::Session`] (or the shootout handler) and drains the client's
//! outbox. Nothing here knows about channels.
//!
//! - [`config`]: options, environment, TOML file, defaults.
//! - [`server`]: accept loop, connection cap, heartbeats, graceful shutdown.
//! - [`http`]: request head parsing; WebSocket upgrades here, the rest to hyper.
//! - [`api`]: plain HTTP endpoints over HTTP/1.1 and h2c (`/healthz`, `/api/publish`).
//! - [`conn`]: the connection driver every socket transport shares.
//! - [`hibernate`]: idle plain-TCP connections parked off tokio, in one epoll set.
//! - [`ws`]: WebSocket framing and the shootout protocol.
//! - [`tcp`]: the raw TCP transport (length-prefixed binary frames).
//! - [`poll`]: HTTP long-polling sessions.
//! - [`sse`]: Server-Sent Events streams.
//! - [`pusher`]: the Pusher Channels protocol (`/app/{key}`, `/apps/{id}/...`).
//! - [`tls`]: loading certificates for HTTPS/WSS.
//! - [`demo`]: the demo page at `/` and its synthetic stream (`--demo-rate`).
//! - [`auth`]: JWT verification, namespace permission rules, the API key.
//! - [`limits`]: connections per IP, the connect deadline, the Origin allowlist.
//! - [`metrics`]: `/metrics` in the Prometheus text format.

pub mod api;
pub mod auth;
pub mod cluster_lobby;
pub mod cluster_tables;
pub mod config;
pub mod conn;
pub mod demo;
pub mod h1;
pub mod hibernate;
pub mod http;
pub mod limits;
pub mod metrics;
pub mod poll;
pub mod pusher;
pub mod rewind;
pub mod server;
pub mod sse;
pub mod table_routes;
pub mod tables;
pub mod tcp;
pub mod testing;
pub mod tls;
pub mod ws;

pub use config::{ConfigError, ServeArgs, ServerConfig};
pub use server::{run, Listeners, ServerError};
