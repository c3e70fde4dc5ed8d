# shellcheck shell=bash disable=SC2154 # tmp and pids belong to the sourcing script
# Sourced by bench/run.sh, bench/run_ab.sh and bench/par.sh: the busybox
# image they all measure with, and a debug-logging berthd of its own.

# busybox_image DIR: DIR/rootfs (busybox and its links, a passwd) and
# DIR/layout, an OCI layout of it (umoci).
busybox_image() {
    local d=$1 a
    mkdir -p "$d/rootfs"/{bin,etc,tmp,root,proc,sys,dev}
    cp /bin/busybox "$d/rootfs/bin/"
    for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$d/rootfs/bin/$a"; done
    echo 'root:x:0:0:root:/root:/bin/sh' >"$d/rootfs/etc/passwd"
    (cd "$d" && umoci init --layout layout >/dev/null && umoci new --image layout:latest >/dev/null &&
        umoci unpack --image layout:latest ub >/dev/null 2>&1 && cp -a rootfs/. ub/rootfs/ &&
        umoci repack --image layout:latest ub >/dev/null && rm -rf ub)
}

# berthd_start NAME BINARY [ARGS...]: a daemon rooted at $tmp/NAME on a
# free loopback port (--network none, debug log in $tmp/NAME.log), its PID
# appended to the caller's pids array and in $tmp/NAME.pid, its URL in
# $tmp/NAME.url, and the busybox layout at $tmp/layout imported.
berthd_start() {
    local name=$1 bin=$2 port=
    shift 2
    "$bin" --listen 127.0.0.1:0 --root "$tmp/$name" --log-level debug --network none "$@" \
        2>"$tmp/$name.log" &
    pids+=($!)
    echo $! >"$tmp/$name.pid"
    for _ in $(seq 100); do
        port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/$name.log" | sed 's/.*://') || true
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || { echo "$bin did not start:"; cat "$tmp/$name.log"; exit 1; }
    echo "http://127.0.0.1:$port" >"$tmp/$name.url"
    curl -sf -XPOST "http://127.0.0.1:$port/v1/images?name=busybox" -H 'Content-Type: application/json' \
        -d "{\"source\":{\"layout\":\"$tmp/layout\"}}" >/dev/null
}

# floor_config SRC DST ROOTFS CGROUPS_PATH: the floor's config.json from
# the one berthd wrote: `true` in place of berth's init, neither the init's
# nor the network's mounts (runc makes a namespace with lo), ROOTFS as the
# root, a cgroup of the floor's own.
floor_config() {
    python3 - "$@" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["process"]["args"] = ["/bin/true"]
c["mounts"] = [m for m in c["mounts"] if m["destination"] not in
               ("/.berth-init", "/.berth", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf")]
for ns in c["linux"]["namespaces"]:
    ns.pop("path", None)
c["root"]["path"] = sys.argv[3]
c["linux"]["cgroupsPath"] = sys.argv[4]
json.dump(c, open(sys.argv[2], "w"))
PY
}

# bench_tmp PREFIX: a private temporary directory in $tmp and an EXIT trap
# that stops the daemons in the pids array (by PID) and removes it.
bench_tmp() {
    tmp=/tmp/$1-$$-$RANDOM
    mkdir -m 0700 "$tmp"
    pids=()
    trap bench_cleanup EXIT
}
bench_cleanup() {
    set +e
    for p in "${pids[@]}"; do
        kill -TERM "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    rm -rf "$tmp"
}
