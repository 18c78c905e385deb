//! Long-polling on Herald's own HTTP/1.1 path: the shape of request it takes
//! ([`request`]) and one request's body and answer ([`read_request`]).
//!
//! Why: a pending poll is the idle state of a long-polling client, and on
//! hyper it held hyper's buffers and dispatcher for as long as it waited
//! (docs/decisions/0010-idle-memory.md). The keep-alive loop that reads one
//! head after another and hands the connection on when a request of another
//! kind comes is the HTTP layer's (`crate::http`); what a poll request means
//! is this module's.

use super::{PollSession, Polls};
use crate::limits::IpSlot;
use crate::respond::{Body, BodyError};
use bytes::Bytes;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt};

/// A long-polling request (`/poll`, `/poll/<id>`), copied out of its head.
#[derive(Debug)]
pub struct PollRequest {
    method: http::Method,
    path: String,
    /// Its `content-length` (0 when absent).
    body_len: usize,
    /// The client asked to close the connection after the answer.
    close: bool,
}

/// A plain HTTP/1.1 request for `/poll` (GET, POST or DELETE; no chunked
/// body, no `expect`, from an allowed origin) is served on Herald's own
/// path; any other shape goes to hyper (`None`), which answers it as before.
pub fn request(req: &httparse::Request<'_, '_>, allowed_origins: &[String]) -> Option<PollRequest> {
    let method = match req.method {
        Some("GET") => http::Method::GET,
        Some("POST") => http::Method::POST,
        Some("DELETE") => http::Method::DELETE,
        _ => return None,
    };
    if req.version != Some(1) {
        return None;
    }
    let mut body_len = 0;
    let mut lengths = 0;
    let mut close = false;
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("transfer-encoding") || name.eq_ignore_ascii_case("expect") {
            return None;
        }
        if name.eq_ignore_ascii_case("content-length") {
            lengths += 1;
            match std::str::from_utf8(h.value).ok().map(str::trim) {
                Some(v) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
                    body_len = v.parse::<usize>().ok()?;
                }
                _ => return None,
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
        return None;
    }
    let path = req.path.unwrap_or("");
    let path = path.split('?').next().unwrap_or(path).to_string();
    Some(PollRequest {
        method,
        path,
        body_len,
        close,
    })
}

/// A kept-alive connection between long-polling requests.
#[derive(Debug)]
pub struct PollConn<S> {
    /// The socket (plain or TLS).
    pub stream: S,
    /// Bytes the client sent after the current request (pipelined).
    pub rest: Vec<u8>,
    /// This connection's place in the per-IP count.
    pub slot: Option<Box<IpSlot>>,
}

/// What a long-polling request comes to.
pub enum Step {
    /// The connection is finished with (refused, gone).
    Done,
    /// This answer; then close the connection if `true`.
    /// (Boxed: this value is alive across the loop's awaits; the loop's
    /// state, which a pending poll holds, stays small.)
    Answer(Box<http::Response<Body>>, bool),
    /// A `GET /poll/<id>`: wait for this session ([`super::wait`]), then
    /// answer ([`super::answer`]); then close the connection if `true`.
    Wait(Arc<PollSession>, bool),
}

/// Reads the request's body (bounded in size and time) and answers it, or
/// for a poll finds the session to wait for.
pub async fn read_request<S: AsyncRead + Unpin>(
    conn: &mut PollConn<S>,
    polls: &Polls,
    request: Box<PollRequest>,
) -> Step {
    let limit = super::body_limit(polls);
    if request.body_len > limit {
        let refusal = BodyError::TooLarge(limit).response();
        return Step::Answer(Box::new(refusal), true);
    }
    let timeout = polls.request_body_timeout();
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
            let refusal = BodyError::Timeout(timeout.as_secs()).response();
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
        return match super::begin(super::parse_id(id), polls) {
            Some(session) => Step::Wait(session, close),
            None => Step::Answer(Box::new(super::unknown()), close),
        };
    }
    let body = super::PollBody::Read(body);
    let response = super::dispatch(&request.method, &request.path, body, polls).await;
    Step::Answer(Box::new(response), close)
}
