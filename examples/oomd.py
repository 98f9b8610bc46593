#!/usr/bin/python3
"""A killer in the oomd design: kill a cgroup that stays under memory pressure.

Every INTERVAL seconds it reads the group's memory.pressure; when the
chosen average (full avg10 by default) has stayed above THRESHOLD percent
for DURATION seconds, it writes 1 to the group's cgroup.kill, which kills
every process of the group and its descendants, and logs why.

It only opens files under the cgroup directory, so it runs unchanged on a
cgroup v2 directory of the kernel and on a cgmalloc hierarchy mounted with
`cgmctl mount DIR`.

usage: oomd.py CGROUP_DIR [--threshold PCT] [--duration S] [--interval S]
               [--kind some|full] [--avg avg10|avg60|avg300] [--once]
"""
import argparse
import os
import sys
import time


def read_avg(cg, kind, avg):
    with open(os.path.join(cg, "memory.pressure")) as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] == kind:
                for kv in fields[1:]:
                    key, _, value = kv.partition("=")
                    if key == avg:
                        return float(value)
    raise ValueError("no '%s %s=' in %s/memory.pressure" % (kind, avg, cg))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cgroup")
    ap.add_argument("--threshold", type=float, default=40.0, help="percent (40)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds above it (10)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between looks (1)")
    ap.add_argument("--kind", choices=("some", "full"), default="full")
    ap.add_argument("--avg", choices=("avg10", "avg60", "avg300"), default="avg10")
    ap.add_argument("--once", action="store_true", help="exit after the first kill")
    a = ap.parse_args()

    above_since = None
    while True:
        value = read_avg(a.cgroup, a.kind, a.avg)
        now = time.monotonic()
        if value > a.threshold:
            above_since = above_since if above_since is not None else now
            if now - above_since >= a.duration:
                print("oomd: %s %s %s=%.2f above %.2f for %.1f s: killing %s"
                      % (a.cgroup, a.kind, a.avg, value, a.threshold, now - above_since,
                         a.cgroup), flush=True)
                with open(os.path.join(a.cgroup, "cgroup.kill"), "w") as f:
                    f.write("1\n")
                above_since = None
                if a.once:
                    return 0
        else:
            above_since = None
        time.sleep(a.interval)


if __name__ == "__main__":
    sys.exit(main())
