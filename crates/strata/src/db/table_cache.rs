//! Open table readers, keyed by file number, bounded by `max_open_files`.
//! A reader evicted from the cache stays usable by whoever holds it; the
//! file handle closes when the last holder drops it.

use std::path::PathBuf;
use std::sync::Arc;

use crate::cache::{BlockCache, LruCache};
use crate::env::FileSystem;
use crate::error::{Error, Result};
use crate::key::{Comparator, SliceTransform};
use crate::sst::{MetaPlacement, Table, TableOpenOptions};
use crate::version::FileMetaData;

use super::filename::table_file_name;

/// A table reader borrowed from a file's metadata or held from the cache.
pub(crate) enum TableRef<'f> {
    Pinned(&'f Table),
    Owned(Table),
}

impl std::ops::Deref for TableRef<'_> {
    type Target = Table;
    fn deref(&self) -> &Table {
        match self {
            TableRef::Pinned(r) => r,
            TableRef::Owned(r) => r,
        }
    }
}

/// The table cache of one database.
pub(crate) struct TableCache {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    user_cmp: Arc<dyn Comparator>,
    block_cache: Option<Arc<BlockCache>>,
    readers: LruCache<u64, Table>,
    /// No `max_open_files` bound: readers are also kept in their files'
    /// metadata.
    unbounded: bool,
    /// Open tables with direct I/O (`use_direct_reads`).
    direct: bool,
    /// Tables read with direct I/O cache their data blocks as stored
    /// (`cache_compressed_under_direct_reads`).
    cache_stored: bool,
    /// Where readers keep their index and filter: in L0 tables, and in the
    /// others.
    placement_l0: MetaPlacement,
    placement: MetaPlacement,
    /// The database's prefix extractor, for readers to probe filters with.
    prefix_extractor: Option<Arc<SliceTransform>>,
    /// Packed tables check each section's checksum on first use, not at
    /// open.
    packed_lazy_checksums: bool,
    /// The name of the database's merge operator: a table holding merge
    /// operands written under another is refused.
    merge_operator: Option<String>,
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
            unbounded: max_open_files < 0,
            direct: false,
            cache_stored: false,
            placement_l0: MetaPlacement::Reader,
            placement: MetaPlacement::Reader,
            prefix_extractor: None,
            packed_lazy_checksums: false,
            merge_operator: None,
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

    /// Readers opened from now on read with direct I/O, and then cache
    /// their data blocks as stored if `cache_stored` (the reader decides,
    /// in `TableReader::with_stored_blocks_cached`).
    pub(crate) fn with_direct_reads(mut self, direct: bool, cache_stored: bool) -> Self {
        self.direct = direct;
        self.cache_stored = cache_stored;
        self
    }

    /// Readers probe their filters for prefixes of `extractor`.
    pub(crate) fn with_prefix_extractor(mut self, extractor: Option<Arc<SliceTransform>>) -> Self {
        self.prefix_extractor = extractor;
        self
    }

    /// Tables holding merge operands must have been written under `name`.
    pub(crate) fn with_merge_operator(mut self, name: Option<String>) -> Self {
        self.merge_operator = name;
        self
    }

    /// Packed tables opened from now on check each section on first use.
    pub(crate) fn with_packed_lazy_checksums(mut self, lazy: bool) -> Self {
        self.packed_lazy_checksums = lazy;
        self
    }

    /// Readers opened from now on keep their index and filter in the block
    /// cache (`cache_index_and_filter_blocks`), those opened while in L0
    /// also in themselves (`pin_l0`). No effect without a block cache.
    pub(crate) fn with_index_and_filter_placement(mut self, cached: bool, pin_l0: bool) -> Self {
        if cached && self.block_cache.is_some() {
            self.placement = MetaPlacement::Cache;
            self.placement_l0 = if pin_l0 {
                MetaPlacement::CachePinned
            } else {
                MetaPlacement::Cache
            };
        }
        self
    }

    /// The reader for table `number` (in `level`, which decides where a
    /// newly opened reader keeps its index and filter), opening it if
    /// needed.
    /// `file_size` is the size the manifest records: a file of another
    /// size is reported as truncated (or grown), not decoded.
    pub(crate) fn get(&self, number: u64, file_size: u64, level: usize) -> Result<Table> {
        if let Some(r) = self.readers.get(&number) {
            return Ok(r);
        }
        let path = table_file_name(&self.dir, number);
        let file = if self.direct {
            self.fs.open_random_access_direct(&path)?
        } else {
            self.fs.open_random_access(&path)?
        };
        let name = path.display().to_string();
        check_table_size(&name, file.size(), file_size)?;
        let placement = if level == 0 {
            self.placement_l0
        } else {
            self.placement
        };
        let opts = TableOpenOptions {
            comparator: self.user_cmp.clone(),
            block_cache: self.block_cache.clone(),
            placement,
            prefix_extractor: self.prefix_extractor.clone(),
            packed_lazy_checksums: self.packed_lazy_checksums,
            cache_stored_under_direct_reads: self.cache_stored,
        };
        let reader = Table::open(file, name, &opts)?;
        reader
            .properties()
            .check_merge_operator(&path.display().to_string(), self.merge_operator.as_deref())?;
        self.readers.insert(number, reader.clone(), 1);
        Ok(reader)
    }

    /// The reader of `file`: the one kept in its metadata if there is one,
    /// otherwise from the cache (and then kept in the metadata if the cache
    /// has no bound).
    pub(crate) fn get_for<'f>(&self, file: &'f FileMetaData, level: usize) -> Result<TableRef<'f>> {
        if let Some(r) = file.reader.get() {
            return Ok(TableRef::Pinned(r));
        }
        let r = self.get(file.number, file.file_size, level)?;
        if self.unbounded {
            // A racing reader may have set it first: both hold the same
            // cached reader.
            let _ = file.reader.set(r.clone());
        }
        Ok(TableRef::Owned(r))
    }

    /// The reader of `file` if one is open; opens none.
    pub(crate) fn open_reader(&self, file: &FileMetaData) -> Option<Table> {
        file.reader
            .get()
            .cloned()
            .or_else(|| self.readers.get(&file.number))
    }

    /// The block cache readers read through, if any.
    pub(crate) fn block_cache(&self) -> Option<&Arc<BlockCache>> {
        self.block_cache.as_ref()
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

/// A table file of another size than the manifest records is damaged (cut
/// by a copy or a full disk, or overwritten): say so with both sizes, as
/// RocksDB does, rather than decode a footer from the wrong place.
pub(crate) fn check_table_size(name: &str, size: u64, recorded: u64) -> Result<()> {
    if size == recorded {
        return Ok(());
    }
    let how = if size < recorded {
        "truncated to"
    } else {
        "grown to"
    };
    Err(Error::corruption(
        name,
        size.min(recorded),
        format!("table file {how} {size} of the {recorded} bytes the manifest records"),
    ))
}
