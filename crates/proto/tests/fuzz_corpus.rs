//! The fuzz targets' bodies (`herald_proto::fuzzing`, `herald_ws::fuzzing`,
//! `herald_pusher::fuzzing`)
//! run on stable over the committed seed corpus (`fuzz/corpus/<target>/`) and
//! the protocol's test vectors, then over deterministic random mutations of
//! them: a short, always-on version of `cargo fuzz run` (see the README for
//! running the real thing for hours).
#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 7] = [
    ("json", herald_proto::fuzzing::json),
    ("binary", herald_proto::fuzzing::binary),
    ("tcp_framing", herald_proto::fuzzing::tcp_framing),
    ("poll_body", herald_proto::fuzzing::poll_body),
    ("shootout", herald_proto::fuzzing::shootout),
    ("ws_frames", herald_ws::fuzzing::frames),
    ("pusher", herald_pusher::fuzzing::message),
];

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = root().join("fuzz/corpus").join(target);
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    out.sort();
    assert!(!out.is_empty(), "empty corpus {}", dir.display());
    out
}

/// Every message of the test vectors, as JSON text and as binary.
fn vectors() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for file in ["messages.json", "invalid.json"] {
        let text = std::fs::read_to_string(root().join("spec/vectors").join(file)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        collect(&v, &mut out);
    }
    out
}

fn collect(v: &serde_json::Value, out: &mut Vec<Vec<u8>>) {
    match v {
        serde_json::Value::String(s) => {
            out.push(s.as_bytes().to_vec());
            if s.len() % 2 == 0 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
                let bytes = (0..s.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                    .collect();
                out.push(bytes);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| collect(x, out)),
        _ => {}
    }
}

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A libFuzzer-style mutation: flip, insert, delete, duplicate or splice.
fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(d.len() + 1);
        match rng.below(6) {
            0 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            1 => d.insert(at, rng.next() as u8),
            2 if at < d.len() => {
                d.remove(at);
            }
            3 => {
                let interesting = [0u8, 0x7f, 0x80, 0xff, b'"', b'{', b'}', b'[', b'\\', b','];
                d.insert(at, interesting[rng.below(interesting.len())]);
            }
            4 if !other.is_empty() => {
                let from = rng.below(other.len());
                let len = rng.below(other.len() - from + 1);
                d.splice(at..at, other[from..from + len].iter().copied());
            }
            _ => d.truncate(at),
        }
    }
    d
}

#[test]
fn every_target_survives_its_corpus_vectors_and_mutations() {
    let vectors = vectors();
    for (name, target) in TARGETS {
        let mut seeds = corpus(name);
        seeds.extend(vectors.iter().cloned());
        for s in &seeds {
            target(s);
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
        for _ in 0..50_000 {
            let a = &seeds[rng.below(seeds.len())];
            let b = &seeds[rng.below(seeds.len())];
            let input = mutate(&mut rng, a, b);
            target(&input);
        }
    }
}
