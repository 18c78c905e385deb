//! The protocol's two signatures, both HMAC-SHA256 with the app's secret in
//! lower-case hex (ring, as Herald's JWT code uses):
//!
//! - **Channel authorisation.** A client may join `private-*` or
//!   `presence-*` only with `auth = "<key>:<hex HMAC of
//!   socket_id:channel[:channel_data]>"`, made by the app's own auth endpoint
//!   (the server SDKs' `authorizeChannel`). The socket id binds the signature
//!   to one connection, so it cannot be replayed on another.
//! - **The HTTP API's signed query.** Every request carries `auth_key`,
//!   `auth_timestamp`, `auth_version=1.0`, `body_md5` (with a body) and
//!   `auth_signature`, the HMAC of `METHOD\nPATH\nQUERY`, QUERY being every
//!   other parameter sorted by name as `name=value` joined by `&`. A timestamp
//!   more than [`TIMESTAMP_WINDOW`] seconds away from the server's clock is
//!   refused, which bounds how long a captured request can be replayed.
//!
//! Comparisons go through `ring::hmac::verify` (constant time).

use ring::hmac;

/// How far (seconds, either way) `auth_timestamp` may be from the server's
/// clock: Pusher's own limit.
pub const TIMESTAMP_WINDOW: u64 = 600;

use crate::hex::from_hex;
pub use crate::hex::to_hex;

/// HMAC-SHA256 of `message` under `secret`, in lower-case hex.
pub fn hmac_hex(secret: &[u8], message: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    to_hex(hmac::sign(&key, message).as_ref())
}

/// Whether `signature_hex` is the HMAC-SHA256 of `message` under `secret`.
pub fn verify_hex(secret: &[u8], message: &[u8], signature_hex: &str) -> bool {
    let Some(sig) = from_hex(signature_hex) else {
        return false;
    };
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    hmac::verify(&key, message, &sig).is_ok()
}

fn channel_message(socket_id: &str, channel: &str, channel_data: Option<&str>) -> String {
    match channel_data {
        Some(d) => format!("{socket_id}:{channel}:{d}"),
        None => format!("{socket_id}:{channel}"),
    }
}

/// The `auth` value an app's auth endpoint returns for `socket_id` joining
/// `channel` (with `channel_data` on presence channels).
pub fn channel_auth(
    key: &str,
    secret: &[u8],
    socket_id: &str,
    channel: &str,
    channel_data: Option<&str>,
) -> String {
    let sig = hmac_hex(
        secret,
        channel_message(socket_id, channel, channel_data).as_bytes(),
    );
    format!("{key}:{sig}")
}

/// The `auth` value an app's user-authentication endpoint returns for
/// `socket_id` signing in with `user_data` (the server SDKs'
/// `authenticateUser`): the HMAC of `socket_id::user::user_data`.
pub fn user_auth(key: &str, secret: &[u8], socket_id: &str, user_data: &str) -> String {
    let sig = hmac_hex(secret, format!("{socket_id}::user::{user_data}").as_bytes());
    format!("{key}:{sig}")
}

/// Checks a client's `pusher:signin` `auth`.
pub fn verify_user_auth(
    key: &str,
    secret: &[u8],
    socket_id: &str,
    user_data: &str,
    auth: &str,
) -> Result<(), AuthError> {
    let (given_key, sig) = auth.split_once(':').ok_or(AuthError::WrongKey)?;
    if given_key != key {
        return Err(AuthError::WrongKey);
    }
    let message = format!("{socket_id}::user::{user_data}");
    if verify_hex(secret, message.as_bytes(), sig) {
        Ok(())
    } else {
        Err(AuthError::BadSignature)
    }
}

/// Why a channel authorisation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `auth` on a channel that needs one.
    #[error("this channel needs an auth signature")]
    Missing,
    /// `auth` is not `<key>:<hex>`, or names another app's key.
    #[error("auth must be \"<app key>:<signature>\" with this app's key")]
    WrongKey,
    /// The signature does not match.
    #[error("invalid signature: expected the HMAC SHA256 hex digest of socket_id:channel[:channel_data]")]
    BadSignature,
}

/// Checks a client's `auth` for joining `channel`.
pub fn verify_channel_auth(
    key: &str,
    secret: &[u8],
    socket_id: &str,
    channel: &str,
    channel_data: Option<&str>,
    auth: Option<&str>,
) -> Result<(), AuthError> {
    let auth = auth.ok_or(AuthError::Missing)?;
    let (given_key, sig) = auth.split_once(':').ok_or(AuthError::WrongKey)?;
    if given_key != key {
        return Err(AuthError::WrongKey);
    }
    let message = channel_message(socket_id, channel, channel_data);
    if verify_hex(secret, message.as_bytes(), sig) {
        Ok(())
    } else {
        Err(AuthError::BadSignature)
    }
}

/// Why an HTTP API request's signature was refused (all answered 401, with
/// the message as the body).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// One of the `auth_*` parameters is absent.
    #[error("missing query parameter {0}")]
    Missing(&'static str),
    /// `auth_version` is not `1.0`.
    #[error("unsupported auth_version (expected 1.0)")]
    Version,
    /// `auth_timestamp` is not a number of seconds.
    #[error("auth_timestamp is not a number")]
    Timestamp,
    /// `auth_timestamp` is outside the window around the server's clock.
    #[error("timestamp expired: auth_timestamp is more than {TIMESTAMP_WINDOW} s from the server's time ({0})")]
    Stale(u64),
    /// `body_md5` does not match the body.
    #[error("body_md5 does not match the body")]
    BodyMd5,
    /// The signature does not match.
    #[error("invalid signature: expected HMAC SHA256 hex digest of METHOD\\nPATH\\nsorted query")]
    BadSignature,
    /// The query is not `name=value` pairs in UTF-8.
    #[error("malformed query string")]
    Malformed,
}

/// An HTTP API request's query, parsed and percent-decoded.
#[derive(Debug, Clone, Default)]
pub struct SignedQuery {
    params: Vec<(String, String)>,
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

impl SignedQuery {
    /// Parses a query string (without the `?`).
    pub fn parse(query: &str) -> Result<SignedQuery, QueryError> {
        let mut params = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = percent_decode(k).ok_or(QueryError::Malformed)?;
            let v = percent_decode(v).ok_or(QueryError::Malformed)?;
            params.push((k, v));
        }
        Ok(SignedQuery { params })
    }

    /// The value of parameter `name`, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `auth_key` (which app's secret to check with).
    pub fn key(&self) -> Result<&str, QueryError> {
        self.get("auth_key").ok_or(QueryError::Missing("auth_key"))
    }

    /// Checks the request's signature with the app's `secret`: version,
    /// timestamp within the window around `now` (Unix seconds), body MD5 and
    /// HMAC.
    pub fn verify(
        &self,
        secret: &[u8],
        method: &str,
        path: &str,
        body: &[u8],
        now: u64,
    ) -> Result<(), QueryError> {
        self.key()?;
        let signature = self
            .get("auth_signature")
            .ok_or(QueryError::Missing("auth_signature"))?;
        if self.get("auth_version") != Some("1.0") {
            return Err(QueryError::Version);
        }
        let ts: u64 = self
            .get("auth_timestamp")
            .ok_or(QueryError::Missing("auth_timestamp"))?
            .parse()
            .map_err(|_| QueryError::Timestamp)?;
        if ts.abs_diff(now) > TIMESTAMP_WINDOW {
            return Err(QueryError::Stale(now));
        }
        match self.get("body_md5") {
            Some(md5) if !md5.eq_ignore_ascii_case(&crate::md5::hex(body)) => {
                return Err(QueryError::BodyMd5)
            }
            None if !body.is_empty() => return Err(QueryError::Missing("body_md5")),
            _ => {}
        }
        let message = self.string_to_sign(method, path);
        if verify_hex(secret, message.as_bytes(), signature) {
            Ok(())
        } else {
            Err(QueryError::BadSignature)
        }
    }

    /// `METHOD\nPATH\nQUERY`, QUERY being every parameter but
    /// `auth_signature`, sorted by name, as `name=value` joined by `&`.
    pub fn string_to_sign(&self, method: &str, path: &str) -> String {
        let mut pairs: Vec<&(String, String)> = self
            .params
            .iter()
            .filter(|(k, _)| k != "auth_signature")
            .collect();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!(
            "{}\n{}\n{}",
            method.to_ascii_uppercase(),
            path,
            query.join("&")
        )
    }
}

/// Signs a request the way the server SDKs do (for tests and tools): the
/// query string to append to `path`, `auth_signature` last.
pub fn sign_query(
    key: &str,
    secret: &[u8],
    method: &str,
    path: &str,
    body: &[u8],
    timestamp: u64,
    extra: &[(&str, &str)],
) -> String {
    let mut params: Vec<(String, String)> = vec![
        ("auth_key".into(), key.into()),
        ("auth_timestamp".into(), timestamp.to_string()),
        ("auth_version".into(), "1.0".into()),
    ];
    if !body.is_empty() {
        params.push(("body_md5".into(), crate::md5::hex(body)));
    }
    params.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let q = SignedQuery { params };
    let sig = hmac_hex(secret, q.string_to_sign(method, path).as_bytes());
    let mut pairs: Vec<String> = q.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.push(format!("auth_signature={sig}"));
    pairs.join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_auth_matches_pusher_docs() {
        // The worked example of Pusher's "authorizing connections" docs.
        let auth = channel_auth(
            "278d425bdf160c739803",
            b"7ad3773142a6692b25b8",
            "1234.1234",
            "private-foobar",
            None,
        );
        assert_eq!(
            auth,
            "278d425bdf160c739803:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4"
        );
        assert_eq!(
            verify_channel_auth(
                "278d425bdf160c739803",
                b"7ad3773142a6692b25b8",
                "1234.1234",
                "private-foobar",
                None,
                Some(&auth)
            ),
            Ok(())
        );
        let verify = |auth: Option<&str>, socket: &str| {
            verify_channel_auth(
                "278d425bdf160c739803",
                b"7ad3773142a6692b25b8",
                socket,
                "private-foobar",
                None,
                auth,
            )
        };
        assert_eq!(
            verify(Some(&auth), "1234.1235"),
            Err(AuthError::BadSignature)
        );
        assert_eq!(verify(None, "1234.1234"), Err(AuthError::Missing));
        assert_eq!(verify(Some("nokey"), "1234.1234"), Err(AuthError::WrongKey));
        assert_eq!(
            verify(Some("other:00"), "1234.1234"),
            Err(AuthError::WrongKey)
        );
        assert_eq!(
            verify(Some("278d425bdf160c739803:zz"), "1234.1234"),
            Err(AuthError::BadSignature)
        );
    }

    #[test]
    fn user_auth_round_trips() {
        let data = r#"{"id":"ann"}"#;
        let auth = user_auth("k", b"s", "1.2", data);
        assert_eq!(verify_user_auth("k", b"s", "1.2", data, &auth), Ok(()));
        assert_eq!(
            verify_user_auth("k", b"s", "1.3", data, &auth),
            Err(AuthError::BadSignature)
        );
        assert_eq!(
            verify_user_auth("x", b"s", "1.2", data, &auth),
            Err(AuthError::WrongKey)
        );
    }

    #[test]
    fn signed_queries_verify_and_refuse() {
        let body = br#"{"name":"foo","channels":["project-3"],"data":"{\"some\":\"data\"}"}"#;
        let q = sign_query("key", b"secret", "POST", "/apps/3/events", body, 1000, &[]);
        let parsed = SignedQuery::parse(&q).expect("parse");
        assert_eq!(parsed.key(), Ok("key"));
        assert_eq!(
            parsed.verify(b"secret", "POST", "/apps/3/events", body, 1100),
            Ok(())
        );
        assert_eq!(
            parsed.verify(b"secret", "POST", "/apps/3/events", body, 1000 + 601),
            Err(QueryError::Stale(1601))
        );
        assert_eq!(
            parsed.verify(b"other", "POST", "/apps/3/events", body, 1000),
            Err(QueryError::BadSignature)
        );
        assert_eq!(
            parsed.verify(b"secret", "POST", "/apps/4/events", body, 1000),
            Err(QueryError::BadSignature)
        );
        assert_eq!(
            parsed.verify(b"secret", "POST", "/apps/3/events", b"{}", 1000),
            Err(QueryError::BodyMd5)
        );
        let get = sign_query(
            "key",
            b"secret",
            "GET",
            "/apps/3/channels",
            b"",
            1000,
            &[("info", "user_count,subscription_count")],
        );
        // A client that percent-encodes the comma signs the same string.
        let encoded = get.replace(',', "%2C");
        for q in [get, encoded] {
            let parsed = SignedQuery::parse(&q).expect("parse");
            assert_eq!(
                parsed.verify(b"secret", "GET", "/apps/3/channels", b"", 1000),
                Ok(())
            );
        }
        let missing = SignedQuery::parse("auth_key=key&auth_version=1.0").expect("parse");
        assert_eq!(
            missing.verify(b"secret", "GET", "/", b"", 0),
            Err(QueryError::Missing("auth_signature"))
        );
    }
}
