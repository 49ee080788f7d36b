//! Blocks: prefix-compressed sorted entries with a restart array. See docs/format/block.md.
