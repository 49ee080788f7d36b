//! Any text as an options file: options or an InvalidArgument error, and
//! options read from text write back to text that reads the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_kv::Options;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Options::from_toml(text, "fuzz") {
        Ok(o) => {
            let written = o.to_toml();
            let again = Options::from_toml(&written, "written").expect("written options read back");
            assert_eq!(again.to_toml(), written);
        }
        Err(e) => assert!(matches!(e, strata_kv::Error::InvalidArgument(_)), "{e}"),
    }
});
