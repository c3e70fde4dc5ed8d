#!/usr/bin/env bash
# API benchmark: GET /v1/health throughput, its p99 latency while the
# pool is saturated with CPU-heavy jobs (POST /v1/debug/hash), with the
# same jobs' duration alone as a floor, and its p99 latency while slow
# clients (slowloris) hold connections open, against the same probe with
# none. Builds berthd with -DBERTH_BENCH_ROUTES=ON into build-bench, starts
# it on free ports with temporary roots, and stops only those daemons.
#
#   bench/api.sh            # defaults below
#   JOBS=4 HASH_BYTES=4294967296 DURATION=5 SLOW=40 SLOW_MAX=64 bench/api.sh
#   SLOW_ONLY=1 bench/api.sh   # (c) only
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build-bench}
njobs=${JOBS:-4}
hash_bytes=${HASH_BYTES:-4294967296}
duration=${DURATION:-5}
nslow=${SLOW:-40}           # slow clients in (c1) and (c2)
slow_max=${SLOW_MAX:-64}    # --max-connections of (c3), flooded with 5x as many
slow_window=${SLOW_WINDOW:-12}  # longer than the 10 s body-rate window

if ! command -v wrk >/dev/null; then
    apt-get install -y wrk >/dev/null
fi
command -v curl >/dev/null || apt-get install -y curl >/dev/null
command -v python3 >/dev/null || apt-get install -y python3 >/dev/null

cmake -B "$build" -S "$src" -DBERTH_BENCH_ROUTES=ON -DBERTH_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1
cmake --build "$build" -j"$(nproc)" --target berthd >/dev/null 2>&1

tmp=$(mktemp -d)
pid=
pids=()
cleanup() {
    for p in $pid "${pids[@]}"; do
        if kill -0 "$p" 2>/dev/null; then
            kill -TERM "$p"
            wait "$p" 2>/dev/null || true
        fi
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

"$build/berthd" --listen 127.0.0.1:0 --root "$tmp/root" --runtime host --network none \
    --log-level warn --pool-threads "$((njobs + 2))" 2>"$tmp/log" &
pid=$!
port=
for _ in $(seq 100); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/log" 2>/dev/null | sed 's/.*://') || true
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    # --log-level warn hides the info line: ask the kernel instead.
    port=$(ss -ltnp 2>/dev/null | awk -v p="pid=$pid," '$0 ~ p {sub(/.*:/, "", $4); print $4; exit}')
fi
[ -n "$port" ] || { echo "berthd did not start:"; cat "$tmp/log"; exit 1; }
url=http://127.0.0.1:$port

echo "berthd $("$build/berthd" --version | cut -d' ' -f2) on $url; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%F)"

hash_job() {  # prints the job's seconds as berthd measured them
    curl -sf -d "{\"bytes\": $hash_bytes}" "$url/v1/debug/hash" |
        sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p'
}

if [ -z "${SLOW_ONLY:-}" ]; then
    echo
    echo "== (a) GET /v1/health throughput: wrk -t2 -c32 -d${duration}s"
    wrk -t2 -c32 -d"${duration}s" "$url/v1/health" | grep -E 'Requests/sec|Latency|requests in'

    echo
    echo "== floor: $njobs x hash of $hash_bytes bytes, alone"
    t0=$(date +%s.%N)
    hpids=()
    for i in $(seq "$njobs"); do hash_job >"$tmp/alone.$i" & hpids+=($!); done
    wait "${hpids[@]}"
    t1=$(date +%s.%N)
    alone_wall=$(echo "$t1 - $t0" | bc)
    echo "wall ${alone_wall}s; per job: $(cat "$tmp"/alone.* | tr '\n' ' ')s"

    echo
    echo "== (b) GET /v1/health latency while $njobs hash jobs saturate the pool"
    hpids=()
    for i in $(seq "$njobs"); do hash_job >"$tmp/busy.$i" & hpids+=($!); done
    # Wait until every job is running, then measure for less than the jobs
    # take alone, so the window lies wholly inside their run.
    for _ in $(seq 100); do
        running=$(curl -s "$url/v1/health" | sed -n 's/.*"running":\([0-9]*\).*/\1/p')
        [ "${running:-0}" -ge "$njobs" ] && break
        sleep 0.05
    done
    window=$(echo "$alone_wall * 0.6" | bc | awk '{printf "%d", ($1 < 1) ? 1 : $1}')
    wrk -t1 -c2 -d"${window}s" --latency "$url/v1/health" >"$tmp/wrk-busy"
    still=$(curl -s "$url/v1/health" | sed -n 's/.*"running":\([0-9]*\).*/\1/p')
    grep -E 'Latency  |50%|90%|99%|Requests/sec' "$tmp/wrk-busy"
    echo "jobs running at the start: $running, at the end of the ${window}s window: $still"
    wait "${hpids[@]}"
    echo "per job while measured: $(cat "$tmp"/busy.* | tr '\n' ' ')s"
    p99=$(awk '$1 == "99%" {print $2}' "$tmp/wrk-busy")
    echo
    echo "p99 of GET /v1/health with the pool saturated: $p99 (goal: under 5 ms)"
    [ "${still:-0}" -ge "$njobs" ] || echo "warning: the jobs finished inside the window; raise HASH_BYTES"
fi

# ---- (c) health while slow clients hold connections ----

# Slow clients, each a byte a second and reopened as soon as berthd closes
# it: in turn a trickled first request, one quick request then a trickled
# second one, and a JSON body at 1 byte/s (or only the first kind).
cat >"$tmp/slow.py" <<'PY'
import os, signal, socket, sys, time
port, n, mixed = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "mixed"
head = b"GET /v1/health HTTP/1.1\r\nHost: t\r\nX-Slow: "
quick = b"GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n"
body = (b"POST /v1/images/prune HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000000\r\n\r\n")
reopened = 0
stop = False
def term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, term)
def kind(i):
    return i % 3 if mixed else 0
def open_one(i):
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        if kind(i) == 1:
            s.send(quick)
        elif kind(i) == 2:
            s.send(body)
    except OSError:
        s.close()
        return None
    return s
socks = [None] * n
pos = [0] * n
next_byte = 0.0
while not stop:
    tick = time.monotonic() >= next_byte
    if tick:
        next_byte = time.monotonic() + 1
    for i in range(n):
        s = socks[i]
        if s is not None:
            try:
                if not s.recv(65536):
                    raise OSError
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                socks[i] = s = None
                reopened += 1
        if s is None:
            socks[i] = open_one(i)
            pos[i] = 0
            continue
        if tick:
            b = b" " if kind(i) == 2 else head[pos[i]:pos[i] + 1] or b"a"
            pos[i] += 1
            try:
                s.send(b)
            except OSError:
                pass
    time.sleep(0.02)
print(reopened)
PY

# Starts a berthd with the given extra flags; sets dport and dpid.
start_berthd() {
    local log=$tmp/log.$#.$RANDOM
    "$build/berthd" --listen 127.0.0.1:0 --root "$tmp/root.$RANDOM" --runtime host --network none \
        --log-level info "$@" 2>"$log" &
    dpid=$!
    pids+=("$dpid")
    dport=
    for _ in $(seq 100); do
        dport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" 2>/dev/null | sed 's/.*://') || true
        [ -n "$dport" ] && break
        sleep 0.1
    done
    [ -n "$dport" ] || { echo "berthd did not start:"; cat "$log"; exit 1; }
}

stop_berthd() {
    kill -TERM "$dpid"
    wait "$dpid" 2>/dev/null || true
}

# Health p99 on fresh connections (a monitor's probe) and on keep-alive
# ones, while n slow clients of the given kind are held on the daemon at
# dport; prints one line.
slow_case() {
    local label=$1 n=$2 kind=$3
    local sp=
    if [ "$n" -gt 0 ]; then
        python3 "$tmp/slow.py" "$dport" "$n" "$kind" >"$tmp/reopened" &
        sp=$!
        sleep 1
    fi
    local half=$((slow_window / 2))
    wrk -t1 -c2 -d"${half}s" --latency -H 'Connection: close' "http://127.0.0.1:$dport/v1/health" >"$tmp/wrk-close"
    wrk -t1 -c2 -d"${half}s" --latency "http://127.0.0.1:$dport/v1/health" >"$tmp/wrk-keep"
    local reopened=0
    if [ -n "$sp" ]; then
        kill -TERM "$sp"
        wait "$sp" 2>/dev/null || true
        reopened=$(cat "$tmp/reopened")
    fi
    local conns
    conns=$(curl -s "http://127.0.0.1:$dport/v1/health" | sed -n 's/.*"connections":\([0-9]*\).*/\1/p')
    pct() { awk -v k="$2" '$1 == k {print $2}' "$1"; }
    errs() { grep -Eo '(Socket errors:.*|Non-2xx or 3xx responses: [0-9]+)' "$1" | tr '\n' ' '; }
    printf '%-44s new conn: p50 %s p99 %s, %s req/s %s| keep-alive: p99 %s %s| slow ones closed and reopened: %s\n' \
        "$label" "$(pct "$tmp/wrk-close" 50%)" "$(pct "$tmp/wrk-close" 99%)" \
        "$(awk '/Requests\/sec/ {print $2}' "$tmp/wrk-close")" "$(errs "$tmp/wrk-close")" \
        "$(pct "$tmp/wrk-keep" 99%)" "$(errs "$tmp/wrk-keep")" "$reopened"
}

echo
echo "== (c) GET /v1/health latency (wrk -t1 -c2, ${slow_window}s) while slow clients hold connections"
start_berthd
slow_case "floor: no slow clients" 0 mixed
slow_case "(c1) $nslow slow clients, --max-connections 1024" "$nslow" mixed
stop_berthd
start_berthd --max-connections "$nslow"
slow_case "(c2) $nslow slow clients, --max-connections $nslow" "$nslow" mixed
stop_berthd
start_berthd --max-connections "$slow_max"
slow_case "(c3) $((slow_max * 5)) slow clients, --max-connections $slow_max" "$((slow_max * 5))" headers
stop_berthd
echo "goal: p99 under 100 ms on a new connection in every case"
