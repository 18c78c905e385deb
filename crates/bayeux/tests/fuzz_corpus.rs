//! The `bayeux` fuzz target's body ([`herald_bayeux::fuzzing::batch`]) over
//! its committed seed corpus (`fuzz/corpus/bayeux`), on stable, on every
//! `cargo test`: what the nightly libFuzzer run starts from never panics.

use std::path::Path;

#[test]
fn the_seed_corpus_passes_the_fuzz_body() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/bayeux");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/bayeux exists") {
        let path = entry.expect("entry").path();
        let data = std::fs::read(&path).expect("readable seed");
        herald_bayeux::fuzzing::batch(&data);
        n += 1;
    }
    assert!(n >= 5, "only {n} seeds in {}", dir.display());
}
