//! The write-ahead log. See docs/format/wal.md.
