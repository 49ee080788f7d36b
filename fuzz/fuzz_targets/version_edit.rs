//! Any bytes through the `version_edit` decoder: see `strata_kv::fuzzing::version_edit`
//! for what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_kv::fuzzing::version_edit(data));
