"""The JSON record of a measurement: every raw run, the statistics, and
what is needed to rerun it (the harness command line, each configuration's
exact workload command, the environment and the machine).

Only environment variables that change what a workload or an allocator does
are recorded (locale, paths, allocator and Python settings), not the whole
environment, which may hold private values.
"""

import datetime
import json
import math
import os
import platform
import re
import shlex

from . import VERSION

FORMAT = "cgm-overhead/1"
ENV_KEEP = re.compile(r"^(PATH|LANG|LANGUAGE|LC_\w+|TZ|LD_LIBRARY_PATH|LD_BIND_NOW|"
                      r"GLIBC_TUNABLES|MALLOC_\w+|MIMALLOC_\w+|JE_MALLOC_CONF|"
                      r"CGMALLOC_\w+|PYTHON\w+|OMP_NUM_THREADS|TMPDIR)$")


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host():
    u = os.uname()
    return {"system": u.sysname, "release": u.release, "version": u.version,
            "machine": u.machine, "hostname": u.nodename, "cpus": os.cpu_count(),
            "cpu_model": _cpu_model(), "python": platform.python_version()}


def environment(env):
    return {k: v for k, v in sorted(env.items()) if ENV_KEEP.match(k)}


def _clean(x):
    """JSON has no NaN or infinity: they become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def build(h, invocation, started, duration, notes):
    """The record of Harness @h after its run."""
    w = h.w
    cfgs = []
    for c in h.configs:
        cfgs.append({"name": c.name, "builtin": c.builtin, "available": c.available,
                     "note": c.note, "env": c.env(),
                     "callgrind_note": c.callgrind_note if h.use_callgrind else None,
                     "command": c.shell_command(w.argv) if c.available else None})
    return _clean({
        "format": FORMAT,
        "tool": {"name": "cgm-overhead", "version": VERSION},
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(duration, 3),
        "host": host(),
        "invocation": {"argv": invocation, "shell": shlex.join(invocation), "cwd": os.getcwd()},
        "workload": {"argv": w.argv, "executable": w.executable, "stdin": w.stdin,
                     "timeout_s": w.timeout},
        "environment": environment(w.env),
        "environment_ignored": sorted(w.dropped),
        "cgmalloc_lib": h.lib,
        "settings": {"runs": h.runs, "warmup": h.warmup, "order": h.order, "seed": h.seed,
                     "confidence": h.confidence, "bases": h.bases,
                     # Always ministat now; kept so that the format stays cgm-overhead/1.
                     "stats_method": "ministat", "callgrind": h.use_callgrind,
                     "limits_peak_maxrss_kib": h.peak_kib,
                     "isolation": "each cgmalloc run in its own group "
                                  "(group=/cgm-overhead/CONFIG-SEQ) of a hierarchy file of "
                                  "this invocation (%s/hierarchy-*, one for each build of the "
                                  "library), unless the configuration "
                                  "names a hierarchy or group" % h.hier_dir},
        "configurations": cfgs,
        "perf": h.perf.to_json(),
        "measures": [{"key": k, "title": t, "unit": u} for k, t, u in h.measures()],
        "notes": notes,
        "runs": h.records,
        "summary": h.summary(),
        "comparisons": h.comparisons(),
    })


def write(record, directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "results.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)
    return path


def now():
    return datetime.datetime.now(datetime.timezone.utc).astimezone()
