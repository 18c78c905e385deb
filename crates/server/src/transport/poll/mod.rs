//! HTTP long-polling (Comet), for clients that have nothing else.
//!
//! A poll session is an ordinary Herald session whose outbox is drained by HTTP
//! requests instead of a socket:
//!
//! - `POST /poll` opens a session: `{"session": "<id>", "timeout": 25}`. The id
//!   is 128 random bits from the OS: it is the session's only credential.
//! - `POST /poll/<id>` sends commands — one JSON command, or a JSON array of
//!   them — and answers `202 {}`. Their replies arrive through polls.
//! - `GET /poll/<id>` waits until something is queued (or `timeout` seconds
//!   pass), then answers a JSON array of every queued server message, oldest
//!   first (possibly `[]`).
//! - `DELETE /poll/<id>` ends the session.
//!
//! Messages queued between polls wait in the session's outbox, bounded like any
//! connection's (`client_queue_bytes`): nothing is lost while a client is
//! between polls, and a client that stops polling long enough to overflow it is
//! disconnected as a slow consumer. A session not polled for `ping_interval +
//! pong_timeout` seconds (35 s by default) expires like a silent connection
//! (code 3000). A message ending the session (`{"disconnect": ...}`) is the last
//! element of the last poll; after that, and for unknown ids, requests get 404
//! and the client opens a new session. One poll at a time per session: a second
//! concurrent poll takes over the wake-up and the first returns at its timeout.

pub mod h1;

use crate::respond::{error, full, json, read_body, Body, BodyError};
use bytes::{BufMut, Bytes, BytesMut};
use herald_core::outbox::Frame;
use herald_core::shard::{lock, Sharded};
use herald_core::{Client, Node, Session};
use herald_proto::{Encoding, ErrorCode, Push, ServerMsg};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

/// Poll sessions of one server, and what serving them takes.
#[derive(Debug)]
pub struct Polls {
    /// By id: the 128 bits themselves, not their hex text (an idle session
    /// then costs no key allocation).
    sessions: Sharded<u128, Arc<PollSession>>,
    /// The node: hub, broker, sessions.
    node: Arc<Node>,
    /// How long a poll waits for messages (`poll_timeout`).
    timeout: Duration,
    /// Largest message accepted (`max_message_size`).
    max_message_size: usize,
    /// How long a request body may take (`request_body_timeout`).
    request_body_timeout: Duration,
}

impl Polls {
    /// No sessions yet, on `node`.
    pub fn new(
        node: Arc<Node>,
        timeout: Duration,
        max_message_size: usize,
        request_body_timeout: Duration,
    ) -> Polls {
        Polls {
            sessions: Sharded::new(16),
            node,
            timeout,
            max_message_size,
            request_body_timeout,
        }
    }

    /// How long a request body may take (`request_body_timeout`).
    pub fn request_body_timeout(&self) -> Duration {
        self.request_body_timeout
    }

    /// Drops sessions that are closing (expired, slow, token expired, shut
    /// down) and have not been polled for `grace` seconds (node clock `now`).
    /// The grace lets a client that is polling collect the final messages,
    /// the `disconnect` with its code included, before the session goes.
    pub fn reap(&self, now: u32, grace: u32) {
        self.sessions.retain(|_, s| {
            !(s.client.outbox.is_closing() && now.saturating_sub(s.client.last_seen()) >= grace)
        });
    }

    /// Number of open poll sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// True when no poll session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One long-poll client.
#[derive(Debug)]
pub struct PollSession {
    /// Its key in [`Polls`].
    id: u128,
    session: Mutex<Session>,
    client: Arc<Client>,
}

/// A new session id: its bits and their text (32 lowercase hex digits).
fn session_id() -> Option<(u128, String)> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).ok()?;
    let id = u128::from_be_bytes(b);
    Some((id, format!("{id:032x}")))
}

/// The bits of a session id given as text; `None` (unknown session) unless
/// it is 32 lowercase hex digits, the only form ids are given in.
pub fn parse_id(text: &str) -> Option<u128> {
    let digit = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if text.len() != 32 || !text.bytes().all(digit) {
        return None;
    }
    u128::from_str_radix(text, 16).ok()
}

fn not_found() -> Response<Body> {
    error(
        StatusCode::NOT_FOUND,
        ErrorCode::BadRequest,
        "unknown or expired poll session: open a new one with POST /poll",
    )
}

/// A request's body, as hyper gives it or as [`h1`] read it.
pub enum PollBody {
    /// Not read yet (hyper).
    Hyper(Incoming),
    /// Read whole, within [`body_limit`] and the body deadline.
    Read(Bytes),
}

/// The largest body `POST /poll/<id>` takes: a batch may hold many
/// commands, each still bounded by the message size.
pub fn body_limit(polls: &Polls) -> usize {
    polls.max_message_size.saturating_mul(16)
}

/// Routes `/poll` and `/poll/<id>`.
pub async fn handle(req: Request<Incoming>, polls: &Polls) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    dispatch(&method, &path, PollBody::Hyper(req.into_body()), polls).await
}

/// Routes a request for `/poll` or `/poll/<id>` given its method and path.
pub async fn dispatch(
    method: &Method,
    path: &str,
    body: PollBody,
    polls: &Polls,
) -> Response<Body> {
    let id = path
        .strip_prefix("/poll")
        .unwrap_or("")
        .trim_start_matches('/');
    let key = parse_id(id);
    match (method.clone(), id.is_empty()) {
        (Method::POST, true) => open(polls),
        (Method::GET, false) => poll(key, polls).await,
        (Method::POST, false) => send(body, key, polls).await,
        (Method::DELETE, false) => match key.and_then(|k| polls.sessions.remove(&k)) {
            Some(_) => Response::builder()
                .status(StatusCode::NO_CONTENT)
                .body(full(Bytes::new()))
                .unwrap_or_else(|_| not_found()),
            None => not_found(),
        },
        _ => error(
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::BadRequest,
            "POST /poll opens; GET polls, POST sends, DELETE closes /poll/<id>",
        ),
    }
}

fn open(polls: &Polls) -> Response<Body> {
    let Some((key, id)) = session_id() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Internal,
            "no randomness for a session id",
        );
    };
    let node = polls.node.clone();
    let client = node.new_client(Encoding::Json);
    let session = PollSession {
        id: key,
        session: Mutex::new(
            Session::new(node, client.clone())
                .with_transport(herald_core::metrics::Transport::Poll),
        ),
        client,
    };
    polls.sessions.lock(&key).insert(key, Arc::new(session));
    let timeout = polls.timeout.as_secs();
    json(
        StatusCode::OK,
        serde_json::json!({"session": id, "timeout": timeout})
            .to_string()
            .into_bytes(),
    )
}

fn find(id: Option<u128>, polls: &Polls) -> Option<Arc<PollSession>> {
    let id = id?;
    polls.sessions.lock(&id).get(&id).cloned()
}

async fn send(body: PollBody, id: Option<u128>, polls: &Polls) -> Response<Body> {
    let Some(s) = find(id, polls) else {
        return not_found();
    };
    s.client.touch(polls.node.now());
    let limit = body_limit(polls);
    let body = match body {
        PollBody::Hyper(b) => match read_body(b, limit, polls.request_body_timeout).await {
            Ok(b) => b,
            Err(e) => return e.response(),
        },
        PollBody::Read(b) if b.len() > limit => return BodyError::TooLarge(limit).response(),
        PollBody::Read(b) => b,
    };
    // One command, or an array of them; a malformed command is answered
    // through the poll like on any other transport.
    let commands = match herald_proto::json::split_batch(&body) {
        Ok(c) => c,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                &format!("expected a command or an array of commands: {e}"),
            )
        }
    };
    let mut session = lock(&s.session);
    for c in commands {
        session.on_message(c, false);
    }
    json(StatusCode::ACCEPTED, b"{}".to_vec())
}

async fn poll(id: Option<u128>, polls: &Polls) -> Response<Body> {
    let Some(s) = begin(id, polls) else {
        return not_found();
    };
    wait(&s, polls).await;
    answer(&s, polls)
}

/// A `GET /poll/<id>`, first step: the session, if there is one (touched:
/// a poll is its heartbeat).
pub fn begin(id: Option<u128>, polls: &Polls) -> Option<Arc<PollSession>> {
    let s = find(id, polls)?;
    s.client.touch(polls.node.now());
    Some(s)
}

/// The answer to a poll for an unknown or expired session.
pub fn unknown() -> Response<Body> {
    not_found()
}

/// Second step: waits until something is queued for `s` or the session
/// closes, at most `poll_timeout`. This is what an idle long-polling client
/// is: kept small (a session handle and a timer).
pub async fn wait(s: &PollSession, polls: &Polls) {
    let ready = poll_fn(|cx| {
        s.client.outbox.with_queue(|q| {
            // Heartbeats mean nothing here: the poll itself is the heartbeat.
            while matches!(q.frames.front(), Some(Frame::Ping | Frame::Pong(_))) {
                q.advance(1, 0);
            }
            if q.frames.is_empty() && q.closing().is_none() {
                q.set_waker(cx.waker());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
    });
    let _ = tokio::time::timeout(polls.timeout, ready).await;
}

/// Last step: the answer, a JSON array of every queued message (the
/// session's `disconnect` last if it is closing; it is then forgotten).
pub fn answer(s: &Arc<PollSession>, polls: &Polls) -> Response<Body> {
    s.client.touch(polls.node.now());
    let (body, closing) = s.client.outbox.with_queue(|q| {
        let mut out = BytesMut::with_capacity(256);
        out.put_u8(b'[');
        let mut first = true;
        for f in q.frames.iter() {
            if let Frame::Text(_) | Frame::Spliced(_) = f {
                if !first {
                    out.put_u8(b',');
                }
                first = false;
                for piece in f.pieces() {
                    out.extend_from_slice(piece);
                }
            }
        }
        let n = q.frames.len();
        q.advance(n, 0);
        let closing = q.closing();
        if let Some(c) = closing {
            let msg = ServerMsg::Push(Push::Disconnect {
                code: c.code,
                reason: c.reason().to_string(),
            });
            if !first {
                out.put_u8(b',');
            }
            Encoding::Json.encode_server(&msg, &mut out);
        }
        out.put_u8(b']');
        (out.freeze(), closing.is_some())
    });
    if closing {
        polls.sessions.remove(&s.id);
    }
    json(StatusCode::OK, body.to_vec())
}

#[cfg(test)]
mod tests {
    use super::parse_id;

    #[test]
    fn session_ids_are_32_lowercase_hex_digits() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(parse_id(id), Some(0x0123456789abcdef0123456789abcdef));
        assert_eq!(format!("{:032x}", parse_id(id).unwrap_or(0)), id);
        for bad in [
            "",
            "0123456789ABCDEF0123456789ABCDEF",
            "+123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "0123456789abcdef0123456789abcdeg",
        ] {
            assert_eq!(parse_id(bad), None, "{bad:?}");
        }
    }
}
