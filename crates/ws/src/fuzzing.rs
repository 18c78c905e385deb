//! The body of the WebSocket framing fuzz target in `fuzz/`, kept here so a
//! stable test runs the same check over the seed corpus on every `cargo test`:
//! the server-side decoder fed arbitrary bytes, one frame after another,
//! with and without permessage-deflate, never panics, never claims more bytes than it was given, and always makes
//! progress or asks for more.

use crate::{Decoder, Role};

/// Decodes `data` as a client-to-server byte stream, without and then with
/// permessage-deflate (so compressed messages are inflated, within the limit).
pub fn frames(data: &[u8]) {
    for deflate in [false, true] {
        frames_with(data, deflate);
    }
}

fn frames_with(data: &[u8], deflate: bool) {
    let mut buf = data.to_vec();
    let mut dec = Decoder::new(Role::Server, 1024);
    dec.set_deflate(deflate.then_some(crate::deflate::Agreement::DEFAULT));
    let mut off = 0;
    while off < buf.len() {
        match dec.decode(&mut buf[off..]) {
            Ok(Some((used, _msg))) => {
                assert!(
                    used > 0 && used <= buf.len() - off,
                    "bad consumed count {used}"
                );
                off += used;
            }
            Ok(None) | Err(_) => break,
        }
    }
}
