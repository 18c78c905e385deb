//! Channel names and subscription patterns: what is allowed and why.
//!
//! Names are at most [`MAX_CHANNEL_LEN`] bytes of ASCII letters, digits and
//! `_ - . : @ / = ,`. `*` and `>` are reserved for wildcard patterns, and
//! everything else (spaces, quotes, control characters, non-ASCII) is refused so
//! that names are safe in logs, URLs (SSE `?channel=`), Redis keys and metrics
//! labels without escaping.
//!
//! A name is split into tokens on `.` (see [`crate::routing`]). Concrete names
//! may contain empty tokens (`a..b`, `a.`): they were valid before wildcards
//! existed and stay valid. Patterns may not, because an empty token next to a
//! wildcard (`a..*`) is almost certainly a typo and would only ever match names
//! that are typos themselves.

use herald_proto::ErrorCode;

/// The longest channel name (or pattern) accepted, in bytes.
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

/// Checks a subscription pattern: the character rules of [`validate`], plus
/// `*` and `>` allowed only as whole tokens, `>` only as the last token, and no
/// empty token anywhere. A pattern without wildcards passes too (it matches
/// only the identical name), provided it has no empty token.
pub fn validate_pattern(pattern: &str) -> Result<(), ErrorCode> {
    if pattern.is_empty() || pattern.len() > MAX_CHANNEL_LEN {
        return Err(ErrorCode::InvalidChannel);
    }
    let mut tokens = pattern.split('.').peekable();
    while let Some(token) = tokens.next() {
        let ok = match token {
            "" => false,
            "*" => true,
            ">" => tokens.peek().is_none(),
            t => t.bytes().all(allowed),
        };
        if !ok {
            return Err(ErrorCode::InvalidChannel);
        }
    }
    Ok(())
}

fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-.:@/=,".contains(&b)
}

/// The namespace of a channel name: the part before the first `:`, or `""`
/// for names without one. Permissions and history retention are configured
/// per namespace.
pub fn namespace(channel: &str) -> &str {
    channel.split_once(':').map_or("", |(ns, _)| ns)
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
        assert!(validate("news.>").is_err());
        assert!(validate("ünï").is_err());
        assert!(validate(&"x".repeat(256)).is_err());
        assert!(validate(&"x".repeat(255)).is_ok());
        // Empty tokens stay legal in concrete names.
        assert!(validate("a..b").is_ok());
    }

    #[test]
    fn patterns() {
        for ok in [
            "news.*",
            "news.>",
            ">",
            "*",
            "*.*",
            "a.*.c",
            "*.b.>",
            "chat:room-1/general.*",
            "news.sport",
        ] {
            assert_eq!(validate_pattern(ok), Ok(()), "{ok}");
        }
        for bad in [
            "", "news.*x", "news.x*", "news.>x", "a.>.b", ">.a", "> ", "a..b", "a..*", ".a.*",
            "a.*.", "news.", "a b.*", "ünï.>",
        ] {
            assert_eq!(
                validate_pattern(bad),
                Err(ErrorCode::InvalidChannel),
                "{bad:?}"
            );
        }
        let long = format!("{}.>", "x".repeat(253));
        assert!(validate_pattern(&long).is_ok());
        let too_long = format!("{}.>", "x".repeat(254));
        assert!(validate_pattern(&too_long).is_err());
    }
}
