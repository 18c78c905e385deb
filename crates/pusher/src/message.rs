//! What a Pusher client sends ([`Inbound`], parsed from one WebSocket text
//! message) and what it receives (the `render_*` functions, which return the
//! whole text message).
//!
//! Every server message is `{"event":E,"channel"?:C,"data":D}` where `D` is
//! a JSON *string* holding the data (the clients `JSON.parse` it), except
//! `pusher:error`, whose data is an object, as Pusher sends it. Clients send
//! `data` as an object (`pusher-js`) or as a string (older SDKs); both are
//! accepted. Nothing here allocates per subscriber: publications are rendered
//! once per publication by the caller (docs/decisions/0007).

use crate::channel::data_string;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// One message from a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// `pusher:ping`: answer `pusher:pong`.
    Ping,
    /// `pusher:pong`: the answer to our `pusher:ping` (activity only).
    Pong,
    /// `pusher:subscribe`.
    Subscribe {
        /// The Pusher channel.
        channel: String,
        /// `<key>:<signature>` for private and presence channels.
        auth: Option<String>,
        /// The member's JSON (`{"user_id":..,"user_info":..}`) on presence
        /// channels, exactly as signed.
        channel_data: Option<String>,
    },
    /// `pusher:signin` (user authentication).
    Signin {
        /// `<key>:<signature of socket_id::user::user_data>`.
        auth: String,
        /// The user's JSON, exactly as signed (must hold an `id`).
        user_data: String,
    },
    /// `pusher:unsubscribe`.
    Unsubscribe {
        /// The Pusher channel.
        channel: String,
    },
    /// A `client-*` event for the other subscribers of `channel`.
    ClientEvent {
        /// The event name (starts with `client-`).
        event: Cow<'a, str>,
        /// The Pusher channel.
        channel: Cow<'a, str>,
        /// The data as sent: the JSON text of any value.
        data: &'a str,
    },
    /// Any other event (answered with `pusher:error`).
    Unknown {
        /// Its name.
        event: Cow<'a, str>,
    },
}

/// Why a client message could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not a JSON object with a string `event`.
    #[error("invalid message: expected a JSON object with a string \"event\"")]
    NotJson,
    /// A field the event needs is missing or has the wrong type.
    #[error("invalid {event}: {what}")]
    Field {
        /// The event.
        event: &'static str,
        /// What is wrong.
        what: &'static str,
    },
}

#[derive(Deserialize)]
struct Raw<'a> {
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(default, borrow)]
    channel: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    data: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct SubscribeData {
    channel: String,
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    channel_data: Option<String>,
}

/// Reads the subscription fields from `data`, an object or a string
/// holding one.
fn subscribe_data(
    data: Option<&RawValue>,
    event: &'static str,
) -> Result<SubscribeData, ParseError> {
    let missing = ParseError::Field {
        event,
        what: "data must be an object with a string \"channel\"",
    };
    let data = data.ok_or(missing.clone())?;
    let text = data_string(data);
    serde_json::from_str(&text).map_err(|_| missing)
}

impl<'a> Inbound<'a> {
    /// Parses one text message.
    pub fn parse(text: &'a [u8]) -> Result<Inbound<'a>, ParseError> {
        let raw: Raw<'a> = serde_json::from_slice(text).map_err(|_| ParseError::NotJson)?;
        Ok(match raw.event.as_ref() {
            "pusher:ping" => Inbound::Ping,
            "pusher:pong" => Inbound::Pong,
            "pusher:subscribe" => {
                let d = subscribe_data(raw.data, "pusher:subscribe")?;
                Inbound::Subscribe {
                    channel: d.channel,
                    auth: d.auth,
                    channel_data: d.channel_data,
                }
            }
            "pusher:signin" => {
                #[derive(Deserialize)]
                struct Signin {
                    auth: String,
                    user_data: String,
                }
                let bad = ParseError::Field {
                    event: "pusher:signin",
                    what: "data must be an object with strings \"auth\" and \"user_data\"",
                };
                let data = raw.data.ok_or(bad.clone())?;
                let s: Signin = serde_json::from_str(&data_string(data)).map_err(|_| bad)?;
                Inbound::Signin {
                    auth: s.auth,
                    user_data: s.user_data,
                }
            }
            "pusher:unsubscribe" => {
                let d = subscribe_data(raw.data, "pusher:unsubscribe")?;
                Inbound::Unsubscribe { channel: d.channel }
            }
            e if e.starts_with("client-") => {
                let channel = raw.channel.ok_or(ParseError::Field {
                    event: "client event",
                    what: "a string \"channel\" is required",
                })?;
                let data = raw.data.ok_or(ParseError::Field {
                    event: "client event",
                    what: "\"data\" is required",
                })?;
                Inbound::ClientEvent {
                    event: raw.event,
                    channel,
                    data: data.get(),
                }
            }
            _ => Inbound::Unknown { event: raw.event },
        })
    }
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    // Serialising a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// `{"event":E,"channel":C,"data":"<data as a JSON string>"}` (no channel
/// when `None`), plus `user_id` when given.
pub fn render_event(
    event: &str,
    channel: Option<&str>,
    data: &str,
    user_id: Option<&str>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(event.len() + data.len() + 64);
    out.extend_from_slice(b"{\"event\":");
    push_str(&mut out, event);
    if let Some(c) = channel {
        out.extend_from_slice(b",\"channel\":");
        push_str(&mut out, c);
    }
    out.extend_from_slice(b",\"data\":");
    push_str(&mut out, data);
    if let Some(u) = user_id {
        out.extend_from_slice(b",\"user_id\":");
        push_str(&mut out, u);
    }
    out.push(b'}');
    out
}

/// `pusher:connection_established` with the connection's socket id and the
/// idle time (seconds) after which the client should send `pusher:ping`.
pub fn render_connection_established(socket_id: &str, activity_timeout: u32) -> Vec<u8> {
    let data = serde_json::json!({"socket_id": socket_id, "activity_timeout": activity_timeout});
    render_event(
        "pusher:connection_established",
        None,
        &data.to_string(),
        None,
    )
}

/// `pusher:pong`.
pub fn render_pong() -> Vec<u8> {
    render_event("pusher:pong", None, "{}", None)
}

/// `pusher:error` with a code (`None`: `null`, for errors the protocol has
/// no number for) and a message.
pub fn render_error(code: Option<u16>, message: &str) -> Vec<u8> {
    let v = serde_json::json!({
        "event": "pusher:error",
        "data": {"code": code, "message": message},
    });
    v.to_string().into_bytes()
}

/// `pusher:subscription_error` on `channel`: the SDKs raise it on the channel
/// object (`type` e.g. `AuthError`, an HTTP-like `status`).
pub fn render_subscription_error(channel: &str, kind: &str, error: &str, status: u16) -> Vec<u8> {
    let data = serde_json::json!({"type": kind, "error": error, "status": status});
    render_event(
        "pusher:subscription_error",
        Some(channel),
        &data.to_string(),
        None,
    )
}

/// `pusher_internal:subscription_succeeded` with `data` (a JSON text: `{}`,
/// or the presence member list from [`presence_data`]).
pub fn render_subscription_succeeded(channel: &str, data: &str) -> Vec<u8> {
    render_event(
        "pusher_internal:subscription_succeeded",
        Some(channel),
        data,
        None,
    )
}

/// The presence member list of a subscription reply:
/// `{"presence":{"ids":[..],"hash":{id:info},"count":n}}`, one entry per
/// distinct user id (`members`: user id and `user_info` JSON text, "" for
/// none).
pub fn presence_data<'m>(members: impl IntoIterator<Item = (&'m str, &'m str)>) -> String {
    let mut ids = Vec::new();
    let mut hash = serde_json::Map::new();
    for (id, info) in members {
        if hash.contains_key(id) {
            continue;
        }
        let info: serde_json::Value = serde_json::from_str(info).unwrap_or(serde_json::Value::Null);
        ids.push(serde_json::Value::String(id.to_string()));
        hash.insert(id.to_string(), info);
    }
    let count = ids.len();
    serde_json::json!({"presence": {"ids": ids, "hash": hash, "count": count}}).to_string()
}

/// `pusher_internal:member_added` (`info`: the member's `user_info` JSON
/// text, "" for none).
pub fn render_member_added(channel: &str, user_id: &str, info: &str) -> Vec<u8> {
    let info: serde_json::Value = serde_json::from_str(info).unwrap_or(serde_json::Value::Null);
    let data = serde_json::json!({"user_id": user_id, "user_info": info});
    render_event(
        "pusher_internal:member_added",
        Some(channel),
        &data.to_string(),
        None,
    )
}

/// `pusher_internal:member_removed`.
pub fn render_member_removed(channel: &str, user_id: &str) -> Vec<u8> {
    let data = serde_json::json!({"user_id": user_id});
    render_event(
        "pusher_internal:member_removed",
        Some(channel),
        &data.to_string(),
        None,
    )
}

/// `pusher:signin_success` echoing the signed `user_data`.
pub fn render_signin_success(user_data: &str) -> Vec<u8> {
    let data = serde_json::json!({ "user_data": user_data });
    render_event("pusher:signin_success", None, &data.to_string(), None)
}

/// The `id` and `user_info` (JSON text, "" when absent) of a signed-in
/// user's `user_data`; `None` without a non-empty string `id`.
pub fn parse_user(user_data: &str) -> Option<Member> {
    #[derive(Deserialize)]
    struct Raw<'a> {
        id: String,
        #[serde(default, borrow)]
        user_info: Option<&'a RawValue>,
    }
    let raw: Raw<'_> = serde_json::from_str(user_data).ok()?;
    if raw.id.is_empty() {
        return None;
    }
    Some(Member {
        user_id: raw.id,
        user_info: raw
            .user_info
            .map_or_else(String::new, |i| i.get().to_string()),
    })
}

/// `pusher:cache_miss`: a cache channel had no event to replay.
pub fn render_cache_miss(channel: &str) -> Vec<u8> {
    render_event("pusher:cache_miss", Some(channel), "{}", None)
}

/// A member's `channel_data`, as signed by the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its user id (a JSON number is taken as its decimal text).
    pub user_id: String,
    /// Its `user_info` JSON text ("" when absent).
    pub user_info: String,
}

/// Reads `channel_data`; `None` when it is not an object with a non-empty
/// `user_id` string or number.
pub fn parse_member(channel_data: &str) -> Option<Member> {
    #[derive(Deserialize)]
    struct Raw<'a> {
        #[serde(borrow)]
        user_id: &'a RawValue,
        #[serde(default, borrow)]
        user_info: Option<&'a RawValue>,
    }
    let raw: Raw<'_> = serde_json::from_str(channel_data).ok()?;
    let id = raw.user_id.get();
    let user_id = if id.starts_with('"') {
        serde_json::from_str::<String>(id).ok()?
    } else if id.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        id.to_string()
    } else {
        return None;
    };
    if user_id.is_empty() {
        return None;
    }
    Some(Member {
        user_id,
        user_info: raw
            .user_info
            .map_or_else(String::new, |i| i.get().to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_pusher_js_sends() {
        assert_eq!(
            Inbound::parse(br#"{"event":"pusher:ping","data":{}}"#),
            Ok(Inbound::Ping)
        );
        assert_eq!(
            Inbound::parse(
                br#"{"event":"pusher:subscribe","data":{"auth":"k:s","channel_data":"{\"user_id\":\"1\"}","channel":"presence-a"}}"#
            ),
            Ok(Inbound::Subscribe {
                channel: "presence-a".into(),
                auth: Some("k:s".into()),
                channel_data: Some("{\"user_id\":\"1\"}".into()),
            })
        );
        // Older SDKs send data as a string.
        assert_eq!(
            Inbound::parse(br#"{"event":"pusher:unsubscribe","data":"{\"channel\":\"a\"}"}"#),
            Ok(Inbound::Unsubscribe {
                channel: "a".into()
            })
        );
        let Ok(Inbound::ClientEvent {
            event,
            channel,
            data,
        }) = Inbound::parse(br#"{"event":"client-x","channel":"private-a","data":{"k":1}}"#)
        else {
            panic!("client event");
        };
        assert_eq!(
            (event.as_ref(), channel.as_ref(), data),
            ("client-x", "private-a", "{\"k\":1}")
        );
        assert!(matches!(
            Inbound::parse(br#"{"event":"what"}"#),
            Ok(Inbound::Unknown { .. })
        ));
        assert_eq!(Inbound::parse(b"nope"), Err(ParseError::NotJson));
        assert_eq!(Inbound::parse(br#"{"data":1}"#), Err(ParseError::NotJson));
        assert!(Inbound::parse(br#"{"event":"pusher:subscribe","data":{}}"#).is_err());
        assert!(Inbound::parse(br#"{"event":"client-x","data":{}}"#).is_err());
    }

    #[test]
    fn renders_data_as_a_string() {
        let v: serde_json::Value =
            serde_json::from_slice(&render_event("e", Some("c"), "{\"a\":1}", None)).expect("json");
        assert_eq!(v["data"], "{\"a\":1}");
        let v: serde_json::Value =
            serde_json::from_slice(&render_connection_established("1.2", 120)).expect("json");
        let data: serde_json::Value =
            serde_json::from_str(v["data"].as_str().expect("str")).expect("json");
        assert_eq!(data["socket_id"], "1.2");
        assert_eq!(data["activity_timeout"], 120);
        let v: serde_json::Value =
            serde_json::from_slice(&render_error(Some(4001), "no")).expect("json");
        assert_eq!(v["data"]["code"], 4001);
    }

    #[test]
    fn members() {
        assert_eq!(
            parse_member(r#"{"user_id":"u1","user_info":{"name":"Ann"}}"#),
            Some(Member {
                user_id: "u1".into(),
                user_info: "{\"name\":\"Ann\"}".into()
            })
        );
        assert_eq!(
            parse_member(r#"{"user_id":42}"#).map(|m| m.user_id),
            Some("42".into())
        );
        assert_eq!(parse_member(r#"{"user_id":""}"#), None);
        assert_eq!(parse_member(r#"{"user_info":{}}"#), None);
        assert_eq!(parse_member(r#"{"user_id":{}}"#), None);
        let d = presence_data([("a", "{\"n\":1}"), ("b", ""), ("a", "{}")]);
        let v: serde_json::Value = serde_json::from_str(&d).expect("json");
        assert_eq!(v["presence"]["count"], 2);
        assert_eq!(v["presence"]["hash"]["a"]["n"], 1);
    }
}
