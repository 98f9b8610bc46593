#!/usr/bin/python3
"""A limit tuner in the senpai design: hold a cgroup at a target memory pressure.

Every INTERVAL seconds it reads the group's memory.pressure ("some" total)
and memory.current, and moves memory.high: down while the stall time of the
last interval is under the target (the group's cold memory can go -- with
cgmalloc's spill=1 it goes into the compressed pool), up when it is over.
This is userspace transparent memory offloading: the group keeps as little
memory as it can run in at that pressure.

It only opens files under the cgroup directory, so it runs unchanged on a
cgroup v2 directory of the kernel (/sys/fs/cgroup/GROUP, as root) and on a
cgmalloc hierarchy mounted with `cgmctl mount DIR` (DIR/GROUP).

usage: senpai.py CGROUP_DIR [--target PCT] [--interval S] [--min BYTES]
                 [--max-step PCT] [--duration S] [--log FILE]
The log has one line per interval: time, memory.current, memory.high,
pressure (% of the interval stalled).
"""
import argparse
import os
import sys
import time


def read_some_total(cg):
    with open(os.path.join(cg, "memory.pressure")) as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] == "some":
                for kv in fields[1:]:
                    key, _, value = kv.partition("=")
                    if key == "total":
                        return int(value)
    raise ValueError("no 'some total=' in %s/memory.pressure" % cg)


def read_int(cg, name):
    with open(os.path.join(cg, name)) as f:
        text = f.read().strip()
    return None if text == "max" else int(text)


def write_high(cg, value):
    with open(os.path.join(cg, "memory.high"), "w") as f:
        f.write("%d\n" % value)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cgroup")
    ap.add_argument("--target", type=float, default=0.1,
                    help="pressure to hold, percent of time stalled (0.1)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between steps (1)")
    ap.add_argument("--min", type=int, default=16 << 20, help="never set memory.high below (16M)")
    ap.add_argument("--max-step", type=float, default=1.0,
                    help="most memory.high moves down per step, percent of memory.current (1)")
    ap.add_argument("--max-backoff", type=float, default=20.0,
                    help="most memory.high moves up per step, percent (20)")
    ap.add_argument("--duration", type=float, default=0, help="stop after S seconds (0: never)")
    ap.add_argument("--log", help="write the per-interval log here (default stdout)")
    a = ap.parse_args()

    log = open(a.log, "w") if a.log else sys.stdout
    start = time.monotonic()
    last_total = read_some_total(a.cgroup)
    last_t = time.monotonic()
    print("# t_s memory.current memory.high pressure_pct", file=log, flush=True)
    while not a.duration or time.monotonic() - start < a.duration:
        time.sleep(a.interval)
        now = time.monotonic()
        total = read_some_total(a.cgroup)
        current = read_int(a.cgroup, "memory.current")
        high = read_int(a.cgroup, "memory.high")
        # Percent of the interval during which the group stalled.
        pressure = (total - last_total) / 1e4 / max(now - last_t, 1e-3)
        last_total, last_t = total, now
        if high is None:
            high = current
        if pressure < a.target:
            # Room to spare: squeeze, faster the further under the target.
            step = a.max_step / 100.0 * (1.0 - pressure / a.target)
            new = int(min(high, current) * (1.0 - step))
        else:
            # Too much stall: give memory back, faster the further over.
            step = min(a.max_backoff, a.max_step * pressure / a.target) / 100.0
            new = int(high * (1.0 + step))
        new = max(new, a.min)
        if new != high:
            write_high(a.cgroup, new)
        print("%.1f %d %d %.3f" % (now - start, current, new, pressure), file=log, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
