//! Prefix extractors, as `rocksdb::SliceTransform`: a function from a user
//! key to its prefix (a leading slice of the key), defined on a domain of
//! keys. The prefix names a group of keys that a scan treats as one row:
//! with keys `row + version`, `DBRawIterator::next_prefix` jumps from one
//! row to the next.
//!
//! A key outside the domain has no prefix; the prefix steps then treat it
//! as its own group (they step over its versions only).

use std::fmt;

/// The prefix function of a [`SliceTransform::create`] extractor, as the
/// `rocksdb` crate's `TransformFn`. It must return a leading slice of its
/// argument.
pub type TransformFn<'a> = fn(&'a [u8]) -> &'a [u8];

/// The domain test of a [`SliceTransform::create`] extractor, as the
/// `rocksdb` crate's `InDomainFn`.
pub type InDomainFn = fn(&[u8]) -> bool;

#[derive(Clone)]
enum Kind {
    /// The first `n` bytes; keys shorter than `n` are outside the domain.
    Fixed(usize),
    /// The whole key.
    Noop,
    /// User functions.
    Custom {
        transform: for<'a> fn(&'a [u8]) -> &'a [u8],
        in_domain: Option<InDomainFn>,
    },
}

/// A prefix extractor, as `rocksdb::SliceTransform`. Set it with
/// `Options::set_prefix_extractor`.
///
/// ```
/// use strata_kv::SliceTransform;
///
/// // Rows of an 8-byte id, each stored in many versions.
/// let rows = SliceTransform::create_fixed_prefix(8);
/// assert_eq!(rows.prefix(b"row00001-v1"), Some(&b"row00001"[..]));
/// assert_eq!(rows.prefix(b"short"), None);
///
/// // Variable-length rows followed by an 8-byte version suffix.
/// fn strip_version(key: &[u8]) -> &[u8] {
///     &key[..key.len() - 8]
/// }
/// fn has_version(key: &[u8]) -> bool {
///     key.len() >= 8
/// }
/// let mvcc = SliceTransform::create("strip-version", strip_version, Some(has_version));
/// assert_eq!(mvcc.prefix(b"user42\0\0\0\0\0\0\0\x07"), Some(&b"user42"[..]));
/// ```
#[derive(Clone)]
pub struct SliceTransform {
    name: String,
    kind: Kind,
}

impl fmt::Debug for SliceTransform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SliceTransform")
            .field("name", &self.name)
            .finish()
    }
}

impl SliceTransform {
    /// An extractor from user functions: `transform` returns the prefix of
    /// a key in the domain (a leading slice of it); `in_domain` says which
    /// keys have one (`None`: every key). A returned slice that is not a
    /// leading slice of the key is treated as out of the domain.
    pub fn create(
        name: &str,
        transform: for<'a> fn(&'a [u8]) -> &'a [u8],
        in_domain: Option<InDomainFn>,
    ) -> SliceTransform {
        SliceTransform {
            name: name.to_string(),
            kind: Kind::Custom {
                transform,
                in_domain,
            },
        }
    }

    /// The first `len` bytes of a key; shorter keys are outside the domain.
    /// Named `rocksdb.FixedPrefix.<len>`, as RocksDB names it.
    pub fn create_fixed_prefix(len: usize) -> SliceTransform {
        SliceTransform {
            name: format!("rocksdb.FixedPrefix.{len}"),
            kind: Kind::Fixed(len),
        }
    }

    /// The whole key is its prefix. Named `rocksdb.Noop`.
    pub fn create_noop() -> SliceTransform {
        SliceTransform {
            name: "rocksdb.Noop".to_string(),
            kind: Kind::Noop,
        }
    }

    /// The name recorded in every table's properties.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The prefix of `key`, or `None` when `key` is outside the domain.
    #[inline]
    pub fn prefix<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        match &self.kind {
            Kind::Fixed(n) => key.get(..*n),
            Kind::Noop => Some(key),
            Kind::Custom {
                transform,
                in_domain,
            } => {
                if in_domain.is_some_and(|f| !f(key)) {
                    return None;
                }
                let p = transform(key);
                // Only a leading slice of the key is a prefix: anything else
                // would break the ordering the prefix steps rely on.
                key.starts_with(p).then_some(p)
            }
        }
    }

    /// `Some(n)` for a fixed-length extractor: then a key has prefix `p`
    /// exactly when it is at least `n` bytes long and starts with `p`, so
    /// the keys of one prefix form one interval of every byte order, and
    /// shared key bytes and index separators decide membership.
    #[inline]
    pub(crate) fn fixed_len(&self) -> Option<usize> {
        match self.kind {
            Kind::Fixed(n) => Some(n),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_noop_and_custom() {
        let f = SliceTransform::create_fixed_prefix(3);
        assert_eq!(f.name(), "rocksdb.FixedPrefix.3");
        assert_eq!(f.prefix(b"abcd"), Some(&b"abc"[..]));
        assert_eq!(f.prefix(b"abc"), Some(&b"abc"[..]));
        assert_eq!(f.prefix(b"ab"), None);
        assert_eq!(f.fixed_len(), Some(3));

        let n = SliceTransform::create_noop();
        assert_eq!(n.prefix(b"xyz"), Some(&b"xyz"[..]));
        assert_eq!(n.prefix(b""), Some(&b""[..]));
        assert_eq!(n.fixed_len(), None);

        fn first_two(k: &[u8]) -> &[u8] {
            &k[..k.len().min(2)]
        }
        fn long(k: &[u8]) -> bool {
            k.len() > 2
        }
        let c = SliceTransform::create("two", first_two, Some(long));
        assert_eq!(c.prefix(b"abc"), Some(&b"ab"[..]));
        assert_eq!(c.prefix(b"ab"), None);
        let c = SliceTransform::create("two", first_two, None);
        assert_eq!(c.prefix(b"ab"), Some(&b"ab"[..]));
    }

    #[test]
    fn a_transform_that_is_not_a_leading_slice_is_out_of_domain() {
        fn last(k: &[u8]) -> &[u8] {
            &k[k.len().saturating_sub(1)..]
        }
        let c = SliceTransform::create("last", last, None);
        assert_eq!(c.prefix(b"ab"), None);
        assert_eq!(c.prefix(b"aa"), Some(&b"a"[..]));
    }
}
