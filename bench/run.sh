#!/usr/bin/env bash
# Container benchmark: on a stored busybox image, create + run `true` +
# wait + delete through the API, with a network (CNI bridge + host-local
# on a bridge of the bench's own) and with "network": {"disabled": true},
# against `runc run` of an equivalent bundle in the same run (the floor)
# and `podman run --rm` and `ctr run --rm` (also with `--seccomp`) as
# peers (installed with apt-get only when missing, and skipped when they
# cannot be installed or started), alternated round by round with `docker
# run --rm busybox true` through berthd's Docker listener (the real docker
# CLI: issue 11's benchmark). Then where the network's time goes (the create's phases from
# berthd's debug log, and the bridge plugin's ADD and DEL alone, in a
# namespace of their own, wall and CPU time), 8 containers created at
# once (each must get an address), and 50 idle containers (each running
# `sleep`): the daemon's RSS growth per container and any helper process
# per container outside the containers.
#
# Builds berthd (Release) into build-bench-run, starts it on a free port
# with a temporary root and a network of its own (a bridge name and a /24
# no route covers, locked as the network test suites lock theirs; a guard
# counts any packet from the pool that would leave the machine: the
# containers only run `true` and `sleep`), and stops and removes only
# what it started (by PID, by the handles and IDs it created, by the
# bridge's name).
#
#   bench/run.sh                  # 30 rounds of each, 50 idle containers
#   ROUNDS=50 IDLE=50 PEERS=0 bench/run.sh
#   DOCKER=0 bench/run.sh         # without the docker CLI rounds
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build-bench-run}
rounds=${ROUNDS:-30}
idle=${IDLE:-50}
peers=${PEERS:-1}
docker=${DOCKER:-1}

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
netname=bb$(printf %04x $(($$ & 0xffff)))
pool=
guard=BBG-$netname
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
    for m in $(grep -o " $tmp/root/network/netns/[^ ]*" /proc/self/mountinfo); do umount -l "$m"; done
    if [ -n "$pool" ]; then
        for t in filter nat; do
            for c in $(iptables-save -t $t 2>/dev/null | grep -E "^:BERTH-[A-Z]+-$netname " | cut -d' ' -f1 | tr -d :); do
                iptables-save -t $t | grep -- "-j $c\$" | sed 's/^-A /-D /' |
                    while read -r l; do eval iptables -w -t $t "$l"; done
                iptables -w -t $t -F "$c"
                iptables -w -t $t -X "$c"
            done
        done
        ip link del "$netname" >/dev/null 2>&1
        iptables -w -t mangle -D FORWARD -s "$pool" -j "$guard" 2>/dev/null
        iptables -w -t mangle -F "$guard" 2>/dev/null
        iptables -w -t mangle -X "$guard" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# ---- a network of the bench's own ----------------------------------------------
for o in $(seq 200 250); do
    # No route but the default one may cover it, and no test suite may hold it.
    [ -z "$(ip -4 route show match "10.$o.250.0/24" | grep -v '^default')" ] || continue
    exec {lockfd}>"/tmp/berth-nt-octet-$o.lock"
    if flock -n "$lockfd"; then
        pool=10.$o.250.0/24
        break
    fi
    exec {lockfd}>&-
done
[ -n "$pool" ] || { echo "no free 10.x.250.0/24 for the bench's network"; exit 1; }
iptables -w -t mangle -N "$guard"
iptables -w -t mangle -A "$guard" -o "$netname" -j RETURN
iptables -w -t mangle -A "$guard" -j DROP
iptables -w -t mangle -I FORWARD 1 -s "$pool" -j "$guard"

ms() { date +%s%N; }
# Median and mean of the numbers on stdin (milliseconds, 2 decimals).
stats() { sort -n | awk '{a[NR]=$1; s+=$1} END {printf "%.2f %.2f\n", a[int((NR+1)/2)], s/NR}'; }

# ---- the busybox image --------------------------------------------------------
# shellcheck source=bench/lib.sh
. "$src/bench/lib.sh"
busybox_image "$tmp"
rootfs=$tmp/rootfs

# ---- berthd -------------------------------------------------------------------
"$build/berthd" --listen 127.0.0.1:0 --root "$tmp/root" --log-level debug \
    --network-name "$netname" --network-pool "$pool" --dns 192.0.2.53 \
    --docker-listen "unix://$tmp/docker.sock" 2>"$tmp/log" &
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
for _ in $(seq 300); do
    curl -s "$url/v1/health" | grep -q '"network":{"usable":true' && break
    sleep 0.1
done
echo "berthd $("$build/berthd" --version | cut -d' ' -f2) on $url; $(runc --version | head -1);" \
    "$(nproc) cores; $(uname -r); $(date -u '+%F %H:%M'); load $(cut -d' ' -f1-3 /proc/loadavg);" \
    "network $netname $pool; CNI plugins $(dpkg-query -W -f '${Version}' containernetworking-plugins 2>/dev/null)"

# One round through the API on one keep-alive connection (curl --next):
# the sum of the four requests' times as curl measured them, then each
# of them (create, start, wait, delete), in ms. $2: more fields of the
# create ("network":{...},) or nothing.
api_round() {
    local h=$1
    handles+=("$h")
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' \
        -XPOST "$url/v1/containers" -H 'Content-Type: application/json' \
        -d "{${2:-}\"handle\":\"$h\",\"image\":\"busybox\"}" --next \
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
    awk '{s+=$2; t[NR]=$2*1000} END {printf "%.2f %.2f %.2f %.2f %.2f\n", s*1000, t[1], t[2], t[3], t[4]}' "$tmp/round.$h"
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
floor_config "$tmp/root/containers/floorsrc/bundle/config.json" "$tmp/bundle/config.json" "$rootfs" "$fcg/floor"
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
api_round warm1 '"network":{"disabled":true},' >/dev/null
floor_round "$tmp/bundle" >/dev/null

: >"$tmp/api.txt"
: >"$tmp/off.txt"
: >"$tmp/port.txt"
: >"$tmp/floor.txt"
: >"$tmp/bare.txt"
# Interleaved, so that the machine's load falls on each alike.
for i in $(seq "$rounds"); do
    api_round "r$i" >>"$tmp/api.txt"
    api_round "d$i" '"network":{"disabled":true},' >>"$tmp/off.txt"
    api_round "p$i" '"network":{"ports":[{"container":80}]},' >>"$tmp/port.txt"
    floor_round "$tmp/bundle" >>"$tmp/floor.txt"
    floor_round "$tmp/bare" >>"$tmp/bare.txt"
done
col() { cut -d' ' -f"$1" "$2" | stats; }
read -r api_med api_mean < <(col 1 "$tmp/api.txt")
read -r off_med off_mean < <(col 1 "$tmp/off.txt")
read -r port_med port_mean < <(col 1 "$tmp/port.txt")
read -r floor_med floor_mean < <(stats <"$tmp/floor.txt")
read -r bare_med bare_mean < <(stats <"$tmp/bare.txt")
# The API figure leaves out curl's own start; the floor includes runc's (it is the tool).
printf '%-44s median %8.2f ms  mean %8.2f ms\n' "berth API create+run true+wait+delete, network" "$api_med" "$api_mean"
printf '%-44s median %8.2f ms  mean %8.2f ms\n' "same, \"network\": {\"disabled\": true}" "$off_med" "$off_mean"
printf '%-44s median %8.2f ms  mean %8.2f ms\n' "same, with a forwarded port (portmap)" "$port_med" "$port_mean"
printf '%-44s median %8.2f ms  mean %8.2f ms\n' "floor: runc run (berth's config, true)" "$floor_med" "$floor_mean"
printf '%-44s median %8.2f ms  mean %8.2f ms\n' "reference: runc run (runc spec default)" "$bare_med" "$bare_mean"
printf '%-44s %.2fx networked, %.2fx disabled (goal <= 1.25x disabled, issue 16)\n' "ratio berth / floor (medians)" \
    "$(awk -v a="$api_med" -v b="$floor_med" 'BEGIN {print a/b}')" \
    "$(awk -v a="$off_med" -v b="$floor_med" 'BEGIN {print a/b}')"
for k in 2:create 3:start 4:wait 5:delete; do
    read -r n_med _ < <(col "${k%%:*}" "$tmp/api.txt")
    read -r d_med _ < <(col "${k%%:*}" "$tmp/off.txt")
    read -r p_med _ < <(col "${k%%:*}" "$tmp/port.txt")
    printf '%-44s network %7.2f ms  disabled %7.2f ms  (%+.2f)  port %7.2f ms\n' \
        "  median of the ${k#*:} request" "$n_med" "$d_med" \
        "$(awk -v a="$n_med" -v b="$d_med" 'BEGIN {print a-b}')" "$p_med"
done
printf '%-44s %+.2f ms on create+run+wait+delete (goal < 15 ms on the start)\n' \
    "what the network adds (medians)" "$(awk -v a="$api_med" -v b="$off_med" 'BEGIN {print a-b}')"

# ---- where the network's time goes -----------------------------------------------
# The create's phases, from berthd's debug log, for the networked rounds:
# the ends of the prepare job (record, image, overlay) and of the
# namespace with its files, of the runtime's job (runc, started once both
# are there), of CNI ADD and the hosts file, and of the whole create.
for k in r:network d:disabled p:port; do
    grep -E "create ${k%%:*}[0-9]+: prepared at" "$tmp/log" |
        sed -E 's/.*prepared at ([0-9.-]+) ms, namespace ready at ([0-9.-]+), runtime done at ([0-9.-]+), attached at ([0-9.-]+), done at ([0-9.-]+).*/\1 \2 \3 \4 \5/' \
            >"$tmp/phases.txt"
    [ -s "$tmp/phases.txt" ] || continue
    printf '%-44s' "  create phases (${k#*:}), median ms"
    for f in 1:prepared 2:ns-ready 3:runtime 4:attached 5:done; do
        printf ' %s %s' "${f#*:}" "$(cut -d' ' -f"${f%%:*}" "$tmp/phases.txt" | stats | cut -d' ' -f1)"
    done
    echo
done
# Each plugin run berth made, from the debug log (exited: the plugin's
# own time from spawn to exit; done: once its pipes closed and berth had
# its answer), and each detach (DEL, then the namespace and files).
for c in ADD DEL; do
    for t in bridge portmap; do
        grep -E "net: cni $t $c [rp][0-9]+: exited at" "$tmp/log" |
            sed -E 's/.*exited at ([0-9.]+) ms, done at ([0-9.]+) ms.*/\1 \2/' >"$tmp/cni.txt"
        [ -s "$tmp/cni.txt" ] || continue
        printf '%-44s exited %7.2f ms  answered %7.2f ms (medians of %d)\n' \
            "  berth's $t $c" "$(cut -d' ' -f1 "$tmp/cni.txt" | stats | cut -d' ' -f1)" \
            "$(cut -d' ' -f2 "$tmp/cni.txt" | stats | cut -d' ' -f1)" "$(wc -l <"$tmp/cni.txt")"
    done
done
grep -E "net: detach r[0-9]+: DEL done at" "$tmp/log" |
    sed -E 's/.*DEL done at ([0-9.-]+) ms, done at ([0-9.]+) ms.*/\1 \2/' >"$tmp/det.txt"
if [ -s "$tmp/det.txt" ]; then
    printf '%-44s DEL %7.2f ms  namespace and files removed %7.2f ms (medians)\n' \
        "  berth's detach (networked rounds)" "$(cut -d' ' -f1 "$tmp/det.txt" | stats | cut -d' ' -f1)" \
        "$(cut -d' ' -f2 "$tmp/det.txt" | stats | cut -d' ' -f1)"
fi
# The bridge plugin (with host-local) alone: ADD and DEL into namespaces
# of their own, in a network and mount namespace of the bench's own (its
# bridge is not the host's), wall and CPU time from wait4's rusage.
cat >"$tmp/plugin.py" <<'PY'
import json, os, subprocess, sys, time
d, n = sys.argv[1], int(sys.argv[2])
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run("ip link add pb0 type bridge && ip addr add 10.99.0.1/24 dev pb0 && ip link set pb0 up",
               shell=True, check=True)
conf = json.dumps({"cniVersion": "1.0.0", "name": "pb0", "type": "bridge", "bridge": "pb0",
                   "isGateway": True, "ipMasq": False, "hairpinMode": True,
                   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.99.0.0/24", "gateway": "10.99.0.1"}]],
                            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": d + "/ipam"}}).encode()
def run(cmd, i, plugin="bridge", cid="c"):
    env = dict(os.environ, CNI_COMMAND=cmd, CNI_CONTAINERID="%s%d" % (cid, i), CNI_NETNS="%s/ns%d" % (d, i),
               CNI_IFNAME="eth0", CNI_PATH="/usr/lib/cni")
    t0 = time.monotonic()
    p = subprocess.Popen(["/usr/lib/cni/" + plugin], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    p.stdin.write(conf); p.stdin.close()
    _, st, ru = os.wait4(p.pid, 0)
    p.returncode = 0
    if st != 0:
        sys.exit("bridge %s failed: %d" % (cmd, st))
    return (time.monotonic() - t0) * 1000, (ru.ru_utime + ru.ru_stime) * 1000
for i in range(n):
    open("%s/ns%d" % (d, i), "w").close()
    subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up; mount --bind /proc/self/ns/net %s/ns%d" % (d, i)], check=True)
for cmd in ("ADD", "DEL"):
    for i in range(n):
        print(cmd, "%.2f %.2f" % run(cmd, i))
# The parts: a Go plugin's bare start (VERSION), and host-local's own ADD and DEL.
for i in range(n):
    print("VERSION", "%.2f %.2f" % run("VERSION", i))
for cmd in ("ADD", "DEL"):
    for i in range(n):
        print("IPAM-" + cmd, "%.2f %.2f" % run(cmd, i, "host-local", "h"))
PY
mkdir -p "$tmp/plugin"
if unshare -n -m --propagation private python3 "$tmp/plugin.py" "$tmp/plugin" 10 >"$tmp/plugin.txt" 2>"$tmp/plugin.err"; then
    for c in ADD:"bridge plugin ADD alone (host-local inside)" DEL:"bridge plugin DEL alone (host-local inside)" \
        VERSION:"a Go plugin's bare start (bridge VERSION)" IPAM-ADD:"host-local ADD alone" \
        IPAM-DEL:"host-local DEL alone"; do
        read -r w_med _ < <(grep "^${c%%:*} " "$tmp/plugin.txt" | cut -d' ' -f2 | stats)
        read -r c_med _ < <(grep "^${c%%:*} " "$tmp/plugin.txt" | cut -d' ' -f3 | stats)
        printf '%-44s wall %7.2f ms  CPU %6.2f ms (medians of 10)\n' "  ${c#*:}" "$w_med" "$c_med"
    done
else
    echo "  bridge plugin alone: failed: $(tail -1 "$tmp/plugin.err")"
fi

# ---- 8 containers created at once -----------------------------------------------
t0=$(ms)
cpids=()
for i in $(seq 8); do
    handles+=("many$i")
    curl -s -o "$tmp/many$i" -w '%{http_code}\n' -XPOST "$url/v1/containers" \
        -H 'Content-Type: application/json' -d "{\"handle\":\"many$i\",\"image\":\"busybox\"}" \
        >"$tmp/many$i.code" &
    cpids+=($!)
done
wait "${cpids[@]}"
t1=$(ms)
ok=0
for i in $(seq 8); do
    [ "$(cat "$tmp/many$i.code")" = 201 ] && grep -o '"ip":"[0-9.]*"' "$tmp/many$i" >>"$tmp/many.ips" && ok=$((ok + 1))
done
distinct=$(sort -u "$tmp/many.ips" 2>/dev/null | wc -l)
printf '%-44s %d of 8 created with an address, %d distinct, in %.0f ms (goal: all, no error)\n' \
    "8 containers created at once" "$ok" "$distinct" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print (b-a)/1e6}')"
for i in $(seq 8); do curl -sf -o /dev/null -XDELETE "$url/v1/containers/many$i"; done
handles=("${handles[@]:0:${#handles[@]}-8}")
# Spread: the quartiles of each, and the median of the per-round ratios
# (each round's berth over the floor measured right after it).
quart() { sort -n | awk '{a[NR]=$1} END {printf "%.1f / %.1f / %.1f", a[int(NR/4)+1], a[int((NR+1)/2)], a[int(3*NR/4)+1]}'; }
printf '%-44s berth %s, floor %s ms\n' "quartiles (q1 / median / q3)" \
    "$(cut -d' ' -f1 "$tmp/api.txt" | quart)" "$(quart <"$tmp/floor.txt")"
printf '%-44s %s\n' "per-round ratio berth/floor q1 / median / q3" \
    "$(cut -d' ' -f1 "$tmp/api.txt" | paste - "$tmp/floor.txt" | awk '{print $1/$2}' | quart)"

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
            (api_round "p$i-$k" "${2:-}" >/dev/null) &
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
    : >"$tmp/papioff.txt"
    : >"$tmp/pfloor.txt"
    # Networked and with "network": {"disabled": true} (what the floor
    # has: a namespace with lo, no CNI plugin runs), alternated with the floor.
    for i in $(seq "$prounds"); do
        par_api "$i" >>"$tmp/papi.txt"
        par_floor >>"$tmp/pfloor.txt"
        par_api "o$i" '"network":{"disabled":true},' >>"$tmp/papioff.txt"
    done
    read -r po_med po_mean < <(stats <"$tmp/papioff.txt")
    read -r pa_med pa_mean < <(stats <"$tmp/papi.txt")
    read -r pf_med pf_mean < <(stats <"$tmp/pfloor.txt")
    printf '%-44s median %8.2f ms  mean %8.2f ms  (%s)\n' "berth API, $par at once (wall)" \
        "$pa_med" "$pa_mean" "$(sort -n "$tmp/papi.txt" | tr '\n' ' ')"
    printf '%-44s median %8.2f ms  mean %8.2f ms  (%s)\n' "floor: $par x runc run at once (wall)" \
        "$pf_med" "$pf_mean" "$(sort -n "$tmp/pfloor.txt" | tr '\n' ' ')"
    printf '%-44s median %8.2f ms  mean %8.2f ms  (%s)\n' "berth API, $par at once, network disabled" \
        "$po_med" "$po_mean" "$(sort -n "$tmp/papioff.txt" | tr '\n' ' ')"
    printf '%-44s %.2fx networked, %.2fx disabled (goal <= 1.25x)\n' "ratio berth / floor, $par at once" \
        "$(awk -v a="$pa_med" -v b="$pf_med" 'BEGIN {print a/b}')" \
        "$(awk -v a="$po_med" -v b="$pf_med" 'BEGIN {print a/b}')"
fi

# ---- docker run on berth against the peers, alternated -------------------------
# `docker run --rm busybox true` (the real docker CLI, DOCKER_HOST at
# berthd's Docker listener: create, attach, start, wait, AutoRemove), with
# `--network none` and with the default network (berth's bridge), against
# `podman run --rm --network none` and `ctr run --rm` (a new network
# namespace with only lo), round by round in the same loop, so the
# machine's load falls on each alike. Each figure is the CLI's wall time,
# its own start included (each of them is a Go program).
podman_opts=(--root "$tmp/podman/root" --runroot "$tmp/podman/run" --cgroup-manager cgroupfs
    --events-backend file)
peer_round() {
    local t0 t1
    t0=$(ms)
    "$@" </dev/null >/dev/null 2>"$tmp/peer.err" || return 1
    t1=$(ms)
    awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f\n", (b-a)/1e6}'
}
contenders=()
mkdir -p "$tmp/dockercfg"
dk=(env DOCKER_HOST="unix://$tmp/docker.sock" DOCKER_CONFIG="$tmp/dockercfg" docker)
if [ "$docker" = 1 ] && command -v docker >/dev/null; then
    if peer_round "${dk[@]}" run --rm --network none busybox true >/dev/null &&
        peer_round "${dk[@]}" run --rm busybox true >/dev/null; then
        contenders+=(docker dockernet)
    else
        echo "docker run --rm on berth: failed: $(tail -1 "$tmp/peer.err")"
    fi
fi
if [ "$peers" = 1 ] && command -v podman >/dev/null; then
    if podman "${podman_opts[@]}" pull -q "oci:$tmp/layout:latest" >/dev/null 2>"$tmp/peer.err"; then
        img=$(podman "${podman_opts[@]}" images -q | head -1)
        prun=(podman "${podman_opts[@]}" run --rm --network none
            --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 "$img" true)
        if peer_round "${prun[@]}" >/dev/null; then
            contenders+=(podman)
        else
            echo "peer: podman run --rm: failed: $(tail -1 "$tmp/peer.err")"
        fi
    else
        echo "peer: podman: cannot load the image: $(tail -1 "$tmp/peer.err")"
    fi
elif [ "$peers" = 1 ]; then
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
        >/dev/null 2>"$tmp/peer.err" &&
        peer_round "${ctr[@]}" run --rm docker.io/library/busybox:bench bench0 true >/dev/null; then
        contenders+=(ctr)
        # ctr applies no seccomp profile unless asked; berth, docker and
        # podman apply one: the same run with containerd's default profile.
        peer_round "${ctr[@]}" run --rm --seccomp docker.io/library/busybox:bench bench0s true \
            >/dev/null && contenders+=(ctrsec)
    else
        echo "peer: ctr: cannot import the image or run it: $(tail -1 "$tmp/peer.err")"
    fi
elif [ "$peers" = 1 ]; then
    echo "peer: ctr: not installed"
fi
contender_round() {
    case $1 in
    docker) peer_round "${dk[@]}" run --rm --network none busybox true ;;
    dockernet) peer_round "${dk[@]}" run --rm busybox true ;;
    podman) peer_round "${prun[@]}" ;;
    ctr) peer_round "${ctr[@]}" run --rm docker.io/library/busybox:bench "bench$2" true ;;
    ctrsec) peer_round "${ctr[@]}" run --rm --seccomp docker.io/library/busybox:bench "bench$2s" true ;;
    esac
}
declare -A cmed
if [ "${#contenders[@]}" -gt 0 ]; then
    for c in "${contenders[@]}"; do : >"$tmp/c-$c.txt"; done
    printf '%-44s %d rounds, load %s at the start' "alternated: ${contenders[*]}" "$rounds" \
        "$(cut -d' ' -f1-3 /proc/loadavg)"
    for i in $(seq "$rounds"); do
        for c in "${contenders[@]}"; do
            contender_round "$c" "$i" >>"$tmp/c-$c.txt" ||
                { echo "$c failed in round $i: $(tail -1 "$tmp/peer.err")" >&2; exit 1; }
        done
    done
    echo ", $(cut -d' ' -f1-3 /proc/loadavg) at the end"
    for c in "${contenders[@]}"; do
        read -r m_med m_mean < <(stats <"$tmp/c-$c.txt")
        cmed[$c]=$m_med
        case $c in
        docker) label="docker run --rm --network none, on berth" ;;
        dockernet) label="docker run --rm, on berth (its network)" ;;
        podman) label="peer: podman run --rm --network none" ;;
        ctr) label="peer: ctr run --rm" ;;
        ctrsec) label="peer: ctr run --rm --seccomp" ;;
        esac
        printf '%-44s median %8.2f ms  mean %8.2f ms  (q1 / median / q3 %s)\n' "$label" "$m_med" \
            "$m_mean" "$(quart <"$tmp/c-$c.txt")"
    done
    for peer in podman ctr ctrsec; do
        [ -n "${cmed[$peer]:-}" ] || continue
        printf '%-44s /v1 API round %.2fx' "ratio $peer / berth (medians)" \
            "$(awk -v a="${cmed[$peer]}" -v b="$api_med" 'BEGIN {print a/b}')"
        for c in docker dockernet; do
            [ -n "${cmed[$c]:-}" ] || continue
            printf ', %s %.2fx' "$c" "$(awk -v a="${cmed[$peer]}" -v b="${cmed[$c]}" 'BEGIN {print a/b}')"
        done
        printf ' (goal > 1: berth faster)\n'
        if [ -n "${cmed[docker]:-}" ]; then
            printf '%-44s %s\n' "  per-round ratio $peer / docker q1/med/q3" \
                "$(paste "$tmp/c-$peer.txt" "$tmp/c-docker.txt" | awk '{print $1/$2}' | quart)"
        fi
    done
fi

# ---- idle containers ----------------------------------------------------------
# (IDLE=0 skips it.)
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
if [ "$idle" -gt 0 ]; then
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
fi
drops=$(iptables -w -t mangle -L "$guard" -v -n -x | awk '$3 == "DROP" {print $1}')
printf '%-44s %s (must be 0)\n' "packets from the pool that tried to leave" "$drops"
