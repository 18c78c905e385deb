//! WebSocket transport: Herald's protocol on `/ws`, the shootout protocol on
//! `/shootout` and, for conformance tests only, an echo on `/echo`, all over
//! the shared connection driver with WebSocket framing.

pub mod echo;
pub mod shootout;
pub mod upgrade;

use crate::conn::{Incoming, Wire};
use herald_core::outbox::{Closing, Frame};
use herald_ws::{Decoder, Message, OpCode, Role};

/// RFC 6455 framing (server role) for the connection driver.
#[derive(Debug)]
pub struct WsWire {
    decoder: Decoder,
}

impl WsWire {
    /// Server-side framing accepting messages up to `max_message` bytes.
    pub fn new(max_message: usize) -> WsWire {
        WsWire {
            decoder: Decoder::new(Role::Server, max_message),
        }
    }
}

impl Wire for WsWire {
    fn decode<'a>(
        &'a mut self,
        buf: &'a mut [u8],
    ) -> Result<Option<(usize, Option<Incoming<'a>>)>, u16> {
        match self.decoder.decode(buf) {
            Ok(None) => Ok(None),
            Ok(Some((n, msg))) => Ok(Some((
                n,
                msg.map(|m| match m {
                    Message::Text(p) => Incoming::Message {
                        payload: p,
                        binary: false,
                    },
                    Message::Binary(p) => Incoming::Message {
                        payload: p,
                        binary: true,
                    },
                    Message::Ping(p) => Incoming::Ping(p),
                    Message::Pong(_) => Incoming::Heartbeat,
                    Message::Close(code, _) => Incoming::Close(code),
                }),
            ))),
            Err(e) => {
                tracing::debug!(error = %e, "websocket protocol error");
                Err(e.close_code())
            }
        }
    }

    fn release(&mut self) {
        if self.decoder.holds_buffer() && !self.decoder.in_fragment() {
            self.decoder.release_buffer();
        }
    }

    fn header(&self, frame: &Frame, payload_len: usize, out: &mut [u8; 14]) -> usize {
        let opcode = match frame {
            // Unrendered publications only go to SSE clients; text if ever here.
            Frame::Text(_) | Frame::Spliced(_) | Frame::Publication(_) => OpCode::Text,
            Frame::Binary(_) => OpCode::Binary,
            Frame::Tracked(t) if t.is_binary() => OpCode::Binary,
            Frame::Tracked(_) => OpCode::Text,
            Frame::Ping => OpCode::Ping,
            Frame::Pong(_) => OpCode::Pong,
            Frame::Close(_) => OpCode::Close,
        };
        herald_ws::write_header(out, true, opcode, payload_len as u64, None)
    }

    fn close_payload(&self, c: &Closing, out: &mut [u8; 125]) -> usize {
        out[..2].copy_from_slice(&c.code.to_be_bytes());
        let reason = c.reason();
        let n = reason.len().min(123);
        out[2..2 + n].copy_from_slice(&reason.as_bytes()[..n]);
        2 + n
    }
}
