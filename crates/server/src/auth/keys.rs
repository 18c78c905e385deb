//! Key material for verifying (and, for `herald token`, signing) JWTs: PEM
//! files, the two DER structures public keys come in, and JWKS files.
//!
//! Why hand-written: ring verifies RSA from its modulus and exponent and ECDSA
//! from the raw curve point, so all that is needed is to pull those out of a
//! `SubjectPublicKeyInfo` (RFC 5280) or a JWK (RFC 7517). A full ASN.1 or JOSE
//! crate would bring more code (and its own crypto backend) than this module.
//! The DER reader only accepts definite lengths and never indexes past its
//! input.

use base64::Engine;
use ring::signature::{self, RsaPublicKeyComponents};
use serde::Deserialize;

/// Why key material could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Not PEM, or no block of the expected kind.
    #[error("not a PEM file with a {0} block")]
    Pem(&'static str),
    /// The DER inside is not a supported key.
    #[error("unsupported or malformed key: {0}")]
    Der(&'static str),
    /// The JWKS file is not valid JSON of the expected shape.
    #[error("invalid JWKS: {0}")]
    Jwks(String),
}

/// A public key a token may be verified with.
#[derive(Debug, Clone)]
pub enum PublicKey {
    /// RSA (RS256).
    Rsa(RsaPublicKeyComponents<Vec<u8>>),
    /// ECDSA P-256 (ES256): the uncompressed point `04 ‖ x ‖ y`.
    EcP256(Vec<u8>),
}

/// A public key and its `kid`, if it has one.
#[derive(Debug, Clone)]
pub struct Jwk {
    /// Key id, matched against the token header's `kid` when both are present.
    pub kid: Option<String>,
    /// The key.
    pub key: PublicKey,
}

/// The base64 body of the first `-----BEGIN {label}-----` block, decoded.
pub fn pem_block(text: &str, label: &str) -> Option<Vec<u8>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    let b64: String = text[start..stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// Reads one DER element: (tag, contents, rest).
fn tlv(buf: &[u8]) -> Result<(u8, &[u8], &[u8]), KeyError> {
    let bad = KeyError::Der("truncated DER");
    let (&tag, rest) = buf.split_first().ok_or(KeyError::Der("empty DER"))?;
    let (&first, mut rest) = rest.split_first().ok_or(bad)?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err(KeyError::Der("bad DER length"));
        }
        let mut len = 0usize;
        for &b in &rest[..n] {
            len = (len << 8) | usize::from(b);
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return Err(KeyError::Der("truncated DER"));
    }
    Ok((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const OID: u8 = 0x06;
/// 1.2.840.113549.1.1.1
const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// 1.2.840.10045.2.1
const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// 1.2.840.10045.3.1.7 (P-256)
const PRIME256V1: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

fn expect<'a>(
    tag: u8,
    buf: &'a [u8],
    what: &'static str,
) -> Result<(&'a [u8], &'a [u8]), KeyError> {
    let (t, body, rest) = tlv(buf)?;
    if t != tag {
        return Err(KeyError::Der(what));
    }
    Ok((body, rest))
}

/// Parses a PKCS#1 `RSAPublicKey` (SEQUENCE { n INTEGER, e INTEGER }).
pub fn rsa_public_key(der: &[u8]) -> Result<PublicKey, KeyError> {
    let (seq, _) = expect(SEQUENCE, der, "RSAPublicKey is not a SEQUENCE")?;
    let (n, rest) = expect(INTEGER, seq, "RSA modulus missing")?;
    let (e, _) = expect(INTEGER, rest, "RSA exponent missing")?;
    let strip = |x: &[u8]| {
        let i = x.iter().position(|b| *b != 0).unwrap_or(x.len());
        x[i..].to_vec()
    };
    Ok(PublicKey::Rsa(RsaPublicKeyComponents {
        n: strip(n),
        e: strip(e),
    }))
}

/// Parses a `SubjectPublicKeyInfo` holding an RSA or P-256 key.
pub fn spki(der: &[u8]) -> Result<PublicKey, KeyError> {
    let (seq, _) = expect(SEQUENCE, der, "SubjectPublicKeyInfo is not a SEQUENCE")?;
    let (alg, rest) = expect(SEQUENCE, seq, "algorithm missing")?;
    let (bits, _) = expect(BIT_STRING, rest, "public key missing")?;
    let (oid, params) = expect(OID, alg, "algorithm OID missing")?;
    let key = match bits.split_first() {
        Some((0, key)) => key,
        _ => return Err(KeyError::Der("bad BIT STRING")),
    };
    if oid == RSA_ENCRYPTION {
        rsa_public_key(key)
    } else if oid == EC_PUBLIC_KEY {
        let (curve, _) = expect(OID, params, "EC curve missing")?;
        if curve != PRIME256V1 {
            return Err(KeyError::Der("only the P-256 curve is supported (ES256)"));
        }
        if key.len() != 65 || key[0] != 4 {
            return Err(KeyError::Der("EC point is not uncompressed P-256"));
        }
        Ok(PublicKey::EcP256(key.to_vec()))
    } else {
        Err(KeyError::Der(
            "only RSA and EC P-256 public keys are supported",
        ))
    }
}

/// Reads a PEM public key: `PUBLIC KEY` (SPKI, RSA or P-256) or `RSA PUBLIC KEY`.
pub fn public_key_pem(text: &str) -> Result<PublicKey, KeyError> {
    if let Some(der) = pem_block(text, "PUBLIC KEY") {
        return spki(&der);
    }
    if let Some(der) = pem_block(text, "RSA PUBLIC KEY") {
        return rsa_public_key(&der);
    }
    Err(KeyError::Pem("PUBLIC KEY"))
}

#[derive(Deserialize)]
struct JwksFile {
    keys: Vec<JwkJson>,
}

#[derive(Deserialize)]
struct JwkJson {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default, rename = "use")]
    use_: Option<String>,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
}

fn b64url(field: &Option<String>, name: &str) -> Result<Vec<u8>, KeyError> {
    let s = field
        .as_deref()
        .ok_or_else(|| KeyError::Jwks(format!("missing {name}")))?;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .map_err(|_| KeyError::Jwks(format!("{name} is not base64url")))
}

/// Parses a JWKS document (RFC 7517): RSA keys and EC P-256 keys are used;
/// keys for encryption (`"use": "enc"`) and other types are skipped.
pub fn jwks(text: &str) -> Result<Vec<Jwk>, KeyError> {
    let file: JwksFile = serde_json::from_str(text).map_err(|e| KeyError::Jwks(e.to_string()))?;
    let mut out = Vec::new();
    for k in file.keys {
        if k.use_.as_deref().is_some_and(|u| u != "sig") {
            continue;
        }
        let key = match (k.kty.as_str(), k.crv.as_deref()) {
            ("RSA", _) => PublicKey::Rsa(RsaPublicKeyComponents {
                n: b64url(&k.n, "n")?,
                e: b64url(&k.e, "e")?,
            }),
            ("EC", Some("P-256")) => {
                let (x, y) = (b64url(&k.x, "x")?, b64url(&k.y, "y")?);
                if x.len() != 32 || y.len() != 32 {
                    return Err(KeyError::Jwks("P-256 coordinates must be 32 bytes".into()));
                }
                let mut point = vec![4u8];
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                PublicKey::EcP256(point)
            }
            _ => continue,
        };
        out.push(Jwk { kid: k.kid, key });
    }
    if out.is_empty() {
        return Err(KeyError::Jwks("no RSA or EC P-256 signing key".into()));
    }
    Ok(out)
}

/// A private key for `herald token`: HMAC secret, RSA or P-256 (PKCS#8 PEM).
pub enum SigningKey {
    /// HS256.
    Hmac(ring::hmac::Key),
    /// RS256.
    Rsa(signature::RsaKeyPair),
    /// ES256.
    Ec(signature::EcdsaKeyPair),
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SigningKey::Hmac(_) => "SigningKey::Hmac",
            SigningKey::Rsa(_) => "SigningKey::Rsa",
            SigningKey::Ec(_) => "SigningKey::Ec",
        })
    }
}

impl SigningKey {
    /// An HS256 key.
    pub fn hmac(secret: &[u8]) -> SigningKey {
        SigningKey::Hmac(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret))
    }

    /// A PKCS#8 (`PRIVATE KEY`) or PKCS#1 (`RSA PRIVATE KEY`) PEM private key.
    pub fn from_pem(text: &str) -> Result<SigningKey, KeyError> {
        if let Some(der) = pem_block(text, "RSA PRIVATE KEY") {
            return signature::RsaKeyPair::from_der(&der)
                .map(SigningKey::Rsa)
                .map_err(|_| KeyError::Der("bad RSA private key"));
        }
        let der = pem_block(text, "PRIVATE KEY").ok_or(KeyError::Pem("PRIVATE KEY"))?;
        SigningKey::from_pkcs8(&der)
    }

    /// A PKCS#8 DER private key (RSA or P-256).
    pub fn from_pkcs8(der: &[u8]) -> Result<SigningKey, KeyError> {
        if let Ok(k) = signature::RsaKeyPair::from_pkcs8(der) {
            return Ok(SigningKey::Rsa(k));
        }
        let rng = ring::rand::SystemRandom::new();
        signature::EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
            .map(SigningKey::Ec)
            .map_err(|_| KeyError::Der("PKCS#8 key is neither RSA nor EC P-256"))
    }

    /// The JWS algorithm name.
    pub fn alg(&self) -> &'static str {
        match self {
            SigningKey::Hmac(_) => "HS256",
            SigningKey::Rsa(_) => "RS256",
            SigningKey::Ec(_) => "ES256",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_der_is_an_error_not_a_panic() {
        for bad in [
            &[][..],
            &[0x30],
            &[0x30, 0x85, 1, 2, 3, 4, 5],
            &[0x30, 0x82, 0xff],
            &[0x30, 0x03, 0x02, 0x05, 0x00],
            &[0x30, 0x00],
        ] {
            assert!(spki(bad).is_err());
            assert!(rsa_public_key(bad).is_err());
        }
        assert!(public_key_pem("nope").is_err());
        assert!(jwks("{\"keys\":[]}").is_err());
        assert!(jwks("[").is_err());
        assert!(jwks(r#"{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}"#).is_err());
    }
}
