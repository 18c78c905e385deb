//! The websocket-shootout messages as the reference client writes and reads
//! them, without allocating.
//!
//! JSON mode sends `{"type":"broadcast","payload":{"sendTime":"<ns>","padding":"1234…"}}`
//! (a text frame; `padding` omitted when empty), exactly as hashrocket's
//! `websocket-bench` does, so any server written for the shootout accepts it.
//! Servers re-encode the payload freely (Go's `encoding/json` sorts the keys,
//! others add `listenerCount`), so reading does not assume a layout: it scans
//! for the `type` and `sendTime` keys among the object's quoted strings, and
//! falls back to a full parse (allocating, but only then) when that fails.
//! Binary mode is the round-2 layout of `herald_proto::shootout`.
//!
//! The send time doubles as the broadcast's identity: see `send_stamp` in
//! `pool.rs` for how it is kept unique across worker processes.

use herald_proto::shootout::{self, ShootoutKind, BINARY_HEADER_LEN};
use serde::Deserialize;

/// How the server speaks: `--server-type`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum ServerType {
    /// Text frames carrying JSON objects.
    Json,
    /// Binary frames in the round-2 binary layout.
    Binary,
}

impl ServerType {
    /// `json` or `binary`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerType::Json => "json",
            ServerType::Binary => "binary",
        }
    }
}

/// The reference client's padding: `1234567890` repeated, cut to `len`.
pub fn padding(len: usize) -> Vec<u8> {
    b"1234567890".iter().copied().cycle().take(len).collect()
}

/// Appends the payload of an `echo` or `broadcast` request to `out`.
pub fn encode(
    mode: ServerType,
    kind: ShootoutKind,
    send_ns: i64,
    padding: &[u8],
    out: &mut Vec<u8>,
) {
    match mode {
        ServerType::Json => {
            out.extend_from_slice(b"{\"type\":\"");
            out.extend_from_slice(kind.as_str().as_bytes());
            out.extend_from_slice(b"\",\"payload\":{\"sendTime\":\"");
            write_i64(out, send_ns);
            out.push(b'"');
            if !padding.is_empty() {
                out.extend_from_slice(b",\"padding\":\"");
                out.extend_from_slice(padding);
                out.push(b'"');
            }
            out.extend_from_slice(b"}}");
        }
        ServerType::Binary => {
            out.push(kind.as_byte());
            let len = u32::try_from(padding.len().saturating_add(8)).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&send_ns.to_be_bytes());
            out.extend_from_slice(padding);
        }
    }
}

/// Why a server message could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanError(pub String);

/// Reads the type and the send time out of a server message.
pub fn scan(mode: ServerType, data: &[u8]) -> Result<(ShootoutKind, i64), ScanError> {
    match mode {
        ServerType::Binary => {
            if data.len() < BINARY_HEADER_LEN {
                return Err(ScanError(format!(
                    "binary message of {} bytes is shorter than the {BINARY_HEADER_LEN}-byte header",
                    data.len()
                )));
            }
            let m = shootout::parse_binary(data).map_err(|e| ScanError(e.to_string()))?;
            Ok((m.kind, m.send_time_ns))
        }
        ServerType::Json => match scan_json_fast(data) {
            Some(found) => Ok(found),
            None => scan_json_slow(data),
        },
    }
}

/// The allocation-free path: finds `"type"` and `"sendTime"` by looking only
/// at the positions of double quotes.
fn scan_json_fast(data: &[u8]) -> Option<(ShootoutKind, i64)> {
    let kind = match string_value(data, b"\"type\"")? {
        b"broadcast" => ShootoutKind::Broadcast,
        b"broadcastResult" => ShootoutKind::BroadcastResult,
        b"echo" => ShootoutKind::Echo,
        _ => return None,
    };
    let time = string_value(data, b"\"sendTime\"")?;
    Some((kind, parse_i64(time)?))
}

/// The string value following the key `key` (quotes included in `key`):
/// the bytes between the value's quotes, which must contain no escapes.
fn string_value<'a>(data: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut from = 0;
    loop {
        let at = from + data.get(from..)?.iter().position(|&b| b == b'"')?;
        if data[at..].starts_with(key) {
            let rest = data.get(at + key.len()..)?;
            let rest = rest
                .trim_ascii_start()
                .strip_prefix(b":")?
                .trim_ascii_start();
            let rest = rest.strip_prefix(b"\"")?;
            let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
            if rest[end] == b'\\' {
                return None;
            }
            return Some(&rest[..end]);
        }
        from = at + 1;
    }
}

/// A decimal i64 with an optional minus sign; `None` on anything else.
fn parse_i64(digits: &[u8]) -> Option<i64> {
    let (neg, digits) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
    }
    Some(if neg { -v } else { v })
}

/// The fallback: a full JSON parse, for servers that escape or reshape.
fn scan_json_slow(data: &[u8]) -> Result<(ShootoutKind, i64), ScanError> {
    #[derive(Deserialize)]
    struct Payload {
        #[serde(rename = "sendTime")]
        send_time: Option<serde_json::Value>,
    }
    let m = shootout::parse_json(data).map_err(|e| {
        ScanError(format!(
            "{e} in {:?}",
            String::from_utf8_lossy(&data[..data.len().min(200)])
        ))
    })?;
    let payload: Payload = serde_json::from_slice(m.payload)
        .map_err(|e| ScanError(format!("payload is not an object with sendTime: {e}")))?;
    let send_ns = match payload.send_time {
        Some(serde_json::Value::String(s)) => s.parse::<i64>().ok(),
        Some(serde_json::Value::Number(n)) => n.as_i64(),
        _ => None,
    }
    .ok_or_else(|| ScanError("payload.sendTime missing or not an integer".into()))?;
    Ok((m.kind, send_ns))
}

/// Appends the decimal form of `v`.
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_through_reshaping_servers() {
        let mut out = Vec::new();
        encode(
            ServerType::Json,
            ShootoutKind::Broadcast,
            1_700_000_000_123_456_789,
            &padding(12),
            &mut out,
        );
        assert_eq!(
            out,
            br#"{"type":"broadcast","payload":{"sendTime":"1700000000123456789","padding":"123456789012"}}"#
        );
        assert_eq!(
            scan(ServerType::Json, &out).unwrap(),
            (ShootoutKind::Broadcast, 1_700_000_000_123_456_789)
        );
        // Go's encoding/json sorts map keys; others add listenerCount or spaces.
        let go = br#"{"type":"broadcastResult","payload":{"padding":"12","sendTime":"42"}}"#;
        assert_eq!(
            scan(ServerType::Json, go).unwrap(),
            (ShootoutKind::BroadcastResult, 42)
        );
        let spaced =
            br#"{ "payload" : { "sendTime" : "-7" }, "type" : "echo", "listenerCount": 3 }"#;
        assert_eq!(
            scan(ServerType::Json, spaced).unwrap(),
            (ShootoutKind::Echo, -7)
        );
        // Escapes and numbers take the slow path.
        let escaped = br#"{"type":"\u0065cho","payload":{"sendTime":5}}"#;
        assert_eq!(
            scan(ServerType::Json, escaped).unwrap(),
            (ShootoutKind::Echo, 5)
        );
        assert!(scan(ServerType::Json, br#"{"type":"echo","payload":{}}"#).is_err());
        assert!(scan(ServerType::Json, b"nope").is_err());
    }

    #[test]
    fn binary_round_trip() {
        let mut out = Vec::new();
        encode(
            ServerType::Binary,
            ShootoutKind::Echo,
            -3,
            &padding(5),
            &mut out,
        );
        assert_eq!(out.len(), BINARY_HEADER_LEN + 5);
        assert_eq!(&out[..5], &[b'e', 0, 0, 0, 13]);
        assert_eq!(
            scan(ServerType::Binary, &out).unwrap(),
            (ShootoutKind::Echo, -3)
        );
        assert!(scan(ServerType::Binary, b"b123").is_err());
    }

    #[test]
    fn integers() {
        for v in [
            0,
            1,
            -1,
            9,
            10,
            i64::MAX,
            i64::MIN + 1,
            1_700_000_000_000_000_000,
        ] {
            let mut out = Vec::new();
            write_i64(&mut out, v);
            assert_eq!(out, v.to_string().as_bytes());
            assert_eq!(parse_i64(&out), Some(v));
        }
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"1a"), None);
        assert_eq!(parse_i64(b"99999999999999999999"), None);
    }
}
