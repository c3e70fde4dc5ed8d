#!/bin/bash
# Writes the seed corpora of the fuzz targets into OUT/<target>/ (default
# fuzz/corpus): the documents and tar streams of the real images that
# tests/fixtures/make-images.sh builds (umoci, skopeo, busybox-static),
# and the documents, request bodies, paths and hostile layers that the
# unit and API suites use. The committed corpora were made with it;
# every input that made a target fail is added to its corpus by hand,
# named crash-<what>, so that each run replays it.
#
#   fuzz/make-seeds.sh [OUT]
#
# Needs what make-images.sh needs, plus python3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/corpus}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"/{router,oci,platform,unpack,json}

"$here/../tests/fixtures/make-images.sh" "$work/img" >/dev/null

# ---- oci: every JSON document of the real images, and hand-made ones ----
n=0
for layout in base child other; do
    d=$work/img/$layout
    cp "$d/index.json" "$out/oci/$layout-index.json"
    cp "$d/oci-layout" "$out/oci/$layout-oci-layout"
    for blob in "$d"/blobs/sha256/*; do
        # JSON documents only (configs and manifests), not layers.
        if head -c1 "$blob" | grep -q '{'; then
            n=$((n + 1))
            cp "$blob" "$out/oci/$layout-doc-$n.json"
        fi
    done
done
mkdir "$work/docker"
tar -C "$work/docker" -xf "$work/img/docker.tar"
cp "$work/docker/manifest.json" "$out/oci/docker-manifest.json"
for f in "$work/docker"/*.json; do
    [ "$(basename "$f")" = manifest.json ] && continue
    cp "$f" "$out/oci/docker-config.json"
done
python3 - "$out/oci" <<'EOF'
import json, sys
out = sys.argv[1]
D = lambda c: "sha256:" + c * 64
def w(name, doc):
    with open(f"{out}/{name}", "w") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
def desc(mt, c, size=100, **kw):
    d = {"mediaType": mt, "digest": D(c), "size": size}
    d.update(kw)
    return d
M = "application/vnd.oci.image.manifest.v1+json"
I = "application/vnd.oci.image.index.v1+json"
# A multi-platform index with Windows builds, annotations and an artifact.
w("index-multi.json", {"schemaVersion": 2, "mediaType": I, "manifests": [
    desc(M, "a", platform={"os": "linux", "architecture": "amd64"},
         annotations={"org.opencontainers.image.ref.name": "latest"}),
    desc(M, "b", platform={"os": "linux", "architecture": "arm64", "variant": "v8"}),
    desc(M, "c", platform={"os": "linux", "architecture": "arm", "variant": "v7"}),
    desc(M, "d", platform={"os": "windows", "architecture": "amd64",
                           "os.version": "10.0.17763.5329", "os.features": ["win32k"]}),
    desc(M, "e", platform={"os": "windows", "architecture": "amd64",
                           "os.version": "10.0.20348.2227"}),
    desc(I, "f"),
    desc("application/vnd.in-toto+json", "1",
         platform={"os": "unknown", "architecture": "unknown"})]})
# A docker manifest list and a docker v2 schema 2 manifest.
w("docker-list.json", {"schemaVersion": 2,
    "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
    "manifests": [desc("application/vnd.docker.distribution.manifest.v2+json", "a",
                       platform={"os": "linux", "architecture": "amd64"})]})
w("docker-v2.json", {"schemaVersion": 2,
    "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
    "config": desc("application/vnd.docker.container.image.v1+json", "c", 1500),
    "layers": [desc("application/vnd.docker.image.rootfs.diff.tar.gzip", "a", 3000),
               desc("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", "b", 9,
                    urls=["https://example.com/l"]),
               desc("application/vnd.oci.image.layer.v1.tar+zstd", "d", 7),
               desc("application/vnd.oci.image.layer.nondistributable.v1.tar", "e", 0)]})
# Configs: every field the parser reads, Windows, nulls.
w("config-full.json", {"architecture": "amd64", "os": "linux",
    "config": {"Env": ["PATH=/bin", "A=b=c"], "Entrypoint": ["/bin/sh", "-c"],
               "Cmd": ["echo hi"], "WorkingDir": "/tmp", "User": "1000:1000"},
    "rootfs": {"type": "layers", "diff_ids": [D("a"), D("b")]},
    "history": [{"created_by": "x"}]})
w("config-windows.json", {"architecture": "amd64", "os": "windows",
    "os.version": "10.0.20348.2655", "variant": "",
    "config": {"Env": None, "Cmd": None, "Entrypoint": None, "WorkingDir": None},
    "rootfs": {"type": "layers", "diff_ids": []}})
# Hostile and broken ones, from tests/unit/test_store_oci.c.
w("manifest-bad-digest.json", '{"schemaVersion":2,"config":{"mediaType":'
  '"application/vnd.oci.image.config.v1+json","digest":"sha512:' + "a" * 128 +
  '","size":-1},"layers":[{"mediaType":"a\\u0000b","digest":"md5:x","size":1e3}]}')
w("index-schema1.json", '{"schemaVersion":1,"manifests":[null,7,{"digest":"sha256:AB"}]}')
w("docker-escape.json", [{"Config": "../../etc/passwd", "RepoTags": ["evil:1", 7],
                          "Layers": ["/abs", "a//b", "./x", "ok/layer.tar"]}])
w("docker-multi.json", [{"Config": "c1.json", "RepoTags": None, "Layers": ["l1/layer.tar"]},
                        {"Config": "c2.json", "RepoTags": ["a:1", "b:2"], "Layers": []}])
w("deep.json", '{"schemaVersion":2,"manifests":' + "[" * 40 + "]" * 40 + "}")
w("trailing.json", '{"schemaVersion":2,"manifests":[]} x')
EOF

# ---- unpack: real layers (the small ones) and tar streams of every kind ----
for layout in child other; do
    for blob in "$work/img/$layout"/blobs/sha256/*; do
        size=$(stat -c %s "$blob")
        if [ "$size" -lt 65536 ] && ! head -c1 "$blob" | grep -q '{'; then
            cp "$blob" "$out/unpack/$layout-layer-$(basename "$blob" | cut -c1-12)"
        fi
    done
done
python3 - "$out/unpack" <<'EOF'
import io, os, subprocess, sys, tarfile
out = sys.argv[1]
SANDBOX = "/tmp/berth-fuzz-unpack"  # fuzz_unpack's sandbox, for absolute names

def entry(name, kind="f", data=b"", mode=None, target=None, uid=0, gid=0, pax=None):
    ti = tarfile.TarInfo(name)
    ti.type = {"f": tarfile.REGTYPE, "d": tarfile.DIRTYPE, "l": tarfile.SYMTYPE,
               "h": tarfile.LNKTYPE, "c": tarfile.CHRTYPE, "b": tarfile.BLKTYPE,
               "p": tarfile.FIFOTYPE}[kind]
    ti.mode = mode if mode is not None else (0o755 if kind == "d" else 0o644)
    ti.uid, ti.gid, ti.mtime = uid, gid, 1600000000
    if target:
        ti.linkname = target
    if kind in "cb":
        ti.devmajor, ti.devminor = 1, 3
    if pax:
        ti.pax_headers = pax
    ti.size = len(data) if kind == "f" else 0
    return ti, data

def tar(name, entries, fmt=tarfile.PAX_FORMAT, comp=None, pad=0):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if ti.size else None)
        end = t.offset
    # The two zero blocks that end a tar, without tarfile's padding to 10 KiB.
    raw = buf.getvalue()[:end + 1024] + b"\0" * pad
    if comp == "gz":
        raw = subprocess.run(["gzip", "-9n"], input=raw, capture_output=True, check=True).stdout
    elif comp == "zst":
        raw = subprocess.run(["zstd", "-q", "-19"], input=raw, capture_output=True,
                             check=True).stdout
    with open(os.path.join(out, name), "wb") as f:
        f.write(raw)

E = entry
# The round trip of tests/unit/test_store_unpack.c, in the four option
# modes the input length picks (trailing bytes are drained and hashed).
meta = [E("./d/", "d", mode=0o750, uid=1000, gid=1001),
        E("./d/f", data=b"hello", mode=0o640, uid=1234, gid=4321, pax={"SCHILY.xattr.user.x": "vx"}),
        E("./d/l", "l", target="f"), E("./d/h", "h", target="./d/f"), E("./e/", "d", mode=0o700)]
for pad in range(4):
    tar(f"metadata-pad{pad}.tar", meta, pad=pad)
tar("metadata.tar.gz", meta, comp="gz")
tar("metadata.tar.zst", meta, comp="zst")
tar("metadata-gnu.tar", meta, fmt=tarfile.GNU_FORMAT)
tar("metadata-ustar.tar", [E("./d/", "d"), E("./d/f", data=b"hello")] + meta[2:],
    fmt=tarfile.USTAR_FORMAT)
# Whiteouts in the overlay conversion (and as plain names in volume mode).
wh = [E("a/.wh.gone"), E("d/.wh..wh..opq"), E("d/", "d", mode=0o711), E("d/new", data=b"n"),
      E("p/q/.wh.z"), E("s/mine", data=b"m"), E("s/.wh.mine"), E(".wh.t"), E("t", data=b"later"),
      E(".wh.w"), E("w/", "d"), E("w/y", data=b"y"), E("s/.wh.low"), E(".wh...")]
tar("whiteouts.tar", wh)
tar("whiteouts-pad2.tar", wh, pad=2)
tar("whiteouts.tar.gz", wh, comp="gz")
# Devices, fifos, xattrs the unpacker drops, read-only files written twice.
tar("devices.tar", [E("null", "c"), E("blk", "b"), E("fifo", "p"), E("f", data=b"x")], pad=1)
tar("overlay-xattr.tar", [E("dir", "d", pax={"SCHILY.xattr.trusted.overlay.opaque": "y",
                                             "SCHILY.xattr.user.keep": "k"})])
tar("readonly.tar", [E("ro", data=b"one", mode=0o444), E("ro", data=b"two", mode=0o444),
                     E("dir", "d", mode=0o555), E("dir/x", data=b"x")])
tar("root-entries.tar", [E("/", "d"), E("./", "d"), E(".", "d"), E("a//b///", "d"),
                         E("a/./c", data=b"c")])
tar("long-names.tar", [E("n" * 250 + "/" + "m" * 200, data=b"long"),
                       E("l", "l", target="t" * 1000)], fmt=tarfile.GNU_FORMAT)
tar("long-names-pax.tar", [E("/".join(["p" * 100] * 20), data=b"deep")])
# The hostile cases of test_store_unpack.c, against fuzz_unpack's sandbox.
hostile = {
    "dotdot": [E("../outside/escaped", data=b"pwned")],
    "absolute": [E(SANDBOX + "/outside/escaped", data=b"pwned")],
    "symlink-abs": [E("a", "l", target=SANDBOX + "/outside"), E("a/escaped", data=b"pwned")],
    "symlink-up": [E("a", "l", target=".."), E("a/outside/escaped", data=b"pwned")],
    "lower-symlink": [E("up/escaped", data=b"pwned")],
    "hardlink-up": [E("h", "h", target="../outside/secret"), E("h", data=b"pwned")],
    "hardlink-symlink": [E("s", "l", target=SANDBOX + "/outside"), E("h", "h", target="s/secret"),
                         E("h", data=b"pwned")],
    "hardlink-abs": [E("h", "h", target=SANDBOX + "/outside/secret")],
    "symlink-replaced": [E("d", "d"), E("d", "l", target="../outside"), E("d/x", data=b"x")],
    "whiteout-up": [E("../.wh.outside")],
}
for name, ents in hostile.items():
    tar(f"hostile-{name}.tar", ents)
tar("hostile-dotdot.tar.zst", hostile["dotdot"], comp="zst")
tar("hostile-symlink-up.tar.gz", hostile["symlink-up"], comp="gz")
with open(os.path.join(out, "not-a-tar"), "wb") as f:
    f.write(b"\x1f\x8b\x08\x00garbage" + bytes(range(256)))
EOF

# ---- json: request bodies of README and the API suites ----
i=0
while IFS= read -r body; do
    [ -n "$body" ] || continue
    i=$((i + 1))
    printf '%s' "$body" > "$out/json/body-$(printf %02d $i).json"
done <<'EOF'
{"handle": "build-42", "image": "busybox:1", "limits": {"memory_bytes": 268435456, "pids": 256, "cpu_shares": 512, "cpu_quota_pct": 150}, "mounts": [{"volume": "cache", "target": "/tmp/build/in", "readonly": true}, {"host_path": "/srv/x", "target": "/host"}], "env": ["GREETING=hi", "A=b=c"], "working_dir": "/tmp", "properties": {"team": "a", "kind": "build"}, "grace_time_s": 1, "isolation": "process"}
{"handle":"c-raw","rootfs":"raw:///tmp/roots/a%20b","env":["NOEQUALS","=x"],"surprise":1}
{"id": "task", "path": "/bin/sh", "args": ["-c", "make test"], "env": ["X=1"], "dir": "/tmp", "user": "1000", "stdin": true, "tty": false}
{"handle": "cache-2", "parent": "cache", "properties": {"ttl": "60"}, "ttl_s": 3600}
{"properties": null, "ttl_s": -1}
{"source": {"layout": "/srv/images/busybox"}}
{"source": {"volume": "cache", "path": "/out/image"}, "platform": "linux/arm64/v8"}
{"keep_bytes": 10000000000, "unused_for_s": 3600}
{"signal": "KILL"}
{"signal": 15}
{"a": 1.5, "b": 99999999999999999999999, "c": -3, "d": -9223372036854775808, "e": 9223372036854775807}
{"limits": {"memory_bytes": "lots"}, "x": [null, true, {"y": [[]]}], "": {}}
{"name": "x", "nmae": 1, "name": 2}
{"a": "\u0000b\ud800\"\\\/\b\f\n\r\t", "\u00e9": "é"}
{"a":1,}
{'a': 1, "n": NaN, "i": -Infinity, "z": 01}
{"a": tru}
{"a": 1
{"bytes": 1} x
[1, 2]
   
EOF

# ---- router: "METHOD PATH" for every route, and the edge cases ----
i=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    i=$((i + 1))
    printf '%s' "$line" > "$out/router/req-$(printf %02d $i)"
done <<'EOF'
GET /v1/health
HEAD /v1/metrics
POST /v1/health
GET /v1/images?name=a
POST /v1/images/prune
GET /v1/images/docker.io/library/busybox:1
DELETE /v1/images/sha256:0123456789ab
GET /v1/images/busybox%3Alatest
GET /v1/images/a%2Fb
DELETE /v1/images/a/b
GET /v1/images/prune
GET /v1/containers
POST /v1/containers
DELETE /v1/containers/build-42
GET /v1/containers/build-42/processes
POST /v1/containers/c/processes
GET /v1/containers/c/processes/task/wait?timeout=600
GET /v1/containers/c/processes/task/stdout?follow=1#x
GET /v1/containers/c/processes/task/stderr
PUT /v1/containers/c/processes/task/stdin?close=1
POST /v1/containers/c/processes/task/signal
GET /v1/containers/c/processes/p/x
PATCH /v1/volumes/cache
PUT /v1/volumes/cache/files?path=/src
GET /v1/volumes/cache/files
GET /v1/volumes/a%zz
GET /v1/volumes/a%4
GET /v1/images/a%00
GET /v1/images/
GET /v1/images/x/
GET //v1/health
OPTIONS *
EOF
printf 'GET /v1/images/%s' "$(head -c 600 /dev/zero | tr '\0' a)" > "$out/router/req-long"
printf 'GET /v1/containers/%%41%%42/processes/%%2e%%2E' > "$out/router/req-encoded"

# ---- platform: parse, match, check, select ----
i=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    i=$((i + 1))
    printf '%b' "$line" > "$out/platform/p-$(printf %02d $i)"
done <<'EOF'
linux/amd64\nlinux/x86_64\nlinux amd64  \nlinux amd64   \x01
linux/arm64\nlinux/aarch64/v8\nlinux arm64 v8 \nlinux arm64 v8  \x01
linux/arm\nlinux/armhf\nlinux arm  \nlinux arm v7  \x03
linux/armel\nlinux/arm/v6\nlinux arm v6 \nlinux arm v7  \x01
linux/amd64/v1\nlinux/386\nlinux 386  \nlinux amd64  \x01
windows/amd64\nwindows/amd64\nwindows amd64  10.0.17763.5329\nwindows amd64  10.0.20348.2655 \x03
windows/amd64\nhyperv\nwindows amd64  10.0.20348.1\nwindows amd64  10.0.20348 \x02
windows/amd64\nprocess\nwindows amd64  10.0.26100.1\nwindows amd64  10.0.20348.2655 \x03
windows/amd64\nlinux/riscv64\nwindows amd64  \nwindows amd64  not-a-version \x03
LINUX/AMD64\nlinux//amd64\nli\x1bux am\xc3\xa9d64  1\\\t\nlinux amd64  \x07
linux/amd64/v8/x\n/\nlinux ppc64le  \nlinux s390x  \x00
windows/amd64\nprocess\nwindows amd64  10.0.20348.2655\nwindows amd64  10.0.26100.1742 \x03
windows/amd64\nwindows/amd64\nwindows amd64  10.0.17763.1\nwindows amd64  10.0.22621.4317 \x01
EOF
echo "seeds written to $out: $(find "$out" -type f | wc -l) files"
