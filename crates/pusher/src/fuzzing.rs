//! The body of the `pusher` fuzz target in `fuzz/` (cargo-fuzz, nightly),
//! kept here so that the stable corpus test
//! (`crates/proto/tests/fuzz_corpus.rs`) runs the same checks on every
//! `cargo test`. Everything a Pusher client or server SDK can send goes
//! through one of these parsers; each must not panic on any input, and an
//! envelope must survive its round trip.

use crate::channel::{self, Envelope};
use crate::{message, sign};

/// Every parser of client-controlled bytes.
pub fn message(data: &[u8]) {
    let _ = message::Inbound::parse(data);
    if let Some(e) = Envelope::parse(data) {
        let again = e.to_payload();
        assert_eq!(
            Envelope::parse(&again),
            Some(e.clone()),
            "envelope changed through a round trip"
        );
    }
    if let Some(e) = Envelope::of_publication(data) {
        let payload = e.to_payload();
        let back = Envelope::parse(&payload).expect("a written envelope parses");
        assert_eq!(back.data, e.data, "data changed through an envelope");
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = message::parse_member(text);
        let _ = message::parse_user(text);
        let _ = channel::user_channel(text);
        if channel::valid_name(text) {
            let h = channel::to_herald("ns", text);
            assert_eq!(channel::from_herald("ns", &h).as_deref(), Some(text));
        }
        if let Ok(q) = sign::SignedQuery::parse(text) {
            let _ = q.verify(b"secret", "POST", "/apps/1/events", data, 0);
        }
    }
}
