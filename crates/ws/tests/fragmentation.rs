//! Fragmented messages: reassembly, control frames between fragments, UTF-8
//! split across fragments, and the reassembly buffer being freed afterwards.

mod common;

use bytes::BytesMut;
use common::{decode_ok, Owned};
use herald_ws::{encode_close, encode_fragment, encode_frame, Decoder, Message, OpCode, Role};

const MASK: [u8; 4] = [9, 8, 7, 6];

#[test]
fn binary_in_three_fragments_with_interleaved_ping_and_pong() {
    let mut out = BytesMut::new();
    encode_fragment(&mut out, false, OpCode::Binary, b"one ", Some(MASK));
    encode_frame(&mut out, OpCode::Ping, b"are you there", Some(MASK));
    encode_fragment(&mut out, false, OpCode::Continuation, b"two ", Some(MASK));
    encode_frame(&mut out, OpCode::Pong, b"", Some(MASK));
    encode_fragment(&mut out, true, OpCode::Continuation, b"three", Some(MASK));
    encode_frame(&mut out, OpCode::Text, b"after", Some(MASK));
    let mut server = Decoder::new(Role::Server, 1 << 20);
    assert_eq!(
        decode_ok(&mut server, out.to_vec()),
        [
            Owned::Ping(b"are you there".to_vec()),
            Owned::Pong(Vec::new()),
            Owned::Binary(b"one two three".to_vec()),
            Owned::Text(b"after".to_vec()),
        ]
    );
}

#[test]
fn frame_by_frame_state() {
    let mut out = BytesMut::new();
    encode_fragment(&mut out, false, OpCode::Text, b"ab", None);
    let first = out.split().to_vec();
    encode_close(&mut out, 1000, "", None);
    let close = out.split().to_vec();
    encode_fragment(&mut out, true, OpCode::Continuation, b"cd", None);
    let last = out.split().to_vec();

    let mut client = Decoder::new(Role::Client, 1 << 20);
    assert!(!client.in_fragment() && !client.holds_buffer());

    let mut buf = first.clone();
    assert_eq!(client.decode(&mut buf), Ok(Some((first.len(), None))));
    assert!(client.in_fragment() && client.holds_buffer());

    // A control frame in the middle answers at once and keeps the fragment.
    let mut buf = close.clone();
    assert_eq!(
        client.decode(&mut buf),
        Ok(Some((close.len(), Some(Message::Close(Some(1000), "")))))
    );
    assert!(client.in_fragment());

    let mut buf = last.clone();
    assert_eq!(
        client.decode(&mut buf),
        Ok(Some((last.len(), Some(Message::Text(b"abcd")))))
    );
    // The message borrowed the reassembly buffer; it is kept until released.
    assert!(!client.in_fragment());
    assert!(client.holds_buffer());
    client.release_buffer();
    assert!(!client.holds_buffer());
}

#[test]
fn next_decode_frees_the_reassembly_buffer() {
    let mut out = BytesMut::new();
    encode_fragment(&mut out, false, OpCode::Binary, b"x", None);
    encode_fragment(&mut out, true, OpCode::Continuation, b"y", None);
    let mut client = Decoder::new(Role::Client, 1 << 20);
    let mut buf = out.to_vec();
    assert_eq!(client.decode(&mut buf), Ok(Some((3, None))));
    assert_eq!(
        client.decode(&mut buf[3..]),
        Ok(Some((3, Some(Message::Binary(b"xy")))))
    );
    assert!(client.holds_buffer());
    // Even an incomplete read frees it: the message was handed out already.
    assert_eq!(client.decode(&mut [0x82]), Ok(None));
    assert!(!client.holds_buffer());
    // release_buffer never drops a message in progress.
    let mut first = BytesMut::new();
    encode_fragment(&mut first, false, OpCode::Binary, b"x", None);
    assert_eq!(decode_ok(&mut client, first.to_vec()), []);
    client.release_buffer();
    assert!(client.in_fragment() && client.holds_buffer());
}

#[test]
fn utf8_split_inside_characters_across_fragments() {
    let text = "κόσμε €😀 ok";
    let bytes = text.as_bytes();
    for a in 0..=bytes.len() {
        for b in a..=bytes.len() {
            let mut out = BytesMut::new();
            encode_fragment(&mut out, false, OpCode::Text, &bytes[..a], Some(MASK));
            encode_fragment(
                &mut out,
                false,
                OpCode::Continuation,
                &bytes[a..b],
                Some(MASK),
            );
            encode_fragment(
                &mut out,
                true,
                OpCode::Continuation,
                &bytes[b..],
                Some(MASK),
            );
            let mut server = Decoder::new(Role::Server, 1 << 20);
            assert_eq!(
                decode_ok(&mut server, out.to_vec()),
                [Owned::Text(bytes.to_vec())],
                "{a} {b}"
            );
        }
    }
}

#[test]
fn empty_fragments() {
    let mut out = BytesMut::new();
    encode_fragment(&mut out, false, OpCode::Text, b"", None);
    encode_fragment(&mut out, false, OpCode::Continuation, b"", None);
    encode_fragment(&mut out, true, OpCode::Continuation, b"", None);
    let mut client = Decoder::new(Role::Client, 0);
    assert_eq!(
        decode_ok(&mut client, out.to_vec()),
        [Owned::Text(Vec::new())]
    );
}

#[test]
fn many_messages_reuse_one_decoder() {
    let mut client = Decoder::new(Role::Client, 1 << 20);
    for i in 0..50u8 {
        let mut out = BytesMut::new();
        let n = usize::from(i % 5) + 1;
        let mut expected = Vec::new();
        for k in 0..n {
            let opcode = if k == 0 {
                OpCode::Binary
            } else {
                OpCode::Continuation
            };
            let piece = vec![i; usize::from(i) + k];
            expected.extend_from_slice(&piece);
            encode_fragment(&mut out, k + 1 == n, opcode, &piece, None);
        }
        assert_eq!(
            decode_ok(&mut client, out.to_vec()),
            [Owned::Binary(expected)]
        );
    }
}
