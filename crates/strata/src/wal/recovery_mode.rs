//! What the log reader does when a log is torn or corrupt.

/// How [`LogReader`](super::LogReader) treats a torn or corrupt log; the
/// names and meanings follow RocksDB's `WALRecoveryMode`.
///
/// A *tail* problem is one after which no fragment that starts a record
/// (Full or First) with a valid checksum follows: what a crash in the middle
/// of a write leaves behind (a truncated header or payload, a bad checksum in
/// the last fragments, or a record whose last fragments never arrived).
///
/// Across logs, at recovery: a log whose predecessor fragment shows that an
/// older log still needed was cut short or is missing (a power loss after
/// a memtable switch, which syncs neither the old log nor the directory)
/// ends the replay in the tolerant and point-in-time modes, is
/// `Corruption` under absolute consistency, and is passed over when
/// skipping corrupted records (`docs/format/wal.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalRecoveryMode {
    /// Drop an incomplete or corrupt record at the tail silently; any other
    /// corruption is an error. The default: what a crash can leave behind is
    /// expected, damage in the middle of the log is not.
    #[default]
    TolerateCorruptedTailRecords,
    /// Any corruption or incomplete record is an error, a torn tail included.
    /// For logs that were closed cleanly.
    AbsoluteConsistency,
    /// Stop at the first corruption or incomplete record and return what was
    /// read before it, without an error: recover to a consistent point in
    /// time.
    PointInTimeRecovery,
    /// Skip every corrupt region, count its bytes in
    /// [`LogReader::dropped_bytes`](super::LogReader::dropped_bytes), and
    /// continue with the next valid record. Salvage, not recovery: records
    /// after a hole are returned.
    SkipAnyCorruptedRecords,
}
