//! WebSocket transport: Herald's protocol on `/ws`, the shootout protocol on
//! `/shootout` and, for conformance tests only, an echo on `/echo`, all over
//! the shared connection driver with WebSocket framing.
//!
//! permessage-deflate (RFC 7692): when the handshake accepted it
//! ([`Deflate`], `upgrade.rs`), the [`WsWire`] inflates compressed messages
//! before the handler sees them (in `herald_ws`'s decoder, bounded by the
//! message limit). Outgoing, publication pushes to `/ws` clients come
//! compressed from the hub, once per publication and encoding for all of
//! them (`herald_core::Deflater`: without context takeover the bytes are the
//! same for everyone); everything else of at least the threshold (replies,
//! Pusher's rendered events, echoes, and pushes to the rare client that
//! limited the server's window) is compressed by this connection's writer as
//! it reaches it ([`Wire::prepare`], under the outbox's lock, once per frame).

pub mod echo;
pub mod shootout;
pub mod upgrade;

use crate::conn::{Incoming, Wire};
use bytes::Bytes;
use herald_core::outbox::{Closing, Frame};
use herald_ws::deflate::Agreement;
use herald_ws::{Decoder, Message, OpCode, Role};

/// The permessage-deflate settings (`--ws-deflate`, `--ws-deflate-threshold`,
/// `--ws-deflate-shootout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deflate {
    /// Accept a client's permessage-deflate offer on `/ws`, `/app/{key}`
    /// and `/echo` (default true: browsers all offer it).
    pub enabled: bool,
    /// Outgoing messages shorter than this many bytes go uncompressed
    /// (default 256: below it the bytes saved do not pay for the CPU).
    pub threshold: usize,
    /// Accept it on `/shootout` too (default false: the shootout's
    /// reference servers compress nothing, and its numbers compare with theirs).
    pub shootout: bool,
}

/// RFC 6455 framing (server role) for the connection driver.
#[derive(Debug)]
pub struct WsWire {
    /// Also holds the permessage-deflate terms, threshold included, in its
    /// padding ([`Decoder::deflate`]): a parked connection stays 96 bytes.
    decoder: Decoder,
}

impl WsWire {
    /// Server-side framing accepting messages up to `max_message` bytes,
    /// without compression.
    pub fn new(max_message: usize) -> WsWire {
        WsWire::with_deflate(max_message, None)
    }

    /// Server-side framing with permessage-deflate when `deflate` is
    /// `Some((agreement, threshold))`: compressed messages are inflated on
    /// the way in, and outgoing ones of at least `threshold` bytes that the
    /// agreement lets us compress are sent compressed.
    pub fn with_deflate(max_message: usize, deflate: Option<(Agreement, usize)>) -> WsWire {
        let mut decoder = Decoder::new(Role::Server, max_message);
        decoder.set_deflate(deflate.map(|(a, threshold)| a.compressing_from(threshold)));
        WsWire { decoder }
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
            Frame::DeflatedText(_) => OpCode::Text,
            Frame::DeflatedBinary(_) => OpCode::Binary,
        };
        let n = herald_ws::write_header(out, true, opcode, payload_len as u64, None);
        if matches!(frame, Frame::DeflatedText(_) | Frame::DeflatedBinary(_)) {
            out[0] |= herald_ws::RSV1;
        }
        n
    }

    fn prepare(&self, frame: &Frame) -> Option<Frame> {
        let agreement = self.decoder.deflate()?;
        let binary = match frame {
            Frame::Text(_) | Frame::Spliced(_) => false,
            Frame::Binary(_) => true,
            // Tracked frames stay as they are (their drop is a signal, and
            // only `/shootout` queues them); the rest are control frames,
            // already compressed, or never reach a WebSocket.
            _ => return None,
        };
        if !agreement.compresses(frame.payload_len()) {
            return None;
        }
        let mut out = Vec::new();
        herald_ws::deflate::compress_pieces(&frame.pieces(), &mut out);
        let out = Bytes::from(out);
        Some(if binary {
            Frame::DeflatedBinary(out)
        } else {
            Frame::DeflatedText(out)
        })
    }

    fn heartbeat_answer(&self, buf: &[u8]) -> Option<usize> {
        // A whole, masked pong (FIN, no RSV bits: `parse_header` checks the
        // control-frame rules); its payload, at most 125 bytes, is ignored as
        // the decoder ignores it.
        let h = herald_ws::parse_header(buf).ok()??;
        let end = h.header_len + usize::try_from(h.payload_len).ok()?;
        (h.opcode == OpCode::Pong && h.mask.is_some() && buf.len() >= end).then_some(end)
    }

    fn close_payload(&self, c: &Closing, out: &mut [u8; 125]) -> usize {
        out[..2].copy_from_slice(&c.code.to_be_bytes());
        let reason = c.reason();
        let n = reason.len().min(123);
        out[2..2 + n].copy_from_slice(&reason.as_bytes()[..n]);
        2 + n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn frame(opcode: OpCode, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
        let mut out = BytesMut::new();
        herald_ws::encode_frame(&mut out, opcode, payload, mask);
        out.to_vec()
    }

    /// What a parked connection reads as a heartbeat answer (a whole masked
    /// pong) is exactly what the decoder takes as one; a partial pong, an
    /// unmasked one, a ping, a message or a close is left for the decoder.
    #[test]
    fn heartbeat_answers_agree_with_the_decoder() {
        let w = WsWire::new(1 << 20);
        let mask = Some([1, 2, 3, 4]);
        for payload in [&b""[..], b"abc", &[7u8; 125]] {
            let pong = frame(OpCode::Pong, payload, mask);
            assert_eq!(w.heartbeat_answer(&pong), Some(pong.len()));
            let mut d = WsWire::new(1 << 20);
            let mut copy = pong.clone();
            assert!(matches!(
                d.decode(&mut copy),
                Ok(Some((n, Some(Incoming::Heartbeat)))) if n == pong.len()
            ));
            // Followed by anything: only the pong's own bytes.
            let mut two = pong.clone();
            two.extend(frame(OpCode::Text, b"x", mask));
            assert_eq!(w.heartbeat_answer(&two), Some(pong.len()));
            for cut in 0..pong.len() {
                assert_eq!(w.heartbeat_answer(&pong[..cut]), None, "cut at {cut}");
            }
        }
        let others = [
            frame(OpCode::Pong, b"", None),
            frame(OpCode::Ping, b"", mask),
            frame(OpCode::Text, b"", mask),
            frame(OpCode::Binary, b"\0\0", mask),
            frame(OpCode::Close, b"\x03\xe8", mask),
            vec![0x8a | 0x40, 0x80, 1, 2, 3, 4], // RSV1 on a control frame
            vec![0x0a, 0x80, 1, 2, 3, 4],        // a pong without FIN
            b"GET / HTTP/1.1\r\n".to_vec(),
        ];
        for other in others {
            assert_eq!(w.heartbeat_answer(&other), None, "{other:?}");
        }
    }
}
