//! Checks the codecs against the shared test vectors in `spec/vectors/`, the
//! same files the TypeScript and Python SDK tests read. The vectors were
//! produced by an independent implementation (`spec/vectors/generate.py`), so
//! agreement here means the Rust codec matches the written protocol, not
//! merely itself.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use herald_proto::{binary, json, DecodeError, Encoding, Request, ServerMsg};
use serde_json::Value;

fn load(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../spec/vectors")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap();
    v.as_array().unwrap().clone()
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() & 1 == 0, "odd hex length: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn field<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str()
        .unwrap_or_else(|| panic!("vector field {k} missing in {v}"))
}

/// Decodes with both the slice and the `Bytes` entry points and insists they agree.
fn decode_client(enc: Encoding, buf: &[u8]) -> Result<Request, DecodeError> {
    let a = enc.decode_request(buf);
    let b = enc.decode_request_bytes(&Bytes::copy_from_slice(buf));
    assert_eq!(a, b, "slice and Bytes decoders disagree");
    a
}

fn decode_server(enc: Encoding, buf: &[u8]) -> Result<ServerMsg, DecodeError> {
    let a = enc.decode_server(buf);
    let b = enc.decode_server_bytes(&Bytes::copy_from_slice(buf));
    assert_eq!(a, b, "slice and Bytes decoders disagree");
    a
}

fn encode_client(enc: Encoding, m: &Request) -> Vec<u8> {
    let mut out = BytesMut::new();
    enc.encode_request(m, &mut out);
    out.to_vec()
}

fn encode_server(enc: Encoding, m: &ServerMsg) -> Vec<u8> {
    let mut out = BytesMut::new();
    enc.encode_server(m, &mut out);
    out.to_vec()
}

#[test]
fn messages_decode_and_encode_exactly() {
    let vectors = load("messages.json");
    assert!(vectors.len() >= 50, "too few vectors: {}", vectors.len());
    let mut binary_only = 0;
    for v in &vectors {
        let name = field(v, "name");
        let bin = hex(field(v, "binary"));
        let json_text = v.get("json").and_then(Value::as_str);
        if json_text.is_none() {
            binary_only += 1;
        }
        match field(v, "direction") {
            "client" => {
                let from_bin = decode_client(Encoding::Binary, &bin)
                    .unwrap_or_else(|e| panic!("{name}: binary decode: {e}"));
                assert_eq!(
                    to_hex(&encode_client(Encoding::Binary, &from_bin)),
                    to_hex(&bin),
                    "{name}: binary re-encode"
                );
                if let Some(text) = json_text {
                    let from_json = decode_client(Encoding::Json, text.as_bytes())
                        .unwrap_or_else(|e| panic!("{name}: json decode: {e}"));
                    assert_eq!(from_json, from_bin, "{name}: json and binary disagree");
                    let out = encode_client(Encoding::Json, &from_json);
                    assert_eq!(
                        String::from_utf8_lossy(&out),
                        text,
                        "{name}: json re-encode"
                    );
                }
            }
            "server" => {
                let from_bin = decode_server(Encoding::Binary, &bin)
                    .unwrap_or_else(|e| panic!("{name}: binary decode: {e}"));
                assert_eq!(
                    to_hex(&encode_server(Encoding::Binary, &from_bin)),
                    to_hex(&bin),
                    "{name}: binary re-encode"
                );
                if let Some(text) = json_text {
                    let from_json = decode_server(Encoding::Json, text.as_bytes())
                        .unwrap_or_else(|e| panic!("{name}: json decode: {e}"));
                    assert_eq!(from_json, from_bin, "{name}: json and binary disagree");
                    let out = encode_server(Encoding::Json, &from_json);
                    assert_eq!(
                        String::from_utf8_lossy(&out),
                        text,
                        "{name}: json re-encode"
                    );
                }
            }
            other => panic!("{name}: bad direction {other}"),
        }
    }
    assert!(binary_only > 0, "expected some binary-only (u64) vectors");
}

/// Every kind of message appears at least once in the vectors.
#[test]
fn messages_cover_every_type() {
    let mut seen = std::collections::BTreeSet::new();
    for v in load("messages.json") {
        let bin = hex(field(&v, "binary"));
        seen.insert((field(&v, "direction").to_owned(), bin[0]));
    }
    let client: Vec<u8> = (1..=7).collect();
    let server: Vec<u8> = (0x81..=0x87).chain([0xe0]).chain(0xa0..=0xa4).collect();
    for t in client {
        assert!(
            seen.contains(&("client".into(), t)),
            "no client vector of type {t:#04x}"
        );
    }
    for t in server {
        assert!(
            seen.contains(&("server".into(), t)),
            "no server vector of type {t:#04x}"
        );
    }
}

fn kind(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::WithId { source, .. } => kind(source),
        DecodeError::Malformed(_) => "malformed",
        DecodeError::Unknown(_) => "unknown",
        DecodeError::Invalid { .. } => "invalid",
    }
}

#[test]
fn invalid_inputs_are_rejected_with_the_right_error_and_id() {
    let vectors = load("invalid.json");
    assert!(vectors.len() >= 60, "too few vectors: {}", vectors.len());
    for v in &vectors {
        let name = field(v, "name");
        let input = field(v, "input");
        let (enc, buf) = match field(v, "encoding") {
            "binary" => (Encoding::Binary, hex(input)),
            "json" => (Encoding::Json, input.as_bytes().to_vec()),
            other => panic!("{name}: bad encoding {other}"),
        };
        let err = match field(v, "direction") {
            "client" => decode_client(enc, &buf).map(|m| format!("{m:?}")),
            "server" => decode_server(enc, &buf).map(|m| format!("{m:?}")),
            other => panic!("{name}: bad direction {other}"),
        };
        let err = match err {
            Ok(m) => panic!("{name}: accepted as {m}"),
            Err(e) => e,
        };
        assert_eq!(kind(&err), field(v, "error"), "{name}: {err}");
        assert_eq!(
            u64::from(err.id()),
            v["id"].as_u64().unwrap(),
            "{name}: {err}"
        );
    }
}

/// The module-level functions and the `Encoding` dispatch are the same codec.
#[test]
fn module_functions_match_dispatch() {
    for v in load("messages.json") {
        let bin = hex(field(&v, "binary"));
        if field(&v, "direction") == "client" {
            assert_eq!(
                binary::decode_request(&bin),
                Encoding::Binary.decode_request(&bin)
            );
            if let Some(text) = v.get("json").and_then(Value::as_str) {
                assert_eq!(
                    json::decode_request(text.as_bytes()),
                    Encoding::Json.decode_request(text.as_bytes())
                );
            }
        } else {
            let m = binary::decode_server(&bin).unwrap();
            assert_eq!(Encoding::Binary.encode_server_bytes(&m), Bytes::from(bin));
        }
    }
}
