//! permessage-deflate (RFC 7692): negotiating it and compressing or
//! inflating one message. No I/O, like the rest of the crate.
//!
//! Why this shape: Herald always answers
//! `permessage-deflate; server_no_context_takeover; client_no_context_takeover`.
//! Without context takeover every message is compressed on its own, so a
//! connection keeps no compression window (tens of kilobytes with zlib's
//! defaults) while it is idle, and the bytes of a compressed message do not
//! depend on the connection: a server can compress a publication once and
//! send the result to every subscriber that negotiated the extension.
//!
//! The compressor and the inflater are reused per thread (a thread-local
//! each, reset between messages), not owned per connection: a connection
//! costs nothing more for having negotiated the extension, and a thread
//! pays for one of each the first time it needs it. Inflating is bounded by
//! the caller's maximum message size, so a small "deflate bomb" cannot make
//! us allocate more than that (close code 1009).
//!
//! Windows: the pure-Rust backend (`miniz_oxide`) always compresses with a
//! 32 KiB window. An offer that limits the server's window
//! (`server_max_window_bits=N`, N < 15) is still accepted, because without
//! context takeover a message of at most 2^N bytes cannot refer further back
//! than 2^N: such a connection compresses only messages that short
//! ([`Agreement::compresses`]) and sends longer ones uncompressed, which
//! RFC 7692 allows message by message. The client's window may be
//! anything, since inflating with a 32 KiB window reads streams made with
//! any smaller one.

use std::cell::RefCell;
use std::num::NonZeroU8;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use crate::error::ProtocolError;

/// The extension's registered name.
pub const EXTENSION: &str = "permessage-deflate";

/// The `Sec-WebSocket-Extensions` value Herald answers with when it accepts
/// an offer that does not limit the server's window: no context takeover in
/// either direction (see the module docs).
pub const RESPONSE: &str =
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover";

/// The answers to offers limiting the server's window to 8..=14 bits.
const LIMITED: [&str; 7] = [
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=8",
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=9",
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10",
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=11",
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=12",
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=13",
    "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=14",
];

/// 15 window bits, the most RFC 7692 allows (32 KiB).
const FULL_WINDOW: NonZeroU8 = match NonZeroU8::new(15) {
    Some(v) => v,
    None => panic!("15 is not zero"),
};

/// An accepted permessage-deflate offer, and the sender's own threshold:
/// what the server answers and which outgoing messages it compresses.
///
/// 3 bytes, alignment 1, and `Option<Agreement>` too (the window bits are
/// never zero), so that a [`Decoder`](crate::Decoder) holds it in its
/// padding and a connection costs no more for having negotiated the
/// extension (the server's idle connection size is measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreement {
    /// The largest LZ77 window the client lets the server use, 8..=15
    /// (`server_max_window_bits`, 15 when not given).
    server_window_bits: NonZeroU8,
    /// Messages shorter than this (little-endian `u16`) are sent
    /// uncompressed ([`Agreement::compressing_from`]); 0 by default.
    compress_from: [u8; 2],
}

impl Agreement {
    /// The agreement for an offer without `server_max_window_bits`,
    /// compressing messages of any length.
    pub const DEFAULT: Agreement = Agreement {
        server_window_bits: FULL_WINDOW,
        compress_from: [0, 0],
    };

    /// The server's window in bits, 8..=15.
    pub fn server_window_bits(&self) -> u8 {
        self.server_window_bits.get()
    }

    /// This agreement, sending messages shorter than `threshold` bytes
    /// uncompressed (saturated at 65535; the caller bounds it).
    #[must_use]
    pub fn compressing_from(self, threshold: usize) -> Agreement {
        let t = u16::try_from(threshold).unwrap_or(u16::MAX);
        Agreement {
            compress_from: t.to_le_bytes(),
            ..self
        }
    }

    /// The `Sec-WebSocket-Extensions` answer: [`RESPONSE`], plus
    /// `server_max_window_bits` echoed when the offer limited it.
    pub fn response(&self) -> &'static str {
        match self.server_window_bits.get() {
            b @ 8..=14 => LIMITED[usize::from(b - 8)],
            _ => RESPONSE,
        }
    }

    /// True when an outgoing message of `len` bytes is to be compressed:
    /// at least the threshold long and, with a window below 15 bits, no
    /// longer than the window (see the module docs).
    pub fn compresses(&self, len: usize) -> bool {
        let bits = self.server_window_bits.get();
        len >= usize::from(u16::from_le_bytes(self.compress_from))
            && (bits >= 15 || len <= 1usize << bits)
    }
}

/// The four bytes a sync flush ends with; stripped from every compressed
/// message and put back before inflating (RFC 7692 §7.2.1, §7.2.2).
pub const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// The compression level: zlib's default. Each publication is compressed
/// once for all its subscribers, so ratio matters more than the CPU of one
/// compression.
const LEVEL: u32 = 6;

/// The first of the comma-separated offers in a `Sec-WebSocket-Extensions`
/// header `value` that is a `permessage-deflate` offer Herald accepts (RFC
/// 7692 §5, §7.1), as an [`Agreement`]. An offer is declined when a
/// parameter is unknown, repeated or has an invalid value (§7: the server
/// then tries the next one); other extensions are ignored.
pub fn negotiate(value: &[u8]) -> Option<Agreement> {
    value.split(|&b| b == b',').find_map(judge_offer)
}

/// True when [`negotiate`] accepts one of the offers in `value`.
pub fn accepts_offer(value: &[u8]) -> bool {
    negotiate(value).is_some()
}

/// Judges one offer: `permessage-deflate` followed by `;`-separated parameters.
fn judge_offer(offer: &[u8]) -> Option<Agreement> {
    let mut parts = offer.split(|&b| b == b';');
    let name = parts.next().unwrap_or_default().trim_ascii();
    if !name.eq_ignore_ascii_case(EXTENSION.as_bytes()) {
        return None;
    }
    let mut agreement = Agreement::DEFAULT;
    // Each known parameter at most once (§7: a repeated one declines the offer).
    let mut seen = [false; 4];
    for param in parts {
        let (key, value) = match param.iter().position(|&b| b == b'=') {
            Some(i) => (
                param[..i].trim_ascii(),
                Some(unquote(param[i + 1..].trim_ascii())),
            ),
            None => (param.trim_ascii(), None),
        };
        let index = match key {
            k if k.eq_ignore_ascii_case(b"server_no_context_takeover") => 0,
            k if k.eq_ignore_ascii_case(b"client_no_context_takeover") => 1,
            k if k.eq_ignore_ascii_case(b"server_max_window_bits") => 2,
            k if k.eq_ignore_ascii_case(b"client_max_window_bits") => 3,
            _ => return None,
        };
        if std::mem::replace(&mut seen[index], true) {
            return None;
        }
        let ok = match (index, value) {
            // The two flags take no value (§7.1.1).
            (0 | 1, None) => true,
            (0 | 1, Some(_)) => false,
            // The server's window: a value is required (§7.1.2.1).
            (2, Some(v)) => match window_bits(v) {
                Some(bits) => match NonZeroU8::new(bits) {
                    Some(bits) => {
                        agreement.server_window_bits = bits;
                        true
                    }
                    None => false,
                },
                None => false,
            },
            (2, None) => false,
            // The client's window: optional value, 8..=15 (§7.1.2.2).
            (_, None) => true,
            (_, Some(v)) => window_bits(v).is_some(),
        };
        if !ok {
            return None;
        }
    }
    Some(agreement)
}

/// A parameter value with its quotes removed (RFC 6455 §9.1 allows a
/// quoted-string whose content is a token); `None` for an unterminated quote.
fn unquote(value: &[u8]) -> Option<&[u8]> {
    match value {
        [b'"', inner @ .., b'"'] => Some(inner),
        [b'"', ..] => None,
        v => Some(v),
    }
}

/// A window-bits value, 8 to 15, in decimal without leading zeros (§7.1.2).
fn window_bits(value: Option<&[u8]>) -> Option<u8> {
    match value? {
        [d @ b'8'..=b'9'] => Some(d - b'0'),
        [b'1', d @ b'0'..=b'5'] => Some(10 + d - b'0'),
        _ => None,
    }
}

thread_local! {
    /// This thread's compressor, reset after each message.
    static COMPRESS: RefCell<Option<Compress>> = const { RefCell::new(None) };
    /// This thread's inflater, reset before each message.
    static INFLATE: RefCell<Option<Decompress>> = const { RefCell::new(None) };
}

/// Appends `payload` compressed as one permessage-deflate message to `out`:
/// raw DEFLATE, sync-flushed, without the trailing `00 00 ff ff`
/// (§7.2.1). The result is the payload of a frame sent with RSV1 set.
/// Independent of any earlier message (no context takeover).
pub fn compress(payload: &[u8], out: &mut Vec<u8>) {
    compress_pieces(&[payload], out);
}

/// [`compress`] for a message given in pieces (joined in order), such as
/// a spliced JSON push, without joining them first.
pub fn compress_pieces(pieces: &[&[u8]], out: &mut Vec<u8>) {
    COMPRESS.with_borrow_mut(|slot| {
        let c = slot.get_or_insert_with(|| Compress::new(Compression::new(LEVEL), false));
        c.reset();
        let start = out.len();
        let total: usize = pieces.iter().map(|p| p.len()).sum();
        out.reserve(total / 2 + 64);
        // Errors cannot happen for in-memory compression with a valid state;
        // on one, stop feeding rather than loop.
        for piece in pieces {
            let base = c.total_in();
            while ((c.total_in() - base) as usize) < piece.len() {
                let taken = (c.total_in() - base) as usize;
                if out.capacity() == out.len() {
                    out.reserve(out.len().max(64));
                }
                if c.compress_vec(&piece[taken..], out, FlushCompress::None)
                    .is_err()
                {
                    break;
                }
            }
        }
        // A sync flush is complete once it ends in `00 00 ff ff` and left
        // part of the space it was given unused. Both are needed: a call may
        // only write out what an earlier one left pending, with room to
        // spare, and return before flushing the rest (seen with miniz_oxide
        // on Autobahn case 12.2.9: 243 bytes of a 64 KiB message lost).
        // Bounded, in case a call ever stopped making progress.
        for _ in 0..total / 256 + 64 {
            if out.capacity() == out.len() {
                out.reserve(out.len().max(64));
            }
            if c.compress_vec(&[], out, FlushCompress::Sync).is_err() {
                break;
            }
            if out.len() < out.capacity() && out[start..].ends_with(&TAIL) {
                break;
            }
        }
        if out[start..].ends_with(&TAIL) {
            out.truncate(out.len() - TAIL.len());
        }
    });
}

/// Inflates a permessage-deflate message whose compressed payload is
/// `compressed` (the frames' payloads joined, without the tail), appending
/// at most `max` bytes to `out`.
///
/// Errors: [`ProtocolError::MessageTooBig`] once more than `max` bytes would
/// come out (close 1009: a deflate bomb is stopped there, having cost at
/// most `max` bytes); [`ProtocolError::InvalidCompressedData`] for data that
/// is not DEFLATE (close 1007).
pub fn inflate(compressed: &[u8], max: usize, out: &mut Vec<u8>) -> Result<(), ProtocolError> {
    INFLATE.with_borrow_mut(|slot| {
        let d = slot.get_or_insert_with(|| Decompress::new(false));
        d.reset(false);
        let start = out.len();
        for input in [compressed, &TAIL[..]] {
            let mut taken = 0;
            loop {
                let produced = out.len() - start;
                // Room for one byte past the limit, to tell "exactly max"
                // from "more than max"; `reserve_exact` so that the inflater
                // can never write further than that.
                let room = (max - produced.min(max)).saturating_add(1);
                if out.capacity() == out.len() {
                    out.reserve_exact(room.min(32 * 1024));
                }
                let before_in = d.total_in();
                let before_out = out.len();
                let status = d
                    .decompress_vec(&input[taken..], out, FlushDecompress::Sync)
                    .map_err(|_| ProtocolError::InvalidCompressedData)?;
                taken += (d.total_in() - before_in) as usize;
                let size = out.len() - start;
                if size > max {
                    out.truncate(start);
                    return Err(ProtocolError::MessageTooBig {
                        size: size as u64,
                        max,
                    });
                }
                let progressed = d.total_in() != before_in || out.len() != before_out;
                if matches!(status, Status::StreamEnd) {
                    // A final block ended the stream: whatever follows is
                    // not part of the message.
                    return Ok(());
                }
                if taken == input.len() && out.len() < out.capacity() {
                    break;
                }
                if !progressed && out.len() < out.capacity() {
                    break;
                }
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_bits_values() {
        assert_eq!(window_bits(Some(b"8")), Some(8));
        assert_eq!(window_bits(Some(b"15")), Some(15));
        for bad in [&b"7"[..], b"16", b"015", b"", b"1", b"abc", b"9 "] {
            assert_eq!(window_bits(Some(bad)), None, "{bad:?}");
        }
        assert_eq!(window_bits(None), None);
    }
}
