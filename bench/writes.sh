#!/usr/bin/env bash
# Issue 27's write grid: W6 fillrandom and fillseq with and without the log,
# fillrandom with 4 writers, and W1's fill at 2M keys, for Strata, RocksDB
# through the crate and db_bench, each on a fresh database in /dev/shm.
# Rounds alternate the engines' order. Prints "ROUND CASE ENGINE MICROS".
#
#   ROUNDS=3 bash bench/writes.sh
#
# Needs the native builds of bench/compare.sh and bench/build_db_bench.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
S=${STRATA_BENCH:-target/native/release/strata-bench}
D=${DB_BENCH:-target/native/db_bench}
[[ -x $S && -x $D ]] || { echo "writes.sh: build $S and $D first" >&2; exit 1; }
W=/dev/shm/strata-writes
trap 'rm -rf -- "$W"' EXIT
ROUNDS=${ROUNDS:-3}
W6="--key_size=16 --value_size=100 --compression_type=snappy --seed=1"
W1="--key_size=8 --value_size=20 --batch_size=10 --disable_wal=1 --compression_type=none --bloom_bits=0 --target_file_size_base=524288 --max_bytes_for_level_base=4194304 --max_bytes_for_level_multiplier=4 --cache_size=4294967296 --seed=1"
declare -A CASES=(
    [w6-fillrandom]="--benchmarks=fillrandom --num=5000000 $W6"
    [w6-fillrandom-nowal]="--benchmarks=fillrandom --num=5000000 --disable_wal=1 $W6"
    [w6-fillseq]="--benchmarks=fillseq --num=5000000 $W6"
    [w6-fillseq-nowal]="--benchmarks=fillseq --num=5000000 --disable_wal=1 $W6"
    [w6-fillrandom-t4]="--benchmarks=fillrandom --num=1250000 --threads=4 $W6"
    [w1-fill-0.1]="--benchmarks=fillseq --num=2000000 $W1"
)
ORDER=(w6-fillrandom w6-fillrandom-nowal w6-fillseq w6-fillseq-nowal w6-fillrandom-t4 w1-fill-0.1)
for r in $(seq 1 "$ROUNDS"); do
    for c in "${ORDER[@]}"; do
        engines=(strata rocksdb db_bench)
        (((r + ${#c}) % 2)) && engines=(db_bench rocksdb strata)
        for e in "${engines[@]}"; do
            rm -rf -- "$W"
            if [[ $e == db_bench ]]; then
                cmd=("$D" --db="$W" ${CASES[$c]})
            else
                cmd=("$S" --engine="$e" --db="$W" ${CASES[$c]})
            fi
            v=$("${cmd[@]}" 2>/dev/null | awk '/micros\/op/ { print $3; exit }')
            echo "$r $c $e $v"
        done
    done
done
