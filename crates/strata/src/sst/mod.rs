//! Block-based table files (SSTs). See docs/format/table.md.

pub mod block;
pub mod filter;
