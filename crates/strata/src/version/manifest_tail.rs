//! Tells a torn manifest tail from damage.
//!
//! In `TolerateCorruptedTailRecords` mode the log reader drops whatever
//! follows the last record when no valid record start comes after it. But
//! after a checksum mismatch it cannot see past the rest of the 32 KiB
//! block, so a flipped bit in the manifest's last block would pass for a
//! torn write: recovery would silently roll the database back to the edits
//! before it, and then write that older state as the new snapshot.
//!
//! Each manifest record is synced before the next is written, so a crash
//! can only leave a *truncated* prefix of the last record (or zeros where
//! space was allocated but never written). As LevelDB and RocksDB do for
//! the manifest, a dropped tail is therefore accepted only if every
//! fragment in it that lies wholly inside the file has a valid checksum.
//! The fragment layout is `docs/format/wal.md`.

use std::path::Path;

use crate::env::{FileSystem, WritableFile};
use crate::error::{Error, Result};
use crate::util::crc::{crc32c, crc32c_extend, unmask};
use crate::wal::{LogWriter, BLOCK_SIZE, HEADER_SIZE};

/// File offset just past `record`, which a log writer started at
/// `record_offset` (the reader's `last_record_offset`): where the bytes
/// after the last valid record begin.
pub(super) fn record_end(record_offset: u64, record: &[u8]) -> Result<u64> {
    let sink = ByteCounter {
        size_bytes: record_offset,
    };
    let mut writer = LogWriter::new_at_offset(Box::new(sink), record_offset);
    writer.add_record(record)?;
    Ok(writer.file_size())
}

/// Checks the bytes of manifest `path` from `tail_offset` (the end of the
/// last valid record) to the end of the file: `Ok` if they are a truncated
/// record or zero fill, `Corruption` naming the offset of a complete
/// fragment with a bad checksum or an impossible length.
pub(super) fn check_torn_tail(
    fs: &dyn FileSystem,
    path: &Path,
    name: &str,
    tail_offset: u64,
) -> Result<()> {
    let file = fs.open_random_access(path)?;
    let size = file.size();
    let (block, header) = (BLOCK_SIZE as u64, HEADER_SIZE as u64);
    let mut payload = vec![0u8; BLOCK_SIZE];
    let mut pos = tail_offset;
    // Each pass advances `pos` by at least one byte or returns, so there
    // are at most `size` passes.
    while pos < size {
        let room = block - pos % block;
        if room < header {
            pos += room; // block trailer
            continue;
        }
        if size - pos < header {
            return Ok(()); // truncated header
        }
        let mut h = [0u8; HEADER_SIZE];
        file.read_exact_at(pos, &mut h)?;
        let masked_crc = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let len = u16::from_le_bytes([h[4], h[5]]);
        let type_byte = h[6];
        if type_byte == 0 && len == 0 {
            return Ok(()); // zero fill: never written
        }
        if u64::from(len) > room - header {
            let what = format!(
                "fragment length {len} exceeds its block after the last valid record: damage, not a torn write"
            );
            return Err(Error::corruption(name, pos, what));
        }
        if pos + header + u64::from(len) > size {
            return Ok(()); // truncated payload
        }
        let body = &mut payload[..usize::from(len)];
        file.read_exact_at(pos + header, body)?;
        if crc32c_extend(crc32c(&[type_byte]), body) != unmask(masked_crc) {
            let what = "checksum mismatch in a complete fragment after the last valid record: damage, not a torn write";
            return Err(Error::corruption(name, pos, what));
        }
        pos += header + u64::from(len);
    }
    Ok(())
}

/// A writable file that keeps only its size: measures what a log writer
/// would write.
#[derive(Debug)]
struct ByteCounter {
    size_bytes: u64,
}

impl WritableFile for ByteCounter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.size_bytes += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.size_bytes
    }
}
