//! Any bytes through the `properties` decoder: see `strata_kv::fuzzing::properties`
//! for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_kv::fuzzing::properties(data));
