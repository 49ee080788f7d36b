#!/usr/bin/env bash
# compare.sh WORKLOAD [SCALE]
#
# Runs standard workload W1, W2, W3, W4, W5, W6, W7 or W8 of docs/workloads.md with
# `strata-bench --engine=rocksdb` and `strata-bench --engine=strata`, the same
# flags for both, alternating the engines step by step (the first engine of a
# step alternates too), and prints a table: workload, step, benchmark,
# RocksDB micros/op, Strata micros/op, ratio Strata / RocksDB; then database
# sizes, table files per level (W1) and write amplification (W4).
#
# SCALE multiplies --num and --reads (default 1 = WORKLOADS.md's N; 0.1 for a
# quick run). Every other flag is kept as WORKLOADS.md writes it.
#
# Every figure is taken with native builds of both engines, as db_bench is
# built (-march=native): without it the `rocksdb` crate compiles RocksDB
# with no SSE4.2 (software CRC32C). Unless STRATA_BENCH names a binary, the
# script builds target/native/release/strata-bench first (a no-op when it is
# up to date; RocksDB's C++: 20-40 minutes the first time on 2 cores):
#   RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=target/native \
#       cargo build --release -p strata-bench --features rocksdb
# When target/native/db_bench exists (bench/build_db_bench.sh builds it from
# the RocksDB source the `rocksdb` crate compiles) it runs as a third column,
# the check that the harness configures RocksDB as db_bench does.
#
# Environment (all optional):
#   STRATA_BENCH  the binary (default: target/native/release/strata-bench,
#                 built or brought up to date first)
#   SHM_DIR       parent of the read-benchmark databases (default /dev/shm)
#   DISK_DIR      parent of W4's databases, on disk (default /tmp)
#   LOG_DIR       where the full outputs are kept (default /tmp/strata-compare-W-date)
#   DB_BENCH      the db_bench of the third column (default:
#                 target/native/db_bench if it exists; "none": no third column)
#   RUNS          how many times to run the whole workload (default 1); the
#                 table then gives each engine's median and every run's
#                 ratio, so the spread is visible
#   W1_READ_RUNS  how many times to run W1's read (default 1; the first read
#                 after the fill may overlap compactions the fill left pending,
#                 and RocksDB starts them again when it reopens)
#   W1_FORMAT     W1's table format (default block): "packed" runs Strata on
#                 packed tables from L1 down (--table_format=packed
#                 --packed_from_level=1) against RocksDB's PlainTable
#                 (--table_format=plain; db_bench --use_plain_table
#                 --mmap_read=1 --prefix_size=8: the whole key hashed)
#   W1_KEY_SIZE   W1's key size (default 8, as WORKLOADS.md; 16 makes keys
#                 that are not integers: the packed table's general index)
#   W2_TYPES      data block index types for W2 (default "0 1")
#   W4_S          stream counts for W4 (default "1 2 4 8 16 32 64"); W4 also
#                 runs the largest S with Strata's fixed-prefix partitioner
#                 (Strata only), one descending stream, and three sequential
#                 runs on one database
#   W6_BENCHMARKS W6's benchmark list (default WORKLOADS.md's six; at scale 1
#                 readwhilewriting alone takes 2-3 minutes per engine)
#
#   W8_MEM        W8's memory limit in bytes (default 4 GiB): a cgroup v1
#                 memory group the script makes and joins (as root), so the
#                 page cache is charged to it; without one, only the direct
#                 reads are beyond memory and the script says so
#   W8_READS      reads (and seeks) per W8 read benchmark before SCALE
#                 (default 500000: a direct read costs the disk's 0.1 ms)
#   W8_WRITES     overwrite's writes before SCALE (default 5000000, N/10:
#                 the full 50M overwrites would take an hour per engine)
#   W8 runs every step under /usr/bin/time -v and prints each engine's
#   peak resident memory; the page cache is dropped before each run.
#
#   W3_DURATION   seconds per W3 read step (default 20, as WORKLOADS.md; the
#                 full grid is 49 steps per engine)
#   W3_BATCHES, W3_STRIDES, W3_BATCHED
#                 W3's grid (defaults "1 2 4 8 16 32", "0 16 256 4096", "0 1")
#
#   W5_V          W5's versions per row (default "1 10 100 1000 10000")
#   W5_REPS       timed scans per method after one warm-up (default 3)
#   PEBBLE_BENCH  the Pebble W5 program (go build in ../shared/bench/pebble);
#                 when set, W5 runs it as the Pebble column
#
# W5 prints its own table: milliseconds per whole scan (median of W5_REPS),
# for RocksDB (next, seek_successor), Strata (next, next_prefix,
# prev_prefix, seek_successor) and Pebble (next, nextprefix, seekge).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
    exit 2
}
die() { echo "compare.sh: error: $*" >&2; exit 1; }

[[ $# -ge 1 && $# -le 2 ]] || usage
W=$(tr '[:lower:]' '[:upper:]' <<<"$1")
SCALE=${2:-1}
[[ $SCALE =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] || die "scale must be a positive number, got '$SCALE'"
case $W in
    W1 | W2 | W3 | W4 | W5 | W6 | W7 | W8) ;;
    *) die "unknown workload '$1': expected W1, W2, W3, W4, W5, W6, W7 or W8" ;;
esac

NATIVE_TARGET=$ROOT/target/native
if [[ -n ${STRATA_BENCH:-} ]]; then
    BIN=$STRATA_BENCH
    [[ -x $BIN ]] || die "STRATA_BENCH=$BIN is not an executable"
else
    BIN=$NATIVE_TARGET/release/strata-bench
    # Built every time (a no-op when it is up to date), so that a binary
    # left from an experiment never stands in for the sources.
    [[ -x $BIN ]] || echo "compare.sh: building $BIN (native, with RocksDB; 20-40 minutes the first time)" >&2
    (cd "$ROOT" && RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=$NATIVE_TARGET \
        cargo build -q --release -p strata-bench --features rocksdb) ||
        die "building $BIN failed (RocksDB needs libclang-dev and a C++ compiler)"
fi
if [[ -z ${DB_BENCH:-} && -x $NATIVE_TARGET/db_bench ]]; then DB_BENCH=$NATIVE_TARGET/db_bench; fi
[[ ${DB_BENCH:-} == none ]] && DB_BENCH=
RUNS=${RUNS:-1}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, got '$RUNS'"
SHM_DIR=${SHM_DIR:-/dev/shm}
[[ -d $SHM_DIR ]] || SHM_DIR=${TMPDIR:-/tmp}
DISK_DIR=${DISK_DIR:-/tmp}
LOG_DIR=${LOG_DIR:-/tmp/strata-compare-$W-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$LOG_DIR"
WORK=$(mktemp -d "$SHM_DIR/strata-compare-XXXXXX")
DISK_WORK=$(mktemp -d "$DISK_DIR/strata-compare-XXXXXX")
CGROUP= # W8's memory group, left and removed on exit
cleanup() {
    rm -rf -- "$WORK" "$DISK_WORK"
    if [[ -n $CGROUP ]]; then
        echo $$ >"/sys/fs/cgroup/memory$CGROUP_HOME/cgroup.procs" 2>/dev/null || true
        rmdir "$CGROUP" 2>/dev/null || true
    fi
}
trap cleanup EXIT

# W8: peak memory of every run, the page cache dropped before each, and a
# memory limit that the page cache is charged to (cgroup v1).
TIME_V=
DROP_CACHES=
if [[ $W == W8 ]]; then
    [[ -x /usr/bin/time ]] || die "W8 reports peak memory with /usr/bin/time -v (apt-get install time)"
    TIME_V=/usr/bin/time
    [[ -w /proc/sys/vm/drop_caches ]] && DROP_CACHES=1
    W8_MEM=${W8_MEM:-$((4 << 30))}
    CGROUP_HOME=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
    if [[ -d /sys/fs/cgroup/memory && -w /sys/fs/cgroup/memory ]] &&
        mkdir "/sys/fs/cgroup/memory/strata-compare-$$" 2>/dev/null; then
        CGROUP=/sys/fs/cgroup/memory/strata-compare-$$
        echo "$W8_MEM" >"$CGROUP/memory.limit_in_bytes"
        echo $$ >"$CGROUP/cgroup.procs"
        echo "== W8: this script and every run in cgroup $CGROUP, memory.limit_in_bytes=$W8_MEM"
    else
        echo "compare.sh: WARNING: no writable cgroup v1 memory controller: the page cache is not limited, so only W8's direct-read steps are beyond memory" >&2
    fi
fi

ENGINES=(rocksdb strata)
[[ -n ${DB_BENCH:-} ]] && ENGINES+=(db_bench)

probe=$("$BIN" --engine=rocksdb --benchmarks= --num=1 --db="$WORK/probe" 2>&1) ||
    die "$BIN has no RocksDB engine: $probe"
rm -rf -- "$WORK/probe"
BUILD=$(sed -n 's/^Build: *//p' <<<"$probe" | head -n1)
[[ $BUILD == *sse4.2* ]] ||
    echo "compare.sh: WARNING: $BIN is not a native build ($BUILD); RocksDB's CRC32C is software" >&2

scaled() { awk -v n="$1" -v s="$SCALE" 'BEGIN { v = int(n * s + 0.5); if (v < 1) v = 1; print v }'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
dbsize() { du -sb "$1" 2>/dev/null | cut -f1; }

# run ENGINE NAME ARGS...: one strata-bench (or db_bench) run; output in
# $LOG_DIR/NAME-ENGINE.out
run() {
    local engine=$1 name=$2
    shift 2
    local out="$LOG_DIR/$name-$engine$RUN_SUFFIX.out" cmd
    if [[ $engine == db_bench ]]; then
        cmd=("$DB_BENCH" "$@")
    else
        cmd=("$BIN" --engine="$engine" "$@")
    fi
    # Engine-specific flags of the current workload (W1_FORMAT=packed).
    case $engine in
        strata) cmd+=(${STRATA_ARGS:-}) ;;
        rocksdb) cmd+=(${ROCKSDB_ARGS:-}) ;;
        db_bench) cmd+=(${DB_BENCH_ARGS:-}) ;;
    esac
    [[ -n $TIME_V ]] && cmd=("$TIME_V" -v "${cmd[@]}")
    if [[ -n $DROP_CACHES ]]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi
    { echo "# $(date -Is) load $(load)"; echo "\$ ${cmd[*]}"; } >"$out"
    if ! "${cmd[@]}" >>"$out" 2>"$out.err"; then
        echo "compare.sh: $name ($engine) failed; last lines:" >&2
        tail -n 5 "$out" "$out.err" >&2
        exit 1
    fi
    # db_bench's "... finished N ops" progress lines end with \r
    tr '\r' '\n' <"$out.err" | grep -v -E '^\.\.\. finished [0-9]+ ops *$' >"$out.log" || true
    rm -f -- "$out.err"
}

ROWS=()  # "run|workload|step|benchmark|engine|micros_per_op"
RUN=1
RUN_SUFFIX="" # "-runN" in log names when RUNS > 1
EXTRA=() # free-form lines printed after the table
ORDER=0  # flips the engine order of each step

# step NAME DBKEY ARGS...: runs every engine once (order alternating per
# step), each on its own database $WORK/DBKEY-ENGINE (or $DISK_WORK for
# DBKEY starting with disk:), and collects the result lines.
step() {
    local name=$1 dbkey=$2
    shift 2
    local engines=("${ENGINES[@]}") e j parent=$WORK key=$dbkey
    if [[ $dbkey == disk:* ]]; then parent=$DISK_WORK; key=${dbkey#disk:}; fi
    if ((ORDER % 2 == 1)); then
        local rev=()
        for ((j = ${#engines[@]} - 1; j >= 0; j--)); do rev+=("${engines[j]}"); done
        engines=("${rev[@]}")
    fi
    ORDER=$((ORDER + 1))
    echo "-- $W $name: ${engines[*]} (load $(load))"
    local rss=""
    for e in "${engines[@]}"; do
        run "$e" "$name" --db="$parent/$key-$e" "$@"
        local line out="$LOG_DIR/$name-$e$RUN_SUFFIX.out"
        while read -r line; do
            [[ -z $line ]] && continue
            ROWS+=("$RUN|$W|$name|${line% *}|$e|${line##* }")
        done < <(awk '/^[A-Za-z0-9_]+ +: +[0-9.]+ micros\/op/ { print $1, $3 }' "$out")
        grep -E '^[A-Za-z0-9_]+ +: ' "$out" | sed "s/^/   $e: /"
        if [[ -n $TIME_V ]]; then
            local kb
            kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$out.log")
            rss+=" $e $((${kb:-0} / 1024)) MB;"
        fi
    done
    [[ -n $rss ]] && EXTRA+=("$W$RUN_SUFFIX $name: peak resident memory:$rss")
    return 0
}

# sizes LABEL DBKEY: database sizes of every engine
sizes() {
    local label=$1 dbkey=$2
    local e parent=$WORK key=$dbkey s=""
    if [[ $dbkey == disk:* ]]; then parent=$DISK_WORK; key=${dbkey#disk:}; fi
    for e in "${ENGINES[@]}"; do s+=" $e $(dbsize "$parent/$key-$e") B;"; done
    EXTRA+=("$W$RUN_SUFFIX $label: database size:$s")
}

# levelfiles LABEL NAME: table files per level from a `levelstats` block
levelfiles() {
    local label=$1 name=$2 e
    for e in "${ENGINES[@]}"; do
        local f
        f=$(awk '/^Level Files Size\(MB\)/ { on = 1; next }
                 on && /^-+$/ { next }
                 on && /^ *[0-9]+ +[0-9]+/ { printf "L%s=%s ", $1, $2; n += $2; next }
                 on { on = 0 }
                 END { printf "(total %d)", n }' "$LOG_DIR/$name-$e$RUN_SUFFIX.out")
        EXTRA+=("$W$RUN_SUFFIX $label: files per level, $e: $f")
    done
}

# writeamp LABEL NAME USER_BYTES: flush + compaction bytes / user bytes
writeamp() {
    local label=$1 name=$2 ub=$3 e
    for e in "${ENGINES[@]}"; do
        local out="$LOG_DIR/$name-$e$RUN_SUFFIX.out" wa
        if [[ $e == strata ]]; then
            # Flushed + compaction bytes over the same user bytes as RocksDB's
            # (Strata's own figure divides by batch bytes, headers included).
            wa=$(awk -v ub="$ub" '
                function bytes(v, u) { return v * (u == "GB" ? 1073741824 : u == "MB" ? 1048576 : u == "KB" ? 1024 : 1) }
                /^User writes: / {
                    split($0, a, /flushed: |; compaction writes: |; moved: /)
                    split(a[2], f, " "); split(a[3], c, " ")
                    printf "%.2f", (bytes(f[1], f[2]) + bytes(c[1], c[2])) / ub; exit
                }' "$out")
        else
            # RocksDB: the Sum row's Write(GB) counts flushes and compactions.
            wa=$(awk -v ub="$ub" '/^Cumulative compaction: / { printf "%.2f", $3 * 1073741824 / ub; exit }' "$out")
        fi
        EXTRA+=("$W$RUN_SUFFIX $label: write-amp $e: ${wa:--}")
    done
}

w1() {
    local N R
    N=$(scaled 20000000); R=$(scaled 5000000)
    local K=${W1_KEY_SIZE:-8}
    local opts=(--key_size="$K" --value_size=20 --batch_size=10 --disable_wal=1
        --compression_type=none --bloom_bits=0 --target_file_size_base=524288
        --max_bytes_for_level_base=4194304 --max_bytes_for_level_multiplier=4
        --cache_size=4294967296 --seed=1)
    case ${W1_FORMAT:-block} in
        block) ;;
        packed)
            STRATA_ARGS="--table_format=packed --packed_from_level=1"
            ROCKSDB_ARGS="--table_format=plain"
            DB_BENCH_ARGS="--use_plain_table=1 --mmap_read=1 --prefix_size=$K"
            EXTRA+=("W1 table formats: Strata packed from L1, RocksDB PlainTable (whole-key hash)") ;;
        *) die "W1_FORMAT must be block or packed, got '$W1_FORMAT'" ;;
    esac
    step fill w1 --benchmarks=fillseq,flush,levelstats --num="$N" "${opts[@]}"
    sizes "after fill" w1
    levelfiles "after fill" fill
    local i name
    for ((i = 1; i <= ${W1_READ_RUNS:-1}; i++)); do
        name=read; ((i > 1)) && name=read$i
        step "$name" w1 --benchmarks=readrandom,levelstats --use_existing_db=1 --num="$N" --reads="$R" \
            --threads=1 "${opts[@]}"
        levelfiles "after $name" "$name"
    done
}

w2() {
    local N R T C
    N=$(scaled 10000000); R=$(scaled 5000000)
    for T in ${W2_TYPES:-0 1}; do
        local opts=(--key_size=8 --value_size=40 --block_size=16384 --block_restart_interval=16
            --compression_type=snappy --compression_ratio=0.4
            --use_data_block_hash_index="$T" --data_block_hash_table_util_ratio=0.75 --seed=1)
        step "t$T-fill" "w2t$T" --benchmarks=fillseq --num="$N" "${opts[@]}"
        sizes "type $T after fill" "w2t$T"
        for C in 4294967296 67108864; do
            step "t$T-read-c$C" "w2t$T" --benchmarks=readrandom --use_existing_db=1 --num="$N" \
                --reads="$R" --cache_size="$C" "${opts[@]}"
        done
        rm -rf -- "$WORK"/w2t"$T"-*
    done
}

w3() {
    local N B S M opts
    N=$(scaled 12000000)
    # --disable_auto_compactions and --cache_index_and_filter_blocks are
    # read-side flags in WORKLOADS.md; the fill runs with the rest.
    opts=(--key_size=16 --value_size=100 --compression_type=none --write_buffer_size=4194304
        --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --bloom_bits=10 --seed=1)
    step fill w3 --benchmarks=fillrandom,waitforcompaction,levelstats --num="$N" "${opts[@]}"
    sizes "after fill" w3
    levelfiles "after fill" fill
    local read=(--use_existing_db=1 --num="$N" --duration="${W3_DURATION:-20}" --threads=1
        --cache_size=4194304000 --cache_index_and_filter_blocks=1
        --pin_l0_filter_and_index_blocks_in_cache=1 --disable_auto_compactions=1 "${opts[@]}")
    step get w3 --benchmarks=readrandom "${read[@]}"
    for B in ${W3_BATCHES:-1 2 4 8 16 32}; do
        for S in ${W3_STRIDES:-0 16 256 4096}; do
            for M in ${W3_BATCHED:-0 1}; do
                step "b$B-s$S-batched$M" w3 --benchmarks=multireadrandom --batch_size="$B" \
                    --multiread_stride="$S" --multiread_batched="$M" "${read[@]}"
            done
        done
    done
}

# medianfile LABEL NAME: Strata's median table file size (its levelstats
# "All" row; RocksDB's levelstats has no median)
medianfile() {
    local label=$1 name=$2 m
    m=$(awk '/^  All / { print $4; exit }' "$LOG_DIR/$name-strata$RUN_SUFFIX.out")
    EXTRA+=("$W$RUN_SUFFIX $label: median file size, strata: ${m:--} MB")
}

# movedwrite LABEL NAME: GB written and moved per level, from the first
# compaction stats table of each engine's `stats`
movedwrite() {
    local label=$1 name=$2 e
    for e in "${ENGINES[@]}"; do
        local f
        f=$(awk '/^ *Level +Files +Size/ && !done {
                     for (i = 1; i <= NF; i++) { if ($i == "Write(GB)") w = i + 1; if ($i == "Moved(GB)") m = i + 1 }
                     on = 1; next }
                 on && /^ *L[0-9]+ / { if ($w + $m > 0) printf "%s write %s moved %s; ", $1, $w, $m; next }
                 on && /^ *Sum / { on = 0; done = 1 }' "$LOG_DIR/$name-$e$RUN_SUFFIX.out")
        EXTRA+=("$W$RUN_SUFFIX $label: GB per level, $e: ${f:--}")
    done
}

# w4_step LABEL NAME DBKEY USER_BYTES ARGS...: one W4 fill and its report
w4_step() {
    local label=$1 name=$2 dbkey=$3 ub=$4
    shift 4
    step "$name" "$dbkey" --benchmarks="${W4_BENCH:-fillseq}",stats,levelstats --key_size=16 --value_size=100 \
        --compression_type=none --seed=1 "$@"
    writeamp "$label" "$name" "$ub"
    movedwrite "$label" "$name"
    levelfiles "$label" "$name"
    medianfile "$label" "$name"
}

# W4: S concurrent ascending streams for each S of W4_S, then one
# descending stream, then three ascending streams written one after another
# into one database (the middle third of the key space, then the low third,
# then the high third; write-amp per run). db_bench has no
# --seq_descending or --key_offset: it sits out those two.
w4() {
    local N S K ub third
    N=$(scaled 20000000)
    ub=$((N * (16 + 100)))
    for S in ${W4_S:-1 2 4 8 16 32 64}; do
        K=$((N / S))
        w4_step "S=$S" "S$S" "disk:w4s$S" "$ub" --num="$N" --keys_per_prefix="$K" --prefix_size=8
        sizes "S=$S" "disk:w4s$S"
        rm -rf -- "$DISK_WORK"/w4s"$S"-*
    done
    local saved=("${ENGINES[@]}")
    # The rocksdb crate cannot set RocksDB's partitioner: Strata alone.
    ENGINES=(strata)
    w4_step "S=$S partitioner" "S${S}p" "disk:w4s${S}p" "$ub" --num="$N" --keys_per_prefix="$K" \
        --prefix_size=8 --sst_partitioner_fixed_prefix=8
    rm -rf -- "$DISK_WORK"/w4s"$S"p-*
    ENGINES=(rocksdb strata)
    w4_step "descending" "desc" "disk:w4desc" "$ub" --num="$N" --seq_descending=1
    rm -rf -- "$DISK_WORK"/w4desc-*
    third=$((N / 3))
    w4_step "seq run 1 (middle)" "seq1" "disk:w4seq" "$((third * 116))" --num="$third" --key_offset="$third"
    W4_BENCH=appendseq w4_step "seq run 2 (low)" "seq2" "disk:w4seq" "$((third * 116))" --num="$third" \
        --use_existing_db=1
    W4_BENCH=appendseq w4_step "seq run 3 (high)" "seq3" "disk:w4seq" "$((third * 116))" --num="$third" \
        --use_existing_db=1 --key_offset="$((2 * third))"
    sizes "seq runs" "disk:w4seq"
    rm -rf -- "$DISK_WORK"/w4seq-*
    ENGINES=("${saved[@]}")
}

# W5: per V, each engine fills a fresh database (rows in order, WAL off),
# flushes and compacts it to the bottom, then scans it with each of its
# methods: one warm-up scan and W5_REPS timed ones. Prints ms per scan.
W5_ROWS=() # "V|engine|method|median ms|all ms"
w5() {
    local N V e m reps=${W5_REPS:-3} benches i
    N=$(scaled 10000000)
    benches=mvccscan
    for ((i = 0; i < reps; i++)); do benches+=",mvccscan"; done
    for V in ${W5_V:-1 10 100 1000 10000}; do
        local common=(--num="$N" --versions_per_key="$V" --key_size=16 --value_size=10
            --compression_type=none --cache_size=1073741824 --write_buffer_size=67108864 --seed=1)
        for e in rocksdb strata; do
            local db="$WORK/w5-v$V-$e" methods=(next seek_successor)
            [[ $e == strata ]] && methods=(next next_prefix prev_prefix seek_successor)
            run "$e" "w5-v$V-fill" --db="$db" --benchmarks=fillmvcc,flush,compact \
                --batch_size=1000 --disable_wal=1 "${common[@]}"
            for m in "${methods[@]}"; do
                run "$e" "w5-v$V-$m" --db="$db" --use_existing_db=1 --benchmarks="$benches" \
                    --scan_method="$m" "${common[@]}"
                local ms
                ms=$(sed -n -E 's/^mvccscan .*\(scan ([0-9.]+) ms.*/\1/p' "$LOG_DIR/w5-v$V-$m-$e$RUN_SUFFIX.out" | tail -n +2 | tr '\n' ' ')
                W5_ROWS+=("$V|$e|$m|$(tr ' ' '\n' <<<"$ms" | grep . | sort -g | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')|$ms")
                echo "   V=$V $e $m: $ms ms"
            done
            EXTRA+=("W5 V=$V: database size $e $(dbsize "$db") B")
            rm -rf -- "$db"
        done
        if [[ -n ${PEBBLE_BENCH:-} ]]; then
            local out="$LOG_DIR/w5-v$V-pebble$RUN_SUFFIX.out"
            "$PEBBLE_BENCH" -w w5 -dir "$WORK/pebble-w5" -cache_mib 1024 -versions "$V" -scale "$SCALE" -reps "$reps" >"$out" 2>&1 ||
                { tail -n 5 "$out" >&2; die "Pebble W5 failed"; }
            rm -rf -- "$WORK/pebble-w5"
            for m in next nextprefix seekge; do
                local line
                line=$(grep -E "^ +scan $m +V=$V " "$out" | head -n1)
                W5_ROWS+=("$V|pebble|$m|$(sed -n -E 's/.*median ([0-9.]+)\).*/\1/p' <<<"$line")|$(sed -n -E 's/.*ms: ([0-9. ]+) +\(min.*/\1/p' <<<"$line")")
                echo "   V=$V pebble $m: $line"
            done
        fi
    done
}

w5_table() {
    echo
    echo "== W5 scale=$SCALE: ms per whole scan, median of ${W5_REPS:-3} (after one warm-up scan)"
    printf '%s\n' "${W5_ROWS[@]}" | awk -F'|' '
    { ms[$1, $2, $3] = $4; if (!($1 in seen)) { seen[$1] = 1; vs[++n] = $1 } }
    function f(x) { return x == "" ? "-" : sprintf("%.1f", x) }
    function r(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("%.2f", a / b) }
    END {
        printf "%6s | %9s %9s | %9s %9s %9s %9s | %9s %9s %9s | %9s %9s %9s %9s\n", "V",
            "rdb:next", "rdb:seek", "st:next", "st:nextp", "st:prevp", "st:seek",
            "pb:next", "pb:nextp", "pb:seek", "np/next", "pp/np", "np/pb:np", "np/rdb:sk"
        for (i = 1; i <= n; i++) {
            v = vs[i]
            printf "%6s | %9s %9s | %9s %9s %9s %9s | %9s %9s %9s | %9s %9s %9s %9s\n", v,
                f(ms[v, "rocksdb", "next"]), f(ms[v, "rocksdb", "seek_successor"]),
                f(ms[v, "strata", "next"]), f(ms[v, "strata", "next_prefix"]), f(ms[v, "strata", "prev_prefix"]), f(ms[v, "strata", "seek_successor"]),
                f(ms[v, "pebble", "next"]), f(ms[v, "pebble", "nextprefix"]), f(ms[v, "pebble", "seekge"]),
                r(ms[v, "strata", "next_prefix"], ms[v, "strata", "next"]),
                r(ms[v, "strata", "prev_prefix"], ms[v, "strata", "next_prefix"]),
                r(ms[v, "strata", "next_prefix"], ms[v, "pebble", "nextprefix"]),
                r(ms[v, "strata", "next_prefix"], ms[v, "rocksdb", "seek_successor"])
        }
    }'
    for x in "${EXTRA[@]}"; do echo "  $x"; done
}

w6() {
    local N
    N=$(scaled 5000000)
    step mixed w6 --benchmarks="${W6_BENCHMARKS:-fillrandom,readrandom,seekrandom,readseq,overwrite,readwhilewriting}" \
        --num="$N" --key_size=16 --value_size=100 --compression_type=snappy --seed=1
    sizes "at end" w6
}

# W7: threads on W6's database. readrandom and seekrandom with 1-16
# threads (each thread reads R / threads keys, so every point does the
# same total work), readwhilewriting with 4 readers, and fillrandom with
# 1, 4 and 16 writers (each writes N / writers keys). micros/op is
# db_bench's per-thread figure, as both tools print it. W7_THREADS and
# W7_WRITERS override the thread counts.
w7() {
    local N R t
    N=$(scaled 5000000); R=$(scaled 1000000)
    local base=(--key_size=16 --value_size=100 --compression_type=snappy --seed=1)
    step fill w7 --benchmarks=fillrandom,waitforcompaction --num="$N" "${base[@]}"
    for t in ${W7_THREADS:-1 2 4 8 16}; do
        step "reads-t$t" w7 --use_existing_db=1 --benchmarks=readrandom,seekrandom \
            --num="$N" --reads=$((R / t)) --threads="$t" "${base[@]}"
    done
    step "readwhilewriting-t4" w7 --use_existing_db=1 --benchmarks=readwhilewriting \
        --num="$N" --reads=$((R / 4)) --threads=4 "${base[@]}"
    for t in ${W7_WRITERS:-1 4 16}; do
        step "fill-t$t" "w7f$t" --benchmarks=fillrandom --num=$((N / t)) --threads="$t" "${base[@]}"
    done
}

# W8: W6's benchmarks at 10x N on disk, block cache 1 GiB, under W8_MEM
# (above), the reads without and with direct reads on the same database.
w8() {
    local N R WR
    N=$(scaled 50000000); R=$(scaled "${W8_READS:-500000}"); WR=$(scaled "${W8_WRITES:-5000000}")
    local base=(--key_size=16 --value_size=100 --compression_type=snappy --seed=1 --cache_size=1073741824)
    step fill disk:w8 --benchmarks=fillrandom,waitforcompaction --num="$N" "${base[@]}"
    sizes "after fill" disk:w8
    step reads disk:w8 --use_existing_db=1 --benchmarks=readrandom,seekrandom,readseq \
        --num="$N" --reads="$R" "${base[@]}"
    step reads-direct disk:w8 --use_existing_db=1 --use_direct_reads=1 \
        --benchmarks=readrandom,seekrandom,readseq --num="$N" --reads="$R" "${base[@]}"
    step writes disk:w8 --use_existing_db=1 --benchmarks=overwrite,readwhilewriting \
        --num="$N" --writes="$WR" --reads="$R" "${base[@]}"
    sizes "at end" disk:w8
}

echo "== $W scale=$SCALE runs=$RUNS host=$(hostname) $(date -Is); logs: $LOG_DIR"
echo "== strata-bench: $BIN ($BUILD)"
echo "== db_bench: ${DB_BENCH:-none (bench/build_db_bench.sh builds one)}"
T0=$(date +%s)
for ((RUN = 1; RUN <= RUNS; RUN++)); do
    ((RUNS > 1)) && { RUN_SUFFIX="-run$RUN"; echo "== run $RUN of $RUNS"; }
    case $W in
        W1) w1 ;; W2) w2 ;; W3) w3 ;; W4) w4 ;; W5) w5 ;; W6) w6 ;; W7) w7 ;; W8) w8 ;;
    esac
    rm -rf -- "${WORK:?}"/* "${DISK_WORK:?}"/*
done

if [[ $W == W5 ]]; then
    w5_table
    echo "== W5 done in $(($(date +%s) - T0)) s (load $(load)); full outputs and command lines in $LOG_DIR"
    exit 0
fi

# The table: per step and benchmark, each engine's median micros/op over the
# runs, Strata / RocksDB of the medians, and with RUNS > 1 the range of the
# per-run ratios; with db_bench, the harness's RocksDB over db_bench too
# (the fairness check: 1.00 is the same speed).
echo
echo "== $W scale=$SCALE runs=$RUNS: micros/op, median over runs (ratio = Strata / RocksDB; below 1 is Strata faster)"
printf '%s\n' "${ROWS[@]}" | awk -F'|' -v runs="$RUNS" -v dbb="${DB_BENCH:+1}" '
function median(list,    n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function range(list,    n, a, i, lo, hi) {
    n = split(list, a, " "); lo = hi = a[1]
    for (i = 2; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
    return n > 1 ? sprintf("%.2f-%.2f", lo, hi) : sprintf("%.2f", lo)
}
{
    k = $2 "|" $3 "|" $4
    if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
    v[k, $5] = v[k, $5] " " $6
    val[k, $5, $1] = $6
}
END {
    printf "%-8s %-20s %-16s %10s %10s %7s", "workload", "step", "benchmark", "RocksDB", "Strata", "ratio"
    if (runs > 1) printf " %11s", "per run"
    if (dbb) printf " %10s %11s", "db_bench", "RocksDB/dbb"
    printf "\n"
    for (i = 1; i <= nk; i++) {
        k = keys[i]; split(k, f, "|")
        r = (k SUBSEP "rocksdb") in v ? median(v[k, "rocksdb"]) : ""
        s = (k SUBSEP "strata") in v ? median(v[k, "strata"]) : ""
        d = (k SUBSEP "db_bench") in v ? median(v[k, "db_bench"]) : ""
        printf "%-8s %-20s %-16s %10s %10s %7s", f[1], f[2], f[3], r == "" ? "-" : sprintf("%.3f", r),
            s == "" ? "-" : sprintf("%.3f", s), (r > 0 && s != "") ? sprintf("%.2f", s / r) : "-"
        if (runs > 1) {
            rl = ""; for (n = 1; n <= runs; n++) if ((k SUBSEP "rocksdb" SUBSEP n) in val && (k SUBSEP "strata" SUBSEP n) in val && val[k, "rocksdb", n] > 0) rl = rl " " val[k, "strata", n] / val[k, "rocksdb", n]
            printf " %11s", rl == "" ? "-" : range(rl)
        }
        if (dbb) printf " %10s %11s", d == "" ? "-" : sprintf("%.3f", d), (d > 0 && r != "") ? sprintf("%.2f", r / d) : "-"
        printf "\n"
    }
}'
for x in "${EXTRA[@]}"; do echo "  $x"; done
echo "== $W done in $(($(date +%s) - T0)) s (load $(load)); full outputs and command lines in $LOG_DIR"
