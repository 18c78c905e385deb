//! The outbound queue of one connection, shared by everyone who sends to it.
//!
//! Publishers (the hub's fan-out, on any thread) push shared, already-encoded
//! frames; the connection's driver drains them, many frames per syscall. The
//! queue is bounded in bytes. **Slow-consumer policy:** a push that would take the
//! queue past its bound discards everything queued and marks the connection as
//! closing with [`DisconnectCode::SlowConsumer`] (3001, "reconnect and recover"):
//! the driver sends the close and ends the connection, and nobody else waits. A
//! lagging client is never allowed to grow the server's memory or to slow the
//! fan-out to others; with history and recovery it loses nothing it cannot get
//! back on reconnect.
//!
//! The lock is a plain `std::sync::Mutex` held only for queue operations and for
//! one non-blocking write; it is never held across an `.await`.
//!
//! **Tracked frames** ([`Tracked`]) tell their sender when every recipient has
//! its copy: one allocation per broadcast, shared by every recipient's queue,
//! whose last drop (the last copy handed to the kernel, or dropped with its
//! connection) pushes a follow-up frame to the sender. Because that last drop
//! locks another outbox, a queue never drops a tracked frame while its own lock
//! is held: [`Queue::advance_retiring`] hands them to a [`Retired`] that the
//! driver drops after unlocking, and discards move them out before unlocking.
//! (Two drivers each holding its own lock while pushing to the other's would
//! otherwise deadlock.)

use crate::broker::Publication;
use crate::client::Client;
use bytes::Bytes;
use herald_proto::DisconnectCode;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

/// Fixed accounting overhead per queued frame, so that a flood of tiny frames
/// is bounded too.
const FRAME_OVERHEAD: usize = 64;

/// One outbound message, transport-neutral. Each transport renders it (a
/// WebSocket frame header, a length prefix, an SSE event).
#[derive(Debug, Clone)]
pub enum Frame {
    /// A text message (JSON encoding, shootout JSON mode).
    Text(Bytes),
    /// A binary message (binary encoding, shootout binary mode).
    Binary(Bytes),
    /// A transport-level heartbeat (WebSocket ping, SSE comment, ...).
    Ping,
    /// A transport-level answer to a peer's ping (WebSocket pong).
    Pong(Bytes),
    /// The last frame of a connection: queued by its driver once the queue has
    /// drained after a close was requested (never by publishers).
    Close(Closing),
    /// A publication not yet rendered, for transports that render each event
    /// per stream (SSE ids carry the stream's positions). Shared by every such
    /// subscriber of the publication.
    Publication(Arc<Publication>),
    /// A text or binary message whose sender waits until every recipient has
    /// it (the shootout's `broadcastResult`); see [`Tracked`].
    Tracked(Arc<Tracked>),
    /// A text message in pieces, written one after another: a large JSON
    /// publication push whose data is the publication's own bytes, not a
    /// copy (see [`Spliced`]). Shared by every JSON subscriber of the
    /// publication.
    Spliced(Arc<Spliced>),
    /// A text message compressed with permessage-deflate (RFC 7692): the
    /// payload of a WebSocket frame sent with RSV1 set. Only ever queued for,
    /// or made by the writer of, a WebSocket connection that negotiated it.
    DeflatedText(Bytes),
    /// A binary message compressed with permessage-deflate; see
    /// [`Frame::DeflatedText`].
    DeflatedBinary(Bytes),
}

/// How the hub compresses a publication push for WebSocket clients that
/// negotiated permessage-deflate ([`Client::deflate`](crate::Client::deflate)):
/// once per publication and encoding, shared by all of them. Without
/// context takeover (all Herald negotiates) the compressed bytes do not
/// depend on the connection, so this is the same work as encoding once per
/// encoding. A function pointer, so that the hub needs no compression
/// library: the server passes `herald_ws::deflate::compress_pieces`.
#[derive(Debug, Clone, Copy)]
pub struct Deflater {
    /// Appends the message given in pieces, compressed as one
    /// permessage-deflate message, to the buffer.
    pub compress: fn(&[&[u8]], &mut Vec<u8>),
    /// Pushes shorter than this many bytes stay uncompressed.
    pub threshold: usize,
}

impl Deflater {
    /// `frame` compressed, if it is a text or binary message of at least
    /// the threshold; `None` otherwise.
    pub fn deflate(&self, frame: &Frame) -> Option<Frame> {
        let binary = match frame {
            Frame::Text(_) | Frame::Spliced(_) => false,
            Frame::Binary(_) => true,
            _ => return None,
        };
        if frame.payload_len() < self.threshold {
            return None;
        }
        let mut out = Vec::new();
        (self.compress)(&frame.pieces(), &mut out);
        let out = Bytes::from(out);
        Some(if binary {
            Frame::DeflatedBinary(out)
        } else {
            Frame::DeflatedText(out)
        })
    }
}

/// A text message written as `head`, `body`, `tail` without joining them:
/// the hub's JSON push of a large publication is its head
/// (`{"pub":{"channel":…,"offset":N,"data":`), the publication's data (the
/// same `Bytes` the broker and its history hold) and `}}`. Why: copying a
/// large payload into each push cost a WebSocket consumer more than the SSE
/// one, which renders from the publication anyway (bench/RESULTS.md, "WebSocket
/// vs SSE per event"); the socket driver hands the pieces to one vectored
/// write instead.
#[derive(Debug)]
pub struct Spliced {
    head: Bytes,
    body: Bytes,
    tail: &'static [u8],
}

impl Spliced {
    /// The message `head`, `body`, `tail`.
    pub fn new(head: Bytes, body: Bytes, tail: &'static [u8]) -> Spliced {
        Spliced { head, body, tail }
    }

    /// Its three pieces, in order.
    pub fn pieces(&self) -> [&[u8]; 3] {
        [&self.head, &self.body, self.tail]
    }

    /// The body: the bytes it shares rather than copies.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len() + self.tail.len()
    }

    /// Whether it has no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message in one buffer (a copy): for the few consumers that need
    /// it contiguous (long-polling bodies, the edge → owner hop, tests).
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(self.pieces().concat())
    }
}

/// One broadcast's message, shared by every recipient's queue. The `Arc`'s
/// reference count is the broadcast's only counter: when the last copy is
/// written (or dropped with a closed connection), `then` is pushed to the
/// sender's outbox. No per-recipient allocation.
#[derive(Debug)]
pub struct Tracked {
    payload: Bytes,
    binary: bool,
    then: Option<(Weak<Client>, Frame)>,
}

impl Tracked {
    /// A message (`binary` or text) that pushes `then` to `sender` once every
    /// copy of it is gone from every queue. The sender is held weakly: its
    /// own queue holds a copy, and a closed sender simply gets nothing.
    pub fn new(payload: Bytes, binary: bool, sender: &Arc<Client>, then: Frame) -> Tracked {
        Tracked {
            payload,
            binary,
            then: Some((Arc::downgrade(sender), then)),
        }
    }

    /// Whether it goes out as a binary message (text otherwise).
    pub fn is_binary(&self) -> bool {
        self.binary
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some((sender, frame)) = self.then.take() {
            if let Some(sender) = sender.upgrade() {
                sender.outbox.push(frame);
            }
        }
    }
}

/// Tracked frames taken off a queue by [`Queue::advance_retiring`], kept here
/// (on the driver's stack, no allocation) until the queue's lock is released,
/// then dropped with this.
#[derive(Debug)]
pub struct Retired {
    slots: [Option<Arc<Tracked>>; RETIRED_SLOTS],
    len: usize,
}

/// How many tracked frames one [`Queue::advance_retiring`] can retire: at
/// least as many as a driver writes in one batch.
pub const RETIRED_SLOTS: usize = 64;

impl Default for Retired {
    fn default() -> Retired {
        Retired {
            slots: std::array::from_fn(|_| None),
            len: 0,
        }
    }
}

impl Retired {
    /// Drops what is held (outside any queue lock).
    pub fn clear(&mut self) {
        for slot in &mut self.slots[..self.len] {
            *slot = None;
        }
        self.len = 0;
    }
}

impl Frame {
    /// The payload bytes (empty for `Ping`), in one piece: borrowed, except
    /// for a [`Frame::Spliced`], which this copies. Writers use
    /// [`Frame::pieces`].
    pub fn payload(&self) -> std::borrow::Cow<'_, [u8]> {
        match self {
            Frame::Spliced(s) => std::borrow::Cow::Owned(s.pieces().concat()),
            f => std::borrow::Cow::Borrowed(f.pieces()[0]),
        }
    }

    /// The payload as up to three pieces to be written in order (one for
    /// every frame but [`Frame::Spliced`]; the others are then empty).
    pub fn pieces(&self) -> [&[u8]; 3] {
        let one: &[u8] = match self {
            Frame::Text(b)
            | Frame::Binary(b)
            | Frame::Pong(b)
            | Frame::DeflatedText(b)
            | Frame::DeflatedBinary(b) => b,
            Frame::Publication(p) => &p.data,
            Frame::Tracked(t) => &t.payload,
            Frame::Spliced(s) => return s.pieces(),
            Frame::Ping | Frame::Close(_) => &[],
        };
        [one, &[], &[]]
    }

    /// The payload's length in bytes.
    pub fn payload_len(&self) -> usize {
        match self {
            Frame::Spliced(s) => s.len(),
            f => f.pieces()[0].len(),
        }
    }
}

/// What happened to a pushed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// Queued; the driver has been woken if it was idle.
    Queued,
    /// The connection is already closing; the frame was dropped.
    Closed,
    /// This push overflowed the queue: the connection is now closing as a slow
    /// consumer and its queue was discarded.
    Overflow,
}

/// Why a connection is closing: the close code sent to the client. The reason
/// text is derived from the code ([`Closing::reason`]), which keeps this (and
/// every idle connection's queue) small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closing {
    /// Close code sent to the client.
    pub code: u16,
}

impl Closing {
    /// The reason sent with the code ("" for codes we only echo).
    pub fn reason(&self) -> &'static str {
        DisconnectCode::from_code(self.code).map_or("", DisconnectCode::reason)
    }
}

/// The queue's state, visible to the driver while it holds the lock.
#[derive(Debug)]
pub struct Queue {
    /// Frames not yet fully written, oldest first.
    pub frames: VecDeque<Frame>,
    /// How many bytes of the encoded `frames[0]` were already written (a partial
    /// write); the driver resumes from there.
    pub head_written: u32,
    bytes: u32,
    /// The bound on `bytes`: here rather than beside the lock, in the
    /// queue's padding, so that the outbox (and the client) stays small.
    max_bytes: u32,
    waker: Option<Waker>,
    closing: Option<Closing>,
}

impl Queue {
    /// Removes the first `n` frames (fully written) and resets the head offset to
    /// `head_written`. For queues that never hold [`Frame::Tracked`] (SSE,
    /// long-polling): a tracked frame dropped here would lock its sender's
    /// outbox under this one's lock. Drivers of queues that may hold them use
    /// [`Queue::advance_retiring`].
    pub fn advance(&mut self, n: usize, head_written: u32) {
        for _ in 0..n {
            if let Some(f) = self.frames.pop_front() {
                self.bytes = self.bytes.saturating_sub(cost(&f));
            }
        }
        self.head_written = head_written;
    }

    /// [`Queue::advance`] that moves tracked frames to `retired`, for the
    /// caller to drop once the lock is released. `n` must not exceed
    /// [`RETIRED_SLOTS`] less what `retired` already holds (a driver's batch).
    pub fn advance_retiring(&mut self, n: usize, head_written: u32, retired: &mut Retired) {
        for _ in 0..n {
            match self.frames.pop_front() {
                Some(Frame::Tracked(t)) => {
                    self.bytes = self
                        .bytes
                        .saturating_sub(FRAME_OVERHEAD as u32 + t.payload.len() as u32);
                    match retired.slots.get_mut(retired.len) {
                        Some(slot) => {
                            *slot = Some(t);
                            retired.len += 1;
                        }
                        // More than a batch: put it back unwritten rather than
                        // drop it here (cannot happen with a driver's batch).
                        None => {
                            debug_assert!(false, "advance_retiring past RETIRED_SLOTS");
                            self.frames.push_front(Frame::Tracked(t));
                            self.bytes += cost(&self.frames[0]);
                            return;
                        }
                    }
                }
                Some(f) => self.bytes = self.bytes.saturating_sub(cost(&f)),
                None => break,
            }
        }
        self.head_written = head_written;
    }

    /// Puts `frame` in place of the `i`-th queued frame (not yet written:
    /// `i` is past a partly written head) and returns the frame it replaces,
    /// keeping the byte count right. For a WebSocket writer compressing
    /// frames as it sends them. Never replaces a [`Frame::Tracked`] (its drop
    /// must happen outside the lock): such a call does nothing and returns
    /// `None`, as does an `i` out of range.
    pub fn replace(&mut self, i: usize, frame: Frame) -> Option<Frame> {
        if i == 0 && self.head_written > 0 {
            return None;
        }
        let slot = self.frames.get_mut(i)?;
        if matches!(slot, Frame::Tracked(_)) {
            return None;
        }
        let new_cost = cost(&frame);
        let old = std::mem::replace(slot, frame);
        self.bytes = self
            .bytes
            .saturating_sub(cost(&old))
            .saturating_add(new_cost);
        Some(old)
    }

    /// Takes every queued frame except one already partly written (cutting that
    /// one would corrupt the stream before the close frame). The caller drops
    /// what it returns after releasing the lock (it may hold tracked frames).
    #[must_use]
    fn discard(&mut self) -> VecDeque<Frame> {
        let head = if self.head_written > 0 {
            self.frames.pop_front()
        } else {
            None
        };
        let dropped = std::mem::take(&mut self.frames);
        self.bytes = 0;
        if let Some(h) = head {
            self.bytes = cost(&h);
            self.frames.push_back(h);
        }
        dropped
    }

    /// Frees the frames' buffer when nothing is queued, so that an idle
    /// connection's queue holds no allocation. A `VecDeque` keeps its
    /// capacity once drained: after a client's first reply that is four
    /// frames, 160 bytes, as much as the client itself, which a parked
    /// connection (decision 0010) would keep for nothing. The next push
    /// allocates it again. Called when a connection parks, never on the
    /// fan-out's path.
    pub fn release_buffer(&mut self) {
        if self.frames.is_empty() && self.frames.capacity() > 0 {
            self.frames = VecDeque::new();
        }
    }

    /// The close requested for this connection, if any.
    pub fn closing(&self) -> Option<Closing> {
        self.closing
    }

    /// The waker registered to be woken by the next push or close, if any:
    /// a parked connection's (decision 0010) says where it is parked, so
    /// that a heartbeat can be written there without resuming it.
    pub fn waker(&self) -> Option<&Waker> {
        self.waker.as_ref()
    }

    /// Queues `frame` on an empty queue, its first `written` bytes already
    /// sent by another path (a heartbeat written to a parked connection's
    /// socket that took only part of it, decision 0010), and wakes the
    /// driver to send the rest before anything else. The bound is not
    /// applied: this is one control frame. The queue must be empty (the
    /// caller saw it so under this same lock): otherwise the frame is queued
    /// last, as sent from its start.
    pub fn push_started(&mut self, frame: Frame, written: u32) {
        self.bytes = self.bytes.saturating_add(cost(&frame));
        if self.frames.is_empty() {
            self.head_written = written;
        } else {
            debug_assert!(false, "push_started on a queue with frames");
        }
        self.frames.push_back(frame);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    /// Registers the driver's waker, to be woken by the next push or close.
    pub fn set_waker(&mut self, waker: &Waker) {
        match &self.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => self.waker = Some(waker.clone()),
        }
    }
}

/// Queue budget a frame uses (payloads beyond 4 GiB cannot be queued anyway:
/// the message size limit is far below).
fn cost(f: &Frame) -> u32 {
    (f.payload_len() + FRAME_OVERHEAD).min(u32::MAX as usize) as u32
}

/// A bounded, shared outbound queue. See the module docs for the policy.
/// 72 bytes: the lock's 8 and the queue's 64 (its bound included), which
/// keeps a [`Client`] within 112 bytes (an `Arc<Client>` in jemalloc's
/// 128-byte class; decision 0010).
#[derive(Debug)]
pub struct Outbox {
    queue: Mutex<Queue>,
}

impl Outbox {
    /// An empty outbox that holds at most about `max_bytes` of queued payload.
    pub fn new(max_bytes: usize) -> Outbox {
        Outbox {
            queue: Mutex::new(Queue {
                frames: VecDeque::new(),
                head_written: 0,
                bytes: 0,
                max_bytes: max_bytes.min(u32::MAX as usize) as u32,
                waker: None,
                closing: None,
            }),
        }
    }

    /// The bound, in bytes: no frame larger than this can ever be queued.
    pub fn max_bytes(&self) -> usize {
        self.lock().max_bytes as usize
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding this lock cannot leave the queue inconsistent
        // (every mutation is a single push/pop), so poisoning is ignored.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a frame, applying the slow-consumer policy.
    pub fn push(&self, frame: Frame) -> PushOutcome {
        let mut q = self.lock();
        if q.closing.is_some() {
            drop(q);
            drop(frame);
            return PushOutcome::Closed;
        }
        let cost = cost(&frame);
        if q.bytes.saturating_add(cost) > q.max_bytes {
            let dropped = q.discard();
            q.closing = Some(Closing {
                code: DisconnectCode::SlowConsumer.code(),
            });
            if let Some(w) = q.waker.take() {
                w.wake();
            }
            drop(q);
            drop((dropped, frame));
            return PushOutcome::Overflow;
        }
        q.bytes += cost;
        q.frames.push_back(frame);
        // Whoever registered a waker is woken by the next push, as
        // `set_waker` promises, whether or not the queue was empty: drivers
        // register only when it is, but the SSE start-up wait registers with
        // answers already queued and waits for the rest.
        if let Some(w) = q.waker.take() {
            w.wake();
        }
        PushOutcome::Queued
    }

    /// Queues `frames` in order under one lock: the same as pushing each in
    /// turn (the same slow-consumer policy; after an overflow the rest are
    /// dropped, as a closing queue drops them), but one lock and at most one
    /// wake for the lot. The fan-out of a batch of publications
    /// (the hub's `Deliver::deliver_batch`) uses it. Frames not queued are dropped
    /// after the lock is released, like [`Outbox::push`]'s.
    pub fn push_many<I: IntoIterator<Item = Frame>>(&self, frames: I) -> PushOutcome {
        let mut todo = frames.into_iter();
        let mut q = self.lock();
        if q.closing.is_some() {
            drop(q);
            drop(todo);
            return PushOutcome::Closed;
        }
        let len_before = q.frames.len();
        let mut outcome = PushOutcome::Queued;
        let mut dropped = VecDeque::new();
        for frame in todo.by_ref() {
            let cost = cost(&frame);
            if q.bytes.saturating_add(cost) > q.max_bytes {
                dropped = q.discard();
                dropped.push_back(frame);
                q.closing = Some(Closing {
                    code: DisconnectCode::SlowConsumer.code(),
                });
                outcome = PushOutcome::Overflow;
                break;
            }
            q.bytes += cost;
            q.frames.push_back(frame);
        }
        if outcome == PushOutcome::Overflow || q.frames.len() > len_before {
            if let Some(w) = q.waker.take() {
                w.wake();
            }
        }
        drop(q);
        drop((dropped, todo));
        outcome
    }

    /// Asks the driver to close the connection with `code`. With `discard`, queued
    /// frames are dropped; otherwise they are written first. A second close
    /// request is ignored (the first reason wins).
    pub fn close(&self, code: u16, discard: bool) {
        let mut q = self.lock();
        if q.closing.is_some() {
            return;
        }
        let dropped = if discard {
            q.discard()
        } else {
            VecDeque::new()
        };
        q.closing = Some(Closing { code });
        if let Some(w) = q.waker.take() {
            w.wake();
        }
        drop(q);
        drop(dropped);
    }

    /// Whether a close has been requested.
    pub fn is_closing(&self) -> bool {
        self.lock().closing.is_some()
    }

    /// Runs `f` on the locked queue: the driver's way to write and advance.
    pub fn with_queue<R>(&self, f: impl FnOnce(&mut Queue) -> R) -> R {
        f(&mut self.lock())
    }

    /// Payload bytes waiting (what the bound counts): a producer that
    /// sends a lot on its own schedule (a lobby snapshot in pages) waits
    /// for this to fall before sending more.
    pub fn queued_bytes(&self) -> usize {
        self.lock().bytes as usize
    }

    /// Number of frames waiting.
    pub fn len(&self) -> usize {
        self.lock().frames.len()
    }

    /// True when nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_proto::Encoding;

    fn client(id: u64) -> Arc<Client> {
        Arc::new(Client::new(id, Encoding::Json, 1 << 20, 0))
    }

    fn tracked(sender: &Arc<Client>, result: &'static [u8]) -> Frame {
        Frame::Tracked(Arc::new(Tracked::new(
            Bytes::from_static(b"copy"),
            false,
            sender,
            Frame::Text(Bytes::from_static(result)),
        )))
    }

    /// Writes (advances past) everything queued, like a driver.
    fn write_all(c: &Client) -> usize {
        let mut retired = Retired::default();
        let n = c.outbox.with_queue(|q| {
            let n = q.frames.len();
            q.advance_retiring(n, 0, &mut retired);
            n
        });
        retired.clear();
        n
    }

    #[test]
    fn release_buffer_frees_a_drained_queue_only() {
        let c = client(1);
        c.outbox.push(Frame::Text(Bytes::from_static(b"reply")));
        // Not empty: kept.
        c.outbox.with_queue(Queue::release_buffer);
        assert_eq!(c.outbox.len(), 1);
        assert_eq!(write_all(&c), 1);
        assert!(
            c.outbox.with_queue(|q| q.frames.capacity()) > 0,
            "a drained VecDeque keeps its buffer"
        );
        c.outbox.with_queue(Queue::release_buffer);
        assert_eq!(c.outbox.with_queue(|q| q.frames.capacity()), 0);
        // It works as before afterwards.
        assert_eq!(c.outbox.push(Frame::Ping), PushOutcome::Queued);
        assert_eq!(write_all(&c), 1);
    }

    #[test]
    fn tracked_result_follows_the_last_copy() {
        let (sender, a, b) = (client(1), client(2), client(3));
        let frame = tracked(&sender, b"done");
        for c in [&sender, &a, &b] {
            c.outbox.push(frame.clone());
        }
        drop(frame);
        assert_eq!(write_all(&sender), 1, "its own copy only");
        assert_eq!(write_all(&a), 1);
        assert!(sender.outbox.is_empty(), "b has not written its copy");
        // b closes with its copy still queued: the copy is dropped, the
        // sender is answered.
        b.outbox.close(1000, true);
        assert_eq!(sender.outbox.len(), 1);
        assert_eq!(
            sender.outbox.with_queue(|q| q.frames[0].payload().to_vec()),
            b"done"
        );
    }

    #[test]
    fn tracked_result_is_dropped_when_the_sender_is_gone() {
        let (sender, a) = (client(1), client(2));
        a.outbox.push(tracked(&sender, b"done"));
        let weak = Arc::downgrade(&sender);
        drop(sender);
        assert_eq!(write_all(&a), 1);
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn tracked_overflow_answers_the_sender() {
        let sender = client(1);
        let small = Arc::new(Client::new(2, Encoding::Json, 200, 0));
        small.outbox.push(tracked(&sender, b"first"));
        // Overflow discards the queued copy (and refuses this one).
        let big = Frame::Text(Bytes::from(vec![0u8; 300]));
        assert_eq!(small.outbox.push(big), PushOutcome::Overflow);
        assert_eq!(sender.outbox.len(), 1);
    }

    /// Two drivers, each writing copies of the other's broadcasts under its
    /// own lock: the results are pushed after unlocking, so this ends.
    #[test]
    fn crossed_tracked_frames_do_not_deadlock() {
        let (a, b) = (client(1), client(2));
        let rounds = 20_000;
        let mut threads = Vec::new();
        for (me, other) in [(a.clone(), b.clone()), (b.clone(), a.clone())] {
            threads.push(std::thread::spawn(move || {
                let mut results = 0;
                for _ in 0..rounds {
                    other.outbox.push(tracked(&me, b"r"));
                    let mut retired = Retired::default();
                    me.outbox.with_queue(|q| {
                        results += q
                            .frames
                            .iter()
                            .filter(|f| matches!(f, Frame::Text(_)))
                            .count();
                        let n = q.frames.len().min(RETIRED_SLOTS);
                        q.advance_retiring(n, 0, &mut retired);
                    });
                    retired.clear();
                }
                results
            }));
        }
        let results: usize = threads.into_iter().map(|t| t.join().expect("thread")).sum();
        let left = a.outbox.len() + b.outbox.len();
        assert!(results + left >= 2 * rounds - 2, "{results} + {left}");
    }

    #[test]
    fn overflow_discards_and_closes_once() {
        let o = Outbox::new(3 * (10 + FRAME_OVERHEAD));
        for _ in 0..3 {
            assert_eq!(
                o.push(Frame::Text(Bytes::from_static(b"0123456789"))),
                PushOutcome::Queued
            );
        }
        assert_eq!(
            o.push(Frame::Text(Bytes::from_static(b"0123456789"))),
            PushOutcome::Overflow
        );
        assert!(o.is_empty());
        assert_eq!(o.push(Frame::Ping), PushOutcome::Closed);
        let c = o.with_queue(|q| q.closing());
        assert_eq!(c.map(|c| c.code), Some(3001));
    }

    /// Counts its wakes.
    struct Wakes(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn text(s: &'static str) -> Frame {
        Frame::Text(Bytes::from_static(s.as_bytes()))
    }

    fn payloads(o: &Outbox) -> Vec<Vec<u8>> {
        o.with_queue(|q| q.frames.iter().map(|f| f.payload().to_vec()).collect())
    }

    #[test]
    fn push_many_queues_in_order_and_wakes_once() {
        let o = Outbox::new(1 << 20);
        let wakes = Arc::new(Wakes(Default::default()));
        let waker = std::task::Waker::from(wakes.clone());
        o.with_queue(|q| q.set_waker(&waker));
        assert_eq!(
            o.push_many([text("a"), text("b"), text("c")]),
            PushOutcome::Queued
        );
        assert_eq!(payloads(&o), [b"a", b"b", b"c"]);
        assert_eq!(wakes.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        // The waker was taken: a second batch wakes nobody.
        assert_eq!(o.push_many([text("d")]), PushOutcome::Queued);
        assert_eq!(wakes.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(o.len(), 4);
    }

    /// `set_waker` promises a wake on the next push even when frames are
    /// already queued: the SSE start-up wait (`transport/sse`) registers
    /// with one answer queued and waits for the next. (Waking only on an
    /// empty queue left `GET /sse?table=1&channel=chat` silent until the
    /// handshake timeout.)
    #[test]
    fn a_waker_registered_over_queued_frames_is_woken_by_the_next_push() {
        let o = Outbox::new(1 << 20);
        let wakes = Arc::new(Wakes(Default::default()));
        let waker = std::task::Waker::from(wakes.clone());
        assert_eq!(o.push(text("a")), PushOutcome::Queued);
        o.with_queue(|q| q.set_waker(&waker));
        assert_eq!(o.push(text("b")), PushOutcome::Queued);
        assert_eq!(wakes.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        o.with_queue(|q| q.set_waker(&waker));
        assert_eq!(o.push_many([text("c")]), PushOutcome::Queued);
        assert_eq!(wakes.0.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn push_many_overflowing_midway_closes_as_a_slow_consumer() {
        let o = Outbox::new(3 * (10 + FRAME_OVERHEAD));
        let wakes = Arc::new(Wakes(Default::default()));
        let waker = std::task::Waker::from(wakes.clone());
        assert_eq!(o.push(text("0123456789")), PushOutcome::Queued);
        o.with_queue(|q| q.set_waker(&waker));
        // The third frame of this batch is one too many.
        let batch = [
            text("0123456789"),
            text("0123456789"),
            text("0123456789"),
            text("x"),
        ];
        assert_eq!(o.push_many(batch), PushOutcome::Overflow);
        assert!(o.is_empty(), "the queue is discarded");
        let c = o.with_queue(|q| q.closing());
        assert_eq!(c.map(|c| c.code), Some(3001));
        assert_eq!(wakes.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(o.push_many([text("y")]), PushOutcome::Closed);
        assert!(o.is_empty());
    }

    #[test]
    fn push_many_drops_unqueued_tracked_frames_outside_the_lock() {
        // The sender's result is pushed to the sender's own outbox when the
        // last copy goes: here the recipient is the sender, so dropping it
        // under the lock would deadlock.
        let sender = Arc::new(Client::new(1, Encoding::Json, 2 * (3 + FRAME_OVERHEAD), 0));
        let t = tracked(&sender, b"done");
        let batch = [text("abc"), text("abc"), text("abc"), t];
        assert_eq!(sender.outbox.push_many(batch), PushOutcome::Overflow);
        assert!(sender.outbox.is_closing());
    }

    #[test]
    fn discard_keeps_a_partly_written_frame() {
        let o = Outbox::new(2 * (4 + FRAME_OVERHEAD));
        o.push(Frame::Binary(Bytes::from_static(b"head")));
        o.push(Frame::Binary(Bytes::from_static(b"tail")));
        o.with_queue(|q| q.advance(0, 3));
        assert_eq!(
            o.push(Frame::Binary(Bytes::from_static(b"more"))),
            PushOutcome::Overflow
        );
        let left: Vec<Vec<u8>> =
            o.with_queue(|q| q.frames.iter().map(|f| f.payload().to_vec()).collect());
        assert_eq!(left, vec![b"head".to_vec()]);
    }

    #[test]
    fn advance_releases_budget() {
        let o = Outbox::new(2 * (4 + FRAME_OVERHEAD));
        o.push(Frame::Binary(Bytes::from_static(b"abcd")));
        o.push(Frame::Binary(Bytes::from_static(b"abcd")));
        o.with_queue(|q| q.advance(2, 0));
        assert_eq!(
            o.push(Frame::Binary(Bytes::from_static(b"abcd"))),
            PushOutcome::Queued
        );
    }

    #[test]
    fn close_without_discard_keeps_frames() {
        let o = Outbox::new(1 << 20);
        o.push(Frame::Text(Bytes::from_static(b"x")));
        o.close(1001, false);
        assert_eq!(o.len(), 1);
        o.close(3001, true);
        assert_eq!(o.with_queue(|q| q.closing()).map(|c| c.code), Some(1001));
    }
}
