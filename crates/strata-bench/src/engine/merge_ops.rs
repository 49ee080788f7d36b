//! db_bench's `--merge_operator` choices, the same functions for both
//! engines: `uint64add` (RocksDB's `UInt64AddOperator`: 8-byte
//! little-endian counters; an operand or value of another size counts as
//! 0, as RocksDB's does), `put` (`PutOperator`: the newest operand wins) and
//! `stringappend` (`StringAppendOperator`: values joined by `,`). All three
//! are associative, so each serves as its own partial merge.

use crate::error::{Error, Result};

/// A merge operator db_bench can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeOperatorKind {
    UInt64Add,
    Put,
    StringAppend,
}

impl MergeOperatorKind {
    /// `--merge_operator`: db_bench's short names and RocksDB's class
    /// names; empty for none.
    pub fn parse(name: &str) -> Result<Option<MergeOperatorKind>> {
        Ok(Some(match name {
            "" => return Ok(None),
            "uint64add" | "UInt64AddOperator" => MergeOperatorKind::UInt64Add,
            "put" | "PutOperator" => MergeOperatorKind::Put,
            "stringappend" | "StringAppendOperator" => MergeOperatorKind::StringAppend,
            other => {
                return Err(Error::Usage(format!(
                    "--merge_operator={other}: expected uint64add, put or stringappend"
                )))
            }
        }))
    }

    /// The operator's name, as RocksDB's class names it (and so as both
    /// engines record it).
    pub fn name(self) -> &'static str {
        match self {
            MergeOperatorKind::UInt64Add => "UInt64AddOperator",
            MergeOperatorKind::Put => "PutOperator",
            MergeOperatorKind::StringAppend => "StringAppendOperator",
        }
    }

    /// The merged value of `operands` (oldest first) over `base`.
    pub fn merge<'a>(
        self,
        base: Option<&[u8]>,
        operands: impl Iterator<Item = &'a [u8]>,
    ) -> Vec<u8> {
        match self {
            MergeOperatorKind::UInt64Add => {
                let counter = |v: &[u8]| <[u8; 8]>::try_from(v).map_or(0, u64::from_le_bytes);
                let sum = operands.fold(base.map_or(0, counter), |sum, op| {
                    sum.wrapping_add(counter(op))
                });
                sum.to_le_bytes().to_vec()
            }
            MergeOperatorKind::Put => match operands.last() {
                Some(op) => op.to_vec(),
                None => base.unwrap_or_default().to_vec(),
            },
            MergeOperatorKind::StringAppend => {
                let mut out = base.map(<[u8]>::to_vec);
                for op in operands {
                    match &mut out {
                        Some(v) => {
                            v.push(b',');
                            v.extend_from_slice(op);
                        }
                        None => out = Some(op.to_vec()),
                    }
                }
                out.unwrap_or_default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operator_merges_as_rocksdb_s() {
        fn ops<'a, 'b>(v: &'b [&'a [u8]]) -> impl Iterator<Item = &'a [u8]> + 'b {
            v.iter().copied()
        }
        let add = MergeOperatorKind::UInt64Add;
        let two = 2u64.to_le_bytes();
        let five = 5u64.to_le_bytes();
        assert_eq!(
            add.merge(Some(&two), ops(&[&five, b"bad"])),
            7u64.to_le_bytes()
        );
        assert_eq!(add.merge(None, ops(&[])), 0u64.to_le_bytes());
        let put = MergeOperatorKind::Put;
        assert_eq!(put.merge(Some(b"old"), ops(&[b"a", b"b"])), b"b");
        let append = MergeOperatorKind::StringAppend;
        assert_eq!(append.merge(Some(b"x"), ops(&[b"a", b"b"])), b"x,a,b");
        assert_eq!(append.merge(None, ops(&[b"a"])), b"a");
        assert_eq!(MergeOperatorKind::parse("").unwrap(), None);
        assert!(MergeOperatorKind::parse("max").is_err());
    }
}
