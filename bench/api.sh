#!/usr/bin/env bash
# API benchmark: GET /v1/health throughput, and its p99 latency while the
# pool is saturated with CPU-heavy jobs (POST /v1/debug/hash), with the
# same jobs' duration alone as a floor. Builds berthd with
# -DBERTH_BENCH_ROUTES=ON into build-bench, starts it on a free port with a
# temporary root, and stops only that daemon.
#
#   bench/api.sh            # defaults below
#   JOBS=4 HASH_BYTES=4294967296 DURATION=5 bench/api.sh
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build-bench}
njobs=${JOBS:-4}
hash_bytes=${HASH_BYTES:-4294967296}
duration=${DURATION:-5}

if ! command -v wrk >/dev/null; then
    apt-get install -y wrk >/dev/null
fi
command -v curl >/dev/null || apt-get install -y curl >/dev/null

cmake -B "$build" -S "$src" -DBERTH_BENCH_ROUTES=ON -DBERTH_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1
cmake --build "$build" -j"$(nproc)" --target berthd >/dev/null 2>&1

tmp=$(mktemp -d)
pid=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

"$build/berthd" --listen 127.0.0.1:0 --root "$tmp/root" --runtime host \
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

echo "berthd $("$build/berthd" --version | cut -d' ' -f2) on $url; $(nproc) cores; $(date -u +%F)"

hash_job() {  # prints the job's seconds as berthd measured them
    curl -sf -d "{\"bytes\": $hash_bytes}" "$url/v1/debug/hash" |
        sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p'
}

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
