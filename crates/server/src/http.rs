//! The first bytes of every connection: read the HTTP/1.1 request head, then
//! either upgrade to WebSocket on our own lean path, serve an event stream or
//! long-polling on our own lean HTTP/1.1 path ([`crate::h1`], `serve_polls`:
//! an idle SSE or long-polling client then holds no hyper buffers, decision
//! 0010), or hand the connection to hyper (HTTP/1.1 with keep-alive, or
//! HTTP/2 when the client opens with the h2c prior-knowledge preface) for
//! every other endpoint (see [`crate::api`]).
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
//! within `request_body_timeout` (else 408, see [`crate::api::read_body`]),
//! and an HTTP/2 peer must answer pings like a WebSocket client. A head that
//! is not HTTP gets 400; one over 8 KiB or 32 headers gets 431.

use crate::conn::{AsyncIo, Connection, Handler, Io, Wire};
use crate::h1::SseRequest;
use crate::limits::IpSlot;
use crate::rewind::Rewind;
use crate::server::Shared;
use crate::ws::echo::EchoConn;
use crate::ws::shootout::ShootoutConn;
use crate::ws::WsWire;
use bytes::Bytes;
use herald_core::metrics::Transport;
use herald_core::Session;
use herald_proto::Encoding;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

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

/// Writes a complete plain answer, then closes gently: half-close and drain
/// the peer's input (bounded), so the peer reads the answer instead of a reset.
async fn answer<S: Stream>(mut stream: S, status: &str, extra: &str, body: &str) {
    let text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(text.as_bytes()).await;
    crate::server::linger(stream).await;
}

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
        _shared: &Shared,
    ) -> Connection<H, W, Self::Io> {
        conn
    }
}

impl Stream for TcpStream {
    type Io = TcpStream;
    fn into_io(self) -> TcpStream {
        self
    }

    fn hibernating<H: Handler, W: Wire>(
        conn: Connection<H, W, TcpStream>,
        shared: &Shared,
    ) -> Connection<H, W, TcpStream> {
        conn.hibernating_at(&shared.parker)
    }
}

impl Stream for tokio_rustls::server::TlsStream<TcpStream> {
    type Io = AsyncIo<Self>;
    fn into_io(self) -> AsyncIo<Self> {
        AsyncIo(self)
    }
}

/// Serves one accepted connection until it ends: TLS first when configured.
///
/// Many handshakes can be in flight at once (a reconnect storm), so this
/// future is kept small: the TLS and hyper paths, whose state is several KiB,
/// are boxed and cost nothing on the plain WebSocket path.
pub async fn serve_connection(stream: TcpStream, shared: Arc<Shared>, slot: Option<Box<IpSlot>>) {
    let _handshake = Handshaking::new(shared.clone());
    match shared.tls.clone() {
        None => serve_stream(stream, shared, slot).await,
        Some(tls) => Box::pin(serve_tls(stream, shared, tls, slot)).await,
    }
}

async fn serve_tls(
    stream: TcpStream,
    shared: Arc<Shared>,
    tls: tokio_rustls::TlsAcceptor,
    slot: Option<Box<IpSlot>>,
) {
    let accepted = tokio::time::timeout(shared.config.handshake_timeout, tls.accept(stream)).await;
    let stream = match accepted {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => return,
    };
    if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
        return Box::pin(hyper_serve(stream, shared, Vec::new(), slot)).await;
    }
    serve_stream(stream, shared, slot).await;
}

/// Reads the first request head and routes it.
async fn serve_stream<S: Stream>(mut stream: S, shared: Arc<Shared>, slot: Option<Box<IpSlot>>) {
    let head = tokio::time::timeout(shared.config.handshake_timeout, read_head(&mut stream)).await;
    let (buf, head_len) = match head {
        Ok(Ok(h)) => h,
        Ok(Err(HeadError::Malformed)) => {
            Box::pin(answer(
                stream,
                "400 Bad Request",
                "",
                "malformed HTTP request\n",
            ))
            .await;
            return;
        }
        Ok(Err(HeadError::TooLarge)) => {
            let body = "request head over 8 KiB or 32 headers\n";
            let status = "431 Request Header Fields Too Large";
            Box::pin(answer(stream, status, "", body)).await;
            return;
        }
        Ok(Err(HeadError::Io(e))) => {
            tracing::debug!(error = %e, "connection ended before its request head");
            return;
        }
        Err(_) => {
            shared.node.metrics.refused.inc();
            let body = "request head not received in time\n";
            Box::pin(answer(stream, "408 Request Timeout", "", body)).await;
            return;
        }
    };
    if head_len == 0 {
        return Box::pin(hyper_serve(stream, shared, buf, slot)).await;
    }
    route(stream, shared, buf, head_len, slot).await;
}

/// Serves the connection with hyper, replaying what was already read.
///
/// The connection counts on the shutdown tracker, like a WebSocket driver:
/// its SSE streams and pending long-polls are clients that shutdown closes
/// with 1001, and the process must not exit before they have written that
/// last event (it used to, cutting off most streams of a busy HTTP/2
/// connection mid-body). When shutdown starts, hyper is told to stop
/// gracefully: HTTP/2 sends GOAWAY and finishes the streams in flight,
/// HTTP/1.1 finishes the response in flight, and idle keep-alive connections
/// close at once instead of holding the drain until `shutdown_timeout`.
async fn hyper_serve<S: AsyncRead + AsyncWrite + Send + Unpin + 'static>(
    stream: S,
    shared: Arc<Shared>,
    read: Vec<u8>,
    slot: Option<Box<IpSlot>>,
) {
    // Held while hyper serves this connection (SSE streams included).
    let _slot = slot;
    let stopping = shared.stopping.clone();
    let tracker = shared.tracker.clone();
    let io = hyper_util::rt::TokioIo::new(Rewind::new(Bytes::from(read), stream));
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    // Without a timer hyper enforces no timeout at all: a slowloris on the
    // second request of a kept-alive connection, or an idle one, would be
    // held for good. Each later head gets what the first one got.
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(shared.config.handshake_timeout);
    // HTTP/2 has no request heads to time: a peer that sent the preface and
    // then nothing is found dead by pings, like a silent WebSocket client.
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(u64::from(
            shared.config.node.ping_interval,
        )))
        .keep_alive_timeout(shared.config.pong_timeout);
    let service = hyper::service::service_fn(move |req| crate::api::handle(req, shared.clone()));
    let served = tracker.track_future(async move {
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        tokio::select! {
            r = conn.as_mut() => r,
            _ = stopping.cancelled() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        }
    });
    if let Err(e) = served.await {
        tracing::debug!(error = %e, "http connection ended with an error");
    }
}

/// Where each request goes.
/// What to do with a request head (decided without awaiting, so the parse
/// state never lives in the connection's future).
enum Decision {
    /// Answer 101 and run the WebSocket driver.
    Upgrade {
        endpoint: Endpoint,
        encoding: Encoding,
        response: Vec<u8>,
    },
    /// An event stream Herald serves on its own ([`crate::h1`]).
    Sse(Box<SseRequest>),
    /// A long-polling request Herald serves on its own.
    Poll(Box<PollRequest>),
    /// Not ours: hyper serves it.
    Hyper,
    /// Refuse with a plain answer.
    Reject {
        status: &'static str,
        extra: &'static str,
        body: String,
    },
}

fn decide(buf: &[u8], allowed_origins: &[String], shootout: bool, echo: bool) -> Decision {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    if !matches!(req.parse(buf), Ok(httparse::Status::Complete(_))) {
        return Decision::Reject {
            status: "400 Bad Request",
            extra: "",
            body: "malformed HTTP request\n".into(),
        };
    }
    let method = req.method.unwrap_or("");
    let path = req.path.unwrap_or("/");
    let path = path.split('?').next().unwrap_or(path);
    let wants_upgrade = req
        .headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("upgrade"));
    let endpoint = match path {
        "/ws" if wants_upgrade => Endpoint::Herald,
        "/shootout" if wants_upgrade && !shootout => {
            // The benchmark protocol has no auth: a server that refuses
            // anonymous clients does not offer it.
            return Decision::Reject {
                status: "403 Forbidden",
                extra: "",
                body: format!(
                    "{{\"error\":{{\"code\":{},\"message\":\"the shootout endpoint is only served when anonymous clients are allowed\"}}}}\n",
                    herald_proto::ErrorCode::PermissionDenied.code()
                ),
            };
        }
        "/shootout" if wants_upgrade => Endpoint::Shootout,
        // Test only (`--test-echo-route`): absent otherwise, so hyper's 404.
        "/echo" if wants_upgrade && echo => Endpoint::Echo,
        p if wants_upgrade && p.starts_with("/app/") => {
            let query = req
                .path
                .unwrap_or("")
                .split_once('?')
                .map_or("", |(_, q)| q);
            Endpoint::Pusher(Box::new(PusherTarget {
                key: p["/app/".len()..].to_string(),
                protocol: query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("protocol="))
                    .map(str::to_string),
            }))
        }
        "/sse" if !wants_upgrade => return sse_decision(&req, allowed_origins),
        p if !wants_upgrade && (p == "/poll" || p.starts_with("/poll/")) => {
            return poll_decision(&req, allowed_origins)
        }
        _ => return Decision::Hyper,
    };
    let origin = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("origin"))
        .map(|h| h.value);
    if !crate::limits::origin_allowed(allowed_origins, origin) {
        return Decision::Reject {
            status: "403 Forbidden",
            extra: "",
            body: format!(
                "{{\"error\":{{\"code\":{},\"message\":\"origin not allowed\"}}}}\n",
                herald_proto::ErrorCode::PermissionDenied.code()
            ),
        };
    }
    let upgrade = match herald_ws::validate_upgrade(method, req.headers) {
        Ok(u) => u,
        Err(e) => {
            return Decision::Reject {
                status: match e.status() {
                    405 => "405 Method Not Allowed",
                    426 => "426 Upgrade Required",
                    _ => "400 Bad Request",
                },
                extra: if e.status() == 426 {
                    "sec-websocket-version: 13\r\nupgrade: websocket\r\n"
                } else {
                    ""
                },
                body: format!("{e}\n"),
            }
        }
    };
    let protocol = match endpoint {
        Endpoint::Herald => herald_ws::select_protocol(
            upgrade.protocols,
            &[Encoding::Json.subprotocol(), Encoding::Binary.subprotocol()],
        ),
        Endpoint::Shootout | Endpoint::Echo | Endpoint::Pusher(_) => None,
    };
    let encoding = if protocol == Some(Encoding::Binary.subprotocol()) {
        Encoding::Binary
    } else {
        Encoding::Json
    };
    let mut response = Vec::with_capacity(160);
    herald_ws::write_accept(&mut response, &herald_ws::accept_key(upgrade.key), protocol);
    Decision::Upgrade {
        endpoint,
        encoding,
        response,
    }
}

/// `GET /sse` as the first request of an HTTP/1.1 connection, without a
/// body and from an allowed origin, is served by [`crate::h1`]; any other
/// shape goes to hyper, which answers it as before (a body: 400, an origin
/// not allowed: 403, another method: 404).
fn sse_decision(req: &httparse::Request<'_, '_>, allowed_origins: &[String]) -> Decision {
    if req.method != Some("GET") || req.version != Some(1) {
        return Decision::Hyper;
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
        return Decision::Hyper;
    }
    let text = |name: &str| header(name).and_then(crate::h1::header_text);
    let path = req.path.unwrap_or("");
    Decision::Sse(Box::new(SseRequest {
        query: path.split_once('?').map(|(_, q)| q.to_string()),
        last_event_id: text("last-event-id").map(str::to_string),
        bearer: text("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_string),
    }))
}

/// A long-polling request (`/poll`, `/poll/<id>`), copied out of its head.
struct PollRequest {
    method: http::Method,
    path: String,
    /// Its `content-length` (0 when absent).
    body_len: usize,
    /// The client asked to close the connection after the answer.
    close: bool,
}

/// A plain HTTP/1.1 request for `/poll` (GET, POST or DELETE; no chunked
/// body, no `expect`, from an allowed origin) is served by [`serve_polls`];
/// any other shape goes to hyper, which answers it as before.
fn poll_decision(req: &httparse::Request<'_, '_>, allowed_origins: &[String]) -> Decision {
    let method = match req.method {
        Some("GET") => http::Method::GET,
        Some("POST") => http::Method::POST,
        Some("DELETE") => http::Method::DELETE,
        _ => return Decision::Hyper,
    };
    if req.version != Some(1) {
        return Decision::Hyper;
    }
    let mut body_len = 0;
    let mut lengths = 0;
    let mut close = false;
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("transfer-encoding") || name.eq_ignore_ascii_case("expect") {
            return Decision::Hyper;
        }
        if name.eq_ignore_ascii_case("content-length") {
            lengths += 1;
            match std::str::from_utf8(h.value).ok().map(str::trim) {
                Some(v) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
                    match v.parse::<usize>() {
                        Ok(n) => body_len = n,
                        Err(_) => return Decision::Hyper,
                    }
                }
                _ => return Decision::Hyper,
            }
        }
        if name.eq_ignore_ascii_case("connection") {
            close |= h
                .value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
        }
    }
    let origin = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("origin"))
        .map(|h| h.value);
    if lengths > 1 || !crate::limits::origin_allowed(allowed_origins, origin) {
        return Decision::Hyper;
    }
    let path = req.path.unwrap_or("");
    let path = path.split('?').next().unwrap_or(path).to_string();
    Decision::Poll(Box::new(PollRequest {
        method,
        path,
        body_len,
        close,
    }))
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
    shared: Arc<Shared>,
    mut request: Box<PollRequest>,
) {
    // Only what lives across the wait of a pending poll is in this future:
    // the connection, the session handle and a pointer to the boxed wait.
    // Every other step is its own boxed future, allocated while it runs, so
    // that an idle long-polling client holds a small task cell and a small
    // box, not the largest state of every step (decision 0010).
    loop {
        let next = match Box::pin(poll_request(&mut conn, &shared, request)).await {
            Step::Done => return,
            Step::Answer(response, close) => Box::pin(poll_next(conn, &shared, *response, close)),
            Step::Wait(session, close) => {
                Box::pin(crate::poll::wait(&session, &shared)).await;
                let response = crate::poll::answer(&session, &shared);
                Box::pin(poll_next(conn, &shared, response, close))
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

/// A kept-alive connection between long-polling requests.
struct PollConn<S> {
    stream: S,
    /// Bytes the client sent after the current request (pipelined).
    rest: Vec<u8>,
    slot: Option<Box<IpSlot>>,
}

/// What a long-polling request comes to.
enum Step {
    /// The connection is finished with (refused, gone).
    Done,
    /// This answer; then close the connection if `true`.
    /// (Boxed: this value is alive across the loop's awaits; the loop's
    /// state, which a pending poll holds, stays small.)
    Answer(Box<http::Response<crate::api::Body>>, bool),
    /// A `GET /poll/<id>`: wait for this session, then answer.
    Wait(Arc<crate::poll::PollSession>, bool),
}

/// Reads the request's body (bounded in size and time) and answers it, or
/// for a poll finds the session to wait for.
async fn poll_request<S: Stream>(
    conn: &mut PollConn<S>,
    shared: &Arc<Shared>,
    request: Box<PollRequest>,
) -> Step {
    let limit = crate::poll::body_limit(shared);
    if request.body_len > limit {
        let refusal = crate::api::BodyError::TooLarge(limit).response();
        return Step::Answer(Box::new(refusal), true);
    }
    let timeout = shared.config.request_body_timeout;
    let need = request.body_len;
    let rest = &mut conn.rest;
    let stream = &mut conn.stream;
    let read = tokio::time::timeout(timeout, async {
        while rest.len() < need {
            rest.reserve((need - rest.len()).min(64 * 1024));
            match stream.read_buf(rest).await {
                Ok(0) | Err(_) => return false,
                Ok(_) => {}
            }
        }
        true
    })
    .await;
    match read {
        Ok(true) => {}
        Ok(false) => return Step::Done,
        Err(_) => {
            let refusal = crate::api::BodyError::Timeout(timeout.as_secs()).response();
            return Step::Answer(Box::new(refusal), true);
        }
    }
    let body = Bytes::copy_from_slice(&conn.rest[..need]);
    conn.rest.drain(..need);
    if conn.rest.is_empty() {
        // A pending poll holds no buffer.
        conn.rest = Vec::new();
    }
    let close = request.close;
    let id = request.path.strip_prefix("/poll/").unwrap_or("");
    if request.method == http::Method::GET && !id.is_empty() {
        return match crate::poll::begin(crate::poll::parse_id(id), shared) {
            Some(session) => Step::Wait(session, close),
            None => Step::Answer(Box::new(crate::poll::unknown()), close),
        };
    }
    let body = crate::poll::PollBody::Read(body);
    let response = crate::poll::dispatch(&request.method, &request.path, body, shared).await;
    Step::Answer(Box::new(response), close)
}

/// Writes the answer, then reads the next request head: `Some` when it is
/// another long-polling request; otherwise the connection was closed or
/// handed on (to hyper, or to the SSE driver).
async fn poll_next<S: Stream>(
    mut conn: PollConn<S>,
    shared: &Arc<Shared>,
    response: http::Response<crate::api::Body>,
    close: bool,
) -> Option<(PollConn<S>, Box<PollRequest>)> {
    if close || shared.stopping.is_cancelled() {
        refuse(conn.stream, response).await;
        return None;
    }
    if crate::h1::write_response(&mut conn.stream, response, false)
        .await
        .is_err()
    {
        return None;
    }
    let rest = std::mem::take(&mut conn.rest);
    let head = tokio::select! {
        h = tokio::time::timeout(
            shared.config.handshake_timeout,
            read_head_after(&mut conn.stream, rest),
        ) => h,
        _ = shared.stopping.cancelled() => return None,
    };
    let (buf, head_len) = match head {
        Ok(Ok((buf, head_len))) if head_len > 0 => (buf, head_len),
        Ok(Ok(_)) | Ok(Err(HeadError::Malformed)) => {
            let body = "malformed HTTP request\n";
            answer(conn.stream, "400 Bad Request", "", body).await;
            return None;
        }
        Ok(Err(HeadError::TooLarge)) => {
            let body = "request head over 8 KiB or 32 headers\n";
            let status = "431 Request Header Fields Too Large";
            answer(conn.stream, status, "", body).await;
            return None;
        }
        // Gone, or silent for too long (hyper closes those too).
        Ok(Err(HeadError::Io(_))) | Err(_) => return None,
    };
    let (shootout, echo) = (shared.config.shootout, shared.config.test_echo_route);
    let shared = shared.clone();
    match decide(&buf, &shared.config.allowed_origins, shootout, echo) {
        Decision::Poll(next) => {
            conn.rest = buf[head_len..].to_vec();
            Some((conn, next))
        }
        Decision::Sse(sse) => {
            let rest = buf[head_len..].to_vec();
            drop(buf);
            Box::pin(serve_sse(conn.stream, shared, sse, rest, conn.slot)).await;
            None
        }
        // An upgrade is only taken as a connection's first request:
        // hyper answers this one (426), as it did before.
        Decision::Upgrade { .. } | Decision::Hyper => {
            Box::pin(hyper_serve(conn.stream, shared, buf, conn.slot)).await;
            None
        }
        Decision::Reject {
            status,
            extra,
            body,
        } => {
            answer(conn.stream, status, extra, &body).await;
            None
        }
    }
}

/// Writes `response` saying `connection: close`, then closes gently.
async fn refuse<S: Stream>(mut stream: S, response: http::Response<crate::api::Body>) {
    if crate::h1::write_response(&mut stream, response, true)
        .await
        .is_ok()
    {
        crate::server::linger(stream).await;
    }
}

/// Answers an event stream on Herald's own path: the stream's driver, or an
/// error answer after which hyper serves the rest of the connection.
async fn serve_sse<S: Stream>(
    mut stream: S,
    shared: Arc<Shared>,
    request: Box<SseRequest>,
    rest: Vec<u8>,
    slot: Option<Box<IpSlot>>,
) {
    let started = crate::sse::start(
        request.query.as_deref(),
        request.last_event_id.as_deref(),
        request.bearer.as_deref(),
        &shared,
    )
    .await;
    drop(request);
    match started {
        Ok(body) => {
            if stream.write_all(&crate::h1::sse_head()).await.is_err() {
                return;
            }
            let conn = crate::h1::SseConn::new(stream.into_io(), body, slot);
            shared.tracker.spawn(conn);
        }
        Err(refusal) => {
            if crate::h1::write_response(&mut stream, refusal, false)
                .await
                .is_ok()
            {
                hyper_serve(stream, shared, rest, slot).await;
            }
        }
    }
}

/// Where each request goes.
async fn route<S: Stream>(
    mut stream: S,
    shared: Arc<Shared>,
    buf: Vec<u8>,
    head_len: usize,
    slot: Option<Box<IpSlot>>,
) {
    let (shootout, echo) = (shared.config.shootout, shared.config.test_echo_route);
    let (endpoint, encoding) = match decide(&buf, &shared.config.allowed_origins, shootout, echo) {
        Decision::Upgrade {
            endpoint,
            encoding,
            response,
        } => {
            if stream.write_all(&response).await.is_err() {
                return;
            }
            (endpoint, encoding)
        }
        Decision::Hyper => return Box::pin(hyper_serve(stream, shared, buf, slot)).await,
        Decision::Sse(request) => {
            let rest = buf[head_len..].to_vec();
            drop(buf);
            return Box::pin(serve_sse(stream, shared, request, rest, slot)).await;
        }
        Decision::Poll(request) => {
            // Its own task, so that the handshake's future is freed: a
            // pending poll holds only the loop's state.
            let rest = buf[head_len..].to_vec();
            drop(buf);
            let conn = PollConn { stream, rest, slot };
            let loop_ = serve_polls(conn, shared.clone(), request);
            shared.tracker.spawn(loop_);
            return;
        }
        Decision::Reject {
            status,
            extra,
            body,
        } => {
            if status.starts_with("403") {
                shared.node.metrics.refused.inc();
            }
            return Box::pin(answer(stream, status, extra, &body)).await;
        }
    };
    let leftover = &buf[head_len..];
    let node = shared.node.clone();
    let max = shared.config.max_message_size;
    match endpoint {
        Endpoint::Herald => {
            let client = node.new_client(encoding);
            // +1: the node clock counts whole seconds, so this gives at least the full timeout.
            let deadline = node.now() + shared.config.handshake_timeout.as_secs() as u32 + 1;
            shared.deadlines.add(deadline, &client);
            let session = Session::new(node.clone(), client).with_transport(Transport::WebSocket);
            let conn = Connection::new(stream.into_io(), session, WsWire::new(max), leftover)
                .holding(slot);
            shared.tracker.spawn(S::hibernating(conn, &shared));
        }
        Endpoint::Shootout => {
            let client = node.new_client(Encoding::Json);
            let handler = ShootoutConn::new(shared.shootout.clone(), client, node.clone());
            let conn = Connection::new(stream.into_io(), handler, WsWire::new(max), leftover)
                .holding(slot);
            shared.tracker.spawn(S::hibernating(conn, &shared));
        }
        Endpoint::Echo => {
            let client = node.new_client(Encoding::Json);
            let handler = EchoConn::new(client, node.clone());
            let conn = Connection::new(stream.into_io(), handler, WsWire::new(max), leftover)
                .holding(slot);
            shared.tracker.spawn(S::hibernating(conn, &shared));
        }
        Endpoint::Pusher(target) => {
            let handler =
                crate::pusher::conn::open(&shared, &target.key, target.protocol.as_deref());
            let conn = Connection::new(stream.into_io(), handler, WsWire::new(max), leftover)
                .holding(slot);
            shared.tracker.spawn(S::hibernating(conn, &shared));
        }
    }
}

/// Counts a connection as "handshaking" while it exists, so that the
/// connection cap also covers connections not yet registered as clients.
struct Handshaking(Arc<Shared>);

impl Handshaking {
    fn new(shared: Arc<Shared>) -> Handshaking {
        shared
            .handshaking
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Handshaking(shared)
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.0
            .handshaking
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

enum Endpoint {
    Herald,
    Shootout,
    /// The test-only echo (`--test-echo-route`, see [`crate::ws::echo`]).
    Echo,
    /// `/app/{key}`: Pusher Channels.
    Pusher(Box<PusherTarget>),
}

/// What a Pusher upgrade asked for.
struct PusherTarget {
    /// The app key from the path.
    key: String,
    /// The `protocol` query parameter, if given.
    protocol: Option<String>,
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
