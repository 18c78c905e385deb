//! The websocket-shootout benchmark protocol on `/shootout`, so the field's
//! standard broadcast benchmark runs against Herald unchanged.
//!
//! All shootout connections form one broadcast group. A broadcast is copied out
//! of the read buffer once and the same bytes are queued to every member, in
//! whatever mode each member speaks (the frame is forwarded as it came).
//!
//! **The sender's `broadcastResult` promises what the reference servers
//! promise** (Go x/net and uWebSockets write the broadcast to every socket
//! before they answer): it is sent only once every member's connection has
//! handed its copy to the kernel, or has closed. The copies share one
//! [`Tracked`] frame whose last drop queues the result, so the shootout's
//! round trip measures a whole broadcast, and a client that has its result
//! knows every other member's copy is on its way. One allocation per
//! broadcast, none per recipient.

use crate::conn::Handler;
use bytes::{Bytes, BytesMut};
use herald_core::outbox::{Frame, Tracked};
use herald_core::{Client, Node};
use herald_proto::shootout::{self, ShootoutKind};
use indexmap::IndexMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Every connected shootout client.
#[derive(Debug, Default)]
pub struct ShootoutGroup {
    members: Mutex<IndexMap<u64, Arc<Client>>>,
}

impl ShootoutGroup {
    fn lock(&self) -> MutexGuard<'_, IndexMap<u64, Arc<Client>>> {
        self.members.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `payload` to every member, then `result(members)` to `sender`
    /// once every member's copy is written or dropped with its connection.
    fn broadcast(
        &self,
        payload: Bytes,
        binary: bool,
        sender: &Arc<Client>,
        result: impl FnOnce(usize) -> Frame,
    ) {
        let members = self.lock();
        let tracked = Arc::new(Tracked::new(payload, binary, sender, result(members.len())));
        for c in members.values() {
            c.outbox.push(Frame::Tracked(tracked.clone()));
        }
        drop(members);
        // If every copy is already written, this queues the result.
        drop(tracked);
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nobody is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One shootout connection.
#[derive(Debug)]
pub struct ShootoutConn {
    group: Arc<ShootoutGroup>,
    client: Arc<Client>,
    node: Arc<Node>,
}

impl ShootoutConn {
    /// Joins `client` to the group.
    pub fn new(group: Arc<ShootoutGroup>, client: Arc<Client>, node: Arc<Node>) -> ShootoutConn {
        group.lock().insert(client.id, client.clone());
        node.metrics
            .opened(herald_core::metrics::Transport::Shootout);
        ShootoutConn {
            group,
            client,
            node,
        }
    }

    fn reject(&self, why: &str) {
        let mut out = BytesMut::new();
        out.extend_from_slice(b"{\"type\":\"error\",\"payload\":");
        out.extend_from_slice(&serde_json::to_vec(why).unwrap_or_else(|_| b"\"\"".to_vec()));
        out.extend_from_slice(b"}");
        self.client.outbox.push(Frame::Text(out.freeze()));
    }
}

impl Handler for ShootoutConn {
    fn on_message(&mut self, payload: &[u8], binary: bool) {
        if binary {
            match shootout::parse_binary(payload) {
                Ok(m) => match m.kind {
                    ShootoutKind::Echo => {
                        self.client
                            .outbox
                            .push(Frame::Binary(Bytes::copy_from_slice(payload)));
                    }
                    ShootoutKind::Broadcast => {
                        let mut result = BytesMut::from(payload);
                        result[0] = b'r';
                        let result = Frame::Binary(result.freeze());
                        self.group.broadcast(
                            Bytes::copy_from_slice(payload),
                            true,
                            &self.client,
                            |_| result,
                        );
                    }
                    ShootoutKind::BroadcastResult => self.reject("unexpected broadcastResult"),
                },
                Err(e) => self.reject(&e.to_string()),
            }
            return;
        }
        match shootout::parse_json(payload) {
            Ok(m) => match m.kind {
                ShootoutKind::Echo => {
                    self.client
                        .outbox
                        .push(Frame::Text(Bytes::copy_from_slice(payload)));
                }
                ShootoutKind::Broadcast => {
                    let result = |n: usize| {
                        let mut out = BytesMut::with_capacity(m.payload.len() + 64);
                        shootout::write_json_broadcast_result(m.payload, n as u64, &mut out);
                        Frame::Text(out.freeze())
                    };
                    self.group.broadcast(
                        Bytes::copy_from_slice(payload),
                        false,
                        &self.client,
                        result,
                    );
                }
                ShootoutKind::BroadcastResult => self.reject("unexpected broadcastResult"),
            },
            Err(e) => self.reject(&e.to_string()),
        }
    }

    fn client(&self) -> &Arc<Client> {
        &self.client
    }

    fn node(&self) -> &Arc<Node> {
        &self.node
    }
}

impl Drop for ShootoutConn {
    fn drop(&mut self) {
        self.group.lock().swap_remove(&self.client.id);
        self.node.remove_client(self.client.id);
        let m = &self.node.metrics;
        m.closed(herald_core::metrics::Transport::Shootout);
        let code = self
            .client
            .outbox
            .with_queue(|q| q.closing().map(|c| c.code));
        m.disconnected(code.unwrap_or(0));
    }
}
