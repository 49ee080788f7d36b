//! Options as a TOML file: what a database writes to its `OPTIONS` file on
//! every open, and what `Options::from_file` (and the tools'
//! `--options-file`) read. Every key is the `rocksdb` crate's setter name
//! without `set_`; block-based table options are in a
//! `[block_based_table_factory]` table, packed ones in
//! `[packed_table_factory]`. The format is in `docs/options_file.md`.
//!
//! What cannot be written as text is left out: the file system, block
//! property collectors, user comparators, prefix extractors and
//! partitioners other than the built-in ones. A file naming one of those
//! is refused with the key.

use std::path::Path;
use std::sync::Arc;

use toml::{Table, Value};

use crate::error::{Error, Result};
use crate::key::{BytewiseComparator, ReverseBytewiseComparator, SliceTransform};
use crate::sst::DataBlockIndexType;
use crate::wal::WalRecoveryMode;

use super::options::{BlockBasedOptions, Cache, Options, PackedTableOptions};
use super::sst_partitioner::SstPartitionerFactory;

fn recovery_mode_name(m: WalRecoveryMode) -> &'static str {
    match m {
        WalRecoveryMode::TolerateCorruptedTailRecords => "tolerate_corrupted_tail_records",
        WalRecoveryMode::AbsoluteConsistency => "absolute_consistency",
        WalRecoveryMode::PointInTimeRecovery => "point_in_time_recovery",
        WalRecoveryMode::SkipAnyCorruptedRecords => "skip_any_corrupted_records",
    }
}

fn recovery_mode(name: &str) -> Option<WalRecoveryMode> {
    Some(match name {
        "tolerate_corrupted_tail_records" => WalRecoveryMode::TolerateCorruptedTailRecords,
        "absolute_consistency" => WalRecoveryMode::AbsoluteConsistency,
        "point_in_time_recovery" => WalRecoveryMode::PointInTimeRecovery,
        "skip_any_corrupted_records" => WalRecoveryMode::SkipAnyCorruptedRecords,
        _ => return None,
    })
}

fn int(v: u64) -> Value {
    Value::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

impl Options {
    /// The options as TOML, as a database writes them to its `OPTIONS`
    /// file. [`Options::from_toml`] reads them back.
    pub fn to_toml(&self) -> String {
        let mut t = Table::new();
        t.insert("create_if_missing".into(), self.create_if_missing.into());
        t.insert("error_if_exists".into(), self.error_if_exists.into());
        t.insert(
            "write_buffer_size".into(),
            int(self.write_buffer_size as u64),
        );
        t.insert(
            "max_write_buffer_number".into(),
            int(self.max_write_buffer_number as u64),
        );
        t.insert(
            "target_file_size_base".into(),
            int(self.target_file_size_base),
        );
        t.insert(
            "target_file_size_multiplier".into(),
            int(self.target_file_size_multiplier),
        );
        t.insert(
            "max_bytes_for_level_base".into(),
            int(self.max_bytes_for_level_base),
        );
        t.insert(
            "max_bytes_for_level_multiplier".into(),
            self.max_bytes_for_level_multiplier.into(),
        );
        t.insert(
            "level_zero_file_num_compaction_trigger".into(),
            int(self.level0_file_num_compaction_trigger as u64),
        );
        t.insert(
            "level_zero_slowdown_writes_trigger".into(),
            int(self.level0_slowdown_writes_trigger as u64),
        );
        t.insert(
            "level_zero_stop_writes_trigger".into(),
            int(self.level0_stop_writes_trigger as u64),
        );
        t.insert(
            "max_background_jobs".into(),
            int(self.max_background_jobs as u64),
        );
        t.insert(
            "max_subcompactions".into(),
            int(u64::from(self.max_subcompactions)),
        );
        t.insert("use_direct_reads".into(), self.use_direct_reads.into());
        t.insert(
            "compaction_readahead_size".into(),
            int(self.compaction_readahead_size),
        );
        t.insert(
            "use_direct_io_for_flush_and_compaction".into(),
            self.use_direct_io_for_flush_and_compaction.into(),
        );
        t.insert(
            "max_open_files".into(),
            i64::from(self.max_open_files).into(),
        );
        t.insert(
            "skip_checking_sst_file_sizes_on_db_open".into(),
            self.skip_checking_sst_file_sizes_on_db_open.into(),
        );
        t.insert("paranoid_checks".into(), self.paranoid_checks.into());
        t.insert(
            "allow_concurrent_memtable_write".into(),
            self.allow_concurrent_memtable_write.into(),
        );
        t.insert(
            "enable_pipelined_write".into(),
            self.enable_pipelined_write.into(),
        );
        t.insert("compression_type".into(), self.compression.name().into());
        t.insert(
            "disable_auto_compactions".into(),
            self.disable_auto_compactions.into(),
        );
        t.insert(
            "read_triggered_compactions".into(),
            self.read_triggered_compactions.into(),
        );
        t.insert(
            "level_compaction_dynamic_level_bytes".into(),
            self.level_compaction_dynamic_level_bytes.into(),
        );
        t.insert(
            "max_compaction_bytes".into(),
            int(self.max_compaction_bytes),
        );
        t.insert(
            "wal_recovery_mode".into(),
            recovery_mode_name(self.wal_recovery_mode).into(),
        );
        t.insert("comparator".into(), self.comparator.name().into());
        if let Some(p) = &self.prefix_extractor {
            t.insert("prefix_extractor".into(), p.name().into());
        }
        if let Some(p) = &self.sst_partitioner {
            t.insert(
                "sst_partitioner_factory".into(),
                p.partitioner().name().into(),
            );
        }
        t.insert(
            "stream_aware_cutting".into(),
            self.stream_aware_cutting.into(),
        );
        let b = &self.table;
        let mut bt = Table::new();
        bt.insert("block_size".into(), int(b.block_size as u64));
        bt.insert(
            "block_size_deviation".into(),
            Value::Integer(i64::from(b.block_size_deviation)),
        );
        bt.insert(
            "block_restart_interval".into(),
            int(b.block_restart_interval as u64),
        );
        bt.insert(
            "index_block_restart_interval".into(),
            int(b.index_block_restart_interval as u64),
        );
        bt.insert("bloom_filter".into(), b.bloom_bits_per_key.into());
        match (&b.cache, b.no_block_cache) {
            (_, true) => {
                bt.insert("block_cache".into(), 0.into());
            }
            (Some(c), false) => {
                bt.insert("block_cache".into(), int(c.inner.capacity() as u64));
            }
            (None, false) => {}
        }
        bt.insert(
            "data_block_index_type".into(),
            match b.data_block_index_type {
                DataBlockIndexType::BinarySearch => "binary_search",
                DataBlockIndexType::BinaryAndHash => "binary_and_hash",
            }
            .into(),
        );
        bt.insert(
            "data_block_hash_ratio".into(),
            b.data_block_hash_ratio.into(),
        );
        bt.insert(
            "cache_index_and_filter_blocks".into(),
            b.cache_index_and_filter_blocks.into(),
        );
        bt.insert(
            "pin_l0_filter_and_index_blocks_in_cache".into(),
            b.pin_l0_filter_and_index_blocks_in_cache.into(),
        );
        bt.insert("whole_key_filtering".into(), b.whole_key_filtering.into());
        bt.insert(
            "cache_compressed_under_direct_reads".into(),
            b.cache_compressed_under_direct_reads.into(),
        );
        t.insert("block_based_table_factory".into(), Value::Table(bt));
        if let Some(p) = &self.packed {
            let mut pt = Table::new();
            pt.insert("from_level".into(), int(p.from_level as u64));
            pt.insert("lazy_checksums".into(), p.lazy_checksums.into());
            t.insert("packed_table_factory".into(), Value::Table(pt));
        }
        format!("# Strata options (keys: the rocksdb crate's setter names without `set_`).\n{t}")
    }

    /// Reads options from the TOML file at `path` (see
    /// [`Options::from_toml`]).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Options> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("reading options file {}", path.display()), e))?;
        Options::from_toml(&text, &path.display().to_string())
    }

    /// Options from TOML text (`what` names it in errors): defaults, then
    /// every key the text sets. An unknown key, a value of the wrong type
    /// or out of range, and a comparator or extractor that cannot be made
    /// from its name are `InvalidArgument` errors naming the key.
    pub fn from_toml(text: &str, what: &str) -> Result<Options> {
        let table: Table = text
            .parse()
            .map_err(|e| Error::invalid_argument(format!("{what}: not valid TOML: {e}")))?;
        let mut o = Options::default();
        for (key, value) in &table {
            apply(&mut o, key, value)
                .map_err(|why| Error::invalid_argument(format!("{what}: {key}: {why}")))?;
        }
        Ok(o)
    }
}

type Check<T> = std::result::Result<T, String>;

fn as_bool(v: &Value) -> Check<bool> {
    v.as_bool()
        .ok_or_else(|| format!("expected true or false, got {v}"))
}

fn as_u64(v: &Value) -> Check<u64> {
    v.as_integer()
        .and_then(|i| u64::try_from(i).ok())
        .ok_or_else(|| format!("expected a non-negative integer, got {v}"))
}

fn as_usize(v: &Value) -> Check<usize> {
    as_u64(v).and_then(|u| usize::try_from(u).map_err(|_| format!("{u} is too large")))
}

fn as_i32(v: &Value) -> Check<i32> {
    v.as_integer()
        .and_then(|i| i32::try_from(i).ok())
        .ok_or_else(|| format!("expected a 32-bit integer, got {v}"))
}

fn as_f64(v: &Value) -> Check<f64> {
    match v {
        Value::Float(f) => Ok(*f),
        Value::Integer(i) => Ok(*i as f64),
        _ => Err(format!("expected a number, got {v}")),
    }
}

fn as_str(v: &Value) -> Check<&str> {
    v.as_str()
        .ok_or_else(|| format!("expected a string, got {v}"))
}

fn apply(o: &mut Options, key: &str, v: &Value) -> Check<()> {
    match key {
        "create_if_missing" => o.create_if_missing(as_bool(v)?),
        "error_if_exists" => o.set_error_if_exists(as_bool(v)?),
        "write_buffer_size" => o.set_write_buffer_size(as_usize(v)?),
        "max_write_buffer_number" => o.set_max_write_buffer_number(as_i32(v)?),
        "target_file_size_base" => o.set_target_file_size_base(as_u64(v)?),
        "target_file_size_multiplier" => o.set_target_file_size_multiplier(as_i32(v)?),
        "max_bytes_for_level_base" => o.set_max_bytes_for_level_base(as_u64(v)?),
        "max_bytes_for_level_multiplier" => o.set_max_bytes_for_level_multiplier(as_f64(v)?),
        "level_zero_file_num_compaction_trigger" => {
            o.set_level_zero_file_num_compaction_trigger(as_i32(v)?)
        }
        "level_zero_slowdown_writes_trigger" => {
            o.set_level_zero_slowdown_writes_trigger(as_i32(v)?)
        }
        "level_zero_stop_writes_trigger" => o.set_level_zero_stop_writes_trigger(as_i32(v)?),
        "max_background_jobs" => o.set_max_background_jobs(as_i32(v)?),
        "max_subcompactions" => o.set_max_subcompactions(as_i32(v)?.max(0) as u32),
        "use_direct_reads" => o.set_use_direct_reads(as_bool(v)?),
        "compaction_readahead_size" => o.set_compaction_readahead_size(as_usize(v)?),
        "use_direct_io_for_flush_and_compaction" => {
            o.set_use_direct_io_for_flush_and_compaction(as_bool(v)?)
        }
        "max_open_files" => o.set_max_open_files(as_i32(v)?),
        "paranoid_checks" => o.set_paranoid_checks(as_bool(v)?),
        "allow_concurrent_memtable_write" => o.set_allow_concurrent_memtable_write(as_bool(v)?),
        "enable_pipelined_write" => o.set_enable_pipelined_write(as_bool(v)?),
        "skip_checking_sst_file_sizes_on_db_open" => {
            o.set_skip_checking_sst_file_sizes_on_db_open(as_bool(v)?)
        }
        "compression_type" => {
            o.set_compression_type(as_str(v)?.parse().map_err(|e: Error| e.to_string())?)
        }
        "disable_auto_compactions" => o.set_disable_auto_compactions(as_bool(v)?),
        "read_triggered_compactions" => o.set_read_triggered_compactions(as_bool(v)?),
        "level_compaction_dynamic_level_bytes" => {
            o.set_level_compaction_dynamic_level_bytes(as_bool(v)?)
        }
        "max_compaction_bytes" => o.set_max_compaction_bytes(as_u64(v)?),
        "wal_recovery_mode" => {
            let name = as_str(v)?;
            o.set_wal_recovery_mode(recovery_mode(name).ok_or_else(|| {
                format!(
                    "{name:?}: expected tolerate_corrupted_tail_records, absolute_consistency, \
                     point_in_time_recovery or skip_any_corrupted_records"
                )
            })?)
        }
        "comparator" => match as_str(v)? {
            "leveldb.BytewiseComparator" => o.set_comparator_object(Arc::new(BytewiseComparator)),
            "rocksdb.ReverseBytewiseComparator" => {
                o.set_comparator_object(Arc::new(ReverseBytewiseComparator))
            }
            other => {
                return Err(format!(
                    "{other:?} is not a built-in comparator (leveldb.BytewiseComparator or \
                     rocksdb.ReverseBytewiseComparator): set it in code"
                ))
            }
        },
        "prefix_extractor" => {
            let name = as_str(v)?;
            let t = if name == SliceTransform::create_noop().name() {
                SliceTransform::create_noop()
            } else if let Some(n) = name
                .strip_prefix("rocksdb.FixedPrefix.")
                .and_then(|n| n.parse().ok())
            {
                SliceTransform::create_fixed_prefix(n)
            } else {
                return Err(format!(
                    "{name:?} is not a built-in extractor (rocksdb.FixedPrefix.N or {}): set it in code",
                    SliceTransform::create_noop().name()
                ));
            };
            o.set_prefix_extractor(t)
        }
        "sst_partitioner_factory" => {
            let name = as_str(v)?;
            let n = name
                .strip_prefix("strata.FixedPrefix.")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| {
                    format!("{name:?} is not a built-in partitioner (strata.FixedPrefix.N): set it in code")
                })?;
            o.set_sst_partitioner_factory(SstPartitionerFactory::fixed_prefix(n))
        }
        "stream_aware_cutting" => o.set_stream_aware_cutting(as_bool(v)?),
        "block_based_table_factory" => {
            let t = v.as_table().ok_or("expected a table")?;
            let mut b = BlockBasedOptions::default();
            for (k, v) in t {
                apply_block(&mut b, k, v).map_err(|why| format!("{k}: {why}"))?;
            }
            o.set_block_based_table_factory(&b)
        }
        "packed_table_factory" => {
            let t = v.as_table().ok_or("expected a table")?;
            let mut p = PackedTableOptions::default();
            for (k, v) in t {
                match k.as_str() {
                    "from_level" => p.set_from_level(as_i32(v).map_err(|w| format!("{k}: {w}"))?),
                    "lazy_checksums" => {
                        p.set_lazy_checksums(as_bool(v).map_err(|w| format!("{k}: {w}"))?)
                    }
                    _ => return Err(format!("{k}: unknown key")),
                }
            }
            o.set_packed_table_factory(&p)
        }
        _ => return Err("unknown key".into()),
    }
    Ok(())
}

fn apply_block(b: &mut BlockBasedOptions, key: &str, v: &Value) -> Check<()> {
    match key {
        "block_size" => b.set_block_size(as_usize(v)?),
        "block_size_deviation" => b.set_block_size_deviation(as_i32(v)?),
        "block_restart_interval" => b.set_block_restart_interval(as_i32(v)?),
        "index_block_restart_interval" => b.set_index_block_restart_interval(as_i32(v)?),
        "bloom_filter" => b.set_bloom_filter(as_f64(v)?, false),
        "block_cache" => match as_usize(v)? {
            0 => b.disable_cache(),
            n => b.set_block_cache(&Cache::new_lru_cache(n)),
        },
        "data_block_index_type" => b.set_data_block_index_type(match as_str(v)? {
            "binary_search" => DataBlockIndexType::BinarySearch,
            "binary_and_hash" => DataBlockIndexType::BinaryAndHash,
            other => {
                return Err(format!(
                    "{other:?}: expected binary_search or binary_and_hash"
                ))
            }
        }),
        "data_block_hash_ratio" => b.set_data_block_hash_ratio(as_f64(v)?),
        "cache_index_and_filter_blocks" => b.set_cache_index_and_filter_blocks(as_bool(v)?),
        "pin_l0_filter_and_index_blocks_in_cache" => {
            b.set_pin_l0_filter_and_index_blocks_in_cache(as_bool(v)?)
        }
        "whole_key_filtering" => b.set_whole_key_filtering(as_bool(v)?),
        "cache_compressed_under_direct_reads" => {
            b.set_cache_compressed_under_direct_reads(as_bool(v)?)
        }
        _ => return Err("unknown key".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_through_toml() {
        let mut o = Options::default();
        o.set_write_buffer_size(1 << 20);
        o.set_max_bytes_for_level_multiplier(4.5);
        o.set_compression_type("zstd".parse().unwrap());
        o.set_wal_recovery_mode(WalRecoveryMode::AbsoluteConsistency);
        o.set_read_triggered_compactions(false);
        o.set_comparator_object(Arc::new(ReverseBytewiseComparator));
        o.set_prefix_extractor(SliceTransform::create_fixed_prefix(6));
        o.set_sst_partitioner_factory(SstPartitionerFactory::fixed_prefix(3));
        let mut b = BlockBasedOptions::default();
        b.set_block_size(8192);
        b.set_block_size_deviation(25);
        b.set_cache_compressed_under_direct_reads(false);
        b.set_bloom_filter(12.5, false);
        b.set_block_cache(&Cache::new_lru_cache(1 << 22));
        b.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
        o.set_block_based_table_factory(&b);
        let mut p = PackedTableOptions::default();
        p.set_from_level(2);
        o.set_packed_table_factory(&p);
        let text = o.to_toml();
        let back = Options::from_toml(&text, "test").unwrap();
        assert_eq!(back.to_toml(), text);
        assert_eq!(back.write_buffer_size, 1 << 20);
        assert!(!back.read_triggered_compactions);
        assert_eq!(back.comparator.name(), "rocksdb.ReverseBytewiseComparator");
        assert_eq!(back.packed.as_ref().unwrap().from_level, 2);
        assert_eq!(back.table.block_size_deviation, 25);
        assert!(!back.table.cache_compressed_under_direct_reads);
        assert_eq!(back.table.cache.as_ref().unwrap().inner.capacity(), 1 << 22);
    }

    #[test]
    fn bad_files_are_refused_naming_the_key() {
        let err = |text: &str| Options::from_toml(text, "f").unwrap_err().to_string();
        assert!(err("write_buffer_sise = 5").contains("write_buffer_sise: unknown key"));
        assert!(err("write_buffer_size = \"big\"").contains("write_buffer_size: expected"));
        assert!(err("write_buffer_size = -1").contains("write_buffer_size"));
        assert!(err("compression_type = \"lzma\"").contains("compression_type"));
        assert!(err("comparator = \"my.Comparator\"").contains("set it in code"));
        assert!(
            err("[block_based_table_factory]\nblock_sise = 1").contains("block_sise: unknown key")
        );
        assert!(err("[packed_table_factory]\nfrom_level = \"x\"").contains("from_level"));
        assert!(err("not toml [").contains("not valid TOML"));
    }
}
