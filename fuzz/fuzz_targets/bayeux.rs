//! Fuzz target: see `herald_bayeux::fuzzing::batch`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_bayeux::fuzzing::batch(data));
