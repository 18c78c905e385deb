//! Routing cost per publish: `Sublist::for_each_match` on one subject with 10k
//! and 100k subscriptions, to show that the cost does not grow with the number
//! of unrelated subscriptions (the two sizes should be near-equal).
//!
//! The subscriptions are a realistic mix over many prefixes: one tenant per 50
//! subscriptions (so every tenant's subtree has the same size at both scales,
//! as in a real deployment that grows by adding tenants), mostly exact-looking
//! 3–4 token patterns, some `*` and some `>`. A fixed set of 6 subscriptions
//! matches the `hit` subject at both sizes; the `miss` subject shares the
//! tenant prefix and walks its `*` branch but matches only `t7.>`; `unknown`
//! leaves the trie at the root.
//!
//! Run with
//! `cargo bench -p herald-core --bench routing -- --warm-up-time 1 --measurement-time 2`.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use herald_core::Sublist;

const HIT: &str = "t7.lobby.msg";
const MISS: &str = "t7.nosuchroom.msg.x";
const UNKNOWN: &str = "elsewhere.lobby.msg";

fn build(n: usize) -> Sublist<u64> {
    let tenants = (n / 50).max(1);
    let mut s = Sublist::new();
    for i in 0..n {
        let t = i % tenants;
        let v = i as u64;
        let pattern = match i % 20 {
            // 70%: exact-looking, 3 or 4 tokens.
            0..=6 => format!("t{t}.r{i}.msg"),
            7..=13 => format!("t{t}.r{i}.u{}.typing", i % 97),
            // 15%: a `*` in the middle or at the end.
            14 | 15 => format!("t{t}.r{i}.*"),
            16 => format!("t{t}.*.presence"),
            // 15%: `>` under a room or a user.
            17 | 18 => format!("t{t}.r{i}.>"),
            _ => format!("t{t}.r{i}.u{}.>", i % 97),
        };
        s.insert(&pattern, v);
    }
    // The subscriptions the `hit` subject matches, the same at every size.
    let base = 1 << 40;
    for (k, p) in [
        "t7.lobby.msg",
        "t7.lobby.msg",
        "t7.lobby.*",
        "t7.lobby.>",
        "t7.*.msg",
        "t7.>",
    ]
    .into_iter()
    .enumerate()
    {
        s.insert(p, base + k as u64);
    }
    s
}

fn count(s: &Sublist<u64>, subject: &str) -> usize {
    let mut n = 0;
    s.for_each_match(subject, |_| n += 1);
    n
}

fn routing(c: &mut Criterion) {
    let mut group = c.benchmark_group("sublist_match");
    for n in [10_000usize, 100_000] {
        let s = build(n);
        assert_eq!(count(&s, HIT), 6, "the hit subject matches the fixed set");
        assert_eq!(count(&s, MISS), 1, "only t7.> matches the miss subject");
        assert_eq!(count(&s, UNKNOWN), 0);
        for (name, subject) in [("hit", HIT), ("miss", MISS), ("unknown", UNKNOWN)] {
            group.bench_with_input(BenchmarkId::new(name, n), &subject, |b, subject| {
                b.iter(|| {
                    let mut acc = 0u64;
                    s.for_each_match(black_box(subject), |v| acc = acc.wrapping_add(*v));
                    acc
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, routing);
criterion_main!(benches);
