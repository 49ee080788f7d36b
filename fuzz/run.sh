#!/usr/bin/env bash
# fuzz/run.sh SECONDS: runs every fuzz target for SECONDS each (default 60)
# with cargo-fuzz on the nightly toolchain, installing cargo-fuzz if needed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
secs=${1:-60}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
for t in $(cargo +nightly fuzz list); do
    echo "== $t ($secs s)"
    cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10
done
