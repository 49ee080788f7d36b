//! Verification of a whole database against the expected state: at the
//! end of a run (exact), and after a crash (`strata-stress verify`), where
//! the outcome is folded back into the expected state so the next run
//! starts exact again.
//!
//! After a crash with the log on, every slot must show its acknowledged
//! state or the state of the write that was in flight. With
//! `--disable_wal` the database must show the state after some prefix of
//! the history, cut between batches, no shorter than the floor the last
//! explicit flush recorded.
//!
//! Every check reads the database three ways, which must agree: a forward
//! scan, a backward scan, and a get of every key. Every value must be one
//! the stress test wrote for that key, and the members of a group must show
//! the same write.
//!
//! At every idle point (after a reopen, at the end of a run) the table
//! files in the directory must be exactly the live ones: nothing a dead
//! version held is left behind, nothing the manifest names is gone.

use std::collections::BTreeSet;

use strata::{IteratorMode, DB};

use crate::expected::{ExpectedState, HistoryRecord, Shape, Slot};
use crate::failure::{open_failure, Failure};
use crate::flags::Flags;
use crate::run::{db_options, shape};
use crate::value::{
    check_value, group_member_name, key_name, parse_key, KeyState, Observed, ParsedKey,
};

/// Key-value pairs in scan order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn scan(db: &DB, mode: IteratorMode<'_>) -> Result<Entries, String> {
    db.iterator(mode)
        .map(|r| {
            r.map(|(k, v)| (k.to_vec(), v.to_vec()))
                .map_err(|e| format!("scan: {e}"))
        })
        .collect()
}

/// What the database shows for every slot, read three ways.
fn observe_all(db: &DB, shape: Shape, value_size_max: usize) -> Result<Vec<Observed>, String> {
    let forward = scan(db, IteratorMode::Start)?;
    let mut backward = scan(db, IteratorMode::End)?;
    backward.reverse();
    if forward != backward {
        return Err(format!(
            "forward scan ({} entries) and backward scan ({} entries) differ",
            forward.len(),
            backward.len()
        ));
    }
    let mut slots = vec![Observed::Absent; shape.slots() as usize];
    let mut members = vec![Vec::new(); shape.groups as usize];
    for (k, v) in &forward {
        let shown = || String::from_utf8_lossy(k).into_owned();
        let slot = match parse_key(k) {
            Some(ParsedKey::Plain(i)) if i < shape.keys => i,
            Some(ParsedKey::Member { group, member })
                if group < shape.groups && member < shape.group_size =>
            {
                members[group as usize].push(member);
                shape.keys + group
            }
            _ => return Err(format!("key {:?} was never written", shown())),
        };
        let g = check_value(slot, v, value_size_max).map_err(|e| format!("{}: {e}", shown()))?;
        let seen = Observed::Present(g);
        if slot >= shape.keys
            && slots[slot as usize] != Observed::Absent
            && slots[slot as usize] != seen
        {
            return Err(format!(
                "group {} is torn at {}",
                slot - shape.keys,
                shown()
            ));
        }
        slots[slot as usize] = seen;
    }
    for (g, present) in members.iter().enumerate() {
        if !present.is_empty() && present.len() != shape.group_size as usize {
            return Err(format!("group {g} is torn: only members {present:?} exist"));
        }
    }
    // Gets agree with the scans.
    let scanned: BTreeSet<&[u8]> = forward.iter().map(|(k, _)| k.as_slice()).collect();
    let check_get = |key: Vec<u8>, slot: u32| -> Result<(), String> {
        let got = db.get(&key).map_err(|e| format!("get: {e}"))?;
        let by_get = match got {
            None => Observed::Absent,
            Some(v) => Observed::Present(check_value(slot, &v, value_size_max)?),
        };
        let by_scan = if scanned.contains(key.as_slice()) {
            slots[slot as usize]
        } else {
            Observed::Absent
        };
        if by_get != by_scan {
            return Err(format!(
                "{}: get shows {by_get:?}, scan shows {by_scan:?}",
                String::from_utf8_lossy(&key)
            ));
        }
        Ok(())
    };
    for i in 0..shape.keys {
        check_get(key_name(i), i)?;
    }
    for g in 0..shape.groups {
        for m in 0..shape.group_size {
            check_get(group_member_name(g, m), shape.keys + g)?;
        }
    }
    Ok(slots)
}

/// Checks a running database against the acknowledged states exactly (no
/// write may be in flight). Returns the keys verified.
pub fn verify_open_db(
    db: &DB,
    expected: &ExpectedState,
    value_size_max: usize,
) -> Result<u64, String> {
    let shape = expected.shape();
    let seen = observe_all(db, shape, value_size_max)?;
    for (slot, seen) in seen.iter().enumerate() {
        let s = expected.get(slot as u32);
        if s.pending.is_some() || *seen != Observed::of(s.acked) {
            return Err(format!(
                "slot {slot}: database shows {seen:?}, expected {s:?}"
            ));
        }
    }
    Ok(u64::from(shape.keys + shape.groups * shape.group_size))
}

/// After a crash: reopens the database, checks it, and makes the expected
/// state match what survived. Returns the keys verified.
pub fn verify_after_crash(flags: &Flags) -> Result<u64, Failure> {
    let db_path = flags.required("db")?;
    // Both must exist: made-up empty ones would "verify" a wrong path.
    let expected =
        ExpectedState::open_existing(flags.required("expected")?.as_ref(), shape(flags)?)?;
    let value_size_max: usize = flags.get("value_size_max", 100)?;
    let mut options = db_options(flags)?;
    options.create_if_missing(false);
    if !std::path::Path::new(&db_path).exists() {
        return Err(Failure::Setup(format!(
            "reopen {db_path}: no such database"
        )));
    }
    let db = DB::open(&options, &db_path).map_err(|e| open_failure(&db_path, e))?;
    let shape = expected.shape();
    let seen = observe_all(&db, shape, value_size_max).map_err(Failure::Check)?;
    match expected.read_history()? {
        Some((base, records)) => {
            settle_prefix(&expected, &seen, base, &records).map_err(Failure::Check)?
        }
        None => settle_in_flight(&expected, &seen).map_err(Failure::Check)?,
    }
    expected.clear_history()?;
    check_files_at_idle(&db, &db_path).map_err(Failure::Check)?;
    Ok(u64::from(shape.keys + shape.groups * shape.group_size))
}

/// Reopened with the log on: reads every slot and folds the writes that
/// were in flight into the expected state (see [`settle_in_flight`]).
pub fn settle_after_reopen(
    db: &DB,
    expected: &ExpectedState,
    value_size_max: usize,
) -> Result<(), String> {
    let seen = observe_all(db, expected.shape(), value_size_max)?;
    settle_in_flight(expected, &seen)
}

/// Waits until no flush or compaction runs, then checks that the table
/// files in `db_path` are exactly the live ones and that one manifest is
/// left. The caller holds no iterator (a snapshot holds no file).
pub fn check_files_at_idle(db: &DB, db_path: &str) -> Result<(), String> {
    db.wait_for_compact()
        .map_err(|e| format!("wait_for_compact: {e}"))?;
    let names: Vec<String> = std::fs::read_dir(db_path)
        .map_err(|e| format!("list {db_path}: {e}"))?
        .filter_map(|d| d.ok().map(|d| d.file_name().to_string_lossy().into_owned()))
        .collect();
    let on_disk: BTreeSet<String> = names
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .map(|n| format!("/{n}"))
        .collect();
    let live: BTreeSet<String> = db
        .live_files()
        .map_err(|e| format!("live_files: {e}"))?
        .into_iter()
        .map(|f| f.name)
        .collect();
    if on_disk != live {
        let leaked: Vec<_> = on_disk.difference(&live).collect();
        let missing: Vec<_> = live.difference(&on_disk).collect();
        return Err(format!(
            "files at an idle point: on disk but not live {leaked:?}, live but missing {missing:?}"
        ));
    }
    let manifests = names.iter().filter(|n| n.starts_with("MANIFEST-")).count();
    if manifests != 1 {
        return Err(format!("{manifests} manifests at an idle point: {names:?}"));
    }
    Ok(())
}

/// Log on: each slot shows its acknowledged state or its write in flight.
fn settle_in_flight(expected: &ExpectedState, seen: &[Observed]) -> Result<(), String> {
    let (mut applied, mut lost) = (0u64, 0u64);
    for (slot, &seen) in seen.iter().enumerate() {
        let slot = slot as u32;
        let s = expected.get(slot);
        let survived = match s.pending {
            // The write in flight reached the database (or made no difference).
            Some(p) if Observed::of(p) == seen => {
                applied += 1;
                p
            }
            Some(_) if Observed::of(s.acked) == seen => {
                lost += 1;
                s.acked
            }
            _ if Observed::of(s.acked) == seen => s.acked,
            _ => {
                return Err(format!(
                    "slot {slot}: database shows {seen:?}; acknowledged {:?}, in flight {:?}",
                    s.acked, s.pending
                ))
            }
        };
        expected.set(
            slot,
            Slot {
                acked: survived,
                pending: None,
            },
        );
    }
    println!(
        "verify: {} writes were in flight: {applied} reached the database, {lost} did not",
        applied + lost
    );
    Ok(())
}

/// Log off: the database shows the state after a prefix of the history, cut
/// at a batch boundary, at least as long as the flushed floor.
fn settle_prefix(
    expected: &ExpectedState,
    seen: &[Observed],
    base: Vec<KeyState>,
    records: &[HistoryRecord],
) -> Result<(), String> {
    let floor = expected.history_floor() as usize;
    if floor > records.len() {
        return Err(format!(
            "history floor {floor} beyond its {} records",
            records.len()
        ));
    }
    let mut model = base;
    let apply = |model: &mut Vec<KeyState>, r: &(u32, KeyState, bool)| model[r.0 as usize] = r.1;
    for r in &records[..floor] {
        apply(&mut model, r);
    }
    let mut differ: BTreeSet<usize> = (0..model.len())
        .filter(|&s| Observed::of(model[s]) != seen[s])
        .collect();
    let mut at = floor;
    // One pass per record; a match is only taken at a batch boundary.
    while !(differ.is_empty() && (at == 0 || records[at - 1].2 || at == floor)) {
        let Some(r) = records.get(at) else {
            let first: Vec<_> = differ.iter().take(5).collect();
            return Err(format!(
                "no prefix of the {} history records from the floor {floor} matches: slots {first:?} differ",
                records.len()
            ));
        };
        apply(&mut model, r);
        let s = r.0 as usize;
        if Observed::of(model[s]) == seen[s] {
            differ.remove(&s);
        } else {
            differ.insert(s);
        }
        at += 1;
    }
    for (slot, state) in model.into_iter().enumerate() {
        expected.set(
            slot as u32,
            Slot {
                acked: state,
                pending: None,
            },
        );
    }
    println!(
        "verify: the database holds the first {at} of {} history records (floor {floor})",
        records.len()
    );
    Ok(())
}
