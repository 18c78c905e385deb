//! The JSON encoding (WebSocket text frames, SSE `data:`, long-poll bodies).
//! See docs/protocol.md for the exact shapes.
use crate::{DecodeError, Request, ServerMsg};
use bytes::BytesMut;

/// Decodes one client command from a JSON object.
pub fn decode_request(_buf: &[u8]) -> Result<Request, DecodeError> {
    Err(DecodeError::Malformed("json codec not implemented yet".into()))
}

/// Encodes one client command in canonical JSON.
pub fn encode_request(_req: &Request, _out: &mut BytesMut) {}

/// Decodes one server message from a JSON object.
pub fn decode_server(_buf: &[u8]) -> Result<ServerMsg, DecodeError> {
    Err(DecodeError::Malformed("json codec not implemented yet".into()))
}

/// Encodes one server message in canonical JSON.
pub fn encode_server(_msg: &ServerMsg, _out: &mut BytesMut) {}
