#!/usr/bin/env python3
"""Summarises an off-CPU profile of one thread (issue 16), for
bench/health_uploads.sh PROFILE=1: reads `perf sched timehist -t TID
--state` (recorded with `perf sched record -g`) on stdin. Each line is one
time the thread left a CPU: its run time before, the state it left in
(S: blocked, R: preempted, D: uninterruptible) with the kernel call chain
where it left, the time it then spent off CPU (the NEXT line's wait
time) and its run-queue delay once woken (the next line's sch delay).

    perf sched timehist -i perf.data -t TID --state | offcpu.py [LIMIT_MS]

Prints: where the thread went off CPU for longer than LIMIT_MS (5)
other than its idle wait in epoll, grouped by call chain; how long it
waited for a CPU once runnable; and its runs longer than LIMIT_MS.
"""
import collections
import re
import sys

limit = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
row = re.compile(r"^\s*(\d+\.\d+)\s+\[\d+\]\s+(.*?)\[(\d+)(?:/\d+)?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*(.*)$")
rows = []
for line in sys.stdin:
    m = row.match(line)
    if m:
        rows.append((float(m[1]), float(m[4]), float(m[5]), float(m[6]), m[7], m[8].strip()))
if len(rows) < 2:
    print("  no samples of the thread (was it running? perf sched record -g)")
    sys.exit(0)

idle = ("ep_poll", "do_epoll_wait")
blocked = collections.defaultdict(list)  # chain -> [off-CPU ms]
sch = []
long_runs = []
for prev, cur in zip(rows, rows[1:]):
    state, chain = prev[4], prev[5]
    off, delay = cur[1], cur[2]
    sch.append(delay)
    if cur[3] > limit:
        long_runs.append((cur[3], cur[4], cur[5]))
    if state == "R" or any(f in chain for f in idle):
        continue
    blocked[" <- ".join(chain.split(" <- ")[:5])].append(off)
span = rows[-1][0] - rows[0][0]
sch.sort()
n = len(sch)
print("  %d switches in %.1f s; run-queue delay once runnable: p50 %.2f p99 %.2f max %.2f ms, "
      "%d over %g ms (%.0f ms in all)" % (n, span, sch[n // 2], sch[min(n - 1, int(n * 0.99))], sch[-1],
                                         sum(1 for d in sch if d > limit), limit, sum(sch)))
print("  runs on a CPU longer than %g ms: %d%s" % (
    limit, len(long_runs), "; longest %.1f ms, left in %s: %s" % max(long_runs) if long_runs else ""))
print("  blocked other than in epoll (count, total / max ms, where):")
for chain, offs in sorted(blocked.items(), key=lambda kv: -sum(kv[1]))[:8]:
    print("    %5d  %8.1f / %6.1f  %s" % (len(offs), sum(offs), max(offs), chain[:150]))
