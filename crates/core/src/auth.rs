//! The authentication and permission contract every session obeys.
//!
//! Why a trait here and its implementation elsewhere: the session (shared by
//! every transport) is where each command passes, so that is where identity and
//! permissions are checked — once, for WebSocket, raw TCP, SSE and long-polling
//! alike. How tokens are verified (JWT, keys, JWKS files) and how rules are
//! configured is the server's business (`herald-server`'s `auth` module); the
//! core only needs an answer: who is this connection, and may it do this?
//!
//! [`AllowAll`] is the default: anonymous clients, every action allowed — the
//! "easy by default" behaviour of a server that only listens on 127.0.0.1.
//!
//! Token expiry: a connection whose token carries an expiry is entered in the
//! node's [`Expiries`]; the server's sweeper closes it with 3002 (token expired:
//! refresh, then reconnect) when the time comes.

use crate::client::Client;
use herald_proto::{DisconnectCode, ErrorCode};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

/// What a command wants to do with a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Receive its publications.
    Subscribe,
    /// Publish to it.
    Publish,
    /// See who is subscribed.
    Presence,
    /// Read its retained history.
    History,
}

impl Action {
    /// Lower-case name, as in configuration and error messages.
    pub const fn name(self) -> &'static str {
        match self {
            Action::Subscribe => "subscribe",
            Action::Publish => "publish",
            Action::Presence => "presence",
            Action::History => "history",
        }
    }
}

/// Who a connection is, once `connect` succeeded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// The token's user id (`sub`); empty for an anonymous client.
    pub user: Arc<str>,
    /// When the token expires, in Unix seconds (`exp`), if it does.
    pub expires_at: Option<u64>,
    /// Channels (or wildcard patterns) the token grants (`channels` claim).
    pub grants: Vec<String>,
    /// Connection info shown in presence and join/leave (the token's `info`
    /// claim as JSON text; empty when there is none).
    pub info: bytes::Bytes,
}

impl Identity {
    /// Whether this is an anonymous client (no token).
    pub fn is_anonymous(&self) -> bool {
        self.user.is_empty()
    }
}

/// Why authentication or a permission check failed. Each maps to the error code
/// of the reply and, for `connect`, to the disconnect code that follows it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No token, and anonymous clients are not allowed.
    #[error("a token is required (anonymous clients are not allowed)")]
    Missing,
    /// The token is malformed, forged, signed with an unknown key or an
    /// unsupported algorithm (`alg: none` included), or its claims are wrong.
    #[error("invalid token: {0}")]
    Invalid(String),
    /// The token has expired: refresh it.
    #[error("token expired")]
    Expired,
    /// The identity may not do this.
    #[error("permission denied: {0}")]
    Denied(String),
}

impl AuthError {
    /// The error code answering the command.
    pub fn code(&self) -> ErrorCode {
        match self {
            AuthError::Missing | AuthError::Invalid(_) => ErrorCode::Unauthorized,
            AuthError::Expired => ErrorCode::TokenExpired,
            AuthError::Denied(_) => ErrorCode::PermissionDenied,
        }
    }

    /// The disconnect code when `connect` fails for this reason: 3002 (refresh
    /// the token, then reconnect) for an expired token, 3500 (do not reconnect
    /// with the same token) for a missing or invalid one, 3502 otherwise.
    pub fn disconnect(&self) -> DisconnectCode {
        match self {
            AuthError::Missing | AuthError::Invalid(_) => DisconnectCode::InvalidToken,
            AuthError::Expired => DisconnectCode::TokenExpired,
            AuthError::Denied(_) => DisconnectCode::Forbidden,
        }
    }
}

/// Verifies tokens and decides permissions. Implementations must be cheap to
/// call: [`Authenticator::allow`] runs on every subscribe, publish, presence
/// and history command.
pub trait Authenticator: Send + Sync + std::fmt::Debug {
    /// Checks the token of a `connect` (None: the client sent none).
    fn connect(&self, token: Option<&str>) -> Result<Arc<Identity>, AuthError>;

    /// Whether `who` may do `action` on `channel` (a concrete name, or a
    /// pattern for [`Action::Subscribe`]); `token` is the subscribe token the
    /// command carried, if any.
    fn allow(
        &self,
        who: &Identity,
        action: Action,
        channel: &str,
        token: Option<&str>,
    ) -> Result<(), AuthError>;

    /// Whether a connect token or API key is configured (for start-up messages).
    fn describe(&self) -> String {
        "anonymous clients allowed, every action permitted (no auth configured)".into()
    }
}

/// The default: every client is anonymous and may do everything. Tokens are
/// not verified (there is nothing to verify them with) and are ignored.
#[derive(Debug, Default)]
pub struct AllowAll {
    anonymous: Arc<Identity>,
}

impl Authenticator for AllowAll {
    fn connect(&self, _token: Option<&str>) -> Result<Arc<Identity>, AuthError> {
        Ok(self.anonymous.clone())
    }

    fn allow(&self, _: &Identity, _: Action, _: &str, _: Option<&str>) -> Result<(), AuthError> {
        Ok(())
    }
}

/// Current Unix time in seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Connections whose tokens expire, soonest first. Entries of connections that
/// ended before their expiry are dropped when their time comes (a `Weak` that no
/// longer upgrades), so the heap holds at most one small entry per connect made
/// within the longest token lifetime.
#[derive(Debug, Default)]
pub struct Expiries {
    heap: Mutex<BinaryHeap<Reverse<Entry>>>,
}

#[derive(Debug)]
struct Entry(u64, Weak<Client>);

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

impl Expiries {
    /// Notes that `client`'s token expires at Unix second `at`.
    pub fn add(&self, at: u64, client: &Arc<Client>) {
        crate::shard::lock(&self.heap).push(Reverse(Entry(at, Arc::downgrade(client))));
    }

    /// Removes and returns the still-connected clients whose tokens expired at
    /// or before Unix second `now`.
    pub fn due(&self, now: u64) -> Vec<Arc<Client>> {
        let mut heap = crate::shard::lock(&self.heap);
        let mut out = Vec::new();
        while heap.peek().is_some_and(|Reverse(e)| e.0 <= now) {
            if let Some(Reverse(Entry(_, weak))) = heap.pop() {
                out.extend(weak.upgrade());
            }
        }
        out
    }

    /// Entries waiting.
    pub fn len(&self) -> usize {
        crate::shard::lock(&self.heap).len()
    }

    /// True when no entry waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether a subscription `pattern` (tokens split on `.`, `*` one token, `>`
/// the rest) matches the concrete channel `name`. A pattern without wildcards
/// matches only itself.
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    let mut p = pattern.split('.');
    let mut n = name.split('.');
    loop {
        match (p.next(), n.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_proto::Encoding;

    #[test]
    fn patterns() {
        assert!(pattern_matches("a.*", "a.b"));
        assert!(!pattern_matches("a.*", "a.b.c"));
        assert!(pattern_matches("a.>", "a.b.c"));
        assert!(!pattern_matches("a.>", "a"));
        assert!(pattern_matches("a.b", "a.b"));
        assert!(!pattern_matches("a.b", "a.c"));
        assert!(pattern_matches(">", "x"));
    }

    #[test]
    fn expiries_pop_in_order_and_skip_gone_clients() {
        let e = Expiries::default();
        let a = Arc::new(Client::new(1, Encoding::Json, 1024, 0));
        let b = Arc::new(Client::new(2, Encoding::Json, 1024, 0));
        let c = Arc::new(Client::new(3, Encoding::Json, 1024, 0));
        e.add(30, &c);
        e.add(10, &a);
        e.add(20, &b);
        drop(b);
        assert!(e.due(5).is_empty());
        let due: Vec<u64> = e.due(25).iter().map(|c| c.id).collect();
        assert_eq!(due, vec![1]);
        assert_eq!(e.len(), 1);
        assert_eq!(e.due(30)[0].id, 3);
    }

    #[test]
    fn codes() {
        assert_eq!(AuthError::Expired.disconnect().code(), 3002);
        assert_eq!(AuthError::Missing.disconnect().code(), 3500);
        assert_eq!(AuthError::Invalid("x".into()).code().code(), 101);
        assert_eq!(AuthError::Denied("x".into()).code().code(), 104);
    }
}
