"""The whole measurement: warm-up, interleaved rounds, callgrind runs, and
the statistics, gathered into one record (the JSON file's content).

Runs are isolated from each other: every cgmalloc run attaches to a group
of its own (group=/cgm-overhead/CONFIG-SEQ) in a hierarchy file made for
this invocation and removed at its end, so that no run inherits the limits
another set or the charges another left (cgmalloc keeps groups, limits and
charges in the shared hierarchy file between processes, as cgroups do
between tasks).  A configuration that names its own hierarchy or group
keeps it.

A run that fails (non-zero exit, a signal, a timeout) is recorded with its
status and the end of its stderr, and left out of the statistics.  A
configuration whose warm-up fails is not run further; when the base
configuration's warm-up fails, the workload itself is broken and the
measurement stops with that error.
"""

import hashlib
import os
import shutil
import tempfile
import time

from . import HarnessError, callgrind, configs, measure, perf, schedule, stats
from .progress import Eta, Progress

# How much longer than --timeout a run under callgrind may take.
CALLGRIND_SLOWDOWN = 100


class Workload:
    """The command, its resolved executable, and the environment every
    configuration starts from (without LD_PRELOAD and CGMALLOC_CONF)."""

    def __init__(self, argv, stdin="/dev/null", timeout=None, environ=None):
        if not argv:
            raise HarnessError("no workload command given (cgm-overhead [options] -- CMD ARGS...)")
        env = dict(os.environ if environ is None else environ)
        self.dropped = {k: env.pop(k) for k in ("LD_PRELOAD", "CGMALLOC_CONF") if k in env}
        self.env = env
        self.argv = list(argv)
        self.executable = resolve_command(argv[0], env.get("PATH", os.defpath))
        self.stdin = stdin
        self.timeout = timeout
        if not os.access(stdin, os.R_OK):
            raise HarnessError("--stdin %s: cannot read it" % stdin)


def resolve_command(cmd, path):
    """The executable the way execvp would find it, or a HarnessError."""
    if "/" in cmd:
        found = cmd if os.path.exists(cmd) else None
    else:
        found = shutil.which(cmd, path=path)
    if not found:
        raise HarnessError("command not found: %s" % cmd)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise HarnessError("not an executable program: %s" % cmd)
    return os.path.abspath(found)


class Harness:
    def __init__(self, workload, configurations, bases, runs=10, warmup=1,
                 order="rotate", seed=0, confidence=95.0,
                 perf_info=None, use_callgrind=False, cgmalloc_lib=None,
                 helper=None, progress=None):
        self.w = workload
        self.configs = configurations
        self.bases = bases
        self.runs = runs
        self.warmup = warmup
        self.order = order
        self.seed = seed
        self.confidence = confidence
        self.perf = perf_info or perf.Perf()
        self.use_callgrind = use_callgrind
        self.lib = cgmalloc_lib
        self.helper = helper
        self.hier_dir = None
        self.progress = progress or Progress(quiet=True)
        self.records = []
        self.start = None
        self.peak_kib = None

    # -- one run ---------------------------------------------------------
    def _settings(self, config, label):
        """The configuration's environment, with the run's own group."""
        env = config.env()
        conf = env.get("CGMALLOC_CONF")
        if conf is None or not self.hier_dir:
            return env
        keys = {item.split("=", 1)[0].strip() for item in conf.split(",")}
        if not keys & {"hierarchy", "group"}:
            env["CGMALLOC_CONF"] = "%s,hierarchy=%s,group=/cgm-overhead/%s-%d" % (
                conf, os.path.join(self.hier_dir, self._hierarchy_name(env)), label,
                len(self.records))
        return env

    @staticmethod
    def _hierarchy_name(env):
        """One hierarchy file for each build of the library the runs preload.

        A build of another layout (the count-only floor) takes a file it
        cannot read for another build's and makes it anew once no process
        uses it: sharing one file, the floor's runs and the others' each
        made it again in turn, and the first process of a file writes its
        whole process table (bench/bignum's 'on' runs had 400 KiB more max
        RSS than 'limits', which followed them).
        """
        lib = env.get("LD_PRELOAD", "")
        if not lib:
            return "hierarchy"
        return "hierarchy-" + hashlib.sha1(lib.encode()).hexdigest()[:8]

    def _run(self, config, phase, rnd, label=None):
        argv = [self.w.executable] + self.w.argv[1:]
        settings = self._settings(config, label or config.name)
        outer, inner = [], []
        perf_out = cg_out = None
        if phase == "callgrind":
            cg_out = tempfile.mkdtemp(prefix="cgm-overhead-callgrind-")
            inner = callgrind.wrap(callgrind.valgrind_path(), [], cg_out)
        elif self.perf.used:
            fd, perf_out = tempfile.mkstemp(prefix="cgm-overhead-perf-")
            os.close(fd)
            outer = self.perf.prefix(perf_out)
        cmd = measure.command(argv, settings, self.helper, outer, inner, perf.env_path())
        timeout = self.w.timeout
        if timeout and phase == "callgrind":
            timeout *= CALLGRIND_SLOWDOWN
        t = time.monotonic()
        try:
            r = measure.run(argv, self.w.env, settings, self.w.stdin, timeout,
                            self.helper, outer, inner)
        except OSError as e:
            raise HarnessError("cannot run %s: %s" % (self.w.argv[0], e.strerror or e))
        finally:
            counts = perf.read_counts(perf_out) if perf_out else {}
            if perf_out:
                perf.remove(perf_out)
        r["values"].update(counts)
        rec = {
            "seq": len(self.records),
            "phase": phase,
            "round": rnd,
            "config": label or config.name,
            "ok": r["ok"],
            "status": r["status"],
            "status_text": measure.describe_status(r["status"]),
            "values": r["values"],
            "stderr_tail": r["stderr_tail"],
            "started": round(t - self.start, 3),
            "command": cmd,
        }
        if cg_out:
            rec["callgrind"] = self._callgrind_result(config, cg_out, r["ok"])
        self.records.append(rec)
        return rec

    def _callgrind_result(self, config, outdir, ok):
        try:
            profile = callgrind.parse_dir(outdir)
        except OSError:
            profile = {"total": None, "objects": {}}
        finally:
            shutil.rmtree(outdir, ignore_errors=True)
        seen, alloc_ir = callgrind.allocator_share(profile, config.preload)
        top = sorted(profile["objects"].items(), key=lambda kv: -kv[1])[:12]
        return {"ir": profile["total"] if ok else None, "allocator_ir": alloc_ir,
                "allocator_seen": seen, "objects": dict(top)}

    # -- phases ----------------------------------------------------------
    def _available(self):
        return [c for c in self.configs if c.available]

    def _fail_warmup(self, config, rec):
        why = rec["status_text"]
        last = rec["stderr_tail"].splitlines()[-1:] if rec["stderr_tail"] else []
        detail = "%s%s" % (why, ": " + last[0] if last else "")
        if config.name in self.bases:
            raise HarnessError("the workload fails under %s (warm-up): %s" % (config.name, detail),
                               status=1)
        config.available = False
        config.note = "failed in the warm-up (%s): not run" % detail

    def _set_limits(self, config):
        """high and max for the limits and spill configurations, above the
        peak max RSS of the warm-up runs before the first of them (a
        cgmalloc run without accounting measures it when none ran before);
        both get the same."""
        if self.peak_kib is None:
            peaks = [r["values"]["maxrss"] for r in self.records if r["ok"]]
            if not peaks:
                probe = configs.Config("limits-peak-probe", preload=config.preload,
                                       conf="accounting=0")
                rec = self._run(probe, "warmup", 0)
                if not rec["ok"]:
                    self._fail_warmup(config, rec)
                    return
                peaks = [rec["values"]["maxrss"]]
            self.peak_kib = max(peaks)
        config.conf = configs.peak_conf(config.name, self.peak_kib)

    def _warm_up(self):
        avail = self._available()
        order = schedule.warmup([c.name for c in avail], late=configs.FROM_PEAK)
        by_name = {c.name: c for c in avail}
        total = self.warmup * len(order)
        i = 0
        for w in range(self.warmup):
            for name in order:
                c = by_name[name]
                i += 1
                if not c.available:
                    continue
                if c.builtin and name in configs.FROM_PEAK and c.conf is None:
                    self._set_limits(c)
                    if not c.available:
                        continue
                self.progress.update("warm-up", i, total, name)
                rec = self._run(c, "warmup", w)
                if not rec["ok"]:
                    self._fail_warmup(c, rec)

    def _timed(self):
        avail = self._available()
        plan = schedule.rounds([c.name for c in avail], self.runs, self.order, self.seed)
        by_name = {c.name: c for c in avail}
        eta = Eta()
        for r in self.records:
            if r["phase"] == "warmup" and r["config"] in by_name:
                eta.add(r["config"], r["values"]["wall"])
        for i, (rnd, name) in enumerate(plan):
            self.progress.update("run", i + 1, len(plan), name,
                                 eta.left(n for _, n in plan[i:]))
            rec = self._run(by_name[name], "timed", rnd)
            eta.add(name, rec["values"]["wall"])

    def _callgrind(self):
        avail = [c for c in self._available() if not c.callgrind_note]
        eta = Eta()
        for i, c in enumerate(avail):
            left = eta.left(x.name for x in avail[i:]) if i else None
            self.progress.update("callgrind run", i + 1, len(avail), c.name, left)
            t = time.monotonic()
            self._run(c, "callgrind", 0)
            eta.add(c.name, time.monotonic() - t)

    # -- statistics ------------------------------------------------------
    def measures(self):
        return list(measure.RUSAGE_MEASURES) + self.perf.measures()

    def samples(self, config, key):
        return [r["values"][key] for r in self.records
                if r["phase"] == "timed" and r["config"] == config and r["ok"]
                and r["values"].get(key) is not None]

    def summary(self):
        out = {}
        for c in self._available():
            failed = sum(1 for r in self.records if r["phase"] == "timed"
                         and r["config"] == c.name and not r["ok"])
            out[c.name] = {"failed": failed}
            for key, _, _ in self.measures():
                xs = self.samples(c.name, key)
                out[c.name][key] = stats.summarize(xs) if xs else None
        return out

    def comparisons(self):
        out = {}
        names = [c.name for c in self._available()]
        for base in self.bases:
            if base not in names:
                continue
            out[base] = {}
            for name in names:
                if name == base:
                    continue
                out[base][name] = {
                    key: stats.compare(self.samples(base, key), self.samples(name, key),
                                       self.confidence)
                    for key, _, _ in self.measures()}
        return out

    # -- everything --------------------------------------------------------
    def run(self):
        self.start = time.monotonic()
        missing = [b for b in self.bases if b not in [c.name for c in self._available()]]
        if missing:
            c = next((c for c in self.configs if c.name == missing[0]), None)
            raise HarnessError("base configuration %s is not available%s" % (
                missing[0], ": " + c.note if c and c.note else ""))
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.hier_dir = tempfile.mkdtemp(prefix="cgm-overhead-", dir=shm)
        try:
            self._warm_up()
            if self.runs:
                self._timed()
            if self.use_callgrind:
                self._callgrind()
        finally:
            self.progress.done()
            shutil.rmtree(self.hier_dir, ignore_errors=True)
        return time.monotonic() - self.start
