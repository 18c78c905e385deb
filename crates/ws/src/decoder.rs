//! The message decoder: frames in, whole messages out (RFC 6455 §5.4–§5.6, §8.1).
//!
//! [`Decoder::decode`] takes a caller-owned buffer, parses at most one frame
//! from its front, unmasks it in place and hands back borrowed slices, so an
//! unfragmented message is never copied. Only a fragmented message needs
//! memory of its own: the decoder boxes a reassembly buffer when the first
//! fragment arrives and frees it once the message has been handed out. An idle
//! decoder is therefore one null pointer, the size limit and the role (24
//! bytes on 64-bit targets), which matters for a server holding tens of
//! thousands of mostly idle connections (see `bench/RESULTS.md`, "Figures
//! measured on this machine").
//!
//! Limits are enforced from the frame header, before the payload has arrived,
//! so a peer cannot make us buffer more than `max_message` bytes by declaring
//! a huge frame and trickling it in. Text is validated as UTF-8 incrementally,
//! fragment by fragment, and within a frame as its bytes arrive, so an invalid
//! sequence fails fast instead of at the end of a long message (Autobahn
//! cases 6.4.x send the bad bytes and then wait for the close). The part of
//! an incomplete frame already found valid is remembered (a `u32` in the
//! decoder's padding), so a large frame arriving in many reads is checked in
//! one pass, not once per read; the check unmasks a copy on the stack and
//! leaves the caller's bytes as they were.
//!
//! With permessage-deflate negotiated ([`Decoder::set_deflate`]), a message
//! whose first frame has RSV1 set is compressed: its frames are joined as
//! they come (the size limit then bounds the compressed bytes), and once the
//! last one is in, the message is inflated into the decoder's reassembly
//! buffer, bounded by the same limit (close 1009 beyond it), and checked as
//! UTF-8 if it is text. A compressed message is therefore always handed out
//! from the decoder, like a fragmented one. RSV1 anywhere else (a
//! continuation, a control frame, or when the extension is off) is 1002.

use crate::deflate::Agreement;
use crate::error::close_code;
use crate::frame::{apply_mask, parse_header_with, OpCode, Role};

/// Re-exported here too: it is the error type of [`Decoder::decode`].
pub use crate::error::ProtocolError;

/// A complete message, or a control frame, borrowed from the decoder's input
/// buffer (or, for a reassembled fragmented message, from the decoder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    /// A text message, already checked to be valid UTF-8. Handed out as
    /// bytes because Herald's JSON parser takes bytes.
    Text(&'a [u8]),
    /// A binary message.
    Binary(&'a [u8]),
    /// A ping; answer it with a pong carrying the same payload.
    Ping(&'a [u8]),
    /// A pong.
    Pong(&'a [u8]),
    /// A close frame: its status code (`None` for an empty payload) and its
    /// UTF-8 reason. The code is already checked to be allowed on the wire.
    Close(Option<u16>, &'a str),
}

/// State of a fragmented message being reassembled. Boxed inside the
/// [`Decoder`] so that it costs nothing while no fragmented message is in flight.
#[derive(Debug)]
struct Fragment {
    /// The payload bytes received so far, unmasked.
    data: Vec<u8>,
    /// The message is text and must be valid UTF-8.
    text: bool,
    /// The message is compressed (RSV1 on its first frame): `data` holds
    /// compressed bytes until the last frame, which inflates it.
    compressed: bool,
    /// The final fragment has arrived and the message was handed out; the
    /// buffer is only kept because the returned [`Message`] borrows it, and is
    /// freed by the next [`Decoder::decode`] or [`Decoder::release_buffer`].
    done: bool,
}

/// Decodes frames into messages for one connection. See the module docs.
#[derive(Debug)]
pub struct Decoder {
    /// The fragmented message in progress, if any. `None` (a null pointer)
    /// for an idle connection: no buffer is allocated until a message
    /// actually arrives in fragments.
    fragment: Option<Box<Fragment>>,
    /// The largest message, in payload bytes, that we accept; data frames
    /// that would exceed it are refused with close code 1009.
    max_message: usize,
    /// Decides which masking rule incoming frames must follow.
    role: Role,
    /// Payload bytes of the incomplete text frame at the front of the
    /// caller's buffer already checked to be UTF-8, up to a character
    /// boundary; 0 when no such frame is pending. Reset when a frame completes.
    text_checked: u32,
    /// permessage-deflate was negotiated, on these terms: RSV1 on a
    /// message's first frame means "compressed". Kept here for the owner's
    /// writer too ([`Decoder::deflate`]): 3 bytes that fit in the padding,
    /// so the decoder stays 24 bytes.
    deflate: Option<Agreement>,
}

impl Decoder {
    /// A decoder for the given end of the connection, accepting data messages
    /// (whole or reassembled) of at most `max_message` payload bytes. Control
    /// frames are bounded by RFC 6455 itself (125 bytes) and ignore the limit.
    pub fn new(role: Role, max_message: usize) -> Decoder {
        Decoder {
            fragment: None,
            max_message,
            role,
            text_checked: 0,
            deflate: None,
        }
    }

    /// Turns permessage-deflate on (`Some`, once the handshake accepted
    /// it: compressed messages are inflated) or off (`None`, the default:
    /// RSV1 is a protocol error).
    pub fn set_deflate(&mut self, agreement: Option<Agreement>) {
        self.deflate = agreement;
    }

    /// The permessage-deflate terms set by [`Decoder::set_deflate`], for
    /// the connection's writer to compress by.
    pub fn deflate(&self) -> Option<Agreement> {
        self.deflate
    }

    /// The role this decoder was built for.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The configured maximum message size.
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// True while a fragmented message is being reassembled.
    pub fn in_fragment(&self) -> bool {
        self.fragment.as_ref().is_some_and(|f| !f.done)
    }

    /// True when the decoder owns a heap buffer: while a fragmented message
    /// is in progress, and after one completed until the next `decode` or
    /// [`release_buffer`](Decoder::release_buffer) call.
    pub fn holds_buffer(&self) -> bool {
        self.fragment.is_some()
    }

    /// Frees the reassembly buffer of a fragmented message that has already
    /// been handed out. Call it after handling such a message if the
    /// connection may now go idle; `decode` does the same on its next call.
    /// Does nothing while a message is still being reassembled.
    pub fn release_buffer(&mut self) {
        if self.fragment.as_ref().is_some_and(|f| f.done) {
            self.fragment = None;
        }
    }

    /// Decodes at most one frame from the front of `buf`, unmasking it in place.
    ///
    /// - `Ok(None)`: `buf` does not yet hold a whole frame; keep the bytes,
    ///   read more, and call again with the longer buffer (the same frame
    ///   first: the decoder remembers how much of an incomplete text frame it
    ///   has checked). `buf` was not changed.
    /// - `Ok(Some((consumed, msg)))`: one frame of `consumed` bytes was taken
    ///   (and unmasked in place; drop those bytes from the buffer). `msg` is
    ///   `Some` when the frame completed a message: a whole unfragmented
    ///   frame, a control frame (which may arrive between fragments), or the
    ///   last fragment of a fragmented message, whose payload then borrows the
    ///   decoder's reassembly buffer.
    /// - `Err`: the peer broke the protocol; send a close frame with
    ///   [`ProtocolError::close_code`] and drop the connection. The decoder
    ///   should not be used afterwards.
    ///
    /// Oversized frames are refused as soon as their header is in `buf`,
    /// before their payload arrives, and invalid UTF-8 in a text frame as
    /// soon as its bytes are. Never panics, whatever `buf` holds.
    pub fn decode<'a>(
        &'a mut self,
        buf: &'a mut [u8],
    ) -> Result<Option<(usize, Option<Message<'a>>)>, ProtocolError> {
        self.release_buffer();
        let Some(header) = parse_header_with(buf, self.deflate.is_some())? else {
            return Ok(None);
        };
        match (self.role, header.mask) {
            (Role::Server, None) => return Err(ProtocolError::UnmaskedFrame),
            (Role::Client, Some(_)) => return Err(ProtocolError::MaskedFrame),
            _ => {}
        }
        match (header.opcode, self.fragment.is_some()) {
            (OpCode::Continuation, false) => return Err(ProtocolError::UnexpectedContinuation),
            (OpCode::Text | OpCode::Binary, true) => {
                return Err(ProtocolError::ExpectedContinuation)
            }
            (OpCode::Continuation, true) if header.rsv1 => {
                return Err(ProtocolError::CompressedContinuation)
            }
            _ => {}
        }
        let too_big = |size: u64| ProtocolError::MessageTooBig {
            size,
            max: self.max_message,
        };
        if !header.opcode.is_control() {
            let buffered = self.fragment.as_ref().map_or(0, |f| f.data.len()) as u64;
            let size = buffered.saturating_add(header.payload_len);
            if size > self.max_message as u64 {
                return Err(too_big(size));
            }
        }
        // Both conversions succeed after the size check; failing them is
        // still an oversized frame rather than a panic.
        let payload_len =
            usize::try_from(header.payload_len).map_err(|_| too_big(header.payload_len))?;
        let end = header
            .header_len
            .checked_add(payload_len)
            .ok_or_else(|| too_big(header.payload_len))?;
        if buf.len() < end {
            // Compressed bytes are not text: checked once inflated.
            let text = match header.opcode {
                OpCode::Text if !header.rsv1 => Some(&[][..]),
                OpCode::Continuation => self
                    .fragment
                    .as_deref()
                    .filter(|f| f.text && !f.compressed)
                    .map(|f| incomplete_tail(&f.data)),
                _ => None,
            };
            if let Some(carry) = text {
                let arrived = buf.get(header.header_len..).unwrap_or_default();
                let from = self.text_checked as usize;
                let checked = check_partial_utf8(carry, arrived, header.mask, from)?;
                // Past 4 GiB the check just stops advancing; the whole frame
                // is still checked once complete.
                self.text_checked = u32::try_from(checked).unwrap_or(self.text_checked);
            }
            return Ok(None);
        }
        self.text_checked = 0;
        let payload = &mut buf[header.header_len..end];
        if let Some(key) = header.mask {
            apply_mask(payload, key, 0);
        }
        let payload: &'a [u8] = payload;

        let message = match header.opcode {
            OpCode::Text | OpCode::Binary => {
                let text = header.opcode == OpCode::Text;
                let compressed = header.rsv1;
                if !header.fin {
                    if text && !compressed {
                        check_utf8(payload, 0, false)?;
                    }
                    self.fragment = Some(Box::new(Fragment {
                        data: payload.to_vec(),
                        text,
                        compressed,
                        done: false,
                    }));
                    return Ok(Some((end, None)));
                }
                if compressed {
                    let fragment = self.fragment.insert(Box::new(Fragment {
                        data: Vec::new(),
                        text,
                        compressed,
                        done: true,
                    }));
                    crate::deflate::inflate(payload, self.max_message, &mut fragment.data)?;
                    let data: &'a [u8] = &fragment.data;
                    if text {
                        check_utf8(data, 0, true)?;
                        Message::Text(data)
                    } else {
                        Message::Binary(data)
                    }
                } else if text {
                    check_utf8(payload, 0, true)?;
                    Message::Text(payload)
                } else {
                    Message::Binary(payload)
                }
            }
            OpCode::Continuation => {
                let Some(fragment) = self.fragment.as_deref_mut() else {
                    return Err(ProtocolError::UnexpectedContinuation);
                };
                let previous = fragment.data.len();
                fragment.data.extend_from_slice(payload);
                if fragment.text && !fragment.compressed {
                    check_utf8(&fragment.data, previous, header.fin)?;
                }
                if !header.fin {
                    return Ok(Some((end, None)));
                }
                fragment.done = true;
                if fragment.compressed {
                    let mut inflated = Vec::new();
                    crate::deflate::inflate(&fragment.data, self.max_message, &mut inflated)?;
                    fragment.data = inflated;
                    if fragment.text {
                        check_utf8(&fragment.data, 0, true)?;
                    }
                }
                let data: &'a [u8] = &fragment.data;
                if fragment.text {
                    Message::Text(data)
                } else {
                    Message::Binary(data)
                }
            }
            OpCode::Close => parse_close(payload)?,
            OpCode::Ping => Message::Ping(payload),
            OpCode::Pong => Message::Pong(payload),
        };
        Ok(Some((end, Some(message))))
    }
}

/// Checks that `data` is UTF-8, given that `data[..checked]` was already
/// found valid except possibly for an incomplete character at its end. When
/// `complete` is false, `data` may itself end in an incomplete character.
fn check_utf8(data: &[u8], checked: usize, complete: bool) -> Result<(), ProtocolError> {
    // An incomplete character is at most 3 bytes long: back up that far, then
    // forward over continuation bytes to the nearest character boundary.
    let mut start = checked.saturating_sub(3);
    while start < checked && data.get(start).is_some_and(|&b| b & 0xC0 == 0x80) {
        start += 1;
    }
    let tail = data.get(start..).unwrap_or_default();
    match std::str::from_utf8(tail) {
        Ok(_) => Ok(()),
        // `error_len() == None`: the input ends inside a character that may
        // still be completed by the next fragment.
        Err(e) if !complete && e.error_len().is_none() => Ok(()),
        Err(_) => Err(ProtocolError::InvalidUtf8),
    }
}

/// The end of `data` from its last character boundary: the bytes of an
/// incomplete character (or, harmlessly, a complete one), at most 3.
fn incomplete_tail(data: &[u8]) -> &[u8] {
    let mut start = data.len().saturating_sub(3);
    while start < data.len() && data.get(start).is_some_and(|&b| b & 0xC0 == 0x80) {
        start += 1;
    }
    data.get(start..).unwrap_or_default()
}

/// Checks the part of an incomplete text frame that has arrived: `arrived`
/// is its payload so far, still masked with `mask`; `payload[..from]` was
/// already found valid up to a character boundary; when `from` is 0, `carry`
/// is the incomplete character the previous fragments ended with. Returns
/// the new boundary: how far `arrived` is valid with only an incomplete
/// character (to be completed by bytes still to come) after it.
///
/// Unmasks a stack copy, a kilobyte at a time, so the caller's buffer keeps
/// its masked bytes and no memory is allocated.
fn check_partial_utf8(
    carry: &[u8],
    arrived: &[u8],
    mask: Option<[u8; 4]>,
    from: usize,
) -> Result<usize, ProtocolError> {
    const CHUNK: usize = 1024;
    let mut scratch = [0u8; CHUNK + 3];
    // Bytes at the front of `scratch` carried over: an incomplete character.
    let mut pending = 0;
    if from == 0 {
        pending = carry.len().min(3);
        scratch[..pending].copy_from_slice(&carry[..pending]);
    }
    let mut pos = from;
    let mut boundary = from;
    while pos < arrived.len() {
        let take = (arrived.len() - pos).min(CHUNK);
        let chunk = &mut scratch[pending..pending + take];
        chunk.copy_from_slice(&arrived[pos..pos + take]);
        if let Some(key) = mask {
            apply_mask(chunk, key, pos);
        }
        pos += take;
        let filled = &scratch[..pending + take];
        let valid = match std::str::from_utf8(filled) {
            Ok(_) => filled.len(),
            // Ends inside a character that later bytes may complete.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => return Err(ProtocolError::InvalidUtf8),
        };
        pending = filled.len() - valid;
        // Before `from` + carry is resolved, the boundary stays at `from`.
        boundary = pos.saturating_sub(pending).max(boundary);
        scratch.copy_within(valid..valid + pending, 0);
    }
    Ok(boundary)
}

/// Parses a close frame's payload (§5.5.1): empty, or a valid 2-byte code
/// followed by a UTF-8 reason.
fn parse_close(payload: &[u8]) -> Result<Message<'_>, ProtocolError> {
    match payload {
        [] => Ok(Message::Close(None, "")),
        [_] => Err(ProtocolError::CloseTooShort),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            if !close_code::is_valid(code) {
                return Err(ProtocolError::InvalidCloseCode(code));
            }
            let reason =
                std::str::from_utf8(reason).map_err(|_| ProtocolError::InvalidCloseReason)?;
            Ok(Message::Close(Some(code), reason))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoder_is_small() {
        assert!(
            std::mem::size_of::<Decoder>() <= 24,
            "{}",
            std::mem::size_of::<Decoder>()
        );
    }

    #[test]
    fn incremental_utf8_across_every_split() {
        let text = "aé€😀z".as_bytes();
        for split in 0..=text.len() {
            let mut data = text[..split].to_vec();
            assert_eq!(check_utf8(&data, 0, false), Ok(()), "split {split}");
            let checked = data.len();
            data.extend_from_slice(&text[split..]);
            assert_eq!(check_utf8(&data, checked, true), Ok(()), "split {split}");
        }
    }

    #[test]
    fn incremental_utf8_rejects_early() {
        // A lone continuation byte cannot start anything: rejected before the end.
        assert_eq!(
            check_utf8(b"ab\x80", 0, false),
            Err(ProtocolError::InvalidUtf8)
        );
        // A truncated character is fine until the message is complete.
        assert_eq!(check_utf8(b"ab\xE2\x82", 0, false), Ok(()));
        assert_eq!(
            check_utf8(b"ab\xE2\x82", 0, true),
            Err(ProtocolError::InvalidUtf8)
        );
        // Surrogates and overlong forms are invalid as soon as they are seen.
        assert_eq!(
            check_utf8(b"\xED\xA0", 0, false),
            Err(ProtocolError::InvalidUtf8)
        );
        assert_eq!(
            check_utf8(b"\xC0", 0, false),
            Err(ProtocolError::InvalidUtf8)
        );
    }

    /// A masked client frame carrying `payload`.
    fn masked(fin: bool, opcode: OpCode, payload: &[u8]) -> Vec<u8> {
        let mut out = bytes::BytesMut::new();
        crate::frame::encode_fragment(&mut out, fin, opcode, payload, Some([9, 0x80, 0xAA, 3]));
        out.to_vec()
    }

    /// Feeds `wire` to a server decoder `step` bytes more at a time, as reads
    /// would, keeping the incomplete frame at the front; returns the messages
    /// or the first error.
    fn feed(wire: &[u8], step: usize) -> Result<Vec<Vec<u8>>, ProtocolError> {
        let mut dec = Decoder::new(Role::Server, 1 << 20);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for piece in wire.chunks(step) {
            buf.extend_from_slice(piece);
            loop {
                let before = buf.clone();
                match dec.decode(&mut buf)? {
                    None => {
                        assert_eq!(buf, before, "Ok(None) changed the buffer");
                        break;
                    }
                    Some((n, msg)) => {
                        if let Some(Message::Text(t)) = msg {
                            out.push(t.to_vec());
                        }
                        buf.drain(..n);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Regression (Autobahn 6.4.3, 6.4.4): invalid UTF-8 inside one frame
    /// was only found once the whole frame had arrived; the peer, which
    /// sends the rest later, saw no close in time (NON-STRICT).
    #[test]
    fn invalid_utf8_fails_before_the_frame_is_complete() {
        // Autobahn 6.4.3's payload: valid, then F4 90 80 80 (above U+10FFFF).
        let mut text =
            b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xf4\x90\x80\x80edited".to_vec();
        text.extend_from_slice(&[b'x'; 3000]);
        let wire = masked(true, OpCode::Text, &text);
        // Only the header and the first 16 payload bytes have arrived.
        let mut dec = Decoder::new(Role::Server, 1 << 20);
        let mut first = wire[..8 + 16].to_vec();
        assert_eq!(dec.decode(&mut first), Err(ProtocolError::InvalidUtf8));
        // The same when the bytes trickle in one at a time.
        assert_eq!(feed(&wire, 1), Err(ProtocolError::InvalidUtf8));
        // And in a continuation frame of a text message.
        let mut wire = masked(false, OpCode::Text, "κό".as_bytes());
        wire.extend(masked(true, OpCode::Continuation, &text));
        let mut dec = Decoder::new(Role::Server, 1 << 20);
        let n = wire.len() - 3000;
        let (used, _) = dec
            .decode(&mut wire[..n])
            .expect("first fragment")
            .expect("whole");
        let mut rest = wire[used..n].to_vec();
        assert_eq!(dec.decode(&mut rest), Err(ProtocolError::InvalidUtf8));
    }

    #[test]
    fn valid_text_in_any_chops_and_fragments_is_accepted() {
        let text = "aé€😀z".repeat(700); // > 1 KiB chunks, every char width
        let bytes = text.as_bytes();
        let whole = masked(true, OpCode::Text, bytes);
        // A fragmented message, split inside characters.
        let mut fragmented = masked(false, OpCode::Text, &bytes[..2001]);
        fragmented.extend(masked(false, OpCode::Continuation, &bytes[2001..2002]));
        fragmented.extend(masked(true, OpCode::Continuation, &bytes[2002..]));
        for wire in [whole, fragmented] {
            for step in [1, 2, 3, 5, 7, 1000, 1025, 4096, wire.len()] {
                let got = feed(&wire, step).unwrap_or_else(|e| panic!("step {step}: {e}"));
                assert_eq!(got, vec![bytes.to_vec()], "step {step}");
            }
        }
    }

    #[test]
    fn partial_check_carries_characters_across_chunks() {
        let text = "é😀".as_bytes();
        for split in 0..=text.len() {
            let (a, b) = text.split_at(split);
            let boundary = check_partial_utf8(b"", a, None, 0).expect("prefix");
            assert!(boundary <= split);
            assert_eq!(
                check_partial_utf8(b"", text, None, boundary),
                Ok(text.len())
            );
            // `a` as the carry of earlier fragments, `b` as this frame.
            let carry = incomplete_tail(a);
            assert!(
                check_partial_utf8(carry, b, None, 0).is_ok(),
                "split {split}"
            );
        }
        assert_eq!(
            check_partial_utf8(b"\xE2", b"\x28", None, 0),
            Err(ProtocolError::InvalidUtf8)
        );
    }

    #[test]
    fn close_payloads() {
        assert_eq!(parse_close(b""), Ok(Message::Close(None, "")));
        assert_eq!(parse_close(b"\x03"), Err(ProtocolError::CloseTooShort));
        assert_eq!(
            parse_close(b"\x03\xe8bye"),
            Ok(Message::Close(Some(1000), "bye"))
        );
        assert_eq!(
            parse_close(b"\x03\xed"),
            Err(ProtocolError::InvalidCloseCode(1005))
        );
        assert_eq!(
            parse_close(b"\x03\xe8\xff"),
            Err(ProtocolError::InvalidCloseReason)
        );
    }
}
