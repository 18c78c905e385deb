//! The client engine: one readiness loop per process that drives every
//! connection the bench opens: WebSocket, raw TCP (Herald's length-prefixed
//! frames) and HTTP/1.1 (SSE streams, long-polls, the publish API).
//!
//! Why a bare `mio` loop rather than a tokio task per connection: a load
//! generator must cost less per message than the server it measures, and on
//! this machine it gets one core. Here a connection is a ~150-byte slot in a
//! `Vec`, there are no tasks, wakers or channels, and the hot path of a
//! readiness event is: one `read` into a buffer shared by all connections,
//! frames decoded in place by `herald-ws` (borrowed, never copied), and a
//! callback into the scenario. Nothing is allocated per message: a
//! connection owns heap memory only while it holds a partial frame or unsent
//! output. Timers are the scenario's: it returns its next deadline from
//! [`Handler::on_tick`] and the loop sleeps in `epoll_wait` until then.
//!
//! Reads stop at the first short read instead of insisting on `EAGAIN`:
//! epoll is edge-triggered and any later arrival raises a new edge, so this
//! saves one syscall per event (tokio does the same). The exception is an
//! event that also reports the peer's FIN: nothing will follow it, so that
//! read goes on to the end of the stream.
//!
//! The engine only moves frames: WebSocket messages and raw-TCP frames reach
//! [`Handler::on_message`], HTTP responses and SSE events reach
//! [`Handler::on_http`]; what they mean is the scenario's business. Raw TCP
//! heartbeats (zero-length frames) are answered here, as WebSocket pings are.

use std::io::{self, Read, Write};
use std::mem;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use herald_ws::{
    apply_mask, parse_client_response, random_mask, write_client_request, write_header, Decoder,
    Message, OpCode, ProtocolError, Role,
};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Registry, Token};

use crate::clock;
use crate::http1::ResponseDecoder;

mod plain;
use crate::target::Target;
use crate::BenchError;

/// Index of a connection slot in the engine. Slots are reused after a
/// connection is closed and reaped, so scenarios key their own state by the
/// `tag` they chose at connect time, not by this id.
pub(crate) type ConnId = usize;

/// Size of the read buffer shared by all connections. Grows when a single
/// frame does not fit.
const READ_BUF: usize = 256 * 1024;

/// A handshake answer larger than this is refused.
const MAX_HANDSHAKE: usize = 16 * 1024;

/// Tokens at or above this value are pipes registered by the scenario.
pub(crate) const PIPE_TOKEN_BASE: usize = usize::MAX / 2;

/// Partial-frame and output buffers larger than this are freed, not kept,
/// once drained, so an idle connection goes back to owning no heap memory.
const KEEP_CAPACITY: usize = 16 * 1024;

/// Why a connection ended.
#[derive(Debug)]
pub(crate) enum CloseReason {
    /// The TCP connect failed.
    Connect(io::Error),
    /// The server's answer to the upgrade request was not a valid 101.
    Handshake(String),
    /// The server closed the TCP stream.
    Eof,
    /// A read or write failed.
    Io(io::Error),
    /// The server broke the WebSocket framing rules.
    Protocol(ProtocolError),
    /// The server sent a close frame.
    ServerClose(Option<u16>, String),
    /// Raw TCP or HTTP framing was broken.
    Framing(String),
    /// The server ended an event stream.
    StreamEnded,
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::Connect(e) => write!(f, "connect failed: {e}"),
            CloseReason::Handshake(e) => write!(f, "WebSocket handshake failed: {e}"),
            CloseReason::Eof => f.write_str("server closed the TCP connection"),
            CloseReason::Io(e) => write!(f, "socket error: {e}"),
            CloseReason::Protocol(e) => write!(f, "WebSocket protocol error: {e}"),
            CloseReason::ServerClose(code, reason) => match code {
                Some(c) => write!(f, "server sent close {c} {reason:?}"),
                None => f.write_str("server sent close"),
            },
            CloseReason::Framing(e) => write!(f, "framing error: {e}"),
            CloseReason::StreamEnded => f.write_str("server ended the event stream"),
        }
    }
}

/// What the scenario wants after a tick.
pub(crate) enum Tick {
    /// Keep going; call `on_tick` again at this instant at the latest (or
    /// only after the next I/O event when `None`).
    Continue(Option<Instant>),
    /// Stop the loop; [`Engine::run`] returns `Ok`.
    Done,
}

/// A scenario's callbacks. Every callback may send on, open or close
/// connections through `io`; an error stops the loop and is returned by
/// [`Engine::run`].
pub(crate) trait Handler {
    /// The upgrade completed on connection `id` (whose tag is `tag`);
    /// `protocol` is the subprotocol the server selected.
    fn on_open(
        &mut self,
        io: &mut Io,
        id: ConnId,
        tag: u64,
        protocol: Option<&str>,
    ) -> Result<(), BenchError>;

    /// A text or binary message arrived. `now_ns` is the wall clock read
    /// once per read batch (Unix nanoseconds).
    fn on_message(
        &mut self,
        io: &mut Io,
        tag: u64,
        msg: Message<'_>,
        now_ns: i64,
    ) -> Result<(), BenchError>;

    /// The connection ended for `why` (not called for closes the scenario
    /// asked for with [`Io::close`]).
    fn on_close(&mut self, io: &mut Io, tag: u64, why: CloseReason) -> Result<(), BenchError>;

    /// Called after every batch of events and when the last returned
    /// deadline passes.
    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError>;

    /// An HTTP response or SSE event arrived on an HTTP connection.
    fn on_http(
        &mut self,
        _io: &mut Io,
        tag: u64,
        _msg: HttpMsg<'_>,
        _now_ns: i64,
    ) -> Result<(), BenchError> {
        Err(unexpected_http(tag))
    }

    /// A pipe registered with token `PIPE_TOKEN_BASE + key` is readable.
    fn on_pipe(&mut self, _io: &mut Io, _key: usize) -> Result<(), BenchError> {
        Ok(())
    }
}

/// The error for an HTTP message on connection `tag` of a scenario that
/// opens no HTTP connections.
pub(crate) fn unexpected_http(tag: u64) -> BenchError {
    BenchError::Client(format!("connection {tag}: unexpected HTTP message"))
}

/// What an HTTP connection delivers.
#[derive(Debug)]
pub(crate) enum HttpMsg<'a> {
    /// A complete response (anything but an event stream), any status.
    Response {
        /// Its status code.
        status: u16,
        /// Its whole body.
        body: &'a [u8],
    },
    /// A `200 text/event-stream` head: events follow.
    StreamStart,
    /// One SSE event: its lines, without the blank line that ended it.
    Event(&'a [u8]),
}

/// How a connection frames what it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Raw TCP: `u32` big-endian length, then the message.
    Tcp,
    /// HTTP/1.1 requests written by the scenario, responses decoded here.
    Http,
}

/// Per-connection framing state.
enum Kind {
    Ws(Decoder),
    Tcp,
    Http(Box<HttpState>),
}

/// An HTTP connection's response in progress.
struct HttpState {
    decoder: ResponseDecoder,
    status: u16,
    /// The current response is an event stream.
    events: bool,
    /// A chunked response body, or the start of an incomplete event.
    body: Vec<u8>,
}

/// Where a connection is in its life.
enum Phase {
    /// TCP connect in progress; the upgrade request (if any) waits in `out`.
    Connecting { key: [u8; 24] },
    /// Upgrade request sent, waiting for the 101.
    Handshaking { key: [u8; 24] },
    /// WebSocket open.
    Open,
    /// Closed; the slot is freed at the end of the current turn.
    Closed,
}

/// One connection slot.
struct Conn {
    stream: TcpStream,
    phase: Phase,
    kind: Kind,
    /// The bytes of an incomplete frame (or handshake answer), carried over
    /// to the next read. Empty, and usually unallocated, between frames.
    partial: Vec<u8>,
    /// Output the socket did not accept yet.
    out: Vec<u8>,
    /// The scenario's own identifier for this connection.
    tag: u64,
}

/// Byte and frame counters over every connection, for bandwidth figures.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IoStats {
    /// Bytes read from sockets (handshakes included).
    pub bytes_in: u64,
    /// Bytes written to sockets.
    pub bytes_out: u64,
    /// Data messages received.
    pub msgs_in: u64,
    /// Data messages sent.
    pub msgs_out: u64,
}

/// The connections and the means to act on them; handed to every callback.
pub(crate) struct Io {
    registry: Registry,
    conns: Vec<Option<Conn>>,
    free: Vec<ConnId>,
    /// Slots closed during this turn, freed at its end.
    closed: Vec<ConnId>,
    /// Write failures noticed while the scenario was sending; reported to
    /// it through `on_close` once its callback has returned.
    failed: Vec<(ConnId, CloseReason)>,
    /// Frame encoding scratch space.
    scratch: Vec<u8>,
    max_message: usize,
    /// Running totals.
    pub stats: IoStats,
}

impl Io {
    /// Opens a connection to `target` (from `local`, if given) and starts
    /// the upgrade. `on_open` or `on_close` follows.
    pub fn connect(
        &mut self,
        target: &Target,
        local: Option<IpAddr>,
        tag: u64,
    ) -> Result<ConnId, BenchError> {
        let stream = open_socket(target.addr, local).map_err(|e| BenchError::Connect {
            addr: target.addr,
            source: e,
        })?;
        let key = herald_ws::generate_key();
        let mut out = Vec::with_capacity(256);
        let protocols: Vec<&str> = target.protocols.iter().map(String::as_str).collect();
        write_client_request(&mut out, &target.host, &target.path, &key, &protocols);
        let conn = Conn {
            stream,
            phase: Phase::Connecting { key },
            kind: Kind::Ws(Decoder::new(Role::Client, self.max_message)),
            partial: Vec::new(),
            out,
            tag,
        };
        self.insert(conn)
    }

    /// Opens a raw TCP or HTTP connection to `addr`; `on_open` follows once
    /// the TCP connect completes (with no protocol), or `on_close`.
    pub fn connect_plain(
        &mut self,
        addr: SocketAddr,
        framing: Framing,
        local: Option<IpAddr>,
        tag: u64,
    ) -> Result<ConnId, BenchError> {
        let stream =
            open_socket(addr, local).map_err(|e| BenchError::Connect { addr, source: e })?;
        let kind = match framing {
            Framing::Tcp => Kind::Tcp,
            Framing::Http => Kind::Http(Box::new(HttpState {
                decoder: ResponseDecoder::new(self.max_message),
                status: 0,
                events: false,
                body: Vec::new(),
            })),
        };
        let conn = Conn {
            stream,
            phase: Phase::Connecting { key: [0; 24] },
            kind,
            partial: Vec::new(),
            out: Vec::new(),
            tag,
        };
        self.insert(conn)
    }

    fn insert(&mut self, conn: Conn) -> Result<ConnId, BenchError> {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        let slot = self
            .conns
            .get_mut(id)
            .ok_or(BenchError::Internal("bad slot"))?;
        let conn = slot.insert(conn);
        self.registry
            .register(
                &mut conn.stream,
                Token(id),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(BenchError::Poll)?;
        Ok(id)
    }

    /// Bytes queued on a connection that the socket has not taken yet.
    pub fn pending(&self, id: ConnId) -> usize {
        match self.conns.get(id) {
            Some(Some(c)) => c.out.len(),
            _ => 0,
        }
    }

    /// The registry, for scenarios that add pipes (tokens from
    /// [`PIPE_TOKEN_BASE`]).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Appends a data or control frame (masked, as a client must) to the
    /// connection's output without writing it yet. Returns false when the
    /// connection is not open.
    pub fn queue(&mut self, id: ConnId, opcode: OpCode, payload: &[u8]) -> bool {
        let Some(Some(conn)) = self.conns.get_mut(id) else {
            return false;
        };
        if !matches!(conn.phase, Phase::Open) {
            return false;
        }
        encode(&conn.kind, &mut conn.out, opcode, payload);
        if !opcode.is_control() {
            self.stats.msgs_out += 1;
        }
        true
    }

    /// Writes what is queued on the connection, as far as the socket takes it.
    pub fn flush(&mut self, id: ConnId) {
        let Some(Some(conn)) = self.conns.get_mut(id) else {
            return;
        };
        if let Err(e) = flush_conn(conn, &mut self.stats) {
            self.fail(id, CloseReason::Io(e));
        }
    }

    /// Sends one frame: written straight from a scratch buffer when nothing
    /// is pending (the common case), queued otherwise. Returns false when
    /// the connection is not open.
    pub fn send(&mut self, id: ConnId, opcode: OpCode, payload: &[u8]) -> bool {
        let Some(Some(conn)) = self.conns.get_mut(id) else {
            return false;
        };
        if !matches!(conn.phase, Phase::Open) {
            return false;
        }
        if !opcode.is_control() {
            self.stats.msgs_out += 1;
        }
        if !conn.out.is_empty() {
            encode(&conn.kind, &mut conn.out, opcode, payload);
            return true;
        }
        self.scratch.clear();
        encode(&conn.kind, &mut self.scratch, opcode, payload);
        let mut written = 0;
        let result = loop {
            match conn.stream.write(&self.scratch[written..]) {
                Ok(n) => {
                    self.stats.bytes_out += n as u64;
                    written += n;
                    if written == self.scratch.len() {
                        break Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        match result {
            Ok(()) => {
                if written < self.scratch.len() {
                    conn.out.extend_from_slice(&self.scratch[written..]);
                }
                true
            }
            Err(e) => {
                self.fail(id, CloseReason::Io(e));
                false
            }
        }
    }

    /// Sends bytes as they are (an HTTP request, a raw TCP heartbeat),
    /// behind anything already queued. Returns false when not open.
    pub fn send_raw(&mut self, id: ConnId, bytes: &[u8]) -> bool {
        let Some(Some(conn)) = self.conns.get_mut(id) else {
            return false;
        };
        if !matches!(conn.phase, Phase::Open) {
            return false;
        }
        conn.out.extend_from_slice(bytes);
        self.flush(id);
        true
    }

    /// Appends bytes as they are to the connection's output without writing
    /// them yet (see [`Io::flush`]). Returns false when not open.
    pub fn queue_raw(&mut self, id: ConnId, bytes: &[u8]) -> bool {
        let Some(Some(conn)) = self.conns.get_mut(id) else {
            return false;
        };
        if !matches!(conn.phase, Phase::Open) {
            return false;
        }
        conn.out.extend_from_slice(bytes);
        self.stats.msgs_out += 1;
        true
    }

    /// Closes a connection at the scenario's request (no `on_close` follows).
    pub fn close(&mut self, id: ConnId) {
        if let Some(Some(conn)) = self.conns.get_mut(id) {
            if !matches!(conn.phase, Phase::Closed) {
                conn.phase = Phase::Closed;
                let _ = self.registry.deregister(&mut conn.stream);
                self.closed.push(id);
            }
        }
    }

    /// Records a failure found while the scenario was acting; the engine
    /// reports it through `on_close` after the current callback.
    fn fail(&mut self, id: ConnId, why: CloseReason) {
        if self.is_live(id) {
            self.close(id);
            self.failed.push((id, why));
        }
    }

    fn is_live(&self, id: ConnId) -> bool {
        matches!(self.conns.get(id), Some(Some(c)) if !matches!(c.phase, Phase::Closed))
    }

    fn tag(&self, id: ConnId) -> u64 {
        match self.conns.get(id) {
            Some(Some(c)) => c.tag,
            _ => u64::MAX,
        }
    }

    /// Frees the slots closed during this turn (dropping a stream closes
    /// its socket).
    fn reap(&mut self) {
        for id in self.closed.drain(..) {
            if let Some(slot) = self.conns.get_mut(id) {
                *slot = None;
                self.free.push(id);
            }
        }
    }
}

/// The event loop itself.
pub(crate) struct Engine {
    poll: Poll,
    events: Events,
    io: Io,
    rbuf: Vec<u8>,
}

impl Engine {
    /// A new, empty engine whose connections accept messages of at most
    /// `max_message` bytes.
    pub fn new(max_message: usize) -> Result<Engine, BenchError> {
        let poll = Poll::new().map_err(BenchError::Poll)?;
        let registry = poll.registry().try_clone().map_err(BenchError::Poll)?;
        Ok(Engine {
            poll,
            events: Events::with_capacity(1024),
            io: Io {
                registry,
                conns: Vec::new(),
                free: Vec::new(),
                closed: Vec::new(),
                failed: Vec::new(),
                scratch: Vec::with_capacity(4096),
                max_message,
                stats: IoStats::default(),
            },
            rbuf: vec![0; READ_BUF],
        })
    }

    /// The connections, for setting up before [`Engine::run`].
    pub fn io(&mut self) -> &mut Io {
        &mut self.io
    }

    /// Runs until the handler says [`Tick::Done`] or fails.
    pub fn run<H: Handler>(&mut self, handler: &mut H) -> Result<(), BenchError> {
        loop {
            let now = Instant::now();
            let deadline = match handler.on_tick(&mut self.io, now)? {
                Tick::Done => return Ok(()),
                Tick::Continue(d) => d,
            };
            self.report_failures(handler)?;
            let timeout = deadline.map(|d| d.saturating_duration_since(now));
            if let Err(e) = self.poll.poll(&mut self.events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(BenchError::Poll(e));
            }
            let now_ns = clock::now_ns();
            // `events` is moved out for the loop so `self` stays borrowable.
            let events = mem::replace(&mut self.events, Events::with_capacity(0));
            let result = self.dispatch(&events, handler, now_ns);
            self.events = events;
            result?;
            self.report_failures(handler)?;
            self.io.reap();
        }
    }

    fn dispatch<H: Handler>(
        &mut self,
        events: &Events,
        handler: &mut H,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        for event in events.iter() {
            let id = event.token().0;
            if id >= PIPE_TOKEN_BASE {
                handler.on_pipe(&mut self.io, id - PIPE_TOKEN_BASE)?;
                continue;
            }
            if !self.io.is_live(id) {
                continue;
            }
            if event.is_writable() || event.is_error() {
                self.on_writable(id, handler)?;
            }
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                // A peer's FIN raises no later edge: when it came with this
                // one, read until the end instead of stopping short.
                let to_end = event.is_read_closed() || event.is_error();
                self.read(id, handler, now_ns, to_end)?;
            }
        }
        Ok(())
    }

    /// Reports write failures recorded during callbacks.
    fn report_failures<H: Handler>(&mut self, handler: &mut H) -> Result<(), BenchError> {
        while let Some((id, why)) = self.io.failed.pop() {
            let tag = match self.io.conns.get(id) {
                Some(Some(c)) => c.tag,
                _ => continue,
            };
            handler.on_close(&mut self.io, tag, why)?;
        }
        Ok(())
    }

    /// Completes a pending connect, or flushes pending output.
    fn on_writable<H: Handler>(&mut self, id: ConnId, handler: &mut H) -> Result<(), BenchError> {
        let Some(Some(conn)) = self.io.conns.get_mut(id) else {
            return Ok(());
        };
        if let Phase::Connecting { .. } = conn.phase {
            return self.complete_connect(id, handler);
        }
        if conn.out.is_empty() {
            return Ok(());
        }
        if let Err(e) = flush_conn(conn, &mut self.io.stats) {
            return close_with(&mut self.io, id, handler, CloseReason::Io(e));
        }
        Ok(())
    }

    /// Checks a pending connect: on success a WebSocket sends its upgrade
    /// request and raw TCP and HTTP connections are open (`on_open`).
    fn complete_connect<H: Handler>(
        &mut self,
        id: ConnId,
        handler: &mut H,
    ) -> Result<(), BenchError> {
        let Some(Some(conn)) = self.io.conns.get_mut(id) else {
            return Ok(());
        };
        let Phase::Connecting { key } = conn.phase else {
            return Ok(());
        };
        match connect_result(&conn.stream) {
            Ok(false) => return Ok(()),
            Ok(true) => {}
            Err(e) => return close_with(&mut self.io, id, handler, CloseReason::Connect(e)),
        }
        let plain = !matches!(conn.kind, Kind::Ws(_));
        conn.phase = if plain {
            Phase::Open
        } else {
            Phase::Handshaking { key }
        };
        let tag = conn.tag;
        if let Err(e) = flush_conn(conn, &mut self.io.stats) {
            return close_with(&mut self.io, id, handler, CloseReason::Io(e));
        }
        if plain {
            handler.on_open(&mut self.io, id, tag, None)?;
        }
        Ok(())
    }

    /// Reads what the socket has and processes it; with `to_end`, until the
    /// socket has nothing left (or is closed), not only to the first short read.
    fn read<H: Handler>(
        &mut self,
        id: ConnId,
        handler: &mut H,
        now_ns: i64,
        to_end: bool,
    ) -> Result<(), BenchError> {
        loop {
            let Some(Some(conn)) = self.io.conns.get_mut(id) else {
                return Ok(());
            };
            match conn.phase {
                Phase::Closed => return Ok(()),
                Phase::Connecting { .. } => {
                    self.complete_connect(id, handler)?;
                    match self.io.conns.get(id) {
                        Some(Some(c)) if !matches!(c.phase, Phase::Connecting { .. }) => continue,
                        _ => return Ok(()),
                    }
                }
                _ => {}
            }
            let carried = conn.partial.len();
            if self.rbuf.len() < carried + READ_BUF / 2 {
                self.rbuf.resize(carried + READ_BUF, 0);
            }
            self.rbuf[..carried].copy_from_slice(&conn.partial);
            let n = match conn.stream.read(&mut self.rbuf[carried..]) {
                Ok(0) => return close_with(&mut self.io, id, handler, CloseReason::Eof),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return close_with(&mut self.io, id, handler, CloseReason::Io(e)),
            };
            conn.partial.clear();
            self.io.stats.bytes_in += n as u64;
            let end = carried + n;
            let filled = end == self.rbuf.len();
            match conn.kind {
                Kind::Ws(_) => self.process(id, end, handler, now_ns)?,
                Kind::Tcp => self.process_tcp(id, end, handler, now_ns)?,
                Kind::Http(_) => self.process_http(id, end, handler, now_ns)?,
            }
            if !filled && !to_end {
                return Ok(());
            }
        }
    }

    /// Handles `rbuf[..end]` for connection `id`: the handshake answer, then
    /// frames. An incomplete trailing frame is kept in the connection.
    fn process<H: Handler>(
        &mut self,
        id: ConnId,
        end: usize,
        handler: &mut H,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        let Engine { io, rbuf, .. } = self;
        let Some(Some(conn)) = io.conns.get_mut(id) else {
            return Ok(());
        };
        let tag = conn.tag;
        let mut pos = 0;
        if let Phase::Handshaking { key } = conn.phase {
            match parse_client_response(&rbuf[..end], &key) {
                Ok(None) if end <= MAX_HANDSHAKE => {
                    conn.partial.extend_from_slice(&rbuf[..end]);
                    return Ok(());
                }
                Ok(None) => {
                    let why = CloseReason::Handshake("answer head too long".into());
                    return close_with(io, id, handler, why);
                }
                Err(e) => {
                    return close_with(io, id, handler, CloseReason::Handshake(e.to_string()))
                }
                Ok(Some((protocol, head_len))) => {
                    conn.phase = Phase::Open;
                    if conn.partial.capacity() > KEEP_CAPACITY {
                        conn.partial = Vec::new();
                    }
                    pos = head_len;
                    handler.on_open(io, id, tag, protocol.as_deref())?;
                }
            }
        }
        let Some(Some(conn)) = io.conns.get_mut(id) else {
            return Ok(());
        };
        let max = io.max_message;
        let mut decoder = match &mut conn.kind {
            Kind::Ws(d) => mem::replace(d, Decoder::new(Role::Client, max)),
            _ => return Ok(()),
        };
        let mut failure = None;
        while pos < end && io.is_live(id) {
            match decoder.decode(&mut rbuf[pos..end]) {
                Ok(None) => break,
                Ok(Some((consumed, msg))) => {
                    pos += consumed;
                    let Some(msg) = msg else { continue };
                    match msg {
                        Message::Text(_) | Message::Binary(_) => {
                            io.stats.msgs_in += 1;
                            handler.on_message(io, tag, msg, now_ns)?;
                        }
                        Message::Ping(payload) => {
                            io.send(id, OpCode::Pong, payload);
                        }
                        Message::Pong(_) => {}
                        Message::Close(code, reason) => {
                            let mut body = Vec::with_capacity(2);
                            if let Some(code) = code {
                                body.extend_from_slice(&code.to_be_bytes());
                            }
                            io.send(id, OpCode::Close, &body);
                            failure = Some(CloseReason::ServerClose(code, reason.to_owned()));
                            break;
                        }
                    }
                }
                Err(e) => {
                    // Fail the connection as RFC 6455 §7.1.7 asks: a close
                    // frame with the matching code (1002, 1007, 1009) first.
                    io.send(id, OpCode::Close, &e.close_code().to_be_bytes());
                    failure = Some(CloseReason::Protocol(e));
                    break;
                }
            }
        }
        if let Some(why) = failure {
            return close_with(io, id, handler, why);
        }
        let Some(Some(conn)) = io.conns.get_mut(id) else {
            return Ok(());
        };
        if matches!(conn.phase, Phase::Closed) {
            return Ok(());
        }
        conn.kind = Kind::Ws(decoder);
        if pos < end {
            conn.partial.extend_from_slice(&rbuf[pos..end]);
        } else if conn.partial.capacity() > KEEP_CAPACITY {
            conn.partial = Vec::new();
        }
        Ok(())
    }
}

/// Closes `id` for `why` and tells the handler.
fn close_with<H: Handler>(
    io: &mut Io,
    id: ConnId,
    handler: &mut H,
    why: CloseReason,
) -> Result<(), BenchError> {
    if !io.is_live(id) {
        return Ok(());
    }
    let tag = io.tag(id);
    io.close(id);
    handler.on_close(io, tag, why)
}

/// Appends `payload` framed for the connection: a masked WebSocket frame, a
/// length-prefixed raw TCP frame (control frames have no raw TCP form and
/// are dropped), or the bytes as they are on HTTP (the caller wrote a request).
fn encode(kind: &Kind, out: &mut Vec<u8>, opcode: OpCode, payload: &[u8]) {
    match kind {
        Kind::Ws(_) => encode_masked(out, opcode, payload),
        Kind::Tcp => {
            if !opcode.is_control() {
                out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
                out.extend_from_slice(payload);
            }
        }
        Kind::Http(_) => out.extend_from_slice(payload),
    }
}

/// Appends a masked, final frame.
pub(crate) fn encode_masked(out: &mut Vec<u8>, opcode: OpCode, payload: &[u8]) {
    let mask = random_mask();
    let mut header = [0u8; 14];
    let header_len = write_header(&mut header, true, opcode, payload.len() as u64, Some(mask));
    out.reserve(header_len + payload.len());
    out.extend_from_slice(&header[..header_len]);
    let start = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[start..], mask, 0);
}

/// Writes as much of `conn.out` as the socket takes.
fn flush_conn(conn: &mut Conn, stats: &mut IoStats) -> io::Result<()> {
    if matches!(conn.phase, Phase::Connecting { .. } | Phase::Closed) {
        return Ok(());
    }
    let mut written = 0;
    while written < conn.out.len() {
        match conn.stream.write(&conn.out[written..]) {
            Ok(n) => {
                stats.bytes_out += n as u64;
                written += n;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if written == conn.out.len() {
        if conn.out.capacity() > KEEP_CAPACITY {
            conn.out = Vec::new();
        } else {
            conn.out.clear();
        }
    } else {
        conn.out.drain(..written);
    }
    Ok(())
}

/// Whether a non-blocking connect has completed: `Ok(false)` means not yet.
fn connect_result(stream: &TcpStream) -> io::Result<bool> {
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    match stream.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
        Err(e) => Err(e),
    }
}

/// A non-blocking socket connecting to `addr`, bound to `local` first when given.
fn open_socket(addr: SocketAddr, local: Option<IpAddr>) -> io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_nonblocking(true)?;
    socket.set_tcp_nodelay(true)?;
    if let Some(ip) = local {
        socket.bind(&SocketAddr::new(ip, 0).into())?;
    }
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(socket.into()))
}
