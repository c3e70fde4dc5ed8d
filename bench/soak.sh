#!/usr/bin/env bash
# Soak test: N parallel clients (default 50) for S seconds (default 300)
# against one berthd, mixing health probes, image imports by upload (images
# no one has, made from the base in the script and deleted again, and
# re-imports of umoci-built variants under each client's name), container
# runs (create, start a process, wait, read its output, delete; some with
# a volume mounted, some with limits.disk_bytes), output follows
# (?follow=1 on a process that writes for 2 s) and volume tar streams in
# and out. A prober process of its own samples GET /v1/health at a steady
# rate (default 50 Hz) for the latency figure.
#
# Prints: requests served by kind, errors (every non-2xx or transport
# error, and every wrong result; the first few printed), /v1/health p50 /
# p99 during the run, the daemon's RSS, fd and mount counts at start, peak
# and end (after everything is deleted and a settle time), and the mounts
# under the root and the container cgroups left behind. Exits 1 when any
# goal of "errors 0, nothing left behind" is missed.
#
# Builds berthd and berth-init (Release) into build-bench-soak, makes the
# images from busybox-static with umoci, starts berthd on a free loopback
# port with a temporary root, and stops only what it started.
#
#   bench/soak.sh                               # 50 clients, 300 s
#   bench/soak.sh --clients 20 --duration 60
#
# Knobs (flags or environment): --clients N (CLIENTS), --duration S
# (DURATION), --settle S (SETTLE, default 10), --health-hz HZ (HEALTH_HZ),
# --variants K (VARIANTS, default 8: distinct images to import),
# --seed N (SEED), BUILD_DIR; BERTHD=path runs that berthd instead of
# building one (e.g. build-asan/berthd: leaks are reported at its exit,
# and its exit status is then not 0). Other flags go to bench/soak.py as they are,
# e.g. --trim (after the settle, malloc_trim(0) in berthd through gdb, and
# RSS again: what the allocator keeps of freed memory, against a leak).
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build-bench-soak}
clients=${CLIENTS:-50}
duration=${DURATION:-300}
settle=${SETTLE:-10}
health_hz=${HEALTH_HZ:-50}
variants=${VARIANTS:-8}
seed=${SEED:-1}
extra=()
while [ $# -gt 0 ]; do
    case $1 in
    --clients) clients=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --settle) settle=$2; shift 2 ;;
    --health-hz) health_hz=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) extra+=("$1"); shift ;;
    esac
done

need() { command -v "$1" >/dev/null || apt-get install -y "$2" >/dev/null 2>&1 || true; }
need runc runc
need umoci umoci
need python3 python3
[ -x /bin/busybox ] || apt-get install -y busybox-static >/dev/null

if [ -n "${BERTHD:-}" ]; then
    berthd=$(readlink -f "$BERTHD") # another build (its berth-init beside it), e.g. build-asan/berthd
    flavour=$berthd
else
    cmake -B "$build" -S "$src" -DBERTH_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j"$(nproc)" --target berthd berth-init >/dev/null 2>&1
    berthd=$(readlink -f "$build/berthd")
    flavour="Release, $build"
fi

tmp=$(mktemp -d /tmp/berth-bench-soak-XXXXXX)
run_id=$$ # in every handle the run makes: soak<run_id>-...
cleanup() {
    set +e
    # Only a run that died leaves anything: its berthd (by the PID it
    # wrote), then whatever it had mounted under its root.
    if [ -f "$tmp/berthd.pid" ]; then
        p=$(cat "$tmp/berthd.pid")
        if [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$berthd" ]; then
            kill -TERM "$p"
            for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        fi
    fi
    awk -v r="$tmp/" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m"; done
    losetup -a 2>/dev/null | grep -F "$tmp/" | cut -d: -f1 | while read -r l; do losetup -d "$l"; done
    find /sys/fs/cgroup -maxdepth 8 -depth -type d -name "soak$run_id-*" -exec rmdir {} \; 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# ---- the images: busybox, and VARIANTS images of busybox plus a layer each --
img=$tmp/img
mkdir -p "$img" "$tmp/work"
rootfs=$tmp/work/rootfs
mkdir -p "$rootfs"/{bin,etc,tmp,root}
cp /bin/busybox "$rootfs/bin/"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$rootfs/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
(cd "$tmp/work" && umoci init --layout base >/dev/null && umoci new --image base:latest >/dev/null &&
    umoci unpack --image base:latest ub >/dev/null 2>&1 && cp -a "$rootfs"/. ub/rootfs/ &&
    umoci repack --image base:latest ub >/dev/null && umoci gc --layout base && rm -rf ub)
tar -C "$tmp/work/base" -cf "$img/base.tar" .
for k in $(seq 0 $((variants - 1))); do
    (cd "$tmp/work" && cp -a base "v$k" && umoci unpack --image "v$k:latest" ub >/dev/null 2>&1 &&
        mkdir -p ub/rootfs/soak && head -c 65536 /dev/urandom >ub/rootfs/soak/blob &&
        echo "variant $k" >ub/rootfs/soak/name &&
        umoci repack --image "v$k:latest" ub >/dev/null && umoci gc --layout "v$k" && rm -rf ub)
    tar -C "$tmp/work/v$k" -cf "$img/v$k.tar" .
done
rm -rf "$tmp/work"

echo "berthd $("$berthd" --version | cut -d' ' -f2) ($flavour); $(runc --version | head -1);" \
    "$(nproc) cores; $(uname -r); $(date -u '+%F %H:%M UTC'); up $(uptime | sed 's/.*up *//')"
python3 "$src/bench/soak.py" --berthd "$berthd" --root "$tmp/root" --images "$img" \
    --log "$tmp/berthd.log" --clients "$clients" --duration "$duration" --settle "$settle" \
    --health-hz "$health_hz" --seed "$seed" --run-id "$run_id" ${extra[@]+"${extra[@]}"}
