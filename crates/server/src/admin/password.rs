//! The admin password hash: PBKDF2-HMAC-SHA256 (ring, already a dependency
//! for TLS and tokens) in the PHC string format
//! `$pbkdf2-sha256$i=ITERATIONS$SALT$HASH` (salt and hash in unpadded
//! standard base64), which `herald admin-hash` prints and `[admin]
//! password_hash` holds. A leaf: no I/O, nothing from the rest of the crate.
//!
//! PBKDF2 rather than argon2: ring has it, so no new crate; the iteration
//! count is in the string, so it can be raised later without breaking
//! existing hashes. [`DEFAULT_ITERATIONS`] follows OWASP's 2023 advice for
//! PBKDF2-HMAC-SHA256.

use base64::Engine as _;
use std::num::NonZeroU32;

/// Iterations `herald admin-hash` uses unless told otherwise.
pub const DEFAULT_ITERATIONS: u32 = 600_000;
/// Fewest iterations a hash may have (fewer is refused as too weak).
pub const MIN_ITERATIONS: u32 = 1_000;
/// Most iterations a hash may have: one login must not take minutes.
pub const MAX_ITERATIONS: u32 = 10_000_000;

const PREFIX: &str = "$pbkdf2-sha256$i=";
const SALT_LEN: usize = 16;
const HASH_LEN: usize = 32;
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD_NO_PAD;

/// A parsed password hash.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash {
    iterations: NonZeroU32,
    salt: Vec<u8>,
    hash: Vec<u8>,
}

impl std::fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PasswordHash(pbkdf2-sha256, i={}, ..)", self.iterations)
    }
}

/// Why a string is not a password hash Herald accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// Not `$pbkdf2-sha256$i=N$SALT$HASH`.
    #[error("expected $pbkdf2-sha256$i=N$SALT$HASH (from `herald admin-hash`)")]
    Format,
    /// The iteration count is outside [`MIN_ITERATIONS`]..=[`MAX_ITERATIONS`].
    #[error("iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}")]
    Iterations,
    /// Salt shorter than 8 bytes or hash not 32 bytes.
    #[error("salt of at least 8 bytes and a 32-byte hash expected")]
    Lengths,
    /// The system's random source failed (no salt).
    #[error("no random salt: the system's random source failed")]
    Random,
}

impl PasswordHash {
    /// Parses the PHC string.
    pub fn parse(s: &str) -> Result<PasswordHash, HashError> {
        let rest = s.trim().strip_prefix(PREFIX).ok_or(HashError::Format)?;
        let mut parts = rest.split('$');
        let (Some(i), Some(salt), Some(hash), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(HashError::Format);
        };
        let i: u32 = i.parse().map_err(|_| HashError::Format)?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&i) {
            return Err(HashError::Iterations);
        }
        let salt = B64.decode(salt).map_err(|_| HashError::Format)?;
        let hash = B64.decode(hash).map_err(|_| HashError::Format)?;
        if salt.len() < 8 || hash.len() != HASH_LEN {
            return Err(HashError::Lengths);
        }
        Ok(PasswordHash {
            iterations: NonZeroU32::new(i).ok_or(HashError::Iterations)?,
            salt,
            hash,
        })
    }

    /// Hashes `password` with a fresh random salt.
    pub fn new(password: &str, iterations: u32) -> Result<PasswordHash, HashError> {
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(HashError::Iterations);
        }
        let mut salt = vec![0u8; SALT_LEN];
        getrandom::fill(&mut salt).map_err(|_| HashError::Random)?;
        let iterations = NonZeroU32::new(iterations).ok_or(HashError::Iterations)?;
        let mut hash = vec![0u8; HASH_LEN];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            iterations,
            &salt,
            password.as_bytes(),
            &mut hash,
        );
        Ok(PasswordHash {
            iterations,
            salt,
            hash,
        })
    }

    /// Whether `password` is the one hashed (constant time in the
    /// comparison; the derivation takes as long for every guess).
    pub fn verify(&self, password: &str) -> bool {
        ring::pbkdf2::verify(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            self.iterations,
            &self.salt,
            password.as_bytes(),
            &self.hash,
        )
        .is_ok()
    }
}

impl std::fmt::Display for PasswordHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{PREFIX}{}${}${}",
            self.iterations,
            B64.encode(&self.salt),
            B64.encode(&self.hash)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only_and_round_trips() {
        let h = PasswordHash::new("correct horse", MIN_ITERATIONS).unwrap();
        assert!(h.verify("correct horse"));
        assert!(!h.verify("correct horsf"));
        assert!(!h.verify(""));
        let s = h.to_string();
        assert!(s.starts_with("$pbkdf2-sha256$i=1000$"), "{s}");
        let back = PasswordHash::parse(&s).unwrap();
        assert_eq!(back, h);
        assert!(back.verify("correct horse"));
        assert!(!format!("{h:?}").contains(&B64.encode(&h.hash)));
    }

    #[test]
    fn a_known_vector_verifies() {
        // RFC 7914 §11's PBKDF2-HMAC-SHA256 vector ("passwd", "salt", 1
        // iteration) is below the minimum count; this one was computed
        // with Python's hashlib.pbkdf2_hmac('sha256', b'password',
        // b'saltsaltsalt', 1000).
        let s = "$pbkdf2-sha256$i=1000$c2FsdHNhbHRzYWx0$\
                 sYIePhT5IXESDKvnouJXtE5pTJ6Znbmef4vViYmc9Uc";
        let h = PasswordHash::parse(s).unwrap();
        assert!(h.verify("password"));
        assert!(!h.verify("Password"));
    }

    #[test]
    fn bad_strings_are_refused() {
        let good = PasswordHash::new("x", MIN_ITERATIONS).unwrap().to_string();
        let (_, tail) = good.split_once("$i=1000").unwrap();
        for (bad, want) in [
            ("", HashError::Format),
            ("plaintext", HashError::Format),
            (
                "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA",
                HashError::Format,
            ),
            (
                &format!("$pbkdf2-sha256$i=999{tail}"),
                HashError::Iterations,
            ),
            (
                &format!("$pbkdf2-sha256$i=99999999999{tail}"),
                HashError::Format,
            ),
            (&format!("$pbkdf2-sha256$i=abc{tail}"), HashError::Format),
            ("$pbkdf2-sha256$i=1000$c2FsdA$aGFzaA", HashError::Lengths),
            ("$pbkdf2-sha256$i=1000$!!!$aGFzaA", HashError::Format),
            (&format!("{good}$extra"), HashError::Format),
        ] {
            assert_eq!(PasswordHash::parse(bad), Err(want), "{bad}");
        }
        assert_eq!(
            PasswordHash::new("x", 10).unwrap_err(),
            HashError::Iterations
        );
    }
}
