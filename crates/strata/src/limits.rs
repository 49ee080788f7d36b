//! Hard limits. Everything has one, so memory is bounded by configuration and
//! no decoder trusts a length it read from disk beyond these.

/// Largest user key, in bytes.
pub const KEY_SIZE_BYTES_MAX: usize = 1 << 20;

/// Largest value, in bytes.
pub const VALUE_SIZE_BYTES_MAX: usize = 64 << 20;

/// Largest block (data, index, filter, properties), in bytes, compressed or not.
/// A data block holds at least one entry, so this exceeds key + value maxima.
pub const BLOCK_SIZE_BYTES_MAX: usize = 128 << 20;

/// Largest log record, in bytes (one write batch).
pub const LOG_RECORD_SIZE_BYTES_MAX: usize = 256 << 20;

/// Smallest memtable size a database runs with; smaller settings are
/// clipped up at open, as RocksDB's option sanitizing does. An empty
/// memtable already accounts for its first arena block.
pub const WRITE_BUFFER_SIZE_BYTES_MIN: usize = 64 << 10;

/// Largest memtable size a database runs with (RocksDB's 64 GiB, or the
/// address space on a 32-bit target); larger settings are clipped down.
pub const WRITE_BUFFER_SIZE_BYTES_MAX: usize = if usize::BITS >= 64 {
    (64u64 << 30) as usize
} else {
    usize::MAX
};

/// Most key ranges one compaction splits into
/// (`Options::set_max_subcompactions`): each is a thread, and more would
/// ask the system for threads it may not give. More is `InvalidArgument`.
pub const SUBCOMPACTIONS_MAX: u32 = 64;

/// Longest column family name, in bytes: a longer one is
/// `InvalidArgument` (the name is written in every manifest).
pub const COLUMN_FAMILY_NAME_BYTES_MAX: usize = 4096;
