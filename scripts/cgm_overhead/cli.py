"""Command line of cgm-overhead: options, errors in one line, exit status."""

import argparse
import os
import sys

from . import HarnessError, VERSION, callgrind, configs, measure, perf, plot, record, report, schedule, stats
from .harness import Harness, Workload
from .progress import Progress

DESCRIPTION = """\
Run a workload under several allocator configurations in interleaved rounds
after a warm-up, and report per configuration and measure the median,
mean ± stddev, min and max, and against each base ministat's verdict: the
difference with its confidence interval, or "No difference proven".

Configurations (-c, comma-separated; default: all built-in ones):
  glibc      no preload: the C library's malloc
  mimalloc   Debian's libmimalloc.so.2 preloaded
  jemalloc   Debian's libjemalloc.so.2 preloaded (if installed)
  off        cgmalloc, CGMALLOC_CONF=accounting=0
  on         cgmalloc, accounting=1, no limits
  limits     cgmalloc, accounting=1 with high = 2 x peak + 64M and
             max = 4 x peak + 128M, peak = the warm-up's max RSS
  spill      limits' high and max with spill=1: the spiller on, nothing to
             reclaim (where spill=1 is allowed; no callgrind count)
  NAME=CONF  cgmalloc with CGMALLOC_CONF=CONF; it takes the rest of its -c
             argument, commas included: -c glibc,on -c mine=accounting=1,max=1G
  NAME@LIB=CONF  the same with another build of cgmalloc, LIB (a path without
             commas or '='), preloaded instead of --lib's
"""

EPILOG = """\
measures: wall time, user and system CPU, max RSS, minor and major page
faults, voluntary and involuntary context switches (wait4 rusage); perf stat
counters where this machine has them (--perf); exact instruction counts with
--callgrind (one run per configuration, under valgrind).

exit status: 0 all runs succeeded; 1 a run failed (reported, not averaged),
the workload fails under the base, or ministat gives no verdict; 2 bad usage
or a missing tool (ministat; valgrind with --callgrind); 130 interrupted.

example:
  cgm-overhead -n 10 -c glibc,mimalloc,off,on -o out -- python3 script.py
"""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise HarnessError(message, 2)


def _count(minimum, what):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("expected %s, got '%s'" % (what, text))
        if v < minimum:
            raise argparse.ArgumentTypeError("expected %s (at least %d), got '%s'"
                                             % (what, minimum, text))
        return v
    return parse


def _seconds(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number of seconds, got '%s'" % text)
    if not v > 0:
        raise argparse.ArgumentTypeError("expected a positive number of seconds, got '%s'" % text)
    return v


def _confidence(text):
    try:
        v = float(text.rstrip("%"))
    except ValueError:
        v = None
    if v not in stats.MINISTAT_LEVELS:
        raise argparse.ArgumentTypeError("expected one of ministat's levels %s, got '%s'" % (
            ", ".join("%g" % x for x in stats.MINISTAT_LEVELS), text))
    return v


def parser():
    p = Parser(prog="cgm-overhead", description=DESCRIPTION, epilog=EPILOG,
               usage="cgm-overhead [options] -- CMD [ARGS...]",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-c", "--configs", action="append", default=[], metavar="LIST",
                   help="configurations to run (default: all built-in ones)")
    p.add_argument("-n", "--runs", type=_count(0, "a number of runs"), default=10, metavar="N",
                   help="timed runs per configuration (default 10; 0 with --callgrind: "
                   "callgrind only)")
    p.add_argument("-w", "--warmup", type=_count(1, "a number of warm-up rounds"), default=1,
                   metavar="N", help="warm-up rounds before the timed ones (default 1)")
    p.add_argument("--base", default="glibc", metavar="LIST",
                   help="configuration(s) the others are compared with, comma-separated "
                   "(default glibc)")
    p.add_argument("--order", choices=schedule.ORDERS, default="rotate",
                   help="order of the configurations within a round (default rotate)")
    p.add_argument("--seed", type=_count(0, "a seed"), default=0,
                   help="seed of --order shuffle (default 0)")
    p.add_argument("--confidence", type=_confidence, default=95.0, metavar="PCT",
                   help="confidence level: 80, 90, 95, 98, 99 or 99.5 (default 95)")
    p.add_argument("--perf", choices=perf.MODES, default="auto",
                   help="wrap runs in perf stat: auto (when hardware counters work), on, off")
    p.add_argument("--callgrind", action="store_true",
                   help="also one run per configuration under valgrind --tool=callgrind")
    p.add_argument("--lib", metavar="PATH",
                   help="libcgmalloc.so (default: the build directory next to this script, "
                   "else the installed one)")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="write DIR/results.json (every run, commands, environment) and "
                   "DIR/plots/*.png|svg")
    p.add_argument("--stdin", default=os.devnull, metavar="FILE",
                   help="the workload's standard input (default /dev/null)")
    p.add_argument("--timeout", type=_seconds, metavar="SEC",
                   help="kill a run after SEC seconds (reported as failed)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    p.add_argument("--list", action="store_true",
                   help="list the configurations and whether they can run here, then exit")
    p.add_argument("--version", action="version", version="cgm-overhead " + VERSION)
    p.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return p


def parse(argv):
    """Options and the workload command (everything after '--')."""
    if "--" in argv:
        i = argv.index("--")
        opts = parser().parse_args(argv[:i])
        if opts.command:
            raise HarnessError("unexpected argument '%s' before --" % opts.command[0])
        opts.command = argv[i + 1:]
    else:
        opts = parser().parse_args(argv)
    if opts.runs == 0 and not opts.callgrind:
        raise HarnessError("-n 0 runs nothing: give -n 1 or more, or --callgrind")
    return opts


def package_parent():
    """The directory holding this package: scripts/ in the source tree,
    LIBDIR/cgmalloc/ when installed."""
    return os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def caller_environ(environ=None):
    """The environment cgm-overhead was started in, for the workloads:
    without the entry its launcher (scripts/cgm-overhead) put first in
    PYTHONPATH to find this package, so that a Python workload imports,
    and is recorded, as it runs without the harness."""
    env = dict(os.environ if environ is None else environ)
    first, _, rest = env.get("PYTHONPATH", "").partition(os.pathsep)
    if first and os.path.realpath(first) == package_parent():
        if rest:
            env["PYTHONPATH"] = rest
        else:
            del env["PYTHONPATH"]
    return env


def select(opts, lib):
    """The configurations to run, bases first when -c did not name them."""
    bases = [b.strip() for b in opts.base.split(",") if b.strip()]
    if not bases:
        raise HarnessError("--base: no configuration given")
    items = configs.parse_list(opts.configs)
    named = {n for n, _ in items}
    if items:
        items = [(b, None) for b in bases if b not in named] + items
    chosen = configs.resolve(items, lib)
    names = [c.name for c in chosen]
    for b in bases:
        if b not in names:
            raise HarnessError("--base %s: unknown configuration" % b)
    return chosen, bases


def list_configs(chosen):
    width = max(len(c.name) for c in chosen)
    for c in chosen:
        text = c.describe() if c.available else c.note
        if c.available and c.name in configs.FROM_PEAK:
            text = "LD_PRELOAD=%s CGMALLOC_CONF=accounting=1,high=2xPEAK+64M,max=4xPEAK+128M%s" % (
                c.preload, ",spill=1" if c.name == "spill" else "")
        print("%-*s  %s" % (width, c.name, text))


def run(argv):
    opts = parse(argv)
    if opts.runs and not opts.list:
        # Before anything is measured: the verdicts at the end need it.
        stats.require_ministat()
    lib = configs.find_cgmalloc(package_parent(), opts.lib)
    chosen, bases = select(opts, lib)
    if opts.list:
        list_configs(chosen)
        return 0
    workload = Workload(opts.command, opts.stdin, opts.timeout, caller_environ())
    if opts.callgrind and not callgrind.valgrind_path():
        raise HarnessError("--callgrind: valgrind is not installed (Debian: valgrind)")
    notes = []
    if workload.dropped:
        notes.append("ignored %s from the environment: each configuration sets its own"
                     % " and ".join(sorted(workload.dropped)))
    perf_info = perf.probe(opts.perf)
    helper = measure.find_helper([os.path.dirname(lib) if lib else "", package_parent(),
                                  os.path.join(package_parent(), "..", "build")])
    if not helper:
        notes.append("%s not found (built by make): max RSS includes the harness's own "
                     "(about 10 MB)" % measure.HELPER)
    started = record.now()
    h = Harness(workload, chosen, bases, runs=opts.runs, warmup=opts.warmup, order=opts.order,
                seed=opts.seed, confidence=opts.confidence,
                perf_info=perf_info, use_callgrind=opts.callgrind, cgmalloc_lib=lib, helper=helper,
                progress=Progress(quiet=opts.quiet))
    duration = h.run()
    rec = record.build(h, ["cgm-overhead"] + list(argv), started, duration, notes)
    if opts.output:
        images, note = plot.plot_all(rec, opts.output) if opts.runs else ([], None)
        rec["plots"] = images
        if note:
            rec["notes"].append(note)
        path = record.write(rec, opts.output)
        plots = " and %d plots in %s" % (len(images), os.path.join(opts.output, "plots")) \
            if images else ""
        print("cgm-overhead: wrote %s%s" % (path, plots), file=sys.stderr)
    sys.stdout.write(report.render(rec))
    return _status(rec)


def _status(rec):
    bad = [r for r in rec["runs"] if not r["ok"] and r["phase"] == "timed"]
    cg_missing = [r["config"] for r in rec["runs"] if r["phase"] == "callgrind"
                  and r["callgrind"]["allocator_seen"] is False]
    if cg_missing:
        print("cgm-overhead: under callgrind the preloaded allocator did not run in: %s"
              % ", ".join(cg_missing), file=sys.stderr)
    if bad:
        print("cgm-overhead: %d run(s) failed (see the report)" % len(bad), file=sys.stderr)
    return 1 if bad or cg_missing else 0


def main(argv):
    try:
        return run(argv)
    except HarnessError as e:
        print("cgm-overhead: %s" % e, file=sys.stderr)
        return e.status
    except KeyboardInterrupt:
        print("\ncgm-overhead: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except OSError as e:
        print("cgm-overhead: %s" % e, file=sys.stderr)
        return 1
    except Exception as e:  # a bug here: still one line, never a traceback
        print("cgm-overhead: internal error: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 3
