//! The body of the `bayeux` fuzz target in `fuzz/` (cargo-fuzz, nightly),
//! kept here so that the stable corpus test (`tests/fuzz_corpus.rs`) runs
//! the same checks on every `cargo test`. Every byte a Bayeux client sends
//! goes through [`crate::decode_batch`] and the channel mapping, and every
//! cookie value through [`crate::resume::decode`]: none may panic on any
//! input, a channel that maps to Herald must map back, and cookie entries
//! read back as written.

use crate::channel::{self, Channel};
use crate::message::{self, decode_batch};
use crate::reply::{self, Reply};
use crate::resume;
use crate::BayeuxError;

/// Every parser of client-controlled bytes.
pub fn batch(data: &[u8]) {
    if let Ok(batch) = decode_batch(data, 64) {
        assert!(!batch.is_empty() && batch.len() <= 64);
        for m in batch.iter().flatten() {
            let _ = Channel::of(&m.channel);
            let _ = message::herald_token(m.ext.as_deref());
            let _ = message::ack(m.ext.as_deref());
            names(&m.channel);
            for s in m.subscription.iter().flat_map(|s| s.channels()) {
                names(s);
            }
            // A reply echoes the id: the result must stay JSON.
            let r = Reply::failed(&m.channel, m.id.as_deref(), &BayeuxError::bad("x"));
            let text = r.to_json();
            assert!(serde_json::from_slice::<serde_json::Value>(&text).is_ok());
            if let Some(d) = &m.data {
                let delivered = reply::delivery("/a", d.get(), None);
                assert!(reply::is_delivery(&delivered));
                assert!(serde_json::from_slice::<serde_json::Value>(&delivered).is_ok());
                let at = reply::delivery_at("/a", d.get(), None, None, Some(7));
                assert_eq!(reply::offset_of(&at), Some(("/a".to_string(), 7)));
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let entries = resume::decode(text);
        let again = resume::encode(&entries);
        let back = resume::decode(&again);
        assert_eq!(back[..], entries[..back.len()], "{text:?}");
        names(text);
        if let Some(b) = channel::from_herald(text) {
            assert_eq!(channel::to_herald(&b).as_deref(), Ok(text), "{text:?}");
        }
    }
}

/// The mapping of one name: Herald's name maps back to it.
fn names(name: &str) {
    if let Ok(h) = channel::to_herald(name) {
        assert_eq!(channel::from_herald(&h).as_deref(), Some(name), "{name:?}");
    }
    let _ = channel::pattern_to_herald(name);
}
