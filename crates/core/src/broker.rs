//! The `Broker`: where publications get their position, are retained, and reach
//! every node.
//!
//! # Contract
//! - **Ordering.** For one channel, a broker assigns offsets 1, 2, 3, ... in the
//!   order it accepts publications, and delivers them to each node's [`Deliver`]
//!   handler in that same order, one at a time. Different channels are
//!   independent.
//! - **Atomicity.** Assigning the offset, appending to history and handing the
//!   publication to delivery happen as one step per channel: no reader of
//!   history can see offset N+1 while N is missing, and a publication is never
//!   delivered live before it is in history.
//! - **Delivery.** Live delivery is at most once (a node that is down, or a
//!   subscriber that is too slow, misses it); history within retention is the
//!   way to get it back.
//! - **Epochs.** A channel's position is (epoch, offset). The epoch changes
//!   whenever history may have been lost (a restart of the in-memory broker,
//!   or its dropping an idle channel's state), and never while a subscriber
//!   is attached to the channel, so a live subscriber sees one unbroken offset
//!   sequence. A position from another epoch is never recoverable; a channel
//!   with no stream at all reports epoch `""`, offset 0.
//! - **Retention.** A broker retains a bounded suffix of each channel's
//!   publications (by count and/or age). [`History::complete`] is true exactly
//!   when every publication after the asked position, up to the top, is in the
//!   answer (before `limit` is applied); it is false when the epoch differs, the
//!   position is ahead of the top, or publications after it have left
//!   retention — the caller must then resynchronise.
//! - **Attachment.** Every successful [`Broker::subscribe`] is matched by one
//!   [`Broker::unsubscribe`] when the subscriber leaves: a broker may keep a
//!   channel's state (and so its epoch) only while someone is attached or
//!   something is retained.
//! - **Order of calls.** `publish` fixes the publication's place in the channel's
//!   order when it is *called*, not when the returned completion is awaited, so a
//!   connection that publishes twice gets its two publications in order even when
//!   both completions are pending.
//!
//! Methods return a [`Completion`]: the in-memory broker answers at once, a
//! networked broker (Redis) returns a future, so callers keep a fast path with no
//! task spawn and no allocation for the common case.

use bytes::Bytes;
use herald_proto::{HistoryItem, Position};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A publication on its way to subscribers.
#[derive(Debug, Clone)]
pub struct Publication {
    /// The concrete channel.
    pub channel: Arc<str>,
    /// Its offset in the channel.
    pub offset: u64,
    /// Its payload.
    pub data: Bytes,
    /// `data` is known to be JSON text that a JSON push embeds verbatim (a
    /// JSON publisher sent it as `data`: see
    /// `herald_proto::json::decode_request_hinted`), so the hub skips the
    /// check that would otherwise decide between `data` and `b64`. `false`:
    /// not known, checked when encoded. Only a hint: the pushed text is the
    /// same either way (decision 0011).
    pub json: bool,
}

/// Receives publications from the broker, in per-channel order (the hub).
pub trait Deliver: Send + Sync {
    /// Fans one publication out to this node's subscribers. Must not block on
    /// I/O: it only queues bytes.
    fn deliver(&self, publication: &Publication);

    /// Fans out several publications of one channel, in offset order, with
    /// the same result for each subscriber as [`Deliver::deliver`] on each in
    /// turn. An implementation may hand each subscriber the lot at once
    /// (the hub does: one outbox lock and one wake per subscriber).
    fn deliver_batch(&self, publications: &[Publication]) {
        for p in publications {
            self.deliver(p);
        }
    }
}

/// A result that is either here now or on its way.
pub enum Completion<T> {
    /// Available immediately.
    Ready(T),
    /// Will be available when the future completes.
    Pending(Pin<Box<dyn Future<Output = T> + Send>>),
}

impl<T> std::fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Completion::Ready(_) => f.write_str("Completion::Ready"),
            Completion::Pending(_) => f.write_str("Completion::Pending"),
        }
    }
}

/// Why a broker operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BrokerError {
    /// The broker's backend is unreachable or failed; retry later.
    #[error("broker unavailable: {0}")]
    Unavailable(String),
}

/// The callback of [`Broker::subscribe`].
pub type Attach = Box<dyn FnOnce(Result<History, BrokerError>) + Send>;

/// The callback of [`Broker::subscribe_pattern`].
pub type PatternReady = Box<dyn FnOnce(Result<(), BrokerError>) + Send>;

/// A slice of a channel's history.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The channel's current position (epoch and top offset).
    pub top: Position,
    /// Retained publications after the requested position, oldest first (all
    /// retained ones when there was no position or its epoch differs).
    pub publications: Vec<HistoryItem>,
    /// False when publications after the requested position have already left
    /// retention (or the epoch differs): the caller must resynchronise.
    pub complete: bool,
}

/// Offsets, history and cross-node delivery for channels. See the module docs
/// for the contract every implementation keeps.
pub trait Broker: Send + Sync + 'static {
    /// Publishes `data` to `channel`, returning its position.
    fn publish(&self, channel: &str, data: Bytes) -> Completion<Result<Position, BrokerError>>;

    /// [`Broker::publish`] for data known to be JSON text (see
    /// [`Publication::json`]). A broker that cannot carry the hint to its
    /// deliveries publishes as usual; the pushes are the same text.
    fn publish_json(
        &self,
        channel: &str,
        data: Bytes,
    ) -> Completion<Result<Position, BrokerError>> {
        self.publish(channel, data)
    }

    /// Attaches a subscriber to `channel` atomically with respect to its
    /// publications: the broker computes the channel's position and, with
    /// `since`, the publications after it, then calls `attach` with them at a
    /// moment when no publication of the channel is in flight. `attach`
    /// registers the subscriber in the hub and queues the subscribe reply, so the
    /// reply precedes every live publication, and live delivery continues exactly
    /// after the history it was given: no gap, no duplicate. On failure `attach`
    /// receives the error instead.
    fn subscribe(&self, channel: &str, since: Option<&Position>, attach: Attach);

    /// Detaches one subscriber attached by [`Broker::subscribe`]; call it once
    /// per successful subscribe, after removing the subscriber from the hub.
    /// (On a channel with nobody attached it does nothing.)
    fn unsubscribe(&self, channel: &str);

    /// The channel's current position (`("", 0)` for a channel with no stream).
    fn position(&self, channel: &str) -> Completion<Result<Position, BrokerError>>;

    /// Publications after `since` (or all retained ones), at most `limit`
    /// (0 = all retained).
    fn history(
        &self,
        channel: &str,
        since: Option<&Position>,
        limit: usize,
    ) -> Completion<Result<History, BrokerError>>;

    /// A wildcard subscription to `pattern` is being added on this node (the
    /// hub will match publications against it). A broker that delivers only
    /// the channels a node asked for must also deliver those the pattern
    /// matches, and calls `ready` with `Ok` once it does: every publication
    /// made anywhere after that reaches this node's [`Deliver`] handler, so
    /// the caller registers the subscriber in the hub and replies then (a
    /// reply sent earlier would let a publication made on another node just
    /// after it go missing). A broker that delivers everything (the
    /// in-memory broker) calls `ready` at once. Live only: patterns have no
    /// positions. On `Err` the broker has undone its side already (no
    /// [`Broker::unsubscribe_pattern`] for it); after `Ok`, call
    /// [`Broker::unsubscribe_pattern`] once when the subscriber leaves.
    fn subscribe_pattern(&self, _pattern: &str, ready: PatternReady) {
        ready(Ok(()));
    }

    /// Undoes one [`Broker::subscribe_pattern`] that was ready.
    fn unsubscribe_pattern(&self, _pattern: &str) {}

    /// Whether the broker can serve right now (`/readyz`, `herald_broker_up`).
    /// The in-memory broker always can; a networked one reports its link.
    fn healthy(&self) -> bool {
        true
    }

    /// Housekeeping, called by the server about every [`HOUSEKEEPING`]
    /// whatever the traffic: bounded work (the in-memory broker sweeps one
    /// shard of its channel map), never blocking. Without it, state that
    /// only time makes useless (expired history, idle channels) would stay
    /// until traffic touched it again. Default: nothing.
    fn housekeep(&self) {}

    /// Channels whose state this node's broker keeps (positions, history,
    /// tombstones; `herald_broker_channels`), when it keeps them in this
    /// process; `None` for a broker whose channels live elsewhere (Redis).
    fn channel_states(&self) -> Option<usize> {
        None
    }
}

/// How often the server calls [`Broker::housekeep`].
pub const HOUSEKEEPING: std::time::Duration = std::time::Duration::from_millis(250);
