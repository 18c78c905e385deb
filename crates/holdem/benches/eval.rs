//! The 7-card evaluator: one showdown's worth of work per iteration.
use criterion::{black_box, criterion_main, Criterion};
use herald_holdem::cards::Card;
use herald_holdem::eval::best;

fn eval(c: &mut Criterion) {
    let mut rng = fastrand::Rng::with_seed(7);
    let hands: Vec<Vec<Card>> = (0..1024)
        .map(|_| {
            let mut deck = Card::deck();
            rng.shuffle(&mut deck);
            deck.truncate(7);
            deck
        })
        .collect();
    let mut i = 0;
    c.bench_function("best of 7 cards", |b| {
        b.iter(|| {
            i = (i + 1) % hands.len();
            black_box(best(black_box(&hands[i])))
        })
    });
}

// `criterion_group!` expands to an undocumented `pub fn`; inside a private
// module it is not exported, so the workspace's `missing_docs` lint is satisfied.
mod group {
    criterion::criterion_group!(benches, super::eval);
}
criterion_main!(group::benches);
