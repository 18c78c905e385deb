//! JSON Web Tokens (RFC 7519) in compact JWS form, verified with ring: HS256
//! with a shared secret, RS256 and ES256 with public keys (PEM or JWKS).
//!
//! Only those three algorithms exist here: `alg: none`, any other algorithm,
//! and a header naming an algorithm the configured keys cannot verify are
//! refused before any claim is read, so an attacker cannot pick the algorithm
//! (no "HS256 with the RSA public key as the secret" confusion: HMAC only ever
//! uses the configured secret). Signatures are checked in constant time by ring.
//! Claims used: `sub` (user id), `exp` (required on nothing, honoured when
//! present), `nbf`, `channels` (grants, connection tokens) and `channel`
//! (subscribe tokens).

use super::keys::{Jwk, PublicKey, SigningKey};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::signature::{self, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

/// The longest token accepted, in bytes (before any decoding).
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not three base64url parts of JSON, or too long.
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// `alg` is not HS256, RS256 or ES256 (`none` included).
    #[error("unsupported algorithm {0:?}")]
    UnsupportedAlg(String),
    /// No configured key for this algorithm (or `kid`).
    #[error("no key configured for {0}")]
    NoKey(&'static str),
    /// The signature does not verify.
    #[error("bad signature")]
    BadSignature,
    /// `exp` has passed.
    #[error("token expired")]
    Expired,
    /// `nbf` is in the future.
    #[error("token not yet valid")]
    NotYetValid,
}

/// The claims Herald reads (others are ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// User id.
    #[serde(default)]
    pub sub: String,
    /// Expiry, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<u64>,
    /// Not before, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// Issued at, Unix seconds (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// Channels or patterns a connection token grants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
    /// The channel a subscribe token is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Connection info (any JSON value) that presence and join/leave show
    /// beside the user id: a display name, an avatar, a device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

/// What a token may be verified with.
#[derive(Default)]
pub struct Verifier {
    hmac: Option<ring::hmac::Key>,
    keys: Vec<Jwk>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("hmac", &self.hmac.is_some())
            .field("public_keys", &self.keys.len())
            .finish()
    }
}

impl Verifier {
    /// Verifies with an HMAC secret and/or public keys.
    pub fn new(hmac_secret: Option<&[u8]>, keys: Vec<Jwk>) -> Verifier {
        Verifier {
            hmac: hmac_secret.map(|s| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, s)),
            keys,
        }
    }

    /// Whether any key is configured.
    pub fn is_configured(&self) -> bool {
        self.hmac.is_some() || !self.keys.is_empty()
    }

    /// Checks the token's signature and time claims at Unix second `now`.
    pub fn verify(&self, token: &str, now: u64) -> Result<Claims, TokenError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(TokenError::Malformed("token too long"));
        }
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed("expected three dot-separated parts"));
        };
        let decode = |part: &str, what| {
            URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_| TokenError::Malformed(what))
        };
        let header: Header = serde_json::from_slice(&decode(h, "header is not base64url")?)
            .map_err(|_| TokenError::Malformed("header is not a JSON object with alg"))?;
        let sig = decode(s, "signature is not base64url")?;
        let signed = &token.as_bytes()[..h.len() + 1 + p.len()];
        match header.alg.as_str() {
            "HS256" => {
                let key = self.hmac.as_ref().ok_or(TokenError::NoKey("HS256"))?;
                ring::hmac::verify(key, signed, &sig).map_err(|_| TokenError::BadSignature)?;
            }
            "RS256" | "ES256" => self.verify_public(&header, signed, &sig)?,
            other => return Err(TokenError::UnsupportedAlg(other.chars().take(32).collect())),
        }
        let claims: Claims = serde_json::from_slice(&decode(p, "payload is not base64url")?)
            .map_err(|_| TokenError::Malformed("payload is not a JSON object of known claims"))?;
        if claims.exp.is_some_and(|exp| exp <= now) {
            return Err(TokenError::Expired);
        }
        if claims.nbf.is_some_and(|nbf| nbf > now) {
            return Err(TokenError::NotYetValid);
        }
        Ok(claims)
    }

    fn verify_public(&self, header: &Header, signed: &[u8], sig: &[u8]) -> Result<(), TokenError> {
        let rsa = header.alg == "RS256";
        let alg: &'static str = if rsa { "RS256" } else { "ES256" };
        let mut tried = false;
        for k in &self.keys {
            if let (Some(want), Some(have)) = (&header.kid, &k.kid) {
                if want != have {
                    continue;
                }
            }
            let ok = match (&k.key, rsa) {
                (PublicKey::Rsa(c), true) => {
                    tried = true;
                    c.verify(&signature::RSA_PKCS1_2048_8192_SHA256, signed, sig)
                        .is_ok()
                }
                (PublicKey::EcP256(point), false) => {
                    tried = true;
                    UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                        .verify(signed, sig)
                        .is_ok()
                }
                _ => false,
            };
            if ok {
                return Ok(());
            }
        }
        if tried {
            Err(TokenError::BadSignature)
        } else {
            Err(TokenError::NoKey(alg))
        }
    }
}

/// Signs `claims` into a compact JWS with `key` (HS256, RS256 or ES256).
pub fn sign(claims: &Claims, key: &SigningKey, kid: Option<&str>) -> Result<String, TokenError> {
    let mut header = serde_json::json!({"alg": key.alg(), "typ": "JWT"});
    if let Some(kid) = kid {
        header["kid"] = kid.into();
    }
    let payload = serde_json::to_vec(claims).map_err(|_| TokenError::Malformed("claims"))?;
    let mut token = URL_SAFE_NO_PAD.encode(header.to_string());
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(payload));
    let rng = ring::rand::SystemRandom::new();
    let sig = match key {
        SigningKey::Hmac(k) => ring::hmac::sign(k, token.as_bytes()).as_ref().to_vec(),
        SigningKey::Rsa(k) => {
            let mut sig = vec![0u8; k.public().modulus_len()];
            k.sign(
                &signature::RSA_PKCS1_SHA256,
                &rng,
                token.as_bytes(),
                &mut sig,
            )
            .map_err(|_| TokenError::BadSignature)?;
            sig
        }
        SigningKey::Ec(k) => k
            .sign(&rng, token.as_bytes())
            .map_err(|_| TokenError::BadSignature)?
            .as_ref()
            .to_vec(),
    };
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(sig));
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn hs(claims: &Claims) -> String {
        sign(claims, &SigningKey::hmac(SECRET), None).expect("sign")
    }

    #[test]
    fn hs256_round_trip_and_refusals() {
        let v = Verifier::new(Some(SECRET), Vec::new());
        let c = Claims {
            sub: "u1".into(),
            exp: Some(2000),
            ..Claims::default()
        };
        let t = hs(&c);
        assert_eq!(v.verify(&t, 1000), Ok(c.clone()));
        assert_eq!(v.verify(&t, 2000), Err(TokenError::Expired));
        // A flipped payload byte breaks the signature.
        let mut forged: Vec<u8> = t.clone().into_bytes();
        let mid = t.find('.').expect("dot") + 3;
        forged[mid] = if forged[mid] == b'A' { b'B' } else { b'A' };
        let forged = String::from_utf8(forged).expect("ascii");
        assert!(matches!(
            v.verify(&forged, 1000),
            Err(TokenError::BadSignature | TokenError::Malformed(_))
        ));
        let other = sign(
            &c,
            &SigningKey::hmac(b"another secret of 32 bytes......"),
            None,
        )
        .expect("sign");
        assert_eq!(v.verify(&other, 1000), Err(TokenError::BadSignature));
        let not_yet = hs(&Claims {
            nbf: Some(5000),
            ..c.clone()
        });
        assert_eq!(v.verify(&not_yet, 1000), Err(TokenError::NotYetValid));
    }

    #[test]
    fn alg_none_and_garbage_are_refused() {
        let v = Verifier::new(Some(SECRET), Vec::new());
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(r#"{"sub":"admin"}"#);
        for t in [
            format!("{header}.{payload}."),
            format!("{header}.{payload}"),
            "".into(),
            "a.b.c.d".into(),
            "...".into(),
            format!(
                "{}.{payload}.",
                URL_SAFE_NO_PAD.encode(r#"{"alg":"HS512"}"#)
            ),
            format!("{}.{payload}.", URL_SAFE_NO_PAD.encode("[]")),
            "x".repeat(MAX_TOKEN_LEN + 1),
        ] {
            assert!(v.verify(&t, 0).is_err(), "{t}");
        }
        assert_eq!(
            v.verify(&format!("{header}.{payload}."), 0),
            Err(TokenError::UnsupportedAlg("none".into()))
        );
        let no_keys = Verifier::default();
        assert_eq!(
            no_keys.verify(&hs(&Claims::default()), 0),
            Err(TokenError::NoKey("HS256"))
        );
    }

    /// Fuzz-style: thousands of mutations of valid HS256 and ES256 tokens
    /// never panic and are never accepted (the signature covers the exact
    /// text, and base64url with trailing bits set is refused).
    #[test]
    fn mutated_tokens_never_verify() {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &rng,
        )
        .expect("ec key");
        let ec = SigningKey::from_pkcs8(pkcs8.as_ref()).expect("pkcs8");
        let SigningKey::Ec(pair) = &ec else {
            panic!("not EC")
        };
        use ring::signature::KeyPair;
        let point = pair.public_key().as_ref().to_vec();
        let v = Verifier::new(
            Some(SECRET),
            vec![Jwk {
                kid: None,
                key: PublicKey::EcP256(point),
            }],
        );
        let claims = Claims {
            sub: "u".into(),
            channels: vec!["a".into()],
            ..Claims::default()
        };
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for key in [SigningKey::hmac(SECRET), ec] {
            let token = sign(&claims, &key, None).expect("sign");
            assert!(v.verify(&token, 0).is_ok());
            let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ ";
            for _ in 0..5_000 {
                let mut t = token.clone().into_bytes();
                for _ in 0..1 + next() % 3 {
                    let i = (next() as usize) % t.len();
                    match next() % 3 {
                        0 => t[i] = alphabet[(next() as usize) % alphabet.len()],
                        1 => {
                            t.remove(i);
                        }
                        _ => t.insert(i, alphabet[(next() as usize) % alphabet.len()]),
                    }
                }
                let t = String::from_utf8(t).expect("ascii");
                if t != token {
                    assert!(v.verify(&t, 0).is_err(), "accepted a mutated token {t}");
                }
            }
        }
    }
}
