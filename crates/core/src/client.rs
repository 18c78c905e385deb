//! One connected client as the hub sees it: an id, the encoding it speaks and
//! its outbox. Kept small: there may be hundreds of thousands of these.

use crate::auth::Identity;
use crate::outbox::{Frame, Outbox, PushOutcome};
use crate::render::Render;
use bytes::Bytes;
use herald_proto::{ClientInfo, Encoding};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

/// A connected client. Shared (`Arc`) between its connection driver, the hub's
/// subscriber lists and the node's registry.
#[derive(Debug)]
pub struct Client {
    /// Unique within this node's lifetime.
    pub id: u64,
    /// The encoding its messages use.
    pub encoding: Encoding,
    /// Whether publications reach it unrendered ([`Frame::Publication`]) for
    /// its transport to render per stream (SSE), instead of as encoded pushes.
    pub raw: bool,
    /// Its WebSocket negotiated permessage-deflate with a full window:
    /// publication pushes of at least the hub's threshold reach it
    /// compressed ([`Frame::DeflatedText`](crate::outbox::Frame::DeflatedText)),
    /// compressed once per publication for all such clients (see
    /// [`Deflater`](crate::outbox::Deflater)). A bool in existing padding:
    /// the client stays 112 bytes (decision 0010).
    pub deflate: bool,
    /// Set for clients of another protocol (Pusher): publications and
    /// join/leave reach it rendered by this, shared with every client that
    /// holds the same renderer ([`crate::render`]). Boxed, so that the field
    /// is one pointer for every client (a Pusher client pays the 16-byte
    /// box): with the fat `Arc` a client was 128 bytes, and an
    /// `Arc<Client>` fell in jemalloc's 160-byte class (decision 0010).
    pub render: Option<Box<Arc<dyn Render>>>,
    /// Where everything sent to it goes.
    pub outbox: Outbox,
    /// Node-clock second of the last byte received from it (heartbeat check).
    last_seen: AtomicU32,
    /// Who it is, set once `connect` succeeds; unset means "not connected
    /// yet". A thin pointer shared with the session: 16 bytes per client.
    identity: OnceLock<Arc<Identity>>,
}

impl Client {
    /// A new client with an empty outbox bounded at `queue_bytes`.
    pub fn new(id: u64, encoding: Encoding, queue_bytes: usize, now: u32) -> Client {
        Client {
            id,
            encoding,
            raw: false,
            deflate: false,
            render: None,
            outbox: Outbox::new(queue_bytes),
            last_seen: AtomicU32::new(now),
            identity: OnceLock::new(),
        }
    }

    /// A client that receives publications unrendered (see [`Client::raw`]).
    pub fn new_raw(id: u64, queue_bytes: usize, now: u32) -> Client {
        Client {
            raw: true,
            ..Client::new(id, Encoding::Json, queue_bytes, now)
        }
    }

    /// This client, receiving compressed publication pushes when `on`
    /// (see [`Client::deflate`]).
    #[must_use]
    pub fn with_deflate(self, on: bool) -> Client {
        Client {
            deflate: on,
            ..self
        }
    }

    /// A client of another protocol, whose pushes `render` renders.
    pub fn new_rendered(id: u64, render: Arc<dyn Render>, queue_bytes: usize, now: u32) -> Client {
        Client {
            render: Some(Box::new(render)),
            ..Client::new(id, Encoding::Json, queue_bytes, now)
        }
    }

    /// The client id as shown on the wire (presence, connect reply).
    pub fn wire_id(&self) -> String {
        format!("{:x}", self.id)
    }

    /// Who it is, for presence and join/leave pushes (`user` is empty for an
    /// anonymous client).
    pub fn info(&self) -> ClientInfo {
        ClientInfo {
            client: self.wire_id(),
            user: self.user().to_string(),
            info: self
                .identity
                .get()
                .map_or_else(Bytes::new, |i| i.info.clone()),
        }
    }

    /// Records a successful `connect` (a second call is ignored).
    pub fn set_identity(&self, identity: Arc<Identity>) {
        let _ = self.identity.set(identity);
    }

    /// Who it is, once connected.
    pub fn identity(&self) -> Option<&Arc<Identity>> {
        self.identity.get()
    }

    /// Its user id (empty when anonymous or not yet connected).
    pub fn user(&self) -> &str {
        self.identity.get().map_or("", |i| &i.user)
    }

    /// Whether `connect` succeeded.
    pub fn is_connected(&self) -> bool {
        self.identity.get().is_some()
    }

    /// Records activity at node-clock second `now`.
    pub fn touch(&self, now: u32) {
        self.last_seen.store(now, Ordering::Relaxed);
    }

    /// Node-clock second of the last activity.
    pub fn last_seen(&self) -> u32 {
        self.last_seen.load(Ordering::Relaxed)
    }

    /// Queues one encoded protocol message in the frame type of its encoding.
    pub fn send(&self, msg: Bytes) -> PushOutcome {
        self.outbox.push(match self.encoding {
            Encoding::Json => Frame::Text(msg),
            Encoding::Binary => Frame::Binary(msg),
        })
    }
}

/// An `Arc<Client>` (two counters and the client) fits jemalloc's 128-byte
/// class: 10,000 idle clients hold 1.25 MiB, not 1.56 (decision 0010).
const _: () = assert!(std::mem::size_of::<Client>() <= 112);

#[cfg(test)]
mod tests {
    use super::*;

    /// What an idle client holds besides its 112 bytes: nothing.
    #[test]
    fn a_client_fits_the_128_byte_class() {
        println!(
            "Client: {} bytes, Outbox: {} bytes",
            std::mem::size_of::<Client>(),
            std::mem::size_of::<Outbox>()
        );
        assert!(std::mem::size_of::<Client>() + 16 <= 128);
        let c = Client::new(1, Encoding::Json, 1024, 0);
        assert_eq!(c.outbox.max_bytes(), 1024);
        assert_eq!(c.outbox.with_queue(|q| q.frames.capacity()), 0);
    }
}
