#!/usr/bin/python3
"""Tests of the overhead harness, scripts/cgm-overhead.

The statistics against known answers, the interleaving order, the bad-input
messages, and a tiny workload end to end under every configuration with
the JSON it writes checked field by field.

Run: CGM_BUILD=build /usr/bin/python3 tests/test_overhead.py
(CGM_BUILD holds libcgmalloc.so, cgm-overhead-spawn and bench/churn.)
"""

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "scripts"))
sys.dont_write_bytecode = True

from cgm_overhead import HarnessError, callgrind, configs, schedule, stats  # noqa: E402
from cgm_overhead.cli import caller_environ  # noqa: E402

BUILD = os.path.join(TOP, os.environ.get("CGM_BUILD", "build"))
LIB = os.path.join(BUILD, "libcgmalloc.so")
CHURN = os.path.join(BUILD, "bench", "churn")
HARNESS = os.path.join(TOP, "scripts", "cgm-overhead")
# A PATH without ministat (nor anything else): the harness must say it is
# missing before it needs PATH for anything.
NO_MINISTAT = os.path.join(TOP, "tests", "no-such-dir")

# Known answer, checked by hand and printed by Debian's ministat 20150715
# for these two files: "Difference at 95.0% confidence / 4.1 +/- 2.42952 /
# 136.667% +/- 80.9841% / (Student's t, pooled s = 1.66583)".
# By hand: means 3 and 7.1, variances 2.5 and 3.05, pooled variance
# (4 * 2.5 + 4 * 3.05) / 8 = 2.775, s = 1.66583; standard error
# s * sqrt(1/5 + 1/5) = 1.05356; t(95%, 8 df) = 2.306; 2.306 * 1.05356 = 2.42952.
A = [1, 2, 3, 4, 5]
B = [5, 6, 7, 8, 9.5]
KNOWN = {"diff": 4.1, "err": 2.42952, "pct": 136.667, "pct_err": 80.9841, "pooled_s": 1.66583}

MINISTAT_OUTPUT = """x a
+ b
    N           Min           Max        Median           Avg        Stddev
x   5             1             5             3             3     1.5811388
+   5             5           9.5             7           7.1     1.7464249
Difference at 95.0% confidence
	4.1 +/- 2.42952
	136.667% +/- 80.9841%
	(Student's t, pooled s = 1.66583)
"""


def close(a, b, rel=2e-5):
    return abs(a - b) <= rel * max(abs(a), abs(b))


class Statistics(unittest.TestCase):
    def check_known(self, v, known=KNOWN):
        self.assertEqual(v["method"], "ministat")
        self.assertTrue(v["difference"])
        bad = [k for k, want in known.items() if not close(v[k], want)]
        self.assertEqual(bad, [], "%s differ from the known answer: %s" % (bad, v))

    def test_ministat_known_answer(self):
        self.check_known(stats.compare(A, B, 95))
        self.assertEqual(stats.verdict_text(stats.compare(A, B, 95)),
                         "Difference at 95.0% confidence: 4.1 +/- 2.42952 "
                         "(136.667% +/- 80.9841%)")
        # The other way round: a decrease, in percent of the other base
        # (-4.1 / 7.1 and 2.42952 / 7.1).
        self.check_known(stats.compare(B, A, 95), dict(
            KNOWN, diff=-4.1, pct=-57.7465, pct_err=34.2186))

    def test_verdict_is_ministats(self):
        """The figures are whatever ministat prints, for the level asked:
        a stand-in ministat with an answer no computation on A and B gives."""
        with tempfile.TemporaryDirectory(prefix="test-overhead-") as d:
            fake = os.path.join(d, "ministat")
            with open(fake, "w") as f:
                f.write('#!/bin/sh\n[ "$1 $2 $3" = "-A -c 99" ] || exit 9\n'
                        'printf "Difference at 99.0%% confidence\\n\\t-1.5 +/- 0.25\\n'
                        '\\t-12.5%% +/- 2.08333%%\\n\\t(Student\'s t, pooled s = 0.2)\\n"\n')
            os.chmod(fake, 0o755)
            v = stats.compare(A, B, 99, ministat=fake)
        self.assertEqual((v["method"], v["confidence"], v["difference"]), ("ministat", 99, True))
        self.assertEqual((v["diff"], v["err"], v["pct"], v["pct_err"], v["pooled_s"]),
                         (-1.5, 0.25, -12.5, 2.08333, 0.2))

    def test_ministat_without_verdict_is_an_error(self):
        with tempfile.TemporaryDirectory(prefix="test-overhead-") as d:
            for name, body, words in (("fails", "echo 'bad data' >&2; exit 1",
                                       "ministat failed (status 1): bad data"),
                                      ("mute", "echo hello", "ministat printed no verdict")):
                fake = os.path.join(d, name)
                with open(fake, "w") as f:
                    f.write("#!/bin/sh\n%s\n" % body)
                os.chmod(fake, 0o755)
                with self.assertRaises(HarnessError) as e:
                    stats.compare(A, B, 95, ministat=fake)
                self.assertIn(words, str(e.exception))

    def test_missing_ministat(self):
        path = os.environ["PATH"]
        os.environ["PATH"] = NO_MINISTAT
        try:
            with self.assertRaises(HarnessError) as e:
                stats.compare(A, B, 95)
        finally:
            os.environ["PATH"] = path
        self.assertEqual(str(e.exception), "ministat is not installed (Debian package ministat)")

    def test_parse_ministat_output(self):
        self.check_known(stats.parse_ministat(MINISTAT_OUTPUT, 95))
        v = stats.parse_ministat("No difference proven at 95.0% confidence\n", 95)
        self.assertFalse(v["difference"])
        # A base mean of 0: ministat prints an infinite percentage.
        v = stats.parse_ministat("Difference at 95.0% confidence\n\t1 +/- 0\n\tinf% +/- -nan%\n"
                                 "\t(Student's t, pooled s = 0)\n", 95)
        self.assertTrue(v["difference"])
        self.assertIsNone(v["pct"])
        self.assertIsNone(stats.parse_ministat("x a\n+ b\n", 95))

    def test_identical_samples_no_difference(self):
        xs = [0.41, 0.43, 0.40, 0.44, 0.42]
        self.assertEqual(stats.verdict_text(stats.compare(xs, list(xs))),
                         "No difference proven at 95.0% confidence")
        # Constant samples: zero variance, zero difference.
        self.assertFalse(stats.compare([3, 3, 3], [3, 3, 3])["difference"])

    def test_too_few_runs(self):
        v = stats.compare([1, 2], [3, 4, 5])
        self.assertFalse(v["difference"])
        self.assertIn("too few runs", v["note"])

    def test_summary(self):
        s = stats.summarize([4, 1, 3, 2])
        self.assertEqual((s["n"], s["median"], s["mean"], s["min"], s["max"]), (4, 2.5, 2.5, 1, 4))
        self.assertAlmostEqual(s["stddev"], math.sqrt(5 / 3))
        self.assertEqual((s["q1"], s["q3"]), (1.75, 3.25))
        # Odd n: quartiles on the points; deviations -3.4 -2.4 -1.4 2.6 4.6.
        s = stats.summarize([7, 1, 9, 3, 2])
        self.assertEqual((s["median"], s["q1"], s["q3"], s["min"], s["max"]), (3, 2, 7, 1, 9))
        self.assertAlmostEqual(s["mean"], 4.4)
        self.assertAlmostEqual(s["stddev"], math.sqrt(47.2 / 4))
        # Integer samples (max RSS) still have float means and medians, as
        # the JSON record has always had them.
        s = stats.summarize([1, 2, 6])
        self.assertEqual((s["mean"], s["median"]), (3, 2))
        self.assertEqual((type(s["mean"]), type(s["median"])), (float, float))
        # One good run: no spread, all quantiles the point itself.
        s = stats.summarize([5])
        self.assertEqual((s["n"], s["median"], s["mean"], s["stddev"], s["q1"], s["q3"]),
                         (1, 5, 5, 0, 5, 5))


class Interleaving(unittest.TestCase):
    NAMES = ["glibc", "mimalloc", "off", "on"]

    def test_fixed(self):
        order = [n for _, n in schedule.rounds(self.NAMES, 3, "fixed")]
        self.assertEqual(order, self.NAMES * 3)

    def test_rotate(self):
        order = [n for _, n in schedule.rounds(["A", "B", "C"], 3, "rotate")]
        self.assertEqual("".join(order), "ABCBCACAB")

    def test_every_round_has_each_once_and_no_blocks(self):
        for order in schedule.ORDERS:
            plan = schedule.rounds(self.NAMES, 5, order, seed=3)
            self.assertEqual(len(plan), 20)
            for r in range(5):
                self.assertEqual(sorted(n for rr, n in plan if rr == r), sorted(self.NAMES))
            # Never all runs of one configuration in a row.
            for name in self.NAMES:
                pos = [i for i, (_, n) in enumerate(plan) if n == name]
                self.assertGreater(pos[-1] - pos[0], len(pos) - 1, (order, name, pos))

    def test_shuffle_is_reproducible(self):
        a = schedule.rounds(self.NAMES, 4, "shuffle", seed=11)
        self.assertEqual(a, schedule.rounds(self.NAMES, 4, "shuffle", seed=11))

    def test_warmup_puts_limits_last(self):
        self.assertEqual(schedule.warmup(["glibc", "limits", "on"], late=("limits",)),
                         ["glibc", "on", "limits"])
        self.assertEqual(schedule.warmup(["spill", "glibc", "limits", "on"],
                                         late=configs.FROM_PEAK),
                         ["glibc", "on", "spill", "limits"])


class Isolation(unittest.TestCase):
    def test_own_group_unless_named(self):
        from cgm_overhead.harness import Harness
        h = Harness(None, [], ["glibc"])
        h.hier_dir = "/dev/shm/x"
        on = configs.Config("on", preload="lib.so", conf="accounting=1")
        mine = configs.Config("mine", preload="lib.so", conf="accounting=1,group=/a")
        file = "/dev/shm/x/hierarchy-" + hashlib.sha1(b"lib.so").hexdigest()[:8]
        self.assertEqual(h._settings(on, "on")["CGMALLOC_CONF"],
                         "accounting=1,hierarchy=%s,group=/cgm-overhead/on-0" % file)
        self.assertEqual(h._settings(mine, "mine")["CGMALLOC_CONF"], "accounting=1,group=/a")
        # Another build of the library (the count-only floor): a file of its own.
        floor = configs.Config("floor", preload="countonly/lib.so", conf="accounting=1")
        self.assertNotIn(file, h._settings(floor, "floor")["CGMALLOC_CONF"])
        self.assertEqual(h._settings(configs.Config("glibc"), "glibc"), {})


class Parsing(unittest.TestCase):
    def test_config_list(self):
        self.assertEqual(configs.parse_list(["glibc,on", "mine=accounting=1,max=1G"]),
                         [("glibc", None), ("on", None), ("mine", "accounting=1,max=1G")])

    def test_limits_above_peak(self):
        # peak 10 MiB: high = 20 + 64 = 84M, max = 40 + 128 = 168M.
        self.assertEqual(configs.limits_conf(10 * 1024), "accounting=1,high=84M,max=168M")

    def test_spill_conf(self):
        self.assertEqual(configs.peak_conf("spill", 10 * 1024),
                         "accounting=1,high=84M,max=168M,spill=1")
        self.assertEqual(configs.peak_conf("limits", 10 * 1024), configs.limits_conf(10 * 1024))

    def test_spills(self):
        def spills(conf, name="mine", builtin=False):
            return configs.Config(name, preload="lib.so", conf=conf, builtin=builtin).spills
        self.assertTrue(spills("accounting=1,spill=1"))
        self.assertTrue(spills("spill = yes ,accounting=1"))
        self.assertFalse(spills("accounting=1"))
        self.assertFalse(spills("accounting=1,spill=0"))
        self.assertFalse(spills("spill=1,spill=off"))
        self.assertFalse(spills("spill_codec=zstd"))
        # The built-in one before the warm-up has set its CGMALLOC_CONF.
        self.assertTrue(spills(None, "spill", True))
        self.assertIsNone(configs.Config("on", preload="lib.so", conf="accounting=1")
                          .callgrind_note)
        self.assertIn("userfaultfd", configs.Config("x", preload="l", conf="spill=1")
                      .callgrind_note)

    def test_callgrind_parse(self):
        text = ("positions: line\nevents: Ir\nob=(1) /lib/libc.so.6\nfn=(1) main\n"
                "3 10\ncfn=(2) malloc\ncob=(2) /x/libcgmalloc.so\ncalls=1 0\n3 100\n"
                "ob=(2)\nfn=(2)\n+1 60\n-1 40\ntotals: 110\n")
        p = callgrind.parse(text)
        self.assertEqual(p["objects"], {"/lib/libc.so.6": 10, "/x/libcgmalloc.so": 100})
        self.assertEqual(p["total"], 110)
        self.assertEqual(callgrind.allocator_share(p, "/x/libcgmalloc.so"), (True, 100))


def harness(*args, cwd=None, env=None):
    return subprocess.run([HARNESS] + list(args), capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


class BadInput(unittest.TestCase):
    def one_line_error(self, r, words):
        self.assertNotEqual(r.returncode, 0)
        self.assertNotIn("Traceback", r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("cgm-overhead: "), lines[0])
        self.assertIn(words, lines[0])

    def test_command_not_found(self):
        self.one_line_error(harness("--lib", LIB, "--", "no-such-command-xyz"),
                            "command not found: no-such-command-xyz")

    def test_unknown_configuration(self):
        self.one_line_error(harness("--lib", LIB, "-c", "glibc,fast", "--", "true"),
                            "unknown configuration 'fast'")

    def test_non_numeric_runs(self):
        self.one_line_error(harness("-n", "ten", "--", "true"), "'ten'")

    def test_crashing_workload(self):
        r = harness("-q", "--lib", LIB, "-n", "3", "--", "sh", "-c", "kill -SEGV $$")
        self.one_line_error(r, "SIGSEGV")

    def test_user_conf_missing_library(self):
        self.one_line_error(harness("--lib", LIB, "-c", "x@/no/such/lib.so=accounting=1", "--",
                                    "true"), "no such library: /no/such/lib.so")
        self.one_line_error(harness("--lib", LIB, "-c", "x@=accounting=1", "--", "true"),
                            "no library after '@'")

    def test_rejected_user_conf(self):
        self.one_line_error(harness("--lib", LIB, "-c", "x=nosuchkey=1", "--", "true"),
                            "rejected")

    def test_missing_ministat(self):
        r = harness("--lib", LIB, "-n", "3", "--", "/bin/true",
                    env=dict(os.environ, PATH=NO_MINISTAT))
        self.one_line_error(r, "ministat")
        self.assertEqual(r.stderr, "cgm-overhead: ministat is not installed "
                         "(Debian package ministat)\n")
        self.assertEqual(r.stdout, "")


class Launcher(unittest.TestCase):
    """scripts/cgm-overhead puts the package on PYTHONPATH; the workload
    must get the caller's PYTHONPATH back, unset when it was unset."""

    def workload_pythonpath(self, pythonpath):
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if pythonpath is not None:
            env["PYTHONPATH"] = pythonpath
        with tempfile.TemporaryDirectory(prefix="test-overhead-") as d:
            seen = os.path.join(d, "seen")
            r = harness("-q", "-n", "1", "-c", "glibc", "--", "sh", "-c",
                        'printf %%s "${PYTHONPATH-unset}" > %s' % seen, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(seen) as f:
                return f.read()

    def test_workload_gets_callers_pythonpath(self):
        self.assertEqual(self.workload_pythonpath(None), "unset")
        self.assertEqual(self.workload_pythonpath("/x:/y"), "/x:/y")

    def test_caller_environ(self):
        scripts = os.path.join(TOP, "scripts")
        self.assertEqual(caller_environ({"PYTHONPATH": scripts + ":/x", "A": "1"}),
                         {"PYTHONPATH": "/x", "A": "1"})
        self.assertEqual(caller_environ({"PYTHONPATH": scripts}), {})
        self.assertEqual(caller_environ({"PYTHONPATH": "/x:" + scripts}),
                         {"PYTHONPATH": "/x:" + scripts})


@unittest.skipUnless(os.path.isfile(LIB) and os.path.isfile(CHURN),
                     "build first: make and the bench programs")
class EndToEnd(unittest.TestCase):
    ALL = "glibc,mimalloc,jemalloc,off,on,limits,spill"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="test-overhead-")
        cls.out = os.path.join(cls.tmp.name, "out")
        # Another build of the library (NAME@LIB=CONF): a copy, at a path of its own.
        cls.other = os.path.join(cls.tmp.name, "other", "libcgmalloc.so")
        os.makedirs(os.path.dirname(cls.other))
        shutil.copyfile(LIB, cls.other)
        cls.r = harness("-q", "-n", "3", "--lib", LIB, "--base", "glibc,mimalloc",
                        "--callgrind", "--perf", "on",
                        "-c", cls.ALL, "-c", "mine=accounting=1,charge_batch=32",
                        "-c", "other@%s=accounting=1" % cls.other,
                        "-o", cls.out, "--", CHURN, "20000", "512")
        with open(os.path.join(cls.out, "results.json")) as f:
            cls.rec = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_exit_and_report(self):
        self.assertEqual(self.r.returncode, 0, self.r.stderr)
        self.assertNotIn("Traceback", self.r.stderr)
        for words in ("wall time (s)", "max RSS (KiB)", "vs glibc", "vs mimalloc", "mine",
                      "callgrind"):
            self.assertIn(words, self.r.stdout)

    def test_configurations(self):
        cfgs = {c["name"]: c for c in self.rec["configurations"]}
        self.assertEqual(sorted(cfgs), sorted(self.ALL.split(",") + ["mine", "other"]))
        for name, c in cfgs.items():
            self.assertIsInstance(c["available"], bool)
            if not c["available"]:
                self.assertTrue(c["note"], name)
        self.assertEqual(cfgs["glibc"]["env"], {})
        self.assertEqual(cfgs["off"]["env"]["CGMALLOC_CONF"], "accounting=0")
        self.assertEqual(cfgs["on"]["env"]["CGMALLOC_CONF"], "accounting=1")
        self.assertEqual(cfgs["mine"]["env"]["CGMALLOC_CONF"], "accounting=1,charge_batch=32")
        self.assertEqual(cfgs["mine"]["env"]["LD_PRELOAD"], LIB)
        self.assertEqual(cfgs["other"]["env"], {"LD_PRELOAD": self.other,
                                                "CGMALLOC_CONF": "accounting=1"})
        self.assertTrue(cfgs["mimalloc"]["env"]["LD_PRELOAD"].endswith("libmimalloc.so.2"))
        status, err = configs.probe_preload(LIB, "spill=1")
        self.assertEqual(cfgs["spill"]["available"], status == 0 and "refused" not in err,
                         cfgs["spill"]["note"])
        # limits and spill: high and max computed from the warm-up's peak, the same for both.
        peak = self.rec["settings"]["limits_peak_maxrss_kib"]
        self.assertEqual(cfgs["limits"]["env"]["CGMALLOC_CONF"], configs.limits_conf(peak))
        if cfgs["spill"]["available"]:
            self.assertEqual(cfgs["spill"]["env"]["CGMALLOC_CONF"],
                             configs.limits_conf(peak) + ",spill=1")

    def test_runs(self):
        avail = [c["name"] for c in self.rec["configurations"] if c["available"]]
        runs = self.rec["runs"]
        keys = [m["key"] for m in self.rec["measures"]]
        for k in ("wall", "user", "sys", "cpu", "maxrss", "minflt", "majflt", "nvcsw", "nivcsw"):
            self.assertIn(k, keys)
        warm = [r["config"] for r in runs if r["phase"] == "warmup"]
        timed = [r for r in runs if r["phase"] == "timed"]
        self.assertEqual(sorted(warm), sorted(avail))
        self.assertEqual(len(timed), 3 * len(avail))
        # Executed in the interleaved order, after every warm-up run.
        self.assertEqual([(r["round"], r["config"]) for r in timed],
                         schedule.rounds(avail, 3, "rotate"))
        self.assertEqual([r["phase"] for r in runs[:len(warm)]], ["warmup"] * len(warm))
        bad = []
        for r in runs:
            if not r["ok"] or r["status"]["exit"] != 0 or not isinstance(r["command"], list):
                bad.append(r)
            if r["phase"] != "callgrind" and any(r["values"].get(k) is None for k in keys):
                bad.append(r)
        self.assertEqual(bad, [])
        # Each cgmalloc run in a group of its own.
        groups = [w for r in runs for w in r["command"] if w.startswith("CGMALLOC_CONF=")]
        self.assertEqual(len(groups), len(set(groups)))
        self.assertTrue(all(",group=/cgm-overhead/" in g for g in groups))
        # The spawn helper measures the workload alone, not this ~10 MB harness.
        rss = [r["values"]["maxrss"] for r in timed if r["config"] == "glibc"]
        self.assertLess(max(rss), 6 * 1024, "max RSS includes the harness")

    def test_statistics(self):
        avail = [c["name"] for c in self.rec["configurations"] if c["available"]]
        bad = []
        for name in avail:
            st = self.rec["summary"][name]["wall"]
            if st["n"] != 3 or not st["min"] <= st["median"] <= st["max"]:
                bad.append((name, st))
            for base in ("glibc", "mimalloc"):
                if name == base:
                    continue
                v = self.rec["comparisons"][base][name]["wall"]
                if v["confidence"] != 95.0 or not isinstance(v["difference"], bool) \
                        or v["method"] != "ministat":
                    bad.append((base, name, v))
        self.assertEqual(bad, [])
        self.assertIn("statistics: Debian's ministat at 95.0% confidence", self.r.stdout)

    def test_callgrind(self):
        cg = {r["config"]: r["callgrind"] for r in self.rec["runs"] if r["phase"] == "callgrind"}
        avail = [c for c in self.rec["configurations"] if c["available"]]
        # valgrind has no userfaultfd: a configuration that spills is not counted, and says so.
        counted = [c["name"] for c in avail if not c["callgrind_note"]]
        self.assertEqual(sorted(cg), sorted(counted))
        for c in avail:
            self.assertEqual(bool(c["callgrind_note"]), c["name"] == "spill", c)
        if any(c["name"] == "spill" for c in avail):
            self.assertIn("spill: not counted: valgrind has no userfaultfd", self.r.stdout)
        bad = [(n, c) for n, c in cg.items()
               if not c["ir"] or (n != "glibc" and c["allocator_seen"] is not True)]
        self.assertEqual(bad, [], "callgrind did not run the preloaded allocator")
        self.assertIsNone(cg["glibc"]["allocator_seen"])

    def test_perf(self):
        p = self.rec["perf"]
        for k in ("used", "supported", "unsupported", "note"):
            self.assertIn(k, p)
        if p["used"]:
            timed = [r for r in self.rec["runs"] if r["phase"] == "timed"]
            self.assertTrue(all("perf:" + p["supported"][0] in r["values"] for r in timed))

    def test_rerun_information(self):
        self.assertEqual(self.rec["format"], "cgm-overhead/1")
        self.assertIn("--callgrind", self.rec["invocation"]["argv"])
        self.assertEqual(self.rec["workload"]["argv"], [CHURN, "20000", "512"])
        self.assertIn("PATH", self.rec["environment"])
        on = next(c for c in self.rec["configurations"] if c["name"] == "on")
        self.assertIn("CGMALLOC_CONF=accounting=1", on["command"])
        self.assertGreaterEqual(self.rec["host"]["cpus"], 1)

    def test_plots(self):
        self.assertIn("plots/wall.png", self.rec["plots"])
        bad = []
        for p in self.rec["plots"]:
            with open(os.path.join(self.out, p), "rb") as f:
                head = f.read(512)
            if p.endswith(".png") and not head.startswith(b"\x89PNG"):
                bad.append(p)
            if p.endswith(".svg") and b"<svg" not in head:
                bad.append(p)
        self.assertEqual(bad, [])


@unittest.skipUnless(os.path.isfile(LIB), "build first")
class FailingRuns(unittest.TestCase):
    def test_failed_runs_reported_not_averaged(self):
        with tempfile.TemporaryDirectory(prefix="test-overhead-") as d:
            count = os.path.join(d, "count")
            # Every fourth run fails, deterministically.
            script = ('n=$(cat %s 2>/dev/null || echo 0); echo $((n + 1)) > %s; '
                      'if [ $((n %% 4)) -eq 3 ]; then echo broke >&2; exit 7; fi' % (count, count))
            r = harness("-q", "-n", "4", "--lib", LIB, "-c", "glibc,off", "-o", d,
                        "--", "sh", "-c", script)
            with open(os.path.join(d, "results.json")) as f:
                rec = json.load(f)
        self.assertEqual(r.returncode, 1)
        failed = [x for x in rec["runs"] if not x["ok"]]
        self.assertEqual(len(failed), 2)        # runs 4 and 8 of 10
        self.assertTrue(all(x["status"]["exit"] == 7 and x["stderr_tail"] == "broke"
                            for x in failed))
        total = sum(rec["summary"][c]["wall"]["n"] + rec["summary"][c]["failed"]
                    for c in ("glibc", "off"))
        self.assertEqual(total, 8)
        self.assertIn("failed runs", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=1)
