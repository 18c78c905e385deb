//! The protocol state machine of one connection, shared by every transport.
//!
//! A transport hands the session each complete message it reads
//! ([`Session::on_message`]) or an already-decoded request ([`Session::handle`]),
//! and writes whatever appears in the client's outbox. Replies, errors and pushes
//! all travel through that one outbox, so their relative order is the order in
//! which they were produced. The session holds the connection's subscriptions
//! and releases them when dropped, whatever the reason the connection ended.
//!
//! States: *fresh* until a successful `connect` (only `connect` and `ping` are
//! accepted; anything else is answered with error 101), then *connected*.
//!
//! Auth: `connect` hands its token to the node's [`crate::Authenticator`]. A
//! refusal is answered (101 invalid or missing token, 112 expired) and the
//! connection is then closed (3500, or 3002 "refresh the token and
//! reconnect"). Every subscribe, publish, presence and history command asks the
//! authenticator for permission (error 104 when refused); a subscribe may carry
//! a subscribe token for a private channel. This is the one place every
//! transport passes, so no transport checks permissions of its own.
//!
//! Rate limit: each connection has a token bucket (`rate_limit` messages per
//! second, `rate_burst` at once). A message beyond it is answered with error
//! 108 and dropped; the connection stays open and nobody else is affected.
//!
//! Wildcard subscriptions (`subscribe` to a pattern such as `news.*`; see
//! [`crate::routing`]) have no offsets, epoch or history of their own, so the
//! reply carries an empty epoch and offset 0, and `recover` is refused (error
//! 111) rather than silently ignored. The broker is only asked to deliver
//! what the pattern matches ([`crate::Broker::subscribe_pattern`]), and the
//! reply waits for it to do so (error 114 if it cannot). They count
//! against the same per-connection subscription limit as exact channels.
//! `publish`, `history` and `presence` take concrete channels only (error 109).
//! `join_leave` on a pattern is refused too (error 111): a pattern is not a
//! member of the channels it matches.
//!
//! Recovery: `subscribe` with `recover` hands the position to the broker, which
//! attaches the subscriber atomically with the history read (see
//! [`crate::Broker::subscribe`]). The reply's `recovered` is true only when
//! `recover` was asked and the broker's answer is complete; its `publications`
//! are what the broker returned either way (after a gap, the retained tail), so
//! a client that can live with the gap may use them and one that cannot
//! resynchronises. Every exact subscription is detached from the hub and then
//! from the broker when it ends, whatever the reason (unsubscribe, disconnect).
//! The reply is one frame and the client's outbox admits no frame larger than
//! its bound, so the recovered publications are cut to the newest ones that fit
//! in half of it ([`fit_in_queue`]); a cut reply says `recovered: false`.
//! Without the cut, a client that missed more bytes than the bound would be
//! closed with 3001 on every re-subscription and never recover.

use crate::auth::{Action, AuthError};
use crate::broker::{BrokerError, Completion, History};
use crate::channel;
use crate::client::Client;
use crate::metrics::{self, Transport};
use crate::node::Node;
use crate::routing;
use herald_proto::{
    Command, DecodeError, Encoding, ErrorCode, HistoryItem, Position, Reply, Request, ServerMsg,
};
use std::sync::Arc;

/// One connection's protocol state.
#[derive(Debug)]
pub struct Session {
    node: Arc<Node>,
    client: Arc<Client>,
    /// Exact channels and patterns alike; [`routing::is_pattern`] tells them
    /// apart (concrete names cannot contain `*` or `>`).
    subscriptions: Vec<Arc<str>>,
    /// The transport, for the connection gauges (set by the server).
    transport: Option<Transport>,
    /// Rate limit: milli-messages left in the bucket, and when it was last
    /// refilled (node milliseconds, wrapping: only differences are used).
    /// 32 bits each: this struct lives in every idle connection.
    bucket: u32,
    refilled: u32,
    /// Sent a game command: the game engine hears when the session ends.
    played: bool,
}

impl Session {
    /// A fresh session for a client created by [`Node::new_client`].
    pub fn new(node: Arc<Node>, client: Arc<Client>) -> Session {
        let bucket = bucket_size(&node);
        Session {
            node,
            client,
            subscriptions: Vec::new(),
            transport: None,
            bucket,
            refilled: 0,
            played: false,
        }
    }

    /// Labels the session with its transport: counted in the connection
    /// gauges until it ends.
    pub fn with_transport(mut self, t: Transport) -> Session {
        if self.transport.is_none() {
            self.node.metrics.opened(t);
            self.transport = Some(t);
        }
        self
    }

    /// Takes one message from the rate-limit bucket (token bucket refilled at
    /// `rate_limit` per second, holding at most `rate_burst`); false when empty.
    fn admit(&mut self) -> bool {
        let rate = u64::from(self.node.config.rate_limit);
        if rate == 0 {
            return true;
        }
        let now = self.node.now_ms() as u32;
        let elapsed = u64::from(now.wrapping_sub(self.refilled));
        self.refilled = now;
        let filled =
            (u64::from(self.bucket) + elapsed * rate).min(u64::from(bucket_size(&self.node)));
        self.bucket = filled as u32;
        if self.bucket >= 1000 {
            self.bucket -= 1000;
            true
        } else {
            false
        }
    }

    fn rate_limited(&self, id: u32) {
        self.node.metrics.dropped(metrics::Drop::RateLimit, 1);
        self.error(
            id,
            ErrorCode::TooManyRequests,
            "rate limit exceeded: message dropped",
        );
    }

    /// Whether `connect` succeeded.
    pub fn is_connected(&self) -> bool {
        self.client.is_connected()
    }

    /// Checks `token` and, if it is accepted, makes the session connected.
    /// The transports that cannot carry a `connect` command (SSE) call this
    /// directly; on a failure, nothing is sent or closed.
    pub fn authenticate(&mut self, token: Option<&str>) -> Result<(), AuthError> {
        let identity = self.node.config.auth.connect(token)?;
        if let Some(at) = identity.expires_at {
            self.node.expiries.add(at, &self.client);
        }
        self.client.set_identity(identity);
        Ok(())
    }

    /// Checks a permission, answering the error if it is refused.
    fn permit(&self, id: u32, action: Action, channel: &str, token: Option<&str>) -> bool {
        let Some(who) = self.client.identity() else {
            return false;
        };
        match self.node.config.auth.allow(who, action, channel, token) {
            Ok(()) => true,
            Err(e) => {
                self.node.metrics.dropped(metrics::Drop::Denied, 1);
                self.error(id, e.code(), &e.to_string());
                false
            }
        }
    }

    /// Whether the session may do `action` on `channel` (the SSE transport
    /// checks its channels before it opens a stream).
    pub fn check(
        &self,
        action: Action,
        channel: &str,
        token: Option<&str>,
    ) -> Result<(), AuthError> {
        match self.client.identity() {
            Some(who) => self.node.config.auth.allow(who, action, channel, token),
            None => Err(AuthError::Missing),
        }
    }

    /// The client this session speaks for.
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// The node this session belongs to.
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// Handles one complete message. `binary` says which frame type carried it:
    /// it must match the connection's encoding.
    pub fn on_message(&mut self, payload: &[u8], binary: bool) {
        let expected = self.client.encoding == Encoding::Binary;
        if binary != expected {
            let what = if expected { "binary" } else { "text" };
            self.error(
                0,
                ErrorCode::BadRequest,
                &format!("this connection speaks {what} frames"),
            );
            return;
        }
        let m = &self.node.metrics;
        m.messages_in.inc();
        m.bytes_in.add(payload.len() as u64);
        if !self.admit() {
            // The id is only read to address the error; the command is dropped.
            let id = self
                .client
                .encoding
                .decode_request(payload)
                .map_or_else(|e| e.id(), |r| r.id);
            return self.rate_limited(id);
        }
        let decoded = match self.client.encoding {
            Encoding::Json => herald_proto::json::decode_request_hinted(payload),
            Encoding::Binary => Encoding::Binary.decode_request(payload).map(|r| (r, false)),
        };
        match decoded {
            Ok((req, json_data)) => self.handle_hinted(req, json_data),
            Err(e) => self.decode_error(&e),
        }
    }

    /// Answers a message that could not be decoded.
    pub fn decode_error(&self, e: &DecodeError) {
        self.error(e.id(), e.code(), &e.to_string());
    }

    /// Handles one decoded request.
    pub fn handle(&mut self, req: Request) {
        self.handle_hinted(req, false);
    }

    /// [`Session::handle`] knowing whether a publish's data is JSON text
    /// (`herald_proto::json::decode_request_hinted`), which spares its JSON
    /// pushes a second check.
    fn handle_hinted(&mut self, req: Request, json_data: bool) {
        let id = req.id;
        match req.cmd {
            Command::Ping => self.reply(id, Reply::Ping),
            Command::Connect { .. } if self.client.is_connected() => {
                self.error(id, ErrorCode::AlreadyConnected, "already connected")
            }
            Command::Connect { token, .. } => {
                if let Err(e) = self.authenticate(token.as_deref()) {
                    // The error reply goes out, then the close: 3002 tells the
                    // client to refresh its token, 3500 not to retry this one.
                    // Debug, not info: anyone can make these, so they must not
                    // flood the logs; the metrics count them.
                    tracing::debug!(client = self.client.id, error = %e, "connect refused");
                    self.node.metrics.dropped(metrics::Drop::Denied, 1);
                    self.error(id, e.code(), &e.to_string());
                    self.client.outbox.close(e.disconnect().code(), false);
                    return;
                }
                self.reply(
                    id,
                    Reply::Connect {
                        client: self.client.wire_id(),
                        version: self.node.config.version.clone(),
                        ping_interval: self.node.config.ping_interval,
                    },
                );
            }
            _ if !self.client.is_connected() => {
                self.error(id, ErrorCode::Unauthorized, "send connect first")
            }
            cmd @ (Command::Lobby { .. }
            | Command::LobbyOff { .. }
            | Command::Sit { .. }
            | Command::Watch { .. }
            | Command::Stand { .. }
            | Command::Act { .. }
            | Command::Play { .. }) => match self.node.games() {
                Some(g) => {
                    self.played = true;
                    g.command(&self.client, id, cmd);
                }
                None => self.error(
                    id,
                    ErrorCode::NotAvailable,
                    "games are not enabled on this server",
                ),
            },
            Command::Subscribe {
                channel,
                recover,
                join_leave,
                token,
            } => self.subscribe(id, channel, recover, join_leave, token.as_deref()),
            Command::Unsubscribe { channel } => self.unsubscribe(id, &channel),
            Command::Publish { channel, data } => {
                if !self.check_concrete(id, &channel)
                    || !self.permit(id, Action::Publish, &channel, None)
                {
                    return;
                }
                self.node.metrics.publications.inc();
                let done = if json_data {
                    self.node.broker.publish_json(&channel, data)
                } else {
                    self.node.broker.publish(&channel, data)
                };
                self.complete(id, done, |r| {
                    r.map(|p| Reply::Publish {
                        epoch: p.epoch,
                        offset: p.offset,
                    })
                });
            }
            Command::History {
                channel,
                since,
                limit,
            } => {
                if !self.check_concrete(id, &channel)
                    || !self.permit(id, Action::History, &channel, None)
                {
                    return;
                }
                let done = self
                    .node
                    .broker
                    .history(&channel, since.as_ref(), limit as usize);
                let queue_bytes = self.client.outbox.max_bytes();
                self.complete(id, done, move |r| {
                    r.map(|h| Reply::History {
                        epoch: h.top.epoch,
                        offset: h.top.offset,
                        publications: page_in_queue(h.publications, queue_bytes),
                    })
                });
            }
            Command::Presence { channel } => {
                if !self.check_concrete(id, &channel)
                    || !self.permit(id, Action::Presence, &channel, None)
                {
                    return;
                }
                let done = self.node.presence.list(&channel);
                self.complete(id, done, |r| r.map(|clients| Reply::Presence { clients }));
            }
            Command::PresenceStats { channel } => {
                if !self.check_concrete(id, &channel)
                    || !self.permit(id, Action::Presence, &channel, None)
                {
                    return;
                }
                let done = self.node.presence.stats(&channel);
                self.complete(id, done, |r| {
                    r.map(|(clients, users)| Reply::PresenceStats { clients, users })
                });
            }
        }
    }

    /// Checks a channel that must be concrete, answering the error if not.
    fn check_concrete(&self, id: u32, channel: &str) -> bool {
        let Err(code) = channel::validate(channel) else {
            return true;
        };
        let message = if routing::is_pattern(channel) {
            "wildcard patterns are only allowed in subscribe and unsubscribe"
        } else {
            "invalid channel name"
        };
        self.error(id, code, message);
        false
    }

    fn subscribe(
        &mut self,
        id: u32,
        channel: String,
        recover: Option<Position>,
        join_leave: bool,
        token: Option<&str>,
    ) {
        let pattern = routing::is_pattern(&channel);
        if pattern {
            if let Err(code) = channel::validate_pattern(&channel) {
                return self.error(
                    id,
                    code,
                    "invalid pattern: `*` and `>` must be whole tokens, `>` only the last, \
                     and no token may be empty",
                );
            }
            if recover.is_some() {
                return self.error(
                    id,
                    ErrorCode::NotAvailable,
                    "recovery is not available for wildcard subscriptions (a pattern has no \
                     offsets); subscribe without recover, or recover each concrete channel",
                );
            }
            if join_leave {
                return self.error(
                    id,
                    ErrorCode::NotAvailable,
                    "join_leave is not available for wildcard subscriptions (a pattern is \
                     not a member of the channels it matches); ask on concrete channels",
                );
            }
        } else if let Err(code) = channel::validate(&channel) {
            return self.error(id, code, "invalid channel name");
        }
        if !self.permit(id, Action::Subscribe, &channel, token) {
            return;
        }
        if let Some(i) = self.subscriptions.iter().position(|c| **c == *channel) {
            if !self.failed(&self.subscriptions[i]) {
                return self.error(id, ErrorCode::AlreadySubscribed, "already subscribed");
            }
            // Its subscribe failed (the client had the error): forget it,
            // releasing what the broker kept, and subscribe afresh.
            let old = self.subscriptions.swap_remove(i);
            drop(old);
            self.release(&channel);
        }
        if self.subscriptions.len() >= self.node.config.max_subscriptions {
            return self.error(
                id,
                ErrorCode::LimitExceeded,
                "too many subscriptions on this connection",
            );
        }
        let name: Arc<str> = channel.into();
        self.subscriptions.push(name.clone());
        if pattern {
            return self.subscribe_pattern(id, name);
        }
        let node = self.node.clone();
        let client = self.client.clone();
        let asked_recovery = recover.is_some();
        // The closure holds the name weakly: while the subscription lives,
        // the session's list holds it too. A networked broker attaches
        // later, maybe after the client unsubscribed or left (both drop the
        // list's reference before releasing the subscription), and must
        // then not attach.
        let held = Arc::downgrade(&name);
        self.node.broker.subscribe(
            &name,
            recover.as_ref(),
            Box::new(move |result: Result<History, BrokerError>| {
                let h = match (result, held.upgrade()) {
                    (Err(e), _) => return send(&client, id, Err(e)),
                    (Ok(_), None) => return cancelled(&client, id),
                    (Ok(h), Some(name)) => {
                        // `joined` before the hub, so that any `left` follows it.
                        node.presence.joined(&name, &client);
                        node.hub.subscribe_with(&name, &client, join_leave);
                        // Ours is one reference; none other means the session
                        // let go meanwhile, and its release may have run
                        // before our registration: undo it.
                        if Arc::strong_count(&name) < 2 {
                            if node.hub.unsubscribe(&name, client.id) {
                                node.presence.left(&name, &client);
                            }
                            return cancelled(&client, id);
                        }
                        h
                    }
                };
                let (publications, whole) = fit_in_queue(h.publications, client.outbox.max_bytes());
                let recovered = asked_recovery && h.complete && whole;
                send(
                    &client,
                    id,
                    Ok(Reply::Subscribe {
                        epoch: h.top.epoch,
                        offset: h.top.offset,
                        recovered,
                        publications,
                    }),
                );
            }),
        );
    }

    /// A wildcard subscription: answered once the broker delivers what the
    /// pattern matches (a networked broker: once Redis confirmed its
    /// `PSUBSCRIBE`), so a publication made on any node after the client
    /// has the reply reaches it. The reply is queued under the hub's
    /// pattern lock, once the pattern is in place there: every delivery
    /// through the pattern comes after the reply, and none made after it is
    /// lost (replying before registering lost such a publication when this
    /// thread was preempted in between). The broker may answer later, after
    /// the client unsubscribed or left: as for exact channels, the closure
    /// holds the name weakly and undoes what it did if the session let go.
    fn subscribe_pattern(&self, id: u32, name: Arc<str>) {
        let node = self.node.clone();
        let client = self.client.clone();
        let held = Arc::downgrade(&name);
        let pattern = name.to_string();
        self.node.broker.subscribe_pattern(
            &name,
            Box::new(move |result: Result<(), BrokerError>| {
                if let Err(e) = result {
                    // The broker undid its side; the hub has nothing.
                    return send(&client, id, Err(e));
                }
                let Some(name) = held.upgrade() else {
                    // Released before: the release found nothing in the
                    // hub, so it left the broker's side to us.
                    node.broker.unsubscribe_pattern(&pattern);
                    return cancelled(&client, id);
                };
                let mut gone = false;
                node.hub.subscribe_pattern_then(&name, &client, || {
                    // Ours is one reference; none other means the session
                    // let go meanwhile (its release may have run before
                    // our registration).
                    gone = Arc::strong_count(&name) < 2;
                    if gone {
                        cancelled(&client, id);
                    } else {
                        send(
                            &client,
                            id,
                            Ok(Reply::Subscribe {
                                epoch: String::new(),
                                offset: 0,
                                recovered: false,
                                publications: Vec::new(),
                            }),
                        );
                    }
                });
                if gone && node.hub.unsubscribe_pattern(&name, &client) {
                    node.broker.unsubscribe_pattern(&name);
                }
            }),
        );
    }

    /// Whether the subscription `name` (in the list) failed: its broker
    /// call answered (the callback, which holds the name weakly, is gone)
    /// and did not register the client in the hub. One still waiting for
    /// the broker has a weak reference; one that succeeded is in the hub.
    fn failed(&self, name: &Arc<str>) -> bool {
        if Arc::weak_count(name) > 0 {
            return false;
        }
        if routing::is_pattern(name) {
            !self.node.hub.has_pattern(name, &self.client)
        } else {
            !self.node.hub.is_subscribed(name, self.client.id)
        }
    }

    fn unsubscribe(&mut self, id: u32, channel: &str) {
        let Some(i) = self.subscriptions.iter().position(|c| **c == *channel) else {
            return self.error(id, ErrorCode::NotSubscribed, "not subscribed");
        };
        self.subscriptions.swap_remove(i);
        self.release(channel);
        self.reply(id, Reply::Unsubscribe);
    }

    /// Removes one subscription (exact or pattern) from the hub.
    fn release(&self, channel: &str) {
        if routing::is_pattern(channel) {
            if self.node.hub.unsubscribe_pattern(channel, &self.client) {
                self.node.broker.unsubscribe_pattern(channel);
            }
        } else {
            if self.node.hub.unsubscribe(channel, self.client.id) {
                self.node.presence.left(channel, &self.client);
            }
            self.node.broker.unsubscribe(channel);
        }
    }

    /// Replies now if the broker answered at once, or later from a task.
    fn complete<T: Send + 'static>(
        &self,
        id: u32,
        done: Completion<Result<T, BrokerError>>,
        to_reply: impl FnOnce(Result<T, BrokerError>) -> Result<Reply, BrokerError> + Send + 'static,
    ) {
        match done {
            Completion::Ready(r) => send(&self.client, id, to_reply(r)),
            Completion::Pending(fut) => {
                let client = self.client.clone();
                self.node.spawn(Box::pin(async move {
                    let r = fut.await;
                    send(&client, id, to_reply(r));
                }));
            }
        }
    }

    fn reply(&self, id: u32, reply: Reply) {
        send(&self.client, id, Ok(reply));
    }

    fn error(&self, id: u32, code: ErrorCode, message: &str) {
        let msg = ServerMsg::Error {
            id,
            code: code.code(),
            message: message.to_string(),
        };
        self.client
            .send(self.client.encoding.encode_server_bytes(&msg));
    }
}

/// Encodes and queues a reply (nothing on success when `id == 0`).
/// Encoding allowance per item of a subscribe reply (offset, keys, framing).
const REPLY_ITEM_OVERHEAD: usize = 64;

/// The newest `items` whose payloads fit in half of an outbox bound of
/// `queue_bytes`, and whether that is all of them. Half, because the JSON
/// encoding writes a payload that is not JSON as base64 (4/3 of its size) and
/// live publications queue behind the reply.
fn fit_in_queue(mut items: Vec<HistoryItem>, queue_bytes: usize) -> (Vec<HistoryItem>, bool) {
    let budget = queue_bytes / 2;
    let mut used = 0usize;
    let mut first = items.len();
    while first > 0 {
        let cost = items[first - 1]
            .data
            .len()
            .saturating_add(REPLY_ITEM_OVERHEAD);
        if used.saturating_add(cost) > budget {
            break;
        }
        used += cost;
        first -= 1;
    }
    if first == 0 {
        return (items, true);
    }
    (items.split_off(first), false)
}

/// The oldest `items` whose payloads fit in half of an outbox bound of
/// `queue_bytes` (always at least one, so paging moves on): a `history` reply
/// is a page, and the client asks again from its last offset until that is the
/// top (docs/protocol.md §5b). Without the cut, a reply bigger than the bound
/// closed the client with 3001.
fn page_in_queue(mut items: Vec<HistoryItem>, queue_bytes: usize) -> Vec<HistoryItem> {
    let budget = queue_bytes / 2;
    let mut used = 0usize;
    let mut n = 0;
    for item in &items {
        let cost = item.data.len().saturating_add(REPLY_ITEM_OVERHEAD);
        if n > 0 && used.saturating_add(cost) > budget {
            break;
        }
        used = used.saturating_add(cost);
        n += 1;
    }
    items.truncate(n);
    items
}

/// Answers a subscribe that the client unsubscribed (or left) before the
/// broker completed it.
fn cancelled(client: &Client, id: u32) {
    let msg = ServerMsg::Error {
        id,
        code: ErrorCode::NotSubscribed.code(),
        message: "unsubscribed before the subscription completed".to_string(),
    };
    client.send(client.encoding.encode_server_bytes(&msg));
}

fn send(client: &Client, id: u32, result: Result<Reply, BrokerError>) {
    let msg = match result {
        Ok(_) if id == 0 => return,
        Ok(reply) => ServerMsg::Reply { id, reply },
        Err(e) => ServerMsg::Error {
            id,
            code: ErrorCode::BrokerUnavailable.code(),
            message: e.to_string(),
        },
    };
    client.send(client.encoding.encode_server_bytes(&msg));
}

/// The rate-limit bucket's size in milli-messages (a burst above about four
/// million messages is capped there).
fn bucket_size(node: &Node) -> u32 {
    let c = &node.config;
    c.rate_burst.max(c.rate_limit).saturating_mul(1000)
}

impl Drop for Session {
    fn drop(&mut self) {
        self.node.remove_client(self.client.id);
        if self.played {
            if let Some(g) = self.node.games() {
                g.gone(&self.client);
            }
        }
        for channel in std::mem::take(&mut self.subscriptions) {
            // The list's reference goes before the release: a subscribe the
            // broker completes later sees it gone and undoes itself (see
            // `subscribe`).
            let name = channel.to_string();
            drop(channel);
            self.release(&name);
        }
        if let Some(t) = self.transport {
            let m = &self.node.metrics;
            m.closed(t);
            let code = self
                .client
                .outbox
                .with_queue(|q| q.closing().map(|c| c.code));
            m.disconnected(code.unwrap_or(0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeConfig;
    use bytes::Bytes;
    use herald_proto::Push;

    fn node() -> Arc<Node> {
        // The memory broker answers at once: nothing is ever spawned.
        node_with(NodeConfig::default())
    }

    fn node_with(config: NodeConfig) -> Arc<Node> {
        Node::with_memory_broker(config, Arc::new(|_| {}))
    }

    fn session(node: &Arc<Node>) -> Session {
        let client = node.new_client(Encoding::Json);
        let mut s = Session::new(node.clone(), client);
        s.handle(Request {
            id: 1,
            cmd: Command::Connect {
                token: None,
                name: None,
            },
        });
        drain(&s);
        s
    }

    /// Everything queued for the session's client, decoded.
    fn drain(s: &Session) -> Vec<ServerMsg> {
        s.client.outbox.with_queue(|q| {
            let msgs = q
                .frames
                .iter()
                .map(|f| {
                    Encoding::Json
                        .decode_server(&f.payload())
                        .expect("server sent invalid JSON")
                })
                .collect();
            let n = q.frames.len();
            q.advance(n, 0);
            msgs
        })
    }

    fn subscribe(s: &mut Session, id: u32, channel: &str, recover: Option<Position>) {
        s.handle(Request {
            id,
            cmd: Command::Subscribe {
                channel: channel.into(),
                recover,
                join_leave: false,
                token: None,
            },
        });
    }

    fn publish(s: &mut Session, id: u32, channel: &str) {
        s.handle(Request {
            id,
            cmd: Command::Publish {
                channel: channel.into(),
                data: Bytes::from_static(b"1"),
            },
        });
    }

    fn error_code(m: &ServerMsg) -> Option<u16> {
        match m {
            ServerMsg::Error { code, .. } => Some(*code),
            _ => None,
        }
    }

    #[test]
    fn pattern_subscription_lifecycle() {
        let node = node();
        let mut sub = session(&node);
        let mut publisher = session(&node);
        subscribe(&mut sub, 2, "news.*", None);
        assert_eq!(
            drain(&sub),
            vec![ServerMsg::Reply {
                id: 2,
                reply: Reply::Subscribe {
                    epoch: String::new(),
                    offset: 0,
                    recovered: false,
                    publications: vec![],
                }
            }]
        );
        assert_eq!(node.hub.pattern_count(), 1);
        subscribe(&mut sub, 3, "news.*", None);
        assert_eq!(error_code(&drain(&sub)[0]), Some(105));

        publish(&mut publisher, 4, "news.sport");
        publish(&mut publisher, 5, "news.sport.uk");
        let got = drain(&sub);
        assert!(
            matches!(&got[..], [ServerMsg::Push(Push::Publication { channel, offset: 1, .. })] if channel == "news.sport"),
            "{got:?}"
        );

        sub.handle(Request {
            id: 6,
            cmd: Command::Unsubscribe {
                channel: "news.*".into(),
            },
        });
        assert_eq!(
            drain(&sub),
            vec![ServerMsg::Reply {
                id: 6,
                reply: Reply::Unsubscribe
            }]
        );
        assert_eq!(node.hub.pattern_count(), 0);
        publish(&mut publisher, 7, "news.sport");
        assert!(drain(&sub).is_empty());
    }

    #[test]
    fn drop_releases_pattern_and_exact_subscriptions() {
        let node = node();
        let mut sub = session(&node);
        subscribe(&mut sub, 2, "news.>", None);
        subscribe(&mut sub, 3, "*.sport", None);
        subscribe(&mut sub, 4, "news.sport", None);
        assert_eq!(drain(&sub).len(), 3);
        assert_eq!(node.hub.pattern_count(), 2);
        assert_eq!(node.hub.channel_count(), 1);
        drop(sub);
        assert_eq!(node.hub.pattern_count(), 0);
        assert_eq!(node.hub.channel_count(), 0);
    }

    #[test]
    fn patterns_refused_where_they_make_no_sense() {
        let node = node();
        let mut s = session(&node);
        for (i, bad) in ["news.*x", "a.>.b", "a..*", "*.", ">x"].iter().enumerate() {
            subscribe(&mut s, 10 + i as u32, bad, None);
            assert_eq!(error_code(&drain(&s)[0]), Some(109), "{bad}");
        }
        let pos = Position {
            epoch: "e".into(),
            offset: 1,
        };
        subscribe(&mut s, 20, "news.*", Some(pos));
        assert_eq!(error_code(&drain(&s)[0]), Some(111));
        assert_eq!(node.hub.pattern_count(), 0);

        publish(&mut s, 21, "news.*");
        s.handle(Request {
            id: 22,
            cmd: Command::History {
                channel: "news.>".into(),
                since: None,
                limit: 0,
            },
        });
        s.handle(Request {
            id: 23,
            cmd: Command::Presence {
                channel: "*".into(),
            },
        });
        let codes: Vec<_> = drain(&s).iter().map(error_code).collect();
        assert_eq!(codes, vec![Some(109); 3]);
    }

    #[test]
    fn patterns_count_against_the_subscription_limit() {
        let node = node_with(NodeConfig {
            max_subscriptions: 2,
            ..NodeConfig::default()
        });
        let mut s = session(&node);
        subscribe(&mut s, 2, "a", None);
        subscribe(&mut s, 3, "b.*", None);
        subscribe(&mut s, 4, "c.>", None);
        let codes: Vec<_> = drain(&s).iter().map(error_code).collect();
        assert_eq!(codes, vec![None, None, Some(107)]);
    }

    fn subscribe_reply(m: &ServerMsg) -> (Position, bool, Vec<u64>) {
        match m {
            ServerMsg::Reply {
                reply:
                    Reply::Subscribe {
                        epoch,
                        offset,
                        recovered,
                        publications,
                    },
                ..
            } => (
                Position {
                    epoch: epoch.clone(),
                    offset: *offset,
                },
                *recovered,
                publications.iter().map(|p| p.offset).collect(),
            ),
            other => panic!("expected a subscribe reply, got {other:?}"),
        }
    }

    fn pub_offsets(msgs: &[ServerMsg]) -> Vec<u64> {
        msgs.iter()
            .filter_map(|m| match m {
                ServerMsg::Push(Push::Publication { offset, .. }) => Some(*offset),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn recovery_gives_exactly_the_missed_publications_then_live_ones() {
        let node = node();
        let mut publisher = session(&node);
        let mut sub = session(&node);
        subscribe(&mut sub, 2, "r", None);
        let (start, recovered, _) = subscribe_reply(&drain(&sub)[0]);
        assert!(!recovered, "nothing asked, nothing recovered");
        publish(&mut publisher, 0, "r");
        publish(&mut publisher, 0, "r");
        assert_eq!(pub_offsets(&drain(&sub)), vec![1, 2]);
        drop(sub);
        for _ in 0..3 {
            publish(&mut publisher, 0, "r");
        }
        let mut sub = session(&node);
        let seen = Position {
            epoch: start.epoch.clone(),
            offset: 2,
        };
        subscribe(&mut sub, 2, "r", Some(seen.clone()));
        let (top, recovered, missed) = subscribe_reply(&drain(&sub)[0]);
        assert!(recovered);
        assert_eq!((top.epoch.as_str(), top.offset), (start.epoch.as_str(), 5));
        assert_eq!(missed, vec![3, 4, 5]);
        publish(&mut publisher, 0, "r");
        assert_eq!(pub_offsets(&drain(&sub)), vec![6]);

        let mut stale = session(&node);
        let other = Position {
            epoch: "gone".into(),
            offset: 2,
        };
        subscribe(&mut stale, 2, "r", Some(other));
        assert!(!subscribe_reply(&drain(&stale)[0]).1, "epoch mismatch");
    }

    /// Publishes `n` payloads of 900 bytes to channel `big`.
    fn publish_big(publisher: &mut Session, n: usize) {
        for _ in 0..n {
            publisher.handle(Request {
                id: 0,
                cmd: Command::Publish {
                    channel: "big".into(),
                    data: Bytes::from(vec![b'7'; 900]),
                },
            });
        }
    }

    #[test]
    fn recovery_larger_than_the_outbox_is_cut_not_refused() {
        // Without the cut, a reply bigger than the outbox bound closed the
        // connection with 3001 on every re-subscription: recovery never ended.
        let node = node_with(NodeConfig {
            client_queue_bytes: 4096,
            ..NodeConfig::default()
        });
        let mut publisher = session(&node);
        let mut sub = session(&node);
        subscribe(&mut sub, 2, "big", None);
        let (start, _, _) = subscribe_reply(&drain(&sub)[0]);
        drop(sub);
        publish_big(&mut publisher, 10);
        let mut sub = session(&node);
        subscribe(&mut sub, 2, "big", Some(start));
        assert!(!sub.client.outbox.is_closing(), "not a slow consumer");
        let (top, recovered, got) = subscribe_reply(&drain(&sub)[0]);
        assert_eq!(top.offset, 10);
        assert!(!recovered, "cut: the client must resynchronise");
        // The newest ones that fit in half of 4096 bytes: (900 + 64) * 2.
        assert_eq!(got, vec![9, 10]);
        publish(&mut publisher, 0, "big");
        assert_eq!(pub_offsets(&drain(&sub)), vec![11], "live delivery goes on");
    }

    #[test]
    fn history_larger_than_the_outbox_comes_in_pages() {
        let node = node_with(NodeConfig {
            client_queue_bytes: 4096,
            ..NodeConfig::default()
        });
        let mut publisher = session(&node);
        publish_big(&mut publisher, 5);
        let mut reader = session(&node);
        let mut since = None;
        let mut pages = Vec::new();
        loop {
            reader.handle(Request {
                id: 3,
                cmd: Command::History {
                    channel: "big".into(),
                    since: since.clone(),
                    limit: 0,
                },
            });
            assert!(!reader.client.outbox.is_closing(), "not a slow consumer");
            let msgs = drain(&reader);
            let ServerMsg::Reply {
                reply:
                    Reply::History {
                        epoch,
                        offset,
                        publications,
                    },
                ..
            } = &msgs[0]
            else {
                panic!("expected a history reply, got {msgs:?}");
            };
            let page: Vec<u64> = publications.iter().map(|p| p.offset).collect();
            let last = *page.last().expect("a page is never empty here");
            pages.push(page);
            if last == *offset {
                break;
            }
            since = Some(Position {
                epoch: epoch.clone(),
                offset: last,
            });
        }
        // Two of (900 + 64) bytes fit in half of 4096; the oldest come first.
        assert_eq!(pages, vec![vec![1, 2], vec![3, 4], vec![5]]);
    }

    #[test]
    fn history_pages_hold_at_least_one_publication() {
        let items: Vec<HistoryItem> = (1..=3)
            .map(|offset| HistoryItem {
                offset,
                data: Bytes::from(vec![0; 500]),
            })
            .collect();
        let offsets = |v: &[HistoryItem]| v.iter().map(|i| i.offset).collect::<Vec<_>>();
        assert_eq!(offsets(&page_in_queue(items.clone(), 100)), vec![1]);
        assert_eq!(offsets(&page_in_queue(items.clone(), 2000)), vec![1]);
        assert_eq!(offsets(&page_in_queue(items.clone(), 2300)), vec![1, 2]);
        assert_eq!(offsets(&page_in_queue(items, 1 << 20)), vec![1, 2, 3]);
        assert!(page_in_queue(Vec::new(), 0).is_empty());
    }

    #[test]
    fn fit_in_queue_keeps_the_newest() {
        let items: Vec<HistoryItem> = (1..=4)
            .map(|offset| HistoryItem {
                offset,
                data: Bytes::from(vec![0; 36]),
            })
            .collect();
        let offsets = |v: &[HistoryItem]| v.iter().map(|i| i.offset).collect::<Vec<_>>();
        let (all, whole) = fit_in_queue(items.clone(), 800);
        assert!(whole);
        assert_eq!(offsets(&all), vec![1, 2, 3, 4]);
        let (cut, whole) = fit_in_queue(items.clone(), 400);
        assert!(!whole);
        assert_eq!(offsets(&cut), vec![3, 4]);
        let (none, whole) = fit_in_queue(items, 100);
        assert!(!whole && none.is_empty());
        let (empty, whole) = fit_in_queue(Vec::new(), 0);
        assert!(whole && empty.is_empty());
    }

    #[test]
    fn join_leave_on_request_and_leave_on_drop() {
        let node = node();
        let mut watcher = session(&node);
        watcher.handle(Request {
            id: 2,
            cmd: Command::Subscribe {
                channel: "room".into(),
                recover: None,
                join_leave: true,
                token: None,
            },
        });
        assert_eq!(drain(&watcher).len(), 1, "only the reply: no self-join");
        let mut visitor = session(&node);
        subscribe(&mut visitor, 2, "room", None);
        let who = visitor.client().info();
        drop(visitor);
        assert_eq!(
            drain(&watcher),
            vec![
                ServerMsg::Push(Push::Join {
                    channel: "room".into(),
                    info: who.clone()
                }),
                ServerMsg::Push(Push::Leave {
                    channel: "room".into(),
                    info: who
                }),
            ]
        );
        watcher.handle(Request {
            id: 3,
            cmd: Command::Subscribe {
                channel: "room.*".into(),
                recover: None,
                join_leave: true,
                token: None,
            },
        });
        assert_eq!(error_code(&drain(&watcher)[0]), Some(111));
    }

    /// Records each delivered publication's JSON hint, then hands it on.
    struct Hints(Arc<crate::Hub>, std::sync::Mutex<Vec<bool>>);

    impl crate::broker::Deliver for Hints {
        fn deliver(&self, p: &crate::broker::Publication) {
            self.1
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(p.json);
            self.0.deliver(p);
        }
    }

    #[test]
    fn only_json_text_from_a_json_publisher_is_published_as_known_json() {
        let hub = Arc::new(crate::Hub::new());
        let hints = Arc::new(Hints(hub.clone(), Default::default()));
        let broker = crate::MemoryBroker::new(10, std::time::Duration::ZERO, hints.clone());
        let presence = Arc::new(crate::presence::LocalPresence::new(hub.clone()));
        let node = Node::new(
            NodeConfig::default(),
            hub,
            Arc::new(broker),
            presence,
            Arc::new(|_| {}),
        );
        let mut json = session(&node);
        json.on_message(
            br#"{"publish":{"channel":"c","data":{"a":[1,"]"]}}}"#,
            false,
        );
        json.on_message(br#"{"publish":{"channel":"c","b64":"e30="}}"#, false);
        json.handle(Request {
            id: 0,
            cmd: Command::Publish {
                channel: "c".into(),
                data: Bytes::from_static(b"{}"),
            },
        });
        let mut binary = Session::new(node.clone(), node.new_client(Encoding::Binary));
        let connect = Command::Connect {
            token: None,
            name: None,
        };
        let publish = Command::Publish {
            channel: "c".into(),
            data: Bytes::from_static(b"{}"),
        };
        for (id, cmd) in [(1, connect), (0, publish)] {
            let mut out = bytes::BytesMut::new();
            Encoding::Binary.encode_request(&Request { id, cmd }, &mut out);
            binary.on_message(&out, true);
        }
        let seen = hints.1.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // JSON `data`: known; JSON `b64`, a decoded request, binary: not.
        assert_eq!(seen, vec![true, false, false, false]);
    }

    /// A broker that delivers patterns only when the test says so
    /// (a networked one waiting for Redis), and counts its releases.
    struct Deferring {
        inner: crate::MemoryBroker,
        waiting: std::sync::Mutex<Vec<(String, crate::broker::PatternReady)>>,
        released: std::sync::Mutex<Vec<String>>,
    }

    impl Deferring {
        fn answer(&self, pattern: &str, r: Result<(), BrokerError>) {
            let ready = {
                let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
                let i = w
                    .iter()
                    .position(|(p, _)| p == pattern)
                    .expect("not waiting");
                w.remove(i).1
            };
            ready(r);
        }

        fn released(&self) -> Vec<String> {
            self.released
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        }
    }

    impl crate::Broker for Deferring {
        fn publish(&self, channel: &str, data: Bytes) -> Completion<Result<Position, BrokerError>> {
            self.inner.publish(channel, data)
        }
        fn subscribe(
            &self,
            channel: &str,
            since: Option<&Position>,
            attach: crate::broker::Attach,
        ) {
            self.inner.subscribe(channel, since, attach)
        }
        fn unsubscribe(&self, channel: &str) {
            self.inner.unsubscribe(channel)
        }
        fn position(&self, channel: &str) -> Completion<Result<Position, BrokerError>> {
            self.inner.position(channel)
        }
        fn history(
            &self,
            channel: &str,
            since: Option<&Position>,
            limit: usize,
        ) -> Completion<Result<History, BrokerError>> {
            self.inner.history(channel, since, limit)
        }
        fn subscribe_pattern(&self, pattern: &str, ready: crate::broker::PatternReady) {
            self.waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((pattern.to_string(), ready));
        }
        fn unsubscribe_pattern(&self, pattern: &str) {
            self.released
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(pattern.to_string());
        }
    }

    /// A wildcard subscription is registered and answered only when the
    /// broker is ready; an error is 114 with nothing registered; one
    /// released before the broker was ready is undone at the broker once
    /// it is (every ready subscription is released exactly once).
    #[test]
    fn a_pattern_is_answered_when_the_broker_is_ready_and_undone_if_let_go() {
        let hub = Arc::new(crate::Hub::new());
        let broker = Arc::new(Deferring {
            inner: crate::MemoryBroker::new(10, std::time::Duration::ZERO, hub.clone()),
            waiting: Default::default(),
            released: Default::default(),
        });
        let presence = Arc::new(crate::LocalPresence::new(hub.clone()));
        let node = Node::new(
            NodeConfig::default(),
            hub.clone(),
            broker.clone(),
            presence,
            Arc::new(|_| {}),
        );
        let mut sub = session(&node);

        subscribe(&mut sub, 2, "a.*", None);
        assert_eq!(drain(&sub), vec![], "no reply before the broker is ready");
        assert_eq!(hub.pattern_count(), 0);
        broker.answer("a.*", Ok(()));
        let got = drain(&sub);
        assert!(
            matches!(
                &got[..],
                [ServerMsg::Reply {
                    id: 2,
                    reply: Reply::Subscribe { .. }
                }]
            ),
            "{got:?}"
        );
        assert_eq!(hub.pattern_count(), 1);

        // Unsubscribed while the broker works: cancelled, and released at
        // the broker when it is ready (the session's release found nothing).
        subscribe(&mut sub, 3, "b.*", None);
        sub.handle(Request {
            id: 4,
            cmd: Command::Unsubscribe {
                channel: "b.*".into(),
            },
        });
        assert!(broker.released().is_empty());
        broker.answer("b.*", Ok(()));
        let got = drain(&sub);
        assert!(
            matches!(&got[..], [ServerMsg::Reply { id: 4, reply: Reply::Unsubscribe }, e] if error_code(e) == Some(ErrorCode::NotSubscribed.code())),
            "{got:?}"
        );
        assert_eq!(broker.released(), vec!["b.*"]);
        assert_eq!(hub.pattern_count(), 1);

        // The broker cannot: 114, nothing in the hub, nothing to release.
        subscribe(&mut sub, 5, "c.*", None);
        broker.answer("c.*", Err(BrokerError::Unavailable("down".into())));
        let got = drain(&sub);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            error_code(&got[0]),
            Some(ErrorCode::BrokerUnavailable.code())
        );
        assert_eq!(hub.pattern_count(), 1);

        // Asked again after the error: not "already subscribed", and it
        // works once the broker can.
        subscribe(&mut sub, 6, "c.*", None);
        assert_eq!(drain(&sub), vec![], "waiting for the broker again");
        subscribe(&mut sub, 7, "c.*", None);
        assert_eq!(
            drain(&sub).first().and_then(error_code),
            Some(ErrorCode::AlreadySubscribed.code()),
            "while the first waits, a second is refused"
        );
        broker.answer("c.*", Ok(()));
        let got = drain(&sub);
        assert!(
            matches!(
                &got[..],
                [ServerMsg::Reply {
                    id: 6,
                    reply: Reply::Subscribe { .. }
                }]
            ),
            "{got:?}"
        );
        assert_eq!(hub.pattern_count(), 2);
        subscribe(&mut sub, 8, "a.*", None);
        assert_eq!(
            drain(&sub).first().and_then(error_code),
            Some(ErrorCode::AlreadySubscribed.code()),
            "a subscription that worked is still refused twice"
        );

        drop(sub);
        assert_eq!(hub.pattern_count(), 0);
        let mut released = broker.released();
        released.sort();
        assert_eq!(released, vec!["a.*", "b.*", "c.*"]);
    }
}
