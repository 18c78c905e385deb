//! The game commands a poker bot sends (`act` hand-encoded, the rare ones
//! through `herald_proto`; docs/protocol.md §5e) and the readers of the game
//! messages it receives, without allocating on the hot path.
//!
//! Why not `herald_proto`'s typed codec for everything: every seated bot
//! receives every public event of its table, so `game` pushes are most of
//! what the bench reads; decoding each into a `ServerMsg` would allocate its
//! data. A `game` push is read in place (binary: type byte, varint, bytes;
//! JSON: the canonical `{"game":{"table":N,"data":…}}`), with the typed
//! decoder as the fallback for anything else. Rare messages (the `lobby`
//! and `sit` replies, `unseat`, lobby updates that are new) go through
//! `Encoding::decode_server`. The unit tests check every encoder and reader
//! here against `herald_proto`.

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use herald_proto::{Command, Encoding, Push, Request, ServerMsg};

use crate::herald_wire::{json_int, put_bytes, put_varint, read_varint, write_u64};

/// Appends a rare command (`lobby`, `lobby_off`, `sit`, `stand`) through
/// `herald_proto`'s own encoder: these are sent once per seating, so the
/// typed codec's allocation does not matter and no type byte is written
/// twice.
pub fn command(enc: Encoding, id: u32, cmd: Command, out: &mut Vec<u8>) {
    let mut buf = BytesMut::new();
    enc.encode_request(&Request { id, cmd }, &mut buf);
    out.extend_from_slice(&buf);
}

/// `sit` at any free seat of `table`, with no data (the game's default
/// buy-in).
pub fn sit(table: u64) -> Command {
    Command::Sit {
        table,
        seat: None,
        data: Bytes::new(),
    }
}

/// Appends an `act` command; `data` must be JSON text (it is sent as
/// `"data"` in JSON, as bytes in binary).
pub fn act(enc: Encoding, id: u32, table: u64, data: &[u8], out: &mut Vec<u8>) {
    match enc {
        Encoding::Json => {
            out.extend_from_slice(b"{\"id\":");
            write_u64(out, u64::from(id));
            out.extend_from_slice(b",\"act\":{\"table\":");
            write_u64(out, table);
            out.extend_from_slice(b",\"data\":");
            out.extend_from_slice(data);
            out.extend_from_slice(b"}}");
        }
        Encoding::Binary => {
            out.push(0x0E);
            put_varint(out, u64::from(id));
            put_varint(out, table);
            put_bytes(out, data);
        }
    }
}

/// Which game message a push is (the rest are not the game's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GamePush {
    /// `game`.
    Game,
    /// `lobby_update`, or `lobby_page` (part of a large snapshot).
    LobbyUpdate,
    /// `seat`.
    Seat,
    /// `unseat`.
    Unseat,
    /// Anything else (join, leave, disconnect…).
    Other,
}

/// What kind of push `msg` is, from its first bytes.
pub fn push_kind(enc: Encoding, msg: &[u8]) -> GamePush {
    match enc {
        Encoding::Binary => match msg.first() {
            Some(0xA6) => GamePush::Game,
            Some(0xA5 | 0xA9) => GamePush::LobbyUpdate,
            Some(0xA7) => GamePush::Seat,
            Some(0xA8) => GamePush::Unseat,
            _ => GamePush::Other,
        },
        Encoding::Json => {
            if msg.starts_with(b"{\"game\":") {
                GamePush::Game
            } else if msg.starts_with(b"{\"lobby_update\":") || msg.starts_with(b"{\"lobby_page\":")
            {
                GamePush::LobbyUpdate
            } else if msg.starts_with(b"{\"seat\":") {
                GamePush::Seat
            } else if msg.starts_with(b"{\"unseat\":") {
                GamePush::Unseat
            } else {
                GamePush::Other
            }
        }
    }
}

/// The table and data of a `game` push, read in place; `None` when the
/// message is not in the shape this reads (the caller then decodes it with
/// `herald_proto`).
pub fn game_in_place(enc: Encoding, msg: &[u8]) -> Option<(u64, &[u8])> {
    match enc {
        Encoding::Binary => {
            let mut rest = msg.strip_prefix(&[0xA6])?;
            let table = read_varint(&mut rest).ok()?;
            let len = usize::try_from(read_varint(&mut rest).ok()?).ok()?;
            // Exactly the data: trailing bytes would be a malformed push.
            (rest.len() == len).then_some((table, rest))
        }
        Encoding::Json => {
            let rest = msg.strip_prefix(b"{\"game\":{\"table\":")?;
            let (table, rest) = json_int(rest)?;
            let data = rest.strip_prefix(b",\"data\":")?.strip_suffix(b"}}")?;
            Some((u64::try_from(table).ok()?, data))
        }
    }
}

/// The table and data of a `game` push: read in place, or (a shape the
/// in-place reader does not know) through `herald_proto`, copied.
pub fn game(enc: Encoding, msg: &[u8]) -> Option<(u64, Cow<'_, [u8]>)> {
    if let Some((table, data)) = game_in_place(enc, msg) {
        return Some((table, Cow::Borrowed(data)));
    }
    match enc.decode_server(msg) {
        Ok(ServerMsg::Push(Push::Game { table, data })) => Some((table, Cow::Owned(data.to_vec()))),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use herald_proto::TableEntry;

    const BOTH: [Encoding; 2] = [Encoding::Json, Encoding::Binary];

    #[test]
    fn commands_decode_with_herald_proto() {
        for enc in BOTH {
            let mut out = Vec::new();
            let lobby = |path: &str| Command::Lobby { path: path.into() };
            command(enc, 1_048_577, lobby("holdem/6-seat"), &mut out);
            let r = enc.decode_request(&out).unwrap();
            assert_eq!(r.id, 1_048_577);
            assert!(matches!(r.cmd, Command::Lobby { ref path } if path == "holdem/6-seat"));

            out.clear();
            command(enc, 3, lobby(""), &mut out);
            let r = enc.decode_request(&out).unwrap();
            assert!(matches!(r.cmd, Command::Lobby { ref path } if path.is_empty()));

            out.clear();
            command(enc, 4, sit(9_007_199_254_740_991), &mut out);
            let r = enc.decode_request(&out).unwrap();
            assert_eq!(r.id, 4);
            assert!(matches!(
                r.cmd,
                Command::Sit { table: 9_007_199_254_740_991, seat: None, ref data } if data.is_empty()
            ));

            out.clear();
            command(enc, 5, Command::Stand { table: 7 }, &mut out);
            let r = enc.decode_request(&out).unwrap();
            assert!(matches!(r.cmd, Command::Stand { table: 7 }));

            out.clear();
            let data = br#"{"a":"raise","to":120}"#;
            act(enc, 6, 7, data, &mut out);
            let r = enc.decode_request(&out).unwrap();
            let Command::Act { table, data: got } = r.cmd else {
                panic!("not an act")
            };
            assert_eq!((table, &got[..]), (7, &data[..]));

            out.clear();
            crate::herald_wire::unsubscribe(enc, 8, "table:7", &mut out);
            let r = enc.decode_request(&out).unwrap();
            assert!(matches!(r.cmd, Command::Unsubscribe { ref channel } if channel == "table:7"));
        }
    }

    fn encode(enc: Encoding, push: Push) -> BytesMut {
        let mut out = BytesMut::new();
        enc.encode_server(&ServerMsg::Push(push), &mut out);
        out
    }

    #[test]
    fn game_pushes_read_in_place() {
        let event = br#"{"t":"turn","seat":3,"to_call":10,"timeout_ms":4000}"#;
        for enc in BOTH {
            let msg = encode(
                enc,
                Push::Game {
                    table: 300,
                    data: Bytes::from_static(event),
                },
            );
            assert_eq!(push_kind(enc, &msg), GamePush::Game);
            assert_eq!(game_in_place(enc, &msg), Some((300, &event[..])));
            assert_eq!(
                crate::herald_wire::classify(enc, &msg).unwrap(),
                crate::herald_wire::Incoming::Other
            );

            let msg = encode(
                enc,
                Push::LobbyUpdate {
                    path: "a\"b".into(),
                    seq: 4321,
                    tables: vec![TableEntry {
                        table: 1,
                        path: "holdem/6-seat/express".into(),
                        seats: 6,
                        players: 2,
                        watchers: 0,
                        attrs: Bytes::from_static(b"{}"),
                    }],
                    removed: vec![5],
                },
            );
            assert_eq!(push_kind(enc, &msg), GamePush::LobbyUpdate);
            assert_eq!(crate::herald_wire::lobby_update_seq(enc, &msg), Some(4321));
            assert!(crate::herald_wire::classify(enc, &msg).is_ok());

            let msg = encode(
                enc,
                Push::Unseat {
                    table: 1,
                    code: 117,
                    reason: "busted".into(),
                },
            );
            assert_eq!(push_kind(enc, &msg), GamePush::Unseat);
            assert!(crate::herald_wire::classify(enc, &msg).is_ok());
        }
        // Not JSON: the JSON encoder writes b64, which is not read in place.
        let msg = encode(
            Encoding::Json,
            Push::Game {
                table: 1,
                data: Bytes::from_static(b"\xff"),
            },
        );
        assert_eq!(game_in_place(Encoding::Json, &msg), None);
        assert_eq!(
            game(Encoding::Json, &msg),
            Some((1, Cow::Owned(b"\xff".to_vec())))
        );
        assert_eq!(game_in_place(Encoding::Binary, &[0xA6, 1, 5, b'x']), None);
        assert_eq!(
            crate::herald_wire::lobby_update_seq(
                Encoding::Json,
                b"{\"lobby_update\":{\"path\":\"x"
            ),
            None
        );
    }
}
