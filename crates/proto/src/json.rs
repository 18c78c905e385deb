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

pub use decode::{decode_request, decode_request_bytes, decode_server, decode_server_bytes};
pub use encode::{encode_request, encode_server};

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
