//! HTTP answers every endpoint builds, and the one bounded way to read a
//! request body.
//!
//! A leaf module: it imports nothing from the rest of the crate, so every
//! handler (API, long-polling, SSE, tables, Pusher's API, the demo page) can
//! use it without reaching back into the router that calls them.
//!
//! Request bodies are read by [`read_body`] only, which bounds both their size
//! and the time they take (`request_body_timeout`): a body trickled a byte at
//! a time (R-U-Dead-Yet), or shorter than its `Content-Length`, would
//! otherwise hold its connection and its handler for as long as the client
//! likes.

use bytes::Bytes;
use herald_proto::ErrorCode;
use http::{Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::time::Duration;

/// Response body type of every endpoint (streams included).
pub type Body = BoxBody<Bytes, Infallible>;

/// A complete body.
pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

/// A plain-text response.
pub fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
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

/// Reads a whole request body of at most `limit` bytes within `timeout`
/// (the server's `request_body_timeout`).
pub async fn read_body(
    body: Incoming,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    match tokio::time::timeout(timeout, Limited::new(body, limit).collect()).await {
        Err(_) => Err(BodyError::Timeout(timeout.as_secs())),
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge(limit)),
        Ok(Err(_)) => Err(BodyError::Broken),
    }
}
