#!/usr/bin/env bash
# Issue 20's measurements: merges and range deletions at W6's size, for
# Strata, RocksDB through the crate and db_bench, each on a fresh database
# in /dev/shm, rounds alternating the engines' order.
#
#   ROUNDS=2 bash bench/merges.sh [SCALE]
#
# MERGES_CASES picks cases (default "merge-all merge-hot rangedel").
#
# - merge-all: mergerandom then readrandommergerandom (70% merges) over all
#   N keys, uint64add (db_bench's UInt64AddOperator; the crate's column runs
#   the same Rust function as Strata through its merge callback);
# - merge-hot: the same over 100,000 hot keys (--merge_keys);
# - rangedel: fillrandom with one DeleteRange of 100 keys after every
#   5,000 writes (1,000 in all), then readrandom and seekrandom (1M reads)
#   on the result: the reads cross the tombstones.
#
# Prints one line per run, "ROUND CASE ENGINE BENCHMARK MICROS", then per
# case and benchmark the engines' medians and Strata / crate and Strata /
# db_bench of the medians, with the per-round range of each.
# Needs the native builds of bench/compare.sh and bench/build_db_bench.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
S=${STRATA_BENCH:-target/native/release/strata-bench}
D=${DB_BENCH:-target/native/db_bench}
[[ -x $S && -x $D ]] || { echo "merges.sh: build $S and $D first" >&2; exit 1; }
SCALE=${1:-1}
N=$(awk -v s="$SCALE" 'BEGIN { printf "%d", 5000000 * s }')
R=$(awk -v s="$SCALE" 'BEGIN { printf "%d", 1000000 * s }')
W=/dev/shm/strata-merges
OUT=$(mktemp)
trap 'rm -rf -- "$W" "$OUT"' EXIT
ROUNDS=${ROUNDS:-2}
MERGE="--num=$N --key_size=16 --value_size=8 --merge_operator=uint64add --compression_type=snappy --seed=1"
declare -A CASES=(
    [merge-all]="--benchmarks=mergerandom,readrandommergerandom --merge_keys=$N $MERGE"
    [merge-hot]="--benchmarks=mergerandom,readrandommergerandom --merge_keys=100000 $MERGE"
    [rangedel]="--benchmarks=fillrandom,readrandom,seekrandom --num=$N --reads=$R --key_size=16 --value_size=100 --compression_type=snappy --writes_per_range_tombstone=5000 --max_num_range_tombstones=1000 --range_tombstone_width=100 --seed=42"
)
read -r -a ORDER <<< "${MERGES_CASES:-merge-all merge-hot rangedel}"
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
            "${cmd[@]}" 2>/dev/null | awk -v r="$r" -v c="$c" -v e="$e" \
                '/micros\/op/ { print r, c, e, $1, $3 }' | tee -a "$OUT"
        done
    done
done
echo
echo "case benchmark strata crate db_bench strata/crate (range) strata/db_bench (range)"
awk '
    { v[$2 " " $4, $3, $1] = $5; key[$2 " " $4] = 1; if ($1 > rounds) rounds = $1 }
    function median(k, e,    n, i, j, a, t) {
        n = 0
        for (i = 1; i <= rounds; i++) if ((k, e, i) in v) a[++n] = v[k, e, i]
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        if (n == 0) return 0
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function range(k, e,    i, lo, hi, q) {
        lo = ""; hi = ""
        for (i = 1; i <= rounds; i++) if ((k, "strata", i) in v && (k, e, i) in v && v[k, e, i] > 0) {
            q = v[k, "strata", i] / v[k, e, i]
            if (lo == "" || q < lo) lo = q
            if (hi == "" || q > hi) hi = q
        }
        return lo == "" ? "-" : sprintf("%.2f-%.2f", lo, hi)
    }
    END {
        for (k in key) {
            s = median(k, "strata"); c = median(k, "rocksdb"); d = median(k, "db_bench")
            qc = c > 0 ? s / c : 0; qd = d > 0 ? s / d : 0
            printf "%s %.3f %.3f %.3f %.2f (%s) %.2f (%s)\n", k, s, c, d, qc, range(k, "rocksdb"), qd, range(k, "db_bench")
        }
    }' "$OUT" | sort
