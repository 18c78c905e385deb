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

use crate::broker::{BrokerError, Completion, History};
use crate::channel;
use crate::client::Client;
use crate::node::Node;
use herald_proto::{
    Command, DecodeError, Encoding, ErrorCode, Position, Reply, Request, ServerMsg,
};
use std::sync::Arc;

/// One connection's protocol state.
#[derive(Debug)]
pub struct Session {
    node: Arc<Node>,
    client: Arc<Client>,
    connected: bool,
    subscriptions: Vec<Arc<str>>,
}

impl Session {
    /// A fresh session for a client created by [`Node::new_client`].
    pub fn new(node: Arc<Node>, client: Arc<Client>) -> Session {
        Session {
            node,
            client,
            connected: false,
            subscriptions: Vec::new(),
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
        match self.client.encoding.decode_request(payload) {
            Ok(req) => self.handle(req),
            Err(e) => self.decode_error(&e),
        }
    }

    /// Answers a message that could not be decoded.
    pub fn decode_error(&self, e: &DecodeError) {
        self.error(e.id(), e.code(), &e.to_string());
    }

    /// Handles one decoded request.
    pub fn handle(&mut self, req: Request) {
        let id = req.id;
        match req.cmd {
            Command::Ping => self.reply(id, Reply::Ping),
            Command::Connect { .. } if self.connected => {
                self.error(id, ErrorCode::AlreadyConnected, "already connected")
            }
            Command::Connect { .. } => {
                // Tokens are checked once auth is configured (a later stage);
                // until then every client is anonymous.
                self.connected = true;
                self.reply(
                    id,
                    Reply::Connect {
                        client: self.client.wire_id(),
                        version: self.node.config.version.clone(),
                        ping_interval: self.node.config.ping_interval,
                    },
                );
            }
            _ if !self.connected => self.error(id, ErrorCode::Unauthorized, "send connect first"),
            Command::Subscribe {
                channel, recover, ..
            } => self.subscribe(id, channel, recover),
            Command::Unsubscribe { channel } => self.unsubscribe(id, &channel),
            Command::Publish { channel, data } => {
                if let Err(code) = channel::validate(&channel) {
                    return self.error(id, code, "invalid channel name");
                }
                let done = self.node.broker.publish(&channel, data);
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
                if let Err(code) = channel::validate(&channel) {
                    return self.error(id, code, "invalid channel name");
                }
                let done = self
                    .node
                    .broker
                    .history(&channel, since.as_ref(), limit as usize);
                self.complete(id, done, |r| {
                    r.map(|h| Reply::History {
                        epoch: h.top.epoch,
                        offset: h.top.offset,
                        publications: h.publications,
                    })
                });
            }
            Command::Presence { channel } => {
                if let Err(code) = channel::validate(&channel) {
                    return self.error(id, code, "invalid channel name");
                }
                let clients = self.node.hub.presence(&channel);
                self.reply(id, Reply::Presence { clients });
            }
        }
    }

    fn subscribe(&mut self, id: u32, channel: String, recover: Option<Position>) {
        if let Err(code) = channel::validate(&channel) {
            return self.error(id, code, "invalid channel name");
        }
        if self.subscriptions.iter().any(|c| **c == *channel) {
            return self.error(id, ErrorCode::AlreadySubscribed, "already subscribed");
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
        let hub = self.node.hub.clone();
        let client = self.client.clone();
        let asked_recovery = recover.is_some();
        let key = name.clone();
        self.node.broker.subscribe(
            &key,
            recover.as_ref(),
            Box::new(move |result: Result<History, BrokerError>| match result {
                Ok(h) => {
                    hub.subscribe(&name, &client);
                    let recovered = asked_recovery && h.complete;
                    send(
                        &client,
                        id,
                        Ok(Reply::Subscribe {
                            epoch: h.top.epoch,
                            offset: h.top.offset,
                            recovered,
                            publications: h.publications,
                        }),
                    );
                }
                Err(e) => send(&client, id, Err(e)),
            }),
        );
    }

    fn unsubscribe(&mut self, id: u32, channel: &str) {
        let Some(i) = self.subscriptions.iter().position(|c| **c == *channel) else {
            return self.error(id, ErrorCode::NotSubscribed, "not subscribed");
        };
        self.subscriptions.swap_remove(i);
        self.node.hub.unsubscribe(channel, self.client.id);
        self.reply(id, Reply::Unsubscribe);
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

impl Drop for Session {
    fn drop(&mut self) {
        for channel in self.subscriptions.drain(..) {
            self.node.hub.unsubscribe(&channel, self.client.id);
        }
        self.node.remove_client(self.client.id);
    }
}
