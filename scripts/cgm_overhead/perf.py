"""perf stat counters, where this machine has them.

A probe of `perf stat` on /bin/true finds which of the events are counted
here.  On machines without hardware counters (virtual machines, often) only
task-clock works, which is the user + system CPU already in the rusage: then
the runs are not wrapped, unless asked, and the report says which counters
are missing and that --callgrind gives exact instruction counts instead.

A wrapped run is `perf stat -x, -o FILE -e EVENTS -- cgm-overhead-spawn 3
VAR=... -- CMD`: the configuration's LD_PRELOAD reaches the workload, never
perf itself, and the rusage is still the workload's alone; the counters
include the small helper (without the helper, env(1) carries the settings
and the rusage includes perf).
"""

import os
import shutil
import subprocess
import tempfile

EVENTS = ("task-clock", "instructions", "cycles", "branches", "branch-misses")
HARDWARE = EVENTS[1:]
MODES = ("auto", "on", "off")


class Perf:
    def __init__(self):
        self.path = None
        self.supported = []
        self.unsupported = []
        self.used = False
        self.note = ""

    def measures(self):
        """(key, title, unit) of the measures a wrapped run adds."""
        if not self.used:
            return []
        return [("perf:" + e, "perf " + e, "ms" if e == "task-clock" else "")
                for e in self.supported]

    def prefix(self, outfile):
        """The words before the command of a run wrapped in perf stat."""
        return [self.path, "stat", "-x", ",", "-o", outfile,
                "-e", ",".join(self.supported), "--"]

    def to_json(self):
        return {"path": self.path, "used": self.used, "supported": self.supported,
                "unsupported": self.unsupported, "note": self.note}


def parse_csv(text):
    """{event: value} from `perf stat -x,` output; None for an event perf
    could not count ("<not supported>", "<not counted>")."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) < 3:
            continue
        value, event = fields[0], fields[2]
        # perf adds a modifier to the name on some kernels ("cycles:u").
        event = event.split(":")[0]
        try:
            out[event] = float(value)
        except ValueError:
            out[event] = None
    return out


def probe(mode):
    """What perf stat counts here, and whether runs are wrapped (mode:
    "auto" wraps when a hardware counter works, "on" whenever perf works,
    "off" never)."""
    p = Perf()
    p.path = shutil.which("perf")
    if mode == "off":
        p.note = "perf stat: off (--perf off)"
        return p
    if not p.path:
        p.note = "perf stat: not installed; use --callgrind for instruction counts"
        return p
    with tempfile.NamedTemporaryFile(prefix="cgm-overhead-perf-") as f:
        try:
            r = subprocess.run([p.path, "stat", "-x", ",", "-o", f.name,
                                "-e", ",".join(EVENTS), "--", "/bin/true"],
                               capture_output=True, text=True, timeout=60)
            counts = parse_csv(open(f.name).read()) if r.returncode == 0 else {}
        except (OSError, subprocess.SubprocessError):
            counts = {}
    if not counts:
        p.note = "perf stat: does not run here (permissions?); use --callgrind for instruction counts"
        return p
    p.supported = [e for e in EVENTS if counts.get(e) is not None]
    p.unsupported = [e for e in EVENTS if counts.get(e) is None]
    hw = [e for e in HARDWARE if e in p.supported]
    p.used = bool(p.supported) and (mode == "on" or bool(hw))
    if p.unsupported:
        p.note = "perf stat: %s not supported here%s; use --callgrind for instruction counts" % (
            ", ".join(p.unsupported),
            "" if p.used else " (no hardware counters: runs not wrapped in perf; --perf on for task-clock)")
    else:
        p.note = "perf stat: counting %s" % ", ".join(p.supported)
    return p


def read_counts(outfile):
    """The measures of a wrapped run, keyed as Perf.measures() names them."""
    try:
        with open(outfile) as f:
            counts = parse_csv(f.read())
    except OSError:
        return {}
    return {"perf:" + e: v for e, v in counts.items() if v is not None}


def env_path():
    return shutil.which("env") or "/usr/bin/env"


def remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass
