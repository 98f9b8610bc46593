"""Exact instruction counts with valgrind's callgrind, one run per
configuration.

callgrind does not replace malloc (memcheck, massif and the other heap tools
do; callgrind only counts), so the configuration's LD_PRELOAD is what the
program runs, and the profile proves it: the instructions of every object
are summed from the output files (one per process: children are traced),
and the preloaded allocator must be among them.  The LD_PRELOAD is in valgrind's environment; valgrind passes it to
the program (adding its own core preload).  Debian's /usr/bin/valgrind is a
shell script that also sets LD_LIBRARY_PATH=/usr/lib/debug and
GLIBCXX_FORCE_NEW=1 for the program, the same in every configuration.
"""

import os
import re
import shutil

_OBJ_RE = re.compile(r"^c?ob=(?:\((\d+)\))?\s*(.*)$")


def valgrind_path():
    return shutil.which("valgrind")


def wrap(valgrind, argv, outdir):
    """valgrind's words before the command.  Children are traced too, each
    process into its own file, so that a workload started through env(1)
    or a shell script is counted (an exec keeps the pid and the file)."""
    return [valgrind, "--tool=callgrind", "--trace-children=yes",
            "--callgrind-out-file=" + os.path.join(outdir, "callgrind.out.%p")] + list(argv)


def parse_dir(outdir):
    """The profiles of every process in @outdir, summed like parse()."""
    total = 0
    objects = {}
    for name in sorted(os.listdir(outdir)):
        if not name.startswith("callgrind.out."):
            continue
        with open(os.path.join(outdir, name)) as f:
            p = parse(f.read())
        total += p["total"]
        for obj, cost in p["objects"].items():
            objects[obj] = objects.get(obj, 0) + cost
    return {"total": total, "objects": objects}


def parse(text):
    """{"total": Ir, "objects": {object path: self Ir}} of a callgrind file.

    Costs are attributed to the current ob=; the cost line after a calls=
    line is the inclusive cost of the call and is not the caller's own.
    Object names may be compressed: "(3) /path" defines 3, "(3)" reuses it,
    and cob= shares the numbering with ob=."""
    names = {}
    current = "?"
    npos = 1
    skip_next = False
    total = None
    objects = {}
    for line in text.splitlines():
        if not line:
            continue
        c = line[0]
        if c.isdigit() or c in "+-*":
            if skip_next:
                skip_next = False
                continue
            fields = line.split()
            if len(fields) > npos:
                objects[current] = objects.get(current, 0) + int(fields[npos])
            continue
        if line.startswith("positions:"):
            npos = len(line.split()[1:])
        elif line.startswith("calls="):
            skip_next = True
        elif line.startswith("ob=") or line.startswith("cob="):
            m = _OBJ_RE.match(line)
            ident, name = m.group(1), m.group(2).strip()
            if ident and name:
                names[ident] = name
            elif ident:
                name = names.get(ident, "(%s)" % ident)
            if line.startswith("ob="):
                current = name
        elif line.startswith("summary:") or line.startswith("totals:"):
            try:
                total = int(line.split()[1])
            except (IndexError, ValueError):
                pass
    if total is None:
        total = sum(objects.values())
    return {"total": total, "objects": objects}


def allocator_share(profile, preload):
    """Instructions in the preloaded allocator's objects: the preload itself
    and, for cgmalloc, the libmimalloc it is built on.  None without a
    preload (glibc's malloc cannot be told apart from the rest of libc)."""
    if not preload:
        return None, None
    base = os.path.basename(preload)
    wanted = [base]
    if base.startswith("libcgmalloc"):
        wanted.append("libmimalloc")
    seen = False
    ir = 0
    for obj, cost in profile["objects"].items():
        name = os.path.basename(obj)
        if name.startswith(base.split(".so")[0] + ".so"):
            seen = seen or cost > 0
        if any(name.startswith(w.split(".so")[0] + ".so") for w in wanted):
            ir += cost
    return seen, ir
