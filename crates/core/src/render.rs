//! Pushes rendered by another protocol (Pusher Channels), still once per
//! publication rather than once per subscriber.
//!
//! Herald's own clients get a publication encoded once per encoding (JSON,
//! binary) by the hub. A client of another protocol carries a [`Render`]
//! instead: the hub asks each distinct renderer (compared by pointer) once per
//! publication, and queues the same bytes to every subscriber that shares it.
//! A protocol shares one renderer among all its clients of one scope (for
//! Pusher: one per app, since an app's channels are its own namespace), so a
//! fan-out to 100 000 Pusher subscribers renders one frame. See
//! docs/decisions/0007-pusher-protocol.md.

use crate::broker::Publication;
use crate::outbox::Frame;
use herald_proto::ClientInfo;

/// A publication rendered for one protocol.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The frame every subscriber sharing the renderer receives.
    pub frame: Frame,
    /// A client that must not receive it (the sender of a Pusher client
    /// event, or the `socket_id` an HTTP API call excluded).
    pub except: Option<u64>,
}

/// Renders pushes for the clients of another protocol. Called by the hub
/// under a channel's subscriber lock: must be quick and must not call back
/// into the hub.
pub trait Render: Send + Sync + std::fmt::Debug {
    /// The frame of `publication`, or `None` when it cannot reach these
    /// clients (e.g. binary data for a text-only protocol).
    fn publication(&self, publication: &Publication) -> Option<Rendered>;

    /// A join (`join`) or leave of `who` on `channel`, for clients that asked
    /// for join/leave. `edge` is true when it is the user's first connection
    /// to join or last to leave (protocols that list users rather than
    /// connections announce only those).
    fn presence(&self, channel: &str, who: &ClientInfo, join: bool, edge: bool) -> Option<Frame>;
}
