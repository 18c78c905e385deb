//! The Pusher Channels protocol (version 7) as Herald speaks it, without I/O.
//!
//! Herald serves Pusher's clients (`pusher-js`, `laravel-echo`, the mobile
//! SDKs) and server SDKs on the same hub as its own protocol, so an app can
//! move to Herald without changing its client code. Everything that can be
//! decided from bytes alone lives here, apart from sockets and the hub, so it
//! is tested on its own and shared by the WebSocket handler and the HTTP API
//! (`crates/server/src/pusher/`):
//!
//! - [`message`]: parsing what a client sends, rendering what it receives;
//! - [`channel`]: channel kinds (`private-`, `presence-`, `cache-`, ...), name
//!   rules, and how a Pusher channel and event map onto a Herald channel and
//!   payload ([`channel::Envelope`]; docs/decisions/0007-pusher-protocol.md);
//! - [`sign`]: the HMAC-SHA256 signatures of channel authorisation and of the
//!   HTTP API's signed query (with the MD5 of its body, [`md5`]);
//! - [`codes`]: the protocol's error and close codes.

pub mod channel;
pub mod codes;
pub mod fuzzing;
pub mod hex;
pub mod md5;
pub mod message;
pub mod sign;

pub use channel::{ChannelType, Envelope, Kind};
pub use codes::Code;
pub use message::Inbound;

/// Renders a Herald client id as a Pusher `socket_id` (`"<high>.<low>"`, the
/// two 32-bit halves, which matches the `\d+\.\d+` shape the SDKs check).
pub fn socket_id(client_id: u64) -> String {
    format!("{}.{}", client_id >> 32, client_id & 0xffff_ffff)
}

/// The Herald client id of a `socket_id` made by [`socket_id`], if it is one.
pub fn parse_socket_id(s: &str) -> Option<u64> {
    let (high, low) = s.split_once('.')?;
    let digits = |t: &str| !t.is_empty() && t.len() <= 10 && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(high) || !digits(low) {
        return None;
    }
    let (high, low): (u64, u64) = (high.parse().ok()?, low.parse().ok()?);
    if high > u64::from(u32::MAX) || low > u64::from(u32::MAX) {
        return None;
    }
    Some(high << 32 | low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_ids_round_trip() {
        for id in [0, 1, 42, u64::from(u32::MAX), 1 << 32 | 7, u64::MAX] {
            assert_eq!(parse_socket_id(&socket_id(id)), Some(id));
        }
        assert_eq!(socket_id(1 << 32 | 7), "1.7");
        for bad in [
            "",
            "1",
            "1.",
            ".1",
            "a.1",
            "1.2.3",
            "99999999999.1",
            "4294967296.0",
            "-1.2",
        ] {
            assert_eq!(parse_socket_id(bad), None, "{bad}");
        }
    }
}
