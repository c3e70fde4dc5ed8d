#!/bin/sh
# bench/volumes.sh: volume tar streams against the floor (tar -x / tar -c
# through a pipe, same run, same disk, warm cache), copy-on-write child
# creation of a 300 MB volume, and berthd's peak RSS over a 1 GiB stream.
#
# Knobs: BUILD_DIR (default build-bench-volumes, built here if missing), WORK (temporary dir on the disk to
# measure, default /tmp), REAL_SRC (a directory of realistic files; the
# first ~300 MB of it are copied, default /usr/lib/x86_64-linux-gnu),
# ROUNDS (default 5: floor and berth alternate, in and out, each round),
# SKIP_BIG=1 (leave out the 1 GiB RSS stream).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench-volumes}
BERTHD=$BUILD_DIR/berthd
REAL_SRC=${REAL_SRC:-/usr/lib/x86_64-linux-gnu}
ROUNDS=${ROUNDS:-5}
T=$(mktemp -d "${WORK:-/tmp}/berth-bench-vol-XXXXXX")
PORT=$(( 30000 + $(od -An -N2 -tu2 /dev/urandom) % 20000 ))
B=http://127.0.0.1:$PORT
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT

if [ ! -x "$BERTHD" ]; then
    cmake -B "$BUILD_DIR" -S "$ROOT" -DBERTH_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target berthd >/dev/null
fi
[ -x "$BERTHD" ] || { echo "could not build berthd in $BUILD_DIR" >&2; exit 1; }
"$BERTHD" --listen 127.0.0.1:$PORT --root "$T/root" --network none --log-level warn 2> "$T/berthd.log" &
PID=$!
for _ in $(seq 50); do curl -sf "$B/v1/health" >/dev/null 2>&1 && break; sleep 0.1; done

now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }
mbps() { echo "scale=1; $1 / 1048576 / $2" | bc -l; }

echo "== preparing trees in $T"
mkdir -p "$T/small"
i=0; while [ $i -lt 10000 ]; do
    d=$T/small/d$((i / 100)); [ -d "$d" ] || mkdir "$d"
    head -c 1024 /dev/urandom > "$d/f$i"; i=$((i + 1))
done
mkdir -p "$T/real"
# The first ~300 MB of REAL_SRC's top-level entries.
total=0
for e in "$REAL_SRC"/*; do
    [ $total -ge 300 ] && break
    cp -a "$e" "$T/real/" 2>/dev/null || true
    total=$(du -sm "$T/real" | cut -f1)
done
echo "small: $(find "$T/small" -type f | wc -l) files, $(du -sm "$T/small" | cut -f1) MB on disk"
echo "real:  $(find "$T/real" | wc -l) entries, ${total} MB"

put() { # vol dir
    curl -sf -o /dev/null -H 'Expect:' -X PUT -T - "$B/v1/volumes/$1/files?path=/" < /dev/stdin
}
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# Each round runs floor and berth back to back (in, then out), so noise
# on a shared machine hits both; the table is the medians of ROUNDS and
# the range of the per-round ratios.
bench_tree() { # name dir
    name=$1; dir=$2
    bytes=$(tar -C "$dir" -cf - . | wc -c)
    tar -C "$dir" -cf - . > /dev/null # warm
    : > "$T/$name.in"; : > "$T/$name.out"
    r=1; while [ $r -le "$ROUNDS" ]; do
        rm -rf "$T/floor"; mkdir "$T/floor"
        vol=$name-$r
        curl -sf -o /dev/null -X POST -d "{\"handle\": \"$vol\"}" "$B/v1/volumes"
        sync
        t0=$(now); tar -C "$dir" -cf - . | tar -C "$T/floor" -xf -; t1=$(now)
        fi=$(secs "$t0" "$t1")
        t0=$(now); tar -C "$dir" -cf - . | put "$vol"; t1=$(now)
        oi=$(secs "$t0" "$t1")
        t0=$(now); tar -C "$T/floor" -cf - . | cat > /dev/null; t1=$(now)
        fo=$(secs "$t0" "$t1")
        t0=$(now); curl -sf "$B/v1/volumes/$vol/files?path=/" | cat > /dev/null; t1=$(now)
        oo=$(secs "$t0" "$t1")
        echo "$fi $oi $(echo "$fi / $oi" | bc -l)" >> "$T/$name.in"
        echo "$fo $oo $(echo "$fo / $oo" | bc -l)" >> "$T/$name.out"
        printf '  round %d: in floor %.3f berth %.3f (%.2f); out floor %.3f berth %.3f (%.2f)\n' "$r" \
            "$fi" "$oi" "$(echo "$fi / $oi" | bc -l)" "$fo" "$oo" "$(echo "$fo / $oo" | bc -l)"
        if [ "$r" -lt "$ROUNDS" ]; then curl -sf -o /dev/null -X DELETE "$B/v1/volumes/$vol"; fi
        r=$((r + 1))
    done
    for dirn in in out; do
        f=$T/$name.$dirn
        fm=$(cut -d' ' -f1 "$f" | median); om=$(cut -d' ' -f2 "$f" | median)
        lo=$(cut -d' ' -f3 "$f" | sort -n | head -1); hi=$(cut -d' ' -f3 "$f" | sort -n | tail -1)
        printf '%-6s %-3s: floor %6.3f s (%6s MB/s)  berth %6.3f s (%6s MB/s)  ratio %.2f (rounds %.2f-%.2f)\n' \
            "$name" "$dirn" "$fm" "$(mbps "$bytes" "$fm")" "$om" "$(mbps "$bytes" "$om")" \
            "$(echo "$fm / $om" | bc -l)" "$lo" "$hi"
    done
    # The last round's volume stays: the children below derive from it.
    if [ "$name" = real ]; then real_vol=$vol; fi
}

echo "== stream in / out, $ROUNDS rounds (ratio = floor time / berth time; goals: in >= 1.0, out >= 0.9)"
bench_tree small "$T/small"
bench_tree real "$T/real"

echo "== copy-on-write child of the ${total} MB volume (goal < 50 ms)"
for n in 1 2 3; do
    curl -sf -o /dev/null -w "child $n: %{time_total} s\n" -X POST \
        -d "{\"handle\": \"child$n\", \"parent\": \"$real_vol\"}" "$B/v1/volumes"
done

[ -n "${SKIP_BIG:-}" ] && exit 0
echo "== peak RSS over a 1 GiB stream in and out (goal < 64 MiB)"
mkdir -p "$T/big" && head -c 1073741824 /dev/urandom > "$T/big/blob"
curl -sf -o /dev/null -X POST -d '{"handle": "big"}' "$B/v1/volumes"
t0=$(now); tar -C "$T/big" -cf - . | put big; t1=$(now)
echo "1 GiB in:  $(secs "$t0" "$t1") s"
t0=$(now); curl -sf "$B/v1/volumes/big/files" | cat > /dev/null; t1=$(now)
echo "1 GiB out: $(secs "$t0" "$t1") s"
grep -E 'VmHWM|VmRSS' /proc/$PID/status
