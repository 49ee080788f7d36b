//! Keys: user-key comparators, and internal keys (user key + sequence + kind).

mod comparator;
pub(crate) mod internal_key;
pub(crate) mod prefix_search;
mod slice_transform;

pub use comparator::{BuiltinOrder, BytewiseComparator, Comparator, ReverseBytewiseComparator};
pub(crate) use internal_key::{build_internal_key, compare_internal};
pub(crate) use internal_key::{
    extract_user_key, pack_trailer, parse_entry_key, InternalKeyComparator, TRAILER_BYTES,
};
pub use internal_key::{
    parse_internal_key, InternalKey, ParsedInternalKey, SequenceNumber, ValueKind,
    MAX_SEQUENCE_NUMBER,
};
pub use slice_transform::{InDomainFn, SliceTransform, TransformFn};
