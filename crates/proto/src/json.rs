//! The JSON encoding (WebSocket text frames, SSE `data:`, long-poll bodies).
//! See docs/protocol.md for the exact shapes.
//!
//! Every message is one object keyed by its operation, Centrifugo-style:
//! `{"id":1,"publish":{"channel":"c","data":{...}}}`. Decoding is one pass of
//! serde_json over the message that collects, per key, borrowed [`serde_json::value::RawValue`]
//! text: the id, and each field of the operation body. Only then are fields
//! interpreted, so `id` is found wherever it appears and every later error can
//! carry it. Publication data is kept as its raw JSON text, never
//! re-serialized; with [`decode_request_bytes`] it is even a zero-copy slice of
//! the input.
//!
//! Encoding writes canonical text (fixed key order, no whitespace, optional
//! fields omitted) straight into the output buffer; encoding a publication push
//! allocates nothing beyond that buffer.

mod decode;
mod encode;

pub use decode::{
    decode_request, decode_request_bytes, decode_request_hinted, decode_server, decode_server_bytes,
};
pub use encode::{
    encode_json_publication, encode_json_publication_head, encode_request, encode_server,
    lobby_page_from, lobby_reply_from, table_json, JSON_PUBLICATION_TAIL,
};

/// Splits a long-poll request body into its commands: a JSON array of
/// commands gives one slice per element (each still to be decoded, so a bad
/// one is answered on its own), anything else is one command. Only an array
/// that is not valid JSON is an error.
pub fn split_batch(body: &[u8]) -> Result<Vec<&[u8]>, serde_json::Error> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'[') {
        return Ok(vec![body]);
    }
    let items: Vec<&serde_json::value::RawValue> = serde_json::from_slice(body)?;
    Ok(items.into_iter().map(|r| r.get().as_bytes()).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {

    #[test]
    fn lobby_messages_from_encoded_entries_are_those_of_encode_server() {
        use crate::{Encoding, Push, Reply, ServerMsg, TableEntry};
        use bytes::Bytes;
        let entry = |table: u64, path: &str, attrs: &'static [u8]| TableEntry {
            table,
            path: path.to_string(),
            seats: 9,
            players: 3,
            watchers: 1,
            attrs: Bytes::from_static(attrs),
        };
        let lists = [
            vec![],
            vec![entry(1, "holdem/9", br#"{"blinds":"1/2"}"#)],
            vec![
                entry(2, "a \"quoted\" \u{e9}/path", br#"{}"#),
                entry(3, "x", b"not json"),
                entry(1 << 52, "y", br#"{"n":[1,{"k":null}]}"#),
            ],
        ];
        for tables in lists {
            let encoded: Vec<Bytes> = tables.iter().map(super::table_json).collect();
            for id in [0, 7] {
                let want = Encoding::Json.encode_server_bytes(&ServerMsg::Reply {
                    id,
                    reply: Reply::Lobby {
                        seq: 42,
                        tables: tables.clone(),
                    },
                });
                assert_eq!(super::lobby_reply_from(id, 42, &encoded), want);
            }
            let want = Encoding::Json.encode_server_bytes(&ServerMsg::Push(Push::LobbyPage {
                path: "holdem/\"9\"".into(),
                tables: tables.clone(),
            }));
            assert_eq!(super::lobby_page_from("holdem/\"9\"", &encoded), want);
        }
    }
    use super::*;
    use crate::{Command, DecodeError, Position, Push, Request, ServerMsg};
    use bytes::{Bytes, BytesMut};

    fn enc_req(r: &Request) -> String {
        let mut out = BytesMut::new();
        encode_request(r, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    fn enc_srv(m: &ServerMsg) -> String {
        let mut out = BytesMut::new();
        encode_server(m, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn key_order_does_not_matter() {
        let a = decode_request(br#"{"id":7,"publish":{"channel":"c","data":{"x":1}}}"#).unwrap();
        let b = decode_request(br#"{"publish":{"data":{"x":1},"channel":"c"},"id":7}"#).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.id, 7);
    }

    #[test]
    fn the_hint_says_whether_publish_data_was_json_text() {
        let hinted = |b: &[u8]| decode_request_hinted(b).unwrap();
        let (r, json) = hinted(br#"{"id":1,"publish":{"channel":"c","data": [1, {"a":null}] }}"#);
        assert!(json);
        assert!(
            matches!(r.cmd, Command::Publish { data, .. } if &data[..] == br#"[1, {"a":null}]"#)
        );
        let (_, json) = hinted(br#"{"publish":{"channel":"c","b64":"AAE="}}"#);
        assert!(!json, "b64 data is not known to be JSON");
        // b64 of JSON text is still not trusted: it is checked when pushed.
        let (_, json) = hinted(br#"{"publish":{"channel":"c","b64":"e30="}}"#);
        assert!(!json);
        let (_, json) = hinted(br#"{"id":2,"subscribe":{"channel":"c"}}"#);
        assert!(!json);
        assert!(decode_request_hinted(br#"{"publish":{"channel":"c"}}"#).is_err());
    }

    /// Whatever serde_json accepts as `data` is what the push's own check
    /// accepts, so trusting the hint never embeds what would have been b64:
    /// every value the decoder takes comes out of the trusted and the checked
    /// encoders as the same text.
    #[test]
    fn trusted_and_checked_publication_pushes_are_the_same_text() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let mut cases: Vec<String> = [
            "0",
            "-1.5e3",
            "\"x\\u00e9\\n\"",
            "true",
            "null",
            "{}",
            "[]",
            "{\"a\" : [1, 2] , \"b\":\"\u{e9}\"}",
            " [ 1 ] ",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        cases.extend([
            deep(1),
            deep(100),
            deep(127),
            deep(128),
            deep(129),
            deep(200),
        ]);
        // Brackets and escaped quotes inside strings do not count as nesting.
        let wrap = |n: usize, inner: &str| format!("{}{inner}{}", "[".repeat(n), "]".repeat(n));
        cases.push(wrap(128, r#""]]]\"]]""#));
        cases.push(wrap(128, r#""[[[\"[[""#));
        cases.push(wrap(127, r#"{"k\\":"[{"}"#));
        cases.push(wrap(126, r#"{"k":[0]}"#));
        cases.push(wrap(127, r#"{"k":{"j":0}}"#));
        let mut hinted = 0;
        for case in &cases {
            let msg = format!(r#"{{"publish":{{"channel":"c","data":{case}}}}}"#);
            let Ok((
                Request {
                    cmd: Command::Publish { data, .. },
                    ..
                },
                true,
            )) = decode_request_hinted(msg.as_bytes())
            else {
                continue;
            };
            hinted += 1;
            let mut trusted = BytesMut::new();
            encode_json_publication("c", 9, &data, true, &mut trusted);
            let mut checked = BytesMut::new();
            encode_server(
                &ServerMsg::Push(Push::Publication {
                    channel: "c".into(),
                    offset: 9,
                    data: data.clone(),
                }),
                &mut checked,
            );
            assert_eq!(trusted, checked, "data {case}");
            // The spliced push (head, data, tail) is the same text.
            let mut spliced = BytesMut::new();
            encode_json_publication_head("c", 9, &mut spliced);
            spliced.extend_from_slice(&data);
            spliced.extend_from_slice(JSON_PUBLICATION_TAIL);
            assert_eq!(spliced, checked, "spliced data {case}");
            let mut unknown = BytesMut::new();
            encode_json_publication("c", 9, &data, false, &mut unknown);
            assert_eq!(unknown, checked, "data {case}");
        }
        // All but the three nested deeper than 128.
        assert_eq!(hinted, cases.len() - 3);
    }

    #[test]
    fn data_is_raw_text_trimmed() {
        let r =
            decode_request(br#"{"publish":{"channel":"c","data":  {"a" : [1, 2]}  }}"#).unwrap();
        assert_eq!(
            r.cmd,
            Command::Publish {
                channel: "c".into(),
                data: Bytes::from_static(br#"{"a" : [1, 2]}"#)
            }
        );
        let null = decode_request(br#"{"publish":{"channel":"c","data":null}}"#).unwrap();
        assert!(matches!(null.cmd, Command::Publish { data, .. } if &data[..] == b"null"));
    }

    #[test]
    fn zero_copy_data() {
        let buf = Bytes::from_static(br#"{"id":1,"publish":{"channel":"c","data":[1,2,3]}}"#);
        let r = decode_request_bytes(&buf).unwrap();
        let Command::Publish { data, .. } = r.cmd else {
            panic!("not a publish")
        };
        assert_eq!(&data[..], b"[1,2,3]");
        let base = buf.as_ptr() as usize;
        let p = data.as_ptr() as usize;
        assert!(p >= base && p < base + buf.len(), "data was copied");
    }

    #[test]
    fn b64_data() {
        let r = decode_request(br#"{"publish":{"channel":"c","b64":"AP8="}}"#).unwrap();
        assert!(matches!(r.cmd, Command::Publish { ref data, .. } if &data[..] == b"\x00\xff"));
        assert_eq!(enc_req(&r), r#"{"publish":{"channel":"c","b64":"AP8="}}"#);
    }

    #[test]
    fn unknown_keys_ignored_unknown_op_reported() {
        let r = decode_request(br#"{"x":1,"id":2,"ping":{},"y":[]}"#).unwrap();
        assert_eq!(
            r,
            Request {
                id: 2,
                cmd: Command::Ping
            }
        );
        let e = decode_request(br#"{"id":3,"frob":{},"zap":{}}"#).unwrap_err();
        assert_eq!(e.id(), 3);
        assert_eq!(
            e,
            DecodeError::WithId {
                id: 3,
                source: Box::new(DecodeError::Unknown("frob".into()))
            }
        );
    }

    #[test]
    fn null_is_absent_except_for_data() {
        let r = decode_request(
            br#"{"id":null,"subscribe":{"channel":"c","recover":null,"join_leave":null}}"#,
        )
        .unwrap();
        assert_eq!(
            r,
            Request {
                id: 0,
                cmd: Command::Subscribe {
                    channel: "c".into(),
                    recover: None,
                    join_leave: false,
                    token: None,
                }
            }
        );
        let e = decode_request(br#"{"id":2,"publish":{"channel":null,"data":null}}"#).unwrap_err();
        assert!(
            matches!(e.clone(), DecodeError::WithId { source, .. }
            if matches!(*source, DecodeError::Invalid { field: "channel", .. })),
            "{e:?}"
        );
    }

    #[test]
    fn errors_after_id_carry_it() {
        let e = decode_request(br#"{"publish":{"channel":"c"},"id":9}"#).unwrap_err();
        assert_eq!(e.id(), 9);
        assert_eq!(e.code(), crate::ErrorCode::BadRequest);
        let e = decode_request(br#"{"id":4294967296,"ping":{}}"#).unwrap_err();
        assert_eq!(e.id(), 0);
        let e = decode_request(br#"{"id":1,"ping":{},"publish":{}}"#).unwrap_err();
        assert_eq!(e.id(), 1);
        let e = decode_request(br#"[1]"#).unwrap_err();
        assert!(matches!(e, DecodeError::Malformed(_)));
    }

    #[test]
    fn canonical_request_shapes() {
        let r = Request {
            id: 1,
            cmd: Command::Subscribe {
                channel: "c".into(),
                recover: Some(Position {
                    epoch: "e".into(),
                    offset: 5,
                }),
                join_leave: true,
                token: None,
            },
        };
        assert_eq!(
            enc_req(&r),
            r#"{"id":1,"subscribe":{"channel":"c","recover":{"epoch":"e","offset":5},"join_leave":true}}"#
        );
        let c = Request {
            id: 0,
            cmd: Command::Connect {
                token: None,
                name: Some("n".into()),
            },
        };
        assert_eq!(enc_req(&c), r#"{"connect":{"name":"n"}}"#);
    }

    #[test]
    fn canonical_push_shapes() {
        let p = ServerMsg::Push(Push::Publication {
            channel: "ch\"1".into(),
            offset: 8,
            data: Bytes::from_static(b"{\"t\":1}"),
        });
        assert_eq!(
            enc_srv(&p),
            r#"{"pub":{"channel":"ch\"1","offset":8,"data":{"t":1}}}"#
        );
        let d = ServerMsg::Push(Push::Disconnect {
            code: 3001,
            reason: "slow consumer".into(),
        });
        assert_eq!(
            enc_srv(&d),
            r#"{"disconnect":{"code":3001,"reason":"slow consumer"}}"#
        );
        assert_eq!(decode_server(enc_srv(&d).as_bytes()).unwrap(), d);
    }
}
