//! Opens a packed table and answers point lookups from the mapped file.
//!
//! A `PackedTableReader` is immutable after open and safe to share across
//! threads. Values it returns are slices of the mapping (no copy).

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{
    extract_user_key, pack_trailer, BuiltinOrder, Comparator, InternalKeyComparator,
    SequenceNumber, ValueKind, TRAILER_BYTES,
};
use crate::sst::block::Block;
use crate::sst::{TableEntry, TableProperties};
use crate::util::coding::decode_fixed64;

use super::footer::{PackedFooter, PACKED_FOOTER_BYTES};
use super::index::KeyIndex;
use super::{
    PackedKeyKind, PackedTableIterator, Section, ValueLayout, FLAG_STARTS, FLAG_TAGS, HEADER_BYTES,
    SECTIONS,
};

/// An open packed table.
pub struct PackedTableReader {
    name: Arc<str>,
    user_cmp: Arc<dyn Comparator>,
    icmp: Arc<dyn Comparator>,
    footer: PackedFooter,
    /// The whole file (a mapping where the file system maps).
    data: Bytes,
    /// Entries.
    n: usize,
    /// Distinct user keys.
    count: usize,
    index: KeyIndex,
    starts: Option<Bytes>,
    tags: Option<Bytes>,
    layout: ValueLayout,
    offsets: Bytes,
    values: Bytes,
    props: TableProperties,
    /// Every entry is a value (no deletion) and the only version of its
    /// key: a read at or above `max_sequence` sees the entry without
    /// reading its tag.
    single_values: bool,
    /// The largest sequence number in the table (from the header).
    max_sequence: u64,
    /// Sections are checked at open unless `lazy`; then each on first use,
    /// the answer kept here.
    lazy: bool,
    checked: [OnceLock<Result<()>>; SECTIONS],
}

impl std::fmt::Debug for PackedTableReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedTableReader")
            .field("file", &self.name)
            .field("size", &self.data.len())
            .field("num_entries", &self.n)
            .field("key_index", &self.index.kind())
            .finish()
    }
}

#[inline]
fn fixed32_at(b: &[u8], i: usize) -> Option<u32> {
    b.get(i * 4..i * 4 + 4)
        .map(|s| u32::from_le_bytes(s.try_into().unwrap_or([0; 4])))
}

#[inline]
fn fixed64_at(b: &[u8], i: usize) -> Option<u64> {
    b.get(i * 8..i * 8 + 8)
        .map(|s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
}

impl PackedTableReader {
    /// Opens the packed table in `file` (named `name` in errors), whose
    /// keys are ordered by `comparator`. Every section's checksum is
    /// verified here unless `lazy_checksums`; then each section is verified
    /// the first time a read needs it.
    pub fn open(
        file: &dyn RandomAccessFile,
        name: impl Into<Arc<str>>,
        comparator: Arc<dyn Comparator>,
        lazy_checksums: bool,
    ) -> Result<PackedTableReader> {
        let name: Arc<str> = name.into();
        let size = file.size();
        if size < PACKED_FOOTER_BYTES as u64 {
            return Err(Error::corruption(
                &*name,
                0,
                format!("file of {size} bytes is too short to be a packed table (footer is {PACKED_FOOTER_BYTES} bytes)"),
            ));
        }
        let data = file.map()?;
        if data.len() as u64 != size {
            return Err(Error::corruption(
                &*name,
                0,
                format!("mapped {} of {size} bytes", data.len()),
            ));
        }
        let footer_offset = data.len() - PACKED_FOOTER_BYTES;
        let footer = PackedFooter::decode(&data[footer_offset..], &name, footer_offset as u64)?;
        let section = |s: Section| data.slice_ref(footer.section(&data, s));
        let corrupt = |s: Section, what: String| {
            Error::corruption(
                &*name,
                footer.sections[s as usize].offset,
                format!("packed table {} section: {what}", s.name()),
            )
        };
        let verify = |s: Section| footer.check(&data, s).map_err(|what| corrupt(s, what));
        // The header and the properties are small and needed now.
        verify(Section::Header)?;
        verify(Section::Properties)?;
        let header = section(Section::Header);
        if header.len() != HEADER_BYTES {
            return Err(corrupt(
                Section::Header,
                format!("{} bytes, expected {HEADER_BYTES}", header.len()),
            ));
        }
        let n = decode_fixed64(&header).unwrap_or(0);
        let count = decode_fixed64(&header[8..]).unwrap_or(0);
        let (kind, flags, layout_code) = (header[16], header[17], header[18]);
        let fixed_len = u32::from_le_bytes([header[20], header[21], header[22], header[23]]);
        let max_sequence = decode_fixed64(&header[24..]).unwrap_or(0);
        let kind = PackedKeyKind::from_code(kind)
            .ok_or_else(|| corrupt(Section::Header, format!("unknown key index kind {kind}")))?;
        if count > n || n >= u64::from(u32::MAX) || flags & !(FLAG_TAGS | FLAG_STARTS) != 0 {
            return Err(corrupt(
                Section::Header,
                format!("{n} entries, {count} keys, flags {flags:#x}: not a valid header"),
            ));
        }
        let (n, count) = (n as usize, count as usize);
        let layout = match layout_code {
            0 => ValueLayout::Fixed(fixed_len),
            1 => ValueLayout::Offsets32,
            2 => ValueLayout::Offsets64,
            c => {
                return Err(corrupt(
                    Section::Header,
                    format!("unknown value layout {c}"),
                ))
            }
        };

        let props_section = section(Section::Properties);
        let props_block = Block::new(
            props_section,
            name.clone(),
            footer.sections[Section::Properties as usize].offset,
        )?;
        let props = TableProperties::decode(&props_block)?;
        props.check_comparator(&name, &*comparator)?;
        if props.num_entries != n as u64 {
            return Err(corrupt(
                Section::Properties,
                format!("{} entries, the header says {n}", props.num_entries),
            ));
        }

        // Sizes of the fixed-width sections follow from the counts.
        let expect = |s: Section, present: bool, bytes: usize| -> Result<Option<Bytes>> {
            let b = section(s);
            let want = if present { bytes } else { 0 };
            if b.len() != want {
                return Err(corrupt(s, format!("{} bytes, expected {want}", b.len())));
            }
            Ok(present.then_some(b))
        };
        let starts = expect(
            Section::KeyStarts,
            flags & FLAG_STARTS != 0,
            (count + 1) * 4,
        )?;
        if starts.is_none() && n != count {
            return Err(corrupt(
                Section::Header,
                format!("{n} entries of {count} keys but no key starts"),
            ));
        }
        let tags = expect(Section::Tags, flags & FLAG_TAGS != 0, n * 8)?;
        let offsets_bytes = match layout {
            ValueLayout::Fixed(_) => 0,
            ValueLayout::Offsets32 => (n + 1) * 4,
            ValueLayout::Offsets64 => (n + 1) * 8,
        };
        let offsets = expect(Section::ValueOffsets, true, offsets_bytes)?.unwrap_or_default();
        let values = section(Section::Values);
        if let ValueLayout::Fixed(l) = layout {
            if (n as u64) * u64::from(l) != values.len() as u64 {
                return Err(corrupt(
                    Section::Values,
                    format!("{} bytes, expected {n} values of {l} bytes", values.len()),
                ));
            }
        }
        if !lazy_checksums {
            // The header and the properties were checked above.
            for s in Section::ALL {
                if !matches!(s, Section::Header | Section::Properties) {
                    verify(s)?;
                }
            }
        }
        let bytewise = comparator.builtin_order() == Some(BuiltinOrder::Bytewise);
        let index = KeyIndex::parse(kind, section(Section::KeyIndex), count, bytewise)
            .map_err(|what| corrupt(Section::KeyIndex, what.to_string()))?;
        // Merge operands, like deletions, need their kind read.
        let single_values =
            starts.is_none() && props.num_deletions == 0 && props.num_merge_operands == 0;
        let checked: [OnceLock<Result<()>>; SECTIONS] = Default::default();
        if !lazy_checksums {
            for c in &checked {
                let _ = c.set(Ok(()));
            }
        }
        Ok(PackedTableReader {
            icmp: Arc::new(InternalKeyComparator::new(comparator.clone())),
            user_cmp: comparator,
            name,
            footer,
            data,
            n,
            count,
            index,
            starts,
            tags,
            layout,
            offsets,
            values,
            single_values,
            max_sequence,
            props,
            lazy: lazy_checksums,
            checked,
        })
    }

    /// The table's properties.
    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// The file name used in errors.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// Every section: name, offset, size, and whether its checksum holds
    /// (computed now, whatever the open checked).
    pub fn sections(&self) -> Vec<(&'static str, u64, u64, bool)> {
        Section::ALL
            .iter()
            .map(|&s| {
                let h = self.footer.sections[s as usize];
                (
                    s.name(),
                    h.offset,
                    h.size,
                    self.footer.check(&self.data, s).is_ok(),
                )
            })
            .collect()
    }

    /// The kind of key index the builder chose.
    pub fn key_kind(&self) -> PackedKeyKind {
        self.index.kind()
    }

    /// The internal-key comparator ordering the table.
    pub(crate) fn internal_comparator(&self) -> &Arc<dyn Comparator> {
        &self.icmp
    }

    pub(crate) fn user_comparator(&self) -> &dyn Comparator {
        &*self.user_cmp
    }

    /// Entries in the table.
    pub fn num_entries(&self) -> usize {
        self.n
    }

    /// Distinct user keys in the table.
    pub(super) fn num_keys(&self) -> usize {
        self.count
    }

    fn corrupt(&self, s: Section, what: impl std::fmt::Display) -> Error {
        Error::corruption(
            &*self.name,
            self.footer.sections[s as usize].offset,
            format!("packed table {} section: {what}", s.name()),
        )
    }

    /// Verifies section `s`'s checksum once (lazy mode; at open otherwise).
    #[inline]
    fn ensure(&self, s: Section) -> Result<()> {
        if !self.lazy {
            return Ok(());
        }
        self.checked[s as usize]
            .get_or_init(|| {
                (self.footer.check(&self.data, s)).map_err(|what| self.corrupt(s, what))
            })
            .clone()
    }

    /// Verifies every section's checksum (in lazy mode each only once) and
    /// walks every entry: the key order, every version tag and every value
    /// range.
    pub fn verify(self: &Arc<Self>) -> Result<()> {
        for s in Section::ALL {
            self.ensure(s)?;
        }
        let mut it = self.iter();
        let mut last: Vec<u8> = Vec::new();
        let mut entries = 0usize;
        it.seek_to_first();
        while it.valid() {
            if entries > 0 && self.icmp.compare(&last, it.key()).is_ge() {
                return Err(self.corrupt(Section::KeyIndex, "keys out of order"));
            }
            let tag = decode_fixed64(&it.key()[it.key().len() - TRAILER_BYTES..]).unwrap_or(0);
            if tag >> 8 > self.max_sequence {
                return Err(self.corrupt(
                    Section::Header,
                    format!(
                        "an entry's sequence {} is above the table's largest, {}",
                        tag >> 8,
                        self.max_sequence
                    ),
                ));
            }
            if self.single_values && tag as u8 != ValueKind::Value as u8 {
                return Err(self.corrupt(
                    Section::Tags,
                    "a deletion or merge operand in a table that records none",
                ));
            }
            last.clear();
            last.extend_from_slice(it.key());
            entries += 1;
            it.next();
        }
        it.status()?;
        if entries != self.n {
            return Err(self.corrupt(
                Section::Header,
                format!("{entries} entries found, the header says {}", self.n),
            ));
        }
        Ok(())
    }

    /// Checks the sections every read needs (lazy mode only does work).
    pub(super) fn ensure_read_sections(&self) -> Result<()> {
        for s in [
            Section::KeyIndex,
            Section::KeyStarts,
            Section::Tags,
            Section::ValueOffsets,
            Section::Values,
        ] {
            self.ensure(s)?;
        }
        Ok(())
    }

    /// The id of the first user key at or after `user_key`.
    pub(super) fn lower_bound(&self, user_key: &[u8]) -> Result<usize> {
        self.index
            .lower_bound(user_key, &*self.user_cmp)
            .map_err(|w| self.corrupt(Section::KeyIndex, w))
    }

    /// Appends the user key of id `id` to `out`.
    pub(super) fn key_into(&self, id: usize, out: &mut Vec<u8>) -> Result<()> {
        self.index
            .key_into(id, out)
            .map_err(|w| self.corrupt(Section::KeyIndex, w))
    }

    /// The entries of user key `id`: `first..end`, newest first.
    #[inline]
    pub(super) fn versions(&self, id: usize) -> Result<(usize, usize)> {
        match &self.starts {
            None if id < self.n => Ok((id, id + 1)),
            None => Err(self.corrupt(Section::KeyIndex, "key id past the entries")),
            Some(s) => {
                let bad =
                    || self.corrupt(Section::KeyStarts, format!("bad entry range of key {id}"));
                let first = fixed32_at(s, id).ok_or_else(bad)? as usize;
                let end = fixed32_at(s, id + 1).ok_or_else(bad)? as usize;
                if first >= end || end > self.n {
                    return Err(bad());
                }
                Ok((first, end))
            }
        }
    }

    /// The packed sequence number and kind of entry `e`.
    #[inline]
    pub(super) fn trailer(&self, e: usize) -> Result<u64> {
        match &self.tags {
            None => Ok(pack_trailer(0, ValueKind::Value)),
            Some(t) => {
                let tag = fixed64_at(t, e)
                    .ok_or_else(|| self.corrupt(Section::Tags, format!("no tag for entry {e}")))?;
                if ValueKind::from_byte(tag as u8).is_none() {
                    return Err(self.corrupt(
                        Section::Tags,
                        format!("entry {e} has unknown kind {}", tag as u8),
                    ));
                }
                Ok(tag)
            }
        }
    }

    /// Where the value of entry `e` lies in the values section.
    #[inline]
    pub(super) fn value_range(&self, e: usize) -> Result<(usize, usize)> {
        let range = match self.layout {
            ValueLayout::Fixed(l) => {
                let l = l as usize;
                Some((e * l, e * l + l))
            }
            ValueLayout::Offsets32 => fixed32_at(&self.offsets, e)
                .zip(fixed32_at(&self.offsets, e + 1))
                .map(|(a, b)| (a as usize, b as usize)),
            ValueLayout::Offsets64 => fixed64_at(&self.offsets, e)
                .zip(fixed64_at(&self.offsets, e + 1))
                .and_then(|(a, b)| Some((usize::try_from(a).ok()?, usize::try_from(b).ok()?))),
        };
        match range {
            Some((a, b)) if a <= b && b <= self.values.len() => Ok((a, b)),
            _ => Err(self.corrupt(
                Section::ValueOffsets,
                format!("value of entry {e} lies outside the values"),
            )),
        }
    }

    /// The values section.
    #[inline]
    pub(super) fn values(&self) -> &Bytes {
        &self.values
    }

    /// Looks up the newest entry of the user key of `lookup` (an internal
    /// key: user key, the read's sequence number, kind `FOR_SEEK`) at or
    /// below the lookup's sequence number.
    pub fn get(&self, lookup: &[u8]) -> Result<Option<TableEntry>> {
        let Some((e, t)) = self.find_entry(lookup, true)? else {
            return Ok(None);
        };
        let (a, b) = self.value_range(e)?;
        Ok(Some(TableEntry {
            sequence: (t >> 8) as SequenceNumber,
            kind: ValueKind::from_byte(t as u8).unwrap_or(ValueKind::Value),
            value: self.values.slice(a..b),
        }))
    }

    /// [`PackedTableReader::get`] without the entry's sequence number: when
    /// every entry is the only version of its key and a value, and the
    /// read is at or above the table's largest sequence number, the entry's
    /// tag is not read at all (a get then touches the file once, for the
    /// value).
    #[inline]
    pub(crate) fn get_value(
        &self,
        lookup: &[u8],
        need_sequence: bool,
    ) -> Result<Option<(SequenceNumber, ValueKind, Bytes)>> {
        let Some((e, t)) = self.find_entry(lookup, need_sequence)? else {
            return Ok(None);
        };
        let (a, b) = self.value_range(e)?;
        let kind = match ValueKind::from_byte(t as u8) {
            Some(ValueKind::RangeDeletion) => {
                return Err(self.corrupt(Section::Tags, "an entry of kind range deletion"))
            }
            kind => kind.unwrap_or(ValueKind::Value),
        };
        Ok(Some((t >> 8, kind, self.values.slice(a..b))))
    }

    /// The entry a lookup finds and its trailer (read unless `!need_tag`
    /// and the table's facts say what it is: then sequence 0 stands in).
    #[inline]
    fn find_entry(&self, lookup: &[u8], need_tag: bool) -> Result<Option<(usize, u64)>> {
        self.ensure_read_sections()?;
        let user_key = extract_user_key(lookup);
        let id = match self.index.find(user_key, &*self.user_cmp) {
            Ok(Some(id)) => id,
            Ok(None) => return Ok(None),
            Err(w) => return Err(self.corrupt(Section::KeyIndex, w)),
        };
        let target = decode_fixed64(&lookup[lookup.len() - TRAILER_BYTES..]).unwrap_or(0);
        if !need_tag && self.single_values && target >> 8 >= self.max_sequence {
            if id >= self.n {
                return Err(self.corrupt(Section::KeyIndex, "key id past the entries"));
            }
            return Ok(Some((id, pack_trailer(0, ValueKind::Value))));
        }
        let (first, end) = self.versions(id)?;
        for e in first..end {
            let t = self.trailer(e)?;
            if t <= target {
                return Ok(Some((e, t)));
            }
        }
        Ok(None)
    }

    /// An iterator over the whole table.
    pub fn iter(self: &Arc<Self>) -> PackedTableIterator {
        PackedTableIterator::new(self.clone())
    }

    /// Bytes of the file.
    pub fn file_size(&self) -> u64 {
        self.data.len() as u64
    }
}
