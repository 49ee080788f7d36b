//! The properties block: facts about a table recorded when it is written.
//! Stored as an ordinary block of name → value entries in bytewise order.
//! Integers are varint64, strings are raw bytes. Built-in names start with
//! `strata.`; user properties are stored under `user.<name>`. The list of
//! names is in `docs/format/table.md`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::BytewiseComparator;
use crate::util::coding::{decode_varint64, put_varint64};

use super::block::{Block, BlockBuilder};

const USER_PREFIX: &str = "user.";
/// The names of a table's block property collectors, in tag order.
const BLOCK_PROPERTY_COLLECTORS: &str = "strata.block.props.collectors";
/// Before a collector's name: its table-level property.
const BLOCK_PROPERTY_PREFIX: &str = "strata.block.props.table.";

/// Facts about one table file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableProperties {
    /// Entries (puts and deletions).
    pub num_entries: u64,
    /// Deletion entries.
    pub num_deletions: u64,
    /// Merge operand entries.
    pub num_merge_operands: u64,
    /// Range deletions in the range-deletion block (fragments, one per
    /// sequence number).
    pub num_range_deletions: u64,
    /// Name of the merge operator of the database that wrote the table;
    /// empty when it had none.
    pub merge_operator: String,
    /// Data blocks.
    pub num_data_blocks: u64,
    /// Sum of internal key lengths.
    pub raw_key_size: u64,
    /// Sum of value lengths.
    pub raw_value_size: u64,
    /// Bytes of data blocks on disk, trailers included.
    pub data_size: u64,
    /// Bytes of the index block on disk.
    pub index_size: u64,
    /// Bytes of the filter block on disk (0 without a filter).
    pub filter_size: u64,
    /// Smallest internal key (empty for an empty table).
    pub smallest_key: Vec<u8>,
    /// Largest internal key (empty for an empty table).
    pub largest_key: Vec<u8>,
    /// Table format version.
    pub format_version: u32,
    /// Compression name asked for (`none`, `snappy`, `lz4`, `zstd`).
    pub compression: String,
    /// Index block kind (`binary_search`).
    pub index_type: String,
    /// Whether the index block's separators are user keys (format version
    /// 2): no user key of the table has entries in two data blocks, so a
    /// separator needs no sequence number. False in tables written before
    /// the property existed, whose separators are internal keys.
    pub index_key_is_user_key: bool,
    /// Data block index kind in effect for the table: `binary_search`, or
    /// `binary_search_and_hash` when the hash index was asked for and the
    /// comparator allows it. Empty in tables written before it existed.
    pub data_block_index_type: String,
    /// Data blocks written with a hash index: all of them under
    /// `binary_search_and_hash` except blocks of more than 253 restart
    /// points.
    pub num_data_blocks_with_hash_index: u64,
    /// Filter kind (`strata.bloom.v1` or empty without a filter).
    pub filter_policy: String,
    /// Bits per key used by the filter (0 without one), times 1000.
    pub filter_millibits_per_key: u64,
    /// Seconds since the Unix epoch when the table was written.
    pub creation_time: u64,
    /// Name of the user comparator that orders the keys.
    pub comparator: String,
    /// Name of the prefix extractor whose prefixes the filter holds; empty
    /// when it holds none.
    pub prefix_extractor_name: String,
    /// Whether the filter holds whole user keys: true unless the table was
    /// written with `whole_key_filtering` off (and tables written before
    /// the property existed hold whole keys).
    pub whole_key_filtering: bool,
    /// Names of the block property collectors the table was written with,
    /// in the order of their index-entry tags.
    pub block_property_collectors: Vec<String>,
    /// Each collector's table-level property, by name.
    pub block_properties: BTreeMap<String, Vec<u8>>,
    /// Properties supplied by the user.
    pub user: BTreeMap<String, Vec<u8>>,
}

impl TableProperties {
    /// Refuses to read table `table` with `comparator` unless it was
    /// written with a comparator of that name.
    pub(crate) fn check_comparator(
        &self,
        table: &str,
        comparator: &dyn crate::key::Comparator,
    ) -> Result<()> {
        if self.comparator != comparator.name() {
            return Err(Error::invalid_argument(format!(
                "{table}: table was written with comparator {:?}, opened with {:?}",
                self.comparator,
                comparator.name()
            )));
        }
        Ok(())
    }

    /// Refuses to read the merge operands of table `table` with another
    /// merge operator than the one that wrote them (or with none).
    pub(crate) fn check_merge_operator(&self, table: &str, operator: Option<&str>) -> Result<()> {
        if self.num_merge_operands == 0 || operator == Some(self.merge_operator.as_str()) {
            return Ok(());
        }
        Err(Error::invalid_argument(format!(
            "{table}: holds {} merge operand(s) written with merge operator {:?}, opened with {}",
            self.num_merge_operands,
            self.merge_operator,
            match operator {
                Some(name) => format!("{name:?}"),
                None => "none (Options::set_merge_operator)".into(),
            }
        )))
    }

    /// Seconds since the Unix epoch now, for `creation_time`.
    pub(crate) fn now_secs() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// Encodes the properties as block contents.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut entries: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut int = |name: &str, v: u64| {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            entries.insert(format!("strata.{name}"), buf);
        };
        int("num.entries", self.num_entries);
        int("num.deletions", self.num_deletions);
        if self.num_merge_operands > 0 {
            int("num.merge.operands", self.num_merge_operands);
        }
        if self.num_range_deletions > 0 {
            int("num.range.deletions", self.num_range_deletions);
        }
        int("num.data.blocks", self.num_data_blocks);
        int(
            "num.data.blocks.with.hash.index",
            self.num_data_blocks_with_hash_index,
        );
        int("raw.key.size", self.raw_key_size);
        int("raw.value.size", self.raw_value_size);
        int("data.size", self.data_size);
        int("index.size", self.index_size);
        int("filter.size", self.filter_size);
        int("format.version", u64::from(self.format_version));
        int("filter.millibits.per.key", self.filter_millibits_per_key);
        int("creation.time", self.creation_time);
        let mut raw = |name: &str, v: &[u8]| {
            entries.insert(format!("strata.{name}"), v.to_vec());
        };
        raw("smallest.key", &self.smallest_key);
        raw("largest.key", &self.largest_key);
        raw("compression", self.compression.as_bytes());
        raw("index.type", self.index_type.as_bytes());
        raw(
            "data.block.index.type",
            self.data_block_index_type.as_bytes(),
        );
        raw("filter.policy", self.filter_policy.as_bytes());
        raw("comparator", self.comparator.as_bytes());
        if !self.merge_operator.is_empty() {
            raw("merge.operator", self.merge_operator.as_bytes());
        }
        raw(
            "prefix.extractor.name",
            self.prefix_extractor_name.as_bytes(),
        );
        let mut buf = Vec::new();
        put_varint64(&mut buf, u64::from(self.whole_key_filtering));
        entries.insert("strata.filter.whole.keys".to_string(), buf);
        let mut buf = Vec::new();
        put_varint64(&mut buf, u64::from(self.index_key_is_user_key));
        entries.insert("strata.index.key.is.user.key".to_string(), buf);
        if !self.block_property_collectors.is_empty() {
            let mut names = Vec::new();
            for n in &self.block_property_collectors {
                crate::util::coding::put_varint32(&mut names, n.len() as u32);
                names.extend_from_slice(n.as_bytes());
            }
            entries.insert(BLOCK_PROPERTY_COLLECTORS.to_string(), names);
        }
        for (k, v) in &self.block_properties {
            entries.insert(format!("{BLOCK_PROPERTY_PREFIX}{k}"), v.clone());
        }
        for (k, v) in &self.user {
            entries.insert(format!("{USER_PREFIX}{k}"), v.clone());
        }
        let mut b = BlockBuilder::new(1);
        for (k, v) in &entries {
            b.add(k.as_bytes(), v);
        }
        b.finish().to_vec()
    }

    /// Decodes a properties block. Unknown `strata.` names are ignored so
    /// that newer writers stay readable.
    pub(crate) fn decode(block: &Block) -> Result<TableProperties> {
        let file = block.file().clone();
        let offset = block.offset();
        let corrupt =
            |what: String| Error::corruption(&*file, offset, format!("properties block: {what}"));
        let mut p = TableProperties {
            whole_key_filtering: true,
            ..TableProperties::default()
        };
        let mut it = block.iter(Arc::new(BytewiseComparator));
        it.seek_to_first();
        while it.valid() {
            let name = std::str::from_utf8(it.key())
                .map_err(|_| corrupt("property name is not UTF-8".into()))?;
            let value = it.value();
            let int = || -> Result<u64> {
                match decode_varint64(value) {
                    Some((v, n)) if n == value.len() => Ok(v),
                    _ => Err(corrupt(format!("{name} is not a varint64"))),
                }
            };
            let text = || -> Result<String> {
                String::from_utf8(value.to_vec())
                    .map_err(|_| corrupt(format!("{name} is not UTF-8")))
            };
            match name {
                "strata.num.entries" => p.num_entries = int()?,
                "strata.num.deletions" => p.num_deletions = int()?,
                "strata.num.merge.operands" => p.num_merge_operands = int()?,
                "strata.num.range.deletions" => p.num_range_deletions = int()?,
                "strata.merge.operator" => p.merge_operator = text()?,
                "strata.num.data.blocks" => p.num_data_blocks = int()?,
                "strata.num.data.blocks.with.hash.index" => {
                    p.num_data_blocks_with_hash_index = int()?
                }
                "strata.raw.key.size" => p.raw_key_size = int()?,
                "strata.raw.value.size" => p.raw_value_size = int()?,
                "strata.data.size" => p.data_size = int()?,
                "strata.index.size" => p.index_size = int()?,
                "strata.filter.size" => p.filter_size = int()?,
                "strata.format.version" => {
                    p.format_version = u32::try_from(int()?)
                        .map_err(|_| corrupt("format version over u32".into()))?
                }
                "strata.filter.millibits.per.key" => p.filter_millibits_per_key = int()?,
                "strata.creation.time" => p.creation_time = int()?,
                "strata.smallest.key" => p.smallest_key = value.to_vec(),
                "strata.largest.key" => p.largest_key = value.to_vec(),
                "strata.compression" => p.compression = text()?,
                "strata.index.type" => p.index_type = text()?,
                "strata.data.block.index.type" => p.data_block_index_type = text()?,
                "strata.filter.policy" => p.filter_policy = text()?,
                "strata.comparator" => p.comparator = text()?,
                "strata.prefix.extractor.name" => p.prefix_extractor_name = text()?,
                "strata.filter.whole.keys" => match int()? {
                    0 => p.whole_key_filtering = false,
                    1 => p.whole_key_filtering = true,
                    v => return Err(corrupt(format!("{name} is {v}, not 0 or 1"))),
                },
                "strata.index.key.is.user.key" => match int()? {
                    0 => p.index_key_is_user_key = false,
                    1 => p.index_key_is_user_key = true,
                    v => return Err(corrupt(format!("{name} is {v}, not 0 or 1"))),
                },
                BLOCK_PROPERTY_COLLECTORS => {
                    let mut dec = crate::util::coding::Decoder::new(value);
                    while !dec.is_empty() {
                        let n = dec
                            .length_prefixed()
                            .and_then(|b| std::str::from_utf8(b).ok())
                            .ok_or_else(|| corrupt(format!("{name} holds a malformed name")))?;
                        if p.block_property_collectors.len()
                            >= super::block_property::COLLECTORS_MAX
                        {
                            return Err(corrupt(format!(
                                "{name} lists over {} collectors",
                                super::block_property::COLLECTORS_MAX
                            )));
                        }
                        p.block_property_collectors.push(n.to_string());
                    }
                }
                _ => {
                    if let Some(block) = name.strip_prefix(BLOCK_PROPERTY_PREFIX) {
                        p.block_properties.insert(block.to_string(), value.to_vec());
                    } else if let Some(user) = name.strip_prefix(USER_PREFIX) {
                        p.user.insert(user.to_string(), value.to_vec());
                    }
                }
            }
            it.next();
        }
        it.status()?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn round_trip() {
        let mut p = TableProperties {
            num_entries: 10,
            num_deletions: 2,
            num_merge_operands: 1,
            num_range_deletions: 3,
            merge_operator: "add".into(),
            num_data_blocks: 3,
            raw_key_size: 100,
            raw_value_size: 1 << 40,
            data_size: 5000,
            index_size: 70,
            filter_size: 69,
            smallest_key: b"a\x00\x01".to_vec(),
            largest_key: b"z\xff".to_vec(),
            format_version: 1,
            compression: "zstd".into(),
            index_type: "binary_search".into(),
            index_key_is_user_key: true,
            data_block_index_type: "binary_search_and_hash".into(),
            num_data_blocks_with_hash_index: 2,
            filter_policy: "strata.bloom.v1".into(),
            filter_millibits_per_key: 10_000,
            creation_time: 1_790_000_000,
            comparator: "leveldb.BytewiseComparator".into(),
            prefix_extractor_name: "rocksdb.FixedPrefix.4".into(),
            whole_key_filtering: false,
            block_property_collectors: vec!["versions".into(), "tenants".into()],
            block_properties: [("versions".to_string(), b"\x01\x09".to_vec())]
                .into_iter()
                .collect(),
            user: BTreeMap::new(),
        };
        p.user.insert("owner".into(), b"me".to_vec());
        let block = Block::new(Bytes::from(p.encode()), Arc::from("t"), 0).unwrap();
        assert_eq!(TableProperties::decode(&block).unwrap(), p);
    }
}
