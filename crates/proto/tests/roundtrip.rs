//! Property-style round trips: random messages (from a fixed-seed generator, so
//! failures reproduce) must decode to themselves in both encodings, and the
//! encoders must be deterministic. The vectors pin the exact bytes of chosen
//! cases; this covers the space between them.
#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use herald_proto::{
    ClientInfo, Command, Encoding, HistoryItem, Position, Push, Reply, Request, SeatStatus,
    ServerMsg, TableEntry,
};

/// splitmix64: tiny, good enough, no dependency.
const ATTRS: &[&str] = &[
    "{}",
    "{\"blinds\":[1,2],\"turn\":20}",
    "{\"a\" : {\"b\": null},\n\"é\":\"😀\"}",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bool(&mut self) -> bool {
        self.next() & 1 == 1
    }

    /// Integers biased to the edges where varints change length.
    fn u64(&mut self) -> u64 {
        match self.below(6) {
            0 => self.below(128),
            1 => self.below(1 << 14),
            2 => [
                0,
                127,
                128,
                16383,
                16384,
                u64::from(u32::MAX),
                1 << 53,
                u64::MAX,
            ][self.below(8) as usize],
            3 => self.next() >> self.below(64),
            _ => self.below(1 << 20),
        }
    }

    fn u32(&mut self) -> u32 {
        (self.u64() & 0xffff_ffff) as u32
    }

    fn u16(&mut self) -> u16 {
        (self.u64() & 0xffff) as u16
    }

    fn string(&mut self) -> String {
        const PIECES: &[&str] = &[
            "a", "news", ":", "/", "*", "\"", "\\", "\n", "\t", "\u{0}", "\u{1f}", "\u{7f}", "é",
            "€", "😀", "\u{2028}", " ", "{", "}",
        ];
        let n = self.below(8);
        (0..n)
            .map(|_| PIECES[self.below(PIECES.len() as u64) as usize])
            .collect()
    }

    fn opt_string(&mut self) -> Option<String> {
        self.bool().then(|| self.string())
    }

    /// Payloads: JSON texts (sent verbatim), random bytes (sent as b64), and
    /// texts that are almost JSON.
    fn data(&mut self) -> Bytes {
        const JSON: &[&str] = &[
            "null",
            "true",
            "0",
            "-1.5e-7",
            "\"s\"",
            "\"\\u00e9\\n\"",
            "[]",
            "{}",
            "{\"a\": [1, {\"b\" : null}],\n\"c\":\"é\"}",
            "[[[[[[1]]]]]]",
        ];
        const NEAR: &[&str] = &[" 1", "1 ", "01", "{", "[1,]", "'x'", "NaN", "\"\t\""];
        match self.below(4) {
            0 => Bytes::from_static(JSON[self.below(JSON.len() as u64) as usize].as_bytes()),
            1 => Bytes::from_static(NEAR[self.below(NEAR.len() as u64) as usize].as_bytes()),
            _ => {
                let n = self.below(40) as usize;
                (0..n).map(|_| self.next() as u8).collect::<Vec<_>>().into()
            }
        }
    }

    fn position(&mut self) -> Position {
        Position {
            epoch: self.string(),
            offset: self.u64(),
        }
    }

    fn opt_position(&mut self) -> Option<Position> {
        self.bool().then(|| self.position())
    }

    fn items(&mut self) -> Vec<HistoryItem> {
        let n = self.below(4);
        (0..n)
            .map(|_| HistoryItem {
                offset: self.u64(),
                data: self.data(),
            })
            .collect()
    }

    fn info(&mut self) -> ClientInfo {
        let info = match self.below(4) {
            0 | 1 => String::new(),
            2 => format!("{{\"n\":{}}}", self.u32()),
            _ => format!("[true,null,{}]", self.u16()),
        };
        ClientInfo {
            client: self.string(),
            user: self.string(),
            info: Bytes::from(info),
        }
    }

    /// Lobby entries; attrs always a JSON object (what decoders accept).
    fn tables(&mut self) -> Vec<TableEntry> {
        let n = self.below(4);
        (0..n)
            .map(|_| TableEntry {
                table: self.u64(),
                path: self.string(),
                seats: self.u32(),
                players: self.u32(),
                watchers: self.u32(),
                attrs: Bytes::from_static(
                    ATTRS[self.below(ATTRS.len() as u64) as usize].as_bytes(),
                ),
            })
            .collect()
    }

    fn status(&mut self) -> SeatStatus {
        [
            SeatStatus::Sat,
            SeatStatus::Left,
            SeatStatus::Away,
            SeatStatus::Back,
        ][self.below(4) as usize]
    }

    fn request(&mut self) -> Request {
        let cmd = match self.below(15) {
            0 => Command::Connect {
                token: self.opt_string(),
                name: self.opt_string(),
            },
            1 => Command::Subscribe {
                channel: self.string(),
                recover: self.opt_position(),
                join_leave: self.bool(),
                token: self.opt_string(),
            },
            2 => Command::Unsubscribe {
                channel: self.string(),
            },
            3 => Command::Publish {
                channel: self.string(),
                data: self.data(),
            },
            4 => Command::Ping,
            5 => Command::History {
                channel: self.string(),
                since: self.opt_position(),
                limit: self.u32(),
            },
            6 => Command::Presence {
                channel: self.string(),
            },
            7 => Command::PresenceStats {
                channel: self.string(),
            },
            8 => Command::Lobby {
                path: self.string(),
            },
            9 => Command::LobbyOff {
                path: self.string(),
            },
            10 => Command::Sit {
                table: self.u64(),
                seat: self.bool().then(|| self.u32()),
                data: if self.bool() {
                    Bytes::new()
                } else {
                    self.data()
                },
            },
            11 => Command::Watch { table: self.u64() },
            12 => Command::Stand { table: self.u64() },
            13 => Command::Play {
                game: if self.bool() {
                    String::new()
                } else {
                    self.string()
                },
                seats: self.bool().then(|| self.u32()),
                attrs: Bytes::from_static(
                    ATTRS[self.below(ATTRS.len() as u64) as usize].as_bytes(),
                ),
                private: self.bool(),
                code: self.opt_string(),
                data: if self.bool() {
                    Bytes::new()
                } else {
                    self.data()
                },
            },
            _ => Command::Act {
                table: self.u64(),
                data: self.data(),
            },
        };
        Request {
            id: self.u32(),
            cmd,
        }
    }

    fn reply(&mut self) -> Reply {
        match self.below(15) {
            0 => Reply::Connect {
                client: self.string(),
                version: self.string(),
                ping_interval: self.u32(),
            },
            1 => Reply::Subscribe {
                epoch: self.string(),
                offset: self.u64(),
                recovered: self.bool(),
                publications: self.items(),
            },
            2 => Reply::Unsubscribe,
            3 => Reply::Publish {
                epoch: self.string(),
                offset: self.u64(),
            },
            4 => Reply::Ping,
            5 => Reply::History {
                epoch: self.string(),
                offset: self.u64(),
                publications: self.items(),
            },
            6 => Reply::Presence {
                clients: (0..self.below(4)).map(|_| self.info()).collect(),
            },
            7 => Reply::PresenceStats {
                clients: self.u64(),
                users: self.u64(),
            },
            8 => Reply::Lobby {
                seq: self.u64(),
                tables: self.tables(),
            },
            9 => Reply::LobbyOff,
            10 => Reply::Sit {
                seat: self.u32(),
                data: self.data(),
            },
            11 => Reply::Watch { data: self.data() },
            12 => Reply::Stand,
            13 => Reply::Play {
                table: self.u64(),
                seat: self.u32(),
                code: self.opt_string(),
                created: self.bool(),
                data: self.data(),
            },
            _ => Reply::Act,
        }
    }

    fn server(&mut self) -> ServerMsg {
        match self.below(8) {
            0..=2 => ServerMsg::Reply {
                id: self.u32(),
                reply: self.reply(),
            },
            3 => ServerMsg::Error {
                id: self.u32(),
                code: self.u16(),
                message: self.string(),
            },
            _ => ServerMsg::Push(match self.below(10) {
                0 => Push::Publication {
                    channel: self.string(),
                    offset: self.u64(),
                    data: self.data(),
                },
                1 => Push::Join {
                    channel: self.string(),
                    info: self.info(),
                },
                2 => Push::Leave {
                    channel: self.string(),
                    info: self.info(),
                },
                3 => Push::Unsubscribed {
                    channel: self.string(),
                    code: self.u16(),
                    reason: self.string(),
                },
                4 => Push::Disconnect {
                    code: self.u16(),
                    reason: self.string(),
                },
                5 => Push::LobbyUpdate {
                    path: self.string(),
                    seq: self.u64(),
                    tables: self.tables(),
                    removed: (0..self.below(4)).map(|_| self.u64()).collect(),
                },
                6 => Push::Game {
                    table: self.u64(),
                    data: self.data(),
                },
                7 => Push::Seat {
                    table: self.u64(),
                    seat: self.u32(),
                    user: self.string(),
                    status: self.status(),
                },
                8 => Push::Unseat {
                    table: self.u64(),
                    code: self.u16(),
                    reason: self.string(),
                },
                _ => Push::LobbyPage {
                    path: self.string(),
                    tables: self.tables(),
                },
            }),
        }
    }
}

const ROUNDS: usize = 20_000;

#[test]
fn requests_round_trip_in_both_encodings() {
    let mut rng = Rng(1);
    for i in 0..ROUNDS {
        let req = rng.request();
        for enc in [Encoding::Json, Encoding::Binary] {
            let mut out = BytesMut::new();
            enc.encode_request(&req, &mut out);
            let back = enc
                .decode_request(&out)
                .unwrap_or_else(|e| panic!("#{i} {enc:?} {req:?}: {e}\n{out:?}"));
            assert_eq!(back, req, "#{i} {enc:?} via {out:?}");
            let shared = out.clone().freeze();
            assert_eq!(
                enc.decode_request_bytes(&shared).unwrap(),
                req,
                "#{i} {enc:?}"
            );
            let mut again = BytesMut::new();
            enc.encode_request(&back, &mut again);
            assert_eq!(again, out, "#{i} {enc:?}: not deterministic");
        }
    }
}

#[test]
fn server_messages_round_trip_in_both_encodings() {
    let mut rng = Rng(2);
    for i in 0..ROUNDS {
        let msg = rng.server();
        for enc in [Encoding::Json, Encoding::Binary] {
            let out = enc.encode_server_bytes(&msg);
            let back = enc
                .decode_server(&out)
                .unwrap_or_else(|e| panic!("#{i} {enc:?} {msg:?}: {e}\n{out:?}"));
            assert_eq!(back, msg, "#{i} {enc:?} via {out:?}");
            assert_eq!(enc.decode_server_bytes(&out).unwrap(), msg, "#{i} {enc:?}");
            assert_eq!(
                enc.encode_server_bytes(&back),
                out,
                "#{i} {enc:?}: not deterministic"
            );
        }
    }
}

/// The JSON encoder's output is always valid JSON that serde_json reads back
/// to the same tree, whatever the strings contain.
#[test]
fn json_output_is_json() {
    let mut rng = Rng(3);
    for _ in 0..ROUNDS / 4 {
        let msg = rng.server();
        let out = Encoding::Json.encode_server_bytes(&msg);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(v.is_object());
        assert!(serde_json::to_string(&v).unwrap().len() <= out.len());
    }
}

/// Encoding appends: several messages can share one buffer.
#[test]
fn encoders_append() {
    let mut rng = Rng(4);
    let (a, b) = (rng.server(), rng.server());
    for enc in [Encoding::Json, Encoding::Binary] {
        let mut out = BytesMut::from(&b"prefix"[..]);
        enc.encode_server(&a, &mut out);
        let mid = out.len();
        enc.encode_server(&b, &mut out);
        assert_eq!(&out[..6], b"prefix");
        assert_eq!(enc.decode_server(&out[6..mid]).unwrap(), a);
        assert_eq!(enc.decode_server(&out[mid..]).unwrap(), b);
    }
}

/// The sizes quoted in docs/decisions/0002-protocol-encodings.md.
#[test]
fn typical_push_sizes_match_decision_record() {
    let data: &[u8] =
        br#"{"text":"hello, world","user":"u-1234","ts":1700000000123,"tags":["a","b"]}"#;
    assert_eq!(data.len(), 75);
    let push = |data: &[u8]| {
        ServerMsg::Push(Push::Publication {
            channel: "chat:room-42".into(),
            offset: 123_456,
            data: Bytes::copy_from_slice(data),
        })
    };
    assert_eq!(Encoding::Binary.encode_server_bytes(&push(data)).len(), 93);
    assert_eq!(Encoding::Json.encode_server_bytes(&push(data)).len(), 133);
    // 75 bytes that are not JSON (one byte changed) travel as 100 b64 characters.
    let mut binary = data.to_vec();
    binary[0] = 0xff;
    assert_eq!(
        Encoding::Json.encode_server_bytes(&push(&binary)).len(),
        159
    );
}

/// attrs that are not a JSON object are written as `{}` by both encoders
/// (decoders accept only objects), so what goes out always decodes.
#[test]
fn non_object_attrs_are_written_as_empty_object() {
    for bad in ["", "[1]", "1", " {}", "{", "\u{ff}"] {
        let msg = ServerMsg::Reply {
            id: 1,
            reply: Reply::Lobby {
                seq: 2,
                tables: vec![TableEntry {
                    table: 3,
                    path: "p".into(),
                    seats: 4,
                    players: 5,
                    watchers: 6,
                    attrs: Bytes::copy_from_slice(bad.as_bytes()),
                }],
            },
        };
        let json = Encoding::Json.encode_server_bytes(&msg);
        assert_eq!(
            &json[..],
            br#"{"id":1,"lobby":{"seq":2,"tables":[{"table":3,"path":"p","seats":4,"players":5,"watchers":6,"attrs":{}}]}}"#,
            "{bad:?}"
        );
        for enc in [Encoding::Json, Encoding::Binary] {
            let back = enc.decode_server(&enc.encode_server_bytes(&msg)).unwrap();
            let ServerMsg::Reply {
                reply: Reply::Lobby { tables, .. },
                ..
            } = back
            else {
                panic!("not a lobby reply")
            };
            assert_eq!(&tables[0].attrs[..], b"{}", "{enc:?} {bad:?}");
        }
    }
}

/// The game messages' canonical JSON shapes and their optional fields.
#[test]
fn game_json_shapes() {
    let enc = |cmd: Command| {
        let mut out = BytesMut::new();
        Encoding::Json.encode_request(&Request { id: 3, cmd }, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    };
    assert_eq!(
        enc(Command::Lobby {
            path: String::new()
        }),
        r#"{"id":3,"lobby":{}}"#
    );
    assert_eq!(
        enc(Command::LobbyOff {
            path: "holdem".into()
        }),
        r#"{"id":3,"lobby_off":{"path":"holdem"}}"#
    );
    assert_eq!(
        enc(Command::Sit {
            table: 7,
            seat: None,
            data: Bytes::new()
        }),
        r#"{"id":3,"sit":{"table":7}}"#
    );
    assert_eq!(
        enc(Command::Sit {
            table: 7,
            seat: Some(0),
            data: Bytes::from_static(b"\x00")
        }),
        r#"{"id":3,"sit":{"table":7,"seat":0,"b64":"AA=="}}"#
    );
    assert_eq!(
        enc(Command::Act {
            table: 7,
            data: Bytes::new()
        }),
        r#"{"id":3,"act":{"table":7,"b64":""}}"#
    );
    let seat = ServerMsg::Push(Push::Seat {
        table: 7,
        seat: 2,
        user: "u1".into(),
        status: SeatStatus::Away,
    });
    assert_eq!(
        &Encoding::Json.encode_server_bytes(&seat)[..],
        br#"{"seat":{"table":7,"seat":2,"user":"u1","status":"away"}}"#
    );
    // Decoders: act needs data, sit does not; a bad status is invalid.
    assert!(Encoding::Json
        .decode_request(br#"{"id":1,"act":{"table":7}}"#)
        .is_err());
    assert_eq!(
        Encoding::Json
            .decode_request(br#"{"id":1,"sit":{"table":7,"seat":null}}"#)
            .unwrap()
            .cmd,
        Command::Sit {
            table: 7,
            seat: None,
            data: Bytes::new()
        }
    );
    assert!(Encoding::Json
        .decode_server(br#"{"seat":{"table":7,"seat":2,"user":"u1","status":"gone"}}"#)
        .is_err());
    assert!(Encoding::Binary
        .decode_server(&[0xa7, 0x07, 0x02, 0x00, 0x04])
        .is_err());
    assert!(Encoding::Binary
        .decode_server(&[0xa7, 0x07, 0x02, 0x00, 0x03])
        .is_ok());
}
