//! permessage-deflate (RFC 7692): the offer table, the RFC's examples,
//! compressed and fragmented messages, and what a bad peer gets.

use bytes::BytesMut;
use herald_ws::deflate::{accepts_offer, compress, inflate, negotiate, Agreement, RESPONSE};
use herald_ws::{
    encode_fragment, encode_fragment_rsv1, encode_frame, validate_upgrade, Decoder, Message,
    OpCode, ProtocolError, Role,
};

const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A server decoder with permessage-deflate on, 1 MiB limit.
fn server(max: usize) -> Decoder {
    let mut d = Decoder::new(Role::Server, max);
    d.set_deflate(Some(Agreement::DEFAULT));
    d
}

/// A masked client frame with RSV1 as given.
fn frame(fin: bool, rsv1: bool, opcode: OpCode, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_fragment_rsv1(&mut out, fin, rsv1, opcode, payload, Some(MASK));
    out.to_vec()
}

/// Decodes every frame of `wire`; the completed messages (text or binary
/// payloads) or the first error.
fn decode_all(dec: &mut Decoder, wire: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut buf = wire.to_vec();
    let mut off = 0;
    let mut out = Vec::new();
    while off < buf.len() {
        match dec.decode(&mut buf[off..])? {
            None => panic!("incomplete frame in a whole stream"),
            Some((n, msg)) => {
                if let Some(Message::Text(p) | Message::Binary(p)) = msg {
                    out.push(p.to_vec());
                }
                off += n;
            }
        }
    }
    Ok(out)
}

#[test]
fn offers() {
    let table: &[(&str, bool)] = &[
        ("permessage-deflate", true),
        ("Permessage-Deflate", true),
        ("permessage-deflate; client_max_window_bits", true),
        ("permessage-deflate; client_max_window_bits=10", true),
        ("permessage-deflate; client_max_window_bits=\"12\"", true),
        (
            "permessage-deflate;server_no_context_takeover;client_no_context_takeover",
            true,
        ),
        ("permessage-deflate; server_max_window_bits=15", true),
        // A smaller server window: accepted (short messages only).
        ("permessage-deflate; server_max_window_bits=10", true),
        // server_max_window_bits needs a value.
        ("permessage-deflate; server_max_window_bits", false),
        ("permessage-deflate; client_max_window_bits=16", false),
        ("permessage-deflate; client_max_window_bits=7", false),
        ("permessage-deflate; client_max_window_bits=015", false),
        ("permessage-deflate; client_max_window_bits=\"12", false),
        ("permessage-deflate; server_no_context_takeover=1", false),
        ("permessage-deflate; unknown_parameter", false),
        (
            "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
            false,
        ),
        ("x-webkit-deflate-frame", false),
        ("", false),
        // Several offers: the first acceptable one wins.
        (
            "permessage-deflate; server_max_window_bits=8, permessage-deflate",
            true,
        ),
        ("foo, permessage-deflate; client_max_window_bits", true),
        (
            "permessage-deflate; bogus, permessage-deflate; server_max_window_bits=9",
            true,
        ),
        (
            "permessage-deflate; bogus, permessage-deflate; server_max_window_bits=99",
            false,
        ),
    ];
    for (offer, accepted) in table {
        assert_eq!(accepts_offer(offer.as_bytes()), *accepted, "{offer}");
    }
    // Which offer, and the answer to it.
    let a = negotiate(b"permessage-deflate; server_max_window_bits=8, permessage-deflate")
        .expect("accepted");
    assert_eq!(a.server_window_bits(), 8);
    assert_eq!(
        a.response(),
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=8"
    );
    assert!(a.compresses(256) && !a.compresses(257));
    let a = a.compressing_from(100);
    assert!(!a.compresses(99) && a.compresses(100) && !a.compresses(257));
    assert_eq!(std::mem::size_of::<Option<Agreement>>(), 3);
    let full = negotiate(b"permessage-deflate; server_max_window_bits=15").expect("accepted");
    assert_eq!(full, Agreement::DEFAULT);
    assert_eq!(full.response(), RESPONSE);
    assert!(full.compresses(usize::MAX));
}

#[test]
fn handshake_reports_the_offer() {
    let base = [
        httparse::Header {
            name: "Upgrade",
            value: b"websocket",
        },
        httparse::Header {
            name: "Connection",
            value: b"Upgrade",
        },
        httparse::Header {
            name: "Sec-WebSocket-Key",
            value: b"dGhlIHNhbXBsZSBub25jZQ==",
        },
        httparse::Header {
            name: "Sec-WebSocket-Version",
            value: b"13",
        },
    ];
    assert_eq!(validate_upgrade("GET", &base).expect("valid").deflate, None);
    let mut with = base.to_vec();
    with.push(httparse::Header {
        name: "Sec-WebSocket-Extensions",
        value: b"permessage-deflate; client_max_window_bits",
    });
    assert_eq!(
        validate_upgrade("GET", &with).expect("valid").deflate,
        Some(Agreement::DEFAULT)
    );
    let mut out = Vec::new();
    herald_ws::write_accept_extensions(
        &mut out,
        &herald_ws::accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
        None,
        Some(RESPONSE),
    );
    let text = String::from_utf8(out).expect("ascii");
    assert!(text.contains(
        "\r\nSec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n\r\n"
    ));
}

/// RFC 7692 §7.2.3.1: "Hello" compressed is `f2 48 cd c9 c9 07 00`.
#[test]
fn rfc7692_hello() {
    let mut out = Vec::new();
    inflate(&[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00], 100, &mut out).expect("inflates");
    assert_eq!(out, b"Hello");
    let mut compressed = Vec::new();
    compress(b"Hello", &mut compressed);
    assert_eq!(compressed, [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]);
    // §7.2.3.3: a block with no compression.
    let mut out = Vec::new();
    inflate(
        &[
            0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
        ],
        100,
        &mut out,
    )
    .expect("inflates");
    assert_eq!(out, b"Hello");
    // §7.2.3.1 on the wire, unmasked from a server: `c1 07 f2 48 ...`.
    let mut wire = BytesMut::new();
    encode_fragment_rsv1(&mut wire, true, true, OpCode::Text, &compressed, None);
    assert_eq!(&wire[..2], &[0xc1, 0x07]);
    let mut client = Decoder::new(Role::Client, 100);
    client.set_deflate(Some(Agreement::DEFAULT));
    let (_, msg) = client.decode(&mut wire).expect("valid").expect("whole");
    assert_eq!(msg, Some(Message::Text(b"Hello")));
}

/// RFC 7692 §7.2.3.1's fragmented form: `41 03 f2 48 cd` then `80 04 c9 c9 07 00`.
#[test]
fn rfc7692_fragmented() {
    let mut wire = frame(false, true, OpCode::Text, &[0xf2, 0x48, 0xcd]);
    wire.extend(frame(
        true,
        false,
        OpCode::Continuation,
        &[0xc9, 0xc9, 0x07, 0x00],
    ));
    assert_eq!(
        decode_all(&mut server(100), &wire),
        Ok(vec![b"Hello".to_vec()])
    );
}

#[test]
fn round_trips_and_mixes_with_plain_messages() {
    let json = br#"{"pub":{"channel":"chat:lobby","offset":42,"data":{"text":"hello hello hello hello"}}}"#
        .repeat(20);
    let mut compressed = Vec::new();
    compress(&json, &mut compressed);
    assert!(compressed.len() < json.len() / 4, "{}", compressed.len());
    // Compressed, then plain, then compressed in three fragments with a ping
    // in between: each message stands alone (no context takeover).
    let mut wire = frame(true, true, OpCode::Binary, &compressed);
    wire.extend(frame(true, false, OpCode::Text, b"plain"));
    let (a, rest) = compressed.split_at(10);
    let (b, c) = rest.split_at(5);
    wire.extend(frame(false, true, OpCode::Text, a));
    wire.extend(frame(false, false, OpCode::Continuation, b));
    let mut ping = BytesMut::new();
    encode_frame(&mut ping, OpCode::Ping, b"p", Some(MASK));
    wire.extend_from_slice(&ping);
    wire.extend(frame(true, false, OpCode::Continuation, c));
    let got = decode_all(&mut server(1 << 20), &wire).expect("valid");
    assert_eq!(got, vec![json.clone(), b"plain".to_vec(), json]);
    // Compressing is the same whatever came before.
    let mut again = Vec::new();
    compress(b"something else entirely", &mut again);
    let mut twice = Vec::new();
    compress(&br#"{"pub":{"channel":"chat:lobby","offset":42,"data":{"text":"hello hello hello hello"}}}"#.repeat(20), &mut twice);
    assert_eq!(twice, compressed);
}

#[test]
fn deflate_bomb_is_refused_with_1009() {
    let zeros = vec![0u8; 10 << 20];
    let mut bomb = Vec::new();
    compress(&zeros, &mut bomb);
    assert!(bomb.len() < 20 << 10, "{}", bomb.len());
    let err = decode_all(
        &mut server(1 << 20),
        &frame(true, true, OpCode::Binary, &bomb),
    )
    .expect_err("too big");
    assert!(
        matches!(err, ProtocolError::MessageTooBig { .. }),
        "{err:?}"
    );
    assert_eq!(err.close_code(), 1009);
    // Exactly at the limit is fine.
    let mut exact = Vec::new();
    compress(&zeros[..1 << 20], &mut exact);
    let got = decode_all(
        &mut server(1 << 20),
        &frame(true, true, OpCode::Binary, &exact),
    )
    .expect("at the limit");
    assert_eq!(got[0].len(), 1 << 20);
    let mut out = Vec::new();
    assert!(inflate(&exact, (1 << 20) - 1, &mut out).is_err());
}

#[test]
fn bad_peers() {
    // RSV1 without negotiation.
    let mut plain = Decoder::new(Role::Server, 1 << 20);
    let err = decode_all(
        &mut plain,
        &frame(true, true, OpCode::Text, &[0xf2, 0x48, 0x07, 0]),
    )
    .expect_err("rsv1");
    assert_eq!((err, err.close_code()), (ProtocolError::ReservedBits, 1002));
    // RSV1 on a control frame.
    let err =
        decode_all(&mut server(100), &frame(true, true, OpCode::Ping, b"")).expect_err("control");
    assert_eq!(
        (err, err.close_code()),
        (ProtocolError::CompressedControl, 1002)
    );
    // RSV1 on a continuation.
    let mut wire = frame(false, true, OpCode::Text, &[0xf2, 0x48]);
    wire.extend(frame(
        true,
        true,
        OpCode::Continuation,
        &[0xcd, 0xc9, 0xc9, 0x07, 0x00],
    ));
    let err = decode_all(&mut server(100), &wire).expect_err("continuation");
    assert_eq!(
        (err, err.close_code()),
        (ProtocolError::CompressedContinuation, 1002)
    );
    // RSV2 and RSV3 stay refused.
    for bit in [0x20u8, 0x10] {
        let mut f = frame(true, false, OpCode::Text, b"x");
        f[0] |= bit;
        let err = decode_all(&mut server(100), &f).expect_err("rsv2/3");
        assert_eq!(err, ProtocolError::ReservedBits);
    }
    // Not DEFLATE: block type 3 is reserved.
    let err = decode_all(
        &mut server(100),
        &frame(true, true, OpCode::Binary, &[0xff, 0xff, 0xff]),
    )
    .expect_err("garbage");
    assert_eq!(
        (err, err.close_code()),
        (ProtocolError::InvalidCompressedData, 1007)
    );
    // Inflates to invalid UTF-8 in a text message.
    let mut bad = Vec::new();
    compress(b"ab\xff\xfe", &mut bad);
    let err =
        decode_all(&mut server(100), &frame(true, true, OpCode::Text, &bad)).expect_err("utf8");
    assert_eq!((err, err.close_code()), (ProtocolError::InvalidUtf8, 1007));
    // An uncompressed fragment start still works with deflate on.
    let mut wire = BytesMut::new();
    encode_fragment(&mut wire, false, OpCode::Text, b"ab", Some(MASK));
    encode_fragment(&mut wire, true, OpCode::Continuation, b"cd", Some(MASK));
    assert_eq!(
        decode_all(&mut server(100), &wire),
        Ok(vec![b"abcd".to_vec()])
    );
}

#[test]
fn empty_message() {
    let mut c = Vec::new();
    compress(b"", &mut c);
    let mut out = Vec::new();
    inflate(&c, 10, &mut out).expect("inflates");
    assert!(out.is_empty());
    // §7.2.3.6: a lone 0x00 is an empty message too.
    inflate(&[0x00], 10, &mut out).expect("inflates");
    assert!(out.is_empty());
}

/// Regression (Autobahn 12.2.9, 64 KiB slices of a bitmap): a sync flush
/// that only wrote out output left pending by the previous call was taken
/// as complete, losing the end of the message. Round-trips many large,
/// poorly compressible messages, each slice as Autobahn sends them.
#[test]
fn large_poorly_compressible_messages_round_trip() {
    let mut rng = fastrand::Rng::with_seed(7);
    // Bitmap-like: runs and noise, compressing to about half.
    let data: Vec<u8> = (0..300_000)
        .map(|i| {
            if rng.u8(..) < 128 {
                (i / 7) as u8
            } else {
                rng.u8(..)
            }
        })
        .collect();
    for len in [8192, 65536, 131_072] {
        let mut from = 0;
        for _ in 0..120 {
            let msg: Vec<u8> = data.iter().cycle().skip(from).take(len).copied().collect();
            from = (from + len) % data.len();
            let mut z = Vec::new();
            compress(&msg, &mut z);
            let mut out = Vec::new();
            inflate(&z, 1 << 20, &mut out).expect("inflates");
            assert_eq!(out.len(), msg.len());
            assert!(out == msg);
        }
    }
}
