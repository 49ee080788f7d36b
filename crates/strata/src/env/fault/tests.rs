//! The power-loss model and the error rules, checked against both inner
//! file systems.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::env::{read_file_to_vec, MemFileSystem, PosixFileSystem};

fn mem() -> (FaultInjectionFileSystem, PathBuf) {
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let dir = PathBuf::from("/db");
    fs.create_dir_all(&dir).unwrap();
    (fs, dir)
}

fn write(fs: &dyn FileSystem, path: &Path, data: &[u8], sync: bool) {
    let mut f = fs.create(path).unwrap();
    f.append(data).unwrap();
    if sync {
        f.sync().unwrap();
    }
}

fn contents(fs: &dyn FileSystem, path: &Path) -> Option<Vec<u8>> {
    fs.exists(path).then(|| read_file_to_vec(fs, path).unwrap())
}

fn power_loss(fs: &FaultInjectionFileSystem) {
    fs.crash().unwrap();
    fs.restart();
}

#[test]
fn sync_makes_contents_durable_and_sync_dir_makes_names_durable() {
    let (fs, dir) = mem();
    let a = dir.join("a");
    let mut f = fs.create(&a).unwrap();
    f.append(b"abc").unwrap();
    f.sync().unwrap();
    f.append(b"def").unwrap();
    assert_eq!(fs.unsynced_bytes(&a), 3);
    fs.sync_dir(&dir).unwrap();
    drop(f);
    power_loss(&fs);
    assert_eq!(contents(&fs, &a).as_deref(), Some(&b"abc"[..]));
    assert_eq!(fs.unsynced_bytes(&a), 0);
}

#[test]
fn synced_file_without_sync_dir_disappears() {
    let (fs, dir) = mem();
    write(&fs, &dir.join("kept"), b"k", true);
    fs.sync_dir(&dir).unwrap();
    write(&fs, &dir.join("lost"), b"l", true);
    power_loss(&fs);
    assert!(fs.exists(&dir.join("kept")));
    assert!(!fs.exists(&dir.join("lost")));
}

#[test]
fn rename_over_is_undone_without_sync_dir_and_kept_with_it() {
    for sync_dir in [false, true] {
        let (fs, dir) = mem();
        let current = dir.join("CURRENT");
        write(&fs, &current, b"old", true);
        fs.sync_dir(&dir).unwrap();
        let tmp = dir.join("tmp");
        write(&fs, &tmp, b"new", true);
        fs.rename(&tmp, &current).unwrap();
        assert_eq!(contents(&fs, &current).as_deref(), Some(&b"new"[..]));
        if sync_dir {
            fs.sync_dir(&dir).unwrap();
        }
        power_loss(&fs);
        let want: &[u8] = if sync_dir { b"new" } else { b"old" };
        assert_eq!(contents(&fs, &current).as_deref(), Some(want));
        assert!(!fs.exists(&tmp), "tmp was never durable under its own name");
    }
}

#[test]
fn remove_is_undone_without_sync_dir() {
    let (fs, dir) = mem();
    let a = dir.join("a");
    let mut f = fs.create(&a).unwrap();
    f.append(b"durable").unwrap();
    f.sync().unwrap();
    f.append(b" volatile").unwrap();
    drop(f);
    fs.sync_dir(&dir).unwrap();
    fs.remove(&a).unwrap();
    assert!(!fs.exists(&a));
    power_loss(&fs);
    assert_eq!(contents(&fs, &a).as_deref(), Some(&b"durable"[..]));
    fs.remove(&a).unwrap();
    fs.sync_dir(&dir).unwrap();
    power_loss(&fs);
    assert!(!fs.exists(&a));
}

#[test]
fn create_over_existing_name_keeps_old_contents_until_sync_dir() {
    let (fs, dir) = mem();
    let a = dir.join("a");
    write(&fs, &a, b"first", true);
    fs.sync_dir(&dir).unwrap();
    write(&fs, &a, b"second", true);
    power_loss(&fs);
    assert_eq!(contents(&fs, &a).as_deref(), Some(&b"first"[..]));
}

#[test]
fn files_present_before_wrapping_are_durable() {
    let mem = MemFileSystem::new();
    mem.create_dir_all(Path::new("/db")).unwrap();
    write(&mem, Path::new("/db/old"), b"was here", false);
    let fs = FaultInjectionFileSystem::new(Arc::new(mem));
    let mut f = fs.open_append(Path::new("/db/old")).unwrap();
    f.append(b" and more").unwrap();
    drop(f);
    power_loss(&fs);
    assert_eq!(
        contents(&fs, Path::new("/db/old")).as_deref(),
        Some(&b"was here"[..])
    );
}

#[test]
fn crash_takes_the_file_system_down_and_stales_old_handles() {
    let (fs, dir) = mem();
    let a = dir.join("a");
    let mut f = fs.create(&a).unwrap();
    fs.sync_dir(&dir).unwrap();
    let reader = fs.open_random_access(&a).unwrap();
    fs.crash().unwrap();
    assert!(fs.is_down());
    let err = f.append(b"x").unwrap_err();
    assert!(err.to_string().contains("power loss"), "{err}");
    assert!(fs.create(&dir.join("b")).is_err());
    assert!(fs.list(&dir).is_err());
    fs.restart();
    assert!(
        f.append(b"x").is_err(),
        "a handle from before the crash stays dead"
    );
    assert!(reader.read_exact_at(0, &mut []).is_err());
    write(&fs, &dir.join("b"), b"ok", false);
    assert_eq!(fs.stats().crashes, 1);
}

#[test]
fn rule_fails_after_n_calls_on_matching_paths_a_bounded_number_of_times() {
    let (fs, dir) = mem();
    fs.inject(
        FaultRule::new(&[FileOp::Sync])
            .path_contains(".sst")
            .after(2)
            .times(2),
    );
    let mut log = fs.create(&dir.join("1.log")).unwrap();
    let mut sst = fs.create(&dir.join("2.sst")).unwrap();
    for _ in 0..5 {
        log.sync().unwrap();
    }
    let results: Vec<bool> = (0..6).map(|_| sst.sync().is_ok()).collect();
    assert_eq!(results, [true, true, false, false, true, true]);
    let err = {
        fs.inject(FaultRule::new(&[FileOp::Append]).times(1));
        sst.append(b"x").unwrap_err()
    };
    assert!(err.to_string().contains("injected"), "{err}");
    assert!(err.to_string().contains("2.sst"), "names the file: {err}");
    let stats = fs.stats();
    assert_eq!(stats.injected(FileOp::Sync), 2);
    assert_eq!(stats.injected(FileOp::Append), 1);
    assert_eq!(stats.total_injected(), 3);
    assert_eq!(stats.calls(FileOp::Sync), 11);
    fs.clear_faults();
    sst.append(b"x").unwrap();
}

#[test]
fn failed_operations_have_no_effect() {
    let (fs, dir) = mem();
    let a = dir.join("a");
    let mut f = fs.create(&a).unwrap();
    f.append(b"abc").unwrap();
    fs.sync_dir(&dir).unwrap();
    fs.inject(FaultRule::new(&[
        FileOp::Sync,
        FileOp::Append,
        FileOp::Rename,
        FileOp::Remove,
    ]));
    assert!(f.append(b"def").is_err());
    assert_eq!(f.size(), 3);
    assert!(f.sync().is_err());
    assert!(fs.rename(&a, &dir.join("b")).is_err());
    assert!(fs.remove(&a).is_err());
    assert!(fs.exists(&a));
    fs.clear_faults();
    power_loss(&fs);
    assert_eq!(contents(&fs, &a).as_deref(), Some(&b""[..]), "sync failed");
}

#[test]
fn one_in_rules_are_reproducible_from_the_seed() {
    let run = |seed| {
        let (fs, dir) = mem();
        fs.set_seed(seed);
        fs.inject(FaultRule::new(&[FileOp::Read]).one_in(3));
        write(&fs, &dir.join("a"), b"abc", false);
        let r = fs.open_random_access(&dir.join("a")).unwrap();
        let mut buf = [0u8; 1];
        (0..200)
            .map(|_| r.read_exact_at(0, &mut buf).is_ok())
            .collect::<Vec<_>>()
    };
    let a = run(7);
    assert_eq!(a, run(7));
    let failures = a.iter().filter(|ok| !**ok).count();
    assert!((30..110).contains(&failures), "{failures} of 200");
}

#[test]
fn crash_after_ops_crashes_at_the_chosen_mutation() {
    let (fs, dir) = mem();
    let a = dir.join("a");
    let mut f = fs.create(&a).unwrap();
    fs.sync_dir(&dir).unwrap();
    fs.crash_after_ops(2);
    f.append(b"1").unwrap();
    f.sync().unwrap();
    let err = f.append(b"2").unwrap_err();
    assert!(err.to_string().contains("power loss"), "{err}");
    assert!(fs.is_down());
    fs.restart();
    assert_eq!(contents(&fs, &a).as_deref(), Some(&b"1"[..]));
}

#[test]
fn keep_random_prefix_keeps_between_synced_and_written() {
    let mut lengths = std::collections::BTreeSet::new();
    for seed in 0..40 {
        let (fs, dir) = mem();
        fs.set_seed(seed);
        fs.set_crash_mode(CrashMode::KeepRandomPrefix);
        let a = dir.join("a");
        let mut f = fs.create(&a).unwrap();
        fs.sync_dir(&dir).unwrap();
        f.append(b"0123").unwrap();
        f.sync().unwrap();
        f.append(b"456789").unwrap();
        drop(f);
        power_loss(&fs);
        let got = contents(&fs, &a).unwrap();
        assert!(b"0123456789".starts_with(&got) && got.len() >= 4, "{got:?}");
        lengths.insert(got.len());
    }
    assert!(lengths.len() > 3, "prefixes vary: {lengths:?}");
}

#[test]
fn keep_random_prefix_applies_directory_changes_in_order() {
    for seed in 0..40 {
        let (fs, dir) = mem();
        fs.set_seed(seed);
        fs.set_crash_mode(CrashMode::KeepRandomPrefix);
        let names: Vec<PathBuf> = (0..5).map(|i| dir.join(format!("f{i}"))).collect();
        for n in &names {
            write(&fs, n, b"x", true);
        }
        power_loss(&fs);
        let present: Vec<bool> = names.iter().map(|n| fs.exists(n)).collect();
        let kept = present.iter().take_while(|p| **p).count();
        assert!(
            present[kept..].iter().all(|p| !p),
            "a prefix survives: {present:?}"
        );
    }
}

#[test]
fn power_loss_over_the_posix_file_system() {
    let dir = std::env::temp_dir().join(format!("strata-fault-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let fs = FaultInjectionFileSystem::new(Arc::new(PosixFileSystem::new()));
    fs.create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    let mut f = fs.create(&a).unwrap();
    f.append(b"synced").unwrap();
    f.sync().unwrap();
    f.append(b" lost").unwrap();
    fs.sync_dir(&dir).unwrap();
    write(&fs, &b, b"never named durably", true);
    drop(f);
    power_loss(&fs);
    assert_eq!(std::fs::read(&a).unwrap(), b"synced");
    assert!(!b.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn renaming_a_directory_or_nothing_is_an_error_not_a_panic() {
    let (fs, dir) = mem();
    let sub = dir.join("sub");
    fs.create_dir_all(&sub).unwrap();
    let err = fs.rename(&sub, &dir.join("moved")).unwrap_err();
    assert!(err.to_string().contains("directory"), "{err}");
    assert!(fs.is_dir(&sub), "nothing was renamed");
    assert!(fs.rename(&dir.join("missing"), &dir.join("b")).is_err());
    assert!(!fs.exists(&dir.join("b")));
}
