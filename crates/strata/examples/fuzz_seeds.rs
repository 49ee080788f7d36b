//! Writes the seed corpora of the decoder fuzz targets (`fuzz/`), made by
//! the project's own writers: `cargo run -p strata-kv --example fuzz_seeds -- DIR`
//! fills `DIR/<target>/`. `fuzz/run.sh` runs it once.

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/corpus".to_string());
    strata_kv::fuzzing::write_seeds(std::path::Path::new(&dir))
}
