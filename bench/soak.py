#!/usr/bin/env python3
"""Load side of bench/soak.sh: starts berthd, drives it with N parallel
clients for a fixed time, samples it, cleans up and prints the figures.

Uses only the documented API (openapi.yaml) plus what the kernel shows of
the daemon's process (/proc/PID/status, /proc/PID/fd, mountinfo) and the
cgroup filesystem. Standard library only.

  soak.py --berthd PATH --root DIR --images DIR [--clients N] [--duration S] ...
  soak.py --probe URL HZ SECONDS OUTFILE     (the health prober, run by the above)

Every request a client makes is counted by kind; every answer with another
status than the one the API documents for success, and every transport
error or timeout, is an error (the first few are printed). A wrong result
(a wrong exit code, output that is not what the process wrote, a tar that
does not hold what was put in) is counted as a check failure.
"""
import argparse
import gzip
import hashlib
import http.client
import io
import json
import os
import random
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time

# ---- the health prober (a process of its own) --------------------------------
# Not a thread of the load process: there every measurement would include
# waits for the GIL behind 50 busy client threads.


def probe_main(url, hz, seconds, out):
    host, port = url.split("//")[1].split(":")
    interval = 1.0 / hz
    conn = None
    lat = []
    late = []  # how late the prober itself woke up: the machine's share
    errors = []
    t0 = time.monotonic()
    n = 0
    while True:
        slot = t0 + n * interval
        now = time.monotonic()
        if now - t0 >= seconds:
            break
        if slot > now:
            time.sleep(slot - now)
            late.append((time.monotonic() - slot) * 1e6)
        else:
            # Late (the prober itself was not scheduled): skip the missed
            # slots rather than bursting to catch up.
            n = int((now - t0) / interval)
        n += 1
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
                conn.connect()
            a = time.perf_counter_ns()
            conn.request("GET", "/v1/health")
            r = conn.getresponse()
            body = r.read()
            b = time.perf_counter_ns()
            lat.append((b - a) / 1000.0)
            if r.status != 200:
                errors.append("status %d: %s" % (r.status, body[:200]))
        except Exception as e:  # noqa: BLE001 (every failure is a figure)
            errors.append("%s: %s" % (type(e).__name__, e))
            if conn is not None:
                conn.close()
            conn = None
    with open(out, "w") as f:
        json.dump({"lat_us": lat, "late_us": late, "errors": errors}, f)


# ---- helpers ------------------------------------------------------------------


def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, max(0, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[i]


def proc_rss_kib(pid, field="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def loop_sched(pid):
    """The loop thread's (the main thread's) time on a CPU, time waiting
    for one while runnable, and times it was scheduled (schedstat)."""
    with open("/proc/%d/task/%d/schedstat" % (pid, pid)) as f:
        run_ns, wait_ns, slices = (int(x) for x in f.read().split()[:3])
    return run_ns, wait_ns, slices


def proc_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def proc_fd_targets(pid):
    """{fd: what it refers to} (socket:[inode], pipe:[inode], a path...)."""
    out = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            pass
    return out


def proc_cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mounts_under(root, pid="self"):
    """Mount points at or below root, as the given process sees them."""
    n = []
    with open("/proc/%s/mountinfo" % pid) as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")
            if mp == root or mp.startswith(root + "/"):
                n.append(mp)
    return n


def loop_devices_under(root):
    """Loop devices whose backing file is below root (the disk_bytes layers)."""
    out = []
    base = "/sys/block"
    for dev in sorted(os.listdir(base)):
        try:
            with open(os.path.join(base, dev, "loop", "backing_file")) as f:
                backing = f.read().strip()
        except OSError:
            continue
        if backing.startswith(root + "/"):
            out.append("/dev/%s (%s)" % (dev, backing))
    return out


def cgroup_dirs(pred, maxdepth=8):
    """Directories under /sys/fs/cgroup whose name satisfies pred."""
    found = []
    base = "/sys/fs/cgroup"
    base_depth = base.count("/")
    for d, subdirs, _ in os.walk(base):
        if d.count("/") - base_depth >= maxdepth:
            subdirs[:] = []
        for s in subdirs:
            if pred(s):
                found.append(os.path.join(d, s))
    return found


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Stats:
    """Counts and latencies by request kind, errors and check failures."""

    def __init__(self, show):
        self.lock = threading.Lock()
        self.count = {}
        self.tags = {}
        self.lat = {}
        self.errors = 0
        self.err_by_kind = {}
        self.first_errors = []
        self.checks = 0
        self.first_checks = []
        self.show = show
        self.t0 = time.monotonic()

    def req(self, kind, seconds):
        with self.lock:
            self.count[kind] = self.count.get(kind, 0) + 1
            self.lat.setdefault(kind, []).append(seconds)

    def tag(self, what):
        """A count shown beside the requests, not one of them."""
        with self.lock:
            self.tags[what] = self.tags.get(what, 0) + 1

    def error(self, kind, what):
        with self.lock:
            self.errors += 1
            self.err_by_kind[kind] = self.err_by_kind.get(kind, 0) + 1
            if len(self.first_errors) < self.show:
                self.first_errors.append("t=%.1fs %s: %s" % (time.monotonic() - self.t0, kind, what))

    def check(self, kind, what):
        with self.lock:
            self.checks += 1
            if len(self.first_checks) < self.show:
                self.first_checks.append("t=%.1fs %s: %s" % (time.monotonic() - self.t0, kind, what))

    def total(self):
        with self.lock:
            return sum(self.count.values())


class HttpError(Exception):
    pass


class Client:
    """One keep-alive connection; every request counted and checked."""

    def __init__(self, host, port, stats, timeout):
        self.host, self.port, self.stats, self.timeout = host, port, stats, timeout
        self.conn = None

    def close(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def call(self, kind, method, path, body=None, headers=None, expect=(200,), stream=None):
        """Returns (status, body bytes). Raises HttpError (already counted)
        on a transport error or a status not in expect. stream: a callable
        given each piece of the body as it arrives (the body is then b"")."""
        t = time.monotonic()
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            hdrs = dict(headers or {})
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
                hdrs.setdefault("Content-Type", "application/json")
            self.conn.request(method, path, body=body, headers=hdrs)
            r = self.conn.getresponse()
            if stream is not None and r.status in expect:
                while True:
                    piece = r.read1(65536)
                    if not piece:
                        break
                    stream(piece)
                data = b""
            else:
                data = r.read()
            if r.getheader("Connection", "").lower() == "close":
                self.close()
        except Exception as e:  # noqa: BLE001 (a transport error is a figure)
            self.close()
            self.stats.req(kind, time.monotonic() - t)
            self.stats.error(kind, "%s %s: %s: %s" % (method, path, type(e).__name__, e))
            raise HttpError() from e
        self.stats.req(kind, time.monotonic() - t)
        if r.status not in expect:
            self.stats.error(kind, "%s %s: %d %s" % (method, path, r.status, data[:300].decode("utf-8", "replace")))
            raise HttpError()
        return r.status, data


# ---- the workload ----------------------------------------------------------------


class Load:
    def __init__(self, a, url, stats, images):
        self.a = a
        self.host, port = url.split("//")[1].split(":")
        self.port = int(port)
        self.stats = stats
        self.images = images  # list of (plain tar bytes, gzip tar bytes)
        self.base = None  # a Layout, for fresh images
        self.deadline = 0.0
        self.disk = a.disk_every > 0
        self.handles_lock = threading.Lock()
        self.live = set()  # containers and volumes a client made and has not deleted

    def client(self):
        return Client(self.host, self.port, self.stats, self.a.timeout)

    def track(self, what, add):
        with self.handles_lock:
            (self.live.add if add else self.live.discard)(what)

    # Health probes from a load client (counted; latency is the prober's).
    def op_health(self, c, cid, n):
        for _ in range(10):
            c.call("health", "GET", "/v1/health")

    # Half the time an image no one has imported (the base's layers and one
    # of its own): 201, then deleted by its only name, which removes it and
    # collects what only it used. Else one of the umoci-built variants under
    # this client's own name for it: 201, or 200 when another client's name
    # keeps it stored; half the time that name is dropped again.
    def op_import(self, c, cid, n, rng):
        if rng.random() < 0.5:
            name = "soak-fresh:c%d-%d" % (cid, n)
            tar, digest = self.base.fresh(name, b"%s %d %d\n" % (self.a.run_id.encode(), cid, n))
            _, data = c.call("import", "POST", "/v1/images?name=" + name, body=tar,
                             headers={"Content-Type": "application/x-tar"}, expect=(201,))
            self.stats.tag("import: fresh image (201)")
            if json.loads(data).get("digest") != digest:
                self.stats.check("import", "%s: digest %s, the manifest's is %s" %
                                 (name, json.loads(data).get("digest"), digest))
            c.call("image delete", "DELETE", "/v1/images/" + name)
            return
        k = rng.randrange(len(self.images))
        name = "soak-v%d:c%d" % (k, cid)
        plain, gz = self.images[k]
        body = gz if rng.random() < 0.5 else plain
        status, data = c.call("import", "POST", "/v1/images?name=" + name, body=body,
                              headers={"Content-Type": "application/x-tar"}, expect=(200, 201))
        self.stats.tag("import: variant, new (201)" if status == 201 else "import: variant, stored (200)")
        img = json.loads(data)
        if name not in img.get("names", []):
            self.stats.check("import", "%s not in the answer's names %s" % (name, img.get("names")))
        if rng.random() < 0.5:
            c.call("image delete", "DELETE", "/v1/images/" + name)

    def container_create(self, c, h, rng, extra=None):
        body = {"handle": h, "image": "soak-busybox",
                "limits": {"memory_bytes": 64 << 20, "pids": 64},
                "properties": {"soak": self.a.run_id}}
        if self.disk and rng.randrange(self.a.disk_every) == 0:
            body["limits"]["disk_bytes"] = 16 << 20
        if extra:
            body.update(extra)
        c.call("container create", "POST", "/v1/containers", body=body, expect=(201,))
        self.track(("c", h), True)

    def container_delete(self, c, h):
        c.call("container delete", "DELETE", "/v1/containers/" + h, expect=(204,))
        self.track(("c", h), False)

    # Create, start a process, wait, read its output, delete; one run in
    # four mounts a fresh volume the process reads.
    def op_run(self, c, cid, n, rng):
        h = "soak%s-c%d-r%d" % (self.a.run_id, cid, n)
        vol = None
        if rng.randrange(4) == 0:
            vol = h + "-vol"
            c.call("volume create", "POST", "/v1/volumes", body={"handle": vol}, expect=(201,))
            self.track(("v", vol), True)
            tar = make_tar({"hello.txt": ("hello %s\n" % vol).encode()})
            c.call("volume put", "PUT", "/v1/volumes/%s/files?path=/" % vol, body=tar,
                   headers={"Content-Type": "application/x-tar"})
        try:
            extra = {"mounts": [{"volume": vol, "target": "/data", "readonly": True}]} if vol else None
            self.container_create(c, h, rng, extra)
            try:
                script = "echo out-%d; echo err-%d >&2; " % (n, n)
                script += "cat /data/hello.txt; exit 3" if vol else "exit 3"
                c.call("process start", "POST", "/v1/containers/%s/processes" % h,
                       body={"id": "p", "path": "sh", "args": ["-c", script]}, expect=(201,))
                _, w = c.call("process wait", "GET", "/v1/containers/%s/processes/p/wait?timeout=60" % h)
                if json.loads(w).get("exit_code") != 3:
                    self.stats.check("process wait", "%s: %s (wanted exit_code 3)" % (h, w[:200]))
                _, out = c.call("process output", "GET", "/v1/containers/%s/processes/p/stdout" % h)
                want = ("out-%d\n" % n) + (("hello %s\n" % vol) if vol else "")
                if out.decode("utf-8", "replace") != want:
                    self.stats.check("process output", "%s stdout %r (wanted %r)" % (h, out[:200], want))
                _, err = c.call("process output", "GET", "/v1/containers/%s/processes/p/stderr" % h)
                if err != ("err-%d\n" % n).encode():
                    self.stats.check("process output", "%s stderr %r" % (h, err[:200]))
            finally:
                self.container_delete(c, h)
        finally:
            if vol:
                c.call("volume delete", "DELETE", "/v1/volumes/" + vol)
                self.track(("v", vol), False)

    # Follow the output of a process that writes for a while (2 s by default).
    def op_follow(self, c, cid, n, rng):
        h = "soak%s-c%d-f%d" % (self.a.run_id, cid, n)
        lines = self.a.follow_lines
        self.container_create(c, h, rng)
        try:
            script = "i=0; while [ $i -lt %d ]; do echo line $i; i=$((i+1)); sleep 0.1; done" % lines
            c.call("process start", "POST", "/v1/containers/%s/processes" % h,
                   body={"id": "w", "path": "sh", "args": ["-c", script]}, expect=(201,))
            got = []
            c.call("follow", "GET", "/v1/containers/%s/processes/w/stdout?follow=1" % h, stream=got.append)
            want = "".join("line %d\n" % i for i in range(lines)).encode()
            if b"".join(got) != want:
                self.stats.check("follow", "%s followed %d bytes in %d pieces, wanted %d: %r" %
                                 (h, len(b"".join(got)), len(got), len(want), b"".join(got)[-80:]))
            _, w = c.call("process wait", "GET", "/v1/containers/%s/processes/w/wait?timeout=60" % h)
            if json.loads(w).get("exit_code") != 0:
                self.stats.check("process wait", "%s: %s" % (h, w[:200]))
        finally:
            self.container_delete(c, h)

    # A volume: tar in (plain or gzip), merge a second tar into a
    # subdirectory, tar out (plain or gzip), compare, delete.
    def op_volume(self, c, cid, n, rng):
        v = "soak%s-c%d-v%d" % (self.a.run_id, cid, n)
        c.call("volume create", "POST", "/v1/volumes", body={"handle": v}, expect=(201,))
        self.track(("v", v), True)
        try:
            files = {"f%03d.bin" % i: rng.randbytes(rng.randrange(1, 16384)) for i in range(rng.randrange(20, 80))}
            tar = make_tar(files)
            hdrs = {"Content-Type": "application/x-tar"}
            if rng.random() < 0.3:
                tar = gzip.compress(tar, 1)
                hdrs["Content-Encoding"] = "gzip"
            _, r = c.call("volume put", "PUT", "/v1/volumes/%s/files?path=/" % v, body=tar, headers=hdrs)
            sub = {"more/g%d.txt" % i: (b"%d\n" % i) * 100 for i in range(10)}
            c.call("volume put", "PUT", "/v1/volumes/%s/files?path=/sub" % v, body=make_tar(sub),
                   headers={"Content-Type": "application/x-tar"})
            ae = {"Accept-Encoding": "gzip"} if rng.random() < 0.3 else {}
            _, out = c.call("volume get", "GET", "/v1/volumes/%s/files?path=/" % v, headers=ae)
            if out[:2] == b"\x1f\x8b":
                out = gzip.decompress(out)
            got = {}
            with tarfile.open(fileobj=io.BytesIO(out), mode="r:") as t:
                for m in t:
                    if m.isfile():
                        got[os.path.normpath(m.name)] = t.extractfile(m).read()
            want = dict(files)
            want.update({"sub/" + k: d for k, d in sub.items()})
            if got != want:
                missing = sorted(set(want) - set(got))[:3]
                extra = sorted(set(got) - set(want))[:3]
                diff = [k for k in want if k in got and got[k] != want[k]][:3]
                self.stats.check("volume get", "%s: tar out differs: missing %s, extra %s, different %s" %
                                 (v, missing, extra, diff))
        finally:
            c.call("volume delete", "DELETE", "/v1/volumes/" + v)
            self.track(("v", v), False)

    def run_client(self, cid):
        rng = random.Random(self.a.seed * 1000 + cid)
        c = self.client()
        ops = [(self.op_health, 3), (self.op_import, 2), (self.op_run, 3), (self.op_follow, 1),
               (self.op_volume, 2)]
        choices = [op for op, w in ops for _ in range(w)]
        n = 0
        while time.monotonic() < self.deadline:
            n += 1
            op = rng.choice(choices)
            try:
                if op == self.op_health:
                    op(c, cid, n)
                else:
                    op(c, cid, n, rng)
            except HttpError:
                time.sleep(0.05)  # already counted; go on with the next op
            except Exception as e:  # noqa: BLE001 (a broken answer is a failed check)
                self.stats.check(op.__name__, "%s: %s" % (type(e).__name__, e))
        c.close()


class Layout:
    """An OCI layout (as the tar bench/soak.sh made with umoci), to make
    images from that no one imported yet: the same layers plus one of
    their own, with the config, manifest and index that go with it."""

    def __init__(self, tar_bytes):
        self.blobs = {}
        with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as t:
            for m in t:
                if m.isfile():
                    data = t.extractfile(m).read()
                    name = os.path.normpath(m.name)
                    if name.startswith("blobs/sha256/"):
                        self.blobs["sha256:" + name.rsplit("/", 1)[1]] = data
                    elif name == "index.json":
                        self.index = json.loads(data)
        self.manifest = json.loads(self.blobs[self.index["manifests"][0]["digest"]])
        self.config = json.loads(self.blobs[self.manifest["config"]["digest"]])

    def fresh(self, tag, content):
        layer = make_tar({"soak/fresh": content})
        ld = "sha256:" + hashlib.sha256(layer).hexdigest()
        config = json.loads(json.dumps(self.config))
        config["rootfs"]["diff_ids"].append(ld)
        cb = json.dumps(config).encode()
        cd = "sha256:" + hashlib.sha256(cb).hexdigest()
        manifest = json.loads(json.dumps(self.manifest))
        manifest["config"] = {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": len(cb)}
        manifest["layers"].append({"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld,
                                   "size": len(layer)})
        mb = json.dumps(manifest).encode()
        md = "sha256:" + hashlib.sha256(mb).hexdigest()
        index = {"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": len(mb),
            "annotations": {"org.opencontainers.image.ref.name": tag}}]}
        blobs = {d: b for d, b in self.blobs.items() if d in {l["digest"] for l in self.manifest["layers"]}}
        blobs.update({ld: layer, cd: cb, md: mb})
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
            def add(name, data):
                ti = tarfile.TarInfo(name)
                ti.size, ti.mode, ti.mtime = len(data), 0o644, 1700000000
                t.addfile(ti, io.BytesIO(data))
            add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            add("index.json", json.dumps(index).encode())
            for d, b in sorted(blobs.items()):
                add("blobs/sha256/" + d.split(":", 1)[1], b)
        return buf.getvalue(), md


def make_tar(files):
    """A pax tar of files {path: bytes} (parents made), plus a symlink."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        made = set()
        for path, data in files.items():
            parts = path.split("/")[:-1]
            for i in range(len(parts)):
                d = "/".join(parts[: i + 1])
                if d not in made:
                    made.add(d)
                    ti = tarfile.TarInfo(d)
                    ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 1700000000
                    t.addfile(ti)
            ti = tarfile.TarInfo(path)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1700000000
            t.addfile(ti, io.BytesIO(data))
        ti = tarfile.TarInfo("link")
        ti.type, ti.linkname, ti.mtime = tarfile.SYMTYPE, next(iter(files)), 1700000000
        t.addfile(ti)
    return buf.getvalue()


# ---- the run --------------------------------------------------------------------


def metrics_health(c):
    """Server-side /v1/health duration buckets and loop lag buckets (cumulative)."""
    _, m = c.call("metrics", "GET", "/v1/metrics")
    hb, lb = {}, {}
    for line in m.decode().splitlines():
        g = re.match(r'berth_http_request_duration_seconds_bucket\{route="/v1/health",le="([^"]+)"\} (\d+)', line)
        if g:
            hb[g.group(1)] = int(g.group(2))
        g = re.match(r'berth_loop_lag_seconds_bucket\{le="([^"]+)"\} (\d+)', line)
        if g:
            lb[g.group(1)] = int(g.group(2))
    return hb, lb


def bucket_share_over(before, after, le):
    tot = after.get("+Inf", 0) - before.get("+Inf", 0)
    under = after.get(le, 0) - before.get(le, 0)
    return tot, (tot - under)


def bucket_p99(before, after):
    """The smallest bucket bound that 99 % of the observations are under."""
    tot = after.get("+Inf", 0) - before.get("+Inf", 0)
    for le in sorted((k for k in after if k != "+Inf"), key=float):
        if after[le] - before.get(le, 0) >= 0.99 * tot:
            return "%g ms" % (float(le) * 1e3)
    return "> %g ms" % (max(float(k) for k in after if k != "+Inf") * 1e3)


def start_daemon(a):
    log = open(a.log, "w")
    # --network none: no soak makes the host's berth0 (bench/run.sh measures the network).
    p = subprocess.Popen([a.berthd, "--listen", "127.0.0.1:0", "--root", a.root, "--network", "none",
                          "--log-level", a.log_level],
                         stdout=subprocess.DEVNULL, stderr=log)
    with open(os.path.join(os.path.dirname(a.root), "berthd.pid"), "w") as f:
        f.write("%d\n" % p.pid)
    for _ in range(200):
        with open(a.log) as f:
            g = re.search(r"listening on (http://127\.0\.0\.1:\d+)", f.read())
        if g:
            return p, g.group(1)
        if p.poll() is not None:
            break
        time.sleep(0.05)
    sys.exit("berthd did not start:\n" + open(a.log).read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", nargs=4, metavar=("URL", "HZ", "SECONDS", "OUT"))
    ap.add_argument("--berthd")
    ap.add_argument("--root")
    ap.add_argument("--images")
    ap.add_argument("--log")
    ap.add_argument("--log-level", default="info")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--duration", type=float, default=300)
    ap.add_argument("--settle", type=float, default=10)
    ap.add_argument("--health-hz", type=float, default=50)
    ap.add_argument("--follow-lines", type=int, default=20)
    ap.add_argument("--disk-every", type=int, default=8, help="one container run in N gets limits.disk_bytes (0: none)")
    ap.add_argument("--timeout", type=float, default=120, help="per request, seconds")
    ap.add_argument("--trim", action="store_true",
                    help="at the end, call malloc_trim(0) in berthd with gdb and show RSS again")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=8, help="errors printed")
    ap.add_argument("--run-id", default=str(os.getpid()))
    a = ap.parse_args()
    if a.probe:
        probe_main(a.probe[0], float(a.probe[1]), float(a.probe[2]), a.probe[3])
        return 0

    stats = Stats(a.show)
    images = []
    for name in sorted(os.listdir(a.images)):
        if re.fullmatch(r"v\d+\.tar", name):
            plain = open(os.path.join(a.images, name), "rb").read()
            images.append((plain, gzip.compress(plain, 1)))
    base = open(os.path.join(a.images, "base.tar"), "rb").read()

    p, url = start_daemon(a)
    pid = p.pid
    host, port = url.split("//")[1].split(":")
    load = Load(a, url, stats, images)
    load.base = Layout(base)
    setup = Stats(a.show)
    sc = Client(host, int(port), setup, 60)
    print("berthd pid %d on %s, root %s; %d clients for %.0f s; load average %s" %
          (pid, url, a.root, a.clients, a.duration, loadavg()))
    try:
        # ---- setup: the image the containers run, where their cgroups go
        sc.call("setup", "POST", "/v1/images?name=soak-busybox", body=base,
                headers={"Content-Type": "application/x-tar"}, expect=(201,))
        probe_h = "soak%s-setup" % a.run_id
        lim = {"memory_bytes": 64 << 20, "pids": 64}
        if a.disk_every:
            lim["disk_bytes"] = 16 << 20
        try:
            sc.call("setup", "POST", "/v1/containers",
                    body={"handle": probe_h, "image": "soak-busybox", "limits": lim}, expect=(201,))
        except HttpError:
            if not a.disk_every:
                raise
            print("limits.disk_bytes refused here (%s): running without it" % setup.first_errors[-1])
            load.disk = False
            sc.call("setup", "POST", "/v1/containers",
                    body={"handle": probe_h, "image": "soak-busybox", "limits": dict(lim, disk_bytes=0)},
                    expect=(201,))
        # A process too, one still running when its start is answered (so
        # it gets an output watch): what the first one sets up for good
        # (libuv's inotify instance) is then in the baseline.
        sc.call("setup", "POST", "/v1/containers/%s/processes" % probe_h,
                body={"id": "p", "path": "sleep", "args": ["0.5"]}, expect=(201,))
        sc.call("setup", "GET", "/v1/containers/%s/processes/p/wait?timeout=60" % probe_h)
        cg_probe = cgroup_dirs(lambda s: s == probe_h)
        cg_parents = sorted({os.path.dirname(d) for d in cg_probe})
        sc.call("setup", "DELETE", "/v1/containers/" + probe_h, expect=(204,))
        print("container cgroups go under: %s (%d hierarchies)" %
              (", ".join(sorted({os.path.basename(d) for d in cg_parents})), len(cg_parents)))
        sc.close()
        time.sleep(1)

        # ---- baseline
        rss0, fd0, cpu0 = proc_rss_kib(pid), proc_fds(pid), proc_cpu_s(pid)
        anon0, file0 = proc_rss_kib(pid, "RssAnon"), proc_rss_kib(pid, "RssFile")
        mounts0 = len(mounts_under(a.root, pid))
        hb0, lb0 = metrics_health(sc)
        sc.close()
        time.sleep(0.2)
        fd0 = proc_fds(pid)
        fdt0 = proc_fd_targets(pid)
        la0 = loadavg()
        print("start: RSS %d KiB, %d fds, %d mounts under the root, load average %s" % (rss0, fd0, mounts0, la0))

        # ---- load
        probe_out = os.path.join(os.path.dirname(a.root), "probe.json")
        prober = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--probe", url,
                                   str(a.health_hz), str(a.duration), probe_out])
        self_cpu0 = os.times()
        sched0 = loop_sched(pid)
        t_start = time.monotonic()
        load.deadline = t_start + a.duration
        threads = [threading.Thread(target=load.run_client, args=(i,), daemon=True) for i in range(a.clients)]
        for t in threads:
            t.start()
        peak_rss, peak_fd, peak_mounts = rss0, fd0, mounts0
        next_print = t_start + 10
        while any(t.is_alive() for t in threads):
            time.sleep(1)
            now = time.monotonic()
            try:
                rss, fds, mnt = proc_rss_kib(pid), proc_fds(pid), len(mounts_under(a.root, pid))
            except FileNotFoundError:
                print("berthd is gone (exit %s)" % p.poll())
                break
            peak_rss, peak_fd, peak_mounts = max(peak_rss, rss), max(peak_fd, fds), max(peak_mounts, mnt)
            if now >= next_print:
                next_print += 10
                print("  %4.0f s: %7d requests, %d errors, %d failed checks; RSS %d KiB, %d fds, %d mounts; load %s" %
                      (now - t_start, stats.total(), stats.errors, stats.checks, rss, fds, mnt, loadavg()), flush=True)
            if now > load.deadline + a.timeout + 30:
                break
        hung = [i for i, t in enumerate(threads) if t.is_alive()]
        sched1 = loop_sched(pid)
        t_load = time.monotonic() - t_start
        self_cpu = sum(os.times()[:2]) - sum(self_cpu0[:2])
        prober.wait(timeout=60)
        la1 = loadavg()
        probe = json.load(open(probe_out))

        if p.poll() is not None:
            print("berthd ended during the run (exit status %s); the end of its log:" % p.returncode)
            with open(a.log) as f:
                for line in f.readlines()[-20:]:
                    print("   " + line.rstrip()[:300])
            print("%d errors so far; the first: %s" % (stats.errors, "; ".join(stats.first_errors[:3])))
            return 1

        # ---- clean up what is left, then let it settle
        cc = Client(host, int(port), setup, 60)
        hb1, lb1 = metrics_health(cc)
        left = sorted(load.live)
        for kind, h in left:
            if kind == "c":
                cc.call("cleanup", "DELETE", "/v1/containers/" + h, expect=(204, 404))
        for kind, h in left:
            if kind == "v":
                cc.call("cleanup", "DELETE", "/v1/volumes/%s?force=1" % h, expect=(200, 404))
        _, cs = cc.call("cleanup", "GET", "/v1/containers")
        _, vs = cc.call("cleanup", "GET", "/v1/volumes")
        listed_c = [x["handle"] for x in json.loads(cs)["containers"]]
        listed_v = [x["handle"] for x in json.loads(vs)["volumes"]]
        _, ims = cc.call("cleanup", "GET", "/v1/images")
        n_images = len(json.loads(ims)["images"])
        _, pr = cc.call("cleanup", "POST", "/v1/images/prune", body={})
        pr = json.loads(pr)
        _, ims = cc.call("cleanup", "GET", "/v1/images")
        images_after = len(json.loads(ims)["images"])
        cc.close()
        time.sleep(a.settle)
        rss1, fd1, cpu1 = proc_rss_kib(pid), proc_fds(pid), proc_cpu_s(pid)
        fdt1 = proc_fd_targets(pid)
        anon1, file1 = proc_rss_kib(pid, "RssAnon"), proc_rss_kib(pid, "RssFile")
        mounts1 = mounts_under(a.root, pid)
        loops1 = loop_devices_under(a.root)
        trimmed = None
        if a.trim:
            # What the allocator keeps of freed memory versus what is still
            # allocated: malloc_trim gives back every free page it holds.
            g = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex",
                                "call ((int (*)(unsigned long))malloc_trim)(0)"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            trimmed = (proc_rss_kib(pid), proc_rss_kib(pid, "RssAnon"), g.returncode)
        cg_left = cgroup_dirs(lambda s: s.startswith("soak%s-" % a.run_id))
        cg_parents_left = [d for d in cg_parents if os.path.isdir(d)]

        # ---- stop it
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = "did not exit within 60 s of SIGTERM"
        mounts2 = mounts_under(a.root)
        loops2 = loop_devices_under(a.root)
        cg_parents_left2 = [d for d in cg_parents if os.path.isdir(d)]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()

    # ---- figures
    print()
    print("== requests served in %.1f s (%d clients): %d" % (t_load, a.clients, stats.total()))
    for k in sorted(stats.count):
        lat = sorted(stats.lat[k])
        print("   %-22s %7d   p50 %8.1f ms   p99 %8.1f ms   max %8.1f ms%s" %
              (k, stats.count[k], pct(lat, 50) * 1e3, pct(lat, 99) * 1e3, lat[-1] * 1e3,
               ("   errors %d" % stats.err_by_kind[k]) if k in stats.err_by_kind else ""))
    for k in sorted(stats.tags):
        print("     of which %-31s %5d" % (k, stats.tags[k]))
    print("== errors (goal 0): %d (non-2xx or transport), %d failed checks%s" %
          (stats.errors, stats.checks, (", %d clients hung" % len(hung)) if hung else ""))
    for e in stats.first_errors:
        print("   " + e)
    for e in stats.first_checks:
        print("   check: " + e)
    lat = sorted(probe["lat_us"])
    over = sum(1 for x in lat if x > 5000)
    print("== /v1/health from the prober (%g Hz, own process, one keep-alive connection): %d probes, %d errors" %
          (a.health_hz, len(lat), len(probe["errors"])))
    for e in probe["errors"][: a.show]:
        print("   " + e)
    if lat:
        print("   p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  p99.9 %.2f ms  max %.2f ms  (goal p99 < 5 ms: %s); %d over 5 ms" %
              (pct(lat, 50) / 1e3, pct(lat, 90) / 1e3, pct(lat, 99) / 1e3, pct(lat, 99.9) / 1e3, lat[-1] / 1e3,
               "met" if pct(lat, 99) < 5000 else "MISSED", over))
    late = sorted(probe["late_us"])
    if late:
        print("   the prober's own wake-up lateness (the machine, not berthd): p50 %.2f ms  p99 %.2f ms  max %.2f ms" %
              (pct(late, 50) / 1e3, pct(late, 99) / 1e3, late[-1] / 1e3))
    tot, slow = bucket_share_over(hb0, hb1, "0.005")
    ltot, lslow = bucket_share_over(lb0, lb1, "0.005")
    print("   server side (/v1/metrics histogram, every client's): %d health requests, p99 <= %s, %d over 5 ms (%.2f %%)" %
          (tot, bucket_p99(hb0, hb1), slow, 100.0 * slow / max(tot, 1)))
    print("   loop lag (100 ms timer): %d samples, p99 <= %s, %d over 5 ms" % (ltot, bucket_p99(lb0, lb1), lslow))
    run_s, wait_s, slices = ((b - a) for a, b in zip(sched0, sched1))
    print("   the loop thread during the load: %.1f s on a CPU, %.1f s runnable but waiting for one, "
          "%d times scheduled (%.2f ms waited each)" % (run_s / 1e9, wait_s / 1e9, slices, wait_s / 1e6 / max(slices, 1)))
    print("== daemon          start      peak       end (after %.0f s settle)" % a.settle)
    print("   RSS (KiB)    %8d  %8d  %8d   (%+d KiB: anonymous %+d, file-backed %+d)" %
          (rss0, peak_rss, rss1, rss1 - rss0, anon1 - anon0, file1 - file0))
    if trimmed:
        print("     after malloc_trim(0) in berthd (gdb, exit %d): RSS %d KiB (%+d KiB on the start; anonymous %+d)" %
              (trimmed[2], trimmed[0], trimmed[0] - rss0, trimmed[1] - anon0))
    print("   fds          %8d  %8d  %8d   (%+d)" % (fd0, peak_fd, fd1, fd1 - fd0))
    new_fds = ["%d -> %s" % (fd, t) for fd, t in sorted(fdt1.items()) if fdt0.get(fd) != t]
    if new_fds:
        print("   fds open at the end that were not at the start: " + ", ".join(new_fds[:10]))
    print("   mounts       %8d  %8d  %8d" % (mounts0, peak_mounts, len(mounts1)))
    print("   CPU: daemon %.1f s (%.0f %% of one core), load clients %.1f s; load average %s -> %s" %
          (cpu1 - cpu0, 100.0 * (cpu1 - cpu0) / t_load, self_cpu, la0, la1))
    print("== left behind after everything was deleted (goal 0)")
    print("   containers/volumes the clients did not delete (deleted now): %d%s" %
          (len(left), (": " + ", ".join(h for _, h in left[:5])) if left else ""))
    print("   containers / volumes still listed: %d / %d" % (len(listed_c), len(listed_v)))
    print("   images: %d before prune, prune removed %d (gc %s), %d after" %
          (n_images, len(pr.get("removed", [])), json.dumps(pr.get("gc")), images_after))
    print("   mounts under the root: %d while running, %d after exit%s" %
          (len(mounts1), len(mounts2), (": " + ", ".join(mounts1[:3])) if mounts1 else ""))
    print("   loop devices backed by files under the root: %d while running, %d after exit%s" %
          (len(loops1), len(loops2), (": " + ", ".join(loops1[:3])) if loops1 else ""))
    print("   container cgroups (dirs named soak%s-*, every hierarchy): %d%s" %
          (a.run_id, len(cg_left), (": " + ", ".join(cg_left[:3])) if cg_left else ""))
    print("   the daemon's cgroup parents (%s): %d of %d still there while running, %d after exit" %
          (", ".join(sorted({os.path.basename(d) for d in cg_parents})), len(cg_parents_left),
           len(cg_parents), len(cg_parents_left2)))
    print("   berthd exit on SIGTERM: %s" % rc)
    with open(a.log) as f:
        lines = [l.rstrip() for l in f if re.search(r"\b(warn|error)\b|Sanitizer|runtime error:", l)]
    print("== daemon log: %d warn, error or sanitizer lines" % len(lines))
    for l in lines[: a.show]:
        print("   " + l[:300])
    bad = stats.errors or stats.checks or hung or probe["errors"] or left or listed_c or listed_v \
        or mounts1 or mounts2 or loops1 or loops2 or cg_left or rc != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
