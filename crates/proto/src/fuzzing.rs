//! The bodies of the fuzz targets in `fuzz/` (cargo-fuzz, nightly), kept here
//! so that a stable test (`tests/fuzz_corpus.rs`) runs the very same checks
//! over the committed seed corpus and random inputs on every `cargo test`.
//!
//! Each function takes arbitrary bytes and panics only if a decoder breaks one
//! of its promises: no panic on any input, and whatever decodes re-encodes to
//! something that decodes to the same value (binary: to the very same bytes,
//! since every binary message has exactly one encoding).

use crate::{framing, shootout, Encoding};
use bytes::{Bytes, BytesMut};

/// The JSON codec: client and server messages.
pub fn json(data: &[u8]) {
    roundtrip(Encoding::Json, data, false);
}

/// The binary codec: client and server messages, canonical.
pub fn binary(data: &[u8]) {
    roundtrip(Encoding::Binary, data, true);
}

fn roundtrip(enc: Encoding, data: &[u8], canonical: bool) {
    if let Ok(req) = enc.decode_request(data) {
        let mut out = BytesMut::new();
        enc.encode_request(&req, &mut out);
        let again = enc
            .decode_request(&out)
            .unwrap_or_else(|e| panic!("re-encoded request does not decode: {e:?} {out:?}"));
        assert_eq!(again, req, "request changed through a round trip");
        if canonical {
            assert_eq!(&out[..], data, "binary request is not canonical");
        }
        let shared = Bytes::copy_from_slice(data);
        assert_eq!(enc.decode_request_bytes(&shared).ok(), Some(req));
    }
    if let Ok(msg) = enc.decode_server(data) {
        let mut out = BytesMut::new();
        enc.encode_server(&msg, &mut out);
        let again = enc
            .decode_server(&out)
            .unwrap_or_else(|e| panic!("re-encoded server message does not decode: {e:?} {out:?}"));
        assert_eq!(again, msg, "server message changed through a round trip");
        if canonical {
            assert_eq!(&out[..], data, "binary server message is not canonical");
        }
    }
}

/// Raw TCP framing (4-byte length prefix) followed by the binary codec, over
/// a stream of frames as the server reads them.
pub fn tcp_framing(data: &[u8]) {
    let mut rest = data;
    while let Ok(Some((used, payload))) = framing::decode_frame(rest, 1024) {
        assert!(used >= framing::PREFIX && used <= rest.len());
        if !payload.is_empty() {
            binary(payload);
        }
        rest = &rest[used..];
    }
}

/// A long-poll request body: one JSON command or an array of them.
pub fn poll_body(data: &[u8]) {
    if let Ok(commands) = crate::json::split_batch(data) {
        for c in commands {
            let _ = Encoding::Json.decode_request(c);
        }
    }
}

/// The websocket-shootout protocol, both modes.
pub fn shootout(data: &[u8]) {
    let _ = shootout::parse_json(data);
    let _ = shootout::parse_binary(data);
}
