#!/usr/bin/env python3
"""Sets the EEVDF slice of every thread of each PID (Linux >= 6.12: the
`sched_runtime` of `sched_setattr` for SCHED_OTHER tasks, 100 µs..100 ms).

    bench/slice.py NANOSECONDS PID...

An experiment of bench/cluster.sh and bench/cluster-counts.sh (SLICE=...):
with four server processes time-sharing one core, a shorter slice lets a
woken process preempt the running one sooner (issue 15 goal 5, RESULTS.md
"Cluster overhead, counted"). Threads started later keep the default.
"""
import ctypes
import os
import struct
import sys

SYS_SCHED_SETATTR = 314  # x86_64

libc = ctypes.CDLL(None, use_errno=True)
ns = int(sys.argv[1])
for pid in sys.argv[2:]:
    for tid in os.listdir(f"/proc/{pid}/task"):
        # struct sched_attr (56 bytes): size, policy, flags, nice, priority,
        # runtime, deadline, period, util_min, util_max
        attr = ctypes.create_string_buffer(struct.pack("IIQiIQQQII", 56, 0, 0, 0, 0, ns, 0, 0, 0, 0), 56)
        if libc.syscall(SYS_SCHED_SETATTR, int(tid), attr, 0) != 0:
            print(f"sched_setattr {tid}: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
