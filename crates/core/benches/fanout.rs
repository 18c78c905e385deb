//! Fan-out cost: one publication delivered by the hub to N subscribers' outboxes
//! (encode once per encoding, push shared bytes, drain). Run with
//! `cargo bench -p herald-core --bench fanout`.
#![allow(missing_docs)]

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use herald_core::{Client, Deliver, Hub, Publication};
use herald_proto::Encoding;
use std::sync::Arc;

fn fanout(c: &mut Criterion) {
    let mut group = c.benchmark_group("hub_deliver");
    for n in [1_000usize, 10_000] {
        let hub = Hub::new();
        let clients: Vec<Arc<Client>> = (0..n as u64)
            .map(|i| {
                let enc = if i % 2 == 0 {
                    Encoding::Json
                } else {
                    Encoding::Binary
                };
                Arc::new(Client::new(i, enc, 1 << 30, 0))
            })
            .collect();
        for c in &clients {
            hub.subscribe("bench", c);
        }
        let publication = Publication {
            channel: "bench".into(),
            offset: 1,
            data: Bytes::from(format!("{{\"padding\":\"{}\"}}", "x".repeat(200))),
            json: false,
        };
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                hub.deliver(&publication);
                for c in &clients {
                    c.outbox.with_queue(|q| q.advance(1, 0));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, fanout);
criterion_main!(benches);
