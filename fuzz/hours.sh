#!/usr/bin/env bash
# fuzz/hours.sh TARGET:CPU_SECONDS [...]: fuzzes each TARGET until its
# fuzzer has used CPU_SECONDS of CPU (user + system), in chunks of
# `fuzz/run.sh CHUNK TARGET` (CHUNK seconds of wall time, default 600;
# env FUZZ_CHUNK), each timed with /usr/bin/time. It prints a line per
# chunk and stops at the first finding (run.sh's exit status). Touch
# fuzz/hours.stop to end it between chunks; a fuzzer must not be paused
# with SIGSTOP (libFuzzer's -timeout is wall-clock time, so a paused input
# looks like a hang). This is how docs/reliability.md's CPU-hours were
# measured; the CPU time includes run.sh's build check of the targets.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
chunk=${FUZZ_CHUNK:-600}
[[ -x /usr/bin/time ]] || { echo "hours.sh: needs /usr/bin/time (apt-get install -y time)" >&2; exit 1; }
times=$(mktemp)
trap 'rm -f "$times"' EXIT
for spec in "$@"; do
    target=${spec%%:*}
    goal=${spec##*:}
    [[ $target != "$spec" && $goal =~ ^[0-9]+$ ]] || { echo "hours.sh: want TARGET:CPU_SECONDS, got $spec" >&2; exit 1; }
    total=0
    n=0
    while ((total < goal)); do
        if [[ -e hours.stop ]]; then
            echo "hours.sh: stopped by hours.stop; $target at ${total} s of CPU"
            exit 0
        fi
        n=$((n + 1))
        /usr/bin/time -f "%U %S" -o "$times" ./run.sh "$chunk" "$target"
        cpu=$(awk 'END { printf "%d", $1 + $2 }' "$times")
        total=$((total + cpu))
        echo "hours.sh: $target chunk $n: ${cpu} s of CPU, ${total} of ${goal} s"
    done
done
