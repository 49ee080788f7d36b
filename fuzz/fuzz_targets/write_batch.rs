//! Any bytes through the `write_batch` decoder: see `strata_kv::fuzzing::write_batch`
//! for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_kv::fuzzing::write_batch(data));
