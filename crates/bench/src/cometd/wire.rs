//! Bayeux messages as `herald bench cometd` writes and reads them: no I/O,
//! only bytes in and out, so every path is tested here without a server.
//!
//! Why not the server's `herald-bayeux` codec: that crate is written for
//! the server side (it parses what clients send and writes replies); the
//! bench needs the opposite direction, and only the handful of fields a
//! client acts on. Incoming batches are read with serde into borrowed
//! fields; a delivery's `data` is read only as far as the bench's stamp
//! (`{"s":STEP,"t":UNIX_NS,"p":PADDING}`) and anything else in it is
//! ignored, so a peer that reorders or re-escapes fields still reads.

use std::borrow::Cow;
use std::io::Write;

use serde::Deserialize;

/// The Bayeux connection type a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BayeuxTransport {
    /// `long-polling`: HTTP POSTs of message batches; `/meta/connect` held.
    LongPolling,
    /// `websocket`: one WebSocket, batches as text frames.
    Websocket,
}

impl BayeuxTransport {
    /// The connection type's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            BayeuxTransport::LongPolling => "long-polling",
            BayeuxTransport::Websocket => "websocket",
        }
    }
}

/// A delivery's stamp, as the bench's publishers write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Stamp {
    /// The rate step the message was published in.
    pub s: u32,
    /// When it was due to be published, Unix nanoseconds.
    pub t: i64,
}

/// `data` of a received message: the stamp if it is the bench's, else
/// nothing (a server may send other data; it is then not a bench delivery).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Data {
    Stamp(Stamp),
    Other(serde::de::IgnoredAny),
}

/// One message of a received batch, the fields the client acts on.
#[derive(Debug, Deserialize)]
pub struct Incoming<'a> {
    /// The channel: `/meta/...` for replies, the room for deliveries.
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
    /// Replies: whether the request succeeded.
    pub successful: Option<bool>,
    /// The handshake's reply: the session.
    #[serde(rename = "clientId", borrow, default)]
    pub client_id: Option<Cow<'a, str>>,
    /// An unsuccessful reply's `code:args:message`.
    #[serde(borrow, default)]
    pub error: Option<Cow<'a, str>>,
    /// Advice (a server that says `handshake` or `none` ended the session).
    #[serde(default)]
    pub advice: Option<Advice>,
    #[serde(default)]
    data: Option<Data>,
}

impl Incoming<'_> {
    /// A reply on a meta channel.
    pub fn is_meta(&self) -> bool {
        self.channel.starts_with("/meta/")
    }

    /// The bench's stamp, when this is a delivery of one of its messages.
    pub fn stamp(&self) -> Option<Stamp> {
        match (&self.data, self.successful) {
            // A publish reply may echo the channel but is `successful`;
            // deliveries carry no `successful`.
            (Some(Data::Stamp(s)), None) => Some(*s),
            _ => None,
        }
    }
}

/// The advice fields the client reads.
#[derive(Debug, Deserialize)]
pub struct Advice {
    /// `retry`, `handshake` or `none`.
    pub reconnect: Option<String>,
}

/// Why a batch could not be read.
#[derive(Debug, thiserror::Error)]
#[error("unreadable Bayeux batch ({why}): {excerpt}")]
pub struct WireError {
    why: String,
    excerpt: String,
}

/// Reads a batch: a JSON array of messages (a lone object is read as a
/// batch of one, as CometD's clients accept it).
pub fn parse_batch(body: &[u8]) -> Result<Vec<Incoming<'_>>, WireError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let res = if first == Some(&b'{') {
        serde_json::from_slice::<Incoming<'_>>(body).map(|m| vec![m])
    } else {
        serde_json::from_slice::<Vec<Incoming<'_>>>(body)
    };
    res.map_err(|e| WireError {
        why: e.to_string(),
        excerpt: String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    })
}

/// Appends `s` as a JSON string. Bench strings (client ids, channel names)
/// are plain, but a peer's client id is outside data: escape anyway.
fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing a `&str` to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// `[{"id":ID,"channel":"/meta/handshake",...}]`: asks only for `transport`,
/// as CometD's clients do once they have chosen one.
pub fn handshake(out: &mut Vec<u8>, id: u64, transport: BayeuxTransport) {
    let _ = write!(
        out,
        r#"[{{"id":"{id}","channel":"/meta/handshake","version":"1.0","minimumVersion":"1.0","supportedConnectionTypes":["{}"],"advice":{{"timeout":60000,"interval":0}}}}]"#,
        transport.as_str()
    );
}

/// One `/meta/connect` message (no brackets). `first` asks the server to
/// answer at once (`advice.timeout: 0`), as CometD's first connect does.
pub fn connect(out: &mut Vec<u8>, id: u64, client_id: &str, t: BayeuxTransport, first: bool) {
    let _ = write!(
        out,
        r#"{{"id":"{id}","channel":"/meta/connect","clientId":"#
    );
    write_str(out, client_id);
    let _ = write!(out, r#","connectionType":"{}""#, t.as_str());
    if first {
        out.extend_from_slice(br#","advice":{"timeout":0}"#);
    }
    out.push(b'}');
}

/// One `/meta/subscribe` message (no brackets).
pub fn subscribe(out: &mut Vec<u8>, id: u64, client_id: &str, channel: &str) {
    let _ = write!(
        out,
        r#"{{"id":"{id}","channel":"/meta/subscribe","clientId":"#
    );
    write_str(out, client_id);
    out.extend_from_slice(br#","subscription":"#);
    write_str(out, channel);
    out.push(b'}');
}

/// One publish message (no brackets) whose `data` is the stamp padded with
/// `p` so that `data` is `payload` bytes long (at least the stamp itself).
pub fn publish(
    out: &mut Vec<u8>,
    id: u64,
    client_id: &str,
    channel: &str,
    stamp: Stamp,
    payload: usize,
) {
    let _ = write!(out, r#"{{"id":"{id}","channel":"#);
    write_str(out, channel);
    out.extend_from_slice(br#","clientId":"#);
    write_str(out, client_id);
    out.extend_from_slice(br#","data":"#);
    let start = out.len();
    let _ = write!(out, r#"{{"s":{},"t":{},"p":""#, stamp.s, stamp.t);
    let used = out.len() - start + 2; // the closing `"}`
    for i in 0..payload.saturating_sub(used) {
        out.push(b'a' + (i % 26) as u8);
    }
    out.extend_from_slice(b"\"}}");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn publish_data_is_payload_bytes_and_reads_back() {
        let mut out = b"[".to_vec();
        let stamp = Stamp {
            s: 3,
            t: 1_700_000_000_123_456_789,
        };
        publish(&mut out, 7, "abc", "/bench/r1", stamp, 50);
        out.push(b']');
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(serde_json::to_vec(&v[0]["data"]).unwrap().len(), 50);
        assert_eq!(v[0]["channel"], "/bench/r1");
        assert_eq!(v[0]["clientId"], "abc");
        // As a delivery (no `successful`), the stamp reads back.
        let batch = parse_batch(&out).unwrap();
        assert_eq!(batch[0].stamp(), Some(stamp));
        // A payload smaller than the stamp: the stamp alone.
        let mut small = Vec::new();
        publish(&mut small, 1, "c", "/x", stamp, 0);
        let v: serde_json::Value = serde_json::from_slice(&small).unwrap();
        assert_eq!(v["data"]["p"], "");
    }

    #[test]
    fn requests_are_json_with_escaped_ids() {
        let mut out = Vec::new();
        handshake(&mut out, 1, BayeuxTransport::LongPolling);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v[0]["supportedConnectionTypes"][0], "long-polling");
        let mut out = b"[".to_vec();
        connect(&mut out, 2, "a\"b", BayeuxTransport::Websocket, true);
        out.push(b',');
        subscribe(&mut out, 3, "a\"b", "/bench/r0");
        out.push(b']');
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v[0]["clientId"], "a\"b");
        assert_eq!(v[0]["advice"]["timeout"], 0);
        assert_eq!(v[1]["subscription"], "/bench/r0");
    }

    #[test]
    fn reads_replies_deliveries_and_lone_objects() {
        let body = br#"[{"channel":"/meta/handshake","successful":true,"clientId":"x1","advice":{"reconnect":"retry","interval":0}},
            {"channel":"/bench/r0","data":{"t":5,"s":1,"p":"zz","extra":[1,2]}},
            {"channel":"/bench/r0","data":"not ours"},
            {"channel":"/bench/r0","successful":true,"id":"9"}]"#;
        let b = parse_batch(body).unwrap();
        assert!(b[0].is_meta());
        assert_eq!(b[0].client_id.as_deref(), Some("x1"));
        assert_eq!(b[1].stamp(), Some(Stamp { s: 1, t: 5 }));
        assert_eq!(b[2].stamp(), None);
        assert_eq!(b[3].stamp(), None);
        let one = parse_batch(br#" {"channel":"/meta/connect","successful":false,"error":"402::Unknown client","advice":{"reconnect":"handshake"}}"#).unwrap();
        assert_eq!(one[0].error.as_deref(), Some("402::Unknown client"));
        assert_eq!(
            one[0].advice.as_ref().unwrap().reconnect.as_deref(),
            Some("handshake")
        );
    }

    #[test]
    fn bad_batches_are_errors_not_panics() {
        for bad in [
            &b""[..],
            b"[",
            b"nope",
            b"[1,2]",
            b"[{\"successful\":true}]",
            b"\xff\xfe",
        ] {
            assert!(
                parse_batch(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
