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
//! Protocol messages that are not publications (an error, the final
//! `disconnect`) arrive as `event: herald` with the JSON message as data. A
//! comment line (`: ping`) is sent as a heartbeat to a stream that has carried
//! nothing for `ping_interval` seconds, which keeps proxies from closing it.
//! SSE clients publish through `POST /api/publish`.
//!
//! The stream is an ordinary session whose client receives publications
//! unrendered ([`Frame::Publication`]), because each stream renders its own ids;
//! all queued events are rendered into one chunk per write.

use crate::api::{error, Body};
use crate::server::Shared;
use bytes::{BufMut, Bytes, BytesMut};
use herald_core::outbox::Frame;
use herald_core::{channel, Session};
use herald_proto::{Command, Encoding, ErrorCode, Push, Reply, Request, ServerMsg};
use http::{Response, StatusCode};
use http_body::Body as HttpBody;
use http_body_util::BodyExt;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Most bytes rendered into one chunk.
const CHUNK: usize = 256 * 1024;
/// Id of the first subscribe command; channel `i` is subscribed with id
/// `FIRST_SUB + i`.
const FIRST_SUB: u32 = 2;

/// Opens an event stream for the request's `channel` parameters.
pub fn open(query: Option<&str>, shared: &Arc<Shared>) -> Response<Body> {
    let channels: Vec<String> = query
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.strip_prefix("channel="))
        .map(percent_decode)
        .collect();
    if channels.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            "give at least one ?channel=",
        );
    }
    if channels.len() > shared.config.node.max_subscriptions {
        return error(
            StatusCode::BAD_REQUEST,
            ErrorCode::LimitExceeded,
            "too many channels for one stream",
        );
    }
    for c in &channels {
        if channel::validate(c).is_err() {
            return error(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidChannel,
                &format!("invalid channel name {c:?}"),
            );
        }
    }
    let node = shared.node.clone();
    let client = node.new_raw_client();
    let mut session = Session::new(node, client);
    session.handle(Request {
        id: 1,
        cmd: Command::Connect {
            token: None,
            name: Some("sse".into()),
        },
    });
    for (i, c) in channels.iter().enumerate() {
        session.handle(Request {
            id: FIRST_SUB + i as u32,
            cmd: Command::Subscribe {
                channel: c.clone(),
                recover: None,
                join_leave: false,
            },
        });
    }
    let stream = SseStream {
        session,
        positions: channels
            .into_iter()
            .map(|c| (c, String::new(), 0))
            .collect(),
        started: false,
        done: false,
    };
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

/// The body of one event stream.
struct SseStream {
    session: Session,
    /// (channel, epoch, offset) in the order of the request's parameters.
    positions: Vec<(String, String, u64)>,
    started: bool,
    done: bool,
}

impl SseStream {
    fn render_id(&self, out: &mut BytesMut) {
        out.extend_from_slice(b"id: ");
        for (i, (_, epoch, offset)) in self.positions.iter().enumerate() {
            if i > 0 {
                out.put_u8(b',');
            }
            out.extend_from_slice(epoch.as_bytes());
            out.put_u8(b':');
            out.extend_from_slice(offset.to_string().as_bytes());
        }
        out.put_u8(b'\n');
    }

    fn render(&mut self, frame: &Frame, out: &mut BytesMut) {
        match frame {
            Frame::Publication(p) => {
                let multi = self.positions.len() > 1;
                if let Some(pos) = self
                    .positions
                    .iter_mut()
                    .find(|(c, _, _)| **c == *p.channel)
                {
                    pos.2 = p.offset;
                }
                self.render_id(out);
                let (text, b64) = match std::str::from_utf8(&p.data) {
                    Ok(t) => (std::borrow::Cow::Borrowed(t), false),
                    Err(_) => {
                        use base64::Engine;
                        let enc = base64::engine::general_purpose::STANDARD.encode(&p.data);
                        (std::borrow::Cow::Owned(enc), true)
                    }
                };
                match (multi, b64) {
                    (false, false) => {}
                    (false, true) => out.extend_from_slice(b"event: b64\n"),
                    (true, _) => {
                        out.extend_from_slice(b"event: ");
                        out.extend_from_slice(p.channel.as_bytes());
                        if b64 {
                            out.extend_from_slice(b"#b64");
                        }
                        out.put_u8(b'\n');
                    }
                }
                data_lines(&text, out);
            }
            Frame::Text(json) => {
                // Our own subscribe replies give the starting positions;
                // other protocol messages are shown to the client.
                if let Ok(ServerMsg::Reply { id, reply }) = Encoding::Json.decode_server(json) {
                    match reply {
                        Reply::Connect { .. } => return,
                        Reply::Subscribe { epoch, offset, .. } => {
                            if let Some(pos) = id
                                .checked_sub(FIRST_SUB)
                                .and_then(|i| self.positions.get_mut(i as usize))
                            {
                                pos.1 = epoch;
                                pos.2 = offset;
                            }
                            return;
                        }
                        _ => {}
                    }
                }
                out.extend_from_slice(b"event: herald\n");
                data_lines(&String::from_utf8_lossy(json), out);
            }
            Frame::Ping => {
                out.extend_from_slice(b": ping\n\n");
                let node = self.session.node();
                self.session.client().touch(node.now());
            }
            Frame::Binary(_) | Frame::Pong(_) | Frame::Close(_) => {}
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
                bytes += f.payload().len() + 64;
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
    fn multi_line_data() {
        let mut out = BytesMut::new();
        data_lines("{\"a\":\n1}", &mut out);
        assert_eq!(&out[..], b"data: {\"a\":\ndata: 1}\n\n");
    }
}
