//! Fuzz target: see `herald_ws::fuzzing::frames`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_ws::fuzzing::frames(data));
