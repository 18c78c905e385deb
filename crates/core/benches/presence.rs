//! What asking "who is here?" costs on a large channel: `presence_stats` (two
//! counters) against `presence` (the full member list), at 1k and 100k
//! subscribers, with members spread over one user per 4 connections. The
//! counters should cost the same at both sizes; the list grows with the
//! channel.
//!
//! Run with
//! `cargo bench -p herald-core --bench presence -- --warm-up-time 1 --measurement-time 2`.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use herald_core::{Client, Hub, Identity};
use herald_proto::Encoding;
use std::sync::Arc;

fn hub_with(n: u64) -> Hub {
    let hub = Hub::new();
    for id in 1..=n {
        let c = Arc::new(Client::new(id, Encoding::Json, 1 << 10, 0));
        c.set_identity(Arc::new(Identity {
            user: Arc::from(format!("user{}", id / 4)),
            expires_at: None,
            grants: Vec::new(),
            info: Default::default(),
        }));
        hub.subscribe("hall", &c);
    }
    hub
}

fn presence(c: &mut Criterion) {
    let mut g = c.benchmark_group("presence");
    for n in [1_000u64, 100_000] {
        let hub = hub_with(n);
        assert_eq!(hub.presence_stats("hall"), (n, n / 4 + 1));
        g.bench_with_input(BenchmarkId::new("stats", n), &hub, |b, hub| {
            b.iter(|| black_box(hub.presence_stats(black_box("hall"))))
        });
        g.bench_with_input(BenchmarkId::new("list", n), &hub, |b, hub| {
            b.iter(|| black_box(hub.presence(black_box("hall")).len()))
        });
    }
    g.finish();
}

criterion_group!(benches, presence);
criterion_main!(benches);
