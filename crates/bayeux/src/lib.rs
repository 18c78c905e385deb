//! The Bayeux 1.0 protocol (what CometD clients speak) as Herald serves it,
//! without I/O.
//!
//! Herald serves CometD's clients (the JavaScript `cometd` package in
//! browsers and Node, and anything else that speaks Bayeux over long-polling
//! or WebSocket) on the same hub as its own protocol and Pusher's, so a
//! CometD application can move to Herald without changing its client code.
//! Everything that can be decided from bytes alone lives here, apart from
//! sockets, sessions and the hub, so it is tested (and fuzzed) on its own and
//! shared by both transports (`crates/server/src/bayeux/`):
//!
//! - [`message`]: decoding a batch (a JSON array of messages) into typed
//!   messages, each refused one with the reason it gets back;
//! - [`channel`]: channel kinds (meta, service, broadcast), name rules, and
//!   the one mapping between Bayeux channels (and wildcards) and Herald
//!   channels (and patterns) (docs/decisions/0016-bayeux.md);
//! - [`reply`]: rendering replies, advice and deliveries;
//! - [`resume`]: the `BAYEUX_ACKED` cookie, where a browser's `ack`
//!   sessions are, so that one lost with its node resumes on another;
//! - [`error`]: the `code:args:message` error strings Bayeux replies carry;
//! - [`time`]: the `timestamp` extension's date format.

pub mod channel;
pub mod error;
pub mod fuzzing;
pub mod message;
pub mod reply;
pub mod resume;
pub mod time;

pub use channel::{Channel, Meta};
pub use error::BayeuxError;
pub use message::{decode_batch, BatchError, Invalid, Message};
pub use reply::{Advice, Reconnect, Reply};

/// The protocol version Herald answers the handshake with.
pub const VERSION: &str = "1.0";

/// The connection types Herald offers in the handshake reply.
pub const CONNECTION_TYPES: [&str; 2] = ["websocket", "long-polling"];
