//! The first bytes of every connection: read the HTTP/1.1 request head, then
//! either upgrade to WebSocket on our own lean path, serve an event stream or
//! long-polling on our own lean HTTP/1.1 path ([`h1`], `serve_polls`:
//! an idle SSE or long-polling client then holds no hyper buffers, decision
//! 0010), or hand the connection to hyper (HTTP/1.1 with keep-alive, or
//! HTTP/2 when the client opens with the h2c prior-knowledge preface) for
//! every other endpoint ([`service`]). Both paths route by the one table of
//! [`crate::routes`].
//!
//! The head is parsed with `httparse` into a stack array of headers; the buffer
//! that held it is freed before the connection's long-lived driver starts, so
//! nothing from the handshake stays resident. A WebSocket upgrade must be the
//! first request on its connection (browsers always open a fresh one).
//!
//! Every phase of a request has a deadline, so a client that trickles bytes
//! (slowloris, R-U-Dead-Yet) holds its connection for a bounded time only:
//! the first head must arrive within `handshake_timeout` (else 408), each
//! later head on a kept-alive HTTP/1.1 connection too (hyper's header read
//! timeout, which also closes idle keep-alive connections), a request body
//! within `request_body_timeout` (else 408, see [`crate::respond::read_body`]),
//! and an HTTP/2 peer must answer pings like a WebSocket client. A head that
//! is not HTTP gets 400; one over 8 KiB or 32 headers gets 431.

pub mod h1;
pub mod service;

use crate::api::Api;
use crate::limits::IpSlot;
use crate::metrics::Scrape;
use crate::pusher::api::PusherApi;
use crate::routes::Route;
use crate::tables::TablesApi;
use crate::transport::poll::h1::{PollConn, PollRequest, Step};
use crate::transport::poll::Polls;
use crate::transport::sse::conn::SseRequest;
use crate::transport::sse::Streams;
use crate::transport::ws::upgrade::{Accepted, Upgrades};
use crate::transport::Stream;
use h1::Refusal;
use herald_core::Node;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What the HTTP layer routes between: each endpoint's own state (which is
/// all its handler sees), and what the connection itself needs (deadlines,
/// TLS, shutdown). Built once by the composition root (`crate::server`).
pub struct Http {
    /// The node (its metrics count refused connections).
    pub node: Arc<Node>,
    /// TLS for the listener, when configured.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Deadline of each request head (`handshake_timeout`).
    pub handshake_timeout: Duration,
    /// HTTP/2 pings: interval (`ping_interval`) and answer deadline
    /// (`pong_timeout`), as for WebSocket clients.
    pub ping_interval: Duration,
    /// See `ping_interval`.
    pub pong_timeout: Duration,
    /// Origins allowed for the browser transports (empty: any).
    pub allowed_origins: Vec<String>,
    /// The key every `/api/*` request must carry, if any.
    pub api_key: Option<crate::config::secret::Secret>,
    /// Cancelled when shutdown starts.
    pub stopping: CancellationToken,
    /// Tracks connections for shutdown.
    pub tracker: TaskTracker,
    /// Connections accepted but not yet registered as clients.
    pub handshaking: AtomicUsize,
    /// WebSocket endpoints.
    pub upgrades: Upgrades,
    /// Event streams.
    pub streams: Streams,
    /// Long-polling sessions.
    pub polls: Arc<Polls>,
    /// `/healthz`, `/readyz`, `/api/publish`, `/api/nodes`.
    pub api: Api,
    /// `/metrics`.
    pub metrics: Scrape,
    /// `/api/tables`.
    pub tables: TablesApi,
    /// `/api/games`: the game modules.
    pub scripts: Arc<crate::scripts::Scripts>,
    /// Pusher's HTTP API (`/apps/...`).
    pub pusher: PusherApi,
    /// The Bayeux endpoint (`/cometd`): its long-polling requests.
    pub bayeux: Arc<crate::bayeux::Bayeux>,
    /// The admin dashboard (`/admin`).
    pub admin: crate::admin::Admin,
}

/// Largest request head accepted.
const MAX_HEAD: usize = 8 * 1024;
/// Most headers in a request head.
const MAX_HEADERS: usize = 32;

/// The HTTP/2 connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Why no request head could be read.
#[derive(Debug)]
enum HeadError {
    /// The connection failed or ended.
    Io(io::Error),
    /// The bytes are not an HTTP/1.1 request head.
    Malformed,
    /// The head is over [`MAX_HEAD`] bytes or [`MAX_HEADERS`] headers.
    TooLarge,
}

/// Reads the request head; returns the buffer and the head's length (0 when
/// the client opened with the HTTP/2 preface).
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Result<(Vec<u8>, usize), HeadError> {
    read_head_after(stream, Vec::new()).await
}

/// [`read_head`] for a head that may have begun in `start` (bytes a client
/// sent after its previous request).
async fn read_head_after<S: AsyncRead + Unpin>(
    stream: &mut S,
    start: Vec<u8>,
) -> Result<(Vec<u8>, usize), HeadError> {
    let mut len = start.len();
    let mut buf = start;
    buf.resize(len.max(1024), 0);
    let mut fresh = len == 0;
    loop {
        if fresh {
            match stream.read(&mut buf[len..]).await.map_err(HeadError::Io)? {
                0 => return Err(HeadError::Io(io::ErrorKind::UnexpectedEof.into())),
                n => len += n,
            }
        }
        fresh = true;
        let seen = len.min(H2_PREFACE.len());
        if buf[..seen] == H2_PREFACE[..seen] {
            if len >= H2_PREFACE.len() {
                buf.truncate(len);
                return Ok((buf, 0));
            }
            continue;
        }
        if let Some(head) = head_len(&buf[..len])? {
            buf.truncate(len);
            return Ok((buf, head));
        }
        if len >= buf.len() {
            if buf.len() >= MAX_HEAD {
                return Err(HeadError::TooLarge);
            }
            buf.resize((buf.len() * 2).min(MAX_HEAD), 0);
        }
    }
}

/// The length of the request head in `buf`, if it is complete. A plain
/// function, so the header array never lives in a future's state.
fn head_len(buf: &[u8]) -> Result<Option<usize>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(head)) => Ok(Some(head)),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooLarge),
        Err(_) => Err(HeadError::Malformed),
    }
}

/// Serves one accepted connection until it ends: TLS first when configured.
///
/// Many handshakes can be in flight at once (a reconnect storm), so this
/// future is kept small: the TLS and hyper paths, whose state is several KiB,
/// are boxed and cost nothing on the plain WebSocket path.
pub async fn serve_connection(stream: TcpStream, http: Arc<Http>, slot: Option<Box<IpSlot>>) {
    let _handshake = Handshaking::new(http.clone());
    match http.tls.clone() {
        None => serve_stream(stream, http, slot).await,
        Some(tls) => Box::pin(serve_tls(stream, http, tls, slot)).await,
    }
}

async fn serve_tls(
    stream: TcpStream,
    http: Arc<Http>,
    tls: tokio_rustls::TlsAcceptor,
    slot: Option<Box<IpSlot>>,
) {
    let accepted = tokio::time::timeout(http.handshake_timeout, tls.accept(stream)).await;
    let stream = match accepted {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => return,
    };
    if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
        return Box::pin(service::serve(stream, http, Vec::new(), slot)).await;
    }
    serve_stream(stream, http, slot).await;
}

/// The answer to a request head that could not be read, if one is due.
fn head_refusal(e: HeadError) -> Option<Refusal> {
    match e {
        HeadError::Malformed => Some(Refusal::text("400 Bad Request", "malformed HTTP request\n")),
        HeadError::TooLarge => Some(Refusal::text(
            "431 Request Header Fields Too Large",
            "request head over 8 KiB or 32 headers\n",
        )),
        HeadError::Io(e) => {
            tracing::debug!(error = %e, "connection ended before its request head");
            None
        }
    }
}

/// Reads the first request head and routes it.
async fn serve_stream<S: Stream>(mut stream: S, http: Arc<Http>, slot: Option<Box<IpSlot>>) {
    let head = tokio::time::timeout(http.handshake_timeout, read_head(&mut stream)).await;
    let (buf, head_len) = match head {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => {
            if let Some(refusal) = head_refusal(e) {
                Box::pin(refusal.send(stream)).await;
            }
            return;
        }
        Err(_) => {
            http.node.metrics.refused.inc();
            let refusal =
                Refusal::text("408 Request Timeout", "request head not received in time\n");
            Box::pin(refusal.send(stream)).await;
            return;
        }
    };
    if head_len == 0 {
        return Box::pin(service::serve(stream, http, buf, slot)).await;
    }
    route(stream, http, buf, head_len, slot).await;
}

/// What to do with a request head (decided without awaiting, so the parse
/// state never lives in the connection's future).
enum Decision {
    /// Answer 101 and run the WebSocket driver.
    Upgrade(Box<Accepted>),
    /// An event stream Herald serves on its own ([`crate::transport::sse::conn`]).
    Sse(Box<SseRequest>),
    /// A long-polling request Herald serves on its own.
    Poll(Box<PollRequest>),
    /// Not ours: hyper serves it.
    Hyper,
    /// Refuse with a plain answer.
    Reject(Refusal),
}

fn decide(buf: &[u8], http: &Http) -> Decision {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    if !matches!(req.parse(buf), Ok(httparse::Status::Complete(_))) {
        return Decision::Reject(Refusal::text("400 Bad Request", "malformed HTTP request\n"));
    }
    let path = req.path.unwrap_or("/");
    let route = Route::of_with(
        path.split('?').next().unwrap_or(path),
        &http.bayeux.config.path,
    );
    let wants_upgrade = req
        .headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("upgrade"));
    let origins = &http.allowed_origins;
    match route {
        r if wants_upgrade && r.is_websocket() => {
            match crate::transport::ws::upgrade::accept(&req, r, origins, &http.upgrades) {
                Some(Ok(accepted)) => Decision::Upgrade(Box::new(accepted)),
                Some(Err(refusal)) => Decision::Reject(refusal),
                None => Decision::Hyper,
            }
        }
        Route::Sse if !wants_upgrade => match crate::transport::sse::conn::request(&req, origins) {
            Some(r) => Decision::Sse(Box::new(r)),
            None => Decision::Hyper,
        },
        Route::Poll if !wants_upgrade => match crate::transport::poll::h1::request(&req, origins) {
            Some(r) => Decision::Poll(Box::new(r)),
            None => Decision::Hyper,
        },
        _ => Decision::Hyper,
    }
}

/// Serves long-polling requests on a kept-alive HTTP/1.1 connection, one
/// after another, without hyper: a pending poll (the idle state of a
/// long-polling client) then holds no HTTP buffers, only this loop's state
/// (docs/decisions/0010-idle-memory.md). A request of any other kind hands
/// the connection to hyper (or to the SSE driver) with its bytes replayed.
/// Deadlines are hyper's: each later head within `handshake_timeout`, each
/// body within `request_body_timeout`; at shutdown an idle connection closes
/// at once and a pending poll answers (its session is closing) with
/// `connection: close`.
async fn serve_polls<S: Stream>(
    mut conn: PollConn<S>,
    http: Arc<Http>,
    mut request: Box<PollRequest>,
) {
    // Only what lives across the wait of a pending poll is in this future:
    // the connection, the session handle and a pointer to the boxed wait.
    // Every other step is its own boxed future, allocated while it runs, so
    // that an idle long-polling client holds a small task cell and a small
    // box, not the largest state of every step (decision 0010).
    let polls = &http.polls;
    loop {
        let step = Box::pin(crate::transport::poll::h1::read_request(
            &mut conn, polls, request,
        ));
        let next = match step.await {
            Step::Done => return,
            Step::Answer(response, close) => Box::pin(poll_next(conn, &http, *response, close)),
            Step::Wait(session, close) => {
                Box::pin(crate::transport::poll::wait(&session, polls)).await;
                let response = crate::transport::poll::answer(&session, polls);
                Box::pin(poll_next(conn, &http, response, close))
            }
        };
        match next.await {
            Some((c, r)) => {
                conn = c;
                request = r;
            }
            None => return,
        }
    }
}

/// Writes the answer, then reads the next request head: `Some` when it is
/// another long-polling request; otherwise the connection was closed or
/// handed on (to hyper, or to the SSE driver).
async fn poll_next<S: Stream>(
    mut conn: PollConn<S>,
    http: &Arc<Http>,
    response: ::http::Response<crate::respond::Body>,
    close: bool,
) -> Option<(PollConn<S>, Box<PollRequest>)> {
    if close || http.stopping.is_cancelled() {
        refuse(conn.stream, response).await;
        return None;
    }
    if h1::write_response(&mut conn.stream, response, false)
        .await
        .is_err()
    {
        return None;
    }
    let rest = std::mem::take(&mut conn.rest);
    let head = tokio::select! {
        h = tokio::time::timeout(
            http.handshake_timeout,
            read_head_after(&mut conn.stream, rest),
        ) => h,
        _ = http.stopping.cancelled() => return None,
    };
    let (buf, head_len) = match head {
        Ok(Ok((buf, head_len))) if head_len > 0 => (buf, head_len),
        Ok(Ok(_)) => {
            head_refusal(HeadError::Malformed)?.send(conn.stream).await;
            return None;
        }
        Ok(Err(e @ (HeadError::Malformed | HeadError::TooLarge))) => {
            head_refusal(e)?.send(conn.stream).await;
            return None;
        }
        // Gone, or silent for too long (hyper closes those too).
        Ok(Err(HeadError::Io(_))) | Err(_) => return None,
    };
    let http = http.clone();
    match decide(&buf, &http) {
        Decision::Poll(next) => {
            conn.rest = buf[head_len..].to_vec();
            Some((conn, next))
        }
        Decision::Sse(sse) => {
            let rest = buf[head_len..].to_vec();
            drop(buf);
            Box::pin(serve_sse(conn.stream, http, sse, rest, conn.slot)).await;
            None
        }
        // An upgrade is only taken as a connection's first request:
        // hyper answers this one (426), as it did before.
        Decision::Upgrade(_) | Decision::Hyper => {
            Box::pin(service::serve(conn.stream, http, buf, conn.slot)).await;
            None
        }
        Decision::Reject(refusal) => {
            refusal.send(conn.stream).await;
            None
        }
    }
}

/// Writes `response` saying `connection: close`, then closes gently.
async fn refuse<S: Stream>(mut stream: S, response: ::http::Response<crate::respond::Body>) {
    if h1::write_response(&mut stream, response, true)
        .await
        .is_ok()
    {
        h1::linger(stream).await;
    }
}

/// An event stream on Herald's own path; after a refusal, hyper serves the
/// rest of the connection.
async fn serve_sse<S: Stream>(
    stream: S,
    http: Arc<Http>,
    request: Box<SseRequest>,
    rest: Vec<u8>,
    slot: Option<Box<IpSlot>>,
) {
    let refused = crate::transport::sse::conn::serve(stream, &http.streams, request, slot).await;
    if let Some((stream, slot)) = refused {
        service::serve(stream, http, rest, slot).await;
    }
}

/// Where each request goes.
async fn route<S: Stream>(
    mut stream: S,
    http: Arc<Http>,
    buf: Vec<u8>,
    head_len: usize,
    slot: Option<Box<IpSlot>>,
) {
    let accepted = match decide(&buf, &http) {
        Decision::Upgrade(accepted) => {
            if stream.write_all(&accepted.response).await.is_err() {
                return;
            }
            accepted
        }
        Decision::Hyper => return Box::pin(service::serve(stream, http, buf, slot)).await,
        Decision::Sse(request) => {
            let rest = buf[head_len..].to_vec();
            drop(buf);
            return Box::pin(serve_sse(stream, http, request, rest, slot)).await;
        }
        Decision::Poll(request) => {
            // Its own task, so that the handshake's future is freed: a
            // pending poll holds only the loop's state.
            let rest = buf[head_len..].to_vec();
            drop(buf);
            let conn = PollConn { stream, rest, slot };
            let loop_ = serve_polls(conn, http.clone(), request);
            http.tracker.spawn(loop_);
            return;
        }
        Decision::Reject(refusal) => {
            if refusal.status.starts_with("403") {
                http.node.metrics.refused.inc();
            }
            return Box::pin(refusal.send(stream)).await;
        }
    };
    let Accepted {
        endpoint,
        encoding,
        deflate,
        ..
    } = *accepted;
    crate::transport::ws::upgrade::start(
        stream,
        (endpoint, encoding, deflate),
        &buf[head_len..],
        slot,
        &http.upgrades,
    );
}

/// Counts a connection as "handshaking" while it exists, so that the
/// connection cap also covers connections not yet registered as clients.
struct Handshaking(Arc<Http>);

impl Handshaking {
    fn new(http: Arc<Http>) -> Handshaking {
        http.handshaking.fetch_add(1, Ordering::Relaxed);
        Handshaking(http)
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.0.handshaking.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output_size<A, B, C, F>(_: fn(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// What a pending long-poll holds besides its session: this future,
    /// inside a tokio task cell aligned to 128 bytes (decision 0010).
    #[test]
    fn the_poll_loop_is_small() {
        let size = output_size(serve_polls::<TcpStream> as fn(_, _, _) -> _);
        println!("serve_polls future: {size} bytes");

        assert!(size <= 224, "serve_polls future is {size} bytes");
    }
}
