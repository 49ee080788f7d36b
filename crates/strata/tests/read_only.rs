//! `DB::open_for_read_only`: no lock, nothing written, every read path,
//! writes refused, the view fixed at open.

use std::collections::BTreeMap;
use std::path::Path;

use strata_kv::{Error, IteratorMode, Options, DB};

fn listing(dir: &Path) -> BTreeMap<String, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                e.metadata().unwrap().len(),
            )
        })
        .collect()
}

#[test]
fn a_read_only_open_reads_everything_and_writes_nothing() {
    let dir = std::env::temp_dir().join(format!("strata-read-only-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(64 << 10);
    let writer = DB::open(&opts, &dir).unwrap();
    for i in 0..3000u32 {
        writer.put(format!("k{i:05}"), format!("v{i}")).unwrap();
    }
    writer.flush().unwrap();
    // In the log only.
    writer.put("k99999", "last").unwrap();
    writer.delete("k00007").unwrap();
    let before = listing(&dir);

    // The writer holds the lock; a read-only open needs none.
    assert!(matches!(
        DB::open(&Options::default(), &dir),
        Err(Error::Busy(_))
    ));
    let ro = DB::open_for_read_only(&Options::default(), &dir, false).unwrap();
    assert_eq!(ro.get("k00001").unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(ro.get("k99999").unwrap().as_deref(), Some(&b"last"[..]));
    assert_eq!(ro.get("k00007").unwrap(), None);
    assert_eq!(ro.iterator(IteratorMode::Start).count(), 3000);
    let got = ro.multi_get(["k00002", "k00007", "nope"]);
    assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&b"v2"[..]));
    assert_eq!(got[1].as_ref().unwrap(), &None);
    assert!(!ro.live_files().unwrap().is_empty());
    assert!(ro.verify_table_files().iter().all(|c| c.result.is_ok()));

    // Writes of every kind are refused.
    assert!(matches!(ro.put("x", "y"), Err(Error::NotSupported(_))));
    assert!(matches!(ro.delete("k00001"), Err(Error::NotSupported(_))));
    assert!(matches!(ro.flush(), Err(Error::NotSupported(_))));
    assert!(matches!(
        ro.compact_range::<&[u8], &[u8]>(None, None),
        Err(Error::NotSupported(_))
    ));

    // The writer goes on; the read-only view stays as it was at open.
    writer.put("k00001", "changed").unwrap();
    assert_eq!(ro.get("k00001").unwrap().as_deref(), Some(&b"v1"[..]));
    drop(ro);
    // Nothing was written or deleted by the read-only open and close.
    let mut after = listing(&dir);
    let mut before = before;
    // The writer's own log grew with its last put.
    for m in [&mut after, &mut before] {
        m.retain(|name, _| !name.ends_with(".log"));
    }
    assert_eq!(after, before);

    // A log holding writes is an error when asked.
    let err = DB::open_for_read_only(&Options::default(), &dir, true).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    drop(writer);

    // Not a database.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(matches!(
        DB::open_for_read_only(&Options::default(), &empty, false),
        Err(Error::InvalidArgument(_))
    ));
    let _ = std::fs::remove_dir_all(&dir);
}
