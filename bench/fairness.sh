#!/usr/bin/env bash
# fairness.sh [SCALE]
#
# Issue 15's check that `strata-bench --engine=rocksdb` (the RocksDB column of
# every published ratio) runs RocksDB as fast as RocksDB's own db_bench, built
# from the same source (bench/build_db_bench.sh), measured so that the answer
# is not lost in this machine's noise:
#
# - Reads run in pairs on ONE database that db_bench filled and let finish
#   its compactions, so the tree is the same for both and stays so (in
#   compare.sh each tool reads the tree its own fill built, and background
#   compaction makes those differ from run to run; a compaction left
#   pending by the fill runs during whichever reads open the database next).
# - Writes run in pairs on fresh databases.
# - The order inside each pair is random (RANDOM seeded by SEED), so a slow
#   drift of the machine's speed, common here, favours neither side.
# - Each point reports the median over the pairs of crate / db_bench and the
#   range, next to each side's median micros/op.
#
# The points are issue 15's: W1 readrandom; W2 readrandom with and without the
# hash index, each with the 4 GiB and the 64 MiB cache; W6 fillrandom, and
# readrandom, seekrandom and readseq on a W6 database after its compactions.
# Flags are WORKLOADS.md's (as bench/compare.sh gives them); SCALE multiplies
# --num (default 1). Reads per run are fewer than the workloads' so that
# several pairs fit: READS (default 1,000,000; a quarter of it with the
# 64 MiB cache, whose reads cost 4x).
#
# Environment: PAIRS (default 6), SEED (default 1), READS, POINTS (a
# space-separated subset of: w1 w2 w6fill w6read; default all), SHM_DIR
# (default /dev/shm), LOG_DIR (default /tmp/strata-fairness-date).
# Needs target/native/release/strata-bench (built with --features rocksdb)
# and target/native/db_bench; bench/build_db_bench.sh makes both.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "fairness.sh: error: $*" >&2; exit 1; }
[[ $# -le 1 ]] || die "usage: fairness.sh [SCALE]"
SCALE=${1:-1}
[[ $SCALE =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] || die "scale must be a positive number, got '$SCALE'"
BIN=${STRATA_BENCH:-$ROOT/target/native/release/strata-bench}
DB_BENCH=${DB_BENCH:-$ROOT/target/native/db_bench}
[[ -x $BIN ]] || die "no $BIN (bench/build_db_bench.sh builds it)"
[[ -x $DB_BENCH ]] || die "no $DB_BENCH (bench/build_db_bench.sh builds it)"
PAIRS=${PAIRS:-6}
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || die "PAIRS must be a positive integer, got '$PAIRS'"
RANDOM=${SEED:-1}
POINTS=${POINTS:-w1 w2 w6fill w6read}
SHM_DIR=${SHM_DIR:-/dev/shm}
LOG_DIR=${LOG_DIR:-/tmp/strata-fairness-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$LOG_DIR"
WORK=$(mktemp -d "$SHM_DIR/strata-fairness-XXXXXX")
trap 'rm -rf -- "$WORK"' EXIT
probe=$("$BIN" --engine=rocksdb --benchmarks= --num=1 --db="$WORK/probe" 2>&1) ||
    die "$BIN has no RocksDB engine: $probe"
rm -rf -- "$WORK/probe"
BUILD=$(sed -n 's/^Build: *//p' <<<"$probe" | head -n1)
[[ $BUILD == *sse4.2* ]] || die "$BIN is not a native build ($BUILD)"

scaled() { awk -v n="$1" -v s="$SCALE" 'BEGIN { v = int(n * s + 0.5); if (v < 1) v = 1; print v }'; }
READS=${READS:-$(scaled 1000000)}
SMALL_READS=$(((READS + 3) / 4))

# one SIDE LOG BENCH ARGS...: runs one side (crate or db_bench), prints the
# micros/op of benchmark BENCH.
one() {
    local side=$1 log=$2 bench=$3
    shift 3
    local cmd
    if [[ $side == db_bench ]]; then cmd=("$DB_BENCH" "$@"); else cmd=("$BIN" --engine=rocksdb "$@"); fi
    { echo "\$ ${cmd[*]}"; "${cmd[@]}" 2>&1 | tr '\r' '\n' | grep -v -E '^\.\.\. finished'; } >>"$log" ||
        die "$side failed; see $log"
    local v
    v=$(awk -v b="$bench" '$1 == b && $2 == ":" && $4 == "micros/op" { v = $3 } END { print v }' "$log")
    [[ -n $v ]] || die "no '$bench' result from $side in $log"
    echo "$v"
}

ROWS=()
# pairs NAME BENCH FRESH ARGS...: PAIRS pairs in random order. With FRESH=1
# each run gets its own new database (a write benchmark); otherwise ARGS
# name the shared one.
pairs() {
    local name=$1 bench=$2 fresh=$3
    shift 3
    local i side d c ratios=() ds=() cs=()
    echo "-- $name: $PAIRS pairs ($(cut -d' ' -f1-3 /proc/loadavg))"
    for ((i = 1; i <= PAIRS; i++)); do
        local order=(db_bench crate)
        ((RANDOM % 2)) && order=(crate db_bench)
        for side in "${order[@]}"; do
            local extra=() log="$LOG_DIR/$name-$side-$i.out"
            : >"$log"
            if [[ $fresh == 1 ]]; then extra=(--db="$WORK/fresh-$side"); fi
            local v
            v=$(one "$side" "$log" "$bench" "$@" "${extra[@]}")
            [[ $fresh == 1 ]] && rm -rf -- "$WORK/fresh-$side"
            if [[ $side == db_bench ]]; then d=$v; else c=$v; fi
        done
        ds+=("$d"); cs+=("$c")
        ratios+=("$(awk -v c="$c" -v d="$d" 'BEGIN { printf "%.3f", c / d }')")
        echo "   pair $i (${order[0]} first): db_bench $d, crate $c, crate / db_bench ${ratios[-1]}"
    done
    ROWS+=("$name|$(median "${ds[@]}")|$(median "${cs[@]}")|$(median "${ratios[@]}")|$(printf '%s\n' "${ratios[@]}" | sort -n | head -n1)-$(printf '%s\n' "${ratios[@]}" | sort -n | tail -n1)")
}
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# fill DIR ARGS...: db_bench builds the shared database.
fill() {
    local dir=$1
    shift
    rm -rf -- "$dir"
    one db_bench "$LOG_DIR/fill-$(basename "$dir").out" "${FILL_BENCH:?}" --db="$dir" "$@" >/dev/null
}

echo "== fairness.sh: RocksDB through the crate against db_bench, scale $SCALE, $PAIRS pairs, reads $READS"
echo "   $BIN ($BUILD)"
echo "   $DB_BENCH"
echo "   logs in $LOG_DIR"
T0=$(date +%s)
for p in $POINTS; do
    case $p in
        w1)
            N=$(scaled 20000000)
            opts=(--key_size=8 --value_size=20 --batch_size=10 --disable_wal=1 --compression_type=none
                --bloom_bits=0 --target_file_size_base=524288 --max_bytes_for_level_base=4194304
                --max_bytes_for_level_multiplier=4 --cache_size=4294967296 --seed=1)
            FILL_BENCH=fillseq fill "$WORK/w1" --benchmarks=fillseq,flush,waitforcompaction \
                --num="$N" "${opts[@]}"
            pairs "W1 readrandom" readrandom 0 --db="$WORK/w1" --benchmarks=readrandom --use_existing_db=1 \
                --num="$N" --reads="$READS" "${opts[@]}"
            rm -rf -- "$WORK/w1" ;;
        w2)
            N=$(scaled 10000000)
            for T in 0 1; do
                opts=(--key_size=8 --value_size=40 --block_size=16384 --block_restart_interval=16
                    --compression_type=snappy --compression_ratio=0.4 --use_data_block_hash_index="$T"
                    --data_block_hash_table_util_ratio=0.75 --seed=1)
                FILL_BENCH=fillseq fill "$WORK/w2" --benchmarks=fillseq,waitforcompaction --num="$N" "${opts[@]}"
                pairs "W2 type $T readrandom, 4 GiB cache" readrandom 0 --db="$WORK/w2" \
                    --benchmarks=readrandom --use_existing_db=1 --num="$N" --reads="$READS" \
                    --cache_size=4294967296 "${opts[@]}"
                pairs "W2 type $T readrandom, 64 MiB cache" readrandom 0 --db="$WORK/w2" \
                    --benchmarks=readrandom --use_existing_db=1 --num="$N" --reads="$SMALL_READS" \
                    --cache_size=67108864 "${opts[@]}"
                rm -rf -- "$WORK/w2"
            done ;;
        w6fill)
            N=$(scaled 5000000)
            pairs "W6 fillrandom" fillrandom 1 --benchmarks=fillrandom --num="$N" --key_size=16 \
                --value_size=100 --compression_type=snappy --seed=1 ;;
        w6read)
            N=$(scaled 5000000)
            opts=(--num="$N" --key_size=16 --value_size=100 --compression_type=snappy --seed=1)
            FILL_BENCH=fillrandom fill "$WORK/w6" --benchmarks=fillrandom,waitforcompaction "${opts[@]}"
            for b in readrandom seekrandom readseq; do
                pairs "W6 $b" "$b" 0 --db="$WORK/w6" --benchmarks="$b" --use_existing_db=1 \
                    --reads="$READS" "${opts[@]}"
            done
            rm -rf -- "$WORK/w6" ;;
        *) die "unknown point '$p' (expected w1, w2, w6fill, w6read)" ;;
    esac
done

echo
echo "| point | db_bench | crate | crate / db_bench (median of pairs) | pairs' range |"
echo "|---|---|---|---|---|"
for r in "${ROWS[@]}"; do
    IFS='|' read -r name d c ratio range <<<"$r"
    echo "| $name | $d | $c | **$ratio** | $range |"
done
echo
echo "micros/op, medians over $PAIRS pairs; $(($(date +%s) - T0)) s; full outputs in $LOG_DIR"
