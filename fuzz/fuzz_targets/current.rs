//! Any bytes through the `current` decoder: see `strata_kv::fuzzing::current`
//! for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_kv::fuzzing::current(data));
