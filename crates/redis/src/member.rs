//! How a presence member and the live messages look in Redis.
//!
//! Everything here is read by Lua as well as Rust, so the formats are plain
//! and length-prefixed where a field may hold any byte:
//!
//! | what | format |
//! |---|---|
//! | member (presence hash value) | `<user length>:<user><client length>:<client><info JSON>` |
//! | publication message | `p:<epoch>:<offset>:<data>` |
//! | join / leave message | `j:<node>:<member>` / `l:<node>:<member>`; upper-cased (`J:`, `L:`) by the scripts when it is the user's first or last connection in the cluster |
//! | node member-set entry | `<channel length>:<channel><client>` |
//!
//! Epochs and node ids are alphanumeric and offsets decimal, so `:` ends them.

use bytes::{Bytes, BytesMut};
use herald_proto::ClientInfo;

/// Encodes a member.
pub fn encode(info: &ClientInfo) -> Vec<u8> {
    let mut out = Vec::with_capacity(info.user.len() + info.client.len() + info.info.len() + 12);
    out.extend_from_slice(format!("{}:", info.user.len()).as_bytes());
    out.extend_from_slice(info.user.as_bytes());
    out.extend_from_slice(format!("{}:", info.client.len()).as_bytes());
    out.extend_from_slice(info.client.as_bytes());
    out.extend_from_slice(&info.info);
    out
}

/// Splits `<length>:<that many bytes>` off the front of `b`.
fn field(b: &Bytes) -> Option<(Bytes, Bytes)> {
    let colon = b.iter().position(|&c| c == b':')?;
    let len: usize = std::str::from_utf8(&b[..colon]).ok()?.parse().ok()?;
    let start = colon + 1;
    let end = start.checked_add(len)?;
    if end > b.len() {
        return None;
    }
    Some((b.slice(start..end), b.slice(end..)))
}

/// Decodes a member (`None` if it is not one).
pub fn decode(b: &Bytes) -> Option<ClientInfo> {
    let (user, rest) = field(b)?;
    let (client, info) = field(&rest)?;
    Some(ClientInfo {
        client: String::from_utf8(client.to_vec()).ok()?,
        user: String::from_utf8(user.to_vec()).ok()?,
        info,
    })
}

/// The node member-set entry of (channel, client).
pub fn set_entry(channel: &str, client: &str) -> Vec<u8> {
    format!("{}:{channel}{client}", channel.len()).into_bytes()
}

/// A message read from a channel's topic.
#[derive(Debug, PartialEq, Eq)]
pub enum Message {
    /// A publication.
    Publication {
        /// Its channel's epoch.
        epoch: Bytes,
        /// Its offset.
        offset: u64,
        /// Its payload.
        data: Bytes,
    },
    /// A member joined (`true`) or left, on `node`.
    Presence {
        /// Join or leave.
        join: bool,
        /// The user's first connection in the cluster joined, or their last
        /// one left.
        edge: bool,
        /// The node the member is connected to.
        node: Bytes,
        /// Who.
        info: ClientInfo,
    },
}

fn until_colon(b: &Bytes) -> Option<(Bytes, Bytes)> {
    let i = b.iter().position(|&c| c == b':')?;
    Some((b.slice(..i), b.slice(i + 1..)))
}

/// Parses a topic message (`None` if it is malformed).
pub fn parse(payload: &Bytes) -> Option<Message> {
    let (kind, rest) = until_colon(payload)?;
    match &kind[..] {
        b"p" => {
            let (epoch, rest) = until_colon(&rest)?;
            let (offset, data) = until_colon(&rest)?;
            let offset = std::str::from_utf8(&offset).ok()?.parse().ok()?;
            Some(Message::Publication {
                epoch,
                offset,
                data,
            })
        }
        b"j" | b"l" | b"J" | b"L" => {
            let (node, member) = until_colon(&rest)?;
            Some(Message::Presence {
                join: kind[..].eq_ignore_ascii_case(b"j"),
                edge: kind[0].is_ascii_uppercase(),
                node,
                info: decode(&member)?,
            })
        }
        _ => None,
    }
}

/// A join or leave message.
pub fn presence_message(join: bool, node: &str, member: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(member.len() + node.len() + 3);
    out.extend_from_slice(if join { b"j:" } else { b"l:" });
    out.extend_from_slice(node.as_bytes());
    out.extend_from_slice(b":");
    out.extend_from_slice(member);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_round_trip_with_any_bytes() {
        let info = ClientInfo {
            client: "1f00000000001".into(),
            user: "a:b\n7".into(),
            info: Bytes::from_static(br#"{"name":"Ann: 3"}"#),
        };
        let m = Bytes::from(encode(&info));
        assert_eq!(decode(&m), Some(info.clone()));
        let msg = presence_message(false, "node1", &m);
        assert_eq!(
            parse(&msg),
            Some(Message::Presence {
                join: false,
                edge: false,
                node: Bytes::from_static(b"node1"),
                info: info.clone()
            })
        );
        let mut upper = msg.to_vec();
        upper[0] = b'L';
        assert_eq!(
            parse(&Bytes::from(upper)),
            Some(Message::Presence {
                join: false,
                edge: true,
                node: Bytes::from_static(b"node1"),
                info
            })
        );
    }

    #[test]
    fn publications_parse_and_garbage_does_not() {
        let m = parse(&Bytes::from_static(b"p:Ab3:42:x:y")).expect("publication");
        assert_eq!(
            m,
            Message::Publication {
                epoch: Bytes::from_static(b"Ab3"),
                offset: 42,
                data: Bytes::from_static(b"x:y")
            }
        );
        for bad in [&b""[..], b"p:e", b"p:e:x:d", b"q:1", b"j:n:9:ab", b"j:n"] {
            assert_eq!(parse(&Bytes::copy_from_slice(bad)), None, "{bad:?}");
        }
        assert_eq!(set_entry("a:b", "7"), b"3:a:b7".to_vec());
    }
}
