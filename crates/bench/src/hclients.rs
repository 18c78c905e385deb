//! A set of Herald-protocol clients on the engine: opening them at a bounded
//! pace, the session setup every Herald client goes through (`connect`, then
//! its `subscribe`s, each awaited as docs/protocol.md §5 asks), and turning
//! what arrives afterwards into [`Incoming`] for the scenario.
//!
//! Shared by `fanout`, `bots`, `stream` and `idle` so each of them is only
//! its own schedule and bookkeeping. Setup allocates (channel names); the
//! steady state does not.

use std::net::IpAddr;

use herald_proto::Encoding;
use herald_ws::Message;

use crate::engine::{CloseReason, ConnId, Io};
use crate::herald_wire::{self, Incoming};
use crate::target::Target;
use crate::BenchError;

/// The id of the `connect` command.
const CONNECT_ID: u32 = 1;
/// Subscribe commands use ids from here on.
const SUBSCRIBE_ID: u32 = 2;
/// Ids below this belong to the setup; scenarios use ids from here on.
pub const FIRST_SCENARIO_ID: u32 = 1 << 20;

/// Where a client is in its setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not yet asked to connect.
    Queued,
    /// TCP and WebSocket upgrade in progress.
    Upgrading,
    /// `connect` sent.
    Connecting,
    /// `subscribe` number `k` sent.
    Subscribing(usize),
    /// Set up; the scenario may use it.
    Ready,
    /// Gone.
    Closed,
}

/// One client.
#[derive(Debug)]
pub struct HClient {
    /// Its engine connection (valid once past `Queued`).
    pub conn: ConnId,
    /// Its setup state.
    pub state: State,
    /// The channels it subscribes to during setup.
    pub channels: Vec<String>,
}

/// The clients of a scenario.
pub struct HeraldClients {
    /// The encoding every client speaks.
    pub enc: Encoding,
    target: Target,
    local_addrs: Vec<IpAddr>,
    concurrency: usize,
    /// All clients; a client's tag is its index here.
    pub clients: Vec<HClient>,
    queued: usize,
    next_queued: usize,
    in_setup: usize,
    ready: usize,
    scratch: Vec<u8>,
    /// Whether to send `connect` at all (false for the shootout endpoint).
    handshake_only: bool,
}

impl HeraldClients {
    /// Clients of `target` (its subprotocol is set from `enc`).
    pub fn new(
        target: &Target,
        enc: Encoding,
        local_addrs: Vec<IpAddr>,
        concurrency: usize,
    ) -> HeraldClients {
        HeraldClients {
            enc,
            target: target.clone().with_protocols(&[enc.subprotocol()]),
            local_addrs,
            concurrency: concurrency.max(1),
            clients: Vec::new(),
            queued: 0,
            next_queued: 0,
            in_setup: 0,
            ready: 0,
            scratch: Vec::with_capacity(256),
            handshake_only: false,
        }
    }

    /// Plain WebSocket clients that send nothing after the upgrade (for
    /// idle connections to endpoints that do not speak Herald's protocol).
    pub fn handshake_only(mut self) -> HeraldClients {
        self.handshake_only = true;
        self.target.protocols.clear();
        self
    }

    /// Queues a client that will subscribe to `channels`; returns its index.
    pub fn add(&mut self, channels: Vec<String>) -> usize {
        self.clients.push(HClient {
            conn: usize::MAX,
            state: State::Queued,
            channels,
        });
        self.queued += 1;
        self.clients.len() - 1
    }

    /// Clients fully set up.
    pub fn ready(&self) -> usize {
        self.ready
    }

    /// True when every queued client is set up.
    pub fn all_ready(&self) -> bool {
        self.ready == self.clients.len()
    }

    /// Starts connects up to the concurrency limit.
    pub fn tick(&mut self, io: &mut Io) -> Result<(), BenchError> {
        while self.queued > 0 && self.in_setup < self.concurrency {
            let i = self.next_queued;
            let local = match self.local_addrs.len() {
                0 => None,
                n => self.local_addrs.get(i % n).copied(),
            };
            let conn = io.connect(&self.target, local, i as u64).map_err(|e| {
                BenchError::Client(format!(
                    "cannot open client {} of {}: {e}",
                    i + 1,
                    self.clients.len()
                ))
            })?;
            let c = self
                .clients
                .get_mut(i)
                .ok_or(BenchError::Internal("queued client missing"))?;
            c.conn = conn;
            c.state = State::Upgrading;
            self.queued -= 1;
            self.next_queued += 1;
            self.in_setup += 1;
        }
        Ok(())
    }

    /// The upgrade of client `tag` completed (the server chose `protocol`):
    /// send `connect`. A server that did not accept the offered subprotocol
    /// would read our frames in the wrong encoding, so that is fatal.
    pub fn on_open(
        &mut self,
        io: &mut Io,
        tag: u64,
        protocol: Option<&str>,
    ) -> Result<(), BenchError> {
        let enc = self.enc;
        let handshake_only = self.handshake_only;
        if !handshake_only && protocol != Some(enc.subprotocol()) {
            return Err(BenchError::Client(format!(
                "client {}: the server did not accept subprotocol {} (answered {:?}); is this Herald's /ws endpoint?",
                tag + 1,
                enc.subprotocol(),
                protocol
            )));
        }
        let c = self.client_mut(tag)?;
        if handshake_only {
            c.state = State::Ready;
            self.in_setup -= 1;
            self.ready += 1;
            return Ok(());
        }
        c.state = State::Connecting;
        let conn = c.conn;
        self.scratch.clear();
        herald_wire::connect(enc, CONNECT_ID, &mut self.scratch);
        io.send(conn, herald_wire::opcode(enc), &self.scratch);
        Ok(())
    }

    fn client_mut(&mut self, tag: u64) -> Result<&mut HClient, BenchError> {
        usize::try_from(tag)
            .ok()
            .and_then(|i| self.clients.get_mut(i))
            .ok_or(BenchError::Internal("message for an unknown client"))
    }

    /// A message for client `tag`. Setup replies are consumed here;
    /// anything else is returned for the scenario. Errors during setup, and
    /// messages that cannot be read, are fatal.
    pub fn on_message<'m>(
        &mut self,
        io: &mut Io,
        tag: u64,
        msg: Message<'m>,
    ) -> Result<Option<Incoming<'m>>, BenchError> {
        let data = match msg {
            Message::Text(d) | Message::Binary(d) => d,
            _ => return Ok(None),
        };
        let enc = self.enc;
        if self.handshake_only {
            return Ok(Some(Incoming::Other));
        }
        let incoming = herald_wire::classify(enc, data).map_err(|e| {
            BenchError::Client(format!("client {}: unreadable message: {e}", tag + 1))
        })?;
        let state = self.client_mut(tag)?.state;
        match (state, incoming) {
            (State::Connecting, Incoming::Reply { id: CONNECT_ID }) => {
                self.next_subscribe(io, tag, 0)?;
                Ok(None)
            }
            (State::Subscribing(k), Incoming::Reply { id }) if id == SUBSCRIBE_ID + k as u32 => {
                self.next_subscribe(io, tag, k + 1)?;
                Ok(None)
            }
            (State::Connecting | State::Subscribing(_), Incoming::Error { code, .. }) => {
                let what = match state {
                    State::Connecting => "connect".to_owned(),
                    State::Subscribing(k) => format!(
                        "subscribe to {:?}",
                        self.client_mut(tag)?
                            .channels
                            .get(k)
                            .cloned()
                            .unwrap_or_default()
                    ),
                    _ => String::new(),
                };
                Err(BenchError::Client(format!(
                    "client {}: the server refused {what} (error {code})",
                    tag + 1
                )))
            }
            (_, other) => Ok(Some(other)),
        }
    }

    /// Sends subscribe `k` of client `tag`, or marks it ready.
    fn next_subscribe(&mut self, io: &mut Io, tag: u64, k: usize) -> Result<(), BenchError> {
        let enc = self.enc;
        let i = usize::try_from(tag).map_err(|_| BenchError::Internal("bad tag"))?;
        let Some(c) = self.clients.get_mut(i) else {
            return Err(BenchError::Internal("message for an unknown client"));
        };
        let conn = c.conn;
        match c.channels.get(k) {
            Some(channel) => {
                c.state = State::Subscribing(k);
                self.scratch.clear();
                let id = SUBSCRIBE_ID + k as u32;
                herald_wire::subscribe(enc, id, channel, &mut self.scratch);
                io.send(conn, herald_wire::opcode(enc), &self.scratch);
            }
            None => {
                c.state = State::Ready;
                self.in_setup -= 1;
                self.ready += 1;
            }
        }
        Ok(())
    }

    /// Client `tag` went away: always fatal for a benchmark.
    pub fn on_close(&mut self, tag: u64, why: CloseReason) -> BenchError {
        if let Ok(c) = self.client_mut(tag) {
            c.state = State::Closed;
        }
        BenchError::Client(format!(
            "client {} of {} lost its connection: {why}",
            tag + 1,
            self.clients.len()
        ))
    }
}

/// A short random name for this run, so channels of concurrent or earlier
/// runs against the same server never mix.
pub fn run_id() -> String {
    let mut rng = fastrand::Rng::new();
    (0..6).map(|_| char::from(b'a' + rng.u8(0..26))).collect()
}
