//! The transports: one folder each, each owning every path its requests take
//! (Herald's own lean HTTP/1.1 path and, where it has one, hyper's).
//!
//! - [`ws`]: WebSocket upgrades (`/ws`, `/shootout`, `/app/{key}`, the test
//!   echo), the WebSocket framing, the shootout protocol.
//! - [`tcp`]: the raw TCP transport (length-prefixed binary frames).
//! - [`sse`]: Server-Sent Events (`GET /sse`), on hyper (HTTP/2, unusual
//!   requests) or on its own driver ([`sse::conn`]).
//! - [`poll`]: HTTP long-polling (`/poll`), on hyper or on the lean
//!   keep-alive loop ([`poll::h1`]).
//!
//! A transport only moves frames: each adapts its socket to the
//! transport-neutral [`herald_core::Session`] (or the shootout, echo or
//! Pusher handler) and drains the client's outbox. Each takes its own slice
//! of state ([`Drivers`] for the socket transports, [`sse::Streams`],
//! [`poll::Polls`]), built once by the composition root (`crate::server`);
//! none of them sees the others' state or the router's.

pub mod poll;
pub mod sse;
pub mod tcp;
pub mod ws;

use crate::conn::{AsyncIo, Connection, Handler, Io, Wire};
use crate::hibernate::Parker;
use crate::limits::ConnectDeadlines;
use herald_core::{Client, Node};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_util::task::TaskTracker;

/// A byte stream an HTTP connection can run over: a plain socket or TLS.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {
    /// The connection driver's view of this stream.
    type Io: Io;
    /// Hands the stream to the connection driver.
    fn into_io(self) -> Self::Io;
    /// Lets the connection hibernate when idle, where the stream can
    /// ([`crate::hibernate`]: plain sockets; TLS keeps its own state).
    fn hibernating<H: Handler, W: Wire>(
        conn: Connection<H, W, Self::Io>,
        _parker: &Option<Arc<Parker>>,
    ) -> Connection<H, W, Self::Io> {
        conn
    }
    /// The peer's address, where the stream knows it (the admin login's
    /// per-address limit).
    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        None
    }
}

impl Stream for TcpStream {
    type Io = TcpStream;
    fn into_io(self) -> TcpStream {
        self
    }

    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        self.peer_addr().ok().map(|a| a.ip())
    }

    fn hibernating<H: Handler, W: Wire>(
        conn: Connection<H, W, TcpStream>,
        parker: &Option<Arc<Parker>>,
    ) -> Connection<H, W, TcpStream> {
        conn.hibernating_at(parker)
    }
}

impl Stream for tokio_rustls::server::TlsStream<TcpStream> {
    type Io = AsyncIo<Self>;
    fn into_io(self) -> AsyncIo<Self> {
        AsyncIo(self)
    }

    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        self.get_ref().0.peer_addr().ok().map(|a| a.ip())
    }
}

/// What starting a socket connection's driver takes (WebSocket, raw TCP,
/// Pusher, shootout): the node, the shutdown tracker, the parking place of
/// idle connections, the `connect` deadlines and the frame size limit.
#[derive(Debug)]
pub struct Drivers {
    /// The node: hub, broker, sessions.
    pub node: Arc<Node>,
    /// Tracks connection drivers for shutdown.
    pub tracker: TaskTracker,
    /// Where idle plain-TCP connections hibernate (`None`: they never do).
    pub parker: Option<Arc<Parker>>,
    /// Clients that must still send `connect` (closed with 3003 if late).
    pub deadlines: ConnectDeadlines,
    /// Largest message accepted (`max_message_size`).
    pub max_message_size: usize,
    /// How long a client has to send `connect` (`handshake_timeout`).
    pub handshake_timeout: Duration,
}

impl Drivers {
    /// Starts `conn`'s driver on the tracker, hibernating when idle where
    /// the stream `S` can.
    pub fn spawn<S: Stream, H: Handler, W: Wire>(&self, conn: Connection<H, W, S::Io>) {
        self.tracker.spawn(S::hibernating(conn, &self.parker));
    }

    /// Closes `client` with 3003 unless it sends `connect` within the
    /// handshake timeout.
    pub fn expect_connect(&self, client: &Arc<Client>) {
        // +1: the node clock counts whole seconds, so this gives at least the full timeout.
        let deadline = self.node.now() + self.handshake_timeout.as_secs() as u32 + 1;
        self.deadlines.add(deadline, client);
    }
}
