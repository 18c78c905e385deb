//! Cluster-wide presence. A channel's members and per-user counts are Redis
//! hashes written by `member.lua`, so `presence` and `presence_stats`
//! answer for the whole cluster. Each join or leave also says which
//! cluster-wide transitions it made (channel occupied or vacated, a user's
//! first or last connection); the node that ran the script reports them to
//! the hub's observer, in order, so each is reported once in the cluster
//! (decision 0012). Each node's members are also kept in a set of its own,
//! so that a dead or leaving node's members are removed (`forget.lua`) and
//! a node's are registered again after a reconnect.

use super::{Inner, RedisBroker};
use crate::lua;
use crate::member;
use crate::resp::Value;
use herald_core::{BrokerError, Client, Completion, Presence};
use herald_proto::ClientInfo;
use std::sync::{Arc, Weak};

/// A join or leave sent to Redis, whose reply says which cluster-wide
/// transitions it made (`member.lua`).
pub(super) struct Transition {
    channel: String,
    user: String,
    reply: std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, BrokerError>> + Send>>,
}

/// Joins and leaves waiting for their transitions, at most: beyond, the
/// observer misses some (and a warning says so) rather than memory growing.
pub(super) const TRANSITIONS_MAX: usize = 65_536;

/// Hands the transitions `member.lua` and `forget.lua` report (1 occupied,
/// 2 vacated, 4 user added, 8 user removed; 16, occupied again within the
/// vacated delay, reports nothing) to the hub's observer, in the order a
/// channel goes through them. A vacate made by `member.lua` with a delay is
/// reported after it, if the channel was not occupied again meanwhile.
fn report(inner: &Arc<Inner>, channel: &str, flags: i64, user: &str, delayed: bool) {
    use herald_core::ChannelEvent as E;
    let hub = &inner.hub;
    if flags & 1 != 0 {
        hub.notify(channel, E::Occupied);
    }
    if flags & 4 != 0 {
        hub.notify(channel, E::UserAdded(user));
    }
    if flags & 8 != 0 {
        hub.notify(channel, E::UserRemoved(user));
    }
    if flags & 2 != 0 {
        let delay = inner.cfg.vacated_delay;
        if !delayed || delay.is_zero() {
            return hub.notify(channel, E::Vacated);
        }
        let (me, channel) = (Arc::downgrade(inner), channel.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let Some(inner) = me.upgrade() else { return };
            let key = inner.key(&channel, "v");
            match inner.link.call(&[b"DEL".as_slice(), key.as_bytes()]).await {
                Ok(v) if v.int() == Some(1) => inner.hub.notify(&channel, E::Vacated),
                Ok(_) => {} // occupied again in the meantime
                Err(e) => {
                    tracing::debug!(%channel, error = %e, "pending vacate not confirmed; its webhook is lost")
                }
            }
        });
    }
}

/// Awaits the replies of joins and leaves one after the other (they arrive
/// in that order on the one link) and reports their transitions.
pub(super) async fn transitions(me: Weak<Inner>, mut rx: tokio::sync::mpsc::Receiver<Transition>) {
    while let Some(t) = rx.recv().await {
        let reply = t.reply.await;
        let Some(inner) = me.upgrade() else { return };
        match reply {
            Ok(v) => report(&inner, &t.channel, v.int().unwrap_or(0), &t.user, true),
            Err(e) => {
                tracing::debug!(channel = %t.channel, error = %e, "presence change not confirmed; its webhook is lost")
            }
        }
    }
}

impl Inner {
    /// `forget.lua` for `node` in `mode` (`dead`, `leave` or `repair`).
    fn forget_args(&self, node: &str, mode: &str) -> Vec<Vec<u8>> {
        vec![
            b"EVALSHA".to_vec(),
            lua::FORGET.sha().as_bytes().to_vec(),
            b"3".to_vec(),
            self.nodes_key(":seen").into_bytes(),
            self.nodes_key("").into_bytes(),
            self.members_key(node).into_bytes(),
            node.as_bytes().to_vec(),
            self.cfg.prefix.as_bytes().to_vec(),
            mode.as_bytes().to_vec(),
        ]
    }

    /// Removes `node` (`dead` or `leave`) and its presence members, announcing
    /// them as leaves and reporting their cluster-wide transitions to the
    /// hub's observer; returns how many were removed.
    pub(super) async fn forget(&self, node: &str, mode: &str) -> Result<i64, BrokerError> {
        if self.clustered() {
            return self.forget_clustered(node, mode).await;
        }
        let v = self.link.call(&self.forget_args(node, mode)).await?;
        Ok(self.report_forgotten(&v))
    }

    /// `P:{C}:n:NODE`: in a cluster, `node`'s members of `channel`, in the
    /// channel's slot (decision 0021).
    fn node_channel_key(&self, channel: &str, node: &str) -> String {
        self.key(channel, &format!("n:{node}"))
    }

    /// `{P}:node:NODE:chans`: in a cluster, the channels where `node` has
    /// (or had) members, in the global slot.
    fn node_chans_key(&self, node: &str) -> String {
        format!("{}:node:{node}:chans", self.global)
    }

    /// `forget` in a Redis Cluster, where a node's members are spread over
    /// slots and no script can remove them with the node in one step: the
    /// node's channels are cleaned first, each in its own slot
    /// (`forget_channel.lua`, which announces only members still there, so
    /// doing it twice is harmless), and only then does the node leave the
    /// node set. A node that dies half-way through its own `leave` is thus
    /// still in the set, and taken for dead later. For `dead`, one node
    /// does the work: the one that sets `{P}:node:ID:forgetting` (30 s, so
    /// another takes over if it dies too).
    async fn forget_clustered(&self, node: &str, mode: &str) -> Result<i64, BrokerError> {
        if mode == "dead" {
            let lock = format!("{}:node:{node}:forgetting", self.global);
            let won = self
                .link
                .call(&[
                    b"SET".as_slice(),
                    lock.as_bytes(),
                    self.node_id.as_bytes(),
                    b"NX",
                    b"PX",
                    b"30000",
                ])
                .await?;
            if matches!(won, Value::Bulk(None)) {
                return Ok(0);
            }
        }
        let chans_key = self.node_chans_key(node);
        let chans = self
            .link
            .call(&[b"SMEMBERS".as_slice(), chans_key.as_bytes()])
            .await?;
        let mut total = 0;
        for c in chans.items().iter().filter_map(Value::bytes) {
            let channel = String::from_utf8_lossy(c).into_owned();
            let v = self
                .link
                .call(&self.forget_channel_args(&channel, node, mode))
                .await?;
            total += self.report_forgotten(&v);
        }
        if mode != "repair" {
            let (seen, hash) = (self.nodes_key(":seen"), self.nodes_key(""));
            let patterns = self.nodes_key(":patterns");
            self.link
                .call(&[b"SREM".as_slice(), patterns.as_bytes(), node.as_bytes()])
                .await?;
            self.link
                .call(&[b"ZREM".as_slice(), seen.as_bytes(), node.as_bytes()])
                .await?;
            self.link
                .call(&[b"HDEL".as_slice(), hash.as_bytes(), node.as_bytes()])
                .await?;
            self.link
                .call(&[b"DEL".as_slice(), chans_key.as_bytes()])
                .await?;
        }
        Ok(total)
    }

    /// `forget_channel.lua` for `node`'s members of `channel`.
    fn forget_channel_args(&self, channel: &str, node: &str, mode: &str) -> Vec<Vec<u8>> {
        vec![
            b"EVALSHA".to_vec(),
            lua::FORGET_CHANNEL.sha().as_bytes().to_vec(),
            b"4".to_vec(),
            self.node_channel_key(channel, node).into_bytes(),
            self.key(channel, "p").into_bytes(),
            self.key(channel, "u").into_bytes(),
            self.key(channel, "o").into_bytes(),
            node.as_bytes().to_vec(),
            mode.as_bytes().to_vec(),
            self.topic(channel).to_vec(),
            channel.as_bytes().to_vec(),
        ]
    }

    /// Reports the transitions of a `forget.lua` (or `forget_channel.lua`)
    /// reply; returns how many members it removed.
    fn report_forgotten(&self, v: &Value) -> i64 {
        let items = v.items();
        for t in items.get(1..).unwrap_or_default().chunks_exact(3) {
            let text = |v: &Value| v.bytes().map(|b| String::from_utf8_lossy(b).into_owned());
            if let (Some(channel), Some(flags), Some(user)) = (text(&t[0]), t[1].int(), text(&t[2]))
            {
                if let Some(me) = self.me() {
                    // A dead or leaving node's clients are gone for good.
                    report(&me, &channel, flags, &user, false);
                }
            }
        }
        items.first().and_then(Value::int).unwrap_or(0)
    }

    /// Records that `info` joined (or left) `channel` in Redis, announcing
    /// it to other nodes' listeners if `announce` and it changed anything.
    fn member(&self, join: bool, channel: &str, info: &ClientInfo, announce: bool) {
        let member = member::encode(info);
        let msg = member::presence_message(join, &self.node_id, &member);
        let namespace = channel.split_once(':').map_or("", |(ns, _)| ns);
        let (p, u) = (self.key(channel, "p"), self.key(channel, "u"));
        // In a cluster the node's member set and the occupied marker are
        // the channel's own keys (its slot); the node-wide lists are kept
        // beside, in the global slot (decision 0021).
        let (set, occupied) = if self.clustered() {
            let ns = self.occupied_key(namespace);
            let chans = self.node_chans_key(&self.node_id);
            if join {
                let _ = self
                    .link
                    .fire(&[b"SADD".as_slice(), chans.as_bytes(), channel.as_bytes()]);
                let _ = self
                    .link
                    .fire(&[b"SADD".as_slice(), ns.as_bytes(), channel.as_bytes()]);
            }
            (
                self.node_channel_key(channel, &self.node_id),
                self.key(channel, "o"),
            )
        } else {
            (
                self.members_key(&self.node_id),
                self.occupied_key(namespace),
            )
        };
        let (topic, entry) = (
            self.topic(channel),
            member::set_entry(channel, &info.client),
        );
        let vacating = self.key(channel, "v");
        let delay = self.cfg.vacated_delay.as_millis().to_string();
        let mode = self.publish_mode();
        let args: [&[u8]; 19] = [
            b"EVALSHA".as_slice(),
            lua::MEMBER.sha().as_bytes(),
            b"5",
            p.as_bytes(),
            u.as_bytes(),
            set.as_bytes(),
            occupied.as_bytes(),
            vacating.as_bytes(),
            if join { b"join" } else { b"leave" },
            info.client.as_bytes(),
            &member,
            info.user.as_bytes(),
            &topic,
            &msg,
            &entry,
            if announce { b"1" } else { b"0" },
            channel.as_bytes(),
            delay.as_bytes(),
            mode,
        ];
        let args = &args[..];
        if !(announce && self.hub.observed()) {
            let _ = self.link.fire(args);
            return;
        }
        let Ok(reply) = self.link.call_later(args) else {
            return;
        };
        let t = Transition {
            channel: channel.to_string(),
            user: info.user.clone(),
            reply: Box::pin(reply),
        };
        if self.transitions.try_send(t).is_err() {
            tracing::warn!(
                channel,
                "too many presence changes awaiting Redis; a webhook is lost"
            );
        }
    }

    /// Replaces this node's presence members in Redis with the hub's (after
    /// the command link reconnected, when joins and leaves may have been
    /// lost, or after this node was taken for dead). Silent: listeners are
    /// not told about the repair; `presence` is right again once it is done.
    /// The commands are queued in order on the one link, so joins made after
    /// this call land after the wipe.
    pub(super) fn repair_presence(&self) {
        if self.clustered() {
            return self.repair_presence_clustered();
        }
        let _ = self.link.fire(&self.forget_args(&self.node_id, "repair"));
        for channel in self.hub.channels() {
            for info in self.hub.presence(&channel) {
                self.member(true, &channel, &info, false);
            }
        }
    }
}

impl Inner {
    /// `repair_presence` in a Redis Cluster: per channel (the node's list
    /// and the hub's), the node's members are wiped in the channel's slot
    /// and the hub's written again, in that order on the slot's link.
    fn repair_presence_clustered(&self) {
        let Some(me) = self.me() else { return };
        tokio::spawn(async move {
            let key = me.node_chans_key(&me.node_id);
            let listed = me
                .link
                .call(&[b"SMEMBERS".as_slice(), key.as_bytes()])
                .await
                .map(|v| {
                    v.items()
                        .iter()
                        .filter_map(Value::bytes)
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let mut channels: Vec<String> = me
                .hub
                .channels()
                .into_iter()
                .map(|c| c.to_string())
                .collect();
            channels.extend(listed);
            channels.sort();
            channels.dedup();
            for channel in channels {
                let _ = me
                    .link
                    .fire(&me.forget_channel_args(&channel, &me.node_id, "repair"));
                for info in me.hub.presence(&channel) {
                    me.member(true, &channel, &info, false);
                }
            }
        });
    }
}

impl Presence for RedisBroker {
    fn joined(&self, channel: &str, client: &Client) {
        self.inner.member(true, channel, &client.info(), true);
    }

    fn left(&self, channel: &str, client: &Client) {
        self.inner.member(false, channel, &client.info(), true);
    }

    fn list(&self, channel: &str) -> Completion<Result<Vec<ClientInfo>, BrokerError>> {
        let inner = self.inner.clone();
        let key = inner.key(channel, "p");
        Completion::Pending(Box::pin(async move {
            let v = inner
                .link
                .call(&[b"HGETALL".as_slice(), key.as_bytes()])
                .await?;
            Ok(v.items()
                .chunks(2)
                .filter_map(|kv| kv.get(1).and_then(Value::bytes).and_then(member::decode))
                .collect())
        }))
    }

    fn stats(&self, channel: &str) -> Completion<Result<(u64, u64), BrokerError>> {
        let inner = self.inner.clone();
        let (p, u) = (inner.key(channel, "p"), inner.key(channel, "u"));
        Completion::Pending(Box::pin(async move {
            let a = inner.link.call_later(&[b"HLEN".as_slice(), p.as_bytes()])?;
            let b = inner.link.call_later(&[b"HLEN".as_slice(), u.as_bytes()])?;
            let (a, b) = tokio::join!(a, b);
            let n = |v: Value| u64::try_from(v.int().unwrap_or(0)).unwrap_or(0);
            Ok((n(a?), n(b?)))
        }))
    }

    fn occupied(&self, namespace: &str) -> Completion<Result<Vec<String>, BrokerError>> {
        let inner = self.inner.clone();
        let key = inner.occupied_key(namespace);
        Completion::Pending(Box::pin(async move {
            let v = inner
                .link
                .call(&[b"SMEMBERS".as_slice(), key.as_bytes()])
                .await?;
            let names: Vec<String> = v
                .items()
                .iter()
                .filter_map(Value::bytes)
                .filter_map(|b| std::str::from_utf8(b).ok().map(str::to_string))
                .collect();
            if !inner.clustered() {
                return Ok(names);
            }
            // In a cluster the namespace's set only grows with joins (a
            // leave's update would be a second command in another slot,
            // which could overtake a later join's): a channel listed is
            // kept if it has members now, and dropped from the set if not
            // (put back if a join came in between).
            let mut out = Vec::with_capacity(names.len());
            for name in names {
                let p = inner.key(&name, "p");
                let n = inner.link.call(&[b"HLEN".as_slice(), p.as_bytes()]).await?;
                if n.int().unwrap_or(0) > 0 {
                    out.push(name);
                    continue;
                }
                inner
                    .link
                    .call(&[b"SREM".as_slice(), key.as_bytes(), name.as_bytes()])
                    .await?;
                let again = inner.link.call(&[b"HLEN".as_slice(), p.as_bytes()]).await?;
                if again.int().unwrap_or(0) > 0 {
                    inner
                        .link
                        .call(&[b"SADD".as_slice(), key.as_bytes(), name.as_bytes()])
                        .await?;
                    out.push(name);
                }
            }
            Ok(out)
        }))
    }
}
