//! What a Bayeux client receives: replies to its messages (with `advice`)
//! and deliveries of publications, each one JSON object of the array a
//! response body or a WebSocket frame carries ([`batch`]).
//!
//! A delivery is rendered once per publication by the server's renderer
//! ([`delivery`]) and always begins with `{"channel":"/`, a prefix no Herald
//! protocol message has: the transport tells the two apart by it when it
//! drains a session's queue.

use serde::Serialize;
use serde_json::value::RawValue;

/// What the client should do after this reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reconnect {
    /// Connect again (after `interval`).
    Retry,
    /// Handshake again: the session is gone.
    Handshake,
    /// Do not reconnect.
    None,
}

/// The server's advice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Advice {
    /// What to do next.
    pub reconnect: Reconnect,
    /// Milliseconds to wait before the next connect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<u64>,
    /// Milliseconds the server holds a connect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Milliseconds the server keeps a session without a connect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_interval: Option<u64>,
    /// Another connect of this session (another tab) is held already: this
    /// one was answered at once, and the client should poll at `interval`.
    #[serde(
        rename = "multiple-clients",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub multiple_clients: bool,
}

impl Advice {
    /// `reconnect: handshake` (the answer to an unknown `clientId`).
    pub fn handshake() -> Advice {
        Advice {
            reconnect: Reconnect::Handshake,
            interval: Some(0),
            timeout: None,
            max_interval: None,
            multiple_clients: false,
        }
    }

    /// `reconnect: none` (after a disconnect, or a session the server ended
    /// and the client must not resume).
    pub fn none() -> Advice {
        Advice {
            reconnect: Reconnect::None,
            interval: None,
            timeout: None,
            max_interval: None,
            multiple_clients: false,
        }
    }
}

/// A reply to one message.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reply<'a> {
    /// The channel of the message replied to.
    pub channel: &'a str,
    /// Its id, echoed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a RawValue>,
    /// The session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<&'a str>,
    /// Whether it succeeded.
    pub successful: bool,
    /// Why not, `code:args:message`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Subscribe and unsubscribe replies: the channel(s) concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription: Option<&'a str>,
    /// Handshake: the protocol version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<&'a str>,
    /// Handshake: the connection types the server offers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported_connection_types: Option<&'a [&'a str]>,
    /// Advice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<Advice>,
    /// Extension fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ext: Option<&'a RawValue>,
    /// The `timestamp` extension: when it was sent (RFC 1123, GMT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

impl<'a> Reply<'a> {
    /// A successful reply on `channel` to the message with `id`.
    pub fn ok(channel: &'a str, id: Option<&'a RawValue>) -> Reply<'a> {
        Reply {
            channel,
            id,
            client_id: None,
            successful: true,
            error: None,
            subscription: None,
            version: None,
            supported_connection_types: None,
            advice: None,
            ext: None,
            timestamp: None,
        }
    }

    /// An unsuccessful reply carrying `error`.
    pub fn failed(
        channel: &'a str,
        id: Option<&'a RawValue>,
        error: &crate::BayeuxError,
    ) -> Reply<'a> {
        Reply {
            successful: false,
            error: Some(error.to_string()),
            ..Reply::ok(channel, id)
        }
    }

    /// The reply as JSON text.
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings, booleans and raw JSON cannot fail to serialize.
        serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec())
    }
}

/// A delivery: `{"channel":CHANNEL,"data":DATA}` (with `"id"` when given),
/// `data` being JSON text already. Rendered once per publication.
pub fn delivery(channel: &str, data: &str, id: Option<&str>) -> Vec<u8> {
    delivery_at(channel, data, id, None, None)
}

/// [`delivery`] with the `timestamp` extension's field when `timestamp`
/// is given, and the publication's Herald offset as
/// `"ext":{"herald":{"offset":N}}` when `offset` is given (what `ack`
/// sessions are sent: see [`crate::resume`] and [`offset_of`]).
pub fn delivery_at(
    channel: &str,
    data: &str,
    id: Option<&str>,
    timestamp: Option<&str>,
    offset: Option<u64>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(channel.len() + data.len() + 32);
    out.extend_from_slice(b"{\"channel\":");
    // A channel name of segment characters needs no escape, but a string
    // written by serde is right whatever it holds.
    let string = |s: &str| serde_json::to_vec(s).unwrap_or_else(|_| b"\"\"".to_vec());
    out.extend_from_slice(&string(channel));
    if let Some(id) = id {
        out.extend_from_slice(b",\"id\":");
        out.extend_from_slice(&string(id));
    }
    if let Some(t) = timestamp {
        out.extend_from_slice(b",\"timestamp\":");
        out.extend_from_slice(&string(t));
    }
    if let Some(o) = offset {
        out.extend_from_slice(format!(",\"ext\":{{\"herald\":{{\"offset\":{o}}}}}").as_bytes());
    }
    out.extend_from_slice(b",\"data\":");
    out.extend_from_slice(data.as_bytes());
    out.push(b'}');
    out
}

/// Gives `message` (a reply or delivery: a JSON object) the `timestamp`
/// extension's field unless it has it already (deliveries are stamped when
/// rendered, right after their channel).
pub fn stamp(message: &mut Vec<u8>, timestamp: &str) {
    let stamped = message
        .strip_prefix(b"{\"channel\":\"".as_slice())
        .and_then(|rest| rest.iter().position(|&b| b == b'"').map(|i| &rest[i + 1..]))
        .is_some_and(|after| after.starts_with(b",\"timestamp\":"));
    if stamped || message.first() != Some(&b'{') {
        return;
    }
    let mut field = b"\"timestamp\":".to_vec();
    field.extend_from_slice(&serde_json::to_vec(timestamp).unwrap_or_else(|_| b"\"\"".to_vec()));
    if message.get(1) != Some(&b'}') {
        field.push(b',');
    }
    message.splice(1..1, field);
}

/// Whether a queued frame is a delivery (see the module docs).
pub fn is_delivery(frame: &[u8]) -> bool {
    frame.starts_with(b"{\"channel\":\"/")
}

/// The Bayeux channel and Herald offset of a delivery rendered by
/// [`delivery_at`] with an offset; `None` for anything else.
pub fn offset_of(frame: &[u8]) -> Option<(String, u64)> {
    #[derive(serde::Deserialize)]
    struct Herald {
        offset: u64,
    }
    #[derive(serde::Deserialize)]
    struct Ext {
        herald: Herald,
    }
    #[derive(serde::Deserialize)]
    struct Delivery {
        channel: String,
        ext: Option<Ext>,
    }
    let d: Delivery = serde_json::from_slice(frame).ok()?;
    Some((d.channel, d.ext?.herald.offset))
}

/// Joins JSON objects into one JSON array (a response body or a frame).
pub fn batch<'a>(messages: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(b'[');
    for (i, m) in messages.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(m);
    }
    out.push(b']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BayeuxError;

    #[test]
    fn a_delivery_with_its_offset_gives_it_back() {
        let d = delivery_at("/a/b", "{\"x\":1}", None, Some("T"), Some(42));
        let v: serde_json::Value = serde_json::from_slice(&d).expect("json");
        assert_eq!(v["ext"]["herald"]["offset"], 42);
        assert_eq!(v["data"]["x"], 1);
        assert_eq!(offset_of(&d), Some(("/a/b".to_string(), 42)));
        assert!(is_delivery(&d));
        assert_eq!(offset_of(&delivery("/a/b", "1", None)), None);
        assert_eq!(
            offset_of(b"{\"channel\":\"/a\",\"ext\":{\"herald\":{}}}"),
            None
        );
        assert_eq!(offset_of(b"not json"), None);
    }

    #[test]
    fn replies_render_as_bayeux_objects() {
        let id = RawValue::from_string("\"4\"".into()).expect("json");
        let mut r = Reply::ok("/meta/handshake", Some(&id));
        r.client_id = Some("abc");
        r.version = Some(crate::VERSION);
        r.supported_connection_types = Some(&crate::CONNECTION_TYPES);
        r.advice = Some(Advice {
            reconnect: Reconnect::Retry,
            interval: Some(0),
            timeout: Some(30000),
            max_interval: Some(10000),
            multiple_clients: false,
        });
        let v: serde_json::Value = serde_json::from_slice(&r.to_json()).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"channel":"/meta/handshake","id":"4","clientId":"abc","successful":true,
                "version":"1.0","supportedConnectionTypes":["websocket","long-polling"],
                "advice":{"reconnect":"retry","interval":0,"timeout":30000,"maxInterval":10000}})
        );
        let f = Reply::failed("/meta/connect", None, &BayeuxError::unknown_client());
        let v: serde_json::Value = serde_json::from_slice(&f.to_json()).expect("json");
        assert_eq!(v["error"], "402::Unknown client");
        assert_eq!(v["successful"], false);
        let mut m = Reply::ok("/meta/connect", None);
        m.advice = Some(Advice {
            multiple_clients: true,
            ..Advice::handshake()
        });
        let v: serde_json::Value = serde_json::from_slice(&m.to_json()).expect("json");
        assert_eq!(v["advice"]["multiple-clients"], true);
    }

    #[test]
    fn deliveries_and_batches() {
        let d = delivery("/chat/a", r#"{"t":"hi"}"#, None);
        assert_eq!(d, br#"{"channel":"/chat/a","data":{"t":"hi"}}"#);
        assert!(is_delivery(&d));
        assert!(!is_delivery(br#"{"id":1,"subscribe":{}}"#));
        assert!(!is_delivery(br#"{"pub":{"channel":"/x"}}"#));
        let with_id = delivery("/a", "1", Some("7"));
        assert_eq!(with_id, br#"{"channel":"/a","id":"7","data":1}"#);
        let stamped = delivery_at("/a", "1", None, Some("Thu, 01 Jan 1970 00:00:00 GMT"), None);
        assert_eq!(
            stamped,
            br#"{"channel":"/a","timestamp":"Thu, 01 Jan 1970 00:00:00 GMT","data":1}"#
        );
        assert!(is_delivery(&stamped));
        let mut again = stamped.clone();
        stamp(&mut again, "later");
        assert_eq!(again, stamped, "stamped once");
        let mut r = Reply::ok("/meta/connect", None).to_json();
        stamp(&mut r, "T");
        assert_eq!(
            r,
            br#"{"timestamp":"T","channel":"/meta/connect","successful":true}"#
        );
        let mut empty = b"{}".to_vec();
        stamp(&mut empty, "T");
        assert_eq!(empty, br#"{"timestamp":"T"}"#);
        assert_eq!(
            batch([&d[..], &with_id[..]]),
            [b"[".as_slice(), &d, b",", &with_id, b"]"].concat()
        );
        assert_eq!(batch(std::iter::empty()), b"[]");
    }
}
