//! Writes a packed table. Values go to the file as they come; keys, version
//! tags and value offsets are kept until `finish`, which chooses the key
//! index from the whole key set and writes the other sections.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::env::WritableFile;
use crate::error::{Error, Result};
use crate::key::{
    pack_trailer, parse_entry_key, BuiltinOrder, Comparator, InternalKeyComparator, ValueKind,
};
use crate::limits::{KEY_SIZE_BYTES_MAX, VALUE_SIZE_BYTES_MAX};
use crate::sst::TableProperties;
use crate::util::coding::{put_fixed32, put_fixed64};
use crate::util::crc::{crc32c_extend, mask};

use super::footer::{section_crc, PackedFooter, SectionHandle, PACKED_FORMAT_VERSION};
use super::index::build_index;
use super::{
    suffix_int, Section, ValueLayout, BITMAP_SPARSITY_MAX, FLAG_STARTS, FLAG_TAGS, HEADER_BYTES,
    INT_SUFFIX_BYTES_MAX, SECTIONS,
};

/// Values are appended to the file in pieces of about this size.
const VALUE_WRITE_BYTES: usize = 64 << 10;

/// Builds one packed table file.
pub struct PackedTableBuilder {
    cmp: Arc<dyn Comparator>,
    icmp: InternalKeyComparator,
    file: Box<dyn WritableFile>,
    name: Arc<str>,
    /// Bytes appended to the file.
    offset: u64,
    /// Values not appended yet.
    pending: Vec<u8>,
    values_len: u64,
    values_crc: u32,
    /// Where each value starts, and the end of the last; empty while every
    /// value has one length (`same_len`), filled in when two differ.
    value_offsets: Vec<u64>,
    /// The length every value has so far (`None` before the first entry
    /// and once two differ).
    same_len: Option<u64>,
    /// Each entry's packed sequence number and kind; empty while every
    /// entry is (0, value), filled in at the first that is not.
    trailers: Vec<u64>,
    /// The largest sequence number of any entry.
    max_sequence: u64,
    /// The distinct user keys, back to back, and where each starts.
    keys: Vec<u8>,
    key_offsets: Vec<u32>,
    /// The first entry of each distinct user key.
    starts: Vec<u32>,
    /// While every key so far could take an integer index: the common
    /// prefix length of all keys (for the size estimate).
    int_prefix: Option<usize>,
    /// Whether every key so far has the first key's length.
    same_key_len: bool,
    last_key: Vec<u8>,
    props: TableProperties,
    sections: [SectionHandle; SECTIONS],
    finished: bool,
}

impl std::fmt::Debug for PackedTableBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedTableBuilder")
            .field("file", &self.name)
            .field("num_entries", &self.props.num_entries)
            .finish()
    }
}

impl PackedTableBuilder {
    /// A builder writing to `file` (named `file_name` in errors), its keys
    /// ordered by `comparator`.
    pub fn new(
        comparator: Arc<dyn Comparator>,
        file: Box<dyn WritableFile>,
        file_name: impl Into<Arc<str>>,
    ) -> PackedTableBuilder {
        let props = TableProperties {
            format_version: PACKED_FORMAT_VERSION,
            compression: "none".to_string(),
            comparator: comparator.name().to_string(),
            whole_key_filtering: true,
            ..TableProperties::default()
        };
        PackedTableBuilder {
            icmp: InternalKeyComparator::new(comparator.clone()),
            cmp: comparator,
            file,
            name: file_name.into(),
            offset: 0,
            pending: Vec::new(),
            values_len: 0,
            values_crc: 0,
            value_offsets: Vec::new(),
            same_len: None,
            trailers: Vec::new(),
            max_sequence: 0,
            keys: Vec::new(),
            key_offsets: vec![0],
            starts: Vec::new(),
            int_prefix: None,
            same_key_len: true,
            last_key: Vec::new(),
            props,
            sections: [SectionHandle::default(); SECTIONS],
            finished: false,
        }
    }

    /// Records the merge operator of the writing database.
    pub(crate) fn set_merge_operator(&mut self, name: &str) {
        self.props.merge_operator = name.to_string();
    }

    /// Records a user property.
    pub fn add_user_property(&mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) {
        self.props.user.insert(name.into(), value.into());
    }

    /// Adds an entry. `ikey` must be a valid internal key greater than every
    /// key added before.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if self.finished {
            return Err(Error::invalid_argument(
                "PackedTableBuilder::add after finish",
            ));
        }
        let Some(parsed) = parse_entry_key(ikey) else {
            return Err(Error::invalid_argument(
                "PackedTableBuilder::add: not an internal key",
            ));
        };
        if parsed.user_key.len() > KEY_SIZE_BYTES_MAX || value.len() > VALUE_SIZE_BYTES_MAX {
            return Err(Error::invalid_argument(format!(
                "entry of {}-byte key and {}-byte value exceeds the limits ({KEY_SIZE_BYTES_MAX}, {VALUE_SIZE_BYTES_MAX})",
                parsed.user_key.len(),
                value.len()
            )));
        }
        let n = self.props.num_entries as usize;
        if n > 0 && self.icmp.compare(&self.last_key, ikey) != Ordering::Less {
            return Err(Error::invalid_argument(
                "PackedTableBuilder::add: keys must be added in increasing order",
            ));
        }
        if n >= u32::MAX as usize - 1 {
            return Err(Error::invalid_argument(
                "a packed table holds fewer than 2^32 - 1 entries",
            ));
        }
        let new_key = n == 0
            || self.cmp.compare(
                crate::key::extract_user_key(&self.last_key),
                parsed.user_key,
            ) != Ordering::Equal;
        if new_key {
            if self.keys.len() + parsed.user_key.len() > u32::MAX as usize {
                return Err(Error::invalid_argument(
                    "a packed table holds less than 4 GiB of keys",
                ));
            }
            self.track_int_keys(parsed.user_key);
            self.keys.extend_from_slice(parsed.user_key);
            self.key_offsets.push(self.keys.len() as u32);
            self.starts.push(n as u32);
        }
        let trailer = pack_trailer(parsed.sequence, parsed.kind);
        let plain = pack_trailer(0, ValueKind::Value);
        if trailer != plain || !self.trailers.is_empty() {
            // The first tagged entry: every earlier one was (0, value).
            self.trailers.resize(n, plain);
            self.trailers.push(trailer);
        }
        self.max_sequence = self.max_sequence.max(parsed.sequence);
        let len = value.len() as u64;
        match self.same_len {
            Some(l) if l == len => {}
            Some(l) => {
                // The first length that differs: every earlier value had
                // length l.
                self.value_offsets = (0..=n as u64).map(|i| i * l).collect();
                self.value_offsets.push(self.values_len + len);
                self.same_len = None;
            }
            None if n == 0 => self.same_len = Some(len),
            None => self.value_offsets.push(self.values_len + len),
        }
        self.pending.extend_from_slice(value);
        self.values_len += len;
        if self.pending.len() >= VALUE_WRITE_BYTES {
            self.write_pending()?;
        }
        if n == 0 {
            self.props.smallest_key = ikey.to_vec();
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        self.props.num_entries += 1;
        self.props.num_deletions += u64::from(parsed.kind == ValueKind::Deletion);
        self.props.num_merge_operands += u64::from(parsed.kind == ValueKind::Merge);
        self.props.raw_key_size += ikey.len() as u64;
        self.props.raw_value_size += len;
        Ok(())
    }

    /// Keeps [`Self::int_prefix`] up to date as key `key` is added.
    fn track_int_keys(&mut self, key: &[u8]) {
        if self.starts.is_empty() {
            self.int_prefix =
                (self.cmp.builtin_order() == Some(BuiltinOrder::Bytewise)).then_some(key.len());
            self.same_key_len = !key.is_empty();
            return;
        }
        self.same_key_len &= key.len() == self.key_offsets[1] as usize;
        let Some(p) = self.int_prefix else { return };
        let first = &self.keys[..self.key_offsets[1] as usize];
        self.int_prefix = (key.len() == first.len())
            .then(|| {
                first[..p]
                    .iter()
                    .zip(key)
                    .take_while(|(a, b)| a == b)
                    .count()
            })
            .filter(|&p| key.len() - p <= INT_SUFFIX_BYTES_MAX);
    }

    /// Bytes the key index would take if the table ended now.
    fn estimated_index_size(&self) -> u64 {
        let count = self.starts.len() as u64;
        let first_len = self.key_offsets.get(1).map_or(0, |&l| l as u64);
        let (prefixes, offsets) = match self.same_key_len {
            true if first_len >= 8 => (0, 0),
            true => (8 * count, 0),
            false => (8 * count, 4 * count),
        };
        let sorted = self.keys.len() as u64 + prefixes + offsets;
        let (Some(p), Some(&first_end)) = (self.int_prefix, self.key_offsets.get(1)) else {
            return sorted;
        };
        let first = &self.keys[..first_end as usize];
        let last = &self.keys[self.keys.len() - first.len()..];
        let range = suffix_int(last, p) - suffix_int(first, p) + 1;
        match range {
            r if r == count => 24 + p as u64,
            r if u128::from(r) <= BITMAP_SPARSITY_MAX * u128::from(count) => {
                24 + p as u64 + r / 64 * 12
            }
            _ => sorted,
        }
    }

    fn write_pending(&mut self) -> Result<()> {
        self.values_crc = crc32c_extend(self.values_crc, &self.pending);
        self.file.append(&self.pending)?;
        self.offset += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    fn write_section(&mut self, section: Section, bytes: &[u8]) -> Result<()> {
        self.sections[section as usize] = SectionHandle {
            offset: self.offset,
            size: bytes.len() as u64,
            crc: section_crc(bytes),
        };
        self.file.append(bytes)?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Writes every section and the footer and flushes the file (the caller
    /// syncs it). Returns the table's properties.
    pub fn finish(&mut self) -> Result<TableProperties> {
        if self.finished {
            return Err(Error::invalid_argument(
                "PackedTableBuilder::finish called twice",
            ));
        }
        self.finished = true;
        self.write_pending()?;
        self.sections[Section::Values as usize] = SectionHandle {
            offset: 0,
            size: self.values_len,
            crc: mask(self.values_crc),
        };
        let n = self.props.num_entries as usize;
        let count = self.starts.len();
        let bytewise = self.cmp.builtin_order() == Some(BuiltinOrder::Bytewise);
        let (kind, index) = build_index(&self.keys, &self.key_offsets, bytewise);
        self.write_section(Section::KeyIndex, &index)?;
        self.props.index_size = index.len() as u64;
        self.props.index_type = kind.name().to_string();
        drop(index);

        let mut buf = Vec::new();
        let mut flags = 0u8;
        if n > count {
            flags |= FLAG_STARTS;
            buf.reserve((count + 1) * 4);
            for &s in &self.starts {
                put_fixed32(&mut buf, s);
            }
            put_fixed32(&mut buf, n as u32);
        }
        self.write_section(Section::KeyStarts, &buf)?;

        buf.clear();
        if !self.trailers.is_empty() {
            debug_assert_eq!(self.trailers.len(), n);
            flags |= FLAG_TAGS;
            buf.reserve(n * 8);
            for &t in &self.trailers {
                put_fixed64(&mut buf, t);
            }
        }
        self.write_section(Section::Tags, &buf)?;

        buf.clear();
        // Values are at most VALUE_SIZE_BYTES_MAX bytes, so one length
        // fits the header's u32.
        let layout = match self.same_len {
            Some(l) => ValueLayout::Fixed(l as u32),
            None if self.values_len <= u64::from(u32::MAX) => ValueLayout::Offsets32,
            None => ValueLayout::Offsets64,
        };
        if self.same_len.is_none() && self.value_offsets.is_empty() {
            // No entry: the end of no value.
            self.value_offsets.push(0);
        }
        debug_assert!(self.same_len.is_some() || self.value_offsets.len() == n + 1);
        match layout {
            ValueLayout::Fixed(_) => {}
            ValueLayout::Offsets32 => {
                buf.reserve((n + 1) * 4);
                for &o in &self.value_offsets {
                    put_fixed32(&mut buf, o as u32);
                }
            }
            ValueLayout::Offsets64 => {
                buf.reserve((n + 1) * 8);
                for &o in &self.value_offsets {
                    put_fixed64(&mut buf, o);
                }
            }
        }
        self.write_section(Section::ValueOffsets, &buf)?;

        buf.clear();
        put_fixed64(&mut buf, n as u64);
        put_fixed64(&mut buf, count as u64);
        buf.push(kind.code());
        buf.push(flags);
        let (layout_code, fixed_len) = match layout {
            ValueLayout::Fixed(l) => (0u8, l),
            ValueLayout::Offsets32 => (1, 0),
            ValueLayout::Offsets64 => (2, 0),
        };
        buf.push(layout_code);
        buf.push(0);
        put_fixed32(&mut buf, fixed_len);
        put_fixed64(&mut buf, self.max_sequence);
        debug_assert_eq!(buf.len(), HEADER_BYTES);
        self.write_section(Section::Header, &buf)?;

        self.props.data_size = self.values_len;
        self.props.largest_key = self.last_key.clone();
        self.props.creation_time = TableProperties::now_secs();
        let props = self.props.encode();
        self.write_section(Section::Properties, &props)?;

        let footer = PackedFooter {
            sections: self.sections,
            format_version: PACKED_FORMAT_VERSION,
        }
        .encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.flush()?;
        debug_assert_eq!(self.offset, self.file.size());
        // What finish kept in memory is no longer needed.
        self.trailers = Vec::new();
        self.value_offsets = Vec::new();
        self.keys = Vec::new();
        self.key_offsets = Vec::new();
        self.starts = Vec::new();
        Ok(self.props.clone())
    }

    /// Syncs the file to stable storage (call after `finish`).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// What the file would hold if finished now, approximately.
    pub fn estimated_file_size(&self) -> u64 {
        let n = self.props.num_entries;
        let tags = 8 * self.trailers.len() as u64;
        let offsets = 4 * self.value_offsets.len() as u64;
        let starts = if n > self.starts.len() as u64 {
            4 * self.starts.len() as u64
        } else {
            0
        };
        self.values_len + self.estimated_index_size() + tags + offsets + starts
    }

    /// Bytes written to the file so far.
    pub fn file_size(&self) -> u64 {
        self.offset
    }
}
