//! Any bytes through the `index_block` decoder: see `strata_kv::fuzzing::index_block`
//! for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_kv::fuzzing::index_block(data));
