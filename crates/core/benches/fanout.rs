//! Fan-out cost: one publication delivered by the hub to N subscribers' outboxes
//! (encode once per encoding, push shared bytes, drain); and a batch of a
//! channel's publications fanned out one by one vs as one batch
//! (`Deliver::deliver_batch`, what the Redis broker does per read of its
//! subscriber link). Run with `cargo bench -p herald-core --bench fanout`.
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

/// 8 publications of one channel to 33 JSON subscribers (a third of a
/// 100-subscriber channel: what one of three nodes holds in
/// `bench/cluster.sh`), one by one vs as one batch.
fn batch(c: &mut Criterion) {
    const SUBS: u64 = 33;
    const PUBS: u64 = 8;
    let mut group = c.benchmark_group("hub_batch_33x8");
    let hub = Hub::new();
    let clients: Vec<Arc<Client>> = (0..SUBS)
        .map(|i| Arc::new(Client::new(i, Encoding::Json, 1 << 30, 0)))
        .collect();
    for c in &clients {
        hub.subscribe("bench", c);
    }
    let pubs: Vec<Publication> = (1..=PUBS)
        .map(|offset| Publication {
            channel: "bench".into(),
            offset,
            data: Bytes::from(format!("{{\"padding\":\"{}\"}}", "x".repeat(100))),
            json: false,
        })
        .collect();
    let drain = || {
        for c in &clients {
            c.outbox.with_queue(|q| q.advance(PUBS as usize, 0));
        }
    };
    group.throughput(Throughput::Elements(SUBS * PUBS));
    group.bench_function("one_by_one", |b| {
        b.iter(|| {
            for p in &pubs {
                hub.deliver(p);
            }
            drain();
        })
    });
    group.bench_function("batch", |b| {
        b.iter(|| {
            hub.deliver_batch(&pubs);
            drain();
        })
    });
    group.finish();
}

criterion_group!(benches, fanout, batch);
criterion_main!(benches);
