"""Summaries of samples and ministat's two-sample verdict.

The verdict is ministat's: Student's t test with a pooled standard deviation,
"Difference at 95.0% confidence" with the difference of the means and its
confidence interval, absolute and as a percentage of the base mean, or "No
difference proven at 95.0% confidence".  Debian's ministat computes it when
installed (compare_ministat); compare_builtin computes the same figures
itself, with the same t values ministat takes from its table (three decimals,
and the normal quantile beyond 100 degrees of freedom), so the two agree.
"""

import math
import os
import re
import shutil
import subprocess
import tempfile

# ministat refuses fewer points than this in a data set.
MIN_POINTS = 3
# The confidence levels ministat's table has.
MINISTAT_LEVELS = (80.0, 90.0, 95.0, 98.0, 99.0, 99.5)
# ministat's table has rows for 1..100 degrees of freedom, then infinity.
MINISTAT_MAX_DF = 100


def mean(xs):
    return sum(xs) / len(xs)


def variance(xs):
    """Sample variance (n - 1 in the denominator), 0 for a single point."""
    if len(xs) < 2:
        return 0.0
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def quantile(sorted_xs, q):
    """The q-quantile of sorted data, interpolating between neighbours."""
    pos = q * (len(sorted_xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summarize(xs):
    """n, median, mean, stddev, min, max, quartiles of a non-empty sample."""
    s = sorted(xs)
    return {
        "n": len(s),
        "median": quantile(s, 0.5),
        "mean": mean(s),
        "stddev": math.sqrt(variance(s)),
        "min": s[0],
        "max": s[-1],
        "q1": quantile(s, 0.25),
        "q3": quantile(s, 0.75),
    }


def t_two_sided_prob(t, df):
    """P(|T| <= t) for Student's t with an integer number of degrees of
    freedom, from the closed-form finite series in cos(theta), where
    theta = atan(t / sqrt(df)): exact, no special functions needed."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    s = math.sin(theta)
    if df % 2:
        # odd: (2/pi) (theta + sin.cos (1 + 2/3 cos^2 + 2.4/3.5 cos^4 ...))
        term, acc = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            acc += term
        return 2 / math.pi * (theta + s * math.cos(theta) * acc)
    # even: sin (1 + 1/2 cos^2 + 1.3/2.4 cos^4 ...)
    term, acc = 1.0, 1.0
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        acc += term
    return s * acc


def _bisect(f, target, lo, hi):
    """x in [lo, hi] where the increasing f reaches target."""
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def t_quantile(confidence, df):
    """The two-sided critical value t for a confidence level in percent."""
    p = confidence / 100.0
    hi = 1.0
    while t_two_sided_prob(hi, df) < p:
        hi *= 2
    return _bisect(lambda t: t_two_sided_prob(t, df), p, 0.0, hi)


def z_quantile(confidence):
    """The two-sided critical value of the standard normal distribution."""
    p = confidence / 100.0
    return _bisect(lambda z: math.erf(z / math.sqrt(2)), p, 0.0, 40.0)


# ministat's column labelled 99.5% holds the two-sided 99.8% critical
# values (3.090 at infinity, not 2.807): its verdict at "99.5%" is really
# one at 99.8%, and so is ours, to agree with it.
MINISTAT_COLUMN = {99.5: 99.8}


def ministat_t(confidence, df):
    """The t value ministat uses: its table holds t to three decimals for
    1..100 degrees of freedom and the normal quantile beyond."""
    confidence = MINISTAT_COLUMN.get(float(confidence), confidence)
    if df > MINISTAT_MAX_DF:
        return round(z_quantile(confidence), 3)
    return round(t_quantile(confidence, df), 3)


def _verdict(confidence, method, difference, diff=None, err=None,
             base_mean=None, pooled_s=None, note=None):
    """The one dictionary a comparison returns, whichever way it was made."""
    v = {"method": method, "confidence": confidence, "difference": difference,
         "diff": diff, "err": err, "pct": None, "pct_err": None,
         "pooled_s": pooled_s, "note": note}
    if diff is not None and base_mean:
        v["pct"] = diff * 100.0 / base_mean
        v["pct_err"] = err * 100.0 / abs(base_mean)
    return v


def too_few(confidence, method, n_base, n_other):
    return _verdict(confidence, method, False,
                    note="too few runs for a verdict (%d and %d, need %d each)"
                    % (n_base, n_other, MIN_POINTS))


def compare_builtin(base, other, confidence=95.0):
    """ministat's test of @other against @base, computed here."""
    if len(base) < MIN_POINTS or len(other) < MIN_POINTS:
        return too_few(confidence, "student-t", len(base), len(other))
    n1, n2 = len(base), len(other)
    pooled = math.sqrt(((n1 - 1) * variance(base) + (n2 - 1) * variance(other))
                       / (n1 + n2 - 2))
    s = pooled * math.sqrt(1.0 / n1 + 1.0 / n2)
    d = mean(other) - mean(base)
    e = ministat_t(confidence, n1 + n2 - 2) * s
    if abs(d) > e:
        return _verdict(confidence, "student-t", True, d, e, mean(base), pooled)
    return _verdict(confidence, "student-t", False, pooled_s=pooled)


def find_ministat():
    return shutil.which("ministat")


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
    """The verdict in ministat's output for two data sets."""
    m = _DIFF_RE.search(output)
    if m:
        v = _verdict(confidence, "ministat", True, _num(m.group(2)),
                     _num(m.group(3)), None, _num(m.group(6)))
        v["pct"], v["pct_err"] = _num(m.group(4)), _num(m.group(5))
        return v
    if _NODIFF_RE.search(output):
        return _verdict(confidence, "ministat", False)
    return None


def _write_sample(directory, name, xs):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write("".join("%r\n" % float(x) for x in xs))
    return path


def compare_ministat(base, other, confidence=95.0, ministat=None):
    """ministat's test of @other against @base, run by Debian's ministat.
    Returns None when ministat cannot give it (not installed, a confidence
    level outside its table, unexpected output)."""
    ministat = ministat or find_ministat()
    if not ministat or float(confidence) not in MINISTAT_LEVELS:
        return None
    if len(base) < MIN_POINTS or len(other) < MIN_POINTS:
        return too_few(confidence, "ministat", len(base), len(other))
    with tempfile.TemporaryDirectory(prefix="cgm-overhead-") as d:
        a = _write_sample(d, "base", base)
        b = _write_sample(d, "other", other)
        try:
            out = subprocess.run([ministat, "-A", "-c", "%g" % confidence, a, b],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
    if out.returncode != 0:
        return None
    return parse_ministat(out.stdout, confidence)


def compare(base, other, confidence=95.0, method="auto"):
    """The verdict by @method: "ministat", "builtin", or "auto" (ministat
    where it can, else built in)."""
    if method in ("auto", "ministat"):
        v = compare_ministat(base, other, confidence)
        if v is not None:
            return v
    return compare_builtin(base, other, confidence)


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
