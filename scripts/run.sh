#!/usr/bin/env bash
# Builds berthd (installing missing packages first) and runs it in the
# foreground with the default configuration: 127.0.0.1:7380, store in
# /var/lib/berth (as root), runtime oci with runc. Extra arguments go to
# berthd, e.g. ./scripts/run.sh --listen 127.0.0.1:0 --log-level debug
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
berth_install_missing "${BERTH_BUILD_PACKAGES[@]}" "${BERTH_RUN_PACKAGES[@]}"
# Its own build directory, so that it never reconfigures the test build.
cmake -S . -B build-run -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBERTH_TESTS=OFF >/dev/null
cmake --build build-run -j"$(nproc)" --target berthd berth-init >/dev/null
exec ./build-run/berthd "$@"
