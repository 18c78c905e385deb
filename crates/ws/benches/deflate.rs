//! permessage-deflate micro-benchmark: compressing and inflating a JSON
//! publication push of several sizes, to see where compression stops paying
//! (the server's `ws_deflate_threshold`). Before the timings it prints, per
//! size, the compressed size and the bytes saved on the wire (frame header
//! included), so each microsecond of CPU can be set against bytes saved.
//!
//! Run: `cargo bench -p herald-ws --bench deflate` (add `-- --quick` for a fast pass).

use criterion::{black_box, criterion_main, Criterion, Throughput};
use herald_ws::deflate::{compress, inflate};

/// A JSON push of about `size` bytes: lobby-like rows, as seed 002 streams.
fn push(size: usize) -> Vec<u8> {
    let mut rows = Vec::new();
    let mut i = 0;
    loop {
        let row = format!(
            r#"{{"table":"t-{i}","game":"holdem","seats":6,"players":{},"stakes":"1/2","open":true}}"#,
            i % 6
        );
        let text = format!(
            r#"{{"pub":{{"channel":"lobby:tables","offset":{},"data":[{}]}}}}"#,
            1000 + i,
            rows.join(",")
        );
        if text.len() >= size || i > 10_000 {
            return text.into_bytes();
        }
        rows.push(row);
        i += 1;
    }
}

/// WebSocket header length for a server frame of `len` bytes.
fn header(len: usize) -> usize {
    match len {
        0..=125 => 2,
        126..=65535 => 4,
        _ => 10,
    }
}

const SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 4096, 16384];

fn deflate(c: &mut Criterion) {
    eprintln!("size  compressed  wire_plain  wire_deflated  saved");
    for size in SIZES {
        let p = push(size);
        let mut z = Vec::new();
        compress(&p, &mut z);
        let (plain, deflated) = (p.len() + header(p.len()), z.len() + header(z.len()));
        eprintln!(
            "{:>5} {:>10} {:>11} {:>14} {:>6}",
            p.len(),
            z.len(),
            plain,
            deflated,
            plain as i64 - deflated as i64
        );
    }
    let mut group = c.benchmark_group("deflate_compress");
    for size in SIZES {
        let p = push(size);
        let mut out = Vec::with_capacity(p.len() + 64);
        group.throughput(Throughput::Bytes(p.len() as u64));
        group.bench_function(format!("{size}B"), |b| {
            b.iter(|| {
                out.clear();
                compress(black_box(&p), &mut out);
                out.len()
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group("deflate_inflate");
    for size in SIZES {
        let p = push(size);
        let mut z = Vec::new();
        compress(&p, &mut z);
        let mut out = Vec::with_capacity(p.len() + 64);
        group.throughput(Throughput::Bytes(p.len() as u64));
        group.bench_function(format!("{size}B"), |b| {
            b.iter(|| {
                out.clear();
                inflate(black_box(&z), 1 << 20, &mut out).map(|()| out.len())
            })
        });
    }
    group.finish();
}

fn benches() {
    let mut c = Criterion::default().configure_from_args();
    deflate(&mut c);
}

criterion_main!(benches);
