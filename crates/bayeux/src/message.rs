//! What a Bayeux client sends: a batch, which is a JSON array of message
//! objects (one HTTP body of the `long-polling` transport, one text frame
//! of the `websocket` transport).
//!
//! [`decode_batch`] refuses a body that is not a JSON array of at most
//! `max` elements as a whole ([`BatchError`]: the transport answers it
//! without any reply per message, there being no message to reply to).
//! Within a good array each element is decoded on its own: one that is not
//! a message (not an object, no `channel`, a field of the wrong type) comes
//! back as an [`Invalid`] carrying what could be read of its `channel` and
//! `id`, so that it gets its own unsuccessful reply and the rest of the
//! batch is served.

use serde::Deserialize;
use serde_json::value::RawValue;

/// One message of a batch. Fields Herald does not use are ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The channel: a meta channel, a service channel, or where to publish.
    pub channel: String,
    /// The client's message id, echoed verbatim in the reply (a string in
    /// Bayeux; CometD sends numbers as strings, some clients numbers).
    #[serde(default, deserialize_with = "id")]
    pub id: Option<Box<RawValue>>,
    /// The session, on every message but the handshake.
    #[serde(default)]
    pub client_id: Option<String>,
    /// `/meta/subscribe`, `/meta/unsubscribe`: one channel or several.
    #[serde(default)]
    pub subscription: Option<Subscription>,
    /// A publication's data: any JSON value, kept as its text.
    #[serde(default)]
    pub data: Option<Box<RawValue>>,
    /// Extension fields (Herald reads `ext.herald.token`, `ext.ack`).
    #[serde(default)]
    pub ext: Option<Box<RawValue>>,
    /// The client's advice (`timeout`: how long it lets a connect be held).
    #[serde(default)]
    pub advice: Option<ClientAdvice>,
    /// `/meta/connect`: the transport in use.
    #[serde(default)]
    pub connection_type: Option<String>,
    /// `/meta/handshake`: the transports the client can use.
    #[serde(default)]
    pub supported_connection_types: Option<Vec<String>>,
    /// `/meta/handshake`: the protocol version.
    #[serde(default)]
    pub version: Option<String>,
}

/// `subscription`: one channel or an array of channels.
#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Subscription {
    /// One channel.
    One(String),
    /// Several (CometD sends one, the spec allows an array).
    Many(Vec<String>),
}

impl Subscription {
    /// The channels, in order.
    pub fn channels(&self) -> &[String] {
        match self {
            Subscription::One(s) => std::slice::from_ref(s),
            Subscription::Many(v) => v,
        }
    }
}

/// The advice a client sends with `/meta/connect`.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
pub struct ClientAdvice {
    /// Milliseconds the client lets the server hold this connect (CometD's
    /// first connect after a handshake says 0: answer at once).
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// Accepts a string or number id; anything else is refused.
fn id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    let raw: Option<Box<RawValue>> = Option::deserialize(d)?;
    match raw {
        None => Ok(None),
        Some(r) if r.get() == "null" => Ok(None),
        Some(r)
            if r.get().starts_with('"')
                || r.get()
                    .starts_with(|c: char| c == '-' || c.is_ascii_digit()) =>
        {
            Ok(Some(r))
        }
        Some(_) => Err(serde::de::Error::custom("id must be a string or a number")),
    }
}

/// An element of a batch that is not a message.
#[derive(Debug)]
pub struct Invalid {
    /// Its `channel`, if it had a string one.
    pub channel: Option<String>,
    /// Its `id`, if it had a string or number one.
    pub id: Option<Box<RawValue>>,
    /// Why it was refused.
    pub reason: String,
}

/// Why a body is not a batch at all.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    /// Not JSON.
    #[error("malformed JSON: {0}")]
    Malformed(String),
    /// JSON, but not an array of messages.
    #[error("a batch is a JSON array of messages")]
    NotArray,
    /// An empty array.
    #[error("empty batch")]
    Empty,
    /// More messages than the server takes in one batch.
    #[error("batch of {0} messages, more than the {1} allowed")]
    TooMany(usize, usize),
}

/// Decodes a batch of at most `max` messages (see the module docs).
pub fn decode_batch(body: &[u8], max: usize) -> Result<Vec<Result<Message, Invalid>>, BatchError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let elements: Vec<&RawValue> = match first {
        Some(b'[') => {
            serde_json::from_slice(body).map_err(|e| BatchError::Malformed(e.to_string()))?
        }
        Some(_) => {
            // Valid JSON that is not an array, or not JSON at all.
            return Err(
                match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                    Ok(_) => BatchError::NotArray,
                    Err(e) => BatchError::Malformed(e.to_string()),
                },
            );
        }
        None => return Err(BatchError::Malformed("empty body".into())),
    };
    if elements.is_empty() {
        return Err(BatchError::Empty);
    }
    if elements.len() > max {
        return Err(BatchError::TooMany(elements.len(), max));
    }
    Ok(elements.into_iter().map(decode_one).collect())
}

/// What can be salvaged of a refused element, to address its reply.
#[derive(Deserialize)]
struct Salvage {
    #[serde(default)]
    channel: Option<Box<RawValue>>,
    #[serde(default)]
    id: Option<Box<RawValue>>,
}

fn decode_one(raw: &RawValue) -> Result<Message, Invalid> {
    serde_json::from_str::<Message>(raw.get()).map_err(|e| {
        let salvage = serde_json::from_str::<Salvage>(raw.get()).ok();
        let (channel, id) = match salvage {
            Some(s) => (
                s.channel
                    .and_then(|c| serde_json::from_str::<String>(c.get()).ok()),
                s.id.filter(|i| {
                    i.get().starts_with('"')
                        || i.get()
                            .starts_with(|c: char| c == '-' || c.is_ascii_digit())
                }),
            ),
            None => (None, None),
        };
        Invalid {
            channel,
            id,
            reason: if raw.get().starts_with('{') {
                e.to_string()
            } else {
                "a message is a JSON object".into()
            },
        }
    })
}

/// `ext.herald.token` of a message's `ext`: Herald's JWT, on the handshake
/// (the connection's) or a subscribe (a subscribe token).
pub fn herald_token(ext: Option<&RawValue>) -> Option<String> {
    #[derive(Deserialize)]
    struct Ext {
        herald: Option<Herald>,
    }
    #[derive(Deserialize)]
    struct Herald {
        token: Option<String>,
    }
    let ext: Ext = serde_json::from_str(ext?.get()).ok()?;
    ext.herald?.token
}

/// `ext.ack` of a message's `ext`: on the handshake `true` (the client
/// speaks the ack extension); on a connect the batch number it has received.
pub fn ack(ext: Option<&RawValue>) -> Option<serde_json::Value> {
    #[derive(Deserialize)]
    struct Ext {
        ack: Option<serde_json::Value>,
    }
    let ext: Ext = serde_json::from_str(ext?.get()).ok()?;
    ext.ack
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(body: &str) -> Vec<Result<Message, Invalid>> {
        decode_batch(body.as_bytes(), 10).expect("a batch")
    }

    #[test]
    fn a_handshake_as_cometd_sends_it() {
        let b = ok(
            r#"[{"id":"1","version":"1.0","minimumVersion":"1.0","channel":"/meta/handshake","supportedConnectionTypes":["websocket","long-polling"],"advice":{"timeout":60000,"interval":0},"ext":{"herald":{"token":"T"}}}]"#,
        );
        let m = b[0].as_ref().expect("valid");
        assert_eq!(m.channel, "/meta/handshake");
        assert_eq!(m.id.as_deref().map(RawValue::get), Some("\"1\""));
        assert_eq!(m.version.as_deref(), Some("1.0"));
        assert_eq!(
            m.supported_connection_types.as_deref().map(<[String]>::len),
            Some(2)
        );
        assert_eq!(m.advice.as_ref().and_then(|a| a.timeout), Some(60000));
        assert_eq!(herald_token(m.ext.as_deref()).as_deref(), Some("T"));
    }

    #[test]
    fn messages_of_every_kind() {
        let b = ok(r#" [
            {"channel":"/meta/connect","clientId":"c","connectionType":"long-polling","id":7,"ext":{"ack":3}},
            {"channel":"/meta/subscribe","clientId":"c","subscription":"/a/*"},
            {"channel":"/meta/unsubscribe","clientId":"c","subscription":["/a","/b"]},
            {"channel":"/a","clientId":"c","data":{"x":[1,2]},"id":"9"}
        ] "#);
        let m: Vec<&Message> = b.iter().map(|r| r.as_ref().expect("valid")).collect();
        assert_eq!(m[0].client_id.as_deref(), Some("c"));
        assert_eq!(m[0].id.as_deref().map(RawValue::get), Some("7"));
        assert_eq!(ack(m[0].ext.as_deref()), Some(serde_json::json!(3)));
        assert_eq!(m[1].subscription, Some(Subscription::One("/a/*".into())));
        assert_eq!(
            m[2].subscription
                .as_ref()
                .map(Subscription::channels)
                .map(<[String]>::len),
            Some(2)
        );
        assert_eq!(
            m[3].data.as_deref().map(RawValue::get),
            Some(r#"{"x":[1,2]}"#)
        );
    }

    #[test]
    fn bodies_that_are_not_batches() {
        let err = |b: &str| decode_batch(b.as_bytes(), 2).expect_err(b);
        assert!(matches!(err("[{"), BatchError::Malformed(_)));
        assert!(matches!(err("nope"), BatchError::Malformed(_)));
        assert!(matches!(err(""), BatchError::Malformed(_)));
        assert_eq!(
            err(r#"{"channel":"/meta/handshake"}"#),
            BatchError::NotArray
        );
        assert_eq!(err("42"), BatchError::NotArray);
        assert_eq!(err("[]"), BatchError::Empty);
        assert_eq!(
            err(r#"[{"channel":"/a"},{"channel":"/a"},{"channel":"/a"}]"#),
            BatchError::TooMany(3, 2)
        );
    }

    #[test]
    fn bad_elements_are_refused_one_by_one() {
        let b = ok(
            r#"[1, {"id":"2"}, {"channel":5,"id":"3"}, {"channel":"/a","id":{"x":1}}, {"channel":"/a","clientId":7,"id":"5"}, {"channel":"/ok"}]"#,
        );
        let bad: Vec<&Invalid> = b.iter().filter_map(|r| r.as_ref().err()).collect();
        assert_eq!(bad.len(), 5);
        assert_eq!(bad[0].reason, "a message is a JSON object");
        assert_eq!(bad[1].id.as_deref().map(RawValue::get), Some("\"2\""));
        assert_eq!(bad[1].channel, None);
        assert_eq!(bad[2].channel, None);
        assert_eq!(bad[3].channel.as_deref(), Some("/a"));
        assert!(bad[3].id.is_none());
        assert_eq!(bad[4].id.as_deref().map(RawValue::get), Some("\"5\""));
        assert!(b[5].is_ok());
    }

    #[test]
    fn tokens_and_acks_are_optional() {
        assert_eq!(herald_token(None), None);
        let raw = RawValue::from_string(r#"{"herald":{}}"#.into()).expect("json");
        assert_eq!(herald_token(Some(&raw)), None);
        let raw = RawValue::from_string(r#"{"herald":{"token":1}}"#.into()).expect("json");
        assert_eq!(herald_token(Some(&raw)), None);
        assert_eq!(ack(Some(&raw)), None);
    }
}
