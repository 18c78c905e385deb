//! The cluster's nodes: heartbeats (this node's stats into `P:nodes`, the
//! node list read back for `GET /api/nodes` and `/metrics`, silent nodes
//! forgotten with their presence, followed channels' metadata kept from
//! expiring), and the topics that are not channels': the control topic
//! ([`RedisBroker::close_everywhere`], and in a Redis Cluster a node's
//! announcement that it needs the pattern topics, so that the others
//! publish there without waiting for their next heartbeat: decision 0021),
//! each node's own topic (game commands
//! and table events routed to it, decision 0009) and the cluster lobby's.
//!
//! Apart from the channel code because it addresses nodes, not channels:
//! nothing here has an offset or a history.

use super::{lock, Inner, RedisBroker};
use crate::lua;
use crate::resp::Value;
use bytes::Bytes;
use herald_core::BrokerError;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// One node as the cluster sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    /// Its id.
    pub id: String,
    /// Milliseconds since its last heartbeat.
    pub last_seen_ms: u64,
    /// What it reported (clients, channels, uptime, ...).
    pub stats: serde_json::Value,
}

/// Reports a node's stats for its heartbeat.
pub type StatsFn = Box<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Receives the cluster lobby's messages (see [`RedisBroker::on_lobby`]).
pub type LobbyFn = Box<dyn Fn(Option<Bytes>) + Send + Sync>;

/// Receives the messages published on this node's topic.
pub type NodeMsgFn = Box<dyn Fn(Bytes) + Send + Sync>;

impl RedisBroker {
    /// Hands every message published on this node's topic
    /// (`P:node:{ID}:cmd`) to `f`, on the subscriber link's task (so `f`
    /// must not block); set once. The topic is subscribed again after a
    /// reconnect; messages published while the link was down are lost
    /// (Redis pub/sub is at most once): the senders time out.
    pub fn on_node_messages(&self, f: NodeMsgFn) {
        if self.inner.node_msgs.set(f).is_ok() {
            if let Some(ps) = self.inner.pubsub() {
                drop(ps.subscribe(self.inner.own_topic.clone())); // confirmation not awaited
            }
        }
    }

    /// Hands every message of the cluster lobby's topic (`P:lobby`, written
    /// by `TableStore::publish_entry`) to `f`, on the subscriber link's
    /// task; `f(None)` after the link (re)connected, when messages may have
    /// been missed (read `TableStore::lobby_entries` then), called once
    /// Redis confirmed the subscription, so that a read then misses nothing
    /// published before it and the topic brings everything after. Set once.
    pub fn on_lobby(&self, f: LobbyFn) {
        if self.inner.lobby_msgs.set(f).is_ok() {
            if let Some(ps) = self.inner.pubsub() {
                let confirmed = ps.subscribe(self.inner.lobby_topic.clone());
                self.inner.lobby_subscribed(confirmed);
            }
        }
    }

    /// Publishes `payload` on node `node`'s topic, after every command this
    /// node queued before (one link, in order). At most once: nothing tells
    /// whether the node was there to receive it.
    pub fn send_to_node(&self, node: &str, payload: &[u8]) -> Result<(), BrokerError> {
        let topic = self.inner.node_topic(node);
        self.inner
            .link
            .fire(&[b"PUBLISH".as_slice(), &topic, payload])
    }

    /// Sets what this node reports in its heartbeats (once).
    pub fn set_stats(&self, stats: StatsFn) {
        let _ = self.inner.stats.set(stats);
    }

    /// The live nodes as of the last heartbeat (this one included once it has
    /// sent one).
    pub fn nodes(&self) -> Vec<NodeInfo> {
        lock(&self.inner.nodes).clone()
    }

    /// Closes the exact subscribers of `channel` with `code` on every node of
    /// the cluster (the Pusher API's `terminate_connections`): a message on
    /// the control topic, which every node, this one included, acts on when
    /// its subscriber link receives it. A node whose subscriber link is down
    /// at that moment misses it (Redis Pub/Sub keeps nothing). Fails when
    /// Redis cannot take the message.
    pub async fn close_everywhere(&self, channel: &str, code: u16) -> Result<(), BrokerError> {
        let msg = format!("close:{code}:{channel}");
        let control = self.inner.control.clone();
        self.inner
            .link
            .call(&[b"PUBLISH".as_slice(), &control, msg.as_bytes()])
            .await
            .map(|_| ())
    }

    /// Leaves the cluster now (on shutdown): removes this node and its
    /// presence members, announcing them as leaves.
    pub async fn leave_cluster(&self) -> Result<(), BrokerError> {
        self.inner
            .forget(&self.inner.node_id, "leave")
            .await
            .map(|_| ())
    }
}

impl Inner {
    /// In a Redis Cluster, when this node starts needing the classic
    /// pattern topics (decision 0021, "Wildcard subscriptions"): lists it
    /// in `{P}:nodes:patterns` (what every node's heartbeat reads) and
    /// says so on the control topic, which every node follows and acts on
    /// as it reads it, rather than at its next heartbeat.
    ///
    /// Published on every master, not on one: a classic `PUBLISH` reaches
    /// the subscribers of other Redis nodes over the cluster bus, after it
    /// returned, while the subscribers of the node that ran it have it in
    /// their sockets when it returns. Nodes' subscriber links connect to a
    /// master as they know the map, so once this returns the announcement
    /// is in (almost) every node's socket, not on its way. Each node hears
    /// it once per master: harmless, and only at a node's first pattern.
    pub(super) async fn announce_patterns(&self) -> Result<(), BrokerError> {
        let key = self.nodes_key(":patterns");
        self.link
            .call(&[b"SADD".as_slice(), key.as_bytes(), self.node_id.as_bytes()])
            .await?;
        let publish = [b"PUBLISH".as_slice(), &self.control, PATTERNS];
        let masters = self
            .link
            .target()
            .cluster()
            .and_then(|c| c.map())
            .map(|m| m.masters().to_vec())
            .unwrap_or_default();
        let mut published = false;
        for m in masters {
            let Some(&(first, _)) = m.slots.first() else {
                continue;
            };
            let at = format!("{{{}}}", crate::slot::tag_for(first));
            match self.link.call_where(at.as_bytes(), &publish).await {
                Ok(_) => published = true,
                Err(e) => {
                    tracing::debug!(master = %m.addr, error = %e, "cannot announce a pattern there")
                }
            }
        }
        if !published {
            self.link.call(&publish).await?;
        }
        Ok(())
    }

    /// Tells the lobby's handler to read what it missed once the lobby's
    /// subscription is confirmed (or failed: a reconnect follows, and
    /// reads again). Read before the subscription holds, an entry published
    /// in between would be missed with no gap in the numbers to show it
    /// (the first message a node receives has no predecessor to compare).
    pub(super) fn lobby_subscribed(&self, confirmed: tokio::sync::oneshot::Receiver<()>) {
        let Some(me) = self.me() else { return };
        tokio::spawn(async move {
            let _ = confirmed.await;
            if let Some(f) = me.lobby_msgs.get() {
                f(None);
            }
        });
    }

    /// The messages of a node-wide topic (the control topic, this node's
    /// own topic, the cluster lobby's), in order; `false` (nothing taken)
    /// for any other topic, which is a channel's.
    pub(super) fn node_wide<'a>(
        &self,
        topic: &[u8],
        payloads: impl Iterator<Item = &'a Bytes>,
    ) -> bool {
        if topic == self.control.as_ref() {
            for payload in payloads {
                match parse_control(payload) {
                    Some(Control::Close(code, channel)) => {
                        self.hub.close_subscribers(channel, code);
                    }
                    Some(Control::Patterns) => {
                        // A node has a new wildcard subscription: publish on
                        // pattern topics now, not at the next heartbeat.
                        self.patterns_heard.fetch_add(1, Ordering::SeqCst);
                        self.patterns_anywhere.store(true, Ordering::SeqCst);
                    }
                    None => tracing::debug!("malformed message on the control topic"),
                }
            }
        } else if topic == self.own_topic.as_ref() {
            if let Some(f) = self.node_msgs.get() {
                payloads.for_each(|p| f(p.clone()));
            }
        } else if topic == self.lobby_topic.as_ref() {
            if let Some(f) = self.lobby_msgs.get() {
                payloads.for_each(|p| f(Some(p.clone())));
            }
        } else {
            return false;
        }
        true
    }
}

/// A message on the control topic.
#[derive(Debug, PartialEq, Eq)]
enum Control<'a> {
    /// `close:CODE:CHANNEL` ([`RedisBroker::close_everywhere`]).
    Close(u16, &'a str),
    /// `patterns`: a node has just started needing the classic pattern
    /// topics ([`Inner::announce_patterns`]).
    Patterns,
}

/// What `payload` asks on the control topic; `None` for anything else.
fn parse_control(payload: &[u8]) -> Option<Control<'_>> {
    if payload == PATTERNS {
        return Some(Control::Patterns);
    }
    let text = std::str::from_utf8(payload).ok()?;
    let rest = text.strip_prefix("close:")?;
    let (code, channel) = rest.split_once(':')?;
    let code = code.parse().ok()?;
    (!channel.is_empty()).then_some(Control::Close(code, channel))
}

/// The control message of [`Control::Patterns`].
const PATTERNS: &[u8] = b"patterns";

/// Heartbeats, the node list, dead nodes, and keeping followed channels'
/// metadata from expiring.
pub(super) async fn heartbeats(me: Weak<Inner>) {
    let Some(period) = me.upgrade().map(|i| i.cfg.heartbeat) else {
        return;
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut beats: u64 = 0;
    let mut generation = 0;
    loop {
        tick.tick().await;
        let Some(inner) = me.upgrade() else { return };
        if !inner.link.is_up() {
            // Beat as soon as the link is up rather than a period later: a
            // node not yet in the node set cannot be taken for dead, and
            // members it registers meanwhile would outlive it.
            drop(inner);
            tokio::time::sleep(Duration::from_millis(50)).await;
            tick.reset_immediately();
            continue;
        }
        let now = inner.link.generation();
        if now != generation {
            // Generation 1 is the first connection; any later one is a
            // reconnection (perhaps several since the last tick).
            if now > 1 {
                inner.repair_presence();
            }
            generation = now;
        }
        beats += 1;
        if let Err(e) = beat(&inner, beats).await {
            tracing::debug!(error = %e, "heartbeat failed");
        }
    }
}

async fn beat(inner: &Arc<Inner>, beats: u64) -> Result<(), BrokerError> {
    let stats = inner
        .stats
        .get()
        .map(|f| f())
        .unwrap_or(serde_json::Value::Null);
    let seen = inner.nodes_key(":seen");
    let hash = inner.nodes_key("");
    let v = inner
        .link
        .call(&[
            b"EVALSHA".as_slice(),
            lua::HEARTBEAT.sha().as_bytes(),
            b"2",
            seen.as_bytes(),
            hash.as_bytes(),
            inner.node_id.as_bytes(),
            stats.to_string().as_bytes(),
            inner.cfg.dead_after.as_millis().to_string().as_bytes(),
            inner.cfg.heartbeat.as_millis().to_string().as_bytes(),
        ])
        .await?;
    let items = v.items();
    if items.first().and_then(Value::int) == Some(1) && beats > 1 {
        // We were taken for dead (and our members removed): register again.
        tracing::warn!(node = %inner.node_id, "this node was taken for dead by the cluster; re-registering its presence");
        inner.repair_presence();
    }
    for dead in items.iter().skip(1).filter_map(Value::bytes) {
        let id = String::from_utf8_lossy(dead).into_owned();
        if id != inner.node_id {
            let n = inner.forget(&id, "dead").await?;
            tracing::info!(node = %id, members = n, "forgot a silent node and its presence");
        }
    }
    if inner.clustered() {
        // Which nodes have wildcard subscriptions (decision 0021): while
        // any has, publications also go to the classic pattern topic.
        let key = inner.nodes_key(":patterns");
        let heard = inner.patterns_heard.load(Ordering::SeqCst);
        // Queued under the lock: an announcement's `SADD` (made once a
        // glob is in the map) cannot be overtaken by a `SREM` decided
        // before it was.
        let set = {
            let p = lock(&inner.patterns);
            let op: &[u8] = if p.globs.is_empty() { b"SREM" } else { b"SADD" };
            inner
                .link
                .call_later(&[op, key.as_bytes(), inner.node_id.as_bytes()])
        }?;
        set.await?;
        let n = inner
            .link
            .call(&[b"SCARD".as_slice(), key.as_bytes()])
            .await?;
        if n.int().unwrap_or(0) > 0 {
            inner.patterns_anywhere.store(true, Ordering::SeqCst);
        } else if inner.patterns_heard.load(Ordering::SeqCst) == heard {
            // Nobody, unless an announcement came after the read.
            inner.patterns_anywhere.store(false, Ordering::SeqCst);
            if inner.patterns_heard.load(Ordering::SeqCst) != heard {
                inner.patterns_anywhere.store(true, Ordering::SeqCst);
            }
        }
    }
    // The node list, with the Redis clock's view of who is alive.
    let list = inner.link.call_later(&[
        b"ZRANGE".as_slice(),
        seen.as_bytes(),
        b"0",
        b"-1",
        b"WITHSCORES",
    ])?;
    let all = inner
        .link
        .call_later(&[b"HGETALL".as_slice(), hash.as_bytes()])?;
    let now = inner.link.call_later(&[b"TIME"])?;
    let (list, all, now) = tokio::join!(list, all, now);
    let (list, all, now) = (list?, all?, now?);
    let now_ms = now.items().first().and_then(Value::int).unwrap_or(0) * 1000
        + now.items().get(1).and_then(Value::int).unwrap_or(0) / 1000;
    let stats: HashMap<Bytes, serde_json::Value> = all
        .items()
        .chunks(2)
        .filter_map(|kv| {
            let k = kv.first()?.bytes()?.clone();
            let v = serde_json::from_slice(kv.get(1)?.bytes()?).ok()?;
            Some((k, v))
        })
        .collect();
    let nodes = list
        .items()
        .chunks(2)
        .filter_map(|kv| {
            let id = kv.first()?.bytes()?;
            let at = kv.get(1)?.int().or_else(|| {
                std::str::from_utf8(kv.get(1)?.bytes()?)
                    .ok()?
                    .parse::<f64>()
                    .ok()
                    .map(|f| f as i64)
            })?;
            Some(NodeInfo {
                id: String::from_utf8_lossy(id).into_owned(),
                last_seen_ms: u64::try_from(now_ms - at).unwrap_or(0),
                stats: stats.get(id).cloned().unwrap_or(serde_json::Value::Null),
            })
        })
        .collect();
    *lock(&inner.nodes) = nodes;
    // Channels followed here keep their epoch while anyone follows them.
    let every = refresh_every(inner);
    if every > 0 && beats.is_multiple_of(every) {
        let chans: Vec<Arc<str>> = lock(&inner.chans).keys().cloned().collect();
        for name in chans {
            let ttl = inner.ttl_ms(&name);
            if ttl != "0" {
                let _ = inner.link.fire(&[
                    b"PEXPIRE".as_slice(),
                    inner.key(&name, "m").as_bytes(),
                    ttl.as_bytes(),
                ]);
            }
        }
    }
    Ok(())
}

/// Heartbeats between two refreshes of followed channels' expiry: a third of
/// the shortest retention time (0: nothing expires).
fn refresh_every(inner: &Inner) -> u64 {
    let shortest = std::iter::once(&inner.cfg.retention)
        .chain(inner.cfg.by_namespace.values())
        .map(|r| r.ttl)
        .filter(|t| !t.is_zero())
        .min();
    match shortest {
        None => 0,
        Some(t) => {
            let beat = inner.cfg.heartbeat.as_millis().max(1);
            u64::try_from((t.as_millis() / 3 / beat).max(1)).unwrap_or(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_requests_parse_or_are_ignored() {
        assert_eq!(
            parse_control(b"close:4009:pusher-1::server-to-user-a"),
            Some(Control::Close(4009, "pusher-1::server-to-user-a"))
        );
        assert_eq!(parse_control(b"patterns"), Some(Control::Patterns));
        for bad in [
            &b""[..],
            b"close:",
            b"close:4009:",
            b"close:x:c",
            b"close:70000:c",
            b"open:1:c",
            b"close:1:\xff",
        ] {
            assert_eq!(parse_control(bad), None, "{bad:?}");
        }
    }
}
