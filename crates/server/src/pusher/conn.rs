//! One Pusher WebSocket connection (`/app/{key}?protocol=7`): the protocol's
//! state machine over the shared connection driver ([`crate::conn`]).
//!
//! On open the client gets `pusher:connection_established` with its
//! `socket_id` (the Herald client id, [`herald_pusher::socket_id`]). Then:
//!
//! - `pusher:ping` → `pusher:pong`; any input counts as activity for the
//!   server's own heartbeats (WebSocket pings, `--ping-interval`).
//! - `pusher:subscribe`: public channels at once; `private-`,
//!   `private-encrypted-` and `presence-` only with the app's signature of
//!   `socket_id:channel[:channel_data]`, else `pusher:subscription_error`
//!   (`AuthError`, 401). The subscription goes through the broker like a
//!   Herald subscribe, so `pusher_internal:subscription_succeeded` precedes
//!   every live event. On presence channels it carries the member list, and
//!   members come and go as `pusher_internal:member_added`/`_removed`, one per
//!   user (not per connection). A connection has one user: its first presence
//!   subscription's `user_id` becomes the Herald client's identity, and a
//!   later presence subscription with another `user_id` is refused. On
//!   `cache-` channels the newest retained publication is replayed after the
//!   reply, or `pusher:cache_miss` is sent.
//! - `client-*` events: only on subscribed private and presence channels
//!   (not encrypted ones), at most `client_event_rate` per second and
//!   `max_event_size` bytes of data; refused ones get `pusher:error` (4301
//!   for rate and size) and the connection stays. They are published to the
//!   channel for everyone but the sender, with `user_id` on presence channels.
//! - `pusher:signin` (user authentication): `auth` must be the app's
//!   signature of `socket_id::user::user_data`, else `pusher:error` 4009 and
//!   the close. Then `pusher:signin_success`, and the connection may
//!   subscribe to `#server-to-user-<id>` (only its own), where the HTTP API's
//!   `sendToUser` events arrive; the user becomes the presence user if the
//!   connection had none.
//! - Anything else (unknown events, bad JSON, binary frames) gets a
//!   `pusher:error` with code `null`; the connection stays.
//! - Every message counts against Herald's per-connection rate limit
//!   (`rate_limit`, `rate_burst`); one beyond it is dropped with a
//!   `pusher:error`, as Herald's own protocol answers error 108.

use super::{App, Apps};
use crate::conn::Handler;
use bytes::Bytes;
use herald_core::broker::{BrokerError, Completion, History};
use herald_core::metrics::Transport;
use herald_core::{Client, Frame, Identity, Node};
use herald_proto::ClientInfo;
use herald_pusher::channel::{self, data_string, ChannelType, Envelope, Kind};
use herald_pusher::message::{self, Inbound};
use herald_pusher::{sign, Code};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::sync::Arc;

/// One subscription of a Pusher connection.
#[derive(Debug)]
struct Sub {
    /// The Pusher channel name.
    pusher: Box<str>,
    /// The Herald channel; the attach callback holds it weakly, so dropping
    /// this tells a late broker answer to undo itself (as in the session).
    herald: Arc<str>,
    kind: ChannelType,
}

/// A Pusher connection's protocol state.
#[derive(Debug)]
pub struct PusherConn {
    app: Arc<App>,
    client: Arc<Client>,
    node: Arc<Node>,
    socket_id: String,
    /// The user signed in with `pusher:signin`, if any.
    user: Option<String>,
    subs: Vec<Sub>,
    /// Client events: `client_event_rate` per second, a second's worth at once.
    events: Bucket,
    /// Every message: Herald's `rate_limit`/`rate_burst`, as for its own
    /// protocol (`None`: no limit), so that a flood of refused subscribes
    /// (an HMAC each) is bounded too.
    messages: Option<Bucket>,
    max_event_size: usize,
}

/// A token bucket counted in milli-tokens: `rate` per second, at most `cap`.
#[derive(Debug)]
struct Bucket {
    level: u64,
    /// Node millisecond of the last refill.
    at: u64,
    rate: u64,
    cap: u64,
}

impl Bucket {
    fn new(rate: u32, burst: u32) -> Bucket {
        let cap = u64::from(burst.max(rate)) * 1000;
        Bucket {
            level: cap,
            at: 0,
            rate: u64::from(rate),
            cap,
        }
    }

    /// Takes one token at node millisecond `now`; false when empty.
    fn take(&mut self, now: u64) -> bool {
        let elapsed = now.saturating_sub(self.at);
        self.at = now;
        self.level = (self.level + elapsed * self.rate).min(self.cap);
        if self.level >= 1000 {
            self.level -= 1000;
            true
        } else {
            false
        }
    }
}

/// Queues one text message.
fn send(client: &Client, bytes: Vec<u8>) {
    client.outbox.push(Frame::Text(Bytes::from(bytes)));
}

/// Answers a connection that cannot be served (unknown key, bad protocol
/// version): `pusher:error` with `code`, then the close with the same code.
pub fn refuse(client: &Client, code: Code, message: &str) {
    send(client, message::render_error(Some(code.code()), message));
    client.outbox.close(code.code(), false);
}

/// A subscription the broker attached, on its way to
/// `pusher_internal:subscription_succeeded`.
struct Joined {
    node: Arc<Node>,
    client: Arc<Client>,
    app: Arc<App>,
    /// The Pusher channel.
    name: String,
    /// The Herald channel.
    channel: String,
    /// The connection's hold on the subscription (see [`Sub::herald`]).
    held: std::sync::Weak<str>,
    kind: ChannelType,
    history: History,
}

impl Joined {
    /// Registers the subscriber in the hub and answers, with the presence
    /// members (`members`: the cluster's, or the broker's error: then this
    /// node's) on a presence channel, and the cached event on a cache one.
    fn finish(self, members: Option<Result<Vec<ClientInfo>, BrokerError>>) {
        let Joined {
            node,
            client,
            app,
            name,
            channel,
            held,
            kind,
            history,
        } = self;
        let presence = kind.kind == Kind::Presence;
        let Some(herald) = held.upgrade() else {
            // Unsubscribed while the member list was read: the release found
            // nothing in the hub, so the join is undone here.
            node.presence.left(&channel, &client);
            return;
        };
        if !presence {
            // Queued before the hub knows the subscriber, so that nothing the
            // hub sends it (a `subscription_count` of its own join, the first
            // live event) can come first.
            send(&client, message::render_subscription_succeeded(&name, "{}"));
        }
        node.hub.subscribe_with(&herald, &client, presence);
        if Arc::strong_count(&herald) < 2 {
            if node.hub.unsubscribe(&herald, client.id) {
                node.presence.left(&herald, &client);
            }
            return;
        }
        let data = match members {
            // Not presence: answered above.
            None => String::new(),
            Some(members) => {
                let mut members = members.unwrap_or_else(|e| {
                    tracing::debug!(channel = %herald, error = %e, "cluster presence unavailable; answering this node's members");
                    node.hub.presence(&herald)
                });
                // A list read before the hub knew this connection (one
                // node's presence is the hub's) still holds its user.
                members.push(client.info());
                message::presence_data(
                    members
                        .iter()
                        .filter(|m| !m.user.is_empty())
                        .map(|m| (m.user.as_str(), std::str::from_utf8(&m.info).unwrap_or(""))),
                )
            }
        };
        if presence {
            send(
                &client,
                message::render_subscription_succeeded(&name, &data),
            );
        }
        if kind.cache {
            let last = history
                .publications
                .last()
                .and_then(|p| app.render.render(&herald, &p.data));
            match last {
                Some(r) => {
                    client.outbox.push(r.frame);
                }
                None => {
                    send(&client, message::render_cache_miss(&name));
                    if let Some(w) = &app.webhooks {
                        w.send(serde_json::json!({"name": "cache_miss", "channel": name}));
                    }
                }
            }
        }
    }
}

impl PusherConn {
    /// Starts the protocol on `client` for `app`: queues
    /// `pusher:connection_established`.
    pub fn new(
        app: Arc<App>,
        client: Arc<Client>,
        node: Arc<Node>,
        settings: &super::PusherConfig,
    ) -> PusherConn {
        node.metrics.opened(Transport::Pusher);
        let socket_id = herald_pusher::socket_id(client.id);
        let c = &node.config;
        let messages = (c.rate_limit > 0).then(|| Bucket::new(c.rate_limit, c.rate_burst));
        send(
            &client,
            message::render_connection_established(&socket_id, settings.activity_timeout),
        );
        PusherConn {
            app,
            client,
            node,
            socket_id,
            user: None,
            subs: Vec::new(),
            events: Bucket::new(settings.client_event_rate, settings.client_event_rate),
            messages,
            max_event_size: settings.max_event_size,
        }
    }

    fn error(&self, code: Option<Code>, msg: &str) {
        send(
            &self.client,
            message::render_error(code.map(Code::code), msg),
        );
    }

    fn subscription_error(&self, channel: &str, kind: &str, error: &str, status: u16) {
        send(
            &self.client,
            message::render_subscription_error(channel, kind, error, status),
        );
    }

    /// Takes `id` (and its `info` JSON text) as the connection's user for
    /// presence, unless it already has one; false when it has another.
    fn identify(&self, id: &str, info: String) -> bool {
        match self.client.identity() {
            Some(i) => *i.user == *id,
            None => {
                self.client.set_identity(Arc::new(Identity {
                    user: Arc::from(id),
                    expires_at: None,
                    grants: Vec::new(),
                    info: Bytes::from(info.into_bytes()),
                }));
                // Channels joined before the identity count it now.
                for s in &self.subs {
                    self.node.hub.count_user(&s.herald, &self.client);
                }
                true
            }
        }
    }

    fn signin(&mut self, auth: &str, user_data: &str) {
        if self.user.is_some() {
            return self.error(None, "already signed in");
        }
        let refused = |why: &str| refuse(&self.client, Code::Unauthorized, why);
        if let Err(e) = sign::verify_user_auth(
            &self.app.config.key,
            self.app.secret(),
            &self.socket_id,
            user_data,
            auth,
        ) {
            return refused(&format!("signin refused: {e}"));
        }
        let Some(user) = message::parse_user(user_data) else {
            return refused("signin refused: user_data needs a non-empty string \"id\"");
        };
        if !channel::valid_name(&user.user_id) {
            return refused("signin refused: the user id must be made of channel characters");
        }
        // A presence identity set before stays; the signed-in user is this
        // connection's user channel either way.
        self.identify(&user.user_id, user.user_info);
        self.user = Some(user.user_id);
        send(&self.client, message::render_signin_success(user_data));
    }

    fn subscribe(&mut self, name: String, auth: Option<String>, channel_data: Option<String>) {
        if let Some(id) = channel::user_channel(&name) {
            if self.user.as_deref() != Some(id) {
                let why = "a user channel is only for the connection signed in as that user";
                return self.subscription_error(&name, "AuthError", why, 403);
            }
        } else if !channel::valid_name(&name) {
            let why = "invalid channel name: 1 to 164 of A-Z a-z 0-9 _ - = @ , . ;";
            return self.subscription_error(&name, "InvalidChannel", why, 400);
        }
        if self.subs.iter().any(|s| *s.pusher == *name) {
            return self.error(None, &format!("already subscribed to {name}"));
        }
        if self.subs.len() >= self.node.config.max_subscriptions {
            let why = "too many subscriptions on this connection";
            return self.subscription_error(&name, "LimitReached", why, 429);
        }
        let kind = ChannelType::of(&name);
        let presence = kind.kind == Kind::Presence;
        if kind.needs_auth() {
            let data = if presence {
                channel_data.as_deref()
            } else {
                None
            };
            if let Err(e) = sign::verify_channel_auth(
                &self.app.config.key,
                self.app.secret(),
                &self.socket_id,
                &name,
                data,
                auth.as_deref(),
            ) {
                return self.subscription_error(&name, "AuthError", &e.to_string(), 401);
            }
        }
        if presence {
            let Some(member) = channel_data.as_deref().and_then(message::parse_member) else {
                let why =
                    "presence channels need channel_data {\"user_id\": ..., \"user_info\"?: ...}";
                return self.subscription_error(&name, "AuthError", why, 400);
            };
            if !self.identify(&member.user_id, member.user_info) {
                let why = "one user per connection: this connection's user is another";
                return self.subscription_error(&name, "AuthError", why, 400);
            }
        }
        let herald: Arc<str> = Arc::from(self.app.herald_channel(&name));
        let held = Arc::downgrade(&herald);
        self.subs.push(Sub {
            pusher: name.clone().into_boxed_str(),
            herald: herald.clone(),
            kind,
        });
        let (node, client, app) = (self.node.clone(), self.client.clone(), self.app.clone());
        // A cache channel asks for the retained publications (a position of
        // no epoch is before all of them) to replay the newest.
        let since = kind.cache.then(herald_proto::Position::default);
        self.node.broker.subscribe(
            &herald,
            since.as_ref(),
            Box::new(move |result: Result<History, BrokerError>| {
                let history = match result {
                    Err(e) => {
                        let why = format!("subscription failed: {e}");
                        let m = message::render_subscription_error(&name, "BrokerError", &why, 503);
                        return send(&client, m);
                    }
                    Ok(h) => h,
                };
                let Some(herald) = held.upgrade() else {
                    // Unsubscribed (or gone) before the broker answered.
                    return;
                };
                node.presence.joined(&herald, &client);
                let joined = Joined {
                    node,
                    client,
                    app,
                    name,
                    channel: herald.to_string(),
                    held,
                    kind,
                    history,
                };
                if !presence {
                    return joined.finish(None);
                }
                // The member list is the cluster's: asked after this
                // connection's own join, which it therefore holds.
                match joined.node.presence.list(&herald) {
                    Completion::Ready(r) => joined.finish(Some(r)),
                    Completion::Pending(list) => {
                        let node = joined.node.clone();
                        node.spawn(Box::pin(async move { joined.finish(Some(list.await)) }));
                    }
                }
            }),
        );
    }

    fn unsubscribe(&mut self, name: &str) {
        if let Some(i) = self.subs.iter().position(|s| *s.pusher == *name) {
            let sub = self.subs.swap_remove(i);
            let herald = sub.herald.to_string();
            drop(sub);
            self.release(&herald);
        }
    }

    fn release(&self, herald: &str) {
        if self.node.hub.unsubscribe(herald, self.client.id) {
            self.node.presence.left(herald, &self.client);
        }
        self.node.broker.unsubscribe(herald);
    }

    fn client_event(&mut self, event: &str, name: &str, data: &str) {
        let Some(sub) = self.subs.iter().find(|s| *s.pusher == *name) else {
            return self.error(
                None,
                &format!("client event on {name}: not subscribed to it"),
            );
        };
        if !sub.kind.allows_client_events() {
            return self.error(
                None,
                "client event rejected: only private and presence channels (not encrypted ones) take client events",
            );
        }
        let (herald, presence) = (sub.herald.clone(), sub.kind.kind == Kind::Presence);
        if data.len() > self.max_event_size {
            let why = format!(
                "client event rejected: data over {} bytes",
                self.max_event_size
            );
            return self.error(Some(Code::ClientEventRejected), &why);
        }
        if !self.events.take(self.node.now_ms()) {
            let why = format!(
                "client event rejected: more than {} per second",
                self.events.rate
            );
            return self.error(Some(Code::ClientEventRejected), &why);
        }
        let raw = serde_json::from_str::<&RawValue>(data).ok();
        let envelope = Envelope {
            event: Cow::Borrowed(event),
            data: raw.map_or(Cow::Borrowed(data), data_string),
            user_id: presence
                .then(|| self.client.user())
                .filter(|u| !u.is_empty())
                .map(Cow::Borrowed),
            except: Some(self.client.id),
        };
        let done = self
            .node
            .broker
            .publish(&herald, Bytes::from(envelope.to_payload()));
        if let Some(w) = &self.app.webhooks {
            let mut e = serde_json::json!({
                "name": "client_event",
                "channel": name,
                "event": event,
                "data": envelope.data,
                "socket_id": self.socket_id,
            });
            if let Some(u) = &envelope.user_id {
                e["user_id"] = serde_json::json!(u);
            }
            w.send(e);
        }
        self.node.metrics.publications.inc();
        if let Completion::Pending(fut) = done {
            self.node.spawn(Box::pin(async move {
                let _ = fut.await;
            }));
        }
    }
}

impl Handler for PusherConn {
    fn on_message(&mut self, payload: &[u8], binary: bool) {
        if let Some(b) = &mut self.messages {
            if !b.take(self.node.now_ms()) {
                self.node
                    .metrics
                    .dropped(herald_core::metrics::Drop::RateLimit, 1);
                return self.error(None, "rate limit exceeded: message dropped");
            }
        }
        if binary {
            return self.error(None, "binary frames are not part of the Pusher protocol");
        }
        match Inbound::parse(payload) {
            Ok(Inbound::Ping) => send(&self.client, message::render_pong()),
            Ok(Inbound::Pong) => {}
            Ok(Inbound::Subscribe {
                channel,
                auth,
                channel_data,
            }) => self.subscribe(channel, auth, channel_data),
            Ok(Inbound::Unsubscribe { channel }) => self.unsubscribe(&channel),
            Ok(Inbound::Signin { auth, user_data }) => self.signin(&auth, &user_data),
            Ok(Inbound::ClientEvent {
                event,
                channel,
                data,
            }) => self.client_event(&event, &channel, data),
            Ok(Inbound::Unknown { event }) => {
                self.error(None, &format!("unsupported event {event:?}"))
            }
            Err(e) => self.error(None, &e.to_string()),
        }
    }

    fn client(&self) -> &Arc<Client> {
        &self.client
    }

    fn node(&self) -> &Arc<Node> {
        &self.node
    }
}

impl Drop for PusherConn {
    fn drop(&mut self) {
        self.node.remove_client(self.client.id);
        for sub in std::mem::take(&mut self.subs) {
            let herald = sub.herald.to_string();
            drop(sub);
            self.release(&herald);
        }
        let m = &self.node.metrics;
        m.closed(Transport::Pusher);
        let code = self
            .client
            .outbox
            .with_queue(|q| q.closing().map(|c| c.code));
        m.disconnected(code.unwrap_or(0));
    }
}

/// The handler of a `/app/{key}` connection: the protocol, or a refusal
/// (unknown key, missing or unsupported protocol version) that sends
/// `pusher:error` and closes with its code.
#[derive(Debug)]
pub enum Endpoint {
    /// A served connection.
    Open(Box<PusherConn>),
    /// A refused one; input is ignored until the close goes out.
    Refused {
        /// The client whose outbox carries the refusal.
        client: Arc<Client>,
        /// Its node.
        node: Arc<Node>,
    },
}

/// Starts a `/app/{key}?protocol=N` connection.
pub fn open(apps: &Apps, node: &Arc<Node>, key: &str, protocol: Option<&str>) -> Endpoint {
    let node = node.clone();
    let refusal = match protocol.map(str::parse::<u32>) {
        None => Some((
            Code::NoProtocol,
            "no protocol version given (?protocol=7)".to_string(),
        )),
        Some(Err(_)) => Some((Code::InvalidVersion, "protocol is not a number".to_string())),
        Some(Ok(v)) if !(5..=7).contains(&v) => Some((
            Code::UnsupportedProtocol,
            format!("unsupported protocol version {v} (5 to 7 are)"),
        )),
        Some(Ok(_)) => None,
    };
    let app = apps.by_key(key).cloned();
    let refusal = refusal.or_else(|| {
        app.is_none().then(|| {
            (
                Code::AppNotFound,
                format!("app key {key} not in this cluster"),
            )
        })
    });
    match (refusal, app) {
        (None, Some(app)) => {
            let client = node.new_rendered_client(app.render.clone());
            Endpoint::Open(Box::new(PusherConn::new(app, client, node, &apps.config)))
        }
        (refusal, _) => {
            let (code, why) = refusal.unwrap_or((Code::AppNotFound, String::new()));
            let client = node.new_client(herald_proto::Encoding::Json);
            node.metrics.refused.inc();
            refuse(&client, code, &why);
            Endpoint::Refused { client, node }
        }
    }
}

impl Handler for Endpoint {
    fn on_message(&mut self, payload: &[u8], binary: bool) {
        if let Endpoint::Open(c) = self {
            c.on_message(payload, binary);
        }
    }

    fn client(&self) -> &Arc<Client> {
        match self {
            Endpoint::Open(c) => &c.client,
            Endpoint::Refused { client, .. } => client,
        }
    }

    fn node(&self) -> &Arc<Node> {
        match self {
            Endpoint::Open(c) => &c.node,
            Endpoint::Refused { node, .. } => node,
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Endpoint::Refused { client, node } = self {
            node.remove_client(client.id);
        }
    }
}
