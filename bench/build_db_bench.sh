#!/usr/bin/env bash
# build_db_bench.sh
#
# Builds RocksDB's own db_bench from the RocksDB source that the `rocksdb`
# crate compiles (librocksdb-sys in Cargo.lock), optimized and native, as
# target/native/db_bench: the third column of bench/compare.sh, which checks
# that `strata-bench --engine=rocksdb` runs RocksDB as db_bench runs it.
#
# It compiles db_bench's five source files with the defines and flags the
# crate's build script gives RocksDB on Linux (-O3, -march=native, C++20,
# NDEBUG, snappy, lz4, zstd) and links them against the static libraries the
# native strata-bench build left in target/native (librocksdb.a, snappy, lz4,
# zstd), so both run the same compiled RocksDB. It builds that strata-bench
# first if it is missing (RocksDB's C++: 20-40 minutes on 2 cores); db_bench
# itself then takes a few minutes.
#
# Needs g++ and gflags (Debian: apt-get install -y libgflags-dev); libclang
# for the strata-bench build (libclang-dev).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=$ROOT/target/native
OUT=$TARGET/db_bench
die() { echo "build_db_bench.sh: error: $*" >&2; exit 1; }

command -v g++ >/dev/null || die "no g++ (apt-get install -y g++)"
[[ -e /usr/include/gflags/gflags.h ]] || die "no gflags headers (apt-get install -y libgflags-dev)"

version=$(awk '/^name = "librocksdb-sys"/ { getline; gsub(/"/, "", $3); print $3; exit }' "$ROOT/Cargo.lock")
[[ -n $version ]] || die "no librocksdb-sys in Cargo.lock"

if ! compgen -G "$TARGET/release/build/librocksdb-sys-*/out/librocksdb.a" >/dev/null; then
    echo "build_db_bench.sh: building the native strata-bench with RocksDB first (20-40 minutes)" >&2
    (cd "$ROOT" && RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=$TARGET \
        cargo build --release -p strata-bench --features rocksdb)
fi

# The crate's source, where cargo unpacked it.
src=""
for d in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"librocksdb-sys-$version"; do
    [[ -d $d/rocksdb/tools ]] && src=$d
done
[[ -n $src ]] || die "librocksdb-sys-$version is not unpacked under ${CARGO_HOME:-$HOME/.cargo}/registry/src"

# The newest build of each library (several may be left by older builds).
newest() { ls -t $1 2>/dev/null | head -n1; }
rocksdb_a=$(newest "$TARGET/release/build/librocksdb-sys-*/out/librocksdb.a")
snappy_a=$(newest "$TARGET/release/build/librocksdb-sys-*/out/libsnappy.a")
lz4_a=$(newest "$TARGET/release/build/lz4-sys-*/out/liblz4.a")
zstd_a=$(newest "$TARGET/release/build/zstd-sys-*/out/libzstd.a")
for a in "$rocksdb_a" "$snappy_a" "$lz4_a" "$zstd_a"; do
    [[ -f $a ]] || die "a static library of the native build is missing: $a"
done
lz4_inc=$(dirname "$lz4_a")/include
zstd_inc=$(dirname "$zstd_a")/include

# librocksdb-sys's build.rs on x86_64 Linux with RUSTFLAGS="-C target-cpu=native".
CXXFLAGS=(-O3 -march=native -std=c++20 -include cstdint
    -DNDEBUG=1 -DSNAPPY=1 -DLZ4=1 -DZSTD=1 -DHAVE_ALIGNED_NEW -DHAVE_UINT128_EXTENSION
    -DOS_LINUX -DROCKSDB_PLATFORM_POSIX -DROCKSDB_LIB_IO_POSIX -DROCKSDB_SCHED_GETCPU_PRESENT
    -DROCKSDB_AUXV_GETAUXVAL_PRESENT -DROCKSDB_FALLOCATE_PRESENT -DROCKSDB_RANGESYNC_PRESENT
    -DGFLAGS=1
    -I"$src/rocksdb/include" -I"$src/rocksdb" -I"$src" -I"$src/snappy" -I"$lz4_inc" -I"$zstd_inc"
    -w)
SOURCES=(tools/db_bench.cc tools/db_bench_tool.cc tools/tool_hooks.cc
    tools/simulated_hybrid_file_system.cc test_util/testutil.cc)

obj_dir=$TARGET/db_bench-obj
mkdir -p "$obj_dir"
objs=()
for f in "${SOURCES[@]}"; do
    o=$obj_dir/$(basename "${f%.cc}").o
    # The crate's build_version.cc defines RocksDbIOUringEnable (true) in
    # librocksdb.a and db_bench_tool.cc defines it too (from
    # --io_uring_enabled); the library is built without io_uring, so
    # db_bench's copy is renamed out of the way.
    extra=()
    [[ $f == tools/db_bench_tool.cc ]] && extra=(-DRocksDbIOUringEnable=DbBenchIOUringEnable)
    if [[ ! -f $o || $src/rocksdb/$f -nt $o || $rocksdb_a -nt $o || $0 -nt $o ]]; then
        echo "build_db_bench.sh: compiling $f" >&2
        g++ "${CXXFLAGS[@]}" "${extra[@]}" -c "$src/rocksdb/$f" -o "$o"
    fi
    objs+=("$o")
done
echo "build_db_bench.sh: linking $OUT" >&2
g++ -O3 -o "$OUT" "${objs[@]}" "$rocksdb_a" "$snappy_a" "$lz4_a" "$zstd_a" -lgflags -lpthread -ldl
"$OUT" --version 2>&1 | head -n1
echo "build_db_bench.sh: built $OUT (db_bench of librocksdb-sys $version, -O3 -march=native)"
