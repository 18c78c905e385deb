//! The websocket-shootout benchmark protocol (hashrocket/websocket-shootout), so
//! the field's standard broadcast benchmark runs against Herald unchanged.
//!
//! JSON mode (text frames): `{"type":"echo"|"broadcast","payload":P}`; the server
//! answers `echo` with the same object, and `broadcast` by sending the object to
//! every shootout connection and `{"type":"broadcastResult","payload":P,...}` to the
//! sender. P is passed through byte for byte.
//!
//! Binary mode (binary frames): byte 0 is the type (`e`, `b`, `r`), bytes 1..5 a
//! big-endian u32 payload length, bytes 5..13 a big-endian i64 send time in
//! nanoseconds, then padding.
//!
//! The server never parses P: it finds the raw text span of `payload` (one
//! borrowing pass, no `Value` tree) and writes it back verbatim. The binary
//! header is read for its type only; the reference client sets the length to
//! 8 + the padding length and the server echoes the frame unchanged.

use std::fmt;

use bytes::{BufMut, BytesMut};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::DecodeError;

/// The three shootout message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShootoutKind {
    /// `echo` / `e`: send it back to the sender.
    Echo,
    /// `broadcast` / `b`: send it to every connection, then a result to the sender.
    Broadcast,
    /// `broadcastResult` / `r`: the sender's confirmation of a broadcast.
    BroadcastResult,
}

impl ShootoutKind {
    /// The JSON `type` string.
    pub const fn as_str(self) -> &'static str {
        match self {
            ShootoutKind::Echo => "echo",
            ShootoutKind::Broadcast => "broadcast",
            ShootoutKind::BroadcastResult => "broadcastResult",
        }
    }

    /// The binary type byte.
    pub const fn as_byte(self) -> u8 {
        match self {
            ShootoutKind::Echo => b'e',
            ShootoutKind::Broadcast => b'b',
            ShootoutKind::BroadcastResult => b'r',
        }
    }

    fn from_str(s: &str) -> Option<Self> {
        match s {
            "echo" => Some(ShootoutKind::Echo),
            "broadcast" => Some(ShootoutKind::Broadcast),
            "broadcastResult" => Some(ShootoutKind::BroadcastResult),
            _ => None,
        }
    }

    fn from_byte(b: u8) -> Option<Self> {
        match b {
            b'e' => Some(ShootoutKind::Echo),
            b'b' => Some(ShootoutKind::Broadcast),
            b'r' => Some(ShootoutKind::BroadcastResult),
            _ => None,
        }
    }
}

impl fmt::Display for ShootoutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A JSON-mode message, borrowing its payload from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonShootout<'a> {
    /// The `type`.
    pub kind: ShootoutKind,
    /// The raw JSON text of `payload`, verbatim (surrounding whitespace trimmed).
    pub payload: &'a [u8],
}

/// The two keys we read; others (`listenerCount`) are skipped.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw_some")]
    payload: Option<&'a RawValue>,
}

/// Keeps a present `null` payload as the text `null`.
fn raw_some<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Parses a JSON-mode message (any of the three types).
pub fn parse_json(buf: &[u8]) -> Result<JsonShootout<'_>, DecodeError> {
    // A derived struct would also accept an array `[type, payload]`.
    if !buf.trim_ascii_start().starts_with(b"{") {
        return Err(DecodeError::Malformed("expected a JSON object".into()));
    }
    let wire: Wire<'_> =
        serde_json::from_slice(buf).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    let invalid = |field, reason: &str| DecodeError::Invalid {
        field,
        reason: reason.into(),
    };
    let kind_raw = wire.kind.ok_or_else(|| invalid("type", "missing"))?;
    // The plain spellings match without unescaping; anything else is parsed.
    let kind = match kind_raw.get() {
        "\"echo\"" => ShootoutKind::Echo,
        "\"broadcast\"" => ShootoutKind::Broadcast,
        "\"broadcastResult\"" => ShootoutKind::BroadcastResult,
        other => {
            let s: String =
                serde_json::from_str(other).map_err(|_| invalid("type", "expected a string"))?;
            ShootoutKind::from_str(&s).ok_or(DecodeError::Unknown(s))?
        }
    };
    let payload = wire.payload.ok_or_else(|| invalid("payload", "missing"))?;
    Ok(JsonShootout {
        kind,
        payload: payload.get().as_bytes(),
    })
}

/// Writes `{"type":"<kind>","payload":<payload>}`; `payload` must be JSON text.
pub fn write_json(kind: ShootoutKind, payload: &[u8], out: &mut BytesMut) {
    let name = kind.as_str();
    out.reserve(24 + name.len() + payload.len());
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\",\"payload\":");
    out.extend_from_slice(payload);
    out.put_u8(b'}');
}

/// Writes `{"type":"broadcastResult","payload":<payload>,"listenerCount":N}`.
pub fn write_json_broadcast_result(payload: &[u8], listeners: u64, out: &mut BytesMut) {
    out.reserve(64 + payload.len());
    out.extend_from_slice(b"{\"type\":\"broadcastResult\",\"payload\":");
    out.extend_from_slice(payload);
    out.extend_from_slice(b",\"listenerCount\":");
    crate::jsontext::write_u64(out, listeners);
    out.put_u8(b'}');
}

/// Bytes before the padding in a binary-mode message.
pub const BINARY_HEADER_LEN: usize = 13;

/// A binary-mode message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinaryShootout {
    /// Byte 0.
    pub kind: ShootoutKind,
    /// Bytes 1..5: the length of what follows them (8 + padding) as the
    /// reference client writes it; informational only.
    pub payload_len: u32,
    /// Bytes 5..13: when the client sent it, in nanoseconds since the epoch.
    pub send_time_ns: i64,
}

/// Parses a binary-mode header (the padding after it is ignored).
pub fn parse_binary(buf: &[u8]) -> Result<BinaryShootout, DecodeError> {
    let Some((head, _padding)) = buf.split_first_chunk::<BINARY_HEADER_LEN>() else {
        return Err(DecodeError::Malformed(format!(
            "shootout header needs {BINARY_HEADER_LEN} bytes, got {}",
            buf.len()
        )));
    };
    let kind = ShootoutKind::from_byte(head[0])
        .ok_or_else(|| DecodeError::Unknown(format!("shootout type 0x{:02x}", head[0])))?;
    let [_, l0, l1, l2, l3, t @ ..] = *head;
    Ok(BinaryShootout {
        kind,
        payload_len: u32::from_be_bytes([l0, l1, l2, l3]),
        send_time_ns: i64::from_be_bytes(t),
    })
}

/// Writes a binary-mode message with `padding` zero bytes after the header
/// (the length field is 8 + `padding`, as the reference client writes it).
pub fn write_binary(kind: ShootoutKind, send_time_ns: i64, padding: usize, out: &mut BytesMut) {
    out.reserve(BINARY_HEADER_LEN + padding);
    out.put_u8(kind.as_byte());
    out.put_u32(u32::try_from(padding.saturating_add(8)).unwrap_or(u32::MAX));
    out.put_i64(send_time_ns);
    out.put_bytes(0, padding);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip() {
        let m = parse_json(br#"{"type":"echo","payload":{"a":[1, 2],"t":"x"}}"#).unwrap();
        assert_eq!(m.kind, ShootoutKind::Echo);
        assert_eq!(m.payload, br#"{"a":[1, 2],"t":"x"}"#);
        let mut out = BytesMut::new();
        write_json(m.kind, m.payload, &mut out);
        assert_eq!(
            &out[..],
            br#"{"type":"echo","payload":{"a":[1, 2],"t":"x"}}"#
        );
    }

    #[test]
    fn json_key_order_and_extra_keys() {
        let m = parse_json(br#" { "payload" : 5 , "x":[{}], "type":"broadcast" } "#).unwrap();
        assert_eq!(m.kind, ShootoutKind::Broadcast);
        assert_eq!(m.payload, b"5");
        let m = parse_json(br#"{"type":"\u0065cho","payload":null}"#).unwrap();
        assert_eq!((m.kind, m.payload), (ShootoutKind::Echo, &b"null"[..]));
    }

    #[test]
    fn broadcast_result() {
        let mut out = BytesMut::new();
        write_json_broadcast_result(br#"{"s":1}"#, 1234, &mut out);
        assert_eq!(
            &out[..],
            br#"{"type":"broadcastResult","payload":{"s":1},"listenerCount":1234}"#
        );
        let m = parse_json(&out).unwrap();
        assert_eq!(m.kind, ShootoutKind::BroadcastResult);
        assert_eq!(m.payload, br#"{"s":1}"#);
    }

    #[test]
    fn json_malformed() {
        use DecodeError::*;
        type Check = fn(&DecodeError) -> bool;
        let cases: &[(&[u8], Check)] = &[
            (b"", |e| matches!(e, Malformed(_))),
            (b"[1]", |e| matches!(e, Malformed(_))),
            (b"\"echo\"", |e| matches!(e, Malformed(_))),
            (br#"{"type":"echo","payload":}"#, |e| {
                matches!(e, Malformed(_))
            }),
            (br#"{"type":"echo","payload":1} x"#, |e| {
                matches!(e, Malformed(_))
            }),
            (br#"{"payload":1}"#, |e| {
                matches!(e, Invalid { field: "type", .. })
            }),
            (br#"{"type":3,"payload":1}"#, |e| {
                matches!(e, Invalid { field: "type", .. })
            }),
            (br#"{"type":"echo"}"#, |e| {
                matches!(
                    e,
                    Invalid {
                        field: "payload",
                        ..
                    }
                )
            }),
            (
                br#"{"type":"shout","payload":1}"#,
                |e| matches!(e, Unknown(s) if s == "shout"),
            ),
        ];
        for (input, check) in cases {
            let e = parse_json(input).unwrap_err();
            assert!(check(&e), "{:?} -> {e:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn binary_round_trip() {
        for kind in [
            ShootoutKind::Echo,
            ShootoutKind::Broadcast,
            ShootoutKind::BroadcastResult,
        ] {
            let mut out = BytesMut::new();
            write_binary(kind, -5, 20, &mut out);
            assert_eq!(out.len(), BINARY_HEADER_LEN + 20);
            let m = parse_binary(&out).unwrap();
            assert_eq!(
                m,
                BinaryShootout {
                    kind,
                    payload_len: 28,
                    send_time_ns: -5
                }
            );
        }
        let mut exact = vec![b'e', 0, 0, 0, 8];
        exact.extend_from_slice(&1_700_000_000_000_000_000i64.to_be_bytes());
        let m = parse_binary(&exact).unwrap();
        assert_eq!(m.send_time_ns, 1_700_000_000_000_000_000);
    }

    #[test]
    fn binary_malformed() {
        assert!(matches!(parse_binary(b""), Err(DecodeError::Malformed(_))));
        assert!(matches!(
            parse_binary(&[b'e'; 12]),
            Err(DecodeError::Malformed(_))
        ));
        assert!(matches!(
            parse_binary(&[b'x'; 13]),
            Err(DecodeError::Unknown(_))
        ));
        assert!(matches!(
            parse_binary(&[0; 40]),
            Err(DecodeError::Unknown(_))
        ));
    }
}
