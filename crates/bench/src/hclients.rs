//! A set of Herald-protocol clients on the engine, over any of Herald's
//! transports: opening them at a bounded pace, the session setup every
//! Herald client goes through (`connect`, then its `subscribe`s, each awaited
//! as docs/protocol.md §5 asks), and turning what arrives afterwards into
//! [`Event`]s for the scenario.
//!
//! Transports ([`ClientKind`]):
//! - WebSocket and raw TCP: the same commands, framed by the engine.
//! - SSE: `GET /sse?channel=…`; the stream is the subscription. Positions
//!   come from the events' `id:`; a reconnect sends `Last-Event-ID`.
//! - Long-polling: `POST /poll` opens a session, `POST /poll/<id>` sends
//!   `connect` and the `subscribe`s in one batch, then `GET /poll/<id>` in a
//!   loop, one request at a time on one keep-alive connection; each answer
//!   (a JSON array) is split in place and read like WebSocket messages.
//! - The HTTP publish API (`POST /api/publish`), for publishers only: no
//!   session (a `GET /healthz` at once, as servers drop connections whose
//!   first request is late); each answer is reported as a reply (2xx) or
//!   an error.
//! - The Pusher Channels protocol (`/app/KEY?protocol=7`), for subscribers
//!   only: the server speaks first (`pusher:connection_established`), then
//!   each `pusher:subscribe` is awaited like Herald's `subscribe`. Pusher
//!   has no positions, so these clients never recover.
//!
//! A client created *resilient* survives losing its connection: it
//! reconnects (to the next URL of the list, after a short back-off) and,
//! when it has a position in its channel, subscribes with `recover` from it
//! (SSE: `Last-Event-ID`), so the server sends what it missed. The scenario
//! can also drop and re-establish a client on purpose ([`HeraldClients::churn`]).
//! Positions are tracked for clients of one channel (every scenario's
//! subscribers), from the subscribe reply and each publication's offset.
//!
//! Shared by `fanout`, `bots`, `stream` and `idle` so each of them is only
//! its own schedule and bookkeeping; [`crate::scenario`] connects their sets
//! to the engine. Setup allocates (channel names,
//! decoded subscribe replies); the steady state does not.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use herald_proto::{Encoding, Push, Reply, ServerMsg};
use herald_ws::{Message, OpCode};

use crate::clock;
use crate::engine::{CloseReason, ConnId, Framing, HttpMsg, Io};
use crate::herald_wire::{self, Incoming};
use crate::http1;
use crate::target::Target;
use crate::BenchError;

/// The id of the `connect` command.
const CONNECT_ID: u32 = 1;
/// Subscribe commands use ids from here on.
const SUBSCRIBE_ID: u32 = 2;
/// Ids below this belong to the setup; scenarios use ids from here on.
pub const FIRST_SCENARIO_ID: u32 = 1 << 20;

/// How the clients reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// WebSocket, subprotocol from the encoding.
    Ws,
    /// Raw TCP, binary encoding.
    Tcp,
    /// Server-Sent Events (receive only, JSON).
    Sse,
    /// HTTP long-polling (JSON).
    Poll,
    /// The HTTP publish API (publishers only).
    Api,
    /// Pusher Channels protocol 7 over WebSocket (`/app/KEY?protocol=7`),
    /// subscribers only: wait for `pusher:connection_established`, then
    /// `pusher:subscribe` each channel (Pusher names) and wait for
    /// `pusher_internal:subscription_succeeded`; every other event that is
    /// not `pusher:`/`pusher_internal:` is a publication. No positions, so
    /// no recovery.
    Pusher,
}

/// Where a client is in its setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Waiting for its turn to connect.
    Queued,
    /// TCP connect, WebSocket upgrade, or HTTP session setup in progress.
    Upgrading,
    /// `connect` sent (Pusher: waiting for `pusher:connection_established`).
    Connecting,
    /// `subscribe` number `k` sent.
    Subscribing(usize),
    /// Set up; the scenario may use it.
    Ready,
    /// Lost or dropped; a reconnect is scheduled.
    Waiting,
    /// Gone.
    Closed,
}

/// A client's position in its channel (docs/protocol.md §5b).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The channel's epoch.
    pub epoch: String,
    /// The offset of the last publication received (or of the subscribe reply).
    pub offset: u64,
}

/// What a client received, for the scenario.
#[derive(Debug)]
pub enum Event<'a> {
    /// A publication. `data` is where the stamp is (for JSON over
    /// WebSocket or polling, the whole message).
    Pub {
        /// Where the stamp is.
        data: &'a [u8],
        /// Delivered by recovery (in a subscribe reply).
        recovered: bool,
        /// On a resumed SSE stream (which does not mark recovered events):
        /// when the resuming request was sent (Unix ns), else 0.
        resumed_ns: i64,
    },
    /// A successful reply to command `id` (API publishers: id 0).
    Reply {
        /// The command's id.
        id: u32,
        /// The whole message, for scenarios that read a reply's fields
        /// (a game's `sit` and `lobby` replies); empty for API publishers.
        msg: &'a [u8],
    },
    /// An error answer (API publishers: the HTTP status as the code).
    Error {
        /// The command's id (0: not attributable; API publishers: 0).
        id: u32,
        /// The error code.
        code: u16,
    },
    /// A recovering subscribe could not close the gap (`recovered: false`,
    /// or SSE's `unrecovered` notice).
    Unrecovered,
    /// Anything else (join, leave, disconnect, and the game pushes
    /// `game`, `lobby_update`, `seat`, `unseat`): the whole message.
    Other {
        /// The whole message.
        msg: &'a [u8],
    },
    /// A message that could not be read, from a set up client of a
    /// [`HeraldClients::lenient`] set (the others fail the run instead).
    Unreadable,
}

/// Long-polling state of one client.
#[derive(Debug, Default)]
struct PollState {
    session: String,
    /// A session of an earlier connection, deleted before opening a new one.
    old: Option<String>,
    step: PollStep,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum PollStep {
    #[default]
    Deleting,
    Opening,
    Sending,
    Polling,
}

/// One client.
#[derive(Debug)]
pub struct HClient {
    /// Its engine connection (valid while connected).
    pub conn: ConnId,
    /// Its setup state.
    pub state: State,
    /// The channels it subscribes to during setup.
    pub channels: Vec<String>,
    /// Index of its current URL.
    pub target: usize,
    /// Its position in its channel (one-channel clients only).
    pub position: Option<Position>,
    /// Reconnects instead of failing the run when its connection is lost.
    pub resilient: bool,
    /// The next setup subscribes with `recover` from `position`.
    recover: bool,
    /// Set up before: the next setup is a reconnect.
    was_ready: bool,
    /// Consecutive failed attempts (for the back-off).
    failures: u32,
    /// When the current SSE stream was requested with `Last-Event-ID`.
    resumed_ns: i64,
    poll: Option<Box<PollState>>,
    /// The server's last `disconnect` push (code, reason), for the error.
    disconnect: Option<Box<(u16, String)>>,
}

/// Counters of connection losses and reconnects.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ReconnectStats {
    /// Connections lost (closed by the server, reset, refused).
    pub lost: u64,
    /// Connections dropped on purpose (churn).
    pub churned: u64,
    /// Setups completed again after a loss or a churn.
    pub reconnected: u64,
    /// Reconnects that went to another URL than the one before.
    pub failovers: u64,
}

/// The clients of a scenario.
pub struct HeraldClients {
    /// The encoding every client speaks.
    pub enc: Encoding,
    /// How they reach the server.
    pub kind: ClientKind,
    targets: Vec<Target>,
    local_addrs: Vec<IpAddr>,
    concurrency: usize,
    /// All clients; a client's tag is `tag_base` + its index here.
    pub clients: Vec<HClient>,
    tag_base: u64,
    queue: VecDeque<usize>,
    retry: Vec<(Instant, usize)>,
    in_setup: usize,
    ready: usize,
    scratch: Vec<u8>,
    body: Vec<u8>,
    /// Whether to send `connect` at all (false for the shootout endpoint).
    handshake_only: bool,
    /// Losses and reconnects so far.
    pub stats: ReconnectStats,
    /// Unreadable messages after setup are reported as
    /// [`Event::Unreadable`] instead of failing the run: a load test of a
    /// game server counts a bad message and goes on (default false).
    pub lenient: bool,
}

impl HeraldClients {
    /// Clients of `kind` spread over `targets` (client i starts at
    /// `targets[i % len]`), with tags from `tag_base`.
    pub fn with_kind(
        kind: ClientKind,
        targets: &[Target],
        enc: Encoding,
        local_addrs: Vec<IpAddr>,
        concurrency: usize,
        tag_base: u64,
    ) -> HeraldClients {
        let targets = targets
            .iter()
            .map(|t| match kind {
                ClientKind::Ws => t.clone().with_protocols(&[enc.subprotocol()]),
                _ => t.clone(),
            })
            .collect();
        HeraldClients {
            enc,
            kind,
            targets,
            local_addrs,
            concurrency: concurrency.max(1),
            clients: Vec::new(),
            tag_base,
            queue: VecDeque::new(),
            retry: Vec::new(),
            in_setup: 0,
            ready: 0,
            scratch: Vec::with_capacity(256),
            body: Vec::with_capacity(256),
            handshake_only: false,
            stats: ReconnectStats::default(),
            lenient: false,
        }
    }

    /// Plain WebSocket clients that send nothing after the upgrade (for
    /// idle connections to endpoints that do not speak Herald's protocol).
    pub fn handshake_only(mut self) -> HeraldClients {
        self.handshake_only = true;
        for t in &mut self.targets {
            t.protocols.clear();
        }
        self
    }

    /// Queues a client that will subscribe to `channels`; returns its index.
    pub fn add(&mut self, channels: Vec<String>) -> usize {
        let i = self.clients.len();
        self.clients.push(HClient {
            conn: usize::MAX,
            state: State::Queued,
            channels,
            target: i % self.targets.len().max(1),
            position: None,
            resilient: false,
            recover: false,
            was_ready: false,
            failures: 0,
            resumed_ns: 0,
            poll: None,
            disconnect: None,
        });
        self.queue.push_back(i);
        i
    }

    /// Whether `tag` is one of these clients' tags.
    pub fn owns(&self, tag: u64) -> bool {
        tag.checked_sub(self.tag_base)
            .is_some_and(|i| (i as usize) < self.clients.len())
    }

    /// Clients fully set up.
    pub fn ready(&self) -> usize {
        self.ready
    }

    /// True when every client is set up.
    pub fn all_ready(&self) -> bool {
        self.ready == self.clients.len()
    }

    /// Starts connects (first ones and due reconnects) up to the
    /// concurrency limit.
    pub fn tick(&mut self, io: &mut Io) -> Result<(), BenchError> {
        if !self.retry.is_empty() {
            let now = Instant::now();
            let mut k = 0;
            while k < self.retry.len() {
                if self.retry[k].0 <= now {
                    let (_, i) = self.retry.swap_remove(k);
                    self.queue.push_back(i);
                } else {
                    k += 1;
                }
            }
        }
        while self.in_setup < self.concurrency {
            let Some(i) = self.queue.pop_front() else {
                break;
            };
            self.open(io, i)?;
        }
        Ok(())
    }

    /// The earliest scheduled reconnect, if any.
    pub fn next_retry(&self) -> Option<Instant> {
        self.retry.iter().map(|r| r.0).min()
    }

    fn open(&mut self, io: &mut Io, i: usize) -> Result<(), BenchError> {
        let local = match self.local_addrs.len() {
            0 => None,
            n => self.local_addrs.get(i % n).copied(),
        };
        let tag = self.tag_base + i as u64;
        let c = self
            .clients
            .get_mut(i)
            .ok_or(BenchError::Internal("queued client missing"))?;
        let target = self
            .targets
            .get(c.target)
            .ok_or(BenchError::Internal("client target missing"))?;
        let opened = match self.kind {
            ClientKind::Ws | ClientKind::Pusher => io.connect(target, local, tag),
            ClientKind::Tcp => io.connect_plain(target.addr, Framing::Tcp, local, tag),
            ClientKind::Sse | ClientKind::Poll | ClientKind::Api => {
                io.connect_plain(target.addr, Framing::Http, local, tag)
            }
        };
        match opened {
            Ok(conn) => {
                c.conn = conn;
                c.state = State::Upgrading;
                self.in_setup += 1;
                Ok(())
            }
            // The socket could not even be created (e.g. out of file
            // descriptors): a resilient client tries again later.
            Err(_) if c.resilient => {
                c.state = State::Waiting;
                self.stats.lost += 1;
                self.schedule(i, true);
                Ok(())
            }
            Err(e) => Err(BenchError::Client(format!(
                "cannot open client {} of {}: {e}",
                i + 1,
                self.clients.len()
            ))),
        }
    }

    /// Schedules client `i` to reconnect, with back-off, to the next URL if
    /// `next_target`.
    fn schedule(&mut self, i: usize, next_target: bool) {
        let n = self.targets.len().max(1);
        let Some(c) = self.clients.get_mut(i) else {
            return;
        };
        if next_target && n > 1 {
            c.target = (c.target + 1) % n;
            self.stats.failovers += 1;
        }
        let delay = if c.failures == 0 {
            Duration::ZERO
        } else {
            Duration::from_millis(50 << c.failures.min(5))
        };
        c.failures += 1;
        c.recover = c.position.is_some();
        if let Some(p) = c.poll.as_mut() {
            if !p.session.is_empty() {
                p.old = Some(std::mem::take(&mut p.session));
            }
        }
        self.retry.push((Instant::now() + delay, i));
    }

    fn index(&self, tag: u64) -> Result<usize, BenchError> {
        tag.checked_sub(self.tag_base)
            .map(|i| i as usize)
            .filter(|&i| i < self.clients.len())
            .ok_or(BenchError::Internal("message for an unknown client"))
    }

    /// The connection of client `tag` is open (the server chose `protocol`
    /// for a WebSocket): start the session. A WebSocket server that did not
    /// accept the offered subprotocol would read our frames in the wrong
    /// encoding, so that is fatal.
    pub fn on_open(
        &mut self,
        io: &mut Io,
        tag: u64,
        protocol: Option<&str>,
    ) -> Result<(), BenchError> {
        let i = self.index(tag)?;
        let enc = self.enc;
        if self.kind == ClientKind::Ws
            && !self.handshake_only
            && protocol != Some(enc.subprotocol())
        {
            return Err(BenchError::Client(format!(
                "client {}: the server did not accept subprotocol {} (answered {:?}); is this Herald's /ws endpoint?",
                i + 1,
                enc.subprotocol(),
                protocol
            )));
        }
        match self.kind {
            ClientKind::Ws if self.handshake_only => self.mark_ready(i),
            ClientKind::Api => {
                // A first request at once: the server drops a connection
                // whose first request head is late, and publishing may
                // start long after (when every subscriber is set up).
                let c = &self.clients[i];
                self.scratch.clear();
                let host = &self.targets[c.target].host;
                http1::write_request(&mut self.scratch, "GET", host, "/healthz", &[], None);
                io.send_raw(c.conn, &self.scratch);
            }
            ClientKind::Ws | ClientKind::Tcp => {
                let c = &mut self.clients[i];
                c.state = State::Connecting;
                self.scratch.clear();
                herald_wire::connect(enc, CONNECT_ID, &mut self.scratch);
                io.send(c.conn, herald_wire::opcode(enc), &self.scratch);
            }
            ClientKind::Sse => self.request_stream(io, i),
            // The server speaks first (`pusher:connection_established`).
            ClientKind::Pusher => self.clients[i].state = State::Connecting,
            ClientKind::Poll => {
                let c = &mut self.clients[i];
                let p = c.poll.get_or_insert_with(Default::default);
                if let Some(old) = p.old.take() {
                    p.step = PollStep::Deleting;
                    self.scratch.clear();
                    let path = format!("/poll/{old}");
                    let host = &self.targets[c.target].host;
                    http1::write_request(&mut self.scratch, "DELETE", host, &path, &[], None);
                    io.send_raw(c.conn, &self.scratch);
                } else {
                    self.open_poll_session(io, i);
                }
            }
        }
        Ok(())
    }

    /// Sends `GET /sse` for client `i`, resuming from its position if it
    /// has one and is reconnecting.
    fn request_stream(&mut self, io: &mut Io, i: usize) {
        let c = &mut self.clients[i];
        let mut path = String::from("/sse");
        for (k, ch) in c.channels.iter().enumerate() {
            path.push(if k == 0 { '?' } else { '&' });
            path.push_str("channel=");
            path.push_str(ch);
        }
        let host = &self.targets[c.target].host;
        let resume = match (&c.position, c.recover) {
            (Some(p), true) => Some(format!("{}:{}", p.epoch, p.offset)),
            _ => None,
        };
        c.resumed_ns = if resume.is_some() { clock::now_ns() } else { 0 };
        let mut headers = vec![("Accept", "text/event-stream")];
        if let Some(id) = resume.as_deref() {
            headers.push(("Last-Event-ID", id));
        }
        self.scratch.clear();
        http1::write_request(&mut self.scratch, "GET", host, &path, &headers, None);
        io.send_raw(c.conn, &self.scratch);
    }

    fn open_poll_session(&mut self, io: &mut Io, i: usize) {
        let c = &mut self.clients[i];
        if let Some(p) = c.poll.as_mut() {
            p.step = PollStep::Opening;
        }
        self.scratch.clear();
        let host = &self.targets[c.target].host;
        http1::write_request(&mut self.scratch, "POST", host, "/poll", &[], Some(b""));
        io.send_raw(c.conn, &self.scratch);
    }

    fn send_poll(&mut self, io: &mut Io, i: usize) {
        let c = &self.clients[i];
        let Some(p) = c.poll.as_ref() else {
            return;
        };
        self.scratch.clear();
        self.scratch.extend_from_slice(b"GET /poll/");
        self.scratch.extend_from_slice(p.session.as_bytes());
        self.scratch.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        self.scratch
            .extend_from_slice(self.targets[c.target].host.as_bytes());
        self.scratch.extend_from_slice(b"\r\n\r\n");
        io.send_raw(c.conn, &self.scratch);
    }

    fn mark_ready(&mut self, i: usize) {
        let c = &mut self.clients[i];
        if matches!(c.state, State::Ready | State::Closed | State::Waiting) {
            return;
        }
        c.state = State::Ready;
        c.failures = 0;
        c.recover = false;
        if c.was_ready {
            self.stats.reconnected += 1;
        }
        c.was_ready = true;
        self.in_setup -= 1;
        self.ready += 1;
    }

    /// A WebSocket or raw TCP message for client `tag`. Setup replies are
    /// consumed here; everything else goes to `sink`. Errors during setup,
    /// and messages that cannot be read, are fatal.
    pub fn on_message(
        &mut self,
        io: &mut Io,
        tag: u64,
        msg: Message<'_>,
        sink: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), BenchError> {
        let data = match msg {
            Message::Text(d) | Message::Binary(d) => d,
            _ => return Ok(()),
        };
        let i = self.index(tag)?;
        if self.handshake_only {
            sink(Event::Other { msg: data });
            return Ok(());
        }
        if self.kind == ClientKind::Pusher {
            return self.on_pusher_message(io, i, data, sink);
        }
        self.on_protocol_message(io, i, data, sink)
    }

    /// One Pusher frame for client `i`: the setup's answers are consumed
    /// here, `pusher:ping` is answered, any other event that is not the
    /// protocol's own is a publication (the whole frame goes to `sink`; the
    /// scenario reads its `data` string in place).
    fn on_pusher_message(
        &mut self,
        io: &mut Io,
        i: usize,
        data: &[u8],
        sink: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), BenchError> {
        let Some(event) = herald_wire::pusher_event(data) else {
            if self.lenient && self.clients[i].state == State::Ready {
                sink(Event::Unreadable);
                return Ok(());
            }
            return Err(BenchError::Client(format!(
                "client {}: unreadable Pusher frame: {}",
                i + 1,
                String::from_utf8_lossy(&data[..data.len().min(200)])
            )));
        };
        let state = self.clients[i].state;
        match (state, event) {
            (State::Connecting, b"pusher:connection_established") => self.next_subscribe(io, i, 0),
            (State::Subscribing(k), b"pusher_internal:subscription_succeeded") => {
                self.next_subscribe(io, i, k + 1)
            }
            (_, b"pusher:ping") => {
                io.send(self.clients[i].conn, OpCode::Text, herald_wire::PUSHER_PONG);
            }
            (
                State::Connecting | State::Subscribing(_),
                b"pusher:error" | b"pusher:subscription_error",
            ) => {
                return Err(BenchError::Client(format!(
                    "client {}: the server refused the Pusher setup: {}",
                    i + 1,
                    String::from_utf8_lossy(&data[..data.len().min(200)])
                )));
            }
            // Pusher's errors carry their code inside the data string;
            // the bench only counts them.
            (_, b"pusher:error" | b"pusher:subscription_error") => {
                sink(Event::Error { id: 0, code: 0 })
            }
            (_, e) if e.starts_with(b"pusher:") || e.starts_with(b"pusher_internal:") => {
                sink(Event::Other { msg: data })
            }
            _ => sink(Event::Pub {
                data,
                recovered: false,
                resumed_ns: 0,
            }),
        }
        Ok(())
    }

    /// One Herald message (JSON or binary) for client `i`.
    fn on_protocol_message(
        &mut self,
        io: &mut Io,
        i: usize,
        data: &[u8],
        sink: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), BenchError> {
        let enc = self.enc;
        let state = self.clients[i].state;
        let incoming = match herald_wire::classify(enc, data) {
            Ok(incoming) => incoming,
            Err(_) if self.lenient && state == State::Ready => {
                sink(Event::Unreadable);
                return Ok(());
            }
            Err(e) => {
                return Err(BenchError::Client(format!(
                    "client {}: unreadable message: {e}",
                    i + 1
                )))
            }
        };
        match (state, incoming) {
            (State::Connecting, Incoming::Reply { id: CONNECT_ID }) => {
                self.next_subscribe(io, i, 0);
            }
            (State::Subscribing(k), Incoming::Reply { id }) if id == SUBSCRIBE_ID + k as u32 => {
                self.subscribed(i, k, data, sink)?;
                self.next_subscribe(io, i, k + 1);
            }
            (State::Connecting | State::Subscribing(_), Incoming::Error { code, .. }) => {
                let what = match state {
                    State::Subscribing(k) => format!(
                        "subscribe to {:?}",
                        self.clients[i].channels.get(k).cloned().unwrap_or_default()
                    ),
                    _ => "connect".to_owned(),
                };
                return Err(BenchError::Client(format!(
                    "client {}: the server refused {what} (error {code})",
                    i + 1
                )));
            }
            (_, Incoming::Pub { data, offset }) => {
                let c = &mut self.clients[i];
                if c.channels.len() == 1 {
                    if let Some(p) = c.position.as_mut() {
                        p.offset = offset;
                    }
                }
                sink(Event::Pub {
                    data,
                    recovered: false,
                    resumed_ns: 0,
                });
            }
            (_, Incoming::Reply { id }) => sink(Event::Reply { id, msg: data }),
            (_, Incoming::Error { id, code }) => sink(Event::Error { id, code }),
            (_, Incoming::Other) => {
                self.note_disconnect(i, enc, data);
                sink(Event::Other { msg: data })
            }
        }
        Ok(())
    }

    /// Remembers a `disconnect` push, so that the connection's end can say why.
    fn note_disconnect(&mut self, i: usize, enc: Encoding, data: &[u8]) {
        let maybe = match enc {
            Encoding::Binary => data.first() == Some(&0xA4),
            Encoding::Json => herald_wire::find_key(data, b"\"disconnect\"").is_some(),
        };
        if !maybe {
            return;
        }
        if let Ok(ServerMsg::Push(Push::Disconnect { code, reason })) = enc.decode_server(data) {
            self.clients[i].disconnect = Some(Box::new((code, reason)));
        }
    }

    /// Subscribe reply `k` of client `i`: its position, and with `recover`
    /// the publications it missed.
    fn subscribed(
        &mut self,
        i: usize,
        k: usize,
        data: &[u8],
        sink: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), BenchError> {
        let c = &mut self.clients[i];
        if k != 0 || c.channels.len() != 1 {
            return Ok(());
        }
        let Ok(ServerMsg::Reply {
            reply:
                Reply::Subscribe {
                    epoch,
                    offset,
                    recovered,
                    publications,
                },
            ..
        }) = self.enc.decode_server(data)
        else {
            return Err(BenchError::Client(format!(
                "client {}: unreadable subscribe reply",
                i + 1
            )));
        };
        if c.recover {
            for p in &publications {
                sink(Event::Pub {
                    data: &p.data,
                    recovered: true,
                    resumed_ns: 0,
                });
            }
            if !recovered {
                sink(Event::Unrecovered);
            }
        }
        c.position = Some(Position { epoch, offset });
        Ok(())
    }

    /// Sends subscribe `k` of client `i` (long-polling sent them all
    /// already), or marks it ready.
    fn next_subscribe(&mut self, io: &mut Io, i: usize, k: usize) {
        let enc = self.enc;
        let c = &mut self.clients[i];
        match c.channels.get(k) {
            Some(channel) => {
                c.state = State::Subscribing(k);
                if self.kind == ClientKind::Pusher {
                    self.scratch.clear();
                    herald_wire::pusher_subscribe(channel, &mut self.scratch);
                    io.send(c.conn, OpCode::Text, &self.scratch);
                } else if self.kind != ClientKind::Poll {
                    self.scratch.clear();
                    let id = SUBSCRIBE_ID + k as u32;
                    let from = match (&c.position, c.recover && k == 0) {
                        (Some(p), true) => Some((p.epoch.as_str(), p.offset)),
                        _ => None,
                    };
                    herald_wire::subscribe_from(enc, id, channel, from, &mut self.scratch);
                    io.send(c.conn, herald_wire::opcode(enc), &self.scratch);
                }
            }
            None => self.mark_ready(i),
        }
    }

    /// An HTTP answer or SSE event for client `tag`.
    pub fn on_http(
        &mut self,
        io: &mut Io,
        tag: u64,
        msg: HttpMsg<'_>,
        sink: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), BenchError> {
        let i = self.index(tag)?;
        match (self.kind, msg) {
            (ClientKind::Sse, HttpMsg::StreamStart) => self.mark_ready(i),
            (ClientKind::Sse, HttpMsg::Event(block)) => self.on_sse_event(i, block, sink),
            (ClientKind::Poll, HttpMsg::Response { status, body }) => {
                return self.on_poll_answer(io, i, status, body, sink)
            }
            (ClientKind::Api, HttpMsg::Response { status, body }) => {
                if self.clients[i].state != State::Ready {
                    if status != 200 {
                        return Err(BenchError::Client(format!(
                            "publisher {}: GET /healthz answered {status}: {}",
                            i + 1,
                            String::from_utf8_lossy(&body[..body.len().min(200)])
                        )));
                    }
                    self.mark_ready(i);
                } else if (200..300).contains(&status) {
                    sink(Event::Reply { id: 0, msg: &[] });
                } else {
                    sink(Event::Error {
                        id: 0,
                        code: status,
                    });
                }
            }
            (_, HttpMsg::Response { status, body }) => {
                return Err(BenchError::Client(format!(
                    "client {}: the server answered {status}: {}",
                    i + 1,
                    String::from_utf8_lossy(&body[..body.len().min(200)])
                )))
            }
            (_, _) => {
                return Err(BenchError::Client(format!(
                    "client {}: unexpected HTTP message",
                    i + 1
                )))
            }
        }
        Ok(())
    }

    fn on_sse_event(&mut self, i: usize, block: &[u8], sink: &mut dyn FnMut(Event<'_>)) {
        let ev = http1::parse_event(block);
        let c = &mut self.clients[i];
        if let Some(id) = ev.id {
            // One channel per bench stream: the id is `epoch:offset`.
            if let Some(at) = id.iter().rposition(|&b| b == b':') {
                let (epoch, off) = (&id[..at], &id[at + 1..]);
                let offset = std::str::from_utf8(off)
                    .ok()
                    .and_then(|o| o.parse().ok())
                    .unwrap_or(0);
                match c.position.as_mut() {
                    Some(p) if p.epoch.as_bytes() == epoch => p.offset = offset,
                    _ => {
                        c.position = Some(Position {
                            epoch: String::from_utf8_lossy(epoch).into_owned(),
                            offset,
                        })
                    }
                }
            }
        }
        let Some(data) = ev.data else {
            return; // a comment, a heartbeat, the opening `retry:`
        };
        if ev.event == Some(b"herald") {
            if data.windows(13).any(|w| w == b"\"unrecovered\"") {
                sink(Event::Unrecovered);
            } else {
                self.note_disconnect(i, Encoding::Json, data);
                sink(Event::Other { msg: data });
            }
            return;
        }
        sink(Event::Pub {
            data,
            recovered: false,
            resumed_ns: c.resumed_ns,
        });
    }

    fn on_poll_answer(
        &mut self,
        io: &mut Io,
        i: usize,
        status: u16,
        body: &[u8],
        sink: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), BenchError> {
        let step = self.clients[i]
            .poll
            .as_ref()
            .map_or(PollStep::Polling, |p| p.step);
        let fail = |what: &str| {
            BenchError::Client(format!(
                "client {}: {what} answered {status}: {}",
                i + 1,
                String::from_utf8_lossy(&body[..body.len().min(200)])
            ))
        };
        match step {
            // An old session may have expired or belong to a node that
            // is gone: any answer will do.
            PollStep::Deleting => self.open_poll_session(io, i),
            PollStep::Opening => {
                if status != 200 {
                    return Err(fail("POST /poll"));
                }
                let v: serde_json::Value =
                    serde_json::from_slice(body).map_err(|_| fail("POST /poll"))?;
                let session = v["session"]
                    .as_str()
                    .ok_or_else(|| fail("POST /poll"))?
                    .to_owned();
                let enc = self.enc;
                let c = &mut self.clients[i];
                self.body.clear();
                self.body.push(b'[');
                herald_wire::connect(enc, CONNECT_ID, &mut self.body);
                for (k, ch) in c.channels.iter().enumerate() {
                    self.body.push(b',');
                    let from = match (&c.position, c.recover && k == 0) {
                        (Some(p), true) => Some((p.epoch.as_str(), p.offset)),
                        _ => None,
                    };
                    let id = SUBSCRIBE_ID + k as u32;
                    herald_wire::subscribe_from(enc, id, ch, from, &mut self.body);
                }
                self.body.push(b']');
                let path = format!("/poll/{session}");
                self.scratch.clear();
                let host = &self.targets[c.target].host;
                http1::write_request(
                    &mut self.scratch,
                    "POST",
                    host,
                    &path,
                    &[],
                    Some(&self.body),
                );
                io.send_raw(c.conn, &self.scratch);
                if let Some(p) = c.poll.as_mut() {
                    p.session = session;
                    p.step = PollStep::Sending;
                }
            }
            PollStep::Sending => {
                if !(200..300).contains(&status) {
                    return Err(fail("POST /poll/<session>"));
                }
                let c = &mut self.clients[i];
                c.state = State::Connecting;
                if let Some(p) = c.poll.as_mut() {
                    p.step = PollStep::Polling;
                }
                self.send_poll(io, i);
            }
            PollStep::Polling => {
                if status == 404 {
                    // The session ended (expired, or closed as a slow
                    // consumer): like a lost connection.
                    let tag = self.tag_base + i as u64;
                    io.close(self.clients[i].conn);
                    return self.on_close(tag, CloseReason::Framing("poll session gone".into()));
                }
                if status != 200 {
                    return Err(fail("GET /poll/<session>"));
                }
                for item in herald_wire::json_items(body) {
                    let item = item.map_err(|e| {
                        BenchError::Client(format!("client {}: bad poll answer: {e}", i + 1))
                    })?;
                    self.on_protocol_message(io, i, item, sink)?;
                }
                if !matches!(self.clients[i].state, State::Waiting | State::Closed) {
                    self.send_poll(io, i);
                }
            }
        }
        Ok(())
    }

    /// Client `tag`'s connection ended for `why`: a resilient client
    /// reconnects (to the next URL) and recovers; for any other it is
    /// fatal.
    pub fn on_close(&mut self, tag: u64, why: CloseReason) -> Result<(), BenchError> {
        let i = self.index(tag)?;
        let total = self.clients.len();
        let c = &mut self.clients[i];
        let was = c.state;
        let told = c.disconnect.take();
        if !c.resilient {
            c.state = State::Closed;
            let told = told.map_or(String::new(), |d| {
                format!(" (the server's disconnect: {} {:?})", d.0, d.1)
            });
            return Err(BenchError::Client(format!(
                "client {} of {total} lost its connection: {why}{told}",
                i + 1
            )));
        }
        self.leave(i, was);
        self.stats.lost += 1;
        self.schedule(i, true);
        Ok(())
    }

    fn leave(&mut self, i: usize, was: State) {
        match was {
            State::Ready => self.ready -= 1,
            State::Upgrading | State::Connecting | State::Subscribing(_) => self.in_setup -= 1,
            _ => {}
        }
        self.clients[i].state = State::Waiting;
    }

    /// Drops client `i`'s connection on purpose and reconnects it to the
    /// same URL after `down`, recovering from its position.
    pub fn churn(&mut self, io: &mut Io, i: usize, down: Duration) {
        let Some(c) = self.clients.get(i) else {
            return;
        };
        let was = c.state;
        if matches!(was, State::Waiting | State::Closed | State::Queued) {
            return;
        }
        io.close(c.conn);
        self.leave(i, was);
        self.stats.churned += 1;
        let c = &mut self.clients[i];
        c.failures = 0;
        c.recover = c.position.is_some();
        if let Some(p) = c.poll.as_mut() {
            if !p.session.is_empty() {
                p.old = Some(std::mem::take(&mut p.session));
            }
        }
        self.retry.push((Instant::now() + down, i));
    }
}

/// A short random name for this run, so channels of concurrent or earlier
/// runs against the same server never mix.
pub fn run_id() -> String {
    let mut rng = fastrand::Rng::new();
    (0..6).map(|_| char::from(b'a' + rng.u8(0..26))).collect()
}
