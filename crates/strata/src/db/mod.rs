//! The database: open, write, read, recover.

pub mod db_iter;
pub mod filename;
#[allow(dead_code)] // used by the write path, which lands next
pub mod write_batch;
