#!/usr/bin/env bash
# fuzz/run.sh SECONDS [TARGET...]: runs every fuzz target (or the ones
# named) for SECONDS each (default 60) with cargo-fuzz on the nightly
# toolchain, installing both if needed. `.ci/run` runs `fuzz/run.sh 4` as a
# smoke test: a little over a minute for all targets. `fuzz/hours.sh`
# runs it in chunks until a target has had a given CPU time.
#
# Seed corpora come from the project's own writers, made once:
# - the decoder targets (data_block, index_block, filter, properties,
#   range_del_block, wal, version_edit, write_batch, current): blocks,
#   filters, logs, edits and batches written by the engine's own encoders
#   (`cargo run -p strata-kv --example fuzz_seeds`);
# - table_file, log_records, packed_table and options_file: small
#   databases made by strata-bench (block-based tables with and without
#   hash indexes and compression, packed tables, range deletions, logs,
#   manifests and OPTIONS files). A packed_table seed is a packed table
#   behind a 0 byte (the target's whole-file mode).
# A finding is saved under artifacts/TARGET/ and the run fails; check it
# in as a regression test beside the decoder, then fix the decoder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
secs=${1:-60}
shift || true
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
shopt -s nullglob
if [[ ! -d corpus/data_block ]]; then
    (cd .. && cargo run -q -p strata-kv --example fuzz_seeds -- fuzz/corpus)
fi
db_targets=(table_file log_records packed_table options_file)
missing=0
for t in "${db_targets[@]}"; do [[ -d corpus/$t ]] || missing=1; done
if [[ $missing == 1 ]]; then
    seeds=$(mktemp -d)
    for t in "${db_targets[@]}"; do mkdir -p "$seeds/$t"; done
    (cd .. && cargo build -q -p strata-bench)
    bench=../target/debug/strata-bench
    i=0
    for flags in "--compression_type=none" "--compression_type=snappy --use_data_block_hash_index=1" \
        "--compression_type=zstd --bloom_bits=10" "--table_format=packed" \
        "--compression_type=none --writes_per_range_tombstone=20 --max_num_range_tombstones=15 --range_tombstone_width=7"; do
        i=$((i + 1))
        # shellcheck disable=SC2086
        "$bench" --db="$seeds/db$i" --benchmarks=fillrandom,overwrite,flush --num=300 --value_size=20 \
            --write_buffer_size=65536 --keep_db=1 $flags >/dev/null
        for f in "$seeds/db$i"/*.sst; do
            cp "$f" "$seeds/table_file/$i-$(basename "$f")"
            if [[ $flags == *packed* ]]; then
                { printf '\0'; cat "$f"; } >"$seeds/packed_table/$i-$(basename "$f")"
            fi
        done
        cp "$seeds/db$i/OPTIONS" "$seeds/options_file/$i-OPTIONS"
        for f in "$seeds/db$i"/*.log "$seeds/db$i"/MANIFEST-*; do
            if [[ -s $f ]]; then cp "$f" "$seeds/log_records/$i-$(basename "$f")"; fi
        done
    done
    mkdir -p corpus
    for t in "${db_targets[@]}"; do
        if [[ ! -d corpus/$t ]]; then mv "$seeds/$t" corpus/; fi
    done
    rm -rf "$seeds"
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build
log=$(mktemp)
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    if ! cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
        -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
        tail -40 "$log" >&2
        echo "fuzz/run.sh: $t failed; its input is in fuzz/artifacts/$t" >&2
        exit 1
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
    echo "== $t: $secs s, $runs runs, $cov, corpus $(find "corpus/$t" -type f | wc -l) inputs"
done
rm -f "$log"
echo "fuzz/run.sh: no findings"
