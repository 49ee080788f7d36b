//! The user's say in where table files end: an SST partitioner, as
//! RocksDB's `SstPartitioner` (fixed-prefix cut points), applied here to
//! flushes as well as to compactions.

use std::fmt;
use std::sync::Arc;

/// Decides where the outputs of a flush or compaction are cut, for users
/// who know how their key space divides (one stream, tenant or shard per
/// prefix). A file never spans a point where `should_partition` said yes,
/// so the files of different partitions never overlap and each can later
/// move down a level without being rewritten.
pub trait SstPartitioner: Send + Sync {
    /// A name for logs and the options dump.
    fn name(&self) -> &str;

    /// True to end the current output file before `current_user_key`.
    /// `prev_user_key` is the last key written to it and
    /// `current_output_size` its estimated size in bytes.
    fn should_partition(
        &self,
        prev_user_key: &[u8],
        current_user_key: &[u8],
        current_output_size: u64,
    ) -> bool;

    /// True if a file holding user keys `smallest..=largest` may go to the
    /// next level by a trivial move; false makes compaction rewrite it,
    /// cut where [`should_partition`](Self::should_partition) says.
    fn can_do_trivial_move(&self, smallest: &[u8], largest: &[u8]) -> bool;
}

/// The partitioner of a database, given to
/// [`Options::set_sst_partitioner_factory`](crate::Options::set_sst_partitioner_factory).
#[derive(Clone)]
pub struct SstPartitionerFactory {
    inner: Arc<dyn SstPartitioner>,
}

impl fmt::Debug for SstPartitionerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SstPartitionerFactory({})", self.inner.name())
    }
}

impl SstPartitionerFactory {
    /// Cuts wherever the first `len` bytes of consecutive keys differ, as
    /// RocksDB's `NewSstPartitionerFixedPrefixFactory(len)` (a key shorter
    /// than `len` is its own prefix).
    pub fn fixed_prefix(len: usize) -> SstPartitionerFactory {
        SstPartitionerFactory::new(FixedPrefix {
            len,
            name: format!("strata.FixedPrefix.{len}"),
        })
    }

    /// A partitioner of the user's own.
    pub fn new<P: SstPartitioner + 'static>(partitioner: P) -> SstPartitionerFactory {
        SstPartitionerFactory {
            inner: Arc::new(partitioner),
        }
    }

    pub(crate) fn partitioner(&self) -> &dyn SstPartitioner {
        &*self.inner
    }
}

struct FixedPrefix {
    len: usize,
    name: String,
}

impl FixedPrefix {
    fn prefix<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        &key[..key.len().min(self.len)]
    }
}

impl SstPartitioner for FixedPrefix {
    fn name(&self) -> &str {
        &self.name
    }

    fn should_partition(&self, prev: &[u8], current: &[u8], _size: u64) -> bool {
        self.prefix(prev) != self.prefix(current)
    }

    fn can_do_trivial_move(&self, smallest: &[u8], largest: &[u8]) -> bool {
        !self.should_partition(smallest, largest, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_prefix_cuts_where_prefixes_differ() {
        let f = SstPartitionerFactory::fixed_prefix(2);
        let p = f.partitioner();
        assert!(!p.should_partition(b"aa1", b"aa2", 0));
        assert!(p.should_partition(b"aa9", b"ab0", 0));
        // A short key is its own prefix.
        assert!(p.should_partition(b"a", b"aa", 0));
        assert!(p.can_do_trivial_move(b"aa0", b"aaz"));
        assert!(!p.can_do_trivial_move(b"aa0", b"ab0"));
        assert_eq!(
            format!("{f:?}"),
            "SstPartitionerFactory(strata.FixedPrefix.2)"
        );
    }
}
