//! Codec micro-benchmarks: decoding + unmasking a masked binary frame (the
//! server's per-message hot path) at a typical (200 B) and a large (16 KiB)
//! size, and raw `apply_mask` throughput.
//!
//! Run: `cargo bench -p herald-ws --bench frames` (add `-- --quick` for a fast pass).

use bytes::BytesMut;
use criterion::{black_box, criterion_main, Criterion, Throughput};
use herald_ws::{apply_mask, encode_frame, Decoder, OpCode, Role};

const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

fn decode_frames(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode_masked_binary");
    for size in [200usize, 16 * 1024] {
        let payload: Vec<u8> = (0..size).map(|i| i as u8).collect();
        let mut frame = BytesMut::new();
        encode_frame(&mut frame, OpCode::Binary, &payload, Some(MASK));
        let mut frame = frame.to_vec();
        let mut decoder = Decoder::new(Role::Server, 1 << 20);
        group.throughput(Throughput::Bytes(frame.len() as u64));
        // Decoding unmasks in place; decoding the same buffer again masks it
        // back, which is the same work, so no per-iteration copy is needed.
        group.bench_function(format!("{size}B"), |b| {
            b.iter(|| match decoder.decode(black_box(&mut frame)) {
                Ok(Some((consumed, Some(message)))) => {
                    black_box(message);
                    consumed
                }
                _ => 0,
            })
        });
    }
    group.finish();
}

fn mask(c: &mut Criterion) {
    let mut group = c.benchmark_group("apply_mask");
    for size in [200usize, 16 * 1024] {
        let mut buf = vec![0x5Au8; size];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(format!("{size}B"), |b| {
            b.iter(|| apply_mask(black_box(&mut buf), MASK, 1))
        });
    }
    group.finish();
}

// `criterion_group!` expands to an undocumented `pub fn`; inside a private
// module it is not exported, so the workspace's `missing_docs` lint is satisfied.
mod group {
    criterion::criterion_group!(benches, super::decode_frames, super::mask);
}
criterion_main!(group::benches);
