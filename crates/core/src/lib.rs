//! Herald's core: everything between "a frame arrived" and "these bytes must go to
//! these connections", with no sockets in sight.
//!
//! - [`outbox`]: the bounded, shared outbound queue of one connection, and the
//!   slow-consumer policy.
//! - [`client`]: one connected client as the hub sees it (id, encoding, outbox).
//! - [`hub`]: the sharded subscription index and the fan-out that encodes a
//!   publication once per encoding and shares the bytes.
//! - [`routing`]: the token trie behind wildcard subscriptions.
//! - [`shard`]: the sharded map the hub, broker and registry are built on.
//! - [`broker`]: the `Broker` trait (offsets, history, cross-node delivery) and
//!   [`memory`], the in-memory broker used by a single node.
//! - [`session`]: the transport-agnostic protocol state machine of one connection:
//!   every transport feeds it decoded messages and drains the client's outbox.
//! - [`presence`]: the `Presence` contract (who is subscribed, on this node
//!   or the whole cluster) and [`presence::LocalPresence`], answered by the hub.
//! - [`render`]: pushes rendered by another protocol (Pusher), once per
//!   publication like Herald's own encodings.
//! - [`node`]: ties hub, broker, presence and configuration together.
//! - [`auth`]: the authentication and permission contract the session obeys
//!   (implemented by the server), and token expiry tracking.
//! - [`games`]: the contract between sessions and a game engine (crate
//!   `herald-game`), which answers the game commands.
//! - [`metrics`]: sharded counters and the fan-out histogram behind `/metrics`.
//!
//! Transports live in `herald-server`; they only move frames.

pub mod auth;
pub mod broker;
pub mod channel;
pub mod client;
pub mod games;
pub mod hub;
pub mod memory;
pub mod metrics;
pub mod node;
pub mod outbox;
pub mod presence;
pub mod render;
pub mod routing;
pub mod session;
pub mod shard;

pub use auth::{Action, AuthError, Authenticator, Identity};
pub use broker::{Broker, BrokerError, Completion, Deliver, Publication};
pub use client::Client;
pub use hub::{ChannelEvent, Hub, Observer};
pub use memory::{MemoryBroker, Retention};
pub use node::{Node, NodeConfig, Spawner, Task};
pub use outbox::{Deflater, Frame, Outbox, PushOutcome, Spliced};
pub use presence::{LocalPresence, Presence};
pub use render::{Render, Rendered};
pub use routing::Sublist;
pub use session::Session;
