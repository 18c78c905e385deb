//! Protocol errors and the close codes they map to (RFC 6455 §7.4).
//!
//! Every way a peer can break the framing rules is one variant of
//! [`ProtocolError`], and [`ProtocolError::close_code`] says which close code
//! to send before dropping the connection. The variants carry no heap data so
//! returning one costs nothing on the hot path.

/// Close codes this crate produces or that callers commonly need (§7.4.1 and
/// the IANA "WebSocket Close Code Number Registry").
pub mod close_code {
    /// 1000: the purpose of the connection has been fulfilled.
    pub const NORMAL: u16 = 1000;
    /// 1001: the endpoint is going away (server shutdown, page navigation).
    pub const GOING_AWAY: u16 = 1001;
    /// 1002: the peer broke the framing protocol.
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// 1003: a data type the endpoint cannot accept (e.g. binary when only text is understood).
    pub const UNSUPPORTED_DATA: u16 = 1003;
    /// 1005: reserved, never on the wire: "no status code was present".
    pub const NO_STATUS: u16 = 1005;
    /// 1006: reserved, never on the wire: "closed without a close frame".
    pub const ABNORMAL: u16 = 1006;
    /// 1007: message data inconsistent with its type (invalid UTF-8 in text).
    pub const INVALID_PAYLOAD: u16 = 1007;
    /// 1008: a message violates the endpoint's policy.
    pub const POLICY_VIOLATION: u16 = 1008;
    /// 1009: a message is too big to process.
    pub const MESSAGE_TOO_BIG: u16 = 1009;
    /// 1010: (client only) the server did not negotiate a required extension.
    pub const MANDATORY_EXTENSION: u16 = 1010;
    /// 1011: the server hit an unexpected condition.
    pub const INTERNAL_ERROR: u16 = 1011;
    /// 1012: the service is restarting.
    pub const SERVICE_RESTART: u16 = 1012;
    /// 1013: try again later (temporary overload).
    pub const TRY_AGAIN_LATER: u16 = 1013;
    /// 1014: a gateway or proxy got an invalid response upstream.
    pub const BAD_GATEWAY: u16 = 1014;

    /// True when `code` may appear in a close frame on the wire: 1000–1003,
    /// 1007–1014 (RFC 6455 and the IANA registry), or 3000–4999 (registered
    /// and private-use ranges). 1004 is reserved, 1005/1006/1015 must never be
    /// sent, and the rest of 0–2999 is unassigned.
    pub const fn is_valid(code: u16) -> bool {
        matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
    }
}

/// A violation of RFC 6455 by the peer. The connection cannot continue; send
/// a close frame with [`close_code`](ProtocolError::close_code) and drop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// An RSV bit is set that no negotiated extension defines: RSV2 or
    /// RSV3, or RSV1 without permessage-deflate.
    #[error("reserved bits set without a negotiated extension")]
    ReservedBits,
    /// RSV1 ("compressed") on a control frame (RFC 7692 §6.1).
    #[error("compressed control frame")]
    CompressedControl,
    /// RSV1 on a continuation frame: only a message's first frame carries
    /// it (RFC 7692 §6.1).
    #[error("RSV1 on a continuation frame")]
    CompressedContinuation,
    /// A compressed message whose payload is not valid DEFLATE data. RFC 7692
    /// names no code for it; we answer 1007 (RFC 6455 §7.4.1: data
    /// inconsistent with the message's type), as browsers and `ws` do.
    #[error("compressed message is not valid DEFLATE data")]
    InvalidCompressedData,
    /// A reserved opcode (3–7, 0xB–0xF).
    #[error("unknown opcode {0:#x}")]
    UnknownOpcode(u8),
    /// A close, ping or pong frame without FIN.
    #[error("fragmented control frame")]
    FragmentedControl,
    /// A control frame with more than 125 bytes of payload.
    #[error("control frame payload longer than 125 bytes")]
    ControlTooLong,
    /// A 64-bit payload length with its most significant bit set.
    #[error("64-bit payload length with the top bit set")]
    InvalidLength,
    /// A server received an unmasked frame (clients must mask, §5.1).
    #[error("unmasked frame from a client")]
    UnmaskedFrame,
    /// A client received a masked frame (servers must not mask, §5.1).
    #[error("masked frame from a server")]
    MaskedFrame,
    /// A continuation frame with no fragmented message in progress.
    #[error("continuation frame without a message to continue")]
    UnexpectedContinuation,
    /// A new text or binary frame while a fragmented message is in progress.
    #[error("new data frame while a fragmented message is in progress")]
    ExpectedContinuation,
    /// A close frame with a 1-byte payload (a code needs two).
    #[error("close frame with a 1-byte payload")]
    CloseTooShort,
    /// A close code that may not appear on the wire.
    #[error("invalid close code {0}")]
    InvalidCloseCode(u16),
    /// A text message that is not valid UTF-8.
    #[error("text message is not valid UTF-8")]
    InvalidUtf8,
    /// A close reason that is not valid UTF-8.
    #[error("close reason is not valid UTF-8")]
    InvalidCloseReason,
    /// A frame, or a fragmented message so far, longer than the configured maximum.
    #[error("message of {size} bytes exceeds the {max}-byte limit")]
    MessageTooBig {
        /// The size that would have been reached (declared frame length plus
        /// any bytes already reassembled), saturated at `u64::MAX`.
        size: u64,
        /// The configured maximum message size.
        max: usize,
    },
}

impl ProtocolError {
    /// The close code to send to the peer for this error: 1002 for broken
    /// framing, 1007 for invalid UTF-8 or
    /// invalid compressed data, 1009 for oversized messages.
    pub const fn close_code(&self) -> u16 {
        match self {
            ProtocolError::InvalidUtf8
            | ProtocolError::InvalidCloseReason
            | ProtocolError::InvalidCompressedData => close_code::INVALID_PAYLOAD,
            ProtocolError::MessageTooBig { .. } => close_code::MESSAGE_TOO_BIG,
            ProtocolError::ReservedBits
            | ProtocolError::CompressedControl
            | ProtocolError::CompressedContinuation
            | ProtocolError::UnknownOpcode(_)
            | ProtocolError::FragmentedControl
            | ProtocolError::ControlTooLong
            | ProtocolError::InvalidLength
            | ProtocolError::UnmaskedFrame
            | ProtocolError::MaskedFrame
            | ProtocolError::UnexpectedContinuation
            | ProtocolError::ExpectedContinuation
            | ProtocolError::CloseTooShort
            | ProtocolError::InvalidCloseCode(_) => close_code::PROTOCOL_ERROR,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_close_codes() {
        let valid: Vec<u16> = (0..=u16::MAX)
            .filter(|&c| close_code::is_valid(c))
            .collect();
        assert_eq!(valid.len(), 4 + 8 + 2000);
        for c in [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, u16::MAX] {
            assert!(!close_code::is_valid(c), "{c}");
        }
    }

    #[test]
    fn error_is_small() {
        assert!(std::mem::size_of::<ProtocolError>() <= 24);
    }
}
