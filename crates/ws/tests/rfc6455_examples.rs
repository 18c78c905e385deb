//! The worked examples of RFC 6455: §5.7 frames (decoded in the right role and
//! re-encoded byte for byte) and the §1.3 accept key.

mod common;

use bytes::BytesMut;
use common::{decode_ok, Owned};
use herald_ws::{accept_key, encode_fragment, encode_frame, Decoder, OpCode, Role};

const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

#[test]
fn accept_key_example() {
    assert_eq!(
        &accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
        b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
}

#[test]
fn unmasked_text_hello() {
    let wire = vec![0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    let mut client = Decoder::new(Role::Client, 1 << 20);
    assert_eq!(
        decode_ok(&mut client, wire.clone()),
        [Owned::Text(b"Hello".to_vec())]
    );
    let mut out = BytesMut::new();
    encode_frame(&mut out, OpCode::Text, b"Hello", None);
    assert_eq!(&out[..], &wire[..]);
}

#[test]
fn masked_text_hello() {
    let wire = vec![
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    let mut server = Decoder::new(Role::Server, 1 << 20);
    assert_eq!(
        decode_ok(&mut server, wire.clone()),
        [Owned::Text(b"Hello".to_vec())]
    );
    let mut out = BytesMut::new();
    encode_frame(&mut out, OpCode::Text, b"Hello", Some(MASK));
    assert_eq!(&out[..], &wire[..]);
}

#[test]
fn fragmented_unmasked_text() {
    let first = [0x01, 0x03, 0x48, 0x65, 0x6c];
    let last = [0x80, 0x02, 0x6c, 0x6f];
    let mut client = Decoder::new(Role::Client, 1 << 20);
    assert_eq!(decode_ok(&mut client, first.to_vec()), []);
    assert!(client.in_fragment());
    assert_eq!(
        decode_ok(&mut client, last.to_vec()),
        [Owned::Text(b"Hello".to_vec())]
    );
    assert!(!client.in_fragment());

    let mut out = BytesMut::new();
    encode_fragment(&mut out, false, OpCode::Text, b"Hel", None);
    encode_fragment(&mut out, true, OpCode::Continuation, b"lo", None);
    assert_eq!(&out[..], [&first[..], &last[..]].concat());
}

#[test]
fn unmasked_ping_and_masked_pong() {
    let ping = vec![0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    let pong = vec![
        0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    let mut client = Decoder::new(Role::Client, 1 << 20);
    assert_eq!(
        decode_ok(&mut client, ping.clone()),
        [Owned::Ping(b"Hello".to_vec())]
    );
    let mut server = Decoder::new(Role::Server, 1 << 20);
    assert_eq!(
        decode_ok(&mut server, pong.clone()),
        [Owned::Pong(b"Hello".to_vec())]
    );

    let mut out = BytesMut::new();
    encode_frame(&mut out, OpCode::Ping, b"Hello", None);
    assert_eq!(&out[..], &ping[..]);
    out.clear();
    encode_frame(&mut out, OpCode::Pong, b"Hello", Some(MASK));
    assert_eq!(&out[..], &pong[..]);
}

#[test]
fn binary_256_bytes_uses_16_bit_length() {
    let payload: Vec<u8> = (0..=255).collect();
    let mut wire = vec![0x82, 0x7E, 0x01, 0x00];
    wire.extend_from_slice(&payload);
    let mut client = Decoder::new(Role::Client, 1 << 20);
    assert_eq!(
        decode_ok(&mut client, wire.clone()),
        [Owned::Binary(payload.clone())]
    );
    let mut out = BytesMut::new();
    encode_frame(&mut out, OpCode::Binary, &payload, None);
    assert_eq!(&out[..], &wire[..]);
}

#[test]
fn binary_64_kib_uses_64_bit_length() {
    let payload: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
    let mut wire = vec![0x82, 0x7F, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00];
    wire.extend_from_slice(&payload);
    let mut client = Decoder::new(Role::Client, 1 << 20);
    assert_eq!(
        decode_ok(&mut client, wire.clone()),
        [Owned::Binary(payload.clone())]
    );
    let mut out = BytesMut::new();
    encode_frame(&mut out, OpCode::Binary, &payload, None);
    assert_eq!(&out[..], &wire[..]);
}
