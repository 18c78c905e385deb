//! Fuzz target: see `herald_proto::fuzzing::json`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_proto::fuzzing::json(data));
