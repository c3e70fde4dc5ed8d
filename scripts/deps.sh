#!/usr/bin/env bash
# Installs the Debian packages berth needs to build, run and test, if any
# are missing. Idempotent; needs root (or sudo) only when something is
# missing. Sourced by run.sh and test.sh.
set -euo pipefail

BERTH_BUILD_PACKAGES=(build-essential cmake pkg-config libuv1-dev libmicrohttpd-dev
    libjson-c-dev libarchive-dev libssl-dev libsqlite3-dev)
BERTH_RUN_PACKAGES=(runc e2fsprogs)
BERTH_TEST_PACKAGES=(check libcurl4-openssl-dev busybox-static umoci skopeo zstd curl
    iproute2 e2fsprogs python3 attr)

berth_install_missing() {
    local missing=()
    local p
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$p")
        fi
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "berth: installing ${missing[*]}" >&2
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
