#!/usr/bin/env bash
# 8 at once, taken apart (issue 16): PAR API rounds (create + run `true` +
# wait + delete, network disabled) started together against PAR `runc run`
# of the equivalent bundle started together, alternated ROUNDS times, on
# one berthd per --pool-threads value given (POOLS, default "8"), so a pool
# size's before and after share the window. Prints the wall medians, the
# most runc processes alive at once (sampled from /proc every 2 ms), and,
# from the debug log, the create's phases over all containers (medians and
# the max: a container that waited for a pool thread shows in "prepared
# at" and "namespace ready at"; one that waited for a core in "runc run").
# PROFILE=1 adds `perf sched record` of the whole machine over one berth
# round and one floor round and `perf sched latency` of both (every task
# of the machine: on a shared one, other processes of the same name are
# counted too), and `perf trace -s` of berthd's threads over one more round.
#
#   bench/par.sh path/to/berthd            # knobs: PAR ROUNDS POOLS PROFILE
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bin=${1:?usage: bench/par.sh path/to/berthd}
par=${PAR:-8}
rounds=${ROUNDS:-5}
pools=${POOLS:-8}
ms() { date +%s%N; }
el() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f\n", (b-a)/1e6}'; }
med() { sort -n | awk '{a[NR]=$1} END {if (NR) printf "%.1f", a[int((NR+1)/2)]}'; }
max() { sort -n | tail -1; }

bench_tmp berth-bench-par
busybox_image "$tmp"
rootfs=$tmp/rootfs
start() { berthd_start "$1" "$bin" --pool-threads "$2"; }
api_round() { # url handle
    local out
    out=$(curl -s -o /dev/null -w '%{http_code} ' -XPOST "$1/v1/containers" \
        -H 'Content-Type: application/json' \
        -d "{\"handle\":\"$2\",\"image\":\"busybox\",\"network\":{\"disabled\":true}}" --next \
        -o /dev/null -w '%{http_code} ' -XPOST "$1/v1/containers/$2/processes" \
        -H 'Content-Type: application/json' -d '{"id":"task","path":"true"}' --next \
        -o /dev/null -w '%{http_code} ' "$1/v1/containers/$2/processes/task/wait?timeout=30" --next \
        -o /dev/null -w '%{http_code} ' -XDELETE "$1/v1/containers/$2")
    [ "$out" = "201 201 200 204 " ] || { echo "round $2 failed: $out" >&2; return 1; }
}
# The most runc processes alive at once while $1 runs (comm runc or runc:[N:...]).
runc_peak() {
    (
        peak=0
        while [ ! -e "$tmp/stop" ]; do
            n=$(grep -l '^runc' /proc/[0-9]*/comm 2>/dev/null | wc -l) || true
            [ "$n" -gt "$peak" ] && peak=$n
            sleep 0.002
        done
        echo "$peak" >"$tmp/peak"
    ) &
    local s=$!
    "$@"
    touch "$tmp/stop"
    wait "$s"
    rm -f "$tmp/stop"
}
par_api() { # name tag
    local url t0 ps=() k
    url=$(cat "$tmp/$1.url")
    t0=$(ms)
    for k in $(seq "$par"); do
        api_round "$url" "$2-$k" &
        ps+=($!)
    done
    for k in "${ps[@]}"; do wait "$k"; done
    el "$t0" "$(ms)" >"$tmp/wall"
}
par_floor() {
    local t0 ps=() k
    t0=$(ms)
    for k in $(seq "$par"); do
        runc --root "$tmp/runc" run --bundle "$tmp/pb$k" "perf8floor$$-$k" </dev/null >/dev/null &
        ps+=($!)
    done
    wait "${ps[@]}"
    el "$t0" "$(ms)" >"$tmp/wall"
}

for p in $pools; do start "p$p" "$p"; done
# The floor's bundle: the config berthd writes, `true` in place of the init.
first=p${pools%% *}
url=$(cat "$tmp/$first.url")
curl -sf -o /dev/null -XPOST "$url/v1/containers" -H 'Content-Type: application/json' \
    -d "{\"handle\":\"floorsrc\",\"rootfs\":\"raw://$rootfs\",\"network\":{\"disabled\":true}}"
for k in $(seq "$par"); do
    mkdir -p "$tmp/pb$k"
    floor_config "$tmp/$first/containers/floorsrc/bundle/config.json" "$tmp/pb$k/config.json" \
        "$rootfs" "/perf8floor$$-$k"
done
curl -sf -o /dev/null -XDELETE "$url/v1/containers/floorsrc"

for p in $pools; do par_api "p$p" "w$p"; done
par_floor
for p in $pools; do : >"$tmp/p$p.txt"; : >"$tmp/p$p.peak"; done
: >"$tmp/floor.txt"
: >"$tmp/floor.peak"
echo "berthd $bin; PAR $par; $rounds rounds; pools $pools; $(nproc) cores; $(date -u '+%F %H:%M');" \
    "load $(cut -d' ' -f1-3 /proc/loadavg) at the start"
for i in $(seq "$rounds"); do
    for p in $pools; do
        runc_peak par_api "p$p" "r$i"
        cat "$tmp/wall" >>"$tmp/p$p.txt"
        cat "$tmp/peak" >>"$tmp/p$p.peak"
    done
    runc_peak par_floor
    cat "$tmp/wall" >>"$tmp/floor.txt"
    cat "$tmp/peak" >>"$tmp/floor.peak"
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
fm=$(med <"$tmp/floor.txt")
printf 'floor: %d x runc run: wall median %s ms (%s), runc alive at once: max %s\n' "$par" "$fm" \
    "$(sort -n "$tmp/floor.txt" | tr '\n' ' ')" "$(max <"$tmp/floor.peak")"
for p in $pools; do
    m=$(med <"$tmp/p$p.txt")
    printf 'berth --pool-threads %s: wall median %s ms (%s), ratio %s, runc alive at once: max %s\n' \
        "$p" "$m" "$(sort -n "$tmp/p$p.txt" | tr '\n' ' ')" \
        "$(awk -v a="$m" -v b="$fm" 'BEGIN {printf "%.2f x", a/b}')" "$(max <"$tmp/p$p.peak")"
    printf '   create phases, median / max over %s containers:' "$((par * rounds))"
    for f in 'record and image ([0-9.]+)' 'runc run ([0-9.]+)' 'init ready ([0-9.]+)' \
        'prepared at ([0-9.]+)' 'namespace ready at ([0-9.]+)' 'runtime done at ([0-9.]+)' \
        'done at ([0-9.]+)$'; do
        v=$({ grep -E "create r[0-9]+-[0-9]+: .*$f" "$tmp/p$p.log" || true; } | sed -E "s/.*$f.*/\\1/")
        [ -n "$v" ] && printf ' %s %s / %s;' "$(echo "$f" | sed -E 's/ \(.*//; s/\$//')" \
            "$(echo "$v" | med)" "$(echo "$v" | max)"
    done
    echo
    printf '   delete, median / max:'
    for f in 'record ([0-9.]+)' 'runtime ([0-9.]+)' 'unmount ([0-9.]+)' 'image use ([0-9.]+)'; do
        v=$({ grep -E "delete r[0-9]+-[0-9]+: .*$f" "$tmp/p$p.log" || true; } | sed -E "s/.*$f.*/\\1/")
        [ -n "$v" ] && printf ' %s %s / %s;' "$(echo "$f" | sed -E 's/ \(.*//')" \
            "$(echo "$v" | med)" "$(echo "$v" | max)"
    done
    echo
done
if [ "${PROFILE:-0}" = 1 ]; then
    p=${pools%% *}
    perf sched record -a -o "$tmp/berth.data" >/dev/null 2>&1 &
    sp=$!
    sleep 0.3
    par_api "p$p" "prof"
    kill -INT "$sp"; wait "$sp" || true
    # berthd's syscalls (all its threads) over one more round: where they wait.
    perf trace -s -p "$(cat "$tmp/p$p.pid")" -o "$tmp/trace.txt" >/dev/null 2>&1 &
    sp=$!
    sleep 0.3
    par_api "p$p" "trace"
    kill -INT "$sp"; wait "$sp" || true
    echo "== perf trace -s of berthd over one round (per thread, syscalls by total time)"
    grep -vE '^ *$' "$tmp/trace.txt" | head -160 || true
    perf sched record -a -o "$tmp/floor.data" >/dev/null 2>&1 &
    sp=$!
    sleep 0.3
    par_floor
    kill -INT "$sp"; wait "$sp" || true
    for x in berth floor; do
        echo "== perf sched latency, $x round (top 25 by total runtime)"
        { perf sched latency -i "$tmp/$x.data" -s runtime 2>/dev/null || true; } | head -30 || true
    done
    grep -E "create prof-[0-9]+: (prep|record)" "$tmp/p$p.log"
fi
