//! Plain HTTP endpoints, served by hyper over HTTP/1.1 and HTTP/2 (h2c with
//! prior knowledge): the health check and the server-side publish API.
//!
//! `POST /api/publish` with `{"channel": "...", "data": <any JSON>}` (or
//! `"b64": "<base64>"` for binary payloads) publishes exactly as a WebSocket
//! client would and answers `200 {"epoch": "...", "offset": N}`. Errors answer
//! with an HTTP status and the protocol's numbered code:
//! `{"error": {"code": C, "message": "..."}}`. With no configuration the API
//! accepts every request on the listener, which binds 127.0.0.1 by default;
//! once an `api_key` is configured, every `/api/*` request must carry
//! `Authorization: apikey KEY` (else 401, code 101).
//!
//! `GET /api/nodes` lists the cluster's nodes with their stats (clients,
//! channels, publications, uptime) as of the last heartbeat.
//!
//! `GET /healthz` answers 200 while the process runs; `GET /readyz` answers 200
//! when the node can serve (broker healthy, not shutting down) and 503
//! otherwise; `GET /metrics` is the Prometheus text format (see
//! [`crate::metrics`]). Browser transports (`/sse`, `/poll`) obey the Origin
//! allowlist (403, code 104), as WebSocket upgrades do.
//!
//! Request bodies are read by [`read_body`] only, which bounds both their size
//! and the time they take (`request_body_timeout`): a body trickled a byte at
//! a time (R-U-Dead-Yet), or shorter than its `Content-Length`, would
//! otherwise hold its connection and its handler for as long as the client
//! likes.

use crate::server::Shared;
use bytes::Bytes;
use herald_core::{channel, Completion};
use herald_proto::ErrorCode;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::convert::Infallible;
use std::sync::Arc;

/// Response body type of every endpoint (streams included).
pub type Body = BoxBody<Bytes, Infallible>;

/// A complete body.
pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A JSON response.
pub fn json(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

/// An error answer carrying a protocol error code.
pub fn error(status: StatusCode, code: ErrorCode, message: &str) -> Response<Body> {
    let body = serde_json::json!({"error": {"code": code.code(), "message": message}});
    json(status, body.to_string().into_bytes())
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Longer than the limit (413).
    #[error("request body larger than {0} bytes")]
    TooLarge(usize),
    /// Not complete within `request_body_timeout` (408).
    #[error("request body not received within {0} s")]
    Timeout(u64),
    /// The connection failed or the framing was invalid (400).
    #[error("cannot read request body")]
    Broken,
}

impl BodyError {
    /// The answer to a request whose body failed this way. Its connection is
    /// closed after it: hyper does not keep a connection whose request body
    /// was left unread.
    pub fn response(&self) -> Response<Body> {
        let (status, code) = match self {
            BodyError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::MessageTooLarge),
            BodyError::Timeout(_) => (StatusCode::REQUEST_TIMEOUT, ErrorCode::BadRequest),
            BodyError::Broken => (StatusCode::BAD_REQUEST, ErrorCode::BadRequest),
        };
        error(status, code, &self.to_string())
    }
}

/// Reads a whole request body of at most `limit` bytes, within the server's
/// `request_body_timeout`.
pub async fn read_body(body: Incoming, limit: usize, shared: &Shared) -> Result<Bytes, BodyError> {
    let timeout = shared.config.request_body_timeout;
    match tokio::time::timeout(timeout, Limited::new(body, limit).collect()).await {
        Err(_) => Err(BodyError::Timeout(timeout.as_secs())),
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge(limit)),
        Ok(Err(_)) => Err(BodyError::Broken),
    }
}

/// Routes one request.
pub async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path();
    if path.starts_with("/api/") {
        if let Some(key) = &shared.config.api_key {
            let given = req
                .headers()
                .get(http::header::AUTHORIZATION)
                .map(|v| v.as_bytes());
            if !crate::auth::api_key_ok(given, &key.0) {
                let mut r = error(
                    StatusCode::UNAUTHORIZED,
                    ErrorCode::Unauthorized,
                    "this API requires `Authorization: apikey KEY`",
                );
                r.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("apikey"),
                );
                return Ok(r);
            }
        }
    } else if path == "/sse" || path.starts_with("/poll") {
        let origin = req
            .headers()
            .get(http::header::ORIGIN)
            .map(|v| v.as_bytes());
        if !crate::limits::origin_allowed(&shared.config.allowed_origins, origin) {
            shared.node.metrics.refused.inc();
            return Ok(error(
                StatusCode::FORBIDDEN,
                ErrorCode::PermissionDenied,
                "origin not allowed",
            ));
        }
    }
    Ok(match (req.method(), path) {
        (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
        (&Method::GET, "/readyz") => {
            if shared.stopping.is_cancelled() {
                text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
            } else if !shared.node.broker.healthy() {
                text(StatusCode::SERVICE_UNAVAILABLE, "broker unavailable\n")
            } else {
                text(StatusCode::OK, "ready\n")
            }
        }
        (&Method::GET, "/metrics") => {
            let mut r = Response::new(full(crate::metrics::render(&shared)));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        (_, "/api/publish") if req.method() != Method::POST => error(
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::BadRequest,
            "use POST",
        ),
        (&Method::POST, "/api/publish") => publish(req, &shared).await,
        (&Method::GET, "/api/nodes") => nodes(&shared),
        (_, p) if p == "/api/tables" || p.starts_with("/api/tables/") => {
            crate::tables::handle(req, &shared).await
        }
        // An event stream is a GET without a body (EventSource never sends
        // one); one that comes with a body would leave that body unread on a
        // connection held open for as long as the stream lasts.
        (&Method::GET, "/sse") if !hyper::body::Body::is_end_stream(req.body()) => error(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            "GET /sse takes no request body",
        ),
        (&Method::GET, "/sse") => {
            crate::sse::open_with_headers(req.uri().query(), req.headers(), &shared).await
        }
        (_, p) if p == "/poll" || p.starts_with("/poll/") => {
            crate::poll::handle(req, &shared).await
        }
        (_, p) if p.starts_with("/apps/") => crate::pusher::api::handle(req, &shared).await,
        (_, "/ws") | (_, "/shootout") => {
            let mut r = text(
                StatusCode::UPGRADE_REQUIRED,
                "this endpoint speaks WebSocket (HTTP/1.1 upgrade)\n",
            );
            r.headers_mut().insert(
                http::header::UPGRADE,
                http::HeaderValue::from_static("websocket"),
            );
            r
        }
        // The demo page (`/`, `/demo.js`, `/demo.css`).
        (&Method::GET, p) => {
            crate::demo::asset(p).unwrap_or_else(|| text(StatusCode::NOT_FOUND, "not found\n"))
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    })
}

/// `GET /api/nodes`: the nodes of the cluster as of this node's last
/// heartbeat, each with its stats; in memory mode, this node alone.
fn nodes(shared: &Shared) -> Response<Body> {
    let node = &shared.node;
    let body = match &shared.cluster {
        Some(c) => {
            let nodes: Vec<serde_json::Value> = c
                .nodes()
                .into_iter()
                .map(|n| {
                    serde_json::json!({
                        "id": n.id,
                        "self": n.id == c.node_id(),
                        "last_seen_ms": n.last_seen_ms,
                        "stats": n.stats,
                    })
                })
                .collect();
            serde_json::json!({"broker": "redis", "node": c.node_id(), "nodes": nodes})
        }
        None => serde_json::json!({
            "broker": "memory",
            "node": "",
            "nodes": [{
                "id": "",
                "self": true,
                "last_seen_ms": 0,
                "stats": {
                    "listen": shared.config.listen.to_string(),
                    "clients": node.client_count(),
                    "channels": node.hub.channel_count(),
                    "publications": node.metrics.publications.get(),
                    "uptime_s": node.now(),
                    "version": node.config.version,
                },
            }],
        }),
    };
    json(StatusCode::OK, body.to_string().into_bytes())
}

#[derive(Deserialize)]
struct PublishBody<'a> {
    channel: String,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(default)]
    b64: Option<String>,
}

async fn publish(req: Request<Incoming>, shared: &Shared) -> Response<Body> {
    // The body holds the payload plus the envelope: allow some room for it.
    let limit = shared.config.max_message_size + 1024;
    let body = match read_body(req.into_body(), limit, shared).await {
        Ok(b) => b,
        Err(e) => {
            if matches!(e, BodyError::TooLarge(_)) {
                shared
                    .node
                    .metrics
                    .dropped(herald_core::metrics::Drop::TooLarge, 1);
            }
            return e.response();
        }
    };
    let parsed: PublishBody<'_> = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                &format!("expected {{\"channel\": ..., \"data\": ...}}: {e}"),
            )
        }
    };
    let data = match (parsed.data, parsed.b64) {
        (Some(raw), None) => body.slice_ref(raw.get().as_bytes()),
        (None, Some(b64)) => {
            use base64::Engine;
            match base64::engine::general_purpose::STANDARD.decode(b64) {
                Ok(d) => Bytes::from(d),
                Err(_) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        ErrorCode::BadRequest,
                        "invalid b64",
                    )
                }
            }
        }
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                "give exactly one of data and b64",
            )
        }
    };
    if data.len() > shared.config.max_message_size {
        shared
            .node
            .metrics
            .dropped(herald_core::metrics::Drop::TooLarge, 1);
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::MessageTooLarge,
            "data larger than the maximum message size",
        );
    }
    if let Err(code) = channel::validate(&parsed.channel) {
        return error(StatusCode::BAD_REQUEST, code, "invalid channel name");
    }
    shared.node.metrics.publications.inc();
    let result = match shared.node.broker.publish(&parsed.channel, data) {
        Completion::Ready(r) => r,
        Completion::Pending(f) => f.await,
    };
    match result {
        Ok(pos) => json(
            StatusCode::OK,
            serde_json::json!({"epoch": pos.epoch, "offset": pos.offset})
                .to_string()
                .into_bytes(),
        ),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::BrokerUnavailable,
            &e.to_string(),
        ),
    }
}
