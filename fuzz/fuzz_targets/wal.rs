//! Any bytes through the `wal` decoder: see `strata_kv::fuzzing::wal`
//! for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_kv::fuzzing::wal(data));
