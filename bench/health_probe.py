#!/usr/bin/env python3
"""Open-loop /v1/health prober (issue 16), run by bench/health_uploads.sh.

Sends GET /v1/health at a fixed rate on one keep-alive connection and
records each answer's latency from the request's SCHEDULED send time
(t0 + i / rate), not from when it was sent: when the daemon stalls for
20 ms, the requests that were due during the stall are sent late, and each
counts the time it waited to be sent. A closed-loop client (wrk) sends
nothing while it waits, so a stall costs it one slow sample instead of
every sample that was due ("coordinated omission"). No slot is skipped.

Also recorded: how late the prober itself woke for a slot that it was not
behind on (the machine's share: its own scheduling, not berthd's), and,
when given berthd's PID, the loop thread's (the main thread's) run time,
run-queue wait and switches from /proc/PID/task/PID/schedstat over the
window.

    health_probe.py URL RATE_HZ SECONDS [BERTHD_PID]

Prints one line: "p50 p90 p99 p999 max over5ms n late_p99 errors
loop_run_ms loop_wait_ms loop_switches" (latencies in ms).
"""
import socket
import sys
import time


def pct(vals, p):
    if not vals:
        return float("nan")
    i = min(len(vals) - 1, max(0, int(p / 100.0 * len(vals) + 0.5) - 1))
    return vals[i]


def schedstat(pid):
    if pid is None:
        return (0, 0, 0)
    with open("/proc/%d/task/%d/schedstat" % (pid, pid)) as f:
        return tuple(int(x) for x in f.read().split()[:3])


def connect(host, port):
    s = socket.create_connection((host, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_answer(s, buf):
    """One HTTP/1.1 answer with Content-Length (what berthd sends for
    health); returns (status, rest of buf)."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise ConnectionError("closed")
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length:
        d = s.recv(65536)
        if not d:
            raise ConnectionError("closed")
        body += d
    return status, body[length:]


def main():
    url, hz, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    pid = int(sys.argv[4]) if len(sys.argv) > 4 else None
    host, port = url.split("//")[1].rstrip("/").split(":")
    port = int(port)
    req = ("GET /v1/health HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port)).encode()
    interval = 1.0 / hz
    s = connect(host, port)
    buf = b""
    lat, late, errors = [], [], 0
    s0 = schedstat(pid)
    t0 = time.monotonic()
    n = int(seconds * hz)
    for i in range(n):
        slot = t0 + i * interval
        now = time.monotonic()
        if slot > now:
            time.sleep(slot - now)
            late.append(time.monotonic() - slot)
        try:
            s.sendall(req)
            status, buf = read_answer(s, buf)
            if status != 200:
                errors += 1
        except (OSError, ConnectionError, ValueError, IndexError):
            errors += 1
            s.close()
            s, buf = connect(host, port), b""
            continue
        lat.append(time.monotonic() - slot)
    s1 = schedstat(pid)
    s.close()
    lat.sort()
    late.sort()
    ms = [x * 1e3 for x in lat]
    print(
        "%.2f %.2f %.2f %.2f %.2f %d %d %.2f %d %.1f %.1f %d"
        % (
            pct(ms, 50),
            pct(ms, 90),
            pct(ms, 99),
            pct(ms, 99.9),
            ms[-1] if ms else float("nan"),
            sum(1 for x in ms if x > 5.0),
            len(ms),
            pct(late, 99) * 1e3,
            errors,
            (s1[0] - s0[0]) / 1e6,
            (s1[1] - s0[1]) / 1e6,
            s1[2] - s0[2],
        )
    )


if __name__ == "__main__":
    main()
