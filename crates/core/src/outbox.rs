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

use crate::broker::Publication;
use bytes::Bytes;
use herald_proto::DisconnectCode;
use std::collections::VecDeque;
use std::sync::Arc;
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
}

impl Frame {
    /// The payload bytes (empty for `Ping`).
    pub fn payload(&self) -> &[u8] {
        match self {
            Frame::Text(b) | Frame::Binary(b) | Frame::Pong(b) => b,
            Frame::Publication(p) => &p.data,
            Frame::Ping | Frame::Close(_) => &[],
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
#[derive(Debug, Default)]
pub struct Queue {
    /// Frames not yet fully written, oldest first.
    pub frames: VecDeque<Frame>,
    /// How many bytes of the encoded `frames[0]` were already written (a partial
    /// write); the driver resumes from there.
    pub head_written: u32,
    bytes: u32,
    waker: Option<Waker>,
    closing: Option<Closing>,
}

impl Queue {
    /// Removes the first `n` frames (fully written) and resets the head offset to
    /// `head_written`.
    pub fn advance(&mut self, n: usize, head_written: u32) {
        for _ in 0..n {
            if let Some(f) = self.frames.pop_front() {
                self.bytes = self.bytes.saturating_sub(cost(&f));
            }
        }
        self.head_written = head_written;
    }

    /// Drops every queued frame except one already partly written (cutting that
    /// one would corrupt the stream before the close frame).
    fn discard(&mut self) {
        let head = if self.head_written > 0 {
            self.frames.pop_front()
        } else {
            None
        };
        self.frames.clear();
        self.bytes = 0;
        if let Some(h) = head {
            self.bytes = cost(&h);
            self.frames.push_back(h);
        }
    }

    /// The close requested for this connection, if any.
    pub fn closing(&self) -> Option<Closing> {
        self.closing
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
    (f.payload().len() + FRAME_OVERHEAD).min(u32::MAX as usize) as u32
}

/// A bounded, shared outbound queue. See the module docs for the policy.
#[derive(Debug)]
pub struct Outbox {
    queue: Mutex<Queue>,
    max_bytes: u32,
}

impl Outbox {
    /// An empty outbox that holds at most about `max_bytes` of queued payload.
    pub fn new(max_bytes: usize) -> Outbox {
        Outbox {
            queue: Mutex::new(Queue::default()),
            max_bytes: max_bytes.min(u32::MAX as usize) as u32,
        }
    }

    /// The bound, in bytes: no frame larger than this can ever be queued.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes as usize
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
            return PushOutcome::Closed;
        }
        let cost = cost(&frame);
        if q.bytes.saturating_add(cost) > self.max_bytes {
            q.discard();
            q.closing = Some(Closing {
                code: DisconnectCode::SlowConsumer.code(),
            });
            if let Some(w) = q.waker.take() {
                w.wake();
            }
            return PushOutcome::Overflow;
        }
        q.bytes += cost;
        q.frames.push_back(frame);
        if q.frames.len() == 1 {
            if let Some(w) = q.waker.take() {
                w.wake();
            }
        }
        PushOutcome::Queued
    }

    /// Asks the driver to close the connection with `code`. With `discard`, queued
    /// frames are dropped; otherwise they are written first. A second close
    /// request is ignored (the first reason wins).
    pub fn close(&self, code: u16, discard: bool) {
        let mut q = self.lock();
        if q.closing.is_some() {
            return;
        }
        if discard {
            q.discard();
        }
        q.closing = Some(Closing { code });
        if let Some(w) = q.waker.take() {
            w.wake();
        }
    }

    /// Whether a close has been requested.
    pub fn is_closing(&self) -> bool {
        self.lock().closing.is_some()
    }

    /// Runs `f` on the locked queue: the driver's way to write and advance.
    pub fn with_queue<R>(&self, f: impl FnOnce(&mut Queue) -> R) -> R {
        f(&mut self.lock())
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
