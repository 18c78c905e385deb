//! Fuzz target: see `herald_pusher::fuzzing::message`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_pusher::fuzzing::message(data));
