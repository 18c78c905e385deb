//! Bayeux errors: the `error` field of an unsuccessful reply, written
//! `code:args:message` as the Bayeux specification says (codes are
//! HTTP-like; args are comma-separated). Written down once here and in
//! docs/bayeux.md.

use std::fmt;

/// An error a Bayeux reply carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BayeuxError {
    /// HTTP-like code: 400 bad message, 401 bad credentials, 402 unknown
    /// client, 403 denied, 404 not found (a `/service/` channel), 408 too
    /// late, 409 conflict, 413 too large, 429 rate limited, 500 server
    /// failure, 503 unavailable.
    pub code: u16,
    /// What it is about (a channel, a field); may be empty.
    pub args: String,
    /// Human-readable detail.
    pub message: String,
}

impl BayeuxError {
    /// An error with `code` about `args`.
    pub fn new(code: u16, args: impl Into<String>, message: impl Into<String>) -> BayeuxError {
        BayeuxError {
            code,
            args: args.into(),
            message: message.into(),
        }
    }

    /// `402::Unknown client`: the `clientId` is not (or no longer) known;
    /// the reply's advice says `reconnect: handshake`.
    pub fn unknown_client() -> BayeuxError {
        BayeuxError::new(402, "", "Unknown client")
    }

    /// `400::…`: a malformed message.
    pub fn bad(message: impl Into<String>) -> BayeuxError {
        BayeuxError::new(400, "", message)
    }

    /// The Bayeux code for a Herald error code (docs/protocol.md §7).
    pub fn of_herald(
        code: u16,
        args: impl Into<String>,
        message: impl Into<String>,
    ) -> BayeuxError {
        let bayeux = match code {
            101 | 112 => 401,
            104 => 403,
            107 => 409,
            110 | 1009 => 413,
            108 => 429,
            114 => 503,
            100 => 500,
            _ => 400,
        };
        BayeuxError::new(bayeux, args, message)
    }
}

impl fmt::Display for BayeuxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Neither args nor message may hold the separator's meaning: a `:`
        // in args would split wrongly, so it is not escaped but kept (Bayeux
        // defines no escape); readers split on the first two colons only.
        write!(f, "{}:{}:{}", self.code, self.args, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_code_args_message() {
        assert_eq!(
            BayeuxError::unknown_client().to_string(),
            "402::Unknown client"
        );
        assert_eq!(
            BayeuxError::new(403, "/chat/x", "permission denied").to_string(),
            "403:/chat/x:permission denied"
        );
        assert_eq!(BayeuxError::of_herald(104, "/a", "no").code, 403);
        assert_eq!(BayeuxError::of_herald(109, "/a", "no").code, 400);
        assert_eq!(BayeuxError::of_herald(108, "", "slow down").code, 429);
        assert_eq!(BayeuxError::of_herald(112, "", "expired").code, 401);
        assert_eq!(BayeuxError::of_herald(110, "", "big").code, 413);
    }
}
