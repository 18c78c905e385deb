//! `pusher_internal:subscription_count`: the number of subscriptions of a
//! non-presence channel, sent to its Pusher subscribers when it changes, for
//! the apps that enable it (`subscription_count = true`; Pusher's dashboard
//! setting). pusher-js shows it as `channel.subscriptionCount` and the
//! `pusher:subscription_count` event.
//!
//! Why throttled, and how: every join would otherwise reach every
//! subscriber, N² frames to fill a channel of N. Pusher sends the event at
//! once on small channels and at most once per 5 s on large ones; Herald
//! does the same with one ticker per node ([`run`], every [`TICK`]):
//!
//! - the hub's count hook ([`herald_core::Hub::set_count_hook`]) only marks
//!   the channel dirty (a set insert, under the channel's lock): on one node
//!   for every local join and leave, in a cluster for every node's (the
//!   join/leave messages of the channel's topic, which every node holding a
//!   subscriber of the channel receives, its own included);
//! - each tick takes the dirty channels that are due: those whose last event
//!   counted at most [`SMALL`] subscriptions at the next tick (so at most 10
//!   events a second), the others once `subscription_count_interval_ms`
//!   (5 s) has passed since their last one. A channel not due stays dirty,
//!   so the count it finally sends is the newest;
//! - the count is the cluster's (`Presence::stats`: `HLEN` of the members
//!   hash in Redis; the hub's count on one node) and every count includes
//!   Herald subscribers, as `info=subscription_count` of the HTTP API does;
//! - one frame per channel per tick is queued for this node's subscribers of
//!   the app (`Hub::push_rendered`); each node sends to its own.
//!
//! A new subscriber gets the count too (its own join marks the channel), after
//! its `subscription_succeeded`, which is queued before it enters the hub.

use super::Apps;
use bytes::Bytes;
use herald_core::broker::Completion;
use herald_core::{Frame, Node, Render};
use herald_pusher::channel::{self, ChannelType, Kind};
use herald_pusher::message;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often dirty channels are looked at: the delay of a small channel's
/// event, and the most events a second it gets (10).
pub const TICK: Duration = Duration::from_millis(100);

/// Channels of at most this many subscriptions (at their last event) get
/// their event at the next tick; larger ones at most once per interval.
/// Pusher's own line between "small" and "large" (its presence limit).
pub const SMALL: u64 = 100;

/// Every this many ticks (10 s) the throttle forgets the channels that have
/// no subscriber here any more (their last leave may never mark them: in a
/// cluster the node stops following a channel's topic when its last local
/// subscriber leaves).
const PRUNE_TICKS: u32 = 100;

/// The default interval between two events of a large channel
/// (`subscription_count_interval_ms`), as Pusher's.
pub const INTERVAL_MS: u64 = 5000;

/// The channels whose count changed since their last event.
#[derive(Debug, Default)]
pub struct Dirty(Mutex<HashSet<String>>);

impl Dirty {
    /// Notes that Herald channel `channel` changed.
    pub fn mark(&self, channel: &str) {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !set.contains(channel) {
            set.insert(channel.to_string());
        }
    }

    fn take(&self) -> HashSet<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn put_back(&self, rest: impl IntoIterator<Item = String>) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(rest);
    }
}

/// Whether a channel whose last event (at `last`, counting `count`) is
/// followed by a change may get its next event at `now`.
pub fn due(last: Option<(Instant, u64)>, now: Instant, interval: Duration) -> bool {
    match last {
        None => true,
        Some((_, count)) if count <= SMALL => true,
        Some((at, _)) => now.saturating_duration_since(at) >= interval,
    }
}

/// Whether Pusher channel `name` gets subscription counts (not presence
/// channels, which have their members, nor user channels).
pub fn counted(name: &str) -> bool {
    !name.starts_with('#') && ChannelType::of(name).kind != Kind::Presence
}

/// The event for `count` subscriptions of Pusher channel `name`.
pub fn frame(name: &str, count: u64) -> Frame {
    let data = format!("{{\"subscription_count\":{count}}}");
    Frame::Text(Bytes::from(message::render_event(
        "pusher_internal:subscription_count",
        Some(name),
        &data,
        None,
    )))
}

/// The ticker: sends the due channels' counts every [`TICK`] until
/// `shutdown`.
pub async fn run(apps: Arc<Apps>, node: Arc<Node>, shutdown: CancellationToken) {
    let Some(dirty) = apps.counts.clone() else {
        return;
    };
    let interval = apps.config.subscription_count_interval;
    let mut last: HashMap<String, (Instant, u64)> = HashMap::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks = 0u32;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        ticks = ticks.wrapping_add(1);
        if ticks.is_multiple_of(PRUNE_TICKS) {
            last.retain(|c, _| node.hub.subscriber_count(c) > 0);
        }
        let now = Instant::now();
        let (ready, wait): (Vec<String>, Vec<String>) = dirty
            .take()
            .into_iter()
            .partition(|c| due(last.get(c).copied(), now, interval));
        dirty.put_back(wait);
        for herald in ready {
            let Some((ns, _)) = herald.split_once(':') else {
                continue;
            };
            let Some(app) = apps.by_namespace(ns) else {
                continue;
            };
            let Some(name) = channel::from_herald(ns, &herald) else {
                continue;
            };
            let count = match node.presence.stats(&herald) {
                Completion::Ready(r) => r,
                Completion::Pending(f) => f.await,
            };
            let count = match count {
                Ok((n, _)) => n,
                Err(e) => {
                    tracing::debug!(channel = %herald, error = %e, "subscription count unavailable");
                    continue;
                }
            };
            let render: Arc<dyn Render> = app.render.clone();
            if node
                .hub
                .push_rendered(&herald, &render, &frame(&name, count))
                == 0
            {
                // No subscriber of the app here: nothing to throttle.
                last.remove(&herald);
            } else {
                last.insert(herald, (Instant::now(), count));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_channels_are_due_at_once_large_ones_after_the_interval() {
        let t0 = Instant::now();
        let i = Duration::from_secs(5);
        assert!(due(None, t0, i), "never sent");
        assert!(due(Some((t0, SMALL)), t0, i), "small");
        assert!(!due(Some((t0, SMALL + 1)), t0, i), "large, just sent");
        assert!(!due(Some((t0, 5000)), t0 + Duration::from_millis(4999), i));
        assert!(due(Some((t0, 5000)), t0 + i, i), "large, interval over");
    }

    #[test]
    fn presence_and_user_channels_are_not_counted() {
        assert!(counted("news"));
        assert!(counted("private-x"));
        assert!(counted("private-encrypted-x"));
        assert!(counted("cache-x"));
        assert!(!counted("presence-room"));
        assert!(!counted("presence-cache-room"));
        assert!(!counted("#server-to-user-ann"));
    }

    #[test]
    fn the_frame_is_what_pusher_js_reads() {
        let f = frame("news", 3);
        let v: serde_json::Value = serde_json::from_slice(&f.payload()).expect("json");
        assert_eq!(v["event"], "pusher_internal:subscription_count");
        assert_eq!(v["channel"], "news");
        assert_eq!(v["data"], "{\"subscription_count\":3}");
    }
}
