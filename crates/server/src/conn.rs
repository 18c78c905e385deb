//! The connection driver shared by the WebSocket and raw TCP transports: a
//! hand-written future per connection that only moves frames. What differs
//! between the two — how frames are delimited on the wire — is a [`Wire`].
//!
//! Why not an `async fn` with a WebSocket library: an idle connection must cost
//! well under 1 KiB (see docs/decisions/0001-io-engine.md). This driver owns no
//! buffer while idle: it waits for readiness, reads into one buffer per worker
//! thread, decodes every whole frame in place, and keeps a private copy only of a
//! partial frame — freed as soon as the frame completes. Output is the client's
//! shared [`Outbox`](herald_core::Outbox): many queued frames go out in one
//! vectored write, headers rendered on the stack and payloads referenced, never
//! copied. Being a plain `Future` (no `select!`, no timers while open), its state
//! is a few hundred bytes.
//!
//! Close handshake: a close we start (protocol error, slow consumer, shutdown,
//! missing pong) is queued after what must still go out, then the write side is
//! shut and we wait, bounded, for the peer's close or EOF so that the peer
//! reads our close frame instead of a reset. A close the peer starts is echoed
//! and the connection ends.

use crate::hibernate::{Dormant, Parker};
use bytes::Bytes;
use herald_core::outbox::{Closing, Frame, Queue, Retired, RETIRED_SLOTS};
use herald_core::{Client, Node, Session};
use std::cell::RefCell;
use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Size of the per-thread read buffer.
const READ_BUF: usize = 64 * 1024;
/// Reads per poll before yielding to other connections.
const READ_BUDGET: usize = 16;
/// Frames per vectored write.
const WRITE_BATCH: usize = 64;
/// Slices per vectored write: a header and a payload per frame, and a
/// [`Frame::Spliced`] takes two more (its payload is three pieces), so a batch
/// of those holds fewer frames (32 of at least 2 KiB each: plenty per
/// write). Kept at two per frame so that the common write's array on the
/// stack stays as small as before.
const WRITE_SLICES: usize = 2 * WRITE_BATCH;
const _: () = assert!(WRITE_BATCH <= RETIRED_SLOTS);
/// Bytes per vectored write (beyond this the kernel buffer is full anyway).
const WRITE_BYTES: usize = 256 * 1024;
/// How long to wait for the peer's close after sending ours.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

thread_local! {
    static READ: RefCell<Box<[u8]>> = RefCell::new(vec![0u8; READ_BUF].into_boxed_slice());
}

/// The byte stream under a connection: a plain socket (readiness and
/// non-blocking calls, no buffers of its own) or TLS over one ([`AsyncIo`]).
pub trait Io: Send + Unpin + 'static {
    /// Reads some bytes into `buf` (`Ok(0)` = end of stream); when nothing is
    /// available, registers the waker and returns `Pending`.
    fn poll_read_some(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>>;
    /// Writes some of `bufs`, or registers the waker and returns `Pending`.
    fn poll_write_some(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>>;
    /// Pushes out anything the stream itself buffers (TLS records).
    fn poll_flush_some(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    /// Closes the write side.
    fn poll_close_write(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// The plain socket, out of tokio's reactor, to park the connection
    /// ([`crate::hibernate`]); `None` if this stream cannot park (TLS) or
    /// leaving the reactor failed (the connection then ends).
    fn into_parkable(self) -> Option<std::net::TcpStream>
    where
        Self: Sized,
    {
        None
    }
}

impl Io for TcpStream {
    fn poll_read_some(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        loop {
            if let Err(e) = std::task::ready!(self.poll_read_ready(cx)) {
                return Poll::Ready(Err(e));
            }
            match self.try_read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_write_some(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.try_write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Err(e) = std::task::ready!(self.poll_write_ready(cx)) {
                        return Poll::Ready(Err(e));
                    }
                }
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_close_write(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self).poll_shutdown(cx)
    }

    fn into_parkable(self) -> Option<std::net::TcpStream> {
        self.into_std().ok()
    }
}

/// Any tokio stream (TLS) as a connection's [`Io`]. Such streams keep buffers of
/// their own, so they cost more per idle connection than a plain socket.
#[derive(Debug)]
pub struct AsyncIo<T>(pub T);

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for AsyncIo<T> {
    fn poll_read_some(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut self.0).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_write_some(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn poll_flush_some(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close_write(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// One decoded unit of input.
#[derive(Debug)]
pub enum Incoming<'a> {
    /// A complete data message.
    Message {
        /// Its bytes.
        payload: &'a [u8],
        /// Binary (true) or text (false).
        binary: bool,
    },
    /// A transport ping to be answered with this payload (WebSocket ping).
    Ping(&'a [u8]),
    /// A transport heartbeat or pong: activity, nothing to answer.
    Heartbeat,
    /// The peer starts the close handshake, with this code.
    Close(Option<u16>),
}

/// How frames are delimited on one transport: decoding input in place and
/// rendering the header of each outgoing frame. No I/O.
pub trait Wire: Send + Unpin + 'static {
    /// Decodes at most one unit from the front of `buf` (in place).
    /// `Ok(None)`: incomplete. `Ok(Some((consumed, unit)))`: `consumed` bytes were
    /// used, `unit` is what they completed (None for a non-final fragment).
    /// `Err(code)`: a violation; the connection closes with `code`.
    #[allow(clippy::type_complexity)]
    fn decode<'a>(
        &'a mut self,
        buf: &'a mut [u8],
    ) -> Result<Option<(usize, Option<Incoming<'a>>)>, u16>;
    /// Frees any reassembly buffer (called when input is idle).
    fn release(&mut self) {}
    /// Renders the header of `frame`, whose payload is `payload_len` bytes, into
    /// `out`; returns the header length.
    fn header(&self, frame: &Frame, payload_len: usize, out: &mut [u8; 14]) -> usize;
    /// Renders the payload of the final close frame into `out`.
    fn close_payload(&self, closing: &Closing, out: &mut [u8; 125]) -> usize;
    /// A replacement for `frame`, not yet written, before its header is
    /// rendered: a WebSocket connection with permessage-deflate returns it
    /// compressed. `None` (the default): send it as it is. Called under the
    /// outbox's lock, for the frames of the next batch, possibly more than
    /// once for a frame it leaves alone, so that check must be cheap.
    fn prepare(&self, _frame: &Frame) -> Option<Frame> {
        None
    }
    /// If `buf` starts with one whole heartbeat answer (a WebSocket pong, a
    /// raw TCP empty frame) that [`Wire::decode`] would take as
    /// [`Incoming::Heartbeat`], its length. Changes nothing: a parked
    /// connection ([`crate::hibernate`]) reads its peer's answer to a ping
    /// with this and stays parked, and leaves anything else (a message, a
    /// partial or bad frame) in the socket for the resumed driver to decode.
    /// `None` (the default): every byte resumes the connection.
    fn heartbeat_answer(&self, _buf: &[u8]) -> Option<usize> {
        None
    }
}

/// What an endpoint does with complete data messages.
pub trait Handler: Send + Unpin + 'static {
    /// One complete text (`binary == false`) or binary message. Replies go to
    /// the client's outbox.
    fn on_message(&mut self, payload: &[u8], binary: bool);
    /// The client whose outbox this connection drains.
    fn client(&self) -> &Arc<Client>;
    /// The node the client belongs to (its clock times heartbeats).
    fn node(&self) -> &Arc<Node>;
}

/// One connection after its handshake: the future its driver task runs. It
/// completes when the connection ends, or when it parks
/// ([`crate::hibernate`]): then its state lives on in the parking place.
pub struct Connection<H: Handler, W: Wire, S: Io = TcpStream>(Option<Conn<H, W, S>>);

/// The connection's state while its driver runs.
struct Conn<H: Handler, W: Wire, S: Io> {
    stream: S,
    handler: H,
    wire: W,
    /// Bytes of an incomplete frame, kept between reads (none when idle; boxed
    /// so that the common case costs one pointer).
    #[allow(clippy::box_collection)] // 8 bytes instead of 24 on every idle connection
    partial: Option<Box<Vec<u8>>>,
    /// We have received the peer's close frame, or EOF.
    peer_closed: bool,
    /// Our close frame has been queued.
    close_queued: bool,
    /// Our close frame has been written and the write side shut.
    close_sent: bool,
    /// While open: fires `parker.after()` after it was armed, and the
    /// connection parks then if nothing happened meanwhile (`active` unset),
    /// else it is armed again. While closing: bounds the wait for the peer's
    /// close (`close_timer` set). Allocated only while the driver runs: a
    /// parked connection has none.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// `timer` is the close wait.
    close_timer: bool,
    /// This connection's place in the per-IP count, released when it ends.
    _slot: Option<Box<crate::limits::IpSlot>>,
    /// Where it parks when idle (plain TCP only; `None`: never).
    parker: Option<Arc<Parker>>,
    /// Something was read or written since the idle timer was armed.
    active: bool,
    /// A heartbeat answer (pong) was read: the exchange that woke a parked
    /// connection is over, so it parks again after [`HEARTBEAT_REST`] of
    /// quiet rather than a whole `parker.after()`.
    rest_soon: bool,
    /// How many more times the idle timer is armed for [`FIRST_REST`]
    /// rather than `parker.after()`: a new connection parks as soon as its
    /// opening exchange is over ([`FIRST_RESTS`] at first; 0 once resumed).
    quick: u8,
}

/// How long a connection stays awake after a heartbeat answer if nothing
/// else happens (decision 0010, "Heartbeats and hibernation"): every client
/// is pinged once per `ping_interval`, and waking it for `--hibernate-after`
/// (2 s) each time kept about a sixth of idle connections awake.
const HEARTBEAT_REST: Duration = Duration::from_millis(100);

/// How long a new connection stays awake after its opening exchange (the
/// handshake, `connect`, the first subscriptions) if nothing else happens
/// (decision 0010, "Heartbeats while parked, and from the first second"):
/// a client that connects and then waits cost its task, registration and
/// timer (≈ 0.75 KiB more than parked) for `--hibernate-after` (2 s) and up
/// to twice that, and 10,000 clients connecting together all held them at
/// once. With this rest they park within half a second of going quiet.
const FIRST_REST: Duration = Duration::from_millis(250);

/// For how many of [`FIRST_REST`]'s periods, while busy in each, a new
/// connection keeps the short rest: eight (two seconds, the default
/// `--hibernate-after`); a connection busy that long is not idle and waits
/// for the usual `--hibernate-after` from then on.
const FIRST_RESTS: u8 = 8;

/// What one poll of the driver ends with.
enum Drive {
    Pending,
    /// The connection is over.
    Done,
    /// Idle long enough: hand it to the parker.
    Park,
}

enum ReadOutcome {
    /// Nothing more to read now.
    Pending,
    /// The peer closed the TCP stream or the read failed.
    Eof,
    /// Budget exhausted; more may be readable.
    Yield,
}

enum WriteOutcome {
    /// Everything queued was written; woken again by the next push.
    Idle,
    /// The socket is full; woken when writable.
    Pending,
    /// The close frame went out and the write side is shut.
    Closed,
    /// The write failed: the peer is gone.
    Failed,
}

impl<H: Handler, W: Wire, S: Io> Connection<H, W, S> {
    /// Wraps a stream whose handshake is done. `leftover` holds bytes read after
    /// the request head (a client may send its first frame right away).
    pub fn new(stream: S, handler: H, wire: W, leftover: &[u8]) -> Connection<H, W, S> {
        let mut conn = Conn {
            stream,
            handler,
            wire,
            partial: None,
            peer_closed: false,
            close_queued: false,
            close_sent: false,
            timer: None,
            close_timer: false,
            _slot: None,
            parker: None,
            active: false,
            rest_soon: false,
            quick: 0,
        };
        if !leftover.is_empty() {
            conn.absorb(&mut leftover.to_vec());
        }
        Connection(Some(conn))
    }

    /// Holds `slot` (the connection's place in the per-IP count) until the
    /// connection ends.
    pub fn holding(mut self, slot: Option<Box<crate::limits::IpSlot>>) -> Self {
        if let Some(c) = &mut self.0 {
            c._slot = slot;
        }
        self
    }
}

impl<H: Handler, W: Wire> Connection<H, W, TcpStream> {
    /// Parks the connection at `parker` whenever it is idle for
    /// `parker.after()` (plain sockets only: a TLS stream keeps its state).
    /// A new connection parks after [`FIRST_REST`] of quiet at first.
    pub fn hibernating(mut self, parker: Arc<Parker>) -> Self {
        if let Some(c) = &mut self.0 {
            c.parker = Some(parker);
            c.quick = FIRST_RESTS;
        }
        self
    }

    /// [`Connection::hibernating`] for a connection resumed from its parking
    /// place: it woke for a reason, so it stays awake the usual
    /// `parker.after()` (the wake-up cost is paid once per burst, not once
    /// per message).
    fn resumed(mut self, parker: Arc<Parker>) -> Self {
        if let Some(c) = &mut self.0 {
            c.parker = Some(parker);
        }
        self
    }

    /// [`Connection::hibernating`] if `parker` is set.
    pub fn hibernating_at(self, parker: &Option<Arc<Parker>>) -> Self {
        match parker {
            Some(p) => self.hibernating(p.clone()),
            None => self,
        }
    }
}

impl<H: Handler, W: Wire, S: Io> Conn<H, W, S> {
    /// Starts our close after a protocol violation. What is already queued
    /// (answers to the messages before the bad frame) still goes out first,
    /// as the module docs promise; Autobahn's cases 3.x, 4.x and 5.15 send a
    /// valid message and a bad frame in one write and expect the echo.
    fn close(&self, code: u16) {
        self.handler.client().outbox.close(code, false);
    }

    /// Decodes and dispatches every whole frame at the front of `buf`; returns
    /// how many bytes were consumed.
    fn process(&mut self, buf: &mut [u8]) -> usize {
        let mut off = 0;
        while off < buf.len() {
            if self.peer_closed || self.handler.client().outbox.is_closing() {
                // Closing: input is read and dropped.
                return buf.len();
            }
            let (wire, handler) = (&mut self.wire, &mut self.handler);
            match wire.decode(&mut buf[off..]) {
                Ok(None) => break,
                Ok(Some((n, msg))) => {
                    off += n;
                    match msg {
                        None => {}
                        Some(Incoming::Message { payload, binary }) => {
                            handler.on_message(payload, binary)
                        }
                        Some(Incoming::Ping(p)) => {
                            handler
                                .client()
                                .outbox
                                .push(Frame::Pong(Bytes::copy_from_slice(p)));
                        }
                        Some(Incoming::Heartbeat) => self.rest_soon = true,
                        Some(Incoming::Close(code)) => {
                            // Echo the peer's code (RFC 6455 §5.5.1).
                            let echo = code.unwrap_or(1000);
                            handler.client().outbox.close(echo, true);
                            self.peer_closed = true;
                            return buf.len();
                        }
                    }
                }
                Err(code) => {
                    if code == herald_proto::DisconnectCode::MessageTooBig.code() {
                        let m = &self.handler.node().metrics;
                        m.dropped(herald_core::metrics::Drop::TooLarge, 1);
                    }
                    tracing::debug!(
                        client = self.handler.client().id,
                        code,
                        "transport protocol error"
                    );
                    self.close(code);
                    return buf.len();
                }
            }
        }
        off
    }

    /// Feeds newly read bytes through the decoder, keeping any partial frame.
    fn absorb(&mut self, data: &mut [u8]) {
        self.absorb_inner(data);
        // A reassembled message may leave its buffer in the wire's decoder
        // until released: an idle connection must hold none.
        self.wire.release();
    }

    fn absorb_inner(&mut self, data: &mut [u8]) {
        match self.partial.take() {
            None => {
                let used = self.process(data);
                if used < data.len() {
                    self.partial = Some(Box::new(data[used..].to_vec()));
                }
            }
            Some(mut buf) => {
                buf.extend_from_slice(data);
                let used = self.process(&mut buf);
                buf.drain(..used);
                if !buf.is_empty() {
                    self.partial = Some(buf);
                }
                // An emptied buffer is dropped here: idle connections hold none.
            }
        }
    }

    fn poll_read(&mut self, cx: &mut Context<'_>) -> ReadOutcome {
        for _ in 0..READ_BUDGET {
            let got = READ.with(|cell| {
                let mut buf = cell.borrow_mut();
                match self.stream.poll_read_some(cx, &mut buf[..]) {
                    Poll::Pending => Some(ReadOutcome::Pending),
                    Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => Some(ReadOutcome::Eof),
                    Poll::Ready(Ok(n)) => {
                        self.active = true;
                        self.handler.client().touch(self.handler.node().now());
                        self.absorb(&mut buf[..n]);
                        None
                    }
                }
            });
            if let Some(outcome) = got {
                return outcome;
            }
        }
        ReadOutcome::Yield
    }

    fn poll_write(&mut self, cx: &mut Context<'_>) -> WriteOutcome {
        // Tracked frames written in a batch are dropped here, after the queue's
        // lock is released (their last drop pushes to another outbox).
        let mut retired = Retired::default();
        loop {
            retired.clear();
            if self.close_sent {
                return WriteOutcome::Closed;
            }
            let (stream, wire, close_queued) =
                (&mut self.stream, &self.wire, &mut self.close_queued);
            let metrics = &self.handler.node().metrics;
            let step = self.handler.client().outbox.with_queue(|q| {
                if q.frames.is_empty() {
                    match q.closing() {
                        Some(c) if !*close_queued => {
                            *close_queued = true;
                            q.frames.push_back(Frame::Close(c));
                        }
                        Some(_) => return Step::CloseDone,
                        None => {
                            q.set_waker(cx.waker());
                            return Step::Idle;
                        }
                    }
                }
                write_batch(stream, cx, wire, q, metrics, &mut retired)
            });
            match step {
                Step::Idle => {
                    return match self.stream.poll_flush_some(cx) {
                        Poll::Ready(Err(_)) => WriteOutcome::Failed,
                        Poll::Ready(Ok(())) => WriteOutcome::Idle,
                        Poll::Pending => WriteOutcome::Pending,
                    }
                }
                Step::Progress => {
                    self.active = true;
                    continue;
                }
                Step::CloseDone => {
                    let _ = self.stream.poll_flush_some(cx);
                    let _ = self.stream.poll_close_write(cx);
                    self.close_sent = true;
                    return WriteOutcome::Closed;
                }
                Step::Pending => return WriteOutcome::Pending,
                Step::Failed => return WriteOutcome::Failed,
            }
        }
    }
}

enum Step {
    Idle,
    Progress,
    CloseDone,
    Pending,
    Failed,
}

/// Writes as many queued frames as one vectored write takes and advances the
/// queue past what was written.
fn write_batch(
    stream: &mut impl Io,
    cx: &mut Context<'_>,
    wire: &impl Wire,
    q: &mut Queue,
    metrics: &herald_core::metrics::Metrics,
    retired: &mut Retired,
) -> Step {
    let mut headers = [[0u8; 14]; WRITE_BATCH];
    let mut hlens = [0usize; WRITE_BATCH];
    let mut totals = [0usize; WRITE_BATCH];
    let mut close_buf = [0u8; 125];
    let mut count = 0;
    let mut bytes = 0;
    let mut slices = 0;
    // A partly written head was prepared before its first byte went out.
    let first = usize::from(q.head_written > 0);
    for i in first..q.frames.len().min(WRITE_BATCH) {
        if let Some(replacement) = q.frames.get(i).and_then(|f| wire.prepare(f)) {
            // What it replaces is never tracked, so dropping it here is fine.
            drop(q.replace(i, replacement));
        }
    }
    for (i, frame) in q.frames.iter().take(WRITE_BATCH).enumerate() {
        slices += if matches!(frame, Frame::Spliced(_)) {
            4
        } else {
            2
        };
        if slices > WRITE_SLICES {
            break;
        }
        let plen = match frame {
            Frame::Close(c) => wire.close_payload(c, &mut close_buf),
            f => f.payload_len(),
        };
        hlens[i] = wire.header(frame, plen, &mut headers[i]);
        totals[i] = hlens[i] + plen;
        count = i + 1;
        bytes += totals[i];
        if bytes >= WRITE_BYTES {
            break;
        }
    }
    let mut iov: [IoSlice<'_>; WRITE_SLICES] = [IoSlice::new(&[]); WRITE_SLICES];
    let mut n_iov = 0;
    let skip = q.head_written as usize;
    // What of the first frame an earlier write already took; less than its
    // total, so it is used up within that frame.
    let mut to_skip = skip;
    for (i, frame) in q.frames.iter().take(count).enumerate() {
        let payload: [&[u8]; 3] = match frame {
            Frame::Close(_) => [&close_buf[..totals[i] - hlens[i]], &[], &[]],
            f => f.pieces(),
        };
        let header: &[u8] = &headers[i][..hlens[i]];
        for piece in std::iter::once(header).chain(payload) {
            // Also drops empty pieces.
            if to_skip >= piece.len() {
                to_skip -= piece.len();
                continue;
            }
            iov[n_iov] = IoSlice::new(&piece[to_skip..]);
            n_iov += 1;
            to_skip = 0;
        }
    }
    match stream.poll_write_some(cx, &iov[..n_iov]) {
        Poll::Ready(Ok(0)) => Step::Failed,
        Poll::Ready(Ok(mut written)) => {
            metrics.bytes_out.add(written as u64);
            let mut done = 0;
            let mut head = 0;
            for (i, total) in totals.iter().take(count).enumerate() {
                let remaining = if i == 0 { total - skip } else { *total };
                if written >= remaining {
                    written -= remaining;
                    done += 1;
                } else {
                    head = if i == 0 { skip + written } else { written };
                    break;
                }
            }
            q.advance_retiring(done, head as u32, retired);
            metrics.messages_out.add(done as u64);
            Step::Progress
        }
        Poll::Pending => Step::Pending,
        Poll::Ready(Err(_)) => Step::Failed,
    }
}

impl<H: Handler, W: Wire, S: Io> Conn<H, W, S> {
    fn drive(&mut self, cx: &mut Context<'_>) -> Drive {
        let read = self.poll_read(cx);
        if matches!(read, ReadOutcome::Eof) {
            self.peer_closed = true;
            if !self.close_queued {
                // The peer vanished (no close frame): nothing more can be sent.
                return Drive::Done;
            }
        }
        let write = self.poll_write(cx);
        match write {
            WriteOutcome::Failed => return Drive::Done,
            WriteOutcome::Closed => {
                if self.peer_closed {
                    return Drive::Done;
                }
                if !self.close_timer {
                    self.close_timer = true;
                    self.timer = Some(Box::pin(tokio::time::sleep(CLOSE_WAIT)));
                }
                if let Some(timer) = &mut self.timer {
                    if timer.as_mut().poll(cx).is_ready() {
                        return Drive::Done;
                    }
                }
            }
            WriteOutcome::Idle | WriteOutcome::Pending => {}
        }
        if matches!(read, ReadOutcome::Yield) {
            cx.waker().wake_by_ref();
            return Drive::Pending;
        }
        if self.close_queued || self.peer_closed {
            if !self.close_timer {
                self.timer = None;
            }
            return Drive::Pending;
        }
        if let Some(parker) = &self.parker {
            let after = parker.after();
            let rest = |quick: u8| {
                if quick > 0 {
                    after.min(FIRST_REST)
                } else {
                    after
                }
            };
            let timer = self
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(rest(self.quick))));
            if std::mem::take(&mut self.rest_soon) {
                // The heartbeat's own read and write are not activity; what
                // comes after it is (a message, a push) and keeps it awake.
                self.active = false;
                timer
                    .as_mut()
                    .reset(tokio::time::Instant::now() + after.min(HEARTBEAT_REST));
            }
            while timer.as_mut().poll(cx).is_ready() {
                let idle = !self.active
                    && self.partial.is_none()
                    && matches!(write, WriteOutcome::Idle)
                    && matches!(read, ReadOutcome::Pending);
                if idle {
                    return Drive::Park;
                }
                self.active = false;
                self.quick = self.quick.saturating_sub(1);
                timer
                    .as_mut()
                    .reset(tokio::time::Instant::now() + rest(self.quick));
            }
        }
        Drive::Pending
    }

    /// Hands the connection to its parker (its driver task then ends).
    fn park(self) {
        let Conn {
            stream,
            handler,
            wire,
            _slot,
            parker,
            ..
        } = self;
        let Some(parker) = parker else { return };
        // Out of tokio's reactor: its registration is freed with the task.
        let Some(stream) = stream.into_parkable() else {
            return;
        };
        let dormant = Box::new(Sleeping {
            handler,
            wire,
            slot: _slot,
        });
        parker.park(stream, dormant);
    }
}

/// The parked connection of a handler `H` with its wire `W` (see [`Connection`]).
pub(crate) struct Sleeping<H, W> {
    pub(crate) handler: H,
    pub(crate) wire: W,
    pub(crate) slot: Option<Box<crate::limits::IpSlot>>,
}

impl<H: Handler, W: Wire> Dormant for Sleeping<H, W> {
    fn resume(self: Box<Self>, stream: TcpStream, parker: &Arc<Parker>) {
        let s = *self;
        let conn = Connection::new(stream, s.handler, s.wire, &[])
            .holding(s.slot)
            .resumed(parker.clone());
        parker.spawn(conn);
    }

    fn client(&self) -> &Arc<Client> {
        self.handler.client()
    }

    fn ping(&self, out: &mut [u8; 14]) -> usize {
        self.wire.header(&Frame::Ping, 0, out)
    }

    fn heartbeat_answer(&self, buf: &[u8]) -> Option<usize> {
        self.wire.heartbeat_answer(buf)
    }

    fn heard(&self) {
        self.handler.client().touch(self.handler.node().now());
    }

    fn wrote(&self, bytes: usize, whole: bool) {
        let m = &self.handler.node().metrics;
        m.bytes_out.add(bytes as u64);
        if whole {
            m.messages_out.add(1);
        }
    }
}

impl<H: Handler, W: Wire, S: Io> Future for Connection<H, W, S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let Some(conn) = this.0.as_mut() else {
            return Poll::Ready(());
        };
        match conn.drive(cx) {
            Drive::Pending => Poll::Pending,
            Drive::Done => {
                this.0 = None;
                Poll::Ready(())
            }
            Drive::Park => {
                if let Some(conn) = this.0.take() {
                    conn.park();
                }
                Poll::Ready(())
            }
        }
    }
}

/// Herald's protocol: messages go straight to the shared session, whatever the
/// transport.
impl Handler for Session {
    fn on_message(&mut self, payload: &[u8], binary: bool) {
        Session::on_message(self, payload, binary);
    }

    fn client(&self) -> &Arc<Client> {
        Session::client(self)
    }

    fn node(&self) -> &Arc<Node> {
        Session::node(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::ws::WsWire;

    /// What a parked connection holds besides its client (decision 0010's
    /// account): a 24-byte slab entry and the boxed handler, wire and
    /// per-IP slot, 96 bytes (a jemalloc size class) for a WebSocket.
    #[test]
    fn a_parked_connection_is_small() {
        use std::mem::size_of;
        let ws = size_of::<Sleeping<Session, WsWire>>();
        let tcp = size_of::<Sleeping<Session, crate::transport::tcp::TcpWire>>();
        println!("Sleeping<Session, WsWire>: {ws} bytes (bound 96)");
        println!("Sleeping<Session, TcpWire>: {tcp} bytes (bound 96)");
        assert!(ws <= 96 && tcp <= 96, "{ws}, {tcp}");
    }
    use herald_core::metrics::Metrics;
    use herald_core::outbox::{Outbox, Spliced};
    use herald_ws::OpCode;

    /// A socket that takes at most `max` bytes per write and keeps them,
    /// noting each slice it was handed.
    struct Trickle {
        max: usize,
        out: Vec<u8>,
        slices: Vec<(usize, usize)>,
    }

    impl Io for Trickle {
        fn poll_read_some(&mut self, _: &mut Context<'_>, _: &mut [u8]) -> Poll<io::Result<usize>> {
            Poll::Pending
        }

        fn poll_write_some(
            &mut self,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut left = self.max;
            for b in bufs {
                self.slices.push((b.as_ptr() as usize, b.len()));
                let n = b.len().min(left);
                self.out.extend_from_slice(&b[..n]);
                left -= n;
                if left == 0 {
                    break;
                }
            }
            Poll::Ready(Ok(self.max - left))
        }

        fn poll_close_write(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn frame_bytes(opcode: OpCode, payload: &[u8]) -> Vec<u8> {
        let mut h = [0u8; 14];
        let n = herald_ws::write_header(&mut h, true, opcode, payload.len() as u64, None);
        [&h[..n], payload].concat()
    }

    /// A spliced frame goes out as its pieces, the shared body handed to the
    /// kernel in place (not copied), and a write that stops anywhere inside
    /// it, in any piece or header, resumes at the right byte.
    #[test]
    fn spliced_frames_are_written_in_pieces_and_resume_after_partial_writes() {
        let body = bytes::Bytes::from(vec![b'7'; 5000]);
        let spliced = || {
            Frame::Spliced(Arc::new(Spliced::new(
                bytes::Bytes::from_static(b"{\"pub\":{\"channel\":\"c\",\"offset\":1,\"data\":"),
                body.clone(),
                b"}}",
            )))
        };
        let frames = [
            Frame::Text(bytes::Bytes::from_static(b"{\"ok\":1}")),
            spliced(),
            Frame::Binary(bytes::Bytes::from_static(b"\x01\x02\x03")),
            spliced(),
        ];
        let mut expected = Vec::new();
        for f in &frames {
            let op = if matches!(f, Frame::Binary(_)) {
                OpCode::Binary
            } else {
                OpCode::Text
            };
            expected.extend(frame_bytes(op, &f.payload()));
        }
        let wire = WsWire::new(1 << 20);
        let metrics = Metrics::default();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for max in [1, 2, 3, 7, 41, 4999, 5047, 1 << 20] {
            let outbox = Outbox::new(1 << 20);
            for f in &frames {
                outbox.push(f.clone());
            }
            let mut io = Trickle {
                max,
                out: Vec::new(),
                slices: Vec::new(),
            };
            let mut retired = Retired::default();
            while !outbox.is_empty() {
                let step = outbox.with_queue(|q| {
                    write_batch(&mut io, &mut cx, &wire, q, &metrics, &mut retired)
                });
                assert!(matches!(step, Step::Progress), "max {max}");
            }
            assert!(io.out == expected, "max {max}: the bytes differ");
            if max == 1 << 20 {
                // One write: 4 frames, header and pieces each, nothing empty.
                assert_eq!(io.slices.len(), 2 + 4 + 2 + 4);
                let shared = (body.as_ptr() as usize, body.len());
                assert_eq!(io.slices.iter().filter(|s| **s == shared).count(), 2);
            }
        }
        // More spliced frames than one write's slices hold: the batch stops
        // at a whole frame and the next write goes on from there.
        let outbox = Outbox::new(1 << 30);
        for _ in 0..WRITE_BATCH {
            outbox.push(spliced());
        }
        let mut io = Trickle {
            max: usize::MAX,
            out: Vec::new(),
            slices: Vec::new(),
        };
        let mut retired = Retired::default();
        let mut writes = 0;
        while !outbox.is_empty() {
            outbox.with_queue(|q| write_batch(&mut io, &mut cx, &wire, q, &metrics, &mut retired));
            writes += 1;
        }
        assert_eq!(writes, 2);
        assert!(io.out == frame_bytes(OpCode::Text, &spliced().payload()).repeat(WRITE_BATCH));
    }
}
