#!/usr/bin/env bash
# Runs the whole test suite: installs missing packages, builds, and runs
# every Check suite with CTest (unit and API tests against a real berthd).
#   ./scripts/test.sh              plain build in build/
#   ./scripts/test.sh --sanitize   AddressSanitizer + UBSan build in build-asan/
# Extra arguments after the flags go to ctest (e.g. -L unit, -R images).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh

dir=build
# The test build compiles the benchmark-only routes (/v1/debug/...): the
# shutdown suite uses their long CPU-bound job. scripts/run.sh builds
# without them.
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DBERTH_TESTS=ON -DBERTH_BENCH_ROUTES=ON)
if [ "${1:-}" = "--sanitize" ]; then
    shift
    dir=build-asan
    cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DBERTH_TESTS=ON -DBERTH_SANITIZE=ON -DBERTH_BENCH_ROUTES=ON)
    # Leaks are errors; the sanitizer report fails the test that caused it.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    # The sanitized run looks for memory errors, not for rare crash
    # windows: ten kills of the campaign (the plain run does all fifty)
    # keep CI under its 30 minutes.
    export BERTH_CRASH_ROUNDS=${BERTH_CRASH_ROUNDS:-10}
fi

berth_install_missing "${BERTH_BUILD_PACKAGES[@]}" "${BERTH_RUN_PACKAGES[@]}" \
    "${BERTH_TEST_PACKAGES[@]}"
cmake -S . -B "$dir" "${cmake_args[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
ctest --test-dir "$dir" --output-on-failure --timeout 900 -j"$(nproc)" "$@"
