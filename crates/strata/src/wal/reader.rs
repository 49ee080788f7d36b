//! Reads records back from a log file (`docs/format/wal.md`).
//!
//! The reader parses one 32 KiB block at a time from a reused buffer. Every
//! header is untrusted: a length is checked against the block before the
//! payload is touched, the checksum is verified before the type is believed,
//! and a record is accumulated fragment by fragment, capped at
//! [`LOG_RECORD_SIZE_BYTES_MAX`], so no length read from the file is ever
//! allocated up front.
//!
//! After a checksum mismatch the rest of the block is dropped: the length
//! field is not covered by the checksum, so nothing after it can be located.

use std::fmt;

use super::format::{
    decode_header, type_crcs, FragmentType, Header, PredecessorLog, BLOCK_SIZE, HEADER_SIZE, TYPES,
};
use super::WalRecoveryMode;
use crate::env::SequentialFile;
use crate::error::{Error, Result};
use crate::limits::LOG_RECORD_SIZE_BYTES_MAX;
use crate::util::crc::{crc32c, crc32c_extend, unmask};

/// Reads the records of a log file in order.
///
/// What happens at a torn or corrupt spot depends on the
/// [`WalRecoveryMode`]. Once [`read_record`](Self::read_record) has returned
/// `Ok(false)` or an error, every later call returns the same.
pub struct LogReader {
    file: Box<dyn SequentialFile>,
    file_name: String,
    mode: WalRecoveryMode,
    /// The current block: `block[pos..block_len]` is not parsed yet.
    block: Box<[u8]>,
    block_len: usize,
    pos: usize,
    /// File offset of `block[0]`.
    block_file_offset: u64,
    /// The last read returned a short block: there are no more blocks.
    eof: bool,
    type_crcs: [u32; TYPES],
    last_record_offset: u64,
    /// File offset just past the last record returned (or the
    /// predecessor fragment, if no record followed it).
    valid_end: u64,
    predecessor: Option<PredecessorLog>,
    dropped_bytes: u64,
    record_bytes_max: usize,
    /// Set when a bad fragment made the rest of its block unparseable but a
    /// valid Full or First fragment starts in it: the file offset of that
    /// fragment. Such damage is not a torn tail.
    hidden_record_start: Option<u64>,
    state: State,
}

#[derive(Debug)]
enum State {
    Reading,
    Done,
    Failed(Error),
}

/// One unit parsed from the file.
enum Physical {
    /// A fragment of type Full, First, Middle or Last with a valid checksum.
    Fragment(Fragment),
    /// A header with type Zero and length 0: the rest of the block was never
    /// written (preallocated space).
    Padding { offset: u64 },
    /// `bytes` bytes at `offset` that are not a valid fragment.
    Bad {
        offset: u64,
        bytes: u64,
        what: String,
    },
    /// No bytes left.
    Eof,
}

/// A fragment with a valid checksum; its payload is `block[start..end]`,
/// which `next_physical` checked lies inside the block.
struct Fragment {
    t: FragmentType,
    offset: u64,
    start: usize,
    end: usize,
}

impl Fragment {
    fn len(&self) -> usize {
        self.end - self.start
    }

    /// Bytes of the file it takes: header and payload.
    fn file_bytes(&self) -> u64 {
        (HEADER_SIZE + self.len()) as u64
    }
}

/// Something wrong with the log, before the recovery mode decides about it.
struct Anomaly {
    /// File offset of the fragment where the problem was found.
    offset: u64,
    what: String,
    /// File bytes dropped with it: the bad region and any partial record.
    bytes: u64,
}

/// A record whose First fragment has been read but not its Last.
struct Partial {
    offset: u64,
    file_bytes: u64,
}

/// What follows a problem, up to the end of the file.
struct Tail {
    /// Offset of the first Full or First fragment with a valid checksum.
    record_start: Option<u64>,
    /// Bytes skipped on the way that were not padding.
    bytes: u64,
}

/// What `read_record` does after an anomaly: continue, or return this.
type Decision = Option<bool>;

impl LogReader {
    /// A reader for the log in `file`, read from its start. `file_name` is
    /// used in error messages.
    pub fn new(
        file: Box<dyn SequentialFile>,
        file_name: impl Into<String>,
        mode: WalRecoveryMode,
    ) -> Self {
        LogReader {
            file,
            file_name: file_name.into(),
            mode,
            block: vec![0u8; BLOCK_SIZE].into_boxed_slice(),
            block_len: 0,
            pos: 0,
            block_file_offset: 0,
            eof: false,
            type_crcs: type_crcs(),
            last_record_offset: 0,
            valid_end: 0,
            predecessor: None,
            dropped_bytes: 0,
            record_bytes_max: LOG_RECORD_SIZE_BYTES_MAX,
            hidden_record_start: None,
            state: State::Reading,
        }
    }

    /// Lowers the record size limit so tests can reach it cheaply.
    #[cfg(test)]
    pub(crate) fn set_record_bytes_max(&mut self, record_bytes_max: usize) {
        self.record_bytes_max = record_bytes_max;
    }

    /// Reads the next record into `record` (replacing its contents).
    /// Returns `Ok(true)` for a record, `Ok(false)` at the end of the log (or
    /// where the recovery mode stops), and `Error::Corruption` naming the
    /// file offset of the bad fragment when the mode does not allow what was
    /// found. I/O errors are returned as they are.
    pub fn read_record(&mut self, record: &mut Vec<u8>) -> Result<bool> {
        match &self.state {
            State::Reading => {}
            State::Done => return Ok(false),
            State::Failed(e) => return Err(e.clone()),
        }
        record.clear();
        let result = self.read_record_inner(record);
        match &result {
            Ok(true) => {}
            Ok(false) => self.state = State::Done,
            Err(e) => self.state = State::Failed(e.clone()),
        }
        if !matches!(result, Ok(true)) {
            record.clear();
        }
        result
    }

    /// File offset of the first fragment of the record last returned.
    pub fn last_record_offset(&self) -> u64 {
        self.last_record_offset
    }

    /// File offset just past the last record returned so far (or the
    /// log's [`PredecessorLog`] fragment, if no record followed it): at the
    /// end, how much of the log was read intact.
    pub(crate) fn valid_end(&self) -> u64 {
        self.valid_end
    }

    /// The log before this one, as its first fragment records it (known
    /// once the first [`read_record`](Self::read_record) has returned).
    pub(crate) fn predecessor(&self) -> Option<PredecessorLog> {
        self.predecessor
    }

    /// Bytes skipped as torn or corrupt so far (fragment headers and
    /// payloads of lost records and unparseable regions; zero padding and
    /// block trailers are not counted).
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes
    }

    // Each pass consumes at least one byte of the file or returns, so the
    // loop is bounded by the file's length.
    fn read_record_inner(&mut self, record: &mut Vec<u8>) -> Result<bool> {
        let mut partial: Option<Partial> = None;
        loop {
            let decision = match self.next_physical()? {
                Physical::Fragment(f) => match f.t {
                    FragmentType::Full | FragmentType::First => {
                        self.on_record_start(f, record, &mut partial)?
                    }
                    FragmentType::Middle | FragmentType::Last => {
                        self.on_continuation(f, record, &mut partial)?
                    }
                    FragmentType::PredecessorLog => self.on_predecessor(f, record, &mut partial)?,
                    FragmentType::Zero => {
                        unreachable!("next_physical returns Zero only as padding")
                    }
                },
                Physical::Padding { offset } => match partial.take() {
                    Some(p) => {
                        record.clear();
                        let what = format!(
                            "zero padding, expected Middle or Last of the record at offset {}",
                            p.offset
                        );
                        self.on_corruption(
                            Anomaly {
                                offset,
                                what,
                                bytes: p.file_bytes,
                            },
                            false,
                        )?
                    }
                    None => self.on_padding(offset)?,
                },
                Physical::Bad {
                    offset,
                    bytes,
                    mut what,
                } => {
                    let mut bytes = bytes;
                    if let Some(p) = partial.take() {
                        record.clear();
                        what = format!("{what} (in the record at offset {})", p.offset);
                        bytes += p.file_bytes;
                    }
                    self.on_corruption(
                        Anomaly {
                            offset,
                            what,
                            bytes,
                        },
                        false,
                    )?
                }
                Physical::Eof => match partial.take() {
                    Some(p) => {
                        record.clear();
                        let what = "record without Last fragment at end of file".to_string();
                        let a = Anomaly {
                            offset: p.offset,
                            what,
                            bytes: p.file_bytes,
                        };
                        self.on_corruption(a, false)?
                    }
                    None => Some(false),
                },
            };
            if let Some(r) = decision {
                return Ok(r);
            }
        }
    }

    /// A Full or First fragment: a record starts here.
    fn on_record_start(
        &mut self,
        f: Fragment,
        record: &mut Vec<u8>,
        partial: &mut Option<Partial>,
    ) -> Result<Decision> {
        if let Some(p) = partial.take() {
            // The record in progress never got its Last fragment.
            record.clear();
            let what = format!(
                "{:?} fragment, expected Middle or Last of the record at offset {}",
                f.t, p.offset
            );
            let a = Anomaly {
                offset: f.offset,
                what,
                bytes: p.file_bytes,
            };
            if let Some(r) = self.on_corruption(a, true)? {
                return Ok(Some(r));
            }
        }
        if f.len() > self.record_bytes_max {
            let a = self.oversized(f.offset, f.offset, f.file_bytes());
            return self.on_corruption(a, false);
        }
        record.extend_from_slice(&self.block[f.start..f.end]);
        if f.t == FragmentType::Full {
            self.last_record_offset = f.offset;
            self.valid_end = f.offset + f.file_bytes();
            return Ok(Some(true));
        }
        *partial = Some(Partial {
            offset: f.offset,
            file_bytes: f.file_bytes(),
        });
        Ok(None)
    }

    /// A Middle or Last fragment: the record in progress continues.
    fn on_continuation(
        &mut self,
        f: Fragment,
        record: &mut Vec<u8>,
        partial: &mut Option<Partial>,
    ) -> Result<Decision> {
        let Some(p) = partial.as_mut() else {
            let what = format!("{:?} fragment without First", f.t);
            let a = Anomaly {
                offset: f.offset,
                what,
                bytes: f.file_bytes(),
            };
            return self.on_corruption(a, false);
        };
        if record.len() + f.len() > self.record_bytes_max {
            let a = self.oversized(f.offset, p.offset, p.file_bytes + f.file_bytes());
            *partial = None;
            record.clear();
            return self.on_corruption(a, false);
        }
        record.extend_from_slice(&self.block[f.start..f.end]);
        p.file_bytes += f.file_bytes();
        if f.t == FragmentType::Last {
            self.last_record_offset = p.offset;
            self.valid_end = f.offset + f.file_bytes();
            *partial = None;
            return Ok(Some(true));
        }
        Ok(None)
    }

    /// A predecessor-log fragment: kept if it is the log's first fragment
    /// and well formed, a corruption otherwise (with the record in
    /// progress, if any: none can be at offset 0).
    fn on_predecessor(
        &mut self,
        f: Fragment,
        record: &mut Vec<u8>,
        partial: &mut Option<Partial>,
    ) -> Result<Decision> {
        let p = PredecessorLog::decode(&self.block[f.start..f.end]);
        let what = match p {
            Some(p) if f.offset == 0 => {
                self.predecessor = Some(p);
                self.valid_end = f.file_bytes();
                return Ok(None);
            }
            Some(_) => "predecessor-log fragment not at the start of the log".to_string(),
            None => format!(
                "predecessor-log fragment of {} bytes, expected {}",
                f.len(),
                PredecessorLog::ENCODED_LEN
            ),
        };
        let mut bytes = f.file_bytes();
        if let Some(p) = partial.take() {
            record.clear();
            bytes += p.file_bytes;
        }
        let a = Anomaly {
            offset: f.offset,
            what,
            bytes,
        };
        self.on_corruption(a, false)
    }

    fn oversized(&self, offset: u64, record_offset: u64, bytes: u64) -> Anomaly {
        Anomaly {
            offset,
            what: format!(
                "record at offset {record_offset} exceeds LOG_RECORD_SIZE_BYTES_MAX ({} bytes)",
                self.record_bytes_max
            ),
            bytes,
        }
    }

    fn corruption(&self, offset: u64, what: impl Into<String>) -> Error {
        Error::corruption(self.file_name.clone(), offset, what)
    }

    /// Applies the recovery mode to a torn or corrupt spot. `record_follows`
    /// says the fragment that revealed it starts a valid record.
    fn on_corruption(&mut self, a: Anomaly, record_follows: bool) -> Result<Decision> {
        match self.mode {
            WalRecoveryMode::AbsoluteConsistency => Err(self.corruption(a.offset, a.what)),
            WalRecoveryMode::PointInTimeRecovery => {
                self.dropped_bytes += a.bytes;
                Ok(Some(false))
            }
            WalRecoveryMode::SkipAnyCorruptedRecords => {
                self.dropped_bytes += a.bytes;
                Ok(None)
            }
            WalRecoveryMode::TolerateCorruptedTailRecords => {
                if record_follows {
                    return Err(self.corruption(a.offset, a.what));
                }
                if let Some(next) = self.hidden_record_start.take() {
                    let what = format!(
                        "{} (not at the tail: a record starts at offset {next})",
                        a.what
                    );
                    return Err(self.corruption(a.offset, what));
                }
                let tail = self.scan_tail()?;
                match tail.record_start {
                    Some(next) => Err(self.corruption(
                        a.offset,
                        format!(
                            "{} (not at the tail: a record starts at offset {next})",
                            a.what
                        ),
                    )),
                    None => {
                        self.dropped_bytes += a.bytes + tail.bytes;
                        Ok(Some(false))
                    }
                }
            }
        }
    }

    /// Applies the recovery mode to zero padding between records: the end of
    /// the log if nothing valid follows, a hole otherwise.
    fn on_padding(&mut self, offset: u64) -> Result<Decision> {
        match self.mode {
            WalRecoveryMode::SkipAnyCorruptedRecords => Ok(None),
            // Stopping here is right whether or not records follow the hole.
            WalRecoveryMode::PointInTimeRecovery => Ok(Some(false)),
            WalRecoveryMode::TolerateCorruptedTailRecords
            | WalRecoveryMode::AbsoluteConsistency => {
                let tail = self.scan_tail()?;
                if let Some(next) = tail.record_start {
                    return Err(self.corruption(
                        offset,
                        format!("zero padding followed by a record at offset {next}"),
                    ));
                }
                if tail.bytes > 0 && self.mode == WalRecoveryMode::AbsoluteConsistency {
                    return Err(self.corruption(
                        offset,
                        format!(
                            "zero padding followed by {} bytes that are not padding",
                            tail.bytes
                        ),
                    ));
                }
                self.dropped_bytes += tail.bytes;
                Ok(Some(false))
            }
        }
    }

    /// Reads to the end of the file, looking for the start of a valid record.
    fn scan_tail(&mut self) -> Result<Tail> {
        let mut bytes = 0u64;
        // Bounded by the file's length: each pass consumes bytes or ends.
        loop {
            match self.next_physical()? {
                Physical::Fragment(f) => {
                    if matches!(f.t, FragmentType::Full | FragmentType::First) {
                        return Ok(Tail {
                            record_start: Some(f.offset),
                            bytes,
                        });
                    }
                    bytes += f.file_bytes();
                }
                Physical::Padding { .. } => {}
                Physical::Bad { bytes: b, .. } => {
                    if let Some(next) = self.hidden_record_start.take() {
                        return Ok(Tail {
                            record_start: Some(next),
                            bytes,
                        });
                    }
                    bytes += b;
                }
                Physical::Eof => {
                    return Ok(Tail {
                        record_start: None,
                        bytes,
                    })
                }
            }
        }
    }

    /// Parses the next fragment. Consumes at least one byte unless it
    /// returns `Eof`.
    fn next_physical(&mut self) -> Result<Physical> {
        self.hidden_record_start = None;
        if self.block_len - self.pos < HEADER_SIZE && !self.eof {
            // Whatever is left of a full block is the trailer; skip it.
            self.read_block()?;
        }
        let offset = self.block_file_offset + self.pos as u64;
        let avail = self.block_len - self.pos;
        let rest = self.block.get(self.pos..self.block_len).unwrap_or_default();
        let Some(header) = decode_header(rest) else {
            // Only the last, short block can end with less than a header.
            self.pos = self.block_len;
            if avail == 0 {
                return Ok(Physical::Eof);
            }
            return Ok(Physical::Bad {
                offset,
                bytes: avail as u64,
                what: format!(
                    "truncated fragment header: {avail} of {HEADER_SIZE} bytes before end of file"
                ),
            });
        };
        if header.type_byte == FragmentType::Zero as u8 && header.payload_len == 0 {
            self.pos = self.block_len;
            return Ok(Physical::Padding { offset });
        }
        Ok(self.check_fragment(offset, header))
    }

    /// Validates the fragment whose header is at `pos` and consumes it, or
    /// on any failure but an unknown type the rest of the block: without a
    /// trustworthy length the next header cannot be found.
    fn check_fragment(&mut self, offset: u64, header: Header) -> Physical {
        let avail = self.block_len - self.pos;
        let len = header.payload_len;
        let room = BLOCK_SIZE - self.pos - HEADER_SIZE;
        let start = self.pos + HEADER_SIZE;
        let bad = if len > room {
            format!("fragment length {len} exceeds block ({room} bytes left after the header)")
        } else if let Some(payload) = self
            .block
            .get(..self.block_len)
            .and_then(|b| b.get(start..start + len))
        {
            let type_crc = match self.type_crcs.get(usize::from(header.type_byte)) {
                Some(&c) => c,
                None => crc32c(&[header.type_byte]),
            };
            if crc32c_extend(type_crc, payload) == unmask(header.masked_crc) {
                self.pos = start + len;
                return match FragmentType::from_byte(header.type_byte) {
                    Some(t) if t != FragmentType::Zero => Physical::Fragment(Fragment {
                        t,
                        offset,
                        start,
                        end: start + len,
                    }),
                    // The checksum holds, so the length does: skip just this
                    // fragment.
                    _ => Physical::Bad {
                        offset,
                        bytes: (HEADER_SIZE + len) as u64,
                        what: format!("unknown fragment type {}", header.type_byte),
                    },
                };
            }
            "checksum mismatch".to_string()
        } else {
            format!(
                "truncated fragment: length {len}, {} bytes before end of file",
                avail - HEADER_SIZE
            )
        };
        self.hidden_record_start = self.find_record_start(self.pos + 1);
        self.pos = self.block_len;
        Physical::Bad {
            offset,
            bytes: avail as u64,
            what: bad,
        }
    }

    /// The file offset of the first valid Full or First fragment that
    /// starts in the current block at or after `from`, trying every offset:
    /// a damaged length hides the fragments after it, and one that starts a
    /// record shows the damage is not a torn last write. A false match
    /// needs a 32-bit checksum to hold by chance.
    fn find_record_start(&self, from: usize) -> Option<u64> {
        let block = self.block.get(..self.block_len)?;
        let last = block.len().checked_sub(HEADER_SIZE)?;
        (from..=last).find_map(|p| {
            let h = decode_header(block.get(p..)?)?;
            let t = FragmentType::from_byte(h.type_byte)?;
            if !matches!(t, FragmentType::Full | FragmentType::First) {
                return None;
            }
            let start = p + HEADER_SIZE;
            let payload = block.get(start..start.checked_add(h.payload_len)?)?;
            let type_crc = *self.type_crcs.get(usize::from(h.type_byte))?;
            (crc32c_extend(type_crc, payload) == unmask(h.masked_crc))
                .then_some(self.block_file_offset + p as u64)
        })
    }

    /// Replaces the buffer with the next block; a short block means the end
    /// of the file.
    fn read_block(&mut self) -> Result<()> {
        self.block_file_offset += self.block_len as u64;
        self.pos = 0;
        self.block_len = 0;
        // Each pass adds at least one byte or ends the file.
        while self.block_len < BLOCK_SIZE {
            let buf = &mut self.block[self.block_len..];
            let n = self.file.read(buf)?;
            if n == 0 {
                self.eof = true;
                break;
            }
            // A file system that reports more than it was asked for is not
            // believed beyond the buffer.
            self.block_len += n.min(buf.len());
        }
        Ok(())
    }
}

impl fmt::Debug for LogReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogReader")
            .field("file_name", &self.file_name)
            .field("mode", &self.mode)
            .field("block_file_offset", &self.block_file_offset)
            .field("pos", &self.pos)
            .field("eof", &self.eof)
            .field("last_record_offset", &self.last_record_offset)
            .field("dropped_bytes", &self.dropped_bytes)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}
