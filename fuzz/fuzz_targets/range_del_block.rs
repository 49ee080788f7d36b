//! Any bytes through the `range_del_block` decoder: see `strata_kv::fuzzing::range_del_block`
//! for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_kv::fuzzing::range_del_block(data));
