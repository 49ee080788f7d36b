//! Any bytes through the `data_block` decoder: see `strata_kv::fuzzing::data_block`
//! for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_kv::fuzzing::data_block(data));
