//! The binary encoding (WebSocket binary frames, TCP length-prefixed frames).
//! See docs/protocol.md for the exact shapes.
use crate::{DecodeError, Request, ServerMsg};
use bytes::BytesMut;

/// Decodes one client command from a binary message.
pub fn decode_request(_buf: &[u8]) -> Result<Request, DecodeError> {
    Err(DecodeError::Malformed("binary codec not implemented yet".into()))
}

/// Encodes one client command in the binary encoding.
pub fn encode_request(_req: &Request, _out: &mut BytesMut) {}

/// Decodes one server message from a binary message.
pub fn decode_server(_buf: &[u8]) -> Result<ServerMsg, DecodeError> {
    Err(DecodeError::Malformed("binary codec not implemented yet".into()))
}

/// Encodes one server message in the binary encoding.
pub fn encode_server(_msg: &ServerMsg, _out: &mut BytesMut) {}
