//! Every protocol violation the decoder detects, with the close code it maps to.

mod common;

use bytes::BytesMut;
use common::decode_err;
use herald_ws::{
    encode_fragment, encode_frame, parse_header, Decoder, OpCode, ProtocolError, Role,
};

const MASK: [u8; 4] = [1, 2, 3, 4];

/// A masked frame built by hand, for headers `encode_frame` would never write.
fn raw(first: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mut out = vec![first, 0x80 | payload.len() as u8];
    out.extend_from_slice(&MASK);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
    out
}

fn server() -> Decoder {
    Decoder::new(Role::Server, 1 << 20)
}

fn frame(opcode: OpCode, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_frame(&mut out, opcode, payload, Some(MASK));
    out.to_vec()
}

fn fragment(fin: bool, opcode: OpCode, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_fragment(&mut out, fin, opcode, payload, Some(MASK));
    out.to_vec()
}

#[test]
fn reserved_bits() {
    for rsv in [0x40, 0x20, 0x10] {
        let err = decode_err(&mut server(), raw(0x81 | rsv, b"hi"));
        assert_eq!((err, err.close_code()), (ProtocolError::ReservedBits, 1002));
        // Judged from the first byte alone.
        assert_eq!(
            parse_header(&[0x81 | rsv]),
            Err(ProtocolError::ReservedBits)
        );
    }
}

#[test]
fn reserved_opcodes() {
    for op in [3u8, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] {
        let err = decode_err(&mut server(), raw(0x80 | op, b""));
        assert_eq!(
            (err, err.close_code()),
            (ProtocolError::UnknownOpcode(op), 1002)
        );
    }
}

#[test]
fn masking_must_match_the_role() {
    let mut out = BytesMut::new();
    encode_frame(&mut out, OpCode::Text, b"hi", None);
    let err = decode_err(&mut server(), out.to_vec());
    assert_eq!(
        (err, err.close_code()),
        (ProtocolError::UnmaskedFrame, 1002)
    );

    let mut client = Decoder::new(Role::Client, 1 << 20);
    let err = decode_err(&mut client, frame(OpCode::Text, b"hi"));
    assert_eq!((err, err.close_code()), (ProtocolError::MaskedFrame, 1002));
}

#[test]
fn control_frame_too_long() {
    for op in [OpCode::Ping, OpCode::Pong, OpCode::Close] {
        // 126 bytes, 16-bit length form: refused from the two first bytes.
        // (`encode_frame` refuses to build one in debug builds.)
        let mut header = [0u8; 14];
        let n = herald_ws::write_header(&mut header, true, op, 126, Some(MASK));
        assert_eq!(n, 8);
        let err = decode_err(&mut server(), header[..2].to_vec());
        assert_eq!(
            (err, err.close_code()),
            (ProtocolError::ControlTooLong, 1002)
        );
    }
}

#[test]
fn fragmented_control_frame() {
    for op in [0x8u8, 0x9, 0xA] {
        let err = decode_err(&mut server(), raw(op, b""));
        assert_eq!(
            (err, err.close_code()),
            (ProtocolError::FragmentedControl, 1002)
        );
    }
}

#[test]
fn continuation_without_start() {
    for fin in [false, true] {
        let err = decode_err(&mut server(), fragment(fin, OpCode::Continuation, b"x"));
        assert_eq!(
            (err, err.close_code()),
            (ProtocolError::UnexpectedContinuation, 1002)
        );
    }
}

#[test]
fn new_data_frame_during_a_fragment() {
    for opcode in [OpCode::Text, OpCode::Binary] {
        for fin in [false, true] {
            let stream = [
                fragment(false, OpCode::Binary, b"x"),
                fragment(fin, opcode, b"y"),
            ]
            .concat();
            let err = decode_err(&mut server(), stream);
            assert_eq!(
                (err, err.close_code()),
                (ProtocolError::ExpectedContinuation, 1002)
            );
        }
    }
}

#[test]
fn close_payload_of_one_byte() {
    let err = decode_err(&mut server(), frame(OpCode::Close, &[0x03]));
    assert_eq!(
        (err, err.close_code()),
        (ProtocolError::CloseTooShort, 1002)
    );
}

#[test]
fn close_codes_not_allowed_on_the_wire() {
    for code in [
        0u16, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
    ] {
        let err = decode_err(&mut server(), frame(OpCode::Close, &code.to_be_bytes()));
        assert_eq!(
            (err, err.close_code()),
            (ProtocolError::InvalidCloseCode(code), 1002),
            "{code}"
        );
    }
    for code in [
        1000u16, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4000, 4999,
    ] {
        let mut buf = frame(OpCode::Close, &code.to_be_bytes());
        let got = server()
            .decode(&mut buf)
            .map(|r| r.map(|(_, m)| format!("{m:?}")));
        assert_eq!(got, Ok(Some(format!("Some(Close(Some({code}), \"\"))"))));
    }
}

#[test]
fn invalid_utf8_in_text() {
    for bad in [
        &b"\xff"[..],
        b"abc\xc3",
        b"\xed\xa0\x80",
        b"\xc0\xaf",
        b"ok\xf4\x90\x80\x80",
    ] {
        let err = decode_err(&mut server(), frame(OpCode::Text, bad));
        assert_eq!((err, err.close_code()), (ProtocolError::InvalidUtf8, 1007));
        // The same bytes are fine as binary.
        let mut buf = frame(OpCode::Binary, bad);
        assert!(server().decode(&mut buf).is_ok());
    }
}

#[test]
fn invalid_utf8_in_reassembled_text() {
    // Truncated character at the very end of the message.
    let stream = [
        fragment(false, OpCode::Text, b"ab"),
        fragment(true, OpCode::Continuation, b"\xe2\x82"),
    ]
    .concat();
    let err = decode_err(&mut server(), stream);
    assert_eq!((err, err.close_code()), (ProtocolError::InvalidUtf8, 1007));

    // An invalid byte fails at its fragment, before the message is complete.
    let mut decoder = server();
    let mut first = fragment(false, OpCode::Text, b"ok");
    assert!(decoder.decode(&mut first).is_ok());
    let mut second = fragment(false, OpCode::Continuation, b"\xe2\x28");
    let err = decoder.decode(&mut second).expect_err("fail fast");
    assert_eq!((err, err.close_code()), (ProtocolError::InvalidUtf8, 1007));
}

#[test]
fn invalid_utf8_in_close_reason() {
    let err = decode_err(&mut server(), frame(OpCode::Close, b"\x03\xe8\xc3\x28"));
    assert_eq!(
        (err, err.close_code()),
        (ProtocolError::InvalidCloseReason, 1007)
    );
}

#[test]
fn frame_over_the_limit() {
    let mut decoder = Decoder::new(Role::Server, 100);
    let mut ok = frame(OpCode::Binary, &[0; 100]);
    assert!(matches!(decoder.decode(&mut ok), Ok(Some((_, Some(_))))));
    let err = decode_err(&mut decoder, frame(OpCode::Binary, &[0; 101]));
    assert_eq!(
        (err, err.close_code()),
        (
            ProtocolError::MessageTooBig {
                size: 101,
                max: 100
            },
            1009
        )
    );
}

#[test]
fn huge_frame_refused_from_its_header_alone() {
    // A masked binary frame claiming 1 GB: header (2 + 8 + 4 = 14 bytes) only.
    let header = {
        let mut h = [0u8; 14];
        let n = herald_ws::write_header(&mut h, true, OpCode::Binary, 1 << 30, Some(MASK));
        assert_eq!(n, 14);
        h
    };
    let mut decoder = Decoder::new(Role::Server, 16 << 20);
    let err = decoder
        .decode(&mut header.clone())
        .expect_err("must not wait for 1 GB");
    assert_eq!(err.close_code(), 1009);
    assert_eq!(
        err,
        ProtocolError::MessageTooBig {
            size: 1 << 30,
            max: 16 << 20
        }
    );
}

#[test]
fn fragments_accumulating_over_the_limit() {
    let mut decoder = Decoder::new(Role::Server, 100);
    let mut first = fragment(false, OpCode::Binary, &[0; 60]);
    assert!(decoder.decode(&mut first).is_ok());
    // The second fragment's header alone (2 + 4 bytes) is enough to refuse it.
    let second = fragment(true, OpCode::Continuation, &[0; 41]);
    let err = decoder
        .decode(&mut second[..6].to_vec())
        .expect_err("60 + 41 > 100");
    assert_eq!(
        (err, err.close_code()),
        (
            ProtocolError::MessageTooBig {
                size: 101,
                max: 100
            },
            1009
        )
    );

    // Exactly at the limit is fine.
    let mut decoder = Decoder::new(Role::Server, 100);
    let stream = [
        fragment(false, OpCode::Binary, &[0; 60]),
        fragment(true, OpCode::Continuation, &[0; 40]),
    ]
    .concat();
    assert_eq!(
        common::decode_ok(&mut decoder, stream),
        [common::Owned::Binary(vec![0; 100])]
    );
}

#[test]
fn control_frames_ignore_the_message_limit() {
    let mut decoder = Decoder::new(Role::Server, 0);
    let mut ping = frame(OpCode::Ping, &[7; 125]);
    assert!(matches!(decoder.decode(&mut ping), Ok(Some((_, Some(_))))));
}

#[test]
fn sixty_four_bit_length_with_top_bit() {
    let mut bytes = vec![0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4];
    let err = Decoder::new(Role::Server, usize::MAX)
        .decode(&mut bytes)
        .expect_err("top bit");
    assert_eq!(
        (err, err.close_code()),
        (ProtocolError::InvalidLength, 1002)
    );
    // Judged from the first length byte alone.
    assert_eq!(
        parse_header(&[0x82, 0xFF, 0x80]),
        Err(ProtocolError::InvalidLength)
    );
    // The largest legal length parses, and a decoder without a limit waits for it.
    let mut bytes = vec![
        0x82, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4,
    ];
    let header = parse_header(&bytes).expect("valid").expect("complete");
    assert_eq!(header.payload_len, i64::MAX as u64);
    let mut unlimited = Decoder::new(Role::Server, usize::MAX);
    let result = unlimited.decode(&mut bytes);
    assert!(matches!(
        result,
        Ok(None) | Err(ProtocolError::MessageTooBig { .. })
    ));
}
