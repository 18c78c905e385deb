//! An event stream (`GET /sse`) on Herald's own HTTP/1.1: answered here and
//! then written by a small driver of its own, not by hyper.
//!
//! Why: an idle SSE client on hyper cost about 22.7 KiB of server memory
//! (hyper's per-connection read and write buffers, its dispatcher and an
//! async task around them, bench/RESULTS.md), 27 times an idle WebSocket, and
//! SSE clients are the ones that stay connected for hours. Once the request
//! head is parsed (by [`crate::http`], like a WebSocket upgrade) the stream
//! needs no HTTP machinery at all: one response head, then chunks. So the
//! connection becomes a plain socket written by [`SseConn`], which owns no
//! buffer while idle (events are rendered by the stream when they come and
//! written with one vectored write: chunk size, data, CRLF), like the
//! WebSocket driver after its upgrade (docs/decisions/0010-idle-memory.md).
//!
//! What stays on hyper: HTTP/2 (h2c and h2, whose streams share a
//! connection), requests with a body or an unusual shape, and every request
//! that is not the first on its connection. An error answer (400, 401, 403)
//! is written here too, and the connection then goes on with hyper for its
//! next requests, so keep-alive behaves as before.
//!
//! The stream's response says `connection: close`: when the stream ends (the
//! server shuts down, the client's queue overflows, a subscription cannot be
//! made) the driver writes the last chunk, shuts its write side and drains
//! the peer's input for at most [`LINGER`], so that the peer reads the end of
//! the stream instead of a reset. An `EventSource` reconnects on a new
//! connection anyway.

use super::Streams;
use crate::conn::Io;
use crate::http::h1::{date_line, header_text, write_response};
use crate::limits::IpSlot;
use crate::transport::Stream;
use bytes::Bytes;
use http_body::Body as HttpBody;
use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How long a finished stream waits for the peer to close after ours.
const LINGER: Duration = Duration::from_secs(1);
/// Reads of unexpected input per poll before yielding.
const READ_BUDGET: usize = 16;

/// What an `GET /sse` request head asked for, copied out of the head so that
/// its buffer can be freed before the stream starts.
#[derive(Debug, Default)]
pub struct SseRequest {
    /// The query string (without `?`), if any.
    pub query: Option<String>,
    /// The `Last-Event-ID` header.
    pub last_event_id: Option<String>,
    /// The token of an `Authorization: Bearer` header.
    pub bearer: Option<String>,
}

/// `GET /sse` as the first request of an HTTP/1.1 connection, without a
/// body and from an allowed origin, is served here; any other shape goes to
/// hyper (`None`), which answers it as before (a body: 400, an origin not
/// allowed: 403, another method: 404).
pub fn request(req: &httparse::Request<'_, '_>, allowed_origins: &[String]) -> Option<SseRequest> {
    if req.method != Some("GET") || req.version != Some(1) {
        return None;
    }
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    };
    let body = header("transfer-encoding").is_some()
        || header("content-length").is_some_and(|v| v != b"0");
    if body || !crate::limits::origin_allowed(allowed_origins, header("origin")) {
        return None;
    }
    let text = |name: &str| header(name).and_then(header_text);
    let path = req.path.unwrap_or("");
    Some(SseRequest {
        query: path.split_once('?').map(|(_, q)| q.to_string()),
        last_event_id: text("last-event-id").map(str::to_string),
        bearer: text("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_string),
    })
}

/// Answers an event stream on Herald's own path: starts the stream's driver
/// (`None`), or writes the error answer and gives the connection back
/// (`Some`), for hyper to serve its next requests.
pub async fn serve<S: Stream>(
    mut stream: S,
    streams: &Streams,
    request: Box<SseRequest>,
    slot: Option<Box<IpSlot>>,
) -> Option<(S, Option<Box<IpSlot>>)> {
    let started = super::start(
        request.query.as_deref(),
        request.last_event_id.as_deref(),
        request.bearer.as_deref(),
        streams,
    )
    .await;
    drop(request);
    match started {
        Ok(body) => {
            if stream.write_all(&sse_head()).await.is_ok() {
                let conn = SseConn::new(stream.into_io(), body, slot);
                streams.tracker.spawn(conn);
            }
            None
        }
        Err(refusal) => match write_response(&mut stream, refusal, false).await {
            Ok(()) => Some((stream, slot)),
            Err(_) => None,
        },
    }
}

/// The head of a 200 event-stream answer.
fn sse_head() -> Vec<u8> {
    let mut out = Vec::with_capacity(200);
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    out.extend_from_slice(super::HEADERS.as_bytes());
    out.extend_from_slice(b"transfer-encoding: chunked\r\nconnection: close\r\n");
    out.extend_from_slice(date_line().as_bytes());
    out.extend_from_slice(b"\r\n");
    out
}

/// One event stream on its own socket after its head was written: polls the
/// stream's body and writes each chunk; reads only to notice that the peer
/// went away (anything it sends is dropped: an event stream takes no input).
pub struct SseConn<I: Io> {
    stream: I,
    body: super::SseStream,
    /// The chunk being written (only while a write is pending or in progress).
    chunk: Option<Bytes>,
    /// Bytes of the current chunk already written, its framing included.
    written: usize,
    /// The body ended; the last chunk is queued or written.
    finished: bool,
    /// The last chunk is written and the write side shut: waiting for the
    /// peer's EOF, at most [`LINGER`].
    lingering: Option<Pin<Box<tokio::time::Sleep>>>,
    /// This connection's place in the per-IP count, released when it ends.
    _slot: Option<Box<IpSlot>>,
}

/// The terminating chunk of a chunked body.
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

impl<I: Io> SseConn<I> {
    /// Drives `body` over `stream`, whose 200 head has been written.
    pub(crate) fn new(stream: I, body: super::SseStream, slot: Option<Box<IpSlot>>) -> Self {
        SseConn {
            stream,
            body,
            chunk: None,
            written: 0,
            finished: false,
            lingering: None,
            _slot: slot,
        }
    }

    /// Reads and drops input; `true` when the peer has closed or failed.
    fn peer_gone(&mut self, cx: &mut Context<'_>) -> bool {
        let mut sink = [0u8; 512];
        for _ in 0..READ_BUDGET {
            match self.stream.poll_read_some(cx, &mut sink) {
                Poll::Pending => return false,
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return true,
                Poll::Ready(Ok(_)) => {}
            }
        }
        // Still more: look again soon, after other tasks had their turn.
        cx.waker().wake_by_ref();
        false
    }

    /// Writes the current chunk. `Ready(Ok(()))`: it is all written.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(data) = &self.chunk {
            let mut size = [0u8; 18];
            let (framed, total) = if self.finished && data.is_empty() {
                (false, LAST_CHUNK.len())
            } else {
                let n = render_size(data.len(), &mut size);
                (true, n + data.len() + 2)
            };
            let hlen = if framed { total - data.len() - 2 } else { 0 };
            let pieces: [&[u8]; 3] = if framed {
                [&size[..hlen], &data[..], b"\r\n"]
            } else {
                [LAST_CHUNK, &[], &[]]
            };
            let mut iov = [IoSlice::new(&[]); 3];
            let mut n_iov = 0;
            let mut skip = self.written;
            for p in pieces {
                if skip >= p.len() {
                    skip -= p.len();
                    continue;
                }
                iov[n_iov] = IoSlice::new(&p[skip..]);
                n_iov += 1;
                skip = 0;
            }
            match std::task::ready!(self.stream.poll_write_some(cx, &iov[..n_iov])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    self.written += n;
                    if self.written >= total {
                        self.chunk = None;
                        self.written = 0;
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        self.stream.poll_flush_some(cx)
    }
}

/// Renders `len` as a chunk-size line (hex and CRLF) into `out`; its length.
fn render_size(len: usize, out: &mut [u8; 18]) -> usize {
    let digits = if len == 0 {
        1
    } else {
        (usize::BITS as usize - len.leading_zeros() as usize).div_ceil(4)
    };
    for (i, digit) in out.iter_mut().take(digits).enumerate() {
        let nibble = (len >> (4 * (digits - 1 - i))) & 0xf;
        *digit = b"0123456789abcdef"[nibble];
    }
    out[digits] = b'\r';
    out[digits + 1] = b'\n';
    digits + 2
}

impl<I: Io> Future for SseConn<I> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.lingering.is_some() {
            let gone = this.peer_gone(cx);
            let expired =
                (this.lingering.as_mut()).is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
            return if gone || expired {
                Poll::Ready(())
            } else {
                Poll::Pending
            };
        }
        if this.peer_gone(cx) {
            // Nobody left to write to; dropping the stream's session
            // unsubscribes it.
            return Poll::Ready(());
        }
        loop {
            match this.poll_chunk(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Ready(Ok(())) => {}
            }
            if this.finished {
                let _ = this.stream.poll_close_write(cx);
                let mut timer = Box::pin(tokio::time::sleep(LINGER));
                if timer.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                this.lingering = Some(timer);
                return Poll::Pending;
            }
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        if !data.is_empty() {
                            this.chunk = Some(data);
                        }
                    }
                }
                Poll::Ready(Some(Err(never))) => match never {},
                Poll::Ready(None) => {
                    this.finished = true;
                    this.chunk = Some(Bytes::new());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_are_hex_lines() {
        let mut out = [0u8; 18];
        for (len, text) in [
            (0usize, "0\r\n"),
            (1, "1\r\n"),
            (15, "f\r\n"),
            (16, "10\r\n"),
            (255, "ff\r\n"),
            (4096, "1000\r\n"),
            (usize::MAX, "ffffffffffffffff\r\n"),
        ] {
            let n = render_size(len, &mut out);
            assert_eq!(std::str::from_utf8(&out[..n]), Ok(text), "{len}");
        }
    }
}
