"""The readable report on stdout, made from the JSON record.

For each measure a table: per configuration n, median, mean +/- stddev,
min, max, and against each base ministat's verdict at the chosen confidence
as "difference +/- half-width (percent +/- percent)" or "no difference"
(ministat: "No difference proven at 95.0% confidence").
"""

from . import progress


def num(v):
    """4 significant digits, whole numbers from 1000 up, no exponent."""
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000 or float(v).is_integer():
        return "%.0f" % v
    if a >= 1:
        return "%.4g" % v
    if a == 0:
        return "0"
    s = "%.4f" % v if a >= 0.001 else "%.3g" % v
    return s


def signed(v):
    s = num(v)
    return s if s.startswith("-") else "+" + s


def verdict_cell(v):
    if v is None:
        return "-"
    if v.get("note"):
        return "too few runs"
    if not v["difference"]:
        return "no difference"
    text = "%s ± %s" % (signed(v["diff"]), num(v["err"]))
    if v["pct"] is not None:
        text += " (%s%% ± %s%%)" % (signed(round(v["pct"], 2)), num(round(v["pct_err"], 2)))
    return text


def table(header, rows, right=()):
    """Columns padded to their widest cell; columns in @right align right."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = []
    for r in [header] + rows:
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _header_lines(rec):
    s = rec["settings"]
    h = rec["host"]
    lines = ["cgm-overhead %s: %s" % (rec["tool"]["version"],
                                      " ".join(rec["workload"]["argv"])),
             "  %d timed runs per configuration after %d warm-up, %s order; "
             "%s CPUs, %s %s; took %s" % (
                 s["runs"], s["warmup"], s["order"], h["cpus"], h["system"], h["release"],
                 progress.hms(rec["duration_s"]))]
    width = max(len(c["name"]) for c in rec["configurations"])
    for c in rec["configurations"]:
        if c["available"]:
            env = " ".join("%s=%s" % kv for kv in c["env"].items()) or "no preload"
            extra = ""
            if c["name"] in ("limits", "spill") and s.get("limits_peak_maxrss_kib"):
                extra = " (peak max RSS in the warm-up %.1f MiB)" % (
                    s["limits_peak_maxrss_kib"] / 1024)
            lines.append("  %-*s  %s%s" % (width, c["name"], env, extra))
        else:
            lines.append("  %-*s  %s" % (width, c["name"], c["note"]))
    if any(c["available"] and "CGMALLOC_CONF" in c["env"] for c in rec["configurations"]):
        lines.append("  isolation: each cgmalloc run in its own group (group=/cgm-overhead/"
                     "CONFIG-SEQ) of a hierarchy made for this invocation")
    lines.append("  " + rec["perf"]["note"])
    compared = any(cfg for base in rec["comparisons"].values() for cfg in base.values())
    lines.append("  statistics: %s at %.1f%% confidence (Student's t, pooled variance); "
                 "failed runs are reported, not averaged" % (
                     "Debian's ministat" if compared else "none", s["confidence"]))
    lines.extend("  note: " + n for n in rec["notes"])
    return lines


def _measure_lines(rec, m):
    bases = [b for b in rec["settings"]["bases"] if b in rec["comparisons"]]
    unit = " (%s)" % m["unit"] if m["unit"] else ""
    any_failed = any(summ["failed"] for summ in rec["summary"].values())
    header = ["configuration", "n"] + (["failed"] if any_failed else []) + \
        ["median", "mean ± stddev", "min", "max"] + ["vs %s" % b for b in bases]
    rows = []
    for name, summ in rec["summary"].items():
        st = summ.get(m["key"])
        row = [name, str(st["n"] if st else 0)] + ([str(summ["failed"])] if any_failed else [])
        if st is None:
            rows.append(row + ["-"] * (4 + len(bases)))
            continue
        row += [num(st["median"]), "%s ± %s" % (num(st["mean"]), num(st["stddev"])),
                num(st["min"]), num(st["max"])]
        for b in bases:
            row.append("base" if b == name else verdict_cell(rec["comparisons"][b][name][m["key"]]))
        rows.append(row)
    numeric = tuple(range(1, len(header) - len(bases)))
    return ["", m["title"] + unit] + table(header, rows, right=numeric)


def _failure_lines(rec):
    failed = [r for r in rec["runs"] if not r["ok"] and r["phase"] != "callgrind"]
    if not failed:
        return []
    lines = ["", "failed runs (left out of the statistics):"]
    for r in failed:
        tail = r["stderr_tail"].splitlines()[-1:] if r["stderr_tail"] else []
        lines.append("  %s %s%s: %s%s" % (
            r["config"], r["phase"], " round %d" % (r["round"] + 1) if r["phase"] == "timed" else "",
            r["status_text"], ": " + tail[0] if tail else ""))
    return lines


def _callgrind_lines(rec):
    runs = [r for r in rec["runs"] if r["phase"] == "callgrind"]
    if not runs:
        return []
    bases = rec["settings"]["bases"]
    irs = {r["config"]: r["callgrind"]["ir"] for r in runs}
    header = ["configuration", "instructions"] + ["vs %s" % b for b in bases] + \
        ["in the allocator", "allocator in profile"]
    rows = []
    for r in runs:
        cg = r["callgrind"]
        row = [r["config"], "%d" % cg["ir"] if cg["ir"] is not None else r["status_text"]]
        for b in bases:
            ok = cg["ir"] is not None and irs.get(b)
            row.append("%.3f" % (cg["ir"] / irs[b]) if ok else "-")
        if cg["allocator_ir"] is None:
            row += ["(in libc)", "-"]
        else:
            share = 100.0 * cg["allocator_ir"] / cg["ir"] if cg["ir"] else 0
            row += ["%d (%.1f%%)" % (cg["allocator_ir"], share),
                    "yes" if cg["allocator_seen"] else "NO: the preload did not run"]
        rows.append(row)
    skipped = ["  %s: %s" % (c["name"], c["callgrind_note"]) for c in rec["configurations"]
               if c["available"] and c.get("callgrind_note")]
    return ["", "callgrind: instructions of one run per configuration (exact, repeatable)"] + \
        table(header, rows, right=tuple(range(1, 2 + len(bases)))) + skipped


def render(rec):
    """The whole report as a string."""
    lines = _header_lines(rec)
    if rec["settings"]["runs"]:
        for m in rec["measures"]:
            lines += _measure_lines(rec, m)
    lines += _failure_lines(rec)
    lines += _callgrind_lines(rec)
    if rec["settings"]["runs"]:
        lines += ["", "vs BASE: difference of the means ± its %.1f%% confidence interval "
                  "(and in percent of the base), or no difference proven."
                  % rec["settings"]["confidence"]]
    return "\n".join(lines) + "\n"

