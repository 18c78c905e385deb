//! Decoders face the network: no input may make them panic. This feeds every
//! decoder every vector (valid and invalid), every truncation of it, mutated
//! copies and random bytes, and only checks that each call returns.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use bytes::Bytes;
use herald_proto::{binary, json, shootout};
use serde_json::Value;

/// Runs every decoder on `buf`; the results do not matter, returning does.
fn decode_all(buf: &[u8]) {
    let shared = Bytes::copy_from_slice(buf);
    let _ = json::decode_request(buf);
    let _ = json::decode_server(buf);
    let _ = json::decode_request_bytes(&shared);
    let _ = json::decode_server_bytes(&shared);
    let _ = binary::decode_request(buf);
    let _ = binary::decode_server(buf);
    let _ = binary::decode_request_bytes(&shared);
    let _ = binary::decode_server_bytes(&shared);
    let _ = shootout::parse_json(buf);
    let _ = shootout::parse_binary(buf);
}

fn corpus() -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors");
    let mut out = Vec::new();
    for file in ["messages.json", "invalid.json"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        for entry in v.as_array().unwrap() {
            for key in ["json", "binary", "input"] {
                let Some(s) = entry.get(key).and_then(Value::as_str) else {
                    continue;
                };
                out.push(s.as_bytes().to_vec());
                let is_hex = key == "binary" || entry["encoding"] == "binary";
                if is_hex && s.len() & 1 == 0 {
                    let bytes = (0..s.len())
                        .step_by(2)
                        .filter_map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
                        .collect();
                    out.push(bytes);
                }
            }
        }
    }
    out
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn every_truncation_of_every_vector() {
    for input in corpus() {
        for end in 0..=input.len() {
            decode_all(&input[..end]);
            decode_all(&input[end..]);
        }
    }
}

#[test]
fn mutated_vectors() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for input in corpus() {
        if input.is_empty() {
            continue;
        }
        for _ in 0..200 {
            let mut m = input.clone();
            for _ in 0..1 + rng.next() % 3 {
                let i = (rng.next() % m.len() as u64) as usize;
                match rng.next() % 4 {
                    0 => m[i] = rng.next() as u8,
                    1 => m[i] ^= 1 << (rng.next() % 8),
                    2 => {
                        m[i] = [0x00, 0x7f, 0x80, 0xff, b'"', b'{', b'['][(rng.next() % 7) as usize]
                    }
                    _ => m.insert(i, rng.next() as u8),
                }
            }
            decode_all(&m);
        }
    }
}

#[test]
fn random_bytes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..50_000 {
        let len = (rng.next() % 48) as usize;
        let mut buf: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        // Give the binary decoders a known type byte half the time.
        if let Some(first) = buf.first_mut() {
            if rng.next() & 1 == 0 {
                const TYPES: &[u8] = &[
                    1, 2, 3, 4, 5, 6, 7, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0xe0, 0xa0,
                    0xa1, 0xa2, 0xa3, 0xa4, b'e', b'b', b'r',
                ];
                *first = TYPES[(rng.next() % TYPES.len() as u64) as usize];
            }
        }
        decode_all(&buf);
    }
}

#[test]
fn deep_and_huge_inputs() {
    decode_all("[".repeat(100_000).as_bytes());
    decode_all(
        format!(
            "{{\"publish\":{{\"channel\":\"c\",\"data\":{}}}}}",
            "[".repeat(10_000)
        )
        .as_bytes(),
    );
    decode_all(&[
        0x04, 0x01, 0x01, b'c', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ]);
    decode_all(&[
        0x87, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ]);
}
