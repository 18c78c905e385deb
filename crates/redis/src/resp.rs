//! RESP2, the Redis wire format, without I/O: commands are encoded into a
//! buffer, replies decoded from one as bytes arrive.
//!
//! Only what Herald sends and receives: commands are arrays of bulk strings;
//! replies are simple strings, errors, integers, bulk strings (or nil) and
//! arrays (or nil), nested. A reply is decoded only once it is complete, so a
//! partial read leaves the buffer untouched. Sizes are bounded
//! ([`MAX_BULK`], [`MAX_ARRAY`], [`MAX_DEPTH`]) so a broken or hostile peer
//! cannot make the node allocate without limit.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Largest bulk string accepted (Redis's own default limit is 512 MB; a
/// Herald publication is at most the server's message limit).
pub const MAX_BULK: usize = 64 << 20;
/// Most elements accepted in one array.
pub const MAX_ARRAY: usize = 1 << 24;
/// Deepest nesting accepted.
pub const MAX_DEPTH: usize = 8;

/// One RESP2 value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `+OK`.
    Simple(Bytes),
    /// `-ERR ...`.
    Error(Bytes),
    /// `:42`.
    Int(i64),
    /// `$3\r\nabc` (`$-1`: nil).
    Bulk(Option<Bytes>),
    /// `*2 ...` (`*-1`: nil).
    Array(Option<Vec<Value>>),
}

impl Value {
    /// The value as bytes (simple or bulk string).
    pub fn bytes(&self) -> Option<&Bytes> {
        match self {
            Value::Simple(b) | Value::Bulk(Some(b)) => Some(b),
            _ => None,
        }
    }

    /// The value as an integer (an integer reply, or a string of digits).
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            other => std::str::from_utf8(other.bytes()?).ok()?.parse().ok(),
        }
    }

    /// The elements of an array reply (nil and non-arrays: none).
    pub fn items(&self) -> &[Value] {
        match self {
            Value::Array(Some(v)) => v,
            _ => &[],
        }
    }

    /// The error text of an error reply.
    pub fn error(&self) -> Option<String> {
        match self {
            Value::Error(e) => Some(String::from_utf8_lossy(e).into_owned()),
            _ => None,
        }
    }
}

/// The peer sent something that is not RESP2, or too big.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad RESP from redis: {0}")]
pub struct RespError(pub &'static str);

/// Appends one command (an array of bulk strings) to `out`.
pub fn encode<A: AsRef<[u8]>>(args: &[A], out: &mut BytesMut) {
    out.reserve(16 + args.iter().map(|a| a.as_ref().len() + 16).sum::<usize>());
    out.put_u8(b'*');
    put_decimal(out, args.len());
    for a in args {
        let a = a.as_ref();
        out.put_u8(b'$');
        put_decimal(out, a.len());
        out.put_slice(a);
        out.put_slice(b"\r\n");
    }
}

fn put_decimal(out: &mut BytesMut, n: usize) {
    use std::fmt::Write;
    // Writing to a BytesMut cannot fail.
    let _ = write!(out, "{n}\r\n");
}

/// Decodes one complete value from the front of `buf`, consuming it; `None`
/// (and `buf` untouched) when more bytes are needed.
pub fn decode(buf: &mut BytesMut) -> Result<Option<Value>, RespError> {
    let Some(len) = scan(buf, 0, 0)? else {
        return Ok(None);
    };
    let frame = buf.split_to(len).freeze();
    let mut cursor = frame;
    Ok(Some(parse(&mut cursor)?))
}

/// The length of the complete value starting at `at`, if it is complete.
fn scan(buf: &[u8], at: usize, depth: usize) -> Result<Option<usize>, RespError> {
    if depth > MAX_DEPTH {
        return Err(RespError("nested too deeply"));
    }
    let Some(kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some(eol) = find_crlf(buf, at + 1) else {
        return Ok(None);
    };
    let line_end = eol + 2;
    match kind {
        b'+' | b'-' | b':' => Ok(Some(line_end - at)),
        b'$' => {
            let n = signed(&buf[at + 1..eol])?;
            if n < 0 {
                return Ok(Some(line_end - at));
            }
            let n = usize::try_from(n).map_err(|_| RespError("bulk length"))?;
            if n > MAX_BULK {
                return Err(RespError("bulk string too large"));
            }
            if buf.len() < line_end + n + 2 {
                return Ok(None);
            }
            if &buf[line_end + n..line_end + n + 2] != b"\r\n" {
                return Err(RespError("bulk string not terminated"));
            }
            Ok(Some(line_end + n + 2 - at))
        }
        b'*' => {
            let n = signed(&buf[at + 1..eol])?;
            if n < 0 {
                return Ok(Some(line_end - at));
            }
            let n = usize::try_from(n).map_err(|_| RespError("array length"))?;
            if n > MAX_ARRAY {
                return Err(RespError("array too large"));
            }
            let mut pos = line_end;
            for _ in 0..n {
                match scan(buf, pos, depth + 1)? {
                    Some(len) => pos += len,
                    None => return Ok(None),
                }
            }
            Ok(Some(pos - at))
        }
        _ => Err(RespError("unknown type byte")),
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
}

fn signed(digits: &[u8]) -> Result<i64, RespError> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(RespError("bad number"))
}

/// Parses a value already known (by [`scan`]) to be complete and well formed.
fn parse(cur: &mut Bytes) -> Result<Value, RespError> {
    let kind = cur.get_u8();
    let eol = find_crlf(cur, 0).ok_or(RespError("truncated"))?;
    let line = cur.split_to(eol);
    cur.advance(2);
    Ok(match kind {
        b'+' => Value::Simple(line),
        b'-' => Value::Error(line),
        b':' => Value::Int(signed(&line)?),
        b'$' => {
            let n = signed(&line)?;
            if n < 0 {
                Value::Bulk(None)
            } else {
                let n = usize::try_from(n).map_err(|_| RespError("bulk length"))?;
                let data = cur.split_to(n);
                cur.advance(2);
                Value::Bulk(Some(data))
            }
        }
        b'*' => {
            let n = signed(&line)?;
            if n < 0 {
                Value::Array(None)
            } else {
                let n = usize::try_from(n).map_err(|_| RespError("array length"))?;
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push(parse(cur)?);
                }
                Value::Array(Some(items))
            }
        }
        _ => return Err(RespError("unknown type byte")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::Bulk(Some(Bytes::copy_from_slice(s.as_bytes())))
    }

    #[test]
    fn encodes_commands_as_bulk_arrays() {
        let mut out = BytesMut::new();
        encode(&["SET", "k", ""], &mut out);
        assert_eq!(&out[..], b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn decodes_every_type_and_waits_for_more() {
        let wire: &[u8] =
            b"+OK\r\n-ERR no\r\n:-7\r\n$3\r\na\r\n\r\n$-1\r\n*2\r\n$1\r\nx\r\n*1\r\n:1\r\n*-1\r\n";
        let want = vec![
            Value::Simple(Bytes::from_static(b"OK")),
            Value::Error(Bytes::from_static(b"ERR no")),
            Value::Int(-7),
            bulk("a\r\n"),
            Value::Bulk(None),
            Value::Array(Some(vec![
                bulk("x"),
                Value::Array(Some(vec![Value::Int(1)])),
            ])),
            Value::Array(None),
        ];
        // Fed one byte at a time: nothing is decoded before it is complete.
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in wire {
            buf.put_u8(*b);
            while let Some(v) = decode(&mut buf).expect("valid") {
                got.push(v);
            }
        }
        assert_eq!(got, want);
        assert!(buf.is_empty());
    }

    #[test]
    fn refuses_garbage_and_oversized_values() {
        for bad in [
            &b"?x\r\n"[..],
            b"$abc\r\n",
            b"$1\r\nab\r\n",
            b"*99999999999\r\n",
            b"$999999999999\r\n",
        ] {
            let mut buf = BytesMut::from(bad);
            assert!(
                decode(&mut buf).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut deep = BytesMut::new();
        for _ in 0..=MAX_DEPTH + 1 {
            deep.put_slice(b"*1\r\n");
        }
        deep.put_slice(b":1\r\n");
        assert!(decode(&mut deep).is_err());
    }

    #[test]
    fn value_accessors() {
        assert_eq!(bulk("12").int(), Some(12));
        assert_eq!(Value::Int(3).int(), Some(3));
        assert_eq!(Value::Bulk(None).bytes(), None);
        assert!(Value::Int(1).items().is_empty());
        assert_eq!(
            Value::Error(Bytes::from_static(b"E")).error().as_deref(),
            Some("E")
        );
    }
}
