//! Counts, in data blocks built as a table builds them, how many point
//! lookups the data block hash index sends straight to a restart interval
//! and how many land in a collision bucket and fall back to binary search.
//!
//! ```text
//! cargo run --release -p strata --example hash_index_census -- [--num=N]
//!     [--value_size=B] [--block_size=B] [--block_restart_interval=N]
//!     [--data_block_hash_table_util_ratio=R]
//! ```
//!
//! Keys are db_bench's for `--key_size=8` (the integers `0..num` as 8-byte
//! big-endian strings, one version each, written in order as `fillseq`
//! does); defaults are W2's (`--value_size=40 --block_size=16384
//! --block_restart_interval=16`, ratio 0.75). Values are zero bytes: only
//! their length matters here. Blocks are cut as the table builder cuts
//! them (once the size estimate reaches the block size).

use strata_kv::bench_internals::{Block, BlockBuilder, BUCKET_COLLISION, BUCKET_EMPTY};
use strata_kv::key::{InternalKey, ValueKind};
use strata_kv::sst::filter_hash;

type BoxError = Box<dyn std::error::Error>;

#[derive(Default)]
struct Census {
    blocks: u64,
    keys: u64,
    restarts: u64,
    /// Keys whose bucket names their interval.
    direct: u64,
    /// Keys whose bucket is a collision.
    collision: u64,
    buckets: u64,
    empty_buckets: u64,
}

fn main() -> Result<(), BoxError> {
    let mut num: u64 = 1_000_000;
    let mut value_size = 40usize;
    let mut block_size = 16384usize;
    let mut restart_interval = 16usize;
    let mut ratio = 0.75f64;
    for arg in std::env::args().skip(1) {
        let (name, value) = arg
            .split_once('=')
            .ok_or_else(|| format!("expected --name=value, got {arg}"))?;
        match name {
            "--num" => num = value.parse()?,
            "--value_size" => value_size = value.parse()?,
            "--block_size" => block_size = value.parse()?,
            "--block_restart_interval" => restart_interval = value.parse()?,
            "--data_block_hash_table_util_ratio" => ratio = value.parse()?,
            _ => return Err(format!("unknown flag {name}").into()),
        }
    }
    if !(ratio.is_finite() && ratio > 0.0) || restart_interval == 0 {
        return Err("the ratio and the restart interval must be positive".into());
    }
    let value = vec![0u8; value_size];
    let mut builder = BlockBuilder::with_hash_index(restart_interval, ratio);
    let mut pending: Vec<[u8; 8]> = Vec::new();
    let mut census = Census::default();
    for i in 0..num {
        let user_key = i.to_be_bytes();
        let key = InternalKey::new(&user_key, 1, ValueKind::Value);
        builder.add(key.encoded(), &value);
        pending.push(user_key);
        if builder.current_size_estimate() >= block_size || i + 1 == num {
            count_block(&mut builder, &pending, &mut census)?;
            builder.reset();
            pending.clear();
        }
    }
    let keys = census.keys.max(1) as f64;
    println!(
        "{} keys in {} blocks: {:.1} keys and {:.1} restart intervals per block, {:.1} buckets per block",
        census.keys,
        census.blocks,
        census.keys as f64 / census.blocks.max(1) as f64,
        census.restarts as f64 / census.blocks.max(1) as f64,
        census.buckets as f64 / census.blocks.max(1) as f64,
    );
    println!(
        "lookups of present keys: {:.1}% go straight to their interval, {:.1}% hit a collision bucket (binary search); {:.1}% of buckets are empty",
        100.0 * census.direct as f64 / keys,
        100.0 * census.collision as f64 / keys,
        100.0 * census.empty_buckets as f64 / census.buckets.max(1) as f64,
    );
    Ok(())
}

/// Finishes the builder's block and counts the buckets of `keys`.
fn count_block(
    builder: &mut BlockBuilder,
    keys: &[[u8; 8]],
    census: &mut Census,
) -> Result<(), BoxError> {
    let bytes = bytes::Bytes::copy_from_slice(builder.finish());
    let block = Block::new(bytes, "census".into(), 0)?;
    census.blocks += 1;
    census.restarts += u64::from(block.num_restarts());
    for key in keys {
        match block.hash_bucket(filter_hash(key)) {
            None => return Err("a block was built without its hash index".into()),
            Some(BUCKET_COLLISION) => census.collision += 1,
            Some(BUCKET_EMPTY) => return Err("a present key's bucket is empty".into()),
            Some(_) => census.direct += 1,
        }
    }
    census.keys += keys.len() as u64;
    let buckets = block.hash_buckets().unwrap_or_default();
    census.buckets += buckets.len() as u64;
    census.empty_buckets += buckets.iter().filter(|&&b| b == BUCKET_EMPTY).count() as u64;
    Ok(())
}
