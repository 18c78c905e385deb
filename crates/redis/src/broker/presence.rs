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
        let v = self.link.call(&self.forget_args(node, mode)).await?;
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
        Ok(items.first().and_then(Value::int).unwrap_or(0))
    }

    /// Records that `info` joined (or left) `channel` in Redis, announcing
    /// it to other nodes' listeners if `announce` and it changed anything.
    fn member(&self, join: bool, channel: &str, info: &ClientInfo, announce: bool) {
        let member = member::encode(info);
        let msg = member::presence_message(join, &self.node_id, &member);
        let namespace = channel.split_once(':').map_or("", |(ns, _)| ns);
        let (p, u) = (self.key(channel, "p"), self.key(channel, "u"));
        let (set, occupied) = (
            self.members_key(&self.node_id),
            self.occupied_key(namespace),
        );
        let (topic, entry) = (
            self.topic(channel),
            member::set_entry(channel, &info.client),
        );
        let vacating = self.key(channel, "v");
        let delay = self.cfg.vacated_delay.as_millis().to_string();
        let args: [&[u8]; 18] = [
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
        let _ = self.link.fire(&self.forget_args(&self.node_id, "repair"));
        for channel in self.hub.channels() {
            for info in self.hub.presence(&channel) {
                self.member(true, &channel, &info, false);
            }
        }
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
            Ok(v.items()
                .iter()
                .filter_map(Value::bytes)
                .filter_map(|b| std::str::from_utf8(b).ok().map(str::to_string))
                .collect())
        }))
    }
}
