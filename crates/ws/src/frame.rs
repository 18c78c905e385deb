//! Frame-level encoding and decoding (RFC 6455 §5.2): headers, masking, whole frames.
//!
//! Everything here works on caller-owned byte slices and never allocates, so
//! the server can parse a header straight out of its shared per-thread read
//! buffer and only copy bytes into a per-connection buffer when a frame is
//! split across reads. Header parsing validates everything that can be judged
//! from the header alone (reserved bits, opcode, control-frame rules, the
//! 64-bit length's top bit) so a bad peer is rejected before we wait for, or
//! buffer, its payload.

use bytes::{BufMut, BytesMut};

use crate::error::ProtocolError;

/// The largest payload a control frame (close, ping, pong) may carry (§5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// The RSV1 bit of a header's first byte: "compressed" under permessage-deflate.
pub const RSV1: u8 = 0x40;

/// The longest possible frame header: 2 fixed bytes, 8 length bytes, 4 mask bytes.
pub const MAX_HEADER_LEN: usize = 14;

/// A frame's opcode (§5.2). Only the six opcodes RFC 6455 defines; the
/// reserved ones are a protocol error: no extension Herald negotiates defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpCode {
    /// `0x0`: a continuation of a fragmented text or binary message.
    Continuation,
    /// `0x1`: a UTF-8 text message (or its first fragment).
    Text,
    /// `0x2`: a binary message (or its first fragment).
    Binary,
    /// `0x8`: the closing handshake.
    Close,
    /// `0x9`: a ping, to be answered with a pong carrying the same payload.
    Ping,
    /// `0xA`: a pong, answering a ping or sent unsolicited as a heartbeat.
    Pong,
}

impl OpCode {
    /// The opcode's 4-bit wire value.
    pub const fn as_u8(self) -> u8 {
        match self {
            OpCode::Continuation => 0x0,
            OpCode::Text => 0x1,
            OpCode::Binary => 0x2,
            OpCode::Close => 0x8,
            OpCode::Ping => 0x9,
            OpCode::Pong => 0xA,
        }
    }

    /// Parses a 4-bit wire value; `None` for the reserved opcodes.
    pub const fn from_u8(value: u8) -> Option<OpCode> {
        match value {
            0x0 => Some(OpCode::Continuation),
            0x1 => Some(OpCode::Text),
            0x2 => Some(OpCode::Binary),
            0x8 => Some(OpCode::Close),
            0x9 => Some(OpCode::Ping),
            0xA => Some(OpCode::Pong),
            _ => None,
        }
    }

    /// True for close, ping and pong, which may not be fragmented and carry
    /// at most 125 bytes.
    pub const fn is_control(self) -> bool {
        matches!(self, OpCode::Close | OpCode::Ping | OpCode::Pong)
    }
}

/// Which end of the connection this codec is. It decides the masking rule
/// for incoming frames (§5.1): a server rejects unmasked frames, a client
/// rejects masked ones. Outgoing masking is the caller's choice of `mask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Accepts connections; incoming frames MUST be masked.
    Server,
    /// Opens connections; incoming frames MUST NOT be masked.
    Client,
}

/// A parsed frame header. The payload follows at `header_len` and is
/// `payload_len` bytes long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// The FIN bit: this frame ends its message.
    pub fin: bool,
    /// The RSV1 bit, "per-message compressed" under permessage-deflate
    /// (RFC 7692 §6). Only [`parse_header_with`] with `allow_rsv1` lets it
    /// through; [`parse_header`] refuses it.
    pub rsv1: bool,
    /// The frame's opcode.
    pub opcode: OpCode,
    /// The masking key, when the MASK bit is set.
    pub mask: Option<[u8; 4]>,
    /// The declared payload length (never above `i64::MAX`, never above 125
    /// for control frames).
    pub payload_len: u64,
    /// How many bytes the header itself takes (2..=14).
    pub header_len: usize,
}

/// Parses a frame header from the front of `buf`.
///
/// `Ok(None)` means `buf` does not yet hold the whole header. Validates the
/// RSV bits (all must be 0; [`parse_header_with`] lets RSV1 through under
/// permessage-deflate), the opcode, the
/// control-frame rules (FIN set, payload ≤ 125) and the 64-bit length form
/// (top bit clear). Errors are reported as soon as the bytes that prove them
/// are present, even when the rest of the header is not. Non-minimal length
/// encodings are accepted (RFC 6455 obliges senders, not receivers). Masking
/// is not checked against a role here; [`Decoder`](crate::Decoder) does that.
pub fn parse_header(buf: &[u8]) -> Result<Option<FrameHeader>, ProtocolError> {
    parse_header_with(buf, false)
}

/// [`parse_header`], letting RSV1 through when `allow_rsv1` (permessage-deflate
/// was negotiated). RSV2 and RSV3 are always refused, and so is RSV1 on a
/// control frame ([`ProtocolError::CompressedControl`]); whether RSV1 may
/// appear on a data frame (a message's first frame only) is the
/// [`Decoder`](crate::Decoder)'s to judge.
pub fn parse_header_with(
    buf: &[u8],
    allow_rsv1: bool,
) -> Result<Option<FrameHeader>, ProtocolError> {
    let Some(&b0) = buf.first() else {
        return Ok(None);
    };
    let rsv1 = b0 & 0x40 != 0;
    if b0 & 0x30 != 0 || (rsv1 && !allow_rsv1) {
        return Err(ProtocolError::ReservedBits);
    }
    let fin = b0 & 0x80 != 0;
    let opcode = OpCode::from_u8(b0 & 0x0F).ok_or(ProtocolError::UnknownOpcode(b0 & 0x0F))?;
    if rsv1 && opcode.is_control() {
        return Err(ProtocolError::CompressedControl);
    }
    if opcode.is_control() && !fin {
        return Err(ProtocolError::FragmentedControl);
    }
    let Some(&b1) = buf.get(1) else {
        return Ok(None);
    };
    let masked = b1 & 0x80 != 0;
    let len7 = b1 & 0x7F;
    if opcode.is_control() && usize::from(len7) > MAX_CONTROL_PAYLOAD {
        return Err(ProtocolError::ControlTooLong);
    }
    let (payload_len, len_end) = match len7 {
        126 => match buf.get(2..4) {
            Some(&[a, b]) => (u64::from(u16::from_be_bytes([a, b])), 4),
            _ => return Ok(None),
        },
        127 => {
            // The top bit may be judged from the first length byte alone.
            if let Some(&first) = buf.get(2) {
                if first & 0x80 != 0 {
                    return Err(ProtocolError::InvalidLength);
                }
            }
            match buf.get(2..10) {
                Some(&[a, b, c, d, e, f, g, h]) => {
                    (u64::from_be_bytes([a, b, c, d, e, f, g, h]), 10)
                }
                _ => return Ok(None),
            }
        }
        n => (u64::from(n), 2),
    };
    let (mask, header_len) = if masked {
        match buf.get(len_end..len_end + 4) {
            Some(&[a, b, c, d]) => (Some([a, b, c, d]), len_end + 4),
            _ => return Ok(None),
        }
    } else {
        (None, len_end)
    };
    Ok(Some(FrameHeader {
        fin,
        rsv1,
        opcode,
        mask,
        payload_len,
        header_len,
    }))
}

/// Writes a frame header into `out` and returns its length (2..=14).
///
/// Uses the minimal length form, as §5.2 requires. The caller sends
/// `out[..len]` followed by the payload (masked with `mask` if given).
pub fn write_header(
    out: &mut [u8; 14],
    fin: bool,
    opcode: OpCode,
    payload_len: u64,
    mask: Option<[u8; 4]>,
) -> usize {
    out[0] = if fin { 0x80 } else { 0 } | opcode.as_u8();
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    let mut len = if payload_len < 126 {
        // Fits in 7 bits by the comparison above.
        out[1] = mask_bit | payload_len as u8;
        2
    } else if let Ok(short) = u16::try_from(payload_len) {
        out[1] = mask_bit | 126;
        out[2..4].copy_from_slice(&short.to_be_bytes());
        4
    } else {
        out[1] = mask_bit | 127;
        out[2..10].copy_from_slice(&payload_len.to_be_bytes());
        10
    };
    if let Some(key) = mask {
        out[len..len + 4].copy_from_slice(&key);
        len += 4;
    }
    len
}

/// XOR-masks (or unmasks: the operation is its own inverse) `buf` in place
/// with `mask` (§5.3).
///
/// `offset` is the position of `buf[0]` within the whole payload, so a
/// payload may be masked in pieces as it arrives. Works eight bytes at a time
/// on a mask rotated to `offset`; the workspace denies `unsafe`, so this uses
/// safe `chunks_exact_mut` + `u64` words, which LLVM turns into vector code.
pub fn apply_mask(buf: &mut [u8], mask: [u8; 4], offset: usize) {
    let shift = offset % 4;
    let rotated = [
        mask[shift],
        mask[(shift + 1) % 4],
        mask[(shift + 2) % 4],
        mask[(shift + 3) % 4],
    ];
    let word = u64::from_ne_bytes([
        rotated[0], rotated[1], rotated[2], rotated[3], rotated[0], rotated[1], rotated[2],
        rotated[3],
    ]);
    let mut chunks = buf.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(bytes) ^ word).to_ne_bytes());
    }
    // Every chunk was a multiple of 8 (hence of 4) bytes long, so the
    // remainder starts at mask phase 0 of `rotated`.
    for (byte, key) in chunks
        .into_remainder()
        .iter_mut()
        .zip(rotated.iter().cycle())
    {
        *byte ^= key;
    }
}

/// Appends a whole, final (FIN set) frame to `out`: the header, then
/// `payload`, masked when `mask` is `Some` (clients must mask, servers must not).
///
/// The caller keeps control frames within 125 bytes; a longer control payload
/// would produce a frame every peer rejects.
pub fn encode_frame(out: &mut BytesMut, opcode: OpCode, payload: &[u8], mask: Option<[u8; 4]>) {
    encode_fragment(out, true, opcode, payload, mask);
}

/// Appends one frame with an explicit FIN bit, for sending a message in
/// fragments: the first frame has the message's opcode, the later ones
/// [`OpCode::Continuation`], and only the last has `fin` set.
pub fn encode_fragment(
    out: &mut BytesMut,
    fin: bool,
    opcode: OpCode,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) {
    encode_fragment_rsv1(out, fin, false, opcode, payload, mask);
}

/// [`encode_fragment`] with the RSV1 bit: set it (`rsv1`) on the first frame
/// of a message compressed with permessage-deflate
/// ([`deflate::compress`](crate::deflate::compress)), never on later
/// fragments or control frames (RFC 7692 §6.1).
pub fn encode_fragment_rsv1(
    out: &mut BytesMut,
    fin: bool,
    rsv1: bool,
    opcode: OpCode,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) {
    debug_assert!(!opcode.is_control() || (fin && payload.len() <= MAX_CONTROL_PAYLOAD));
    let mut header = [0u8; MAX_HEADER_LEN];
    let header_len = write_header(&mut header, fin, opcode, payload.len() as u64, mask);
    if rsv1 {
        header[0] |= RSV1;
    }
    out.reserve(header_len + payload.len());
    out.put_slice(&header[..header_len]);
    let start = out.len();
    out.put_slice(payload);
    if let Some(key) = mask {
        apply_mask(&mut out[start..], key, 0);
    }
}

/// Appends a close frame whose payload is the 2-byte `code` and `reason`.
///
/// The reason is cut to at most 123 bytes, on a char boundary, so the payload
/// stays within the 125-byte control-frame limit and remains valid UTF-8.
pub fn encode_close(out: &mut BytesMut, code: u16, reason: &str, mask: Option<[u8; 4]>) {
    let reason = truncate_on_char_boundary(reason, MAX_CONTROL_PAYLOAD - 2);
    let mut payload = [0u8; MAX_CONTROL_PAYLOAD];
    payload[..2].copy_from_slice(&code.to_be_bytes());
    payload[2..2 + reason.len()].copy_from_slice(reason.as_bytes());
    encode_frame(out, OpCode::Close, &payload[..2 + reason.len()], mask);
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a char boundary.
fn truncate_on_char_boundary(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_round_trip() {
        for v in 0u8..16 {
            match OpCode::from_u8(v) {
                Some(op) => assert_eq!(op.as_u8(), v),
                None => assert!(matches!(v, 3..=7 | 0xB..=0xF)),
            }
        }
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let s = "é".repeat(100); // 200 bytes, 2 per char
        let t = truncate_on_char_boundary(&s, 123);
        assert_eq!(t.len(), 122);
        assert_eq!(truncate_on_char_boundary("abc", 123), "abc");
    }

    #[test]
    fn mask_matches_naive_for_all_lengths_and_offsets() {
        let mask = [0x12, 0x34, 0x56, 0x78];
        for len in 0..40 {
            for offset in 0..8 {
                let original: Vec<u8> = (0..len as u8).collect();
                let mut fast = original.clone();
                apply_mask(&mut fast, mask, offset);
                let naive: Vec<u8> = original
                    .iter()
                    .enumerate()
                    .map(|(i, b)| b ^ mask[(i + offset) % 4])
                    .collect();
                assert_eq!(fast, naive, "len {len} offset {offset}");
            }
        }
    }

    #[test]
    fn header_lengths() {
        let mut h = [0u8; 14];
        assert_eq!(write_header(&mut h, true, OpCode::Binary, 125, None), 2);
        assert_eq!(write_header(&mut h, true, OpCode::Binary, 126, None), 4);
        assert_eq!(write_header(&mut h, true, OpCode::Binary, 65535, None), 4);
        assert_eq!(write_header(&mut h, true, OpCode::Binary, 65536, None), 10);
        assert_eq!(
            write_header(&mut h, true, OpCode::Binary, 65536, Some([1, 2, 3, 4])),
            14
        );
        assert_eq!(&h[10..14], &[1, 2, 3, 4]);
    }
}
