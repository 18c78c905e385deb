//! The `long-polling` transport: each batch is the body of a `POST` to the
//! endpoint, answered with a JSON array of replies and deliveries.
//!
//! A batch without `/meta/connect` is answered as soon as Herald has
//! answered its commands (at most [`REPLY_WAIT`]). A batch with one is held
//! until something is queued for the session, the session ends, or the
//! connect's time is up (`timeout`, or less if the client's advice asks).
//! Browsers are told apart by a `BAYEUX_BROWSER` cookie set on the
//! handshake: a browser that already has a connect held (another tab) gets
//! its second one answered at once with `multiple-clients: true` and a
//! longer `interval`, so that tabs share the browser's few connections
//! instead of exhausting them.
//!
//! A connect of a session that has one held already supersedes it: the
//! older one is answered at once, so a client that floods connects holds
//! one request, not one per connect.
//!
//! A body that is not a batch (not JSON, not an array, empty, more than
//! `max_batch` messages) is answered `400` with one unsuccessful reply on
//! `/meta/unsuccessful`; one over the size limit `413`.
//!
//! Served on hyper's path, so a held connect keeps hyper's connection
//! buffers: unlike `/poll` (decision 0010's lean HTTP/1.1 path), an idle
//! Bayeux long-polling client is not yet as small as it could be.

use super::session::{self, Connect};
use super::Bayeux;
use crate::respond::{json, read_body, Body};
use herald_bayeux::reply::{self, Advice, Reply};
use herald_bayeux::resume;
use herald_bayeux::{decode_batch, BayeuxError};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use std::time::Duration;
use tokio::time::Instant;

/// How long a batch waits for Herald's replies to its commands (a cluster's
/// broker may take a moment).
pub const REPLY_WAIT: Duration = Duration::from_secs(5);

/// The cookie that tells browsers apart.
const BROWSER_COOKIE: &str = "BAYEUX_BROWSER";

/// The largest body a batch may have: `max_batch` messages, each within the
/// message size limit, counting at most 16 (and at least 1) of them.
pub fn body_limit(b: &Bayeux) -> usize {
    b.max_message_size
        .saturating_mul(b.config.max_batch.clamp(1, 16))
}

/// An unsuccessful answer to a body that is no batch.
pub fn refusal(status: StatusCode, e: &BayeuxError) -> Response<Body> {
    let r = Reply::failed("/meta/unsuccessful", None, e);
    json(status, reply::batch([r.to_json().as_slice()]))
}

/// The value of the request's cookie `name`.
fn cookie_of(req: &Request<Incoming>, name: &str) -> Option<String> {
    req.headers()
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(name)?.strip_prefix('='))
        .map(str::to_string)
}

/// Serves a request to the endpoint on hyper's path, with CORS headers for
/// a browser page of another origin (see [`cors`]).
pub async fn handle(req: Request<Incoming>, b: &Bayeux) -> Response<Body> {
    let origin = req.headers().get(http::header::ORIGIN).cloned();
    let preflight = req.method() == Method::OPTIONS;
    let mut r = serve(req, b).await;
    if let Some(origin) = origin {
        cors(&mut r, origin, preflight);
    }
    r
}

/// CometD's long-polling runs cross-origin in browsers (the page on its own
/// site, the endpoint on Herald's), as credentialed XHR with a JSON body, so
/// it needs CORS: the preflight `OPTIONS` is answered `204`, and answers
/// name the requesting origin (never `*`: credentials, i.e. the
/// `BAYEUX_BROWSER` cookie, are sent). Which origins may come at all is the
/// `--allowed-origins` list, checked before the request gets here.
fn cors(r: &mut Response<Body>, origin: http::HeaderValue, preflight: bool) {
    use http::header::{self, HeaderValue};
    let h = r.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
    h.insert(header::VARY, HeaderValue::from_static("origin"));
    if preflight {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("POST"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("content-type"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
    }
}

async fn serve(req: Request<Incoming>, b: &Bayeux) -> Response<Body> {
    if req.method() == Method::OPTIONS {
        return Response::builder()
            .status(StatusCode::NO_CONTENT)
            .body(crate::respond::full(bytes::Bytes::new()))
            .unwrap_or_else(|_| {
                refusal(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &BayeuxError::new(500, "", "preflight"),
                )
            });
    }
    if req.method() != Method::POST {
        let mut r = refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            &BayeuxError::bad("long-polling uses POST; websocket an upgrade"),
        );
        r.headers_mut()
            .insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
        return r;
    }
    let browser = cookie_of(&req, BROWSER_COOKIE);
    let acked = cookie_of(&req, resume::COOKIE);
    let limit = body_limit(b);
    let body = match read_body(req.into_body(), limit, b.request_body_timeout).await {
        Ok(body) => body,
        Err(e) => {
            let status = e.response().status();
            return refusal(
                status,
                &BayeuxError::new(status.as_u16(), "", e.to_string()),
            );
        }
    };
    let batch = match decode_batch(&body, b.config.max_batch) {
        Ok(batch) => batch,
        Err(e) => {
            return refusal(StatusCode::BAD_REQUEST, &BayeuxError::bad(e.to_string()));
        }
    };
    let mut p = session::process(b, batch, "long-polling", acked.as_deref());
    let deadline = Instant::now() + REPLY_WAIT;
    session::collect(&p.waiting, &mut p.replies, deadline, p.batch).await;
    let mut set_cookie = Vec::new();
    if let Some(c) = p.connect.take() {
        hold(b, &c, browser.as_deref(), &mut p.replies).await;
        // An `ack` session's acknowledged positions, for a handshake on
        // another node after this one's loss (herald_bayeux::resume).
        if let Some(v) = c.session.acked_cookie(acked.as_deref(), super::unix_now()) {
            set_cookie.push(format!(
                "{}={v}; Path=/; HttpOnly; SameSite=Lax",
                resume::COOKIE
            ));
        }
    }
    if p.opened.is_some() && browser.is_none() {
        let mut id = [0u8; 12];
        if getrandom::fill(&mut id).is_ok() {
            let v: String = id.iter().map(|x| format!("{x:02x}")).collect();
            set_cookie.push(format!(
                "{BROWSER_COOKIE}={v}; Path=/; HttpOnly; SameSite=Lax"
            ));
        }
    }
    b.stamp(&mut p.replies);
    let mut r = json(
        StatusCode::OK,
        reply::batch(p.replies.iter().map(Vec::as_slice)),
    );
    for v in set_cookie {
        if let Ok(v) = http::HeaderValue::from_str(&v) {
            r.headers_mut().append(http::header::SET_COOKIE, v);
        }
    }
    r
}

/// What a held connect undoes however it ends, its request dropped (the
/// client went away mid-poll) included: the session's count of held
/// connects (a session holding one never expires) and the browser's (a
/// browser counted as holding one gets every later connect answered at
/// once with `multiple-clients`).
struct Held<'a> {
    b: &'a Bayeux,
    s: &'a session::BayeuxSession,
    browser: Option<&'a str>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.s.release(self.b.node.now_ms());
        if let Some(br) = self.browser {
            self.b.release_browser(br);
        }
    }
}

/// Holds a connect until something is queued (then drained into
/// `replies`), the session ends, or its time is up; then adds its reply.
async fn hold(b: &Bayeux, c: &Connect, browser: Option<&str>, replies: &mut Vec<Vec<u8>>) {
    let s = &c.session;
    if s.is_gone() {
        replies.push(session::gone_reply(s, c.id.as_deref()));
        return;
    }
    let counted = match browser {
        Some(br) if !b.hold_browser(br) => {
            // Another tab of this browser holds a connect: answer now,
            // with what waits for this one (with `ack`, as a batch).
            s.drain(replies, None);
            let advice = Advice {
                interval: Some(super::MULTI_FRAME_INTERVAL_MS),
                multiple_clients: true,
                ..session::retry_advice(b)
            };
            session::answer_connect_with(c, replies, advice);
            s.touch(b.node.now_ms());
            return;
        }
        other => other,
    };
    let n = s.hold();
    let held = Held {
        b,
        s,
        browser: counted,
    };
    let deadline = Instant::now() + c.hold;
    loop {
        let done =
            s.drain(replies, None) > 0 || s.has_undelivered() || s.is_gone() || s.superseded(n);
        if done || Instant::now() >= deadline {
            break;
        }
        s.wait(deadline, None, None).await;
    }
    drop(held);
    session::answer_connect(b, c, replies);
}
