//! Open table readers, keyed by file number, bounded by `max_open_files`.
//! A reader evicted from the cache stays usable by whoever holds it; the
//! file handle closes when the last holder drops it.

use std::path::PathBuf;
use std::sync::Arc;

use crate::cache::{BlockCache, LruCache};
use crate::env::FileSystem;
use crate::error::Result;
use crate::key::Comparator;
use crate::sst::TableReader;

use super::filename::table_file_name;

/// The table cache of one database.
pub(crate) struct TableCache {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    user_cmp: Arc<dyn Comparator>,
    block_cache: Option<Arc<BlockCache>>,
    readers: LruCache<u64, Arc<TableReader>>,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("dir", &self.dir)
            .field("open", &self.readers.len())
            .finish()
    }
}

impl TableCache {
    /// `max_open_files` < 0 means no limit.
    pub(crate) fn new(
        dir: PathBuf,
        fs: Arc<dyn FileSystem>,
        user_cmp: Arc<dyn Comparator>,
        block_cache: Option<Arc<BlockCache>>,
        max_open_files: i32,
    ) -> TableCache {
        let capacity = if max_open_files < 0 {
            usize::MAX / 2
        } else {
            max_open_files as usize
        };
        // Each reader is charged 1, so the capacity counts open files.
        // Sixteen shards keep concurrent lookups apart; with a limit the
        // bound holds per shard (capacity / 16 each).
        TableCache {
            dir,
            fs,
            user_cmp,
            block_cache,
            readers: LruCache::new(
                capacity,
                Some(if (0..160).contains(&max_open_files) {
                    0
                } else {
                    4
                }),
            ),
        }
    }

    /// The reader for table `number`, opening it if needed.
    pub(crate) fn get(&self, number: u64) -> Result<Arc<TableReader>> {
        if let Some(r) = self.readers.get(&number) {
            return Ok(r);
        }
        let path = table_file_name(&self.dir, number);
        let file = self.fs.open_random_access(&path)?;
        let name = path.display().to_string();
        let reader = Arc::new(TableReader::open_with_cache(
            file,
            name,
            self.user_cmp.clone(),
            self.block_cache.clone(),
        )?);
        self.readers.insert(number, reader.clone(), 1);
        Ok(reader)
    }

    /// Forgets table `number` (after its file is deleted).
    pub(crate) fn evict(&self, number: u64) {
        self.readers.erase(&number);
    }

    /// Readers currently open.
    pub(crate) fn len(&self) -> usize {
        self.readers.len()
    }
}
