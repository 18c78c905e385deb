//! Codec micro-benchmarks (criterion): the paths that run per message on the
//! server. Encoding a publication push happens once per publish and is shared
//! with every subscriber; decoding a publish request happens once per publish;
//! the shootout parse runs once per benchmark message. Whole-system numbers
//! come from `herald bench`, not from here.
//!
//! Run: `cargo bench -p herald-proto` (add `-- --quick` for a fast look).
#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use herald_proto::{shootout, Command, Encoding, Push, Request, ServerMsg};

/// A typical chat-like payload.
const PAYLOAD: &[u8] =
    br#"{"text":"hello, world","user":"u-1234","ts":1700000000123,"tags":["a","b"]}"#;

fn publication(data: &'static [u8]) -> ServerMsg {
    ServerMsg::Push(Push::Publication {
        channel: "chat:room-42".into(),
        offset: 123_456,
        data: Bytes::from_static(data),
    })
}

fn encode_publication(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode_publication_push");
    let json_msg = publication(PAYLOAD);
    let bin_msg = publication(b"\x00\x01\x02\x03 some binary payload \xff\xfe");
    for (name, enc, msg) in [
        ("json", Encoding::Json, &json_msg),
        ("json_b64", Encoding::Json, &bin_msg),
        ("binary", Encoding::Binary, &json_msg),
    ] {
        g.throughput(Throughput::Elements(1));
        g.bench_function(name, |b| {
            let mut out = BytesMut::with_capacity(256);
            b.iter(|| {
                out.clear();
                enc.encode_server(black_box(msg), &mut out);
                black_box(out.len())
            })
        });
    }
    g.bench_function("json_fresh_bytes", |b| {
        b.iter(|| Encoding::Json.encode_server_bytes(black_box(&json_msg)))
    });
    g.finish();
}

fn decode_publish(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode_publish_request");
    let req = Request {
        id: 42,
        cmd: Command::Publish {
            channel: "chat:room-42".into(),
            data: Bytes::from_static(PAYLOAD),
        },
    };
    for (name, enc) in [("json", Encoding::Json), ("binary", Encoding::Binary)] {
        let mut out = BytesMut::new();
        enc.encode_request(&req, &mut out);
        let buf = out.freeze();
        g.throughput(Throughput::Elements(1));
        g.bench_function(name, |b| {
            b.iter(|| enc.decode_request(black_box(&buf)).unwrap())
        });
        g.bench_function(format!("{name}_zero_copy"), |b| {
            b.iter(|| enc.decode_request_bytes(black_box(&buf)).unwrap())
        });
    }
    g.finish();
}

fn shootout_parse(c: &mut Criterion) {
    let msg = br#"{"type":"broadcast","payload":{"sendTime":"2024-01-01T00:00:00.123456789Z","padding":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}"#;
    c.bench_function("shootout_parse_json", |b| {
        b.iter(|| shootout::parse_json(black_box(msg)).unwrap().payload.len())
    });
    let mut bin = BytesMut::new();
    shootout::write_binary(shootout::ShootoutKind::Broadcast, 1, 64, &mut bin);
    c.bench_function("shootout_parse_binary", |b| {
        b.iter(|| shootout::parse_binary(black_box(&bin)).unwrap())
    });
}

criterion_group!(benches, encode_publication, decode_publish, shootout_parse);
criterion_main!(benches);
