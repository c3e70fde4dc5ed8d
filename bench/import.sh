#!/usr/bin/env bash
# Image import benchmark (issue 3). Builds a realistic image, packs it
# with umoci, and measures in one run:
#
#   floor        sha256sum of its blobs + tar -xzf of its layers into a fresh dir
#   berth        cold import from the layout dir, warm re-import from the dir,
#                cold import by upload (fresh root), warm re-import by upload,
#                the daemon's peak RSS (VmHWM) over each
#   peers        ctr images import (containerd, CRI disabled, private root and
#                socket) and podman load, cold and warm, when installable
#
# The rootfs is a Debian minbase made with debootstrap (ROOTFS=debootstrap,
# needs the configured mirror) or, by default, a copy of files on this
# machine: directories of /usr/share and /usr/lib up to ~SIZE_MB MB.
#
#   bench/import.sh                     # defaults
#   BERTHD=build/berthd PEERS=0 SIZE_MB=150 ROOTFS=files bench/import.sh
#
# Only the processes this script starts are stopped, by PID.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
size_mb=${SIZE_MB:-150}
rootfs_mode=${ROOTFS:-files}
peers=${PEERS:-1}
warm_runs=${WARM_RUNS:-5}

if [ -z "${BERTHD:-}" ]; then
    build=${BUILD_DIR:-$src/build-bench-import}
    cmake -B "$build" -S "$src" -DBERTH_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j"$(nproc)" --target berthd >/dev/null
    BERTHD=$build/berthd
fi
for t in umoci curl sha256sum; do
    command -v $t >/dev/null || apt-get install -y "$t" >/dev/null
done

work=$(mktemp -d "${TMPDIR:-/tmp}/berth-bench-import-XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        if kill -0 "$p" 2>/dev/null; then
            kill -TERM "$p" 2>/dev/null || true
            wait "$p" 2>/dev/null || true
        fi
    done
    rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
ms() { awk -v a="$1" 'BEGIN { printf "%.1f", a * 1000 }'; }

# ---- the image --------------------------------------------------------------------
rootfs=$work/rootfs
if [ "$rootfs_mode" = debootstrap ]; then
    command -v debootstrap >/dev/null || apt-get install -y debootstrap >/dev/null
    debootstrap --variant=minbase bookworm "$rootfs" >/dev/null
else
    mkdir -p "$rootfs"
    budget=$((size_mb * 1024))
    for d in /usr/share/* /usr/lib/*; do
        [ -d "$d" ] && [ ! -L "$d" ] || continue
        case $d in */locale | */berth* | */debug) continue ;; esac
        k=$(du -sk "$d" 2>/dev/null | cut -f1)
        [ "$k" -lt "$budget" ] || continue
        mkdir -p "$rootfs$(dirname "$d")"
        cp -a "$d" "$rootfs$(dirname "$d")/"
        budget=$((budget - k))
        [ "$budget" -gt 4096 ] || break
    done
fi
files=$(find "$rootfs" | wc -l)
rootfs_mb=$(du -sm "$rootfs" | cut -f1)

layout=$work/layout
umoci init --layout "$layout"
umoci new --image "$layout:bench"
umoci unpack --image "$layout:bench" "$work/bundle" >/dev/null
rmdir "$work/bundle/rootfs" && mv "$rootfs" "$work/bundle/rootfs"
umoci repack --image "$layout:bench" "$work/bundle" >/dev/null
umoci gc --layout "$layout"
rm -rf "$work/bundle"
tar -C "$layout" -cf "$work/layout.tar" .
layer_bytes=$(find "$layout/blobs" -type f -size +100k -printf '%s\n' | awk '{ s += $1 } END { print s }')
echo "berth import bench: $(nproc) cores, $(date -u +%F); rootfs ${rootfs_mb} MB, $files entries ($rootfs_mode);" \
    "compressed layer $((layer_bytes / 1048576)) MB; berthd $BERTHD"

# Warm the page cache for everyone alike.
cat "$layout"/blobs/sha256/* "$work/layout.tar" >/dev/null

# ---- the floor --------------------------------------------------------------------
t0=$(now)
sha256sum "$layout"/blobs/sha256/* >/dev/null
t1=$(now)
mkdir "$work/floor"
for l in $(find "$layout/blobs" -type f -size +100k); do
    tar -xzf "$l" -C "$work/floor"
done
sync -f "$work/floor" 2>/dev/null || true
t2=$(now)
floor_hash=$(secs "$t0" "$t1")
floor_tar=$(secs "$t1" "$t2")
floor=$(awk -v a="$floor_hash" -v b="$floor_tar" 'BEGIN { printf "%.3f", a + b }')
rm -rf "$work/floor"
# Every timed run starts with nothing dirty on the disk: berth makes each
# snapshot durable (syncfs) before it is used, which would otherwise pay
# for the writeback of whatever ran before it (the floor's tree and its
# removal).
sync
echo "floor: sha256sum ${floor_hash} s + tar -xzf ${floor_tar} s = ${floor} s"

# ---- berth ------------------------------------------------------------------------
start_berthd() {  # $1: root; sets bpid, url
    "$BERTHD" --listen 127.0.0.1:0 --root "$1" --runtime host --network none 2>"$1.log" &
    bpid=$!
    pids+=("$bpid")
    local port=
    for _ in $(seq 100); do
        port=$(grep -ao 'listening on http://127.0.0.1:[0-9]*' "$1.log" 2>/dev/null | sed 's/.*://') || true
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || { echo "berthd did not start:"; cat "$1.log"; exit 1; }
    url=http://127.0.0.1:$port
}
stop_berthd() {
    kill -TERM "$bpid"
    wait "$bpid" 2>/dev/null || true
}
hwm_mib() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$bpid/status"; }
post_layout() {  # prints "status seconds"
    curl -s -o "$work/out.json" -w '%{http_code} %{time_total}\n' -H 'Content-Type: application/json' \
        -d "{\"source\":{\"layout\":\"$layout\"}}" "$url/v1/images"
}
post_upload() {
    curl -s -o "$work/out.json" -w '%{http_code} %{time_total}\n' -H 'Content-Type: application/x-tar' \
        -H 'Expect:' --data-binary @"$work/layout.tar" "$url/v1/images"
}
expect() {  # $1 want, $2 "status secs"
    [ "${2%% *}" = "$1" ] || { echo "berth: expected $1, got $2: $(head -c 400 "$work/out.json")"; exit 1; }
}
min_of() { tr ' ' '\n' | sort -g | head -1; }
median_of() { tr ' ' '\n' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

start_berthd "$work/root1"
hwm_idle=$(hwm_mib)
r=$(post_layout); expect 201 "$r"; cold_dir=${r#* }
hwm_dir=$(hwm_mib)
warm=""
for _ in $(seq "$warm_runs"); do r=$(post_layout); expect 200 "$r"; warm="$warm ${r#* }"; done
warm_dir=$(echo $warm | median_of)
warm_dir_min=$(echo $warm | min_of)
stop_berthd

sync
start_berthd "$work/root2"
r=$(post_upload); expect 201 "$r"; cold_up=${r#* }
hwm_up=$(hwm_mib)
warm=""
for _ in $(seq "$warm_runs"); do r=$(post_upload); expect 200 "$r"; warm="$warm ${r#* }"; done
warm_up=$(echo $warm | median_of)
hwm_all=$(hwm_mib)
stop_berthd

echo "berth cold import, layout dir:   ${cold_dir} s  ($(ratio "$cold_dir" "$floor") x floor; goal <= 1.1)"
echo "berth warm re-import, layout dir: $(ms "$warm_dir") ms median of $warm_runs, min $(ms "$warm_dir_min") ms (goal < 20 ms)"
echo "berth cold import, upload:       ${cold_up} s  ($(ratio "$cold_up" "$floor") x floor)"
echo "berth warm re-import, upload:    $(ms "$warm_up") ms median of $warm_runs"
echo "berthd peak RSS (VmHWM): idle ${hwm_idle} MiB, after layout import ${hwm_dir} MiB," \
    "after upload import ${hwm_up} MiB, after warm uploads ${hwm_all} MiB (goal < 64 MiB)"

# ---- peers ------------------------------------------------------------------------
[ "$peers" = 1 ] || exit 0

if ! command -v ctr >/dev/null || ! command -v containerd >/dev/null; then
    apt-get install -y containerd >/dev/null 2>&1 || true
fi
if command -v containerd >/dev/null && command -v ctr >/dev/null; then
    cr=$work/containerd
    mkdir -p "$cr"
    cat >"$cr/config.toml" <<EOF
version = 2
root = "$cr/root"
state = "$cr/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$cr/sock"
EOF
    containerd --config "$cr/config.toml" >"$cr/log" 2>&1 &
    cpid=$!
    pids+=("$cpid")
    for _ in $(seq 100); do [ -S "$cr/sock" ] && break; sleep 0.1; done
    ctr_import() {
        local t0 t1
        t0=$(now)
        ctr -a "$cr/sock" -n bench images import --index-name bench:1 "$work/layout.tar" >/dev/null
        t1=$(now)
        secs "$t0" "$t1"
    }
    c_cold=$(ctr_import)
    c_warm=$(ctr_import)
    echo "ctr images import: cold ${c_cold} s ($(ratio "$c_cold" "$floor") x floor), warm $(ms "$c_warm") ms"
    kill -TERM "$cpid"
    wait "$cpid" 2>/dev/null || true
else
    echo "ctr images import: containerd not installable here, skipped"
fi

if ! command -v podman >/dev/null; then
    apt-get install -y podman >/dev/null 2>&1 || true
fi
if command -v podman >/dev/null; then
    pr=$work/podman
    mkdir -p "$pr"
    pod() { podman --root "$pr/root" --runroot "$pr/run" --storage-driver vfs "$@"; }
    pod_load() {
        local t0 t1
        t0=$(now)
        pod load -q -i "$work/layout.tar" >/dev/null
        t1=$(now)
        secs "$t0" "$t1"
    }
    if [ "${PODMAN_DRIVER:-overlay}" = overlay ]; then
        pod() { podman --root "$pr/root" --runroot "$pr/run" "$@"; }
    fi
    p_cold=$(pod_load)
    p_warm=$(pod_load)
    echo "podman load: cold ${p_cold} s ($(ratio "$p_cold" "$floor") x floor), warm $(ms "$p_warm") ms"
else
    echo "podman load: not installable here, skipped"
fi
