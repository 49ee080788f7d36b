#!/usr/bin/env bash
# leak.sh ENGINE [DURATION]
#
# Issue 26's leak test: is resident memory bounded by the configured caches
# and buffers over a long mixed run? ENGINE is strata, rocksdb (both through
# strata-bench) or db_bench. It fills a database of NUM keys (W6's key and
# value sizes, snappy) and waits for its compactions, then runs
# `readwhilewriting` with 4 readers for DURATION seconds (default 1800) on it
# and samples the process's resident memory (VmRSS) every STEP seconds,
# printing "second rss_mib" lines and the benchmark's result.
#
# Environment (all optional):
#   NUM       keys (default 50000000, W8's N)
#   CACHE     block cache bytes (default 1 GiB, W8's)
#   DIR       parent of the database (default /tmp; on disk, like W8)
#   STEP      seconds between samples (default 30)
#   KEEP=1    keep the database (it is removed otherwise)
#   FROM      a database filled the same way (e.g. W8's, by the same engine)
#             to copy instead of filling one
#   EXTRA     more flags for the mixed run (e.g. --cache_type=lru_cache,
#             --benchmark_write_rate_limit=BYTES_PER_SEC)
#   STRATA_BENCH, DB_BENCH  the binaries (default target/native/...)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
E=${1:?usage: leak.sh strata|rocksdb|db_bench [DURATION]}
T=${2:-1800}
NUM=${NUM:-50000000}; CACHE=${CACHE:-1073741824}; DIR=${DIR:-/tmp}; STEP=${STEP:-30}
B=${STRATA_BENCH:-target/native/release/strata-bench}; D=${DB_BENCH:-target/native/db_bench}
DB=$DIR/leak-$E
case $E in
    strata | rocksdb) cmd=("$B" --engine="$E") ;;
    db_bench) cmd=("$D") ;;
    *) echo "leak.sh: unknown engine '$E'" >&2; exit 2 ;;
esac
[[ -x ${cmd[0]} ]] || { echo "leak.sh: no ${cmd[0]} (bench/compare.sh builds it)" >&2; exit 1; }
F=(--db="$DB" --num="$NUM" --key_size=16 --value_size=100 --compression_type=snappy --cache_size="$CACHE" --seed=1)
rm -rf "$DB"
out=$(mktemp)
if [[ -n ${FROM:-} ]]; then
    [[ -f $FROM/CURRENT ]] || { echo "leak.sh: $FROM is not a database" >&2; exit 1; }
    cp -a "$FROM" "$DB"
else
    # The fill's progress lines (db_bench writes them to stderr) only on failure.
    "${cmd[@]}" "${F[@]}" --benchmarks=fillrandom,waitforcompaction >"$out" 2>&1 || {
        cat "$out" >&2; rm -f "$out"; exit 1
    }
fi
# strata-bench also says where the memory is at the end (memtables, block
# cache, table readers: its memstats step); db_bench has no such step.
benches=readwhilewriting
[[ $E == db_bench ]] || benches+=,memstats
"${cmd[@]}" "${F[@]}" --use_existing_db=1 --benchmarks="$benches" --threads=4 \
    --duration="$T" --reads="$NUM" ${EXTRA:-} >"$out" 2>&1 &
pid=$!
t=0
while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$pid/status" 2>/dev/null || true)
    [[ -n $rss ]] && echo "$t $rss"
    sleep "$STEP"; t=$((t + STEP))
done
# A failed run shows its output (under `set -e` a bare wait would exit
# without it).
wait "$pid" || { cat "$out" >&2; rm -f "$out"; exit 1; }
grep -E "^readwhilewriting|^[a-z-]+: [0-9]" "$out" || cat "$out"
rm -f "$out"
[[ ${KEEP:-0} == 1 ]] || rm -rf "$DB"
