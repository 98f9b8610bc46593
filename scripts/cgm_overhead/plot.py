"""gnuplot plots of each measure's distribution per configuration.

One plot per measure, as PNG and SVG: a box from the first to the third
quartile with whiskers to the minimum and maximum, a bar at the median, and
every run as a point beside its box.  The data and the gnuplot script stay
next to the images, so a plot can be restyled and redrawn by hand.
"""

import os
import shutil
import subprocess


def find_gnuplot():
    return shutil.which("gnuplot")


def png_terminal(gnuplot):
    """pngcairo when this gnuplot has it (gnuplot-nox does), else png."""
    try:
        r = subprocess.run([gnuplot, "-e", "set terminal pngcairo"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0 and "unknown" not in r.stderr.lower():
            return "pngcairo"
    except (OSError, subprocess.SubprocessError):
        pass
    return "png"


def _nonempty(path):
    return os.path.isfile(path) and os.path.getsize(path) > 0


def _quote(s):
    return "'" + s.replace("'", "''") + "'"


def _script(m, names, stem, title, png):
    xtics = ", ".join("%s %d" % (_quote(n), i) for i, n in enumerate(names))
    body = """set title %s noenhanced
set ylabel %s noenhanced
set xtics (%s) noenhanced
set xrange [-0.6:%f]
set boxwidth 0.35
set style fill empty
set grid ytics
set key outside bottom center horizontal noenhanced
plot %s using 1:3:2:6:5 with candlesticks whiskerbars 0.5 lw 1.5 title 'quartiles, min and max', \\
     %s using 1:4:4:4:4 with candlesticks lw 3 title 'median', \\
     %s using 1:2 with points pt 7 ps 0.6 title 'runs'
""" % (_quote(title), _quote(m["title"] + (" (%s)" % m["unit"] if m["unit"] else "")),
       xtics, len(names) - 0.4, _quote(stem + ".box"), _quote(stem + ".box"),
       _quote(stem + ".runs"))
    return ("set terminal %s size 900,540 font ',10'\nset output %s\n%s"
            "set terminal svg size 900,540 dynamic\nset output %s\nreplot\n" % (
                png, _quote(stem + ".png"), body, _quote(stem + ".svg")))


def plot_all(rec, directory):
    """Write DIR/plots/<measure>.{png,svg} (and .box, .runs, .gp).
    Returns (list of image paths relative to DIR, note or None)."""
    gnuplot = find_gnuplot()
    if not gnuplot:
        return [], "gnuplot is not installed: no plots (Debian: gnuplot-nox)"
    png = png_terminal(gnuplot)
    pdir = os.path.join(directory, "plots")
    os.makedirs(pdir, exist_ok=True)
    names = [n for n in rec["summary"]]
    title = " ".join(rec["workload"]["argv"])
    images = []
    errors = []
    for m in rec["measures"]:
        key = m["key"]
        if all(rec["summary"][n].get(key) is None for n in names):
            continue
        stem = key.replace(":", "-")
        with open(os.path.join(pdir, stem + ".box"), "w") as f:
            f.write("# x min q1 median q3 max configuration\n")
            for i, n in enumerate(names):
                st = rec["summary"][n].get(key)
                if st:
                    f.write("%d %r %r %r %r %r %s\n" % (i, st["min"], st["q1"], st["median"],
                                                         st["q3"], st["max"], n))
        with open(os.path.join(pdir, stem + ".runs"), "w") as f:
            f.write("# x value configuration (points drawn beside the box)\n")
            for i, n in enumerate(names):
                for r in rec["runs"]:
                    v = r["values"].get(key)
                    if r["phase"] == "timed" and r["config"] == n and r["ok"] and v is not None:
                        f.write("%r %r %s\n" % (i + 0.28, v, n))
        gp = os.path.join(pdir, stem + ".gp")
        with open(gp, "w") as f:
            f.write(_script(m, names, stem, title, png))
        try:
            r = subprocess.run([gnuplot, stem + ".gp"], cwd=pdir, capture_output=True,
                               text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as e:
            errors.append("%s: %s" % (key, e))
            continue
        made = [os.path.join("plots", stem + ext) for ext in (".png", ".svg")
                if _nonempty(os.path.join(pdir, stem + ext))] if r.returncode == 0 else []
        if len(made) != 2:
            errors.append("%s: %s" % (key, (r.stderr.strip().splitlines() or ["failed"])[-1]))
        images += made
    note = "gnuplot failed for %s" % "; ".join(errors) if errors else None
    return images, note
