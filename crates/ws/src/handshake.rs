//! The opening handshake (RFC 6455 §4): validating an upgrade request and
//! writing the 101 answer on the server side; writing the request and checking
//! the answer on the client side (Herald's load generator and tests).
//!
//! The server parses the request with `httparse` into a stack array of
//! headers and passes them here; validation borrows from that parse and the
//! answer is written into a caller-supplied (reusable) buffer, so accepting a
//! connection allocates nothing per connection. The client side may allocate:
//! it runs once per connection in the load generator, not in the server.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use sha1::{Digest, Sha1};

/// The GUID every server appends to the client's key (§1.3).
const WEBSOCKET_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// How many response headers [`parse_client_response`] accepts.
const MAX_RESPONSE_HEADERS: usize = 32;

/// What the server needs from a valid upgrade request. Borrows the request's
/// parsed headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpgradeRequest<'a> {
    /// The `Sec-WebSocket-Key` value, trimmed: 24 base64 characters (checked).
    /// Feed it to [`accept_key`].
    pub key: &'a [u8],
    /// The raw `Sec-WebSocket-Protocol` value: comma-separated subprotocols
    /// in the client's order of preference. Only the first such header is
    /// kept; clients (browsers included) send a single comma-joined header.
    /// Pass it to [`select_protocol`].
    pub protocols: Option<&'a [u8]>,
    /// The `Origin` header, sent by browsers, for the server's origin policy.
    pub origin: Option<&'a [u8]>,
    /// The first permessage-deflate offer Herald accepts
    /// ([`deflate::negotiate`](crate::deflate::negotiate), over every
    /// `Sec-WebSocket-Extensions` header in order), if any. Whether to
    /// accept it is the server's choice: answer with
    /// [`write_accept_extensions`] and its
    /// [`response`](crate::deflate::Agreement::response).
    pub deflate: Option<crate::deflate::Agreement>,
}

/// A rejected handshake. On the server side each variant maps to an HTTP
/// answer ([`status`](HandshakeError::status),
/// [`write_response`](HandshakeError::write_response)); the client-side
/// variants report a server answer we refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The request method is not GET (405).
    #[error("the upgrade request method must be GET")]
    MethodNotAllowed,
    /// No `Upgrade` header containing `websocket` (400).
    #[error("missing `Upgrade: websocket` header")]
    MissingUpgrade,
    /// No `Connection` header containing the `upgrade` token (400).
    #[error("missing `Connection: upgrade` header")]
    MissingConnectionUpgrade,
    /// `Sec-WebSocket-Version` missing or not 13 (426, with a
    /// `Sec-WebSocket-Version: 13` header telling the client what we speak, §4.4).
    #[error("unsupported or missing Sec-WebSocket-Version (only 13 is supported)")]
    UnsupportedVersion,
    /// No `Sec-WebSocket-Key` header (400).
    #[error("missing Sec-WebSocket-Key header")]
    MissingKey,
    /// A `Sec-WebSocket-Key` that is not 24 base64 characters encoding 16 bytes (400).
    #[error("Sec-WebSocket-Key is not a base64-encoded 16-byte value")]
    InvalidKey,
    /// A header that may appear only once appeared twice (400).
    #[error("duplicate {0} header")]
    DuplicateHeader(&'static str),
    /// The bytes are not a well-formed HTTP/1.x message head (400).
    #[error("malformed HTTP: {0}")]
    Http(httparse::Error),
    /// Client side: the server answered with a status other than 101.
    #[error("server answered with HTTP status {0} instead of 101")]
    UnexpectedStatus(u16),
    /// Client side: `Sec-WebSocket-Accept` missing or not matching our key.
    #[error("missing or wrong Sec-WebSocket-Accept")]
    BadAccept,
    /// Client side: the server's `Sec-WebSocket-Protocol` is not a single
    /// UTF-8 token.
    #[error("invalid Sec-WebSocket-Protocol in the answer")]
    InvalidProtocol,
    /// Client side: the server enabled an extension we never offered.
    #[error("the server enabled an extension we did not offer")]
    UnexpectedExtension,
}

impl HandshakeError {
    /// The HTTP status to answer with: 405 for a non-GET method, 426 Upgrade
    /// Required for a missing or wrong version, 400 Bad Request otherwise.
    /// Client-side variants never become an answer and also map to 400.
    pub const fn status(&self) -> u16 {
        match self {
            HandshakeError::MethodNotAllowed => 405,
            HandshakeError::UnsupportedVersion => 426,
            _ => 400,
        }
    }

    /// Writes a complete HTTP/1.1 error answer for this error into `out`:
    /// the status line, `Sec-WebSocket-Version: 13` for 426, `Allow: GET`
    /// for 405, and an empty body; the caller then closes the connection.
    pub fn write_response(&self, out: &mut Vec<u8>) {
        let line: &[u8] = match self.status() {
            405 => b"HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\n",
            426 => b"HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\nUpgrade: websocket\r\n",
            _ => b"HTTP/1.1 400 Bad Request\r\n",
        };
        out.extend_from_slice(line);
        out.extend_from_slice(b"Connection: close\r\nContent-Length: 0\r\n\r\n");
    }
}

/// Validates the headers of a GET upgrade request (§4.2.1) that the caller
/// has already parsed with `httparse` (the caller also checks the request
/// target and that the HTTP version is 1.1).
///
/// Requires: method `GET`; an `Upgrade` header listing `websocket`
/// (case-insensitive); a `Connection` header listing the `upgrade` token
/// (case-insensitive, comma-separated, e.g. `keep-alive, Upgrade`);
/// `Sec-WebSocket-Version: 13`; exactly one `Sec-WebSocket-Key` of 24 base64
/// characters decoding to 16 bytes. If several `Sec-WebSocket-Protocol`
/// (or `Origin`) headers appear, the first one is returned and the rest are
/// ignored. The `Host` header is left to the caller.
///
/// Checks run in that order, so a request with several faults reports the
/// first; a wrong version is reported before key problems so the client gets
/// the helpful 426.
pub fn validate_upgrade<'a>(
    method: &str,
    headers: &[httparse::Header<'a>],
) -> Result<UpgradeRequest<'a>, HandshakeError> {
    if method != "GET" {
        return Err(HandshakeError::MethodNotAllowed);
    }
    let mut upgrade = false;
    let mut connection = false;
    let mut version: Option<&[u8]> = None;
    let mut key: Option<&'a [u8]> = None;
    let mut protocols: Option<&'a [u8]> = None;
    let mut origin: Option<&'a [u8]> = None;
    let mut deflate = None;
    for header in headers {
        let name = header.name;
        let value: &'a [u8] = header.value;
        if name.eq_ignore_ascii_case("upgrade") {
            upgrade |= has_token(value, b"websocket");
        } else if name.eq_ignore_ascii_case("connection") {
            connection |= has_token(value, b"upgrade");
        } else if name.eq_ignore_ascii_case("sec-websocket-version") {
            if version.replace(value).is_some() {
                return Err(HandshakeError::DuplicateHeader("Sec-WebSocket-Version"));
            }
        } else if name.eq_ignore_ascii_case("sec-websocket-key") {
            if key.replace(value).is_some() {
                return Err(HandshakeError::DuplicateHeader("Sec-WebSocket-Key"));
            }
        } else if name.eq_ignore_ascii_case("sec-websocket-protocol") {
            protocols.get_or_insert(value);
        } else if name.eq_ignore_ascii_case("origin") {
            origin.get_or_insert(value);
        } else if name.eq_ignore_ascii_case("sec-websocket-extensions") {
            deflate = deflate.or_else(|| crate::deflate::negotiate(value));
        }
    }
    if !upgrade {
        return Err(HandshakeError::MissingUpgrade);
    }
    if !connection {
        return Err(HandshakeError::MissingConnectionUpgrade);
    }
    if version.map(<[u8]>::trim_ascii) != Some(b"13") {
        return Err(HandshakeError::UnsupportedVersion);
    }
    let key = key.ok_or(HandshakeError::MissingKey)?.trim_ascii();
    if !is_valid_key(key) {
        return Err(HandshakeError::InvalidKey);
    }
    Ok(UpgradeRequest {
        key,
        protocols,
        origin,
        deflate,
    })
}

/// True when `key` is 24 base64 characters that decode to exactly 16 bytes.
fn is_valid_key(key: &[u8]) -> bool {
    let mut decoded = [0u8; 18];
    key.len() == 24 && STANDARD.decode_slice(key, &mut decoded) == Ok(16)
}

/// True when the comma-separated header `value` lists `token`, compared
/// case-insensitively after trimming spaces and tabs.
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Picks the server's subprotocol: the first entry of `supported` (the
/// server's order of preference) that appears in the comma-separated
/// `offered` list. Tokens are trimmed of spaces and compared exactly
/// (case-sensitive, as subprotocol names are). `None` when nothing matches:
/// the server then answers without a `Sec-WebSocket-Protocol` header.
pub fn select_protocol<'s>(offered: Option<&[u8]>, supported: &[&'s str]) -> Option<&'s str> {
    let offered = offered?;
    supported.iter().copied().find(|s| {
        offered
            .split(|&b| b == b',')
            .any(|t| t.trim_ascii() == s.as_bytes())
    })
}

/// Computes `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key` (§1.3, §4.2.2):
/// base64(SHA-1(key ++ GUID)), 28 ASCII bytes.
pub fn accept_key(key: &[u8]) -> [u8; 28] {
    let mut sha = Sha1::new();
    sha.update(key);
    sha.update(WEBSOCKET_GUID);
    let digest = sha.finalize();
    let mut out = [0u8; 28];
    // 20 bytes always encode to exactly 28 characters, so this cannot fail.
    let written = STANDARD.encode_slice(digest, &mut out);
    debug_assert_eq!(written, Ok(28));
    out
}

/// Writes the `101 Switching Protocols` answer into `out`: `Upgrade`,
/// `Connection`, `Sec-WebSocket-Accept` and, when given, the selected
/// `Sec-WebSocket-Protocol` (which must be a token the client offered, e.g.
/// from [`select_protocol`]). `out` is appended to, never cleared.
pub fn write_accept(out: &mut Vec<u8>, accept: &[u8; 28], protocol: Option<&str>) {
    write_accept_extensions(out, accept, protocol, None);
}

/// [`write_accept`] with a `Sec-WebSocket-Extensions` header when
/// `extensions` is given (e.g. [`deflate::RESPONSE`](crate::deflate::RESPONSE)
/// for a client whose offer was accepted).
pub fn write_accept_extensions(
    out: &mut Vec<u8>,
    accept: &[u8; 28],
    protocol: Option<&str>,
    extensions: Option<&str>,
) {
    out.extend_from_slice(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ",
    );
    out.extend_from_slice(accept);
    if let Some(protocol) = protocol {
        out.extend_from_slice(b"\r\nSec-WebSocket-Protocol: ");
        out.extend_from_slice(protocol.as_bytes());
    }
    if let Some(extensions) = extensions {
        out.extend_from_slice(b"\r\nSec-WebSocket-Extensions: ");
        out.extend_from_slice(extensions.as_bytes());
    }
    out.extend_from_slice(b"\r\n\r\n");
}

/// A fresh random `Sec-WebSocket-Key`: 16 random bytes, base64-encoded.
///
/// Uses `fastrand` (not a CSPRNG). The key only proves the server understood
/// the WebSocket handshake; it is not a secret.
pub fn generate_key() -> [u8; 24] {
    let raw = fastrand::u128(..).to_ne_bytes();
    let mut out = [0u8; 24];
    // 16 bytes always encode to exactly 24 characters, so this cannot fail.
    let written = STANDARD.encode_slice(raw, &mut out);
    debug_assert_eq!(written, Ok(24));
    out
}

/// A random masking key for a client frame (§5.3).
///
/// Uses `fastrand`, not a CSPRNG: masking protects naive proxies from
/// content chosen by untrusted scripts, which is a browser concern; Herald's
/// clients are the load generator and tests.
pub fn random_mask() -> [u8; 4] {
    fastrand::u32(..).to_ne_bytes()
}

/// Writes a client upgrade request for `path` on `host` into `out`, offering
/// `protocols` (in preference order) in one `Sec-WebSocket-Protocol` header
/// when not empty. `out` is appended to, never cleared.
pub fn write_client_request(
    out: &mut Vec<u8>,
    host: &str,
    path: &str,
    key: &[u8; 24],
    protocols: &[&str],
) {
    out.extend_from_slice(b"GET ");
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ");
    out.extend_from_slice(key);
    out.extend_from_slice(b"\r\nSec-WebSocket-Version: 13\r\n");
    if let Some((first, rest)) = protocols.split_first() {
        out.extend_from_slice(b"Sec-WebSocket-Protocol: ");
        out.extend_from_slice(first.as_bytes());
        for protocol in rest {
            out.extend_from_slice(b", ");
            out.extend_from_slice(protocol.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Parses the server's answer to a request sent with `key` (§4.1).
///
/// `Ok(None)`: the answer's head is not complete yet. `Ok(Some((protocol,
/// head_len)))`: a valid `101` with `Upgrade: websocket`, `Connection:
/// upgrade` and the right `Sec-WebSocket-Accept`; `protocol` is the
/// subprotocol the server selected, and WebSocket frames start at
/// `buf[head_len..]`. The caller must check that `protocol` is one it offered
/// (RFC 6455 requires failing the connection otherwise). An answer enabling
/// any extension is refused, since we offer none.
pub fn parse_client_response(
    buf: &[u8],
    key: &[u8; 24],
) -> Result<Option<(Option<String>, usize)>, HandshakeError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let head_len = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HandshakeError::Http(e)),
    };
    let status = response.code.unwrap_or(0);
    if status != 101 {
        return Err(HandshakeError::UnexpectedStatus(status));
    }
    let mut upgrade = false;
    let mut connection = false;
    let mut accepted = false;
    let mut protocol: Option<&[u8]> = None;
    let expected = accept_key(key);
    for header in response.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("upgrade") {
            upgrade |= has_token(header.value, b"websocket");
        } else if name.eq_ignore_ascii_case("connection") {
            connection |= has_token(header.value, b"upgrade");
        } else if name.eq_ignore_ascii_case("sec-websocket-accept") {
            if accepted {
                return Err(HandshakeError::DuplicateHeader("Sec-WebSocket-Accept"));
            }
            if header.value.trim_ascii() != expected {
                return Err(HandshakeError::BadAccept);
            }
            accepted = true;
        } else if name.eq_ignore_ascii_case("sec-websocket-protocol") {
            if protocol.replace(header.value).is_some() {
                return Err(HandshakeError::DuplicateHeader("Sec-WebSocket-Protocol"));
            }
        } else if name.eq_ignore_ascii_case("sec-websocket-extensions")
            && !header.value.trim_ascii().is_empty()
        {
            return Err(HandshakeError::UnexpectedExtension);
        }
    }
    if !upgrade {
        return Err(HandshakeError::MissingUpgrade);
    }
    if !connection {
        return Err(HandshakeError::MissingConnectionUpgrade);
    }
    if !accepted {
        return Err(HandshakeError::BadAccept);
    }
    let protocol = match protocol.map(<[u8]>::trim_ascii) {
        None => None,
        Some(p) if p.is_empty() || p.contains(&b',') => {
            return Err(HandshakeError::InvalidProtocol)
        }
        Some(p) => Some(
            std::str::from_utf8(p)
                .map_err(|_| HandshakeError::InvalidProtocol)?
                .to_owned(),
        ),
    };
    Ok(Some((protocol, head_len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert!(has_token(b"keep-alive, Upgrade", b"upgrade"));
        assert!(has_token(b"UPGRADE", b"upgrade"));
        assert!(!has_token(b"keep-alive, upgrades", b"upgrade"));
        assert!(!has_token(b"", b"upgrade"));
    }

    #[test]
    fn keys() {
        assert!(is_valid_key(b"dGhlIHNhbXBsZSBub25jZQ=="));
        assert!(!is_valid_key(b"dGhlIHNhbXBsZSBub25jZQ="));
        assert!(!is_valid_key(b"dGhlIHNhbXBsZSBub25jZQ!!"));
        // 24 characters, but 18 bytes.
        assert!(!is_valid_key(b"dGhlIHNhbXBsZSBub25jZQab"));
        for _ in 0..100 {
            assert!(is_valid_key(&generate_key()));
        }
    }

    #[test]
    fn error_responses() {
        let mut out = Vec::new();
        HandshakeError::UnsupportedVersion.write_response(&mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 426 Upgrade Required\r\n"));
        assert!(text.contains("\r\nSec-WebSocket-Version: 13\r\n"));
        assert!(text.ends_with("\r\n\r\n"));
    }
}
