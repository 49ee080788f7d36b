//! Any bytes through the `filter` decoder: see `strata_kv::fuzzing::filter`
//! for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_kv::fuzzing::filter(data));
