//! The table's bloom filter. See docs/format/filter.md.
