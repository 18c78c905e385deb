//! Channel names: what is allowed and why.
//!
//! Names are at most [`MAX_CHANNEL_LEN`] bytes of ASCII letters, digits and
//! `_ - . : @ / = ,`. `*` and `>` are reserved for wildcard patterns, and
//! everything else (spaces, quotes, control characters, non-ASCII) is refused so
//! that names are safe in logs, URLs (SSE `?channel=`), Redis keys and metrics
//! labels without escaping.

use herald_proto::ErrorCode;

/// The longest channel name accepted, in bytes.
pub const MAX_CHANNEL_LEN: usize = 255;

/// Checks a concrete channel name (no wildcards).
pub fn validate(name: &str) -> Result<(), ErrorCode> {
    if name.is_empty() || name.len() > MAX_CHANNEL_LEN {
        return Err(ErrorCode::InvalidChannel);
    }
    if name.bytes().all(allowed) {
        Ok(())
    } else {
        Err(ErrorCode::InvalidChannel)
    }
}

fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-.:@/=,".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate("chat:room-1/general").is_ok());
        assert!(validate("").is_err());
        assert!(validate("a b").is_err());
        assert!(validate("news.*").is_err());
        assert!(validate("ünï").is_err());
        assert!(validate(&"x".repeat(256)).is_err());
        assert!(validate(&"x".repeat(255)).is_ok());
    }
}
