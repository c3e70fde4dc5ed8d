#!/usr/bin/env bash
# Two berthd builds against each other, round by round: create + run
# `true` + wait + delete through the /v1 API ("network": {"disabled":
# true}, daemons with --network none), alternated A, B, A, B ... so the
# shared machine's load falls on both alike. For a change's before and
# after in the same window (bench/run.sh measures one build against the
# floor and the peers). Prints the medians of each request and of the
# sum, the per-round ratio B / A, and the create's phases from each
# daemon's debug log (record and image, mount, bundle, runc run, the
# init's ready, the running record; then when, from the request, the
# prepare job ended, the namespace was ready and the runtime's job
# ended: a job that waits for a thread or a core shows there).
#
#   bench/run_ab.sh A/berthd B/berthd [ROUNDS]     # default 30 rounds
#
# Each daemon has a root of its own under a temporary directory, and its
# berth-init beside its binary; both are stopped (by PID) and the
# directory removed at the end.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

a_bin=${1:?usage: bench/run_ab.sh A/berthd B/berthd [ROUNDS]}
b_bin=${2:?usage: bench/run_ab.sh A/berthd B/berthd [ROUNDS]}
rounds=${3:-30}

bench_tmp berth-bench-ab
busybox_image "$tmp"
start() { berthd_start "$1" "$2"; } # name binary
# One round on one keep-alive connection: the sum of the four requests'
# times as curl measured them, then each of them, in ms.
round() { # name handle
    local url
    url=$(cat "$tmp/$1.url")
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -XPOST "$url/v1/containers" \
        -H 'Content-Type: application/json' \
        -d "{\"handle\":\"$2\",\"image\":\"busybox\",\"network\":{\"disabled\":true}}" --next \
        -o /dev/null -w '%{http_code} %{time_total}\n' -XPOST "$url/v1/containers/$2/processes" \
        -H 'Content-Type: application/json' -d '{"id":"task","path":"true"}' --next \
        -o /dev/null -w '%{http_code} %{time_total}\n' \
        "$url/v1/containers/$2/processes/task/wait?timeout=10" --next \
        -o /dev/null -w '%{http_code} %{time_total}\n' -XDELETE "$url/v1/containers/$2" >"$tmp/round"
    if [ "$(cut -d' ' -f1 "$tmp/round" | tr '\n' ' ')" != "201 201 200 204 " ]; then
        echo "round failed ($1): $(cat "$tmp/round")" >&2
        exit 1
    fi
    awk '{s+=$2; v[NR]=$2*1000} END {printf "%.2f %.2f %.2f %.2f %.2f\n", s*1000, v[1], v[2], v[3], v[4]}' \
        "$tmp/round"
}
med() { sort -n | awk '{a[NR]=$1} END {if (NR) printf "%.1f", a[int((NR+1)/2)]}'; }

start a "$a_bin"
start b "$b_bin"
round a w0 >/dev/null
round b w0 >/dev/null
: >"$tmp/a.txt"
: >"$tmp/b.txt"
echo "A $a_bin, B $b_bin; $rounds rounds; $(nproc) cores; $(date -u '+%F %H:%M');" \
    "load $(cut -d' ' -f1-3 /proc/loadavg) at the start"
for i in $(seq "$rounds"); do
    round a "r$i" >>"$tmp/a.txt"
    round b "r$i" >>"$tmp/b.txt"
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
for x in a b; do
    printf '%s: total %s ms  create %s  start %s  wait %s  delete %s (medians)\n' "${x^^}" \
        "$(cut -d' ' -f1 "$tmp/$x.txt" | med)" "$(cut -d' ' -f2 "$tmp/$x.txt" | med)" \
        "$(cut -d' ' -f3 "$tmp/$x.txt" | med)" "$(cut -d' ' -f4 "$tmp/$x.txt" | med)" \
        "$(cut -d' ' -f5 "$tmp/$x.txt" | med)"
    # The create's phases, where the daemon logs them (each a median).
    printf '   phases:'
    for f in 'record and image ([0-9.]+)' 'mount ([0-9.]+)' 'bundle ([0-9.]+)' 'runc run ([0-9.]+)' \
        'init ready ([0-9.]+)' 'runtime [0-9.]+ ms, record ([0-9.]+)' 'prepared at ([0-9.]+)' \
        'namespace ready at ([0-9.]+)' 'runtime done at ([0-9.]+)'; do
        v=$({ grep -E "create r[0-9]+: .*$f" "$tmp/$x.log" || true; } | sed -E "s/.*$f.*/\\1/" | med)
        [ -n "$v" ] && printf ' %s %s' "$(echo "$f" | sed -E 's/ \(.*//; s/runtime.*record/running record/')" "$v"
    done
    echo
    # The delete's steps (its job), each a median.
    printf '   delete:'
    for f in 'record ([0-9.]+)' 'runtime ([0-9.]+)' 'unmount ([0-9.]+)' 'image use ([0-9.]+)' \
        'rename ([0-9.]+)'; do
        v=$({ grep -E "delete r[0-9]+: .*$f" "$tmp/$x.log" || true; } | sed -E "s/.*$f.*/\\1/" | med)
        [ -n "$v" ] && printf ' %s %s' "$(echo "$f" | sed -E 's/ \(.*//')" "$v"
    done
    echo
done
printf 'per-round ratio B / A: median %s\n' \
    "$(paste -d' ' "$tmp/a.txt" "$tmp/b.txt" | awk '{print $6/$1}' | med)"
