//! `DB::verify_table_files` and `DB::verify_checksum`: every live table of
//! both formats read whole; a flipped byte or a truncation in one file is
//! reported for that file only, with its name and offset.

use std::path::Path;

use strata_kv::{Error, Options, PackedTableOptions, DB};

/// Options that start no compaction: a table listed by `build` must still
/// be live when the test damages it and opens the database again.
fn no_compactions() -> Options {
    let mut opts = Options::default();
    opts.set_disable_auto_compactions(true);
    opts
}

fn build(dir: &Path, packed: bool) -> Vec<String> {
    let _ = std::fs::remove_dir_all(dir);
    let mut opts = no_compactions();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(64 << 10);
    if packed {
        opts.set_packed_table_factory(&PackedTableOptions::default());
    }
    let db = DB::open(&opts, dir).unwrap();
    for round in 0..3u64 {
        for i in 0..2000u64 {
            db.put((i * 3 + round).to_be_bytes(), [round as u8; 40])
                .unwrap();
        }
        db.flush().unwrap();
    }
    let checks = db.verify_table_files();
    assert!(checks.len() >= 3);
    assert!(checks.iter().all(|c| c.result.is_ok()), "{checks:?}");
    assert_eq!(
        checks
            .iter()
            .map(|c| *c.result.as_ref().unwrap())
            .sum::<u64>(),
        6000
    );
    db.verify_checksum().unwrap();
    checks.into_iter().map(|c| c.name).collect()
}

#[test]
fn a_damaged_table_is_reported_with_its_name_and_the_others_pass() {
    for packed in [false, true] {
        let dir =
            std::env::temp_dir().join(format!("strata-verify-{packed}-{}", std::process::id()));
        let names = build(&dir, packed);
        // Flip a byte in the middle of the second file's data.
        let victim = dir.join(names[1].trim_start_matches('/'));
        let mut bytes = std::fs::read(&victim).unwrap();
        let at = bytes.len() / 3;
        bytes[at] ^= 0x40;
        std::fs::write(&victim, &bytes).unwrap();
        let db = DB::open(&no_compactions(), &dir).unwrap();
        let checks = db.verify_table_files();
        for c in &checks {
            if c.name == names[1] {
                match &c.result {
                    Err(Error::Corruption { file, .. }) => {
                        assert!(file.ends_with(&names[1][1..]), "{file}")
                    }
                    other => panic!("packed={packed}: {other:?}"),
                }
            } else {
                assert!(c.result.is_ok(), "{c:?}");
            }
        }
        assert!(matches!(
            db.verify_checksum(),
            Err(Error::Corruption { .. })
        ));
        drop(db);
        // Truncated: the size the manifest records is checked first.
        bytes[at] ^= 0x40;
        bytes.truncate(bytes.len() - 10);
        std::fs::write(&victim, &bytes).unwrap();
        let mut opts = no_compactions();
        opts.set_skip_checking_sst_file_sizes_on_db_open(true);
        let db = DB::open(&opts, &dir).unwrap();
        let bad: Vec<_> = db
            .verify_table_files()
            .into_iter()
            .filter(|c| c.result.is_err())
            .collect();
        assert_eq!(bad.len(), 1);
        let msg = bad[0].result.as_ref().unwrap_err().to_string();
        assert!(msg.contains("the manifest says"), "{msg}");
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
