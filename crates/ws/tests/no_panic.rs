//! The decoder never panics, whatever the peer sends: random bytes, and valid
//! streams with random corruption, in both roles and with several limits.
//! Seeds are fixed so a failure reproduces.

use bytes::BytesMut;
use herald_ws::{encode_close, encode_fragment, encode_frame, parse_header, Decoder, OpCode, Role};

/// Feeds `stream` to `decoder` in chunks of random size, like socket reads,
/// until an error or the end; checks the invariants of every answer.
fn feed(rng: &mut fastrand::Rng, decoder: &mut Decoder, stream: &[u8]) {
    let mut pending: Vec<u8> = Vec::new();
    let mut at = 0;
    while at < stream.len() {
        let take = rng.usize(1..=(stream.len() - at).min(64));
        pending.extend_from_slice(&stream[at..at + take]);
        at += take;
        loop {
            let len = pending.len();
            match decoder.decode(&mut pending) {
                Ok(None) => break,
                Ok(Some((consumed, _))) => {
                    assert!((2..=len).contains(&consumed));
                    pending.drain(..consumed);
                }
                Err(e) => {
                    assert!(matches!(e.close_code(), 1002 | 1007 | 1009));
                    return;
                }
            }
        }
    }
}

fn decoders() -> Vec<Decoder> {
    [Role::Server, Role::Client]
        .into_iter()
        .flat_map(|role| [0, 100, 1 << 20, usize::MAX].map(|max| Decoder::new(role, max)))
        .collect()
}

#[test]
fn random_bytes() {
    let mut rng = fastrand::Rng::with_seed(0x5EED);
    for _ in 0..20_000 {
        let len = rng.usize(0..200);
        let mut stream: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
        // Often make the first byte a plausible header so decoding gets further.
        if len > 0 && rng.bool() {
            stream[0] = [0x81, 0x82, 0x01, 0x02, 0x00, 0x80, 0x88, 0x89, 0x8A][rng.usize(0..9)];
        }
        let _ = parse_header(&stream);
        for mut decoder in decoders() {
            feed(&mut rng, &mut decoder, &stream);
        }
    }
}

/// A valid stream of mixed frames for one masking choice.
fn valid_stream(rng: &mut fastrand::Rng, mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = BytesMut::new();
    for _ in 0..rng.usize(1..8) {
        let payload: Vec<u8> = (0..rng.usize(0..300))
            .map(|_| rng.u8(b' '..=b'~'))
            .collect();
        match rng.u8(0..5) {
            0 => encode_frame(&mut out, OpCode::Text, &payload, mask),
            1 => encode_frame(&mut out, OpCode::Binary, &payload, mask),
            2 => encode_frame(
                &mut out,
                OpCode::Ping,
                &payload[..payload.len().min(125)],
                mask,
            ),
            3 => encode_close(&mut out, 1000, "bye", mask),
            _ => {
                let (a, b) = payload.split_at(payload.len() / 2);
                encode_fragment(&mut out, false, OpCode::Text, a, mask);
                encode_frame(&mut out, OpCode::Pong, b"", mask);
                encode_fragment(&mut out, true, OpCode::Continuation, b, mask);
            }
        }
    }
    out.to_vec()
}

#[test]
fn corrupted_valid_streams() {
    let mut rng = fastrand::Rng::with_seed(42);
    for _ in 0..5_000 {
        let mask = if rng.bool() {
            Some(rng.u32(..).to_ne_bytes())
        } else {
            None
        };
        let mut stream = valid_stream(&mut rng, mask);
        for _ in 0..rng.usize(0..4) {
            let i = rng.usize(0..stream.len());
            stream[i] ^= 1 << rng.u8(0..8);
        }
        if rng.bool() {
            stream.truncate(rng.usize(0..=stream.len()));
        }
        for mut decoder in decoders() {
            feed(&mut rng, &mut decoder, &stream);
        }
    }
}

#[test]
fn valid_streams_decode_cleanly() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..2_000 {
        let (role, mask) = if rng.bool() {
            (Role::Server, Some(rng.u32(..).to_ne_bytes()))
        } else {
            (Role::Client, None)
        };
        let mut stream = valid_stream(&mut rng, mask);
        let mut decoder = Decoder::new(role, 1 << 20);
        let mut at = 0;
        while at < stream.len() {
            match decoder.decode(&mut stream[at..]) {
                Ok(Some((consumed, _))) => at += consumed,
                other => panic!("valid stream failed at {at}: {other:?}"),
            }
        }
        assert!(!decoder.in_fragment());
    }
}
