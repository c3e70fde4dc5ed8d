#!/usr/bin/env bash
# Installs the Debian packages berth needs to build, run and test, if any
# are missing. Idempotent; needs root (or sudo) only when something is
# missing. Sourced by run.sh and test.sh.
set -euo pipefail

# libcurl: the registry client (image pulls) speaks HTTP(S) with it.
BERTH_BUILD_PACKAGES=(build-essential cmake pkg-config libuv1-dev libmicrohttpd-dev
    libjson-c-dev libarchive-dev libssl-dev libsqlite3-dev libcurl4-openssl-dev)
# ca-certificates: the system CAs that registries' HTTPS is checked against.
# e2fsprogs: mkfs.ext4 for the sized writable layers of limits.disk_bytes.
# The network: the CNI plugins berth runs (bridge, host-local, portmap, firewall),
# iptables (which they and berth's own rules use), iproute2 (berth's bridge).
BERTH_RUN_PACKAGES=(runc ca-certificates e2fsprogs containernetworking-plugins iptables iproute2)
# docker-registry (the distribution registry), apache2-utils (htpasswd) and
# openssl: the pull tests run a real registry on loopback, with Basic auth,
# token auth and TLS set up by the test. python3-docker: docker-py, a real
# client of the Docker-compatible API (hijacked connections first).
BERTH_TEST_PACKAGES=(check busybox-static umoci skopeo zstd curl
    e2fsprogs python3 attr docker-registry apache2-utils openssl python3-docker)
# The Windows cross-build (scripts/build-windows.sh): mingw-w64, Wine to run
# the test executables (and libarchive's cmake try_run), and what building
# the dependencies from Debian's source packages needs (dpkg-dev unpacks
# them, tcl generates SQLite's amalgamation).
BERTH_WINDOWS_PACKAGES=(mingw-w64 libz-mingw-w64-dev wine64 wine cmake make pkg-config
    build-essential dpkg-dev xz-utils perl tcl autoconf automake libtool)
# scripts/fuzz.sh: libFuzzer, ASan and UBSan come with clang's runtime.
BERTH_FUZZ_PACKAGES=(clang libclang-rt-14-dev)

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
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -qq
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
