//! Every request Herald's lean path leaves to hyper: HTTP/1.1 with
//! keep-alive, all of HTTP/2 (h2c with prior knowledge, h2 over TLS), and
//! the plain endpoints. [`handle`] dispatches by the route table
//! ([`crate::routes`]) to each endpoint's handler with that endpoint's state.
//!
//! `/api/*` requires the API key when one is configured (401, code 101);
//! the browser transports (`/sse`, `/poll`) obey the Origin allowlist (403,
//! code 104), as WebSocket upgrades do; a WebSocket endpoint reached without
//! an upgrade (or over HTTP/2) answers 426.

use super::Http;
use crate::limits::IpSlot;
use crate::respond::{error, text, Body};
use crate::rewind::Rewind;
use crate::routes::{needs_api_key, Route};
use bytes::Bytes;
use herald_proto::ErrorCode;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::Arc;

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
pub async fn serve<S: crate::transport::Stream>(
    stream: S,
    http: Arc<Http>,
    read: Vec<u8>,
    slot: Option<Box<IpSlot>>,
) {
    // Held while hyper serves this connection (SSE streams included).
    let _slot = slot;
    let stopping = http.stopping.clone();
    let tracker = http.tracker.clone();
    let peer = stream.peer_ip().map(Peer);
    let io = hyper_util::rt::TokioIo::new(Rewind::new(Bytes::from(read), stream));
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    // Without a timer hyper enforces no timeout at all: a slowloris on the
    // second request of a kept-alive connection, or an idle one, would be
    // held for good. Each later head gets what the first one got.
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(http.handshake_timeout);
    // HTTP/2 has no request heads to time: a peer that sent the preface and
    // then nothing is found dead by pings, like a silent WebSocket client.
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive_interval(http.ping_interval)
        .keep_alive_timeout(http.pong_timeout);
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        if let Some(p) = peer {
            req.extensions_mut().insert(p);
        }
        handle(req, http.clone())
    });
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

/// The connection's peer address, in each request's extensions (the
/// admin login limits attempts per address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub std::net::IpAddr);

/// Routes one request.
pub async fn handle(req: Request<Incoming>, http: Arc<Http>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path();
    let route = Route::of_with(path, &http.bayeux.config.path);
    if needs_api_key(path) {
        if let Some(key) = &http.api_key {
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
    } else if route.is_browser_stream() {
        let origin = req
            .headers()
            .get(http::header::ORIGIN)
            .map(|v| v.as_bytes());
        if !crate::limits::origin_allowed(&http.allowed_origins, origin) {
            http.node.metrics.refused.inc();
            return Ok(error(
                StatusCode::FORBIDDEN,
                ErrorCode::PermissionDenied,
                "origin not allowed",
            ));
        }
    }
    let get = req.method() == Method::GET;
    Ok(match route {
        Route::Health if get => crate::api::health(),
        Route::Ready if get => crate::api::ready(&http.api),
        Route::Metrics if get => crate::metrics::response(&http.metrics),
        Route::Publish if req.method() != Method::POST => error(
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::BadRequest,
            "use POST",
        ),
        Route::Publish => crate::api::publish(req, &http.api).await,
        Route::Nodes if get => crate::api::nodes(&http.api),
        Route::Tables => crate::tables::handle(req, &http.tables).await,
        Route::Games => crate::scripts::handle(&req, &http.scripts),
        // An event stream is a GET without a body (EventSource never sends
        // one); one that comes with a body would leave that body unread on a
        // connection held open for as long as the stream lasts.
        Route::Sse if get && !hyper::body::Body::is_end_stream(req.body()) => error(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            "GET /sse takes no request body",
        ),
        Route::Sse if get => {
            crate::transport::sse::open_with_headers(
                req.uri().query(),
                req.headers(),
                &http.streams,
            )
            .await
        }
        Route::Poll => crate::transport::poll::handle(req, &http.polls).await,
        Route::PusherApi => crate::pusher::api::handle(req, &http.pusher).await,
        Route::Bayeux => crate::bayeux::http::handle(req, &http.bayeux).await,
        Route::Admin => crate::admin::handle(req, &http.admin).await,
        Route::Ws | Route::Shootout => {
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
        _ if get => {
            crate::demo::asset(path).unwrap_or_else(|| text(StatusCode::NOT_FOUND, "not found\n"))
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    })
}
