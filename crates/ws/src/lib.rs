//! A sans-I/O WebSocket (RFC 6455) codec and handshake for Herald.
//!
//! Why it exists: Herald needs one WebSocket implementation shared by the
//! server, the load generator (`herald bench`, client role), the criterion
//! benches, the integration tests and the fuzz targets, so that they all
//! exercise exactly the same framing code. It does no I/O at all: decoding
//! takes a byte buffer the caller owns and returns borrowed messages, encoding
//! appends to a `BytesMut` or a `Vec`. That lets the server read every socket
//! into one shared per-thread buffer and keep no per-connection buffer while a
//! connection is idle; a [`Decoder`] is 24 bytes and allocates only while a
//! fragmented message is being reassembled.
//!
//! Why not tungstenite: it owns the socket and a read buffer per connection,
//! 128 KiB by default and zero-filled, so fully resident: about 136 KiB per
//! idle connection measured, against well under 1 KiB for the design above
//! (see `bench/RESULTS.md`, "Figures measured on this machine"). Shrinking
//! its buffers helps, but the buffer still belongs to the connection rather
//! than to the thread.
//!
//! Map:
//! - [`frame`]: headers, masking, encoding whole frames.
//! - [`decoder`]: frames in, messages out; fragmentation, limits, UTF-8.
//! - [`handshake`]: the HTTP upgrade, server and client side.
//! - [`deflate`]: permessage-deflate (RFC 7692): the offer, compressing and
//!   inflating a message.
//! - [`error`]: [`ProtocolError`] and the close codes it maps to.
//!
//! The one extension is permessage-deflate, always without context takeover
//! either way, so that a connection keeps no compression state and a message
//! compressed once can go to every connection that negotiated it (see
//! [`deflate`]). It is off in a [`Decoder`] until the caller turns it on
//! after a handshake that accepted it; until then, as for RSV2 and RSV3, a
//! frame with RSV1 set is refused.

pub mod decoder;
pub mod deflate;
pub mod error;
pub mod frame;
pub mod fuzzing;
pub mod handshake;

pub use decoder::{Decoder, Message};
pub use error::{close_code, ProtocolError};
pub use frame::{
    apply_mask, encode_close, encode_fragment, encode_fragment_rsv1, encode_frame, parse_header,
    parse_header_with, write_header, FrameHeader, OpCode, Role, MAX_CONTROL_PAYLOAD,
    MAX_HEADER_LEN, RSV1,
};
pub use handshake::{
    accept_key, generate_key, parse_client_response, random_mask, select_protocol,
    validate_upgrade, write_accept, write_accept_extensions, write_client_request, HandshakeError,
    UpgradeRequest,
};
