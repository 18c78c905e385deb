//! The raw TCP transport: Herald's binary encoding, each message preceded by its
//! length as a 4-byte big-endian integer — the "native binary socket" of the
//! Firebase benchmark (seed 000) for clients that need no browser compatibility.
//!
//! Same commands, session and limits as WebSocket; only the framing differs:
//! - a message longer than the configured maximum (a bad or hostile length
//!   prefix) ends the connection with a `disconnect` push, code 1009, before any
//!   of it is buffered;
//! - a zero-length frame is a heartbeat: the server sends one to a silent client
//!   (as WebSocket sends a ping), and any input — including a zero-length frame
//!   back — counts as the answer;
//! - the server ends a connection by sending a `disconnect` push (code and
//!   reason, as WebSocket close codes) and closing its write side.

use super::Drivers;
use crate::conn::{Connection, Incoming, Wire};
use bytes::BytesMut;
use herald_core::outbox::{Closing, Frame};
use herald_core::Session;
use herald_proto::{Encoding, Push, ServerMsg};
use tokio::net::TcpStream;

use herald_proto::framing;
pub use herald_proto::framing::PREFIX;

/// Length-prefixed framing for the connection driver.
#[derive(Debug)]
pub struct TcpWire {
    max_message: usize,
}

impl TcpWire {
    /// Framing accepting messages up to `max_message` bytes.
    pub fn new(max_message: usize) -> TcpWire {
        TcpWire { max_message }
    }
}

impl Wire for TcpWire {
    fn decode<'a>(
        &'a mut self,
        buf: &'a mut [u8],
    ) -> Result<Option<(usize, Option<Incoming<'a>>)>, u16> {
        match framing::decode_frame(buf, self.max_message) {
            Err(_) => Err(herald_proto::DisconnectCode::MessageTooBig.code()),
            Ok(None) => Ok(None),
            Ok(Some((used, []))) => Ok(Some((used, Some(Incoming::Heartbeat)))),
            Ok(Some((used, _))) => Ok(Some((
                used,
                Some(Incoming::Message {
                    // The wire wants the payload mutable (WebSocket unmasks in
                    // place); re-slice it from `buf`.
                    payload: &buf[PREFIX..used],
                    binary: true,
                }),
            ))),
        }
    }

    fn header(&self, frame: &Frame, payload_len: usize, out: &mut [u8; 14]) -> usize {
        let len = match frame {
            Frame::Ping => 0,
            _ => payload_len as u32,
        };
        out[..PREFIX].copy_from_slice(&len.to_be_bytes());
        PREFIX
    }

    fn heartbeat_answer(&self, buf: &[u8]) -> Option<usize> {
        // An empty frame: its length prefix, zero.
        (buf.get(..PREFIX)? == [0u8; PREFIX]).then_some(PREFIX)
    }

    fn close_payload(&self, c: &Closing, out: &mut [u8; 125]) -> usize {
        let mut buf = BytesMut::new();
        Encoding::Binary.encode_server(
            &ServerMsg::Push(Push::Disconnect {
                code: c.code,
                reason: c.reason().to_string(),
            }),
            &mut buf,
        );
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        n
    }
}

/// Serves one accepted raw TCP connection until it ends.
pub fn serve_tcp(stream: TcpStream, drivers: &Drivers, slot: Option<Box<crate::limits::IpSlot>>) {
    let node = drivers.node.clone();
    let client = node.new_client(Encoding::Binary);
    drivers.expect_connect(&client);
    let session = Session::new(node, client).with_transport(herald_core::metrics::Transport::Tcp);
    let wire = TcpWire::new(drivers.max_message_size);
    drivers.spawn::<TcpStream, _, _>(Connection::new(stream, session, wire, &[]).holding(slot));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing() {
        let mut w = TcpWire::new(8);
        let mut buf = [0u8, 0, 0, 3, b'a', b'b'];
        assert!(matches!(w.decode(&mut buf), Ok(None)));
        let mut buf = [0u8, 0, 0, 2, b'a', b'b', 9];
        match w.decode(&mut buf) {
            Ok(Some((
                6,
                Some(Incoming::Message {
                    payload,
                    binary: true,
                }),
            ))) => {
                assert_eq!(payload, b"ab")
            }
            other => panic!("{other:?}"),
        }
        let mut buf = [0u8, 0, 0, 0];
        assert!(matches!(
            w.decode(&mut buf),
            Ok(Some((4, Some(Incoming::Heartbeat))))
        ));
        let mut buf = [0xffu8, 0xff, 0xff, 0xff];
        assert_eq!(w.decode(&mut buf).err(), Some(1009));
    }

    /// What a parked connection reads as a heartbeat answer is exactly what
    /// the decoder takes as one, and nothing else.
    #[test]
    fn heartbeat_answers_agree_with_the_decoder() {
        let w = TcpWire::new(8);
        assert_eq!(w.heartbeat_answer(&[0, 0, 0, 0]), Some(4));
        assert_eq!(w.heartbeat_answer(&[0, 0, 0, 0, 0, 0, 0, 2, 9]), Some(4));
        for other in [&[][..], &[0, 0, 0], &[0, 0, 0, 1, 7], &[0, 0, 1, 0]] {
            assert_eq!(w.heartbeat_answer(other), None, "{other:?}");
        }
        let mut d = TcpWire::new(8);
        let mut buf = [0u8, 0, 0, 0];
        assert!(matches!(
            d.decode(&mut buf),
            Ok(Some((4, Some(Incoming::Heartbeat))))
        ));
    }
}
