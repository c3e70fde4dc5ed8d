#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_*.c) with clang, ASan and UBSan
# in build-fuzz/ and runs each in turn for SECONDS (default 60), starting
# from its committed seeds (fuzz/corpus/<target>/). What a run learns
# stays in build-fuzz/corpus/<target>/ for the next run. Any finding (a
# crash, a broken property, a leak, a timeout, an out-of-memory) fails the
# script; the input is saved in build-fuzz/artifacts/<target>/ and the
# report is in build-fuzz/logs/<target>.log.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 600 unpack oci
#
# TARGET is a name without its prefix (router, oci, platform, unpack,
# json, bodies). One process per target, one target at a time: CI has two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh

secs=60
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
    secs=$1
    shift
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in fuzz/fuzz_*.c; do
        t=${f#fuzz/fuzz_}
        targets+=("${t%.c}")
    done
fi

berth_install_missing "${BERTH_BUILD_PACKAGES[@]}" "${BERTH_FUZZ_PACKAGES[@]}"
dir=build-fuzz
cmake -S . -B "$dir" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DBERTH_TESTS=OFF \
    -DBERTH_FUZZ=ON >/dev/null
cmake --build "$dir" --target fuzz -j"$(nproc)"

top=$(pwd)
# libFuzzer keeps its temporary files in TMPDIR; fuzz_unpack watches /tmp
# and needs them elsewhere.
export TMPDIR=$top/$dir/tmp
mkdir -p "$TMPDIR"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
for t in "${targets[@]}"; do
    bin=$top/$dir/fuzz_$t
    seeds=$top/fuzz/corpus/$t
    [ -x "$bin" ] || { echo "fuzz: no target $t" >&2; exit 2; }
    mkdir -p "$seeds"
    # A fresh, empty working directory: the unpack target checks that
    # nothing appears in it.
    run=$top/$dir/run/$t
    rm -rf "$run"
    mkdir -p "$run" "$top/$dir/logs"
    log=$top/$dir/logs/$t.log
    work=$top/$dir/corpus/$t
    art=$top/$dir/artifacts/$t
    mkdir -p "$work" "$art"
    dict=()
    [ -f "fuzz/$t.dict" ] && dict=(-dict="$top/fuzz/$t.dict")
    echo "fuzz $t: ${secs}s"
    rc=0
    (cd "$run" && "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" \
        "$work" "$seeds") >"$log" 2>&1 || rc=$?
    # The last status line: executions, coverage, features, corpus, speed.
    grep -E '^#[0-9]+' "$log" | tail -1 || true
    if [ $rc -ne 0 ]; then
        echo "fuzz $t: FAILED (exit $rc); report in $log, input in $art/" >&2
        grep -E -A3 'ERROR|property failed|runtime error' "$log" | head -20 >&2 || true
        failed+=("$t")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: findings in ${failed[*]}" >&2
    exit 1
fi
