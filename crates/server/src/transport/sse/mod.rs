//! Server-Sent Events: `GET /sse?channel=A&channel=B` streams publications as
//! `text/event-stream`, over HTTP/1.1, h2c and h2 (TLS), so browsers can
//! receive with a plain `EventSource`.
//!
//! Each publication is one event:
//! - `data:` is the published data itself (JSON as its text; split over several
//!   `data:` lines if it contains newlines; data that is not UTF-8 is sent as
//!   standard base64 with the event type `b64`, or `<channel>#b64`);
//! - `event:` is absent on a single-channel stream (so `onmessage` fires) and
//!   is the channel's name on a multi-channel stream (`addEventListener(name)`);
//! - `id:` is the stream's position in every one of its channels, in the order
//!   of the `channel` parameters: `epoch:offset[,epoch:offset...]`. A browser
//!   sends the last one back as `Last-Event-ID` when it reconnects.
//!
//! # Resuming
//! A request carrying `Last-Event-ID` (browsers send it on their own when they
//! reconnect), or a `lastEventId=` query parameter for clients that cannot set
//! headers (the header wins), resumes the stream: each channel is subscribed
//! with `recover` from its position in that id, and the publications missed
//! are sent as ordinary events, with their ids, before any live one — nothing
//! lost, nothing twice, as long as they are still retained. For a channel that
//! cannot be recovered (history expired or off, epoch changed by a restart, a
//! position the server never gave), the stream instead sends
//!
//! ```text
//! id: <the stream's new position>
//! event: herald
//! data: {"unrecovered":{"channel":"c","epoch":"e","offset":n}}
//! ```
//!
//! and continues live from there: the page should resynchronise that channel
//! (e.g. reload its state) — no partial history is sent for it, since a page
//! that resynchronises has no use for it. The `id:` moves the browser past the
//! gap, so a later reconnect does not report it again. An id that does not
//! parse (not one `epoch:offset` per `channel` parameter, offsets not decimal)
//! is ignored and the stream starts live, as if none had been sent.
//!
//! Once every channel of the stream is subscribed, a stream that has sent no
//! id yet sends its starting position as an id alone (`id: ...` and a blank
//! line, no data, so no event fires): by the WHATWG rules an `EventSource`
//! still takes it as its last event id, so a stream lost before its first
//! publication resumes from where it started instead of reconnecting live
//! and missing what was published meanwhile. (Clients that drop ids without
//! data, such as the `eventsource` npm package from version 3, keep that
//! gap; tests/outside/eventsource shows both.)
//!
//! Protocol messages that are not publications (an error, the final
//! `disconnect`) arrive as `event: herald` with the JSON message as data. The
//! stream opens with `retry: 2000` (how long a browser waits before it
//! reconnects, in ms) and a `: herald` comment, so its first bytes go out as
//! soon as it is live. A comment line (`: ping`) is sent as a heartbeat to a
//! stream that has carried nothing for `ping_interval` seconds, which keeps
//! proxies from closing it.
//! SSE clients publish through `POST /api/publish`.
//!
//! A channel whose subscribe fails with an error worth retrying (114: the
//! broker is unreachable, as on a cluster node that has not reached Redis yet
//! or has lost it; or 100) ends the stream right after that error event. An
//! `EventSource` reconnects to a stream that ends, after the `retry:` the
//! stream opened with, and resumes from its `Last-Event-ID`; a stream kept
//! open without that channel would look healthy and never deliver it. (An
//! HTTP error status would not do: `EventSource` gives up on those.)
//!
//! Games: `table=ID` (repeatable) watches a game table and `lobby=PATH`
//! subscribes to a lobby branch (`lobby=` for all of it): the watch and lobby
//! replies, `game`, `seat`, `unseat` and `lobby_update` pushes arrive as
//! `event: herald` messages. SSE can watch, not play (playing needs `act`).
//!
//! The response is sent once every subscription of the stream is attached
//! (immediately with the in-memory broker, after a round trip to Redis in
//! cluster mode), so the stream is live when the client sees it open.
//!
//! The stream is an ordinary session whose client receives publications
//! unrendered ([`Frame::Publication`]), because each stream renders its own ids;
//! all queued events are rendered into one chunk per write.

pub mod conn;

use crate::respond::{error, Body};
use bytes::{BufMut, Bytes, BytesMut};
use herald_core::metrics::Transport;
use herald_core::outbox::Frame;
use herald_core::{channel, Action, AuthError, Node, Session};
use herald_proto::{
    Command, Encoding, ErrorCode, HistoryItem, Position, Push, Reply, Request, ServerMsg,
};
use http::{Response, StatusCode};
use http_body::Body as HttpBody;
use http_body_util::BodyExt;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio_util::task::TaskTracker;

/// Most bytes rendered into one chunk.
const CHUNK: usize = 256 * 1024;
/// Id of the first subscribe command; channel `i` is subscribed with id
/// `FIRST_SUB + i`.
const FIRST_SUB: u32 = 2;

/// What event streams take: the node, the subscription limit, how long a
/// stream waits for its subscriptions, and the shutdown tracker (streams on
/// Herald's own path are drivers like WebSocket connections).
#[derive(Debug)]
pub struct Streams {
    /// The node: hub, broker, sessions.
    pub node: Arc<Node>,
    /// Most channels (plus tables and lobby branches) one stream may carry.
    pub max_subscriptions: usize,
    /// How long a stream waits for its subscriptions to be attached.
    pub handshake_timeout: std::time::Duration,
    /// Tracks stream drivers for shutdown.
    pub tracker: TaskTracker,
}

/// Opens an event stream for the request's `channel` parameters, resuming
/// from its `lastEventId` parameter if any.
pub async fn open(query: Option<&str>, streams: &Streams) -> Response<Body> {
    open_resuming(query, None, None, streams).await
}

/// Opens an event stream like [`open`], resuming from the request's
/// `Last-Event-ID` header if it has one (else from `lastEventId=`), with the
/// connection token of its `Authorization: Bearer` header if it has one (else
/// of a `token=` parameter: `EventSource` cannot set headers).
pub async fn open_with_headers(
    query: Option<&str>,
    headers: &http::HeaderMap,
    streams: &Streams,
) -> Response<Body> {
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    open_resuming(query, last, bearer, streams).await
}

/// The HTTP answer to a refused token or permission.
fn refused(e: &AuthError) -> Response<Body> {
    let status = match e {
        AuthError::Denied(_) => StatusCode::FORBIDDEN,
        _ => StatusCode::UNAUTHORIZED,
    };
    error(status, e.code(), &e.to_string())
}

/// Opens an event stream, resuming from `last_event_id` if given, else from
/// the query's `lastEventId`; authenticated with `bearer`, else the query's
/// `token`. A refused token answers 401 (code 101, or 112 when expired), a
/// channel the client may not subscribe to 403 (code 104).
pub async fn open_resuming(
    query: Option<&str>,
    last_event_id: Option<&str>,
    bearer: Option<&str>,
    streams: &Streams,
) -> Response<Body> {
    match start(query, last_event_id, bearer, streams).await {
        Ok(stream) => response(stream),
        Err(refusal) => refusal,
    }
}

/// The 200 answer carrying `stream` as its body (hyper's path: HTTP/2, and
/// HTTP/1.1 requests [`conn`] leaves to hyper).
fn response(stream: SseStream) -> Response<Body> {
    let mut r = Response::new(stream.boxed());
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    h.insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    *r.status_mut() = StatusCode::OK;
    r
}

/// The headers of the 200 answer, as [`response`] gives them to hyper, for a
/// stream served by [`conn`] on its own.
pub(crate) const HEADERS: &str =
    "content-type: text/event-stream\r\ncache-control: no-cache\r\nx-accel-buffering: no\r\n";

/// Parses the request, authenticates, subscribes and waits until the
/// subscriptions are attached: the stream to serve, or the error answer.
pub(crate) async fn start(
    query: Option<&str>,
    last_event_id: Option<&str>,
    bearer: Option<&str>,
    streams: &Streams,
) -> Result<SseStream, Response<Body>> {
    let mut channels: Vec<String> = Vec::new();
    let mut games: Vec<Command> = Vec::new();
    let mut query_id = None;
    let mut query_token = None;
    for kv in query.unwrap_or("").split('&') {
        if let Some(c) = kv.strip_prefix("channel=") {
            channels.push(percent_decode(c));
        } else if let Some(t) = kv.strip_prefix("table=") {
            let Ok(table) = t.parse::<u64>() else {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::BadRequest,
                    &format!("invalid table id {t:?}"),
                ));
            };
            games.push(Command::Watch { table });
        } else if let Some(path) = kv.strip_prefix("lobby=") {
            games.push(Command::Lobby {
                path: percent_decode(path),
            });
        } else if let Some(id) = kv.strip_prefix("lastEventId=") {
            query_id = Some(percent_decode(id));
        } else if let Some(t) = kv.strip_prefix("token=") {
            query_token = Some(percent_decode(t));
        }
    }
    if channels.is_empty() && games.is_empty() {
        return Err(error(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            "give at least one ?channel= (or ?table= to watch a game table, ?lobby= for the lobby)",
        ));
    }
    if channels.len() + games.len() > streams.max_subscriptions {
        return Err(error(
            StatusCode::BAD_REQUEST,
            ErrorCode::LimitExceeded,
            "too many channels for one stream",
        ));
    }
    for c in &channels {
        if channel::validate(c).is_err() {
            return Err(error(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidChannel,
                &format!("invalid channel name {c:?}"),
            ));
        }
    }
    let resume = last_event_id
        .or(query_id.as_deref())
        .and_then(|id| parse_event_id(id, channels.len()));
    let node = streams.node.clone();
    let wait = streams.handshake_timeout;
    let client = node.new_raw_client();
    let mut session = Session::new(node, client).with_transport(Transport::Sse);
    if let Err(e) = session.authenticate(bearer.or(query_token.as_deref())) {
        return Err(refused(&e));
    }
    for c in &channels {
        if let Err(e) = session.check(Action::Subscribe, c, None) {
            return Err(refused(&e));
        }
    }
    let streams: Vec<ChannelPos> = channels
        .into_iter()
        .enumerate()
        .map(|(i, channel)| {
            let from = resume.as_ref().map(|r| r[i].clone());
            ChannelPos {
                channel,
                epoch: from.as_ref().map_or_else(String::new, |p| p.epoch.clone()),
                offset: from.as_ref().map_or(0, |p| p.offset),
                recovering: from.is_some(),
            }
        })
        .collect();
    for (i, c) in streams.iter().enumerate() {
        session.handle(Request {
            id: FIRST_SUB + i as u32,
            cmd: Command::Subscribe {
                channel: c.channel.clone(),
                recover: c.recovering.then(|| Position {
                    epoch: c.epoch.clone(),
                    offset: c.offset,
                }),
                join_leave: false,
                token: None,
            },
        });
    }
    // Game tables and lobby branches: their answers and pushes are shown as
    // `event: herald` like any protocol message (ids after the channels').
    let watched = games.len();
    for (i, cmd) in games.into_iter().enumerate() {
        session.handle(Request {
            id: FIRST_SUB + (streams.len() + i) as u32,
            cmd,
        });
    }
    subscribed(&session, streams.len() + watched, wait).await;
    Ok(SseStream {
        session,
        streams,
        started: false,
        done: false,
        ending: false,
        id_sent: false,
    })
}

/// Waits until each of the stream's `n` subscribes has its answer queued (a
/// reply or an error), at most `limit`. The in-memory broker answers at once;
/// the Redis broker (cluster mode) after a round trip. Without the wait the
/// response could reach the client before its subscriptions are live, and
/// publications made in between would be missed — with it, as on one node,
/// the stream is live when its response arrives.
async fn subscribed(session: &Session, n: usize, limit: std::time::Duration) {
    let client = session.client().clone();
    let answered = std::future::poll_fn(|cx| {
        client.outbox.with_queue(|q| {
            let answers = q
                .frames
                .iter()
                .filter(|f| matches!(f, Frame::Text(_)))
                .count();
            if answers >= n || q.closing().is_some() {
                Poll::Ready(())
            } else {
                q.set_waker(cx.waker());
                Poll::Pending
            }
        })
    });
    // Late answers are rendered by the stream as they come.
    let _ = tokio::time::timeout(limit, answered).await;
}

/// Parses an event id, `epoch:offset[,epoch:offset...]`, into one position per
/// channel; `None` if it does not have that shape.
fn parse_event_id(id: &str, channels: usize) -> Option<Vec<Position>> {
    let parts: Vec<&str> = id.trim().split(',').collect();
    if parts.len() != channels {
        return None;
    }
    parts
        .into_iter()
        .map(|part| {
            let (epoch, offset) = part.split_once(':')?;
            if offset.is_empty() || !offset.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(Position {
                epoch: epoch.to_string(),
                offset: offset.parse().ok()?,
            })
        })
        .collect()
}

/// Decodes `%XX` escapes (channel names are ASCII; anything odd is kept as is
/// and then refused by channel validation).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a stream is in one of its channels.
struct ChannelPos {
    channel: String,
    epoch: String,
    offset: u64,
    /// Subscribed with `recover`, reply not yet rendered.
    recovering: bool,
}

/// The body of one event stream.
pub(crate) struct SseStream {
    session: Session,
    /// One per `channel` parameter, in their order.
    streams: Vec<ChannelPos>,
    started: bool,
    done: bool,
    /// A channel's subscribe failed in a way worth retrying: the stream ends
    /// once what is rendered so far is sent, and the client reconnects.
    ending: bool,
    /// An `id:` was rendered: the client has a position to resume from.
    id_sent: bool,
}

impl SseStream {
    fn render_id(&mut self, out: &mut BytesMut) {
        self.id_sent = true;
        out.extend_from_slice(b"id: ");
        for (i, s) in self.streams.iter().enumerate() {
            if i > 0 {
                out.put_u8(b',');
            }
            out.extend_from_slice(s.epoch.as_bytes());
            out.put_u8(b':');
            out.extend_from_slice(s.offset.to_string().as_bytes());
        }
        out.put_u8(b'\n');
    }

    /// Renders one publication of channel `i` (live or recovered) as an event.
    fn render_publication(
        &mut self,
        i: Option<usize>,
        offset: u64,
        data: &[u8],
        out: &mut BytesMut,
    ) {
        if let Some(s) = i.and_then(|i| self.streams.get_mut(i)) {
            s.offset = offset;
        }
        self.render_id(out);
        let multi = self.streams.len() > 1;
        let (text, b64) = match std::str::from_utf8(data) {
            Ok(t) => (std::borrow::Cow::Borrowed(t), false),
            Err(_) => {
                use base64::Engine;
                let enc = base64::engine::general_purpose::STANDARD.encode(data);
                (std::borrow::Cow::Owned(enc), true)
            }
        };
        match (multi, b64) {
            (false, false) => {}
            (false, true) => out.extend_from_slice(b"event: b64\n"),
            (true, _) => {
                out.extend_from_slice(b"event: ");
                if let Some(s) = i.and_then(|i| self.streams.get(i)) {
                    out.extend_from_slice(s.channel.as_bytes());
                }
                if b64 {
                    out.extend_from_slice(b"#b64");
                }
                out.put_u8(b'\n');
            }
        }
        data_lines(&text, out);
    }

    /// Our own subscribe reply for channel `i`: its position, and with
    /// `recover` the missed publications or the `unrecovered` notice.
    fn render_subscribed(
        &mut self,
        i: usize,
        epoch: String,
        offset: u64,
        recovered: bool,
        publications: Vec<HistoryItem>,
        out: &mut BytesMut,
    ) {
        let Some(s) = self.streams.get_mut(i) else {
            return;
        };
        let asked = std::mem::take(&mut s.recovering);
        s.epoch.clone_from(&epoch);
        if asked && recovered {
            for p in &publications {
                self.render_publication(Some(i), p.offset, &p.data, out);
            }
        }
        let s = &mut self.streams[i];
        s.offset = offset;
        if asked && !recovered {
            let notice = serde_json::json!({
                "unrecovered": {"channel": s.channel, "epoch": epoch, "offset": offset}
            });
            self.render_id(out);
            out.extend_from_slice(b"event: herald\n");
            data_lines(&notice.to_string(), out);
        }
        // Every channel has its position and none was sent: send it alone,
        // so that the stream is resumable before its first event (module docs).
        let placed = |s: &ChannelPos| !s.epoch.is_empty() && !s.recovering;
        // (A stream of tables and lobbies only has no position to send.)
        if !self.id_sent && !self.streams.is_empty() && self.streams.iter().all(placed) {
            self.render_id(out);
            out.put_u8(b'\n');
        }
    }

    fn render(&mut self, frame: &Frame, out: &mut BytesMut) {
        match frame {
            Frame::Publication(p) => {
                let i = self.streams.iter().position(|s| *s.channel == *p.channel);
                self.render_publication(i, p.offset, &p.data, out);
            }
            Frame::Text(json) => {
                // Our own subscribe replies give the starting positions (and
                // recovered publications); other protocol messages are shown
                // to the client.
                match Encoding::Json.decode_server(json) {
                    Ok(ServerMsg::Reply { id, reply }) => match reply {
                        Reply::Connect { .. } => return,
                        Reply::Subscribe {
                            epoch,
                            offset,
                            recovered,
                            publications,
                        } => {
                            if let Some(i) = id.checked_sub(FIRST_SUB) {
                                let i = i as usize;
                                self.render_subscribed(
                                    i,
                                    epoch,
                                    offset,
                                    recovered,
                                    publications,
                                    out,
                                );
                            }
                            return;
                        }
                        _ => {}
                    },
                    // One of the stream's channels could not be subscribed,
                    // for now: shown, then the stream ends (module docs).
                    Ok(ServerMsg::Error { id, code, .. }) => {
                        let ours = id
                            .checked_sub(FIRST_SUB)
                            .is_some_and(|i| (i as usize) < self.streams.len());
                        let retry = [ErrorCode::BrokerUnavailable, ErrorCode::Internal]
                            .iter()
                            .any(|c| c.code() == code);
                        self.ending |= ours && retry;
                    }
                    _ => {}
                }
                out.extend_from_slice(b"event: herald\n");
                data_lines(&String::from_utf8_lossy(json), out);
            }
            Frame::Ping => {
                out.extend_from_slice(b": ping\n\n");
                let node = self.session.node();
                self.session.client().touch(node.now());
            }
            // Spliced frames are JSON pushes: a stream gets publications
            // unrendered instead.
            Frame::Binary(_)
            | Frame::Pong(_)
            | Frame::Close(_)
            | Frame::Tracked(_)
            | Frame::Spliced(_)
            | Frame::DeflatedText(_)
            | Frame::DeflatedBinary(_) => {}
        }
    }
}

/// Writes `text` as `data:` lines and ends the event.
fn data_lines(text: &str, out: &mut BytesMut) {
    for line in text.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.trim_end_matches('\r').as_bytes());
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
}

impl HttpBody for SseStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let mut out = BytesMut::new();
        if !this.started {
            this.started = true;
            out.extend_from_slice(b"retry: 2000\n: herald\n\n");
        }
        let client = this.session.client().clone();
        let frames: Vec<Frame> = client.outbox.with_queue(|q| {
            let mut taken = Vec::new();
            let mut bytes = 0;
            while let Some(f) = q.frames.front() {
                if bytes > CHUNK {
                    break;
                }
                bytes += f.payload_len() + 64;
                taken.push(f.clone());
                q.advance(1, 0);
            }
            if taken.is_empty() {
                if let Some(c) = q.closing() {
                    let msg = ServerMsg::Push(Push::Disconnect {
                        code: c.code,
                        reason: c.reason().to_string(),
                    });
                    taken.push(Frame::Text(Encoding::Json.encode_server_bytes(&msg)));
                    this.done = true;
                } else {
                    q.set_waker(cx.waker());
                }
            }
            taken
        });
        for f in &frames {
            this.render(f, &mut out);
        }
        // A channel could not be subscribed: end with what was rendered (its
        // error event last), so that the client reconnects (module docs).
        this.done |= this.ending;
        if out.is_empty() {
            return if this.done {
                Poll::Ready(None)
            } else {
                Poll::Pending
            };
        }
        Poll::Ready(Some(Ok(http_body::Frame::data(out.freeze()))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent() {
        assert_eq!(percent_decode("a%3Ab"), "a:b");
        assert_eq!(percent_decode("a%3"), "a%3");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%é%"), "%é%");
    }

    #[test]
    fn event_ids_parse_or_are_ignored() {
        let p = |e: &str, o| Position {
            epoch: e.into(),
            offset: o,
        };
        assert_eq!(parse_event_id("abc-1:7", 1), Some(vec![p("abc-1", 7)]));
        assert_eq!(
            parse_event_id(" a:0,b:12 ", 2),
            Some(vec![p("a", 0), p("b", 12)])
        );
        for bad in [
            "a:1", "a:1,b", "a:x,b:1", "a:+1,b:2", "a:1,b:", "a:1;b:2", "",
        ] {
            assert_eq!(parse_event_id(bad, 2), None, "{bad:?}");
        }
        assert_eq!(parse_event_id("a:99999999999999999999", 1), None);
    }

    #[test]
    fn multi_line_data() {
        let mut out = BytesMut::new();
        data_lines("{\"a\":\n1}", &mut out);
        assert_eq!(&out[..], b"data: {\"a\":\ndata: 1}\n\n");
    }
}
