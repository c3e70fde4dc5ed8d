#!/usr/bin/env bash
# Image import benchmark (issue 3). Builds a realistic image, packs it
# with umoci, and measures in one run:
#
#   floor        sha256sum of its blobs + tar -xzf of its layers (in chain
#                order, one after the other) into a fresh dir, then sync
#   berth        cold import from the layout dir and cold import by upload,
#                each on a fresh root; warm re-import from the dir and by
#                upload; the daemon's peak RSS (VmHWM) over each
#
# The cold runs go ROUNDS times (3), floor and berth alternating in an order
# that rotates every round, each with wall and CPU seconds (user + system of
# tar, gzip and sha256sum, or of berthd). Nothing is removed until the end:
# on ext4 without a journal (this machine's root) every file creation skips
# the inodes of its block group deleted in the last 60 to 360 s one by one
# (ext4 find_inode_bit -> recently_deleted), so the rm -rf of one run's tree
# would slow down the next contender, whoever it is. The load (uptime) is
# printed at the start and the end.
#   peers        ctr images import (containerd, CRI disabled, private root and
#                socket) and podman load, cold and warm, when installable
#
# The rootfs is a Debian minbase made with debootstrap (ROOTFS=debootstrap,
# needs the configured mirror) or, by default, a copy of files on this
# machine: directories of /usr/share and /usr/lib up to ~SIZE_MB MB.
#
#   bench/import.sh                     # defaults
#   BERTHD=build/berthd PEERS=0 SIZE_MB=150 ROOTFS=files bench/import.sh
#   LAYERS=5 ROUNDS=3 PEERS=0 bench/import.sh   # the rootfs split into 5 layers
#   BERTHD_ARGS="--pool-nice 0" bench/import.sh  # extra berthd flags
#   COMPARE_ARGS="--pool-nice 0" bench/import.sh # also berth with these flags, same rounds
#
# Only the processes this script starts are stopped, by PID.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
size_mb=${SIZE_MB:-150}
rootfs_mode=${ROOTFS:-files}
peers=${PEERS:-1}
warm_runs=${WARM_RUNS:-5}
rounds=${ROUNDS:-3}
nlayers=${LAYERS:-1}

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
if [ "$nlayers" -le 1 ]; then
    rmdir "$work/bundle/rootfs" && mv "$rootfs" "$work/bundle/rootfs"
    umoci repack --image "$layout:bench" "$work/bundle" >/dev/null
else
    # LAYERS parts of about the same number of entries: the rootfs's
    # directories (two levels down) dealt out in turn, one repack each.
    mapfile -t parts < <(cd "$rootfs" && find . -mindepth 3 -maxdepth 3 -type d | sort)
    for k in $(seq 0 $((nlayers - 1))); do
        for j in $(seq "$k" "$nlayers" $((${#parts[@]} - 1))); do
            d=${parts[$j]#./}
            mkdir -p "$work/bundle/rootfs/$(dirname "$d")"
            mv "$rootfs/$d" "$work/bundle/rootfs/$d"
        done
        if [ "$k" = $((nlayers - 1)) ]; then  # whatever is left goes last
            (cd "$rootfs" && tar -cf - .) | tar -xf - -C "$work/bundle/rootfs"
        fi
        umoci repack --refresh-bundle --image "$layout:bench" "$work/bundle" >/dev/null
    done
fi
umoci gc --layout "$layout"
# The bundle stays until the end (see the top: no removal before a timed run).
tar -C "$layout" -cf "$work/layout.tar" .
layer_bytes=$(find "$layout/blobs" -type f -size +100k -printf '%s\n' | awk '{ s += $1 } END { print s }')
echo "berth import bench: $(nproc) cores, $(date -u +%F); rootfs ${rootfs_mb} MB, $files entries ($rootfs_mode);" \
    "compressed layer $((layer_bytes / 1048576)) MB; berthd $BERTHD ${BERTHD_ARGS:-}"

echo "load at start: $(uptime)"

# Warm the page cache for everyone alike.
cat "$layout"/blobs/sha256/* "$work/layout.tar" >/dev/null

# The layers in chain order (the manifest's), for the floor's tar -x.
manifest=$(python3 -c 'import json,sys; i=json.load(open(sys.argv[1]+"/index.json")); print(i["manifests"][0]["digest"].split(":")[1])' "$layout")
mapfile -t chain < <(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); [print(l["digest"].split(":")[1]) for l in m["layers"]]' "$layout/blobs/sha256/$manifest")
layers=${#chain[@]}

clk=$(getconf CLK_TCK)
# CPU ticks (user + system) of the children this (sub)shell waited for, into
# $ticks (not through $(...), whose subshell has other children).
child_ticks() {
    local a
    read -ra a <"/proc/$BASHPID/stat"
    ticks=$((a[15] + a[16]))
}
# CPU seconds of process $1 (all its threads).
proc_cpu() { awk -v t="$clk" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat"; }

# ---- the cold rounds: floor and berth alternating -----------------------------------
start_berthd() {  # $1: root, $2: extra flags; sets bpid, url
    # shellcheck disable=SC2086 # the flags: words on purpose
    "$BERTHD" --listen 127.0.0.1:0 --root "$1" --runtime host --network none ${BERTHD_ARGS:-} ${2:-} 2>"$1.log" &
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

# Each contender prints "wall cpu"; every run starts with nothing dirty on
# the disk (berth makes each snapshot durable with syncfs before it is used,
# which would otherwise pay for the writeback of whatever ran before it).
run_floor() {  # $1: round
    local c0 t0 t1 d=$work/floor-$1
    mkdir "$d"
    child_ticks
    c0=$ticks
    t0=$(now)
    sha256sum "$layout"/blobs/sha256/* >/dev/null
    for l in "${chain[@]}"; do tar -xzf "$layout/blobs/sha256/$l" -C "$d"; done
    sync -f "$d"
    t1=$(now)
    child_ticks
    echo "$(secs "$t0" "$t1") $(awk -v a="$c0" -v b="$ticks" -v t="$clk" 'BEGIN { printf "%.3f", (b - a) / t }')"
}
run_berth() {  # $1: round, $2: layout|upload|layout+|upload+ (+: with COMPARE_ARGS)
    local c0 c1 r extra=
    [ "${2%+}" = "$2" ] || extra=$COMPARE_ARGS
    start_berthd "$work/root-$2-$1" "$extra"
    c0=$(proc_cpu "$bpid")
    if [ "${2%+}" = layout ]; then r=$(post_layout); else r=$(post_upload); fi
    c1=$(proc_cpu "$bpid")
    stop_berthd
    expect 201 "$r"
    echo "${r#* } $(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.3f", b - a }')"
}
contenders=(floor layout upload)
[ -z "${COMPARE_ARGS:-}" ] || contenders+=(layout+ upload+)
nc=${#contenders[@]}
declare -A wall cpu
for round in $(seq "$rounds"); do
    line="round $round:"
    for k in $(seq 0 $((nc - 1))); do
        c=${contenders[$(((k + round - 1) % nc))]}
        sync
        if [ "$c" = floor ]; then r=$(run_floor "$round"); else r=$(run_berth "$round" "$c"); fi
        wall[$c]="${wall[$c]:-} ${r% *}"
        cpu[$c]="${cpu[$c]:-} ${r#* }"
        line="$line $c ${r% *} s (cpu ${r#* } s);"
    done
    echo "$line load $(cut -d' ' -f1 /proc/loadavg)"
done
floor=$(echo ${wall[floor]} | median_of)
floor_cpu=$(echo ${cpu[floor]} | median_of)
cold_dir=$(echo ${wall[layout]} | median_of)
cold_up=$(echo ${wall[upload]} | median_of)
range() { tr ' ' '\n' | sort -g | awk 'NF { a[++n] = $1 } END { printf "%s-%s", a[1], a[n] }'; }
echo "floor (${layers} layer(s), serial): ${floor} s median of $rounds ($(echo ${wall[floor]} | range)), cpu ${floor_cpu} s"
echo "berth cold import, layout dir: ${cold_dir} s ($(echo ${wall[layout]} | range); $(ratio "$cold_dir" "$floor") x floor), cpu $(echo ${cpu[layout]} | median_of) s"
echo "berth cold import, upload:     ${cold_up} s ($(echo ${wall[upload]} | range); $(ratio "$cold_up" "$floor") x floor), cpu $(echo ${cpu[upload]} | median_of) s"
for c in layout+ upload+; do
    [ -n "${wall[$c]:-}" ] || continue
    m=$(echo ${wall[$c]} | median_of)
    echo "berth cold import, ${c%+} with $COMPARE_ARGS: $m s ($(echo ${wall[$c]} | range); $(ratio "$m" "$floor") x floor), cpu $(echo ${cpu[$c]} | median_of) s"
done

# ---- warm re-imports and memory ---------------------------------------------------
start_berthd "$work/root-warm-layout"
hwm_idle=$(hwm_mib)
r=$(post_layout); expect 201 "$r"
hwm_dir=$(hwm_mib)
warm=""
for _ in $(seq "$warm_runs"); do r=$(post_layout); expect 200 "$r"; warm="$warm ${r#* }"; done
warm_dir=$(echo $warm | median_of)
warm_dir_min=$(echo $warm | min_of)
stop_berthd
sync
start_berthd "$work/root-warm-upload"
r=$(post_upload); expect 201 "$r"
hwm_up=$(hwm_mib)
warm=""
for _ in $(seq "$warm_runs"); do r=$(post_upload); expect 200 "$r"; warm="$warm ${r#* }"; done
warm_up=$(echo $warm | median_of)
hwm_all=$(hwm_mib)
stop_berthd
echo "berth warm re-import, layout dir: $(ms "$warm_dir") ms median of $warm_runs, min $(ms "$warm_dir_min") ms (goal < 20 ms)"
echo "berth warm re-import, upload:    $(ms "$warm_up") ms median of $warm_runs"
echo "berthd peak RSS (VmHWM): idle ${hwm_idle} MiB, after layout import ${hwm_dir} MiB," \
    "after upload import ${hwm_up} MiB, after warm uploads ${hwm_all} MiB (goal < 64 MiB)"
echo "load at end: $(uptime)"

# ---- peers ------------------------------------------------------------------------
[ "$peers" = 1 ] || exit 0
sync

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
