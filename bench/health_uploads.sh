#!/usr/bin/env bash
# GET /v1/health latency while image uploads stream in (issue 16): four
# clients each upload a ~200 MB docker-archive (a different image each,
# so every upload is a cold import: hashed and unpacked), delete it and
# prune, over and over; meanwhile bench/health_probe.py sends /v1/health
# at a fixed rate (RATE, 200/s) and times each answer from its SCHEDULED
# send time, so a stall counts for every probe that was due during it (a
# closed-loop client such as wrk sends nothing while it waits and hides
# it). Each round measures the same probe on the idle daemon first (the
# floor, same minute), then under the uploads, so noise on a shared
# machine hits both. Goal: p99 under 5 ms under the uploads.
#
#   bench/health_uploads.sh                      # defaults below
#   UPLOADS=4 IMAGE_MB=200 ROUNDS=3 WINDOW=15 IDLE=4 RATE=200 bench/health_uploads.sh
#   BERTHD=build/berthd bench/health_uploads.sh  # a given binary
#   WRK=1 bench/health_uploads.sh                # also wrk's closed loop, after the prober
#   PROFILE=1 bench/health_uploads.sh            # off- and on-CPU profiles of the loop
#                                                # thread in round 1's loaded window (perf)
#   LOOP_NICE=-10 ROUNDS=4 bench/health_uploads.sh # the loop thread at nice 0 in odd
#                                                # rounds, at -10 in even ones (renice)
#
# berthd logs at info (every request is a line in a file on the same disk
# as the store), as it does by default.
#
# Starts one berthd on a free loopback port with a temporary root; stops
# only the processes it started, by PID.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
uploads=${UPLOADS:-4}
image_mb=${IMAGE_MB:-200}
rounds=${ROUNDS:-3}
window=${WINDOW:-15}
idle=${IDLE:-4}
rate=${RATE:-200}

[ -z "${WRK:-}" ] || command -v wrk >/dev/null || apt-get install -y wrk >/dev/null
command -v curl >/dev/null || apt-get install -y curl >/dev/null
if [ -z "${BERTHD:-}" ]; then
    build=${BUILD_DIR:-$src/build-bench}
    cmake -B "$build" -S "$src" -DBERTH_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j"$(nproc)" --target berthd >/dev/null
    BERTHD=$build/berthd
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/berth-bench-health-XXXXXX")
pid=
cpids=()
cleanup() {
    touch "$tmp/stop"
    for p in "${cpids[@]}"; do wait "$p" 2>/dev/null || true; done
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# A docker-archive (docker save layout) of one layer of random files:
# manifest.json, the config and <digest>/layer.tar, the digests computed
# here, the files seeded by the image's number so that no two share a blob.
cat >"$tmp/mkimage.py" <<'PY'
import hashlib, io, json, os, random, sys, tarfile
out, mb, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(n)
layer = out + ".layer"
with open(layer, "wb") as f:
    with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as t:
        left, i = mb << 20, 0
        while left > 0:
            size = min(left, rng.choice([4096, 16384, 65536, 262144, 1 << 20]))
            d = "d%02d" % (i % 40)
            if i < 40:
                ti = tarfile.TarInfo(d); ti.type = tarfile.DIRTYPE; ti.mode = 0o755
                t.addfile(ti)
            ti = tarfile.TarInfo("%s/f%05d" % (d, i)); ti.size = size; ti.mode = 0o644
            t.addfile(ti, io.BytesIO(os.urandom(size)))
            left -= size; i += 1
h = hashlib.sha256()
with open(layer, "rb") as f:
    for b in iter(lambda: f.read(1 << 20), b""):
        h.update(b)
diff = h.hexdigest()
config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                     "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff]}}).encode()
chex = hashlib.sha256(config).hexdigest()
manifest = json.dumps([{"Config": chex + ".json", "RepoTags": ["bench/up%d:latest" % n],
                        "Layers": [diff + "/layer.tar"]}]).encode()
with tarfile.open(out, "w") as t:
    for name, data in (("manifest.json", manifest), (chex + ".json", config)):
        ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
    t.add(layer, arcname=diff + "/layer.tar")
os.unlink(layer)
PY
for i in $(seq "$uploads"); do python3 "$tmp/mkimage.py" "$tmp/img$i.tar" "$image_mb" "$i"; done
cat "$tmp"/img*.tar >/dev/null # warm the page cache

"$BERTHD" --listen 127.0.0.1:0 --root "$tmp/root" --runtime host --network none \
    --log-level "${LOG_LEVEL:-info}" 2>"$tmp/log" &
pid=$!
port=
for _ in $(seq 100); do
    port=$(grep -ao 'listening on http://127.0.0.1:[0-9]*' "$tmp/log" 2>/dev/null | sed 's/.*://') || true
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "berthd did not start:"; cat "$tmp/log"; exit 1; }
url=http://127.0.0.1:$port
echo "berthd $BERTHD on $url; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%F %H:%M')"
echo "$uploads clients x ${image_mb} MB docker-archive upload + delete + prune, $rounds rounds:" \
    "idle ${idle}s then loaded ${window}s"

# One client: upload, delete, prune until the stop file appears; counts
# the uploads that were answered 201 (and any other answer, as errors).
client() {
    local i=$1 ok=0 bad=0 code
    while [ ! -e "$tmp/stop" ]; do
        code=$(curl -s -o "$tmp/out$i" -w '%{http_code}' -H 'Content-Type: application/x-tar' \
            -H 'Expect:' --data-binary @"$tmp/img$i.tar" "$url/v1/images")
        if [ "$code" = 201 ]; then
            ok=$((ok + 1))
        elif [ ! -e "$tmp/stop" ]; then # not one cut short by the round's end
            bad=$((bad + 1))
            echo "client $i: upload answered $code: $(head -c 300 "$tmp/out$i")" >>"$tmp/errors"
        fi
        curl -s -o /dev/null -X DELETE "$url/v1/images/bench/up$i:latest"
        curl -s -o /dev/null -H 'Content-Type: application/json' -d '{}' "$url/v1/images/prune"
    done
    echo "$ok $bad" >"$tmp/count$i"
}

wrk_line() { # label wrk-output
    printf '  %-13s p50 %8s  p90 %8s  p99 %8s  %s req/s\n' "$1" \
        "$(awk '$1 == "50%" {print $2}' "$2")" "$(awk '$1 == "90%" {print $2}' "$2")" \
        "$(awk '$1 == "99%" {print $2}' "$2")" "$(awk '/Requests\/sec/ {print $2}' "$2")"
}
probe_line() { # label probe-output
    read -r p50 p90 p99 p999 max over n late errs lrun lwait lsw <"$2"
    printf '  %-13s p50 %6s  p90 %6s  p99 %6s  p99.9 %6s  max %7s ms; %s of %s over 5 ms;' \
        "$1" "$p50" "$p90" "$p99" "$p999" "$max" "$over" "$n"
    printf ' prober late p99 %s ms; errors %s; loop on CPU %s ms, runnable-waiting %s ms, %s switches\n' \
        "$late" "$errs" "$lrun" "$lwait" "$lsw"
}
# The instrument must not be the noise: on a loaded machine a prober at
# nice 0 waits for a core as long as berthd's loop does, and every late
# wake-up of its own would count against berthd. It runs SCHED_FIFO where
# it may (its own lateness is printed either way).
prober=(python3)
chrt -f 1 true 2>/dev/null && prober=(chrt -f 1 python3)
probe() { "${prober[@]}" "$src/bench/health_probe.py" "$url" "$rate" "$1" "$pid"; }
loop_tid=$pid # the loop is berthd's main thread
echo "prober: ${prober[*]} at ${rate}/s${LOOP_NICE:+; loop thread at nice 0 in odd rounds, $LOOP_NICE in even ones}"
for r in $(seq "$rounds"); do
    if [ -n "${LOOP_NICE:-}" ]; then # an A/B of the loop's priority in the same window
        renice -n "$((r % 2 ? 0 : LOOP_NICE))" -p "$loop_tid" >/dev/null
        echo "round $r: loop thread at nice $(ps -o nice= -p "$loop_tid" | tr -d ' ')"
    fi
    probe "$idle" >"$tmp/idle.$r"
    rm -f "$tmp/stop"
    cpids=()
    for i in $(seq "$uploads"); do client "$i" & cpids+=($!); done
    sleep 1 # every upload under way
    perf_pid=
    if [ -n "${PROFILE:-}" ] && [ "$r" = 1 ]; then
        perf sched record -g -o "$tmp/perf.data" >/dev/null 2>&1 &
        perf_pid=$!
        perf record -q -t "$loop_tid" -F 1999 -g -o "$tmp/cpu.data" >/dev/null 2>&1 &
        perf_pid="$perf_pid $!"
    fi
    probe "$window" >"$tmp/busy.$r"
    for p in $perf_pid; do kill -INT "$p"; done
    for p in $perf_pid; do wait "$p" || true; done
    [ -z "${WRK:-}" ] || wrk -t1 -c2 -d"${window}s" --latency "$url/v1/health" >"$tmp/wrk.$r"
    running=$(curl -s "$url/v1/health" | sed -n 's/.*"running":\([0-9]*\).*/\1/p')
    touch "$tmp/stop"
    for p in "${cpids[@]}"; do wait "$p"; done
    cpids=()
    echo "round $r: load $(cut -d' ' -f1 /proc/loadavg); jobs running at the window's end: ${running:-?};" \
        "uploads answered 201 / other: $(cat "$tmp"/count* | awk '{a += $1; b += $2} END {print a " / " b}')"
    probe_line idle "$tmp/idle.$r"
    probe_line uploads "$tmp/busy.$r"
    [ -z "${WRK:-}" ] || wrk_line "uploads, wrk" "$tmp/wrk.$r"
done
if [ -n "${PROFILE:-}" ] && [ -e "$tmp/perf.data" ]; then
    echo "off-CPU profile of the loop thread (tid $loop_tid), round 1 under the uploads:"
    perf sched timehist -i "$tmp/perf.data" -t "$loop_tid" --state 2>/dev/null |
        python3 "$src/bench/offcpu.py" 5
    echo "on-CPU profile of the loop thread, same window (perf record -t, top symbols):"
    perf report -i "$tmp/cpu.data" --no-children --sort dso,sym -g none --percent-limit 2 \
        --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -20
fi
if [ -e "$tmp/errors" ]; then sort "$tmp/errors" | uniq -c | head -5; fi
echo "goal: p99 under 5 ms under the uploads"
