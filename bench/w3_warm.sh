#!/usr/bin/env bash
# w3_warm.sh: W3's key points (Get, batch 32 stride 16 batched and vector,
# batch 1) at scale 0.1 with a warm cache: each engine (Strata, RocksDB
# through the crate, db_bench) fills its own database with W3's fill flags;
# each point then runs its benchmark twice in one process and the second,
# warm result is printed (micros per key), the whole set twice.
# Needs target/native/release/strata-bench (with the rocksdb feature) and
# target/native/db_bench (bench/build_db_bench.sh). Databases in /dev/shm.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=target/native/release/strata-bench; D=target/native/db_bench
[[ -x $B && -x $D ]] || { echo "w3_warm.sh: build $B and $D first (bench/compare.sh, bench/build_db_bench.sh)" >&2; exit 1; }
F="--num=1200000 --key_size=16 --value_size=100 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --bloom_bits=10 --seed=1"
R="--use_existing_db=1 --duration=8 --threads=1 --cache_size=4194304000 --cache_index_and_filter_blocks=1 --pin_l0_filter_and_index_blocks_in_cache=1 --disable_auto_compactions=1"
run() { local e=$1; shift; if [[ $e == db_bench ]]; then $D --db=/dev/shm/w3f-$e "$@"; else $B --engine=$e --db=/dev/shm/w3f-$e "$@"; fi; }
for e in strata rocksdb db_bench; do rm -rf /dev/shm/w3f-$e; run $e --benchmarks=fillrandom,waitforcompaction $F > /dev/null 2>&1; done
for round in 1 2; do
for p in "readrandom,readrandom 1 0 0" "multireadrandom,multireadrandom 32 16 1" "multireadrandom,multireadrandom 32 16 0" "multireadrandom,multireadrandom 1 16 1"; do
  set -- $p
  for e in strata rocksdb db_bench; do
    v=$(run "$e" $R $F --benchmarks=$1 --batch_size=$2 --multiread_stride=$3 --multiread_batched=$4 2>/dev/null | grep -E "^(readrandom|multireadrandom)" | tail -1 | awk '{print $3}')
    echo "round$round $1 b$2 s$3 batched$4 $e $v"
  done
done
done
rm -rf /dev/shm/w3f-*
