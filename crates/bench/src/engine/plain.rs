//! The engine's raw TCP and HTTP connections: length-prefixed frames, and
//! HTTP/1.1 responses and SSE events (decoded by [`crate::http1`]), handed
//! to the scenario from the engine's read buffer without copying.

use std::mem;

use herald_ws::Message;

use super::{
    close_with, CloseReason, Conn, ConnId, Engine, Handler, HttpMsg, HttpState, Io, Kind, Phase,
    KEEP_CAPACITY,
};
use crate::http1;
use crate::BenchError;

impl Engine {
    /// Handles `rbuf[..end]` for raw TCP connection `id`: length-prefixed
    /// frames; a zero-length frame is the server's heartbeat and is answered
    /// with one. An incomplete trailing frame is kept in the connection.
    pub(super) fn process_tcp<H: Handler>(
        &mut self,
        id: ConnId,
        end: usize,
        handler: &mut H,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        let Engine { io, rbuf, .. } = self;
        let tag = io.tag(id);
        let mut pos = 0;
        while end - pos >= 4 && io.is_live(id) {
            let len = u32::from_be_bytes([rbuf[pos], rbuf[pos + 1], rbuf[pos + 2], rbuf[pos + 3]])
                as usize;
            if len == 0 {
                pos += 4;
                io.send_raw(id, &[0, 0, 0, 0]);
                continue;
            }
            if len > io.max_message {
                let why = CloseReason::Framing(format!(
                    "raw TCP frame of {len} bytes is larger than the limit"
                ));
                return close_with(io, id, handler, why);
            }
            if end - pos - 4 < len {
                break;
            }
            let msg = Message::Binary(&rbuf[pos + 4..pos + 4 + len]);
            pos += 4 + len;
            io.stats.msgs_in += 1;
            handler.on_message(io, tag, msg, now_ns)?;
        }
        keep_partial(io, id, &rbuf[pos..end]);
        Ok(())
    }

    /// Handles `rbuf[..end]` for HTTP connection `id`: complete responses go
    /// to the handler whole; an event stream goes event by event.
    pub(super) fn process_http<H: Handler>(
        &mut self,
        id: ConnId,
        end: usize,
        handler: &mut H,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        let Engine { io, rbuf, .. } = self;
        let tag = io.tag(id);
        let max = io.max_message;
        // The state leaves the slot while the handler runs (it may touch
        // any connection, this one included).
        let mut st = match io.conns.get_mut(id) {
            Some(Some(Conn {
                kind: Kind::Http(h),
                ..
            })) => HttpState {
                decoder: h.decoder.clone(),
                status: h.status,
                events: h.events,
                body: mem::take(&mut h.body),
            },
            _ => return Ok(()),
        };
        let mut pos = 0;
        let mut failure = None;
        while io.is_live(id) {
            let (n, ev) = match st.decoder.decode(&rbuf[pos..end]) {
                Ok(Some(found)) => found,
                Ok(None) => break,
                Err(e) => {
                    failure = Some(CloseReason::Framing(e.to_string()));
                    break;
                }
            };
            pos += n;
            match ev {
                http1::Event::Head {
                    status,
                    event_stream,
                } => {
                    st.status = status;
                    st.events = event_stream && status == 200;
                    st.body.clear();
                    if st.events {
                        handler.on_http(io, tag, HttpMsg::StreamStart, now_ns)?;
                    }
                }
                http1::Event::Complete(body) => {
                    io.stats.msgs_in += 1;
                    let msg = HttpMsg::Response {
                        status: st.status,
                        body,
                    };
                    handler.on_http(io, tag, msg, now_ns)?;
                }
                http1::Event::Data(data) if st.events => {
                    let r = http1::split_events(
                        &mut st.body,
                        data,
                        max,
                        |event| {
                            io.stats.msgs_in += 1;
                            handler.on_http(io, tag, HttpMsg::Event(event), now_ns)
                        },
                        || BenchError::Client(format!("connection {tag}: SSE event too large")),
                    );
                    r?;
                }
                http1::Event::Data(data) => {
                    if st.body.len() + data.len() > max {
                        failure = Some(CloseReason::Framing("response body too large".into()));
                        break;
                    }
                    st.body.extend_from_slice(data);
                }
                http1::Event::End if st.events => {
                    failure = Some(CloseReason::StreamEnded);
                    break;
                }
                http1::Event::End => {
                    io.stats.msgs_in += 1;
                    let msg = HttpMsg::Response {
                        status: st.status,
                        body: &st.body,
                    };
                    handler.on_http(io, tag, msg, now_ns)?;
                    st.body.clear();
                }
            }
        }
        if let Some(why) = failure {
            return close_with(io, id, handler, why);
        }
        if let Some(Some(Conn {
            kind: Kind::Http(h),
            phase,
            ..
        })) = io.conns.get_mut(id)
        {
            if !matches!(phase, Phase::Closed) {
                if st.body.capacity() > KEEP_CAPACITY && st.body.is_empty() {
                    st.body = Vec::new();
                }
                **h = st;
            }
        }
        keep_partial(io, id, &rbuf[pos..end]);
        Ok(())
    }
}

/// Keeps the unprocessed tail of a read in the connection (if still open).
pub(super) fn keep_partial(io: &mut Io, id: ConnId, rest: &[u8]) {
    let Some(Some(conn)) = io.conns.get_mut(id) else {
        return;
    };
    if matches!(conn.phase, Phase::Closed) {
        return;
    }
    if !rest.is_empty() {
        conn.partial.extend_from_slice(rest);
    } else if conn.partial.capacity() > KEEP_CAPACITY {
        conn.partial = Vec::new();
    }
}
