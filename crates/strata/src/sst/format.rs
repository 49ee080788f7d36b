//! Block handles, the per-block trailer and the table footer. Layouts are
//! in `docs/format/table.md`:
//!
//! ```text
//! block on disk := contents | compression type (u8) | masked crc32c (u32 LE)
//!                  crc covers contents and the type byte
//! handle        := varint64 offset | varint64 size   (size excludes the trailer)
//! footer (56 B) := metaindex handle | index handle | zero padding to 40 bytes
//!                  | format_version (u32 LE) | masked crc32c of bytes 0..44 (u32 LE)
//!                  | magic (u64 LE)
//! ```

use std::cell::Cell;
use std::sync::Arc;

use bytes::Bytes;

use crate::cache::data_block_capacity;
use crate::compression::CompressionType;
use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::limits::BLOCK_SIZE_BYTES_MAX;
use crate::util::coding::{
    decode_fixed32, decode_fixed64, put_fixed32, put_fixed64, put_varint64, Decoder,
};
use crate::util::crc::{crc32c, crc32c_extend, mask, unmask};

/// Bytes after every block: compression type and checksum.
pub const BLOCK_TRAILER_BYTES: usize = 5;
/// Longest encoding of a [`BlockHandle`] (two varint64s).
#[cfg(test)]
pub const BLOCK_HANDLE_BYTES_MAX: usize = 20;
/// Size of the footer at the end of every table file.
pub const FOOTER_BYTES: usize = 56;
/// Bytes of the footer given to the two handles (zero padded).
const FOOTER_HANDLES_BYTES: usize = 40;
/// The last eight bytes of every Strata table ("STRATAT1" read as u64 LE).
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"STRATAT1");
/// The newest format version this code writes; readers accept 1..=this.
/// Version 2 tables may have index separators that are user keys (the
/// `index_key_is_user_key` property); a table whose separators are
/// internal keys is written as version 1, which older readers read.
pub const FORMAT_VERSION: u32 = 2;

/// The format version of a table whose index separators are internal keys.
pub const FORMAT_VERSION_INTERNAL_KEY_INDEX: u32 = 1;

/// Where a block lives in a file: its offset and its size without trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Bytes of the (possibly compressed) contents, trailer excluded.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the varint encoding.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Decodes a handle from the front of `dec`.
    pub fn decode_from(dec: &mut Decoder<'_>) -> Option<BlockHandle> {
        let offset = dec.varint64()?;
        let size = dec.varint64()?;
        Some(BlockHandle { offset, size })
    }

    /// Offset just past the block's trailer.
    pub fn end_with_trailer(&self) -> u64 {
        self.offset
            .saturating_add(self.size)
            .saturating_add(BLOCK_TRAILER_BYTES as u64)
    }
}

/// The fixed-size record at the end of a table file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The metaindex block (names → handles of meta blocks).
    pub metaindex: BlockHandle,
    /// The index block (separator → data block handle).
    pub index: BlockHandle,
    /// Format version of the table.
    pub format_version: u32,
}

impl Footer {
    /// The 56-byte encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_BYTES);
        self.metaindex.encode_to(&mut out);
        self.index.encode_to(&mut out);
        debug_assert!(out.len() <= FOOTER_HANDLES_BYTES);
        out.resize(FOOTER_HANDLES_BYTES, 0);
        put_fixed32(&mut out, self.format_version);
        let crc = mask(crc32c(&out));
        put_fixed32(&mut out, crc);
        put_fixed64(&mut out, TABLE_MAGIC);
        debug_assert_eq!(out.len(), FOOTER_BYTES);
        out
    }

    /// Decodes and checks the footer stored at `offset` of `file`.
    pub fn decode(bytes: &[u8], file: &str, offset: u64) -> Result<Footer> {
        let corrupt = |what: String| Error::corruption(file, offset, what);
        if bytes.len() != FOOTER_BYTES {
            return Err(corrupt(format!(
                "footer is {} bytes, expected {FOOTER_BYTES}",
                bytes.len()
            )));
        }
        let magic = decode_fixed64(&bytes[48..]).unwrap_or(0);
        if magic != TABLE_MAGIC {
            return Err(corrupt(format!(
                "bad table magic number {magic:#018x}, expected {TABLE_MAGIC:#018x}: not a Strata table, or one cut short"
            )));
        }
        let stored = unmask(decode_fixed32(&bytes[44..]).unwrap_or(0));
        let actual = crc32c(&bytes[..44]);
        if stored != actual {
            return Err(corrupt(format!(
                "footer checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            )));
        }
        let format_version = decode_fixed32(&bytes[40..]).unwrap_or(0);
        if format_version == 0 || format_version > FORMAT_VERSION {
            return Err(corrupt(format!(
                "format version {format_version}, this build reads 1..={FORMAT_VERSION}"
            )));
        }
        let mut dec = Decoder::new(&bytes[..FOOTER_HANDLES_BYTES]);
        let metaindex = BlockHandle::decode_from(&mut dec);
        let index = BlockHandle::decode_from(&mut dec);
        let (Some(metaindex), Some(index)) = (metaindex, index) else {
            return Err(corrupt("footer block handles do not decode".into()));
        };
        if dec.remaining().iter().any(|&b| b != 0) {
            return Err(corrupt("footer padding is not zero".into()));
        }
        Ok(Footer {
            metaindex,
            index,
            format_version,
        })
    }
}

/// Appends `contents` and its trailer to `out`; `kind` is the compression
/// already applied to `contents`.
pub fn put_block_trailer(out: &mut Vec<u8>, contents: &[u8], kind: CompressionType) {
    out.push(kind as u8);
    let crc = crc32c_extend(crc32c(contents), &[kind as u8]);
    put_fixed32(out, mask(crc));
}

/// Checks that a block at `handle` of a `file_size`-byte file can be read:
/// under [`BLOCK_SIZE_BYTES_MAX`] and inside the file with its trailer.
pub(crate) fn check_block_handle(
    name: &Arc<str>,
    handle: BlockHandle,
    file_size: u64,
) -> Result<()> {
    let corrupt = |what: String| Error::corruption(&**name, handle.offset, what);
    if handle.size > BLOCK_SIZE_BYTES_MAX as u64 {
        return Err(corrupt(format!(
            "block size {} over the {BLOCK_SIZE_BYTES_MAX}-byte limit",
            handle.size
        )));
    }
    if handle.end_with_trailer() > file_size {
        return Err(corrupt(format!(
            "block of {} bytes plus trailer runs past the end of the {file_size}-byte file",
            handle.size
        )));
    }
    Ok(())
}

/// Reads the block at `handle`, checks its checksum and decompresses it
/// into a buffer of its exact size (an index, filter or other block read
/// once per table; data blocks go through [`read_data_block`]). A large
/// block stored uncompressed, as index and filter blocks are, is kept in
/// the buffer it was read into: one allocation, no copy.
pub fn read_block(
    file: &dyn RandomAccessFile,
    name: &Arc<str>,
    handle: BlockHandle,
) -> Result<Bytes> {
    let n = handle.size as usize;
    if n > SCRATCH_KEEP_BYTES {
        let mut buf = read_whole_block(file, name, handle)?;
        let kind = check_trailer(&buf, name, handle)?;
        if kind == CompressionType::None {
            buf.truncate(n);
            return Ok(Bytes::from(buf));
        }
        return decompress(kind, contents(&buf), name, handle.offset, false);
    }
    with_block_read(file, name, handle, |raw| {
        let kind = check_trailer(raw, name, handle)?;
        decompress(kind, contents(raw), name, handle.offset, false)
    })
}

/// A data block as read: checked and decompressed, and, if the reader asked
/// to keep it and the block is stored compressed, the bytes as stored (for
/// a block cache that holds blocks compressed: [`decode_stored`]).
pub(crate) struct FetchedBlock {
    pub(crate) data: Bytes,
    /// The block's contents as stored and its compression type byte (the
    /// checksum, already checked, left off).
    pub(crate) stored: Option<Bytes>,
}

/// Reads the data block at `handle`: [`decode_data_block`] of its bytes.
pub(crate) fn read_data_block(
    file: &dyn RandomAccessFile,
    name: &Arc<str>,
    handle: BlockHandle,
    keep: bool,
) -> Result<FetchedBlock> {
    with_block_read(file, name, handle, |raw| {
        decode_data_block(raw, name, handle, keep)
    })
}

/// Reads the block at `handle` with its trailer and gives the bytes to
/// `decode`.
fn with_block_read<T>(
    file: &dyn RandomAccessFile,
    name: &Arc<str>,
    handle: BlockHandle,
    decode: impl FnOnce(&[u8]) -> Result<T>,
) -> Result<T> {
    let n = handle.size as usize;
    if n > SCRATCH_KEEP_BYTES {
        return decode(&read_whole_block(file, name, handle)?);
    }
    check_block_handle(name, handle, file.size())?;
    // Compressed blocks are read into a per-thread buffer that is reused,
    // so a cache miss costs one allocation (the decompressed block), not
    // two allocations, a zero fill and a free.
    READ_SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        if scratch.len() < n + BLOCK_TRAILER_BYTES {
            scratch.resize(n + BLOCK_TRAILER_BYTES, 0);
        }
        let buf = &mut scratch[..n + BLOCK_TRAILER_BYTES];
        file.read_exact_at(handle.offset, buf)?;
        decode(buf)
    })
}

/// The block at `handle` with its trailer, read into a buffer of its own
/// (a block too large for the per-thread buffer), after checking that
/// the handle is in bounds.
fn read_whole_block(
    file: &dyn RandomAccessFile,
    name: &Arc<str>,
    handle: BlockHandle,
) -> Result<Vec<u8>> {
    check_block_handle(name, handle, file.size())?;
    let mut buf = vec![0; handle.size as usize + BLOCK_TRAILER_BYTES];
    file.read_exact_at(handle.offset, &mut buf)?;
    Ok(buf)
}

/// Checks and decompresses a data block read whole with its trailer
/// (`raw` is `handle.size` bytes and the trailer; callers that read several
/// blocks at once hand each over), into a buffer of its size class
/// ([`data_block_capacity`]). Keeps a copy of the stored bytes too if
/// `keep` and the block is stored compressed.
pub(crate) fn decode_data_block(
    raw: &[u8],
    name: &Arc<str>,
    handle: BlockHandle,
    keep: bool,
) -> Result<FetchedBlock> {
    let kind = check_trailer(raw, name, handle)?;
    let data = decompress(kind, contents(raw), name, handle.offset, true)?;
    // Kept only once it decompressed: a copy cached from here always does.
    let stored = (keep && kind != CompressionType::None).then(|| stored_copy(raw));
    Ok(FetchedBlock { data, stored })
}

/// A data block read ahead of its use, checked, as a cache that holds
/// blocks as stored takes it ([`check_stored`]).
pub(crate) enum Checked {
    /// Stored compressed: its contents as stored and its type byte, not
    /// decompressed; the use decompresses the cached copy, once
    /// ([`decode_stored`]).
    Stored(Bytes),
    /// Stored uncompressed: the block itself, cached as any other.
    Plain(FetchedBlock),
}

/// Checks a data block read whole with its trailer (its checksum and
/// type, once) and keeps it as [`Checked`] says, without decompressing
/// it: for blocks read ahead of their use.
pub(crate) fn check_stored(raw: &[u8], name: &Arc<str>, handle: BlockHandle) -> Result<Checked> {
    Ok(match check_trailer(raw, name, handle)? {
        CompressionType::None => Checked::Plain(FetchedBlock {
            data: decompress(
                CompressionType::None,
                contents(raw),
                name,
                handle.offset,
                true,
            )?,
            stored: None,
        }),
        _ => Checked::Stored(stored_copy(raw)),
    })
}

/// The block's contents: `raw` without its trailer.
fn contents(raw: &[u8]) -> &[u8] {
    &raw[..raw.len() - BLOCK_TRAILER_BYTES]
}

/// A copy of the contents and the type byte of `raw` (a block and its
/// trailer), in a buffer of its size class, as decompressed blocks are.
fn stored_copy(raw: &[u8]) -> Bytes {
    let stored = &raw[..raw.len() - BLOCK_TRAILER_BYTES + 1];
    let mut copy = Vec::with_capacity(data_block_capacity(stored.len()));
    copy.extend_from_slice(stored);
    Bytes::from_owner(copy)
}

/// Checks the trailer of `raw` (a block of `handle.size` bytes and its
/// trailer): the checksum, when this thread's reads check them, and the
/// compression type, which it returns.
fn check_trailer(raw: &[u8], name: &Arc<str>, handle: BlockHandle) -> Result<CompressionType> {
    let n = handle.size as usize;
    debug_assert_eq!(raw.len(), n + BLOCK_TRAILER_BYTES);
    if VERIFY_CHECKSUMS.with(Cell::get) {
        let stored = unmask(decode_fixed32(&raw[n + 1..]).unwrap_or(0));
        let actual = crc32c(&raw[..n + 1]);
        if stored != actual {
            return Err(Error::corruption(
                &**name,
                handle.offset,
                format!(
                    "block checksum mismatch: stored {stored:#010x}, computed {actual:#010x} over {n} bytes"
                ),
            ));
        }
    }
    compression_kind(raw[n], name, handle.offset)
}

/// The compression type named by `byte`, or `Corruption` of the block at
/// `offset` of `name`.
fn compression_kind(byte: u8, name: &str, offset: u64) -> Result<CompressionType> {
    CompressionType::from_byte(byte)
        .ok_or_else(|| Error::corruption(name, offset, format!("unknown compression type {byte}")))
}

/// The block kept as stored ([`FetchedBlock::stored`], [`check_stored`]:
/// its contents as stored, then the compression type byte), decompressed
/// into a buffer of its size class. Its checksum was checked when it was
/// read (unless the read turned checksums off, as for a block cached
/// decompressed); an error here is `Corruption` of the block all the same.
pub(crate) fn decode_stored(stored: &[u8], name: &Arc<str>, offset: u64) -> Result<Bytes> {
    let Some((&kind_byte, contents)) = stored.split_last() else {
        return Err(Error::corruption(&**name, offset, "empty stored block"));
    };
    let kind = compression_kind(kind_byte, name, offset)?;
    decompress(kind, contents, name, offset, true)
}

/// `contents` of compression `kind` decompressed into a buffer of its own,
/// freed with the block's last reference: of the data-block size class
/// ([`data_block_capacity`]) if `data_block`, else of the exact size.
fn decompress(
    kind: CompressionType,
    contents: &[u8],
    name: &str,
    offset: u64,
    data_block: bool,
) -> Result<Bytes> {
    // A per-thread pool of recycled buffers once saved a tenth of a read
    // that missed the cache; by stop 57 it saved 2.6% and left the heap of
    // a long mixed run 6% larger (docs/benchmarks.md, "The recycled block
    // buffers removed"), so it is gone.
    let hint = crate::compression::uncompressed_len_hint(kind, contents);
    let capacity = if data_block {
        data_block_capacity(hint)
    } else {
        hint
    };
    let mut out = Vec::with_capacity(capacity);
    crate::compression::decompress_block_into(kind, contents, name, offset, &mut out)?;
    Ok(Bytes::from_owner(out))
}

thread_local! {
    /// Whether block reads on this thread check checksums: true but
    /// inside a read whose `ReadOptions::set_verify_checksums(false)` set
    /// it ([`ChecksumMode`]). Table opens and background work always check.
    static VERIFY_CHECKSUMS: Cell<bool> = const { Cell::new(true) };
}

/// Sets whether this thread's block reads check checksums until it drops
/// (then the previous setting is back).
pub(crate) struct ChecksumMode {
    prev: bool,
}

impl ChecksumMode {
    pub(crate) fn set(verify: bool) -> ChecksumMode {
        ChecksumMode {
            prev: VERIFY_CHECKSUMS.with(|c| c.replace(verify)),
        }
    }

    /// The setting for one user read (a get, a MultiGet, an iterator
    /// step): a scope only if the thread's setting differs, so the usual
    /// checked read costs one thread-local load, not a swap and a restore.
    pub(crate) fn for_read(verify: bool) -> Option<ChecksumMode> {
        (VERIFY_CHECKSUMS.with(Cell::get) != verify).then(|| ChecksumMode::set(verify))
    }
}

impl Drop for ChecksumMode {
    fn drop(&mut self) {
        VERIFY_CHECKSUMS.with(|c| c.set(self.prev));
    }
}

/// Blocks up to this size are read through the per-thread buffer; larger
/// ones (rare: a block holding one huge value) get their own.
const SCRATCH_KEEP_BYTES: usize = 256 << 10;

thread_local! {
    static READ_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn footer_round_trip() {
        let f = Footer {
            metaindex: BlockHandle {
                offset: 1 << 40,
                size: 300,
            },
            index: BlockHandle {
                offset: u64::MAX,
                size: u64::MAX,
            },
            format_version: FORMAT_VERSION,
        };
        let bytes = f.encode();
        assert_eq!(Footer::decode(&bytes, "t", 0).unwrap(), f);
    }

    #[test]
    fn footer_rejects_bad_magic_version_and_crc() {
        let f = Footer {
            metaindex: BlockHandle::default(),
            index: BlockHandle::default(),
            format_version: 1,
        };
        let good = f.encode();
        for at in 0..FOOTER_BYTES {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            let err = Footer::decode(&bad, "t.sst", 99).unwrap_err();
            assert!(
                err.is_corruption() && err.to_string().contains("t.sst at offset 99"),
                "{err}"
            );
        }
        let err = Footer::decode(&good[1..], "t", 0).unwrap_err();
        assert!(err.to_string().contains("expected 56"), "{err}");
    }

    proptest! {
        #[test]
        fn footer_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Footer::decode(&bytes, "fuzz", 0);
        }

        #[test]
        fn handle_round_trip(offset in any::<u64>(), size in any::<u64>()) {
            let h = BlockHandle { offset, size };
            let mut buf = Vec::new();
            h.encode_to(&mut buf);
            prop_assert!(buf.len() <= BLOCK_HANDLE_BYTES_MAX);
            let mut dec = Decoder::new(&buf);
            prop_assert_eq!(BlockHandle::decode_from(&mut dec), Some(h));
            prop_assert!(dec.is_empty());
        }
    }
}
