//! The Herald protocol messages the bench sends and reads, encoded and
//! scanned without allocating (docs/protocol.md).
//!
//! Why not `herald_proto`'s typed codecs on the hot path: decoding a push
//! into `ServerMsg` allocates its channel name (and, from a borrowed buffer,
//! the payload), and a subscriber may receive hundreds of thousands of pushes
//! per second. Here a push is recognised by its first bytes and the bench's
//! own stamp is read straight out of the payload. Everything else (connect
//! and subscribe replies, errors) is rare and goes through
//! `Encoding::decode_server`. The unit tests check every encoder and scanner
//! here against `herald_proto`, so a protocol change cannot go unnoticed.
//!
//! The stamp the bench puts in every payload it publishes: publisher index,
//! per-publisher sequence number and the scheduled send time (Unix ns).
//! JSON: `{"hb":[publisher,seq,time_ns],"pad":"xxxx…"}`; binary: `HB`, then
//! u32 publisher, u64 seq, i64 time (big-endian), then zero padding.

use herald_proto::{Encoding, Reply, ServerMsg};
use herald_ws::OpCode;

/// The frame type that carries `enc`.
pub fn opcode(enc: Encoding) -> OpCode {
    match enc {
        Encoding::Json => OpCode::Text,
        Encoding::Binary => OpCode::Binary,
    }
}

/// Appends a `connect` command.
pub fn connect(enc: Encoding, id: u32, out: &mut Vec<u8>) {
    match enc {
        Encoding::Json => {
            out.extend_from_slice(b"{\"id\":");
            write_u64(out, u64::from(id));
            out.extend_from_slice(b",\"connect\":{}}");
        }
        Encoding::Binary => {
            out.push(0x01);
            put_varint(out, u64::from(id));
            out.push(0);
        }
    }
}

/// Appends a `subscribe` command, with `recover` from `(epoch, offset)`
/// when given (`channel` must need no JSON escaping; the epoch is escaped).
pub fn subscribe_from(
    enc: Encoding,
    id: u32,
    channel: &str,
    recover: Option<(&str, u64)>,
    out: &mut Vec<u8>,
) {
    match enc {
        Encoding::Json => {
            out.extend_from_slice(b"{\"id\":");
            write_u64(out, u64::from(id));
            out.extend_from_slice(b",\"subscribe\":{\"channel\":\"");
            out.extend_from_slice(channel.as_bytes());
            out.push(b'"');
            if let Some((epoch, offset)) = recover {
                out.extend_from_slice(b",\"recover\":{\"epoch\":");
                write_json_string(out, epoch);
                out.extend_from_slice(b",\"offset\":");
                write_u64(out, offset);
                out.push(b'}');
            }
            out.extend_from_slice(b"}}");
        }
        Encoding::Binary => {
            out.push(0x02);
            put_varint(out, u64::from(id));
            out.push(u8::from(recover.is_some()));
            put_bytes(out, channel.as_bytes());
            if let Some((epoch, offset)) = recover {
                put_bytes(out, epoch.as_bytes());
                put_varint(out, offset);
            }
        }
    }
}

/// Appends an `unsubscribe` command (`channel` must need no JSON escaping).
pub fn unsubscribe(enc: Encoding, id: u32, channel: &str, out: &mut Vec<u8>) {
    match enc {
        Encoding::Json => {
            out.extend_from_slice(b"{\"id\":");
            write_u64(out, u64::from(id));
            out.extend_from_slice(b",\"unsubscribe\":{\"channel\":\"");
            out.extend_from_slice(channel.as_bytes());
            out.extend_from_slice(b"\"}}");
        }
        Encoding::Binary => {
            out.push(0x03);
            put_varint(out, u64::from(id));
            put_bytes(out, channel.as_bytes());
        }
    }
}

/// Appends the body of `POST /api/publish`: `{"channel":…,"data":…}`
/// (`data` must be JSON text, `channel` need no escaping).
pub fn api_publish_body(channel: &str, data: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"channel\":\"");
    out.extend_from_slice(channel.as_bytes());
    out.extend_from_slice(b"\",\"data\":");
    out.extend_from_slice(data);
    out.push(b'}');
}

/// Appends `s` as a JSON string.
pub(crate) fn write_json_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x1f => {
                out.extend_from_slice(b"\\u00");
                out.push(b"0123456789abcdef"[usize::from(b >> 4)]);
                out.push(b"0123456789abcdef"[usize::from(b & 15)]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// The elements of a JSON array (a long-poll answer), as slices, without
/// parsing them: strings and nesting are tracked only to find the commas.
/// Yields `Err` once, then stops, if the text is not an array.
pub struct JsonItems<'a> {
    buf: &'a [u8],
    pos: usize,
    done: bool,
}

/// Iterates over the elements of the JSON array in `buf`.
pub fn json_items(buf: &[u8]) -> JsonItems<'_> {
    let start = buf.iter().position(|b| !b.is_ascii_whitespace());
    match start {
        Some(i) if buf[i] == b'[' => JsonItems {
            buf,
            pos: i + 1,
            done: false,
        },
        _ => JsonItems {
            buf,
            pos: usize::MAX,
            done: false,
        },
    }
}

impl<'a> Iterator for JsonItems<'a> {
    type Item = Result<&'a [u8], &'static str>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let fail = |s: &mut Self, why| {
            s.done = true;
            Some(Err(why))
        };
        if self.pos == usize::MAX {
            return fail(self, "not a JSON array");
        }
        let buf = self.buf;
        let mut i = self.pos;
        while i < buf.len() && buf[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < buf.len() && buf[i] == b']' {
            self.done = true;
            return None;
        }
        let start = i;
        let mut depth = 0usize;
        let mut in_str = false;
        while i < buf.len() {
            let b = buf[i];
            if in_str {
                match b {
                    b'\\' => i += 1,
                    b'"' => in_str = false,
                    _ => {}
                }
            } else {
                match b {
                    b'"' => in_str = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if depth > 0 => depth -= 1,
                    b',' | b']' if depth == 0 => {
                        let item = buf[start..i].trim_ascii();
                        if item.is_empty() {
                            return fail(self, "empty array element");
                        }
                        self.pos = if b == b',' { i + 1 } else { i };
                        return Some(Ok(item));
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        fail(self, "unterminated JSON array")
    }
}

/// Appends a `publish` command. In JSON, `data` must be JSON text (it is
/// sent as `"data"`); `id` 0 asks for no reply.
pub fn publish(enc: Encoding, id: u32, channel: &str, data: &[u8], out: &mut Vec<u8>) {
    match enc {
        Encoding::Json => {
            out.extend_from_slice(b"{\"id\":");
            write_u64(out, u64::from(id));
            out.extend_from_slice(b",\"publish\":{\"channel\":\"");
            out.extend_from_slice(channel.as_bytes());
            out.extend_from_slice(b"\",\"data\":");
            out.extend_from_slice(data);
            out.extend_from_slice(b"}}");
        }
        Encoding::Binary => {
            out.push(0x04);
            put_varint(out, u64::from(id));
            put_bytes(out, channel.as_bytes());
            put_bytes(out, data);
        }
    }
}

/// What a server message is, as far as the bench cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incoming<'a> {
    /// A successful reply to command `id`.
    Reply {
        /// The command's id.
        id: u32,
    },
    /// An error answer to command `id` (0: not attributable).
    Error {
        /// The command's id.
        id: u32,
        /// The error code.
        code: u16,
    },
    /// A publication push. For JSON, `data` is the whole message (the
    /// stamp is found by key); for binary, exactly the payload.
    Pub {
        /// Where the stamp is.
        data: &'a [u8],
        /// The publication's offset in its channel (0 if unreadable).
        offset: u64,
    },
    /// Anything else (join, leave, unsubscribed, disconnect...).
    Other,
}

/// Classifies a server message.
pub fn classify(enc: Encoding, buf: &[u8]) -> Result<Incoming<'_>, String> {
    match enc {
        Encoding::Binary => classify_binary(buf),
        Encoding::Json => {
            if find_key(buf, b"\"pub\"").is_some() && find_key(buf, b"\"hb\"").is_some() {
                return Ok(Incoming::Pub {
                    data: buf,
                    offset: json_offset(buf),
                });
            }
            if let Some(found) = json_reply_fast(buf) {
                return Ok(found);
            }
            // The game's pushes are the hot path of `bots --game holdem`:
            // recognised by their canonical start, read by the scenario.
            if JSON_GAME_PUSHES.iter().any(|p| buf.starts_with(p)) {
                return Ok(Incoming::Other);
            }
            slow(enc, buf)
        }
    }
}

/// How the game pushes start in canonical JSON (docs/protocol.md §3.4).
const JSON_GAME_PUSHES: [&[u8]; 4] = [
    b"{\"game\":{",
    b"{\"lobby_update\":{",
    b"{\"seat\":{",
    b"{\"unseat\":{",
];

/// `{"id":N,"<op>":` where op is not `error`: the canonical reply shape.
fn json_reply_fast(buf: &[u8]) -> Option<Incoming<'_>> {
    let rest = buf.strip_prefix(b"{\"id\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let id: u32 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let rest = rest[digits..].strip_prefix(b",\"")?;
    if rest.starts_with(b"error\"") {
        return None;
    }
    Some(Incoming::Reply { id })
}

/// The full decode, for messages off the hot path.
fn slow(enc: Encoding, buf: &[u8]) -> Result<Incoming<'_>, String> {
    match enc.decode_server(buf) {
        Ok(ServerMsg::Reply { id, reply }) => {
            let _: &Reply = &reply;
            Ok(Incoming::Reply { id })
        }
        Ok(ServerMsg::Error { id, code, .. }) => Ok(Incoming::Error { id, code }),
        Ok(ServerMsg::Push(herald_proto::Push::Publication { offset, .. })) => {
            Ok(Incoming::Pub { data: buf, offset })
        }
        Ok(ServerMsg::Push(_)) => Ok(Incoming::Other),
        Err(e) => Err(format!(
            "{e} in {:?}",
            String::from_utf8_lossy(&buf[..buf.len().min(200)])
        )),
    }
}

fn classify_binary(buf: &[u8]) -> Result<Incoming<'_>, String> {
    let (&ty, mut rest) = buf.split_first().ok_or("empty binary message")?;
    match ty {
        0xA0 => {
            let channel_len = read_varint(&mut rest)?;
            rest = skip(rest, channel_len)?;
            let offset = read_varint(&mut rest)?;
            let len = read_varint(&mut rest)?;
            let len = usize::try_from(len).map_err(|_| "length overflow")?;
            let data = rest.get(..len).ok_or("truncated publication")?;
            Ok(Incoming::Pub { data, offset })
        }
        0x81..=0x8E => {
            let id = read_varint(&mut rest)?;
            Ok(Incoming::Reply {
                id: u32::try_from(id).map_err(|_| "id out of range")?,
            })
        }
        0xE0 => {
            let id = read_varint(&mut rest)?;
            let code = read_varint(&mut rest)?;
            Ok(Incoming::Error {
                id: u32::try_from(id).map_err(|_| "id out of range")?,
                code: u16::try_from(code).unwrap_or(u16::MAX),
            })
        }
        0xA1..=0xA8 => Ok(Incoming::Other),
        other => Err(format!("unknown binary message type 0x{other:02x}")),
    }
}

/// The bench's stamp in a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Which publisher.
    pub publisher: u32,
    /// Its sequence number on this channel (from 1).
    pub seq: u64,
    /// The scheduled send time, Unix ns.
    pub time_ns: i64,
}

/// The binary stamp's length: `HB`, u32, u64, i64.
pub const BINARY_STAMP_LEN: usize = 2 + 4 + 8 + 8;

/// Appends a payload of about `size` bytes (at least the stamp) carrying `stamp`.
pub fn stamp_payload(enc: Encoding, stamp: Stamp, size: usize, out: &mut Vec<u8>) {
    let start = out.len();
    match enc {
        Encoding::Json => {
            out.extend_from_slice(b"{\"hb\":[");
            write_u64(out, u64::from(stamp.publisher));
            out.push(b',');
            write_u64(out, stamp.seq);
            out.push(b',');
            write_i64(out, stamp.time_ns);
            out.extend_from_slice(b"],\"pad\":\"");
            let used = out.len() - start + 2;
            out.resize(out.len() + size.saturating_sub(used), b'x');
            out.extend_from_slice(b"\"}");
        }
        Encoding::Binary => {
            out.extend_from_slice(b"HB");
            out.extend_from_slice(&stamp.publisher.to_be_bytes());
            out.extend_from_slice(&stamp.seq.to_be_bytes());
            out.extend_from_slice(&stamp.time_ns.to_be_bytes());
            out.resize(start + size.max(BINARY_STAMP_LEN), 0);
        }
    }
}

/// Reads the stamp out of `data` (as returned in [`Incoming::Pub`]).
pub fn read_stamp(enc: Encoding, data: &[u8]) -> Option<Stamp> {
    match enc {
        Encoding::Binary => {
            let rest = data.strip_prefix(b"HB")?;
            let publisher = u32::from_be_bytes(rest.get(0..4)?.try_into().ok()?);
            let seq = u64::from_be_bytes(rest.get(4..12)?.try_into().ok()?);
            let time_ns = i64::from_be_bytes(rest.get(12..20)?.try_into().ok()?);
            Some(Stamp {
                publisher,
                seq,
                time_ns,
            })
        }
        Encoding::Json => {
            let at = find_key(data, b"\"hb\"")?;
            stamp_after_key(&data[at + 4..])
        }
    }
}

/// `pusher:pong`, the answer to the server's `pusher:ping`.
pub const PUSHER_PONG: &[u8] = b"{\"event\":\"pusher:pong\",\"data\":{}}";

/// Appends `{"event":"pusher:subscribe","data":{"channel":…}}` (a public
/// channel: no `auth`).
pub fn pusher_subscribe(channel: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":");
    write_json_string(out, channel);
    out.extend_from_slice(b"}}");
}

/// The event name of a Pusher frame `{"event":E,...}`, in place (event
/// names the bench meets need no unescaping; one with a `\\` is returned
/// escaped, which only matters for names it does not look at).
pub fn pusher_event(frame: &[u8]) -> Option<&[u8]> {
    let at = find_key(frame, b"\"event\"")?;
    let rest = frame[at + 7..].trim_ascii_start().strip_prefix(b":")?;
    let rest = rest.trim_ascii_start().strip_prefix(b"\"")?;
    let end = rest.iter().position(|&b| b == b'"')?;
    Some(&rest[..end])
}

/// Reads the JSON stamp out of a Pusher event frame, whose `data` is the
/// bench's payload as a JSON *string* (`"{\\"hb\\":[p,seq,t],…}"`, see
/// docs/pusher.md's mapping): the key is found escaped, in place, without
/// unescaping or allocating (the stamp's numbers need no escapes).
pub fn read_pusher_stamp(frame: &[u8]) -> Option<Stamp> {
    const KEY: &[u8] = b"\\\"hb\\\"";
    let at = find_key(frame, b"\"data\"")?;
    let data = &frame[at + 6..];
    let k = data.windows(KEY.len()).position(|w| w == KEY)?;
    stamp_after_key(&data[k + KEY.len()..])
}

/// The stamp `: [publisher, seq, time_ns]` that follows the `hb` key, in
/// the bench's JSON payload (the same bytes whether or not the payload sits
/// escaped in a Pusher data string: the numbers need no escapes).
fn stamp_after_key(rest: &[u8]) -> Option<Stamp> {
    let rest = rest.trim_ascii_start().strip_prefix(b":")?;
    let rest = rest.trim_ascii_start().strip_prefix(b"[")?;
    let (publisher, rest) = json_int(rest)?;
    let rest = rest.trim_ascii_start().strip_prefix(b",")?;
    let (seq, rest) = json_int(rest)?;
    let rest = rest.trim_ascii_start().strip_prefix(b",")?;
    let (time_ns, _) = json_int(rest)?;
    Some(Stamp {
        publisher: u32::try_from(publisher).ok()?,
        seq: u64::try_from(seq).ok()?,
        time_ns,
    })
}

/// The `"offset"` of a JSON publication push (canonically before `data`,
/// so the first such key is the push's own).
fn json_offset(buf: &[u8]) -> u64 {
    find_key(buf, b"\"offset\"")
        .and_then(|at| buf[at + 8..].trim_ascii_start().strip_prefix(b":"))
        .and_then(json_int)
        .and_then(|(v, _)| u64::try_from(v).ok())
        .unwrap_or(0)
}

/// A JSON integer at the front of `s` (after spaces), and what follows.
pub(crate) fn json_int(s: &[u8]) -> Option<(i64, &[u8])> {
    let s = s.trim_ascii_start();
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 || n > 19 {
        return None;
    }
    let mut v: i64 = 0;
    for &d in &digits[..n] {
        v = v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
    }
    Some((if neg { -v } else { v }, &digits[n..]))
}

/// The position of `key` (quotes included) among the quoted strings of `data`.
pub fn find_key(data: &[u8], key: &[u8]) -> Option<usize> {
    let mut from = 0;
    loop {
        let at = from + data.get(from..)?.iter().position(|&b| b == b'"')?;
        if data[at..].starts_with(key) {
            return Some(at);
        }
        from = at + 1;
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub(crate) fn read_varint(buf: &mut &[u8]) -> Result<u64, String> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let (&b, rest) = buf.split_first().ok_or("truncated varint")?;
        *buf = rest;
        v |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

fn skip(buf: &[u8], n: u64) -> Result<&[u8], String> {
    usize::try_from(n)
        .ok()
        .and_then(|n| buf.get(n..))
        .ok_or_else(|| "truncated message".into())
}

/// Appends the decimal form of `v`.
pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends the decimal form of `v`.
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(out, v.unsigned_abs());
}

/// The `seq` of a `lobby_update` push, read without decoding its entries
/// (so that updates a bot's lobby view already has cost nothing more).
pub fn lobby_update_seq(enc: Encoding, msg: &[u8]) -> Option<u64> {
    match enc {
        Encoding::Binary => {
            let mut rest = msg.strip_prefix(&[0xA5])?;
            let path_len = usize::try_from(read_varint(&mut rest).ok()?).ok()?;
            let mut rest = rest.get(path_len..)?;
            read_varint(&mut rest).ok()
        }
        Encoding::Json => {
            let rest = msg.strip_prefix(b"{\"lobby_update\":{\"path\":")?;
            let rest = skip_json_string(rest)?;
            let (seq, _) = json_int(rest.strip_prefix(b",\"seq\":")?)?;
            u64::try_from(seq).ok()
        }
    }
}

/// What follows the JSON string at the start of `s`.
fn skip_json_string(s: &[u8]) -> Option<&[u8]> {
    let mut i = 1;
    if s.first() != Some(&b'"') {
        return None;
    }
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return s.get(i + 1..),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use herald_proto::{Command, Push, Request};

    const BOTH: [Encoding; 2] = [Encoding::Json, Encoding::Binary];

    #[test]
    fn pusher_frames_carry_the_stamp_in_their_data_string() {
        let stamp = Stamp {
            publisher: 3,
            seq: 42,
            time_ns: 1_700_000_000_123_456_789,
        };
        let mut payload = Vec::new();
        stamp_payload(Encoding::Json, stamp, 128, &mut payload);
        // What Herald renders for a payload that is not a Pusher envelope:
        // event `message`, the payload's text as the data string.
        let text = std::str::from_utf8(&payload).unwrap();
        let frame =
            serde_json::json!({"event": "message", "channel": "c", "data": text}).to_string();
        assert_eq!(pusher_event(frame.as_bytes()), Some(&b"message"[..]));
        let got = read_pusher_stamp(frame.as_bytes()).unwrap();
        assert_eq!(
            (got.publisher, got.seq, got.time_ns),
            (3, 42, stamp.time_ns)
        );
        assert!(read_pusher_stamp(b"{\"event\":\"message\",\"data\":\"x\"}").is_none());
        let mut sub = Vec::new();
        pusher_subscribe("bench.a.0", &mut sub);
        let v: serde_json::Value = serde_json::from_slice(&sub).unwrap();
        assert_eq!(v["data"]["channel"], "bench.a.0");
        let v: serde_json::Value = serde_json::from_slice(PUSHER_PONG).unwrap();
        assert_eq!(v["event"], "pusher:pong");
    }

    #[test]
    fn commands_decode_with_herald_proto() {
        for enc in BOTH {
            let mut out = Vec::new();
            connect(enc, 1, &mut out);
            let r = enc.decode_request(&out).unwrap();
            assert_eq!(r.id, 1);
            assert!(matches!(
                r.cmd,
                Command::Connect {
                    token: None,
                    name: None
                }
            ));

            out.clear();
            subscribe_from(enc, 300, "bench.7", None, &mut out);
            let r = enc.decode_request(&out).unwrap();
            assert_eq!(r.id, 300);
            assert!(
                matches!(r.cmd, Command::Subscribe { ref channel, recover: None, join_leave: false, token: None } if channel == "bench.7")
            );

            let mut data = Vec::new();
            let stamp = Stamp {
                publisher: 3,
                seq: 99,
                time_ns: 1_700_000_000_000_000_001,
            };
            stamp_payload(enc, stamp, 100, &mut data);
            assert_eq!(data.len(), 100);
            out.clear();
            publish(enc, 0, "c", &data, &mut out);
            let r: Request = enc.decode_request(&out).unwrap();
            assert_eq!(r.id, 0);
            let Command::Publish { channel, data: got } = r.cmd else {
                panic!("not a publish")
            };
            assert_eq!(channel, "c");
            assert_eq!(&got[..], &data[..]);
            assert_eq!(read_stamp(enc, &got), Some(stamp));
        }
    }

    #[test]
    fn pushes_and_replies_classify() {
        for enc in BOTH {
            let mut data = Vec::new();
            let stamp = Stamp {
                publisher: 0,
                seq: 1,
                time_ns: 5,
            };
            stamp_payload(enc, stamp, 10, &mut data);
            let mut out = BytesMut::new();
            enc.encode_server(
                &ServerMsg::Push(Push::Publication {
                    channel: "bench.1".into(),
                    offset: 12345,
                    data: Bytes::from(data.clone()),
                }),
                &mut out,
            );
            let Incoming::Pub {
                data: found,
                offset,
            } = classify(enc, &out).unwrap()
            else {
                panic!("not a pub: {:?}", String::from_utf8_lossy(&out));
            };
            assert_eq!(read_stamp(enc, found), Some(stamp));
            assert_eq!(offset, 12345);

            out.clear();
            enc.encode_server(
                &ServerMsg::Reply {
                    id: 77,
                    reply: Reply::Publish {
                        epoch: "e1".into(),
                        offset: 3,
                    },
                },
                &mut out,
            );
            assert_eq!(classify(enc, &out).unwrap(), Incoming::Reply { id: 77 });

            out.clear();
            enc.encode_server(
                &ServerMsg::Error {
                    id: 9,
                    code: 103,
                    message: "no".into(),
                },
                &mut out,
            );
            assert_eq!(
                classify(enc, &out).unwrap(),
                Incoming::Error { id: 9, code: 103 }
            );

            out.clear();
            enc.encode_server(
                &ServerMsg::Push(Push::Disconnect {
                    code: 3001,
                    reason: "bye".into(),
                }),
                &mut out,
            );
            assert_eq!(classify(enc, &out).unwrap(), Incoming::Other);
        }
        assert!(classify(Encoding::Binary, &[0x42]).is_err());
        assert!(classify(Encoding::Json, b"{").is_err());
    }

    #[test]
    fn recovering_subscribe_decodes_with_herald_proto() {
        for enc in BOTH {
            let mut out = Vec::new();
            subscribe_from(enc, 9, "a.b", Some(("ep\"q", 41)), &mut out);
            let r = enc.decode_request(&out).unwrap();
            let Command::Subscribe {
                channel,
                recover: Some(pos),
                ..
            } = r.cmd
            else {
                panic!("not a recovering subscribe")
            };
            assert_eq!(
                (channel.as_str(), pos.epoch.as_str(), pos.offset),
                ("a.b", "ep\"q", 41)
            );
        }
        let mut body = Vec::new();
        api_publish_body("c", b"{\"hb\":[1,2,3]}", &mut body);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["data"]["hb"][1], 2);
    }

    #[test]
    fn json_array_items() {
        let items: Vec<_> = json_items(br#" [ {"a":"],\"["} , [1,[2]] ,3 ] "#).collect();
        assert_eq!(
            items,
            vec![
                Ok(&br#"{"a":"],\"["}"#[..]),
                Ok(&b"[1,[2]]"[..]),
                Ok(&b"3"[..])
            ]
        );
        assert_eq!(json_items(b"[]").count(), 0);
        assert!(json_items(b"{}").next().unwrap().is_err());
        assert!(json_items(b"[1,").last().unwrap().is_err());
        assert!(json_items(b"[1,,2]").any(|r| r.is_err()));
    }

    #[test]
    fn stamp_sizes() {
        let s = Stamp {
            publisher: 1,
            seq: 2,
            time_ns: -3,
        };
        for size in [0, 10, 64, 1000] {
            let mut out = Vec::new();
            stamp_payload(Encoding::Json, s, size, &mut out);
            assert!(out.len() >= size.min(out.len()));
            let _: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(read_stamp(Encoding::Json, &out), Some(s));
            let mut out = Vec::new();
            stamp_payload(Encoding::Binary, s, size, &mut out);
            assert_eq!(out.len(), size.max(BINARY_STAMP_LEN));
            assert_eq!(read_stamp(Encoding::Binary, &out), Some(s));
        }
    }
}
