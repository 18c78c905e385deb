//! Pusher channel names, their kinds, and how Pusher channels and events map
//! onto Herald channels and payloads (docs/decisions/0007-pusher-protocol.md).
//!
//! **Names.** A Pusher channel `NAME` of an app is the Herald channel
//! `NAMESPACE:NAME'`, `NAMESPACE` being the app's namespace (by default
//! `pusher-<app id>`) and `NAME'` the name with `;` written as `/` (Pusher
//! allows `;`, Herald does not; Pusher names never contain `/`, so the
//! mapping is reversible). Apps are isolated because their namespaces differ,
//! and Herald's namespace rules and history settings apply to them as to any.
//!
//! **Payloads.** A Pusher event is stored in Herald as the JSON object
//! [`Envelope`] `{"event":E,"data":D,...}`, so that Herald clients see which
//! event it is and Pusher clients get the same event back. `D` is the data
//! itself when Pusher's data string is a JSON object or array (Herald clients
//! then read structured data), else the data as a JSON string; rendering to
//! Pusher undoes exactly that, so every data string makes the round trip
//! unchanged. A Herald publication that is not an envelope reaches Pusher
//! clients as event [`PLAIN_EVENT`] with its payload text as data.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Prefix of the channel that carries a signed-in user's events
/// (`sendToUser`); followed by the user id.
pub const USER_CHANNEL: &str = "#server-to-user-";

/// Longest channel name Pusher accepts.
pub const MAX_NAME: usize = 164;

/// The event name a plain Herald publication (not an [`Envelope`]) is
/// delivered to Pusher clients under.
pub const PLAIN_EVENT: &str = "message";

/// Who may join a channel and what it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Anyone may subscribe; client events are refused.
    Public,
    /// `private-`: an auth signature is needed; client events allowed.
    Private,
    /// `private-encrypted-`: as private, but payloads are end-to-end
    /// encrypted by the SDKs and relayed opaquely; client events refused.
    Encrypted,
    /// `presence-`: as private, with a member list (`channel_data`).
    Presence,
}

/// A channel's kind and whether it is a `cache-` channel (the last event is
/// replayed to each new subscriber).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelType {
    /// Who may join.
    pub kind: Kind,
    /// A cache channel.
    pub cache: bool,
}

impl ChannelType {
    /// Classifies a channel by its prefix.
    pub fn of(name: &str) -> ChannelType {
        let (kind, rest) = if let Some(r) = name.strip_prefix("private-encrypted-") {
            (Kind::Encrypted, r)
        } else if let Some(r) = name.strip_prefix("private-") {
            (Kind::Private, r)
        } else if let Some(r) = name.strip_prefix("presence-") {
            (Kind::Presence, r)
        } else {
            (Kind::Public, name)
        };
        ChannelType {
            kind,
            cache: rest.starts_with("cache-"),
        }
    }

    /// Whether joining needs an auth signature.
    pub fn needs_auth(self) -> bool {
        self.kind != Kind::Public
    }

    /// Whether clients may send `client-*` events on it.
    pub fn allows_client_events(self) -> bool {
        matches!(self.kind, Kind::Private | Kind::Presence)
    }
}

/// Whether `name` is a valid Pusher channel name: 1 to [`MAX_NAME`] of
/// `A-Z a-z 0-9 _ - = @ , . ;`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-=@,.;".contains(&b))
}

/// The user id of a user channel (`#server-to-user-ID`), if `name` is one
/// and the id is made of channel characters.
pub fn user_channel(name: &str) -> Option<&str> {
    let id = name.strip_prefix(USER_CHANNEL)?;
    valid_name(id).then_some(id)
}

/// Whether `namespace` can prefix Herald channel names for an app: 1 to 64 of
/// Herald's channel characters, without `:`.
pub fn valid_namespace(namespace: &str) -> bool {
    !namespace.is_empty()
        && namespace.len() <= 64
        && namespace
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-@/=,.".contains(&b))
}

/// The Herald channel of Pusher channel `name` in `namespace` (`;` as `/`,
/// and the `#` of user channels as `:`: characters Pusher names never hold
/// in the other form).
pub fn to_herald(namespace: &str, name: &str) -> String {
    let mut s = String::with_capacity(namespace.len() + 1 + name.len());
    s.push_str(namespace);
    s.push(':');
    s.extend(name.chars().map(|c| match c {
        ';' => '/',
        '#' => ':',
        c => c,
    }));
    s
}

/// The Pusher channel of Herald channel `herald`, if it is in `namespace`.
pub fn from_herald<'a>(namespace: &str, herald: &'a str) -> Option<Cow<'a, str>> {
    let name = herald.strip_prefix(namespace)?.strip_prefix(':')?;
    Some(if name.contains(['/', ':']) {
        Cow::Owned(
            name.chars()
                .map(|c| match c {
                    '/' => ';',
                    ':' => '#',
                    c => c,
                })
                .collect(),
        )
    } else {
        Cow::Borrowed(name)
    })
}

/// A Pusher event as stored in a Herald publication (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The event name.
    pub event: Cow<'a, str>,
    /// Pusher's data string.
    pub data: Cow<'a, str>,
    /// The member who sent a client event on a presence channel.
    pub user_id: Option<Cow<'a, str>>,
    /// The connection (Herald client id) the event is not delivered to: the
    /// sender of a client event, or the HTTP API's `socket_id`.
    pub except: Option<u64>,
}

#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(borrow)]
    data: &'a RawValue,
    #[serde(default, borrow)]
    user_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    socket_id: Option<Cow<'a, str>>,
}

/// Pusher's data string of a JSON value: a string's contents, any other
/// value's JSON text.
pub fn data_string(value: &RawValue) -> Cow<'_, str> {
    let text = value.get();
    if text.starts_with('"') {
        if let Ok(s) = serde_json::from_str::<Cow<'_, str>>(text) {
            return s;
        }
    }
    Cow::Borrowed(text)
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    // Serialising a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

impl<'a> Envelope<'a> {
    /// Reads a Herald payload as an envelope; `None` when it is not one.
    pub fn parse(payload: &'a [u8]) -> Option<Envelope<'a>> {
        if payload.first() != Some(&b'{') {
            return None;
        }
        let raw: RawEnvelope<'a> = serde_json::from_slice(payload).ok()?;
        Some(Envelope {
            event: raw.event,
            data: data_string(raw.data),
            user_id: raw.user_id,
            except: raw.socket_id.as_deref().and_then(crate::parse_socket_id),
        })
    }

    /// The Herald payload carrying this event.
    pub fn to_payload(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.event.len() + self.data.len() + 48);
        out.extend_from_slice(b"{\"event\":");
        write_str(&mut out, &self.event);
        out.extend_from_slice(b",\"data\":");
        // Only data with no surrounding whitespace is embedded: the JSON
        // parser would drop that whitespace and break the round trip.
        let d = self.data.as_bytes();
        let structured = matches!(
            (d.first(), d.last()),
            (Some(b'{'), Some(b'}')) | (Some(b'['), Some(b']'))
        ) && serde_json::from_str::<&RawValue>(&self.data).is_ok();
        if structured {
            out.extend_from_slice(self.data.as_bytes());
        } else {
            write_str(&mut out, &self.data);
        }
        if let Some(u) = &self.user_id {
            out.extend_from_slice(b",\"user_id\":");
            write_str(&mut out, u);
        }
        if let Some(id) = self.except {
            out.extend_from_slice(b",\"socket_id\":");
            write_str(&mut out, &crate::socket_id(id));
        }
        out.push(b'}');
        out
    }

    /// How a Herald publication reaches Pusher clients: its envelope, or else
    /// event [`PLAIN_EVENT`] with the payload as data (a JSON string's
    /// contents, other JSON as its text). `None` for a payload that is not
    /// UTF-8: Pusher events carry text only.
    pub fn of_publication(payload: &'a [u8]) -> Option<Envelope<'a>> {
        if let Some(e) = Envelope::parse(payload) {
            return Some(e);
        }
        let text = std::str::from_utf8(payload).ok()?;
        let data = match serde_json::from_str::<&RawValue>(text) {
            Ok(v) if v.get().starts_with('"') => Cow::Owned(data_string(v).into_owned()),
            Ok(_) => Cow::Borrowed(text.trim()),
            Err(_) => Cow::Borrowed(text),
        };
        Some(Envelope {
            event: Cow::Borrowed(PLAIN_EVENT),
            data,
            user_id: None,
            except: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let t = |n| ChannelType::of(n);
        assert_eq!(t("news").kind, Kind::Public);
        assert_eq!(t("private-a").kind, Kind::Private);
        assert_eq!(t("private-encrypted-a").kind, Kind::Encrypted);
        assert_eq!(t("presence-a").kind, Kind::Presence);
        assert!(t("cache-a").cache && t("private-cache-a").cache);
        assert!(t("presence-cache-a").cache && t("private-encrypted-cache-a").cache);
        assert!(!t("news-cache-a").cache);
        assert!(t("private-a").allows_client_events() && t("presence-a").allows_client_events());
        assert!(!t("news").allows_client_events());
        assert!(!t("private-encrypted-a").allows_client_events());
    }

    #[test]
    fn names_map_both_ways() {
        assert!(valid_name("private-a_b=c@d,e.f;g"));
        assert!(!valid_name("") && !valid_name("a b") && !valid_name("a:b") && !valid_name("a/b"));
        assert!(valid_name(&"x".repeat(MAX_NAME)) && !valid_name(&"x".repeat(MAX_NAME + 1)));
        let h = to_herald("pusher-1", "a;b.c");
        assert_eq!(h, "pusher-1:a/b.c");
        assert_eq!(from_herald("pusher-1", &h).as_deref(), Some("a;b.c"));
        assert_eq!(from_herald("pusher-1", "pusher-12:x"), None);
        assert_eq!(from_herald("pusher-1", "other:x"), None);
        assert!(valid_namespace("pusher-1") && !valid_namespace("a:b") && !valid_namespace(""));
        let u = to_herald("pusher-1", "#server-to-user-ann");
        assert_eq!(u, "pusher-1::server-to-user-ann");
        assert_eq!(
            from_herald("pusher-1", &u).as_deref(),
            Some("#server-to-user-ann")
        );
        assert_eq!(user_channel("#server-to-user-ann"), Some("ann"));
        assert_eq!(user_channel("#server-to-user-"), None);
        assert_eq!(user_channel("server-to-user-ann"), None);
    }

    fn round_trip(data: &str) {
        let e = Envelope {
            event: "ev".into(),
            data: data.into(),
            user_id: Some("u1".into()),
            except: Some(7),
        };
        let payload = e.to_payload();
        assert!(serde_json::from_slice::<serde_json::Value>(&payload).is_ok());
        assert_eq!(Envelope::parse(&payload), Some(e), "{data:?}");
    }

    #[test]
    fn every_data_string_makes_the_round_trip() {
        for d in [
            "",
            "hello",
            "{\"a\":1}",
            " {\"a\": [1, 2]} ",
            "[1,2]",
            "\"quoted\"",
            "12",
            "{not json",
            "null",
            "é \u{1} \\",
        ] {
            round_trip(d);
        }
        let structured = Envelope {
            event: "e".into(),
            data: "{\"a\":1}".into(),
            user_id: None,
            except: None,
        };
        assert_eq!(
            structured.to_payload(),
            b"{\"event\":\"e\",\"data\":{\"a\":1}}"
        );
    }

    #[test]
    fn plain_publications_become_message_events() {
        let e = Envelope::of_publication(b"{\"x\":1}").expect("utf-8");
        assert_eq!(
            (e.event.as_ref(), e.data.as_ref()),
            (PLAIN_EVENT, "{\"x\":1}")
        );
        let e = Envelope::of_publication(b"\"hi\"").expect("utf-8");
        assert_eq!(e.data, "hi");
        let e = Envelope::of_publication(b"not json").expect("utf-8");
        assert_eq!(e.data, "not json");
        assert_eq!(Envelope::of_publication(&[0xff, 0xfe]), None);
        let e = Envelope::of_publication(b"{\"event\":\"x\",\"data\":\"y\"}").expect("envelope");
        assert_eq!((e.event.as_ref(), e.data.as_ref()), ("x", "y"));
    }
}
