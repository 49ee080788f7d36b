//! An in-memory `BTreeMap` engine: the reference answers of the
//! differential test. Its iterator reads a copy of the map taken when it is
//! created, as an engine's iterator reads a snapshot.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::merge_ops::MergeOperatorKind;
use super::{Batch, BatchEntry, Engine, EngineIterator, WriteMode};
use crate::error::{Error, Result};

/// A `BTreeMap` behind a mutex.
#[derive(Debug, Default)]
pub struct ModelEngine {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    merge_operator: Option<MergeOperatorKind>,
}

impl ModelEngine {
    /// An empty model.
    pub fn new() -> ModelEngine {
        ModelEngine::default()
    }

    /// An empty model whose merges apply `kind` at once.
    pub fn with_merge_operator(kind: MergeOperatorKind) -> ModelEngine {
        ModelEngine {
            merge_operator: Some(kind),
            ..ModelEngine::default()
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
        // A panic while holding the lock leaves a consistent map.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Engine for ModelEngine {
    fn name(&self) -> &'static str {
        "model"
    }

    /// Puts the entries into the map (a model has no table files).
    fn write_and_ingest(
        &self,
        _dir: &std::path::Path,
        _file_bytes: u64,
        next: &mut dyn FnMut(&mut Vec<u8>, &mut Vec<u8>) -> bool,
    ) -> Result<(std::time::Duration, std::time::Duration)> {
        let start = std::time::Instant::now();
        let (mut k, mut v) = (Vec::new(), Vec::new());
        let mut m = self.map();
        while next(&mut k, &mut v) {
            m.insert(k.clone(), v.clone());
        }
        Ok((start.elapsed(), std::time::Duration::ZERO))
    }

    fn checkpoint(&self, _dir: &std::path::Path) -> Result<()> {
        Err(Error::Usage("the model engine makes no checkpoints".into()))
    }

    fn write(&self, batch: &Batch, _mode: WriteMode) -> Result<()> {
        let mut m = self.map();
        for e in batch.iter() {
            match e {
                BatchEntry::Put(k, v) => {
                    m.insert(k.to_vec(), v.to_vec());
                }
                BatchEntry::Delete(k) => {
                    m.remove(k);
                }
                BatchEntry::DeleteRange(from, to) => {
                    let doomed: Vec<Vec<u8>> = m
                        .range::<[u8], _>((
                            std::ops::Bound::Included(from),
                            std::ops::Bound::Excluded(to),
                        ))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in doomed {
                        m.remove(&k);
                    }
                }
            }
        }
        Ok(())
    }

    fn merge(&self, key: &[u8], value: &[u8], _mode: WriteMode) -> Result<()> {
        let kind = self
            .merge_operator
            .ok_or_else(|| Error::Usage("the model has no merge operator".into()))?;
        let mut m = self.map();
        let merged = kind.merge(m.get(key).map(Vec::as_slice), std::iter::once(value));
        m.insert(key.to_vec(), merged);
        Ok(())
    }

    fn get(&self, key: &[u8], found: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.map().get(key).map(|v| found(v)).is_some())
    }

    fn multi_get(
        &self,
        keys: &[Vec<u8>],
        _batched: bool,
        found: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<usize> {
        let m = self.map();
        let mut n = 0;
        for (i, k) in keys.iter().enumerate() {
            if let Some(v) = m.get(k.as_slice()) {
                found(i, v);
                n += 1;
            }
        }
        Ok(n)
    }

    fn iterator(&self) -> Result<Box<dyn EngineIterator + '_>> {
        let entries = self
            .map()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Box::new(ModelIterator { entries, pos: None }))
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn compact_all(&self) -> Result<()> {
        Ok(())
    }

    fn wait_for_compaction(&self) -> Result<()> {
        Ok(())
    }

    fn property(&self, _name: &str) -> Result<Option<String>> {
        Ok(None)
    }
}

struct ModelIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
}

impl EngineIterator for ModelIterator {
    fn seek_to_first(&mut self) {
        self.pos = (!self.entries.is_empty()).then_some(0);
    }
    fn seek_to_last(&mut self) {
        self.pos = self.entries.len().checked_sub(1);
    }
    fn seek(&mut self, key: &[u8]) {
        let i = self.entries.partition_point(|(k, _)| k.as_slice() < key);
        self.pos = (i < self.entries.len()).then_some(i);
    }
    fn next(&mut self) {
        self.pos = self.pos.map(|p| p + 1).filter(|&p| p < self.entries.len());
    }
    fn prev(&mut self) {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
    }
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn key(&self) -> &[u8] {
        self.pos.map_or(&[][..], |p| &self.entries[p].0)
    }
    fn value(&self) -> &[u8] {
        self.pos.map_or(&[][..], |p| &self.entries[p].1)
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}
