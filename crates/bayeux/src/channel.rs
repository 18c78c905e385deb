//! Bayeux channel names, their kinds, and the one mapping between Bayeux
//! channels and Herald channels (docs/decisions/0016-bayeux.md).
//!
//! **Names.** A Bayeux channel is `/` followed by segments separated by `/`
//! (`/chat/room1`). It maps to the Herald channel whose `.`-separated tokens
//! are those segments (`chat.room1`), so Bayeux clients, Herald clients and
//! Pusher clients share channels: a Herald client subscribed to
//! `chat.room1`, or a publication to it through `POST /api/publish`, meets a
//! CometD client of `/chat/room1`. Herald's namespace separator `:` is
//! written `~` in Bayeux (CometD's clients refuse `:` in channel names, and
//! Herald names never hold `~`): `/chat~eu/room1` is `chat:eu.room1`, in
//! namespace `chat`, and Pusher app 1's `news` (`pusher-1:news`) is
//! `/pusher-1~news`. Otherwise a segment may hold the characters Herald
//! channel names allow other than `.`, `/` and `:` (ASCII letters, digits
//! and `_-@=,`), so the mapping is one-to-one; a Bayeux name with any other
//! character has no Herald channel and is refused (error 400). Namespace
//! permission rules apply to Bayeux clients as to any.
//!
//! **Wildcards.** A final segment `*` matches one segment and `**` one or
//! more, exactly as Herald's pattern tokens `*` and `>` do: `/chat/*` is
//! `chat.*`, `/chat/**` is `chat.>`, `/**` is `>`.
//!
//! **Reserved.** `/meta/**` channels are the protocol's own and
//! `/service/**` channels are private to one client and the server: neither
//! maps to a Herald channel, and a Herald channel whose first token is `meta`
//! or `service` is never delivered to Bayeux clients (it would read as a
//! protocol message). Herald channels whose names cannot be written in Bayeux
//! (a `/` in a token, as Pusher's `;` becomes; an empty token) are not
//! delivered to Bayeux clients either.

use std::fmt;

/// The meta channels of Bayeux 1.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meta {
    /// `/meta/handshake`.
    Handshake,
    /// `/meta/connect`.
    Connect,
    /// `/meta/subscribe`.
    Subscribe,
    /// `/meta/unsubscribe`.
    Unsubscribe,
    /// `/meta/disconnect`.
    Disconnect,
    /// Any other `/meta/` channel: answered with error 400.
    Unknown,
}

impl Meta {
    /// The channel name.
    pub fn name(self) -> &'static str {
        match self {
            Meta::Handshake => "/meta/handshake",
            Meta::Connect => "/meta/connect",
            Meta::Subscribe => "/meta/subscribe",
            Meta::Unsubscribe => "/meta/unsubscribe",
            Meta::Disconnect => "/meta/disconnect",
            Meta::Unknown => "/meta/unknown",
        }
    }
}

/// What a message's channel says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// A `/meta/` channel.
    Meta(Meta),
    /// A `/service/` channel: a request to the server, never broadcast.
    Service,
    /// Any other channel: a publication.
    Broadcast,
}

impl Channel {
    /// Classifies a message's channel.
    pub fn of(name: &str) -> Channel {
        if let Some(rest) = name.strip_prefix("/meta/") {
            return Channel::Meta(match rest {
                "handshake" => Meta::Handshake,
                "connect" => Meta::Connect,
                "subscribe" => Meta::Subscribe,
                "unsubscribe" => Meta::Unsubscribe,
                "disconnect" => Meta::Disconnect,
                _ => Meta::Unknown,
            });
        }
        if name == "/service" || name.starts_with("/service/") {
            return Channel::Service;
        }
        if name == "/meta" {
            return Channel::Meta(Meta::Unknown);
        }
        Channel::Broadcast
    }
}

/// Why a Bayeux channel has no Herald channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    /// Does not start with `/`, or has an empty segment.
    Malformed,
    /// A segment holds a character Herald names do not allow (or `.`).
    Character(char),
    /// A wildcard where none is allowed (publish), or not as the last
    /// segment, or mixed with other characters in a segment.
    Wildcard,
    /// A `/meta/` or `/service/` channel.
    Reserved,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Malformed => f.write_str("invalid channel: /segment[/segment...] expected"),
            NameError::Character(c) => write!(f, "invalid channel: character {c:?} not allowed"),
            NameError::Wildcard => f.write_str("invalid channel: misplaced wildcard"),
            NameError::Reserved => f.write_str("invalid channel: reserved"),
        }
    }
}

/// Whether `b` may appear in a segment: Herald's channel characters
/// (`A-Za-z0-9_-.:@/=,`) without the two separators, and with `~` for `:`.
fn segment_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-~@=,".contains(&b)
}

/// Whether `b` may appear in a token of a Herald name Bayeux can write.
fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-:@=,".contains(&b)
}

/// A Bayeux segment (checked) as Herald text: `~` becomes `:`.
fn push_segment(out: &mut String, s: &str) {
    out.extend(s.chars().map(|c| if c == '~' { ':' } else { c }));
}

fn check_reserved(name: &str) -> Result<(), NameError> {
    match Channel::of(name) {
        Channel::Broadcast => Ok(()),
        _ => Err(NameError::Reserved),
    }
}

fn segments(name: &str) -> Result<std::str::Split<'_, char>, NameError> {
    let rest = name.strip_prefix('/').ok_or(NameError::Malformed)?;
    if rest.is_empty() {
        return Err(NameError::Malformed);
    }
    Ok(rest.split('/'))
}

fn check_segment(s: &str) -> Result<(), NameError> {
    if s.is_empty() {
        return Err(NameError::Malformed);
    }
    if s.contains('*') {
        return Err(NameError::Wildcard);
    }
    match s.bytes().find(|&b| !segment_byte(b)) {
        Some(b) => Err(NameError::Character(char::from(b))),
        None => Ok(()),
    }
}

/// The Herald channel of the concrete Bayeux channel `name` (no wildcards):
/// `/a/b` → `a.b`.
pub fn to_herald(name: &str) -> Result<String, NameError> {
    check_reserved(name)?;
    let mut out = String::with_capacity(name.len());
    for (i, s) in segments(name)?.enumerate() {
        check_segment(s)?;
        if i > 0 {
            out.push('.');
        }
        push_segment(&mut out, s);
    }
    Ok(out)
}

/// Whether `name` ends in a wildcard segment (`*` or `**`).
pub fn is_wildcard(name: &str) -> bool {
    name.ends_with("/*") || name.ends_with("/**")
}

/// The Herald channel or pattern of the Bayeux subscription `name`: as
/// [`to_herald`], and a last segment `*` becomes `*`, `**` becomes `>`.
pub fn pattern_to_herald(name: &str) -> Result<String, NameError> {
    check_reserved(name)?;
    let all: Vec<&str> = segments(name)?.collect();
    let mut out = String::with_capacity(name.len());
    for (i, s) in all.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        let last = i + 1 == all.len();
        match *s {
            "*" if last => out.push('*'),
            "**" if last => out.push('>'),
            s => {
                check_segment(s)?;
                push_segment(&mut out, s);
            }
        }
    }
    Ok(out)
}

/// The Bayeux channel of the Herald channel `name`, `None` when Bayeux
/// clients cannot receive it (see the module docs): `a.b` → `/a/b`.
pub fn from_herald(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len() + 1);
    for t in name.split('.') {
        if t.is_empty() || !t.bytes().all(token_byte) {
            return None;
        }
        out.push('/');
        out.extend(t.chars().map(|c| if c == ':' { '~' } else { c }));
    }
    match Channel::of(&out) {
        Channel::Broadcast => Some(out),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_classified() {
        assert_eq!(
            Channel::of("/meta/handshake"),
            Channel::Meta(Meta::Handshake)
        );
        assert_eq!(Channel::of("/meta/connect"), Channel::Meta(Meta::Connect));
        assert_eq!(Channel::of("/meta/frob"), Channel::Meta(Meta::Unknown));
        assert_eq!(Channel::of("/meta"), Channel::Meta(Meta::Unknown));
        assert_eq!(Channel::of("/service/echo"), Channel::Service);
        assert_eq!(Channel::of("/chat/room"), Channel::Broadcast);
        assert_eq!(Channel::of("/metadata"), Channel::Broadcast);
    }

    #[test]
    fn names_map_both_ways() {
        for (bayeux, herald) in [
            ("/chat", "chat"),
            ("/chat/room1", "chat.room1"),
            ("/chat~eu/room-1/a_b", "chat:eu.room-1.a_b"),
            ("/pusher-1~news", "pusher-1:news"),
            ("/a~b~c", "a:b:c"),
            ("/a=b/c,d/@e", "a=b.c,d.@e"),
        ] {
            assert_eq!(to_herald(bayeux).as_deref(), Ok(herald), "{bayeux}");
            assert_eq!(pattern_to_herald(bayeux).as_deref(), Ok(herald), "{bayeux}");
            assert_eq!(from_herald(herald).as_deref(), Some(bayeux), "{herald}");
        }
    }

    #[test]
    fn wildcards_become_herald_patterns() {
        assert_eq!(pattern_to_herald("/chat/*").as_deref(), Ok("chat.*"));
        assert_eq!(pattern_to_herald("/chat/**").as_deref(), Ok("chat.>"));
        assert_eq!(pattern_to_herald("/**").as_deref(), Ok(">"));
        assert_eq!(pattern_to_herald("/*").as_deref(), Ok("*"));
        assert!(is_wildcard("/a/**") && is_wildcard("/a/*") && !is_wildcard("/a"));
        for bad in ["/a/*/b", "/a/**/b", "/a/b*", "/a/***"] {
            assert_eq!(pattern_to_herald(bad), Err(NameError::Wildcard), "{bad}");
        }
        assert_eq!(to_herald("/a/*"), Err(NameError::Wildcard));
    }

    #[test]
    fn bad_names_are_refused() {
        assert_eq!(to_herald("a/b"), Err(NameError::Malformed));
        assert_eq!(to_herald("/"), Err(NameError::Malformed));
        assert_eq!(to_herald("/a//b"), Err(NameError::Malformed));
        assert_eq!(to_herald("/a/"), Err(NameError::Malformed));
        assert_eq!(to_herald("/a.b"), Err(NameError::Character('.')));
        assert_eq!(to_herald("/a b"), Err(NameError::Character(' ')));
        assert_eq!(to_herald("/a/é"), Err(NameError::Character('\u{c3}')));
        assert_eq!(to_herald("/chat:eu"), Err(NameError::Character(':')));
        assert_eq!(to_herald("/meta/x"), Err(NameError::Reserved));
        assert_eq!(pattern_to_herald("/service/**"), Err(NameError::Reserved));
        assert!(NameError::Wildcard.to_string().contains("wildcard"));
    }

    #[test]
    fn herald_names_bayeux_cannot_hold_are_not_delivered() {
        for h in [
            "a/b",
            "a..b",
            ".a",
            "a.",
            "meta.connect",
            "service.x",
            "",
            "a~b",
        ] {
            assert_eq!(from_herald(h), None, "{h:?}");
        }
    }
}
