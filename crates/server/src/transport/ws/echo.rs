//! A test-only WebSocket echo endpoint on `/echo`, served only with the
//! hidden `herald serve --test-echo-route` flag (off by default).
//!
//! Why it exists: conformance tools such as Autobahn|Testsuite's
//! `fuzzingclient` (`tests/outside/autobahn.test.sh`) need an endpoint that
//! echoes every message back, text as text and binary as binary. Herald's own
//! protocol on `/ws` answers JSON commands, so it cannot be probed that way.
//! This handler is the whole difference: the upgrade goes through the same
//! `upgrade.rs` handshake, origin check and limits as `/ws`, and the frames
//! through the same [`WsWire`](super::WsWire) and connection driver
//! (`conn.rs`), so what the tool checks is the code that serves real clients.
//!
//! It is hidden from `--help` and needs the flag because it has no auth and
//! answers anyone with their own bytes: useful to a test, nothing to a
//! deployment. Echoes go through the client's bounded outbox like every other
//! frame, so `--client-queue-bytes` must be at least `--max-message-size` for
//! the largest messages to come back.

use crate::conn::Handler;
use bytes::Bytes;
use herald_core::outbox::Frame;
use herald_core::{Client, Node};
use std::sync::Arc;

/// One `/echo` connection.
#[derive(Debug)]
pub struct EchoConn {
    client: Arc<Client>,
    node: Arc<Node>,
}

impl EchoConn {
    /// An echo handler draining `client`'s outbox.
    pub fn new(client: Arc<Client>, node: Arc<Node>) -> EchoConn {
        EchoConn { client, node }
    }
}

impl Handler for EchoConn {
    fn on_message(&mut self, payload: &[u8], binary: bool) {
        let payload = Bytes::copy_from_slice(payload);
        self.client.outbox.push(if binary {
            Frame::Binary(payload)
        } else {
            Frame::Text(payload)
        });
    }

    fn client(&self) -> &Arc<Client> {
        &self.client
    }

    fn node(&self) -> &Arc<Node> {
        &self.node
    }
}

impl Drop for EchoConn {
    fn drop(&mut self) {
        self.node.remove_client(self.client.id);
    }
}
