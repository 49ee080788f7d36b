//! Block compression. See docs/format/table.md.
