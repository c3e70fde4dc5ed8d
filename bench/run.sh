#!/usr/bin/env bash
# Container benchmark: on a stored busybox image, create + run `true` +
# wait + delete through the API, against `runc run` of an equivalent
# bundle in the same run (the floor) and `podman run --rm` and
# `ctr run --rm` as peers (installed with apt-get only when missing, and
# skipped when they cannot be installed or started). Then 50 idle
# containers (each running `sleep`): the daemon's RSS growth per
# container and any helper process per container outside the containers.
#
# Builds berthd (Release) into build-bench-run, starts it on a free port
# with a temporary root, and stops only what it started (by PID and by
# the handles and IDs it created).
#
#   bench/run.sh                  # 30 rounds of each, 50 idle containers
#   ROUNDS=50 IDLE=50 PEERS=0 bench/run.sh
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build-bench-run}
rounds=${ROUNDS:-30}
idle=${IDLE:-50}
peers=${PEERS:-1}

need() { command -v "$1" >/dev/null || apt-get install -y "$2" >/dev/null 2>&1 || true; }
need runc runc
need umoci umoci
need curl curl
[ -x /bin/busybox ] || apt-get install -y busybox-static >/dev/null
if [ "$peers" = 1 ]; then
    need podman podman
    need ctr containerd
fi

cmake -B "$build" -S "$src" -DBERTH_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target berthd berth-init >/dev/null 2>&1

# Lowercase: podman derives an image name from the layout path.
tmp=/tmp/berth-bench-run-$$-$RANDOM
mkdir -m 0700 "$tmp"
pid= cpid=
# The floor's container IDs and cgroup parent are this run's own: runc puts
# a container without a cgroupsPath (the bare spec) in /<id>, and two runs
# at once must never share a cgroup.
fid=floor-$$
fcg=berth-bench-floor-$$
handles=()
cleanup() {
    set +e
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        for h in "${handles[@]}"; do curl -s -XDELETE "$url/v1/containers/$h" >/dev/null; done
        kill -TERM "$pid"
        wait "$pid" 2>/dev/null
    fi
    for h in "${handles[@]}"; do
        runc --root "$tmp/root/runtime/runc" delete --force "$h" >/dev/null 2>&1
        umount -l "$tmp/root/containers/$h/rootfs" >/dev/null 2>&1
    done
    for f in "$fid" "$fid"-1 "$fid"-2 "$fid"-3 "$fid"-4 "$fid"-5 "$fid"-6 "$fid"-7 "$fid"-8; do
        runc --root "$tmp/runc" delete --force "$f" >/dev/null 2>&1
    done
    for d in $(find /sys/fs/cgroup -maxdepth 6 -type d -name "$fcg" 2>/dev/null); do
        find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
    if [ -n "$cpid" ] && kill -0 "$cpid" 2>/dev/null; then
        kill -TERM "$cpid"
        wait "$cpid" 2>/dev/null
        umount -R "$tmp/containerd" >/dev/null 2>&1
    fi
    if command -v podman >/dev/null && [ -d "$tmp/podman" ]; then
        podman "${podman_opts[@]}" rmi -af >/dev/null 2>&1
        umount -R "$tmp/podman" >/dev/null 2>&1
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

ms() { date +%s%N; }
# Median and mean of the numbers on stdin (milliseconds, 2 decimals).
stats() { sort -n | awk '{a[NR]=$1; s+=$1} END {printf "%.2f %.2f\n", a[int((NR+1)/2)], s/NR}'; }

# ---- the busybox image --------------------------------------------------------
rootfs=$tmp/rootfs
mkdir -p "$rootfs"/{bin,etc,tmp,root,proc,sys,dev}
cp /bin/busybox "$rootfs/bin/"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$rootfs/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
(cd "$tmp" && umoci init --layout layout >/dev/null && umoci new --image layout:latest >/dev/null &&
    umoci unpack --image layout:latest ub >/dev/null 2>&1 && cp -a "$rootfs"/. ub/rootfs/ &&
    umoci repack --image layout:latest ub >/dev/null && rm -rf ub)

# ---- berthd -------------------------------------------------------------------
"$build/berthd" --listen 127.0.0.1:0 --root "$tmp/root" --log-level info 2>"$tmp/log" &
pid=$!
port=
for _ in $(seq 100); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/log" 2>/dev/null | sed 's/.*://') || true
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "berthd did not start:"; cat "$tmp/log"; exit 1; }
url=http://127.0.0.1:$port
curl -sf -XPOST "$url/v1/images?name=busybox" -H 'Content-Type: application/json' \
    -d "{\"source\":{\"layout\":\"$tmp/layout\"}}" >/dev/null
echo "berthd $("$build/berthd" --version | cut -d' ' -f2) on $url; $(runc --version | head -1);" \
    "$(nproc) cores; $(uname -r); $(date -u +%F)"

# One round through the API on one keep-alive connection (curl --next):
# the sum of the four requests' times as curl measured them, in ms.
api_round() {
    local h=$1
    handles+=("$h")
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' \
        -XPOST "$url/v1/containers" -H 'Content-Type: application/json' \
        -d "{\"handle\":\"$h\",\"image\":\"busybox\"}" --next \
        -o /dev/null -w '%{http_code} %{time_total}\n' \
        -XPOST "$url/v1/containers/$h/processes" -H 'Content-Type: application/json' \
        -d '{"id":"task","path":"true"}' --next \
        -o /dev/null -w '%{http_code} %{time_total}\n' \
        "$url/v1/containers/$h/processes/task/wait?timeout=10" --next \
        -o /dev/null -w '%{http_code} %{time_total}\n' -XDELETE "$url/v1/containers/$h" \
        >"$tmp/round.$h"
    unset 'handles[-1]'
    if [ "$(cut -d' ' -f1 "$tmp/round.$h" | tr '\n' ' ')" != "201 201 200 204 " ]; then
        echo "API round failed: $(cat "$tmp/round.$h")" >&2
        tail -5 "$tmp/log" >&2
        exit 1
    fi
    awk '{s+=$2} END {printf "%.2f\n", s*1000}' "$tmp/round.$h"
    rm -f "$tmp/round.$h"
}

# ---- the floor: runc run of an equivalent bundle ------------------------------
# The config berthd writes (same namespaces, capabilities, seccomp profile,
# masked paths, cgroup) with `true` in place of our init, on the same
# busybox rootfs; and, for reference, the bare `runc spec` default.
curl -sf -o /dev/null -XPOST "$url/v1/containers" -H 'Content-Type: application/json' \
    -d "{\"handle\":\"floorsrc\",\"rootfs\":\"raw://$rootfs\"}"
handles+=(floorsrc)
mkdir -p "$tmp/bundle" "$tmp/bare"
python3 - "$tmp/root/containers/floorsrc/bundle/config.json" "$tmp/bundle/config.json" "$rootfs" "$fcg" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["process"]["args"] = ["/bin/true"]
c["mounts"] = [m for m in c["mounts"] if m["destination"] not in ("/.berth-init", "/.berth")]
c["root"]["path"] = sys.argv[3]
c["linux"]["cgroupsPath"] = sys.argv[4] + "/floor"
json.dump(c, open(sys.argv[2], "w"))
PY
curl -sf -o /dev/null -XDELETE "$url/v1/containers/floorsrc"
unset 'handles[-1]'
(cd "$tmp/bare" && runc spec)
sed -i "s/\"terminal\": true/\"terminal\": false/; s/\"sh\"/\"true\"/; s|\"path\": \"rootfs\"|\"path\": \"$rootfs\"|" \
    "$tmp/bare/config.json"
floor_round() {
    local t0 t1
    t0=$(ms)
    runc --root "$tmp/runc" run --bundle "$1" "$fid" </dev/null >/dev/null
    t1=$(ms)
    awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f\n", (b-a)/1e6}'
}

# warm-up
api_round warm0 >/dev/null
floor_round "$tmp/bundle" >/dev/null

: >"$tmp/api.txt"
: >"$tmp/floor.txt"
: >"$tmp/bare.txt"
for i in $(seq "$rounds"); do
    api_round "r$i" >>"$tmp/api.txt"
    floor_round "$tmp/bundle" >>"$tmp/floor.txt"
    floor_round "$tmp/bare" >>"$tmp/bare.txt"
done
read -r api_med api_mean < <(stats <"$tmp/api.txt")
read -r floor_med floor_mean < <(stats <"$tmp/floor.txt")
read -r bare_med bare_mean < <(stats <"$tmp/bare.txt")
# The API figure leaves out curl's own start; the floor includes runc's (it is the tool).
printf '%-44s median %8.2f ms  mean %8.2f ms\n' "berth API create+run true+wait+delete" "$api_med" "$api_mean"
printf '%-44s median %8.2f ms  mean %8.2f ms\n' "floor: runc run (berth's config, true)" "$floor_med" "$floor_mean"
printf '%-44s median %8.2f ms  mean %8.2f ms\n' "reference: runc run (runc spec default)" "$bare_med" "$bare_mean"
printf '%-44s %.2fx (goal <= 1.25x)\n' "ratio berth / floor (medians)" \
    "$(awk -v a="$api_med" -v b="$floor_med" 'BEGIN {print a/b}')"
# Spread: the quartiles of each, and the median of the per-round ratios
# (each round's berth over the floor measured right after it).
quart() { sort -n | awk '{a[NR]=$1} END {printf "%.1f / %.1f / %.1f", a[int(NR/4)+1], a[int((NR+1)/2)], a[int(3*NR/4)+1]}'; }
printf '%-44s berth %s, floor %s ms\n' "quartiles (q1 / median / q3)" \
    "$(quart <"$tmp/api.txt")" "$(quart <"$tmp/floor.txt")"
printf '%-44s %s\n' "per-round ratio berth/floor q1 / median / q3" \
    "$(paste "$tmp/api.txt" "$tmp/floor.txt" | awk '{print $1/$2}' | quart)"

# ---- many at once: PAR containers started together -------------------------------
# PAR (8) API rounds started at the same moment, against PAR `runc run` of
# the same bundle (each its own id and cgroup) started at the same moment;
# the figure is the wall time until the last one is done, alternated round
# by round as above.
par=${PAR:-8}
prounds=${PAR_ROUNDS:-10}
if [ "$par" -gt 0 ] && [ "$prounds" -gt 0 ]; then
    for k in $(seq "$par"); do
        mkdir -p "$tmp/pbundle$k"
        sed "s|$fcg/floor|$fcg/floor$k|" "$tmp/bundle/config.json" \
            >"$tmp/pbundle$k/config.json"
    done
    par_api() {
        local i=$1 t0 t1 k
        t0=$(ms)
        local pids=()
        for k in $(seq "$par"); do
            (api_round "p$i-$k" >/dev/null) &
            pids+=($!)
        done
        for k in "${pids[@]}"; do # not a bare wait: berthd is a child of this shell too
            wait "$k" || { echo "a parallel API round failed" >&2; exit 1; }
        done
        t1=$(ms)
        awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f\n", (b-a)/1e6}'
    }
    par_floor() {
        local t0 t1 k
        t0=$(ms)
        local pids=()
        for k in $(seq "$par"); do
            runc --root "$tmp/runc" run --bundle "$tmp/pbundle$k" "$fid-$k" </dev/null >/dev/null &
            pids+=($!)
        done
        wait "${pids[@]}"
        t1=$(ms)
        awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f\n", (b-a)/1e6}'
    }
    par_api 0 >/dev/null
    par_floor >/dev/null
    : >"$tmp/papi.txt"
    : >"$tmp/pfloor.txt"
    for i in $(seq "$prounds"); do
        par_api "$i" >>"$tmp/papi.txt"
        par_floor >>"$tmp/pfloor.txt"
    done
    read -r pa_med pa_mean < <(stats <"$tmp/papi.txt")
    read -r pf_med pf_mean < <(stats <"$tmp/pfloor.txt")
    printf '%-44s median %8.2f ms  mean %8.2f ms  (%s)\n' "berth API, $par at once (wall)" \
        "$pa_med" "$pa_mean" "$(sort -n "$tmp/papi.txt" | tr '\n' ' ')"
    printf '%-44s median %8.2f ms  mean %8.2f ms  (%s)\n' "floor: $par x runc run at once (wall)" \
        "$pf_med" "$pf_mean" "$(sort -n "$tmp/pfloor.txt" | tr '\n' ' ')"
    printf '%-44s %.2fx (goal <= 1.25x)\n' "ratio berth / floor, $par at once" \
        "$(awk -v a="$pa_med" -v b="$pf_med" 'BEGIN {print a/b}')"
fi

# ---- peers --------------------------------------------------------------------
podman_opts=(--root "$tmp/podman/root" --runroot "$tmp/podman/run" --cgroup-manager cgroupfs
    --events-backend file)
peer_round() {
    local t0 t1
    t0=$(ms)
    "$@" </dev/null >/dev/null 2>"$tmp/peer.err" || return 1
    t1=$(ms)
    awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f\n", (b-a)/1e6}'
}
if [ "$peers" = 1 ] && command -v podman >/dev/null; then
    if podman "${podman_opts[@]}" pull -q "oci:$tmp/layout:latest" >/dev/null 2>"$tmp/peer.err"; then
        img=$(podman "${podman_opts[@]}" images -q | head -1)
        run=(podman "${podman_opts[@]}" run --rm --network none
            --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 "$img" true)
        if peer_round "${run[@]}" >/dev/null; then
            : >"$tmp/podman.txt"
            for i in $(seq "$rounds"); do peer_round "${run[@]}" >>"$tmp/podman.txt"; done
            read -r p_med p_mean < <(stats <"$tmp/podman.txt")
            printf '%-44s median %8.2f ms  mean %8.2f ms  (berth %.1fx faster)\n' \
                "peer: podman run --rm" "$p_med" "$p_mean" \
                "$(awk -v a="$p_med" -v b="$api_med" 'BEGIN {print a/b}')"
        else
            echo "peer: podman run --rm: failed: $(tail -1 "$tmp/peer.err")"
        fi
    else
        echo "peer: podman: cannot load the image: $(tail -1 "$tmp/peer.err")"
    fi
else
    echo "peer: podman: not installed"
fi
if [ "$peers" = 1 ] && command -v ctr >/dev/null && command -v containerd >/dev/null; then
    mkdir -p "$tmp/containerd"
    cat >"$tmp/containerd/config.toml" <<EOF
version = 2
root = "$tmp/containerd/root"
state = "$tmp/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$tmp/containerd/sock"
EOF
    containerd --config "$tmp/containerd/config.toml" >"$tmp/containerd/log" 2>&1 &
    cpid=$!
    for _ in $(seq 50); do [ -S "$tmp/containerd/sock" ] && break; sleep 0.1; done
    ctr=(ctr -a "$tmp/containerd/sock")
    tar -C "$tmp/layout" -cf "$tmp/layout.tar" .
    if "${ctr[@]}" images import --index-name docker.io/library/busybox:bench "$tmp/layout.tar" \
        >/dev/null 2>"$tmp/peer.err"; then
        : >"$tmp/ctr.txt"
        ok=1
        for i in $(seq "$rounds"); do
            peer_round "${ctr[@]}" run --rm docker.io/library/busybox:bench "bench$i" true \
                >>"$tmp/ctr.txt" || { ok=0; break; }
        done
        if [ "$ok" = 1 ]; then
            read -r c_med c_mean < <(stats <"$tmp/ctr.txt")
            printf '%-44s median %8.2f ms  mean %8.2f ms  (berth %.1fx faster)\n' \
                "peer: ctr run --rm" "$c_med" "$c_mean" \
                "$(awk -v a="$c_med" -v b="$api_med" 'BEGIN {print a/b}')"
        else
            echo "peer: ctr run --rm: failed: $(tail -1 "$tmp/peer.err")"
        fi
    else
        echo "peer: ctr: cannot import the image: $(tail -1 "$tmp/peer.err")"
    fi
else
    echo "peer: ctr: not installed"
fi

# ---- idle containers ----------------------------------------------------------
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
curl -s "$url/v1/containers" >/dev/null
rss0=$(rss "$pid")
for i in $(seq "$idle"); do
    h=idle$i
    handles+=("$h")
    curl -sf -o /dev/null -XPOST "$url/v1/containers" -H 'Content-Type: application/json' \
        -d "{\"handle\":\"$h\",\"image\":\"busybox\"}"
    curl -sf -o /dev/null -XPOST "$url/v1/containers/$h/processes" \
        -H 'Content-Type: application/json' -d '{"id":"idle","path":"sleep","args":["3600"]}'
done
sleep 1
rss1=$(rss "$pid")
# A helper is a process that sits between the host and a container's init
# (a shim, a conmon): count the distinct parents of our inits that are
# neither the host's PID 1 (or the subreaper that reaped runc) nor berthd.
inits=$(pgrep -x .berth-init || true)
helpers=$(for p in $inits; do awk '/^PPid/ {print $2}' "/proc/$p/status"; done | sort -u |
    while read -r pp; do
        c=$(cat "/proc/$pp/comm" 2>/dev/null || echo gone)
        [ "$pp" = 1 ] || [ "$pp" = "$pid" ] || [ "$c" = systemd ] || echo "$pp"
    done | wc -l)
init_rss=$(for p in $inits; do rss "$p"; done | awk '{s+=$1; n++} END {if (n) printf "%.0f", s/n; else print 0}')
printf '%-44s %d KiB -> %d KiB: %.1f KiB per container (goal < 256 KiB)\n' \
    "daemon RSS with $idle idle containers" "$rss0" "$rss1" \
    "$(awk -v a="$rss0" -v b="$rss1" -v n="$idle" 'BEGIN {print (b-a)/n}')"
printf '%-44s %d (goal: none; %d inits, parent: %s; inside each: berth-init %s KiB RSS + the sleep)\n' \
    "helper processes outside the containers" "$helpers" "$(echo $inits | wc -w)" \
    "$(for p in $inits; do awk '/^PPid/ {print $2}' "/proc/$p/status"; done | sort -u | head -1 | xargs -I{} cat /proc/{}/comm 2>/dev/null)" \
    "$init_rss"
t0=$(ms)
for h in "${handles[@]}"; do curl -sf -o /dev/null -XDELETE "$url/v1/containers/$h"; done
t1=$(ms)
printf '%-44s %.1f ms each\n' "delete of an idle container (TERM, exit)" \
    "$(awk -v a="$t0" -v b="$t1" -v n="$idle" 'BEGIN {print (b-a)/1e6/n}')"
handles=()
