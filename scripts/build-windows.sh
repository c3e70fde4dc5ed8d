#!/usr/bin/env bash
# The Windows cross-build: installs mingw-w64 and Wine if missing, builds
# berth's dependencies from Debian's own source packages into a cache
# outside the work tree (once: later runs reuse it), cross-builds
# berthd.exe and the unit suites with cmake/mingw-w64.cmake, and runs
# those suites under Wine through CTest, with the API suite that starts
# berthd.exe under Wine and talks HTTP to it (tests/api/test_wine.c).
#
#   ./scripts/build-windows.sh             build into build-windows/ and run the Wine suites
#   ./scripts/build-windows.sh --no-test   build only
# Extra arguments go to ctest (e.g. -R router).
#
# Environment:
#   BERTH_MINGW_CACHE  the cache (default /var/cache/berth-mingw as root, else
#                      ${XDG_CACHE_HOME:-~/.cache}/berth-mingw). It holds:
#                        <key>/prefix   the static libraries and headers
#                        <key>/manifest what went in (versions, recipe, times)
#                        <key>/logs     the build logs of the dependencies
#                        apt/           a private source list and its indexes
#                        wine/, home/   the WINEPREFIX and HOME Wine runs with
#                      <key> hashes the source packages' versions, the toolchain
#                      packages' versions and the recipe (scripts/windows-deps.sh
#                      and cmake/mingw-w64.cmake). A build happens in a temporary
#                      directory that is renamed to <key> only when complete, so an
#                      interrupted run leaves nothing a later run would trust.
#   BERTH_WINDOWS_BUILD_DIR  berth's build directory (default build-windows)
#   BERTH_LINUX_BUILD_DIR    the Linux build that builds api_test_wine (default build)
#
# /etc/apt is never edited: the deb-src entries live in the cache's own
# source list, derived from the machine's Debian entries.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/deps.sh
. scripts/windows-deps.sh

run_tests=1
if [ "${1:-}" = "--no-test" ]; then
    run_tests=0
    shift
fi

start=$SECONDS
note() { echo "build-windows: $*" >&2; }
phase_start=$SECONDS
phase_done() {
    note "$1 done in $((SECONDS - phase_start)) s"
    phase_start=$SECONDS
}

berth_install_missing "${BERTH_WINDOWS_PACKAGES[@]}"
phase_done "toolchain check"

if [ -n "${BERTH_MINGW_CACHE:-}" ]; then
    cache=$BERTH_MINGW_CACHE
elif [ "$(id -u)" -eq 0 ]; then
    cache=/var/cache/berth-mingw
else
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/berth-mingw
fi
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

# Wine never touches the caller's ~/.wine; no display, no Mono or Gecko
# installer dialogs, no debug chatter in the test logs.
export WINEPREFIX=$cache/wine
export HOME=$cache/home
export WINEDEBUG=-all
export WINEDLLOVERRIDES="mscoree,mshtml="
unset DISPLAY WAYLAND_DISPLAY
mkdir -p "$HOME"
wine64=/usr/lib/wine/wine64 # Debian 12 has no wine64 on PATH
export BERTH_WIN_TOOLCHAIN=$root/cmake/mingw-w64.cmake

# One run at a time checks or builds the cache (an exclusive lock); runs
# that only use it hold it shared, so no build replaces a prefix in use.
exec 9>"$cache/lock"
flock -x 9

# ---- a Wine prefix of our own, made once (libarchive's configure runs
# its checks under Wine too) ----
if [ ! -f "$WINEPREFIX/.berth-ready" ]; then
    rm -rf "$WINEPREFIX"
    wine wineboot -i >/dev/null 2>&1 || true
    wineserver -w
    [ -f "$WINEPREFIX/system.reg" ] || { note "wineboot did not make $WINEPREFIX"; exit 1; }
    touch "$WINEPREFIX/.berth-ready"
    phase_done "wine prefix"
fi

# ---- the private apt configuration (deb-src next to the machine's deb) ----
aptdir=$cache/apt
mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial" "$aptdir/parts.d"
apt_opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o "Dir::Etc::SourceParts=$aptdir/parts.d"
    -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache" -o "APT::Sandbox::User=root")

# Prints one deb-src line per entry of the machine's sources for the Debian
# archive (one-line .list files and deb822 .sources files alike). Not for
# debian-security: the mirror this project's machines use serves its binary
# packages but not its sources (openssl_3.0.22-1~deb12u2.dsc: 404), so the
# sources come from the release and -updates suites, where point releases
# bring the security fixes in.
apt_debsrc_lines() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        sed -n 's/^[[:space:]]*deb[[:space:]]\+\(.*\/debian\/\?[[:space:]].*\)$/deb-src \1/p' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && enabled != "no")
                    for (i = 1; i <= nu; i++)
                        if (u[i] ~ /\/debian\/?$/)
                            for (j = 1; j <= ns; j++)
                                printf "deb-src %s%s %s %s\n", opts, u[i], s[j], comps
                types = ""; nu = 0; ns = 0; comps = ""; opts = ""; enabled = ""
            }
            /^[[:space:]]*#/ { next }
            /^[[:space:]]*$/ { flush(); next }
            {
                key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
                if (key == "types") types = $0
                else if (key == "uris") nu = split($0, u, " ")
                else if (key == "suites") ns = split($0, s, " ")
                else if (key == "components") comps = $0
                else if (key == "enabled") enabled = tolower($0)
                else if (key == "signed-by") opts = "[signed-by=" $0 "] "
            }
            END { flush() }' "$f"
    done
}
apt_debsrc_lines | sort -u >"$aptdir/sources.list.new"
if [ ! -s "$aptdir/sources.list.new" ]; then
    note "no Debian entry in /etc/apt/sources.list{,.d} to derive deb-src entries from"
    exit 1
fi
mv "$aptdir/sources.list.new" "$aptdir/sources.list"
if ! apt-get "${apt_opts[@]}" update -qq >"$aptdir/update.log" 2>&1; then
    if ls "$aptdir"/lists/*Sources* >/dev/null 2>&1; then
        note "apt-get update of the source indexes failed; using the indexes of an earlier run"
    else
        cat "$aptdir/update.log" >&2
        exit 1
    fi
fi

# The exact source package versions apt would fetch: the .dsc names.
dscs=$(apt-get "${apt_opts[@]}" source --print-uris "${BERTH_WIN_SOURCES[@]}" 2>/dev/null |
    awk '$2 ~ /\.dsc$/ { print $2 }')
if [ "$(echo "$dscs" | grep -c .)" -ne ${#BERTH_WIN_SOURCES[@]} ]; then
    note "could not resolve every source package (${BERTH_WIN_SOURCES[*]}); got: $dscs"
    exit 1
fi
tools=$(dpkg-query -W -f='${Package} ${Version}\n' gcc-mingw-w64-x86-64-win32 \
    mingw-w64-x86-64-dev binutils-mingw-w64-x86-64 libz-mingw-w64-dev cmake wine64 gcc tcl)
recipe=$(cat scripts/windows-deps.sh cmake/mingw-w64.cmake | sha256sum | cut -c1-64)
key=$(printf '%s\n' "$dscs" "$tools" "$recipe" | sha256sum | cut -c1-16)
prefix=$cache/$key/prefix
phase_done "source versions (key $key)"

# ---- the dependency build, into a temporary directory ----
if [ -f "$cache/$key/manifest" ] && [ -d "$prefix/lib" ]; then
    note "dependencies: reusing $cache/$key"
else
    # Whatever an interrupted run left: we hold the lock, so nobody is using it.
    rm -rf "$cache"/tmp.*
    work=$(mktemp -d "$cache/tmp.XXXXXX")
    mkdir -p "$work/src" "$work/build" "$work/logs" "$work/prefix/lib" "$work/prefix/include"
    note "dependencies: building into $work (logs in $work/logs)"
    (cd "$work/src" && apt-get "${apt_opts[@]}" source --download-only -qq \
        "${BERTH_WIN_SOURCES[@]}") >"$work/logs/fetch.log" 2>&1 ||
        { tail -20 "$work/logs/fetch.log" >&2; exit 1; }
    times=()
    for dsc in $dscs; do
        name=${dsc%%_*}
        src=$work/src/$name
        dpkg-source -x "$work/src/$dsc" "$src" >"$work/logs/$name.log" 2>&1 ||
            { tail -20 "$work/logs/$name.log" >&2; exit 1; }
        t=$SECONDS
        # A shell of its own, so that set -e holds inside the recipe (it
        # would not in a subshell tested by if).
        if ! BERTH_MINGW_PREFIX=$work/prefix bash -euo pipefail -c \
            '. scripts/windows-deps.sh; "build_$1" "$2" "$3" "$4"' build "$name" "$src" \
            "$work/build/$name" "$work/prefix" >>"$work/logs/$name.log" 2>&1; then
            note "building $name failed; the end of $work/logs/$name.log:"
            tail -40 "$work/logs/$name.log" >&2
            exit 1
        fi
        times+=("$name $((SECONDS - t)) s")
        note "  ${dsc%.dsc}: $((SECONDS - t)) s"
        rm -rf "$src" "$work/build/$name"
    done
    berth_win_prune "$work/prefix"
    {
        echo "# berth's Windows dependencies, built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "key $key"
        echo "recipe $recipe"
        echo "$dscs" | sed 's/^/source /'
        echo "$tools" | sed 's/^/tool /'
        printf 'time %s\n' "${times[@]}"
    } >"$work/manifest"
    rm -rf "$work/src" "$work/build"
    # Complete: one rename makes it visible. Older keys go.
    for old in "$cache"/*/manifest; do
        [ -f "$old" ] || continue
        old=$(dirname "$old")
        [ "$old" != "$work" ] && [ "$old" != "$cache/$key" ] && rm -rf "$old"
    done
    rm -rf "${cache:?}/$key"
    mv "$work" "$cache/$key"
    note "dependencies: built in $((SECONDS - phase_start)) s ($(du -sh "$cache/$key" | cut -f1))"
fi
phase_done "dependencies"

flock -s 9

# ---- the API suite's Linux side: tests/api/test_wine.c, built by the
# Linux build (BERTH_LINUX_BUILD_DIR, default build/, which .ci/run has
# built already), runs berthd.exe under Wine and talks HTTP to it ----
wine_api=
if [ "$run_tests" -eq 1 ]; then
    ldir=${BERTH_LINUX_BUILD_DIR:-build}
    berth_install_missing "${BERTH_BUILD_PACKAGES[@]}" "${BERTH_TEST_PACKAGES[@]}"
    if [ ! -f "$ldir/CMakeCache.txt" ]; then
        cmake -S . -B "$ldir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBERTH_TESTS=ON \
            -DBERTH_BENCH_ROUTES=ON >/dev/null
    fi
    cmake --build "$ldir" -j"$(nproc)" --target api_test_wine api_test_wine_hcs api_test_wine_cimfs
    wine_api=$(cd "$ldir" && pwd)/api_test_wine
    phase_done "the Linux side of the Wine API suite"
fi

# ---- berth itself ----
bdir=${BERTH_WINDOWS_BUILD_DIR:-build-windows}
cmake -S . -B "$bdir" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/mingw-w64.cmake" \
    -DBERTH_MINGW_PREFIX="$prefix" -DCMAKE_CROSSCOMPILING_EMULATOR="$wine64" \
    -DBERTH_WINEPREFIX="$WINEPREFIX" -DBERTH_WINE_API_SUITE="$wine_api" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBERTH_TESTS=ON >/dev/null
cmake --build "$bdir" -j"$(nproc)"
phase_done "berth cross-build"

rc=0
if [ "$run_tests" -eq 1 ]; then
    ctest --test-dir "$bdir" --output-on-failure --timeout 600 -j"$(nproc)" "$@" || rc=$?
    # Let this prefix's wineserver exit before we return.
    wineserver -w || true
    phase_done "Wine suites"
fi
note "total $((SECONDS - start)) s"
exit $rc
