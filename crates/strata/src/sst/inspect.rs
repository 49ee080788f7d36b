//! Looking inside a table file of either format, for tools: the blocks or
//! sections it is made of, and a full check of every checksum and entry.

use std::sync::Arc;

use crate::compression::CompressionType;
use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{BytewiseComparator, Comparator};
use crate::util::coding::Decoder;

use super::block::Block;
use super::format::{read_block, BlockHandle};
use super::packed::PackedTableReader;
use super::{
    MetaPlacement, Table, TableOpenOptions, TableProperties, TableReader, FILTER_BLOCK_NAME,
    PROPERTIES_BLOCK_NAME, RANGE_DEL_BLOCK_NAME,
};

/// One block (block-based tables) or section (packed tables) of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePart {
    /// `data`, `filter`, `range_del`, `index`, `properties`, `metaindex`,
    /// `footer`; or
    /// a packed section's name.
    pub kind: String,
    /// Offset of its first byte.
    pub offset: u64,
    /// Bytes, without the block trailer.
    pub size: u64,
    /// How it is stored: a compression name for blocks, `none` otherwise.
    pub compression: String,
    /// Whether its checksum holds.
    pub checksum_ok: bool,
    /// Data blocks: whether the block carries a hash index.
    pub hash_index: Option<bool>,
}

/// What a table file is made of.
#[derive(Debug, Clone)]
pub struct TableLayout {
    /// `block-based` or `packed`.
    pub format: &'static str,
    /// Its blocks or sections in file order.
    pub parts: Vec<TablePart>,
    /// Its properties.
    pub properties: TableProperties,
}

/// The table in `file`, opened as the database opens it (the format its
/// magic number says), without a block cache; packed tables check every
/// section at open unless `lazy`.
fn open(
    file: Arc<dyn RandomAccessFile>,
    name: &str,
    comparator: Arc<dyn Comparator>,
    lazy: bool,
) -> Result<Table> {
    let opts = TableOpenOptions {
        comparator,
        block_cache: None,
        placement: MetaPlacement::Reader,
        prefix_extractor: None,
        packed_lazy_checksums: lazy,
        cache_stored_under_direct_reads: false,
    };
    Table::open(file, name.to_string(), &opts)
}

/// Lists the blocks or sections of the table in `file` (named `name` in
/// errors), checking each one's checksum. Fails only when the table cannot
/// be opened at all (footer, metaindex, index or properties damaged).
pub fn describe_table(
    file: Arc<dyn RandomAccessFile>,
    name: &str,
    comparator: Arc<dyn Comparator>,
) -> Result<TableLayout> {
    let t = match open(file.clone(), name, comparator, true)? {
        Table::Block(t) => t,
        Table::Packed(t) => return Ok(describe_packed(&t)),
    };
    describe_block(&t, file)
}

fn describe_packed(t: &PackedTableReader) -> TableLayout {
    let mut parts: Vec<TablePart> = t
        .sections()
        .into_iter()
        .map(|(kind, offset, size, ok)| TablePart {
            kind: kind.to_string(),
            offset,
            size,
            compression: "none".into(),
            checksum_ok: ok,
            hash_index: None,
        })
        .collect();
    parts.sort_by_key(|p| p.offset);
    TableLayout {
        format: "packed",
        parts,
        properties: t.properties().clone(),
    }
}

fn describe_block(t: &TableReader, file: Arc<dyn RandomAccessFile>) -> Result<TableLayout> {
    let name: Arc<str> = t.name().clone();
    let footer = *t.footer();
    let part = |kind: &str, h: BlockHandle, data: bool| -> Result<TablePart> {
        let mut ty = [0u8; 1];
        file.read_exact_at(h.offset + h.size, &mut ty)?;
        let compression = CompressionType::from_byte(ty[0])
            .map_or_else(|| format!("unknown ({})", ty[0]), |c| c.name().to_string());
        let contents = read_block(&*file, &name, h);
        let hash_index = match (&contents, data) {
            (Ok(b), true) if b.len() >= 4 => {
                Some(u32::from_le_bytes(b[b.len() - 4..].try_into().unwrap_or([0; 4])) >> 31 == 1)
            }
            _ => None,
        };
        Ok(TablePart {
            kind: kind.to_string(),
            offset: h.offset,
            size: h.size,
            compression,
            checksum_ok: contents.is_ok(),
            hash_index,
        })
    };
    let mut parts = Vec::new();
    let mut index = t.index_iter()?;
    index.seek_to_first();
    while index.valid() {
        let v = t.decode_index_value(index.value(), footer.index.offset)?;
        parts.push(part("data", v.handle, true)?);
        index.next();
    }
    index.status()?;
    let metaindex = Block::new(
        read_block(&*file, &name, footer.metaindex)?,
        name.clone(),
        footer.metaindex.offset,
    )?;
    let mut it = metaindex.iter(Arc::new(BytewiseComparator));
    it.seek_to_first();
    while it.valid() {
        let mut dec = Decoder::new(it.value());
        if let Some(h) = BlockHandle::decode_from(&mut dec) {
            let kind = match it.key() {
                k if k == FILTER_BLOCK_NAME.as_bytes() => "filter",
                k if k == PROPERTIES_BLOCK_NAME.as_bytes() => "properties",
                k if k == RANGE_DEL_BLOCK_NAME.as_bytes() => "range_del",
                _ => "meta",
            };
            parts.push(part(kind, h, false)?);
        }
        it.next();
    }
    parts.push(part("index", footer.index, false)?);
    parts.push(part("metaindex", footer.metaindex, false)?);
    parts.sort_by_key(|p| p.offset);
    Ok(TableLayout {
        format: "block-based",
        parts,
        properties: t.properties().clone(),
    })
}

/// Reads the whole table in `file` and checks every checksum (every block
/// or section) and that it holds as many entries as its properties say.
/// Returns the entry count.
pub fn verify_table(
    file: Arc<dyn RandomAccessFile>,
    name: &str,
    comparator: Arc<dyn Comparator>,
) -> Result<u64> {
    let t = match open(file, name, comparator, false)? {
        Table::Packed(t) => {
            t.verify()?;
            return Ok(t.num_entries() as u64);
        }
        block => block,
    };
    let mut it = t.iter_opt(false);
    let mut n = 0u64;
    it.seek_to_first();
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status()?;
    let want = t.properties().num_entries;
    if n != want {
        return Err(Error::corruption(
            name,
            0,
            format!("{n} entries read, the properties say {want}"),
        ));
    }
    Ok(n)
}

/// One entry of a table's range-deletion block: the keys in
/// `[start, end)` written before `sequence` are deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeDeletion {
    /// First key of the range.
    pub start: Vec<u8>,
    /// The key after the range (exclusive).
    pub end: Vec<u8>,
    /// The deletion's sequence number.
    pub sequence: u64,
}

/// The range deletions of the table in `file`, as its range-deletion
/// block holds them (none for a packed table).
pub fn table_range_deletions(
    file: Arc<dyn RandomAccessFile>,
    name: &str,
    comparator: Arc<dyn Comparator>,
) -> Result<Vec<RangeDeletion>> {
    Ok(open(file, name, comparator, false)?
        .range_deletions()
        .iter()
        .map(|t| RangeDeletion {
            start: t.start.clone(),
            end: t.end.clone(),
            sequence: t.seq,
        })
        .collect())
}

/// An iterator over every entry (internal key, value) of the table in
/// `file`, block-based or packed.
pub fn table_entries(
    file: Arc<dyn RandomAccessFile>,
    name: &str,
    comparator: Arc<dyn Comparator>,
) -> Result<Box<dyn InternalIterator>> {
    Ok(Box::new(
        open(file, name, comparator, false)?.iter_opt(false),
    ))
}
