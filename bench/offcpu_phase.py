#!/usr/bin/python3
"""Where python3's main thread waits in bench/spill_dict.py's working phase.

Runs bench/spill_dict.py (the python3 workload of bench/spill_workload.sh)
preloaded with LIB and CGMALLOC_CONF=hierarchy=<temp>,scope=/offcpu,CONF;
while its working phase runs, records every context switch and wake-up
of the machine with their kernel stacks (perf record -a -g -e
sched:sched_switch,sched:sched_waking; needs root).  Prints the phase's
time, each thread's CPU time in it, and the main thread's sleeps by what
it slept in: a fault the spill engine's handler serves (handle_userfault),
a lock (futex), anything else -- how many, their total, and for the
faults their median and 90th percentile, and whether the handler was on
a CPU when the fault came (busy with other work) or asleep.

Usage: bench/offcpu_phase.py LIB CONF [ENTRIES OPS]
  e.g. bench/offcpu_phase.py build/libcgmalloc.so spill=1,high=159M
(159M is half the peak the workload reaches without a limit, as
bench/spill_workload.sh sets it.)
"""
import bisect
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def thread_cpu(pid):
    """CPU seconds of each thread of @pid."""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
            out[int(t)] = int(f.read().split()[0]) / 1e9
    return out


def parse(script):
    """perf script's events: dicts of comm, tid, t, ev, trace, stack (function names)."""
    evs, cur = [], None
    for line in script.splitlines():
        if not line.strip():
            if cur:
                evs.append(cur)
            cur = None
        elif not line[0].isspace():
            m = re.match(r"\s*(.+?)\s+(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)", line)
            cur = m and dict(comm=m.group(1), tid=int(m.group(2)), t=float(m.group(3)),
                             ev=m.group(4), trace=m.group(5), stack=[])
        elif cur:
            f = line.split()
            cur["stack"].append(f[1] if len(f) > 1 else f[0])
    if cur:
        evs.append(cur)
    return evs


def sleeps(evs, main):
    """The main thread's sleeps: (start, end, kind, waker tid)."""
    out, gone = [], None
    for e in evs:
        if e["ev"].endswith("sched_switch") and "prev_pid=%d " % main in e["trace"] \
                and "prev_state=S" in e["trace"]:
            gone = e
        elif e["ev"].endswith("sched_waking") and re.search(r"\bpid=%d\b" % main, e["trace"]) \
                and gone:
            st = gone["stack"]
            kind = "fault" if "handle_userfault" in st else "lock" if "futex_do_wait" in st \
                else "other (%s)" % ",".join(st[2:4])
            out.append((gone["t"], e["t"], kind, e["tid"]))
            gone = None
    return out


def on_cpu_at(evs, tid):
    """A function telling whether @tid was on a CPU at a time."""
    marks = []
    for e in evs:
        if not e["ev"].endswith("sched_switch"):
            continue
        if "prev_pid=%d " % tid in e["trace"]:
            marks.append((e["t"], False))
        if "next_pid=%d " % tid in e["trace"]:
            marks.append((e["t"], True))
    times = [m[0] for m in marks]

    def at(t):
        i = bisect.bisect_right(times, t) - 1
        return i >= 0 and marks[i][1]
    return at


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    lib, conf = os.path.abspath(sys.argv[1]), sys.argv[2]
    args = sys.argv[3:5] or ["900000", "2500000"]
    tmp = tempfile.mkdtemp(prefix="cgm-offcpu.")
    env = dict(os.environ, LD_PRELOAD=lib,
               CGMALLOC_CONF="hierarchy=%s/h,scope=/offcpu,%s" % (tmp, conf))
    prog = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "spill_dict.py")] + args,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)

    def step(want):
        line = prog.stdout.readline()
        if not line.startswith(want):
            sys.exit("offcpu_phase: spill_dict.py said %r, not %s" % (line, want))
        return line

    step("ready")
    prog.stdin.write("\n")
    prog.stdin.flush()
    step("built")
    data = os.path.join(tmp, "perf.data")
    perf = subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-o", data, "-e",
                             "sched:sched_switch,sched:sched_waking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)	# perf is recording
    cpu0 = thread_cpu(prog.pid)
    prog.stdin.write("\n")
    prog.stdin.flush()
    done = step("done").split()
    cpu1 = thread_cpu(prog.pid)
    perf.send_signal(2)
    perf.wait()
    prog.stdin.write("\n")
    prog.stdin.flush()
    checked = prog.stdout.readline().split()
    prog.stdin.close()
    prog.wait()
    script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,time,event,trace,ip,sym"],
                            capture_output=True, text=True).stdout
    subprocess.run(["rm", "-rf", tmp])
    evs = parse(script)

    print("working phase %s s (halves %s, %s); records %s" % (done[1], done[2], done[3],
                                                             checked[0] if checked else "?"))
    for tid in sorted(cpu1):
        print("  thread %d%s: %.3f s on a CPU" % (tid, " (main)" if tid == prog.pid else "",
                                                  cpu1[tid] - cpu0.get(tid, 0.0)))
    waits = sleeps(evs, prog.pid)
    wakers = collections.Counter(w[3] for w in waits if w[2] == "fault")
    handler = wakers.most_common(1)[0][0] if wakers else None
    busy = on_cpu_at(evs, handler) if handler else None
    by = collections.defaultdict(list)
    for start, end, kind, _ in waits:
        if kind == "fault" and busy:
            kind = "fault, handler %s" % ("on a CPU" if busy(start) else "asleep")
        by[kind].append((end - start) * 1e6)
    print("main thread's sleeps in it:")
    for kind, us in sorted(by.items(), key=lambda kv: -sum(kv[1])):
        us.sort()
        print("  %-26s %6d, %8.1f ms; median %6.0f us, 90th percentile %6.0f us" %
              (kind, len(us), sum(us) / 1000, us[len(us) // 2], us[len(us) * 9 // 10]))


if __name__ == "__main__":
    main()
