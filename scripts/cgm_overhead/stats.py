"""Summaries of samples, and ministat's verdict on two of them.

The summaries (n, median, mean, stddev, min, max, quartiles) come from the
statistics module.  The verdict is Debian's ministat's, run on the two
samples: Student's t test with a pooled standard deviation, "Difference at
95.0% confidence" with the difference of the means and its confidence
interval, absolute and as a percentage of the base mean, or "No difference
proven at 95.0% confidence".  ministat is a required package
(scripts/install-deps); without it there is no verdict, and the harness
says so rather than computing one of its own that could disagree with it.
"""

import math
import os
import re
import shutil
import statistics
import subprocess
import tempfile

from . import HarnessError

# ministat refuses fewer points than this in a data set.
MIN_POINTS = 3
# The confidence levels ministat's table has (its -c accepts no others).
MINISTAT_LEVELS = (80.0, 90.0, 95.0, 98.0, 99.0, 99.5)
NOT_INSTALLED = "ministat is not installed (Debian package ministat)"


def summarize(xs):
    """n, median, mean, stddev, min, max, quartiles of a non-empty sample.

    The quartiles interpolate linearly between neighbours of the sorted
    sample, counting the min and max as its 0 and 1 quantiles ("inclusive").
    Means and medians are floats even of integer samples (max RSS, page
    faults), as the JSON record has always had them."""
    s = sorted(xs)
    if len(s) > 1:
        q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
        stddev = statistics.stdev(s)
    else:
        # statistics needs two points for a spread; one point is all of
        # its quantiles and has none (a configuration with one good run).
        q1 = q3 = float(s[0])
        stddev = 0.0
    return {
        "n": len(s),
        "median": float(statistics.median(s)),
        "mean": float(statistics.mean(s)),
        "stddev": stddev,
        "min": s[0],
        "max": s[-1],
        "q1": q1,
        "q3": q3,
    }


def _verdict(confidence, difference, diff=None, err=None, pooled_s=None, note=None):
    """The dictionary of one comparison, as the JSON record holds it."""
    return {"method": "ministat", "confidence": confidence, "difference": difference,
            "diff": diff, "err": err, "pct": None, "pct_err": None,
            "pooled_s": pooled_s, "note": note}


def too_few(confidence, n_base, n_other):
    return _verdict(confidence, False,
                    note="too few runs for a verdict (%d and %d, need %d each)"
                    % (n_base, n_other, MIN_POINTS))


def find_ministat():
    return shutil.which("ministat")


def require_ministat():
    """ministat's path, or the one-line error that it is missing."""
    path = find_ministat()
    if not path:
        raise HarnessError(NOT_INSTALLED)
    return path


_DIFF_RE = re.compile(r"Difference at ([\d.]+)% confidence\s*\n"
                      r"\s*(\S+) \+/- (\S+)\s*\n"
                      r"\s*(\S+?)% \+/- (\S+?)%\s*\n"
                      r"\s*\(Student's t, pooled s = (\S+)\)")
_NODIFF_RE = re.compile(r"No difference proven at ([\d.]+)% confidence")


def _num(text):
    """A number as ministat prints it (%g), None for nan or infinity."""
    v = float(text)
    return v if math.isfinite(v) else None


def parse_ministat(output, confidence):
    """The verdict in ministat's output for two data sets, None if it has
    none."""
    m = _DIFF_RE.search(output)
    if m:
        v = _verdict(confidence, True, _num(m.group(2)), _num(m.group(3)), _num(m.group(6)))
        v["pct"], v["pct_err"] = _num(m.group(4)), _num(m.group(5))
        return v
    if _NODIFF_RE.search(output):
        return _verdict(confidence, False)
    return None


def _write_sample(directory, name, xs):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write("".join("%r\n" % float(x) for x in xs))
    return path


def _last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no output"


def compare(base, other, confidence=95.0, ministat=None):
    """ministat's verdict on @other against @base at @confidence percent
    (one of MINISTAT_LEVELS).  A HarnessError when ministat is missing or
    gives no verdict: the harness has no other source of one."""
    if len(base) < MIN_POINTS or len(other) < MIN_POINTS:
        return too_few(confidence, len(base), len(other))
    ministat = ministat or require_ministat()
    with tempfile.TemporaryDirectory(prefix="cgm-overhead-") as d:
        a = _write_sample(d, "base", base)
        b = _write_sample(d, "other", other)
        try:
            out = subprocess.run([ministat, "-A", "-c", "%g" % confidence, a, b],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as e:
            raise HarnessError("cannot run %s: %s" % (ministat, e), 1)
    if out.returncode != 0:
        raise HarnessError("ministat failed (status %d): %s"
                           % (out.returncode, _last_line(out.stderr)), 1)
    v = parse_ministat(out.stdout, confidence)
    if v is None:
        raise HarnessError("ministat printed no verdict: %s" % _last_line(out.stdout), 1)
    return v


def _g(x):
    return "%.6g" % x


def verdict_text(v):
    """ministat's wording on one line."""
    if v.get("note"):
        return v["note"]
    level = "%.1f%%" % v["confidence"]
    if not v["difference"]:
        return "No difference proven at %s confidence" % level
    text = "Difference at %s confidence: %s +/- %s" % (level, _g(v["diff"]), _g(v["err"]))
    if v["pct"] is not None:
        text += " (%s%% +/- %s%%)" % (_g(v["pct"]), _g(v["pct_err"]))
    return text
