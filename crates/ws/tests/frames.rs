//! Frame encoding and header parsing: the three length forms, masking at
//! every offset, close-frame encoding, and byte-by-byte arrival (every proper
//! prefix of a frame is "incomplete" and leaves the buffer untouched).

mod common;

use bytes::BytesMut;
use common::{decode_ok, Owned};
use herald_ws::{
    apply_mask, encode_close, encode_frame, parse_header, write_header, Decoder, FrameHeader,
    Message, OpCode, Role,
};

const MASK: [u8; 4] = [0xA1, 0x5C, 0x03, 0xFE];

#[test]
fn three_length_forms_round_trip() {
    for (len, header_len) in [
        (0usize, 2usize),
        (1, 2),
        (125, 2),
        (126, 4),
        (127, 4),
        (65535, 4),
        (65536, 10),
        (70000, 10),
    ] {
        for mask in [None, Some(MASK)] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let mut out = BytesMut::new();
            encode_frame(&mut out, OpCode::Binary, &payload, mask);
            let expected_header = header_len + if mask.is_some() { 4 } else { 0 };
            assert_eq!(out.len(), expected_header + len);
            let header = parse_header(&out).expect("valid").expect("complete");
            assert_eq!(
                header,
                FrameHeader {
                    fin: true,
                    rsv1: false,
                    opcode: OpCode::Binary,
                    mask,
                    payload_len: len as u64,
                    header_len: expected_header,
                }
            );
            let role = if mask.is_some() {
                Role::Server
            } else {
                Role::Client
            };
            let mut decoder = Decoder::new(role, 1 << 20);
            assert_eq!(
                decode_ok(&mut decoder, out.to_vec()),
                [Owned::Binary(payload)],
                "len {len}"
            );
        }
    }
}

#[test]
fn write_header_matches_parse_header() {
    for opcode in [OpCode::Continuation, OpCode::Text, OpCode::Binary] {
        for fin in [false, true] {
            for len in [0u64, 125, 126, 65535, 65536, 1 << 40, i64::MAX as u64] {
                for mask in [None, Some(MASK)] {
                    let mut out = [0u8; 14];
                    let n = write_header(&mut out, fin, opcode, len, mask);
                    let header = parse_header(&out[..n]).expect("valid").expect("complete");
                    assert_eq!(
                        (header.fin, header.opcode, header.payload_len),
                        (fin, opcode, len)
                    );
                    assert_eq!((header.mask, header.header_len), (mask, n));
                }
            }
        }
    }
}

#[test]
fn masking_round_trip_at_every_offset() {
    let original: Vec<u8> = (0..1031u32).map(|i| (i * 31 + 7) as u8).collect();
    let mut whole = original.clone();
    apply_mask(&mut whole, MASK, 0);
    for (i, (m, o)) in whole.iter().zip(&original).enumerate() {
        assert_eq!(*m, o ^ MASK[i % 4]);
    }
    // Masking in two pieces split at any point gives the same bytes as masking at once.
    for split in 0..=original.len().min(67) {
        for start in 0..8 {
            let mut pieces = original.clone();
            let (a, b) = pieces[start..].split_at_mut(split.min(original.len() - start));
            apply_mask(a, MASK, start);
            apply_mask(b, MASK, start + a.len());
            let mut expected = original.clone();
            apply_mask(&mut expected[start..], MASK, start);
            assert_eq!(pieces, expected, "split {split} start {start}");
        }
    }
    // Masking twice restores the original at every offset.
    for offset in 0..16 {
        let mut buf = original.clone();
        apply_mask(&mut buf, MASK, offset);
        assert_ne!(buf, original);
        apply_mask(&mut buf, MASK, offset);
        assert_eq!(buf, original);
    }
}

#[test]
fn close_frames() {
    let mut out = BytesMut::new();
    encode_close(&mut out, 1000, "bye", None);
    assert_eq!(&out[..], b"\x88\x05\x03\xe8bye");

    // A long reason is cut to 123 bytes on a char boundary ("€" is 3 bytes: 41 fit).
    out.clear();
    let reason = "€".repeat(60);
    encode_close(&mut out, 4000, &reason, Some(MASK));
    let mut server = Decoder::new(Role::Server, 1 << 20);
    let mut buf = out.to_vec();
    let len = buf.len();
    let (consumed, message) = server.decode(&mut buf).expect("valid").expect("complete");
    assert_eq!(consumed, len);
    assert_eq!(message, Some(Message::Close(Some(4000), &reason[..123])));

    // 2-byte chars: 61 fit in 122 bytes, the 62nd would pass 123.
    out.clear();
    let reason = "é".repeat(80);
    encode_close(&mut out, 1001, &reason, None);
    assert_eq!(out.len(), 2 + 2 + 122);
}

/// Frames of every length form, both maskings, control and data.
fn sample_frames() -> Vec<(Role, Vec<u8>, Owned)> {
    let mut frames = Vec::new();
    for (role, mask) in [(Role::Client, None), (Role::Server, Some(MASK))] {
        for len in [0usize, 5, 125, 126, 300, 65536] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut out = BytesMut::new();
            encode_frame(&mut out, OpCode::Binary, &payload, mask);
            frames.push((role, out.to_vec(), Owned::Binary(payload)));
        }
        let mut out = BytesMut::new();
        encode_frame(&mut out, OpCode::Text, "héllo".as_bytes(), mask);
        frames.push((role, out.to_vec(), Owned::Text("héllo".as_bytes().to_vec())));
        let mut out = BytesMut::new();
        encode_close(&mut out, 1001, "going", mask);
        frames.push((role, out.to_vec(), Owned::Close(Some(1001), "going".into())));
        let mut out = BytesMut::new();
        encode_frame(&mut out, OpCode::Ping, b"p", mask);
        frames.push((role, out.to_vec(), Owned::Ping(b"p".to_vec())));
    }
    frames
}

#[test]
fn every_proper_prefix_is_incomplete() {
    for (role, frame, expected) in sample_frames() {
        let mut decoder = Decoder::new(role, 1 << 20);
        // Checking all 65 K prefixes of the largest frame is slow in debug
        // builds; the header prefixes and a stride through the payload suffice.
        let step = if frame.len() > 1000 { 997 } else { 1 };
        let prefixes = (0..frame.len().min(20))
            .chain((20..frame.len()).step_by(step))
            .chain([frame.len() - 1]);
        for k in prefixes {
            let mut prefix = frame[..k].to_vec();
            assert_eq!(
                decoder.decode(&mut prefix),
                Ok(None),
                "prefix {k} of {}",
                frame.len()
            );
            assert_eq!(
                prefix,
                frame[..k],
                "an incomplete frame must not be modified"
            );
        }
        assert!(!decoder.in_fragment());
        assert_eq!(decode_ok(&mut decoder, frame.clone()), [expected]);
    }
}

#[test]
fn byte_by_byte_stream() {
    // All sample frames of one role back to back, arriving one byte at a time
    // into a connection buffer that drops consumed bytes.
    for role in [Role::Client, Role::Server] {
        let (stream, expected): (Vec<Vec<u8>>, Vec<Owned>) = sample_frames()
            .into_iter()
            .filter(|(r, frame, _)| *r == role && frame.len() < 1000)
            .map(|(_, frame, msg)| (frame, msg))
            .unzip();
        let stream = stream.concat();
        let mut decoder = Decoder::new(role, 1 << 20);
        let mut pending = Vec::new();
        let mut got = Vec::new();
        for &byte in &stream {
            pending.push(byte);
            if let Some((consumed, message)) = decoder.decode(&mut pending).expect("valid") {
                if let Some(message) = message {
                    got.push(Owned::from(message));
                }
                pending.drain(..consumed);
            }
        }
        assert!(pending.is_empty());
        assert_eq!(got, expected);
    }
}

#[test]
fn decoder_size() {
    let size = std::mem::size_of::<Decoder>();
    assert!(size <= 40, "Decoder is {size} bytes");
}
