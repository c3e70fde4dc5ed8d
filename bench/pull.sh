#!/usr/bin/env bash
# Registry pull benchmark (issue 12). A Debian minbase image (debootstrap
# --variant=minbase bookworm, from the configured mirror) packed with umoci
# into an OCI layout, pushed with skopeo into a docker-registry on a free
# loopback port, then pulled from there, round by round, each contender in
# turn (the order rotates every round):
#
#   floor    skopeo copy docker://... oci:DIR + tar -xzf of its layer into a
#            fresh directory: fetching and unpacking, nothing else
#   berth    POST /v1/images {"source":{"registry":...}} into a fresh root
#            (cold), then the same pull again WARM_RUNS times (warm)
#   ctr      ctr images pull --plain-http (containerd, CRI disabled, a fresh
#            private root and socket each round; unpacks to overlayfs)
#   podman   podman pull --tls-verify=false (a fresh private root each round)
#
# Peers are installed with apt-get when missing and skipped when they
# cannot be installed or started. Prints medians and the ratios to the
# floor and to the peers. Goals: cold within 1.1 x the floor and ahead of
# both peers; warm under 50 ms.
#
#   bench/pull.sh                          # 5 rounds
#   ROUNDS=9 PEERS=0 BERTHD=build/berthd ROOTFS_DIR=/srv/minbase bench/pull.sh
#
# ROOTFS_DIR: a minbase rootfs to use, made there (and kept) when absent.
#
# Only the processes this script starts are stopped, by PID; everything it
# makes is under one temporary directory.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${ROUNDS:-5}
warm_runs=${WARM_RUNS:-5}
peers=${PEERS:-1}

if [ -z "${BERTHD:-}" ]; then
    build=${BUILD_DIR:-$src/build-bench-pull}
    cmake -B "$build" -S "$src" -DBERTH_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j"$(nproc)" --target berthd >/dev/null
    BERTHD=$build/berthd
fi
need() { command -v "$1" >/dev/null || apt-get install -y "$2" >/dev/null 2>&1 || true; }
need umoci umoci
need skopeo skopeo
need curl curl
need debootstrap debootstrap
[ -x /usr/bin/docker-registry ] || apt-get install -y docker-registry >/dev/null
if [ "$peers" = 1 ]; then
    need podman podman
    need ctr containerd
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/berth-bench-pull-XXXXXX")
pids=()
stop_pid() {
    local p=$1
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
        kill -TERM "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    fi
}
cleanup() {
    set +e
    for p in "${pids[@]}"; do stop_pid "$p"; done
    for m in $(awk -v w="$work" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r); do
        umount -l "$m" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", b - a }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  load before: $(cut -d' ' -f1-3 /proc/loadavg)  cores: $(nproc)"

# ---- the image ---------------------------------------------------------------------
rootfs=${ROOTFS_DIR:-$work/rootfs}
if [ ! -d "$rootfs/usr" ]; then
    t0=$(now)
    debootstrap --variant=minbase bookworm "$rootfs" >"$work/debootstrap.log" 2>&1
    echo "debootstrap minbase bookworm: $(secs "$t0" "$(now)") s"
fi
layout=$work/layout
umoci init --layout "$layout" >/dev/null
umoci new --image "$layout:minbase" >/dev/null
umoci unpack --image "$layout:minbase" "$work/bundle" >/dev/null
cp -a "$rootfs/." "$work/bundle/rootfs/"
umoci repack --image "$layout:minbase" "$work/bundle" >/dev/null
rm -rf "$work/bundle"
umoci config --image "$layout:minbase" --config.cmd /bin/sh >/dev/null
umoci gc --layout "$layout" >/dev/null

reg_port=$(free_port)
cat >"$work/registry.yml" <<EOF
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: 127.0.0.1:$reg_port
EOF
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
pids+=($!)
wait_port "$reg_port"
host=127.0.0.1:$reg_port
skopeo copy -q --dest-tls-verify=false "oci:$layout:minbase" "docker://$host/bench/minbase:1"
ref=$host/bench/minbase:1
layer_bytes=$(du -b "$work/registry/docker/registry/v2/blobs" | tail -1 | cut -f1)
entries=$(find "$rootfs" | wc -l)
echo "image: $ref, $entries entries, $((layer_bytes / 1000000)) MB in the registry (compressed)"

# ---- contenders ------------------------------------------------------------------------
floor_round() {
    local d=$work/floor
    rm -rf "$d"
    mkdir -p "$d"
    local t0 t1
    t0=$(now)
    skopeo copy -q --src-tls-verify=false "docker://$ref" "oci:$d/oci:x"
    local m
    m=$(python3 -c 'import json,sys; i=json.load(open(sys.argv[1]+"/index.json")); print(i["manifests"][0]["digest"].split(":")[1])' "$d/oci")
    mkdir "$d/out"
    for l in $(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(" ".join(x["digest"].split(":")[1] for x in m["layers"]))' "$d/oci/blobs/sha256/$m"); do
        tar -xzf "$d/oci/blobs/sha256/$l" -C "$d/out"
    done
    t1=$(now)
    secs "$t0" "$t1" >>"$work/floor.txt"
    rm -rf "$d"
}

berth_round() {
    local root=$work/berth-root log=$work/berthd.log
    rm -rf "$root"
    "$BERTHD" --listen 127.0.0.1:0 --root "$root" --insecure-registry "$host" >"$log" 2>&1 &
    local bpid=$!
    pids+=($bpid)
    local url=
    for _ in $(seq 100); do
        url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 || true)
        [ -n "$url" ] && break
        sleep 0.05
    done
    local body="{\"source\":{\"registry\":\"$ref\"}}" code t0 t1
    t0=$(now)
    code=$(curl -s -o "$work/berth.out" -w '%{http_code}' -H 'Content-Type: application/json' -d "$body" "$url/v1/images")
    t1=$(now)
    [ "$code" = 201 ] || { echo "berth: cold pull answered $code: $(cat "$work/berth.out")" >&2; exit 1; }
    secs "$t0" "$t1" >>"$work/berth.txt"
    for _ in $(seq "$warm_runs"); do
        t0=$(now)
        code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d "$body" "$url/v1/images")
        t1=$(now)
        [ "$code" = 200 ] || { echo "berth: warm pull answered $code" >&2; exit 1; }
        secs "$t0" "$t1" >>"$work/berth-warm.txt"
    done
    stop_pid "$bpid"
    rm -rf "$root"
}

have_ctr=0
if [ "$peers" = 1 ] && command -v ctr >/dev/null && command -v containerd >/dev/null; then
    have_ctr=1
fi
ctr_round() {
    local d=$work/containerd
    mkdir -p "$d"
    cat >"$d/config.toml" <<EOF
version = 2
root = "$d/root"
state = "$d/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$d/sock"
EOF
    containerd --config "$d/config.toml" >"$d/log" 2>&1 &
    local cpid=$!
    pids+=($cpid)
    for _ in $(seq 100); do [ -S "$d/sock" ] && break; sleep 0.05; done
    local t0 t1
    t0=$(now)
    if ! ctr -a "$d/sock" images pull --plain-http "$ref" >/dev/null 2>"$work/ctr.err"; then
        echo "peer: ctr images pull failed: $(tail -1 "$work/ctr.err")"
        have_ctr=0
    else
        t1=$(now)
        secs "$t0" "$t1" >>"$work/ctr.txt"
    fi
    stop_pid "$cpid"
    for m in $(awk -v w="$d" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r); do umount -l "$m"; done
    rm -rf "$d"
}

have_podman=0
if [ "$peers" = 1 ] && command -v podman >/dev/null; then
    have_podman=1
fi
podman_round() {
    local d=$work/podman
    local opts=(--root "$d/root" --runroot "$d/run" --cgroup-manager cgroupfs --events-backend file)
    local t0 t1
    t0=$(now)
    if ! podman "${opts[@]}" pull -q --tls-verify=false "docker://$ref" >/dev/null 2>"$work/podman.err"; then
        echo "peer: podman pull failed: $(tail -1 "$work/podman.err")"
        have_podman=0
    else
        t1=$(now)
        secs "$t0" "$t1" >>"$work/podman.txt"
    fi
    podman "${opts[@]}" rmi -af >/dev/null 2>&1 || true
    for m in $(awk -v w="$d" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r); do umount -l "$m"; done
    rm -rf "$d"
}

# ---- rounds, alternating --------------------------------------------------------------
: >"$work/floor.txt"
: >"$work/berth.txt"
: >"$work/berth-warm.txt"
: >"$work/ctr.txt"
: >"$work/podman.txt"
order=(floor berth ctr podman)
for r in $(seq "$rounds"); do
    for k in 0 1 2 3; do
        c=${order[$(((k + r) % 4))]}
        case $c in
        floor) floor_round ;;
        berth) berth_round ;;
        ctr) [ "$have_ctr" = 1 ] && ctr_round || true ;;
        podman) [ "$have_podman" = 1 ] && podman_round || true ;;
        esac
    done
done

floor=$(median <"$work/floor.txt")
cold=$(median <"$work/berth.txt")
warm=$(median <"$work/berth-warm.txt")
printf '%-46s median %7.3f s   (all: %s)\n' "floor: skopeo copy + tar -xzf" "$floor" "$(tr '\n' ' ' <"$work/floor.txt")"
printf '%-46s median %7.3f s   (all: %s)\n' "berth: cold pull" "$cold" "$(tr '\n' ' ' <"$work/berth.txt")"
printf '%-46s median %7.1f ms\n' "berth: warm pull (stored)" "$(awk -v a="$warm" 'BEGIN {print a*1000}')"
printf '%-46s %sx (goal <= 1.1x)\n' "ratio berth cold / floor" "$(ratio "$cold" "$floor")"
for p in ctr podman; do
    if [ -s "$work/$p.txt" ]; then
        m=$(median <"$work/$p.txt")
        printf '%-46s median %7.3f s   (berth %sx faster; all: %s)\n' "peer: $p pull" "$m" \
            "$(ratio "$m" "$cold")" "$(tr '\n' ' ' <"$work/$p.txt")"
    else
        echo "peer: $p: not measured"
    fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
