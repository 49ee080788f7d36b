#!/usr/bin/env bash
# fuzz/run.sh SECONDS: runs every fuzz target for SECONDS each (default 60)
# with cargo-fuzz on the nightly toolchain, installing cargo-fuzz if needed.
# Seed corpora come from the project's own writers: small databases made by
# strata-bench (block-based tables with and without hash indexes and
# compression, packed tables, logs and manifests), made once.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
secs=${1:-60}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
if [[ ! -d corpus/table_file ]]; then
    shopt -s nullglob
    seeds=$(mktemp -d)
    mkdir -p "$seeds/table_file" "$seeds/log_records"
    (cd .. && cargo build --release -q -p strata-bench)
    bench=../target/release/strata-bench
    i=0
    for flags in "--compression_type=none" "--compression_type=snappy --use_data_block_hash_index=1" \
        "--compression_type=zstd --bloom_bits=10" "--table_format=packed" \
        "--compression_type=none --writes_per_range_tombstone=20 --max_num_range_tombstones=15 --range_tombstone_width=7"; do
        i=$((i + 1))
        # shellcheck disable=SC2086
        "$bench" --db="$seeds/db$i" --benchmarks=fillrandom,overwrite,flush --num=300 --value_size=20 \
            --write_buffer_size=65536 --keep_db=1 $flags >/dev/null
        for f in "$seeds/db$i"/*.sst; do cp "$f" "$seeds/table_file/$i-$(basename "$f")"; done
        for f in "$seeds/db$i"/*.log "$seeds/db$i"/MANIFEST-*; do
            if [[ -s $f ]]; then cp "$f" "$seeds/log_records/$i-$(basename "$f")"; fi
        done
    done
    mkdir -p corpus
    rm -rf corpus/table_file corpus/log_records
    mv "$seeds/table_file" "$seeds/log_records" corpus/
    rm -rf "$seeds"
fi
for t in $(cargo +nightly fuzz list); do
    echo "== $t ($secs s)"
    cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=65536
done
